/**
 * What one run is configured with and what it needs from its surroundings.
 * `run/` composes each concern's configuration into {@linkcode RunConfig};
 * `cli/` builds it from the flags, and nothing below `run/` sees it whole.
 *
 * @module
 */

import type { LogFormat } from "../report/log.ts";
import type { Kube } from "../kube/client.ts";
import type { Logger } from "../report/log.ts";
import type { ReportInput } from "../report/report.ts";
import type { LabelConfig, TaintSelector } from "../nodes/lifecycle.ts";
import type { Order, TopologyLimit } from "../engine/safety.ts";
import type { WaveSpec } from "../engine/waves.ts";
import type { PauseGate } from "../engine/pause.ts";
import type { VerifyConfig } from "../verify/verify.ts";
import type { MaintenanceConfig } from "../maintenance/config.ts";
import type { GateConfig } from "../gates/config.ts";
import type { PreviewOutput } from "../preview/preview.ts";

/** A report's format: `json` (also `--estimate-from`'s input), `junit`, `html`. */
export type ReportFormat = "json" | "junit" | "html";

/** One report file and its format. */
export interface ReportTarget {
  /** Where to write it. */
  path: string;
  /** Its format. */
  format: ReportFormat;
}

/**
 * The reports a run writes: `reports`, or the one `report` names.
 *
 * @example
 * ```ts
 * reportFiles({ report: "r.json", reportFormat: "json" }); // [{ path: "r.json", format: "json" }]
 * ```
 */
export function reportFiles(
  c: Pick<RunConfig, "report" | "reportFormat" | "reports">,
): ReportTarget[] {
  return c.reports ?? (c.report ? [{ path: c.report, format: c.reportFormat }] : []);
}

/** Everything a run is configured with: what the command line says, minus `--help` and `--version`. */
export interface RunConfig {
  /** Path of the Job template; "-" reads stdin. */
  jobTemplate: string;
  /** Prefix of every Job name; default: the template's metadata.name. */
  namePrefix?: string;
  /** Namespace of the Jobs; resolved later when unset. */
  namespace?: string;
  /** Explicit node names. */
  nodes?: string[];
  /** Label selectors; a node matching any is selected. */
  nodeSelectors: string[];
  /** A field selector every selected node must match. */
  nodeFieldSelector?: string;
  /** Page size of node LISTs. @default 500 */
  nodePageSize: number;
  /** Dispatch to tainted nodes too. */
  ignoreNodeTaints: boolean;
  /** How long to wait for the selection to appear and settle. @default 0 */
  waitForNodesSecs: number;
  /** An empty selection fails the run (exit 2) instead of ending it with nothing to do. @default false */
  failIfNoNodes?: boolean;
  /** How long the eligible set must stay unchanged. @default 15 */
  nodeSettleSecs: number;
  /** Most Jobs in flight. @default 100 */
  parallelism: number;
  /** LIST interval when a watch is not possible. @default 5 */
  pollIntervalSecs: number;
  /** Never watch the Jobs; LIST every poll interval. */
  pollOnly: boolean;
  /** How often the progress line is printed. @default 10 */
  progressIntervalSecs: number;
  /** Most API requests in flight at once, watches aside. @default 16 */
  kubeApiConcurrency: number;
  /** API requests a second, client-side; 0 turns the limit off. @default 50 */
  kubeApiQps: number;
  /** API requests that may start at once after a quiet spell. @default 300 */
  kubeApiBurst: number;
  /** How long to retry while the API server has never answered; 0 fails at once. @default 90 */
  apiWaitSecs: number;
  /** The owner Job, by name. */
  ownerJobName?: string;
  /** A pod whose Job owner owns the run. */
  ownerJobFromPod?: string;
  /** Prefix of the tracking label keys. @default "job-dispatcher" */
  trackingLabelPrefix: string;
  /** Exit 0 when another live owner's run holds this prefix. */
  yieldToLiveRun: boolean;
  /** Kubeconfig file. */
  kubeconfig?: string;
  /** Kubeconfig context. */
  context?: string;
  /** Print (client) or validate (server) the Jobs, or print the plan (plan), instead of running them. */
  dryRun?: "client" | "server" | "plan";
  /** How `--dry-run=plan` prints the plan (`-o`). @default "text" */
  output: PreviewOutput;
  /** A previous run's JSON report, for the estimate of the duration. */
  estimateFrom?: string;
  /** Failure budget, `N` or `P%`; exceeding it stops the rollout. */
  maxFailures?: string;
  /** Waves (`--waves`, or `--canary N` as `--waves N,100%`). */
  waves?: WaveSpec;
  /** Seconds to hold after each wave before the next starts. @default 0 */
  waveSoakSecs: number;
  /** Node verification after each Job succeeded (`--verify-*`). */
  verify?: VerifyConfig;
  /** At most M Jobs in flight per value of a node label. */
  maxPerTopology?: TopologyLimit;
  /** Seconds after which an unfinished node fails with reason timeout. */
  nodeTimeoutSecs?: number;
  /** Delete timed-out Jobs (foreground). */
  deleteTimedOut: boolean;
  /** How Jobs are pinned to their node. @default "nodeName" */
  pin: "nodeName" | "affinity";
  /** Dispatch order. @default "name" */
  order: Order;
  /** Seed of `--order random`. @default 0 */
  seed: number;
  /** Seconds a Job's pod may stay Pending before it is reported as stalled. @default 120 */
  stallWarnSecs: number;
  /** Log format. @default "text" */
  logFormat: LogFormat;
  /** Which node outcomes are recorded on the nodes (Events, marks). @default "all" */
  nodeRecords: "all" | "failures" | "none";
  /** Where to write the report file (the first of {@linkcode RunConfig.reports}). */
  report?: string;
  /** The report's format (the first's). @default "json" */
  reportFormat: ReportFormat;
  /**
   * Every report to write (`--report` repeated): JSON for `--estimate-from`
   * and HTML for people from one run. Undefined: the one of `report`.
   */
  reports?: ReportTarget[];
  /** `--metrics-addr HOST:PORT`: serve Prometheus metrics and /healthz there while the run lives. */
  metricsAddr?: string;
  /** After the run, serve /metrics this many seconds, for every scraper. @default 0 */
  metricsLingerSecs: number;
  /** The node labels this run owns and writes (`--node-label-key` and friends). */
  nodeLabels?: LabelConfig;
  /** Seconds to wait for Ready after a node's Job succeeded; 0: no wait. @default 300 */
  waitNodeReadySecs: number;
  /** Runtime handlers of which a node must serve one before it is labelled. */
  requireNodeHandlers: string[];
  /** Taints lifted once the node is labelled. */
  removeNodeTaints: TaintSelector[];
  /** Warn when a kubelet's runtimeRequestTimeout is below this many seconds. */
  kubeletTimeoutWarnSecs?: number;
  /** Leave out nodes whose owned label already holds the finished value. */
  skipSatisfiedNodes: boolean;
  /** Template run first on owned nodes the selection no longer matches. */
  cleanupJobTemplate?: string;
  /** Fail a node that reports no container runtime version. */
  requireNodeRuntimeVersion: boolean;
  /** Fail a node that reports no machine ID. */
  requireNodeMachineId: boolean;
  /** The maintenance around each Job (cordon, drain); only the flags in FLAGS are set. */
  maintenance: MaintenanceConfig;
  /** The health gates (`--gate-*`); undefined without `--gate-prometheus-url`. */
  gate?: GateConfig;
}

