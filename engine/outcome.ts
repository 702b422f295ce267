/**
 * What the engine reports of its nodes, read from their states: each node's
 * final result, the facts that go into it (start, end, pods run), and the
 * progress counts. Pure: the engine passes the states and the time.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { outcomeAt } from "../job.ts";
import { FINAL, type NodeState, type Phase } from "./node_state.ts";
import type { OutageView } from "./outage.ts";
import type { NodeResult, Progress, Target, WaveView } from "./fanout_types.ts";

function timestamp(t: Date | string | undefined): number | undefined {
  return t === undefined ? undefined : new Date(t).getTime();
}

/**
 * When a finished Job ended by the API server's stamps: `completionTime`
 * (set on success), else the latest of the conditions that decided it (a
 * failed Job has no completionTime: `Failed`, which follows `FailureTarget`
 * once the pods are gone). Both are `metav1.Time`, written in whole
 * seconds, so the end lies within the second after the stamp: it is said as
 * that second's end, so a soak counted from it is never shorter than asked.
 *
 * @example
 * ```ts
 * jobEnd({ status: { completionTime: "2026-01-01T00:00:10Z" as never } }); // Date.parse("…:11Z")
 * ```
 */
export function jobEnd(job: Pick<V1Job, "status"> | undefined): number | undefined {
  // The Job's conditions are read in one place (job.ts outcomeAt); here only
  // the whole-second stamp is taken as the end of its second.
  const at = job && outcomeAt(job);
  if (at === undefined || Number.isNaN(at)) return undefined;
  return at % 1000 === 0 ? at + 1000 : at;
}

/** What {@linkcode resultFacts} reads besides the node's state. */
export interface Seen {
  /** The clock time now: a finish seen in this run ends now. */
  now: number;
  /** The Job, when it is known. */
  job?: V1Job;
  /** How many pods the Job ran, when they were listed. */
  pods?: number;
}

/**
 * What the final result says of a Job: when it started and ended, how many
 * pods it ran. An outcome counted from an earlier run takes its times from
 * the Job itself, since this run saw neither.
 *
 * @example
 * ```ts
 * resultFacts({ phase: "running", since: 5, startedAt: 5 }, { now: 9 });
 * // { startedAt: 5, finishedAt: 9, attempts: undefined }
 * ```
 */
export function resultFacts(s: NodeState, seen: Seen): Partial<NodeState> {
  const counted = s.counted ?? false;
  const job = seen.job;
  const started = s.startedAt !== undefined && !counted
    ? s.startedAt
    : timestamp(job?.metadata?.creationTimestamp) ?? s.startedAt;
  const st = job?.status;
  return {
    startedAt: started,
    finishedAt: counted ? timestamp(st?.completionTime) ?? started : seen.now,
    ...(counted && { completedAt: jobEnd(job) }),
    // The Job's counters can lag its terminal condition; its pods cannot.
    // SuccessCriteriaMet (Kubernetes 1.31+), which ends a node, is written
    // while the pods that met it are still in uncountedTerminatedPods.
    attempts: Math.max(
      seen.pods ?? 0,
      (st?.failed ?? 0) + (st?.succeeded ?? 0) +
        (st?.uncountedTerminatedPods?.failed?.length ?? 0) +
        (st?.uncountedTerminatedPods?.succeeded?.length ?? 0),
    ) || undefined,
  };
}

/**
 * A node's result from its state: final states as they are (`stillBlocked`
 * is said `blocked`); a node whose Job runs or is being explained is
 * `inFlight`; any other is `notStarted`.
 */
