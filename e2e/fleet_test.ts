/**
 * `job-dispatcher fleet` on three real control planes at once (each its own
 * etcd, kube-apiserver, controllers and kwok, 3 nodes; they share the built
 * binaries), reached through one kubeconfig with a context per cluster.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parse, parseAllDocuments, stringify } from "yaml";
import { build, type Cluster, type CommandResult, OUTCOME_LABEL, startCluster } from "./cluster.ts";
import { dispatcher, dispatcherCommand, eventually, jobTemplate } from "./_dispatcher.ts";
import {
  namespace,
  ownerJob,
  removeScratch,
  serviceAccount,
  tempDir,
  tempFile,
} from "./_fixtures.ts";
import { delay, freePorts } from "./_procs.ts";
import {
  type Exporter,
  type RunningPrometheus,
  startExporter,
  startPrometheus,
  untilSamples,
} from "./_prometheus.ts";

const NS = "fleet";
const CONTEXTS = ["c1", "c2", "c3"] as const;

/** One kubeconfig with a context per cluster (`c1`…), and `gone`: a port nothing listens on. */
async function fleetKubeconfig(clusters: Cluster[], paths?: string[]): Promise<string> {
  const merged = { apiVersion: "v1", kind: "Config", clusters: [], users: [], contexts: [] } as {
    clusters: unknown[];
    users: unknown[];
    contexts: unknown[];
  };
  for (const [i, c] of clusters.entries()) {
    const k = parse(await Deno.readTextFile(paths?.[i] ?? c.kubeconfig));
    const name = CONTEXTS[i];
    merged.clusters.push({ name, cluster: k.clusters[0].cluster });
    merged.users.push({ name, user: k.users[0].user });
    merged.contexts.push({ name, context: { cluster: name, user: name, namespace: NS } });
  }
  const gone = { ...(merged.clusters[0] as { cluster: Record<string, string> }).cluster };
  gone.server = `https://127.0.0.1:${freePorts(1)[0]}`;
  merged.clusters.push({ name: "gone", cluster: gone });
  merged.contexts.push({ name: "gone", context: { cluster: "gone", user: "c1" } });
  return await tempFile(stringify(merged));
}

interface JobSeen {
  name: string;
  node: string;
  uid: string;
  /** creationTimestamp, ms. */
  created: number;
  /** When the Job was first seen to have succeeded (SuccessCriteriaMet or Complete), ms. */
  succeeded?: number;
}

/** The Jobs of `prefix` in a cluster, as an independent kubectl sees them. */
async function jobsOf(cluster: Cluster, prefix: string): Promise<JobSeen[]> {
  const r = await cluster.kubectl(["get", "jobs", "-n", NS, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  type Cond = { type: string; status: string; lastTransitionTime: string };
  const items = JSON.parse(r.stdout).items as {
    metadata: {
      name: string;
      uid: string;
      creationTimestamp: string;
      annotations?: Record<string, string>;
    };
    status?: { conditions?: Cond[] };
  }[];
  return items.filter((j) => j.metadata.name.startsWith(`${prefix}-`)).map((j) => {
    const done = (j.status?.conditions ?? []).filter((c) =>
      c.status === "True" && ["SuccessCriteriaMet", "Complete"].includes(c.type)
    ).map((c) => Date.parse(c.lastTransitionTime));
    return {
      name: j.metadata.name,
      uid: j.metadata.uid,
      node: j.metadata.annotations?.["job-dispatcher/node-name"] ?? "",
      created: Date.parse(j.metadata.creationTimestamp),
      succeeded: done.length ? Math.min(...done) : undefined,
    };
  });
}

/** The dispatcher in the background: its stderr so far, and its end. */
function spawnDispatcher(args: string[], env: Record<string, string>) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...dispatcherCommand(), ...args],
    env: { ...env, NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stderr = "";
  const read = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) stderr += chunk;
  })();
  const stdout = new Response(child.stdout).text();
  const done = (async (): Promise<CommandResult> => {
    const [status] = await Promise.all([child.status, read]);
    return { code: status.code, stdout: await stdout, stderr };
  })();
  return { stderr: () => stderr, done };
}

/** The gate's query in the gate steps: the exporter's gauge, which the test flips. */
const GATE_QUERY = "e2e_broken > 0";

