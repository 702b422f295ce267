/**
 * A real, local Kubernetes control plane for the end-to-end tests: etcd,
 * kube-apiserver (TLS, client certificates, Node+RBAC), kube-controller-manager,
 * kube-scheduler and kwok, whose fake nodes run pods to an outcome chosen per
 * node (see e2e/stages/pod.yaml). Everything listens on 127.0.0.1 on free
 * ports and lives in one directory, so clusters do not collide.
 *
 * As a library it starts clusters for test suites; as a CLI:
 *
 * ```sh
 * deno task cluster up [--nodes N] [--label k=v]... [--taint k=v:Effect]... [--dir D]
 * deno task cluster status [--dir D]
 * deno task cluster down [--dir D] [--purge]
 * deno task cluster hook RELEASE [-n NS] [--dir D]
 * ```
 *
 * @module
 */

import { stringify } from "yaml";
import {
  delay,
  freePorts,
  isAlive,
  killGroups,
  type ProcSpec,
  spawnDetached,
  type Spawned,
  tail,
} from "./_procs.ts";
import {
  DURATION_ANNOTATION,
  FAKE_NODE_ANNOTATION,
  NO_RUNTIME_VERSION_ANNOTATION,
  nodeNames,
  nodeObject,
  type NodeSpec,
  NOT_READY_ANNOTATION,
  type Outcome,
  OUTCOME_LABEL,
  RUNTIME_VERSION,
  runtimeHandlers,
  type Taint,
} from "./_nodes.ts";
import {
  auditPolicy,
  type Component,
  COMPONENTS,
  componentSpecs,
  kubeconfigObject,
  type Tuning,
} from "./_components.ts";
import { type CliOptions, parseArgs, USAGE } from "./_cli.ts";
import { runHook } from "./_hook.ts";

export {
  DURATION_ANNOTATION,
  FAKE_NODE_ANNOTATION,
  NO_RUNTIME_VERSION_ANNOTATION,
  NOT_READY_ANNOTATION,
  OUTCOME_LABEL,
  RUNTIME_VERSION,
};
export type { Component, NodeSpec, Outcome, Taint };

const E2E_DIR = new URL(".", import.meta.url).pathname;
const BIN_DIR = `${E2E_DIR}.bin`;
const K8S = `${BIN_DIR}/k8s`;
/** Where `deno task cluster` keeps its cluster unless told otherwise. */
export const DEFAULT_DIR = `${E2E_DIR}.work/cluster`;
const READY_TIMEOUT_MS = 90_000;

/** Options of {@linkcode startCluster}. */
export interface ClusterOptions {
  /** Directory for state, data and logs. @default a new e2e/.work/cluster-* directory */
  dir?: string;
  /** Number of fake nodes, named `node-000`, `node-001`, …. @default 0 */
  nodes?: number;
  /** Labels added to every initial node. */
  labels?: Record<string, string>;
  /** Taints of every initial node. */
  taints?: Taint[];
  /** Run e2e/build.sh first (a no-op when the binaries are current). @default true */
  build?: boolean;
  /**
   * Write kube-apiserver's audit log (Metadata level, one JSON line per
   * completed request) to {@linkcode Cluster.auditLog}, for these users and
   * groups, or for everyone when both are empty. @default off
   */
  audit?: { users?: string[]; userGroups?: string[] };
  /** kwok's node Lease duration, renewed every quarter of it; 0: no Leases. @default 40 */
  nodeLeaseDurationSeconds?: number;
  /** Client QPS of kube-controller-manager and kube-scheduler. @default theirs (20) */
  controllerQps?: number;
}

/** Output of a finished command. */
export interface CommandResult {
  /** Exit code. */
  code: number;
  /** Standard output, decoded as UTF-8. */
  stdout: string;
  /** Standard error, decoded as UTF-8. */
  stderr: string;
}

/** Options of {@linkcode Cluster.stop} and {@linkcode stopCluster}. */
export interface StopOptions {
  /** Remove the cluster directory (data, logs, kubeconfig) afterwards. @default false */
  removeDir?: boolean;
}

