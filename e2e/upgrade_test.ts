/**
 * A control plane's bad day, the client's share of it, on the real control
 * plane:
 *
 * 1. `helm upgrade` while the previous hook's rollout still runs. Helm's
 *    `before-hook-creation` deletes the old hook Job, the owner of the
 *    per-node Jobs; its finalizer (run/owner_guard.ts) keeps the garbage
 *    collector off them, so an independent watcher sees no per-node Job
 *    deleted before it finished, and Helm waits for the rollout.
 * 2. 2,000 stale Jobs of an earlier owner: every one is deleted, yet the
 *    dispatcher's requests in flight (kube-apiserver's audit log) never
 *    exceed `--kube-api-concurrency`, over a handful of TCP connections
 *    (a counting proxy).
 *
 * As in chart_test.ts, kwok fakes the hook pod and the dispatcher's real run
 * is a local one with the hook's ServiceAccount and arguments.
 */

import assert from "node:assert/strict";
import { parse, stringify } from "yaml";
import type { Cluster } from "./cluster.ts";
import { adminClient, eventually, jobsIn, jobTemplate, JobWatcher } from "./_dispatcher.ts";
import { atLeast, DispatcherProcess, runDispatcher } from "./_faults.ts";
import { CHART, find, helmResult, helmRunner, objects, serviceAccountKubeconfig } from "./_helm.ts";
import {
  clusterTest,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteNodes,
  tempFile,
} from "./_fixtures.ts";
import { FaultProxy } from "./_proxy.ts";

const NS = "e2e-upgrade";
const STORM_NS = "e2e-storm";
const RELEASE = "rollout";
const HOOK_JOB = `${RELEASE}-job-dispatcher`;
const STALE = 2000;
const CONCURRENCY = 16;
const GUARD = "job-dispatcher/per-node-jobs";

function log(line: string): void {
  console.log(`    ${line}`);
}

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

async function kubectlJson(cluster: Cluster, args: string[]): Promise<Obj | undefined> {
  const r = await cluster.kubectl([...args, "-o", "json"]);
  return r.code === 0 ? JSON.parse(r.stdout) : undefined;
}

/** The chart's values: `hookSecs` is how long kwok runs the hook pod. */
async function values(hookSecs: number): Promise<string> {
  return await tempFile(stringify({
    image: { repository: "registry.invalid/job-dispatcher", tag: "e2e" },
    jobTemplate: parse(jobTemplate("node-task", "10s")),
    selection: { nodeSelectors: [`${SUITE}=upgrade`] },
    parallelism: 2,
    logFormat: "text",
    progressIntervalSecs: 2,
    podAnnotations: { "e2e.job-dispatcher.io/duration": `${hookSecs}s` },
  }));
}

/** Microseconds since the epoch of an audit timestamp (RFC 3339 with microseconds). */
function micros(ts: string): number {
  const [whole, frac = "0"] = ts.replace("Z", "").split(".");
  return Date.parse(`${whole}Z`) * 1000 + Number(frac.padEnd(6, "0").slice(0, 6));
}

/** The most requests of `user` in flight at once, by the audit log from `offset`, watches aside. */
async function peakInFlight(
  cluster: Cluster,
  user: string,
  offset: number,
): Promise<{ peak: number; requests: number; byVerb: Record<string, number> }> {
  const text = (await Deno.readTextFile(cluster.auditLog!)).slice(offset);
  const entries = text.split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((e) => e.user?.username === user && e.stage === "ResponseComplete");
  const byVerb: Record<string, number> = {};
  const edges: [number, number][] = [];
  for (const e of entries) {
    byVerb[e.verb] = (byVerb[e.verb] ?? 0) + 1;
    if (e.verb === "watch") continue;
    edges.push([micros(e.requestReceivedTimestamp), 1], [micros(e.stageTimestamp), -1]);
  }
  // At the same instant an end comes before a start: the slot was handed on.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0, peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, now += d);
  return { peak, requests: entries.length, byVerb };
}

