/**
 * Exec credential plugins (client.authentication.k8s.io v1 and v1beta1), run
 * the way client-go runs them: the kubeconfig's command with its args and env
 * added to ours, `KUBERNETES_EXEC_INFO` describing the request (and the
 * cluster, with `provideClusterInfo`), stdin handed over only when the plugin
 * may be interactive. The credential it prints is kept until shortly before
 * its `expirationTimestamp`, or until the API server refuses it.
 *
 * How a command runs is passed in ({@linkcode ExecRunner}), so the rules are
 * tested without processes.
 *
 * @module
 */

import { ConfigError } from "./kubeconfig.ts";

/** The API versions of ExecCredential that client-go speaks. */
export const EXEC_API_VERSIONS = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
] as const;

/** When a plugin may talk to the user on the terminal. */
export type InteractiveMode = "Never" | "IfAvailable" | "Always";

/** A user's `exec:` section, checked. */
export interface ExecConfig {
  /** The command, a path or a name looked up on $PATH. */
  command: string;
  /** Its arguments. */
  args: string[];
  /** Variables added to the dispatcher's environment. */
  env: { name: string; value: string }[];
  /** The ExecCredential version the plugin is asked for and must answer with. */
  apiVersion: string;
  /** What to tell a user whose machine lacks the command. */
  installHint?: string;
  /** Whether `KUBERNETES_EXEC_INFO` describes the cluster. */
  provideClusterInfo: boolean;
  /** When stdin is handed to the plugin. */
  interactiveMode: InteractiveMode;
}

function isMap(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/**
 * Checks a user's `exec:` section as kubectl does (`command` and `apiVersion`
 * are required; v1 requires `interactiveMode`, v1beta1 defaults it to
 * IfAvailable).
 *
 * @param user the user's name, for messages
 * @throws {ConfigError} naming the field that is wrong
 *
 * @example
 * ```ts
 * execConfigOf({ command: "aws", apiVersion: "client.authentication.k8s.io/v1beta1" }, "eks")
 *   .interactiveMode; // "IfAvailable"
 * ```
 */
export function execConfigOf(raw: unknown, user: string): ExecConfig {
  const bad = (detail: string) =>
    new ConfigError(`Cannot use the exec plugin of user ${user}: ${detail}`);
  if (!isMap(raw)) throw bad("exec is not a mapping");
  const command = typeof raw.command === "string" ? raw.command : "";
  if (!command) throw bad("exec.command is missing");
  const apiVersion = typeof raw.apiVersion === "string" ? raw.apiVersion : "";
  if (!apiVersion) throw bad("exec.apiVersion is missing; set client.authentication.k8s.io/v1");
  if (!(EXEC_API_VERSIONS as readonly string[]).includes(apiVersion)) {
    throw bad(`exec.apiVersion ${apiVersion} is not one of ${EXEC_API_VERSIONS.join(", ")}`);
  }
  const args = Array.isArray(raw.args) ? raw.args.map(String) : [];
  const env = (Array.isArray(raw.env) ? raw.env : []).map((e, i) => {
    const name = isMap(e) && typeof e.name === "string" ? e.name : "";
    if (!name) throw bad(`exec.env[${i}].name is missing`);
    return {
      name,
      value: isMap(e) && e.value !== undefined && e.value !== null ? String(e.value) : "",
    };
  });
  let mode = raw.interactiveMode;
  if (mode === undefined || mode === "") {
    if (apiVersion.endsWith("/v1")) {
      throw bad("exec.interactiveMode is missing; set Never, IfAvailable or Always");
    }
    mode = "IfAvailable";
  }
  if (mode !== "Never" && mode !== "IfAvailable" && mode !== "Always") {
    throw bad(`exec.interactiveMode ${JSON.stringify(mode)} is not Never, IfAvailable or Always`);
  }
  return {
    command,
    args,
    env,
    apiVersion,
    installHint: typeof raw.installHint === "string" && raw.installHint
      ? raw.installHint
      : undefined,
    provideClusterInfo: raw.provideClusterInfo === true,
    interactiveMode: mode,
  };
}

/** What an exec plugin returned. */
export interface ExecCredential {
  /** A bearer token. */
  token?: string;
  /** A client certificate, PEM. */
  cert?: string;
  /** Its key, PEM. */
  key?: string;
  /** When it expires, in ms since the epoch; undefined: until refused. */
  expiresAt?: number;
}

/**
 * Reads the ExecCredential a plugin printed, with client-go's checks.
 *
 * @throws {Error} when it is not JSON, answers another apiVersion, or carries
 *   neither a token nor a certificate and key pair
 *
 * @example
 * ```ts
 * parseExecCredential(
 *   '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}',
 *   "client.authentication.k8s.io/v1",
 * ).token; // "t"
 * ```
 */
export function parseExecCredential(stdout: string, apiVersion: string): ExecCredential {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    throw new Error("its output is not an ExecCredential (not JSON)");
  }
  if (!isMap(doc) || doc.kind !== "ExecCredential") {
    throw new Error("its output is not an ExecCredential");
  }
  if (doc.apiVersion !== apiVersion) {
    throw new Error(
      `it is configured for ${apiVersion} but answered ${JSON.stringify(doc.apiVersion)}`,
    );
  }
  const status = doc.status;
  if (!isMap(status)) throw new Error("its ExecCredential has no status");
  const text = (x: unknown) => (typeof x === "string" && x ? x : undefined);
  const token = text(status.token);
  const cert = text(status.clientCertificateData);
  const key = text(status.clientKeyData);
  if (!token && !cert && !key) throw new Error("it returned neither a token nor a certificate");
  if (!cert !== !key) throw new Error("it returned a certificate or a key, not both");
  let expiresAt: number | undefined;
  const exp = text(status.expirationTimestamp);
  if (exp) {
    expiresAt = Date.parse(exp);
    if (!Number.isFinite(expiresAt)) {
      throw new Error(`its expirationTimestamp ${exp} is not an RFC 3339 time`);
    }
  }
  return { token, cert, key, expiresAt };
}

