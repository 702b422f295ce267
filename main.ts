/**
 * job-dispatcher: run exactly one Kubernetes Job per selected node, paced.
 * The CLI entry point, and the only place that exits the process.
 *
 * @module
 */

import { parseJobTemplate, UsageError } from "./job.ts";
import { ApiError, ConfigError, Kube, type UnreachableNote } from "./kube/client.ts";
import { Logger, STDERR } from "./report/log.ts";
import { HELP, type Options, parseOptions, requestedLogFormat } from "./cli/options.ts";
import { EXIT, PermissionError, runDispatcher } from "./run/run.ts";
import { describeApiError } from "./run/preflight.ts";
import { apiStatsLines } from "./report/summary.ts";
import { reportFiles } from "./run/config.ts";
import { connectedLine, whoAmI } from "./kube/whoami.ts";
import { parseStatusOptions, STATUS_HELP } from "./cli/status_options.ts";
import { runStatus } from "./status/status.ts";
import { StopSignals } from "./cli/signals.ts";
import { FLEET_HELP, type FleetOptions, parseFleetOptions } from "./cli/fleet_options.ts";
import { parseFleet } from "./fleet/spec.ts";
import { fleetApprove, fleetCommand, type FleetEnv, fleetStatus } from "./fleet/command.ts";
import { helpText } from "./cli/commands.ts";
import { completionScript } from "./cli/completion.ts";
import { completeWords } from "./cli/complete.ts";
import { parseRbacOptions, RBAC_HELP } from "./cli/rbac_options.ts";
import { rbacCommandText } from "./rbac/command.ts";

/** The release version; `--version` prints it. */
export const VERSION = "0.1.0";

/** Stamped by the bundle task; "dev" when run from source. */
const COMMIT = "dev";

async function readTemplate(path: string, flag = "job template"): Promise<string> {
  try {
    if (path === "-") return await new Response(Deno.stdin.readable).text();
    return await Deno.readTextFile(path);
  } catch (e) {
    const why = e instanceof Deno.errors.NotFound
      ? "no such file"
      : e instanceof Deno.errors.PermissionDenied
      ? "permission denied"
      : (e as Error).message;
    throw new UsageError(`Cannot read ${flag} ${path}: ${why}`);
  }
}

/** Refuses a --report path whose folder does not exist, before anything is created. */
function checkWritableDir(path: string): void {
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) || "/" : ".";
  try {
    if (Deno.statSync(dir).isDirectory) return;
  } catch {
    // reported below
  }
  throw new UsageError(`Invalid --report ${path}: folder ${dir} does not exist`);
}

/** Reads and checks the Job template and the cleanup template, if any. */
async function readTemplates(opts: Options) {
  const parse = async (path: string, flag?: string) =>
    parseJobTemplate(await readTemplate(path, flag), path === "-" ? "stdin" : path);
  const template = await parse(opts.jobTemplate);
  const cleanup = opts.cleanupJobTemplate === undefined
    ? undefined
    : await parse(opts.cleanupJobTemplate, "cleanup job template");
  const verify = opts.verify?.jobTemplate === undefined
    ? undefined
    : await parse(opts.verify.jobTemplate, "verify job template");
  return { template, cleanup, verify };
}

/**
 * The line of the first failed contact with an API server that never
 * answered: what does not answer, and until when it is tried.
 *
 * @example
 * ```ts
 * unreachableLine({ server: "https://10.0.0.1:6443", detail: "Connection refused", until: 0 }, 90);
 * // "cannot reach the API server https://10.0.0.1:6443 (Connection refused); retrying until 00:00:00 UTC (--api-wait-secs 90; 0 fails at once)"
 * ```
 */
export function unreachableLine(note: UnreachableNote, waitSecs: number): string {
  const until = new Date(note.until).toISOString().slice(11, 19);
  return `cannot reach the API server ${note.server} (${note.detail}); retrying until ` +
    `${until} UTC (--api-wait-secs ${waitSecs}; 0 fails at once)`;
}

/** Connects with the kubeconfig's credentials and the client's bounds. */
function connect(opts: Options, signal: AbortSignal, log: Logger): Promise<Kube> {
  return Kube.connect({
    kubeconfig: opts.kubeconfig,
    context: opts.context,
    signal,
    apiWaitMs: opts.apiWaitSecs * 1000,
    onUnreachable: (note) =>
      log.warn(unreachableLine(note, opts.apiWaitSecs), {
        event: "unreachable",
        server: note.server,
        until: new Date(note.until).toISOString(),
      }),
    limits: {
      concurrency: opts.kubeApiConcurrency,
      qps: opts.kubeApiQps,
      burst: opts.kubeApiBurst,
    },
  });
}

