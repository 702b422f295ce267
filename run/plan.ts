/**
 * The plan step of a run: resolve the namespace and owner, select and admit
 * the nodes, order them and describe their Jobs (built lazily). It creates
 * nothing; `run.ts` executes the plan.
 *
 * @module
 */

import type { V1Job, V1Node, V1PodSpec } from "@kubernetes/client-node";
import {
  checkTemplateNamespace,
  instantiateJob,
  type InstantiateOptions,
  jobName,
  type JobTemplate,
  type NodeFacts,
  type OwnerRef,
  parseJobTemplate,
  podReplacementRisk,
  type RunIdentity,
  sanitize,
  templateHash,
  trackingKeys,
  UsageError,
  withoutOwnKeys,
} from "../job.ts";
import { paths } from "../kube/client.ts";
import { keptKey, keptSuccess } from "../nodes/success_mark.ts";
import type { Target } from "../engine/fanout.ts";
import {
  affinityMismatch,
  formatTaint,
  partitionByTolerations,
  tolerationsYamlFor,
} from "../nodes/eligibility.ts";
import {
  describeSelection,
  type Resolved,
  type Selection,
  slimNode,
  waitForSelection,
} from "../nodes/select.ts";
import { isSatisfied, ownedButUnselected } from "../nodes/lifecycle.ts";
import { describeMissingKeys, findMissingKeys, type MissingKey } from "../nodes/label_typo.ts";
import type { MaintenanceConfig } from "../maintenance/config.ts";
import { reportFiles, type RunConfig, type RunContext } from "./config.ts";
import { domainOf, orderItems } from "../engine/safety.ts";
import { resolveWaves, withWaves } from "../engine/waves.ts";
import { checkTtl, resolveNamespace, resolveOwner } from "./preflight.ts";
import { tieTemplate } from "./owner_guard.ts";
import { counted, EXIT, writeReports } from "../report/summary.ts";
import { smokeTtlTooShort } from "../verify/rules.ts";
import { VERIFY_POLL_MS } from "../verify/verify.ts";

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
export interface CleanupPlan {
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
  opts: RunConfig,
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
      `cleanup: ${counted(admitted.length, "node carries", "nodes carry")} ${
        cfg.mark ?? cfg.key
      } but no longer match ` +
        `the selection: ${admitted.slice(0, 10).map((n) => n.metadata!.name).join(", ")}` +
        (admitted.length > 10 ? ", ..." : ""),
    );
  }
  return { prefix, nodes: admitted };
}

/** What a run will do, decided before anything is created. */
export interface Plan {
  /** The namespace of the Jobs. */
  namespace: string;
  /** The tracking label and annotation names. */
  keys: ReturnType<typeof trackingKeys>;
  /** The main template's name prefix. */
  prefix: string;
  /** The owner Job of the run's Jobs, if any. */
  owner?: OwnerRef;
  /** The main run's identity, to tell its Jobs from others'. */
  run: RunIdentity;
  /** The smoke-test Job of a node (`--verify-job-template`), named `<prefix>-verify-<node>`. */
  verifyJob?: (node: NodeFacts) => V1Job;
  /** The main template's pod spec, for the node watch's admission. */
  podSpec: V1PodSpec;
  /** How nodes are selected. */
  selection: Selection;
  /** The selection as it settled: matched, admitted, skipped for taints. */
  resolved: Resolved;
  /** The main template's nodes, taint-admitted, not yet done. */
  eligible: V1Node[];
  /** The eligible nodes by name. */
  selected: Map<string, V1Node>;
  /** The main Jobs, in dispatch order. */
  targets: Target[];
  /** The failure domain of a target, with `--max-per-topology`. */
  domain?: (t: Target) => string;
  /** The cleanup run's nodes (`--cleanup-job-template`), if any. */
  cleanup?: CleanupPlan;
  /** The cleanup run's identity. */
  cleanupRun?: RunIdentity;
  /** The cleanup Jobs, dispatched before the main ones. */
  cleanupTargets: Target[];
}

/**
 * The plan step: resolves namespace and owner, selects and admits nodes,
 * orders them and builds their Jobs (lazily). Creates nothing.
 *
 * @returns the plan, or an exit code when there is nothing to do
 */
