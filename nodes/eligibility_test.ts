import assert from "node:assert/strict";
import { parse } from "yaml";
import type {
  V1Node,
  V1NodeSelectorTerm,
  V1PodSpec,
  V1Taint,
  V1Toleration,
} from "@kubernetes/client-node";
import {
  affinityMismatch,
  formatTaint,
  partitionByTolerations,
  toleratesTaint,
  tolerationsYamlFor,
  unionByName,
} from "./eligibility.ts";

// The yaml parser reads $LOG_TOKENS and $LOG_STREAM (its debug switches) on
// every parse, so a test that parses YAML needs read access to those two.
const YAML_ENV: Deno.PermissionOptions = { env: ["LOG_TOKENS", "LOG_STREAM"] };

function node(name: string, opts: { taints?: V1Taint[]; labels?: Record<string, string> } = {}) {
  const n: V1Node = { metadata: { name, labels: opts.labels ?? {} }, spec: {} };
  if (opts.taints) n.spec!.taints = opts.taints;
  return n;
}

function podSpec(extra: Partial<V1PodSpec> = {}): V1PodSpec {
  return { containers: [{ name: "c", image: "busybox" }], ...extra };
}

function names(nodes: V1Node[]): string[] {
  return nodes.map((n) => n.metadata!.name!);
}

// ---------------------------------------------------------------------------
// toleratesTaint

Deno.test({
  name: "toleratesTaint() follows Kubernetes' toleration rules",
  permissions: "none",
  async fn(t) {
    const gpu: V1Taint = { key: "gpu", value: "true", effect: "NoSchedule" };
    const bare: V1Taint = { key: "dedicated", effect: "NoExecute" };
    const cases: { name: string; tol: V1Toleration; taint: V1Taint; want: boolean }[] = [
      {
        name: "Exists matches the key whatever the value",
        tol: { key: "gpu", operator: "Exists", effect: "NoSchedule" },
        taint: gpu,
        want: true,
      },
      {
        name: "Exists does not match another key",
        tol: { key: "fpga", operator: "Exists" },
        taint: gpu,
        want: false,
      },
      {
        name: "Equal matches the same key and value",
        tol: { key: "gpu", operator: "Equal", value: "true", effect: "NoSchedule" },
        taint: gpu,
        want: true,
      },
      {
        name: "Equal does not match another value",
        tol: { key: "gpu", operator: "Equal", value: "false", effect: "NoSchedule" },
        taint: gpu,
        want: false,
      },
      {
        name: "Equal without a value does not match a taint with one",
        tol: { key: "gpu", operator: "Equal" },
        taint: gpu,
        want: false,
      },
      {
        name: "Equal without a value matches a taint without one",
        tol: { key: "dedicated", operator: "Equal" },
        taint: bare,
        want: true,
      },
      {
        name: "the default operator is Equal and compares the value",
        tol: { key: "gpu", value: "true" },
        taint: gpu,
        want: true,
      },
      {
        name: "the default operator does not match another value",
        tol: { key: "gpu", value: "yes" },
        taint: gpu,
        want: false,
      },
      {
        name: "an empty key with Exists matches every key",
        tol: { operator: "Exists" },
        taint: gpu,
        want: true,
      },
      {
        name: "an empty key with Exists matches every effect",
        tol: { key: "", operator: "Exists" },
        taint: bare,
        want: true,
      },
      {
        name: "an empty key with Exists still honours its effect",
        tol: { operator: "Exists", effect: "NoSchedule" },
        taint: bare,
        want: false,
      },
      {
        name: "an empty key with Equal matches nothing",
        tol: { operator: "Equal", value: "true" },
        taint: gpu,
        want: false,
      },
      {
        name: "an empty key with the default operator matches nothing",
        tol: {},
        taint: bare,
        want: false,
      },
      {
        name: "an empty effect matches NoSchedule",
        tol: { key: "gpu", operator: "Exists" },
        taint: gpu,
        want: true,
      },
      {
        name: "an empty effect matches NoExecute",
        tol: { key: "gpu", operator: "Exists" },
        taint: { ...gpu, effect: "NoExecute" },
        want: true,
      },
      {
        name: "an empty effect matches PreferNoSchedule",
        tol: { key: "gpu", operator: "Exists", effect: "" },
        taint: { ...gpu, effect: "PreferNoSchedule" },
        want: true,
      },
      {
        name: "another effect does not match",
        tol: { key: "gpu", operator: "Exists", effect: "NoExecute" },
        taint: gpu,
        want: false,
      },
      {
        name: "an unknown operator matches nothing",
        tol: { key: "gpu", operator: "In", value: "true" },
        taint: gpu,
        want: false,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(toleratesTaint(c.tol, c.taint), c.want));
    }
  },
});

