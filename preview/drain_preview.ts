/**
 * What `--drain` would do to each planned node now, asked of the cluster
 * without changing it: the node's pods sorted by the run's own drain rules
 * (maintenance/drain.ts `planDrain`), then every eviction sent with
 * `dryRun=All`, which the API server judges as it would the real one
 * (a PodDisruptionBudget allowing no disruption answers 429 naming itself)
 * and stores nothing: `kubectl drain --dry-run=server` asks the same.
 *
 * @module
 */

import type { V1Pod, V1PodDisruptionBudget } from "@kubernetes/client-node";
import type { Kube } from "../kube/client.ts";
import { type DrainConfig, drainParts } from "../maintenance/config.ts";
import { describeRefusals, planDrain, podRef, terminating } from "../maintenance/drain.ts";
import { counted } from "../base/plural.ts";
import { evictPod, podsOnNode } from "../maintenance/evict.ts";
import type { DrainPreview } from "./plan_view.ts";

/** Nodes asked at once: each is a LIST and its evictions; the client bounds the requests too. */
const NODES_AT_ONCE = 8;

/**
 * One node's drain, previewed: its pods by the drain's rules, and the answer
 * of a server-side dry-run eviction for each pod the drain would evict. A
 * dry run is judged alone: two pods under a budget that allows one
 * disruption are each allowed now, though the real drain evicts the second
 * only once the first is replaced.
 *
 * @throws {ApiError} when the pods cannot be listed (as the run's drain would fail)
 */
export async function previewDrain(
  kube: Kube,
  node: string,
  flags: DrainConfig,
  budgets: BudgetCache = new Map(),
): Promise<DrainPreview> {
  const plan = planDrain(await podsOnNode(kube, node), drainParts(flags).pods);
  const stays = plan.skipped.map((s) => ({ pod: podRef(s.pod), reason: s.reason }));
  if (plan.refused.length) {
    return {
      evict: [],
      stays,
      refused: `drain refused: ${describeRefusals(plan.refused)}`,
      warnings: [],
      refusedNow: [],
      notJudged: [],
    };
  }
  const refusedNow: DrainPreview["refusedNow"] = [];
  const notJudged: DrainPreview["notJudged"] = [];
  // A finished pod (an earlier Job's, Succeeded or Failed) is removed as
  // kubectl drain removes it, but the Eviction API deletes it at once without
  // consulting a budget (it no longer counts as healthy), and nothing runs in
  // it to stop: it is listed apart, never asked, never waited for.
  const finished = plan.evict.filter(isFinished);
  const running = plan.evict.filter((p) => !isFinished(p));
  // A pod on its way out gets no eviction from the run, only its wait: the
  // plan asks none either (it stays in `evict`, the pods the drain waits for).
  for (const pod of running.filter((p) => !terminating(p))) {
    const r = await dryRunEviction(kube, pod, flags);
    if (r && "budget" in r) refusedNow.push(await judged(kube, r, budgets));
    else if (r) notJudged.push(r);
  }
  const evict = running.map(podRef);
  const base = {
    evict,
    ...(finished.length ? { finished: finished.map(podRef) } : {}),
    stays,
    warnings: plan.warnings,
    refusedNow,
    notJudged,
  };
  return flags.disableEviction ? { ...base, deletes: true } : base;
}

/** Whether the pod has ended (Succeeded or Failed): nothing runs in it. */
function isFinished(pod: V1Pod): boolean {
  return pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
}

/** The budgets read so far, by `namespace/name`: each is read once per plan. */
export type BudgetCache = Map<string, Promise<V1PodDisruptionBudget | undefined>>;

/**
 * A refusal with, when its budget can never allow an eviction, why: read
 * from the budget itself. A budget that cannot be read (the user may not
 * get PodDisruptionBudgets, or it is gone) leaves the refusal as it was.
 */