/** A file's text, or undefined when it cannot be read (absent is an answer, not an error). */
function readFileOrUndefined(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined;
  }
}

/** What the run may do to the world outside the cluster: the process's own I/O. */
function processContext(
  kube: Kube,
  log: Logger,
  signal: AbortSignal,
  terminal: boolean,
  settled?: () => void,
) {
  return {
    kube,
    log,
    signal,
    settled,
    env: (name: string) => Deno.env.get(name),
    readFile: readFileOrUndefined,
    stdout: (text: string) => console.log(text),
    terminal,
    writeFile: (path: string, text: string) => Deno.writeTextFileSync(path, text),
  };
}

/** The one error line and the exit code for what ended the CLI early. */
function exitForError(
  e: unknown,
  stop: Pick<StopSignals, "log" | "stopped" | "exitCode">,
): number {
  const log = stop.log;
  if (stop.stopped && !(e instanceof UsageError)) {
    log.error(`stopped before the rollout began: ${(e as Error).message}`);
    return stop.exitCode;
  }
  if (e instanceof UsageError) {
    // One line, as the input's name and its fix; the manual is a pointer
    // on the same line, so a log search for "error:" finds all of it.
    const manual = /^(Missing|Invalid --|Invalid argument|Unknown flag)/.test(e.message);
    log.error(manual ? `${e.message} (see --help)` : e.message);
    return EXIT.usage;
  }
  if (e instanceof ConfigError || e instanceof PermissionError) {
    log.error(e.message);
    return EXIT.cluster;
  }
  if (e instanceof ApiError) {
    log.error(describeApiError(e));
    return EXIT.cluster;
  }
  log.error(`Unexpected error: ${(e as Error)?.stack ?? e}`);
  return EXIT.failed;
}

/** Writes all of `text` to stdout (a large view takes more than one write). */
function writeStdout(text: string): void {
  const bytes = new TextEncoder().encode(text);
  for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
}

/**
 * `job-dispatcher status …`: reads the run and prints it; SIGINT ends a
 * `--watch` with the exit code of the last view. Errors end as a run's do:
 * one line, exit 2 for bad input, 3 when the cluster refuses.
 */
async function statusMain(args: string[]): Promise<number> {
  const log = new Logger("text");
  const stop = new AbortController();
  const end = () => stop.abort();
  Deno.addSignalListener("SIGINT", end);
  let kube: Kube | undefined;
  try {
    const opts = parseStatusOptions(args);
    if (opts.help) {
      console.log(STATUS_HELP);
      return EXIT.ok;
    }
    kube = await Kube.connect({
      kubeconfig: opts.kubeconfig,
      context: opts.context,
      signal: stop.signal,
    });
    const ctx = processContext(kube, log, stop.signal, Deno.stdout.isTerminal());
    return await runStatus(opts, { ...ctx, stdout: writeStdout });
  } catch (e) {
    return exitForError(e, { log, stopped: false, exitCode: EXIT.ok });
  } finally {
    Deno.removeSignalListener("SIGINT", end);
    kube?.close();
  }
}

/**
 * `job-dispatcher rbac …`: prints the RBAC a run with these flags needs
 * (or `--viewer`'s); asks no cluster. Bad flags end as a run's do.
 */
async function rbacMain(args: string[]): Promise<number> {
  const log = new Logger("text");
  try {
    const r = parseRbacOptions(args);
    if (r.help) {
      console.log(RBAC_HELP);
      return EXIT.ok;
    }
    const templates = r.viewer ? {} : await readTemplates(r.run);
    const env = (name: string) => Deno.env.get(name);
    const text = rbacCommandText({ ...r, opts: r.run, ...templates }, {
      env,
      readFile: readFileOrUndefined,
    });
    writeStdout(text);
    return EXIT.ok;
  } catch (e) {
    return exitForError(e, { log, stopped: false, exitCode: EXIT.ok });
  }
}

