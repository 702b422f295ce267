/**
 * How a run ends: the summary lines of its results and its exit code.
 *
 * @module
 */

import { labelValue, type RunIdentity } from "../job.ts";
import { counted } from "../base/plural.ts";
import type { NodeResult } from "../engine/fanout_types.ts";
import type { Logger } from "./log.ts";
import type { ApiStats } from "../kube/client.ts";
import { jsonReport, junitReport, outcomeCounts, type ReportInput } from "./report.ts";
import { htmlTimeline } from "./timeline.ts";

/** Exit codes, as documented in `--help`. */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  cluster: 3,
  window: 4,
  gate: 5,
  sigint: 130,
  sigterm: 143,
} as const;

/**
 * Logs the outcome of one fan-out: the counts, each failed and blocked node,
 * and the command that shows the failed Jobs' logs.
 *
 * @param what the event name and first word of the line (`summary`, `cleanup`)
 * @returns the counts, as said: `3 succeeded, 1 failed of 4 nodes in 12.0 s`
 */
export function summarise(
  results: NodeResult[],
  log: Logger,
  ns: string,
  run: RunIdentity,
  started: number,
  what = "summary",
): string {
  const n = outcomeCounts(results);
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  const parts = [`${n.succeeded} succeeded`, `${n.failed} failed`];
  // Not a failure: the Job was collected (ttlSecondsAfterFinished) before
  // its outcome was seen and no pod was left to tell.
  if (n.unknown) parts.push(`${n.unknown} unknown (collected before seen)`);
  if (n.blocked) parts.push(`${n.blocked} blocked`);
  if (n.inFlight) parts.push(`${n.inFlight} still running`);
  if (n.notStarted) parts.push(`${n.notStarted} not started`);
  const summary = `${parts.join(", ")} of ${nodes(results.length)} in ${secs} s`;
  log.info(`${what}: ${summary}`, { event: what, ...n, total: results.length });
  const failed = results.filter((r) => r.outcome === "failed");
  for (const r of failed) {
    const hint = failureHint(r);
    const what = r.startedAt === undefined ? "no job (failed before it)" : `job ${r.job}`;
    log.warn(`failed node ${r.node}: ${what}: ${r.reason}${hint ? `; see ${hint}` : ""}`, {
      event: "nodeFailed",
      ...r,
      hint,
    });
  }
  for (const r of results.filter((r) => r.outcome === "blocked")) {
    log.warn(`blocked node ${r.node}: no job: ${r.reason}`, { event: "nodeBlocked", ...r });
  }
  // Jobs still in flight at the end: the run was interrupted (a failure
  // budget or a canary lets them finish). Say how to finish the rollout.
  if (n.inFlight) {
    log.warn(
      `${n.inFlight} ${n.inFlight === 1 ? "Job still runs" : "Jobs still run"}: ` +
        `a re-run of the same command adopts ${n.inFlight === 1 ? "it" : "them"}` +
        (n.notStarted ? ` and starts the ${nodes(n.notStarted)} not started` : ""),
      { event: "resumeHint", inFlight: n.inFlight, notStarted: n.notStarted },
    );
  }
  for (const line of logsHints(failed, ns, run)) log.info(line);
  return summary;
}

/** How many failed nodes get their own `logs:` line; the rest are counted. */
export const LOGS_HINTS_MAX = 5;

/**
 * The `logs:` lines of a run's end: one `kubectl logs` per failed node that
 * had a Job (only a Job that was created has logs to read), selecting its
 * pods by the run's owner and node labels, so that a failure's logs are not
 * lost among every pod of the run; past {@linkcode LOGS_HINTS_MAX}, one line
 * counts the rest.
 *
 * @example
 * ```ts
 * logsHints([{ node: "n1", job: "up-n1", outcome: "failed", startedAt: 1 }], "ops", run);
 * // ["logs: kubectl logs -n ops -l job-dispatcher/owner=up,job-dispatcher/node=n1 --all-containers --prefix"]
 * ```
 */
export function logsHints(failed: readonly NodeResult[], ns: string, run: RunIdentity): string[] {
  const ran = failed.filter((r) => r.startedAt !== undefined);
  const owner = `${run.keys.owner}=${labelValue(run.prefix)}`;
  const lines = ran.slice(0, LOGS_HINTS_MAX).map((r) =>
    `logs: kubectl logs -n ${ns} -l ${owner},${run.keys.node}=${
      labelValue(r.node)
    } --all-containers --prefix`
  );
  const more = ran.length - LOGS_HINTS_MAX;
  if (more > 0) {
    lines.push(
      `logs: ${counted(more, "more failed node")}: the same with ${run.keys.node}=NODE ` +
        "for each failed node above",
    );
  }
  return lines;
}

/**
 * What to look at for a node that failed before its Job was created: the
 * PodDisruptionBudgets that refused its drain (`kubectl get pdb`); a pod
 * kubectl would refuse names its overriding flag in the reason itself.
 * Undefined for a Job's failure (its logs tell) and for anything else.
 *
 * @example
 * ```ts
 * failureHint({ node: "n1", job: "j", outcome: "failed",
 *   reason: "drain did not finish within 9 s; blocked by PodDisruptionBudget shop/web-pdb (…)" });
 * // "kubectl get pdb -n shop web-pdb"
 * ```
 */
