/**
 * The fault suite on a real control plane: the dispatcher killed at random
 * moments, interrupted, its API server restarted or compacted under it,
 * throttled by API Priority and Fairness, its network delayed, stalled and
 * reset, raced by a second dispatcher, and the cluster changed under its run.
 * Nothing may be lost and nothing doubled; every check reads the API server.
 *
 * `FAULTS_PROFILE=long` runs 100 kill trials instead of 10; each trial prints
 * its seed, and `FAULTS_SEED=S FAULTS_TRIALS=1` replays trial seed S.
 */

import assert from "node:assert/strict";
import { OUTCOME_LABEL, startCluster } from "./cluster.ts";
import { completeJobs, eventually, jobsIn, jobTemplate, JobWatcher } from "./_dispatcher.ts";
import { ALL_REQUESTS, flowSchema, priorityLevel, rejectedBy } from "./_apf.ts";
import {
  atLeast,
  DispatcherProcess,
  failedNodes,
  runDispatcher,
  throttledCount,
} from "./_faults.ts";
import {
  kubeconfigFor,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteNodes,
  tempFile,
} from "./_fixtures.ts";
import { seededRandom as seeded } from "../engine/safety.ts";
import { FaultProxy } from "./_proxy.ts";
import { HttpFaultProxy } from "./_http_proxy.ts";

const LONG = Deno.env.get("FAULTS_PROFILE") === "long";
const KILL_TRIALS = Number(Deno.env.get("FAULTS_TRIALS") ?? (LONG ? 100 : 10));
const FIRST_SEED = Number(Deno.env.get("FAULTS_SEED") ?? Math.floor(Math.random() * 1e9));
/** Nodes of the shared pool most faults roll out over. */
const POOL = 10;
const POOL_SELECTOR = `${SUITE}=pool`;
/** Six of the pool, for the faults whose cost grows with the rollout's length. */
const SIX = ["--nodes", "pool-000,pool-001,pool-002,pool-003,pool-004,pool-005"];
/** Nodes of each kill trial. */
const KILL_NODES = 6;

const CREATED = /created job \S+ for node/;
const SUCCEEDED = /^\S+ node \S+: job \S+ succeeded/;

function log(line: string): void {
  console.log(`    ${line}`);
}

