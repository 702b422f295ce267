/**
 * Pure readers of pod status: why a pod has not started (a stall) and why it
 * failed, in the pod's own words. The Job's own conditions only say
 * `BackoffLimitExceeded`; the pods say which container exited how.
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";

/**
 * Why a pod has not started, in the pod's own words, or undefined when it is
 * not Pending: the scheduler's verdict (`Unschedulable: 0/3 nodes are
 * available: …`), else the first waiting container's reason
 * (`ImagePullBackOff: …`), else the pod's status reason.
 *
 * @example
 * ```ts
 * stallReason({ status: { phase: "Pending", conditions: [{ type: "PodScheduled",
 *   status: "False", reason: "Unschedulable", message: "0/1 nodes are available" }] } });
 * // "Unschedulable: 0/1 nodes are available"
 * ```
 */
export function stallReason(pod: V1Pod): string | undefined {
  const status = pod.status;
  if (status?.phase !== "Pending") return undefined;
  const join = (reason?: string, message?: string) =>
    [reason, message].filter(Boolean).join(": ") || undefined;
  const scheduled = status.conditions?.find((c) => c.type === "PodScheduled");
  if (scheduled?.status === "False") {
    return join(scheduled.reason, scheduled.message) ?? "not scheduled";
  }
  for (const c of [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])]) {
    const waiting = c.state?.waiting;
    if (waiting?.reason && waiting.reason !== "PodInitializing") {
      return `container ${c.name}: ${join(waiting.reason, waiting.message)}`;
    }
  }
  return join(status.reason, status.message) ?? "Pending";
}

function firstLine(text: string | undefined, max = 200): string | undefined {
  const line = text?.trim().split("\n").find((l) => l.trim())?.trim();
  if (!line) return undefined;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/**
 * Why a failed Job's pod failed, from the pods that exist: the pod's own
 * reason when the kubelet failed the pod as a whole (`Evicted`, `OutOfcpu`,
 * `NodeAffinity`), else the failing container, its exit code and its
 * termination message, e.g. `install exited 1: no virtualization backend`.
 * The most recent failed pod counts; undefined when no pod says anything.
 *
 * @example
 * ```ts
 * podFailure([{ status: { phase: "Failed", containerStatuses: [{ name: "install",
 *   image: "i", imageID: "", ready: false, restartCount: 0,
 *   state: { terminated: { exitCode: 1, message: "no backend" } } }] } }]);
 * // "install exited 1: no backend"
 * ```
 */
export function podFailure(pods: V1Pod[]): string | undefined {
  const failed = pods
    .filter((p) => p.status?.phase === "Failed" || hasFailedContainer(p))
    .sort((a, b) => time(b) - time(a));
  for (const pod of failed) {
    const st = pod.status!;
    if (st.reason) return `pod ${[st.reason, firstLine(st.message)].filter(Boolean).join(": ")}`;
    for (const c of [...(st.initContainerStatuses ?? []), ...(st.containerStatuses ?? [])]) {
      // With restartPolicy OnFailure the failure is the last termination.
      const t = [c.state?.terminated, c.lastState?.terminated].find((t) => t && t.exitCode !== 0);
      if (!t) continue;
      const why = firstLine(t.message) ?? (t.reason && t.reason !== "Error" ? t.reason : undefined);
      return `${c.name} exited ${t.exitCode}${why ? `: ${why}` : ""}`;
    }
    if (st.message) return `pod ${firstLine(st.message)}`;
  }
  return undefined;
}

function hasFailedContainer(pod: V1Pod): boolean {
  return [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])]
    .some((c) =>
      (c.state?.terminated?.exitCode ?? 0) !== 0 || (c.lastState?.terminated?.exitCode ?? 0) !== 0
    );
}

function time(pod: V1Pod): number {
  const t = pod.status?.startTime ?? pod.metadata?.creationTimestamp;
  return t ? new Date(t).getTime() : 0;
}

/** What the pods of a Job that vanished unseen say of its outcome. */
export type CollectedOutcome =
  | { outcome: "succeeded" }
  | { outcome: "failed"; reason: string; pods: number }
  | { outcome: "unknown"; reason: string };

const COLLECTED = "its Job was collected before its outcome was seen";

/**
 * The outcome of a Job that was deleted (by its TTL, or by someone) while
 * nobody watched, from the pods it left: a Succeeded pod means it succeeded,
 * pods that all failed mean it failed, anything else is unknown — never a
 * failure, since the Job may well have succeeded.
 *
 * @param uid the Job's UID: a pod owned by another Job of that name is not its
 * @example
 * ```ts
 * collectedOutcome([], "uid").outcome; // "unknown"
 * ```
 */
export function collectedOutcome(pods: V1Pod[], uid: string): CollectedOutcome {
  const ours = pods.filter((p) => {
    const owners = p.metadata?.ownerReferences ?? [];
    return owners.length === 0 || owners.some((r) => r.uid === uid);
  });
  if (ours.some((p) => p.status?.phase === "Succeeded")) return { outcome: "succeeded" };
  if (ours.length && ours.every((p) => p.status?.phase === "Failed")) {
    const why = podFailure(ours) ?? "its pods failed";
    return {
      outcome: "failed",
      reason: `${why} (${COLLECTED}; read from its pods)`,
      pods: ours.length,
    };
  }
  return { outcome: "unknown", reason: `${COLLECTED}, and no pod of it is left to tell` };
}

/**
 * What holds a Job whose deletion does not end: its finalizers (besides the
 * `foregroundDeletion` of the deletion itself, which waits for the pods), or
 * its pods still terminating, with their nodes.
 *
 * @example
 * ```ts
 * deletionHolds(["example.com/hold"], []); // "finalizers example.com/hold"
 * ```
 */
export function deletionHolds(finalizers: string[], pods: V1Pod[]): string {
  const held = finalizers.filter((f) => f !== "foregroundDeletion");
  if (held.length) return `finalizers ${held.join(", ")}`;
  const left = pods.filter((p) => p.metadata?.deletionTimestamp);
  if (!left.length) return "nothing visible (its dependents are being collected)";
  const named = left.map((p) => `${p.metadata?.name} on ${p.spec?.nodeName ?? "no node"}`);
  return `pods still terminating: ${named.join(", ")}`;
}
