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
