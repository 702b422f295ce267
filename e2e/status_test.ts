/**
 * `job-dispatcher status` on the real control plane (issue 19 §1–2): run
 * with a read-only ServiceAccount's kubeconfig (the chart's viewer rules),
 * it agrees with the cluster while a paused run holds, with the run's
 * `--report` after it, says so when the run was killed with SIGKILL, and
 * refuses bad input with one line and the right exit code.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { V1ConfigMap } from "@kubernetes/client-node";
import { trackingKeys } from "../job.ts";
import { ApiError, Kube } from "../kube/client.ts";
import {
  decodeRecord,
  encodeRecord,
  RECORD_VERSION,
  recordConfigMap,
  recordPath,
  type RunRecord,
} from "../report/record.ts";
import { RecordStore, SupersededError } from "../report/record_store.ts";
import type { Cluster } from "./cluster.ts";
import { OUTCOME_LABEL } from "./cluster.ts";
import { dispatcherCommand, eventually, jobTemplate } from "./_dispatcher.ts";
import { ensureChromium, openPage } from "./_chromium.ts";
import { atLeast, DispatcherProcess, runDispatcher } from "./_faults.ts";
import { freePorts } from "./_procs.ts";
import {
  clusterTest,
  namespace,
  ownerJob,
  serviceAccount,
  suiteArgs,
  suiteNodes,
  tempFile,
} from "./_fixtures.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** The viewer rules of the chart (chart/templates/viewer-rbac.yaml), with `jobs` optional. */
function viewerRbac(ns: string, name: string, jobs = true): string {
  const id = `e2e-viewer-${ns}-${name}`;
  const subject = `subjects: [{kind: ServiceAccount, name: ${name}, namespace: ${ns}}]`;
  return `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ${id}, namespace: ${ns}}
rules:
  - {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
${jobs ? "  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, watch]}\n" : ""}---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ${id}, namespace: ${ns}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${id}}
${subject}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ${id}}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ${id}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${id}}
${subject}
`;
}

/** A read-only ServiceAccount's kubeconfig: the viewer rules, nothing else. */
async function viewer(cluster: Cluster, ns: string, name: string, jobs = true): Promise<string> {
  const { kubeconfig, user } = await serviceAccount(cluster, ns, name, { rbac: false });
  const applied = await cluster.kubectl(["apply", "-f", "-"], viewerRbac(ns, name, jobs));
  assert.equal(applied.code, 0, applied.stderr);
  await eventually(
    async () =>
      (await cluster.kubectl(["auth", "can-i", "list", "configmaps", "-n", ns, "--as", user]))
        .stdout.trim() === "yes",
    30_000,
    `viewer RBAC for ${user}`,
  );
  return kubeconfig;
}

/** `job-dispatcher status …` with `kubeconfig`. */
function status(cluster: Cluster, kubeconfig: string, args: string[]) {
  return runDispatcher(cluster, ["status", ...args], { kubeconfig, timeoutMs: 60_000 });
}

// deno-lint-ignore no-explicit-any
type Json = any;

