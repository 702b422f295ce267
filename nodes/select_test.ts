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
