/**
 * Kubeconfig loading as kubectl does it: the files kubectl would read (YAML
 * 1.1, relative paths against the file that names them), merged as kubectl
 * merges `$KUBECONFIG`, and the context, cluster and user in use. What the
 * user's fields mean for a request is `credentials.ts`'s business.
 *
 * Every file and environment read goes through a {@linkcode KubeconfigIo},
 * so the rules are tested without a file system.
 *
 * @module
 */

import { parse } from "yaml";

/** Error for a kubeconfig that cannot be used; `main.ts` turns it into exit 3. */
export class ConfigError extends Error {
  /** @param message what is wrong and how to fix it */
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The reads kubeconfig loading needs, passed in. */
export interface KubeconfigIo {
  /** An environment variable, or undefined. */
  env(name: string): string | undefined;
  /** A file's text; throws `Deno.errors.NotFound`, `PermissionDenied`, … as Deno does. */
  readTextFile(path: string): string;
  /** Whether a file exists. */
  exists(path: string): boolean;
  /** The separator of `$KUBECONFIG`'s list: ":" (";" on Windows). */
  listSeparator: string;
}

/** A cluster entry of a kubeconfig. */
export interface ClusterEntry {
  /** Its name. */
  name: string;
  /** The API server's URL, without a trailing slash. */
  server: string;
  /** `certificate-authority-data`, base64 PEM. */
  caData?: string;
  /** `certificate-authority`, made absolute against its kubeconfig's folder. */
  caFile?: string;
  /** `insecure-skip-tls-verify: true`. */
  skipTLSVerify: boolean;
  /** The entry as written, for client-node. */
  raw: Record<string, unknown>;
}

/** A user entry of a kubeconfig. */
export interface UserEntry {
  /** Its name. */
  name: string;
  /** The entry as written (`user:`), with its file paths made absolute. */
  raw: Record<string, unknown>;
}

/** A context entry of a kubeconfig. */
export interface ContextEntry {
  /** Its name. */
  name: string;
  /** The cluster it names. */
  cluster: string;
  /** The user it names, if any. */
  user?: string;
  /** Its namespace, if any. */
  namespace?: string;
}

/** A kubeconfig, or several merged. */
export interface Kubeconfig {
  /** Cluster entries, in order. */
  clusters: ClusterEntry[];
  /** User entries, in order. */
  users: UserEntry[];
  /** Context entries, in order. */
  contexts: ContextEntry[];
  /** `current-context`. */
  currentContext?: string;
}

/** Where a pod's service account is mounted. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

function isAbsolute(path: string): boolean {
  return path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path) || path.startsWith("\\\\");
}

function resolveIn(dir: string, path: string): string {
  return isAbsolute(path) || dir === "" ? path : `${dir}/${path}`;
}

function isMap(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function entries(list: unknown): Record<string, unknown>[] {
  // client-node ignores a section that is not a list; so do we.
  return Array.isArray(list) ? list.map((e) => (isMap(e) ? e : {})) : [];
}

function str(x: unknown): string | undefined {
  return typeof x === "string" && x !== "" ? x : undefined;
}

/**
 * Parses one kubeconfig file. Relative file references (`certificate-authority`,
 * `client-certificate`, `client-key`, `tokenFile`) are made absolute against the
 * file's folder, as kubectl does.
 *
 * @param path the file's path, for relative references
 * @throws {SyntaxError} when the text is not YAML or an entry lacks a required field
 *
 * @example
 * ```ts
 * const kc = parseKubeconfig("current-context: a\ncontexts: [{name: a, context: {cluster: c}}]", "/k/config");
 * kc.contexts[0].cluster; // "c"
 * ```
 */
export function parseKubeconfig(text: string, path: string): Kubeconfig {
  let doc: unknown;
  try {
    // client-go reads kubeconfigs as YAML 1.1 (sigs.k8s.io/yaml), where
    // `insecure-skip-tls-verify: yes` is the boolean true.
    doc = parse(text, { merge: true, version: "1.1" });
  } catch (e) {
    throw new SyntaxError((e as Error).message.split("\n")[0].replace(/:$/, ""));
  }
  // An empty file is an empty kubeconfig, as kubectl reads it.
  if (doc === null || doc === undefined) doc = {};
  if (!isMap(doc)) throw new SyntaxError(`expected a YAML mapping, found ${typeof doc}`);
  notAnotherKind(doc);
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) || "/" : "";
  // The messages are client-node's, which loaded every kubeconfig until now.
  const clusters = entries(doc.clusters).map((e, i): ClusterEntry => {
    const c = e.cluster;
    if (!str(e.name)) throw new SyntaxError(`clusters[${i}].name is missing`);
    if (!isMap(c)) throw new SyntaxError(`clusters[${i}].cluster is missing`);
    if (!str(c.server)) throw new SyntaxError(`clusters[${i}].cluster.server is missing`);
    const caFile = str(c["certificate-authority"]);
    return {
      name: e.name as string,
      server: (c.server as string).replace(/\/+$/, ""),
      caData: str(c["certificate-authority-data"]),
      caFile: caFile && resolveIn(dir, caFile),
      skipTLSVerify: c["insecure-skip-tls-verify"] === true,
      raw: c,
    };
  });
  const users = entries(doc.users).map((e, i): UserEntry => {
    if (!str(e.name)) throw new SyntaxError(`users[${i}].name is missing`);
    const raw = { ...(isMap(e.user) ? e.user : {}) };
    for (const key of ["client-certificate", "client-key", "tokenFile"]) {
      const file = str(raw[key]);
      if (file) raw[key] = resolveIn(dir, file);
    }
    // client-go resolves an exec command against the kubeconfig's folder only
    // when it names a path (`./bin/token`); a bare name is looked up on $PATH.
    if (isMap(raw.exec) && str(raw.exec.command)?.includes("/")) {
      raw.exec = { ...raw.exec, command: resolveIn(dir, raw.exec.command as string) };
    }
    return { name: e.name as string, raw };
  });
  const contexts = entries(doc.contexts).map((e, i): ContextEntry => {
    const c = e.context;
    if (!str(e.name)) throw new SyntaxError(`contexts[${i}].name is missing`);
    if (!isMap(c)) throw new SyntaxError(`contexts[${i}].context is missing`);
    if (!str(c.cluster)) throw new SyntaxError(`contexts[${i}].context.cluster is missing`);
    return {
      name: e.name as string,
      cluster: c.cluster as string,
      user: str(c.user),
      namespace: str(c.namespace),
    };
  });
  return { clusters, users, contexts, currentContext: str(doc["current-context"]) };
}

