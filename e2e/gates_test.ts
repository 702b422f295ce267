/**
 * The health gates on the real control plane with a real Prometheus (built
 * from its Go module) scraping an exporter of the test's own, whose gauge
 * the test flips: a breach latches, also during a wave's soak, an
 * unreachable Prometheus pauses and resumes by itself, `--on-gate-breach
 * exit` ends with 5 and the next run refuses, a real alerting rule gates, bad
 * input is refused with nothing created; and the same Prometheus scrapes a
 * run's `--metrics-addr` to its final state.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster } from "./cluster.ts";
import { clusterTest, jobField, ownerJob, serviceAccount, suiteStep } from "./_fixtures.ts";
import { dispatcher, eventually, jobsIn, JobWatcher } from "./_dispatcher.ts";
import {
  type Exporter,
  type RunningPrometheus,
  startExporter,
  startPrometheus,
  untilSamples,
} from "./_prometheus.ts";
import { delay, freePorts } from "./_procs.ts";
import { DispatcherProcess } from "./_faults.ts";

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
      - alert: E2ENeverFires
        expr: vector(1) < 0
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

/** All 6 nodes of an owned run got their Job, and each completed. */
async function assertNoNodeFailed(cluster: Cluster, ns: string): Promise<void> {
  const jobs = await nodeJobs(cluster, ns);
  assert.equal(jobs.length, 6);
  assert.ok(jobs.every((j) => j.complete), "no node failed");
}

/** Waits for the pause the dispatcher sets on its owner Job "hook" for a breach. */
async function untilPaused(cluster: Cluster, ns: string): Promise<void> {
  await eventually(
    async () => (await annotations(cluster, ns))["job-dispatcher/paused"] === "true",
    BOUND_MS + 10_000,
    "the dispatcher's own pause on the owner",
  );
}

/** `kubectl annotate job hook` in `ns` with `changes` (`key=value` sets, `key-` removes). */
function annotateHook(cluster: Cluster, ns: string, ...changes: string[]) {
  return cluster.kubectl(["annotate", "job", "hook", "-n", ns, ...changes]);
}

/** Lifts that pause as a person would, with the command the dispatcher names. */
async function liftPause(cluster: Cluster, ns: string): Promise<void> {
  const lift = await annotateHook(
    cluster,
    ns,
    "job-dispatcher/paused-",
    "job-dispatcher/paused-reason-",
  );
  assert.equal(lift.code, 0, lift.stderr);
}

