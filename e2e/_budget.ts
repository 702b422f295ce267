/**
 * A pod a PodDisruptionBudget holds on a node: what the drain suites wait on.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
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

/**
 * Puts {@linkcode heldPod} `name` on `node` and waits until its budget
 * `name-pdb` allows no disruption: a drain of `node` waits on it from then on.
 *
 * @returns the held pod
 */
export async function holdPod(
  cluster: Cluster,
  ns: string,
  name: string,
  node: string,
): Promise<V1Pod> {
  const applied = await cluster.kubectl(["apply", "-f", "-"], heldPod(ns, name, node));
  assert.equal(applied.code, 0, applied.stderr);
  await disruptionsAllowed(cluster, ns, `${name}-pdb`, 1, 0);
  const r = await cluster.kubectl(["get", "pods", "-n", ns, "-l", `role=${name}`, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  const [pod] = (JSON.parse(r.stdout) as { items: V1Pod[] }).items;
  return pod;
}

/** Sets budget `name`'s `minAvailable`, as a person makes room for a drain (or takes it away). */
export async function setMinAvailable(
  cluster: Cluster,
  ns: string,
  name: string,
  minAvailable: number,
): Promise<void> {
  const patch = JSON.stringify({ spec: { minAvailable } });
  const r = await cluster.kubectl(["patch", "pdb", name, "-n", ns, "--type=merge", "-p", patch]);
  assert.equal(r.code, 0, r.stderr);
}