/** A running cluster. */
export interface Cluster {
  /** Absolute directory holding the state, etcd data, certificates and logs/. */
  readonly dir: string;
  /** Path of the admin (system:masters) kubeconfig. */
  readonly kubeconfig: string;
  /** API server URL, `https://127.0.0.1:PORT`. */
  readonly server: string;
  /** kube-apiserver's audit log (JSON lines), when started with `audit`. */
  readonly auditLog?: string;
  /** Runs kubectl with the admin kubeconfig; never throws on a non-zero exit. */
  kubectl(args: string[], stdin?: string): Promise<CommandResult>;
  /** Creates fake nodes and waits until kwok reports them Ready. */
  createNodes(specs: NodeSpec[]): Promise<void>;
  /** Deletes a node and waits until it is gone. */
  deleteNode(name: string): Promise<void>;
  /**
   * Makes a fake node NotReady (`ready: false`: annotates it with
   * {@linkcode NOT_READY_ANNOTATION}, which keeps kwok's node-initialize stage
   * off it, and writes a Ready=False condition through the status
   * subresource) or Ready again (`ready: true`: removes the annotation, so
   * kwok re-initialises it). Resolves once the API server shows the new state.
   */
  setNodeReady(name: string, ready: boolean): Promise<void>;
  /**
   * Replaces a node's `status.runtimeHandlers` with handlers of these names,
   * through the status subresource; kwok's stages leave them alone.
   */
  setRuntimeHandlers(name: string, handlers: string[]): Promise<void>;
  /** Kills kube-apiserver and starts it again on the same port; resolves once ready. */
  restartApiServer(): Promise<void>;
  /**
   * Sends `signal` to kube-apiserver: SIGSTOP freezes it (its port still
   * accepts connections, which never get an answer, as a hung server's do),
   * SIGCONT lets it go on.
   */
  signalApiServer(signal: Deno.Signal): void;
  /**
   * Compacts etcd at its current revision, so that reads and watches from any
   * older resourceVersion fail with 410 Gone (Expired).
   *
   * The API server's watch cache keeps serving watches from its in-memory
   * history however etcd is compacted, as in a real cluster, so this also
   * restarts kube-apiserver (as {@linkcode Cluster.restartApiServer}): open
   * watches end, and resuming them from an old resourceVersion gets 410, the
   * same as a client sees after a control-plane upgrade.
   *
   * @returns the compacted revision
   */
  compactEtcd(): Promise<number>;
  /** Returns the API server's Prometheus metrics text. */
  metrics(): Promise<string>;
  /** Returns the last `lines` lines of every component log, headed by its name. */
  logs(lines?: number): Promise<string>;
  /** Stops every component (process groups, SIGTERM then SIGKILL). */
  stop(options?: StopOptions): Promise<void>;
}

/** What the cluster directory records about a running cluster. */
interface State {
  server: string;
  etcd: string;
  procs: Partial<Record<Component, { pid: number; spec: ProcSpec }>>;
}

/**
 * Builds the binaries if needed, starts a cluster and creates its nodes. On
 * any failure nothing is left running.
 *
 * @example
 * ```ts
 * const cluster = await startCluster({ nodes: 3 });
 * try {
 *   const { stdout } = await cluster.kubectl(["get", "nodes"]);
 *   console.log(stdout);
 * } finally {
 *   await cluster.stop({ removeDir: true });
 * }
 * ```
 * @throws {Error} if a component does not become ready; the message ends with its log
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  if (options.build ?? true) await build();
  let dir = options.dir;
  if (dir === undefined) {
    await Deno.mkdir(`${E2E_DIR}.work`, { recursive: true });
    dir = await Deno.makeTempDir({ dir: `${E2E_DIR}.work`, prefix: "cluster-" });
  }
  await Deno.mkdir(dir, { recursive: true });
  dir = await Deno.realPath(dir);
  const state = readState(dir);
  if (state && COMPONENTS.some((name) => isRunning(dir, state.procs[name]?.pid))) {
    throw new Error(
      `Cannot start a cluster in ${dir}: one is running there; run \`deno task cluster down --dir ${dir}\``,
    );
  }
  // A stopped cluster's data is not reused: its ports and certificates would be stale.
  for (const stale of ["etcd", "pki", "logs", "state.json", "kubeconfig"]) {
    await Deno.remove(`${dir}/${stale}`, { recursive: true }).catch(() => {});
  }
  await Deno.mkdir(`${dir}/logs`, { recursive: true });
  const cluster = new LocalCluster(dir, { server: "", etcd: "", procs: {} });
  try {
    await cluster.boot(options);
    const names = nodeNames(options.nodes ?? 0);
    await cluster.createNodes(
      names.map((name) => ({ name, labels: options.labels, taints: options.taints })),
    );
    return cluster;
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}

/**
 * Starts a cluster, runs `fn` with it and stops it; the directory is removed
 * if `fn` succeeds and kept, with its logs, if it throws.
 */
