/**
 * A pod a PodDisruptionBudget holds on a node: what the drain suites wait on.
 *
 * @module
 */

import assert from "node:assert/strict";
import { OUTCOME_LABEL } from "./cluster.ts";
import type { Cluster } from "./cluster.ts";
import { eventually } from "./_dispatcher.ts";

/** A Deployment `name` of `replicas` pods pinned to `node` (no budget: free to evict). */
export function pinnedDeployment(ns: string, name: string, node: string, replicas = 1): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ${name}, namespace: ${ns}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {role: ${name}}}
  template:
    metadata:
      labels: {role: ${name}}
      annotations: {${OUTCOME_LABEL}: serve}
    spec:
      nodeSelector: {kubernetes.io/hostname: ${node}}
      containers: [{name: c, image: registry.invalid/${name}:1}]
`;
}

/**
 * A Deployment `name` of one pod pinned to `node`, and the budget
 * `name-pdb` that allows no disruption of it (`minAvailable: 1`) until it is
 * patched.
 */
export function heldPod(ns: string, name: string, node: string): string {
  return `${pinnedDeployment(ns, name, node)}---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: ${name}-pdb, namespace: ${ns}}
spec:
  minAvailable: 1
  selector: {matchLabels: {role: ${name}}}
`;
}

/** Waits until the disruption controller judges budget `name` of `ns`. */
export async function disruptionsAllowed(
  cluster: Cluster,
  ns: string,
  name: string,
  healthy: number,
  allowed: number,
): Promise<void> {
  await eventually(
    async () => {
      const r = await cluster.kubectl(["get", "pdb", name, "-n", ns, "-o", "json"]);
      assert.equal(r.code, 0, r.stderr);
      const pdb = JSON.parse(r.stdout) as {
        status?: { disruptionsAllowed?: number; currentHealthy?: number };
      };
      return pdb.status?.currentHealthy === healthy && pdb.status.disruptionsAllowed === allowed;
    },
    60_000,
    `${name} of ${ns}: ${healthy} healthy, ${allowed} disruptions allowed`,
  );
}