export function nodeResult(t: Target, s: NodeState): NodeResult {
  // Only with waves: a run without them reports as before.
  const base = { node: t.node.name, job: t.name, ...(t.wave !== undefined && { wave: t.wave }) };
  if (FINAL.has(s.phase)) {
    return {
      ...base,
      outcome: s.phase === "stillBlocked"
        ? "blocked"
        : s.phase as "succeeded" | "failed" | "unknown",
      reason: s.reason,
      startedAt: s.startedAt,
      finishedAt: s.finishedAt,
      attempts: s.attempts,
      // Only when there are some: a result without a drain reads as before.
      ...s.drainStartedAt !== undefined && { drainStartedAt: s.drainStartedAt },
      ...s.drainEndedAt !== undefined && { drainEndedAt: s.drainEndedAt },
      ...s.jobEndedAt !== undefined && { jobEndedAt: s.jobEndedAt },
    };
  }
  // An unsure node (its create went unanswered) may have a Job running on
  // it: a stop then says so, and a re-run adopts it by name.
  const inFlight = s.phase === "running" || s.phase === "finishing" ||
    s.phase === "explaining" || !!s.unsure;
  return { ...base, outcome: inFlight ? "inFlight" : "notStarted" };
}

/** What {@linkcode progressOf} counts from. */
export interface Tally {
  /** Nodes in a phase. */
  count(phase: Phase): number;
  /** Names that hold a slot. */
  inFlight: number;
  /** All nodes of the run. */
  total: number;
  /** Time since the dispatch began, in ms. */
  elapsedMs: number;
  /** The API outage under way, if any. */
  outage?: OutageView;
  /** The availability budget, as said. */
  budget?: string;
  /** Why starts are paused by the user, if they are. */
  paused?: string;
  /** What nodes in flight wait for, when they say. */
  waits?: string[];
  /** The open wave, with waves. */
  wave?: WaveView;
}

/** The progress counts; the rare ones (unknown, blocked) only when there are some. */
export function progressOf(t: Tally): Progress {
  return {
    succeeded: t.count("succeeded"),
    failed: t.count("failed"),
    unknown: t.count("unknown") || undefined,
    blocked: t.count("blocked") + t.count("stillBlocked") || undefined,
    inFlight: t.inFlight,
    draining: t.count("draining") || undefined,
    queued: t.count("queued"),
    total: t.total,
    elapsedMs: t.elapsedMs,
    outage: t.outage,
    budget: t.budget,
    paused: t.paused,
    waits: t.waits,
    ...(t.wave && { wave: t.wave }),
  };
}

/**
 * The time the rollout was not paused, for its rate and ETA: the engine's
 * elapsed time less the spans in which starts were paused (by the user's
 * `<P>/paused` or `--pause-file`, or by an API outage). Counting a pause
 * would make the rate fall and the ETA grow for time nobody could use.
 * Spans are seen from the progress reports, so they are as exact as those
 * (on the change itself on a terminal, else to the progress interval).
 *
 * @example
 * ```ts
 * const time = new ActiveTime();
 * const p = { succeeded: 1, failed: 0, inFlight: 0, queued: 1, total: 2 };
 * time.observe({ ...p, elapsedMs: 10_000, paused: "file /tmp/p" });
 * time.observe({ ...p, elapsedMs: 70_000 }); // 10_000: the minute paused is left out
 * ```
 */
export class ActiveTime {
  #pausedMs = 0;
  #since?: number;

  /**
   * Takes in one progress report, in order.
   *
   * @returns the elapsed time without the paused spans so far, in ms
   */
  observe(p: Progress): number {
    const paused = p.paused !== undefined || p.outage?.paused === true;
    if (paused && this.#since === undefined) this.#since = p.elapsedMs;
    if (!paused && this.#since !== undefined) {
      this.#pausedMs += p.elapsedMs - this.#since;
      this.#since = undefined;
    }
    const open = this.#since === undefined ? 0 : p.elapsedMs - this.#since;
    return p.elapsedMs - this.#pausedMs - open;
  }
}

/**
 * What a live progress line shows, as one string: a new line is drawn only
 * when it changes (the elapsed time alone does not count).
 */
export function progressKey(p: Progress): string {
  return `${p.succeeded}/${p.failed}/${p.inFlight}/${p.draining}/${p.queued}/${p.outage?.paused}/` +
    `${p.budget}/${p.paused}/${p.waits?.join(";")}/${p.wave?.wave}/${p.wave?.stage}`;
}