export async function withCluster<T>(
  options: ClusterOptions,
  fn: (cluster: Cluster) => Promise<T>,
): Promise<T> {
  const cluster = await startCluster(options);
  let ok = false;
  try {
    const result = await fn(cluster);
    ok = true;
    return result;
  } finally {
    await cluster.stop({ removeDir: ok });
    if (!ok) console.error(`cluster logs kept in ${cluster.dir}/logs`);
  }
}

/** Reports whether every component of the cluster in `dir` is running. */
export function isClusterUp(dir: string = DEFAULT_DIR): boolean {
  const state = readState(dir);
  return state !== undefined &&
    COMPONENTS.every((name) => isRunning(dir, state.procs[name]?.pid));
}

/** What {@linkcode clusterStatus} found. */
export interface ClusterStatus {
  /** API server URL, if the directory records one. */
  server?: string;
  /** Pid of each component, or null where it does not run. */
  components: Record<Component, number | null>;
  /** Number of nodes, if the API server answered. */
  nodes?: number;
}

/** Reports which components of the cluster in `dir` run, and its node count if the API answers. */
export async function clusterStatus(dir: string = DEFAULT_DIR): Promise<ClusterStatus> {
  const state = readState(dir);
  const components = Object.fromEntries(COMPONENTS.map((name) => {
    const pid = state?.procs[name]?.pid;
    return [name, pid !== undefined && isRunning(dir, pid) ? pid : null];
  })) as Record<Component, number | null>;
  if (state === undefined || components["kube-apiserver"] === null) return { components };
  const cluster = new LocalCluster(dir, state);
  try {
    const list = await cluster.api("GET", "/api/v1/nodes");
    return { server: state.server, components, nodes: list.items.length };
  } catch {
    return { server: state.server, components };
  } finally {
    cluster.close();
  }
}

/** Stops the cluster recorded in `dir`, if any, like {@linkcode Cluster.stop}. */
export async function stopCluster(dir: string = DEFAULT_DIR, options?: StopOptions): Promise<void> {
  await new LocalCluster(dir, readState(dir) ?? { server: "", etcd: "", procs: {} }).stop(options);
}

/**
 * Runs e2e/build.sh, which skips the Go build when the binaries are current
 * and takes minutes when they are not (its output shows through).
 *
 * @throws {Error} if the build fails, e.g. because Go is missing
 */
