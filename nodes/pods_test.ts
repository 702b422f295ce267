import assert from "node:assert/strict";
import type { V1ContainerStatus, V1Pod } from "@kubernetes/client-node";
import { collectedOutcome, deletionHolds, podFailure, stallReason } from "./pods.ts";
import { unschedulablePod } from "../testing/pods.ts";

/** A container status as the kubelet reports it. */
function container(name: string, state: Partial<V1ContainerStatus>): V1ContainerStatus {
  return {
    name,
    image: "registry.example/x:1",
    imageID: "",
    ready: false,
    restartCount: 0,
    ...state,
  };
}

const START = "2026-11-30T10:00:00Z";

// Pod status shapes taken from what the kubelet writes for each case.
const EXITED: V1Pod = {
  metadata: { name: "up-n1-abcde", creationTimestamp: new Date(START) },
  status: {
    phase: "Failed",
    startTime: new Date(START),
    conditions: [{ type: "Ready", status: "False", reason: "PodFailed" }],
    containerStatuses: [container("install", {
      state: {
        terminated: {
          exitCode: 1,
          reason: "Error",
          message: "no virtualization backend\nsee /var/log/install.log\n",
          containerID: "containerd://1",
          startedAt: new Date(START),
          finishedAt: new Date(START),
        },
      },
    })],
  },
};

Deno.test({
  name: "podFailure() reads why a Job's pod failed from real pod status shapes",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; pods: V1Pod[]; want: string | undefined }[] = [
      {
        name: "a container exited with a termination message: its first line",
        pods: [EXITED],
        want: "install exited 1: no virtualization backend",
      },
      {
        name: "OOMKilled without a message: the reason",
        pods: [{
          status: {
            phase: "Failed",
            containerStatuses: [container("install", {
              state: { terminated: { exitCode: 137, reason: "OOMKilled" } },
            })],
          },
        }],
        want: "install exited 137: OOMKilled",
      },
      {
        name: "a plain Error without a message: only the exit code",
        pods: [{
          status: {
            phase: "Failed",
            containerStatuses: [
              container("c", { state: { terminated: { exitCode: 2, reason: "Error" } } }),
            ],
          },
        }],
        want: "c exited 2",
      },
      {
        name: "an init container failed: it is named, not the waiting main container",
        pods: [{
          status: {
            phase: "Failed",
            initContainerStatuses: [container("prepare", {
              state: { terminated: { exitCode: 3, reason: "Error", message: "mount failed" } },
            })],
            containerStatuses: [container("install", {
              state: { waiting: { reason: "PodInitializing" } },
            })],
          },
        }],
        want: "prepare exited 3: mount failed",
      },
      {
        name: "restartPolicy OnFailure: the last termination of a crash-looping container",
        pods: [{
          status: {
            phase: "Running",
            containerStatuses: [container("install", {
              restartCount: 4,
              state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 40s" } },
              lastState: { terminated: { exitCode: 1, reason: "Error", message: "boom" } },
            })],
          },
        }],
        want: "install exited 1: boom",
      },
      {
        name: "evicted: the pod's own reason and message",
        pods: [{
          status: {
            phase: "Failed",
            reason: "Evicted",
            message: "The node was low on resource: memory. Threshold quantity: 100Mi.",
            containerStatuses: [container("install", {
              state: {
                terminated: {
                  exitCode: 137,
                  reason: "ContainerStatusUnknown",
                  message: "The container could not be located when the pod was terminated",
                },
              },
            })],
          },
        }],
        want: "pod Evicted: The node was low on resource: memory. Threshold quantity: 100Mi.",
      },
      {
        name: "rejected by the kubelet for resources (nodeName bypasses the scheduler)",
        pods: [{
          status: {
            phase: "Failed",
            reason: "OutOfcpu",
            message:
              "Pod was rejected: Node didn't have enough resource: cpu, requested: 16000, used: 0, capacity: 8000",
          },
        }],
        want:
          "pod OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, requested: 16000, used: 0, capacity: 8000",
      },
      {
        name: "several attempts: the most recent failed pod counts",
        pods: [
          EXITED,
          {
            metadata: { creationTimestamp: new Date("2026-11-30T10:05:00Z") },
            status: {
              phase: "Failed",
              startTime: new Date("2026-11-30T10:05:00Z"),
              containerStatuses: [container("install", {
                state: { terminated: { exitCode: 4, message: "second try failed" } },
              })],
            },
          },
        ],
        want: "install exited 4: second try failed",
      },
      {
        name: "a succeeded pod says nothing",
        pods: [{
          status: {
            phase: "Succeeded",
            containerStatuses: [
              container("c", { state: { terminated: { exitCode: 0, reason: "Completed" } } }),
            ],
          },
        }],
        want: undefined,
      },
      { name: "no pods left: nothing", pods: [], want: undefined },
      {
        name: "a very long message is cut to 200 characters",
        pods: [{
          status: {
            phase: "Failed",
            containerStatuses: [
              container("c", { state: { terminated: { exitCode: 1, message: "x".repeat(500) } } }),
            ],
          },
        }],
        want: `c exited 1: ${"x".repeat(199)}…`,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(podFailure(c.pods), c.want));
    }
  },
});

