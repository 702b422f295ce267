/**
 * Progressive delivery on a real control plane: waves with a soak, checked
 * by an independent watcher, node verification (validator pods that must
 * turn Ready after the Job, a smoke-test Job), and the bad input of both.
 */

import assert from "node:assert/strict";
import { OUTCOME_LABEL } from "./cluster.ts";
import { dispatcher, jobsIn, jobTemplate, JobWatcher } from "./_dispatcher.ts";
import { DispatcherProcess } from "./_faults.ts";
import { delay } from "./_procs.ts";
import {
  clusterTest,
  cordonedNodes,
  namespace,
  SUITE,
  suiteNodes as nodes,
  tempFile as file,
} from "./_fixtures.ts";

/** A validator pod on `node`, as a DaemonSet would restart it after the upgrade. */
function validatorPod(ns: string, node: string, outcome: "serve" | "stall"): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `validator-${node}`,
      namespace: ns,
      labels: { app: "validator" },
      // serve: Running and Ready; stall: Pending forever (e2e/stages/pod.yaml).
      annotations: { [OUTCOME_LABEL]: outcome },
    },
    spec: {
      nodeName: node,
      containers: [{ name: "v", image: "registry.invalid/validator:1" }],
    },
  });
}

clusterTest("progressive delivery on a real control plane", async (t, cluster) => {
  await t.step(
    "waves 1,25%,100% with a soak: no Job of a wave before every Job of the one before completed plus the soak",
    async () => {
      const ns = await namespace(cluster, "waves");
      await cluster.createNodes(nodes("waves", 12));
      const watcher = await JobWatcher.start(cluster, ns);
      const report = await Deno.makeTempFile({ suffix: ".json" });
      const soakSecs = 3;
      let r;
      try {
        r = await dispatcher(cluster, [
          "--job-template",
          await file(jobTemplate("waves", "500ms")),
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=waves`,
          "--parallelism",
          "4",
          "--waves",
          "1,25%,100%",
          "--wave-soak-secs",
          String(soakSecs),
          "--report",
          report,
        ]);
      } finally {
        await watcher.stop();
      }
      assert.equal(r.code, 0, r.stderr);
      const json = JSON.parse(await Deno.readTextFile(report));
      const waveOf = new Map<string, number>(
        json.nodes.map((n: { name: string; wave: number }) => [n.name, n.wave]),
      );
      // 1, then 25% of 12 = 3 in all, then the rest; in dispatch (name) order.
      assert.deepEqual([...waveOf.values()], [1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
      assert.deepEqual(json.waves.map((w: { size: number }) => w.size), [1, 2, 9]);
      const times = [...watcher.times.values()];
      assert.equal(times.length, 12, "one Job per node");
      for (const k of [1, 2]) {
        const before = times.filter((x) => waveOf.get(x.node) === k);
        const next = times.filter((x) => waveOf.get(x.node) === k + 1);
        const lastDone = Math.max(...before.map((x) => x.finished!));
        const firstNext = Math.min(...next.map((x) => x.added));
        // The dispatcher's watch and this one see the same events within
        // their delivery jitter: 500 ms of it is allowed, not the soak.
        assert.ok(
          firstNext >= lastDone + soakSecs * 1000 - 500,
          `wave ${k + 1} began ${firstNext - lastDone} ms after wave ${k} completed`,
        );
      }
      assert.match(r.stderr, /wave 1 of 3 ended \(1 node\); soaking 3 s before wave 2/);
      assert.match(r.stderr, /wave 3 of 3 opens: 9 nodes/);
    },
  );

  await t.step(
    "a run SIGKILLed 5 s into a 45 s soak and re-run at once opens the next wave no sooner than 45 s after the last Job of the wave completed",
    async () => {
      const ns = await namespace(cluster, "soak-kill");
      await cluster.createNodes(nodes("soakkill", 3));
      const soakSecs = 45;
      const args = [
        "--job-template",
        await file(jobTemplate("soak", "300ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=soakkill`,
        "--waves",
        "1",
        "--wave-soak-secs",
        String(soakSecs),
      ];
      const first = new DispatcherProcess(cluster, args);
      assert.ok(
        await first.waitFor(/wave 1 of 2 ended \(1 node\); soaking 45 s before wave 2/),
        first.stderr,
      );
      await delay(5000);
      first.kill("SIGKILL");
      await first.ended;
      assert.equal((await jobsIn(cluster, ns)).length, 1, "wave 2 had not opened when killed");
      const report = await Deno.makeTempFile({ suffix: ".json" });
      const r = await dispatcher(cluster, [...args, "--report", report]);
      assert.equal(r.code, 0, r.stderr);
      // An independent read: the API server's own stamps (whole seconds),
      // the Jobs' completionTime and creationTimestamp.
      const got = await cluster.kubectl(["get", "jobs", "-n", ns, "-o", "json"]);
      assert.equal(got.code, 0, got.stderr);
      const jobs = JSON.parse(got.stdout).items as {
        metadata: { annotations: Record<string, string>; creationTimestamp: string };
        status: { completionTime?: string };
      }[];
      assert.equal(jobs.length, 3, "one Job per node");
      const inWave1 = (j: (typeof jobs)[number]) =>
        j.metadata.annotations["job-dispatcher/node-name"] === "soakkill-000";
      const wave1 = jobs.filter(inWave1);
      const wave2 = jobs.filter((j) => !inWave1(j));
      assert.equal(wave1.length, 1);
      const completed = Math.max(...wave1.map((j) => Date.parse(j.status.completionTime!)));
      const opened = Math.min(...wave2.map((j) => Date.parse(j.metadata.creationTimestamp)));
      assert.ok(
        opened >= completed + soakSecs * 1000,
        `wave 2's first Job was created ${(opened - completed) / 1000} s after wave 1's ` +
          `last Job completed, before the ${soakSecs} s soak ended`,
      );
      // The re-run soaked what was left, not a whole soak again.
      const left = Number(r.stderr.match(/wave 1 of 2 ended \(1 node\); soaking (\d+) s/)?.[1]);
      assert.ok(left > 0 && left < soakSecs, r.stderr);
      const json = JSON.parse(await Deno.readTextFile(report));
      // From that second's end, moved onto the run's clock by the API
      // server's Date headers (whole seconds: a lower bound, up to a second
      // and an answer's way later).
      const from = Date.parse(json.waves[0].soak.from) - (completed + 1000);
      assert.ok(from >= 0 && from < 3000, `soak from ${from} ms after that second's end`);
      console.log(
        `      wave 2 opened ${(opened - completed) / 1000} s after wave 1 completed; ` +
          `the re-run soaked ${left} s`,
      );
    },
  );

  await t.step(
    "verification: a validator never Ready and a failed smoke test fail their nodes, which stay cordoned; the others are uncordoned",
    async () => {
      const ns = await namespace(cluster, "verify");
      // verify-001's smoke-test pod fails (its node's outcome); the main
      // Job's pods are told to succeed everywhere.
      await cluster.createNodes([
        ...nodes("verify", 1),
        ...nodes("verify", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 1),
        ...nodes("verify", 2, {}, 2),
      ]);
      const main = jobTemplate("up", "300ms").replace(
        `e2e.job-dispatcher.io/duration: "300ms"`,
        `e2e.job-dispatcher.io/duration: "300ms"\n        ${OUTCOME_LABEL}: succeed`,
      );
      const smoke = jobTemplate("smoke", "200ms");
      const watcher = await JobWatcher.start(cluster, ns);
      const made = new Set<string>();
      let watching = true;
      // The validator DaemonSet restarts its pod once the upgrade Job ended:
      // here the test makes it, at the node's first finished Job.
      const restarts = (async () => {
        while (watching) {
          for (const x of watcher.times.values()) {
            if (x.finished === undefined || made.has(x.node)) continue;
            made.add(x.node);
            const outcome = x.node === "verify-000" ? "stall" : "serve";
            const c = await cluster.kubectl(
              ["apply", "-f", "-"],
              validatorPod(ns, x.node, outcome),
            );
            assert.equal(c.code, 0, c.stderr);
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const report = await Deno.makeTempFile({ suffix: ".json" });
      let r;
      try {
        r = await dispatcher(cluster, [
          "--job-template",
          await file(main),
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=verify`,
          "--parallelism",
          "4",
          "--cordon",
          "--verify-pod-selector",
          "app=validator",
          "--verify-job-template",
          await file(smoke),
          "--verify-timeout-secs",
          "15",
          "--report",
          report,
        ]);
      } finally {
        watching = false;
        await restarts;
        await watcher.stop();
      }
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        new RegExp(`verification: pod ${ns}/validator-verify-000 not Ready after 15 s`),
      );
      assert.match(r.stderr, new RegExp(`verification: job ${ns}/up-verify-verify-001 failed`));
      const json = JSON.parse(await Deno.readTextFile(report));
      assert.deepEqual(
        json.nodes.map((n: { name: string; outcome: string }) => [n.name, n.outcome]),
        [
          ["verify-000", "failed"],
          ["verify-001", "failed"],
          ["verify-002", "succeeded"],
          ["verify-003", "succeeded"],
        ],
      );
      assert.deepEqual(await cordonedNodes(cluster, "verify"), ["verify-000", "verify-001"]);
      const smokes = (await jobsIn(cluster, ns)).filter((j) =>
        j.name.startsWith("up-verify-verify-")
      );
      // verify-000 failed before its smoke test; the others got one each.
      assert.deepEqual(smokes.map((j) => j.node).sort(), [
        "verify-001",
        "verify-002",
        "verify-003",
      ]);
    },
  );

  await t.step(
    "bad waves and verify flags: exit 2, one line, nothing created or cordoned",
    async () => {
      const ns = await namespace(cluster, "waves-bad");
      await cluster.createNodes(nodes("wavesbad", 3));
      const base = [
        "--job-template",
        await file(jobTemplate("wavesbad", "200ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=wavesbad`,
        "--cordon",
      ];
      const cases: [string[], RegExp][] = [
        [["--waves", "5,3"], /error: Invalid --waves "5,3": 3 does not grow after 5/],
        [["--waves", "0"], /error: Invalid --waves "0": a wave of 0 holds no node/],
        [["--waves", "1,150%"], /error: Invalid --waves "1,150%": 150% is over 100%/],
        [["--waves", "1,many"], /error: Invalid --waves "1,many": "many" is neither/],
        [["--verify-timeout-secs", "60"], /error: Invalid --verify-timeout-secs: it needs/],
      ];
      for (const [args, want] of cases) {
        const r = await dispatcher(cluster, [...base, ...args]);
        assert.equal(r.code, 2, r.stderr);
        const lines = r.stderr.trim().split("\n");
        assert.equal(lines.length, 1, r.stderr);
        assert.match(lines[0], want);
      }
      assert.deepEqual(await jobsIn(cluster, ns), []);
      assert.deepEqual(await cordonedNodes(cluster, "wavesbad"), []);
    },
  );
});
