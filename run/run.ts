/**
 * **run/** owns one run, wired from its parts: the plan, the execution, the
 * owner guard, the pre-flight checks and the Job API adapter. `config.ts`
 * composes each concern's configuration into the run's. It imports every
 * concern below it and never `cli/`: a run knows its configuration, not the
 * flags that made it.
 *
 * One run of the dispatcher, wired from its parts: resolve the namespace and
 * owner, select and admit nodes, check the template with the API server,
 * dispatch, and summarise. Returns the exit code; only `main.ts` exits.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import { stringify } from "yaml";
import type { V1Node } from "@kubernetes/client-node";
import { type JobTemplate, labelValue, type RunIdentity, type TrackingKeys } from "../job.ts";
import {
  dispatch,
  type DispatchReport,
  type FanoutOptions,
  type NodeResult,
  type Target,
} from "../engine/fanout.ts";
import { formatTaint } from "../nodes/eligibility.ts";
import { NodeWatch } from "../nodes/select.ts";
import { blockingPods, Maintenance } from "../maintenance/maintenance.ts";
import { closesAt, describeNextOpening, nextOpening } from "../maintenance/window.ts";
import { FilePause, OwnerPause } from "../engine/pause.ts";
import { resolveMaxUnavailable } from "../maintenance/budget.ts";
import { NodeWriter } from "../nodes/node_writer.ts";
import { SuccessKeeper } from "../nodes/success_mark.ts";
import { reportFiles, type RunConfig, type RunContext } from "./config.ts";
import { failureBudget } from "../engine/safety.ts";
import { Recorder, type RecorderOptions, type ReportInput } from "../report/report.ts";
import { endOfRun, waitForEarlierRuns } from "./owner_guard.ts";
import { jobApiFor, liveRun } from "./job_api.ts";
import { PermissionError, resolveNamespace, validateOnServer } from "./preflight.ts";
import { EXIT, exitCode, summarise, writeReports } from "../report/summary.ts";
import { afterSuccess, anyPaused, availabilityBudget, keptSuccesses } from "./run_hooks.ts";
import { NodeVerifier } from "../verify/verify.ts";
import type { HoldAfterWave, SoakGate, WaveRecord } from "../engine/fanout_types.ts";
import { watchedGate } from "./soak_gate.ts";
import { type Plan, planRun } from "./plan.ts";
import {
  bindGate,
  type GateRun,
  latchExit,
  latchWhere,
  openGate,
  refuseIfEarlierPaused,
  refuseIfLatched,
} from "./run_gate.ts";
import type { HealthGate } from "../gates/gate.ts";
import type { RunMetrics } from "../report/metrics.ts";
import { withMetrics } from "./run_metrics.ts";
import { PauseSpans } from "../report/timeline.ts";
import { estimateLine, loadDurations } from "../preview/preview.ts";
import { existingJobs, preflight, previewSource, runPlanPreview } from "./plan_preview.ts";
import { cgroupMemoryLimit, fitFromEnv, memoryWarning } from "./memory_budget.ts";

export { EXIT, jobApiFor, PermissionError, resolveNamespace };

/** What one fan-out of a run shares with the other (cleanup, then main). */
interface Phase {
  targets: Target[];
  run: RunIdentity;
  writer: NodeWriter;
  recorder: Recorder;
  selected: Map<string, V1Node>;
  recheck?: (t: Target) => Promise<string | undefined>;
  /** Cordon and drain around each Job (`--cordon`, `--drain`); the main phase only. */
  maintenance?: Maintenance;
  /** Node verification after each Job (`--verify-*`); the main phase only. */
  verifier?: NodeVerifier;
}

/**
 * Carries out one run and returns its exit code: the plan, then (unless a
 * dry run) its execution.
 *
 * @throws {UsageError} on bad input, before anything is created
 * @throws {ApiError} when the cluster cannot be used before any dispatch
 */
