/**
 * A control plane's bad day, the client's share of it, on the real control
 * plane:
 *
 * 1. Runs of the chart's hook stopped with per-node Jobs in flight, one by
 *    SIGTERM, one by SIGKILL, and no dispatcher left: `helm upgrade` with the
 *    chart's defaults succeeds with no manual step (no finalizer anywhere; a
 *    hook Job per revision, so Helm deletes no earlier owner), the next run
 *    deletes the earlier hook Jobs once their runs are over, and an
 *    independent watcher sees no per-node Job deleted while it ran.
 * 2. `helm uninstall` and `helm install` of the same name while the old
 *    rollout's Jobs run (Helm keeps hook Jobs; revisions start again at 1):
 *    the new hook Job takes another name, the old one is kept until the
 *    next run finds its run over, and no per-node Job is deleted mid-run.
 * 3. `helm upgrade` with a changed image mid-rollout, then the earlier
 *    revision's hook pod deleted: the Job controller retries it, and the
 *    retry reads its own revision's template (a ConfigMap per revision), so
 *    it adopts what its first pod started; an independent watcher counts at
 *    most two Jobs per node, one per revision.
 * 4. 2,000 stale Jobs of an earlier owner: every one is deleted, yet the
 *    dispatcher's requests in flight (kube-apiserver's audit log) never
 *    exceed `--kube-api-concurrency`, over a handful of TCP connections
 *    (a counting proxy).
 * 5. The migration: an owner left with the finalizer of an earlier version
 *    (its run stopped, the owner deleted as Helm did) is released by the
 *    next run once its per-node Jobs have finished.
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
  tempDir,
  tempFile,
} from "./_fixtures.ts";
import { FaultProxy } from "./_proxy.ts";

const NS = "e2e-upgrade";
const STORM_NS = "e2e-storm";
const REINSTALL_NS = "e2e-reinstall";
const RETRY_NS = "e2e-hook-retry";
const RELEASE = "rollout";
const FULLNAME = `${RELEASE}-job-dispatcher`;
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

/**
 * The chart's values: `hookSecs` is how long kwok runs the hook pod; `image`
 * the per-node task's, `taskSecs` how long kwok runs it.
 */
async function values(hookSecs: number, image = "registry.invalid/work:1", taskSecs = 10) {
  const template = parse(jobTemplate("node-task", `${taskSecs}s`));
  template.spec.template.spec.containers[0].image = image;
  return await tempFile(stringify({
    image: { repository: "registry.invalid/job-dispatcher", tag: "e2e" },
    jobTemplate: template,
    selection: { nodeSelectors: [`${SUITE}=upgrade`] },
    parallelism: 2,
    logFormat: "text",
    progressIntervalSecs: 2,
    podAnnotations: { "e2e.job-dispatcher.io/duration": `${hookSecs}s` },
  }));
}

/**
 * Marks a hook pod Succeeded, as its kubelet would once its dispatcher (run
 * here, not by kwok) exited 0: the Job controller then completes its Job.
 */
async function podSucceeded(cluster: Cluster, ns: string, pod: string): Promise<void> {
  const r = await cluster.kubectl([
    ...["patch", "pod", pod, "-n", ns, "--subresource=status", "--type=merge", "-p"],
    JSON.stringify({ status: { phase: "Succeeded" } }),
  ]);
  assert.equal(r.code, 0, r.stderr);
}