clusterTest(
  "upgrade and storm: helm upgrade mid-rollout kills nothing; 2,000 stale Jobs stay bounded",
  async (t, cluster) => {
    await cluster.createNodes([...suiteNodes("upgrade", 4), ...suiteNodes("storm", 4)]);

    await t.step(
      "helm upgrade while the previous hook's rollout runs: no per-node Job is deleted before it finished",
      async () => {
        const home = await Deno.makeTempDir({ prefix: "helm-" });
        const helm = helmRunner(home, cluster.kubeconfig);
        const helmAnyway = helmResult(home, cluster.kubeconfig);
        const upgrade = (file: string, timeout: string) =>
          helmAnyway(["upgrade", RELEASE, CHART, "-n", NS, "-f", file, "--timeout", timeout]);
        await namespace(cluster, NS);
        const quick = await values(1);
        await helm(["install", RELEASE, CHART, "-n", NS, "-f", quick, "--timeout", "2m"]);
        // Revision 2's hook runs for minutes: Helm's --timeout runs out first and
        // marks the release failed while the hook goes on, as with a real rollout.
        const slow = await upgrade(await values(300), "5s");
        assert.notEqual(slow.code, 0, "helm upgrade gave up at its --timeout");
        log(`helm upgrade --timeout 5s: ${slow.stderr.trim()}`);
        const hook = (await kubectlJson(cluster, ["get", "job", HOOK_JOB, "-n", NS]))!;
        const hookUid: string = hook.metadata.uid;

        // The dispatcher of that hook: its ServiceAccount, its arguments.
        const args: string[] = find(objects(await helm(["get", "hooks", RELEASE, "-n", NS])), "Job")
          .spec.template.spec.containers[0].args;
        const cm = (await kubectlJson(cluster, [
          "get",
          "configmap",
          `${HOOK_JOB}-job-template`,
          "-n",
          NS,
        ]))!;
        const template = await tempFile(cm.data["job.yaml"]);
        const kubeconfig = await serviceAccountKubeconfig(cluster, NS, HOOK_JOB);
        const watcher = await JobWatcher.start(cluster, NS);
        const run = new DispatcherProcess(
          cluster,
          args.map((a) => a.startsWith("--job-template=") ? `--job-template=${template}` : a),
          { kubeconfig, timeoutMs: 240_000 },
        );
        try {
          assert.ok(await run.waitFor(/created job \S+ for node/), run.stderr);
          assert.match(run.stderr, /added finalizer job-dispatcher\/per-node-jobs to owner job/);

          // The next upgrade, with a generous --timeout, while two Jobs run.
          const upgradeStarted = Date.now();
          const next = upgrade(quick, "4m").then((r) => ({ ...r, at: Date.now() }));

          // Helm deleted the old hook Job; it stays, terminating, with its pod.
          await eventually(
            async () =>
              (await kubectlJson(cluster, ["get", "job", HOOK_JOB, "-n", NS]))?.metadata
                .deletionTimestamp !== undefined,
            60_000,
            "helm to delete the old hook Job",
          );
          const terminating = (await kubectlJson(cluster, ["get", "job", HOOK_JOB, "-n", NS]))!;
          assert.equal(terminating.metadata.uid, hookUid);
          assert.deepEqual(terminating.metadata.finalizers, ["job-dispatcher/per-node-jobs"]);
          await new Promise((r) => setTimeout(r, 3000));
          const pods = (await kubectlJson(cluster, [
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            `batch.kubernetes.io/controller-uid=${hookUid}`,
          ]))!.items as Obj[];
          assert.equal(pods.length, 1, "the hook's pod is still there");
          assert.equal(pods[0].metadata.deletionTimestamp, undefined, "and not being deleted");
          assert.equal(pods[0].status.phase, "Running", "it runs on while its Job terminates");
          const perNode = (await jobsIn(cluster, NS)).filter((j) => j.name !== HOOK_JOB);
          assert.ok(perNode.length >= 2 && perNode.some((j) => !j.complete), "a rollout mid-way");
          log(
            `old hook Job terminating ${((Date.now() - upgradeStarted) / 1000).toFixed(1)} s ` +
              `after helm upgrade started; ${perNode.filter((j) => !j.complete).length} ` +
              "per-node Jobs still running; the hook pod Running",
          );

          const ended = await run.ended;
          assert.equal(ended.code, 0, ended.stderr);
          assert.match(ended.stderr, /summary: 4 succeeded, 0 failed of 4/);
          assert.match(
            ended.stderr,
            /removed finalizer job-dispatcher\/per-node-jobs from owner job/,
          );
          const done = Date.now();
          const up = await next;
          assert.equal(up.code, 0, up.stderr);
          assert.ok(up.at >= done - 1000, "helm upgrade returned only after the rollout ended");
          log(
            `helm upgrade took ${((up.at - upgradeStarted) / 1000).toFixed(1)} s; ` +
              `the rollout ended ${((done - upgradeStarted) / 1000).toFixed(1)} s after it started`,
          );
          const newHook = (await kubectlJson(cluster, ["get", "job", HOOK_JOB, "-n", NS]))!;
          assert.notEqual(newHook.metadata.uid, hookUid, "the new release's hook replaced the old");
          // Only now, all finished, does the collector take the old per-node Jobs.
          await eventually(
            async () => (await jobsIn(cluster, NS)).every((j) => j.name === HOOK_JOB),
            60_000,
            "the finished per-node Jobs of the old hook to be garbage-collected",
          );
        } finally {
          run.kill("SIGKILL");
          await watcher.stop();
          await Deno.remove(home, { recursive: true }).catch(() => {});
        }
        assert.equal(watcher.seen.size, 4, "the watcher saw every per-node Job");
        assert.deepEqual(watcher.deletedUnfinished, [], "no per-node Job deleted mid-run");
      },
    );

    await t.step(
      `${STALE} stale Jobs of an earlier owner: all deleted, at most ${CONCURRENCY} requests in flight, few connections`,
      async () => {
        await namespace(cluster, STORM_NS);
        const proxy = FaultProxy.start(cluster.server);
        try {
          const { kubeconfig, user } = await serviceAccount(cluster, STORM_NS, "dispatcher", {
            server: `https://127.0.0.1:${proxy.port}`,
          });
          const oldUid = await ownerJob(cluster, STORM_NS, "hook-old");
          await ownerJob(cluster, STORM_NS, "hook-new");
          const created = performance.now();
          await createStaleJobs(cluster, oldUid);
          log(
            `${STALE} stale Jobs created in ${((performance.now() - created) / 1000).toFixed(1)} s`,
          );
          const offset = (await Deno.stat(cluster.auditLog!)).size;
          const started = performance.now();
          const r = await runDispatcher(cluster, [
            "--job-template",
            await tempFile(jobTemplate("storm", "500ms")),
            "-n",
            STORM_NS,
            "--node-selector",
            `${SUITE}=storm`,
            "--parallelism",
            "4",
            "--owner-job-name",
            "hook-new",
          ], { kubeconfig, timeoutMs: 600_000 });
          const secs = ((performance.now() - started) / 1000).toFixed(1);
          assert.equal(r.code, 0, r.stderr.slice(-3000));
          assert.match(r.stderr, /summary: 4 succeeded, 0 failed of 4/);
          const left = (await jobsIn(cluster, STORM_NS)).filter((j) => j.name.startsWith("storm-"));
          assert.equal(left.length, 4, "every stale Job is gone; the 4 new ones remain");
          const audit = await peakInFlight(cluster, user, offset);
          log(
            `run ${secs} s; ${audit.requests} requests (${JSON.stringify(audit.byVerb)}); ` +
              `peak in flight ${audit.peak} (bound ${CONCURRENCY}); ` +
              `${proxy.stats.connections} TCP connections`,
          );
          assert.ok(audit.byVerb.delete >= STALE, `${audit.byVerb.delete} deletes`);
          assert.ok(audit.peak <= CONCURRENCY, `peak ${audit.peak} in flight`);
          assert.ok(audit.peak >= 4, `the bound was used: peak ${audit.peak}`);
          // One connection per slot, plus the watches and re-connects when the
          // server closes an idle keep-alive one (20 to 25 seen): no storm,
          // which before the bound was one connection per request (2,002).
          assert.ok(proxy.stats.connections <= 2 * CONCURRENCY, `${proxy.stats.connections}`);
        } finally {
          await proxy.close();
        }
      },
    );

    await t.step(
      "a run stopped with Jobs in flight keeps the finalizer; a later run drops it once they finished",
      async () => {
        const ns = await namespace(cluster, "e2e-sigterm");
        await ownerJob(cluster, ns, "hook-a");
        await ownerJob(cluster, ns, "hook-b");
        const tpl = await tempFile(jobTemplate("sig", "6s"));
        const args = (owner: string) => [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=storm`,
          "--parallelism",
          "4",
          "--owner-job-name",
          owner,
        ];
        const first = new DispatcherProcess(cluster, args("hook-a"));
        assert.ok(await first.waitFor(atLeast(4, /created job \S+ for node/)), first.stderr);
        first.kill("SIGTERM");
        assert.equal((await first.ended).code, 143);
        const ownerA = async () => await kubectlJson(cluster, ["get", "job", "hook-a", "-n", ns]);
        assert.deepEqual((await ownerA())!.metadata.finalizers, [GUARD], "kept: 4 Jobs in flight");
        // Deleted as Helm deletes a hook: it stays, and so do its running Jobs.
        const del = await cluster.kubectl(["delete", "job", "hook-a", "-n", ns, "--wait=false"]);
        assert.equal(del.code, 0, del.stderr);
        await new Promise((r) => setTimeout(r, 2000));
        assert.ok((await ownerA())!.metadata.deletionTimestamp);
        assert.equal((await jobsIn(cluster, ns)).filter((j) => j.node).length, 4);
        await eventually(
          async () => (await jobsIn(cluster, ns)).filter((j) => j.complete).length === 4,
          60_000,
          "the stopped run's Jobs to finish",
        );
        const second = await runDispatcher(cluster, args("hook-b"));
        assert.equal(second.code, 0, second.stderr);
        assert.match(second.stderr, new RegExp(`removed finalizer ${GUARD} from owner job hook-a`));
        assert.match(second.stderr, new RegExp(`removed finalizer ${GUARD} from owner job hook-b`));
        await eventually(async () => !(await ownerA()), 30_000, "hook-a to be gone");
      },
    );
  },
  {
    audit: { userGroups: [`system:serviceaccounts:${NS}`, `system:serviceaccounts:${STORM_NS}`] },
    // The garbage collector finishes 2,000 foreground deletions at its own QPS.
    controllerQps: 200,
  },
);

/**
 * Creates the stale Jobs: ours by label, owned by an earlier owner Job, and
 * suspended, so that they cost the cluster no pod.
 */
async function createStaleJobs(cluster: Cluster, ownerUid: string): Promise<void> {
  const client = adminClient(cluster);
  try {
    let next = 0;
    const worker = async () => {
      while (next < STALE) {
        const name = `storm-stale-${String(next++).padStart(4, "0")}`;
        const res = await fetch(`${cluster.server}/apis/batch/v1/namespaces/${STORM_NS}/jobs`, {
          client,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            apiVersion: "batch/v1",
            kind: "Job",
            metadata: {
              name,
              labels: { "job-dispatcher/owner": "storm" },
              ownerReferences: [{
                apiVersion: "batch/v1",
                kind: "Job",
                name: "hook-old",
                uid: ownerUid,
              }],
            },
            spec: {
              suspend: true,
              template: {
                spec: {
                  restartPolicy: "Never",
                  containers: [{ name: "work", image: "registry.invalid/work:1" }],
                },
              },
            },
          }),
        });
        const body = await res.text();
        assert.equal(res.status, 201, `create job ${name}: ${body}`);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
  } finally {
    client.close();
  }
}
