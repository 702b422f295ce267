/**
 * The verification rules, apart from their I/O: whether the pods a
 * `--verify-pod-selector` matches on a node prove it healthy after its Job,
 * when that Job finished, and what a smoke-test Job's state says. Pure, so
 * each rule has a table test.
 *
 * @module
 */

import type { V1Job, V1Node, V1Pod } from "@kubernetes/client-node";
import { interpretStatus, type JobTemplate, stillRuns } from "../job.ts";
import { type MapWrite, mapWriteOps } from "../kube/metadata_patch.ts";

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

/**
 * A smoke-test Job's verdict, kept on its node (annotation
 * `<prefix>/verified-job.<job>`, `keptKey`, JSON) once its outcome is seen: the Job's TTL may
 * remove it before the run that created it ends its post-success work, and
 * a re-run of a run stopped in between must not run the smoke test again.
 * The same shape as the per-node Job's kept success (`job`, `owner`,
 * `templateHash`, `at`), with the verdict.
 */
export interface SmokeVerdict {
  /** The smoke-test Job's name. */
  job: string;
  /** The owner Job's UID, when the run has one. */
  owner?: string;
  /** The smoke-test Job's template hash. */
  templateHash?: string;
  /**
   * When the smoke-test Job's outcome was decided (ISO 8601; job.ts
   * `outcomeAt`, the API server's stamps, else when the run saw it): compared
   * with the node's Job's end, also the API server's, never a run's clock.
   */
  at: string;
  /** Why the node failed its smoke test; none: it passed. */
  failed?: string;
}

/**
 * The verdict kept under `key` on a node that is for this smoke-test Job
 * (its name, owner and template hash, as the Job of this run would carry
 * them) and seen no earlier than the node's Job ended, else undefined: a
 * verdict of another owner or template, or of an earlier success of the
 * node's Job, proves nothing of this one.
 *
 * @param jobEndedAt when the node's Job succeeded (ms since the epoch)
 * @example
 * ```ts
 * keptVerdict({ metadata: { annotations: {} } }, "up/verified-job", { metadata: { name: "s" } },
 *   { templateHash: "up/template-hash" }, 0); // undefined
 * ```
 */
export function keptVerdict(
  node: Pick<V1Node, "metadata">,
  key: string,
  smoke: Pick<V1Job, "metadata">,
  keys: { templateHash: string },
  jobEndedAt: number,
): SmokeVerdict | undefined {
  const text = node.metadata?.annotations?.[key];
  if (!text) return undefined;
  let kept: SmokeVerdict;
  try {
    kept = JSON.parse(text);
  } catch {
    return undefined;
  }
  const want = verdictOf(smoke, keys, "");
  if (typeof kept !== "object" || kept === null || kept.job !== want.job) return undefined;
  if ((kept.owner ?? "") !== (want.owner ?? "")) return undefined;
  if ((kept.templateHash ?? "") !== (want.templateHash ?? "")) return undefined;
  const seen = seconds(kept.at);
  return seen !== undefined && seen >= Math.floor(jobEndedAt / 1000) ? kept : undefined;
}

/** The verdict of `smoke` seen at `at` (ISO 8601), `failed` saying why it failed. */
export function verdictOf(
  smoke: Pick<V1Job, "metadata">,
  keys: { templateHash: string },
  at: string,
  failed?: string,
): SmokeVerdict {
  const meta = smoke.metadata ?? {};
  const owner = meta.ownerReferences?.[0]?.uid;
  const templateHash = meta.annotations?.[keys.templateHash];
  return {
    job: meta.name ?? "",
    ...(owner && { owner }),
    ...(templateHash && { templateHash }),
    at,
    ...(failed && { failed }),
  };
}

/**
 * The JSON Patch that keeps `verdict` on the node under annotation `key`,
 * guarded by a `test` of the node's UID (a node replaced under its name is
 * refused). It assumes the node's annotations map (`writeMetadataMaps`
 * makes a missing one from a fresh read): an `add` of the map would replace
 * the annotations the node gained since it was read.
 */
export function verdictPatch(
  key: string,
  node: Pick<V1Node, "metadata">,
  verdict: SmokeVerdict,
): unknown[] {
  return [
    { op: "test", path: "/metadata/uid", value: node.metadata?.uid },
    ...mapWriteOps([verdictWrite(key, verdict)]),
  ];
}

/** The annotation write that keeps `verdict` under `key` ({@linkcode verdictPatch}'s). */
export function verdictWrite(key: string, verdict: SmokeVerdict): MapWrite {
  return { map: "annotations", key, value: JSON.stringify(verdict) };
}

/**
 * Why a smoke-test template's `ttlSecondsAfterFinished` is too short for the
 * verifier to see its Job's outcome, or undefined: the verifier reads the
 * Job every `pollSecs` (a GET, no watch), so a Job that finishes just after
 * one read must still be there at the next. One removed unseen fails its
 * node (verify.ts), since creating it again would run the smoke test twice.
 *
 * @example
 * ```ts
 * smokeTtlTooShort(template, 2); // with ttlSecondsAfterFinished: 0, "... at least 4 ..."
 * ```
 */
export function smokeTtlTooShort(template: JobTemplate, pollSecs: number): string | undefined {
  const ttl = template.spec.ttlSecondsAfterFinished;
  if (ttl === undefined || ttl >= 2 * pollSecs) return undefined;
  return `ttlSecondsAfterFinished ${ttl} may remove the smoke-test Job before the run sees ` +
    `its outcome (it reads it every ${pollSecs} s): set it to at least ${2 * pollSecs}`;
}
