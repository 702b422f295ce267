/**
 * One run of the dispatcher, wired from its parts: resolve the namespace and
 * owner, select and admit nodes, check the template with the API server,
 * dispatch, and summarise. Returns the exit code; only `main.ts` exits.
 *
 * @module
 */

import { stringify } from "yaml";
import type { V1Node, V1PodSpec } from "@kubernetes/client-node";
import {
  checkTemplateNamespace,
  instantiateJob,
  jobName,
  type JobTemplate,
  labelValue,
  type OwnerRef,
  type RunIdentity,
  sanitize,
  templateHash,
  trackingKeys,
  UsageError,
} from "./job.ts";
import { type Kube, paths } from "./kube.ts";
import {
  dispatch,
  type DispatchReport,
  type FanoutOptions,
  type NodeResult,
  type Target,
} from "./fanout.ts";
import {
  affinityMismatch,
  formatTaint,
  partitionByTolerations,
  tolerationsYamlFor,
} from "./nodes.ts";
import {
  describeSelection,
  NodeWatch,
  type Resolved,
  type Selection,
  slimNode,
  waitForSelection,
} from "./select.ts";
import { isSatisfied, ownedButUnselected } from "./lifecycle.ts";
import { blockingPods, Maintenance } from "./maintenance.ts";
import { closesAt, nextOpening } from "./window.ts";
import { FilePause, OwnerPause } from "./pause.ts";
import { resolveMaxUnavailable } from "./budget.ts";
import { NodeWriter } from "./node_writer.ts";
import type { Logger } from "./log.ts";
import type { Options } from "./options.ts";
import { domainOf, failureBudget, orderItems } from "./safety.ts";
import { Recorder, type ReportInput } from "./report.ts";
import { holdOwner } from "./owner_guard.ts";
import { jobApiFor, liveRun } from "./job_api.ts";
import { checkTtl, resolveNamespace, resolveOwner, validateOnServer } from "./preflight.ts";
import { EXIT, exitCode, summarise, writeReport } from "./summary.ts";
import { afterSuccess, anyPaused, availabilityBudget } from "./run_hooks.ts";

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

/** How many already-done nodes are named one by one before the rest are counted. */
const SATISFIED_LINES = 20;

function nodeFacts(node: V1Node) {
  const info = node.status?.nodeInfo;
  return {
    name: node.metadata!.name!,
    uid: node.metadata!.uid!,
    machineID: info?.machineID || undefined,
    containerRuntimeVersion: info?.containerRuntimeVersion || undefined,
  };
}

/** The nodes a `--cleanup-job-template` run owes, and how to make their Jobs. */
interface CleanupPlan {
  /** The cleanup template's name prefix. */
  prefix: string;
  /** Owned nodes the selection no longer matches, taint-admitted. */
  nodes: V1Node[];
}

/**
 * Finds the nodes that carry this instance's label but no longer match the
 * selection. Ownership is judged on the matched set, not the taint-admitted
 * one: a matched node skipped for a taint is still selected.
 */