/** The nodes a dispatcher's log says it created (or replaced) a Job for, in order. */
function createdFor(stderr: string): string[] {
  return [...stderr.matchAll(/(?:created|replaced) job \S+ for node (\S+)/g)].map((m) => m[1]);
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

/**
 * Starts the dispatcher of the release's current hook in `ns`, as kwok
 * cannot run it: its name, arguments and ServiceAccount, the template from
 * the ConfigMap its pod mounts. Adds it to `runs`, for the caller to kill.
 */
async function startHookRun(
  cluster: Cluster,
  helm: (args: string[]) => Promise<string>,
  ns: string,
  runs: DispatcherProcess[],
): Promise<{ run: DispatcherProcess; name: string; uid: string }> {
  const hook = find(objects(await helm(["get", "hooks", RELEASE, "-n", ns])), "Job");
  const live = (await kubectlJson(cluster, ["get", "job", hook.metadata.name, "-n", ns]))!;
  return { run: await startPodRun(cluster, ns, live.spec.template.spec, runs), ...named(live) };
}

function named(job: Obj): { name: string; uid: string } {
  return { name: job.metadata.name as string, uid: job.metadata.uid as string };
}

/**
 * Starts the dispatcher a hook pod of `spec` runs, as its kubelet would: its
 * arguments, its ServiceAccount, and the template file from the ConfigMap
 * its "job-template" volume names, as that ConfigMap is now.
 */
async function startPodRun(
  cluster: Cluster,
  ns: string,
  // deno-lint-ignore no-explicit-any
  spec: any,
  runs: DispatcherProcess[],
): Promise<DispatcherProcess> {
  const volume = spec.volumes.find((v: Obj) => v.name === "job-template");
  const cm = await kubectlJson(cluster, ["get", "configmap", volume.configMap.name, "-n", ns]);
  assert.ok(cm, `the hook pod's ConfigMap ${volume.configMap.name} exists`);
  const template = await tempFile(cm.data["job.yaml"]);
  const args: string[] = spec.containers[0].args;
  const run = new DispatcherProcess(
    cluster,
    args.map((a) => a.startsWith("--job-template=") ? `--job-template=${template}` : a),
    { kubeconfig: await serviceAccountKubeconfig(cluster, ns, FULLNAME), timeoutMs: 240_000 },
  );
  runs.push(run);
  return run;
}

clusterTest(
  "upgrade and storm: helm upgrade mid-rollout kills nothing; 2,000 stale Jobs stay bounded",
  async (t, cluster) => {
    await cluster.createNodes([...suiteNodes("upgrade", 4), ...suiteNodes("storm", 4)]);

    await t.step(
      "after runs stopped by SIGTERM and by SIGKILL with Jobs in flight, and no dispatcher, helm upgrade succeeds; no per-node Job deleted while it ran",
      async () => {
        const home = await tempDir("helm-");
        const helm = helmRunner(home, cluster.kubeconfig);
        const upgrade = helmResult(home, cluster.kubeconfig);
        await namespace(cluster, NS);
        // The chart's defaults, but for the image, the template and the selection.
        const file = await values(1);
        const watcher = await JobWatcher.start(cluster, NS);
        const runs: DispatcherProcess[] = [];
        const hookRun = () => startHookRun(cluster, helm, NS, runs);
        /** The per-node Jobs not finished, and whether any Job carries a finalizer. */
        const state = async () => {
          const items = (await kubectlJson(cluster, ["get", "jobs", "-n", NS]))!.items as Obj[];
          return {
            inFlight: (await jobsIn(cluster, NS)).filter((j) => j.node && !j.complete && !j.failed),
            finalizers: items.flatMap((j) => j.metadata.finalizers ?? []),
          };
        };
        /** `helm upgrade` with the chart's defaults; asserts it succeeded, returns its seconds. */
        const upgradeOk = async (what: string) => {
          const started = Date.now();
          const r = await upgrade([
            "upgrade",
            RELEASE,
            CHART,
            "-n",
            NS,
            "-f",
            file,
            "--timeout",
            "90s",
          ]);
          const secs = (Date.now() - started) / 1000;
          assert.equal(r.code, 0, `helm upgrade ${what}: ${r.stderr}`);
          log(`helm upgrade ${what}: succeeded in ${secs.toFixed(1)} s`);
          return secs;
        };
        try {
          await helm(["install", RELEASE, CHART, "-n", NS, "-f", file, "--timeout", "2m"]);
          const first = await hookRun();
          assert.ok(
            await first.run.waitFor(atLeast(2, /created job \S+ for node/)),
            first.run.stderr,
          );
          first.run.kill("SIGTERM");
          assert.equal((await first.run.ended).code, 143);
          let now = await state();
          assert.ok(now.inFlight.length >= 1, "the SIGTERMed run left Jobs in flight");
          assert.deepEqual(now.finalizers, [], "no finalizer on any Job");
          log(`${first.name}: SIGTERM with ${now.inFlight.length} per-node Jobs in flight`);

          // No dispatcher alive, Jobs in flight: Helm deletes and waits for nothing.
          await upgradeOk("after the SIGTERM, Jobs in flight");
          const second = await hookRun();
          assert.notEqual(second.name, first.name, "one hook Job per revision");
          assert.ok(await second.run.waitFor(/created job \S+ for node/), second.run.stderr);
          second.run.kill("SIGKILL");
          assert.equal((await second.run.ended).code, 137);
          now = await state();
          assert.ok(now.inFlight.length >= 1, "the SIGKILLed run left Jobs in flight");
          assert.deepEqual(now.finalizers, []);
          log(`${second.name}: SIGKILL with ${now.inFlight.length} per-node Jobs in flight`);

          await eventually(
            async () => (await state()).inFlight.length === 0,
            120_000,
            "the stopped runs' per-node Jobs to finish",
          );
          const secs = await upgradeOk("once those Jobs finished");
          assert.ok(secs < 60, `${secs} s`);

          // The next run rolls out, then deletes the earlier hook Jobs: their runs
          // are over and none of their per-node Jobs is active.
          const third = await hookRun();
          const ended = await third.run.ended;
          assert.equal(ended.code, 0, ended.stderr);
          assert.match(ended.stderr, /summary: 4 succeeded, 0 failed of 4/);
          for (const earlier of [first.name, second.name]) {
            assert.match(ended.stderr, new RegExp(`deleted earlier hook job ${earlier}:`));
          }
          assert.doesNotMatch(ended.stderr, /finalizer/);
          await eventually(
            async () => {
              const jobs = await jobsIn(cluster, NS);
              return jobs.filter((j) => !j.node).map((j) => j.name).join() === third.name &&
                jobs.filter((j) => j.node).length === 4;
            },
            60_000,
            "only the last hook Job and its 4 per-node Jobs to remain",
          );
        } finally {
          for (const r of runs) r.kill("SIGKILL");
          await watcher.stop();
        }
        assert.ok(watcher.seen.size >= 4, "the watcher saw the per-node Jobs");
        assert.deepEqual(watcher.deletedUnfinished, [], "no per-node Job deleted while it ran");
      },
    );

    await t.step(
      "helm uninstall and install again while the old rollout's Jobs run: the new hook takes another name, no per-node Job is deleted",
      async () => {
        const home = await tempDir("helm-");
        const helm = helmRunner(home, cluster.kubeconfig);
        await namespace(cluster, REINSTALL_NS);
        const file = await values(1);
        const install = [
          "install",
          RELEASE,
          CHART,
          "-n",
          REINSTALL_NS,
          "-f",
          file,
          "--timeout",
          "2m",
        ];
        const watcher = await JobWatcher.start(cluster, REINSTALL_NS);
        const runs: DispatcherProcess[] = [];
        try {
          await helm(install);
          const first = await startHookRun(cluster, helm, REINSTALL_NS, runs);
          assert.ok(
            await first.run.waitFor(atLeast(2, /created job \S+ for node/)),
            first.run.stderr,
          );
          first.run.kill("SIGTERM");
          assert.equal((await first.run.ended).code, 143);
          await helm(["uninstall", RELEASE, "-n", REINSTALL_NS, "--timeout", "1m"]);
          const running = (await jobsIn(cluster, REINSTALL_NS)).filter((j) =>
            j.node && !j.complete && !j.failed
          );
          assert.ok(running.length >= 1, "the old rollout's Jobs still run after the uninstall");

          // Revisions start again at 1: a hook named -r1 again would be
          // deleted by before-hook-creation, its running Jobs with it.
          await helm(install);
          const second = await startHookRun(cluster, helm, REINSTALL_NS, runs);
          const old = await kubectlJson(cluster, ["get", "job", first.name, "-n", REINSTALL_NS]);
          assert.equal(old?.metadata.uid, first.uid, "the earlier install's hook Job is kept");
          assert.match(second.name, new RegExp(`^${FULLNAME}-r1-\\d+$`));
          log(`${second.name} after a reinstall; ${running.length} Jobs of ${first.name} ran on`);
          const ended = await second.run.ended;
          assert.equal(ended.code, 0, ended.stderr);
          assert.match(ended.stderr, /summary: 4 succeeded, 0 failed of 4/);
          assert.match(ended.stderr, new RegExp(`deleted earlier hook job ${first.name}:`));
        } finally {
          for (const r of runs) r.kill("SIGKILL");
          await watcher.stop();
        }
        assert.deepEqual(watcher.deletedUnfinished, [], "no per-node Job deleted while it ran");
      },
    );

    await t.step(
      "helm upgrade with a changed image, then the earlier hook's pod deleted mid-rollout: its retry reads its own template, no node gets more than the two revisions' Jobs",
      async () => {
        const home = await tempDir("helm-");
        const helm = helmRunner(home, cluster.kubeconfig);
        const helmTry = helmResult(home, cluster.kubeconfig);
        await namespace(cluster, RETRY_NS);
        // kwok runs each hook pod until it is deleted; helm stops waiting for
        // it at --timeout (the revision is marked failed, its hook Job kept).
        const timeout = ["--timeout", "5s"];
        const before = await values(3600, "registry.invalid/work:1", 6);
        const after = await values(3600, "registry.invalid/work:2", 6);
        const watcher = await JobWatcher.start(cluster, RETRY_NS);
        const runs: DispatcherProcess[] = [];
        const hookPods = async (job: string) =>
          ((await kubectlJson(cluster, ["get", "pods", "-n", RETRY_NS, "-l", `job-name=${job}`]))!
            .items as Obj[]).filter((p) => !p.metadata.deletionTimestamp);
        try {
          await helmTry(["install", RELEASE, CHART, "-n", RETRY_NS, "-f", before, ...timeout]);
          const first = await startHookRun(cluster, helm, RETRY_NS, runs);
          assert.ok(
            await first.run.waitFor(atLeast(2, /created job \S+ for node/)),
            first.run.stderr,
          );
          // The revision fails on the 5 s --timeout; its hook Job is created all the same.
          await helmTry(["upgrade", RELEASE, CHART, "-n", RETRY_NS, "-f", after, ...timeout]);

          // The earlier hook's pod goes (a node drain, an OOM kill), its
          // dispatcher with it: the Job controller starts another pod.
          const [pod] = await hookPods(first.name);
          assert.ok(pod, `a pod of ${first.name}`);
          const del = await cluster.kubectl(["delete", "pod", pod.metadata.name, "-n", RETRY_NS]);
          assert.equal(del.code, 0, del.stderr);
          first.run.kill("SIGKILL");
          await first.run.ended;
          const started = createdFor(first.run.stderr);
          log(`${first.name}: started ${started.join(", ")} before its pod went`);
          let retryPod: Obj | undefined;
          await eventually(
            async () => !!(retryPod = (await hookPods(first.name))[0]),
            120_000,
            `the Job controller to retry ${first.name}`,
          );
          assert.notEqual(retryPod!.metadata.uid, pod.metadata.uid);
          const retry = await startPodRun(cluster, RETRY_NS, retryPod!.spec, runs);
          const retried = await retry.ended;
          assert.equal(retried.code, 0, retried.stderr);
          // Its dispatcher exited 0, so does the pod, as its kubelet reports.
          await podSucceeded(cluster, RETRY_NS, retryPod!.metadata.name);
          const rerun = createdFor(retried.stderr).filter((n) => started.includes(n));
          log(`${first.name} retried: created Jobs for ${createdFor(retried.stderr).join(", ")}`);
          assert.deepEqual(rerun, [], "the retry runs no node its first pod started again");

          const second = await startHookRun(cluster, helm, RETRY_NS, runs);
          assert.notEqual(second.name, first.name);
          const ended = await second.run.ended;
          assert.equal(ended.code, 0, ended.stderr);
          assert.match(ended.stderr, /summary: 4 succeeded, 0 failed of 4/);

          // One template per revision must not mean one kept forever (etcd
          // grows by a template per upgrade): each hook Job owns its own, so
          // the collector deletes it with the Job the later run swept.
          const template = (job: string) =>
            kubectlJson(cluster, ["get", "configmap", `${job}-job-template`, "-n", RETRY_NS]);
          assert.match(ended.stderr, new RegExp(`deleted earlier hook job ${first.name}`));
          await eventually(
            async () => !await template(first.name),
            60_000,
            `the collector to delete ${first.name}-job-template with its hook Job`,
          );
          const owners = (await template(second.name))?.metadata.ownerReferences ?? [];
          assert.deepEqual(owners.map((r: Obj) => [r.kind, r.name, r.uid]), [
            ["Job", second.name, second.uid],
          ]);
        } finally {
          for (const r of runs) r.kill("SIGKILL");
          await watcher.stop();
        }
        const perNode = new Map<string, number>();
        for (const node of watcher.seen.values()) perNode.set(node, (perNode.get(node) ?? 0) + 1);
        log(`Jobs per node: ${JSON.stringify(Object.fromEntries(perNode))}`);
        assert.equal(perNode.size, 4);
        for (const [node, jobs] of perNode) {
          assert.ok(jobs <= 2, `${node}: ${jobs} Jobs, one per revision at most`);
        }
        assert.deepEqual(watcher.deletedUnfinished, [], "no per-node Job deleted while it ran");
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
      "migration: an owner left with the finalizer of an earlier version is released once its Jobs finished",
      async () => {
        const ns = await namespace(cluster, "e2e-sigterm");
        await ownerJob(cluster, ns, "hook-a");
        await ownerJob(cluster, ns, "hook-b");
        // What earlier versions put on the owner before the first create.
        const held = await cluster.kubectl([
          "patch",
          "job",
          "hook-a",
          "-n",
          ns,
          "--type=merge",
          "-p",
          JSON.stringify({ metadata: { finalizers: [GUARD], labels: { [GUARD]: "true" } } }),
        ]);
        assert.equal(held.code, 0, held.stderr);
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
        // Deleted as earlier Helm versions' before-hook-creation deleted the fixed-name hook.
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
        assert.match(
          second.stderr,
          new RegExp(`removed finalizer ${GUARD} of an earlier version from owner job hook-a`),
        );
        await eventually(async () => !(await ownerA()), 30_000, "hook-a to be gone");
        const b = (await kubectlJson(cluster, ["get", "job", "hook-b", "-n", ns]))!;
        assert.equal(b.metadata.finalizers, undefined, "no finalizer added");
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
