import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import {
  goDurationMs,
  isReady,
  isSatisfied,
  type LabelConfig,
  labelPatch,
  missingFact,
  ownedButUnselected,
  parseExtraLabels,
  parseTaintSelectors,
  planAfterSuccess,
  planBeforeJob,
  planHolds,
  servesHandler,
  taintPatch,
  taintsToLift,
} from "./lifecycle.ts";
import { UsageError } from "../job.ts";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";

const KEY = "kata.example.com/installed";
const INSTALL: LabelConfig = {
  key: KEY,
  value: "true",
  pendingValue: "false",
  extra: [["tier", "kata"]],
  claim: false,
  remove: false,
};
const CLEANUP: LabelConfig = { ...INSTALL, value: undefined, remove: true };
const P = "kata.example.com";
const instance = (cfg: LabelConfig, suffix: string): LabelConfig => ({
  ...cfg,
  mark: `${P}/${suffix}`,
  instancePrefix: P,
});

const plan = (entries: [string, string | null][]) => new Map(entries);

Deno.test({
  name: "planBeforeJob() claims an install and demotes a cleanup",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      cfg: LabelConfig;
      labels: Record<string, string>;
      want: [string, string | null][];
    }[] = [
      { name: "no claim: nothing", cfg: INSTALL, labels: {}, want: [] },
      {
        name: "claim on a fresh node",
        cfg: { ...INSTALL, claim: true },
        labels: {},
        want: [[KEY, "false"]],
      },
      {
        name: "claim on a done node demotes it while it changes",
        cfg: { ...INSTALL, claim: true },
        labels: { [KEY]: "true" },
        want: [[KEY, "false"]],
      },
      {
        name: "claim already pending: nothing to write",
        cfg: { ...INSTALL, claim: true },
        labels: { [KEY]: "false" },
        want: [],
      },
      {
        name: "cleanup demotes the key",
        cfg: CLEANUP,
        labels: { [KEY]: "true" },
        want: [[KEY, "false"]],
      },
      { name: "cleanup of a node never labelled: nothing", cfg: CLEANUP, labels: {}, want: [] },
      {
        name: "instance claim marks itself and the shared key",
        cfg: instance({ ...INSTALL, claim: true }, "a"),
        labels: {},
        want: [[`${P}/a`, "false"], [KEY, "false"]],
      },
      {
        name: "instance claim leaves the key finished while another instance is done",
        cfg: instance({ ...INSTALL, claim: true }, "a"),
        labels: { [KEY]: "true", [`${P}/b`]: "true" },
        want: [[`${P}/a`, "false"]],
      },
      {
        name: "instance cleanup demotes its mark, and the key only if no other is done",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "true", [`${P}/a`]: "true", [`${P}/b`]: "false" },
        want: [[`${P}/a`, "false"], [KEY, "false"]],
      },
      {
        name: "instance cleanup keeps the key while another instance is done",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "true", [`${P}/a`]: "true", [`${P}/b`]: "true" },
        want: [[`${P}/a`, "false"]],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(planBeforeJob(c.cfg, c.labels), plan(c.want));
      });
    }
  },
});

Deno.test({
  name: "planAfterSuccess() labels an install and removes a cleanup",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      cfg: LabelConfig;
      labels: Record<string, string>;
      want: [string, string | null][];
    }[] = [
      {
        name: "install sets the key and the extra labels, even when they look set",
        cfg: INSTALL,
        labels: { [KEY]: "true" },
        want: [[KEY, "true"], ["tier", "kata"]],
      },
      {
        name: "install of an instance sets its mark too",
        cfg: instance(INSTALL, "a"),
        labels: {},
        want: [[KEY, "true"], [`${P}/a`, "true"], ["tier", "kata"]],
      },
      {
        name: "a claim-only install (no value) writes nothing",
        cfg: { ...INSTALL, value: undefined, claim: true },
        labels: {},
        want: [],
      },
      {
        name: "cleanup removes the key and the extra labels that are there",
        cfg: CLEANUP,
        labels: { [KEY]: "false", tier: "kata" },
        want: [[KEY, null], ["tier", null]],
      },
      {
        name: "cleanup of a node already clean writes nothing",
        cfg: CLEANUP,
        labels: {},
        want: [],
      },
      {
        name: "last instance out removes the shared key",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "false", [`${P}/a`]: "false", tier: "kata" },
        want: [[`${P}/a`, null], [KEY, null], ["tier", null]],
      },
      {
        name: "others only claimed: the key is demoted, the extra labels stay",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "true", [`${P}/a`]: "false", [`${P}/b`]: "false", tier: "kata" },
        want: [[`${P}/a`, null], [KEY, "false"]],
      },
      {
        name: "another instance is done: the key stays",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "true", [`${P}/a`]: "false", [`${P}/b`]: "true" },
        want: [[`${P}/a`, null]],
      },
      {
        name: "a label of another prefix is not an instance mark",
        cfg: instance(CLEANUP, "a"),
        labels: { [KEY]: "true", [`${P}/a`]: "false", [`${P}x/b`]: "true" },
        want: [[`${P}/a`, null], [KEY, null]],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(planAfterSuccess(c.cfg, c.labels), plan(c.want));
      });
    }
  },
});