export async function runDispatcher(
  opts: RunConfig,
  template: JobTemplate,
  ctx: RunContext,
  cleanupTemplate?: JobTemplate,
): Promise<number> {
  // Read first: a file that is not a report is bad input, before the cluster is asked.
  const durations = opts.estimateFrom === undefined
    ? undefined
    : loadDurations(opts.estimateFrom, ctx.readFile);
  const plan = await planRun(opts, template, ctx, cleanupTemplate);
  if (typeof plan === "number") return plan;
  const { kube, log } = ctx;
  // Before any Job: an OOM-killed hook is retried and killed again at the same size.
  const tooBig = memoryWarning(
    plan.targets.length + plan.cleanupTargets.length,
    cgroupMemoryLimit(ctx.readFile),
    fitFromEnv((name) => ctx.env(name)),
  );
  if (tooBig) log.warn(tooBig, { event: "memory" });
  if (opts.dryRun === "plan") return await runPlanPreview(opts, plan, ctx, durations);
  // The Jobs there now: those a re-run counts take no time of the estimate.
  const estimate = durations &&
    estimateLine(previewSource(opts, plan, await existingJobs(kube, plan), durations));
  if (estimate) log.info(estimate, { event: "estimate" });
  const { namespace, cleanupTargets, targets } = plan;
  const all = [...cleanupTargets, ...targets];
  if (opts.dryRun === "client") {
    ctx.stdout(all.map((t) => stringify(t.job())).join("---\n"));
    return EXIT.ok;
  }
  if (opts.dryRun === "server") {
    for (const t of all) {
      await validateOnServer(kube, namespace, t.job());
      log.info(`validated job ${t.name} for node ${t.node.name} (server dry run)`);
    }
    return EXIT.ok;
  }

  // One dry-run create per template before the first real one: the API
  // server's own validation, RBAC and the namespace's existence are checked
  // while nothing has been created yet, so bad input costs nothing.
  if (cleanupTargets.length) await validateOnServer(kube, namespace, cleanupTargets[0].job());
  if (targets.length) await validateOnServer(kube, namespace, targets[0].job());
  if (targets.length && plan.verifyJob) {
    await validateOnServer(kube, namespace, plan.verifyJob(targets[0].node));
  }
  // Before the first cordon: --drain without `list pods` would cordon every node, then fail each.
  if (all.length) await preflight(opts, plan, ctx);
  // Every gate query once, before the first Job: bad PromQL or a Prometheus
  // that does not answer is refused while nothing has been created.
  const gate = opts.gate && await openGate({ config: opts.gate, plan, kube, log });
  if (typeof gate === "number") return gate;
  try {
    return await withMetrics(
      opts,
      ctx,
      (metrics) => executeRun(opts, plan, ctx, { gate, metrics }),
      async () => await gate?.stop(),
    );
  } finally {
    // Also when --metrics-addr could not listen (stopping twice is a no-op).
    await gate?.stop();
  }
}

/** A run being executed: its options, its plan and its surroundings. */
interface Execution {
  opts: RunConfig;
  plan: Plan;
  ctx: RunContext;
  /** The health gate (`--gate-*`), under way. */
  gate?: HealthGate;
  /** `--metrics-addr`'s metrics, fed from both phases. */
  metrics?: RunMetrics;
  /** When starts were paused, for the HTML timeline. */
  pauses: PauseSpans;
}

/** What the main fan-out ended with. */
interface MainOutcome {
  results: NodeResult[];
  stoppedBy?: string;
  /** The window closed with nodes left: the report's `stoppedBy`, too. */
  windowClosed?: boolean;
  /** Each wave's size and times, with waves. */
  waves?: WaveRecord[];
  code: number;
}

/**
 * The execute step: yields to a live run of another owner, or dispatches the
 * cleanup Jobs and then the main ones, and summarises.
 */
