/**
 * The end-to-end suite: the dispatcher, run as a subprocess exactly as users
 * run it, against a real control plane (etcd, kube-apiserver,
 * kube-controller-manager, kube-scheduler, kwok). Every check reads the API
 * server's view, not the dispatcher's logs.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { type Cluster, type NodeSpec, OUTCOME_LABEL } from "./cluster.ts";
import { dispatcher, eventually, jobsIn, jobTemplate, JobWatcher } from "./_dispatcher.ts";
import {
  clusterTest,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteNodes as nodes,
  tempFile as writeTemplate,
} from "./_fixtures.ts";

/** Creates nodes after a delay, as nodes joining a fleet do. */
async function createNodesLater(cluster: Cluster, specs: NodeSpec[], ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
  await cluster.createNodes(specs);
}

function dryRunNodes(stdout: string): string[] {
  return parseAllDocuments(stdout).map((d) => d.toJS()?.spec?.template?.spec?.nodeName).filter(
    Boolean,
  ).sort();
}

clusterTest("end-to-end on a real control plane", async (t, cluster) => {
  await t.step(
    "1. rollout: 50 nodes at parallelism 5 get one Complete Job each, never more than 5 active",
    async () => {
      const ns = await namespace(cluster, "e2e-rollout");
      await cluster.createNodes(nodes("rollout", 50));
      const watcher = await JobWatcher.start(cluster, ns);
      const tpl = await writeTemplate(jobTemplate("rollout", "500ms"));
      const r = await dispatcher(cluster, [
        "--job-template",
        tpl,
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=rollout`,
        "--parallelism",
        "5",
      ]);
      await watcher.stop();
      assert.equal(r.code, 0, r.stderr);
      const jobs = await jobsIn(cluster, ns);
      assert.equal(jobs.length, 50);
      assert.equal(new Set(jobs.map((j) => j.node)).size, 50, "one Job per node");
      // The dispatcher moves on at SuccessCriteriaMet; the Job controller sets
      // Complete once the pod is gone, a moment later.
      await eventually(
        async () => (await jobsIn(cluster, ns)).every((j) => j.complete),
        30_000,
        "every Job Complete",
      );
      assert.ok(watcher.maxActive <= 5, `at most 5 active, saw ${watcher.maxActive}`);
      assert.ok(watcher.maxActive >= 4, `the slots were used, saw ${watcher.maxActive}`);
      assert.equal(watcher.maxActivePerNode, 1);
      assert.match(r.stderr, /summary: 50 succeeded, 0 failed of 50 nodes/);
    },
  );

  await t.step(
    "2. selection: selector union with a field selector, --nodes, taints, page size",
    async (t) => {
      const ns = await namespace(cluster, "e2e-select");
      await cluster.createNodes([
        ...nodes("sel", 3, { labels: { group: "a" } }),
        ...nodes("sel", 3, { labels: { group: "b" } }, 3),
        ...nodes("sel", 2, { labels: { group: "c" } }, 6),
        ...nodes("sel", 1, {
          labels: { group: "b" },
          taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }],
        }, 8),
      ]);
      // Cordon one node of group a: the field selector must drop it.
      assert.equal(
        (await cluster.kubectl([
          "patch",
          "node",
          "sel-001",
          "-p",
          '{"spec":{"unschedulable":true}}',
        ])).code,
        0,
      );
      const tpl = await writeTemplate(jobTemplate("sel", "200ms"));
      const selectors = [
        "--node-selector",
        `${SUITE}=sel,group=a`,
        "--node-selector",
        `${SUITE}=sel,group=b`,
        "--node-field-selector",
        "spec.unschedulable=false",
      ];

      await t.step(
        "union of two label selectors and a field selector, tainted node skipped with its taint",
        async () => {
          const r = await dispatcher(cluster, ["--job-template", tpl, "-n", ns, ...selectors]);
          assert.equal(r.code, 0, r.stderr);
          const got = (await jobsIn(cluster, ns)).map((j) => j.node).sort();
          assert.deepEqual(got, ["sel-000", "sel-002", "sel-003", "sel-004", "sel-005"]);
          assert.match(r.stderr, /skipped node sel-008: taint dedicated=gpu:NoSchedule/);
        },
      );
      await t.step("a toleration in the template reaches the tainted node", async () => {
        const tolerating = await writeTemplate(
          jobTemplate(
            "sel",
            "200ms",
            "      tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n",
          ),
        );
        const r = await dispatcher(cluster, [
          "--job-template",
          tolerating,
          "-n",
          ns,
          "--dry-run=client",
          ...selectors,
        ]);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(dryRunNodes(r.stdout), [
          "sel-000",
          "sel-002",
          "sel-003",
          "sel-004",
          "sel-005",
          "sel-008",
        ]);
      });
      await t.step("--ignore-node-taints reaches it too", async () => {
        const r = await dispatcher(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--dry-run=client",
          "--ignore-node-taints",
          ...selectors,
        ]);
        assert.equal(r.code, 0, r.stderr);
        assert.ok(dryRunNodes(r.stdout).includes("sel-008"));
      });
      await t.step("--nodes takes exactly the named nodes, taints or not", async () => {
        const r = await dispatcher(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--dry-run=client",
          "--nodes",
          "sel-006,sel-008",
        ]);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(dryRunNodes(r.stdout), ["sel-006", "sel-008"]);
        const missing = await dispatcher(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--nodes",
          "sel-006,nope-1",
        ]);
        assert.equal(missing.code, 2);
        assert.match(missing.stderr, /no node named nope-1/);
      });
      await t.step("--node-page-size 7 selects the same nodes as one page", async () => {
        const args = [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--dry-run=client",
          "--node-selector",
          `${SUITE}=rollout`,
        ];
        const paged = await dispatcher(cluster, [...args, "--node-page-size", "7"]);
        const whole = await dispatcher(cluster, args);
        assert.equal(paged.code, 0, paged.stderr);
        assert.equal(dryRunNodes(paged.stdout).length, 50);
        assert.deepEqual(dryRunNodes(paged.stdout), dryRunNodes(whole.stdout));
      });
    },
  );

  await t.step(
    "3. owner GC: deleting the owner Job makes the garbage collector delete every per-node Job",
    async () => {
      const ns = await namespace(cluster, "e2e-owner");
      await cluster.createNodes(nodes("own", 3));
      const uid = await ownerJob(cluster, ns, "hook");
      const tpl = await writeTemplate(jobTemplate("own", "200ms"));
      const r = await dispatcher(cluster, [
        "--job-template",
        tpl,
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=own`,
        "--owner-job-name",
        "hook",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const jobs = (await jobsIn(cluster, ns)).filter((j) => j.name !== "hook");
      assert.equal(jobs.length, 3);
      assert.ok(jobs.every((j) => j.owners.includes(uid)));
      assert.equal(
        (await cluster.kubectl(["delete", "job", "hook", "-n", ns, "--cascade=background"]))
          .code,
        0,
      );
      await eventually(
        async () => (await jobsIn(cluster, ns)).length === 0,
        60_000,
        "garbage collection of the per-node Jobs",
      );
    },
  );

  await t.step(
    "4. re-runs: nothing twice, new nodes picked up, a new owner replaces",
    async () => {
      const ns = await namespace(cluster, "e2e-rerun");
      await cluster.createNodes(nodes("rerun", 4));
      await ownerJob(cluster, ns, "hook-1");
      const tpl = await writeTemplate(jobTemplate("rerun", "200ms"));
      const args = ["--job-template", tpl, "-n", ns, "--node-selector", `${SUITE}=rerun`];
      const first = await dispatcher(cluster, [...args, "--owner-job-name", "hook-1"]);
      assert.equal(first.code, 0, first.stderr);
      const before = new Set((await jobsIn(cluster, ns)).map((j) => j.uid));

      const again = await dispatcher(cluster, [...args, "--owner-job-name", "hook-1"]);
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(
        new Set((await jobsIn(cluster, ns)).map((j) => j.uid)),
        before,
        "the same run creates no Job",
      );
      assert.doesNotMatch(again.stderr, /created job/);

      await cluster.createNodes(nodes("rerun", 3, {}, 4));
      const grown = await dispatcher(cluster, [...args, "--owner-job-name", "hook-1"]);
      assert.equal(grown.code, 0, grown.stderr);
      const after = await jobsIn(cluster, ns);
      const fresh = after.filter((j) => !before.has(j.uid) && j.name.startsWith("rerun-"));
      assert.deepEqual(fresh.map((j) => j.node).sort(), [
        "rerun-004",
        "rerun-005",
        "rerun-006",
      ]);

      const newOwner = await ownerJob(cluster, ns, "hook-2");
      const replaced = await dispatcher(cluster, [...args, "--owner-job-name", "hook-2"]);
      assert.equal(replaced.code, 0, replaced.stderr);
      const final = (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("rerun-"));
      assert.equal(final.length, 7);
      assert.ok(
        final.every((j) => j.owners.includes(newOwner)),
        "every Job belongs to the new owner",
      );
      assert.equal((replaced.stderr.match(/replaced job/g) ?? []).length, 7);
    },
  );

  await t.step(
    "5. failures: exit 1 and a summary naming exactly the failed nodes",
    async () => {
      const ns = await namespace(cluster, "e2e-fail");
      await cluster.createNodes([
        ...nodes("fail", 4),
        ...nodes("fail", 2, { labels: { [OUTCOME_LABEL]: "fail" } }, 4),
      ]);
      const tpl = await writeTemplate(jobTemplate("fail", "200ms"));
      const r = await dispatcher(cluster, [
        "--job-template",
        tpl,
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=fail`,
      ]);
      assert.equal(r.code, 1, r.stderr);
      const named = [...r.stderr.matchAll(/failed node (\S+):/g)].map((m) => m[1]).sort();
      assert.deepEqual(named, ["fail-004", "fail-005"]);
      assert.match(r.stderr, /summary: 4 succeeded, 2 failed of 6 nodes/);
      // One logs command per failed node, not one for every pod of the run.
      for (const node of ["fail-004", "fail-005"]) {
        assert.match(
          r.stderr,
          new RegExp(
            `kubectl logs -n e2e-fail -l job-dispatcher/owner=fail,job-dispatcher/node=${node} ` +
              "--all-containers --prefix",
          ),
        );
      }
    },
  );

  await t.step(
    "6. least privilege: the README's RBAC rules suffice; without one verb the error names it",
    async () => {
      const ns = await namespace(cluster, "e2e-rbac");
      await cluster.createNodes(nodes("rbac", 3));
      const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher");
      const tpl = await writeTemplate(jobTemplate("rbac", "200ms"));
      const args = [
        "--job-template",
        tpl,
        "--node-selector",
        `${SUITE}=rbac`,
        "--kubeconfig",
        kubeconfig,
      ];
      const r = await dispatcher(cluster, args);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(
        r.stderr,
        /cannot record|cannot watch|cannot list|forbidden/,
        `every feature had its rule:\n${r.stderr}`,
      );
      assert.equal(
        (await jobsIn(cluster, ns)).length,
        3,
        "the namespace came from the kubeconfig context",
      );

      // The same ServiceAccount without "create" on jobs.
      await serviceAccount(cluster, ns, "dispatcher", {
        rbac: { jobs: ["get", "list", "watch", "delete", "patch"] },
      });
      await cluster.createNodes(nodes("rbac", 1, {}, 3));
      const denied = await dispatcher(cluster, args);
      assert.equal(denied.code, 3, denied.stderr);
      assert.match(denied.stderr, /Cannot create jobs: .*forbidden/);
      assert.match(denied.stderr, /grant the verb "create" on "jobs"/);
      assert.equal((await jobsIn(cluster, ns)).length, 3, "nothing created");
    },
  );

  await t.step("7. a watch left idle for over 60 s still refills the next slot", async () => {
    const ns = await namespace(cluster, "e2e-idle");
    await cluster.createNodes(nodes("idle", 2));
    const tpl = await writeTemplate(jobTemplate("idle", "65s"));
    const r = await dispatcher(cluster, [
      "--job-template",
      tpl,
      "-n",
      ns,
      "--node-selector",
      `${SUITE}=idle`,
      "--parallelism",
      "1",
      // Polling this slowly could not explain a prompt refill: only the watch can.
      "--poll-interval-secs",
      "600",
    ]);
    assert.equal(r.code, 0, r.stderr);
    const { stdout } = await cluster.kubectl(["get", "jobs", "-n", ns, "-o", "json"]);
    const jobs = JSON.parse(stdout).items.sort((
      a: { metadata: { name: string } },
      b: { metadata: { name: string } },
    ) => a.metadata.name.localeCompare(b.metadata.name));
    const finishedAt = Date.parse(jobs[0].status.completionTime);
    const nextAt = Date.parse(jobs[1].metadata.creationTimestamp);
    assert.ok(
      nextAt - Date.parse(jobs[0].metadata.creationTimestamp) >= 60_000,
      "the first Job ran over 60 s",
    );
    assert.ok(
      nextAt - finishedAt <= 5_000,
      `refilled ${nextAt - finishedAt} ms after the completion`,
    );
  });

  await t.step(
    "8. --dry-run=server creates nothing and reports an invalid template as the server's error",
    async () => {
      const ns = await namespace(cluster, "e2e-dry");
      const good = await writeTemplate(jobTemplate("dry", "200ms"));
      const ok = await dispatcher(cluster, [
        "--job-template",
        good,
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=fail`,
        "--dry-run=server",
      ]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stderr, /validated job dry-fail-000/);
      const bad = await writeTemplate(
        jobTemplate("dry", "200ms").replace("name: work", "name: Work_Bad"),
      );
      const r = await dispatcher(cluster, [
        "--job-template",
        bad,
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=fail`,
        "--dry-run=server",
      ]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /spec\.template\.spec\.containers\[0\]\.name/);
      assert.equal((await jobsIn(cluster, ns)).length, 0, "nothing created");
    },
  );
  await t.step("9. more flags on the real cluster", async (t) => {
    const ns = await namespace(cluster, "e2e-flags");
    const tpl = await writeTemplate(jobTemplate("flags", "200ms"));

    await t.step(
      "--wait-for-nodes-secs waits for nodes that join late and settle",
      async () => {
        const late = createNodesLater(cluster, nodes("late", 3), 3000);
        const r = await dispatcher(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=late`,
          "--wait-for-nodes-secs",
          "60",
          "--node-settle-secs",
          "2",
        ]);
        await late;
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual((await jobsIn(cluster, ns)).map((j) => j.node).sort(), [
          "late-000",
          "late-001",
          "late-002",
        ]);
      },
    );

    await t.step(
      "waiting for nodes that never come fails with the selection spelled out",
      async () => {
        const r = await dispatcher(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=never`,
          "--wait-for-nodes-secs",
          "2",
          "--node-settle-secs",
          "1",
        ]);
        assert.equal(r.code, 2, r.stderr);
        assert.match(
          r.stderr,
          /No node matched --node-selector e2e.job-dispatcher.io\/suite=never within --wait-for-nodes-secs 2/,
        );
      },
    );

    await t.step(
      "no match: exit 0 as kubectl, 'No resources found' with the kubectl form, a report of 0",
      async () => {
        const report = `${await Deno.makeTempDir({ prefix: "e2e-nomatch-" })}/report.json`;
        const args = ["--job-template", await writeTemplate(jobTemplate("nomatch", "200ms"))];
        const r = await dispatcher(cluster, [
          ...args,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=nomatch`,
          "--log-format",
          "json",
          "--report",
          report,
        ]);
        // The oracle: kubectl get exits 0 on no match and says so.
        const oracle = await cluster.kubectl(["get", "nodes", "-l", `${SUITE}=nomatch`]);
        assert.equal(oracle.code, 0, oracle.stderr);
        assert.match(oracle.stderr, /No resources found/);
        assert.equal(r.code, oracle.code, r.stderr);
        const lines = r.stderr.trim().split("\n").map((l) => JSON.parse(l));
        const none = lines.find((l) => l.event === "selected");
        assert.equal(none?.selected, 0, r.stderr);
        assert.deepEqual(none?.labelSelectors, [`${SUITE}=nomatch`]);
        assert.match(
          none.msg,
          /No resources found: no node matches --node-selector \S+=nomatch \(kubectl get nodes -l \S+=nomatch\)/,
        );
        const written = JSON.parse(await Deno.readTextFile(report));
        assert.equal(written.summary.total, 0);
        assert.deepEqual(written.nodes, []);
        const jobs = (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("nomatch-"));
        assert.deepEqual(jobs, [], "nothing created");

        await cluster.createNodes(nodes("one", 1));
        const one = await dispatcher(cluster, [
          ...args,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=one`,
          "--log-format",
          "json",
        ]);
        assert.equal(one.code, 0, one.stderr);
        const selected = one.stderr.trim().split("\n").map((l) => JSON.parse(l))
          .find((l) => l.event === "selected");
        assert.match(selected?.msg ?? "", /^selected 1 node \(/, one.stderr);
        assert.equal(selected.selected, 1);
        assert.deepEqual(selected.skipped, { taint: 0, done: 0 });
        assert.equal(
          (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("nomatch-")).length,
          1,
        );
      },
    );

    await t.step("--owner-job-from-pod takes the Job that owns the pod", async () => {
      await cluster.createNodes(nodes("frompod", 2));
      const applied = await cluster.kubectl(
        ["apply", "-f", "-"],
        `apiVersion: batch/v1
kind: Job
metadata: {name: runner, namespace: ${ns}}
spec:
  template:
    metadata: {annotations: {e2e.job-dispatcher.io/duration: "600s"}}
    spec:
      restartPolicy: Never
      containers: [{name: runner, image: registry.invalid/runner:1}]
`,
      );
      assert.equal(applied.code, 0, applied.stderr);
      let pod = "";
      await eventually(
        async () => {
          const r = await cluster.kubectl([
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            "job-name=runner",
            "-o",
            "jsonpath={.items[0].metadata.name}",
          ]);
          pod = r.stdout.trim();
          return pod !== "";
        },
        30_000,
        "the runner Job's pod",
      );
      const uid = (await cluster.kubectl([
        "get",
        "job",
        "runner",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
      ])).stdout.trim();
      const r = await dispatcher(cluster, [
        "--job-template",
        await writeTemplate(jobTemplate("frompod", "200ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=frompod`,
        "--owner-job-from-pod",
        pod,
      ]);
      assert.equal(r.code, 0, r.stderr);
      const owned = (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("frompod-"));
      assert.equal(owned.length, 2);
      assert.ok(owned.every((j) => j.owners.includes(uid)), "owned by the pod's Job");
    });

    await t.step(
      "$POD_NAMESPACE names the namespace and --log-format json writes only JSON lines",
      async () => {
        await cluster.createNodes(nodes("json", 2));
        const r = await dispatcher(
          cluster,
          [
            "--job-template",
            await writeTemplate(jobTemplate("json", "200ms")),
            "--node-selector",
            `${SUITE}=json`,
            "--log-format",
            "json",
          ],
          { env: { POD_NAMESPACE: ns } },
        );
        assert.equal(r.code, 0, r.stderr);
        const lines = r.stderr.trim().split("\n").map((l) => JSON.parse(l));
        assert.ok(lines.every((l) => l.level && l.msg && l.time), "every line a JSON record");
        assert.equal(lines.filter((l) => l.event === "created").length, 2);
        assert.equal(lines.find((l) => l.event === "summary")?.succeeded, 2);
        assert.equal(
          (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("json-")).length,
          2,
        );
      },
    );
  });
});
