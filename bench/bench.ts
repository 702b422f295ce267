/**
 * `deno task bench`: the dispatcher at fleet scale on a real local control
 * plane with kwok nodes, watch mode and forced polling side by side on the
 * same cluster, measured from outside the dispatcher.
 *
 * ```sh
 * deno task bench                                   # quick: N=100, D=2 s, P ∈ {10, 100} (~4 min)
 * BENCH_PROFILE=full deno task bench                # N ∈ {100, 1000, 5000, 10000}: hours, by hand
 * BENCH_PROFILE=full BENCH_N=1000 BENCH_P=100 BENCH_D=10 deno task bench
 * BENCH_MODES=watch deno task bench                 # one mode only
 * BENCH_RENDER_ONLY=1 deno task bench               # re-render results.md (e.g. after editing results/probes.md)
 * ```
 *
 * Other settings: `BENCH_LEASE_SECS` (kwok's node Lease duration; default
 * N/25, at least 40, so Lease renewals stay near 100 writes a second),
 * `BENCH_CONTROLLER_QPS` (client QPS of the controller manager and scheduler;
 * default 200, `0` for theirs), `BENCH_STARTUP_RUNS` (warm-start probes per
 * cluster; default 5), `JOB_DISPATCHER_ENTRY` (what runs; default: the bundle,
 * rebuilt with `deno task bundle`; `main.ts` for the source), `BENCH_V8_FLAGS`
 * (passed as `--v8-flags`, for experiments), `BENCH_ARGS` (more dispatcher
 * flags, e.g. `--node-records failures`), `BENCH_OUT` (the results folder;
 * default bench/results), `BENCH_STATUS_EVERY_SECS` (how often `job-dispatcher
 * status` is timed while a run lives; default 60; once more after the end).
 *
 * Each scenario's results go to bench/results/n<N>-p<P>-d<D>.json; then
 * bench/results.md and bench/inflight-n1000.svg are rendered from every
 * results file there. It never gates on time: it measures and writes.
 *
 * @module
 */

import { parse, stringify } from "yaml";
import { type Cluster, startCluster } from "../e2e/cluster.ts";
import { dispatcherCommand } from "../e2e/_dispatcher.ts";
import { namespace as createNamespace, serviceAccount } from "../e2e/_fixtures.ts";
import {
  auditSummary,
  delta,
  idealSeconds,
  inflightSeries,
  type Mode,
  modes,
  percentile,
  POLL_FLAGS,
  recordWrites,
  refillLatencies,
  requestTotals,
  type Scenario,
  scenarios,
  slotUtilisation,
} from "./_analysis.ts";
import {
  fileSize,
  FirstConnectProxy,
  imageEnv,
  JobTimeline,
  ProcSampler,
  readAudit,
  run,
} from "./_measure.ts";
import {
  type ClusterSettings,
  inflightSvg,
  type Machine,
  resultsMarkdown,
  type RunResult,
  type ScenarioResult,
  type StartupResult,
  thin,
} from "./_render.ts";
import { StatusProbe } from "./_status_probe.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const BENCH_DIR = `${ROOT}bench/`;
const OUT = Deno.env.get("BENCH_OUT")?.replace(/\/?$/, "/");
/** Each scenario's JSON. */
const RESULTS_DIR = OUT ?? `${BENCH_DIR}results/`;
/** Where results.md and the SVG go: bench/, or with $BENCH_OUT (experiments) that folder. */
const REPORT_DIR = OUT ?? BENCH_DIR;
const SVG_NAME = "inflight-n1000.svg";
/** The dispatcher's ServiceAccount in each run's namespace; the audit policy records these only. */
const SA = "dispatcher";
/** The read-only ServiceAccount `status` runs as (the chart's viewer rules), audited apart. */
const VIEWER = "viewer";
/** The viewer rules: reads only; `status` needs nothing else. */
const VIEWER_RBAC = {
  nodes: ["get", "list", "watch"],
  jobs: ["get", "list", "watch"],
  pods: ["get", "list"],
  events: false,
  configmaps: ["get", "list"],
};
/** How often `status` is timed while a run lives. */
const STATUS_EVERY_MS = Number(Deno.env.get("BENCH_STATUS_EVERY_SECS") ?? 60) * 1000;
/** The namespace of the warm-start probes. */
const PROBE_NAMESPACE = "bench-probe";
/** Long enough for the slowest scenario; `kubectl create token` gives one hour by default. */
const TOKEN_DURATION = "6h";
const NODE_BATCH = 500;

