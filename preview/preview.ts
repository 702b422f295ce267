/**
 * **preview/** owns what a run would do, said before it does anything:
 * `--dry-run=plan` (the plan step's nodes grouped by wave, the skipped ones,
 * the budget and window now, with `--drain` each node's evictions judged by
 * the API server's dry run) and `--estimate-from` (a duration from an earlier
 * run's report). It reads the cluster and writes nothing to it. `run/` calls
 * it with the plan it made; it imports `report/` and the layers below, never
 * `run/`, `status/` or `cli/`.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { V1Node } from "@kubernetes/client-node";
import { UsageError } from "../job.ts";
import type { Kube } from "../kube/client.ts";
import type { MaintenanceConfig } from "../maintenance/config.ts";
import { resolveMaxUnavailable, unavailableCount } from "../maintenance/budget.ts";
import { closesAt, describeNextOpening, nextOpening } from "../maintenance/window.ts";
import { type NodeDurations, readDurations } from "./estimate.ts";
import { previewDrains } from "./drain_preview.ts";
import {
  type BudgetNow,
  buildPreview,
  estimateBasis,
  getsNewJob,
  type PreviewInput,
  previewText,
  type WindowNow,
} from "./plan_view.ts";

/** How the plan is printed: `-o json` (one object) or the text view. */
export type PreviewOutput = "text" | "json";

/** What the run's plan step hands the preview. */
export interface PreviewSource
  extends Omit<PreviewInput, "budget" | "window" | "soakSecs" | "postNodeDelaySecs"> {
  /** Every node the selection matched (the budget counts their unavailability). */
  matched: readonly V1Node[];
  /** The run's maintenance: drain, budget, windows, post-node delay. */
  maintenance: MaintenanceConfig;
  /** `--wave-soak-secs`. */
  soakSecs: number;
  /** How to print it. */
  output: PreviewOutput;
}

/** What the preview needs from its surroundings. */
export interface PreviewContext {
  /** The API client: reads, and dry-run evictions only. */
  kube: Kube;
  /** Writes the plan to stdout. */
  stdout: (text: string) => void;
  /** The time now (ms). @default Date.now() */
  now?: number;
}

/**
 * Reads `--estimate-from`'s report, before anything is asked of the cluster.
 *
 * @param readFile the file's text, or undefined when it cannot be read
 * @throws {UsageError} one line naming the file and what is wrong with it
 */
export function loadDurations(
  path: string,
  readFile: (path: string) => string | undefined,
): NodeDurations {
  const text = readFile(path);
  if (text === undefined) {
    throw new UsageError(
      `Cannot read --estimate-from ${path}: no such file or not readable; ` +
        "give the JSON report of an earlier run (--report PATH)",
    );
  }
  return readDurations(text, path);
}

/** `--max-unavailable` against the selection as it is now. */
function budgetNow(src: PreviewSource): BudgetNow | undefined {
  const spec = src.maintenance.maxUnavailable;
  if (!spec) return undefined;
  return {
    spec: spec.text,
    max: resolveMaxUnavailable(spec, src.matched.length),
    of: src.matched.length,
    unavailable: unavailableCount(src.matched, new Set()),
  };
}

/** The `--window`s at `now`: open (and until when) or the next opening, as the run says it. */
function windowNow(src: PreviewSource, now: number): WindowNow | undefined {
  const windows = src.maintenance.windows;
  if (!windows.length) return undefined;
  const closes = closesAt(windows, now);
  return {
    specs: windows.map((w) => w.spec),
    openNow: closes !== undefined,
    closesAt: closes,
    nextOpening: nextOpening(windows, now),
    nextOpeningText: describeNextOpening(windows, now),
  };
}

/**
 * Prints what the run would do (`--dry-run=plan`): reads the nodes' pods and
 * sends dry-run evictions with `--drain`; creates, cordons and writes nothing.
 *
 * @returns exit code 0, or 1 when a budget would block a node for good
 * @throws {ApiError} when the cluster refuses a read
 */
export async function previewPlan(src: PreviewSource, ctx: PreviewContext): Promise<number> {
  const now = ctx.now ?? Date.now();
  const drain = src.maintenance.drain;
  // Only a node that would get a new Job is cordoned and drained: one whose
  // Job runs or has ended is met as it is.
  const drained = src.targets.filter((t) => getsNewJob(t.action)).map((t) => t.node);
  const drains = drain ? await previewDrains(ctx.kube, drained, drain) : undefined;
  const preview = buildPreview({
    ...src,
    targets: src.targets.map((t) => ({ ...t, drain: drains?.get(t.node) })),
    budget: budgetNow(src),
    window: windowNow(src, now),
    postNodeDelaySecs: src.maintenance.postNodeDelaySecs,
    drainTimeoutSecs: drain?.timeoutSecs,
  });
  ctx.stdout(src.output === "json" ? JSON.stringify(preview, null, 2) : previewText(preview));
  // A node whose budget never allows an eviction would fail in the run: the
  // plan fails as the run would (exit 1, some nodes failed), so a pipeline
  // that plans first stops there.
  return preview.counts.blockedForGood ? 1 : 0;
}

/**
 * The line a real run logs with `--estimate-from`: the plan's estimate, so
 * that the command line planned is the one run, unchanged.
 *
 * @example
 * ```ts
 * // "estimate: 3m00s for 3 nodes (per-node median 1m00s of 4 nodes in r.json; 1 at once)"
 * ```
 */
export function estimateLine(src: Omit<PreviewSource, "output">): string | undefined {
  const v = buildPreview({
    ...src,
    budget: budgetNow({ ...src, output: "text" }),
    postNodeDelaySecs: src.maintenance.postNodeDelaySecs,
  });
  if (!v.estimate) return undefined;
  const e = v.estimate;
  return `estimate: ${e.text} for ${counted(v.counts.toRun, "node")} ${estimateBasis(e)}`;
}
