/**
 * One state per node: where a node's Job stands, as one value, and the pure
 * transition function the engine applies to it. The engine keeps a
 * `Map<job name, NodeState>`; scheduling (slots, canary, failure budget,
 * domains, timeouts) reads that map and nothing else.
 *
 * Further states (a wave boundary, a soak, a latched gate) are to be more
 * values of {@linkcode Phase} and more edges of {@linkcode next}, as blocked,
 * draining and paused were, not more collections.
 *
 * @module
 */

/**
 * Where a node stands:
 * - `queued`: waits for a slot;
 * - `waitingStale`: a stale Job of its name still runs; it is never deleted
 *   mid-run, so the node waits, holding a slot (its pods run);
 * - `deleting`: a finished stale Job of its name is being deleted;
 * - `creating`: re-read, claim and create under way;
 * - `draining`: the node is being cordoned and its pods evicted before its
 *   Job is created (`--cordon`, `--drain`); it holds a slot;
 * - `running`: its Job runs;
 * - `finishing`: its Job succeeded; the post-success work runs, or waits for
 *   the Job's `Complete` condition;
 * - `explaining`: its Job failed or vanished; its pods are read for the reason;
 * - `blocked`: a pod of `--blocking-pod-selector` runs on it; it waits
 *   without a slot and goes back to the queue to be checked again;
 * - `succeeded`, `failed`: final;
 * - `stillBlocked`: final; still blocked at `--blocked-timeout-secs`, no Job;
 * - `unknown`: final; its Job was collected before its outcome was seen.
 */
export type Phase =
  | "queued"
  | "waitingStale"
  | "deleting"
  | "creating"
  | "draining"
  | "running"
  | "finishing"
  | "explaining"
  | "blocked"
  | "stillBlocked"
  | "succeeded"
  | "failed"
  | "unknown";

/** One node's progress. */
export interface NodeState {
  /** Where it stands. */
  phase: Phase;
  /** When the phase began (clock ms). */
  since: number;
  /** The UID of the Job the phase is about: ours when running, the stale one when waiting or deleting. */
  uid?: string;
  /** When its Job started (clock ms). */
  startedAt?: number;
  /** Why it failed, or why its outcome is unknown. */
  reason?: string;
  /** The outcome was counted from an earlier run's Job. */
  counted?: boolean;
  /** A stale Job of its name was removed first: its Job replaces it. */
  replaced?: boolean;
  /** The post-success work has begun (finishing). */
  afterStarted?: boolean;
  /** When it was last checked for a stall (clock ms). */
  stallCheckedAt?: number;
  /** When its Job finished (final states). */
  finishedAt?: number;
  /**
   * When its Job completed by the API server's stamp, for an outcome counted
   * from an earlier run: its wave's soak counts from it (wave_state.ts).
   */
  completedAt?: number;
  /** Pods its Job ran, when known (final states). */
  attempts?: number;
  /** When it was first found blocked (clock ms), for `--blocked-timeout-secs`. */
  blockedAt?: number;
  /** When its drain began and ended (clock ms; `--cordon`, `--drain`), for the timeline. */
  drainStartedAt?: number;
  drainEndedAt?: number;
  /**
   * When its Job succeeded (ms since the epoch): the Job's own time
   * (`completionTime`, else its success condition's), else when the run saw
   * it. The post-success work (verification) begins then, and judges the
   * node by it.
   */
  jobEndedAt?: number;
  /**
   * A create of its Job went unanswered (a timeout, a 504) and may have been
   * stored: a Job of its name that is ours is adopted wherever it is seen,
   * finished or being deleted, and never created a second time.
   */
  unsure?: boolean;
  /**
   * Queued again by an outage after this run cordoned (and drained) it: it
   * is given back if the run ends before it starts again.
   */
  leftPrepared?: boolean;
  /** What the node waits for while it holds its slot, for the progress line. */
  waitingFor?: string;
  /** Pods of its running Job that failed so far (the Job retries them up to its backoffLimit). */
  podFailures?: number;
  /**
   * When the stale Job it waits for got its decided outcome (`SuccessCriteriaMet`
   * or `FailureTarget`), and which: the final condition is waited for only
   * so long (deadlines.ts), since pods stuck terminating on an unreachable
   * node would hold it forever.
   */
  decided?: { at: number; condition: "SuccessCriteriaMet" | "FailureTarget" };
}

/** What happened to a node. */
export type NodeEvent =
  | { type: "start" }
  | { type: "requeue"; prepared?: boolean }
  | { type: "prepare" }
  | { type: "prepared" }
  | { type: "blocked"; reason: string }
  | { type: "unblock" }
  | { type: "blockedTimeout"; reason: string }
  | { type: "created"; uid: string }
  | { type: "adopted"; uid: string; counted?: boolean }
  | { type: "staleFound"; uid: string; active: boolean }
  | { type: "staleFinished" }
  | { type: "staleGone" }
  | {
    type: "succeeded";
    afterWork: boolean;
    final: boolean;
    counted?: boolean;
    /** When the Job says its success was decided (job.ts `outcomeAt`); else now. */
    endedAt?: number;
  }
  | { type: "complete" }
  | { type: "afterDone"; reason?: string }
  | { type: "failed"; reason?: string; explain: boolean; counted?: boolean }
  | { type: "explained"; reason: string }
  | { type: "collected"; reason: string }
  | { type: "fail"; reason: string }
  | { type: "unsure" }
  | { type: "note"; waitingFor?: string; podFailures?: number };