export async function build(): Promise<void> {
  const { code } = await new Deno.Command("bash", {
    args: [`${E2E_DIR}build.sh`],
    stdin: "null",
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) {
    throw new Error(`Cannot build the e2e binaries: e2e/build.sh exited with ${code}`);
  }
}

function readState(dir: string): State | undefined {
  try {
    return JSON.parse(Deno.readTextFileSync(`${dir}/state.json`));
  } catch {
    return undefined;
  }
}

function isRunning(dir: string, pid: number | undefined): boolean {
  // Every component's command line names a file in dir, which tells our
  // processes apart from a recycled pid or another cluster's.
  return pid !== undefined && isAlive(pid, `${dir}/`);
}

class LocalCluster implements Cluster {
  readonly kubeconfig: string;
  #client?: Deno.HttpClient;
  /** Processes this instance started, by pid. */
  #spawned = new Map<number, Spawned>();

  constructor(readonly dir: string, private state: State) {
    this.kubeconfig = `${dir}/kubeconfig`;
  }

  get server(): string {
    return this.state.server;
  }

  get auditLog(): string | undefined {
    const audit = this.state.procs["kube-apiserver"]?.spec.args.find((a) =>
      a.startsWith("--audit-log-path=")
    );
    return audit?.slice("--audit-log-path=".length);
  }

  /** Starts the components and waits until the control plane serves. */
  async boot(options: ClusterOptions = {}): Promise<void> {
    const pki = `${this.dir}/pki`;
    const certs = await new Deno.Command(K8S, { args: ["certs", pki] }).output();
    if (certs.code !== 0) {
      throw new Error(`Cannot write certificates: ${new TextDecoder().decode(certs.stderr)}`);
    }
    const [etcdPort, etcdPeerPort, apiPort] = freePorts(3);
    this.state.etcd = `http://127.0.0.1:${etcdPort}`;
    this.state.server = `https://127.0.0.1:${apiPort}`;
    const read = (file: string) => Deno.readTextFile(`${pki}/${file}`);
    const kubeconfig = kubeconfigObject(this.server, {
      ca: await read("ca.crt"),
      cert: await read("admin.crt"),
      key: await read("admin.key"),
    });
    await Deno.writeTextFile(this.kubeconfig, stringify(kubeconfig), { mode: 0o600 });
    const tuning: Tuning = {
      nodeLeaseDurationSeconds: options.nodeLeaseDurationSeconds,
      controllerQps: options.controllerQps,
    };
    if (options.audit) {
      tuning.audit = {
        policyFile: `${this.dir}/audit-policy.yaml`,
        logFile: `${this.dir}/logs/audit.log`,
      };
      await Deno.writeTextFile(tuning.audit.policyFile, auditPolicy(options.audit));
    }
    const specs = componentSpecs({
      dir: this.dir,
      e2eDir: E2E_DIR,
      etcdPort,
      etcdPeerPort,
      apiPort,
      tuning,
    });

    await this.#start(specs.etcd);
    await this.#waitFor("etcd to be healthy", async () => {
      const res = await fetch(`${this.state.etcd}/health`);
      return (await res.json()).health === "true";
    });
    await this.#start(specs["kube-apiserver"]);
    await this.#waitApiReady();
    for (const name of COMPONENTS.slice(2)) await this.#start(specs[name]);
    // Pods cannot be created in a namespace before its default ServiceAccount.
    await this.#waitFor("the default ServiceAccount", async () => {
      const res = await this.#fetch("GET", "/api/v1/namespaces/default/serviceaccounts/default");
      await res.body?.cancel();
      return res.ok;
    });
  }

  async #start(spec: ProcSpec): Promise<void> {
    const proc = spawnDetached(spec);
    this.#spawned.set(proc.pid, proc);
    this.state.procs[spec.name as Component] = { pid: proc.pid, spec };
    // Recorded at once, so that `down` finds it even if `up` is interrupted.
    await Deno.writeTextFile(`${this.dir}/state.json`, JSON.stringify(this.state, null, 2));
  }

  /** Reports whether `pid`, one of this cluster's components, still runs. */
  #alive = (pid: number): boolean => {
    const spawned = this.#spawned.get(pid);
    return spawned ? !spawned.exited() : isRunning(this.dir, pid);
  };

  /** Polls `check` until true; fails early, with the log, if a component died. */
  async #waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (true) {
      for (const [name, proc] of Object.entries(this.state.procs)) {
        if (proc !== undefined && !this.#alive(proc.pid)) {
          const log = await tail(proc.spec.log, 30);
          throw new Error(
            `Cannot wait for ${what}: ${name} exited; ${proc.spec.log} ends:\n${log}`,
          );
        }
      }
      if (await check().catch(() => false)) return;
      if (Date.now() > deadline) {
        throw new Error(`Cannot wait for ${what}: timed out; logs:\n${await this.logs(10)}`);
      }
      await delay(100);
    }
  }

  #waitApiReady(): Promise<void> {
    return this.#waitFor("kube-apiserver /readyz", async () => {
      const res = await this.#fetch("GET", "/readyz");
      await res.body?.cancel();
      return res.ok;
    });
  }

  #fetch(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<Response> {
    if (this.#client === undefined) {
      const pki = `${this.dir}/pki`;
      this.#client = Deno.createHttpClient({
        caCerts: [Deno.readTextFileSync(`${pki}/ca.crt`)],
        cert: Deno.readTextFileSync(`${pki}/admin.crt`),
        key: Deno.readTextFileSync(`${pki}/admin.key`),
      });
    }
    return fetch(`${this.server}${path}`, {
      method,
      client: this.#client,
      headers: body === undefined ? {} : { "content-type": contentType },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  }

  /** Sends a JSON request as admin; returns the decoded body. */
  async api(method: string, path: string, body?: unknown, contentType?: string) {
    const res = await this.#fetch(method, path, body, contentType);
    const text = await res.text();
    if (!res.ok) throw new Error(`Cannot ${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text);
  }

  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }

  async kubectl(args: string[], stdin?: string): Promise<CommandResult> {
    const child = new Deno.Command(K8S, {
      args: ["kubectl", `--kubeconfig=${this.kubeconfig}`, ...args],
      stdin: stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    if (stdin !== undefined) {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(stdin));
      await writer.close();
    }
    const { code, stdout, stderr } = await child.output();
    const text = new TextDecoder();
    return { code, stdout: text.decode(stdout), stderr: text.decode(stderr) };
  }

  async createNodes(specs: NodeSpec[]): Promise<void> {
    // Sequential POSTs are quick on a local API server and keep errors in order.
    for (const spec of specs) await this.api("POST", "/api/v1/nodes", nodeObject(spec));
    const names = new Set(specs.map((s) => s.name));
    await this.#waitFor(`${names.size} node(s) to be Ready`, async () => {
      const list = await this.api("GET", "/api/v1/nodes");
      const ready = list.items.filter((node: NodeObject) =>
        names.has(node.metadata.name) &&
        node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")
      );
      return ready.length === names.size;
    });
  }

  async deleteNode(name: string): Promise<void> {
    await this.api("DELETE", `/api/v1/nodes/${name}`);
    await this.#waitFor(`node ${name} to be deleted`, async () => {
      const res = await this.#fetch("GET", `/api/v1/nodes/${name}`);
      await res.body?.cancel();
      return res.status === 404;
    });
  }

  async setNodeReady(name: string, ready: boolean): Promise<void> {
    const path = `/api/v1/nodes/${name}`;
    const merge = "application/merge-patch+json";
    const isReady = async () => {
      const node: NodeObject = await this.api("GET", path);
      return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ??
        false;
    };
    if (ready) {
      // node-initialize matches again and writes every condition afresh.
      await this.api(
        "PATCH",
        path,
        { metadata: { annotations: { [NOT_READY_ANNOTATION]: null } } },
        merge,
      );
      await this.#waitFor(`node ${name} to be Ready`, isReady);
      return;
    }
    // The annotation first: once Ready is False, node-initialize would
    // otherwise match the node and make it Ready again at once.
    await this.api(
      "PATCH",
      path,
      { metadata: { annotations: { [NOT_READY_ANNOTATION]: "true" } } },
      merge,
    );
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    // Conditions are merged by type under a strategic merge patch, so the
    // others stay as kwok wrote them.
    await this.api("PATCH", `${path}/status`, {
      status: {
        conditions: [{
          type: "Ready",
          status: "False",
          reason: "KubeletNotReady",
          message: "e2e: made NotReady by the test",
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        }],
      },
    }, "application/strategic-merge-patch+json");
    await this.#waitFor(`node ${name} to be NotReady`, async () => !(await isReady()));
  }

  async setRuntimeHandlers(name: string, handlers: string[]): Promise<void> {
    // A merge patch replaces the whole list.
    await this.api(
      "PATCH",
      `/api/v1/nodes/${name}/status`,
      { status: { runtimeHandlers: runtimeHandlers(handlers) } },
      "application/merge-patch+json",
    );
  }

  async restartApiServer(): Promise<void> {
    const proc = this.state.procs["kube-apiserver"];
    if (proc === undefined) throw new Error("Cannot restart kube-apiserver: it was never started");
    await killGroups([proc.pid], this.#alive);
    // Connections pooled before the restart point at a dead server.
    this.close();
    await this.#start(proc.spec);
    await this.#waitApiReady();
  }

  signalApiServer(signal: Deno.Signal): void {
    const proc = this.state.procs["kube-apiserver"];
    if (proc === undefined || !this.#alive(proc.pid)) {
      throw new Error(`Cannot send ${signal} to kube-apiserver: it does not run`);
    }
    Deno.kill(proc.pid, signal);
  }

  async compactEtcd(): Promise<number> {
    const etcd = async (path: string, body: unknown) => {
      const res = await fetch(`${this.state.etcd}${path}`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      const json = await res.json();
      if (!res.ok) throw new Error(`Cannot POST etcd ${path}: ${JSON.stringify(json)}`);
      return json;
    };
    // The API server learns of compactions through this key (its own
    // compactor writes it too) and then compacts its watch caches.
    const key = btoa("compact_rev_key");
    const revision = Number((await etcd("/v3/kv/range", { key })).header.revision);
    await etcd("/v3/kv/put", { key, value: btoa(String(revision)) });
    await etcd("/v3/kv/compaction", { revision: String(revision), physical: true });
    await this.restartApiServer();
    const expired = async (path: string) => {
      const res = await this.#fetch(
        "GET",
        `${path}?watch=true&resourceVersion=${revision - 1}&timeoutSeconds=1`,
      );
      const text = await res.text();
      return res.status === 410 || text.includes('"code":410');
    };
    await this.#waitFor("watches from before the compaction to expire", async () => {
      const paths = ["/api/v1/pods", "/api/v1/nodes", "/apis/batch/v1/jobs"];
      return (await Promise.all(paths.map(expired))).every(Boolean);
    });
    return revision;
  }

  async metrics(): Promise<string> {
    const res = await this.#fetch("GET", "/metrics");
    const text = await res.text();
    if (!res.ok) throw new Error(`Cannot GET /metrics: ${res.status} ${text}`);
    return text;
  }

  async logs(lines = 20): Promise<string> {
    const parts = [];
    for (const name of COMPONENTS) {
      const log = `${this.dir}/logs/${name}.log`;
      parts.push(`== ${name} (${log}) ==\n${await tail(log, lines)}`);
    }
    return parts.join("\n");
  }

  async stop(options: StopOptions = {}): Promise<void> {
    this.close();
    const pid = (name: Component) => this.state.procs[name]?.pid ?? 0;
    // Clients first, so that they do not log a storm of connection errors.
    await killGroups(COMPONENTS.slice(2).map(pid), this.#alive);
    await killGroups([pid("kube-apiserver")], this.#alive);
    await killGroups([pid("etcd")], this.#alive);
    if (options.removeDir) await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

interface NodeObject {
  metadata: { name: string };
  status?: { conditions?: { type: string; status: string }[] };
}

async function main(args: string[]): Promise<number> {
  let options: CliOptions;
  try {
    options = parseArgs(args, DEFAULT_DIR);
  } catch (error) {
    console.error(`${(error as Error).message}\nRun \`deno task cluster --help\` for usage.`);
    return 2;
  }
  switch (options.command) {
    case "help":
      console.log(USAGE);
      return 0;
    case "up": {
      const started = performance.now();
      // An interrupted `up` must not leave components behind.
      const abort = () => {
        console.error("Interrupted: stopping the components started so far");
        stopCluster(options.dir).finally(() => Deno.exit(130));
      };
      Deno.addSignalListener("SIGINT", abort);
      Deno.addSignalListener("SIGTERM", abort);
      const cluster = await startCluster(options);
      console.log(`cluster up in ${((performance.now() - started) / 1000).toFixed(1)}s
  server:     ${cluster.server}
  kubeconfig: ${cluster.kubeconfig}
  logs:       ${cluster.dir}/logs/
  nodes:      ${options.nodes}
export KUBECONFIG=${cluster.kubeconfig}`);
      Deno.removeSignalListener("SIGINT", abort);
      Deno.removeSignalListener("SIGTERM", abort);
      (cluster as LocalCluster).close();
      return 0;
    }
    case "hook":
      return await runHook({
        dir: options.dir,
        release: options.release!,
        namespace: options.namespace,
      });
    case "down":
      await stopCluster(options.dir, { removeDir: options.purge });
      console.log(`cluster in ${options.dir} stopped`);
      return 0;
    default: {
      const status = await clusterStatus(options.dir);
      const running = Object.values(status.components).every((pid) => pid !== null);
      console.log(`cluster in ${options.dir}: ${running ? "up" : "down"}`);
      if (status.server) console.log(`  server: ${status.server}`);
      for (const [name, pid] of Object.entries(status.components)) {
        console.log(
          `  ${name.padEnd(24)} ${pid === null ? "not running" : `running (pid ${pid})`}`,
        );
      }
      if (status.nodes !== undefined) console.log(`  nodes: ${status.nodes}`);
      return running ? 0 : 1;
    }
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    console.error((error as Error).message);
    Deno.exit(1);
  }
}