Deno.test({
  name: "planHolds() tells whether the written labels are still there",
  permissions: "none",
  fn() {
    const p = plan([[KEY, "true"], ["gone", null]]);
    assert.equal(planHolds(p, { [KEY]: "true" }), true);
    assert.equal(planHolds(p, {}), false, "dropped by a re-registering kubelet");
    assert.equal(planHolds(p, { [KEY]: "true", gone: "x" }), false);
  },
});

Deno.test({
  name: "labelPatch() tests the UID first and removes with add-then-remove",
  permissions: "none",
  fn() {
    assert.deepEqual(labelPatch("u1", plan([[KEY, "true"], ["tier", null]])), [
      { op: "test", path: "/metadata/uid", value: "u1" },
      { op: "add", path: "/metadata/labels/kata.example.com~1installed", value: "true" },
      { op: "add", path: "/metadata/labels/tier", value: "" },
      { op: "remove", path: "/metadata/labels/tier" },
    ]);
  },
});

Deno.test({
  name: "taintsToLift() and taintPatch() lift only the named taints, testing the list read",
  permissions: "none",
  fn() {
    const taints = [
      { key: "startup", effect: "NoSchedule" },
      { key: "startup", effect: "NoExecute" },
      { key: "other", effect: "NoSchedule" },
    ];
    const { keep, lifted } = taintsToLift(taints, [{ key: "startup", effect: "NoSchedule" }]);
    assert.deepEqual(lifted, [taints[0]]);
    assert.deepEqual(keep, [taints[1], taints[2]]);
    assert.equal(taintsToLift(taints, [{ key: "startup" }]).lifted.length, 2);
    assert.deepEqual(taintPatch("u", taints, keep), [
      { op: "test", path: "/metadata/uid", value: "u" },
      { op: "test", path: "/spec/taints", value: taints },
      { op: "replace", path: "/spec/taints", value: keep },
    ]);
    assert.deepEqual(taintPatch("u", [taints[0]], [])[2], { op: "remove", path: "/spec/taints" });
  },
});

function node(
  labels: Record<string, string>,
  status: V1Node["status"] = {},
  name = "n1",
): V1Node {
  return { metadata: { name, uid: `uid-${name}`, labels }, status };
}

Deno.test({
  name: "isSatisfied() skips done nodes, never pending ones",
  permissions: "none",
  async fn(t) {
    const kata = { runtimeHandlers: [{ name: "kata" }] };
    const runc = { runtimeHandlers: [{ name: "runc" }] };
    const cases: {
      name: string;
      cfg: LabelConfig;
      n: V1Node;
      handlers?: string[];
      want: boolean;
    }[] = [
      { name: "done", cfg: INSTALL, n: node({ [KEY]: "true" }), want: true },
      { name: "pending", cfg: INSTALL, n: node({ [KEY]: "false" }), want: false },
      { name: "unlabelled", cfg: INSTALL, n: node({}), want: false },
      { name: "other value", cfg: INSTALL, n: node({ [KEY]: "v2" }), want: false },
      { name: "a cleanup never skips", cfg: CLEANUP, n: node({ [KEY]: "true" }), want: false },
      {
        name: "done but serves no required handler",
        cfg: INSTALL,
        n: node({ [KEY]: "true" }, runc),
        handlers: ["kata"],
        want: false,
      },
      {
        name: "done and serves one",
        cfg: INSTALL,
        n: node({ [KEY]: "true" }, kata),
        handlers: ["kata", "kata-qemu"],
        want: true,
      },
      {
        name: "instance: the shared key is done but our mark is not",
        cfg: instance(INSTALL, "a"),
        n: node({ [KEY]: "true", [`${P}/b`]: "true" }),
        want: false,
      },
      {
        name: "instance: our mark is done, the key holds another instance's value",
        cfg: instance(INSTALL, "a"),
        n: node({ [KEY]: "v2", [`${P}/a`]: "true" }),
        want: true,
      },
      {
        name: "instance: our mark is done but the shared key is gone",
        cfg: instance(INSTALL, "a"),
        n: node({ [`${P}/a`]: "true" }),
        want: false,
      },
      {
        name: "instance: our mark and the key are done",
        cfg: instance(INSTALL, "a"),
        n: node({ [KEY]: "true", [`${P}/a`]: "true" }),
        want: true,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(isSatisfied(c.cfg, c.n, c.handlers ?? []), c.want));
    }
  },
});

