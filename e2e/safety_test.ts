/**
 * Rollout safety on a real control plane: the failure budget, the canary,
 * per-zone slots (checked by an independent watcher), node timeouts and
 * pinning through the scheduler.
 */

import assert from "node:assert/strict";
import { OUTCOME_LABEL } from "./cluster.ts";
import { dispatcher, eventually, jobsIn, jobTemplate, JobWatcher } from "./_dispatcher.ts";
import {
  clusterTest,
  namespace,
  README_RBAC,
  serviceAccount,
  SUITE,
  suiteNodes as nodes,
  tempFile as file,
} from "./_fixtures.ts";
import { errorLines } from "./_faults.ts";

const ZONE = "topology.kubernetes.io/zone";

clusterTest("rollout safety on a real control plane", async (t, cluster) => {
  await t.step(
    "a failure budget of 2 with 5 failing nodes stops once exceeded, after the Jobs in flight",
    async () => {
      const ns = await namespace(cluster, "safe-budget");
      await cluster.createNodes([
        ...nodes("budget", 5, { labels: { [OUTCOME_LABEL]: "fail" } }),
        ...nodes("budget", 5, {}, 5),
      ]);
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("budget", "300ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=budget`,
        "--parallelism",
        "2",
        "--max-failures",
        "2",
      ]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /rollout stopped: the failure budget of 2 was exceeded/);
      const jobs = await jobsIn(cluster, ns);
      // The third failure exceeds the budget; at most one more was in flight.
      assert.ok(jobs.length >= 3 && jobs.length <= 4, `created ${jobs.length}`);
      const never = Number(r.stderr.match(/(\d+) nodes were never started/)?.[1]);
      assert.equal(never, 10 - jobs.length);
    },
  );

  await t.step("a failing canary starts nothing else", async () => {
    const ns = await namespace(cluster, "safe-canary");
    await cluster.createNodes([
      ...nodes("canary", 1, { labels: { [OUTCOME_LABEL]: "fail" } }),
      ...nodes("canary", 5, {}, 1),
    ]);
    const r = await dispatcher(cluster, [
      "--job-template",
      await file(jobTemplate("canary", "300ms")),
      "-n",
      ns,
      "--node-selector",
      `${SUITE}=canary`,
      "--canary",
      "2",
      "--parallelism",
      "4",
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /the canary failed on canary-000/);
    assert.deepEqual((await jobsIn(cluster, ns)).map((j) => j.node).sort(), [
      "canary-000",
      "canary-001",
    ]);
  });

  await t.step(
    "a canary that got no Job (still blocked) starts nothing else, even within --max-failures",
    async () => {
      const ns = await namespace(cluster, "safe-canblk");
      await cluster.createNodes(nodes("canblk", 4));
      // A pod of --blocking-pod-selector on the canary's node, never finishing.
      const pod = await cluster.kubectl(
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: {
            name: "db-0",
            namespace: ns,
            labels: { app: "db" },
            annotations: { [OUTCOME_LABEL]: "serve" },
          },
          spec: {
            nodeName: "canblk-000",
            terminationGracePeriodSeconds: 0,
            containers: [{ name: "db", image: "registry.invalid/db:1" }],
          },
        }),
      );
      assert.equal(pod.code, 0, pod.stderr);
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("canblk", "300ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=canblk`,
        "--canary",
        "1",
        "--max-failures",
        "2",
        "--blocking-pod-selector",
        "app=db",
        "--blocked-timeout-secs",
        "2",
      ]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /rollout stopped: the canary got no Job on canblk-000: still blocked after 2 s: .*db-0/,
      );
      assert.deepEqual(await jobsIn(cluster, ns), [], "no Job: the canary proved nothing");
    },
  );

  await t.step(
    "3 zones with at most 1 Job per zone never show two active Jobs in one zone",
    async () => {
      const ns = await namespace(cluster, "safe-zones");
      const zoneOf = (i: number) => ["a", "b", "c"][i % 3];
      await cluster.createNodes(
        Array.from({ length: 9 }, (_, i) => ({
          name: `zone-${String(i).padStart(3, "0")}`,
          labels: { [SUITE]: "zones", [ZONE]: `zone-${zoneOf(i)}` },
        })),
      );
      const watcher = await JobWatcher.start(
        cluster,
        ns,
        (node) => zoneOf(Number(node.slice(-3))),
      );
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("zones", "1s")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=zones`,
        "--parallelism",
        "10",
        "--max-per-topology",
        `${ZONE}=1`,
      ]);
      await watcher.stop();
      assert.equal(r.code, 0, r.stderr);
      assert.equal((await jobsIn(cluster, ns)).length, 9);
      assert.equal(watcher.maxActivePerDomain, 1, "never two active Jobs in one zone");
      assert.equal(watcher.maxActive, 3, "one per zone at once, all three zones busy");
    },
  );

  await t.step(
    "a timed-out node fails with reason timeout, its Job is deleted and the slot freed",
    async () => {
      const ns = await namespace(cluster, "safe-timeout");
      await cluster.createNodes([
        ...nodes("timeout", 1, { labels: { [OUTCOME_LABEL]: "stall" } }),
        ...nodes("timeout", 2, {}, 1),
      ]);
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("timeout", "300ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=timeout`,
        "--parallelism",
        "1",
        "--node-timeout-secs",
        "5",
        "--delete-timed-out",
      ]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /failed node timeout-000: job timeout-timeout-000: timeout: not finished within 5 s/,
      );
      assert.match(r.stderr, /summary: 2 succeeded, 1 failed of 3 nodes/);
      await eventually(
        async () => !(await jobsIn(cluster, ns)).some((j) => j.node === "timeout-000"),
        30_000,
        "the timed-out Job to be deleted",
      );
    },
  );

  await t.step(
    "--pin affinity leaves a pod Pending on a node without room and reports it as a stall",
    async () => {
      const ns = await namespace(cluster, "safe-pin");
      await cluster.createNodes(nodes("pin", 1));
      const big = jobTemplate("pin", "300ms", "", "16");
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(big),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=pin`,
        "--pin",
        "affinity",
        "--stall-warn-secs",
        "3",
        "--node-timeout-secs",
        "8",
      ]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /node pin-000: job pin-pin-000 pending for \d+ s: Unschedulable: 0\/\d+ nodes are available: .*Insufficient cpu/,
      );
      const pod = JSON.parse(
        (await cluster.kubectl([
          "get",
          "pods",
          "-n",
          ns,
          "-l",
          "batch.kubernetes.io/job-name=pin-pin-000",
          "-o",
          "json",
        ])).stdout,
      ).items[0];
      assert.equal(pod.status.phase, "Pending", "the scheduler kept it off the full node");
      assert.equal(pod.spec.nodeName, undefined, "not bound: the scheduler decides");
      const terms = pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
        .nodeSelectorTerms;
      assert.deepEqual(terms[0].matchFields, [{
        key: "metadata.name",
        operator: "In",
        values: ["pin-000"],
      }]);
    },
  );
});

clusterTest("permissions are checked before anything is touched", async (t, cluster) => {
  await t.step(
    "--drain by a ServiceAccount without list pods (cluster-wide): exit 3, one line naming it and the README's rule, no node cordoned, no Job",
    async () => {
      const ns = await namespace(cluster, "perm");
      await cluster.createNodes(nodes("perm", 3));
      // The README's rules without its --drain ClusterRole: pods are listed
      // only in the Jobs' namespace, and nothing may be evicted.
      const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
        rbac: { ...README_RBAC, drain: false },
      });
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("perm", "200ms")),
        "--node-selector",
        `${SUITE}=perm`,
        "--kubeconfig",
        kubeconfig,
        "--drain",
      ]);
      assert.equal(r.code, 3, r.stderr);
      const errors = errorLines(r.stderr);
      assert.equal(errors.length, 1, r.stderr);
      assert.match(
        errors[0],
        /error: Missing permission: cannot list pods \(all namespaces; for --drain\), create pods\/eviction \(all namespaces; for --drain\); grant them with the README's RBAC section: ClusterRole job-dispatcher-drain/,
      );
      assert.doesNotMatch(r.stderr, /cordoned|created job|forbidden/, r.stderr);
      const list = JSON.parse(
        (await cluster.kubectl(["get", "nodes", "-l", `${SUITE}=perm`, "-o", "json"])).stdout,
      ) as { items: { metadata: { name: string }; spec?: { unschedulable?: boolean } }[] };
      assert.equal(list.items.length, 3);
      for (const n of list.items) {
        assert.equal(n.spec?.unschedulable ?? false, false, `${n.metadata.name} not cordoned`);
      }
      assert.deepEqual(await jobsIn(cluster, ns), [], "no Job");
    },
  );
});
