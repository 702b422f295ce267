/**
 * The maintenance primitives on a real control plane, before the dispatch
 * engine uses them: the disruption controller computes a PodDisruptionBudget
 * of a Deployment, kubectl drain's rules sort a node's real pods, the
 * Eviction API's 429 names the budget it protects (and an eviction with room
 * succeeds), and cordon/uncordon never lift someone else's cordon.
 */

import assert from "node:assert/strict";
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import {
  cordonNode,
  type CordonTarget,
  uncordonNode,
  uncordonPatch,
} from "../maintenance/cordon.ts";
import { planDrain } from "../maintenance/drain.ts";
import { evictPod, podsOnNode } from "../maintenance/evict.ts";
import { trackingKeys } from "../job.ts";
import { ApiError, Kube, paths } from "../kube/client.ts";
import { OUTCOME_LABEL } from "./cluster.ts";
import {
  adminClient,
  dispatcher,
  eventually,
  jobsIn,
  jobTemplate,
  JobWatcher,
  watchEvents,
} from "./_dispatcher.ts";
import {
  clusterTest,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteArgs,
  suiteNodes,
  suiteStep,
  tempFile,
} from "./_fixtures.ts";
import type { Cluster } from "./cluster.ts";
import { DispatcherProcess } from "./_faults.ts";
import { holdPod, setMinAvailable } from "./_budget.ts";

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
        await setMinAvailable(cluster, ns, "web-pdb", 2);
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

/**
 * Lists `url`, then watches it from the list's resourceVersion, relisting
 * after an ERROR event and retrying a broken stream, until `signal`;
 * `apply` sees every object in the order of its stream. `ready` resolves
 * once the first list is applied.
 */