export async function planRun(
  opts: RunConfig,
  template: JobTemplate,
  ctx: RunContext,
  cleanupTemplate?: JobTemplate,
): Promise<Plan | number> {
  const keys = trackingKeys(opts.trackingLabelPrefix);
  template = checkedTemplate(opts, ctx, template, opts.jobTemplate);
  if (cleanupTemplate) {
    cleanupTemplate = checkedTemplate(opts, ctx, cleanupTemplate, opts.cleanupJobTemplate!);
  }
  const prefix = namePrefixOf(opts, template);
  const namespace = checkTemplates(opts, ctx, template, cleanupTemplate);
  const podSpec = template.spec.template.spec!;
  const selection = selectionOf(opts);
  const owner = await resolveOwner(opts, ctx.kube, namespace);
  // The one write of the plan step, before any early end (nothing to do
  // included): the chart's per-revision template goes with its hook Job.
  if (owner && !opts.dryRun) {
    await tieTemplate({ kube: ctx.kube, namespace, owner, keys, log: ctx.log });
  }
  const hash = templateHash(template, opts.pin);
  const run: RunIdentity = { keys, prefix, owner, templateHash: hash };
  const resolved = await settleSelection(opts, ctx, selection, podSpec);
  const cleanup = cleanupTemplate
    ? await planCleanup(opts, cleanupTemplate, prefix, resolved, ctx)
    : undefined;
  const eligible = opts.skipSatisfiedNodes
    ? withoutSatisfied(opts, resolved.eligible, ctx.log)
    : resolved.eligible;
  // A plan of nothing is still a plan: it says what was skipped and why;
  // but with --fail-if-no-nodes an empty selection fails the plan as the run.
  const empty = eligible.length === 0 && !cleanup?.nodes.length;
  const failsEmpty = opts.failIfNoNodes && resolved.eligible.length === 0;
  if (empty && (opts.dryRun !== "plan" || failsEmpty)) {
    return await nothingToDo(opts, ctx, { resolved, selection, namespace, prefix, owner });
  }
  checkAffinity(opts, podSpec, eligible);

  const jobs = { namespace, keys, owner, pin: opts.pin };
  const main = planTargets(opts, eligible, { ...jobs, template, prefix, templateHash: hash });
  const cleanupPart = cleanup && cleanupTemplate
    ? planCleanupTargets(opts, cleanup, { ...jobs, template: cleanupTemplate })
    : { cleanupTargets: [] };
  logSelected(opts, ctx, { ...main, selection, resolved, eligible, namespace, owner });
  const verifyJob = verifyJobOf(opts, ctx, { ...jobs, prefix: `${prefix}-verify` });

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
    ...main,
    cleanup,
    ...cleanupPart,
    verifyJob,
  };
}

/**
 * Says why there is nothing to do, writes the `--report` (0 nodes), and ends
 * the run. No match exits 0, as `kubectl get nodes -l …` ("No resources
 * found"), `kubectl cordon -l …` and `kubectl drain -l …` do: a rollout over
 * no node left nothing undone. Scripts that need a node pass
 * `--fail-if-no-nodes` (exit 2 when none matches) or `--wait-for-nodes-secs`,
 * which fails when none matches in time. A selector key that no node carries
 * at all is most likely a typo: the line is then a warning naming the
 * nearest existing keys, and says how to make an empty selection fail.
 *
 * @returns the exit code: 0, or 1 when the report cannot be written
 * @throws {UsageError} with `--fail-if-no-nodes` when no node matches
 */
async function nothingToDo(
  opts: RunConfig,
  ctx: RunContext,
  p: Pick<Plan, "resolved" | "selection" | "namespace" | "prefix" | "owner">,
): Promise<number> {
  const done = p.resolved.eligible.length;
  const missing = done || p.selection.nodes
    ? []
    : await findMissingKeys(ctx.kube, p.selection.labelSelectors, p.selection.pageSize);
  if (!done && opts.failIfNoNodes) throw new UsageError(noNodesError(p.selection, missing));
  const [msg, fields] = nothingToDoLine(done, p.selection, missing);
  if (missing.length) ctx.log.warn(msg, fields);
  else ctx.log.info(msg, fields);
  ctx.onNothingToDo?.();
  const files = reportFiles(opts);
  if (!files.length) return EXIT.ok;
  const now = new Date();
  const written = writeReports(files, {
    input: {
      startedAt: now,
      finishedAt: now,
      namespace: p.namespace,
      prefix: p.prefix,
      owner: p.owner,
      results: [],
      uids: new Map(),
      skipped: [],
    },
    writeFile: ctx.writeFile,
    log: ctx.log,
  });
  return written ? EXIT.ok : EXIT.failed;
}