async function statusJson(cluster: Cluster, kubeconfig: string, args: string[]): Promise<Json> {
  const r = await status(cluster, kubeconfig, [...args, "-o", "json"]);
  assert.ok(r.code === 0 || r.code === 1, `status exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The Jobs of a namespace, by what their conditions say. */
async function jobConditions(cluster: Cluster, ns: string) {
  const r = await cluster.kubectl(["get", "jobs", "-n", ns, "-o", "json"]);
  const items: Json[] = JSON.parse(r.stdout).items;
  const on = (j: Json, t: string) =>
    (j.status?.conditions ?? []).some((c: Json) => c.type === t && c.status === "True");
  return {
    complete: items.filter((j) => on(j, "Complete")).length,
    failed: items.filter((j) => on(j, "Failed")).length,
    nodes: new Set(items.map((j) => j.metadata.annotations["job-dispatcher/node-name"])),
  };
}

clusterTest("job-dispatcher status reads a rollout from the cluster alone", async (t, cluster) => {
  await t.step(
    "a paused run of 6 nodes: status -o json as a read-only viewer agrees with the cluster; after the run, with its --report",
    async () => {
      const ns = await namespace(cluster, "sts");
      await cluster.createNodes([
        ...suiteNodes("sts", 1),
        ...suiteNodes("sts", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 1),
        ...suiteNodes("sts", 1, { labels: { [OUTCOME_LABEL]: "stall" } }, 2),
        ...suiteNodes("sts", 3, {}, 3),
      ]);
      await ownerJob(cluster, ns, "sts-hook");
      const kubeconfig = await viewer(cluster, ns, "sts-viewer");
      const dir = await Deno.makeTempDir();
      const pause = `${dir}/pause`, report = `${dir}/report.json`;
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("sts", ns, "6s"),
        ...["--owner-job-name", "sts-hook", "--parallelism", "3", "--pause-file", pause],
        ...["--stall-warn-secs", "2", "--progress-interval-secs", "1", "--node-timeout-secs", "30"],
        ...["--report", report],
      ], { timeoutMs: 150_000 });
      assert.ok(await p.waitFor(atLeast(3, /created job/)), p.stderr);
      // Every slot holds a 6 s Job: nothing starts before the pause is seen.
      await Deno.writeTextFile(pause, "");
      let s: Json;
      await eventually(
        async () => {
          s = await statusJson(cluster, kubeconfig, ["-n", ns, "--owner-job-name", "sts-hook"]);
          return s.run.paused !== null && s.counts.succeeded === 1 && s.counts.failed === 1 &&
            s.nodes.some((n: Json) => n.node === "sts-002" && n.stalled);
        },
        60_000,
        "status to show the paused run with one failed and one stalled node",
      );
      const jobs = await jobConditions(cluster, ns);
      assert.equal(s.run.state, "running");
      assert.match(s.run.paused, /^file .*pause$/);
      assert.equal(s.counts.succeeded, jobs.complete, "succeeded = Complete Jobs");
      assert.equal(s.counts.failed, jobs.failed, "failed = Failed Jobs");
      const withoutJob = s.nodes.filter((n: Json) => !jobs.nodes.has(n.node)).length;
      assert.equal(s.counts.queued, withoutJob, "queued = nodes without a Job");
      assert.equal(withoutJob, 3);
      assert.equal(s.total, 6);
      assert.match(
        s.nodes.find((n: Json) => n.node === "sts-001").reason,
        /simulated failure on sts-001/,
      );
      const text = await status(cluster, kubeconfig, ["-n", ns, "--name-prefix", "sts"]);
      assert.match(text.stdout, /^paused by file .*pause$/m, text.stdout);
      assert.match(text.stdout, /^sts-002 +running .*stalled: /m, text.stdout);
      // No ETA for a paused run: the rate measured while it ran says nothing of the pause.
      assert.match(text.stdout, /; ETA none \(paused\)$/m, text.stdout);
      assert.equal(s.run.etaSecs, null);
      assert.equal(text.code, 1, "a failed node: status exits 1");

      await Deno.remove(pause);
      const end = await p.ended;
      assert.equal(end.code, 1, end.stderr);
      const r = JSON.parse(await Deno.readTextFile(report)).summary;
      const after = await statusJson(cluster, kubeconfig, ["-n", ns, "--name-prefix", "sts"]);
      assert.equal(after.run.state, "finished");
      assert.equal(after.counts.succeeded, r.succeeded);
      assert.equal(after.counts.failed, r.failed);
      assert.equal(after.total, r.total);
      assert.deepEqual([r.succeeded, r.failed], [4, 2]);
    },
  );

  await t.step(
    "a run soaking between waves: status says the wave and the soak left, in text, -o wide and -o json",
    async () => {
      const ns = await namespace(cluster, "stsoak");
      await cluster.createNodes(suiteNodes("stsoak", 2));
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("stsoak", ns, "1s"),
        ...["--canary", "1", "--wave-soak-secs", "60"],
      ], { timeoutMs: 120_000 });
      try {
        assert.ok(await p.waitFor(/wave 1 of 2 ended \(1 node\); soaking 60 s/), p.stderr);
        let s: Json;
        const args = ["-n", ns, "--name-prefix", "stsoak"];
        await eventually(
          async () => {
            s = await statusJson(cluster, cluster.kubeconfig, args);
            return s.run.wave?.stage === "soaking";
          },
          60_000,
          "status -o json to show the canary soaking",
        );
        assert.equal(s.run.wave.wave, 1);
        assert.equal(s.run.wave.waves, 2);
        assert.ok(s.run.wave.soakLeftSecs > 0 && s.run.wave.soakLeftSecs <= 60, s.run.wave);
        for (const o of [[], ["-o", "wide"]]) {
          const text = await status(cluster, cluster.kubeconfig, [...args, ...o]);
          assert.match(
            text.stdout,
            /^wave: 1 of 2, soaking: \d+s left before wave 2$/m,
            text.stdout,
          );
        }
      } finally {
        p.kill("SIGTERM");
        await p.ended;
      }
    },
  );

  await t.step(
    "status after a SIGKILL says the run is gone and what a re-run would do",
    async () => {
      const ns = await namespace(cluster, "stk");
      await cluster.createNodes(suiteNodes("stk", 4));
      const kubeconfig = await viewer(cluster, ns, "stk-viewer");
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("stk", ns, "300s"),
        ...["--parallelism", "2", "--progress-interval-secs", "1"],
      ], { timeoutMs: 120_000 });
      const args = ["-n", ns, "--name-prefix", "stk"];
      await eventually(
        async () =>
          (await cluster.kubectl(["get", "cm", "run-record.stk", "-n", ns])).code === 0 &&
          (await statusJson(cluster, kubeconfig, args)).counts.running === 2,
        60_000,
        "the record with two Jobs running",
      );
      p.kill("SIGKILL");
      await p.ended;
      const live = await statusJson(cluster, kubeconfig, args);
      assert.equal(live.run.state, "running", "just killed: the record is still fresh");
      let text = "";
      await eventually(
        async () => /gone: /.test(text = (await status(cluster, kubeconfig, args)).stdout),
        90_000,
        "status to say the run is gone",
      );
      assert.match(
        text,
        /^run stk in stk: gone: its record was last written \d+s ago while it ran/m,
      );
      assert.match(
        text,
        /a re-run would adopt 2 running Jobs, count 0 finished ones and start 2 nodes/,
      );
      const r = await status(cluster, kubeconfig, args);
      assert.equal(r.code, 1, "a dead run with nodes left is not a success");
    },
  );

  await t.step(
    "a run SIGKILLed while a node is in its verification: status shows it finishing, cordoned, and --require-ended exits 1",
    async () => {
      const ns = await namespace(cluster, "stv");
      await cluster.createNodes(suiteNodes("stv", 1));
      const kubeconfig = await viewer(cluster, ns, "stv-viewer");
      // No pod matches: the verification waits its 600 s, the node cordoned.
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("stv", ns, "1s"),
        ...["--cordon", "--verify-pod-selector", "app=stv-never", "--verify-timeout-secs", "600"],
        ...["--progress-interval-secs", "1"],
      ], { timeoutMs: 120_000 });
      const args = ["-n", ns, "--name-prefix", "stv"];
      await eventually(
        async () =>
          (await cluster.kubectl(["get", "cm", "run-record.stv", "-n", ns])).code === 0 &&
          (await statusJson(cluster, kubeconfig, args)).counts.finishing === 1,
        60_000,
        "the record with the node finishing (in its verification)",
      );
      p.kill("SIGKILL");
      await p.ended;
      const jobs = await jobConditions(cluster, ns);
      assert.equal(jobs.complete, 1, "its Job is Complete");
      let text = "";
      await eventually(
        async () => /gone: /.test(text = (await status(cluster, kubeconfig, args)).stdout),
        90_000,
        "status to say the run is gone",
      );
      assert.match(text, /^stv-000 +finishing .*its post-success work never ended/m, text);
      const s = await statusJson(cluster, kubeconfig, args);
      assert.deepEqual(s.counts, { finishing: 1 });
      assert.equal(s.nodes[0].jobStatus, "Complete");
      assert.equal(s.nodes[0].cordoned, "ours", "the uncordon never ran");
      assert.equal((await status(cluster, kubeconfig, args)).code, 1);
      const helmTest = await status(cluster, kubeconfig, [...args, "--require-ended"]);
      assert.equal(helmTest.code, 1, "helm test's status fails on it");
    },
  );

  await t.step(
    "a run SIGKILLed after its node's smoke test passed and its TTL removed it: status shows the node finishing, and the re-run takes the verdict kept on the node, no second smoke test",
    async () => {
      const ns = await namespace(cluster, "stw");
      await cluster.createNodes(suiteNodes("stw", 1));
      const kubeconfig = await viewer(cluster, ns, "stw-viewer");
      const smoke = await tempFile(
        jobTemplate("smoke", "1s").replace(
          "spec:\n  backoffLimit",
          // Two polls of the verifier (2 s): a shorter TTL may remove it unseen.
          "spec:\n  ttlSecondsAfterFinished: 5\n  backoffLimit",
        ),
      );
      const args = [
        ...await suiteArgs("stw", ns, "1s"),
        ...["--verify-job-template", smoke, "--progress-interval-secs", "1"],
      ];
      // --post-node-delay-secs holds the node finishing after its verification.
      const p = new DispatcherProcess(cluster, [...args, "--post-node-delay-secs", "300"], {
        timeoutMs: 240_000,
      });
      const verdict = async () =>
        (await cluster.kubectl([
          "get",
          "node",
          "stw-000",
          "-o",
          "jsonpath={.metadata.annotations.job-dispatcher/verified-job\\.stw-verify-stw-000}",
        ])).stdout.trim();
      let kept = "";
      await eventually(
        async () =>
          (kept = await verdict()) !== "" &&
          (await cluster.kubectl(["get", "job", "stw-verify-stw-000", "-n", ns])).code !== 0,
        // The TTL controller's deletion may lag on a loaded machine.
        120_000,
        "the smoke test's verdict kept on the node, its Job removed by its TTL",
      ).catch((e) => {
        console.error(p.stderr);
        throw e;
      });
      assert.equal(JSON.parse(kept).job, "stw-verify-stw-000");
      assert.equal(JSON.parse(kept).failed, undefined, "it passed");
      await eventually(
        async () =>
          (await cluster.kubectl(["get", "cm", "run-record.stw", "-n", ns])).code === 0 &&
          (await statusJson(cluster, kubeconfig, ["-n", ns, "--name-prefix", "stw"])).counts
              .finishing === 1,
        60_000,
        "the record with the node finishing",
      );
      p.kill("SIGKILL");
      await p.ended;
      const again = await runDispatcher(cluster, args, { timeoutMs: 120_000 });
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /succeeded/);
      assert.equal(
        await verdict(),
        kept,
        "the verdict was read, not written again by a new smoke test",
      );
    },
  );

  await t.step("bad input: one line and the exit code", async () => {
    const ns = await namespace(cluster, "stb");
    const kubeconfig = await viewer(cluster, ns, "stb-viewer");
    const blind = await viewer(cluster, ns, "stb-blind", false);
    const cases: [string, string, string[], number, RegExp][] = [
      [
        "no prefix or owner",
        kubeconfig,
        ["-n", ns],
        2,
        /Missing --name-prefix or --owner-job-name/,
      ],
      [
        "a run that never existed",
        kubeconfig,
        ["-n", ns, "--name-prefix", "nope"],
        2,
        /No run of prefix nope in namespace stb/,
      ],
      [
        "an owner that does not exist",
        kubeconfig,
        ["-n", ns, "--owner-job-name", "nope"],
        2,
        /Invalid --owner-job-name nope: no such Job/,
      ],
      [
        "a kubeconfig that cannot list Jobs",
        blind,
        ["-n", ns, "--name-prefix", "x"],
        3,
        /forbidden: grant the verb "list" on "jobs"/,
      ],
      [
        "an unknown flag",
        kubeconfig,
        ["--name-prefx", "x"],
        2,
        /Unknown flag --name-prefx: did you mean --name-prefix\?/,
      ],
    ];
    for (const [what, kc, args, code, line] of cases) {
      const r = await status(cluster, kc, args);
      const lines = r.stderr.trim().split("\n");
      assert.equal(r.code, code, `${what}: ${r.stderr}`);
      assert.equal(lines.length, 1, `${what}: one line: ${r.stderr}`);
      assert.match(lines[0], line, what);
      assert.equal(r.stdout, "", what);
    }
  });
});

// --metrics-addr is scraped by the real Prometheus in e2e/gates_test.ts, beside its cluster's.
clusterTest("--report-format html and the kubectl plugin on a run", async (t, cluster) => {
  await t.step(
    "--report-format html of a run in waves with a soak and a pause: headless Chromium renders one row per node, no console error, no request",
    async () => {
      const bin = await ensureChromium();
      assert.ok(bin, "Debian's chromium: apt-get update && apt-get install -y chromium");
      const ns = await namespace(cluster, "sth");
      await cluster.createNodes([
        ...suiteNodes("sth", 2),
        ...suiteNodes("sth", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 2),
        ...suiteNodes("sth", 3, {}, 3),
      ]);
      const dir = await Deno.makeTempDir();
      const pause = `${dir}/pause`;
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("sth", ns, "2s"),
        ...["--parallelism", "2", "--cordon", "--waves", "2,100%", "--wave-soak-secs", "3"],
        ...["--pause-file", pause, "--report", `${dir}/t.html`, "--report-format", "html"],
      ], { timeoutMs: 120_000 });
      // Wave 2 opens with two Jobs; a pause of 3 s holds the other two.
      assert.ok(await p.waitFor(/wave 2 of 2 opens/), p.stderr);
      await Deno.writeTextFile(pause, "");
      await new Promise((r) => setTimeout(r, 3000));
      await Deno.remove(pause);
      const r = await p.ended;
      assert.equal(r.code, 1, r.stderr);
      const page = await openPage(
        bin,
        `${dir}/t.html`,
        "(() => { const d = JSON.parse(document.getElementById('data').textContent); " +
          "return { rows: document.body.dataset.rows, drawn: document.body.dataset.drawn, " +
          "title: document.querySelector('h1').textContent, waves: d.waves.length, " +
          "soaks: d.soaks.length, pauses: d.pauses.length }; })()",
      );
      assert.deepEqual(page.errors, [], "no console error");
      assert.deepEqual(page.requests, [], "no network request");
      assert.deepEqual(page.value, {
        rows: "6",
        drawn: "6",
        title: (page.value as Json).title,
        waves: 2,
        soaks: 1,
        pauses: 1,
      });
      assert.match((page.value as Json).title, /^sth\/sth: 6 nodes in \d+s/);
      await Deno.writeFile(new URL("./testdata/timeline.png", import.meta.url), page.png);
    },
  );

  await t.step(
    "SIGTERM while --metrics-linger-secs serves the final state: the wait ends at once, the exit code stays the run's",
    async () => {
      const ns = await namespace(cluster, "stl");
      await cluster.createNodes(suiteNodes("stl", 1));
      // A port no Prometheus scrapes: the linger would wait its 300 s.
      const [port] = freePorts(1);
      const p = new DispatcherProcess(cluster, [
        ...await suiteArgs("stl", ns, "1s"),
        ...["--metrics-addr", `127.0.0.1:${port}`, "--metrics-linger-secs", "300"],
      ], { timeoutMs: 120_000 });
      assert.ok(await p.waitFor(/metrics: serving the final state/), p.stderr);
      const signalled = Date.now();
      p.kill("SIGTERM");
      const r = await p.ended;
      assert.equal(r.code, 0, r.stderr);
      assert.ok(
        Date.now() - signalled < 10_000,
        `ended ${Date.now() - signalled} ms after SIGTERM`,
      );
      assert.match(r.stderr, /SIGTERM: the run has ended; closing \/metrics/);
      assert.match(r.stderr, /metrics: stopped by a signal; the final state was not scraped/);
      assert.doesNotMatch(r.stderr, /creating no more Jobs/, "no rollout was stopped");
    },
  );

  await t.step(
    "kubectl job-dispatcher status … (scripts/kubectl-job_dispatcher on PATH) prints what job-dispatcher status prints",
    async () => {
      const bin = await Deno.makeTempDir();
      // job-dispatcher on PATH: the dispatcher as the suites run it.
      const command = [Deno.execPath(), ...dispatcherCommand()].map((w) => `'${w}'`).join(" ");
      await Deno.writeTextFile(`${bin}/job-dispatcher`, `#!/bin/sh\nexec ${command} "$@"\n`);
      await Deno.chmod(`${bin}/job-dispatcher`, 0o755);
      await Deno.copyFile(`${ROOT}scripts/kubectl-job_dispatcher`, `${bin}/kubectl-job_dispatcher`);
      await Deno.chmod(`${bin}/kubectl-job_dispatcher`, 0o755);
      const args = [
        "status",
        "-n",
        "sth",
        "--name-prefix",
        "sth",
        `--kubeconfig=${cluster.kubeconfig}`,
      ];
      for (const output of [["-o", "json"], ["-o", "wide"]]) {
        const plugin = await new Deno.Command(`${ROOT}e2e/.bin/k8s`, {
          args: ["kubectl", "job-dispatcher", ...args, ...output],
          env: { PATH: `${bin}:${Deno.env.get("PATH")}`, NO_COLOR: "1" },
          cwd: ROOT,
        }).output();
        const direct = await runDispatcher(cluster, [...args, ...output]);
        const text = new TextDecoder();
        assert.equal(plugin.code, direct.code, text.decode(plugin.stderr));
        assert.equal(direct.code, 1, "a node failed in that run");
        // Ages are rounded to the second, and the two ran a moment apart: an
        // age that went from 9s to 10s between them also widens its column.
        const same = (x: string) => x.replace(/\b\d+(h\d+m|m|s)\b/g, "AGE").replace(/ {2,}/g, "  ");
        assert.equal(same(text.decode(plugin.stdout)), same(direct.stdout));
        assert.match(direct.stdout, /sth-002/);
      }
    },
  );

  await t.step(
    "shell completion of --namespace: the cluster's namespaces by one list call; a viewer who may not list them gets nothing, silently",
    async () => {
      const ns = await namespace(cluster, "cpl");
      const admin = await runDispatcher(cluster, ["__complete", "namespaces", "-n", ""]);
      assert.equal(admin.code, 0, admin.stderr);
      const names = admin.stdout.trim().split("\n");
      assert.ok(names.includes("default") && names.includes(ns), admin.stdout);
      const kubeconfig = await viewer(cluster, ns, "cpl-viewer");
      const viewer_ = await runDispatcher(cluster, ["__complete", "namespaces"], { kubeconfig });
      assert.deepEqual([viewer_.code, viewer_.stdout, viewer_.stderr], [0, "", ""]);
      const contexts = await runDispatcher(cluster, ["__complete", "contexts"], { kubeconfig });
      assert.equal(contexts.code, 0, contexts.stderr);
      assert.ok(contexts.stdout.trim().length > 0, "the viewer kubeconfig's context");
    },
  );
});