async function executeRun(
  opts: RunConfig,
  plan: Plan,
  ctx: RunContext,
  extras: { gate?: HealthGate; metrics?: RunMetrics },
): Promise<number> {
  const x: Execution = { opts, plan, ctx, ...extras, pauses: new PauseSpans() };
  const { namespace, keys, owner } = plan;
  if (await yieldsToLiveRun(x)) return EXIT.ok;
  // Outside every window nothing starts: nothing to guard, no write at all.
  const closes = windowCloses(x);
  if (closes === undefined) return EXIT.window;
  // Before the first create: the run of an earlier revision's hook Job may
  // still be live (owner_guard.ts); two runs at once would race for nodes.
  const guard = owner &&
    { kube: ctx.kube, namespace, owner, keys, log: ctx.log, signal: ctx.signal };
  if (guard && !await waitForEarlierRuns(guard)) return EXIT.ok;
  // An earlier run waited for may have latched a breach meanwhile: read it
  // again; and an earlier revision's run may have ended under its gate's pause.
  const latched = guard && x.gate &&
    (await refuseIfLatched(gateRun(x)) ?? await refuseIfEarlierPaused(guard));
  if (latched) return latched;
  const started = Date.now();
  let main: MainOutcome, cleanup: NodeResult[];
  try {
    cleanup = plan.cleanupTargets.length ? await runCleanup(x, started) : [];
    main = plan.targets.length
      ? await runMain(x, closes, cleanup)
      : { results: [], code: exitCode({ cleanup, results: [] }) };
  } finally {
    // Also when the run ends in an error: earlier owners whose runs are over
    // go, never one with a per-node Job active.
    if (guard) await endOfRun(guard);
  }
  if (reportFiles(opts).length && !writeRunReport(x, started, cleanup, main)) return EXIT.failed;
  return main.code;
}

/** With `--yield-to-live-run`: whether a live run of another owner has the prefix. */
async function yieldsToLiveRun({ opts, plan, ctx }: Execution): Promise<boolean> {
  const { namespace, keys, owner } = plan;
  if (!opts.yieldToLiveRun || !owner) return false;
  const api = jobApiFor(ctx.kube, namespace, `${keys.owner}=${labelValue(plan.prefix)}`);
  const live = await liveRun(ctx.kube, namespace, api, owner);
  if (!live) return false;
  ctx.log.info(
    `yielding: run of owner job ${live.name} (uid ${live.uid}) is still live for prefix ${plan.prefix}`,
  );
  return true;
}

/**
 * When the `--window` that is open now closes (`Infinity` without windows);
 * undefined, said as incomplete, when none is open: nothing starts outside,
 * and a run begun outside ends at once.
 */
function windowCloses({ opts, plan, ctx }: Execution): number | undefined {
  const windows = opts.maintenance.windows;
  const closes = windows.length ? closesAt(windows, Date.now()) : Infinity;
  if (closes !== undefined) return closes;
  const now = Date.now();
  const opens = nextOpening(windows, now);
  const left = plan.targets.length + plan.cleanupTargets.length;
  ctx.log.warn(
    `incomplete: outside every --window (next opening ${
      describeNextOpening(windows, now) ?? "never"
    }); ${counted(left, "node")} left, none started`,
    {
      event: "incomplete",
      reason: "window closed",
      left,
      nextOpening: opens === undefined ? undefined : new Date(opens).toISOString(),
    },
  );
  return undefined;
}

/** The node writer of a fan-out: claim, labels, readiness, taints (nodes/node_writer.ts). */
function nodeWriter({ opts, plan, ctx }: Execution, labels = opts.nodeLabels): NodeWriter {
  return new NodeWriter({
    kube: ctx.kube,
    log: ctx.log,
    keys: plan.keys,
    labels,
    waitReadyMs: opts.waitNodeReadySecs * 1000,
    handlers: opts.requireNodeHandlers,
    removeTaints: opts.removeNodeTaints,
    require: {
      runtimeVersion: opts.requireNodeRuntimeVersion,
      machineId: opts.requireNodeMachineId,
    },
    kubeletTimeoutWarnMs: opts.kubeletTimeoutWarnSecs === undefined
      ? undefined
      : opts.kubeletTimeoutWarnSecs * 1000,
    signal: ctx.signal,
  });
}