Deno.test({
  name: "stallReason() says why a pod has not started, in the pod's own words",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; pod: V1Pod; want: string | undefined }[] = [
      {
        name: "the scheduler's verdict",
        pod: unschedulablePod("0/3 nodes are available: 1 Insufficient cpu."),
        want: "Unschedulable: 0/3 nodes are available: 1 Insufficient cpu.",
      },
      {
        name: "an image pull back-off",
        pod: {
          status: {
            phase: "Pending",
            conditions: [{ type: "PodScheduled", status: "True" }],
            containerStatuses: [container("work", {
              state: { waiting: { reason: "ImagePullBackOff", message: "Back-off pulling image" } },
            })],
          },
        },
        want: "container work: ImagePullBackOff: Back-off pulling image",
      },
      {
        name: "a main container waiting for init containers is not the reason",
        pod: {
          status: {
            phase: "Pending",
            initContainerStatuses: [container("prepare", {
              state: { waiting: { reason: "ErrImagePull", message: "not found" } },
            })],
            containerStatuses: [
              container("work", { state: { waiting: { reason: "PodInitializing" } } }),
            ],
          },
        },
        want: "container prepare: ErrImagePull: not found",
      },
      { name: "a bare Pending pod", pod: { status: { phase: "Pending" } }, want: "Pending" },
      { name: "a running pod", pod: { status: { phase: "Running" } }, want: undefined },
      { name: "no status", pod: {}, want: undefined },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(stallReason(c.pod), c.want));
    }
  },
});

Deno.test({
  name:
    "collectedOutcome() reads a vanished Job's outcome from its pods, unknown when they cannot tell",
  permissions: "none",
  async fn(t) {
    const pod = (phase: string, owner = "job-uid"): V1Pod => ({
      metadata: {
        name: `p-${phase}`,
        ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "j", uid: owner }],
      },
      status: { phase },
    });
    const cases: { name: string; pods: V1Pod[]; want: string }[] = [
      { name: "no pod left: unknown", pods: [], want: "unknown" },
      {
        name: "a Succeeded pod: succeeded",
        pods: [pod("Failed"), pod("Succeeded")],
        want: "succeeded",
      },
      { name: "every pod Failed: failed", pods: [pod("Failed"), pod("Failed")], want: "failed" },
      {
        name: "a pod still Running: unknown",
        pods: [pod("Failed"), pod("Running")],
        want: "unknown",
      },
      {
        name: "a Succeeded pod of another Job of that name does not count",
        pods: [pod("Succeeded", "other-uid")],
        want: "unknown",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const got = collectedOutcome(c.pods, "job-uid");
        assert.equal(got.outcome, c.want);
        if (got.outcome !== "succeeded") {
          assert.match(got.reason, /collected before its outcome was seen/);
        }
      });
    }
  },
});

Deno.test({
  name: "deletionHolds() names the finalizers, else the pods still terminating",
  permissions: "none",
  async fn(t) {
    const terminating: V1Pod = {
      metadata: { name: "p1", deletionTimestamp: new Date(0) },
      spec: { nodeName: "n1", containers: [] },
    };
    const cases: { name: string; finalizers: string[]; pods: V1Pod[]; want: string }[] = [
      {
        name: "a finalizer is named",
        finalizers: ["foregroundDeletion", "example.com/hold"],
        pods: [terminating],
        want: "finalizers example.com/hold",
      },
      {
        name: "our own foregroundDeletion points at the pods",
        finalizers: ["foregroundDeletion"],
        pods: [terminating, { metadata: { name: "p2" } }],
        want: "pods still terminating: p1 on n1",
      },
      {
        name: "nothing left to see",
        finalizers: [],
        pods: [],
        want: "nothing visible (its dependents are being collected)",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.equal(deletionHolds(c.finalizers, c.pods), c.want));
    }
  },
});
