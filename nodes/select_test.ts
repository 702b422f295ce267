import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import { slimNode } from "./select.ts";

Deno.test({
  name: "slimNode() keeps what selection, admission and the Job read, and drops the rest",
  permissions: "none",
  fn() {
    const node: V1Node = {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "worker-1",
        uid: "u-1",
        labels: { zone: "a" },
        annotations: { note: "x" },
        managedFields: [{ manager: "kubelet", operation: "Update" }],
      },
      spec: { taints: [{ key: "k", effect: "NoSchedule" }] },
      status: {
        nodeInfo: {
          machineID: "m",
          containerRuntimeVersion: "containerd://2",
          architecture: "amd64",
          bootID: "",
          kernelVersion: "",
          kubeProxyVersion: "",
          kubeletVersion: "",
          operatingSystem: "linux",
          osImage: "",
          systemUUID: "",
        },
        images: [{ names: ["registry/app:1"], sizeBytes: 1 }],
        conditions: [
          { type: "MemoryPressure", status: "False", message: "kubelet has sufficient memory" },
          { type: "Ready", status: "True", message: "kubelet is posting ready status" },
        ],
        runtimeHandlers: [{ name: "kata" }],
      },
    };
    const slim = slimNode(node);
    assert.deepEqual(slim, {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "worker-1", uid: "u-1", labels: { zone: "a" }, annotations: { note: "x" } },
      spec: { taints: [{ key: "k", effect: "NoSchedule" }] },
      status: {
        // Of nodeInfo what the Job's environment and the admission read.
        nodeInfo: { machineID: "m", containerRuntimeVersion: "containerd://2" } as never,
        runtimeHandlers: [{ name: "kata" }],
        conditions: [{ type: "Ready", status: "True" }],
      },
    });
    assert.ok(node.metadata!.managedFields, "the input is left as it was");
    assert.equal(slimNode({ metadata: { name: "bare" } }).status, undefined);
  },
});

Deno.test({
  name: "slimNode() of a slim node is that node itself, and of anything else a slim copy",
  permissions: "none",
  fn() {
    const slim = slimNode({
      metadata: { name: "w", uid: "u", managedFields: [{ manager: "kubelet" }] },
      status: {
        nodeInfo: { machineID: "m", containerRuntimeVersion: "c", osImage: "" } as never,
        conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
      },
    });
    const cases: { name: string; node: V1Node; same: boolean }[] = [
      { name: "a slim node", node: slim, same: true },
      {
        name: "with status undefined",
        node: { metadata: { name: "w" }, status: undefined },
        same: true,
      },
      { name: "without status", node: { metadata: { name: "w" } }, same: false },
      { name: "without metadata", node: {}, same: false },
      { name: "with managedFields", node: { metadata: { managedFields: [] } }, same: false },
      { name: "with an empty status", node: { metadata: {}, status: {} }, same: false },
      { name: "with images", node: { metadata: {}, status: { images: [] } }, same: false },
      {
        name: "with more of nodeInfo",
        node: { metadata: {}, status: { nodeInfo: { machineID: "m", osImage: "" } as never } },
        same: false,
      },
      {
        name: "with another condition",
        node: { metadata: {}, status: { conditions: [{ type: "DiskPressure", status: "False" }] } },
        same: false,
      },
      {
        name: "with Ready's reason",
        node: {
          metadata: {},
          status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }] },
        },
        same: false,
      },
    ];
    for (const { name, node, same } of cases) {
      const out = slimNode(node);
      assert.equal(out === node, same, name);
      // Either way the same content as slimming a copy of it.
      assert.deepEqual(
        out,
        slimNode(structuredClone({ ...node, metadata: { ...node.metadata, managedFields: [] } })),
        name,
      );
    }
  },
});

Deno.test({
  name: "slimNode() of a node whose status or its parts are null slims it as before, never throws",
  permissions: "none",
  fn() {
    // JSON may say null where the client's types say absent (a proxy, a
    // stand-in server); slimNode read them with `?.` before it learnt to
    // return a slim node itself, and must still.
    const cases: { name: string; status: unknown; want: V1Node["status"] }[] = [
      { name: "status null", status: null, want: undefined },
      { name: "conditions null", status: { conditions: null }, want: undefined },
      { name: "nodeInfo null", status: { nodeInfo: null }, want: undefined },
      { name: "runtimeHandlers null", status: { runtimeHandlers: null }, want: undefined },
      {
        name: "conditions null beside nodeInfo",
        status: { nodeInfo: { machineID: "m", containerRuntimeVersion: "c" }, conditions: null },
        want: { nodeInfo: { machineID: "m", containerRuntimeVersion: "c" } as never },
      },
    ];
    for (const c of cases) {
      const node = { metadata: { name: "w", uid: "u" }, status: c.status } as V1Node;
      assert.deepEqual(
        slimNode(node),
        { metadata: { name: "w", uid: "u" }, status: c.want },
        c.name,
      );
    }
  },
});

Deno.test({
  name: "slimNode() of nodes with an equal Ready status or an empty spec shares one frozen copy",
  permissions: "none",
  fn() {
    const node = (name: string, ready: string): V1Node => ({
      metadata: { name, uid: `u-${name}` },
      spec: {},
      status: { conditions: [{ type: "Ready", status: ready, reason: "KubeletReady" }] },
    });
    const [a, b, c] = [node("a", "True"), node("b", "True"), node("c", "False")].map(slimNode);
    // At 65,000 nodes a list, a condition and an empty spec per node were ~150 B each.
    assert.equal(a.status!.conditions, b.status!.conditions);
    assert.notEqual(a.status!.conditions, c.status!.conditions);
    assert.deepEqual(c.status!.conditions, [{ type: "Ready", status: "False" }]);
    assert.equal(a.spec, b.spec);
    assert.ok(Object.isFrozen(a.status!.conditions) && Object.isFrozen(a.status!.conditions![0]));
    assert.ok(Object.isFrozen(a.spec));
    // A spec with content stays the node's own.
    const tainted = slimNode({ metadata: { name: "t" }, spec: { unschedulable: true } });
    assert.deepEqual(tainted.spec, { unschedulable: true });
    assert.ok(!Object.isFrozen(tainted.spec));
  },
});
