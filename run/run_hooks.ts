/**
 * The fan-out's hooks built from a run's parts: the availability budget over
 * the watched nodes, the post-success work, and the user's pause gates as
 * one.
 *
 * @module
 */

import type { V1Node } from "@kubernetes/client-node";
import type { StartBudget, Target } from "../engine/fanout_types.ts";
import { describeBudget, slotsUnderBudget, unavailableCount } from "../maintenance/budget.ts";
import type { Maintenance } from "../maintenance/maintenance.ts";
import type { NodeWriter } from "../nodes/node_writer.ts";
import type { PauseGate } from "../engine/pause.ts";
import type { NodeWatch } from "../nodes/select.ts";
import type { SuccessKeeper } from "../nodes/success_mark.ts";
import type { RunIdentity } from "../job.ts";
import type { NodeVerifier } from "../verify/verify.ts";

/**
 * `--max-unavailable` over the watched selection: NotReady nodes, nodes
 * cordoned by anyone, and the nodes this run works on count against it.
 */
export function availabilityBudget(
  max: number,
  nodeWatch: NodeWatch,
  onChange: (wake: () => void) => void,
): StartBudget {
  const count = (inWork: readonly string[]) => unavailableCount(nodeWatch.nodes(), new Set(inWork));
  return {
    // The engine bounds --parallelism itself: only the budget's room here.
    slots: (inWork) =>
      slotsUnderBudget({
        maxUnavailable: max,
        unavailable: count(inWork).count,
        parallelism: Infinity,
        inFlight: 0,
      }),
    describe: (inWork) => describeBudget(count(inWork), max),
    onChange,
  };
}

/** A success kept on its node around the post-success work (`nodes/success_mark.ts`). */
export interface KeptSuccess {
  /** Writes the mark before the work; an outage is thrown. */
  keep(t: Target, jobEndedAt: number): Promise<void>;
  /** Removes it once the work succeeded; never throws. */
  release(t: Target): Promise<void>;
}

/**
 * The marks of one run's successes: each names the node's Job, the run's
 * owner and template hash, as the re-run's `keptSuccess` (`nodes/success_mark.ts`) reads them.
 */
export function keptSuccesses(keeper: SuccessKeeper, run: RunIdentity): KeptSuccess {
  return {
    keep: (t, jobEndedAt) =>
      keeper.keep(t.node.name, {
        job: t.name,
        owner: run.owner?.uid,
        templateHash: run.templateHash,
        at: new Date(jobEndedAt).toISOString(),
      }),
    release: (t) => keeper.release(t.node.name),
  };
}

/**
 * The post-success work: the success kept on the node first ("latch first,
 * act second": a run killed during the work leaves it, and the re-run counts
 * it even once the Job's TTL removed the Job), then the node writer's
 * (Ready, the verification, labels, taints), then the uncordon, so that a
 * node is schedulable again only once it is ready for it and verified. A
 * node that fails its verification stays cordoned, as failed nodes do, and
 * is not labelled; its mark stays, as its Job would for a re-run.
 */
export function afterSuccess(
  writer: NodeWriter,
  maintenance: Maintenance | undefined,
  node: (t: Target) => V1Node,
  verifier?: NodeVerifier,
  kept?: KeptSuccess,
): ((t: Target, jobEndedAt: number) => Promise<string | undefined>) | undefined {
  if (!writer.hasAfter && !maintenance && !verifier) return undefined;
  return async (t, jobEndedAt) => {
    await kept?.keep(t, jobEndedAt);
    const verify = verifier && (() => verifier.verify(t.node, jobEndedAt));
    const why = (writer.hasAfter ? await writer.after(node(t), verify) : await verify?.()) ??
      await maintenance?.afterSuccess(t.node);
    if (!why) await kept?.release(t);
    return why;
  };
}

/**
 * The pause gates as one (the owner's annotation, the pause file): paused
 * while any says so, with the first one's reason; undefined without gates.
 */
export function anyPaused(gates: readonly PauseGate[]): PauseGate | undefined {
  return gates.length
    ? {
      pausedBy: () => gates.map((g) => g.pausedBy()).find((by) => by !== undefined),
      onChange: (wake) => gates.forEach((g) => g.onChange(wake)),
      stopsBy: () => gates.map((g) => g.stopsBy?.()).find((by) => by !== undefined),
    }
    : undefined;
}