Deno.test({
  name: "servesHandler(), isReady() and missingFact() read the node's status",
  permissions: "none",
  fn() {
    assert.equal(servesHandler(node({}), ["kata"]), true, "no handlers reported: older kubelet");
    assert.equal(servesHandler(node({}, { runtimeHandlers: [{ name: "runc" }] }), ["kata"]), false);
    assert.equal(servesHandler(node({}, { runtimeHandlers: [{ name: "runc" }] }), []), true);
    assert.equal(isReady(node({}, { conditions: [{ type: "Ready", status: "True" }] })), true);
    assert.equal(isReady(node({}, { conditions: [{ type: "Ready", status: "Unknown" }] })), false);
    assert.equal(isReady(node({})), false);
    const req = { runtimeVersion: true, machineId: true };
    const info = { containerRuntimeVersion: "containerd://2.1", machineID: "abc" };
    assert.equal(missingFact(node({}, { nodeInfo: info as never }), req), undefined);
    assert.match(
      missingFact(node({}, { nodeInfo: { ...info, machineID: "" } as never }), req)!,
      /machineID/,
    );
    assert.match(missingFact(node({}), req)!, /containerRuntimeVersion/);
    assert.equal(missingFact(node({}), { runtimeVersion: false, machineId: false }), undefined);
  },
});

Deno.test({
  name: "ownedButUnselected() keeps owned nodes the selection no longer matches",
  permissions: "none",
  fn() {
    const owned = ["a", "b", "c"].map((n) => node({ [KEY]: "true" }, {}, n));
    const left = ownedButUnselected(owned, new Set(["a", "c", "z"]));
    assert.deepEqual(left.map((n) => n.metadata!.name), ["b"]);
  },
});

Deno.test({
  name: "parseExtraLabels() and parseTaintSelectors() refuse bad input with the entry named",
  permissions: "none",
  fn() {
    assert.deepEqual(parseExtraLabels(["a=1", "b.example.com/c="], KEY), [
      ["a", "1"],
      ["b.example.com/c", ""],
    ]);
    for (const bad of [["a"], ["=1"], ["a=1", "a=2"], [`${KEY}=x`], ["a=-"]]) {
      assert.throws(() => parseExtraLabels(bad, KEY), UsageError, bad.join(" "));
    }
    assert.deepEqual(parseTaintSelectors(" a:NoExecute , b "), [
      { key: "a", effect: "NoExecute" },
      { key: "b" },
    ]);
    for (const bad of ["", ",", "a:Never", "bad key"]) {
      assert.throws(() => parseTaintSelectors(bad), UsageError, bad);
    }
  },
});

Deno.test({
  name: "goDurationMs() reads the kubelet's Go durations",
  permissions: "none",
  fn() {
    const cases: [string, number | undefined][] = [
      ["2m0s", 120_000],
      ["15m", 900_000],
      ["1h0m0s", 3_600_000],
      ["1.5s", 1500],
      ["500ms", 500],
      ["", undefined],
      ["2 minutes", undefined],
      ["10", undefined],
    ];
    for (const [text, ms] of cases) assert.equal(goDurationMs(text), ms, text);
  },
});

Deno.test({
  name: "labelPatch() for a node read without labels keeps the labels it gained since",
  permissions: "none",
  fn() {
    const now: V1Node = { metadata: { uid: "u1", labels: { "kubernetes.io/hostname": "n1" } } };
    const after = applyJsonPatch(now, labelPatch("u1", plan([[KEY, "true"]])) as PatchOp[]);
    assert.deepEqual(after.metadata?.labels, { "kubernetes.io/hostname": "n1", [KEY]: "true" });
  },
});
