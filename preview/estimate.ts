/**
 * `--estimate-from REPORT`: how long a planned rollout takes, from a previous
 * run's JSON report (report/report.ts writes each node's start and end). Pure:
 * the file's text in, the per-node median and the estimate out.
 *
 * @module
 */

import { UsageError } from "../job.ts";

/** What a previous run's report says about how long a node takes. */
export interface NodeDurations {
  /** The report's path, as given. */
  from: string;
  /** Seconds from start to end of each node that has both, in the report's order. */
  seconds: number[];
  /** Their median. */
  medianSecs: number;
}

/** The report's parts the estimate reads; anything else in it is left alone. */
interface ReportShape {
  kind?: unknown;
  version?: unknown;
  nodes?: unknown;
}

/**
 * The median of `values` (the mean of the middle two of an even count), the
 * estimate's per-node duration: one node whose drain waited on a budget for
 * an hour moves a mean far more than it moves a median.
 *
 * @example
 * ```ts
 * median([3, 1, 10, 2]); // 2.5
 * ```
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Reads the per-node durations out of a JSON report's text: every node with a
 * `start` and an `end` counts (a failed node held its slot as long as it ran
 * too); skipped and never-started nodes have neither.
 *
 * @param path how the file is named in the error
 * @throws {UsageError} one line naming the file and what is wrong with it
 * @example
 * ```ts
 * readDurations(JSON.stringify({ kind: "JobDispatcherReport", version: 1, nodes: [
 *   { name: "n1", start: "2026-01-01T00:00:00Z", end: "2026-01-01T00:01:00Z" },
 * ] }), "r.json").medianSecs; // 60
 * ```
 */
export function readDurations(text: string, path: string): NodeDurations {
  const bad = (why: string) =>
    new UsageError(
      `Invalid --estimate-from ${path}: ${why}; give the JSON report of an earlier run ` +
        "(--report PATH)",
    );
  let report: ReportShape;
  try {
    report = JSON.parse(text);
  } catch (e) {
    throw bad(`not JSON (${(e as Error).message.split("\n")[0]})`);
  }
  if (typeof report !== "object" || report === null || report.kind !== "JobDispatcherReport") {
    throw bad('not a job-dispatcher report (no "kind": "JobDispatcherReport")');
  }
  if (report.version !== 1) throw bad(`report version ${JSON.stringify(report.version)}, not 1`);
  if (!Array.isArray(report.nodes)) throw bad('it has no "nodes" list');
  const seconds: number[] = [];
  for (const n of report.nodes as { name?: unknown; start?: unknown; end?: unknown }[]) {
    if (typeof n?.start !== "string" || typeof n?.end !== "string") continue;
    const secs = (Date.parse(n.end) - Date.parse(n.start)) / 1000;
    if (!Number.isFinite(secs) || secs < 0) {
      throw bad(`node ${String(n.name)} has no valid start and end (${n.start} .. ${n.end})`);
    }
    seconds.push(secs);
  }
  if (!seconds.length) throw bad("no node in it has both a start and an end");
  return { from: path, seconds, medianSecs: median(seconds) };
}

/** What the estimate of a plan is computed from. */
export interface EstimateInput {
  /** Each wave's node count, in order (one wave without `--waves`). */
  waveSizes: readonly number[];
  /** How many nodes run at once: `--parallelism`, less where the budget allows fewer. */
  concurrency: number;
  /**
   * With `--max-per-topology`: the failure domain of each of a wave's nodes,
   * in dispatch order, for every wave in the order of `waveSizes`.
   */
  waveDomains?: readonly (readonly string[])[];
  /** `--max-per-topology`'s M: Jobs in flight per domain at most. */
  maxPerDomain?: number;
  /** Seconds one node takes (the median of the report). */
  nodeSecs: number;
  /** `--post-node-delay-secs`: a finished node holds its slot that long. @default 0 */
  postNodeDelaySecs?: number;
  /** `--wave-soak-secs`, held after every wave but the last. @default 0 */
  soakSecs?: number;
  /** How many of each wave's nodes have an eviction refused now (in the order of `waveSizes`). */
  waveWaits?: readonly number[];
  /** How long such a node may wait: the drain timeout. @default 0 */
  waitSecs?: number;
}

/** An estimate and its parts. */
export interface Estimate {
  /** The whole rollout, in seconds. */
  totalSecs: number;
  /** Each wave's share: its rounds of at most `concurrency` nodes, then its soak. */
  waves: { wave: number; concurrency: number; rounds: number; secs: number; soakSecs: number }[];
}

/**
 * How many of one wave's nodes run at once: `concurrency`, and with
 * `--max-per-topology` at most M per failure domain, so at most M times the
 * number of domains among the wave's nodes (waves never overlap: a wave's
 * domains are the only ones it can use). The engine counts every node
 * without the label as one domain (engine/safety.ts `NO_DOMAIN`), so those
 * share M slots.
 *
 * @param domains how many domains the wave's nodes are in; undefined: no per-domain limit
 * @example
 * ```ts
 * waveConcurrency(10, 2, 2); // 4
 * ```
 */
export function waveConcurrency(
  concurrency: number,
  domains: number | undefined,
  maxPerDomain: number | undefined,
): number {
  const c = Math.max(1, concurrency);
  if (!domains || maxPerDomain === undefined) return c;
  return Math.min(c, maxPerDomain * domains);
}