/**
 * Merges kubeconfigs as kubectl merges `$KUBECONFIG`'s files: the first file
 * to name a cluster, user or context wins it, and the first file that sets
 * `current-context` sets it.
 *
 * @example
 * ```ts
 * const a = parseKubeconfig("current-context: a", "/a");
 * const b = parseKubeconfig("current-context: b", "/b");
 * mergeKubeconfigs([a, b]).currentContext; // "a"
 * ```
 */
export function mergeKubeconfigs(configs: Kubeconfig[]): Kubeconfig {
  const firstByName = <T extends { name: string }>(lists: T[][]): T[] => {
    const seen = new Map<string, T>();
    for (const list of lists) for (const e of list) if (!seen.has(e.name)) seen.set(e.name, e);
    return [...seen.values()];
  };
  return {
    clusters: firstByName(configs.map((c) => c.clusters)),
    users: firstByName(configs.map((c) => c.users)),
    contexts: firstByName(configs.map((c) => c.contexts)),
    currentContext: configs.find((c) => c.currentContext)?.currentContext,
  };
}

/** The in-cluster configuration of a pod's service account, as client-node builds it. */
function inCluster(io: KubeconfigIo): Kubeconfig {
  const host = io.env("KUBERNETES_SERVICE_HOST");
  const port = io.env("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    throw new ConfigError(
      "Cannot use the in-cluster service account: KUBERNETES_SERVICE_HOST and " +
        "KUBERNETES_SERVICE_PORT are not set; pass --kubeconfig",
    );
  }
  const scheme = ["80", "8080", "8001"].includes(port) ? "http" : "https";
  const server = `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`;
  let namespace: string | undefined;
  try {
    namespace = io.readTextFile(`${SERVICE_ACCOUNT_DIR}/namespace`).trim() || undefined;
  } catch {
    // no namespace file: no context namespace
  }
  const caFile = `${SERVICE_ACCOUNT_DIR}/ca.crt`;
  return {
    clusters: [{
      name: "inCluster",
      server,
      caFile,
      skipTLSVerify: false,
      raw: { server, "certificate-authority": caFile },
    }],
    users: [{ name: "inClusterUser", raw: { tokenFile: `${SERVICE_ACCOUNT_DIR}/token` } }],
    contexts: [{
      name: "inClusterContext",
      cluster: "inCluster",
      user: "inClusterUser",
      namespace,
    }],
    currentContext: "inClusterContext",
  };
}

