/**
 * The verification rules, apart from their I/O: whether the pods a
 * `--verify-pod-selector` matches on a node prove it healthy after its Job,
 * when that Job finished, and what a smoke-test Job's state says. Pure, so
 * each rule has a table test.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { interpretStatus, stillRuns } from "../job.ts";

/** What the pods on a node say: all proven Ready after the Job, or the first that is not. */
export type PodsVerdict =
  | { ok: true }
  | { ok: false; pod?: string; why: string };

function ref(pod: V1Pod): string {
  return `${pod.metadata?.namespace}/${pod.metadata?.name}`;
}

/** Seconds since the epoch, as the API server stores times (RFC 3339, whole seconds). */
function seconds(t: Date | string | undefined): number | undefined {
  return t === undefined ? undefined : Math.floor(new Date(t).getTime() / 1000);
}

/**
 * Whether the pods on a node are Ready with a Ready transition after the Job
 * finished. A pod that was Ready before the upgrade proves nothing (it may
 * not have seen the new driver), so its `Ready` condition's
 * `lastTransitionTime` must be no earlier than the Job's end; both are
 * stored in whole seconds, so the same second counts as after. A pod being
 * deleted is passed over (a DaemonSet's replacement comes); no pod at all is
 * not yet proof either.
 *
 * @param finishedAt when the Job finished (ms since the epoch)
 * @example
 * ```ts
 * podsVerdict([], 0, "app=validator"); // { ok: false, why: "no pod matches app=validator" }
 * ```
 */
export function podsVerdict(
  pods: readonly V1Pod[],
  finishedAt: number,
  selector: string,
): PodsVerdict {
  const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
  if (!live.length) return { ok: false, why: `no pod matches ${selector}` };
  const after = Math.floor(finishedAt / 1000);
  for (const pod of live) {
    const ready = pod.status?.conditions?.find((c) => c.type === "Ready");
    if (ready?.status !== "True") return { ok: false, pod: ref(pod), why: "not Ready" };
    const since = seconds(ready.lastTransitionTime);
    if (since === undefined || since < after) {
      return {
        ok: false,
        pod: ref(pod),
        why: `Ready only since ${
          ready.lastTransitionTime ? new Date(ready.lastTransitionTime).toISOString() : "unknown"
        }, before its node's Job finished`,
      };
    }
  }
  return { ok: true };
}

/** What a smoke-test Job says: still running, succeeded, or failed with a reason. */
export type SmokeState = { state: "running" } | { state: "succeeded" } | {
  state: "failed";
  reason: string;
};

/**
 * A smoke-test Job's state from its conditions; its decided outcome
 * (`SuccessCriteriaMet`, `FailureTarget`) counts, as for the node's own Job.
 *
 * @example
 * ```ts
 * smokeState({ status: { conditions: [{ type: "Failed", status: "True", reason: "DeadlineExceeded" }] } });
 * // { state: "failed", reason: "DeadlineExceeded" }
 * ```
 */
export function smokeState(job: Pick<V1Job, "status">): SmokeState {
  const s = interpretStatus(job);
  if (s.phase === "active") return { state: "running" };
  if (s.phase === "succeeded") return { state: "succeeded" };
  return { state: "failed", reason: s.message ? `${s.message} [${s.reason}]` : s.reason };
}

/**
 * What to do with a smoke-test Job of the node's name found at create time:
 * `adopt` one made for this node after its Job finished (a re-run, or a
 * create whose answer was lost); `wait` for an older one that still runs
 * (job.ts `stillRuns`: until Complete or Failed); else
 * `replace` it (delete, then create), since it tested the node before its Job.
 */
export function existingSmoke(
  job: V1Job,
  nodeUid: string,
  uidAnnotation: string,
  finishedAt: number,
): "adopt" | "wait" | "replace" {
  const created = seconds(job.metadata?.creationTimestamp) ?? 0;
  const sameNode = job.metadata?.annotations?.[uidAnnotation] === nodeUid;
  if (sameNode && created >= Math.floor(finishedAt / 1000)) return "adopt";
  // Until Complete or Failed: a deletion at SuccessCriteriaMet or
  // FailureTarget deletes a Job whose pods may still terminate (job.ts).
  return stillRuns(job) ? "wait" : "replace";
}
