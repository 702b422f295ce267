/**
 * job-dispatcher: run exactly one Kubernetes Job per selected node, paced.
 * The CLI entry point, and the only place that exits the process.
 *
 * @module
 */

import { parseJobTemplate, UsageError } from "./job.ts";
import { ApiError, ConfigError, Kube } from "./kube.ts";
import { Logger, STDERR } from "./log.ts";
import { HELP, parseOptions, requestedLogFormat } from "./options.ts";
import { EXIT, runDispatcher } from "./run.ts";
import { apiStatsLines } from "./summary.ts";
import { connectedLine, whoAmI } from "./whoami.ts";

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

/** Why the cluster refused us, with what to do about it. */
function describeApiError(e: ApiError): string {
  if (e.status === 401) {
    return `${e.message} (unauthorised: the kubeconfig's credentials were refused; refresh them)`;
  }
  if (e.status === 403) {
    return `${e.message} (forbidden: grant the verb "${e.verb}" on "${e.resource}" to this user; ` +
      "see the README's RBAC section)";
  }
  if (e.reason === "Untrusted") {
    return `${e.message} (check certificate-authority(-data) of the kubeconfig's cluster, ` +
      "the server address, and an https proxy-url's certificate)";
  }
  if (e.status === 0) return `${e.message} (is the API server up and --context right?)`;
  return e.message;
}

/** Runs the CLI with `args` and returns the process exit code. */
export async function main(args: string[]): Promise<number> {
  let log = new Logger(requestedLogFormat(args));
  const stop = new AbortController();
  let exitOnSignal: number = EXIT.ok;
  const onSignal = (sig: "SIGINT" | "SIGTERM") => () => {
    if (stop.signal.aborted) return;
    exitOnSignal = sig === "SIGINT" ? EXIT.sigint : EXIT.sigterm;
    log.warn(`${sig}: creating no more Jobs; created ones run on, a re-run adopts them`);
    stop.abort();
  };
  const handlers = { SIGINT: onSignal("SIGINT"), SIGTERM: onSignal("SIGTERM") };
  Deno.addSignalListener("SIGINT", handlers.SIGINT);
  Deno.addSignalListener("SIGTERM", handlers.SIGTERM);
  let kube: Kube | undefined;
  try {
    const opts = parseOptions(args);
    const terminal = Deno.stderr.isTerminal();
    log = new Logger(opts.logFormat, STDERR, terminal);
    if (opts.help) {
      console.log(HELP);
      return EXIT.ok;
    }
    if (opts.version) {
      console.log(`job-dispatcher ${VERSION} (deno ${Deno.version.deno}, commit ${COMMIT})`);
      return EXIT.ok;
    }
    if (opts.report) checkWritableDir(opts.report);
    const template = parseJobTemplate(
      await readTemplate(opts.jobTemplate),
      opts.jobTemplate === "-" ? "stdin" : opts.jobTemplate,
    );
    const cleanup = opts.cleanupJobTemplate === undefined ? undefined : parseJobTemplate(
      await readTemplate(opts.cleanupJobTemplate, "cleanup job template"),
      opts.cleanupJobTemplate === "-" ? "stdin" : opts.cleanupJobTemplate,
    );
    kube = await Kube.connect({
      kubeconfig: opts.kubeconfig,
      context: opts.context,
      signal: stop.signal,
      limits: {
        concurrency: opts.kubeApiConcurrency,
        qps: opts.kubeApiQps,
        burst: opts.kubeApiBurst,
      },
    });
    const user = await whoAmI(kube);
    log.info(connectedLine(kube.server, user), { event: "connected", server: kube.server, user });
    const code = await runDispatcher(opts, template, {
      kube,
      log,
      signal: stop.signal,
      env: (name) => Deno.env.get(name),
      readFile: (path) => {
        try {
          return Deno.readTextFileSync(path);
        } catch {
          return undefined;
        }
      },
      stdout: (text) => console.log(text),
      terminal,
      writeFile: (path, text) => Deno.writeTextFileSync(path, text),
    }, cleanup);
    for (const [line, fields] of apiStatsLines(kube.stats)) log.info(line, fields);
    return stop.signal.aborted ? exitOnSignal : code;
  } catch (e) {
    if (stop.signal.aborted && !(e instanceof UsageError)) {
      log.error(`stopped before the rollout began: ${(e as Error).message}`);
      return exitOnSignal;
    }
    if (e instanceof UsageError) {
      // One line, as the input's name and its fix; the manual is a pointer
      // on the same line, so a log search for "error:" finds all of it.
      const manual = /^(Missing|Invalid --|Invalid argument|Unknown flag)/.test(e.message);
      log.error(manual ? `${e.message} (see --help)` : e.message);
      return EXIT.usage;
    }
    if (e instanceof ConfigError) {
      log.error(e.message);
      return EXIT.cluster;
    }
    if (e instanceof ApiError) {
      log.error(describeApiError(e));
      return EXIT.cluster;
    }
    log.error(`Unexpected error: ${(e as Error)?.stack ?? e}`);
    return EXIT.failed;
  } finally {
    Deno.removeSignalListener("SIGINT", handlers.SIGINT);
    Deno.removeSignalListener("SIGTERM", handlers.SIGTERM);
    kube?.close();
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