/** The recorder of a fan-out: Events, node marks, the owner's status (report/report.ts). */
function recorderFor(
  { opts, plan, ctx }: Execution,
  nodes: ReadonlyMap<string, V1Node>,
  withOwner: boolean,
  marks: boolean,
  record?: RecorderOptions["record"],
): Recorder {
  return new Recorder({
    record,
    onRecordLost: record && ctx.onRecordLost,
    kube: ctx.kube,
    log: ctx.log,
    keys: plan.keys,
    namespace: plan.namespace,
    owner: withOwner ? plan.owner : undefined,
    marks,
    nodeRecords: opts.nodeRecords,
    // A view of the selection: a map of its own would hold an entry per node for the run.
    nodes: {
      get: (name) => {
        const n = nodes.get(name);
        return n && { uid: n.metadata!.uid! };
      },
    },
  });
}

/** The run's {@linkcode SuccessKeeper}: marks on the selected nodes, a refusal said once. */
function successKeeper(
  ctx: RunContext,
  keys: TrackingKeys,
  nodes: ReadonlyMap<string, V1Node>,
): SuccessKeeper {
  return new SuccessKeeper({
    kube: ctx.kube,
    key: keys.kept,
    warn: (message) => ctx.log.warn(message),
    node: (name) => {
      const n = nodes.get(name);
      return n && { name, uid: n.metadata!.uid! };
    },
  });
}

/** Dispatches one phase's Jobs with the options both phases share, and `extra`. */
async function dispatchPhase(
  { opts, plan, ctx, metrics, pauses }: Execution,
  phase: Phase,
  extra: Partial<FanoutOptions>,
): Promise<DispatchReport> {
  const { kube, log } = ctx;
  const { writer, recorder, selected: nodes } = phase;
  const node = (t: Target) => nodes.get(t.node.name)!;
  return await dispatch({
    targets: phase.targets,
    parallelism: opts.parallelism,
    run: phase.run,
    api: jobApiFor(kube, plan.namespace, `${plan.keys.owner}=${labelValue(phase.run.prefix)}`),
    namespace: plan.namespace,
    reporter: {
      event: (e) => {
        log.event(e);
        recorder.event(e);
        metrics?.event(e);
        pauses.event(e);
        if (e.kind === "stopped") ctx.onStop?.(e.reason, EXIT.failed);
      },
      progress: (p) => {
        log.progress(p);
        recorder.progress(p);
        metrics?.progress(p);
      },
    },
    signal: ctx.signal,
    pollIntervalMs: opts.pollIntervalSecs * 1000,
    pollOnly: opts.pollOnly,
    progressOnChange: ctx.terminal,
    // A terminal shows the live line every second; a log gets a line per interval.
    progressIntervalMs: ctx.terminal
      ? Math.min(1000, opts.progressIntervalSecs * 1000)
      : opts.progressIntervalSecs * 1000,
    // The claim comes after the re-read: a node that left the selection
    // fails its own entry and is left untouched.
    recheck: async (t) =>
      (await phase.recheck?.(t)) ?? (writer.hasBefore ? await writer.before(node(t)) : undefined),
    afterSuccess: afterSuccess(
      writer,
      phase.maintenance,
      node,
      phase.verifier,
      keptSuccesses(successKeeper(ctx, plan.keys, nodes), phase.run),
    ),
    prepare: phase.maintenance ? (t) => phase.maintenance!.prepare(t.node) : undefined,
    release: phase.maintenance ? (t, why) => phase.maintenance!.release(t.node, why) : undefined,
    nodeTimeoutMs: opts.nodeTimeoutSecs === undefined ? undefined : opts.nodeTimeoutSecs * 1000,
    deleteTimedOut: opts.deleteTimedOut,
    stallAfterMs: opts.stallWarnSecs * 1000,
    ...extra,
  });
}

