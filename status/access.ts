/**
 * What `job-dispatcher status` reads, as permissions: the one list behind
 * `job-dispatcher rbac --viewer` and the chart's viewer roles. Reads only:
 * whoever holds them can follow a rollout and change nothing.
 *
 * @module
 */

import type { PermissionNeed } from "../run/preflight.ts";

const VIEWER_ROLE = "Role and ClusterRole job-dispatcher-viewer";

/**
 * The reads of `status` in namespace `ns`: the per-node Jobs and their owner
 * (`--watch` watches), the run record ConfigMap (found by a label, so a
 * LIST), and the nodes' outcome marks and cordons.
 *
 * @example
 * ```ts
 * viewerNeeds("ns").map((n) => `${n.verb} ${n.resource}`)[0]; // "get jobs"
 * ```
 */
export function viewerNeeds(ns: string): PermissionNeed[] {
  const read = ["get", "list", "watch"];
  const at = (group: string, resource: string, namespace: string | undefined, why: string) =>
    read.map((verb) => ({ verb, group, resource, namespace, flags: [why], grant: VIEWER_ROLE }));
  return [
    ...at("batch", "jobs", ns, "the per-node Jobs and their owner"),
    ...at("", "configmaps", ns, "the run record"),
    ...at("", "nodes", undefined, "the nodes' outcome marks and cordons"),
  ];
}
