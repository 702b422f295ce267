/**
 * The maintenance primitives on a real control plane, before the dispatch
 * engine uses them: the disruption controller computes a PodDisruptionBudget
 * of a Deployment, kubectl drain's rules sort a node's real pods, the
 * Eviction API's 429 names the budget it protects (and an eviction with room
 * succeeds), and cordon/uncordon never lift someone else's cordon.
 */

import assert from "node:assert/strict";
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { cordonNode, type CordonTarget, uncordonNode, uncordonPatch } from "../cordon.ts";
import { planDrain } from "../drain.ts";
import { evictPod, podsOnNode } from "../evict.ts";
import { trackingKeys } from "../job.ts";
import { ApiError, Kube, paths } from "../kube.ts";
import { OUTCOME_LABEL } from "./cluster.ts";
import { eventually } from "./_dispatcher.ts";
import { clusterTest, namespace, SUITE, suiteNodes } from "./_fixtures.ts";
import type { Cluster } from "./cluster.ts";

const KEY = trackingKeys("job-dispatcher").cordonedBy;

function workloads(ns: string): string {
  const pod = (app: string) => `
    metadata:
      labels: {app: ${app}}
      annotations: {${OUTCOME_LABEL}: serve}
    spec:
      nodeSelector: {${SUITE}: maint}
      containers: [{name: ${app}, image: registry.invalid/${app}:1}]`;
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${ns}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:${pod("web")}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb, namespace: ${ns}}
spec:
  minAvailable: 3
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ${ns}}
spec:
  selector: {matchLabels: {app: agent}}
  template:${pod("agent")}