/** The cluster as `KUBERNETES_EXEC_INFO` describes it (client-go's `Cluster`). */
export interface ExecCluster {
  /** The API server's URL. */
  server: string;
  /** `tls-server-name`. */
  "tls-server-name"?: string;
  /** `insecure-skip-tls-verify`. */
  "insecure-skip-tls-verify"?: boolean;
  /** The CA bundle, base64, whether the kubeconfig named a file or gave data. */
  "certificate-authority-data"?: string;
  /** `proxy-url`. */
  "proxy-url"?: string;
  /** `disable-compression`. */
  "disable-compression"?: boolean;
  /** The cluster's `client.authentication.k8s.io/exec` extension. */
  config?: unknown;
}

/**
 * The value of `KUBERNETES_EXEC_INFO`: always the request's interactivity,
 * and the cluster when the plugin asked for it with `provideClusterInfo`.
 */
export function execInfo(config: ExecConfig, cluster: ExecCluster, interactive: boolean): string {
  const spec: Record<string, unknown> = { interactive };
  if (config.provideClusterInfo) spec.cluster = cluster;
  return JSON.stringify({ kind: "ExecCredential", apiVersion: config.apiVersion, spec });
}

/**
 * Whether the plugin may talk to the user: client-go's rule.
 *
 * @throws {ConfigError} for `Always` without a terminal on stdin
 */
export function isInteractive(mode: InteractiveMode, stdinIsTerminal: boolean): boolean {
  if (mode === "Never") return false;
  if (mode === "Always" && !stdinIsTerminal) {
    throw new ConfigError(
      "Cannot run the exec plugin: its interactiveMode is Always but standard input is not a " +
        "terminal; run the dispatcher from a terminal or log in first",
    );
  }
  return stdinIsTerminal;
}

/** How the plugin's command ended. */
export interface ExecOutcome {
  /** Exit code. */
  code: number;
  /** Standard output. */
  stdout: string;
  /** Standard error (empty when it went to the terminal). */
  stderr: string;
}

/**
 * Runs a command; throws `Deno.errors.NotFound` when there is no such command.
 * An interactive run hands the plugin stdin and stderr.
 */
export type ExecRunner = (run: {
  command: string;
  args: string[];
  env: Record<string, string>;
  interactive: boolean;
  /** Ends the run: the plugin is killed, and the run rejects. */
  signal?: AbortSignal;
}) => Promise<ExecOutcome>;