/** Dispatches the cleanup Jobs (`--cleanup-job-template`) and summarises them. */
async function runCleanup(x: Execution, started: number): Promise<NodeResult[]> {
  const { opts, plan, ctx } = x;
  const cleanup = plan.cleanup!;
  const writer = nodeWriter(x, {
    ...opts.nodeLabels!,
    value: undefined,
    claim: false,
    remove: true,
  });
  const selected = new Map(cleanup.nodes.map((n) => [n.metadata!.name!, n]));
  const recorder = recorderFor(x, selected, false, false);
  let results: NodeResult[] = [];
  try {
    const report = await dispatchPhase(x, {
      targets: plan.cleanupTargets,
      run: plan.cleanupRun!,
      writer,
      recorder,
      selected,
    }, {});
    results = report.results;
  } finally {
    await writer.settle();
    ctx.log.done();
    x.metrics?.endPhase();
  }
  const summary = summarise(results, ctx.log, plan.namespace, plan.cleanupRun!, started, "cleanup");
  await recorder.finished(summary, results.some((r) => r.outcome === "failed"));
  return results;
}

/**
 * Dispatches the main Jobs with the rollout's safety and pacing (the node
 * watch, pause gates, cordon and drain), and summarises them.
 */
async function runMain(x: Execution, closes: number, cleanup: NodeResult[]): Promise<MainOutcome> {
  const { opts, plan, ctx } = x;
  const { kube, log } = ctx;
  const { namespace, keys, owner, targets } = plan;
  // A cleanup run clears the outcome marks instead of writing them.
  const recorder = recorderFor(x, plan.selected, true, !opts.nodeLabels?.remove, {
    prefix: plan.prefix,
    templateHash: plan.run.templateHash,
    parallelism: opts.parallelism,
    // A record unwritten for two heartbeats is a dead run's (status says so).
    heartbeatMs: Math.max(20_000, opts.progressIntervalSecs * 1000),
    windowClosesAt: closes === Infinity ? undefined : closes,
    signal: ctx.signal,
  });
  recorder.started(targets.length);
  let nodesChanged = () => {};
  const nodeWatch = new NodeWatch(
    kube,
    plan.selection,
    plan.podSpec,
    plan.resolved.listings,
    (msg) => log.warn(msg),
    () => nodesChanged(),
  );
  // Pause/resume: the owner's annotation (one watch on the owner Job), or a file.
  const ownerPause = owner && new OwnerPause(kube, namespace, owner, keys.paused);
  const filePause = opts.maintenance.pauseFile
    ? new FilePause(opts.maintenance.pauseFile)
    : undefined;
  // The health gate first: its reason (the query and value) is the one said.
  // Watched: the waves' soak restarts after a break of it, a pause too
  // (run/soak_gate.ts).
  const watched = x.gate && await watchedGate(
    x.gate,
    [ownerPause || undefined, filePause].filter((g) => g !== undefined),
    owner
      ? { kube, namespace, owner, key: keys.gatesCleanSince, warn: (m) => log.warn(m) }
      : undefined,
  );
  const gates = [watched, ownerPause, filePause, ctx.hold].filter((g) => g !== undefined);
  await ownerPause?.start();
  if (x.gate) {
    await bindGate(x.gate, { ...gateRun(x), recorder, metrics: x.metrics }, {
      owner: ownerPause || undefined,
      file: filePause,
    });
  }
  const writer = nodeWriter(x);
  const mainStarted = Date.now();
  let report: DispatchReport;
  try {
    report = await dispatchPhase(x, {
      targets,
      run: plan.run,
      writer,
      recorder,
      selected: plan.selected,
      recheck: (t) => nodeWatch.recheck(t.node.name, t.node.uid),
      maintenance: maintenanceFor(x),
      verifier: verifierFor(x),
    }, {
      ...rolloutSafety(x, nodeWatch, (wake) => (nodesChanged = wake), {
        // The gate measures through the soak and once more at its end (gates/gate.ts).
        holdAfterWave: x.gate &&
          ((end) => x.gate!.afterWave(Math.max(0, end.soakEndsAt - Date.now()), end.signal)),
        soakGate: watched,
      }),
      recheckBeforeCreate: (t) => nodeWatch.recheckBeforeCreate(t.node.name, t.node.uid),
      closesAt: closes === Infinity ? undefined : closes,
      pause: anyPaused(gates),
    });
  } finally {
    // In parallel: each stop aborts its informer's LIST at once, and one
    // after another they would add up past the kubelet's grace period.
    // The health gate stops with the run (runDispatcher): its exit latch is set after.
    await Promise.all([ownerPause, filePause, nodeWatch].map((g) => g?.stop()));
    await writer.settle();
  }
  log.done();
  return await concludeMain(x, report, { cleanup, started: mainStarted, recorder });
}

