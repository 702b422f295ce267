/**
 * The health gate's state, apart from its I/O: one value, and its
 * transitions `next(state, event)`. The gate (`gate.ts`) feeds it the
 * answers of Prometheus and what the pause it set looks like; the engine
 * asks {@linkcode blockedBy} before every start.
 *
 * - `unchecked`: no answer yet (or a latch was just released): starts wait;
 * - `fresh`: the last answer breached nothing, and is at most the interval old;
 * - `stale`: the last clean answer is older than the interval: starts wait
 *   for the next one (a result at most the interval old, before every start);
 * - `outage`: Prometheus did not answer: an inconclusive measurement, not a
 *   breach (as Argo Rollouts' analysis has it); starts pause and resume by
 *   themselves when it answers again;
 * - `breached`: an answer breached; no start, and the run latches it;
 * - `latched`: the run set its pause (the owner's `<P>/paused`, the pause
 *   file); the latch holds until that pause was seen and then lifted by a
 *   person, whatever the metric does meanwhile.
 *
 * @module
 */

/** What breached: the query (or alert) and the value it returned. */
export interface Breach {
  /** The PromQL query, or `ALERTS{alertname=~"…"}` for `--gate-alerts`. */
  query: string;
  /** What breached, as said: the first sample's labels and value. */
  value: string;
  /** When it was seen (ms since the epoch). */
  at: number;
}

/** The gate's one state. */
export type GateState =
  | { kind: "unchecked" }
  | { kind: "fresh"; at: number }
  | { kind: "stale"; at: number }
  | { kind: "outage"; since: number; error: string }
  | { kind: "breached"; breach: Breach }
  | { kind: "latched"; breach: Breach; seen: boolean };

/** What happens to the gate. */
export type GateEvent =
  /** Every query answered at `at`; `breach` is the first that breached. */
  | { type: "answered"; at: number; breach?: Breach }
  /** Prometheus gave no usable answer at `at`. */
  | { type: "failed"; at: number; error: string }
  /** Time passed: a clean answer older than `intervalMs` is stale. */
  | { type: "tick"; now: number; intervalMs: number }
  /** The run set its pause for the breach. */
  | { type: "latched" }
  /** What the pause the run set looks like now. */
  | { type: "pause"; paused: boolean };

/**
 * The gate's next state.
 *
 * @example
 * ```ts
 * next({ kind: "fresh", at: 0 }, { type: "tick", now: 31_000, intervalMs: 30_000 });
 * // { kind: "stale", at: 0 }
 * ```
 */
export function next(s: GateState, e: GateEvent): GateState {
  switch (e.type) {
    case "answered":
      // A latch outlives any answer: only lifting the pause releases it.
      if (s.kind === "breached" || s.kind === "latched") return s;
      return e.breach ? { kind: "breached", breach: e.breach } : { kind: "fresh", at: e.at };
    case "failed":
      if (s.kind === "breached" || s.kind === "latched") return s;
      // The outage began with the first failure; later ones keep its start.
      return s.kind === "outage" ? s : { kind: "outage", since: e.at, error: e.error };
    case "tick":
      return s.kind === "fresh" && e.now - s.at > e.intervalMs ? { kind: "stale", at: s.at } : s;
    case "latched":
      return s.kind === "breached" ? { kind: "latched", breach: s.breach, seen: false } : s;
    case "pause":
      if (s.kind !== "latched") return s;
      // Seen first, then lifted: a person said go on. Until the pause was
      // seen (the owner's watch lags the patch), its absence says nothing.
      if (e.paused) return s.seen ? s : { ...s, seen: true };
      return s.seen ? { kind: "unchecked" } : s;
  }
}

/**
 * Why no Job may start now, as the progress line says it; undefined when one may.
 *
 * @param url where Prometheus answers, for the outage's words
 * @example
 * ```ts
 * blockedBy({ kind: "fresh", at: 0 }, "http://prom:9090"); // undefined
 * ```
 */
export function blockedBy(s: GateState, url: string): string | undefined {
  switch (s.kind) {
    case "fresh":
      return undefined;
    case "unchecked":
    case "stale":
      return `health gate: waiting for an answer of Prometheus ${url}`;
    case "outage":
      // The same words for the whole outage: the engine says each change.
      return `health gate: Prometheus ${url} unreachable since ${
        new Date(s.since).toISOString()
      } (${s.error}); starts resume by themselves when it answers`;
    case "breached":
    case "latched":
      return `health gate breached: ${describeBreach(s.breach)}`;
  }
}

/**
 * A breach in words: the query and the value.
 *
 * @example
 * ```ts
 * describeBreach({ query: "up == 0", value: '{job="x"} 0', at: 0 });
 * // 'query "up == 0" returned {job="x"} 0'
 * ```
 */
export function describeBreach(b: Breach): string {
  return `query ${JSON.stringify(b.query)} returned ${b.value}`;
}