`;
}

async function getJson<T>(cluster: Cluster, args: string[]): Promise<T> {
  const r = await cluster.kubectl(["get", ...args, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as T;
}

/** Waits until the workload's `status[field]` is `want`. */
async function readyCount(
  cluster: Cluster,
  what: string[],
  field: "readyReplicas" | "numberReady",
  want: number,
): Promise<void> {
  await eventually(
    async () =>
      (await getJson<{ status?: Record<string, number> }>(cluster, what)).status?.[field] === want,
    60_000,
    `${want} ${field} of ${what.join(" ")}`,
  );
}

interface Pdb {
  metadata: { generation: number };
  status?: {
    observedGeneration?: number;
    currentHealthy?: number;
    desiredHealthy?: number;
    disruptionsAllowed?: number;
  };
}

/** Waits until the disruption controller has judged the budget's current spec as `want`. */
async function budgetStatus(cluster: Cluster, ns: string, want: Pdb["status"]): Promise<void> {
  let last: Pdb["status"];
  await eventually(
    async () => {
      const pdb = await getJson<Pdb>(cluster, ["pdb", "web-pdb", "-n", ns]);
      last = pdb.status;
      return pdb.status?.observedGeneration === pdb.metadata.generation &&
        Object.entries(want!).every(([k, v]) => last?.[k as keyof Pdb["status"]] === v);
    },
    60_000,
    `PodDisruptionBudget web-pdb status ${JSON.stringify(want)} (last ${JSON.stringify(last)})`,
  ).catch((e) => {
    throw new Error(`${e.message}; last status ${JSON.stringify(last)}`);
  });
}

async function webPods(cluster: Cluster, ns: string): Promise<V1Pod[]> {
  const list = await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", ns, "-l", "app=web"]);
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

clusterTest("maintenance primitives on a real control plane", async (t, cluster) => {
  const ns = await namespace(cluster, "maint");
  await cluster.createNodes(suiteNodes("maint", 3));
  const applied = await cluster.kubectl(["apply", "-f", "-"], workloads(ns));
  assert.equal(applied.code, 0, applied.stderr);
  const kube = await Kube.connect({ kubeconfig: cluster.kubeconfig });
  try {
    await t.step(
      "the disruption controller computes the budget of a Deployment's pods",
      async () => {
        await readyCount(cluster, ["deploy", "web", "-n", ns], "readyReplicas", 3);
        await budgetStatus(cluster, ns, {
          currentHealthy: 3,
          desiredHealthy: 3,
          disruptionsAllowed: 0,
        });
      },
    );

    await t.step(
      "kubectl drain's rules evict a node's Deployment pod and leave its DaemonSet pod",
      async () => {
        await readyCount(cluster, ["ds", "agent", "-n", ns], "numberReady", 3);
        const node = (await webPods(cluster, ns))[0].spec!.nodeName!;
        const pods = await podsOnNode(kube, node);
        assert.ok(pods.every((p) => p.spec?.nodeName === node));
        const plan = planDrain(pods, { deleteEmptyDirData: false, force: false });
        assert.deepEqual(plan.refused, []);
        assert.ok(plan.evict.length >= 1);
        assert.ok(
          plan.evict.every((p) => p.metadata?.labels?.app === "web"),
          "only web pods evicted",
        );
        assert.deepEqual(
          plan.skipped.map((s) => [s.pod.metadata?.labels?.app, s.reason]),
          [["agent", "ignoring DaemonSet-managed Pods"]],
        );
      },
    );

    await t.step(
      "an eviction the budget forbids is a 429 naming the budget, and the pod stays",
      async () => {
        const [pod] = await webPods(cluster, ns);
        const verdict = await evictPod(kube, pod, { gracePeriodSecs: 0 });
        const detail = "The disruption budget web-pdb needs 3 healthy pods and has 3 currently";
        assert.deepEqual(verdict, {
          kind: "blocked",
          budget: `${ns}/web-pdb`,
          detail,
          message: `blocked by PodDisruptionBudget ${ns}/web-pdb: ${detail}`,
        });
        const still = await kube.get<V1Pod>(paths.pod(ns, pod.metadata!.name!));
        assert.equal(still?.metadata?.uid, pod.metadata!.uid);
        assert.equal(still?.metadata?.deletionTimestamp, undefined);
      },
    );

    await t.step(
      "with room in the budget the eviction succeeds and the pod is replaced",
      async () => {
        const patched = await cluster.kubectl([
          "patch",
          "pdb",
          "web-pdb",
          "-n",
          ns,
          "--type=merge",
          "-p",
          '{"spec":{"minAvailable":2}}',
        ]);
        assert.equal(patched.code, 0, patched.stderr);
        await budgetStatus(cluster, ns, {
          currentHealthy: 3,
          desiredHealthy: 2,
          disruptionsAllowed: 1,
        });
        const [pod] = await webPods(cluster, ns);
        assert.deepEqual(await evictPod(kube, pod, { gracePeriodSecs: 0 }), { kind: "evicted" });
        await eventually(
          async () =>
            !(await webPods(cluster, ns)).some((p) => p.metadata?.uid === pod.metadata?.uid),
          30_000,
          `evicted pod ${pod.metadata?.name} to go`,
        );
        await budgetStatus(cluster, ns, {
          currentHealthy: 3,
          desiredHealthy: 2,
          disruptionsAllowed: 1,
        });
        assert.deepEqual(
          await evictPod(kube, pod, { gracePeriodSecs: 0 }),
          { kind: "gone" },
          "the same pod again: it is gone",
        );
      },
    );

    await t.step("cordon and uncordon never lift a cordon that is not this run's", async () => {
      const uid = async (name: string) =>
        (await kube.get<V1Node>(paths.node(name)))!.metadata!.uid!;
      const target = async (name: string, runId = "run-a"): Promise<CordonTarget> => ({
        name,
        uid: await uid(name),
        annotation: KEY,
        runId,
      });
      const state = async (name: string) => {
        const n = (await kube.get<V1Node>(paths.node(name)))!;
        return {
          unschedulable: n.spec?.unschedulable ?? false,
          by: n.metadata?.annotations?.[KEY],
        };
      };
      const operator = await cluster.kubectl(["cordon", "maint-001"]);
      assert.equal(operator.code, 0, operator.stderr);

      assert.deepEqual(await cordonNode(kube, await target("maint-000")), { outcome: "cordoned" });
      assert.deepEqual(await state("maint-000"), { unschedulable: true, by: "run-a" });
      assert.deepEqual(await cordonNode(kube, await target("maint-000")), { outcome: "ours" });
      assert.deepEqual(await cordonNode(kube, await target("maint-001")), {
        outcome: "others",
        by: undefined,
      });
      assert.deepEqual(await state("maint-001"), { unschedulable: true, by: undefined });

      assert.deepEqual(await uncordonNode(kube, await target("maint-001")), {
        outcome: "notOurs",
        by: undefined,
      });
      assert.deepEqual(await uncordonNode(kube, await target("maint-000", "run-b")), {
        outcome: "notOurs",
        by: "run-a",
      });
      // The API server answers a failed JSON Patch test with 422, which the
      // uncordon's re-read relies on: run-b's patch against run-a's record.
      const forged = await kube.get<V1Node>(paths.node("maint-000"));
      forged!.metadata!.annotations![KEY] = "run-b";
      await assert.rejects(
        kube.request(
          "patch",
          "PATCH",
          paths.node("maint-000"),
          uncordonPatch(forged!, await target("maint-000", "run-b")),
        ),
        (e: ApiError) => e instanceof ApiError && e.status === 422,
      );
      assert.deepEqual(await state("maint-000"), { unschedulable: true, by: "run-a" });

      assert.deepEqual(await uncordonNode(kube, await target("maint-000")), {
        outcome: "uncordoned",
      });
      assert.deepEqual(await state("maint-000"), { unschedulable: false, by: undefined });
      assert.deepEqual(
        await state("maint-001"),
        { unschedulable: true, by: undefined },
        "the operator's cordon holds",
      );
    });
  } finally {
    kube.close();
  }
});