/** The {@linkcode ExecRunner} of the real process table, with `Deno.Command`. */
export const DENO_RUNNER: ExecRunner = async ({ command, args, env, interactive, signal }) => {
  signal?.throwIfAborted();
  // Deno.Command's signal kills the child (SIGTERM): a bound that gives up
  // on a plugin (a completion's 2 s) leaves no plugin waiting for a person.
  const out = await new Deno.Command(command, {
    args,
    env,
    stdin: interactive ? "inherit" : "null",
    stdout: "piped",
    stderr: interactive ? "inherit" : "piped",
    signal,
  }).output();
  signal?.throwIfAborted();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: interactive ? "" : text(out.stderr) };
};

/** How long before its expiry a credential is replaced, at most. */
const REFRESH_AHEAD_MS = 60_000;

/**
 * One user's exec plugin: runs it when there is no credential yet, when the
 * one it has is near expiry (a quarter of its lifetime, at most a minute,
 * ahead, so that a request never leaves with a credential that expires on the
 * way), and after the API server refused the current one.
 * Concurrent callers share one run.
 */
export class ExecPlugin {
  /** How often the command ran. */
  runs = 0;
  #config: ExecConfig;
  #info: (interactive: boolean) => string;
  #runner: ExecRunner;
  #now: () => number;
  #stdinIsTerminal: boolean;
  #signal?: AbortSignal;
  #current?: { cred: ExecCredential; refreshAt: number };
  #pending?: Promise<ExecCredential>;

  /**
   * @param opts.cluster the cluster, for `provideClusterInfo`
   * @param opts.now the clock, for tests
   * @param opts.signal kills a running plugin when it aborts
   */
  constructor(
    config: ExecConfig,
    opts: {
      cluster: ExecCluster;
      runner: ExecRunner;
      stdinIsTerminal: boolean;
      now?: () => number;
      signal?: AbortSignal;
    },
  ) {
    this.#config = config;
    this.#info = (interactive) => execInfo(config, opts.cluster, interactive);
    this.#runner = opts.runner;
    this.#now = opts.now ?? Date.now;
    this.#stdinIsTerminal = opts.stdinIsTerminal;
    this.#signal = opts.signal;
  }

  /**
   * The credential to send now.
   *
   * @throws {ConfigError} when the command is missing (with its installHint),
   *   exits non-zero (with its stderr's first line) or prints no credential
   */
  get(): Promise<ExecCredential> {
    if (this.#current && this.#now() < this.#current.refreshAt) {
      return Promise.resolve(this.#current.cred);
    }
    this.#pending ??= this.#run().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  /** Forgets `used` after the API server refused it: the next {@linkcode get} runs the plugin. */
  invalidate(used: ExecCredential): void {
    if (this.#current?.cred === used) this.#current = undefined;
  }

  async #run(): Promise<ExecCredential> {
    const c = this.#config;
    const name = `exec plugin ${c.command}`;
    const interactive = isInteractive(c.interactiveMode, this.#stdinIsTerminal);
    const env: Record<string, string> = {};
    for (const { name, value } of c.env) env[name] = value;
    env.KUBERNETES_EXEC_INFO = this.#info(interactive);
    let out: ExecOutcome;
    this.runs++;
    try {
      out = await this.#runner({
        command: c.command,
        args: c.args,
        env,
        interactive,
        signal: this.#signal,
      });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        const hint = c.installHint ? `; ${c.installHint.trim().replace(/\s*\n\s*/g, " ")}` : "";
        throw new ConfigError(`Cannot run ${name}: no such command${hint}`);
      }
      throw new ConfigError(`Cannot run ${name}: ${(e as Error).message.split("\n")[0]}`);
    }
    if (out.code !== 0) {
      const first = out.stderr.split("\n").map((l) => l.trim()).find(Boolean);
      throw new ConfigError(
        `Cannot get credentials from ${name}: it exited with code ${out.code}` +
          (first ? `: ${first}` : ""),
      );
    }
    let cred: ExecCredential;
    try {
      cred = parseExecCredential(out.stdout, c.apiVersion);
    } catch (e) {
      throw new ConfigError(`Cannot get credentials from ${name}: ${(e as Error).message}`);
    }
    const now = this.#now();
    const ahead = cred.expiresAt === undefined
      ? 0
      : Math.min(REFRESH_AHEAD_MS, Math.max(0, cred.expiresAt - now) / 4);
    this.#current = {
      cred,
      refreshAt: cred.expiresAt === undefined ? Infinity : cred.expiresAt - ahead,
    };
    return cred;
  }
}