/** Phases whose node holds a slot of `--parallelism`. */
export const IN_FLIGHT: ReadonlySet<Phase> = new Set([
  "waitingStale",
  "deleting",
  "creating",
  "draining",
  "running",
  "finishing",
]);

/** Phases that are final. */
export const FINAL: ReadonlySet<Phase> = new Set([
  "succeeded",
  "failed",
  "unknown",
  "stillBlocked",
]);

/**
 * The state after `event` at clock time `at`; the same state when the event
 * does not apply to its phase (a late watch event, a duplicate).
 *
 * @example
 * ```ts
 * next({ phase: "queued", since: 0 }, { type: "start" }, 5).phase; // "creating"
 * ```
 */
export function next(s: NodeState, e: NodeEvent, at: number): NodeState {
  const to = (phase: Phase, extra: Partial<NodeState> = {}): NodeState => ({
    ...s,
    phase,
    since: at,
    // What it waited for is over with the phase.
    waitingFor: undefined,
    ...extra,
  });
  if (FINAL.has(s.phase)) return s;
  switch (e.type) {
    case "start":
      return s.phase === "queued" ? to("creating", { leftPrepared: undefined }) : s;
    case "requeue":
      // Never from finishing: a success once seen is kept. The Job may be
      // gone by the next look (ttlSecondsAfterFinished, a foreground
      // deletion), and a node that went back to the queue would get a second
      // Job; only the post-success work is retried, holding the slot.
      return s.phase === "creating" || s.phase === "draining"
        ? to("queued", { leftPrepared: e.prepared || undefined })
        : s;
    case "prepare":
      return s.phase === "creating" ? to("draining", { drainStartedAt: at }) : s;
    case "prepared":
      return s.phase === "draining" ? to("creating", { drainEndedAt: at }) : s;
    case "blocked":
      return s.phase === "creating"
        ? to("blocked", { reason: e.reason, blockedAt: s.blockedAt ?? at })
        : s;
    case "unblock":
      return s.phase === "blocked" ? to("queued") : s;
    case "blockedTimeout":
      return s.phase === "blocked" ? to("stillBlocked", { reason: e.reason }) : s;
    case "created":
      return s.phase === "creating"
        ? to("running", { uid: e.uid, startedAt: at, unsure: undefined })
        : s;
    case "adopted":
      // A start already seen keeps its time: `--node-timeout-secs` counts
      // from the first, not from each time the node's Job is found again.
      return s.phase === "queued" || s.phase === "creating"
        ? to("running", {
          uid: e.uid,
          startedAt: s.startedAt ?? at,
          counted: e.counted,
          unsure: undefined,
        })
        : s;
    case "staleFound":
      return s.phase === "queued" || s.phase === "creating"
        ? to(e.active ? "waitingStale" : "deleting", { uid: e.uid, replaced: true })
        : s;
    case "staleFinished":
      return s.phase === "waitingStale" ? to("deleting") : s;
    case "staleGone":
      return s.phase === "waitingStale" || s.phase === "deleting"
        ? to("queued", { uid: undefined, decided: undefined })
        : s;
    case "succeeded":
      if (!["running", "queued", "creating", "explaining"].includes(s.phase)) return s;
      if (!e.afterWork) return to("succeeded", { counted: e.counted });
      // The Job's own time where it says one: a success counted from an
      // earlier run ended then, not when this run saw it, and verification
      // judges the node's pods against it after the Job's TTL removed it.
      return to("finishing", {
        counted: e.counted,
        afterStarted: e.final,
        jobEndedAt: e.endedAt ?? at,
      });
    case "complete":
      return s.phase === "finishing" && !s.afterStarted ? { ...s, afterStarted: true } : s;
    case "afterDone":
      if (s.phase !== "finishing") return s;
      return e.reason ? to("failed", { reason: e.reason }) : to("succeeded");
    case "failed":
      if (s.phase !== "running" && s.phase !== "queued" && s.phase !== "creating") return s;
      return e.explain
        ? to("explaining", { counted: e.counted, reason: e.reason })
        : to("failed", { counted: e.counted, reason: e.reason });
    case "explained":
      return s.phase === "explaining" ? to("failed", { reason: e.reason }) : s;
    case "collected":
      // Also an unsure create's: its Job may have run and been collected unseen.
      return s.phase === "running" || s.phase === "explaining" ||
          (s.phase === "creating" && s.unsure)
        ? to("unknown", { reason: e.reason })
        : s;
    case "fail":
      return to("failed", { reason: e.reason });
    case "unsure":
      return s.phase === "creating" ? { ...s, unsure: true } : s;
    case "note":
      if (!IN_FLIGHT.has(s.phase)) return s;
      return { ...s, waitingFor: e.waitingFor, podFailures: e.podFailures ?? s.podFailures };
  }
}
