/**
 * The health gates' state (gates/state.ts) as the run record keeps it
 * (`record.ts` {@linkcode RecordGates}): a few short words, every detail cut
 * to {@linkcode MAX_GATE_DETAIL}, so that a long `--gate-query` or a long
 * error of Prometheus cannot grow the record.
 *
 * @module
 */

import { describeBreach, type GateState, isBreached } from "../gates/state.ts";
import { MAX_GATE_DETAIL, type RecordGates } from "./record.ts";

/** What the record says of the gates besides their state. */
export interface GatesFacts {
  /** How many queries the gates measure (`--gate-alerts` counts as one). */
  queries: number;
  /** When Prometheus was last asked (ms since the epoch). */
  checkedAt?: number;
  /** The command that lifts a latch, as the breach's log line says it. */
  lift?: string;
  /**
   * The breach of a gate's latch that holds the run's pause though this
   * process's gate never saw it (a pod retried under the same owner): a
   * latch all the same, never `ok` because the metric recovered since.
   */
  heldFor?: string;
}

/**
 * At most {@linkcode MAX_GATE_DETAIL} UTF-16 units (at most 3 bytes of UTF-8
 * each), never half a surrogate pair: a label value may be an emoji, and a
 * lone surrogate is no text (the terminal prints U+FFFD, `isWellFormed` fails).
 */
const cut = (s: string) => {
  if (s.length <= MAX_GATE_DETAIL) return s;
  const kept = s.slice(0, MAX_GATE_DETAIL - 1);
  const last = kept.charCodeAt(kept.length - 1);
  return `${last >= 0xd800 && last <= 0xdbff ? kept.slice(0, -1) : kept}…`;
};

/**
 * The gates' state in the record's words.
 *
 * @example
 * ```ts
 * recordGates({ kind: "fresh", at: 0 }, { queries: 2, checkedAt: 0 });
 * // { state: "ok", queries: 2, checkedAt: 0 }
 * ```
 */
export function recordGates(s: GateState, f: GatesFacts): RecordGates {
  const base = { queries: f.queries, checkedAt: f.checkedAt };
  if (f.heldFor !== undefined && !isBreached(s)) {
    return { state: "latched", ...base, detail: cut(f.heldFor), lift: f.lift };
  }
  switch (s.kind) {
    case "fresh":
      return { state: "ok", ...base };
    case "unchecked":
    case "stale":
      return { state: "waiting", ...base };
    case "outage":
      return { state: "outage", ...base, since: s.since, detail: cut(s.error) };
    case "nodata":
      return { state: "nodata", ...base, since: s.since, detail: cut(s.detail) };
    case "breached":
    case "unlatched":
      return { state: s.kind, ...base, detail: cut(describeBreach(s.breach)) };
    case "latched":
      return { state: "latched", ...base, detail: cut(describeBreach(s.breach)), lift: f.lift };
  }
}
