/**
 * The plan step's plan as `preview/` reads it (`--dry-run=plan`,
 * `--estimate-from`): the nodes in dispatch order with their waves, and the
 * matched nodes that get no Job with the reasons the run's log gives.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { labelValue } from "../job.ts";
import type { Kube } from "../kube/client.ts";
import { jobAction } from "../engine/stale.ts";
import type { NodeDurations } from "../preview/estimate.ts";
import { previewPlan, type PreviewSource } from "../preview/preview.ts";
import { formatTaint } from "../nodes/eligibility.ts";
import { describeSelection } from "../nodes/select.ts";
import type { RunConfig, RunContext } from "./config.ts";
import { accessNeeds, checkPermissions, optionalNeedsLine } from "./preflight.ts";
import { openGate } from "./run_gate.ts";
import type { Plan } from "./plan.ts";
import { jobApiFor } from "./job_api.ts";

/**
 * The Jobs of the run's prefix as they are now, by name: what a run finds
 * on its first LIST and adopts, counts or replaces (one LIST, a read).
 */
export async function existingJobs(kube: Kube, plan: Plan): Promise<Map<string, V1Job>> {
  const api = jobApiFor(kube, plan.namespace, `${plan.keys.owner}=${labelValue(plan.prefix)}`);
  const { items } = await api.listJobs();
  return new Map(items.map((j) => [j.metadata!.name!, j]));
}

/**
 * The matched nodes that get no Job, and why, in the words of the run's own
 * `skipped node` lines: a taint the template does not tolerate, or already
 * done (`--skip-satisfied-nodes`).
 */
export function skippedNodes(opts: RunConfig, plan: Plan): { node: string; reason: string }[] {
  const taints = plan.resolved.skipped.map(({ node, taint }) => ({
    node: node.metadata!.name!,
    reason: `taint ${formatTaint(taint)} is not tolerated by the template`,
  }));
  const kept = new Set(plan.eligible);
  const done = plan.resolved.eligible.filter((n) => !kept.has(n)).map((n) => ({
    node: n.metadata!.name!,
    reason: `already done (${opts.nodeLabels?.key}=${opts.nodeLabels?.value})`,
  }));
  return [...taints, ...done];
}

/**
 * What the preview reads of a plan and the run's options; each target with
 * what the run would do with the Job its node has now (`jobs`, by name), as
 * the engine decides it on its first sight (engine/stale.ts `jobAction`).
 */
export function previewSource(
  opts: RunConfig,
  plan: Plan,
  jobs: ReadonlyMap<string, V1Job>,
  durations?: NodeDurations,
): Omit<PreviewSource, "output"> {
  return {
    namespace: plan.namespace,
    prefix: plan.prefix,
    owner: plan.owner?.name,
    selection: describeSelection(plan.selection),
    parallelism: opts.parallelism,
    targets: plan.targets.map((t) => ({
      node: t.node.name,
      job: t.name,
      wave: t.wave,
      ...(plan.domain && { domain: plan.domain(t) }),
      action: jobAction(jobs.get(t.name), plan.run, {
        nodeUid: t.node.uid,
        retryFailed: opts.maintenance.retryFailed,
      }),
    })),
    canary: opts.waves?.canary,
    skipped: skippedNodes(opts, plan),
    cleanup: plan.cleanupTargets.map((t) => ({ node: t.node.name, job: t.name })),
    matched: plan.resolved.matched,
    maintenance: opts.maintenance,
    soakSecs: opts.waveSoakSecs,
    durations,
    maxPerTopology: opts.maxPerTopology,
  };
}

/**
 * The pre-flight of the run's permissions (`accessNeeds`): a missing
 * required one stops the run before anything is touched; missing optional
 * ones are said once, as one warning.
 *
 * @throws {PermissionError} naming every missing required permission
 */
export async function preflight(
  opts: RunConfig,
  plan: Plan,
  ctx: Pick<RunContext, "kube" | "log">,
): Promise<void> {
  const warn = (line: string) => ctx.log.warn(line, { event: "preflight" });
  const needs = accessNeeds(opts, { ...plan, server: ctx.kube.server });
  const lacking = await checkPermissions(ctx.kube, needs, warn);
  const line = optionalNeedsLine(lacking);
  if (line) warn(line);
}

/**
 * `--dry-run=plan` after the plan step: the permissions the run checks
 * before its first cordon (the same SelfSubjectAccessReviews, which store
 * nothing), then the Jobs there now, then the plan printed.
 *
 * @returns exit code 0
 * @throws {PermissionError} when the run would stop for a permission it lacks, as the run says it
 * @throws {ApiError} when the cluster refuses a read
 */
export async function runPlanPreview(
  opts: RunConfig,
  plan: Plan,
  ctx: Pick<RunContext, "kube" | "stdout" | "log">,
  durations?: NodeDurations,
): Promise<number> {
  // A plan of a run that would stop at once says so, with the run's words and exit code.
  let gate: PreviewSource["gate"];
  if (plan.targets.length + plan.cleanupTargets.length) {
    await preflight(opts, plan, ctx);
    const held = opts.gate && await gateNow(opts, plan, ctx);
    if (typeof held === "number") return held;
    gate = held;
  }
  const jobs = await existingJobs(ctx.kube, plan);
  const src = previewSource(opts, plan, jobs, durations);
  return await previewPlan({ ...src, gate, output: opts.output }, ctx);
}

/**
 * The health gate as the run opens it before its first Job: an earlier
 * run's exit latch refuses (exit 5), a query Prometheus rejects is bad input,
 * no answer is exit 3; else every query measured once, and whether that
 * holds every start now. Reads only: the gate gets no latch to write until
 * the run binds it.
 */
async function gateNow(
  opts: RunConfig,
  plan: Plan,
  ctx: Pick<RunContext, "kube" | "log">,
): Promise<PreviewSource["gate"] | number> {
  const config = opts.gate!;
  const gate = await openGate({ config, plan, kube: ctx.kube, log: ctx.log });
  if (typeof gate === "number") return gate;
  const heldBy = gate.pausedBy();
  await gate.stop();
  return { url: config.url, queries: config.queries.length + (config.alerts ? 1 : 0), heldBy };
}
