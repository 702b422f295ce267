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
  /** Seconds one node takes (the median of the report). */
  nodeSecs: number;
  /** `--post-node-delay-secs`: a finished node holds its slot that long. @default 0 */
  postNodeDelaySecs?: number;
  /** `--wave-soak-secs`, held after every wave but the last. @default 0 */
  soakSecs?: number;
}

/** An estimate and its parts. */
export interface Estimate {
  /** The whole rollout, in seconds. */
  totalSecs: number;
  /** Each wave's share: its rounds of `concurrency` nodes, then its soak. */
  waves: { wave: number; rounds: number; secs: number; soakSecs: number }[];
}

/**
 * Estimates a rollout: each wave runs in rounds of `concurrency` nodes
 * (`ceil(size / concurrency)` rounds), each round as long as one node
 * (`nodeSecs + postNodeDelaySecs`); every wave but the last is followed by its
 * soak. Waves never overlap (the next opens once the last node of one ended
 * and its soak elapsed), so their times add up.
 *
 * @example
 * ```ts
 * estimateRollout({ waveSizes: [1, 4], concurrency: 2, nodeSecs: 60, soakSecs: 30 }).totalSecs;
 * // 60 + 30 + 2 * 60 = 210
 * ```
 */
export function estimateRollout(e: EstimateInput): Estimate {
  const per = e.nodeSecs + (e.postNodeDelaySecs ?? 0);
  const concurrency = Math.max(1, e.concurrency);
  const waves = e.waveSizes.map((size, i) => {
    const rounds = Math.ceil(size / concurrency);
    const soakSecs = i < e.waveSizes.length - 1 ? e.soakSecs ?? 0 : 0;
    return { wave: i + 1, rounds, secs: rounds * per, soakSecs };
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
