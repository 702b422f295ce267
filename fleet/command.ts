/**
 * `job-dispatcher fleet` and `fleet approve`, wired: one client per
 * cluster, every cluster reached before the first Job anywhere, and each
 * cluster's rollout the run the CLI carries out (`runDispatcher`), with the
 * run flags and the cluster's context, kubeconfig and namespace.
 *
 * @module
 */

import {
  checkTemplateNamespace,
  instantiateJob,
  type JobTemplate,
  templateHash,
  trackingKeys,
  UsageError,
} from "../job.ts";
import { ConfigError, type Kube } from "../kube/client.ts";
import { whoAmI } from "../kube/whoami.ts";
import { Logger } from "../report/log.ts";
import type { ReportInput } from "../report/report.ts";
import { reportFiles, type RunConfig, type RunContext } from "../run/config.ts";
import { EXIT, resolveNamespace, runDispatcher } from "../run/run.ts";
import { checkPermissions, resolveOwner, validateOnServer } from "../run/preflight.ts";
import { FleetLease, fleetNeeds, processAlive, readHolder, thisProcess } from "./lease.ts";
import {
  approvedBy,
  readRecord,
  readRecordEnd,
  recordApproval,
  recordCause,
  recordedEnd,
  recordSettled,
  type RolloutKey,
} from "./cluster.ts";
import { type ClusterLine, type ClusterRunner, runFleet } from "./fleet.ts";
import { type Stop, StopLine } from "./line.ts";
import { openSoakGates } from "./soak_gates.ts";
import { fleetJunit, fleetReport, fleetTimeline } from "./report.ts";
import { fleetEta } from "./eta.ts";
import { pauseFileFor, pauseOwnerFor, readExitLatch } from "../gates/latch.ts";
import { pauseFileExists } from "../engine/pause.ts";
import { fleetClusters, type FleetSpec } from "./spec.ts";
import { type ClusterFacts, type FleetView, fleetView, renderFleetView } from "./status.ts";

/** What the command needs from the process (main.ts gives it). */
export interface FleetEnv {
  /** Connects to one cluster as the CLI does (no request made). */
  connect: (cfg: RunConfig, log: Logger) => Promise<Kube>;
  /**
   * The run's surroundings in one cluster; `signal` (default: SIGINT/SIGTERM)
   * stops the run as those do.
   */
  context: (kube: Kube, log: Logger, signal?: AbortSignal) => RunContext;
  /** Says an error as the CLI does, on `log`, and returns its exit code. */
  errorCode: (e: unknown, log: Logger) => number;
  /** The log of one cluster's run (its lines name the cluster). */
  logFor: (cluster: string) => Logger;
  /** The fleet's own log. */
  log: Logger;
  /** Aborted by SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** How to call `fleet approve` for a stage, for the waiting line. */
  approveHint: (stage: string) => string;
  /** Writes the status view. */
  stdout: (text: string) => void;
  /** `$HOME`, for FLEET.yaml's `~/` paths. */
  home?: string;
}

/** One cluster, connected. */
export interface Member {
  name: string;
  cfg: RunConfig;
  kube: Kube;
  log: Logger;
  key: RolloutKey;
}

/**
 * A kubeconfig path of FLEET.yaml as kubectl reads one in a kubeconfig: `~/`
 * is the home folder, and a relative path is relative to the file that
 * names it (FLEET.yaml's folder), not to wherever the command runs.
 *
 * @example
 * ```ts
 * fleetPath("eu2.yaml", "/etc/fleet/FLEET.yaml", "/root"); // "/etc/fleet/eu2.yaml"
 * ```
 */
export function fleetPath(path: string, source: string, home: string | undefined): string {
  if (path.startsWith("~/") && home) return `${home}/${path.slice(2)}`;
  if (path.startsWith("/") || path.startsWith("~")) return path;
  const dir = source.includes("/") ? source.slice(0, source.lastIndexOf("/")) : ".";
  return `${dir}/${path}`;
}

