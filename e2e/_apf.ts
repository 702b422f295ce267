/**
 * API Priority and Fairness set up to throttle the dispatcher's user: a
 * priority level that rejects what does not fit its seats (no queue), a
 * FlowSchema sending that user's requests to it, and kube-apiserver's count
 * of what it rejected. The throttling suites use these.
 *
 * @module
 */

import type { Cluster } from "./cluster.ts";

/** Every request, resource or not, cluster-wide: a FlowSchema's `rules` entries. */
export const ALL_REQUESTS = `      resourceRules:
        - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}
      nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
`;

/** Evictions (`create pods/eviction`) in every namespace: a FlowSchema's `rules` entries. */
export const EVICTIONS = `      resourceRules:
        - {verbs: [create], apiGroups: [""], resources: [pods/eviction], namespaces: ["*"]}
`;

/**
 * A Limited PriorityLevelConfiguration of `shares` nominal concurrency shares
 * that rejects (429, `Retry-After`) what its seats cannot take at once.
 *
 * @param borrowingLimitPercent unset: the API server's default
 */
export function priorityLevel(
  name: string,
  shares: number,
  lendablePercent: number,
  borrowingLimitPercent?: number,
): string {
  const borrowing = borrowingLimitPercent === undefined
    ? ""
    : `    borrowingLimitPercent: ${borrowingLimitPercent}\n`;
  return `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: ${name}}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: ${shares}
    lendablePercent: ${lendablePercent}
${borrowing}    limitResponse: {type: Reject}
`;
}

/**
 * A FlowSchema `level` that sends the requests `rules` names of
 * ServiceAccount `sa` of `ns` to priority level `level`, one flow per user.
 */
export function flowSchema(
  level: string,
  o: { precedence: number; ns: string; sa: string; rules: string },
): string {
  return `apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: ${level}}
spec:
  priorityLevelConfiguration: {name: ${level}}
  matchingPrecedence: ${o.precedence}
  distinguisherMethod: {type: ByUser}
  rules:
    - subjects: [{kind: ServiceAccount, serviceAccount: {name: ${o.sa}, namespace: ${o.ns}}}]
${o.rules}`;
}

/** How many requests Priority and Fairness rejected at `level`, by kube-apiserver's metrics. */
export async function rejectedBy(cluster: Cluster, level: string): Promise<number> {
  const line = new RegExp(
    `^apiserver_flowcontrol_rejected_requests_total\\{[^}]*priority_level="${level}"[^}]*\\} (\\d+)`,
    "gm",
  );
  return [...(await cluster.metrics()).matchAll(line)].reduce((n, m) => n + Number(m[1]), 0);
}