async function planCleanup(
  opts: Options,
  cleanup: JobTemplate,
  mainPrefix: string,
  resolved: Resolved,
  ctx: RunContext,
): Promise<CleanupPlan> {
  const cfg = opts.nodeLabels!;
  const prefix = cleanup.metadata?.name;
  if (!prefix || !sanitize(prefix) || prefix === mainPrefix) {
    throw new UsageError(
      `Invalid cleanup job template ${opts.cleanupJobTemplate}: its metadata.name must be set ` +
        `and differ from the main template's prefix ${mainPrefix}, so their Jobs never share a name`,
    );
  }
  const owned = await ctx.kube.list(
    paths.nodes(),
    { labelSelector: cfg.mark ?? cfg.key },
    opts.nodePageSize,
    slimNode,
  );
  const matched = new Set(resolved.matched.map((n) => n.metadata!.name!));
  const nodes = ownedButUnselected(owned.items, matched);
  const { admitted, skipped } = opts.ignoreNodeTaints
    ? { admitted: nodes, skipped: [] }
    : partitionByTolerations(nodes, cleanup.spec.template.spec!);
  for (const { node, taint } of skipped) {
    ctx.log.warn(
      `cleanup skipped node ${node.metadata!.name}: taint ${formatTaint(taint)} is not ` +
        "tolerated by the cleanup template; it keeps its label",
      { event: "skipped", node: node.metadata!.name, taint: formatTaint(taint) },
    );
  }
  if (admitted.length) {
    ctx.log.info(
      `cleanup: ${admitted.length} nodes carry ${cfg.mark ?? cfg.key} but no longer match ` +
        `the selection: ${admitted.slice(0, 10).map((n) => n.metadata!.name).join(", ")}` +
        (admitted.length > 10 ? ", ..." : ""),
    );
  }
  return { prefix, nodes: admitted };
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

/** What a run will do, decided before anything is created. */
interface Plan {
  namespace: string;
  keys: ReturnType<typeof trackingKeys>;
  prefix: string;
  owner?: OwnerRef;
  run: RunIdentity;
  podSpec: V1PodSpec;
  selection: Selection;
  resolved: Resolved;
  /** The main template's nodes, taint-admitted, not yet done. */
  eligible: V1Node[];
  selected: Map<string, V1Node>;
  /** The main Jobs, in dispatch order. */
  targets: Target[];
  /** The failure domain of a target, with `--max-per-topology`. */
  domain?: (t: Target) => string;
  cleanup?: CleanupPlan;
  cleanupRun?: RunIdentity;
  cleanupTargets: Target[];
}

/**
 * The plan step: resolves namespace and owner, selects and admits nodes,
 * orders them and builds their Jobs (lazily). Creates nothing.
 *
 * @returns the plan, or an exit code when there is nothing to do
 */
async function planRun(
  opts: Options,
  template: JobTemplate,
  ctx: RunContext,
  cleanupTemplate?: JobTemplate,
): Promise<Plan | number> {
  const { kube, log } = ctx;
  const keys = trackingKeys(opts.trackingLabelPrefix);
  const prefix = opts.namePrefix ?? template.metadata?.name;
  if (!prefix) {
    throw new UsageError(
      `Invalid job template ${opts.jobTemplate}: it has no metadata.name` +
        (template.metadata?.generateName
          ? " (only generateName, which would make every run's names new)"
          : "") +
        "; set metadata.name or --name-prefix",
    );
  }
  if (!sanitize(prefix)) {
    throw new UsageError(
      `Invalid name prefix ${
        JSON.stringify(prefix)
      }: nothing of it is usable in a Job name; use lowercase letters and digits`,
    );
  }
  checkTtl(opts, template, opts.jobTemplate);
  if (cleanupTemplate) checkTtl(opts, cleanupTemplate, opts.cleanupJobTemplate);
  const namespace = resolveNamespace(opts, ctx);
  checkTemplateNamespace(template, namespace, opts.jobTemplate);
  if (cleanupTemplate) checkTemplateNamespace(cleanupTemplate, namespace, opts.cleanupJobTemplate!);
  const podSpec = template.spec.template.spec!;
  const selection: Selection = {
    nodes: opts.nodes,
    labelSelectors: opts.nodeSelectors,
    fieldSelector: opts.nodeFieldSelector,
    pageSize: opts.nodePageSize,
    ignoreTaints: opts.ignoreNodeTaints,
  };

  const owner = await resolveOwner(opts, kube, namespace);
  const hash = templateHash(template, opts.pin);
  const run: RunIdentity = { keys, prefix, owner, templateHash: hash };
  const resolved = await waitForSelection(kube, selection, podSpec, {
    waitSecs: opts.waitForNodesSecs,
    settleSecs: opts.nodeSettleSecs,
    signal: ctx.signal,
    onChange: (r) =>
      log.info(`selection changed: ${r.eligible.length} eligible nodes; waiting for it to settle`),
  });
  for (const { node, taint } of resolved.skipped) {
    log.info(
      `skipped node ${node.metadata!.name}: taint ${
        formatTaint(taint)
      } is not tolerated by the template`,
      {
        event: "skipped",
        node: node.metadata!.name,
        taint: formatTaint(taint),
      },
    );
  }
  if (resolved.eligible.length === 0 && resolved.skipped.length) {
    throw new UsageError(
      `Every matched node (${resolved.skipped.length}) has a taint the template does not tolerate; ` +
        "add to spec.template.spec of the template:\n" +
        tolerationsYamlFor(resolved.skipped.map((s) => s.taint)).trimEnd() +
        "\nor pass --ignore-node-taints",
    );
  }
  if (resolved.eligible.length === 0 && opts.waitForNodesSecs > 0) {
    throw new UsageError(
      `No node matched ${
        describeSelection(selection)
      } within --wait-for-nodes-secs ${opts.waitForNodesSecs}`,
    );
  }
  const cleanup = cleanupTemplate
    ? await planCleanup(opts, cleanupTemplate, prefix, resolved, ctx)
    : undefined;

  let eligible = resolved.eligible;
  if (opts.skipSatisfiedNodes) {
    const cfg = opts.nodeLabels!;
    const done = eligible.filter((n) => isSatisfied(cfg, n, opts.requireNodeHandlers));
    // One line per node up to a point: a satisfied fleet of thousands would
    // otherwise bury the few nodes that still have work.
    for (const n of done.slice(0, SATISFIED_LINES)) {
      log.info(`skipped node ${n.metadata!.name}: already done (${cfg.key}=${cfg.value})`, {
        event: "satisfied",
        node: n.metadata!.name,
      });
    }
    if (done.length > SATISFIED_LINES) {
      log.info(`skipped ${done.length - SATISFIED_LINES} more nodes that are already done`, {
        event: "satisfied",
        more: done.length - SATISFIED_LINES,
      });
    }
    if (done.length) eligible = eligible.filter((n) => !done.includes(n));
  }
  if (eligible.length === 0 && !cleanup?.nodes.length) {
    log.info(
      resolved.eligible.length
        ? `nothing to do: all ${resolved.eligible.length} selected nodes are already done`
        : `nothing to do: no node matches ${describeSelection(selection)}`,
    );
    return EXIT.ok;
  }
  const mismatched = eligible
    .map((n) => [n.metadata!.name!, affinityMismatch(podSpec, n)] as const)
    .filter(([, why]) => why);
  if (mismatched.length) {
    const [name, why] = mismatched[0];
    throw new UsageError(
      `Invalid job template ${opts.jobTemplate}: it excludes ${mismatched.length} selected node(s), ` +
        `e.g. ${name} (${why}); a pod pinned to a node it does not match is rejected by the kubelet. ` +
        "Narrow the node selection or relax the template's nodeSelector/affinity",
    );
  }

  const selected = new Map(eligible.map((n) => [n.metadata!.name!, n]));
  const limit = opts.maxPerTopology;
  const labelsOf = (t: Target) => selected.get(t.node.name)?.metadata?.labels;
  const domain = limit ? (t: Target) => domainOf(labelsOf(t), limit.key) : undefined;
  const targets: Target[] = orderItems(
    eligible.map((n) => {
      const node = nodeFacts(n);
      return {
        node,
        name: jobName(prefix, node.name),
        job: () =>
          instantiateJob({
            template,
            node,
            prefix,
            namespace,
            keys,
            owner,
            pin: opts.pin,
            templateHash: hash,
          }),
      };
    }),
    {
      order: opts.order,
      seed: opts.seed,
      zone: (t) => domainOf(labelsOf(t), "topology.kubernetes.io/zone"),
      limitDomain: domain,
    },
  );
  const cleanupHash = cleanupTemplate && templateHash(cleanupTemplate, opts.pin);
  const cleanupRun: RunIdentity | undefined = cleanup &&
    { keys, prefix: cleanup.prefix, owner, templateHash: cleanupHash };
  const cleanupTargets: Target[] = (cleanup?.nodes ?? []).map((n) => {
    const node = nodeFacts(n);
    return {
      node,
      name: jobName(cleanup!.prefix, node.name),
      job: () =>
        instantiateJob({
          template: cleanupTemplate!,
          node,
          prefix: cleanup!.prefix,
          namespace,
          keys,
          owner,
          pin: opts.pin,
          templateHash: cleanupHash,
        }),
    };
  });
  log.info(
    `selected ${targets.length} nodes (${describeSelection(selection)}` +
      `${resolved.skipped.length ? `; ${resolved.skipped.length} skipped for taints` : ""}` +
      `${
        resolved.eligible.length > eligible.length
          ? `; ${resolved.eligible.length - eligible.length} already done`
          : ""
      }), namespace ${namespace}, parallelism ${opts.parallelism}` +
      (owner ? `, owner job ${owner.name}` : ""),
  );

  return {
    namespace,
    keys,
    prefix,
    owner,
    run,
    podSpec,
    selection,
    resolved,
    eligible,
    selected,
    targets,
    domain,
    cleanup,
    cleanupRun,
    cleanupTargets,
  };
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