clusterTest("health gates with a real Prometheus", async (t, cluster) => {
  const exporter = startExporter();
  // Prometheus takes its targets at start: the port a run's --metrics-addr
  // will listen on is chosen first (down until that run, as a batch job's is).
  const [metricsPort] = freePorts(1);
  const prom = await startPrometheus({
    targets: [exporter.target, `127.0.0.1:${metricsPort}`],
    rules: RULES,
    scrapeIntervalSecs: SCRAPE_SECS,
  });
  try {
    await untilSamples(prom, "e2e_broken", (n) => n === 1);
    // Each step in order, on the one Prometheus and exporter.
    const steps: [string, () => Promise<void>][] = [
      [
        "a breach mid-run latches: no Job after 2 × (interval + scrape), none 30 s after recovery; the pause lifted, exit 0",
        () => breachLatches(cluster, prom, exporter),
      ],
      [
        "a breach during a soak holds the next wave: no Job of it while latched, nor after the gauge recovers, nor until a whole soak after the pause is lifted; the report shows the breach and the soak's restart",
        () => breachInSoak(cluster, prom, exporter),
      ],
      [
        "a run SIGKILLed while a breach inside a soak is latched on its owner: the re-run opens the next wave no sooner than a whole soak after the pause is lifted",
        () => breachInSoakKilled(cluster, prom, exporter),
      ],
      [
        "a run SIGKILLed inside the soak restarted after a lifted breach: the re-run opens the next wave no sooner than a whole soak after the lift",
        () => restartedSoakKilled(cluster, prom, exporter),
      ],
      [
        'the real Prometheus scrapes --metrics-addr during a run; with --metrics-linger-secs it scrapes the final state: job_dispatcher_nodes{phase="succeeded"} equals the report\'s count',
        () => metricsScraped(cluster, prom, metricsPort),
      ],
      [
        "--on-gate-breach exit: exit 5 once the Jobs in flight finished; the re-run refuses until cleared",
        () => breachExits(cluster, prom, exporter),
      ],
      [
        "Prometheus killed mid-run: starts pause and say so, no node fails; restarted, the run completes",
        () => outagePauses(cluster, prom),
      ],
      [
        "--gate-alerts: a firing alerting rule stops the run before any Job; quiet, the run completes",
        () => alertGates(cluster, prom, exporter),
      ],
      [
        "bad input: bad PromQL, a gate flag without URL, no Prometheus: nothing created",
        () => badInput(cluster, prom),
      ],
      [
        "no data: a query over a series that does not exist, or ALERTS of an alertname no rule has, is refused (exit 2, the selector named), no Job created; --gate-allow-empty lets it run",
        () => noDataRefused(cluster, prom),
      ],
      [
        "no data mid-run: the exporter dies, starts pause within two gate intervals and the log names the selector; back, the run finishes by itself",
        () => noDataPauses(cluster, prom, exporter),
      ],
      [
        "no data mid-run over a range: max_over_time(e2e_broken[10m]) > 5 pauses within two gate intervals of the exporter's death, though the range still holds its samples",
        () =>
          noDataPauses(cluster, prom, exporter, {
            suite: "gdarkrange",
            query: "max_over_time(e2e_broken[10m]) > 5",
            selector: "e2e_broken[10m]",
          }),
      ],
      [
        "--on-gate-breach exit: a run SIGKILLed while it waits for its Jobs in flight leaves the latch; the re-run exits 5 creating no Job",
        () => latchBeforeKill(cluster, prom, exporter),
      ],
      [
        "--on-gate-breach exit: a run that waited for an earlier run of its release reads the latch again when it starts: exit 5, no Job",
        () => latchReadAfterWait(cluster, prom, exporter),
      ],
      [
        "a pause that cannot be written (a ValidatingAdmissionPolicy denies it) ends the run: exit 5, the reason and the clear command; without patch jobs the pre-flight refuses (exit 3)",
        () => pauseRefused(cluster, prom, exporter),
      ],
    ];
    for (const [name, step] of steps) await t.step(name, step);
  } finally {
    await prom.stop();
    await exporter.stop();
  }
});

/**
 * A gated run of its own owner Job "hook" over 6 fresh nodes (Jobs of 2 s,
 * one at a time), once its first Job exists.
 */
