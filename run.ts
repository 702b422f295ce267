/**
 * One run of the dispatcher, wired from its parts: resolve the namespace and
 * owner, select and admit nodes, check the template with the API server,
 * dispatch, and summarise. Returns the exit code; only `main.ts` exits.
 *
 * @module
 */

import { stringify } from "yaml";
import type { V1Node } from "@kubernetes/client-node";
import { type JobTemplate, labelValue, type RunIdentity } from "./job.ts";
import type { Kube } from "./kube.ts";
import {
  dispatch,
  type DispatchReport,
  type FanoutOptions,
  type NodeResult,
  type Target,
} from "./fanout.ts";
import { formatTaint } from "./nodes.ts";
import { NodeWatch } from "./select.ts";
import { blockingPods, Maintenance } from "./maintenance.ts";
import { closesAt, nextOpening } from "./window.ts";
import { FilePause, OwnerPause } from "./pause.ts";
import { resolveMaxUnavailable } from "./budget.ts";
import { NodeWriter } from "./node_writer.ts";
import type { Logger } from "./log.ts";
import type { Options } from "./options.ts";
import { failureBudget } from "./safety.ts";
import { Recorder, type ReportInput } from "./report.ts";
import { holdOwner } from "./owner_guard.ts";
import { jobApiFor, liveRun } from "./job_api.ts";
import { resolveNamespace, validateOnServer } from "./preflight.ts";
import { EXIT, exitCode, summarise, writeReport } from "./summary.ts";
import { afterSuccess, anyPaused, availabilityBudget } from "./run_hooks.ts";
import { type Plan, planRun } from "./plan.ts";

export { EXIT, jobApiFor, resolveNamespace };

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
}

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
}

/**
 * Carries out one run and returns its exit code: the plan, then (unless a
 * dry run) its execution.
 *
 * @throws {UsageError} on bad input, before anything is created
 * @throws {ApiError} when the cluster cannot be used before any dispatch
 */
export async function runDispatcher(
  opts: Options,
  template: JobTemplate,
  ctx: RunContext,
  cleanupTemplate?: JobTemplate,
): Promise<number> {
  const plan = await planRun(opts, template, ctx, cleanupTemplate);
  if (typeof plan === "number") return plan;
  const { kube, log } = ctx;
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
  return await executeRun(opts, plan, ctx);
}

/**
 * The execute step: yields to a live run of another owner, or dispatches the
 * cleanup Jobs and then the main ones, and summarises.
 */