// ---------------------------------------------------------------------------
// partitionByTolerations

Deno.test({
  name: "partitionByTolerations() admits the nodes a DaemonSet would reach",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      taint: V1Taint;
      spec?: Partial<V1PodSpec>;
      admitted: boolean;
    }[] = [
      {
        name: "an untolerated NoSchedule taint blocks",
        taint: { key: "gpu", value: "true", effect: "NoSchedule" },
        admitted: false,
      },
      {
        name: "an untolerated NoExecute taint blocks",
        taint: { key: "dedicated", effect: "NoExecute" },
        admitted: false,
      },
      {
        name: "a PreferNoSchedule taint does not block",
        taint: { key: "spot", effect: "PreferNoSchedule" },
        admitted: true,
      },
      {
        name: "a taint the template tolerates does not block",
        taint: { key: "gpu", value: "true", effect: "NoSchedule" },
        spec: { tolerations: [{ key: "gpu", operator: "Exists" }] },
        admitted: true,
      },
      {
        name: "a toleration for another value does not admit",
        taint: { key: "gpu", value: "true", effect: "NoSchedule" },
        spec: { tolerations: [{ key: "gpu", operator: "Equal", value: "false" }] },
        admitted: false,
      },
      {
        name: "a tolerate-everything template is admitted everywhere",
        taint: { key: "dedicated", effect: "NoExecute" },
        spec: { tolerations: [{ operator: "Exists" }] },
        admitted: true,
      },
      {
        name: "a cordoned node (unschedulable:NoSchedule) is admitted",
        taint: { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" },
        admitted: true,
      },
      {
        name: "a not-ready:NoExecute node is admitted",
        taint: { key: "node.kubernetes.io/not-ready", effect: "NoExecute" },
        admitted: true,
      },
      {
        name: "an unreachable:NoExecute node is admitted",
        taint: { key: "node.kubernetes.io/unreachable", effect: "NoExecute" },
        admitted: true,
      },
      {
        name: "a disk-pressure node is admitted",
        taint: { key: "node.kubernetes.io/disk-pressure", effect: "NoSchedule" },
        admitted: true,
      },
      {
        name: "a memory-pressure node is admitted",
        taint: { key: "node.kubernetes.io/memory-pressure", effect: "NoSchedule" },
        admitted: true,
      },
      {
        name: "a pid-pressure node is admitted",
        taint: { key: "node.kubernetes.io/pid-pressure", effect: "NoSchedule" },
        admitted: true,
      },
      {
        name: "not-ready:NoSchedule still blocks: only its NoExecute form is implied",
        taint: { key: "node.kubernetes.io/not-ready", effect: "NoSchedule" },
        admitted: false,
      },
      {
        name: "network-unavailable blocks a pod without hostNetwork",
        taint: { key: "node.kubernetes.io/network-unavailable", effect: "NoSchedule" },
        admitted: false,
      },
      {
        name: "network-unavailable admits a hostNetwork pod",
        taint: { key: "node.kubernetes.io/network-unavailable", effect: "NoSchedule" },
        spec: { hostNetwork: true },
        admitted: true,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const n = node("n1", { taints: [c.taint] });
        const { admitted, skipped } = partitionByTolerations([n], podSpec(c.spec));
        if (c.admitted) {
          assert.deepEqual(admitted, [n]);
          assert.deepEqual(skipped, []);
        } else {
          assert.deepEqual(admitted, []);
          assert.deepEqual(skipped, [{ node: n, taint: c.taint }]);
        }
      });
    }
  },
});

