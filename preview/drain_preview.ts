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

import type { V1Pod } from "@kubernetes/client-node";
import type { Kube } from "../kube/client.ts";
import { type DrainConfig, drainParts } from "../maintenance/config.ts";
import { describeRefusals, planDrain, podRef, terminating } from "../maintenance/drain.ts";
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
  // A pod on its way out gets no eviction from the run, only its wait: the
  // plan asks none either (it stays in `evict`, the pods the drain waits for).
  for (const pod of plan.evict.filter((p) => !terminating(p))) {
    const r = await dryRunEviction(kube, pod, flags);
    if (r && "budget" in r) refusedNow.push(r);
    else if (r) notJudged.push(r);
  }
  const evict = plan.evict.map(podRef);
  const base = { evict, stays, warnings: plan.warnings, refusedNow, notJudged };
  return flags.disableEviction ? { ...base, deletes: true } : base;
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
  let next = 0;
  const worker = async () => {
    while (next < nodes.length) {
      const node = nodes[next++];
      out.set(node, await previewDrain(kube, node, flags));
    }
  };
  await Promise.all(Array.from({ length: Math.min(NODES_AT_ONCE, nodes.length) }, worker));
  return out;
}