function watchList<T extends { metadata: { resourceVersion?: string } }>(
  client: Deno.HttpClient,
  signal: AbortSignal,
  url: string,
  apply: (type: string, obj: T) => void,
): { ready: Promise<void>; done: Promise<void> } {
  let ready = () => {};
  const readyP = new Promise<void>((r) => (ready = r));
  const query = url.includes("?") ? "&" : "?";
  const done = (async () => {
    let rv = "";
    while (!signal.aborted) {
      try {
        if (!rv) {
          const list = await (await fetch(url, { client, signal })).json();
          for (const o of list.items as T[]) apply("ADDED", o);
          rv = list.metadata.resourceVersion;
          ready();
        }
        const res = await fetch(`${url}${query}watch=1&resourceVersion=${rv}`, { client, signal });
        for await (const ev of watchEvents<T>(res)) {
          if (ev.type === "ERROR") {
            rv = "";
            break;
          }
          rv = ev.object.metadata.resourceVersion ?? rv;
          apply(ev.type, ev.object);
        }
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return { ready: readyP, done };
}

/** A pod as the watcher sees it. */
interface PodView {
  metadata: {
    uid: string;
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    resourceVersion?: string;
  };
  spec?: { nodeName?: string };
}

/**
 * Watches every pod of the cluster and one namespace's budgets from the API
 * server, independently of the dispatcher, in one ordered stream each: a
 * per-node Job pod that appears while a workload pod is still bound to its
 * node, a budget below its desired health, a DaemonSet pod deleted.
 */
class DrainWatcher {
  /** Job pods that appeared on a node still holding a workload pod. */
  violations: string[] = [];
  /** Job pods seen, by node. */
  jobPods = new Map<string, string>();
  /** The least `currentHealthy - desiredHealthy` seen. */
  minHeadroom = Infinity;
  /** DaemonSet pods deleted while watching. */
  daemonDeleted: string[] = [];
  /** Workload pods deleted while watching (the evictions). */
  workloadDeleted = 0;
  #workload = new Map<string, PodView>();
  #stop = new AbortController();
  #client: Deno.HttpClient;
  #done: Promise<unknown>;
  #ready: Promise<unknown>;

  static async start(cluster: Cluster, ns: string, workload: string): Promise<DrainWatcher> {
    const w = new DrainWatcher(cluster, ns, workload);
    await w.#ready;
    return w;
  }

  private constructor(cluster: Cluster, ns: string, workload: string) {
    this.#client = adminClient(cluster);
    const pods = watchList<PodView>(
      this.#client,
      this.#stop.signal,
      `${cluster.server}/api/v1/pods`,
      (type, pod) => {
        const app = pod.metadata.labels?.app;
        const node = pod.spec?.nodeName;
        if (app === workload) {
          if (type === "DELETED") {
            this.#workload.delete(pod.metadata.uid);
            this.workloadDeleted++;
          } else this.#workload.set(pod.metadata.uid, pod);
        } else if (app === "agent" && type === "DELETED") {
          this.daemonDeleted.push(pod.metadata.name);
        } else if (pod.metadata.labels?.["job-name"] && node && type === "ADDED") {
          this.jobPods.set(node, pod.metadata.name);
          const still = [...this.#workload.values()].filter((p) => p.spec?.nodeName === node);
          if (still.length) {
            this.violations.push(
              `${pod.metadata.name} on ${node} while ${still.map((p) => p.metadata.name)} remain`,
            );
          }
        }
      },
    );
    const pdbs = watchList<Pdb & { metadata: { resourceVersion?: string } }>(
      this.#client,
      this.#stop.signal,
      `${cluster.server}/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`,
      (_type, pdb) => {
        const s = pdb.status;
        if (s?.currentHealthy === undefined || s.desiredHealthy === undefined) return;
        this.minHeadroom = Math.min(this.minHeadroom, s.currentHealthy - s.desiredHealthy);
      },
    );
    this.#ready = Promise.all([pods.ready, pdbs.ready]);
    this.#done = Promise.all([pods.done, pdbs.done]);
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
    this.#client.close();
  }
}

/** Each node's cordon, the run's record of it, and the error mark. */
async function cordons(
  cluster: Cluster,
  suite: string,
): Promise<Record<string, { unschedulable: boolean; by?: string; error?: string }>> {
  const list = await getJson<{ items: V1Node[] }>(cluster, ["nodes", "-l", `${SUITE}=${suite}`]);
  return Object.fromEntries(list.items.map((n) => [n.metadata!.name!, {
    unschedulable: n.spec?.unschedulable ?? false,
    by: n.metadata?.annotations?.[KEY],
    error: n.metadata?.annotations?.[ERROR],
  }]));
}

const ERROR = trackingKeys("job-dispatcher").error;

clusterTest("--drain dispatches on a real control plane", async (t, cluster) => {
  await t.step(
    "--drain --parallelism 3: every workload pod leaves before its node's Job, budget kept, DaemonSet untouched, all uncordoned",
    async () => {
      const ns = await namespace(cluster, "drain");
      await cluster.createNodes(suiteNodes("drain", 6));
      const manifest = workloads(ns).replaceAll(`${SUITE}: maint`, `${SUITE}: drain`)
        .replace("replicas: 3", "replicas: 6").replace("minAvailable: 3", "minAvailable: 4");
      const applied = await cluster.kubectl(["apply", "-f", "-"], manifest);
      assert.equal(applied.code, 0, applied.stderr);
      await readyCount(cluster, ["deploy", "web", "-n", ns], "readyReplicas", 6);
      await readyCount(cluster, ["ds", "agent", "-n", ns], "numberReady", 6);
      await budgetStatus(cluster, ns, { currentHealthy: 6, desiredHealthy: 4 });
      const before = (await webPods(cluster, ns)).map((p) => p.spec?.nodeName);
      const agentsBefore = (await getJson<{ items: V1Pod[] }>(
        cluster,
        ["pods", "-n", ns, "-l", "app=agent"],
      )).items.map((p) => p.metadata!.uid).sort();
      // Least privilege: the README's rules plus those of --drain.
      const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
        rbac: { drain: true },
      });
      const watcher = await DrainWatcher.start(cluster, ns, "web");
      let r;
      try {
        r = await dispatcher(cluster, [
          "--job-template",
          await tempFile(jobTemplate("drain", "1s")),
          "--node-selector",
          `${SUITE}=drain`,
          "--kubeconfig",
          kubeconfig,
          "--drain",
          "--grace-period",
          "0",
          "--parallelism",
          "3",
          "--drain-timeout-secs",
          "120",
        ]);
      } finally {
        await watcher.stop();
      }
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /forbidden|cannot record/i, r.stderr);
      assert.ok(new Set(before).size >= 3, `web pods spread over ${new Set(before).size} nodes`);
      assert.deepEqual(watcher.violations, []);
      // Every node held web pods at some point (they move as nodes drain):
      // at least the 6 first seen were evicted.
      assert.ok(watcher.workloadDeleted >= 6, `${watcher.workloadDeleted} web pods evicted`);
      assert.equal(watcher.jobPods.size, 6, "a Job pod on every node");
      assert.ok(watcher.minHeadroom >= 0, `budget headroom ${watcher.minHeadroom}`);
      assert.deepEqual(watcher.daemonDeleted, []);
      const agentsAfter = (await getJson<{ items: V1Pod[] }>(
        cluster,
        ["pods", "-n", ns, "-l", "app=agent"],
      )).items.map((p) => p.metadata!.uid).sort();
      assert.deepEqual(agentsAfter, agentsBefore, "DaemonSet pods untouched");
      for (const [node, c] of Object.entries(await cordons(cluster, "drain"))) {
        assert.deepEqual([node, c.unschedulable, c.by], [node, false, undefined]);
      }
      await readyCount(cluster, ["deploy", "web", "-n", ns], "readyReplicas", 6);
    },
  );

  await t.step(
    "a budget allowing nothing: that node fails after --drain-timeout-secs naming it and stays cordoned; a node cordoned by someone else stays cordoned",
    async () => {
      const { ns, args: common } = await suiteStep(cluster, "block", { nodes: 3, duration: "1s" });
      // One pod on block-001 under a budget that allows no disruption.
      await holdPod(cluster, ns, "stuck", "block-001");
      const operator = await cluster.kubectl(["cordon", "block-002"]);
      assert.equal(operator.code, 0, operator.stderr);
      const args = [
        ...common,
        "--drain",
        "--drain-timeout-secs",
        "10",
      ];
      const began = Date.now();
      const r = await dispatcher(cluster, args);
      assert.equal(r.code, 1, r.stderr);
      assert.ok(Date.now() - began >= 10_000, "the drain was retried until its timeout");
      const reason = new RegExp(
        `drain did not finish within 10 s; blocked by PodDisruptionBudget ${ns}/stuck-pdb .*` +
          `pods still on the node: ${ns}/stuck-`,
      );
      assert.match(r.stderr, reason);
      const jobs = await jobsIn(cluster, ns);
      assert.deepEqual(jobs.map((j) => j.node).sort(), ["block-000", "block-002"]);
      assert.ok(jobs.every((j) => j.complete));
      const after = await cordons(cluster, "block");
      assert.deepEqual(
        [after["block-000"].unschedulable, after["block-000"].by],
        [false, undefined],
        "the node that succeeded is uncordoned",
      );
      assert.deepEqual(
        [after["block-001"].unschedulable, after["block-001"].by],
        [true, "block"],
        "the failed node stays cordoned by this run",
      );
      assert.match(after["block-001"].error ?? "", reason, "its reason in <P>/error");
      assert.match(
        r.stderr,
        /node block-002 was cordoned already: it stays cordoned after its Job/,
      );
      assert.deepEqual(
        [after["block-002"].unschedulable, after["block-002"].by],
        [true, undefined],
        "the operator's cordon is never lifted",
      );

      // A re-run with --uncordon-on-failure: the failed node is tried again
      // (it got no Job), fails again, and this time gets its cordon lifted.
      const again = await dispatcher(cluster, [...args, "--uncordon-on-failure"]);
      assert.equal(again.code, 1, again.stderr);
      assert.match(again.stderr, reason);
      const last = await cordons(cluster, "block");
      assert.deepEqual(
        [last["block-001"].unschedulable, last["block-001"].by],
        [false, undefined],
        "--uncordon-on-failure lifts this run's cordon",
      );
      assert.deepEqual(
        [last["block-002"].unschedulable, last["block-002"].by],
        [true, undefined],
        "the operator's cordon still holds",
      );
      assert.equal((await jobsIn(cluster, ns)).length, 2, "no Job for the failed node");
    },
  );

  await t.step(
    "--retry-failed: after 2 failing nodes are fixed, the re-run creates exactly 2 Jobs",
    async () => {
      const ns = await namespace(cluster, "retry");
      await cluster.createNodes([
        ...suiteNodes("retry", 2),
        ...suiteNodes("retry", 2, { labels: { [OUTCOME_LABEL]: "fail" } }, 2),
      ]);
      const args = [
        ...(await suiteArgs("retry", ns, "200ms")),
      ];
      const first = await dispatcher(cluster, args);
      assert.equal(first.code, 1, first.stderr);
      assert.match(first.stderr, /simulated failure on retry-002/);
      const fixed = await cluster.kubectl([
        "label",
        "node",
        "retry-002",
        "retry-003",
        `${OUTCOME_LABEL}=succeed`,
        "--overwrite",
      ]);
      assert.equal(fixed.code, 0, fixed.stderr);
      const plain = await dispatcher(cluster, args);
      assert.equal(plain.code, 1, "without --retry-failed the failures are counted");
      const watcher = await JobWatcher.start(cluster, ns);
      const before = new Set(watcher.seen.keys());
      let again;
      try {
        again = await dispatcher(cluster, [...args, "--retry-failed"]);
      } finally {
        await watcher.stop();
      }
      assert.equal(again.code, 0, again.stderr);
      const created = [...watcher.seen].filter(([uid]) => !before.has(uid)).map(([, n]) => n);
      assert.deepEqual(created.sort(), ["retry-002", "retry-003"]);
      const jobs = await jobsIn(cluster, ns);
      assert.equal(jobs.length, 4);
      assert.ok(jobs.every((j) => j.complete), "every node succeeded in the end");
    },
  );

  await t.step(
    "--max-unavailable 2 with one node NotReady: never more than 1 Job in flight",
    async () => {
      const ns = await namespace(cluster, "budget");
      await cluster.createNodes([
        ...suiteNodes("budget", 4),
        // In the selection, but no target: its taint is not tolerated.
        ...suiteNodes("budget", 1, { taints: [{ key: "e2e-down", effect: "NoSchedule" }] }, 4),
      ]);
      await cluster.setNodeReady("budget-004", false);
      const watcher = await JobWatcher.start(cluster, ns);
      let r;
      try {
        r = await dispatcher(cluster, [
          ...(await suiteArgs("budget", ns, "1s")),
          "--parallelism",
          "3",
          "--max-unavailable",
          "2",
          "--progress-interval-secs",
          "0.5",
        ]);
      } finally {
        await watcher.stop();
      }
      assert.equal(r.code, 0, r.stderr);
      assert.equal(watcher.seen.size, 4, "a Job on each of the 4 targets");
      assert.equal(watcher.maxActive, 1, "the NotReady node takes one of the 2");
      assert.match(r.stderr, /unavailable 2\/2 \(1 in work, 1 NotReady\)/);
    },
  );

  await t.step(
    "--window closing 20 s into the run: exit 4 naming what is left; a re-run inside a window finishes",
    async () => {
      const { ns, args: base } = await suiteStep(cluster, "window", { nodes: 6, duration: "8s" });
      const args = [...base, "--parallelism", "1"];
      const days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
      const outside = `${days[(new Date().getUTCDay() + 2) % 7]} 00:00-01:00 UTC`;
      // With an owner (a Helm hook outside its window): no Job, and no
      // finalizer left on the owner that would hold a later helm upgrade.
      await ownerJob(cluster, ns, "early-hook");
      const early = await dispatcher(cluster, [
        ...args,
        "--window",
        outside,
        "--owner-job-name",
        "early-hook",
      ]);
      assert.equal(early.code, 4, early.stderr);
      assert.match(
        early.stderr,
        /incomplete: outside every --window .*; 6 nodes left, none started/,
      );
      assert.deepEqual(
        (await jobsIn(cluster, ns)).map((j) => j.name),
        ["early-hook"],
        "no per-node Job",
      );
      const hook = await cluster.kubectl(["get", "job", "early-hook", "-n", ns, "-o", "json"]);
      assert.deepEqual(JSON.parse(hook.stdout).metadata.finalizers ?? [], [], "no finalizer held");
      await cluster.kubectl(["delete", "job", "early-hook", "-n", ns, "--wait"]);

      // A window of whole minutes that closes 20 s from now.
      while (new Date().getUTCSeconds() !== 40) await new Promise((r) => setTimeout(r, 200));
      const now = new Date();
      const minute = now.getUTCHours() * 60 + now.getUTCMinutes();
      const hhmm = (m: number) =>
        `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
      const closing = `* ${hhmm(Math.max(0, minute - 5))}-${hhmm(minute + 1)} UTC`;
      const closesAt = Date.now() + 20_000;
      const r = await dispatcher(cluster, [...args, "--window", closing]);
      assert.equal(r.code, 4, r.stderr);
      const left = Number(r.stderr.match(/incomplete: window closed; (\d+) nodes left/)?.[1]);
      assert.ok(left >= 1 && left <= 5, `${left} left:\n${r.stderr}`);
      const jobs = await jobsIn(cluster, ns);
      assert.equal(jobs.length, 6 - left, "the rest not started");
      const created = jobs.map((j) => Date.parse(j.created));
      // creationTimestamp has whole seconds: a start at :59.9 reads :59.
      assert.ok(created.every((c) => c < closesAt), `no Job created after the window closed`);
      assert.ok(jobs.every((j) => j.complete), "the Jobs in flight finished");

      const again = await dispatcher(cluster, [...base, "--window", "* 00:00-24:00 UTC"]);
      assert.equal(again.code, 0, again.stderr);
      const all = await jobsIn(cluster, ns);
      assert.equal(all.length, 6);
      assert.ok(all.every((j) => j.complete));
    },
  );

  await t.step(
    "pause: the owner annotated <P>/paused=true creates no Job while set; removing it resumes",
    async () => {
      const { ns, args } = await suiteStep(cluster, "pause", { nodes: 4, duration: "3s" });
      await ownerJob(cluster, ns, "hook");
      const annotate = async (value: string) => {
        const r = await cluster.kubectl([
          "annotate",
          "job",
          "hook",
          "-n",
          ns,
          value,
          "--overwrite",
        ]);
        assert.equal(r.code, 0, r.stderr);
      };
      const watcher = await JobWatcher.start(cluster, ns);
      try {
        const run = dispatcher(cluster, [
          ...args,
          "--owner-job-name",
          "hook",
          "--parallelism",
          "1",
        ]);
        await eventually(() => Promise.resolve(watcher.seen.size >= 1), 30_000, "the first Job");
        await annotate("job-dispatcher/paused=true");
        // The watch takes a moment to bring the annotation; a start under way may land.
        await new Promise((r) => setTimeout(r, 1000));
        const atPause = watcher.seen.size;
        await new Promise((r) => setTimeout(r, 8000));
        assert.equal(watcher.seen.size, atPause, "no Job created while paused");
        assert.ok(atPause < 4, `${atPause} Jobs before the pause`);
        await annotate("job-dispatcher/paused-");
        const r = await run;
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          r.stderr,
          new RegExp(
            `paused by annotation job-dispatcher/paused=true on Job ${ns}/hook: no new Job starts`,
          ),
        );
        assert.match(r.stderr, /resumed: the pause was lifted/);
        assert.equal(watcher.seen.size, 4, "resumed: every node got its Job");
      } finally {
        await watcher.stop();
      }
    },
  );

  await t.step(
    "blocking pods: a node with a matching pod gets no Job until it ends; the slot serves the others",
    async () => {
      const { ns, args: common } = await suiteStep(cluster, "blk", {
        namespace: "blocking",
        nodes: 3,
        duration: "2s",
      });
      const pod = (name: string, node: string) =>
        `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: ${ns}
  labels: {app: db}
  annotations: {${OUTCOME_LABEL}: serve}
spec:
  nodeName: ${node}
  terminationGracePeriodSeconds: 0
  containers: [{name: db, image: registry.invalid/db:1}]
`;
      const applied = await cluster.kubectl(
        ["apply", "-f", "-"],
        `${pod("db-0", "blk-000")}---\n${pod("db-1", "blk-001")}`,
      );
      assert.equal(applied.code, 0, applied.stderr);
      const watcher = await JobWatcher.start(cluster, ns);
      let r;
      let releasedAt = 0;
      try {
        const run = dispatcher(cluster, [
          ...common,
          "--parallelism",
          "1",
          "--blocking-pod-selector",
          "app=db",
          "--blocked-timeout-secs",
          "15",
        ]);
        await eventually(
          () => Promise.resolve(watcher.seen.size >= 1),
          30_000,
          "the free node's Job",
        );
        assert.deepEqual([...watcher.seen.values()], ["blk-002"], "the free node goes first");
        releasedAt = Date.now();
        const del = await cluster.kubectl(["delete", "pod", "db-0", "-n", ns, "--wait"]);
        assert.equal(del.code, 0, del.stderr);
        r = await run;
      } finally {
        await watcher.stop();
      }
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        new RegExp(
          `blocked node blk-001: no job: still blocked after 15 s: pods ${ns}/db-1 ` +
            "match --blocking-pod-selector app=db",
        ),
      );
      const jobs = await jobsIn(cluster, ns);
      assert.deepEqual(jobs.map((j) => j.node).sort(), ["blk-000", "blk-002"], "no Job on blk-001");
      const blk000 = jobs.find((j) => j.node === "blk-000")!;
      // creationTimestamp has whole seconds.
      assert.ok(Date.parse(blk000.created) >= Math.floor(releasedAt / 1000) * 1000);
      assert.ok(jobs.every((j) => j.complete));
    },
  );
});

clusterTest(
  "a stopped drain leaves nothing behind; a drain says what it waits for",
  async (t, cluster) => {
    const { ns, args: common } = await suiteStep(cluster, "stop", { nodes: 1 });
    const node = "stop-000";
    // One pod on the node, under a budget that allows no disruption: the
    // drain waits on it for as long as its timeout lets it.
    const pod = await holdPod(cluster, ns, "held", node);
    const podName = `${ns}/${pod.metadata!.name}`;
    const args = [
      ...common,
      "--drain",
      "--progress-interval-secs",
      "1",
    ];
    const refusal = new RegExp(
      `cannot evict pod ${podName}: blocked by PodDisruptionBudget ${ns}/held-pdb`,
    );

    for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
      await t.step(
        `${signal} while a budget holds the drain: exit ${code}, the node uncordoned, no Job`,
        async () => {
          const run = new DispatcherProcess(cluster, [...args, "--drain-timeout-secs", "120"]);
          // Watched on the node itself: this run's cordon is on.
          await eventually(
            async () => (await cordons(cluster, "stop"))[node].by !== undefined,
            60_000,
            `${node} cordoned by the run`,
          );
          await eventually(
            async () => (await cordons(cluster, "stop"))[node].unschedulable,
            10_000,
            `${node} unschedulable`,
          );
          run.kill(signal);
          const r = await run.ended;
          // Read right after the exit: the uncordon is part of the run, not a
          // promise left behind.
          const after = (await cordons(cluster, "stop"))[node];
          assert.equal(r.code, code, r.stderr);
          assert.deepEqual(
            after,
            { unschedulable: false, by: undefined, error: undefined },
            r.stderr,
          );
          assert.deepEqual(await jobsIn(cluster, ns), [], "no Job");
          assert.match(r.stderr, new RegExp(`node ${node}: cordoned`));
          assert.match(r.stderr, new RegExp(`node ${node}: uncordoned`));
        },
      );
    }

    await t.step(
      "a node cordoned by someone else, the run stopped: it stays cordoned",
      async () => {
        const cordoned = await cluster.kubectl(["cordon", node]);
        assert.equal(cordoned.code, 0, cordoned.stderr);
        const run = new DispatcherProcess(cluster, [...args, "--drain-timeout-secs", "120"]);
        // The node was cordoned already: what says the drain is under way is
        // the budget's refusal (the API server's 429), which the run reports.
        assert.ok(await run.waitFor(refusal), run.stderr);
        run.kill("SIGINT");
        const r = await run.ended;
        const after = (await cordons(cluster, "stop"))[node];
        assert.equal(r.code, 130, r.stderr);
        assert.deepEqual(after, { unschedulable: true, by: undefined, error: undefined }, r.stderr);
        assert.deepEqual(await jobsIn(cluster, ns), [], "no Job");
        assert.doesNotMatch(r.stderr, new RegExp(`node ${node}: uncordoned`));
        const lifted = await cluster.kubectl(["uncordon", node]);
        assert.equal(lifted.code, 0, lifted.stderr);
      },
    );

    await t.step(
      "a drain a budget holds says so, as kubectl drain does; its failure is no Job's",
      async () => {
        const r = await dispatcher(cluster, [...args, "--drain-timeout-secs", "8"]);
        assert.equal(r.code, 1, r.stderr);
        const k = await cluster.kubectl(["drain", node, "--ignore-daemonsets", "--timeout=6s"]);
        const kubectl = k.stdout + k.stderr;
        console.log(`kubectl drain:\n${kubectl}\njob-dispatcher:\n${r.stderr}`);
        // The oracle: kubectl names the pod it evicts and the budget's refusal.
        assert.notEqual(k.code, 0, kubectl);
        assert.match(kubectl, new RegExp(`evicting pod ${podName}`));
        assert.match(kubectl, /would violate the pod's disruption budget/);
        // The same two facts, and the budget's name, kubectl does not give.
        assert.match(r.stderr, new RegExp(`node ${node}: evicting pod ${podName}`));
        assert.match(r.stderr, refusal);
        // Within 8 s the refusal is said once (then at most every 30 s).
        assert.equal(r.stderr.split("\n").filter((l) => refusal.test(l)).length, 1, r.stderr);
        assert.match(r.stderr, /0\/1 succeeded, 0 failed, 0 in flight, 1 draining/);
        assert.match(
          r.stderr,
          new RegExp(
            `node ${node}: failed before its Job was created: drain did not finish within 8 s; blocked by PodDisruptionBudget ${ns}/held-pdb`,
          ),
        );
        assert.match(
          r.stderr,
          new RegExp(
            `failed node ${node}: no job \\(failed before it\\): .*; see kubectl get pdb -n ${ns} held-pdb`,
          ),
        );
        assert.doesNotMatch(r.stderr, /job \S+ failed|kubectl logs/);
        assert.deepEqual(await jobsIn(cluster, ns), [], "no Job");
        const lifted = await cluster.kubectl(["uncordon", node]);
        assert.equal(lifted.code, 0, lifted.stderr);
      },
    );

    // Last: it lets the held pod go.
    await t.step(
      "a node tainted while a budget holds its drain: re-checked before its create, no Job, uncordoned",
      async () => {
        const taint = "e2e.job-dispatcher.io/broken=yes:NoSchedule";
        const run = new DispatcherProcess(cluster, [...args, "--drain-timeout-secs", "120"]);
        let tainted = false;
        try {
          assert.ok(await run.waitFor(refusal), run.stderr);
          // The first re-read is behind it: the node changes during the drain.
          const t1 = await cluster.kubectl(["taint", "node", node, taint]);
          assert.equal(t1.code, 0, t1.stderr);
          tainted = true;
          const freed = await cluster.kubectl(["delete", "pdb", "held-pdb", "-n", ns]);
          assert.equal(freed.code, 0, freed.stderr);
          await run.ended;
        } finally {
          if (!tainted) run.kill("SIGINT");
          await run.ended;
          if (tainted) await cluster.kubectl(["taint", "node", node, `${taint}-`]);
        }
        const r = await run.ended;
        const after = (await cordons(cluster, "stop"))[node];
        assert.equal(r.code, 1, r.stderr);
        assert.match(
          r.stderr,
          new RegExp(
            `node ${node}: failed before its Job was created: the node is now tainted ` +
              `e2e\\.job-dispatcher\\.io/broken=yes:NoSchedule`,
          ),
        );
        assert.deepEqual(await jobsIn(cluster, ns), [], "no Job for the changed node");
        // Given back though it failed: it got no Job. The error mark is the run's record.
        assert.equal(after.unschedulable, false, r.stderr);
        assert.equal(after.by, undefined, "the run's cordon record is gone");
        assert.match(after.error ?? "", /the node is now tainted e2e\.job-dispatcher\.io\/broken/);
        assert.match(r.stderr, new RegExp(`node ${node}: uncordoned`));
      },
    );
  },
);

/** A node or a per-node Job as the work watcher sees it. */
interface WorkView {
  kind?: string;
  metadata: {
    name: string;
    uid: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
  };
  spec?: { unschedulable?: boolean };
  status?: { conditions?: { type: string; status: string }[] };
}

/**
 * Watches a suite's nodes (by the suite label, which no run changes) and a
 * namespace's Jobs, independently of the dispatcher, and replays both
 * streams in resourceVersion order: a node is in work while it is cordoned
 * or its Job has not finished. One kube-apiserver on one etcd gives every
 * object of every kind its resourceVersion from one counter (the etcd
 * revision), so the order is the order of the writes, across the two
 * streams; a client may not rely on that in general, the test of its own
 * control plane may.
 */
class WorkWatcher {
  #events: { rv: number; node: string; what: "cordon" | "job"; on: boolean }[] = [];
  #stop = new AbortController();
  #client: Deno.HttpClient;
  #ready: Promise<unknown>;
  #done: Promise<unknown>;

  static async start(cluster: Cluster, suite: string, ns: string): Promise<WorkWatcher> {
    const w = new WorkWatcher(cluster, suite, ns);
    await w.#ready;
    return w;
  }

  private constructor(cluster: Cluster, suite: string, ns: string) {
    this.#client = adminClient(cluster);
    const record = (o: WorkView, node: string | undefined, what: "cordon" | "job", on: boolean) => {
      if (node !== undefined) {
        this.#events.push({ rv: Number(o.metadata.resourceVersion), node, what, on });
      }
    };
    const nodes = watchList<WorkView>(
      this.#client,
      this.#stop.signal,
      `${cluster.server}/api/v1/nodes?labelSelector=${encodeURIComponent(`${SUITE}=${suite}`)}`,
      (type, n) =>
        record(n, n.metadata.name, "cordon", type !== "DELETED" && !!n.spec?.unschedulable),
    );
    const jobs = watchList<WorkView>(
      this.#client,
      this.#stop.signal,
      `${cluster.server}/apis/batch/v1/namespaces/${ns}/jobs`,
      (type, j) => {
        const finished = (j.status?.conditions ?? []).some((c) =>
          c.status === "True" && (c.type === "Complete" || c.type === "Failed")
        );
        record(
          j,
          j.metadata.annotations?.["job-dispatcher/node-name"],
          "job",
          type !== "DELETED" && !finished,
        );
      },
    );
    this.#ready = Promise.all([nodes.ready, jobs.ready]);
    this.#done = Promise.all([nodes.done, jobs.done]);
  }

  /** The most nodes in work at once, and the nodes at that moment (the first such). */
  peak(): { count: number; nodes: string[] } {
    const state = new Map<string, { cordon: boolean; job: boolean }>();
    let peak = { count: 0, nodes: [] as string[] };
    for (const e of [...this.#events].sort((a, b) => a.rv - b.rv)) {
      const s = state.get(e.node) ?? { cordon: false, job: false };
      s[e.what] = e.on;
      state.set(e.node, s);
      const busy = [...state].filter(([, v]) => v.cordon || v.job).map(([n]) => n);
      if (busy.length > peak.count) peak = { count: busy.length, nodes: busy };
    }
    return peak;
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
    this.#client.close();
  }
}

clusterTest(
  "--max-unavailable counts a node that leaves the selection",
  async (t, cluster) => {
    await t.step(
      "a cleanup run with --max-unavailable 1 --parallelism 3: never more than one node cordoned, draining or in work at once",
      async () => {
        const ns = await namespace(cluster, "gone");
        // The cleanup demotes KEY to its pending value before each drain: the
        // node stops matching KEY=true, and the node informers see it DELETED.
        const key = "e2e.job-dispatcher.io/cleanup";
        await cluster.createNodes(suiteNodes("gone", 4, { labels: { [key]: "true" } }));
        const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
          rbac: { drain: true },
        });
        const watcher = await WorkWatcher.start(cluster, "gone", ns);
        let r;
        try {
          r = await dispatcher(cluster, [
            "--job-template",
            await tempFile(jobTemplate("gone", "2s")),
            "--kubeconfig",
            kubeconfig,
            "--node-selector",
            `${key}=true`,
            "--node-label-key",
            key,
            "--remove-node-label",
            "--drain",
            "--grace-period",
            "0",
            "--max-unavailable",
            "1",
            "--parallelism",
            "3",
          ]);
        } finally {
          await watcher.stop();
        }
        assert.equal(r.code, 0, r.stderr);
        const jobs = await jobsIn(cluster, ns);
        assert.deepEqual(jobs.map((j) => j.node).sort(), [
          "gone-000",
          "gone-001",
          "gone-002",
          "gone-003",
        ]);
        assert.ok(jobs.every((j) => j.complete), "every cleanup Job succeeded");
        const peak = watcher.peak();
        assert.equal(peak.count, 1, `in work at once: ${peak.nodes.join(", ")}\n${r.stderr}`);
        for (const [node, c] of Object.entries(await cordons(cluster, "gone"))) {
          assert.deepEqual([node, c.unschedulable], [node, false], "uncordoned after its Job");
        }
        const left = await cluster.kubectl(["get", "nodes", "-l", key, "-o", "name"]);
        assert.equal(left.stdout.trim(), "", "the cleanup removed KEY from every node");
      },
    );
  },
);