let interrupted = false;
// Before prepareEntry sets JOB_DISPATCHER_ENTRY for the runs.
const COMMAND = userCommand();
let running: Deno.ChildProcess | undefined;

function checkInterrupted(): void {
  if (interrupted) throw new Error("Interrupted");
}

function log(text: string): void {
  console.error(`${new Date().toISOString().slice(11, 19)} bench: ${text}`);
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function kubectl(cluster: Cluster, args: string[], stdin?: string): Promise<string> {
  const r = await cluster.kubectl(args, stdin);
  if (r.code !== 0) throw new Error(`Cannot run kubectl ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Where the dispatcher runs: a directory of its own, as a shipped binary would. */
let workDir = ROOT;

/**
 * Builds the bundle unless JOB_DISPATCHER_ENTRY names what to run, and
 * copies it to a directory of its own: another `deno task bundle` during the
 * benchmark cannot change it, and no deno.json there is read at start.
 */
async function prepareEntry(): Promise<{ entry: string; bundleBytes?: number }> {
  const given = Deno.env.get("JOB_DISPATCHER_ENTRY");
  if (given && !given.endsWith(".js")) return { entry: given };
  let bundle = given;
  if (!bundle) {
    log("bundling (deno task bundle)");
    log((await run(Deno.execPath(), ["task", "bundle"])).trim());
    bundle = `${ROOT}dist/job-dispatcher.js`;
  }
  workDir = await Deno.makeTempDir({ prefix: "job-dispatcher-bench-" });
  const entry = `${workDir}/job-dispatcher.js`;
  await Deno.copyFile(bundle, entry);
  Deno.env.set("JOB_DISPATCHER_ENTRY", entry);
  return { entry, bundleBytes: Deno.statSync(entry).size };
}

async function machine(cluster: Cluster, entry: string, bundleBytes?: number): Promise<Machine> {
  const meminfo = Deno.readTextFileSync("/proc/meminfo");
  const cpuinfo = Deno.readTextFileSync("/proc/cpuinfo");
  const version = JSON.parse(await kubectl(cluster, ["version", "-o", "json"]));
  const goMod = Deno.readTextFileSync(`${ROOT}e2e/cluster/go.mod`);
  let commit = (await run("git", ["rev-parse", "--short", "HEAD"])).trim();
  if ((await run("git", ["status", "--porcelain", "--untracked-files=no"])).trim()) {
    commit += "-dirty";
  }
  return {
    nproc: navigator.hardwareConcurrency,
    memoryGiB: Math.round(Number(meminfo.match(/^MemTotal:\s+(\d+)/m)?.[1] ?? 0) / 2 ** 20),
    cpu: cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1]?.trim() ?? "unknown CPU",
    load: Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" "),
    deno: Deno.version.deno,
    kubernetes: version.serverVersion?.gitVersion ?? "unknown",
    kwok: goMod.match(/sigs\.k8s\.io\/kwok (v\S+)/)?.[1] ?? "unknown",
    commit,
    bundleBytes,
    entry: bundleBytes ? "bundle dist/job-dispatcher.js" : `source ${entry.replace(ROOT, "")}`,
  };
}

function nodeName(i: number): string {
  return `node-${String(i).padStart(5, "0")}`;
}

/** Creates `n` nodes in batches (createNodes waits for each batch to be Ready). */
async function createNodes(cluster: Cluster, n: number): Promise<void> {
  const started = Date.now();
  for (let first = 0; first < n; first += NODE_BATCH) {
    checkInterrupted();
    const count = Math.min(NODE_BATCH, n - first);
    await cluster.createNodes(
      Array.from({ length: count }, (_, i) => ({ name: nodeName(first + i) })),
    );
  }
  log(`${n} nodes Ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** The user the dispatcher (or, `viewer`, status) runs as in `namespace`, as the audit log names it. */
function userOf(namespace: string, account = SA): string {
  return `system:serviceaccount:${namespace}:${account}`;
}

/** The namespace of one run. */
function runNamespace(s: Scenario, mode: Mode): string {
  return `bench-${mode}-n${s.n}-p${s.p}-d${s.d}`;
}

/**
 * A namespace with the dispatcher's ServiceAccount bound to exactly the
 * README's RBAC (the e2e suites' fixture); returns its token kubeconfig.
 */
async function account(cluster: Cluster, namespace: string): Promise<string> {
  await createNamespace(cluster, namespace);
  const { kubeconfig } = await serviceAccount(cluster, namespace, SA, {
    tokenDuration: TOKEN_DURATION,
  });
  return kubeconfig;
}

/** A copy of `kubeconfig` in the cluster's folder whose clusters point at `server` (a proxy). */
async function viaServer(cluster: Cluster, kubeconfig: string, server: string): Promise<string> {
  const kc = parse(await Deno.readTextFile(kubeconfig));
  for (const c of kc.clusters) c.cluster.server = server;
  const path = `${cluster.dir}/${SA}.kubeconfig`;
  await Deno.writeTextFile(path, stringify(kc), { mode: 0o600 });
  return path;
}

/** What one spawn of the dispatcher did, seen from outside. */
interface Spawned {
  spawnAt: number;
  exitAt: number;
  exitCode: number;
  timedOut: boolean;
  peakRssBytes: number;
  rssAtPeak: { rssBytes: number; anonBytes: number; fileBytes: number };
  cpuSeconds: number;
  logTail: string;
}

/** `deno run` and its flags, plus `$BENCH_V8_FLAGS` (experiments such as a smaller young generation). */
function denoArgs(): string[] {
  const [run, ...rest] = dispatcherCommand();
  const v8 = Deno.env.get("BENCH_V8_FLAGS");
  return v8 ? [run, `--v8-flags=${v8}`, ...rest] : [run, ...rest];
}

/** `--cpu-prof` into `$BENCH_CPU_PROF` for the measured runs (not the start or `status` probes). */
function profileArgs(): string[] {
  const dir = Deno.env.get("BENCH_CPU_PROF");
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

async function spawnDispatcher(
  args: string[],
  timeoutMs: number,
  profile = false,
): Promise<Spawned> {
  const spawnAt = Date.now();
  const [runArg, ...rest] = denoArgs();
  const child = new Deno.Command(Deno.execPath(), {
    args: [runArg, ...(profile ? profileArgs() : []), ...rest, ...args],
    cwd: workDir,
    env: { ...imageEnv(), NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  running = child;
  const sampler = new ProcSampler(child.pid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGTERM");
  }, timeoutMs);
  const tail: string[] = [];
  let partial = "";
  for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop()!;
    tail.push(...lines);
    if (tail.length > 40) tail.splice(0, tail.length - 40);
  }
  const status = await child.status;
  const exitAt = Date.now();
  running = undefined;
  clearTimeout(timer);
  sampler.stop();
  return {
    spawnAt,
    exitAt,
    exitCode: status.code,
    timedOut,
    peakRssBytes: sampler.peakRssBytes,
    rssAtPeak: sampler.atPeak,
    cpuSeconds: sampler.cpuSeconds,
    logTail: [...tail, partial].filter(Boolean).slice(-15).join("\n"),
  };
}

/**
 * The per-node Job: a pod that runs `d` seconds on its kwok node. The pod
 * carries its outcome itself (see e2e/stages/pod.yaml): otherwise kwok waits
 * for the e2e `outcomes` helper to copy it from the node, and that helper's
 * client (client-go's default 5 requests a second) would pace the whole
 * benchmark at 5 pod starts a second.
 */
async function templateFile(cluster: Cluster, d: number): Promise<string> {
  const path = `${cluster.dir}/bench-d${d}.yaml`;
  await Deno.writeTextFile(
    path,
    `apiVersion: batch/v1
kind: Job
metadata:
  name: bench
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        e2e.job-dispatcher.io/duration: "${d}s"
        e2e.job-dispatcher.io/outcome: succeed
    spec:
      restartPolicy: Never
      containers:
        - name: work
          image: registry.invalid/work:1
          command: ["/bin/true"]
`,
  );
  return path;
}

/** One run of the dispatcher over every node, measured. */
async function measureRun(
  cluster: Cluster,
  s: Scenario,
  mode: Mode,
): Promise<RunResult> {
  const namespace = runNamespace(s, mode);
  const proxy = new FirstConnectProxy(cluster.server);
  try {
    const kubeconfig = await viaServer(cluster, await account(cluster, namespace), proxy.url);
    const viewer = await serviceAccount(cluster, namespace, VIEWER, {
      rbac: VIEWER_RBAC,
      tokenDuration: TOKEN_DURATION,
    });
    const args = [
      "--job-template",
      await templateFile(cluster, s.d),
      "--namespace",
      namespace,
      "--parallelism",
      String(s.p),
      "--kubeconfig",
      kubeconfig,
      ...(mode === "poll" ? POLL_FLAGS : []),
      ...(Deno.env.get("BENCH_ARGS") ?? "").split(/\s+/).filter(Boolean),
    ];
    const timeline = await JobTimeline.start(cluster, namespace);
    const auditOffset = fileSize(cluster.auditLog!);
    const before = requestTotals(await cluster.metrics());
    const ideal = idealSeconds(s);
    // Polling refills only at a poll, so its waves last at least one interval.
    const budgetMs = (4 * Math.ceil(s.n / s.p) * Math.max(s.d + 5, 10) + 600) * 1000;
    log(`${namespace}: dispatching (ideal ${ideal} s)`);
    const status = new StatusProbe(
      denoArgs(),
      ["-n", namespace, "--name-prefix", "bench", "--kubeconfig", viewer.kubeconfig],
      { cwd: workDir, t0: Date.now(), everyMs: STATUS_EVERY_MS },
    );
    status.start();
    const spawned = await spawnDispatcher(args, budgetMs, true);
    log(`${namespace}: exited ${spawned.exitCode}; collecting`);
    // The last completion and the audit lines of the final requests arrive just after the exit.
    await delay(1500);
    const after = requestTotals(await cluster.metrics());
    // The watcher stays on through status's last answer: Jobs of a run
    // stopped early still finish after its exit, and status counts them.
    const statusResult = await status.finish(() => {
      const all = [...timeline.jobs.values()];
      const failed = all.filter((j) => j.failed).length;
      return {
        succeeded: all.filter((j) => j.finishedAt !== undefined).length - failed,
        failed,
        total: s.n,
      };
    });
    await timeline.stop();
    const jobs = [...timeline.jobs.values()];
    statusResult.args = statusResult.args.map((a) => a.replace(/^.*\//, ""));
    const events = await readAudit(cluster.auditLog!, auditOffset);
    const audit = auditSummary(events, userOf(namespace));
    const writes = recordWrites(
      events,
      userOf(namespace),
      spawned.spawnAt,
      spawned.exitAt - spawned.spawnAt,
    );
    const statusAudit = auditSummary(events, userOf(namespace, VIEWER));
    const finished = jobs.filter((j) => j.finishedAt !== undefined);
    const firstCreated = Math.min(...jobs.map((j) => j.createdAt));
    const lastFinished = Math.max(...finished.map((j) => j.finishedAt!));
    const series = inflightSeries(jobs, spawned.spawnAt);
    const refill = refillLatencies(jobs);
    const lifetimes = finished.map((j) => j.finishedAt! - j.createdAt);
    const result: RunResult = {
      mode,
      namespace,
      args: args.map((a) => a.replace(`${cluster.dir}/`, "")),
      exitCode: spawned.exitCode,
      timedOut: spawned.timedOut,
      wallSeconds: (spawned.exitAt - spawned.spawnAt) / 1000,
      idealSeconds: ideal,
      dispatchSeconds: (lastFinished - firstCreated) / 1000,
      utilisation: slotUtilisation(
        series,
        s.p,
        (firstCreated - spawned.spawnAt) / 1000,
        (lastFinished - spawned.spawnAt) / 1000,
      ),
      jobsCreated: jobs.length,
      jobsFinished: finished.length,
      refill: {
        count: refill.length,
        p50: percentile(refill, 50),
        p99: percentile(refill, 99),
        max: refill.length ? Math.max(...refill) : NaN,
      },
      jobLifetime: { p50: percentile(lifetimes, 50), p99: percentile(lifetimes, 99) },
      audit,
      apiserver: delta(before, after),
      peakRssBytes: spawned.peakRssBytes,
      rssAtPeak: spawned.rssAtPeak,
      cpuSeconds: spawned.cpuSeconds,
      firstConnectMs: (proxy.firstConnectAt ?? NaN) - spawned.spawnAt,
      firstRequestMs: audit.firstRequestAt - spawned.spawnAt,
      series: thin(series),
      logTail: spawned.logTail,
      status: { ...statusResult, requests: statusAudit.requests },
      recordWrites: writes,
    };
    log(
      `${namespace}: exit ${result.exitCode}, ${result.wallSeconds.toFixed(1)} s ` +
        `(${(result.wallSeconds / ideal).toFixed(3)} × ideal), ${audit.total} requests, ` +
        `refill p50/p99 ${result.refill.p50}/${result.refill.p99} ms, ` +
        `RSS ${(result.peakRssBytes / 2 ** 20).toFixed(1)} MB, CPU ${result.cpuSeconds} s`,
    );
    const times = [...statusResult.during, ...statusResult.after].map((x) => x.ms);
    log(
      `${namespace}: status ${times.join(", ")} ms; its counts at the end ` +
        `${statusResult.check?.agrees ? "agree" : "DO NOT agree"} with the run's ` +
        `(${JSON.stringify(statusResult.check)}); record writes ${writes.writes} ` +
        `(min gap ${Math.round(writes.minGapMs)} ms, most in 10 s ${writes.maxPer10s})`,
    );
    return result;
  } finally {
    await proxy.close();
  }
}

/** Deletes a run's namespace and waits, so the next run starts on a quiet cluster. */
async function cleanUp(cluster: Cluster, namespace: string): Promise<void> {
  const started = Date.now();
  const r = await cluster.kubectl(["delete", "namespace", namespace, "--wait", "--timeout=900s"]);
  log(
    `${namespace}: deleted in ${((Date.now() - started) / 1000).toFixed(1)} s` +
      (r.code === 0 ? "" : ` (kubectl: ${r.stderr.trim()})`),
  );
}

/** Warm start: spawn → first connection and first request of `--dry-run=client` on one node. */
async function startupProbe(cluster: Cluster, runs: number): Promise<StartupResult> {
  const out: StartupResult["runs"] = [];
  let args: string[] = [];
  const probeKubeconfig = await account(cluster, PROBE_NAMESPACE);
  for (let i = 0; i <= runs; i++) {
    const proxy = new FirstConnectProxy(cluster.server);
    try {
      const kubeconfig = await viaServer(cluster, probeKubeconfig, proxy.url);
      args = [
        "--job-template",
        await templateFile(cluster, 1),
        "--nodes",
        nodeName(0),
        "--dry-run=client",
        "--kubeconfig",
        kubeconfig,
      ];
      const offset = fileSize(cluster.auditLog!);
      const spawned = await spawnDispatcher(args, 60_000);
      await delay(300);
      const audit = auditSummary(
        await readAudit(cluster.auditLog!, offset),
        userOf(PROBE_NAMESPACE),
      );
      // The first run warms the caches and is not counted.
      if (i > 0) {
        out.push({
          firstConnectMs: (proxy.firstConnectAt ?? NaN) - spawned.spawnAt,
          firstRequestMs: audit.firstRequestAt - spawned.spawnAt,
          exitCode: spawned.exitCode,
        });
      }
    } finally {
      await proxy.close();
    }
  }
  log(`warm start → first request: ${out.map((r) => Math.round(r.firstRequestMs)).join(", ")} ms`);
  return { runs: out, args: args.map((a) => a.replace(`${cluster.dir}/`, "")) };
}

/** The command that made the results, from the environment as the user gave it. */
function userCommand(): string {
  const env = [
    "BENCH_PROFILE",
    "BENCH_N",
    "BENCH_P",
    "BENCH_D",
    "BENCH_MODES",
    "BENCH_ARGS",
    "BENCH_LEASE_SECS",
    "BENCH_CONTROLLER_QPS",
    "BENCH_STARTUP_RUNS",
    "BENCH_V8_FLAGS",
    "BENCH_STATUS_EVERY_SECS",
    "BENCH_CPU_PROF",
    "JOB_DISPATCHER_ENTRY",
  ]
    .filter((k) => Deno.env.get(k) !== undefined)
    .map((k) => `${k}=${Deno.env.get(k)}`);
  return [...env, "deno task bench"].join(" ");
}

/**
 * Re-renders results.md and the SVG from every results file, and the
 * hand-written notes of `bench:startup` and `bench:memory` runs in
 * results/probes.md (they need no control plane, so no scenario holds them).
 */
async function render(): Promise<void> {
  const all: ScenarioResult[] = [];
  for await (const entry of Deno.readDir(RESULTS_DIR)) {
    if (!entry.name.endsWith(".json")) continue;
    all.push(JSON.parse(await Deno.readTextFile(`${RESULTS_DIR}${entry.name}`)));
  }
  const probes = await Deno.readTextFile(`${RESULTS_DIR}probes.md`).catch(() => undefined);
  await Deno.writeTextFile(`${REPORT_DIR}results.md`, resultsMarkdown(all, SVG_NAME, probes));
  const n1000 = all
    .filter((s) => s.scenario.n === 1000)
    .sort((a, b) => a.scenario.p - b.scenario.p || a.scenario.d - b.scenario.d);
  const outputs = [`${REPORT_DIR}results.md`, RESULTS_DIR];
  if (n1000.length) {
    await Deno.writeTextFile(`${REPORT_DIR}${SVG_NAME}`, inflightSvg(n1000));
    outputs.push(`${REPORT_DIR}${SVG_NAME}`);
  }
  // The outputs are checked in, so they must pass `deno fmt --check` as written.
  await run(Deno.execPath(), ["fmt", "--quiet", ...outputs]);
}

async function benchCluster(
  n: number,
  list: Scenario[],
  runModes: Mode[],
  prepared: { entry: string; bundleBytes?: number },
): Promise<void> {
  const settings: ClusterSettings = {
    nodeLeaseDurationSeconds: Number(
      Deno.env.get("BENCH_LEASE_SECS") ?? Math.max(40, Math.ceil(n / 25)),
    ),
    controllerQps: Number(Deno.env.get("BENCH_CONTROLLER_QPS") ?? 200) || undefined,
  };
  log(`starting a cluster for N=${n} (${JSON.stringify(settings)})`);
  const cluster = await startCluster({
    audit: {
      users: [
        userOf(PROBE_NAMESPACE),
        ...list.flatMap((s) =>
          runModes.flatMap((mode) => [
            userOf(runNamespace(s, mode)),
            userOf(runNamespace(s, mode), VIEWER),
          ])
        ),
      ],
    },
    nodeLeaseDurationSeconds: settings.nodeLeaseDurationSeconds,
    controllerQps: settings.controllerQps,
  });
  try {
    await createNodes(cluster, n);
    checkInterrupted();
    const startup = await startupProbe(cluster, Number(Deno.env.get("BENCH_STARTUP_RUNS") ?? 5));
    for (const [i, s] of list.entries()) {
      const date = new Date().toISOString();
      const info = await machine(cluster, prepared.entry, prepared.bundleBytes);
      const runs: RunResult[] = [];
      for (const [k, mode] of runModes.entries()) {
        checkInterrupted();
        const r = await measureRun(cluster, s, mode);
        runs.push(r);
        checkInterrupted();
        // The last run's Jobs go with the cluster.
        if (i < list.length - 1 || k < runModes.length - 1) await cleanUp(cluster, r.namespace);
      }
      const result: ScenarioResult = {
        scenario: s,
        date,
        command: COMMAND,
        machine: info,
        cluster: settings,
        runs,
        startup: i === 0 ? startup : undefined,
      };
      await Deno.mkdir(RESULTS_DIR, { recursive: true });
      await Deno.writeTextFile(
        `${RESULTS_DIR}n${s.n}-p${s.p}-d${s.d}.json`,
        JSON.stringify(result, null, 1) + "\n",
      );
      await render();
    }
  } finally {
    log("stopping the cluster");
    await cluster.stop({ removeDir: true });
  }
}

async function main(): Promise<number> {
  if (Deno.env.get("BENCH_RENDER_ONLY")) {
    await render();
    log("rendered bench/results.md from the results files");
    return 0;
  }
  const env = Deno.env.toObject();
  const list = scenarios(env);
  const runModes = modes(env.BENCH_MODES);
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log("interrupted: stopping the dispatcher and the cluster");
    running?.kill("SIGTERM");
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const prepared = await prepareEntry();
  const sizes = [...new Set(list.map((s) => s.n))];
  try {
    for (const n of sizes) {
      checkInterrupted();
      await benchCluster(n, list.filter((s) => s.n === n), runModes, prepared);
    }
  } finally {
    if (workDir !== ROOT) await Deno.remove(workDir, { recursive: true });
  }
  log(`wrote bench/results.md${sizes.includes(1000) ? ` and bench/${SVG_NAME}` : ""}`);
  return 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main());
  } catch (e) {
    console.error(`bench: ${(e as Error).message}`);
    Deno.exit(interrupted ? 130 : 1);
  }
}