/**
 * The run flags as one cluster applies them: its context, and FLEET.yaml's
 * kubeconfig, namespace and Prometheus for it; `--report` gets the cluster's name
 * before its ending (`r.json` → `r.prod-eu1.json`).
 */
export function clusterConfig(
  opts: RunConfig,
  spec: FleetSpec,
  name: string,
  home?: string,
): RunConfig {
  const o = spec.clusters[name] ?? {};
  if (o.gatePrometheusUrl !== undefined && !opts.gate) {
    throw new UsageError(
      `Invalid fleet file ${spec.source}: cluster ${name}: gatePrometheusUrl replaces ` +
        "--gate-prometheus-url for it; pass the --gate-* flags (with the other clusters' URL)",
    );
  }
  const gate = opts.gate && { ...opts.gate, url: o.gatePrometheusUrl ?? opts.gate.url };
  const perCluster = (path: string) => path.replace(/(\.[^./]*)?$/, (ext) => `.${name}${ext}`);
  const report = opts.report && perCluster(opts.report);
  // Every --report of the cluster's run gets the cluster's name, not only the first.
  const reports = opts.reports?.map((r) => ({ ...r, path: perCluster(r.path) }));
  return {
    ...opts,
    context: name,
    kubeconfig: o.kubeconfig === undefined
      ? opts.kubeconfig
      : fleetPath(o.kubeconfig, spec.source, home),
    namespace: o.namespace ?? opts.namespace,
    gate,
    report,
    reports,
  };
}

function prefixOf(opts: RunConfig, template: JobTemplate): string {
  const prefix = opts.namePrefix ?? template.metadata?.name;
  if (!prefix) {
    throw new UsageError(
      `Invalid job template ${opts.jobTemplate}: it has no metadata.name; set it or --name-prefix`,
    );
  }
  return prefix;
}

/**
 * Connects to one cluster (no request made) and works out where its rollout lives.
 *
 * @throws {UsageError} when the kubeconfig lacks the context (or cannot serve it)
 */
async function connectOne(
  name: string,
  opts: RunConfig,
  template: JobTemplate,
  spec: FleetSpec,
  env: FleetEnv,
): Promise<Member> {
  const cfg = clusterConfig(opts, spec, name, env.home);
  const log = env.logFor(name);
  const prefix = prefixOf(opts, template);
  let kube: Kube;
  try {
    kube = await env.connect(cfg, log);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new UsageError(`Invalid fleet file ${spec.source}: cluster ${name}: ${e.message}`);
  }
  const key = {
    namespace: resolveNamespace(cfg, env.context(kube, log)),
    prefix,
    templateHash: templateHash(template, opts.pin),
  };
  const member: Member = { name, cfg, kube, log, key };
  return member;
}

/**
 * Connects to each cluster and asks each who we are: a context the
 * kubeconfig lacks is bad input (exit 2), a cluster that does not answer
 * is exit 3; either way nothing was created anywhere.
 */
export async function connectAll(
  names: string[],
  opts: RunConfig,
  template: JobTemplate,
  spec: FleetSpec,
  env: FleetEnv,
): Promise<{ members: Member[]; code?: number }> {
  const members: Member[] = [];
  for (const name of names) {
    try {
      members.push(await connectOne(name, opts, template, spec, env));
    } catch (e) {
      for (const x of members) x.kube.close();
      throw e;
    }
  }
  const reached = await Promise.all(members.map(async (m) => {
    try {
      const user = await whoAmI(m.kube);
      m.log.info(`connected to ${m.kube.server}${user ? ` as ${user}` : ""}`);
      return EXIT.ok;
    } catch (e) {
      // The cause goes into the fleet's own line, not a line of its own:
      // issue 26 asks one line that names the cluster, and a log search for
      // the cluster then finds why it was unreachable too.
      const said: string[] = [];
      const capture = new Logger("json", (line) => void said.push(JSON.parse(line).msg));
      const code = env.errorCode(e, capture);
      const cause = said.length ? `: ${said.join("; ")}` : "";
      env.log.error(
        `fleet: cluster ${m.name} cannot be reached at start${cause}; nothing was created in any cluster`,
        { event: "fleetUnreachable", cluster: m.name },
      );
      return code;
    }
  }));
  return { members, code: reached.find((c) => c !== EXIT.ok) };
}

