/**
 * The health gates on the real control plane with a real Prometheus (built
 * from its Go module) scraping an exporter of the test's own, whose gauge
 * the test flips: a breach latches, an unreachable Prometheus pauses and
 * resumes by itself, `--on-gate-breach exit` ends with 5 and the next run
 * refuses, a real alerting rule gates, bad input is refused with nothing
 * created.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster } from "./cluster.ts";
import { clusterTest, ownerJob, suiteStep } from "./_fixtures.ts";
import { dispatcher, eventually, jobsIn, JobWatcher } from "./_dispatcher.ts";
import {
  type Exporter,
  type RunningPrometheus,
  startExporter,
  startPrometheus,
  untilSamples,
} from "./_prometheus.ts";
import { delay } from "./_procs.ts";

/** The gate's interval in these runs, and Prometheus's scrape interval. */
const INTERVAL_SECS = 2;
const SCRAPE_SECS = 1;
/** The acceptance's bound: no Job created later than this after the flip. */
const BOUND_MS = 2 * (INTERVAL_SECS + SCRAPE_SECS) * 1000;
const QUERY = "e2e_broken > 0";
const RULES = `groups:
  - name: e2e
    rules:
      - alert: E2EBroken
        expr: e2e_broken > 0
        labels: {severity: page}
`;

/** Flips the gauge and waits until Prometheus has scraped it. */
async function flip(prom: RunningPrometheus, exporter: Exporter, value: number): Promise<number> {
  exporter.set(value);
  const at = Date.now();
  await untilSamples(prom, QUERY, (n) => (value > 0 ? n > 0 : n === 0));
  return at;
}

/** The gate flags of these runs. */
function gateArgs(prom: RunningPrometheus, ...extra: string[]): string[] {
  return [
    "--gate-prometheus-url",
    prom.url,
    "--gate-query",
    QUERY,
    "--gate-interval-secs",
    String(INTERVAL_SECS),
    ...extra,
  ];
}

/** The latest time the watcher saw a Job created. */
function lastCreated(w: JobWatcher): number {
  return Math.max(0, ...[...w.times.values()].map((t) => t.added));
}

/** The per-node Jobs of `ns` (the owner Job "hook" is none). */
async function nodeJobs(cluster: Cluster, ns: string) {
  return (await jobsIn(cluster, ns)).filter((j) => j.node !== "");
}

/** The owner Job's annotations. */
async function annotations(cluster: Cluster, ns: string): Promise<Record<string, string>> {
  const r = await cluster.kubectl(["get", "job", "hook", "-n", ns, "-o", "json"]);
  return JSON.parse(r.stdout).metadata.annotations ?? {};
}

clusterTest("health gates with a real Prometheus", async (t, cluster) => {
  const exporter = startExporter();
  const prom = await startPrometheus({
    targets: [exporter.target],
    rules: RULES,
    scrapeIntervalSecs: SCRAPE_SECS,
  });
  try {
    await untilSamples(prom, "e2e_broken", (n) => n === 1);
    await t.step(
      "a breach mid-run latches: no Job after 2 × (interval + scrape), none 30 s after recovery; the pause lifted, exit 0",
      () => breachLatches(cluster, prom, exporter),
    );
    await t.step(
      "--on-gate-breach exit: exit 5 once the Jobs in flight finished; the re-run refuses until cleared",
      () => breachExits(cluster, prom, exporter),
    );
    await t.step(
      "Prometheus killed mid-run: starts pause and say so, no node fails; restarted, the run completes",
      () => outagePauses(cluster, prom),
    );
    await t.step(
      "--gate-alerts: a firing alerting rule stops the run before any Job; quiet, the run completes",
      () => alertGates(cluster, prom, exporter),
    );
    await t.step(
      "bad input: bad PromQL, a gate flag without URL, no Prometheus: nothing created",
      () => badInput(cluster, prom),
    );
  } finally {
    await prom.stop();
    await exporter.stop();
  }
});

/**
 * A gated run of its own owner Job "hook" over 6 fresh nodes (Jobs of 2 s,
 * one at a time), once its first Job exists.
 */
async function ownedRun(cluster: Cluster, suite: string, prom: RunningPrometheus) {
  const { ns, args } = await suiteStep(cluster, suite, { nodes: 6, duration: "2s" });
  await ownerJob(cluster, ns, "hook");
  const watcher = await JobWatcher.start(cluster, ns);
  const run = dispatcher(cluster, [
    ...args,
    ...gateArgs(prom),
    "--owner-job-name",
    "hook",
    "--parallelism",
    "1",
    "--progress-interval-secs",
    "1",
  ]);
  await eventually(() => Promise.resolve(watcher.seen.size >= 1), 60_000, "the first Job");
  return { ns, watcher, run };
}

