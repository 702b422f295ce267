/**
 * The health gate's state, apart from its I/O: one value, and its
 * transitions `next(state, event)`. This is the one place that decides
 * "breached": the gate (`gate.ts`) feeds it the answers of Prometheus, the
 * outcome of writing the latch and what the pause it set looks like; the
 * engine asks {@linkcode blockedBy} before every start and
 * {@linkcode stopsBy} for the stop of the line.
 *
 * - `unchecked`: no answer yet (or a latch was just released): starts wait;
 * - `fresh`: the last answer breached nothing, and is at most the interval old;
 * - `stale`: the last clean answer is older than the interval: starts wait
 *   for the next one (a result at most the interval old, before every start);
 * - `outage`: Prometheus did not answer (no connection, 5xx, a timeout): an
 *   inconclusive measurement, not a breach (as Argo Rollouts' analysis has
 *   it); starts pause and resume by themselves when it answers;
 * - `nodata`: Prometheus answered, but a selector of a query matches no
 *   series (a dead exporter, a target gone stale) or the answer carries
 *   `warnings` (a partial answer of Thanos or Mimir): an empty vector then
 *   says nothing about health; starts pause and resume when the data is back;
 * - `breached`: an answer breached, or Prometheus rejected a query mid-run
 *   (400 `bad_data`, 422 `execution`: deterministic, so no outage that would
 *   clear); no start, and the run latches it;
 * - `latched`: the latch is written (the owner's `<P>/paused`, the pause
 *   file, or the exit latch ConfigMap); a pause holds until it was seen and
 *   then lifted by a person, whatever the metric does meanwhile;
 * - `unlatched`: the latch could not be written (403, a webhook or policy
 *   denied it): the run stops rather than hold a pause no one can lift.
 *
 * @module
 */

/** What breached: the query (or alert) and the value it returned. */
export interface Breach {
  /** The PromQL query, or `ALERTS{alertname=~"…"}` for `--gate-alerts`. */
  query: string;
  /** What breached, as said: the first sample's labels and value, or Prometheus's refusal. */
  value: string;
  /** When it was seen (ms since the epoch). */
  at: number;
  /** Prometheus rejected the query (4xx) rather than returned a value. */
  rejected?: boolean;
}

/** The gate's one state. */
export type GateState =
  | { kind: "unchecked" }
  | { kind: "fresh"; at: number }
  | { kind: "stale"; at: number }
  | { kind: "outage"; since: number; error: string }
  | { kind: "nodata"; since: number; detail: string }
  | { kind: "breached"; breach: Breach }
  | { kind: "latched"; breach: Breach; seen: boolean }
  | { kind: "unlatched"; breach: Breach; error: string };

/** What happens to the gate. */
export type GateEvent =
  /**
   * Every query answered at `at`; `breach` is the first that breached;
   * `noData` says which selector went dark, or the answer's warnings.
   */
  | { type: "answered"; at: number; breach?: Breach; noData?: string }
  /** Prometheus gave no usable answer at `at` (an outage). */
  | { type: "failed"; at: number; error: string }
  /** Prometheus rejected `query` (400, 422) at `at`. */
  | { type: "rejected"; at: number; query: string; error: string }
  /** Time passed: a clean answer older than `intervalMs` is stale. */
  | { type: "tick"; now: number; intervalMs: number }
  /** The run wrote its latch for the breach. */
  | { type: "latched" }
  /** The latch cannot be written, for good. */
  | { type: "latchRefused"; error: string }
  /** What the pause the run set looks like now. */
  | { type: "pause"; paused: boolean };

/** Whether `s` holds a breach (seen, latched, or unlatchable). */
export function isBreached(
  s: GateState,
): s is Extract<GateState, { kind: "breached" | "latched" | "unlatched" }> {
  return s.kind === "breached" || s.kind === "latched" || s.kind === "unlatched";
}

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
  // A breach outlives any answer: only lifting the latch releases it.
  if (isBreached(s) && e.type !== "latched" && e.type !== "latchRefused" && e.type !== "pause") {
    return s;
  }
  switch (e.type) {
    case "answered":
      if (e.breach) return { kind: "breached", breach: e.breach };
      if (e.noData === undefined) return { kind: "fresh", at: e.at };
      // The dark spell began with the first empty answer; its words follow the data.
      return { kind: "nodata", since: s.kind === "nodata" ? s.since : e.at, detail: e.noData };
    case "failed":
      return s.kind === "outage" ? s : { kind: "outage", since: e.at, error: e.error };
    case "rejected":
      return {
        kind: "breached",
        breach: { query: e.query, value: e.error, at: e.at, rejected: true },
      };
    case "tick":
      return s.kind === "fresh" && e.now - s.at > e.intervalMs ? { kind: "stale", at: s.at } : s;
    case "latched":
      return s.kind === "breached" ? { kind: "latched", breach: s.breach, seen: false } : s;
    case "latchRefused":
      return s.kind === "breached" ? { kind: "unlatched", breach: s.breach, error: e.error } : s;
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
      return `health gate: waiting for an answer of Prometheus ${url}`;
    case "stale":
      // Said, so that a Prometheus slower than the interval explains the stall.
      return `health gate: waiting for an answer of Prometheus ${url} (the last came at ${
        new Date(s.at).toISOString()
      }; a start needs one at most --gate-interval-secs old)`;
    case "outage":
      // The same words for the whole outage: the engine says each change.
      return `health gate: Prometheus ${url} unreachable since ${
        new Date(s.since).toISOString()
      } (${s.error}); starts resume by themselves when it answers`;
    case "nodata":
      return `health gate: no data since ${
        new Date(s.since).toISOString()
      }: ${s.detail}; starts resume by themselves when it is back`;
    case "breached":
    case "latched":
    case "unlatched":
      return `health gate breached: ${describeBreach(s.breach)}`;
  }
}

/**
 * Why the rollout stops now; undefined while it goes on (or only pauses).
 * With `--on-gate-breach exit` a breach stops it; a latch that cannot be
 * written stops it whatever the mode: a pause no one can lift is no pause.
 *
 * @example
 * ```ts
 * stopsBy({ kind: "fresh", at: 0 }, "exit"); // undefined
 * ```
 */
export function stopsBy(s: GateState, onBreach: "pause" | "exit"): string | undefined {
  if (s.kind === "unlatched") {
    return `a health gate was breached: ${
      describeBreach(s.breach)
    }, and the run cannot pause itself: ${s.error}`;
  }
  if (onBreach === "exit" && isBreached(s)) {
    return `a health gate was breached: ${describeBreach(s.breach)}`;
  }
  return undefined;
}

/**
 * Whether `s` is clean: the last answer breached nothing and had all its
 * data (`fresh`, or `stale` between two answers).
 */
export function isClean(s: GateState): boolean {
  return s.kind === "fresh" || s.kind === "stale";
}

/**
 * A breach in words: the query and the value (or Prometheus's refusal).
 *
 * @example
 * ```ts
 * describeBreach({ query: "up == 0", value: '{job="x"} 0', at: 0 });
 * // 'query "up == 0" returned {job="x"} 0'
 * ```
 */
export function describeBreach(b: Breach): string {
  return b.rejected
    ? `query ${JSON.stringify(b.query)} was rejected by Prometheus: ${b.value}`
    : `query ${JSON.stringify(b.query)} returned ${b.value}`;
}
