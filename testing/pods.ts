/**
 * Pods as the scheduler leaves them, for the unit tests of the folders that
 * explain a stall (`engine/`, `nodes/`).
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";

/**
 * A pod the scheduler could not place: Pending, with `PodScheduled=False`
 * and reason `Unschedulable`, as kube-scheduler writes it.
 *
 * @param message the scheduler's verdict
 * @example
 * ```ts
 * unschedulablePod("0/1 nodes are available").status?.phase; // "Pending"
 * ```
 */
export function unschedulablePod(message: string): V1Pod {
  return {
    status: {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }],
    },
  };
}