/**
 * The line that says there is nothing to do, and its JSON fields: every
 * selected node is already done, or no node matches; then kubectl's own
 * words, the selection as given, and the kubectl command that shows the same.
 *
 * @param done how many selected nodes are already done (`--skip-satisfied-nodes`)
 * @example
 * ```ts
 * nothingToDoLine(0, { labelSelectors: ["pool=gpu"], pageSize: 500, ignoreTaints: false })[0];
 * // "nothing to do: No resources found: no node matches --node-selector pool=gpu
 * //  (kubectl get nodes -l pool=gpu); nothing created, exit 0"
 * ```
 */
export function nothingToDoLine(
  done: number,
  selection: Selection,
  missing: readonly MissingKey[] = [],
): [string, Record<string, unknown>] {
  const fields = {
    event: "selected",
    selected: 0,
    skipped: { taint: 0, done },
    labelSelectors: selection.labelSelectors,
    fieldSelector: selection.fieldSelector,
    ...(missing.length ? { missingKeys: missing } : {}),
  };
  if (done) {
    const which = done === 1 ? "the 1 selected node is" : `all ${done} selected nodes are`;
    return [`nothing to do: ${which} already done; exit 0`, fields];
  }
  const typo = describeMissingKeys(missing);
  return [
    `nothing to do: No resources found: no node matches ${describeSelection(selection)} ` +
    `(${kubectlGetNodes(selection)})${typo ? `; ${typo}` : ""}; nothing created, exit 0` +
    (typo ? `; ${FAIL_IF_NO_NODES}` : ""),
    fields,
  ];
}

/** How to make an empty selection fail, said where a typo is likely. */
const FAIL_IF_NO_NODES = "pass --fail-if-no-nodes to make an empty selection fail (exit 2)";

/**
 * The error of `--fail-if-no-nodes` when no node matches: the selection,
 * its kubectl form, and the selector keys no node carries with the nearest.
 *
 * @example
 * ```ts
 * noNodesError({ labelSelectors: ["pol=gpu"], pageSize: 500, ignoreTaints: false }, []);
 * // "No node matches --node-selector pol=gpu (kubectl get nodes -l pol=gpu); nothing created (--fail-if-no-nodes)"
 * ```
 */
export function noNodesError(selection: Selection, missing: readonly MissingKey[]): string {
  const typo = describeMissingKeys(missing);
  return `No node matches ${describeSelection(selection)} (${kubectlGetNodes(selection)})` +
    `${typo ? `; ${typo}` : ""}; nothing created (--fail-if-no-nodes)`;
}

/** The kubectl command that lists what a selection matches, one per united label selector. */
function kubectlGetNodes(s: Selection): string {
  const quote = (x: string) => (/^[\w.\/=,:-]+$/.test(x) ? x : `'${x.replaceAll("'", "'\\''")}'`);
  const field = s.fieldSelector ? ` --field-selector ${quote(s.fieldSelector)}` : "";
  const labels = s.labelSelectors.length ? s.labelSelectors : [""];
  return labels.map((l) => `kubectl get nodes${l ? ` -l ${quote(l)}` : ""}${field}`).join("; ");
}

/**
 * The smoke-test Job of `--verify-job-template` for a node: the main Jobs'
 * conventions (pinned, tracking labels, owner) under the prefix
 * `<prefix>-verify`, so that the main run's Job watch, which selects its
 * owner label, never takes it for a leftover of its own.
 *
 * @throws {UsageError} when the template cannot be read or is not one batch/v1 Job
 */