clusterTest(
  "the run record on the real API server: two writers, and a writer whose clock is off",
  async (t, cluster) => {
    const kube = await Kube.connect({ kubeconfig: cluster.kubeconfig });
    const keys = trackingKeys("job-dispatcher");
    const path = (ns: string, prefix: string) => recordPath(ns, prefix);
    /** The record's ConfigMap as `store` writes it: `state`, written at `updatedAt` by its clock. */
    const cm = async (
      store: RecordStore,
      ns: string,
      prefix: string,
      extra: Partial<RunRecord>,
    ) => {
      const r: RunRecord = {
        version: RECORD_VERSION,
        prefix,
        namespace: ns,
        writer: store.writer,
        state: "running",
        startedAt: Date.now() - 60_000,
        updatedAt: Date.now(),
        heartbeatMs: 20_000,
        parallelism: 1,
        summary: `${store.writer} writes`,
        nodes: [{ node: "n0", phase: "running" }],
        ...extra,
      };
      return recordConfigMap(keys, r, await encodeRecord(r));
    };
    const stored = async (ns: string, prefix: string) => {
      const got = await kube.get<V1ConfigMap>(path(ns, prefix));
      return { cm: got!, record: await decodeRecord(got!.data, got!.binaryData) };
    };
    const store = (ns: string, prefix: string, writer: string, request = kube.request.bind(kube)) =>
      new RecordStore({ namespace: ns, prefix, writer, request });

    await t.step(
      "an evicted run's closing write meets 409 once its replacement claimed the record, and writes no more",
      async () => {
        const ns = await namespace(cluster, "srw");
        const evicted = store(ns, "rw", "evicted"), replacement = store(ns, "rw", "replacement");
        await evicted.write(await cm(evicted, ns, "rw", {}));
        await replacement.write(await cm(replacement, ns, "rw", {}));
        await assert.rejects(
          evicted.write(await cm(evicted, ns, "rw", { state: "stopped" })),
          (e: Error) => e instanceof SupersededError && /writer replacement/.test(e.message),
        );
        const { record } = await stored(ns, "rw");
        assert.equal(record.writer, "replacement");
        assert.equal(record.state, "running");
        await replacement.write(await cm(replacement, ns, "rw", { state: "finished" }));
        assert.equal((await stored(ns, "rw")).record.state, "finished");
      },
    );

    await t.step(
      "a first write that finds no record, and then the one another made meanwhile (409 AlreadyExists), claims it and goes on",
      async () => {
        const ns = await namespace(cluster, "src");
        const other = store(ns, "rc", "other");
        let created = false;
        const late = store(ns, "rc", "late", async (verb, method, p, body) => {
          // Between late's read (404) and its POST, the other writer creates the record.
          if (method === "POST" && !created) {
            created = true;
            await other.write(await cm(other, ns, "rc", {}));
          }
          return await kube.request(verb, method, p, body);
        });
        await late.write(await cm(late, ns, "rc", {}));
        assert.ok(created);
        assert.equal((await stored(ns, "rc")).record.writer, "late");
        await late.write(await cm(late, ns, "rc", { state: "finished" }));
        assert.equal((await stored(ns, "rc")).record.state, "finished");
      },
    );

    await t.step(
      "a first write applied whose answer was lost (an outage) never lands later over its replacement's claim",
      async () => {
        const ns = await namespace(cluster, "slost");
        let lose = true;
        const losing = async <T>(verb: string, method: string, p: string, body?: unknown) => {
          const answer = await kube.request<T>(verb, method, p, body);
          if (method !== "GET" && lose) {
            lose = false;
            throw new ApiError({
              status: 503,
              reason: "ServiceUnavailable",
              verb,
              resource: "configmaps",
              message: "the answer was lost",
            });
          }
          return answer;
        };
        const evicted = store(ns, "lost", "evicted", losing);
        await assert.rejects(evicted.write(await cm(evicted, ns, "lost", {})), ApiError);
        assert.equal((await stored(ns, "lost")).record.writer, "evicted", "it was applied");
        const replacement = store(ns, "lost", "replacement");
        await replacement.write(await cm(replacement, ns, "lost", {}));
        await assert.rejects(
          evicted.write(await cm(evicted, ns, "lost", { state: "stopped" })),
          SupersededError,
        );
        const { record } = await stored(ns, "lost");
        assert.equal(`${record.writer} ${record.state}`, "replacement running");
        await replacement.write(await cm(replacement, ns, "lost", { state: "finished" }));
        assert.equal((await stored(ns, "lost")).record.state, "finished");
      },
    );

    await t.step(
      "status calls a run live by the API server's clock: a writer 10 min behind, heartbeating, is running",
      async () => {
        const ns = await namespace(cluster, "sclk");
        const w = store(ns, "clk", "skewed");
        const behind = 600_000;
        const skewed = () => ({
          startedAt: Date.now() - behind - 60_000,
          updatedAt: Date.now() - behind,
        });
        await w.write(await cm(w, ns, "clk", skewed()));
        const first = (await stored(ns, "clk")).cm.metadata!.managedFields!;
        // The server stamps each write that changes the record: a second later, a later time.
        await new Promise((r) => setTimeout(r, 1_100));
        await w.write(await cm(w, ns, "clk", skewed()));
        const { cm: now } = await stored(ns, "clk");
        const time = (f: typeof first) => Math.max(...f.map((e) => new Date(e.time!).getTime()));
        assert.ok(time(now.metadata!.managedFields!) > time(first), "the write time moved on");
        const r = await runDispatcher(
          cluster,
          ["status", "--name-prefix", "clk", "-n", ns, "-o", "json"],
          { timeoutMs: 60_000 },
        );
        assert.equal(JSON.parse(r.stdout).run.state, "running", r.stdout + r.stderr);
        const text = await runDispatcher(cluster, ["status", "--name-prefix", "clk", "-n", ns], {
          timeoutMs: 60_000,
        });
        assert.match(
          text.stdout,
          /: running, started [6-9][0-9]s ago, record [0-9]s old/,
          text.stdout,
        );
      },
    );
  },
);