/**
 * The template checked by each cluster's API server (a dry-run create, as a
 * run does before its first Job): a stage-3 cluster without the namespace,
 * or that refuses the template or our right to create Jobs, is found before
 * stage 1 creates anything. Returns the first failure's exit code.
 */
async function checkTemplateEverywhere(
  members: Member[],
  opts: RunConfig,
  template: JobTemplate,
  env: FleetEnv,
): Promise<number | undefined> {
  const codes = await Promise.all(members.map(async (m) => {
    try {
      checkTemplateNamespace(template, m.key.namespace, opts.jobTemplate);
      // A node name no cluster has: a dry run validates and stores nothing.
      const job = instantiateJob({
        template,
        node: { name: "fleet-preflight", uid: "00000000-0000-0000-0000-000000000000" },
        prefix: m.key.prefix,
        namespace: m.key.namespace,
        keys: trackingKeys(opts.trackingLabelPrefix),
        pin: opts.pin,
        templateHash: m.key.templateHash,
      });
      await validateOnServer(m.kube, m.key.namespace, job);
      return undefined;
    } catch (e) {
      const code = env.errorCode(e, m.log);
      env.log.error(
        `fleet: cluster ${m.name} refused the rollout at start; nothing was created in any cluster`,
        { event: "fleetRefused", cluster: m.name },
      );
      return code;
    }
  }));
  return codes.find((c) => c !== undefined);
}

/** The fleet's questions, answered by the members' clusters. */
function runnerOf(
  members: Map<string, Member>,
  template: JobTemplate,
  cleanup: JobTemplate | undefined,
  env: FleetEnv,
  reports: Map<string, ReportInput>,
  signal: () => AbortSignal,
): ClusterRunner {
  const m = (name: string) => members.get(name)!;
  return {
    endedAt: (c) => recordedEnd(m(c).kube, m(c).key),
    settled: (c) => recordSettled(m(c).kube, m(c).key),
    run: async (c, line) => {
      const ctx = clusterRunContext(env, m(c), line, (input) => reports.set(c, input), signal());
      try {
        return await runDispatcher(m(c).cfg, template, ctx, cleanup);
      } catch (e) {
        return env.errorCode(e, m(c).log);
      }
    },
    cause: async (c, code) => {
      const said = await readRecord(m(c).kube, m(c).key).catch(() => undefined);
      return recordCause(said) ?? `exit ${code} (see its lines above)`;
    },
    approvedBy: (stage, c) => approvedBy(m(c).kube, m(c).key, stage),
    soakGates: (clusters) => openSoakGates(clusters.map(m), env.log, pauseFileExists),
  };
}

/**
 * The context of one cluster's run in the fleet: the process's, with the
 * fleet's line as one more pause gate (another cluster's stop holds it) and
 * its hooks (the run's stops, its report, a selection of no node).
 */
export function clusterRunContext(
  env: FleetEnv,
  m: Pick<Member, "kube" | "log">,
  line: ClusterLine,
  onReport: (input: ReportInput) => void,
  signal: AbortSignal,
): RunContext {
  // Its stops (a breach, the failure budget) stop the line through an
  // explicit hook, not by listening for the log's event names.
  return {
    // The fleet's signal, not only the process's: a lease lost to another
    // process (ours expired in an outage) stops the runs in flight as
    // SIGTERM does, or they would go on beside that process's runs.
    ...env.context(m.kube, m.log, signal),
    hold: line.hold,
    onStop: line.stopped,
    onReport,
    onNothingToDo: line.nothingToDo,
    onRecordLost: line.recordLost,
  };
}