Deno.test({
  name: "partitionByTolerations() keeps the order and names the first blocking taint",
  permissions: "none",
  fn() {
    const gpu: V1Taint = { key: "gpu", value: "true", effect: "NoSchedule" };
    const dedicated: V1Taint = { key: "dedicated", effect: "NoExecute" };
    const prefer: V1Taint = { key: "spot", effect: "PreferNoSchedule" };
    const nodes = [
      node("c"),
      node("a", { taints: [prefer, gpu, dedicated] }),
      node("b", { taints: [prefer] }),
      node("d", { taints: [dedicated] }),
      node("e", { taints: [] }),
    ];
    const { admitted, skipped } = partitionByTolerations(nodes, podSpec());
    assert.deepEqual(names(admitted), ["c", "b", "e"]);
    assert.deepEqual(skipped.map((s) => [s.node.metadata!.name, formatTaint(s.taint)]), [
      ["a", "gpu=true:NoSchedule"],
      ["d", "dedicated:NoExecute"],
    ]);
  },
});

Deno.test({
  name: "partitionByTolerations() admits every node of an empty list and of no taints",
  permissions: "none",
  fn() {
    assert.deepEqual(partitionByTolerations([], podSpec()), { admitted: [], skipped: [] });
    const bare: V1Node = { metadata: { name: "x" } };
    assert.deepEqual(partitionByTolerations([bare], podSpec()), { admitted: [bare], skipped: [] });
  },
});

// ---------------------------------------------------------------------------
// tolerationsYamlFor

Deno.test({
  name: "tolerationsYamlFor() prints tolerations that admit the taints",
  permissions: YAML_ENV,
  async fn(t) {
    const taints: V1Taint[] = [
      { key: "gpu", value: "true", effect: "NoSchedule" },
      { key: "dedicated", effect: "NoExecute" },
      { key: "gpu", value: "true", effect: "NoSchedule" },
      { key: "gpu", value: "true", effect: "NoExecute" },
      { key: "example.com/mode", value: "0400", effect: "NoSchedule" },
      { key: "answer", value: "yes", effect: "NoSchedule" },
      { key: "dedicated", effect: "NoExecute" },
    ];
    const yaml = tolerationsYamlFor(taints);
    const parsed = parse(yaml) as { tolerations: V1Toleration[] };

    await t.step("it parses back into one toleration per distinct taint", () => {
      assert.deepEqual(parsed.tolerations, [
        { key: "gpu", operator: "Equal", value: "true", effect: "NoSchedule" },
        { key: "dedicated", operator: "Exists", effect: "NoExecute" },
        { key: "gpu", operator: "Equal", value: "true", effect: "NoExecute" },
        { key: "example.com/mode", operator: "Equal", value: "0400", effect: "NoSchedule" },
        { key: "answer", operator: "Equal", value: "yes", effect: "NoSchedule" },
      ]);
    });

    await t.step("its tolerations admit every node with those taints", () => {
      const nodes = taints.map((taint, i) => node(`n${i}`, { taints: [taint] }));
      nodes.push(node("all", { taints }));
      const { admitted, skipped } = partitionByTolerations(
        nodes,
        podSpec({ tolerations: parsed.tolerations }),
      );
      assert.deepEqual(skipped, []);
      assert.equal(admitted.length, nodes.length);
    });

    await t.step("it starts with the tolerations: key, ready to paste into a pod spec", () => {
      assert.ok(yaml.startsWith("tolerations:\n"), yaml);
      assert.ok(yaml.endsWith("\n"), yaml);
    });

    await t.step("it prints an empty list for no taints", () => {
      assert.deepEqual(parse(tolerationsYamlFor([])), { tolerations: [] });
    });
  },
});

// ---------------------------------------------------------------------------
// affinityMismatch

function required(...terms: V1NodeSelectorTerm[]): Partial<V1PodSpec> {
  return {
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
      },
    },
  };
}