async function ownedRun(cluster: Cluster, suite: string, prom: RunningPrometheus, query = QUERY) {
  const { ns, args } = await suiteStep(cluster, suite, { nodes: 6, duration: "2s" });
  await ownerJob(cluster, ns, "hook");
  const watcher = await JobWatcher.start(cluster, ns);
  const run = dispatcher(cluster, [
    ...args,
    ...gateArgs(prom).map((a) => (a === QUERY ? query : a)),
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
    await untilPaused(cluster, ns);
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

    await liftPause(cluster, ns);
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

/** The soak after wave 1 in the soak step: long enough to flip the gauge inside it. */
const SOAK_SECS = 15;

async function breachInSoak(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "gsoak", { nodes: 4, duration: "1s" });
  await ownerJob(cluster, ns, "hook");
  const report = await Deno.makeTempFile({ suffix: ".json" });
  const watcher = await JobWatcher.start(cluster, ns);
  try {
    const run = dispatcher(cluster, [
      ...args,
      ...gateArgs(prom),
      ...["--owner-job-name", "hook", "--parallelism", "2", "--progress-interval-secs", "1"],
      ...["--waves", "1,100%", "--wave-soak-secs", String(SOAK_SECS), "--report", report],
    ]);
    const { wave1, soakEnds } = await untilWave1Done(watcher);
    await flip(prom, exporter, 1);
    assert.ok(Date.now() < soakEnds - BOUND_MS, "the gauge flipped early in the soak");
    await untilPaused(cluster, ns);
    await flip(prom, exporter, 0);
    // Past the soak's end, with the metric healthy again: the latch holds.
    await delay(Math.max(0, soakEnds - Date.now()) + 15_000);
    assert.equal(watcher.seen.size, 1, "no Job of wave 2 while latched, the gauge recovered");
    const lifting = Date.now();
    await liftPause(cluster, ns);
    const r = await run;
    const ended = Date.now();
    assert.equal(r.code, 0, r.stderr);
    const times = [...watcher.times.values()];
    assert.equal(times.length, 4, "every node got its Job");
    const wave2 = times.filter((x) => x !== wave1());
    assert.ok(
      wave2.every((x) => x.added >= lifting),
      "wave 2 began only once the pause was lifted",
    );
    // The soak is watched cleanly: the breach inside it restarts it, whole,
    // from the first clean answer after the lift, not at that answer.
    const opened = Math.min(...wave2.map((x) => x.added));
    assert.ok(
      opened >= lifting + SOAK_SECS * 1000,
      `wave 2 began ${(opened - lifting) / 1000} s after the lift, within the restarted soak`,
    );
    assert.match(r.stderr, new RegExp(`wave 1 of 2 ended \\(1 node\\); soaking ${SOAK_SECS} s`));
    assertReportsSoakBreach(JSON.parse(await Deno.readTextFile(report)), ns, lifting, ended);
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}

/** The soak step's report: wave 1 soaked, one breach inside that soak, latched and lifted. */
// deno-lint-ignore no-explicit-any
function assertReportsSoakBreach(json: any, ns: string, lifting: number, ended: number) {
  assert.equal(json.summary.succeeded, 4);
  const soak = json.waves[0].soak;
  assert.ok(soak?.start && soak.end, `wave 1 has its soak: ${JSON.stringify(json.waves)}`);
  assert.equal(json.breaches.length, 1, JSON.stringify(json.breaches));
  const [b] = json.breaches;
  assert.equal(b.query, QUERY);
  assert.match(b.value, /^e2e_broken\{.*job="e2e".*\} 1$/);
  const at = Date.parse(b.at);
  assert.ok(
    at >= Date.parse(soak.start) && at <= Date.parse(soak.start) + SOAK_SECS * 1000,
    `the breach at ${b.at} fell in the soak ${soak.start} + ${SOAK_SECS} s`,
  );
  assert.equal(b.latch.where, `owner Job ${ns}/hook annotation job-dispatcher/paused`);
  assert.ok(Date.parse(b.latch.set) >= at, "latched after it breached");
  const lifted = Date.parse(b.latch.lifted);
  assert.ok(lifted >= lifting && lifted <= ended, `lifted at ${b.latch.lifted}`);
  assert.ok(
    json.nodes.filter((n: { wave: number }) => n.wave === 2).every(
      (n: { start: string }) => Date.parse(n.start) >= lifted,
    ),
    "wave 2's nodes started after the lift",
  );
  // The soak's clean checks: it restarted once, after the breach, at the
  // first clean answer after the lift, and the gates were clean since then.
  assert.equal(soak.restarts.length, 1, JSON.stringify(soak));
  assert.match(soak.restarts[0].after, /health gate breached: query "e2e_broken > 0"/);
  assert.ok(Date.parse(soak.restarts[0].at) >= lifted, JSON.stringify(soak));
  assert.equal(soak.from, soak.restarts[0].at);
  assert.equal(soak.gates.cleanSince, soak.restarts[0].at);
  assert.ok(Date.parse(soak.end) >= Date.parse(soak.from) + SOAK_SECS * 1000);
}

/**
 * The killed-soak steps' fixture: 3 fresh nodes of 1 s Jobs under owner
 * "hook", wave 1 of one node soaked SOAK_SECS. Starts the first run and,
 * once wave 1's Job is done (its soak begun), breaks the gauge and waits
 * until the run paused its owner; then `body`, with a watch of the Jobs.
 */
async function inBreachedSoak(
  cluster: Cluster,
  prom: RunningPrometheus,
  exporter: Exporter,
  suite: string,
  body: (run: BreachedSoak) => Promise<void>,
): Promise<void> {
  const { ns, args } = await suiteStep(cluster, suite, { nodes: 3, duration: "1s" });
  await ownerJob(cluster, ns, "hook");
  const watcher = await JobWatcher.start(cluster, ns);
  const runArgs = [
    ...args,
    ...gateArgs(prom),
    ...["--owner-job-name", "hook", "--parallelism", "2"],
    ...["--waves", "1,100%", "--wave-soak-secs", String(SOAK_SECS)],
  ];
  try {
    const first = new DispatcherProcess(cluster, runArgs);
    const { wave1, soakEnds } = await untilWave1Done(watcher);
    await flip(prom, exporter, 1);
    await untilPaused(cluster, ns);
    await body({ ns, watcher, runArgs, first, wave1, soakEnds });
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}

/** What a killed-soak step works with: the first run, paused inside wave 1's soak. */
interface BreachedSoak {
  ns: string;
  watcher: JobWatcher;
  runArgs: string[];
  /** The first run, its owner paused by the breach. */
  first: DispatcherProcess;
  /** Wave 1's Job. */
  wave1: () => unknown;
  /** When a soak counted from wave 1's Job's completion ends. */
  soakEnds: number;
}

/** Waits for wave 1's Job to finish: that Job, and when a soak from its completion ends. */
async function untilWave1Done(watcher: JobWatcher) {
  const wave1 = () => [...watcher.times.values()].find((x) => x.finished !== undefined);
  await eventually(() => Promise.resolve(wave1() !== undefined), 60_000, "wave 1's Job done");
  return { wave1, soakEnds: wave1()!.finished! + SOAK_SECS * 1000 };
}

/** Both nodes of wave 2 got their Job, the first no sooner than a whole soak after `lifting`. */
function assertWave2AfterSoak(watcher: JobWatcher, wave1: unknown, lifting: number): void {
  const wave2 = [...watcher.times.values()].filter((x) => x !== wave1);
  assert.equal(wave2.length, 2, "every node got its Job");
  const opened = Math.min(...wave2.map((x) => x.added));
  assert.ok(
    opened >= lifting + SOAK_SECS * 1000,
    `wave 2 began ${(opened - lifting) / 1000} s after the lift, before a whole soak after it`,
  );
}

/**
 * The soak's break outlives the run that saw it: a run killed while its
 * breach is latched leaves only the owner's pause; the re-run's gate sees a
 * healthy metric, and the wave's Job completed longer ago than the soak.
 */
async function breachInSoakKilled(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  await inBreachedSoak(cluster, prom, exporter, "gskill", async (run) => {
    const { watcher, runArgs, ns, first, wave1, soakEnds } = run;
    first.kill("SIGKILL");
    await first.ended;
    await flip(prom, exporter, 0);
    const rerun = dispatcher(cluster, runArgs);
    // Past the soak counted from the Job's completion, the metric healthy.
    await delay(Math.max(0, soakEnds - Date.now()) + 5_000);
    assert.equal(watcher.seen.size, 1, "no Job of wave 2 while the owner stays paused");
    const lifting = Date.now();
    await liftPause(cluster, ns);
    const r = await rerun;
    assert.equal(r.code, 0, r.stderr);
    assertWave2AfterSoak(watcher, wave1(), lifting);
  });
}

/**
 * The restarted soak outlives the run that restarted it: a run killed after
 * the lift, inside the soak restarted by it, leaves a healthy metric and no
 * pause; the wave's Job completed longer ago than the soak.
 */
async function restartedSoakKilled(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  await inBreachedSoak(cluster, prom, exporter, "gsrk", async (run) => {
    const { watcher, runArgs, ns, first, wave1, soakEnds } = run;
    await flip(prom, exporter, 0);
    // Past the soak counted from the Job's completion, then lifted.
    await delay(Math.max(0, soakEnds - Date.now()) + 2_000);
    const lifting = Date.now();
    await liftPause(cluster, ns);
    assert.ok(
      await first.waitFor(/soak starts again/),
      `the first run restarted its soak: ${first.stderr}`,
    );
    await delay(3_000);
    first.kill("SIGKILL");
    await first.ended;
    assert.equal(watcher.seen.size, 1, "wave 2 had not opened when killed");
    const r = await dispatcher(cluster, runArgs);
    assert.equal(r.code, 0, r.stderr);
    assertWave2AfterSoak(watcher, wave1(), lifting);
  });
}

/** Prometheus's instant query `expr`: each sample's value, by its labels. */
async function promQuery(prom: RunningPrometheus, expr: string): Promise<number[]> {
  const res = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await res.json();
  assert.equal(body.status, "success", JSON.stringify(body));
  return body.data.result.map((s: { value: [number, string] }) => Number(s.value[1]));
}

async function metricsScraped(cluster: Cluster, prom: RunningPrometheus, port: number) {
  const { args } = await suiteStep(cluster, "gprom", { nodes: 4, duration: "2s" });
  const report = await Deno.makeTempFile({ suffix: ".json" });
  const target = `instance="127.0.0.1:${port}"`;
  let ended = false;
  const run = dispatcher(cluster, [
    ...args,
    ...["--parallelism", "1", "--report", report],
    ...["--metrics-addr", `127.0.0.1:${port}`, "--metrics-linger-secs", "30"],
  ]).finally(() => (ended = true));
  // During the run: Prometheus has the target up and a Job counted.
  await eventually(
    async () =>
      (await promQuery(prom, `job_dispatcher_jobs_created_total{${target}} > 0`)).length > 0,
    60_000,
    "a scrape of the run in Prometheus",
  );
  assert.equal(ended, false, "scraped while the run lived");
  const health = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(await health.text(), "ok\n");
  const r = await run;
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /metrics: serving the final state for 30 s \(--metrics-linger-secs\)/);
  assert.match(r.stderr, /metrics: the final state was scraped \d+ times? from 1 address in 30 s/);
  const summary = JSON.parse(await Deno.readTextFile(report)).summary;
  // The run is gone: Prometheus's next scrape of it fails (up 0) and marks
  // its series stale, so an instant query now finds nothing; the last value
  // before that is how the run ended. One target's scrapes are appended in
  // order, so once up is 0 the run's last scrape is in the TSDB.
  await eventually(
    async () => (await promQuery(prom, `up{${target}} == 0`)).length > 0,
    30_000,
    "Prometheus to see the run's listener gone",
  );
  const succeeded = `job_dispatcher_nodes{phase="succeeded",${target}}`;
  assert.deepEqual(await promQuery(prom, succeeded), [], "stale once the run is gone");
  const last = (m: string) => promQuery(prom, `last_over_time(${m}[10m])`);
  assert.deepEqual(await last(succeeded), [summary.succeeded]);
  assert.deepEqual(await last(`job_dispatcher_jobs_created_total{${target}}`), [summary.total]);
  assert.deepEqual(await last(`job_dispatcher_nodes{phase="queued",${target}}`), [0]);
  assert.equal(summary.succeeded, 4);
  const over = (expr: string) => promQuery(prom, expr.replaceAll("SEL", `{${target}}[10m]`));
  assert.deepEqual(await over("resets(job_dispatcher_jobs_created_total SEL)"), [0], "a counter");
  assert.deepEqual(
    await over("last_over_time(job_dispatcher_node_duration_seconds_count SEL)"),
    [summary.succeeded],
    "each success observed once",
  );
  assert.ok((await last(`job_dispatcher_api_requests_total{code="201",${target}}`))[0] >= 4);
  assert.deepEqual(await over("max_over_time(job_dispatcher_paused SEL)"), [0]);
  assert.deepEqual(await over("last_over_time(job_dispatcher_gate_breaches_total SEL)"), [0]);
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
    await assertNoNodeFailed(cluster, ns);
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
  // Each refused with its code and one line naming the bad input, nothing created.
  const refused = async (flags: string[], code: number, message: RegExp) => {
    const r = await dispatcher(cluster, [...args, ...flags]);
    assert.equal(r.code, code, r.stderr);
    assert.match(r.stderr, message);
    await nothing();
    return r;
  };
  const bad = await refused(
    ["--gate-prometheus-url", prom.url, "--gate-query", "sum(e2e_broken))", ...exit],
    2,
    /Invalid --gate-query "sum\(e2e_broken\)\)": Prometheus rejected it: .*parse error/,
  );
  assert.equal(bad.stderr.trim().split("\n").filter((l) => /error/i.test(l)).length, 1);

  await refused(
    ["--gate-query", "up == 0"],
    2,
    /Invalid --gate-query: it needs --gate-prometheus-url URL/,
  );

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  await refused(
    ["--gate-prometheus-url", `http://127.0.0.1:${port}`, "--gate-query", "up == 0", ...exit],
    3,
    /Cannot reach Prometheus http:\/\/127\.0\.0\.1:\d+ .*nothing was created/,
  );
}

/** A query over a series no exporter has. */
const MISSING = "e2e_no_such_series > 0";

async function noDataRefused(cluster: Cluster, prom: RunningPrometheus) {
  const { ns, args } = await suiteStep(cluster, "gnodata", { nodes: 2, duration: "200ms" });
  const gate = [
    ...["--gate-prometheus-url", prom.url, "--gate-query", MISSING],
    ...["--gate-interval-secs", String(INTERVAL_SECS), "--on-gate-breach", "exit"],
  ];
  const r = await dispatcher(cluster, [...args, ...gate]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(
    r.stderr,
    /Invalid --gate-query "e2e_no_such_series > 0": its selector e2e_no_such_series matches no series/,
  );
  assert.match(r.stderr, /--gate-allow-empty e2e_no_such_series/);
  // Independently of the dispatcher's word: the API server has no Job of the namespace.
  const jobs = await cluster.kubectl(["get", "jobs", "-n", ns, "-o", "name"]);
  assert.equal(jobs.code, 0, jobs.stderr);
  assert.equal(jobs.stdout.trim(), "", "no Job created");
  // ALERTS of an alert no rule has (a typo) could never fire: refused too.
  // The missing series allowed by name, and a second query: ALERTS of `alertname`.
  const withAlert = (alertname: string) =>
    dispatcher(cluster, [
      ...args,
      ...gate,
      ...["--gate-allow-empty", "e2e_no_such_series"],
      ...["--gate-query", `ALERTS{alertname="${alertname}"}`],
    ]);
  const typo = await withAlert("E2ENeverFire");
  assert.equal(typo.code, 2, typo.stderr);
  assert.match(typo.stderr, /alertname "E2ENeverFire" names no alerting rule/);
  // Meant to be absent: allowed by name, and ALERTS of an alert that never fires needs no flag.
  const ok = await withAlert("E2ENeverFires");
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal((await nodeJobs(cluster, ns)).length, 2);
}

async function noDataPauses(
  cluster: Cluster,
  prom: RunningPrometheus,
  exporter: Exporter,
  o = { suite: "gdark", query: QUERY, selector: "e2e_broken" },
) {
  const { ns, watcher, run } = await ownedRun(cluster, o.suite, prom, o.query);
  try {
    exporter.down(true);
    const died = Date.now();
    await untilSamples(prom, "e2e_broken", (n) => n === 0);
    await delay(BOUND_MS + 10_000);
    const atBack = watcher.seen.size;
    console.log(
      `no data: last Job created ${lastCreated(watcher) - died} ms after the exporter died ` +
        `(bound ${BOUND_MS} ms); ${atBack} Jobs while it was down`,
    );
    assert.ok(atBack < 6, `${atBack} Jobs: starts paused while the series was stale`);
    assert.ok(
      lastCreated(watcher) <= died + BOUND_MS,
      `a Job was created ${lastCreated(watcher) - died} ms after the exporter died`,
    );
    // status says why the rollout is idle, though the run is not paused: the dark selector.
    const dark = `selector ${o.selector} of query ${JSON.stringify(o.query)} matches no series`;
    const asked = Date.now();
    const gates = await statusGates(cluster, ns, "nodata");
    assert.equal(gates.detail, dark);
    const text = await dispatcher(cluster, ["status", "-n", ns, "--owner-job-name", "hook"]);
    assert.ok(text.stdout.includes(`\ngates: no data: ${dark} (starts paused)\n`), text.stdout);
    console.log(`no data: status said it (-o json, then text) in ${Date.now() - asked} ms`);
    exporter.down(false);
    const r = await run;
    assert.equal(r.code, 0, r.stderr);
    assert.ok(
      r.stderr.includes(
        `: selector ${o.selector} of query ${JSON.stringify(o.query)} matches no series; ` +
          "starts resume by themselves when it is back",
      ),
      r.stderr,
    );
    assert.match(r.stderr, /health gate: data again/);
    // The pause's own word for when the data went dark: within two gate intervals.
    const since = Date.parse(/no data since (\S+):/.exec(r.stderr)![1]);
    console.log(`no data: starts paused ${since - died} ms after the exporter died`);
    assert.ok(
      since - died <= 2 * INTERVAL_SECS * 1000,
      `paused ${since - died} ms after the exporter died (bound ${2 * INTERVAL_SECS} s)`,
    );
    assert.doesNotMatch(r.stderr, /breached/);
    await assertNoNodeFailed(cluster, ns);
  } finally {
    exporter.down(false);
    await watcher.stop();
  }
}

/**
 * `status -o json` of the run owned by "hook" in `ns`: its `run.gates`, once
 * it says `state` (the record writes a change within 10 s).
 */
async function statusGates(
  cluster: Cluster,
  ns: string,
  state: string,
): Promise<Record<string, unknown>> {
  let gates: Record<string, unknown> | null = null;
  await eventually(
    async () => {
      const r = await dispatcher(cluster, [
        ...["status", "-n", ns, "--owner-job-name", "hook", "-o", "json"],
      ]);
      gates = JSON.parse(r.stdout).run.gates;
      return gates?.state === state;
    },
    20_000,
    `status saying the gates are ${state}`,
  );
  return gates!;
}

async function latchBeforeKill(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "gkill", { nodes: 4, duration: "30s" });
  const gate = gateArgs(prom, "--on-gate-breach", "exit");
  const watcher = await JobWatcher.start(cluster, ns);
  try {
    const run = dispatcher(cluster, [...args, ...gate, "--parallelism", "2"], {
      // The gate's own breach line (told once its latch was tried), not the
      // engine's "paused by" notice, which comes the moment starts stop.
      signal: { name: "SIGKILL", when: /; the run ends once the Jobs in flight finished/ },
    });
    await eventually(() => Promise.resolve(watcher.seen.size >= 2), 60_000, "the first Jobs");
    await flip(prom, exporter, 1);
    const r = await run;
    assert.notEqual(r.code, 0, "killed");
    const jobs = (await nodeJobs(cluster, ns)).length;
    assert.ok(jobs < 4, `${jobs} Jobs: the breach held the rest`);
    const cm = await cluster.kubectl(["get", "configmap", "-n", ns, "gkill-gate-breach"]);
    assert.equal(cm.code, 0, `the latch outlived the SIGKILL: ${cm.stderr}`);

    await flip(prom, exporter, 0);
    const again = await dispatcher(cluster, [...args, ...gate, "--parallelism", "2"]);
    assert.equal(again.code, 5, again.stderr);
    assert.match(again.stderr, /Refusing to start: a health gate stopped an earlier run/);
    assert.equal((await nodeJobs(cluster, ns)).length, jobs, "the re-run created no Job");
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}

/** A ValidatingAdmissionPolicy (and binding) that denies the `paused` annotation on Jobs of `ns`. */
function denyPause(ns: string): string {
  return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: e2e-deny-pause-${ns}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [batch], apiVersions: [v1], operations: [UPDATE], resources: [jobs]}
  validations:
    - expression: "!has(object.metadata.annotations) || !('job-dispatcher/paused' in object.metadata.annotations)"
      message: pausing is not allowed here
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: e2e-deny-pause-${ns}}
spec:
  policyName: e2e-deny-pause-${ns}
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ${ns}}}
`;
}

async function pauseRefused(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "gdeny", { nodes: 4, duration: "2s" });
  await ownerJob(cluster, ns, "hook");
  const owned = [...args, ...gateArgs(prom), "--owner-job-name", "hook", "--parallelism", "1"];
  // The pre-flight: without patch jobs, refused before anything is created.
  const { kubeconfig } = await serviceAccount(cluster, ns, "nopatch", {
    rbac: { jobs: ["get", "list", "watch", "create", "delete"] },
  });
  const pre = await dispatcher(cluster, owned, { env: { KUBECONFIG: kubeconfig } });
  assert.equal(pre.code, 3, pre.stderr);
  assert.match(
    pre.stderr,
    /Missing permission: cannot patch jobs \(in namespace gdeny; for --on-gate-breach pause\)/,
  );
  assert.equal((await nodeJobs(cluster, ns)).length, 0, "the pre-flight created nothing");

  const applied = await cluster.kubectl(["apply", "-f", "-"], denyPause(ns));
  assert.equal(applied.code, 0, applied.stderr);
  // The policy takes effect a moment after it is written.
  await eventually(
    async () => {
      const a = await annotateHook(cluster, ns, "job-dispatcher/paused=true");
      if (a.code === 0) await annotateHook(cluster, ns, "job-dispatcher/paused-");
      return a.code !== 0;
    },
    30_000,
    "the policy to deny the pause",
  );
  const watcher = await JobWatcher.start(cluster, ns);
  try {
    const run = dispatcher(cluster, owned);
    await eventually(() => Promise.resolve(watcher.seen.size >= 1), 60_000, "the first Job");
    await flip(prom, exporter, 1);
    const r = await Promise.race([run, delay(90_000).then(() => undefined)]);
    assert.ok(
      r,
      "the run ended by itself once its pause could not be written (held forever before)",
    );
    assert.equal(r.code, 5, r.stderr);
    assert.match(
      r.stderr,
      /Cannot pause the run for the health gate's breach: .*pausing is not allowed here/,
    );
    assert.ok(r.stderr.includes(`kubectl delete configmap -n ${ns} gdeny-gate-breach`), r.stderr);
    assert.ok((await nodeJobs(cluster, ns)).length < 4, "the breach stopped the rest");
  } finally {
    await watcher.stop();
    exporter.set(0);
    await cluster.kubectl(["delete", "-f", "-"], denyPause(ns));
  }
}

/** Labels owner `hook` as one of the hook Jobs of release `rel`, as the chart does. */
async function hookOf(cluster: Cluster, ns: string, hook: string, rel: string): Promise<void> {
  await ownerJob(cluster, ns, hook);
  const l = await cluster.kubectl(["label", "job", hook, "-n", ns, `job-dispatcher/hook=${rel}`]);
  assert.equal(l.code, 0, l.stderr);
}

/** Waits until the wall clock is in a later second than Job `name`'s creationTimestamp. */
async function laterSecondThan(cluster: Cluster, ns: string, name: string): Promise<void> {
  const created = new Date(
    await jobField(cluster, ns, name, "{.metadata.creationTimestamp}"),
  ).getTime();
  await eventually(() => Promise.resolve(Date.now() >= created + 1_100), 5_000, "a later second");
}

async function latchReadAfterWait(cluster: Cluster, prom: RunningPrometheus, exporter: Exporter) {
  const { ns, args } = await suiteStep(cluster, "gwait", { nodes: 4, duration: "10s" });
  const gate = [...args, ...gateArgs(prom, "--on-gate-breach", "exit"), "--parallelism", "2"];
  const watcher = await JobWatcher.start(cluster, ns);
  try {
    await hookOf(cluster, ns, "hook-a", "gwait");
    const a = new DispatcherProcess(cluster, [...gate, "--owner-job-name", "hook-a"]);
    await eventually(() => Promise.resolve(watcher.seen.size >= 2), 60_000, "run A's first Jobs");
    // creationTimestamp counts whole seconds and owners of one second are
    // ordered by UID (owner_guard.ts isEarlier): Helm makes a later
    // revision's hook seconds later at least, so the test's does too.
    await laterSecondThan(cluster, ns, "hook-a");
    // A later revision's hook (an upgrade that changed its gate: it never
    // breaches on the flip itself) opens its gate, no latch yet, and waits for A.
    await hookOf(cluster, ns, "hook-b", "gwait");
    const b = new DispatcherProcess(cluster, [
      ...gate.map((x) => (x === QUERY ? "e2e_broken > 100" : x)),
      ...["--owner-job-name", "hook-b"],
    ]);
    assert.ok(await b.waitFor(/waiting for the run of earlier hook job hook-a/), b.stderr);
    await flip(prom, exporter, 1);
    const ra = await a.ended;
    assert.equal(ra.code, 5, ra.stderr);
    await flip(prom, exporter, 0);
    const jobs = (await nodeJobs(cluster, ns)).length;
    assert.ok(jobs < 4, `${jobs} Jobs: the breach stopped run A`);
    // Run A is over; its hook Job goes, as Helm's hook deletion would take it.
    const del = await cluster.kubectl(["delete", "job", "hook-a", "-n", ns, "--cascade=orphan"]);
    assert.equal(del.code, 0, del.stderr);
    const rb = await b.ended;
    assert.ok(!rb.timedOut, rb.stderr);
    assert.equal(rb.code, 5, rb.stderr);
    assert.match(rb.stderr, /Refusing to start: a health gate stopped an earlier run/);
    assert.equal((await nodeJobs(cluster, ns)).length, jobs, "run B created no Job");
  } finally {
    await watcher.stop();
    exporter.set(0);
  }
}