/**
 * `job-dispatcher fleet -f FLEET.yaml [run flags]`: rolls the template out
 * to every cluster of the fleet, stage by stage. Returns the exit code.
 *
 * @throws {UsageError} on bad input (a context the kubeconfig lacks), before anything is created
 */
export async function fleetCommand(
  spec: FleetSpec,
  opts: RunConfig,
  template: JobTemplate,
  cleanup: JobTemplate | undefined,
  env: FleetEnv,
): Promise<number> {
  const { members, code } = await connectAll(fleetClusters(spec), opts, template, spec, env);
  try {
    if (code !== undefined) return code;
    if (opts.dryRun) return await dryRunFleet(spec, members, opts, { template, cleanup }, env);
    const refused = await checkTemplateEverywhere(members, opts, template, env);
    if (refused !== undefined) return refused;
    const reports = new Map<string, ReportInput>();
    const byName = new Map(members.map((x) => [x.name, x]));
    let runSignal = env.signal;
    const runner = runnerOf(byName, template, cleanup, env, reports, () => runSignal);
    const line = stopLine(opts, members);
    const held = await withLease(spec, members, env, (signal) => {
      runSignal = signal; // the runs', too: a lost lease stops them
      return runFleet(spec, {
        runner,
        log: env.log,
        signal,
        now: Date.now,
        sleep,
        approvalPollMs: Math.max(1000, opts.pollIntervalSecs * 1000),
        approveHint: env.approveHint,
        line,
      });
    });
    if (held.yielded !== undefined) return held.yielded;
    const exitCode = held.code;
    // The runs' own files and this one go through the run's file access.
    const io = env.context(members[0].kube, env.log);
    const outcome = { exitCode, stoppedBy: line.stopped };
    // As a run's: a fleet whose report is lost fails.
    const written = writeFleetReport(spec, opts, outcome, reports, io, env);
    return written || exitCode !== EXIT.ok ? exitCode : EXIT.failed;
  } finally {
    for (const x of members) x.kube.close();
  }
}

/**
 * Writes the fleet's own reports, one per `--report` (json: one section per
 * cluster, naming each cluster's JSON report; html: one lane per cluster;
 * junit: each cluster's suites), beside each cluster's run reports. Whether
 * every one was written (or there was nothing to write).
 */
export function writeFleetReport(
  spec: FleetSpec,
  opts: RunConfig,
  outcome: { exitCode: number; stoppedBy?: Stop },
  reports: ReadonlyMap<string, ReportInput>,
  io: RunContext,
  env: FleetEnv,
): boolean {
  const targets = reportFiles(opts);
  // The fleet's JSON names each cluster's JSON report: the cluster's run
  // writes every --report under its name, and only a JSON one parses.
  const json = targets.find((t) => t.format === "json");
  const clusterJson = (c: string) =>
    clusterConfig({ ...opts, report: json?.path }, spec, c, env.home).report!;
  let ok = true;
  for (const { path, format } of targets) {
    const text = format === "html"
      ? fleetTimeline(spec, outcome, reports)
      : format === "junit"
      ? fleetJunit(spec, reports)
      : JSON.stringify(fleetReport(spec, outcome, clusterJson, io.readFile), null, 2) + "\n";
    try {
      io.writeFile(path, text);
    } catch (e) {
      env.log.error(`Cannot write report ${path}: ${(e as Error).message}`);
      ok = false;
      continue;
    }
    const per = format === "html" ? "one lane" : "one section";
    env.log.info(`fleet: report written to ${path}, ${per} per cluster`);
  }
  return ok;
}