async function executeRun(opts: Options, plan: Plan, ctx: RunContext): Promise<number> {
  const { kube, log } = ctx;
  const { namespace, keys, owner, targets, cleanupTargets, cleanupRun, resolved } = plan;
  const limit = opts.maxPerTopology;
  const api = jobApiFor(kube, namespace, `${keys.owner}=${labelValue(plan.prefix)}`);
  if (opts.yieldToLiveRun && owner) {
    const live = await liveRun(kube, namespace, api, owner);
    if (live) {
      log.info(
        `yielding: run of owner job ${live.name} (uid ${live.uid}) is still live for prefix ${plan.prefix}`,
      );
      return EXIT.ok;
    }
  }
  // Before the first create: a helm upgrade must not have the per-node Jobs
  // garbage-collected mid-run (owner_guard.ts).
  const guard = owner && await holdOwner({ kube, namespace, owner, keys, log });

  // --window: nothing starts outside; a run begun outside ends at once.
  const windows = opts.maintenance.windows;
  const closes = windows.length ? closesAt(windows, Date.now()) : Infinity;
  if (closes === undefined) {
    const opens = nextOpening(windows, Date.now());
    const left = targets.length + cleanupTargets.length;
    log.warn(
      `incomplete: outside every --window (next opening ${
        opens === undefined ? "never" : new Date(opens).toISOString()
      }); ${left} nodes left, none started`,
      { event: "incomplete", reason: "window closed", left },
    );
    return EXIT.window;
  }

  const writerFor = (labels = opts.nodeLabels) =>
    new NodeWriter({
      kube,
      log,
      keys,
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
  const recorderFor = (nodes: V1Node[], withOwner: boolean, marks: boolean) =>
    new Recorder({
      kube,
      log,
      keys,
      namespace,
      owner: withOwner ? owner : undefined,
      marks,
      nodeRecords: opts.nodeRecords,
      nodes: new Map(nodes.map((n) => [n.metadata!.name!, {
        uid: n.metadata!.uid!,
        hasLabels: n.metadata?.labels !== undefined,
        hasAnnotations: n.metadata?.annotations !== undefined,
      }])),
    });

  const started = Date.now();
  const fanout = async (phase: Phase, extra: Partial<FanoutOptions>): Promise<DispatchReport> => {
    const { writer, recorder, selected: nodes } = phase;
    const node = (t: Target) => nodes.get(t.node.name)!;
    return await dispatch({
      targets: phase.targets,
      parallelism: opts.parallelism,
      run: phase.run,
      api: jobApiFor(kube, namespace, `${keys.owner}=${labelValue(phase.run.prefix)}`),
      reporter: {
        event: (e) => {
          log.event(e);
          recorder.event(e);
        },
        progress: (p) => {
          log.progress(p);
          recorder.progress(p);
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
      afterSuccess: afterSuccess(writer, phase.maintenance, node),
      prepare: phase.maintenance ? (t) => phase.maintenance!.prepare(t.node) : undefined,
      release: phase.maintenance ? (t, why) => phase.maintenance!.release(t.node, why) : undefined,
      nodeTimeoutMs: opts.nodeTimeoutSecs === undefined ? undefined : opts.nodeTimeoutSecs * 1000,
      deleteTimedOut: opts.deleteTimedOut,
      stallAfterMs: opts.stallWarnSecs * 1000,
      ...extra,
    });
  };

  let cleanupResults: NodeResult[] = [];
  if (cleanupTargets.length) {
    const writer = writerFor({ ...opts.nodeLabels!, value: undefined, claim: false, remove: true });
    const recorder = recorderFor(plan.cleanup!.nodes, false, false);
    try {
      const report = await fanout({
        targets: cleanupTargets,
        run: cleanupRun!,
        writer,
        recorder,
        selected: new Map(plan.cleanup!.nodes.map((n) => [n.metadata!.name!, n])),
      }, {});
      cleanupResults = report.results;
    } finally {
      await writer.settle();
      log.done();
    }
    const summary = summarise(cleanupResults, log, namespace, cleanupRun!, started, "cleanup");
    await recorder.finished(summary, cleanupResults.some((r) => r.outcome === "failed"));
  }

  let results: NodeResult[] = [];
  let stoppedBy: string | undefined;
  let code = exitCode({ cleanup: cleanupResults, results });
  if (targets.length) {
    // A cleanup run clears the outcome marks instead of writing them.
    const recorder = recorderFor(plan.eligible, true, !opts.nodeLabels?.remove);
    recorder.started(targets.length);
    let nodesChanged = () => {};
    const nodeWatch = new NodeWatch(
      kube,
      plan.selection,
      plan.podSpec,
      resolved.listings,
      (msg) => log.warn(msg),
      () => nodesChanged(),
    );
    const maxUnavailable = opts.maintenance.maxUnavailable;
    // Pause/resume: the owner's annotation (one watch on the owner Job), or a file.
    const ownerPause = owner && new OwnerPause(kube, namespace, owner, keys.paused);
    const filePause = opts.maintenance.pauseFile
      ? new FilePause(opts.maintenance.pauseFile)
      : undefined;
    const gates = [ownerPause, filePause].filter((g) => g !== undefined);
    await ownerPause?.start();
    const writer = writerFor();
    const mainStarted = Date.now();
    let report: DispatchReport;
    try {
      report = await fanout({
        targets,
        run: plan.run,
        writer,
        recorder,
        selected: plan.selected,
        recheck: (t) => nodeWatch.recheck(t.node.name, t.node.uid),
        maintenance: opts.maintenance.cordon
          ? new Maintenance({
            kube,
            annotation: keys.cordonedBy,
            // The owner's UID: a retried hook pod of the same owner lifts its
            // own cordons; without an owner, runs of one prefix are one run.
            runId: owner?.uid ?? plan.prefix,
            drain: opts.maintenance.drain,
            uncordonOnFailure: opts.maintenance.uncordonOnFailure,
            warn: (message) => log.warn(message),
            signal: ctx.signal,
          })
          : undefined,
      }, {
        maxFailures: opts.maxFailures === undefined
          ? undefined
          : failureBudget(opts.maxFailures, targets.length),
        canary: opts.canary,
        retryFailed: opts.maintenance.retryFailed,
        budget: maxUnavailable && availabilityBudget(
          resolveMaxUnavailable(maxUnavailable, resolved.matched.length),
          nodeWatch,
          (wake) => (nodesChanged = wake),
        ),
        postNodeDelayMs: opts.maintenance.postNodeDelaySecs * 1000,
        closesAt: closes === Infinity ? undefined : closes,
        blockers: opts.maintenance.blockingPodSelectors.length
          ? (t) => blockingPods(kube, t.node.name, opts.maintenance.blockingPodSelectors)
          : undefined,
        blockedTimeoutMs: opts.maintenance.blockedTimeoutSecs === undefined
          ? undefined
          : opts.maintenance.blockedTimeoutSecs * 1000,
        pause: anyPaused(gates),
        domain: plan.domain,
        maxPerDomain: limit?.max,
      });
    } finally {
      await Promise.all(gates.map((g) => g.stop()));
      await nodeWatch.stop();
      await writer.settle();
    }
    ({ results, stoppedBy } = report);
    log.done();
    const summary = summarise(results, log, namespace, plan.run, mainStarted);
    if (stoppedBy) {
      const never = results.filter((r) => r.outcome === "notStarted").length;
      log.warn(`rollout stopped: ${stoppedBy}; ${never} nodes were never started`, {
        event: "stopped",
        reason: stoppedBy,
        notStarted: never,
      });
    }
    code = exitCode({
      cleanup: cleanupResults,
      results,
      stoppedBy,
      windowClosed: report.windowClosed,
    });
    if (report.windowClosed) {
      const left = results.filter((r) => r.outcome === "notStarted").length;
      log.warn(
        `incomplete: window closed; ${left} nodes left (a re-run inside a window resumes them)`,
        { event: "incomplete", reason: "window closed", left },
      );
    }
    await recorder.finished(
      stoppedBy ? `stopped: ${stoppedBy}; ${summary}` : summary,
      code !== EXIT.ok,
    );
  }
  await guard?.release();
  if (opts.report) {
    const input: ReportInput = {
      startedAt: new Date(started),
      finishedAt: new Date(),
      namespace,
      prefix: plan.prefix,
      owner,
      stoppedBy,
      results: [...cleanupResults, ...results],
      uids: new Map(
        [...resolved.matched, ...plan.cleanup?.nodes ?? []].map((n) => [
          n.metadata!.name!,
          n.metadata!.uid!,
        ]),
      ),
      skipped: resolved.skipped.map(({ node, taint }) => ({
        node: node.metadata!.name!,
        uid: node.metadata!.uid!,
        reason: `taint ${formatTaint(taint)} is not tolerated by the template`,
      })),
    };
    const written = writeReport({
      path: opts.report,
      format: opts.reportFormat,
      input,
      writeFile: ctx.writeFile,
      log,
    });
    if (!written) code = EXIT.failed;
  }
  return code;
}
