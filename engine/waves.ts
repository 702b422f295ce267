/**
 * Pure wave arithmetic (`--waves 1,5%,25%,100%`, `--canary N`): the sizes
 * parsed from the flag, resolved against the selection into cumulative
 * counts, each target's wave, and the verdict on a wave's failures. No I/O:
 * the engine's wave state (`wave_state.ts`) asks these.
 *
 * @module
 */

import { percentOf } from "../base/percent.ts";
import { UsageError } from "../job.ts";

/** One entry of `--waves`: a node count, or a percentage of the selection. */
export type WaveSize = { count: number } | { percent: number };

/** The waves of a run: their sizes and where they came from. */
export interface WaveSpec {
  /** Cumulative sizes, in order; the last is the whole selection (added if missing). */
  sizes: WaveSize[];
  /** Made from `--canary N`: the first wave is called the canary, as before. */
  canary?: boolean;
}

function sizeText(s: WaveSize): string {
  return "count" in s ? String(s.count) : `${s.percent}%`;
}

/**
 * Parses `--waves`: comma-separated cumulative sizes, each a whole number of
 * nodes (≥ 1) or a percentage (> 0, ≤ 100), strictly growing among entries of
 * one kind. A count and a percentage can only be compared once the selection
 * is known: {@linkcode resolveWaves} merges a wave that does not grow.
 * `100%` is added when missing, so the last wave is the rest of the selection.
 *
 * @throws {UsageError} naming the entry and the fix
 * @example
 * ```ts
 * parseWaves("1,25%"); // [{ count: 1 }, { percent: 25 }, { percent: 100 }]
 * ```
 */
export function parseWaves(text: string, flag = "--waves"): WaveSize[] {
  const bad = (why: string) =>
    new UsageError(
      `Invalid ${flag} ${JSON.stringify(text)}: ${why}; ` +
        "write growing cumulative sizes such as 1,5%,25%,100%",
    );
  const sizes: WaveSize[] = [];
  for (const part of text.split(",").map((p) => p.trim())) {
    const m = part.match(/^(\d+(?:\.\d+)?)(%?)$/);
    if (!m || (!m[2] && !/^\d+$/.test(m[1]))) {
      throw bad(`${JSON.stringify(part)} is neither a whole number nor a percentage`);
    }
    const n = Number(m[1]);
    if (n === 0) throw bad(`a wave of ${part} holds no node`);
    if (m[2] && n > 100) throw bad(`${part} is over 100%`);
    const size: WaveSize = m[2] ? { percent: n } : { count: n };
    const before = sizes.findLast((s) => ("count" in s) === ("count" in size));
    if (before && valueOf(before) >= n) {
      throw bad(`${part} does not grow after ${sizeText(before)} (sizes are cumulative)`);
    }
    sizes.push(size);
  }
  const last = sizes.at(-1)!;
  if (!("percent" in last && last.percent === 100)) sizes.push({ percent: 100 });
  return sizes;
}

function valueOf(s: WaveSize): number {
  return "count" in s ? s.count : s.percent;
}

/**
 * The waves of `--canary N`: the first N nodes, then the rest.
 *
 * @example
 * ```ts
 * canaryWaves(3); // { sizes: [{ count: 3 }, { percent: 100 }], canary: true }
 * ```
 */
export function canaryWaves(n: number): WaveSpec {
  return { sizes: [{ count: n }, { percent: 100 }], canary: true };
}

/**
 * Resolves the sizes against a selection of `total` nodes into cumulative
 * counts: a percentage rounded down (as a Deployment rounds `maxUnavailable`,
 * and exactly: 2.3% of 3000 is 69),
 * each at least 1 and at most `total`; a wave that does not grow after
 * rounding (1,5% of 12 nodes) is merged into the one before, so no wave is
 * empty; the last is `total`.
 *
 * @example
 * ```ts
 * resolveWaves([{ count: 1 }, { percent: 25 }, { percent: 100 }], 12); // [1, 3, 12]
 * ```
 */
export function resolveWaves(sizes: readonly WaveSize[], total: number): number[] {
  const out: number[] = [];
  for (const s of sizes) {
    const raw = "count" in s ? s.count : percentOf(s.percent, total);
    const n = Math.min(total, Math.max(1, raw));
    if (n > (out.at(-1) ?? 0)) out.push(n);
  }
  if (total > 0 && out.at(-1) !== total) out.push(total);
  return out;
}

/**
 * Gives each item its wave (1-based) from the cumulative counts.
 *
 * @example
 * ```ts
 * withWaves(["a", "b", "c"], [1, 3], (x, wave) => `${x}${wave}`); // ["a1", "b2", "c2"]
 * ```
 */
export function withWaves<T, U>(
  items: readonly T[],
  counts: readonly number[],
  put: (item: T, wave: number) => U,
): U[] {
  let wave = 0;
  return items.map((item, i) => {
    while (wave < counts.length - 1 && i >= counts[wave]) wave++;
    return put(item, wave + 1);
  });
}

/**
 * How a wave is called: `the canary` for the first wave of `--canary`, else
 * `wave K of N`.
 */
export function waveLabel(wave: number, of: number, canary: boolean | undefined): string {
  return canary && wave === 1 ? "the canary" : `wave ${wave} of ${of}`;
}

/** What one node of a gated wave ended with, for {@linkcode waveVerdict}. */
export interface WaveOutcome {
  /** The node. */
  node: string;
  /** Its final outcome. */
  outcome: "succeeded" | "failed" | "unknown" | "blocked";
  /** Why it failed or is unknown. */
  reason?: string;
  /** It failed before it got a Job (a re-check, a drain, a stale Job's wait). */
  noJob?: boolean;
}

/**
 * Whether a node's end stops the next wave: an unknown outcome always (the
 * wave cannot be said healthy), and so a node that got no Job (still
 * blocked, or failed before its Job: a re-check, a drain refused), which
 * proved nothing either way (`--canary`'s "the rest only if all of them
 * succeed"); a failure of its Job only without a failure budget (with one,
 * failures count against `--max-failures` as anywhere in the run).
 *
 * @returns why the rollout stops, or undefined
 * @example
 * ```ts
 * waveVerdict("the canary", { node: "c1", outcome: "failed" }, false); // "the canary failed on c1"
 * ```
 */
export function waveVerdict(
  label: string,
  o: WaveOutcome,
  budget: boolean,
): string | undefined {
  if (o.outcome === "unknown") return `${label}'s outcome on ${o.node} is unknown: ${o.reason}`;
  if (o.outcome === "blocked" || (o.outcome === "failed" && o.noJob)) {
    return `${label} got no Job on ${o.node}: ${o.reason}`;
  }
  if (o.outcome === "failed" && !budget) return `${label} failed on ${o.node}`;
  return undefined;
}