/**
 * Runs `fleet` holding the fleet's lease in every cluster (fleet/lease.ts):
 * its rights asked first (the pre-flight), then taken before the first
 * write anywhere, renewed meanwhile, released at the end. A live lease of
 * another process refuses this one: one line naming the holder, nothing
 * created, exit 3 (the clusters could not be used before any dispatch), as
 * `helm upgrade` fails while another operation holds the release. Not exit
 * 0: a single run yields with exit 0 only when asked (`--yield-to-live-run`),
 * and a pipeline that started the fleet twice must not go green having rolled
 * out nothing. A lease lost
 * meanwhile (ours expired in an outage and another process took it) stops
 * the fleet as a signal does, exit 3.
 */
export async function withLease(
  spec: FleetSpec,
  members: Member[],
  env: FleetEnv,
  fleet: (signal: AbortSignal) => Promise<number>,
): Promise<{ yielded: number } | { yielded?: undefined; code: number }> {
  const failed = await firstFailure(
    members,
    env,
    async (m) => {
      const approvals = spec.stages.filter((s) => s.approval && s.clusters.includes(m.name));
      const needs = fleetNeeds(m.key.namespace, m.key.prefix, approvals.map((s) => s.name));
      await checkPermissions(m.kube, needs);
    },
  );
  if (failed !== undefined) return { yielded: failed };
  const lost = new AbortController();
  const lease = new FleetLease(
    members.map((m) => ({ name: m.name, kube: m.kube, namespace: m.key.namespace })),
    members[0].key.prefix,
    thisProcess(spec.source),
    {
      now: Date.now,
      sleep,
      alive: processAlive,
      warn: (msg) => env.log.warn(msg),
      lost: (cluster, msg) => {
        env.log.error(msg, { event: "fleetLeaseLost", cluster });
        lost.abort();
      },
    },
  );
  let refused: string | undefined;
  try {
    refused = await lease.take();
  } catch (e) {
    return { yielded: env.errorCode(e, env.log) };
  }
  if (refused) {
    env.log.error(refused, { event: "fleetLeaseHeld", lease: lease.name });
    return { yielded: EXIT.cluster };
  }
  try {
    const code = await fleet(AbortSignal.any([env.signal, lost.signal]));
    return { code: lost.signal.aborted && !env.signal.aborted ? EXIT.cluster : code };
  } finally {
    await lease.release();
  }
}

/** Calls `check` for each member at once; the first failure's exit code (said on its log), else undefined. */
async function firstFailure(
  members: Member[],
  env: FleetEnv,
  check: (m: Member) => Promise<void>,
): Promise<number | undefined> {
  const codes = await Promise.all(members.map(async (m) => {
    try {
      await check(m);
      return undefined;
    } catch (e) {
      return env.errorCode(e, m.log);
    }
  }));
  return codes.find((c) => c !== undefined);
}

/**
 * The fleet's order in one line.
 *
 * @example
 * ```ts
 * fleetOrder(parseFleet("stages: [{name: a, clusters: [x], soakSecs: 5}, {name: b, clusters: [y]}]", "f"));
 * // "stage a: x, then a soak of 5 s; stage b: y"
 * ```
 */
export function fleetOrder(spec: FleetSpec): string {
  return spec.stages.map((s, i) => {
    const soak = s.soakSecs > 0 && i < spec.stages.length - 1
      ? `, then a soak of ${s.soakSecs} s`
      : "";
    return `stage ${s.name}${s.approval ? " (after approval)" : ""}: ${
      s.clusters.join(", ")
    }${soak}`;
  }).join("; ");
}

/**
 * \`--dry-run\` across the fleet: each cluster's dry run (its plan, its Jobs
 * or their server validation), in stage order, with no wait and nothing
 * created; in text each headed by a comment line naming the cluster (a YAML
 * stream stays one), with \`-o json\` one document of the order and every
 * cluster's plan. Returns the first non-zero exit code, else 0.
 */