async function breachLatches(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, watcher, run } = await ownedRun(cluster, "glatch", prom);
  try {
    const flipped = await flip(prom, exporter, 1);
    await eventually(
      async () => (await annotations(cluster, ns))["job-dispatcher/paused"] === "true",
      BOUND_MS + 10_000,
      "the dispatcher's own pause on the owner",
    );
    const pausedAt = Date.now();
    await delay(BOUND_MS);
    const atLatch = watcher.seen.size;
    assert.ok(
      lastCreated(watcher) <= flipped + BOUND_MS,
      `a Job was created ${
        lastCreated(watcher) - flipped
      } ms after the flip (bound ${BOUND_MS} ms)`,
    );
    assert.ok(atLatch < 6, `${atLatch} Jobs before the breach held the rest`);
    console.log(
      `breach: pause set ${pausedAt - flipped} ms after the flip; last Job created ` +
        `${lastCreated(watcher) - flipped} ms after it (bound ${BOUND_MS} ms); ${atLatch} Jobs`,
    );
    const reason = (await annotations(cluster, ns))["job-dispatcher/paused-reason"];
    assert.match(reason, /^query "e2e_broken > 0" returned e2e_broken\{.*job="e2e".*\} 1$/);

    await flip(prom, exporter, 0);
    await delay(30_000);
    assert.equal(watcher.seen.size, atLatch, "still no new Job 30 s after the metric recovered");

    const lift = await cluster.kubectl([
      "annotate",
      "job",
      "hook",
      "-n",
      ns,
      "job-dispatcher/paused-",
      "job-dispatcher/paused-reason-",
    ]);
    assert.equal(lift.code, 0, lift.stderr);
    const r = await run;
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /health gate breached: query "e2e_broken > 0" returned e2e_broken\{[^}]*\} 1; no new Job starts, Jobs in flight finish; the run pauses itself/,
    );
    assert.match(r.stderr, /resume: kubectl annotate job -n \S+ hook job-dispatcher\/paused-/);
    assert.match(
      r.stderr,
      /paused by health gate breached: .* \(latched: lifting the run's pause resumes\)/,
    );
    const jobs = await nodeJobs(cluster, ns);
    assert.equal(jobs.length, 6, "every node got its Job");
    assert.ok(jobs.every((j) => j.complete), "every node completed");
    const events = await cluster.kubectl([
      "get",
      "events",
      "-n",
      ns,
      "--field-selector",
      "involvedObject.name=hook,reason=GateBreached",
      "-o",
      "jsonpath={.items[*].message}",
    ]);
    assert.match(events.stdout, /query "e2e_broken > 0" returned e2e_broken\{[^}]*\} 1/);
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}

async function breachExits(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "gexit", { nodes: 6, duration: "3s" });
  const gate = gateArgs(prom, "--on-gate-breach", "exit");
  const watcher = await JobWatcher.start(cluster, ns);
  try {
    const run = dispatcher(cluster, [...args, ...gate, "--parallelism", "2"]);
    await eventually(() => Promise.resolve(watcher.seen.size >= 2), 60_000, "the first Jobs");
    const flipped = await flip(prom, exporter, 1);
    const r = await run;
    const ended = Date.now();
    assert.equal(r.code, 5, r.stderr);
    assert.ok(lastCreated(watcher) <= flipped + BOUND_MS, "no Job created past the bound");
    const jobs = await nodeJobs(cluster, ns);
    assert.ok(jobs.length < 6, `${jobs.length} Jobs: the breach stopped the rest`);
    assert.ok(jobs.every((j) => j.complete), "the Jobs in flight finished before the exit");
    const finished = [...watcher.times.values()].map((x) => x.finished ?? Infinity);
    assert.ok(finished.every((f) => f <= ended), "every Job finished before the run ended");
    assert.match(r.stderr, /rollout stopped: a health gate was breached: query "e2e_broken > 0"/);
    const clear = `kubectl delete configmap -n ${ns} gexit-gate-breach`;
    assert.ok(r.stderr.includes(clear), r.stderr);

    await flip(prom, exporter, 0);
    const refused = await dispatcher(cluster, [...args, ...gate]);
    assert.equal(refused.code, 5, refused.stderr);
    assert.match(refused.stderr, /Refusing to start: a health gate stopped an earlier run/);
    assert.ok(refused.stderr.includes(clear), refused.stderr);
    assert.equal((await nodeJobs(cluster, ns)).length, jobs.length, "the refusal created nothing");

    const del = await cluster.kubectl(clear.split(" ").slice(1));
    assert.equal(del.code, 0, del.stderr);
    const again = await dispatcher(cluster, [...args, ...gate]);
    assert.equal(again.code, 0, again.stderr);
    const all = await nodeJobs(cluster, ns);
    assert.equal(all.length, 6);
    assert.ok(all.every((j) => j.complete));
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}