Deno.test({
  name: "faults: nothing lost, nothing doubled",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const cluster = await startCluster({ nodes: 0 });
    let ok = false;
    const started = Date.now();
    const took = () => `${((Date.now() - started) / 1000).toFixed(0)} s into the suite`;
    try {
      await cluster.createNodes([
        ...suiteNodes("pool", POOL),
        ...suiteNodes("kill", KILL_NODES),
      ]);

      await t.step(
        `killed dispatcher: SIGKILL at random moments, ${KILL_TRIALS} trials, then re-run until done`,
        async () => {
          const ns = await namespace(cluster, "f-kill");
          const tpl = await tempFile(jobTemplate("kill", "500ms"));
          const watcher = await JobWatcher.start(cluster, ns);
          let kills = 0, runs = 0;
          try {
            for (let trial = 0; trial < KILL_TRIALS; trial++) {
              const seed = FIRST_SEED + trial;
              log(
                `kill trial ${trial + 1}/${KILL_TRIALS}: seed ${seed} ` +
                  `(replay: FAULTS_SEED=${seed} FAULTS_TRIALS=1 deno task test:faults)`,
              );
              const random = seeded(seed);
              const prefix = `k${trial}`;
              const owner = `hook-k${trial}`;
              const uid = await ownerJob(cluster, ns, owner);
              const args = [
                "--job-template",
                tpl,
                "-n",
                ns,
                "--name-prefix",
                prefix,
                "--node-selector",
                `${SUITE}=kill`,
                "--parallelism",
                "3",
                "--owner-job-name",
                owner,
              ];
              // One or two runs are killed, each after a random number of
              // creations plus a random delay; then runs go on until one ends.
              const killed = 1 + Math.floor(random() * 2);
              const completedBefore = new Map<string, string>();
              let last;
              for (let run = 0;; run++) {
                assert.ok(run < killed + 3, `trial seed ${seed}: no run finished the rollout`);
                runs++;
                const p = new DispatcherProcess(cluster, args, { timeoutMs: 120_000 });
                if (run < killed) {
                  const after = Math.floor(random() * (KILL_NODES + 1));
                  const jitter = Math.floor(random() * 400);
                  await p.waitFor(after ? atLeast(after, CREATED) : /selected \d+ nodes?\b/);
                  await new Promise((r) => setTimeout(r, jitter));
                  p.kill("SIGKILL");
                  kills++;
                }
                last = await p.ended;
                assert.ok(!last.timedOut, `trial seed ${seed}: run ${run} hung:\n${last.stderr}`);
                if (run >= killed) break;
                // What finished so far must never run again.
                for (const j of await jobsIn(cluster, ns)) {
                  if (j.name.startsWith(`${prefix}-`) && j.complete) {
                    completedBefore.set(j.node, j.uid);
                  }
                }
              }
              assert.equal(last.code, 0, `trial seed ${seed}:\n${last.stderr}`);
              assert.match(
                last.stderr,
                new RegExp(`summary: ${KILL_NODES} succeeded, 0 failed of ${KILL_NODES} nodes`),
              );
              const jobs = await completeJobs(cluster, ns, prefix, KILL_NODES);
              assert.ok(jobs.every((j) => j.owners.includes(uid)), "every Job is the owner's");
              for (const [node, before] of completedBefore) {
                const now = jobs.find((j) => j.node === node)!;
                assert.equal(
                  now.uid,
                  before,
                  `trial seed ${seed}: completed node ${node} ran again`,
                );
              }
            }
            // Give the watcher the last events.
            await new Promise((r) => setTimeout(r, 500));
          } finally {
            await watcher.stop();
          }
          const all = (await jobsIn(cluster, ns)).filter((j) => j.node);
          assert.equal(watcher.maxActivePerNode, 1, "a node had two Jobs active at once");
          assert.equal(all.length, KILL_TRIALS * KILL_NODES, "one Job per node and trial");
          assert.deepEqual(
            new Set(watcher.seen.keys()),
            new Set(all.map((j) => j.uid)),
            "no Job was ever replaced or deleted",
          );
          log(`${KILL_TRIALS} trials, ${kills} SIGKILLs, ${runs} runs; ${took()}`);
        },
      );

      await t.step(
        "SIGTERM: no Job created after the signal, summary, exit 143; the next run finishes",
        async () => {
          const ns = await namespace(cluster, "f-term");
          const tpl = await tempFile(jobTemplate("term", "1500ms"));
          const args = ["--job-template", tpl, "-n", ns, "--node-selector", POOL_SELECTOR];
          const p = new DispatcherProcess(cluster, [...args, "--parallelism", "2"]);
          assert.ok(await p.waitFor(atLeast(3, CREATED)), p.stderr);
          const signalledAt = Date.now();
          p.kill("SIGTERM");
          const r = await p.ended;
          assert.equal(r.code, 143, r.stderr);
          assert.match(r.stderr, /summary: \d+ succeeded, 0 failed, .* of 10 nodes/);
          // A create already sent when the signal came may still land; a new
          // one may not: at most one per slot (2) is reported after the signal.
          const after = r.stderr.slice(r.stderr.indexOf("SIGTERM")).split("\n");
          const late = after.filter((l) => CREATED.test(l));
          assert.ok(late.length <= 2, `Jobs created after the signal:\n${r.stderr}`);
          const atExit = await jobsIn(cluster, ns);
          const reported = r.stderr.split("\n").filter((l) => CREATED.test(l)).length;
          assert.equal(atExit.length, reported, `every Job created was reported:\n${r.stderr}`);
          assert.ok(atExit.length >= 3 && atExit.length < POOL, `${atExit.length} Jobs`);
          // creationTimestamp has whole seconds, stamped by the API server. A Job
          // reported before the signal was created before it; one reported
          // after it was a create already in flight, which the API server may
          // stamp a moment later on a loaded machine, never seconds later.
          const lateNames = new Set(late.map((l) => l.match(/created job (\S+)/)?.[1]));
          for (const j of atExit) {
            const created = Date.parse(j.created);
            const allowance = lateNames.has(j.name) ? 2000 : 0;
            assert.ok(
              created <= Math.floor(signalledAt / 1000) * 1000 + allowance,
              `${j.name} created at ${j.created}, signal at ${
                new Date(signalledAt).toISOString()
              }` +
                `${lateNames.has(j.name) ? " (in flight at the signal)" : ""}:\n${r.stderr}`,
            );
          }
          await new Promise((r) => setTimeout(r, 3000));
          assert.equal((await jobsIn(cluster, ns)).length, atExit.length, "nothing created later");

          const next = await runDispatcher(cluster, [...args, "--parallelism", "4"]);
          assert.equal(next.code, 0, next.stderr);
          assert.match(next.stderr, /summary: 10 succeeded, 0 failed of 10 nodes/);
          const jobs = await completeJobs(cluster, ns, "term", POOL);
          for (const j of atExit) {
            assert.equal(jobs.find((k) => k.node === j.node)?.uid, j.uid, `${j.name} was adopted`);
          }
          log(
            `SIGTERM after ${atExit.length} Jobs (${late.length} in flight at the signal); ` +
              `the re-run created ${POOL - atExit.length}`,
          );
        },
      );

      await t.step("kube-apiserver restarted twice mid-rollout: the run completes", async () => {
        const ns = await namespace(cluster, "f-restart");
        const watcher = await JobWatcher.start(cluster, ns);
        const tpl = await tempFile(jobTemplate("restart", "1s"));
        const p = new DispatcherProcess(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          ...SIX,
          "--parallelism",
          "2",
        ], { timeoutMs: 150_000 });
        let restarts = 0;
        try {
          assert.ok(await p.waitFor(atLeast(1, CREATED)), p.stderr);
          await cluster.restartApiServer();
          restarts++;
          const done = p.stderr.split("\n").filter((l) => SUCCEEDED.test(l)).length;
          if (await p.waitFor(atLeast(done + 2, SUCCEEDED))) {
            await cluster.restartApiServer();
            restarts++;
          }
        } finally {
          await p.ended;
          await watcher.stop();
        }
        const r = await p.ended;
        assert.equal(restarts, 2, `the run ended before the second restart:\n${r.stderr}`);
        assert.ok(!r.timedOut, `hung:\n${r.stderr}`);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, /summary: 6 succeeded, 0 failed of 6 nodes/);
        await completeJobs(cluster, ns, "restart", 6);
        assert.equal(watcher.maxActivePerNode, 1);
        log(`2 restarts; run took ${(r.ms / 1000).toFixed(1)} s`);
      });

      await t.step(
        "watch history gone: etcd compacted mid-rollout, no completion missed",
        async () => {
          const ns = await namespace(cluster, "f-compact");
          const tpl = await tempFile(jobTemplate("compact", "1s"));
          const p = new DispatcherProcess(cluster, [
            "--job-template",
            tpl,
            "-n",
            ns,
            ...SIX,
            "--parallelism",
            "2",
          ], { timeoutMs: 150_000 });
          let revision = 0;
          try {
            assert.ok(await p.waitFor(atLeast(2, CREATED)), p.stderr);
            revision = await cluster.compactEtcd();
          } finally {
            await p.ended;
          }
          const r = await p.ended;
          assert.ok(!r.timedOut, `hung:\n${r.stderr}`);
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /summary: 6 succeeded, 0 failed of 6 nodes/);
          assert.match(r.stderr, /watch (relisted|reconnected)/, "the watch was re-established");
          await completeJobs(cluster, ns, "compact", 6);
          const relisted = /watch relisted/.test(r.stderr) ? "410 Gone, relisted" : "reconnected";
          log(`compacted at revision ${revision}; the watch ${relisted}`);
        },
      );

      await t.step(
        "throttling: API Priority and Fairness answers 429, the run completes",
        async () => {
          const ns = await namespace(cluster, "f-apf");
          const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher");
          const level = "e2e-faults-tiny";
          // One seat, no queue: every request of the dispatcher's user beyond
          // the one being served is rejected with 429. The second level only
          // takes shares, so that the tiny one gets a single seat.
          const apf = [
            priorityLevel(level, 1, 0, 0),
            priorityLevel("e2e-faults-ballast", 400, 100),
            flowSchema(level, { precedence: 100, ns, sa: "dispatcher", rules: ALL_REQUESTS }),
          ].join("---\n");
          const applied = await cluster.kubectl(["apply", "-f", "-"], apf);
          assert.equal(applied.code, 0, applied.stderr);
          await eventually(
            async () =>
              new RegExp(
                `apiserver_flowcontrol_nominal_limit_seats\\{priority_level="${level}"\\} 1$`,
                "m",
              )
                .test(await cluster.metrics()),
            30_000,
            `priority level ${level} with one seat`,
          );
          try {
            const tpl = await tempFile(jobTemplate("apf", "500ms"));
            const r = await runDispatcher(cluster, [
              "--job-template",
              tpl,
              ...SIX,
              "--parallelism",
              "6",
            ], { kubeconfig, timeoutMs: 150_000 });
            assert.ok(!r.timedOut, `hung:\n${r.stderr}`);
            assert.equal(r.code, 0, r.stderr);
            assert.match(r.stderr, /summary: 6 succeeded, 0 failed of 6 nodes/);
            const seen = throttledCount(r.stderr);
            const server = await rejectedBy(cluster, level);
            log(`429s: the dispatcher reported ${seen}, the API server rejected ${server}`);
            assert.ok(server > 0, "the API server rejected requests of the dispatcher's user");
            assert.ok(seen > 0, `the 429s are reported:\n${r.stderr}`);
            await completeJobs(cluster, ns, "apf", 6);
          } finally {
            await cluster.kubectl([
              "delete",
              "flowschema/" + level,
              "prioritylevelconfiguration/" + level,
              "prioritylevelconfiguration/e2e-faults-ballast",
            ]);
          }
        },
      );

      await t.step(
        "slow or broken network: delays, resets and a stalled connection; nothing hangs",
        async () => {
          const ns = await namespace(cluster, "f-net");
          const proxy = FaultProxy.start(cluster.server);
          const kubeconfig = await kubeconfigFor(cluster, { server: proxy.url });
          const tpl = await tempFile(jobTemplate("net", "1s"));
          proxy.delayMs = 150;
          const p = new DispatcherProcess(cluster, [
            "--job-template",
            tpl,
            "-n",
            ns,
            "--node-selector",
            POOL_SELECTOR,
            "--parallelism",
            "3",
          ], { kubeconfig, timeoutMs: 150_000 });
          let connectionsAtStall = 0;
          try {
            const count = (re: RegExp) => p.stderr.split("\n").filter((l) => re.test(l)).length;
            // Resets while Jobs run: the watch and any request in flight break.
            assert.ok(await p.waitFor(atLeast(1, SUCCEEDED)), p.stderr);
            proxy.resetAll();
            assert.ok(await p.waitFor(atLeast(count(CREATED) + 1, CREATED)), p.stderr);
            proxy.resetAll();
            // A stall right after a completion, with every chunk late, catches
            // the requests that refill the slot in flight: they must time out
            // and be retried on a connection that works.
            assert.ok(await p.waitFor(atLeast(count(SUCCEEDED) + 1, SUCCEEDED)), p.stderr);
            assert.ok(
              proxy.stallAll() > 0,
              `a connection to stall (${proxy.open} open):\n${p.stderr}`,
            );
            connectionsAtStall = proxy.stats.connections;
            proxy.delayMs = 0;
          } finally {
            await p.ended;
            await proxy.close();
          }
          const r = await p.ended;
          log(
            `proxy: ${JSON.stringify(proxy.stats)}; run took ${(r.ms / 1000).toFixed(1)} s` +
              (r.timedOut ? " (killed by the bound)" : ""),
          );
          assert.ok(!r.timedOut, `hung for 150 s:\n${r.stderr}`);
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /summary: 10 succeeded, 0 failed of 10 nodes/);
          assert.match(r.stderr, /watch reconnected/);
          assert.ok(proxy.stats.reset >= 2, "two resets");
          assert.ok(
            proxy.stats.connections > connectionsAtStall,
            "a new connection after the stall",
          );
          await completeJobs(cluster, ns, "net", POOL);
        },
      );

      await t.step(
        "a Job create stored but its answer lost (504, cut off): one Job per node, adopted",
        async (t) => {
          for (const mode of ["504", "cut"] as const) {
            await t.step(`answer ${mode === "504" ? "replaced by a 504" : "cut off"}`, async () => {
              const ns = await namespace(cluster, `f-lost-${mode}`);
              const proxy = await HttpFaultProxy.start(cluster, mode);
              const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
                server: proxy.url,
              });
              // TTL 0: a Job that ran is gone soon after, so a create sent
              // again would make a second Job rather than meet a 409.
              const tpl = await tempFile(
                jobTemplate("lost", "1s").replace(
                  "spec:\n",
                  "spec:\n  ttlSecondsAfterFinished: 0\n",
                ),
              );
              const watcher = await JobWatcher.start(cluster, ns);
              const nodes = ["pool-000", "pool-001", "pool-002"];
              let r;
              try {
                r = await runDispatcher(cluster, [
                  "--job-template",
                  tpl,
                  "-n",
                  ns,
                  "--nodes",
                  nodes.join(","),
                  "--parallelism",
                  "3",
                ], { kubeconfig, timeoutMs: 150_000 });
              } finally {
                await watcher.stop();
                await proxy.close();
              }
              log(`${mode}: lost ${proxy.stats.lost.length} answers of ${proxy.stats.forwarded}`);
              assert.ok(!r.timedOut, `hung:\n${r.stderr}`);
              assert.equal(proxy.stats.lost.length, 3, "each node's first create lost its answer");
              assert.deepEqual(
                Object.fromEntries(proxy.stats.creates),
                Object.fromEntries(proxy.stats.lost.map((job) => [job, 1])),
                "a create whose answer was lost was resolved by reading, never sent again",
              );
              const perNode = new Map<string, number>();
              for (const n of watcher.seen.values()) perNode.set(n, (perNode.get(n) ?? 0) + 1);
              assert.deepEqual(
                Object.fromEntries(perNode),
                Object.fromEntries(nodes.map((n) => [n, 1])),
                `exactly one Job per node:\n${r.stderr}`,
              );
              assert.equal(r.code, 0, r.stderr);
              for (const job of proxy.stats.lost) {
                assert.match(r.stderr, new RegExp(`adopted job ${job} for node`), r.stderr);
              }
              assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
            });
          }
        },
      );

      await t.step("two dispatchers with the same prefix at once", async (t) => {
        const ns = await namespace(cluster, "f-two");
        const watcher = await JobWatcher.start(cluster, ns);
        await t.step("same owner: never two Jobs for one node, both finish", async () => {
          await ownerJob(cluster, ns, "hook-a");
          const tpl = await tempFile(jobTemplate("two", "500ms"));
          const args = [
            "--job-template",
            tpl,
            "-n",
            ns,
            "--node-selector",
            POOL_SELECTOR,
            "--parallelism",
            "3",
            "--owner-job-name",
            "hook-a",
          ];
          const [a, b] = await Promise.all([
            runDispatcher(cluster, args),
            runDispatcher(cluster, args),
          ]);
          await new Promise((r) => setTimeout(r, 500));
          assert.equal(a.code, 0, a.stderr);
          assert.equal(b.code, 0, b.stderr);
          await completeJobs(cluster, ns, "two", POOL);
          assert.equal(watcher.maxActivePerNode, 1, "a node had two Jobs active at once");
          assert.equal(watcher.seen.size, POOL, "one Job per node ever");
        });
        await t.step(
          "another owner with --yield-to-live-run exits 0 naming the live run",
          async () => {
            await ownerJob(cluster, ns, "hook-b");
            await ownerJob(cluster, ns, "hook-c");
            const tpl = await tempFile(jobTemplate("yield", "1500ms"));
            const args = ["--job-template", tpl, "-n", ns, "--nodes", "pool-000,pool-001,pool-002"];
            const live = new DispatcherProcess(cluster, [
              ...args,
              "--parallelism",
              "1",
              "--owner-job-name",
              "hook-b",
            ]);
            assert.ok(await live.waitFor(CREATED), live.stderr);
            const second = await runDispatcher(cluster, [
              ...args,
              "--owner-job-name",
              "hook-c",
              "--yield-to-live-run",
            ]);
            assert.equal(second.code, 0, second.stderr);
            assert.match(second.stderr, /yielding: run of owner job hook-b/);
            assert.doesNotMatch(second.stderr, CREATED);
            const first = await live.ended;
            assert.equal(first.code, 0, first.stderr);
            await completeJobs(cluster, ns, "yield", 3);
            assert.equal(watcher.maxActivePerNode, 1);
          },
        );
        await watcher.stop();
      });

      await t.step("cluster changes under the run fail only the node concerned", async () => {
        const ns = await namespace(cluster, "f-change");
        await cluster.createNodes([
          ...suiteNodes("chg", 4),
          // Its pod never finishes: its Job is certainly running when deleted.
          ...suiteNodes("chg", 1, { labels: { [OUTCOME_LABEL]: "stall" } }, 4),
          ...suiteNodes("chg", 1, {}, 5),
        ]);
        const tpl = await tempFile(jobTemplate("chg", "4s"));
        const p = new DispatcherProcess(cluster, [
          "--job-template",
          tpl,
          "-n",
          ns,
          "--node-selector",
          `${SUITE}=chg`,
          "--parallelism",
          "1",
        ], { timeoutMs: 120_000 });
        try {
          // While chg-000 runs: one node deleted, one recreated under its
          // name, one tainted; all were selected already.
          assert.ok(await p.waitFor(/created job chg-chg-000 /), p.stderr);
          await Promise.all([
            cluster.deleteNode("chg-001"),
            (async () => {
              await cluster.deleteNode("chg-002");
              await cluster.createNodes(suiteNodes("chg", 1, {}, 2));
            })(),
            cluster.kubectl(["taint", "node", "chg-003", "e2e-faults=late:NoSchedule"]),
          ]);
          assert.doesNotMatch(p.stderr, /created job chg-chg-001 /, "the changes came in time");
          assert.ok(await p.waitFor(/created job chg-chg-004 /), p.stderr);
          const del = await cluster.kubectl([
            "delete",
            "job",
            "chg-chg-004",
            "-n",
            ns,
            "--wait=false",
          ]);
          assert.equal(del.code, 0, del.stderr);
        } finally {
          await p.ended;
        }
        const r = await p.ended;
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stderr, /summary: 2 succeeded, 4 failed of 6 nodes/);
        const failed = failedNodes(r.stderr);
        assert.deepEqual([...failed.keys()].sort(), ["chg-001", "chg-002", "chg-003", "chg-004"]);
        assert.match(failed.get("chg-001")!, /deleted/);
        assert.match(failed.get("chg-002")!, /replaced under the same name/);
        assert.match(failed.get("chg-003")!, /tainted e2e-faults=late:NoSchedule/);
        assert.match(failed.get("chg-004")!, /Job was deleted/);
        const jobs = await jobsIn(cluster, ns);
        assert.deepEqual(
          jobs.map((j) => j.node).sort(),
          ["chg-000", "chg-005"],
          "no Job for the changed nodes",
        );
      });
      ok = true;
    } finally {
      if (!ok) console.error(await cluster.logs(30));
      await cluster.stop({ removeDir: ok });
      console.log(`faults suite: ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  },
});
