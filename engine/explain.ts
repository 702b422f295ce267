/**
 * What a Job's pods tell about it: why it failed, why it stalls. The Job's
 * own conditions say only `BackoffLimitExceeded` or nothing at all; its pods
 * name the failing container, its exit code and message, or the reason a pod
 * stays Pending. Reading them is optional (`JobApi.listPods`) and stops for
 * the run at the first 403: RBAC may grant Jobs without pods.
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";
import type { JobOutcome } from "../job.ts";
import { ApiError } from "../kube/client.ts";
import type { NodeState } from "./node_state.ts";
import { podFailure, stallReason } from "../nodes/pods.ts";
import type { JobApi } from "./fanout_types.ts";
import { errorText } from "../base/errors.ts";

/** How long a Job may run with a Pending pod before it is reported as stalled. */
export const STALL_AFTER_MS = 120_000;

/** How often a stall is reported again. */
export const STALL_REPEAT_MS = 300_000;

/** Lists a Job's pods for the engine, until the API refuses it once. */
export class PodReader {
  #api: Pick<JobApi, "listPods">;
  #notice: (message: string) => void;
  #unreadable = false;

  /**
   * Reads pods through `api`.
   *
   * @param notice told once when the API refuses to list pods (403)
   */
  constructor(api: Pick<JobApi, "listPods">, notice: (message: string) => void) {
    this.#api = api;
    this.#notice = notice;
  }

  /** Whether pods can be read: the API lists them, and has not refused to. */
  get readable(): boolean {
    return !!this.#api.listPods && !this.#unreadable;
  }

  /** The pods of a Job; undefined when they cannot be read (a 403 says so once). */
  async list(jobName: string): Promise<V1Pod[] | undefined> {
    const listPods = this.#api.listPods;
    if (!listPods || this.#unreadable) return undefined;
    try {
      return await listPods.call(this.#api, jobName);
    } catch (e) {
      this.#forbidden(e);
      return undefined;
    }
  }

  #forbidden(e: unknown): void {
    if (e instanceof ApiError && e.status === 403 && !this.#unreadable) {
      this.#unreadable = true;
      this.#notice(`cannot list pods (${errorText(e)}); failures and stalls are not explained`);
    }
  }
}

/**
 * A failed Job's reason from its condition alone: its message, then its
 * reason in brackets.
 *
 * @example
 * ```ts
 * failureReason({ reason: "DeadlineExceeded" }); // "DeadlineExceeded"
 * ```
 */
export function failureReason(status: { reason: string; message?: string }): string {
  return status.message ? `${status.message} [${status.reason}]` : status.reason;
}

/**
 * A failed Job's reason from its pods when they tell (the failing container,
 * exit code, termination message), with the condition's reason in brackets;
 * else from its condition alone.
 */
export function explainedReason(
  status: JobOutcome & { phase: "failed" },
  pods: V1Pod[] | undefined,
): string {
  const why = pods && podFailure(pods);
  return why ? `${why} [${status.reason}]` : failureReason(status);
}

/**
 * When a running node is next due for a stall check: `afterMs` after its Job
 * started, then every `repeatMs` after the last check.
 *
 * @returns the ms until then; zero or less when due
 */
export function stallDue(s: NodeState, now: number, afterMs: number, repeatMs: number): number {
  const due = s.stallCheckedAt === undefined ? s.startedAt! + afterMs : s.stallCheckedAt + repeatMs;
  return due - now;
}

/**
 * Why a Job stalls, when every one of its pods is stuck Pending for a reason
 * (the first pod's); undefined when none is, or some pod got further.
 */
export function stalledBy(pods: V1Pod[]): string | undefined {
  const reasons = pods.map(stallReason).filter((r): r is string => r !== undefined);
  if (reasons.length === 0 || reasons.length < pods.length) return undefined;
  return reasons[0];
}