/** A file read's failure in a few words (`no such file`, `permission denied`). */
export function readError(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (e instanceof Deno.errors.IsADirectory) return "is a directory";
  return (e as Error).message.split("\n")[0];
}

/** What {@linkcode loadKubeconfig} found, ready to connect with. */
export interface Target {
  /** The kubeconfig's name in messages: a path, `$KUBECONFIG (…)`, `~/.kube/config` or in-cluster. */
  source: string;
  /** Every entry, merged. */
  config: Kubeconfig;
  /** The context in use. */
  context: ContextEntry;
  /** Its cluster. */
  cluster: ClusterEntry;
  /** Its user; undefined when the context names none. */
  user?: UserEntry;
}

/** Where credentials come from, as `Kube.connect` takes them. */
export interface LoadOptions {
  /** A kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then in-cluster. */
  kubeconfig?: string;
  /** A context of the kubeconfig; default: its current context. */
  context?: string;
}

/**
 * Why a kubeconfig yields no cluster, with the fix: the file was found and
 * read, so "set --kubeconfig" would send the user back to what they did.
 */
function noClusterWhy(config: Kubeconfig, context: ContextEntry | undefined): string {
  const names = (xs: { name: string }[]) => xs.map((x) => x.name).join(", ");
  if (context) {
    return `its context ${context.name} names cluster ${JSON.stringify(context.cluster)}, ` +
      `which it does not define (clusters: ${names(config.clusters) || "none"})`;
  }
  if (config.contexts.length === 0) {
    return "it defines no context; is it a kubeconfig? Pass the file kubectl uses, " +
      "e.g. --kubeconfig ~/.kube/config";
  }
  return config.currentContext
    ? `its current-context ${config.currentContext} is not defined; pass --context ` +
      `(contexts: ${names(config.contexts)})`
    : `it has no current-context; pass --context (contexts: ${names(config.contexts)})`;
}

/**
 * The context names of the kubeconfig kubectl would read (as
 * {@linkcode loadKubeconfig} finds it), for shell completion: no network.
 *
 * @throws {ConfigError} when no kubeconfig is found or one cannot be read
 * @example
 * ```ts
 * contextNames({}, io); // ["dev", "prod-eu1"]
 * ```
 */
export function contextNames(opts: LoadOptions, io: KubeconfigIo): string[] {
  return readConfigs(opts, io).config.contexts.map((c) => c.name);
}