async function judged(
  kube: Kube,
  r: DrainPreview["refusedNow"][number],
  budgets: BudgetCache,
): Promise<DrainPreview["refusedNow"][number]> {
  if (!r.budget) return r;
  if (!budgets.has(r.budget)) {
    const [ns, name] = r.budget.split("/");
    const path = `/apis/policy/v1/namespaces/${encodeURIComponent(ns)}/poddisruptionbudgets/` +
      encodeURIComponent(name);
    budgets.set(r.budget, kube.get<V1PodDisruptionBudget>(path).catch(() => undefined));
  }
  const pdb = await budgets.get(r.budget);
  const forGood = pdb && neverAllows(pdb);
  return forGood ? { ...r, forGood } : r;
}

/**
 * Why a PodDisruptionBudget can never allow an eviction, or undefined when
 * it can: `maxUnavailable` 0 (or 0%), or `minAvailable` at least the pods it
 * matches (`status.expectedPods`, as the disruption controller counts them;
 * a percentage rounds up, as the controller's does). Such a budget refuses
 * every eviction until a person scales the workload up or relaxes it; a
 * drain waits on it for its whole timeout and fails the node.
 *
 * @example
 * ```ts
 * neverAllows({ spec: { maxUnavailable: 0 } }); // "maxUnavailable 0: it never allows an eviction"
 * neverAllows({ spec: { minAvailable: 1 }, status: { expectedPods: 2 } }); // undefined
 * ```
 */
export function neverAllows(pdb: V1PodDisruptionBudget): string | undefined {
  const spec = pdb.spec ?? {};
  const never = "it never allows an eviction";
  if (spec.maxUnavailable !== undefined) {
    return String(spec.maxUnavailable).replace(/%$/, "") === "0"
      ? `maxUnavailable ${spec.maxUnavailable}: ${never}`
      : undefined;
  }
  const expected = pdb.status?.expectedPods;
  if (spec.minAvailable === undefined || !expected) return undefined;
  const min = typeof spec.minAvailable === "number"
    ? spec.minAvailable
    : Math.ceil(parseFloat(spec.minAvailable) * expected / 100);
  return min >= expected
    ? `minAvailable ${spec.minAvailable} of the ${counted(expected, "pod")} it matches: ${never}`
    : undefined;
}

/**
 * The API server's answer to one dry-run eviction: undefined when it would
 * go, a refusal (with `budget`, undefined unless a budget's), or a pod it
 * did not judge now (no `budget` key): throttling by Priority and Fairness
 * (a 429 without a budget's cause), a server error, a namespace being
 * deleted. The run's drain sends those again until its timeout, so they say
 * nothing of the budgets.
 */
async function dryRunEviction(
  kube: Kube,
  pod: V1Pod,
  flags: DrainConfig,
): Promise<DrainPreview["refusedNow"][number] | DrainPreview["notJudged"][number] | undefined> {
  const verdict = await evictPod(kube, pod, { ...drainParts(flags).evict, dryRun: true });
  switch (verdict.kind) {
    case "evicted":
    case "gone":
      return undefined;
    case "blocked":
      return {
        pod: podRef(pod),
        budget: verdict.budget,
        message: `cannot evict pod ${podRef(pod)}: ${verdict.message}`,
      };
    case "retry":
      return { pod: podRef(pod), message: verdict.message };
    default:
      return { pod: podRef(pod), budget: undefined, message: verdict.message };
  }
}

/**
 * Previews the drain of every node, a few nodes at a time, in the order given.
 *
 * @throws {ApiError} when a node's pods cannot be listed
 */
export async function previewDrains(
  kube: Kube,
  nodes: readonly string[],
  flags: DrainConfig,
): Promise<Map<string, DrainPreview>> {
  const out = new Map<string, DrainPreview>();
  const budgets: BudgetCache = new Map();
  let next = 0;
  const worker = async () => {
    while (next < nodes.length) {
      const node = nodes[next++];
      out.set(node, await previewDrain(kube, node, flags, budgets));
    }
  };
  await Promise.all(Array.from({ length: Math.min(NODES_AT_ONCE, nodes.length) }, worker));
  return out;
}