/**
 * How many rounds the engine takes for nodes of these domains, in dispatch
 * order, when every node takes as long: each round it starts, as it does
 * for each free slot (engine/admission.ts `takeNext`), the first queued node
 * whose domain has fewer than M in flight, until `slots` run. A domain
 * with many nodes takes rounds of its own while the others' slots stay free,
 * and the engine spends early slots on small domains first: neither
 * `ceil(n / slots)` nor the largest domain alone says it.
 *
 * @example
 * ```ts
 * domainRounds(["a", "b", "a", "a"], 2, 1); // 3: a and b, then a, then a
 * ```
 */
export function domainRounds(
  domains: readonly string[],
  slots: number,
  maxPerDomain: number,
): number {
  // Each domain's nodes by their place in the order; the heap holds, for
  // each domain that may start one more this round, the place of its next.
  const places = new Map<string, number[]>();
  domains.forEach((d, i) => places.has(d) ? places.get(d)!.push(i) : places.set(d, [i]));
  const queues = [...places.values()];
  const next = queues.map(() => 0);
  const heap = new MinHeap(queues.map((q, k) => [q[0], k]));
  let rounds = 0;
  for (let left = domains.length; left > 0; rounds++) {
    const full: number[] = [];
    const started = new Map<number, number>();
    for (let n = 0; n < Math.max(1, slots) && heap.size; n++, left--) {
      const k = heap.pop()![1];
      started.set(k, (started.get(k) ?? 0) + 1);
      if (++next[k] === queues[k].length) continue;
      if (started.get(k)! < maxPerDomain) heap.push([queues[k][next[k]], k]);
      else full.push(k);
    }
    for (const k of full) heap.push([queues[k][next[k]], k]);
  }
  return rounds;
}

/** A binary min-heap of [place, domain] pairs, by place. */
class MinHeap {
  #a: [number, number][] = [];
  constructor(items: [number, number][]) {
    for (const it of items) this.push(it);
  }
  get size(): number {
    return this.#a.length;
  }
  push(it: [number, number]): void {
    const a = this.#a;
    a.push(it);
    for (let i = a.length - 1; i > 0;) {
      const up = (i - 1) >> 1;
      if (a[up][0] <= a[i][0]) break;
      [a[up], a[i]] = [a[i], a[up]];
      i = up;
    }
  }
  pop(): [number, number] | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (!a.length || !last) return top;
    a[0] = last;
    for (let i = 0;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < a.length && a[l][0] < a[m][0]) m = l;
      if (r < a.length && a[r][0] < a[m][0]) m = r;
      if (m === i) break;
      [a[m], a[i]] = [a[i], a[m]];
      i = m;
    }
    return top;
  }
}

/**
 * Estimates a rollout: each wave runs in rounds of its concurrency
 * ({@linkcode waveConcurrency}), `ceil(size / concurrency)` rounds, or with
 * `--max-per-topology` the rounds of the engine's per-domain rule
 * ({@linkcode domainRounds}); each round is as long as one node
 * (`nodeSecs + postNodeDelaySecs`); every wave but the last that runs a
 * node is followed by its soak. Waves never overlap (the next opens once the last node of one
 * ended and its soak elapsed), so their times add up.
 *
 * @example
 * ```ts
 * estimateRollout({ waveSizes: [1, 4], concurrency: 2, nodeSecs: 60, soakSecs: 30 }).totalSecs;
 * // 60 + 30 + 2 * 60 = 210
 * ```
 */
export function estimateRollout(e: EstimateInput): Estimate {
  const per = e.nodeSecs + (e.postNodeDelaySecs ?? 0);
  const max = e.maxPerDomain;
  const waves = e.waveSizes.map((size, i) => {
    const domains = max === undefined ? undefined : e.waveDomains?.[i];
    const concurrency = waveConcurrency(e.concurrency, domains && new Set(domains).size, max);
    const rounds = domains && max !== undefined
      ? domainRounds(domains, concurrency, max)
      : Math.ceil(size / concurrency);
    // A wave whose every node was counted from an earlier run's Job (size 0
    // here) soaks only what is left since its last Job completed
    // (engine/wave_state.ts), which the estimate counts as none.
    const soakSecs = size > 0 && i < e.waveSizes.length - 1 ? e.soakSecs ?? 0 : 0;
    // A node whose eviction a budget refuses now holds its slot up to the
    // drain timeout (the drain sends the eviction again until then): the
    // refused nodes of a wave wait side by side, `concurrency` at a time.
    const waits = Math.ceil((e.waveWaits?.[i] ?? 0) / concurrency) * (e.waitSecs ?? 0);
    return { wave: i + 1, concurrency, rounds, secs: rounds * per + waits, soakSecs };
  });
  return { totalSecs: waves.reduce((sum, w) => sum + w.secs + w.soakSecs, 0), waves };
}

/**
 * A duration as people read it: `45s`, `12m30s`, `3h05m`.
 *
 * @example
 * ```ts
 * formatDuration(3900); // "1h05m"
 * ```
 */
export function formatDuration(secs: number): string {
  const s = Math.round(secs);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}