/** The gate flags of the gate steps. */
function gateArgs(prom: RunningPrometheus, ...extra: string[]): string[] {
  return [
    "--gate-prometheus-url",
    prom.url,
    "--gate-query",
    GATE_QUERY,
    "--gate-interval-secs",
    "2",
    ...extra,
  ];
}

/** Flips the gauge and waits until Prometheus has scraped it. */
async function flip(prom: RunningPrometheus, exporter: Exporter, value: number): Promise<void> {
  exporter.set(value);
  await untilSamples(prom, GATE_QUERY, (n) => (value > 0 ? n > 0 : n === 0));
}

/** Waits as `eventually` does; a timeout says what the fleet said so far. */
async function awaitFleet(
  live: { stderr: () => string },
  ready: () => Promise<boolean>,
  ms: number,
  what: string,
): Promise<void> {
  try {
    await eventually(ready, ms, what);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${live.stderr()}`);
  }
}

/** `fleet status -o json` for the fleet command line `args`. */
async function fleetStatus(
  run: (args: string[]) => Promise<CommandResult>,
  args: string[],
): Promise<
  {
    stage?: string;
    clusters: { cluster: string; phase: string; succeeded: number; total: number }[];
  }
> {
  const r = await run(["fleet", "status", ...args.slice(1), "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

Deno.test({
  name: "fleet: staged rollouts across three real control planes",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const started = Date.now();
    await build();
    const clusters = await Promise.all(
      CONTEXTS.map(() => startCluster({ nodes: 3, build: false })),
    );
    let ok = false;
    try {
      await Promise.all(clusters.map((c) => namespace(c, NS)));
      const kubeconfig = await fleetKubeconfig(clusters);
      const env = { KUBECONFIG: kubeconfig };
      const [c1, c2, c3] = clusters;
      const fleet = async (yaml: string, prefix: string, extra: string[] = [], duration = "1s") => [
        "fleet",
        "-f",
        await tempFile(yaml),
        "--job-template",
        await tempFile(jobTemplate(prefix, duration)),
        "--progress-interval-secs",
        "2",
        "--poll-interval-secs",
        "1",
        ...extra,
      ];
      const run = (args: string[], opts: Parameters<typeof dispatcher>[2] = {}) =>
        dispatcher(c1, args, { ...opts, env: { ...env, ...opts.env } });

      await t.step(
        "a bad FLEET.yaml or an unreachable cluster creates nothing anywhere",
        async () => {
          // [FLEET.yaml, exit code, the error, whether it is the one line said]
          const cases: [string, number, RegExp, boolean][] = [
            [
              "stages: [{name: one, clusters: [c1]}, {name: two, clusters: [c2, nope]}]",
              2,
              /cluster nope: .*context.*nope/i,
              true,
            ],
            [
              "stages: [{name: one, clusters: [c1, c2]}, {name: two, clusters: [c2]}]",
              2,
              /cluster c2 is in two stages \(one, two\)/,
              true,
            ],
            ["stages: [{name: one, clusters: []}]", 2, /stage one is empty/, true],
            [
              "stages: [{name: one, clusters: [c1], soak: 5}]",
              2,
              /stage one has unknown key "soak"/,
              true,
            ],
            [
              "stages: [{name: one, clusters: [c1]}, {name: two, clusters: [c2, gone]}]",
              3,
              /fleet: cluster gone cannot be reached at start: .+; nothing was created/,
              true,
            ],
            [
              "stages: [{name: one, clusters: [c1]}, {name: two, clusters: [c2]}]\n" +
              "clusters: {c2: {namespace: missing}}",
              2,
              /\[c2\] .*Invalid namespace missing: it does not exist[^]*fleet: cluster c2 refused/,
              false,
            ],
          ];
          for (const [yaml, code, want, oneLine] of cases) {
            const r = await run(await fleet(yaml, "bad", ["--api-wait-secs", "0"]));
            assert.equal(r.code, code, r.stderr);
            assert.match(r.stderr, want);
            // One error line; the clusters reached meanwhile may say so (info).
            const errors = r.stderr.split("\n").filter((l) => /(^|\s)error: /.test(l));
            if (oneLine) assert.equal(errors.length, 1, r.stderr);
          }
          for (const c of clusters) {
            assert.deepEqual(await jobsOf(c, "bad"), []);
            // Nor a run record, a lock or a lease of the prefix: nothing at all.
            const r = await c.kubectl(["get", "configmaps,leases", "-n", NS, "-o", "name"]);
            assert.equal(r.code, 0, r.stderr);
            assert.deepEqual(r.stdout.split("\n").filter((n) => n.includes("bad")), []);
          }
        },
      );

      await t.step(
        "a dry run prints each cluster's plan in stage order, creates nothing",
        async () => {
          const yaml = `stages:
  - {name: one, clusters: [c1], soakSecs: 600}
  - {name: two, clusters: [c2, c3], approval: true}
`;
          const text = await run(await fleet(yaml, "dry", ["--dry-run=plan"]));
          assert.equal(text.code, 0, text.stderr);
          const heads = text.stdout.split("\n").filter((l) => l.startsWith("# "));
          assert.deepEqual(heads.slice(1), [
            "# cluster c1 (stage one)",
            "# cluster c2 (stage two)",
            "# cluster c3 (stage two)",
            "# fleet ETA: unknown, no estimate for c1, c2, c3 (--estimate-from REPORT)",
          ]);
          assert.match(
            heads[0],
            /stage one: c1, then a soak of 600 s; stage two \(after approval\)/,
          );
          const json = await run(await fleet(yaml, "dry", ["--dry-run=plan", "-o", "json"]));
          assert.equal(json.code, 0, json.stderr);
          assert.deepEqual(Object.keys(JSON.parse(json.stdout).clusters), ["c1", "c2", "c3"]);
          // --dry-run=client: one YAML stream of every cluster's Jobs.
          const yamlRun = await run(await fleet(yaml, "dry", ["--dry-run=client"]));
          assert.equal(yamlRun.code, 0, yamlRun.stderr);
          const docs = parseAllDocuments(yamlRun.stdout).map((d) => d.toJS());
          assert.equal(docs.filter((d) => d?.kind === "Job").length, 9, yamlRun.stdout);
          for (const c of clusters) assert.deepEqual(await jobsOf(c, "dry"), []);
        },
      );

      await t.step("stages in order, the soak at least its length between them", async () => {
        const soakSecs = 15;
        const yaml = `stages:
  - {name: one, clusters: [c1], soakSecs: ${soakSecs}}
  - {name: two, clusters: [c2, c3]}
`;
        const report = `${await Deno.makeTempDir({ prefix: "fleet-report-" })}/fleet.html`;
        const html = ["--report", report, "--report-format", "html"];
        const r = await run(await fleet(yaml, "order", html));
        assert.equal(r.code, 0, r.stderr);
        // The fleet's timeline: one lane per cluster in stage order, each with its nodes.
        const page = await Deno.readTextFile(report);
        const data = JSON.parse(
          page.match(/<script type="application\/json" id="data">(.*?)<\/script>/s)![1],
        );
        assert.deepEqual(
          data.lanes.map((l: { title: string; rows: unknown[] }) => [l.title, l.rows.length]),
          [["c1: stage one", 3], ["c2: stage two", 3], ["c3: stage two", 3]],
        );
        assert.deepEqual(data.marks.map((m: unknown[]) => m[1]), [
          "stage one starts",
          "stage two starts",
        ]);
        assert.equal(data.bands.length, 1, "the soak between the stages is shaded");
        const [j1, j2, j3] = await Promise.all(clusters.map((c) => jobsOf(c, "order")));
        for (const jobs of [j1, j2, j3]) assert.equal(jobs.length, 3, r.stderr);
        // Whole seconds both: a gap of whole seconds at least soakSecs means at least soakSecs.
        const stageOneEnd = Math.max(...j1.map((j) => j.succeeded!));
        const stageTwoStart = Math.min(...[...j2, ...j3].map((j) => j.created));
        assert.ok(
          stageTwoStart - stageOneEnd >= soakSecs * 1000,
          `stage two began ${stageTwoStart - stageOneEnd} ms after stage one ended\n${r.stderr}`,
        );
        assert.match(r.stderr, /soaking after stage one until/);
        console.log(
          `soak: stage two began ${stageTwoStart - stageOneEnd} ms after stage one ended`,
        );
      });

      await t.step("kill -9 in stage 2, then a re-run: one Job per node everywhere", async () => {
        const yaml = `stages:
  - {name: one, clusters: [c1]}
  - {name: two, clusters: [c2, c3], maxParallelClusters: 1}
`;
        const args = await fleet(yaml, "resume", [], "4s");
        const killed = await run(args, {
          signal: { name: "SIGKILL", when: /\[c2\] .*created job resume-/ },
        });
        assert.notEqual(killed.code, 0, killed.stderr);
        const before = await jobsOf(c1, "resume");
        assert.equal(before.length, 3);
        assert.ok((await jobsOf(c2, "resume")).length >= 1);
        assert.deepEqual(await jobsOf(c3, "resume"), [], "stage 2's second cluster not begun");
        // The view of a fleet cut short, from the clusters alone.
        const mid = await fleetStatus(run, args);
        assert.equal(mid.stage, "two");
        assert.deepEqual(mid.clusters.map((r) => [r.cluster, r.phase]).slice(0, 1), [[
          "c1",
          "ended",
        ]]);
        assert.equal(mid.clusters[2].phase, "notStarted");
        const again = await run(args);
        assert.equal(again.code, 0, again.stderr);
        assert.match(again.stderr, /fleet: stage one counted/);
        assert.doesNotMatch(again.stderr, /starting cluster c1|\[c1\] .*created job/);
        for (const c of clusters) {
          const jobs = await jobsOf(c, "resume");
          assert.deepEqual(jobs.map((j) => j.node).sort(), ["node-000", "node-001", "node-002"]);
        }
        assert.deepEqual(
          (await jobsOf(c1, "resume")).map((j) => j.uid).sort(),
          before.map((j) => j.uid).sort(),
        );
        // fleet status, with read-only rights in each cluster, agrees with an
        // independent kubectl's count of each cluster's Jobs.
        const readOnly = { nodes: ["get"], jobs: ["get"], pods: ["get"], events: false };
        const viewers = await Promise.all(
          clusters.map((c) =>
            serviceAccount(c, NS, "viewer", { rbac: { ...readOnly, configmaps: ["get"] } })
          ),
        );
        const viewerConfig = await fleetKubeconfig(clusters, viewers.map((v) => v.kubeconfig));
        const view = await fleetStatus(
          (a) => dispatcher(c1, a, { env: { KUBECONFIG: viewerConfig } }),
          args,
        );
        assert.equal(view.stage, undefined);
        for (const [i, c] of clusters.entries()) {
          const jobs = await jobsOf(c, "resume");
          const row = view.clusters[i];
          assert.deepEqual(
            [row.cluster, row.phase, row.succeeded, row.total],
            [CONTEXTS[i], "ended", jobs.filter((j) => j.succeeded).length, jobs.length],
          );
        }
      });

      await t.step("an approval is waited for, recorded with who gave it", async () => {
        const yaml = `stages:
  - {name: one, clusters: [c1]}
  - {name: two, clusters: [c2], approval: true}
`;
        const args = await fleet(yaml, "approve");
        const approveArgs = ["fleet", "approve", "-f", args[2], "two", ...args.slice(3)];
        const live = spawnDispatcher(args, env);
        await eventually(
          () => Promise.resolve(/stage two waits for approval/.test(live.stderr())),
          120_000,
          "the fleet waiting for stage two's approval",
        );
        assert.deepEqual(await jobsOf(c2, "approve"), [], "no Job before the approval");
        const approved = await run(approveArgs);
        assert.equal(approved.code, 0, approved.stderr);
        assert.match(approved.stderr, /stage two approved in cluster c2 by /);
        const r = await live.done;
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, /fleet: stage two approved by /);
        assert.equal((await jobsOf(c2, "approve")).length, 3);
        const cm = await c2.kubectl([
          "get",
          "configmap",
          "-n",
          NS,
          "fleet-approval.approve.two",
          "-o",
          "jsonpath={.data.approvedBy}",
        ]);
        assert.ok(cm.stdout.length > 0, cm.stderr);
      });

      await t.step(
        "a selection that matches no node counts as ended, stage after stage",
        async () => {
          // Its run writes no record: the fleet counts it by the run's word, not a missing record.
          const yaml = "stages: [{name: one, clusters: [c1]}, {name: two, clusters: [c2]}]";
          const r = await run(await fleet(yaml, "none", ["--node-selector", "pool=none"]));
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /\[c1\] .*nothing to do: No resources found[^]*stage one ended/);
          assert.match(r.stderr, /fleet: every stage ended \(2 stages\)/);
          assert.doesNotMatch(r.stderr, /without rolling out/);
        },
      );

      await t.step(
        "two fleet processes at once: the second is refused by the first's lease (exit 3), creating nothing",
        async () => {
          const yaml = "stages: [{name: one, clusters: [c3], approval: true}]";
          const args = await fleet(yaml, "lease");
          const first = spawnDispatcher(args, env);
          await awaitFleet(
            first,
            () => Promise.resolve(/stage one waits for approval/.test(first.stderr())),
            60_000,
            "the first fleet process holding its lease",
          );
          const lease = ["get", "configmap", "-n", NS, "fleet-lease.lease", "-o", "json"];
          const held = JSON.parse((await c3.kubectl(lease)).stdout);
          const second = await run(args);
          // Not 0: a pipeline that started the fleet twice must not go green.
          assert.equal(second.code, 3, second.stderr);
          assert.match(
            second.stderr,
            /refused: fleet lease fleet-lease\.lease in cluster c3 is held by \S+ pid \d+ \(fleet [^)]+\), renewed \S+Z \(\d+ s ago\); creating nothing: stop that process first/,
          );
          assert.doesNotMatch(second.stderr, /starting cluster|created job/);
          // Nothing written by the second: the first's lease, renewed by the first only.
          const after = JSON.parse((await c3.kubectl(lease)).stdout);
          assert.equal(after.data.holderId, held.data.holderId);
          assert.deepEqual(await jobsOf(c3, "lease"), []);
          const status = await run(["fleet", "status", ...args.slice(1)]);
          assert.match(status.stdout, /fleet: run by \S+ pid \d+ \(fleet /, status.stderr);
          const approve = await run(["fleet", "approve", "-f", args[2], "one", ...args.slice(3)]);
          assert.equal(approve.code, 0, approve.stderr);
          const r = await first.done;
          assert.equal(r.code, 0, r.stderr);
          assert.equal((await jobsOf(c3, "lease")).length, 3);
          const released = JSON.parse((await c3.kubectl(lease)).stdout);
          assert.ok(released.data.released, "released at the end");
        },
      );

      await t.step(
        "one cluster's API server stopped 60 s mid-stage: the others finish",
        async () => {
          const yaml = "stages: [{name: one, clusters: [c2, c3]}]";
          const args = await fleet(yaml, "outage", ["--parallelism", "1"], "3s");
          const live = spawnDispatcher(args, env);
          await eventually(
            () => Promise.resolve(/\[c2\] .*created job outage-/.test(live.stderr())),
            60_000,
            "c2's first Job",
          );
          c2.signalApiServer("SIGSTOP");
          const stopped = Date.now();
          try {
            // c3 goes on while c2 cannot be asked anything.
            await eventually(
              async () => (await jobsOf(c3, "outage")).filter((j) => j.succeeded).length === 3,
              55_000,
              "c3's three Jobs succeeded during c2's outage",
            );
            await new Promise((r) => setTimeout(r, Math.max(0, 60_000 - (Date.now() - stopped))));
          } finally {
            c2.signalApiServer("SIGCONT");
          }
          const r = await live.done;
          assert.equal(r.code, 0, r.stderr);
          const jobs = await jobsOf(c2, "outage");
          assert.deepEqual(jobs.map((j) => j.node).sort(), ["node-000", "node-001", "node-002"]);
          assert.ok(jobs.every((j) => j.succeeded), "no node failed");
          assert.match(r.stderr, /\[c2\] .*API outage: .*starts paused/);
          assert.match(r.stderr, /\[c2\] .*starts resume/);
          assert.doesNotMatch(r.stderr, /\[c3\] .*API outage/);
          console.log(`outage: c3 ended during c2's 60 s outage; c2 resumed, exit ${r.code}`);
        },
      );

      const exporter = startExporter();
      const prom = await startPrometheus({ targets: [exporter.target], scrapeIntervalSecs: 1 });
      // A gate refuses a selector with no series: the first scrape first.
      await untilSamples(prom, "e2e_broken", (n) => n > 0);
      try {
        await t.step(
          "a gate breach in stage 1 (real Prometheus) stops the line: stage 2 untouched, exit 5 after the Jobs in flight",
          async () => {
            const yaml = "stages: [{name: one, clusters: [c2]}, {name: two, clusters: [c1, c3]}]";
            const args = await fleet(
              yaml,
              "gbreach",
              ["--parallelism", "1", ...gateArgs(prom, "--on-gate-breach", "exit")],
              "4s",
            );
            const live = spawnDispatcher(args, env);
            await awaitFleet(
              live,
              () => Promise.resolve(/\[c2\] .*created job gbreach-/.test(live.stderr())),
              60_000,
              "c2's first Job",
            );
            await flip(prom, exporter, 1);
            const r = await live.done;
            const ended = Date.now();
            assert.equal(r.code, 5, r.stderr);
            assert.match(
              r.stderr,
              /fleet: stopped the line: cluster c2 \(stage one\) stopped: (a )?health gate (was )?breached: query "e2e_broken > 0"/,
            );
            const jobs = await jobsOf(c2, "gbreach");
            assert.ok(jobs.length < 3, `${jobs.length} Jobs: the breach stopped the rest`);
            assert.ok(jobs.every((j) => j.succeeded! <= ended), "in-flight Jobs finished first");
            assert.deepEqual(await jobsOf(c1, "gbreach"), [], "stage 2 untouched");
            assert.deepEqual(await jobsOf(c3, "gbreach"), [], "stage 2 untouched");
            console.log(`gate breach: c2 stopped at ${jobs.length} of 3 Jobs; stage 2: 0 Jobs`);
          },
        );
        await t.step(
          "a breach in the soak holds it on the pause file; lifted, the soak restarts whole",
          async () => {
            await flip(prom, exporter, 0);
            const soakSecs = 8;
            const yaml = `stages:
  - {name: one, clusters: [c2], soakSecs: ${soakSecs}}
  - {name: two, clusters: [c3]}
`;
            const pause = `${await tempDir("fleet-pause-")}/pause`;
            const args = await fleet(yaml, "gsoak", [...gateArgs(prom), "--pause-file", pause]);
            const live = spawnDispatcher(args, env);
            await awaitFleet(
              live,
              () => Promise.resolve(/soaking after stage one until/.test(live.stderr())),
              90_000,
              "stage one's soak",
            );
            await flip(prom, exporter, 1);
            await awaitFleet(
              live,
              () =>
                Promise.resolve(/cluster c2: health gate breached in the soak/.test(live.stderr())),
              30_000,
              "the breach in the soak",
            );
            await flip(prom, exporter, 0);
            // Longer than the soak, the gauge back to 0: still held by the latch.
            await delay((soakSecs + 2) * 1000);
            assert.deepEqual(await jobsOf(c3, "gsoak"), [], "stage two began while latched");
            assert.ok(await Deno.stat(pause).then(() => true, () => false), "the latch is set");
            await Deno.remove(pause); // a person lifts the pause
            const lifted = Date.now();
            const r = await live.done;
            assert.equal(r.code, 0, r.stderr);
            const two = await jobsOf(c3, "gsoak");
            assert.equal(two.length, 3, r.stderr);
            // creationTimestamp is in whole seconds: at most 1 s early.
            const after = Math.min(...two.map((j) => j.created)) - lifted;
            assert.ok(after >= soakSecs * 1000 - 1000, `stage two ${after} ms after the lift`);
            assert.match(r.stderr, /the soak after stage one holds: cluster c2: /);
            console.log(`soak breach: stage two began ${after} ms after the pause was lifted`);
          },
        );
      } finally {
        await prom.stop();
        await exporter.stop();
      }

      await t.step("a failure in stage 1 stops the line: stage 2 untouched", async () => {
        await c1.createNodes([{ name: "bad-000", labels: { [OUTCOME_LABEL]: "fail" } }]);
        const yaml = `stages:
  - {name: one, clusters: [c1]}
  - {name: two, clusters: [c2, c3]}
`;
        const r = await run(await fleet(yaml, "breach"));
        assert.equal(r.code, 1, r.stderr);
        assert.match(r.stderr, /fleet: stopped the line: cluster c1 \(stage one\) exited 1/);
        assert.deepEqual(await jobsOf(c2, "breach"), []);
        assert.deepEqual(await jobsOf(c3, "breach"), []);
      });
      await t.step(
        "a stop in one cluster holds the other clusters in flight on the latched pause file",
        async () => {
          // c1 has bad-000 (the step above), first by name: it fails first, and
          // --max-failures 0 stops c1's run there; c2, at the same time, would
          // start its third Job at ~20 s.
          const yaml = "stages: [{name: one, clusters: [c1, c2]}, {name: two, clusters: [c3]}]";
          const pause = `${await tempDir("fleet-pause-")}/pause`;
          const args = await fleet(
            yaml,
            "halt",
            ["--parallelism", "1", "--max-failures", "0", "--pause-file", pause],
            "10s",
          );
          const live = spawnDispatcher(args, env);
          await awaitFleet(
            live,
            () => Promise.resolve(/fleet: stopped the line: cluster c1/.test(live.stderr())),
            90_000,
            "c1 stopping the line",
          );
          assert.match(
            live.stderr(),
            /fleet: stopped the line: cluster c1 \(stage one\) stopped: the failure budget of 0 was exceeded.*pause file is latched/,
          );
          assert.match(await Deno.readTextFile(pause), /stopped by cluster c1 \(stage one\)/);
          // Held, not stopped: its Job in flight finishes, then no Job starts while the file is there.
          await awaitFleet(
            live,
            async () => (await jobsOf(c2, "halt")).every((j) => j.succeeded),
            60_000,
            "c2's Job in flight finished",
          );
          const held = (await jobsOf(c2, "halt")).length;
          await delay(5_000);
          assert.equal((await jobsOf(c2, "halt")).length, held, "a Job started while held");
          assert.ok(held < 3, `c2 went on creating Jobs: ${held}\n${live.stderr()}`);
          assert.match(live.stderr(), /\[c2\] .*paused by /);
          await Deno.remove(pause); // a person lifts the pause
          const r = await live.done;
          assert.equal(r.code, 1, r.stderr);
          assert.equal((await jobsOf(c2, "halt")).length, 3, "lifted, c2 went on");
          assert.deepEqual(await jobsOf(c3, "halt"), [], "no further cluster started");
          assert.equal(r.stderr.match(/fleet: stopped the line/g)?.length, 1, r.stderr);
          console.log(`halt: c2 held at ${held} of 3 Jobs until the pause file was removed`);
        },
      );
      await t.step(
        "a stop in one cluster latches the pause on the in-flight clusters' owner Jobs",
        async () => {
          // As the step above, the latch on each cluster's owner Job (--owner-job-name)
          // instead of a pause file: c1 (bad-000 first) stops the line, c2 is held.
          // Jobs of 10 s, as above: c2's third would start at ~20 s, a margin a
          // loaded machine keeps (with 6 s it was ~12 s, half the stop's lead).
          await Promise.all(clusters.map((c) => ownerJob(c, NS, "fleet-owner")));
          const yaml = "stages: [{name: one, clusters: [c1, c2]}, {name: two, clusters: [c3]}]";
          const args = await fleet(
            yaml,
            "ohold",
            ["--parallelism", "1", "--max-failures", "0", "--owner-job-name", "fleet-owner"],
            "10s",
          );
          const live = spawnDispatcher(args, env);
          const owner = ["get", "job", "fleet-owner", "-n", NS, "-o", "json"];
          const pausedOn = async (c: Cluster) =>
            JSON.parse((await c.kubectl(owner)).stdout).metadata.annotations?.[
              "job-dispatcher/paused"
            ];
          await awaitFleet(live, async () => await pausedOn(c2) === "true", 60_000, "c2's latch");
          assert.match(
            live.stderr(),
            /fleet: stopped the line: cluster c1 \(stage one\) stopped: .*the pause is latched on each owner Job: no Job starts in c2/,
          );
          // Held: its Job in flight finishes, then no Job starts while the owner carries the pause.
          await awaitFleet(
            live,
            async () => (await jobsOf(c2, "ohold")).every((j) => j.succeeded),
            30_000,
            "c2's Job in flight finished",
          );
          const held = (await jobsOf(c2, "ohold")).length;
          await delay(4_000);
          assert.equal((await jobsOf(c2, "ohold")).length, held, "a Job started while held");
          assert.ok(held < 3, `c2 went on creating Jobs: ${held}\n${live.stderr()}`);
          const lift = await c2.kubectl(
            ["annotate", "job", "fleet-owner", "-n", NS, "job-dispatcher/paused-"],
          );
          assert.equal(lift.code, 0, lift.stderr);
          const r = await live.done;
          assert.equal(r.code, 1, r.stderr);
          assert.equal((await jobsOf(c2, "ohold")).length, 3, "lifted, c2 went on");
          assert.deepEqual(await jobsOf(c3, "ohold"), [], "no further cluster started");
          console.log(
            `owner hold: c2 held at ${held} of 3 Jobs until its owner's pause was lifted`,
          );
        },
      );
      ok = true;
    } finally {
      removeScratch();
      if (!ok) { for (const c of clusters) console.error(await c.logs(20)); }
      await Promise.all(clusters.map((c) => c.stop({ removeDir: ok })));
      console.log(`fleet: ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  },
});