function readConfigs(opts: LoadOptions, io: KubeconfigIo): { source: string; config: Kubeconfig } {
  const fromEnv = io.env("KUBECONFIG");
  const source = opts.kubeconfig ?? (fromEnv ? `$KUBECONFIG (${fromEnv})` : "~/.kube/config");
  const load = (path: string, what = "") => {
    let text: string;
    try {
      text = io.readTextFile(path);
    } catch (e) {
      throw new ConfigError(`Cannot load kubeconfig ${source}: ${what}${readError(e)}`);
    }
    try {
      return parseKubeconfig(text, path);
    } catch (e) {
      throw new ConfigError(`Cannot load kubeconfig ${source}: ${what}${(e as Error).message}`);
    }
  };
  if (opts.kubeconfig) return { source, config: load(opts.kubeconfig) };
  if (fromEnv) {
    const files = fromEnv.split(io.listSeparator).filter(Boolean);
    // kubectl skips the files of the list that do not exist.
    const present = files.length > 1 ? files.filter((f) => io.exists(f)) : files;
    if (present.length === 0) {
      throw new ConfigError(`Cannot load kubeconfig ${source}: no such file`);
    }
    const what = (f: string) => (files.length > 1 ? `${f}: ` : "");
    return { source, config: mergeKubeconfigs(present.map((f) => load(f, what(f)))) };
  }
  const home = io.env("HOME") ?? io.env("USERPROFILE");
  if (home && io.exists(`${home}/.kube/config`)) {
    return { source, config: load(`${home}/.kube/config`) };
  }
  if (io.exists(`${SERVICE_ACCOUNT_DIR}/token`)) {
    return { source: "the in-cluster service account", config: inCluster(io) };
  }
  throw new ConfigError(
    "Cannot find a kubeconfig: pass --kubeconfig, set $KUBECONFIG, create ~/.kube/config, " +
      "or run in a pod with a service account",
  );
}

/**
 * Refuses a manifest of another kind (a Job template passed as `--kubeconfig`):
 * kubectl decodes a kubeconfig as `kind: Config` of `apiVersion: v1` and
 * refuses any other kind, and without this the file would only surface
 * later as "no cluster", as if no kubeconfig had been given.
 *
 * @throws {SyntaxError} naming the kind found and what to pass instead
 */
function notAnotherKind(doc: Record<string, unknown>): void {
  const { kind, apiVersion } = doc;
  if (kind === undefined || kind === "Config") return;
  throw new SyntaxError(
    `it is a ${String(kind)}${apiVersion ? ` (apiVersion ${String(apiVersion)})` : ""}, ` +
      "not a kubeconfig (kind: Config, apiVersion: v1); pass the file kubectl uses, " +
      "e.g. --kubeconfig ~/.kube/config",
  );
}

/**
 * Finds the kubeconfig as kubectl does (`--kubeconfig`, else `$KUBECONFIG`'s
 * files merged, else `~/.kube/config`, else the pod's service account) and
 * the context, cluster and user to use.
 *
 * @throws {ConfigError} when no kubeconfig is found, one cannot be read or parsed,
 *   the context is unknown, or it names no cluster
 */
export function loadKubeconfig(opts: LoadOptions, io: KubeconfigIo): Target {
  const { source, config } = readConfigs(opts, io);
  const contextName = opts.context ?? config.currentContext;
  const context = config.contexts.find((c) => c.name === contextName);
  if (opts.context && !context) {
    const known = config.contexts.map((c) => c.name).join(", ") || "none";
    throw new ConfigError(
      `Cannot use context ${JSON.stringify(opts.context)}: not in ${source} (contexts: ${known})`,
    );
  }
  const cluster = config.clusters.find((c) => c.name === context?.cluster);
  if (!context || !cluster) {
    throw new ConfigError(`Cannot find a cluster in ${source}: ${noClusterWhy(config, context)}`);
  }
  const user = config.users.find((u) => u.name === context.user);
  // kubectl refuses a context whose user is missing rather than going on
  // anonymously: a typo must not turn into a run as someone else.
  if (context.user && !user) {
    throw new ConfigError(
      `Cannot use context ${context.name} of ${source}: its user ${
        JSON.stringify(context.user)
      } is not defined (users: ${config.users.map((u) => u.name).join(", ") || "none"})`,
    );
  }
  return { source, config, context, cluster, user };
}
