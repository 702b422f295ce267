/**
 * Pure rollout-safety decisions: the failure budget, slots per failure domain
 * and the dispatch order (the waves and their verdict are `waves.ts`). The fan-out engine asks these; none
 * of them does I/O, so each rule is tested on plain values.
 *
 * @module
 */

import { percentOf } from "../base/percent.ts";
import { UsageError } from "../job.ts";

/**
 * Turns `--max-failures N|P%` into a number of nodes. A percentage is of the
 * nodes in the run, rounded down, as a Deployment rounds `maxUnavailable`.
 *
 * @throws {UsageError} when the text is neither a whole number nor a percentage
 * @example
 * ```ts
 * failureBudget("10%", 45); // 4
 * failureBudget("2", 45); // 2
 * ```
 */
export function failureBudget(text: string, total: number): number {
  const m = text.trim().match(/^(\d+)(%?)$/);
  if (!m || (m[2] && Number(m[1]) > 100)) {
    throw new UsageError(
      `Invalid --max-failures ${
        JSON.stringify(text)
      }: expected a whole number or a percentage such as 10%`,
    );
  }
  return m[2] ? percentOf(m[1], total) : Number(m[1]);
}

/**
 * Whether `failed` failures exceed a budget of `budget`: like a Job's
 * `backoffLimit` and `maxFailedIndexes`, the budget is how many failures are
 * tolerated, so 0 stops at the first.
 */
export function budgetExceeded(failed: number, budget: number | undefined): boolean {
  return budget !== undefined && failed > budget;
}

/** A per-domain limit from `--max-per-topology KEY=M`. */
export interface TopologyLimit {
  /** The node label whose values are the domains. */
  key: string;
  /** Most Jobs in flight per domain. */
  max: number;
}

/**
 * Parses `--max-per-topology KEY=M`.
 *
 * @throws {UsageError} naming the flag when the text is malformed
 * @example
 * ```ts
 * parseTopologyLimit("topology.kubernetes.io/zone=1"); // { key: "topology.kubernetes.io/zone", max: 1 }
 * ```
 */
export function parseTopologyLimit(text: string): TopologyLimit {
  const eq = text.lastIndexOf("=");
  const key = text.slice(0, eq).trim();
  const max = text.slice(eq + 1).trim();
  if (eq <= 0 || !key || !/^\d+$/.test(max) || Number(max) < 1) {
    throw new UsageError(
      `Invalid --max-per-topology ${JSON.stringify(text)}: expected LABEL=M with M ≥ 1, ` +
        "e.g. topology.kubernetes.io/zone=1",
    );
  }
  return { key, max: Number(max) };
}

/** The domain of a node without the label: one domain of its own for all such nodes. */
export const NO_DOMAIN = "<none>";

/** The domain of a node's labels under `key`. */
export function domainOf(labels: Record<string, string> | undefined, key: string): string {
  return labels?.[key] ?? NO_DOMAIN;
}

/**
 * The index of the first pending item whose domain has a free slot, or -1.
 * Items in a full domain are passed over, not dropped, so a busy zone never
 * blocks a quiet one.
 *
 * @param inFlight Jobs in flight per domain
 */
export function nextStartable<T>(
  pending: readonly T[],
  domain: (item: T) => string,
  inFlight: ReadonlyMap<string, number>,
  maxPerDomain: number | undefined,
): number {
  if (maxPerDomain === undefined) return pending.length ? 0 : -1;
  return pending.findIndex((item) => (inFlight.get(domain(item)) ?? 0) < maxPerDomain);
}

/**
 * Orders items so that domains take turns (round robin over domains in order
 * of first appearance, each domain keeping its own order): with a per-domain
 * limit, the head of the queue then always holds startable work, and no
 * domain waits for another to drain.
 *
 * @example
 * ```ts
 * interleave(["a1", "a2", "b1"], (s) => s[0]); // ["a1", "b1", "a2"]
 * ```
 */
export function interleave<T>(items: readonly T[], domain: (item: T) => string): T[] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const d = domain(item);
    if (!groups.has(d)) groups.set(d, []);
    groups.get(d)!.push(item);
  }
  const queues = [...groups.values()];
  const out: T[] = [];
  for (let round = 0; out.length < items.length; round++) {
    for (const q of queues) if (round < q.length) out.push(q[round]);
  }
  return out;
}

/**
 * A small seeded generator (mulberry32): the same seed gives the same order
 * on every machine and release, so a random rollout can be replayed.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The dispatch orders of `--order`. */
export type Order = "name" | "random" | "zone-interleaved";

/**
 * Puts items in dispatch order: by name (as given), shuffled with a seed, or
 * interleaved over zones. A per-domain limit interleaves over its own key in
 * any case, after the chosen order.
 */
export function orderItems<T>(
  items: readonly T[],
  opts: {
    order: Order;
    seed: number;
    zone: (item: T) => string;
    limitDomain?: (item: T) => string;
  },
): T[] {
  let out = [...items];
  if (opts.order === "random") {
    const random = seededRandom(opts.seed);
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
  } else if (opts.order === "zone-interleaved") {
    out = interleave(out, opts.zone);
  }
  return opts.limitDomain ? interleave(out, opts.limitDomain) : out;
}
