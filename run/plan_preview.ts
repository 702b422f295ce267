/**
 * The plan step's plan as `preview/` reads it (`--dry-run=plan`,
 * `--estimate-from`): the nodes in dispatch order with their waves, and the
 * matched nodes that get no Job with the reasons the run's log gives.
 *
 * @module
 */

import type { NodeDurations } from "../preview/estimate.ts";
import type { PreviewSource } from "../preview/preview.ts";
import { formatTaint } from "../nodes/eligibility.ts";
import { describeSelection } from "../nodes/select.ts";
import type { RunConfig } from "./config.ts";
import type { Plan } from "./plan.ts";

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

/** What the preview reads of a plan and the run's options. */
export function previewSource(
  opts: RunConfig,
  plan: Plan,
  durations?: NodeDurations,
): Omit<PreviewSource, "output"> {
  return {
    namespace: plan.namespace,
    prefix: plan.prefix,
    owner: plan.owner?.name,
    selection: describeSelection(plan.selection),
    parallelism: opts.parallelism,
    targets: plan.targets.map((t) => ({ node: t.node.name, job: t.name, wave: t.wave })),
    canary: opts.waves?.canary,
    skipped: skippedNodes(opts, plan),
    cleanup: plan.cleanupTargets.map((t) => ({ node: t.node.name, job: t.name })),
    matched: plan.resolved.matched,
    maintenance: opts.maintenance,
    soakSecs: opts.waveSoakSecs,
    durations,
  };
}