export function failureHint(r: NodeResult): string | undefined {
  if (r.startedAt !== undefined || !r.reason) return undefined;
  const budgets = [...r.reason.matchAll(/PodDisruptionBudget ([^/\s]+)\/([^\s:;,)]+)/g)];
  if (!budgets.length) return undefined;
  const byNs = new Map<string, Set<string>>();
  for (const [, ns, name] of budgets) byNs.set(ns, (byNs.get(ns) ?? new Set()).add(name));
  return [...byNs].map(([ns, names]) => `kubectl get pdb -n ${ns} ${[...names].join(" ")}`)
    .join("; ");
}

/** A count and its noun (base/plural.ts), re-exported for the report's users. */
export { counted };

/** `1 node`, `6 nodes`. */
function nodes(n: number): string {
  return counted(n, "node");
}

/**
 * The lines about 429 answers at the end of a run: the API server throttling
 * this client, and apart from it PodDisruptionBudgets refusing evictions
 * (the Eviction API answers 429 TooManyRequests for those too, but a budget
 * doing its job is not a loaded server), each with its fields for JSON.
 *
 * @example
 * ```ts
 * apiStatsLines({ throttled: 3, budgetRefusals: 0 });
 * // [["the API server throttled 3 requests (429)", { event: "throttled", count: 3 }]]
 * ```
 */
export function apiStatsLines(
  stats: Pick<ApiStats, "throttled" | "budgetRefusals">,
): [string, Record<string, unknown>][] {
  const lines: [string, Record<string, unknown>][] = [];
  if (stats.throttled) {
    lines.push([
      `the API server throttled ${counted(stats.throttled, "request")} (429)`,
      { event: "throttled", count: stats.throttled },
    ]);
  }
  if (stats.budgetRefusals) {
    lines.push([
      `PodDisruptionBudgets refused ${counted(stats.budgetRefusals, "eviction")} ` +
      "(429, cause DisruptionBudget; retried by the drain), not API throttling",
      { event: "budgetRefusals", count: stats.budgetRefusals },
    ]);
  }
  return lines;
}

/** What {@linkcode exitCode} judges. */
export interface Ending {
  /** The results of the cleanup fan-out (`--cleanup-job-template`), if any. */
  cleanup: readonly NodeResult[];
  /** The results of the main fan-out, if it ran. */
  results: readonly NodeResult[];
  /** Why the rollout stopped early, if it did. */
  stoppedBy?: string;
  /** The maintenance window closed with nodes not started. */
  windowClosed?: boolean;
  /** A health gate stopped the rollout (`--on-gate-breach exit`). */
  gateStopped?: boolean;
}

/**
 * The exit code of a run from its results: a failed or blocked node or a
 * stopped rollout fails it; a closed window says "run again later", unless
 * something failed, which needs a look first.
 *
 * @example
 * ```ts
 * exitCode({ cleanup: [], results: [], windowClosed: true }); // EXIT.window
 * ```
 */
export function exitCode(e: Ending): number {
  const cleanupFailed = e.cleanup.some((r) => r.outcome === "failed");
  let code: number = cleanupFailed ? EXIT.failed : EXIT.ok;
  if (e.stoppedBy || e.results.some((r) => r.outcome === "failed" || r.outcome === "blocked")) {
    code = EXIT.failed;
  }
  // Stopped by a health gate, and nothing failed: the fleet, not a node,
  // needs a look, and the next run refuses until the latch is cleared.
  const nodeFailed = e.results.some((r) => r.outcome === "failed" || r.outcome === "blocked");
  if (e.gateStopped && !nodeFailed && !cleanupFailed) code = EXIT.gate;
  if (e.windowClosed && code === EXIT.ok) code = EXIT.window;
  return code;
}

/** What {@linkcode writeReport} writes, and where. */
export interface ReportFile {
  /** The file (`--report`). */
  path: string;
  /** Its format (`--report-format`). */
  format: "json" | "junit" | "html";
  /** The run, as the report tells it. */
  input: ReportInput;
  /** Writes a file. */
  writeFile: (path: string, text: string) => void;
  /** The logger, told where the report went or why it could not. */
  log: Logger;
}

/**
 * Writes each of the run's reports (`--report`, repeatable) from one input.
 *
 * @returns whether all were written: a run whose report is lost fails
 */
export function writeReports(
  files: readonly { path: string; format: ReportFile["format"] }[],
  r: Omit<ReportFile, "path" | "format">,
): boolean {
  // Each is tried: one folder that cannot be written loses no other report.
  return files.map((f) => writeReport({ ...r, ...f })).every(Boolean);
}

/**
 * Writes the run's report (`--report`) and says where; a report that cannot
 * be written is logged as an error.
 *
 * @returns whether it was written: a run whose report is lost fails
 */
export function writeReport(r: ReportFile): boolean {
  try {
    const text = r.format === "junit"
      ? junitReport(r.input)
      : r.format === "html"
      ? htmlTimeline(r.input)
      : jsonReport(r.input);
    r.writeFile(r.path, text);
    r.log.info(`report: ${r.path} (${r.format})`);
    return true;
  } catch (e) {
    r.log.error(`Cannot write report ${r.path}: ${(e as Error).message}`);
    return false;
  }
}