/** What the health gate's wiring needs of an execution. */
function gateRun({ opts, plan, ctx }: Execution): GateRun {
  return {
    config: opts.gate!,
    plan,
    kube: ctx.kube,
    log: ctx.log,
    pauseFilePath: opts.maintenance.pauseFile,
    onStop: ctx.onStop,
  };
}

/** Node verification after each Job (`--verify-pod-selector`, `--verify-job-template`), if asked. */
function verifierFor({ opts, plan, ctx }: Execution): NodeVerifier | undefined {
  if (!opts.verify) return undefined;
  return new NodeVerifier({
    kube: ctx.kube,
    namespace: plan.namespace,
    keys: plan.keys,
    config: opts.verify,
    smokeJob: plan.verifyJob,
    signal: ctx.signal,
    warn: (message) => ctx.log.warn(message),
  });
}

/** Cordon and drain around each Job (`--cordon`, `--drain`), if asked. */
function maintenanceFor({ opts, plan, ctx }: Execution): Maintenance | undefined {
  if (!opts.maintenance.cordon) return undefined;
  return new Maintenance({
    kube: ctx.kube,
    annotation: plan.keys.cordonedBy,
    // The owner's UID: a retried hook pod of the same owner lifts its
    // own cordons; without an owner, runs of one prefix are one run.
    runId: plan.owner?.uid ?? plan.prefix,
    drain: opts.maintenance.drain,
    uncordonOnFailure: opts.maintenance.uncordonOnFailure,
    warn: (message) => ctx.log.warn(message),
    log: ctx.log,
    signal: ctx.signal,
  });
}

/**
 * The main phase's rollout safety: the failure budget, the waves (and the
 * hold after each, where the health gates plug in: `hooks.holdAfterWave`),
 * `--retry-failed`, `--max-unavailable` over the node watch, the pause after
 * each node, blocking pods, failure domains.
 */
function rolloutSafety(
  { opts, plan, ctx }: Execution,
  nodeWatch: NodeWatch,
  onNodesChange: (wake: () => void) => void,
  hooks: { holdAfterWave?: HoldAfterWave; soakGate?: SoakGate } = {},
): Partial<FanoutOptions> {
  const { maintenance } = opts;
  const maxUnavailable = maintenance.maxUnavailable;
  return {
    maxFailures: opts.maxFailures === undefined
      ? undefined
      : failureBudget(opts.maxFailures, plan.targets.length),
    waves: opts.waves && {
      soakMs: opts.waveSoakSecs * 1000,
      canary: opts.waves.canary,
      holdAfterWave: hooks.holdAfterWave,
      soakGate: hooks.soakGate,
      // An earlier run's completionTime is the API server's clock.
      serverClockOffsetMs: () => ctx.kube.serverClockOffsetMs,
    },
    retryFailed: maintenance.retryFailed,
    budget: maxUnavailable && availabilityBudget(
      resolveMaxUnavailable(maxUnavailable, plan.resolved.matched.length),
      nodeWatch,
      onNodesChange,
    ),
    postNodeDelayMs: maintenance.postNodeDelaySecs * 1000,
    blockers: maintenance.blockingPodSelectors.length
      ? (t) => blockingPods(ctx.kube, t.node.name, maintenance.blockingPodSelectors)
      : undefined,
    blockedTimeoutMs: maintenance.blockedTimeoutSecs === undefined
      ? undefined
      : maintenance.blockedTimeoutSecs * 1000,
    domain: plan.domain,
    maxPerDomain: opts.maxPerTopology?.max,
  };
}