/** What a run needs from its surroundings. */
export interface RunContext {
  /** The API client. */
  kube: Kube;
  /** The logger. */
  log: Logger;
  /** Aborts on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** Reads an environment variable. */
  env: (name: string) => string | undefined;
  /** Reads a file, or undefined when it cannot. */
  readFile: (path: string) => string | undefined;
  /** Writes data (dry-run YAML) to stdout. */
  stdout: (text: string) => void;
  /** Whether the log goes to a terminal, which shows a live progress line. */
  terminal: boolean;
  /** Writes a file (the report). */
  writeFile: (path: string, text: string) => void;
  /**
   * Told when the run's outcome is settled and only `--metrics-linger-secs`
   * is left: a signal from then on ends the linger, not the run, and the
   * exit code stays the run's.
   */
  settled?: () => void;
  /**
   * A pause gate of the caller's, asked before every start of the main
   * phase with the run's own (the owner's pause, the pause file, the health
   * gate): a caller that runs several rollouts (`fleet/`) holds or stops this
   * one through it.
   */
  hold?: PauseGate;
  /**
   * Told when this run stops a rollout on its own: its health gate breached
   * (with `pause` the run holds, latched, and never exits by itself) or its
   * engine stopped (the failure budget). A caller that runs several
   * rollouts (`fleet/`) stops its line on it; an explicit hook rather than
   * the log's event names, which may be renamed without a type error.
   */
  onStop?: (cause: string, code: number) => void;
  /**
   * Told the run's report as written (`--report`): a caller that runs
   * several rollouts (`fleet/`) draws them on one timeline.
   */
  onReport?: (input: ReportInput) => void;
  /**
   * Told when the run selected no node (or every one was done already) and
   * so ends at once with exit 0 and no run record: a caller that counts a
   * rollout by its record (`fleet/`) counts this one as ended.
   */
  onNothingToDo?: () => void;
  /**
   * Told when the run's closing record write did not land (a policy or RBAC
   * refused it, an outage lost it, it was too big), with why: the run may
   * exit 0 with a record that says "running", or none, and a caller that
   * counts a rollout by its record (`fleet/`) says that cause, not another.
   */
  onRecordLost?: (reason: string) => void;
}