function verifyJobOf(
  opts: RunConfig,
  ctx: RunContext,
  job: Omit<InstantiateOptions, "node" | "template">,
): ((node: NodeFacts) => V1Job) | undefined {
  const path = opts.verify?.jobTemplate;
  if (path === undefined) return undefined;
  const text = ctx.readFile(path);
  if (text === undefined) {
    throw new UsageError(`Cannot read --verify-job-template ${path}: no such file or not readable`);
  }
  const template = parseJobTemplate(text, path);
  checkTemplateNamespace(template, job.namespace, path);
  const short = smokeTtlTooShort(template, VERIFY_POLL_MS / 1000);
  if (short) throw new UsageError(`Invalid --verify-job-template ${path}: ${short}`);
  const hash = templateHash(template, opts.pin);
  return (node) => instantiateJob({ ...job, template, node, templateHash: hash });
}

/** The cleanup run's identity and its Jobs, one per node it owes. */
function planCleanupTargets(
  opts: RunConfig,
  cleanup: CleanupPlan,
  job: Omit<InstantiateOptions, "node" | "prefix">,
): Pick<Plan, "cleanupRun" | "cleanupTargets"> {
  const templateHashOf = templateHash(job.template, opts.pin);
  const { prefix } = cleanup;
  return {
    cleanupRun: { keys: job.keys, prefix, owner: job.owner, templateHash: templateHashOf },
    cleanupTargets: targetsOf(cleanup.nodes, { ...job, prefix, templateHash: templateHashOf }),
  };
}

/**
 * The Jobs' name prefix: `--name-prefix`, else the template's name.
 *
 * @throws {UsageError} when there is none, or nothing of it is usable in a name
 */
export function namePrefixOf(opts: RunConfig, template: JobTemplate): string {
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
  return prefix;
}

/**
 * Checks both templates against the options (TTL) and the namespace in use.
 *
 * @returns the namespace of the Jobs
 * @throws {UsageError} naming the template and the fix
 */
/**
 * The template as the run uses it, with a warning for what it should know:
 * this tool's own keys dropped (a template copied from an owner or a
 * per-node Job; see {@linkcode withoutOwnKeys}), before anything hashes it,
 * a missing `spec.backoffLimit`, and a `podReplacementPolicy` that lets two pods
 * of a node's Job run at once.
 *
 * @param source how the template is named in the warnings (its path)
 */
export function checkedTemplate(
  opts: RunConfig,
  ctx: RunContext,
  template: JobTemplate,
  source: string,
): JobTemplate {
  const { template: own, dropped } = withoutOwnKeys(template, opts.trackingLabelPrefix);
  if (dropped.length) {
    ctx.log.warn(
      `job template ${source}: dropped this tool's own keys (${dropped.join(", ")}); ` +
        "it looks copied from a Job this tool made, and the dispatcher sets its keys itself",
      { event: "template-keys-dropped", template: source, dropped },
    );
  }
  // The Job controller's default, 6, retries a failing pod with a backoff of
  // 10 s doubling: about 10 minutes of one node's slot before it counts failed.
  if (own.spec.backoffLimit === undefined || own.spec.backoffLimit === null) {
    ctx.log.warn(
      `job template ${source} has no spec.backoffLimit: Kubernetes' default of 6 retries ` +
        "a failing pod for about 10 minutes per node before the node counts as failed; " +
        "set spec.backoffLimit (0: fail at the first pod failure)",
      { event: "template-no-backoff-limit", template: source },
    );
  }
  const risk = podReplacementRisk(own);
  if (risk) {
    ctx.log.warn(`job template ${source}: ${risk}`, {
      event: "template-pod-replacement",
      template: source,
    });
  }
  return own;
}

function checkTemplates(
  opts: RunConfig,
  ctx: RunContext,
  template: JobTemplate,
  cleanupTemplate: JobTemplate | undefined,
): string {
  checkTtl(opts, template, opts.jobTemplate);
  if (cleanupTemplate) checkTtl(opts, cleanupTemplate, opts.cleanupJobTemplate);
  const namespace = resolveNamespace(opts, ctx);
  checkTemplateNamespace(template, namespace, opts.jobTemplate);
  if (cleanupTemplate) checkTemplateNamespace(cleanupTemplate, namespace, opts.cleanupJobTemplate!);
  return namespace;
}

/** How nodes are selected, from the options. */
function selectionOf(opts: RunConfig): Selection {
  return {
    nodes: opts.nodes,
    labelSelectors: opts.nodeSelectors,
    fieldSelector: opts.nodeFieldSelector,
    pageSize: opts.nodePageSize,
    ignoreTaints: opts.ignoreNodeTaints,
  };
}