/** Summarises the main phase: the summary, why it stopped, the window, the exit code. */
async function concludeMain(
  x: Execution,
  report: DispatchReport,
  phase: { cleanup: NodeResult[]; started: number; recorder: Recorder },
): Promise<MainOutcome> {
  const { plan, ctx } = x;
  const { log } = ctx;
  const { results, stoppedBy, windowClosed } = report;
  const gateStopped = stoppedBy !== undefined && await latchExit(x.gate, gateRun(x));
  const summary = summarise(results, log, plan.namespace, plan.run, phase.started);
  if (stoppedBy) {
    const never = results.filter((r) => r.outcome === "notStarted").length;
    log.warn(
      `rollout stopped: ${stoppedBy}; ${counted(never, "node was", "nodes were")} never started`,
      {
        event: "stopped",
        reason: stoppedBy,
        notStarted: never,
      },
    );
  }
  const code = exitCode({ cleanup: phase.cleanup, results, stoppedBy, windowClosed, gateStopped });
  if (windowClosed) {
    const left = results.filter((r) => r.outcome === "notStarted").length;
    log.warn(
      `incomplete: window closed; ${
        counted(left, "node")
      } left (a re-run inside a window resumes them)`,
      { event: "incomplete", reason: "window closed", left },
    );
  }
  await phase.recorder.finished(
    stoppedBy ? `stopped: ${stoppedBy}; ${summary}` : summary,
    code !== EXIT.ok,
  );
  return { results, stoppedBy, windowClosed, code, waves: report.waves };
}

/**
 * The UID of each node a result names, read through the selection (the
 * cleanup's few nodes are none of it): a map of every matched node, built
 * at the run's end beside its results, was ~8 MB at 65,000 nodes.
 */
function uidsOf(plan: Plan): ReportInput["uids"] {
  const cleanup = new Map((plan.cleanup?.nodes ?? []).map((n) => [n.metadata!.name!, n]));
  return {
    get: (name) => (cleanup.get(name) ?? plan.selected.get(name))?.metadata?.uid,
  };
}

/** Writes `--report`; whether it was written. */
function writeRunReport(
  x: Execution,
  started: number,
  cleanup: NodeResult[],
  main: MainOutcome,
): boolean {
  const { opts, plan, ctx, pauses } = x;
  const { resolved } = plan;
  const input: ReportInput = {
    startedAt: new Date(started),
    finishedAt: new Date(),
    namespace: plan.namespace,
    prefix: plan.prefix,
    owner: plan.owner,
    stoppedBy: main.stoppedBy,
    windowClosed: main.windowClosed,
    pauses: pauses.spans,
    results: [...cleanup, ...main.results],
    waves: main.waves,
    breaches: x.gate?.breaches,
    latch: x.gate && latchWhere(gateRun(x)),
    uids: uidsOf(plan),
    skipped: resolved.skipped.map(({ node, taint }) => ({
      node: node.metadata!.name!,
      uid: node.metadata!.uid!,
      reason: `taint ${formatTaint(taint)} is not tolerated by the template`,
    })),
  };
  ctx.onReport?.(input);
  return writeReports(reportFiles(opts), { input, writeFile: ctx.writeFile, log: ctx.log });
}