async function outagePauses(cluster: Cluster, prom: RunningPrometheus) {
  const { ns, watcher, run } = await ownedRun(cluster, "gdown", prom);
  try {
    await prom.kill();
    const killed = Date.now();
    await delay(20_000);
    const atRestart = watcher.seen.size;
    assert.ok(atRestart < 6, `${atRestart} Jobs: starts paused while Prometheus was down`);
    console.log(
      `outage: last Job created ${lastCreated(watcher) - killed} ms after Prometheus was killed; ` +
        `${atRestart} Jobs at the restart 20 s later`,
    );
    assert.ok(
      lastCreated(watcher) <= killed + BOUND_MS,
      `a Job was created ${lastCreated(watcher) - killed} ms after Prometheus died`,
    );
    await prom.restart();
    const r = await run;
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /health gate: Prometheus http:\/\/127\.0\.0\.1:\d+ unreachable since \S+ \(.*\); starts resume by themselves when it answers; no node fails for it/,
    );
    assert.match(r.stderr, /health gate: Prometheus http:\/\/\S+ answers again; starts resume/);
    assert.doesNotMatch(r.stderr, /breached/);
    const jobs = await nodeJobs(cluster, ns);
    assert.equal(jobs.length, 6);
    assert.ok(jobs.every((j) => j.complete), "no node failed");
    assert.equal((await annotations(cluster, ns))["job-dispatcher/paused"], undefined);
  } finally {
    await watcher.stop();
  }
}

async function alertGates(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "galert", { nodes: 3, duration: "200ms" });
  const gate = [
    "--gate-prometheus-url",
    prom.url,
    "--gate-alerts",
    "E2E.*",
    "--gate-interval-secs",
    String(INTERVAL_SECS),
    "--on-gate-breach",
    "exit",
  ];
  const firing = async () => {
    const res = await fetch(`${prom.url}/api/v1/alerts`);
    const alerts = (await res.json()).data.alerts as { state: string }[];
    return alerts.some((a) => a.state === "firing");
  };
  exporter.set(1);
  try {
    await eventually(firing, 30_000, "the alerting rule to fire");
    const r = await dispatcher(cluster, [...args, ...gate]);
    assert.equal(r.code, 5, r.stderr);
    assert.match(
      r.stderr,
      /a health gate was breached: query "ALERTS\{alertstate=\\?"firing\\?",alertname=~\\?"E2E\.\*\\?"\}" returned firing: E2EBroken/,
    );
    assert.equal((await nodeJobs(cluster, ns)).length, 0, "no Job started under a firing alert");
  } finally {
    exporter.set(0);
  }
  await eventually(async () => !(await firing()), 30_000, "the alert to resolve");
  const del = await cluster.kubectl(["delete", "configmap", "-n", ns, "galert-gate-breach"]);
  assert.equal(del.code, 0, del.stderr);
  const ok = await dispatcher(cluster, [...args, ...gate]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal((await nodeJobs(cluster, ns)).length, 3);
}

async function badInput(cluster: Cluster, prom: RunningPrometheus) {
  const { ns, args } = await suiteStep(cluster, "gbad", { nodes: 2, duration: "200ms" });
  const exit = ["--on-gate-breach", "exit"];
  const nothing = async () => {
    assert.equal((await nodeJobs(cluster, ns)).length, 0, "no Job created");
    const cms = await cluster.kubectl(["get", "configmaps", "-n", ns, "-o", "name"]);
    assert.doesNotMatch(cms.stdout, /gate-breach/, "no latch created");
  };
  const bad = await dispatcher(cluster, [
    ...args,
    "--gate-prometheus-url",
    prom.url,
    "--gate-query",
    "sum(e2e_broken))",
    ...exit,
  ]);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(
    bad.stderr,
    /Invalid --gate-query "sum\(e2e_broken\)\)": Prometheus rejected it: .*parse error/,
  );
  assert.equal(bad.stderr.trim().split("\n").filter((l) => /error/i.test(l)).length, 1);
  await nothing();

  const noUrl = await dispatcher(cluster, [...args, "--gate-query", "up == 0"]);
  assert.equal(noUrl.code, 2, noUrl.stderr);
  assert.match(noUrl.stderr, /Invalid --gate-query: it needs --gate-prometheus-url URL/);
  await nothing();

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const down = await dispatcher(cluster, [
    ...args,
    "--gate-prometheus-url",
    `http://127.0.0.1:${port}`,
    "--gate-query",
    "up == 0",
    ...exit,
  ]);
  assert.equal(down.code, 3, down.stderr);
  assert.match(
    down.stderr,
    /Cannot reach Prometheus http:\/\/127\.0\.0\.1:\d+ .*nothing was created/,
  );
  await nothing();
}