async function dryRunFleet(
  spec: FleetSpec,
  members: Member[],
  opts: RunConfig,
  templates: { template: JobTemplate; cleanup?: JobTemplate },
  env: FleetEnv,
): Promise<number> {
  const json = opts.dryRun === "plan" && opts.output === "json";
  const plans: Record<string, unknown> = {};
  // Each cluster's estimate (--estimate-from), for the fleet's ETA.
  const secs = new Map<string, number>();
  let first = 0;
  if (!json) env.stdout(`# fleet ${spec.source}: ${fleetOrder(spec)}\n`);
  for (const s of spec.stages) {
    for (const c of s.clusters) {
      const m = members.find((x) => x.name === c)!;
      const { code, out } = await dryRunOne(m, m.cfg, templates, env);
      first ||= code;
      if (json) {
        plans[c] = out.trim() ? JSON.parse(out) : null;
        const e = (plans[c] as { estimate?: { seconds: number } } | null)?.estimate;
        if (e) secs.set(c, e.seconds);
      } else {
        // Client mode prints a YAML stream per cluster: one stream across them.
        const sep = opts.dryRun === "client" && out.trim() ? "---\n" : "";
        env.stdout(`${sep}# cluster ${c} (stage ${s.name})\n${out}`);
        if (opts.dryRun === "plan" && opts.estimateFrom !== undefined) {
          const plan = await dryRunOne(m, { ...m.cfg, output: "json" }, templates, env);
          const e = plan.out.trim() ? JSON.parse(plan.out).estimate : undefined;
          if (e) secs.set(c, e.seconds);
        }
      }
    }
  }
  if (opts.dryRun !== "plan") return first;
  const eta = fleetEta(spec, (c) => secs.get(c));
  if (json) {
    env.stdout(JSON.stringify({ stages: spec.stages, eta, clusters: plans }, null, 2) + "\n");
  } else {
    env.stdout(
      "text" in eta
        ? `# fleet ETA: ${eta.text}\n`
        : `# fleet ETA: unknown, no estimate for ${
          eta.missing.join(", ")
        } (--estimate-from REPORT)\n`,
    );
  }
  return first;
}

/** One cluster's dry run, its output captured. */
async function dryRunOne(
  m: Member,
  cfg: RunConfig,
  templates: { template: JobTemplate; cleanup?: JobTemplate },
  env: FleetEnv,
): Promise<{ code: number; out: string }> {
  let out = "";
  const ctx = { ...env.context(m.kube, m.log), stdout: (t: string) => (out += t + "\n") };
  try {
    return { code: await runDispatcher(cfg, templates.template, ctx, templates.cleanup), out };
  } catch (e) {
    return { code: env.errorCode(e, m.log), out };
  }
}

/**
 * `job-dispatcher fleet approve -f FLEET.yaml STAGE [run flags]`: records
 * the approval of the stage, for this template, in each of its clusters,
 * with who approved (the API server's whoami). Returns the exit code.
 */
export async function fleetApprove(
  spec: FleetSpec,
  stage: string,
  opts: RunConfig,
  template: JobTemplate,
  env: FleetEnv,
): Promise<number> {
  const s = spec.stages.find((x) => x.name === stage);
  if (!s) {
    throw new UsageError(
      `Invalid stage ${stage}: ${spec.source} has ${spec.stages.map((x) => x.name).join(", ")}`,
    );
  }
  const { members, code } = await connectAll(s.clusters, opts, template, spec, env);
  try {
    if (code !== undefined) return code;
    for (const m of members) {
      const by = (await whoAmI(m.kube)) ?? "an unnamed user";
      await recordApproval(m.kube, m.key, stage, by, Date.now());
      env.log.info(`fleet: stage ${stage} approved in cluster ${m.name} by ${by}`, {
        event: "fleetApproval",
        stage,
        cluster: m.name,
        by,
      });
    }
    return EXIT.ok;
  } finally {
    for (const x of members) x.kube.close();
  }
}

/**
 * `job-dispatcher fleet status -f FLEET.yaml [run flags] [-o json]`: reads
 * each cluster's run record and its stage's approval (read-only) and prints
 * where the fleet stands. A cluster that cannot be read is a row that says
 * so, and the exit code is 3; else 0.
 */
