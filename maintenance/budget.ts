/**
 * The availability budget (`--max-unavailable N|P%`): how many nodes of the
 * selection may be out of service at once, counting the nodes that are
 * already down or cordoned, not only those this run is working on.
 *
 * @module
 */

import type { V1Node } from "@kubernetes/client-node";
import { percentOf } from "../base/percent.ts";
import { UsageError } from "../job.ts";
import { isReady } from "../nodes/lifecycle.ts";

/** A parsed `--max-unavailable`: a node count or a percentage of the selection. */
export type MaxUnavailable =
  | { kind: "count"; count: number; text: string }
  | { kind: "percent"; percent: number; text: string };

/**
 * Parses `--max-unavailable N|P%`. Zero is refused, as a Deployment's
 * validation refuses maxUnavailable 0 with maxSurge 0: nothing could ever
 * start. A percentage is a whole number up to 100.
 *
 * @throws {UsageError} naming the flag, the value and the fix
 * @example
 * ```ts
 * parseMaxUnavailable("25%"); // { kind: "percent", percent: 25, text: "25%" }
 * ```
 */
export function parseMaxUnavailable(text: string): MaxUnavailable {
  const m = text.trim().match(/^(\d+)(%?)$/);
  const bad = (detail: string) =>
    new UsageError(`Invalid --max-unavailable ${JSON.stringify(text)}: ${detail}`);
  if (!m) throw bad("expected a whole number of nodes or a percentage such as 10%");
  const n = Number(m[1]);
  if (n === 0) {
    throw bad("0 would never let a node start; give at least 1 (or 1%)");
  }
  if (m[2]) {
    if (n > 100) throw bad("a percentage is at most 100%");
    return { kind: "percent", percent: n, text };
  }
  return { kind: "count", count: n, text };
}

/**
 * How many nodes of `total` may be unavailable. A percentage rounds down, as
 * a Deployment's maxUnavailable does, and is at least 1: a Deployment whose
 * fenceposts both round to zero also takes 1 (ResolveFenceposts), and a run
 * never adds nodes, so a budget of 0 would only stall it.
 *
 * @example
 * ```ts
 * resolveMaxUnavailable(parseMaxUnavailable("10%"), 25); // 2
 * resolveMaxUnavailable(parseMaxUnavailable("10%"), 5); // 1
 * ```
 */
export function resolveMaxUnavailable(spec: MaxUnavailable, total: number): number {
  if (spec.kind === "count") return spec.count;
  return Math.max(1, percentOf(spec.percent, total));
}

/** Which nodes of the selection are unavailable, and why; a node counts once. */
export interface Unavailability {
  /** How many nodes are unavailable. */
  count: number;
  /** Nodes whose Ready condition is not True (not in work). */
  notReady: string[];
  /** Ready nodes with `spec.unschedulable`, cordoned by anyone (not in work). */
  cordoned: string[];
  /** Nodes this run is working on (cordoned, draining, running the Job, settling). */
  inWork: string[];
}

/**
 * Counts the selection's unavailable nodes: NotReady, cordoned (by anyone:
 * an operator's cordon is a node out of service too, as OpenShift's
 * machine-config pools count it), or worked on by this run. A node this run
 * cordoned and left cordoned after a failure keeps counting: it is still
 * out of service.
 *
 * Every node in work counts, in the selection or not: the node informers
 * watch with the selection's label selectors, and the API server sends
 * DELETED as soon as a node stops matching, so a cleanup run that removes
 * the selecting label before the drain (`--remove-node-label`), or a Job
 * that relabels its node, would otherwise take the node out of the count
 * for its whole drain, Job and settle.
 *
 * Needs the nodes' `status.conditions`, which `slimNode` drops.
 *
 * @example
 * ```ts
 * unavailableCount([{ metadata: { name: "a" }, spec: { unschedulable: true } }], new Set()).cordoned;
 * // ["a"]
 * ```
 */
export function unavailableCount(
  nodes: readonly V1Node[],
  inWork: ReadonlySet<string>,
): Unavailability {
  const u: Unavailability = { count: inWork.size, notReady: [], cordoned: [], inWork: [...inWork] };
  for (const node of nodes) {
    const name = node.metadata?.name ?? "";
    if (inWork.has(name)) continue;
    else if (!isReady(node)) u.notReady.push(name);
    else if (node.spec?.unschedulable) u.cordoned.push(name);
    else continue;
    u.count++;
  }
  return u;
}

/** What decides how many new nodes may start now. */
export interface SlotInput {
  /** The resolved `--max-unavailable`; undefined: no budget. */
  maxUnavailable?: number;
  /** The selection's unavailable nodes, in-work ones included. */
  unavailable: number;
  /** `--parallelism`. */
  parallelism: number;
  /** Nodes of this run in flight (they hold a parallelism slot). */
  inFlight: number;
}

/**
 * How many more nodes may start now: the smaller of what the budget and
 * `--parallelism` leave, never negative (a budget already spent by nodes
 * that were down before the run waits until they come back).
 *
 * @example
 * ```ts
 * slotsUnderBudget({ maxUnavailable: 2, unavailable: 1, parallelism: 3, inFlight: 0 }); // 1
 * ```
 */
export function slotsUnderBudget(s: SlotInput): number {
  const byParallelism = s.parallelism - s.inFlight;
  const byBudget = s.maxUnavailable === undefined
    ? byParallelism
    : s.maxUnavailable - s.unavailable;
  return Math.max(0, Math.min(byParallelism, byBudget));
}

/**
 * The budget for the progress line: `unavailable 2/3 (1 NotReady, 1 cordoned)`.
 *
 * @example
 * ```ts
 * describeBudget({ count: 1, notReady: ["a"], cordoned: [], inWork: [] }, 2);
 * // "unavailable 1/2 (1 NotReady)"
 * ```
 */
export function describeBudget(u: Unavailability, maxUnavailable: number): string {
  const why = [
    u.inWork.length ? `${u.inWork.length} in work` : "",
    u.notReady.length ? `${u.notReady.length} NotReady` : "",
    u.cordoned.length ? `${u.cordoned.length} cordoned` : "",
  ].filter(Boolean);
  return `unavailable ${u.count}/${maxUnavailable}${why.length ? ` (${why.join(", ")})` : ""}`;
}
