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
 * (GET, LIST), the run record ConfigMap (by name, or found by a label with
 * a LIST), and the nodes' outcome marks and cordons (LIST). Nothing more:
 * `--watch` polls (a LIST every interval), it opens no watch, and nodes are
 * listed, never read one by one.
 *
 * @example
 * ```ts
 * viewerNeeds("ns").map((n) => `${n.verb} ${n.resource}`)[0]; // "get jobs"
 * ```
 */
export function viewerNeeds(ns: string): PermissionNeed[] {
  const at = (
    verbs: string[],
    group: string,
    resource: string,
    namespace: string | undefined,
    why: string,
  ) =>
    verbs.map((verb) => ({ verb, group, resource, namespace, flags: [why], grant: VIEWER_ROLE }));
  return [
    ...at(["get", "list"], "batch", "jobs", ns, "the per-node Jobs and their owner"),
    ...at(["get", "list"], "", "configmaps", ns, "the run record"),
    ...at(["list"], "", "nodes", undefined, "the nodes' outcome marks and cordons"),
  ];
}