/**
 * Waits for the selection to settle and says which nodes were skipped for
 * their taints.
 *
 * @throws {UsageError} when every matched node is tainted, or none matched in time
 */
async function settleSelection(
  opts: RunConfig,
  ctx: RunContext,
  selection: Selection,
  podSpec: V1PodSpec,
): Promise<Resolved> {
  const { log } = ctx;
  const resolved = await waitForSelection(ctx.kube, selection, podSpec, {
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
  return resolved;
}

/** The eligible nodes without those already done (`--skip-satisfied-nodes`), which are said. */
function withoutSatisfied(opts: RunConfig, eligible: V1Node[], log: RunContext["log"]): V1Node[] {
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
  return done.length ? eligible.filter((n) => !done.includes(n)) : eligible;
}

/**
 * Refuses a template whose nodeSelector or affinity excludes a selected node.
 *
 * @throws {UsageError} naming how many, the first, and the fix
 */
function checkAffinity(opts: RunConfig, podSpec: V1PodSpec, eligible: V1Node[]): void {
  const mismatched = eligible
    .map((n) => [n.metadata!.name!, affinityMismatch(podSpec, n)] as const)
    .filter(([, why]) => why);
  if (!mismatched.length) return;
  const [name, why] = mismatched[0];
  throw new UsageError(
    `Invalid job template ${opts.jobTemplate}: it excludes ${
      counted(mismatched.length, "selected node")
    }, ` +
      `e.g. ${name} (${why}); a pod pinned to a node it does not match is rejected by the kubelet. ` +
      "Narrow the node selection or relax the template's nodeSelector/affinity",
  );
}

/**
 * The main Jobs in dispatch order (`--order`), and with `--max-per-topology`
 * the failure domain of each.
 */
function planTargets(
  opts: RunConfig,
  eligible: V1Node[],
  job: Omit<InstantiateOptions, "node">,
): Pick<Plan, "selected" | "targets" | "domain"> {
  const selected = new Map(eligible.map((n) => [n.metadata!.name!, n]));
  const limit = opts.maxPerTopology;
  const labelsOf = (t: Target) => selected.get(t.node.name)?.metadata?.labels;
  const domain = limit ? (t: Target) => domainOf(labelsOf(t), limit.key) : undefined;
  const ordered: Target[] = orderItems(targetsOf(eligible, job), {
    order: opts.order,
    seed: opts.seed,
    zone: (t) => domainOf(labelsOf(t), "topology.kubernetes.io/zone"),
    limitDomain: domain,
  });
  // Waves are cut from the dispatch order: wave 1 is its head.
  const targets = opts.waves
    ? withWaves(ordered, resolveWaves(opts.waves.sizes, ordered.length), (t, wave) => ({
      ...t,
      wave,
    }))
    : ordered;
  return { selected, targets, domain };
}

/**
 * The nodes' targets. Their `job()` is one function for all of them, which
 * builds the Job of the target it is called on (`this`): a closure per
 * target was ~100 bytes a node held for the whole run (6.5 MB at 65,000).
 */
function targetsOf(nodes: V1Node[], job: Omit<InstantiateOptions, "node">): Target[] {
  const make = function (this: Target): V1Job {
    return instantiateJob({ ...job, node: this.node });
  };
  return nodes.map((n) => targetOf(n, job, make));
}

/** A node's target: its Job's name, and its Job built only when it is created (`make`). */
function targetOf(
  n: V1Node,
  job: Omit<InstantiateOptions, "node">,
  make: (this: Target) => V1Job,
): Target {
  const node = nodeFacts(n);
  const name = jobName(job.prefix, node.name);
  // A success an earlier run of this owner and template kept on the node
  // before it was stopped during the node's post-success work.
  const kept = keptSuccess(n.metadata?.annotations, keptKey(job.keys.kept, name), {
    job: name,
    owner: job.owner?.uid,
    templateHash: job.templateHash,
  });
  return {
    node,
    name,
    job: make,
    ...(kept ? { keptSuccess: true, ...endOf(kept) } : {}),
  };
}

/** The end a kept success's mark says its Job had, when it says one that reads as a time. */
function endOf(mark: { at?: string }): { keptEndedAt?: number } {
  const at = mark.at === undefined ? NaN : Date.parse(mark.at);
  return Number.isFinite(at) ? { keptEndedAt: at } : {};
}

/** The one line that says what the run selected, and what it will do to the nodes. */
function logSelected(
  opts: RunConfig,
  ctx: RunContext,
  p: Pick<Plan, "targets" | "selection" | "resolved" | "eligible" | "namespace" | "owner">,
): void {
  const [msg, fields] = selectedLine({
    selected: p.targets.length,
    selection: p.selection,
    skippedForTaints: p.resolved.skipped.length,
    done: p.resolved.eligible.length - p.eligible.length,
    namespace: p.namespace,
    parallelism: opts.parallelism,
    owner: p.owner?.name,
    maintenance: opts.maintenance,
  });
  ctx.log.info(msg, fields);
}

/** What {@linkcode selectedLine} says. */
export interface SelectedFacts {
  /** How many nodes get a Job. */
  selected: number;
  /** How nodes were selected. */
  selection: Selection;
  /** Matched nodes left out for a taint the template does not tolerate. */
  skippedForTaints: number;
  /** Matched nodes already done (`--skip-satisfied-nodes`). */
  done: number;
  /** The Jobs' namespace. */
  namespace: string;
  /** `--parallelism`. */
  parallelism: number;
  /** The owner Job's name, if any. */
  owner?: string;
  /** What the run does around each Job. */
  maintenance: Pick<
    MaintenanceConfig,
    "cordon" | "drain" | "uncordonOnFailure" | "maxUnavailable" | "windows"
  >;
}

/**
 * The `selected` line and its JSON fields: how many nodes, how they were
 * selected, how many were skipped and why, and, when set, what the run does
 * to each node (cordon, drain, uncordon), the `--max-unavailable` budget and
 * the `--window`s, so that the first line says what is about to happen.
 *
 * @example
 * ```ts
 * selectedLine({ selected: 1, selection: { nodes: ["n1"], labelSelectors: [], pageSize: 500,
 *   ignoreTaints: true }, skippedForTaints: 0, done: 0, namespace: "ops", parallelism: 2,
 *   maintenance: { cordon: false, uncordonOnFailure: false, windows: [] } })[0];
 * // "selected 1 node (--nodes n1), namespace ops, parallelism 2"
 * ```
 */
export function selectedLine(f: SelectedFacts): [string, Record<string, unknown>] {
  const skipped = [
    f.skippedForTaints ? `${f.skippedForTaints} skipped for taints` : "",
    f.done ? `${f.done} already done` : "",
  ].filter(Boolean);
  const does = maintenanceWords(f.maintenance);
  const msg =
    `selected ${counted(f.selected, "node")} (${
      [describeSelection(f.selection), ...skipped].join("; ")
    }), namespace ${f.namespace}, parallelism ${f.parallelism}` +
    (f.owner ? `, owner job ${f.owner}` : "") +
    (does.length ? `; ${does.join("; ")}` : "");
  return [msg, {
    event: "selected",
    selected: f.selected,
    skipped: { taint: f.skippedForTaints, done: f.done },
    namespace: f.namespace,
    parallelism: f.parallelism,
    owner: f.owner,
    cordon: f.maintenance.cordon || f.maintenance.drain !== undefined,
    drain: f.maintenance.drain !== undefined,
    maxUnavailable: f.maintenance.maxUnavailable?.text,
    windows: f.maintenance.windows.map((w) => w.spec),
  }];
}

/** What the run does around each Job, in a few words each; empty when nothing. */
function maintenanceWords(m: SelectedFacts["maintenance"]): string[] {
  const words: string[] = [];
  if (m.cordon || m.drain) {
    // --drain implies --cordon (cli/options.ts); the uncordon is only of what this run cordoned.
    words.push(
      `each node: cordon${m.drain ? ", drain" : ""}, Job, uncordon ` +
        (m.uncordonOnFailure ? "after it" : "on success"),
    );
  }
  if (m.maxUnavailable) words.push(`max-unavailable ${m.maxUnavailable.text}`);
  if (m.windows.length) words.push(`window ${m.windows.map((w) => w.spec).join(" or ")}`);
  return words;
}