export async function fleetStatus(
  spec: FleetSpec,
  opts: RunConfig,
  template: JobTemplate,
  output: "text" | "json",
  env: FleetEnv,
): Promise<number> {
  const members: Member[] = [];
  try {
    for (const name of fleetClusters(spec)) {
      members.push(await connectOne(name, opts, template, spec, env));
    }
    const stageOf = new Map(spec.stages.flatMap((s) => s.clusters.map((c) => [c, s.name])));
    const facts = new Map<string, ClusterFacts>();
    await Promise.all(members.map(async (m) => {
      try {
        const { record, endedAt } = await readRecordEnd(m.kube, m.key);
        facts.set(m.name, {
          record,
          endedAt,
          latch: await readExitLatch(m.kube, m.key.namespace, m.key.prefix),
          approvedBy: await approvedBy(m.kube, m.key, stageOf.get(m.name)!),
        });
      } catch (e) {
        facts.set(m.name, { error: (e as Error).message });
      }
    }));
    // The pause file a breach in the soak latches (fleet/soak_gates.ts), read as the fleet reads it.
    const pauseFile = opts.maintenance.pauseFile;
    const paused = pauseFile && pauseFileExists(pauseFile) ? pauseFile : undefined;
    const view = fleetView(spec, facts, members[0].key.templateHash, Date.now(), { paused });
    view.heldBy = await leaseHolderOf(members);
    env.stdout(output === "json" ? JSON.stringify(view, null, 2) + "\n" : renderFleetView(view));
    return view.clusters.some((r) => r.phase === "unreadable") ? EXIT.cluster : EXIT.ok;
  } finally {
    for (const x of members) x.kube.close();
  }
}

/** The live holder of the fleet's lease in the first cluster that has one (unreadable ones skipped). */
async function leaseHolderOf(members: Member[]): Promise<FleetView["heldBy"]> {
  for (const m of members) {
    const member = { name: m.name, kube: m.kube, namespace: m.key.namespace };
    const h = await readHolder(member, m.key.prefix, Date.now()).catch(() => undefined);
    if (!h) continue;
    const renewedAt = new Date(h.renewedAt).toISOString().replace(/\.\d+Z$/, "Z");
    return { holder: h.holder, fleet: h.fleet, renewedAt, cluster: m.name };
  }
  return undefined;
}

/**
 * The fleet's stop-the-line: with `--pause-file` (and `--on-gate-breach
 * pause`) the clusters in flight hold on that file, latched as a breach
 * latches it; else they stop.
 */
function stopLine(opts: RunConfig, members: Member[]): StopLine {
  const holds = opts.gate?.onBreach !== "exit";
  const pauseFile = holds ? opts.maintenance.pauseFile : undefined;
  return new StopLine({
    pauseFile,
    write: pauseFileFor,
    exists: pauseFileExists,
    owner: holds && opts.ownerJobName
      ? (c, reason) => latchOwner(opts, members, c, reason)
      : undefined,
  });
}

/**
 * Latches the line's pause on cluster `c`'s owner Job as a breach latches
 * it, so its run's owner gate holds it and the `kubectl annotate` it prints lifts it.
 *
 * @throws {ApiError} when the API refuses (that cluster then stops instead)
 */
async function latchOwner(opts: RunConfig, members: Member[], c: string, reason: string) {
  const m = members.find((x) => x.name === c)!;
  const namespace = m.key.namespace;
  const owner = await resolveOwner(m.cfg, m.kube, namespace);
  if (!owner) throw new Error(`cluster ${c}: no owner Job ${opts.ownerJobName} to latch`);
  const pausedKey = trackingKeys(m.cfg.trackingLabelPrefix).paused;
  await pauseOwnerFor({ kube: m.kube, namespace, owner, pausedKey }, reason);
}

/** Waits `ms`, or until `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
