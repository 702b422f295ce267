/**
 * The engine's admission decision, apart from its I/O: whether one more node
 * may start now, and which queued node it is. The engine reads the facts from
 * its one `Map<job name, NodeState>` and acts on the answer; every rule
 * (parallelism, waves, availability budget, outage probe, failure domains)
 * is a plain value here with its own table test.
 *
 * @module
 */

import { nextStartable } from "./safety.ts";

/** What the slots look like when the engine considers one more start. */
export interface SlotFacts {
  /** Nodes holding a slot; a leftover whose finished Job is being deleted holds none. */
  held: number;
  /** How many may hold a slot at once: `--parallelism`, or less while a wave is gated. */
  limit: number;
  /** Starts the availability budget still allows (`Infinity` without one). */
  room: number;
  /** Starts are paused because the API is out. */
  outage: boolean;
  /** Nodes whose start (re-read, claim, create) is under way. */
  creating: number;
  /** The outage allows its next probe start now. */
  mayProbe: boolean;
}

/**
 * What the engine may do about one more start:
 * - `full`: every slot (or the budget) is taken; wait for one to free;
 * - `waitForProbe`: the API is out and its probe is under way or not yet due;
 * - `probe`: start one node as the outage's probe, then no more;
 * - `start`: start one node and consider the next.
 */
export type Admission = "full" | "waitForProbe" | "probe" | "start";

/**
 * Decides whether one more node may start.
 *
 * @example
 * ```ts
 * admit({ held: 3, limit: 4, room: Infinity, outage: false, creating: 0, mayProbe: true });
 * // "start"
 * ```
 */
export function admit(f: SlotFacts): Admission {
  if (f.held >= f.limit || f.room <= 0) return "full";
  if (!f.outage) return "start";
  // During an outage one start at a time probes the API: a create that
  // succeeds ends the outage, and a burst of them would all fail alike.
  if (f.creating > 0 || !f.mayProbe) return "waitForProbe";
  return "probe";
}

/** What decides which queued node starts next. */
export interface PickRules {
  /** Whether a name is still queued: names that left the queue another way are skipped. */
  queued: (name: string) => boolean;
  /** While a wave is gated (`--waves`, `--canary`): whether a name may start now. */
  allowed?: (name: string) => boolean;
  /**
   * The failure domain of a name with `--max-per-topology`; undefined for a
   * leftover of an earlier owner, which belongs to none.
   */
  domainOf?: (name: string) => string | undefined;
  /** The names holding a slot, counted per domain. */
  inFlight: Iterable<string>;
  /** Jobs in flight per domain at most (`--max-per-topology`). */
  maxPerDomain?: number;
}

/**
 * Takes the next node to start out of the dispatch queue.
 *
 * Without domains this is the first queued (and, while a wave is gated,
 * allowed) name from the queue's head, taken in place: the queue is in
 * dispatch order, so the open wave's names are at its head and the common
 * case stays O(1) per start at N=10,000. With domains the queue is first rid
 * of names no longer queued and the first startable one is cut out.
 *
 * @param queue The dispatch order; consumed: use the returned `queue` after
 * @returns the name to start (undefined when none may), and what is left of the queue
 * @example
 * ```ts
 * takeNext(["a", "b"], { queued: () => true, inFlight: [] }); // { name: "a", queue: ["b"] }
 * ```
 */
export function takeNext(
  queue: string[],
  rules: PickRules,
): { name: string | undefined; queue: string[] } {
  const { queued, allowed, domainOf } = rules;
  if (!domainOf) return takeFirst(queue, queued, allowed);
  const rest = queue.filter(queued);
  const candidates = allowed ? rest.filter(allowed) : rest;
  const byDomain = (n: string) => domainOf?.(n) ?? "";
  const j = nextStartable(
    candidates,
    byDomain,
    countByDomain(rules.inFlight, domainOf),
    rules.maxPerDomain,
  );
  if (j < 0) return { name: undefined, queue: rest };
  const name = candidates[j];
  rest.splice(rest.indexOf(name), 1);
  return { name, queue: rest };
}

/**
 * The first queued, allowed name of the queue, cut out; names no longer
 * queued that come before it are dropped on the way.
 */
function takeFirst(
  queue: string[],
  queued: (name: string) => boolean,
  allowed: ((name: string) => boolean) | undefined,
): { name: string | undefined; queue: string[] } {
  // A name enters the queue only on becoming queued, so it is there once;
  // names that left by another way (failed, adopted) are skipped here.
  while (queue.length && !queued(queue[0])) queue.shift();
  if (!allowed) return { name: queue.shift(), queue };
  for (let i = 0; i < queue.length; i++) {
    const name = queue[i];
    // A name of a later wave (or a leftover) stays where it is; the open
    // wave's names are near the head, since the queue is in dispatch order.
    if (!queued(name) || !allowed(name)) continue;
    queue.splice(i, 1);
    return { name, queue };
  }
  return { name: undefined, queue };
}

/**
 * Counts names per failure domain; names without a domain (leftovers) and
 * runs without domains count nowhere.
 *
 * @example
 * ```ts
 * countByDomain(["a1", "a2", "b1"], (n) => n[0]); // Map { "a" => 2, "b" => 1 }
 * ```
 */
export function countByDomain(
  names: Iterable<string>,
  domainOf: ((name: string) => string | undefined) | undefined,
): Map<string, number> {
  const counts = new Map<string, number>();
  if (!domainOf) return counts;
  for (const name of names) {
    const d = domainOf(name);
    if (d === undefined) continue;
    counts.set(d, (counts.get(d) ?? 0) + 1);
  }
  return counts;
}