Deno.test({
  name: "affinityMismatch() says why the template's node selection excludes a node",
  permissions: "none",
  async fn(t) {
    const n = node("worker-1", {
      labels: { role: "worker", zone: "a", cores: "16", kernel: "5.15", disk: "ssd" },
    });
    const NO_AFFINITY = "required node affinity does not match";
    const cases: { name: string; spec: Partial<V1PodSpec>; want: string | undefined }[] = [
      { name: "no selector and no affinity match", spec: {}, want: undefined },
      {
        name: "a matching nodeSelector matches",
        spec: { nodeSelector: { role: "worker", disk: "ssd" } },
        want: undefined,
      },
      {
        name: "a nodeSelector with another value does not match",
        spec: { nodeSelector: { role: "worker", disk: "hdd" } },
        want: "nodeSelector disk=hdd does not match",
      },
      {
        name: "a nodeSelector on a missing label does not match",
        spec: { nodeSelector: { gpu: "true" } },
        want: "nodeSelector gpu=true does not match",
      },
      {
        name: "In matches a listed value",
        spec: required({ matchExpressions: [{ key: "zone", operator: "In", values: ["a", "b"] }] }),
        want: undefined,
      },
      {
        name: "In does not match an unlisted value",
        spec: required({ matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "In does not match a missing label",
        spec: required({ matchExpressions: [{ key: "gpu", operator: "In", values: ["true"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "NotIn matches an unlisted value",
        spec: required({ matchExpressions: [{ key: "zone", operator: "NotIn", values: ["b"] }] }),
        want: undefined,
      },
      {
        name: "NotIn matches a missing label",
        spec: required({ matchExpressions: [{ key: "gpu", operator: "NotIn", values: ["x"] }] }),
        want: undefined,
      },
      {
        name: "NotIn does not match a listed value",
        spec: required({ matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Exists matches a present label",
        spec: required({ matchExpressions: [{ key: "role", operator: "Exists" }] }),
        want: undefined,
      },
      {
        name: "Exists does not match a missing label",
        spec: required({ matchExpressions: [{ key: "gpu", operator: "Exists" }] }),
        want: NO_AFFINITY,
      },
      {
        name: "DoesNotExist matches a missing label",
        spec: required({ matchExpressions: [{ key: "gpu", operator: "DoesNotExist" }] }),
        want: undefined,
      },
      {
        name: "DoesNotExist does not match a present label",
        spec: required({ matchExpressions: [{ key: "role", operator: "DoesNotExist" }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Gt matches a greater integer",
        spec: required({ matchExpressions: [{ key: "cores", operator: "Gt", values: ["8"] }] }),
        want: undefined,
      },
      {
        name: "Gt does not match an equal integer",
        spec: required({ matchExpressions: [{ key: "cores", operator: "Gt", values: ["16"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Gt compares numbers, not strings",
        spec: required({ matchExpressions: [{ key: "cores", operator: "Gt", values: ["9"] }] }),
        want: undefined,
      },
      {
        name: "Lt matches a smaller integer",
        spec: required({ matchExpressions: [{ key: "cores", operator: "Lt", values: ["32"] }] }),
        want: undefined,
      },
      {
        name: "Lt does not match a greater integer",
        spec: required({ matchExpressions: [{ key: "cores", operator: "Lt", values: ["4"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Gt does not match a missing label",
        spec: required({ matchExpressions: [{ key: "gpus", operator: "Gt", values: ["0"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Gt does not match a label that is not an integer",
        spec: required({ matchExpressions: [{ key: "zone", operator: "Gt", values: ["0"] }] }),
        want: NO_AFFINITY,
      },
      {
        // The scheduler and kubelet parse the label with strconv.ParseInt, which
        // rejects "5.15"; parseInt would read it as 5.
        name: "Gt does not match a label that only starts with an integer",
        spec: required({ matchExpressions: [{ key: "kernel", operator: "Gt", values: ["4"] }] }),
        want: NO_AFFINITY,
      },
      {
        name: "Gt with more than one value matches nothing",
        spec: required({
          matchExpressions: [{ key: "cores", operator: "Gt", values: ["1", "2"] }],
        }),
        want: NO_AFFINITY,
      },
      {
        name: "matchFields metadata.name In matches the node's name",
        spec: required({
          matchFields: [{ key: "metadata.name", operator: "In", values: ["worker-1"] }],
        }),
        want: undefined,
      },
      {
        name: "matchFields metadata.name In does not match another name",
        spec: required({
          matchFields: [{ key: "metadata.name", operator: "In", values: ["worker-2"] }],
        }),
        want: NO_AFFINITY,
      },
      {
        name: "matchFields metadata.name NotIn excludes the node's name",
        spec: required({
          matchFields: [{ key: "metadata.name", operator: "NotIn", values: ["worker-1"] }],
        }),
        want: NO_AFFINITY,
      },
      {
        name: "the expressions of one term must all match",
        spec: required({
          matchExpressions: [
            { key: "role", operator: "In", values: ["worker"] },
            { key: "zone", operator: "In", values: ["b"] },
          ],
        }),
        want: NO_AFFINITY,
      },
      {
        name: "expressions and fields of one term must both match",
        spec: required({
          matchExpressions: [{ key: "role", operator: "In", values: ["worker"] }],
          matchFields: [{ key: "metadata.name", operator: "In", values: ["worker-2"] }],
        }),
        want: NO_AFFINITY,
      },
      {
        name: "any one matching term is enough",
        spec: required(
          { matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] },
          { matchExpressions: [{ key: "role", operator: "In", values: ["worker"] }] },
        ),
        want: undefined,
      },
      { name: "an empty term matches nothing", spec: required({}), want: NO_AFFINITY },
      {
        name: "a term with empty lists matches nothing",
        spec: required({ matchExpressions: [], matchFields: [] }),
        want: NO_AFFINITY,
      },
      {
        name: "an empty term beside a matching one does not stop the match",
        spec: required({}, { matchExpressions: [{ key: "role", operator: "Exists" }] }),
        want: undefined,
      },
      {
        name: "preferred affinity is not a requirement",
        spec: {
          affinity: {
            nodeAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [{
                weight: 1,
                preference: { matchExpressions: [{ key: "gpu", operator: "Exists" }] },
              }],
            },
          },
        },
        want: undefined,
      },
      {
        name: "the nodeSelector is checked as well as a matching affinity",
        spec: {
          nodeSelector: { zone: "b" },
          ...required({ matchExpressions: [{ key: "role", operator: "Exists" }] }),
        },
        want: "nodeSelector zone=b does not match",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(affinityMismatch(podSpec(c.spec), n), c.want));
    }
  },
});

// ---------------------------------------------------------------------------
// unionByName, formatTaint

Deno.test({
  name: "unionByName() merges node lists without duplicates, sorted by name",
  permissions: "none",
  async fn(t) {
    await t.step("it drops duplicates and sorts", () => {
      const merged = unionByName([
        [node("worker-2"), node("worker-1")],
        [node("worker-1"), node("control-plane")],
        [],
        [node("worker-2")],
      ]);
      assert.deepEqual(names(merged), ["control-plane", "worker-1", "worker-2"]);
    });

    await t.step("it sorts by code unit, the same on every run", () => {
      const merged = unionByName([[
        node("node-2"),
        node("node-10"),
        node("Node-3"),
        node("node-1"),
      ]]);
      assert.deepEqual(names(merged), ["Node-3", "node-1", "node-10", "node-2"]);
    });

    await t.step("it gives an empty list for no lists", () => {
      assert.deepEqual(unionByName([]), []);
      assert.deepEqual(unionByName([[], []]), []);
    });
  },
});

Deno.test({
  name: "formatTaint() prints a taint as kubectl does",
  permissions: "none",
  async fn(t) {
    const cases: [string, V1Taint, string][] = [
      ["with a value", { key: "gpu", value: "true", effect: "NoSchedule" }, "gpu=true:NoSchedule"],
      ["without a value", { key: "dedicated", effect: "NoExecute" }, "dedicated:NoExecute"],
      [
        "with an empty value",
        { key: "spot", value: "", effect: "PreferNoSchedule" },
        "spot:PreferNoSchedule",
      ],
      [
        "with a prefixed key",
        { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" },
        "node.kubernetes.io/unschedulable:NoSchedule",
      ],
    ];
    for (const [name, taint, want] of cases) {
      await t.step(`it prints a taint ${name}`, () => assert.equal(formatTaint(taint), want));
    }
  },
});