/** A cluster's log: each line names the cluster (text: a `[context]` tag; JSON: a field). */
function clusterLogger(opts: Options, cluster: string): Logger {
  const sink = opts.logFormat === "json"
    ? (line: string) => STDERR(line.replace(/^\{/, `{"cluster":${JSON.stringify(cluster)},`))
    : (line: string) => STDERR(`[${cluster}] ${line}`);
  return new Logger(opts.logFormat, sink);
}

/** What `fleet/` needs of the process: the CLI's own connect, context and error lines. */
function fleetEnv(f: FleetOptions, stop: StopSignals, log: Logger): FleetEnv {
  const signal = stop.controller.signal;
  return {
    connect: (cfg, clusterLog) => connect(cfg as Options, signal, clusterLog),
    context: (kube, clusterLog, runSignal = signal) =>
      processContext(kube, clusterLog, runSignal, false),
    errorCode: (e, clusterLog) =>
      exitForError(e, { log: clusterLog, stopped: stop.stopped, exitCode: stop.exitCode }),
    logFor: (cluster) => clusterLogger(f.run, cluster),
    log,
    signal,
    approveHint: (stage) => `job-dispatcher fleet approve -f ${f.fleetFile} ${stage} [run flags]`,
    stdout: writeStdout,
    home: Deno.env.get("HOME"),
  };
}

/**
 * `job-dispatcher fleet …`: reads FLEET.yaml and the templates, then rolls
 * out (or approves a stage) through fleet/. Errors end as a run's do.
 */
async function fleetMain(args: string[]): Promise<number> {
  const stop = new StopSignals(new Logger(requestedLogFormat(args)));
  try {
    const f = parseFleetOptions(args);
    if (f.help) {
      console.log(FLEET_HELP);
      return EXIT.ok;
    }
    const log = stop.log = new Logger(f.run.logFormat, STDERR);
    const spec = parseFleet(await readTemplate(f.fleetFile, "fleet file"), f.fleetFile);
    if (f.run.report) checkWritableDir(f.run.report);
    const { template, cleanup } = await readTemplates(f.run);
    const env = fleetEnv(f, stop, log);
    const code = f.action === "approve"
      ? await fleetApprove(spec, f.stage!, f.run, template, env)
      : f.action === "status"
      ? await fleetStatus(spec, f.run, template, f.output, env)
      : await fleetCommand(spec, f.run, template, cleanup, env);
    return stop.exitFor(code);
  } catch (e) {
    return exitForError(e, stop);
  } finally {
    stop.close();
  }
}

/**
 * `job-dispatcher help [TOPIC]` (one section of `--help`) and `completion
 * SHELL` (the shell's script): a bad word exits 2 in one line.
 */
function textMain(command: "help" | "completion", args: string[]): number {
  const word = args.find((a) => a !== "--help" && a !== "-h");
  const manual = args.includes("--help") || args.includes("-h");
  try {
    writeStdout(
      manual ? helpText(command) : command === "help" ? helpText(word) : completionScript(word),
    );
    return EXIT.ok;
  } catch (e) {
    return exitForError(e, { log: new Logger("text"), stopped: false, exitCode: EXIT.ok });
  }
}

/** Runs the CLI with `args` and returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  if (args[0] === "help" || args[0] === "completion") return textMain(args[0], args.slice(1));
  // Hidden: what the completion scripts ask for --context and --namespace.
  if (args[0] === "__complete") {
    writeStdout(await completeWords(args[1] ?? "", args.slice(2)));
    return EXIT.ok;
  }
  if (args[0] === "status") return await statusMain(args.slice(1));
  if (args[0] === "fleet") return await fleetMain(args.slice(1));
  if (args[0] === "rbac") return await rbacMain(args.slice(1));
  const stop = new StopSignals(new Logger(requestedLogFormat(args)));
  let kube: Kube | undefined;
  try {
    const opts = parseOptions(args);
    const terminal = Deno.stderr.isTerminal();
    const log = stop.log = new Logger(opts.logFormat, STDERR, terminal);
    if (opts.help) {
      console.log(HELP);
      return EXIT.ok;
    }
    if (opts.version) {
      console.log(`job-dispatcher ${VERSION} (deno ${Deno.version.deno}, commit ${COMMIT})`);
      return EXIT.ok;
    }
    for (const r of reportFiles(opts)) checkWritableDir(r.path);
    const { template, cleanup } = await readTemplates(opts);
    kube = await connect(opts, stop.controller.signal, log);
    const user = await whoAmI(kube);
    log.info(connectedLine(kube.server, user), { event: "connected", server: kube.server, user });
    const ctx = processContext(kube, log, stop.controller.signal, terminal, () => stop.settle());
    const code = await runDispatcher(opts, template, ctx, cleanup);
    for (const [line, fields] of apiStatsLines(kube.stats)) log.info(line, fields);
    return stop.exitFor(code);
  } catch (e) {
    return exitForError(e, stop);
  } finally {
    stop.close();
    kube?.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
