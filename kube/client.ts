/**
 * **kube/** owns the cluster access, as kubectl has it: the kubeconfig,
 * credentials, exec plugins, who-am-I, the client-side limiter, the one API
 * client with its one retry policy, and the informer. It imports `base/` and
 * `job.ts` only.
 *
 * The one API layer: credentials from the kubeconfig (`kubeconfig.ts` finds
 * it, `credentials.ts` applies client-go's rules, `exec.ts` runs exec
 * plugins), requests over Deno's own `fetch`, one retry policy, paginated
 * lists and watches that survive idle periods.
 *
 * client-node's own `Watch` (undici) stalls silently under Deno once a watch
 * has been idle for 30 s (client-node #3020), so the watch here reads the
 * stream itself with a server-side `timeoutSeconds` and an inactivity timer.
 *
 * @module
 */

import type { V1Job, V1Node, V1ObjectMeta, V1Pod } from "@kubernetes/client-node";
import {
  ConfigError,
  contextNames,
  type KubeconfigIo,
  loadKubeconfig,
  type Target,
} from "./kubeconfig.ts";
import { CredentialSource, type Identity, planCredentials, type ProxyPlan } from "./credentials.ts";
import { DENO_RUNNER, ExecPlugin } from "./exec.ts";
import { Limiter, type LimiterOptions } from "./limiter.ts";
import { Contact, ShutdownCut, type UnreachableNote } from "./_contact.ts";

export { ConfigError };
export type { UnreachableNote };

/** An API request that failed, with what a user needs to act on it. */
export class ApiError extends Error {
  /** HTTP status; 0 when the server could not be reached. */
  status: number;
  /** The Status reason (`NotFound`, `Forbidden`, …) or `Unreachable`/`Timeout`. */
  reason: string;
  /** The Kubernetes verb (`get`, `list`, `watch`, `create`, `delete`). */
  verb: string;
  /** The resource, e.g. `jobs` or `nodes`. */
  resource: string;
  /** How long the server asked us to wait (429), in milliseconds. */
  retryAfterMs?: number;
  /**
   * The Status's `details.causes`: what tells a PodDisruptionBudget's 429
   * (cause `DisruptionBudget`, naming the budget) from throttling.
   */
  causes?: StatusCause[];
  /**
   * A write that may have been applied though its answer was lost (a
   * timeout, a connection cut after the request went out, a 5xx such as 504
   * "may still be processing"): it was not sent again, and only a read can
   * tell whether it took effect.
   */
  uncertain?: boolean;
  /** The connection failed to open: nothing of the request was sent. */
  unsent?: boolean;

  /** Builds an error; `message` is the server's Status message or the network error. */
  constructor(
    init: {
      status: number;
      reason: string;
      verb: string;
      resource: string;
      message: string;
      causes?: StatusCause[];
    },
    retryAfterMs?: number,
  ) {
    super(`Cannot ${init.verb} ${init.resource}: ${init.message}`);
    this.name = "ApiError";
    this.status = init.status;
    this.reason = init.reason;
    this.verb = init.verb;
    this.resource = init.resource;
    this.retryAfterMs = retryAfterMs;
    this.causes = init.causes;
  }
}

/** One entry of a Status's `details.causes`. */
export interface StatusCause {
  /**
   * Machine-readable kind, e.g. `DisruptionBudget`, `NamespaceTerminating`,
   * `FieldValueInvalid` (Go's `StatusCause.Type`, which is `reason` in JSON).
   */
  reason?: string;
  /** What the server says about it. */
  message?: string;
  /** The field concerned, if any. */
  field?: string;
}

/** The retry policy every request of the tool follows. */
export interface RetryPolicy {
  /** How long one request may take before it is abandoned and retried. @default 30000 */
  requestTimeoutMs: number;
  /** How long retries of one call may go on in all. @default 90000 */
  budgetMs: number;
  /** The first backoff. @default 250 */
  baseDelayMs: number;
  /** The longest backoff. @default 8000 */
  maxDelayMs: number;
}

/** The defaults of {@linkcode RetryPolicy}. */
export const DEFAULT_RETRY: RetryPolicy = {
  requestTimeoutMs: 30_000,
  budgetMs: 90_000,
  baseDelayMs: 250,
  maxDelayMs: 8_000,
};

/**
 * Whether an error is a PodDisruptionBudget refusing an eviction (429 with
 * the cause `DisruptionBudget`), not the API server throttling the client.
 *
 * @example
 * ```ts
 * isBudgetRefusal(new ApiError({ status: 429, reason: "TooManyRequests", verb: "create",
 *   resource: "pods/eviction", message: "", causes: [{ reason: "DisruptionBudget" }] })); // true
 * ```
 */
export function isBudgetRefusal(err: ApiError): boolean {
  return err.status === 429 && (err.causes ?? []).some((c) => c.reason === "DisruptionBudget");
}

/**
 * Whether a failed request may succeed if sent again: throttled (429), a
 * server error (5xx), a timeout or a connection failure. Other 4xx answers
 * cannot heal by waiting.
 */
export function isRetryable(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  return err.status === 0 || err.status === 429 || err.status >= 500;
}

/**
 * Whether a request may make a second Job when sent again: a create of a
 * Job (the run's own or a smoke test), not a dry run. A Job has a fixed
 * name, but its `ttlSecondsAfterFinished` may remove the first before the
 * resend, which then runs the task on its node once more. Every other
 * request this tool sends doubles nothing: a review and a dry run store
 * nothing; a ConfigMap (the run record, the exit latch) has a fixed name
 * nothing collects, so a resend meets 409, which its caller takes as done;
 * an Event sent twice is shown twice (client-go's recorder re-sends one up
 * to 12 times); an eviction carries the pod's UID; a DELETE carries a UID
 * precondition and takes a 404 as done; each PATCH sets values or tests
 * them first.
 */
function makesObject(method: string, path: string): boolean {
  if (method !== "POST" || /[?&]dryRun=All/.test(path)) return false;
  return /^\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs(\?|$)/.test(path);
}

/**
 * Whether a failed request may be sent again. A create may be re-sent only
 * when it cannot have been applied: the server asked to wait (`Retry-After`
 * on a 429 or a 5xx) or the connection never opened. client-go
 * (`rest/with_retry.go` `IsNextRetry`) re-sends no write on an error and a
 * response only with `Retry-After`: a Job create re-sent after a timeout or
 * a 504 makes a second Job once its TTL removed the first.
 *
 * @example
 * ```ts
 * const err = new ApiError({ status: 504, reason: "Timeout", verb: "create", resource: "jobs", message: "" });
 * mayResend("POST", "/apis/batch/v1/namespaces/a/jobs", err); // false
 * mayResend("GET", "/apis/batch/v1/namespaces/a/jobs/j", err); // true
 * ```
 */
export function mayResend(method: string, path: string, err: ApiError): boolean {
  if (!isRetryable(err)) return false;
  if (!makesObject(method, path) || err.unsent) return true;
  return err.retryAfterMs !== undefined && err.status !== 0;
}

/**
 * How long to wait before attempt `attempt` (1 = the first retry): the
 * server's `Retry-After` plus up to a second or a quarter of it (whichever is
 * more) when it gave one, else exponential backoff with jitter. The jitter is
 * what keeps many requests throttled together from all returning in the
 * same instant and being throttled together again.
 *
 * @param random a number in [0, 1), for jitter
 * @example
 * ```ts
 * const err = new ApiError({ status: 429, reason: "", verb: "get", resource: "jobs", message: "" }, 4000);
 * retryDelayMs(1, err, DEFAULT_RETRY, 0.5); // 4500
 * ```
 */
export function retryDelayMs(
  attempt: number,
  err: ApiError,
  policy: RetryPolicy,
  random: number,
): number {
  if (err.retryAfterMs !== undefined) {
    return Math.round(err.retryAfterMs + random * Math.max(1000, err.retryAfterMs / 4));
  }
  const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(cap / 2 + (cap / 2) * random);
}

/** Counts of what the API layer did, for the summary and the benchmarks. */
export interface ApiStats {
  /** Requests sent, by `verb resource`. */
  requests: Record<string, number>;
  /** 429 answers of the API server's throttling (Priority and Fairness, max-in-flight). */
  throttled: number;
  /**
   * 429 answers to evictions that a PodDisruptionBudget refused (cause
   * `DisruptionBudget`): the budget working as meant, not throttling.
   */
  budgetRefusals: number;
  /** Requests sent again under the retry policy. */
  retries: number;
  /**
   * Answers by HTTP status code, `<error>` for no answer (client-go's
   * `rest_client_requests_total{code}`), for `--metrics-addr`.
   */
  codes?: Record<string, number>;
}

/** One event of a watch. */
export interface WatchEvent<T> {
  /** ADDED, MODIFIED, DELETED, BOOKMARK or ERROR. */
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  /** The object; a Status for ERROR. */
  object: T & { code?: number; reason?: string; message?: string };
}

/**
 * How a LIST asks the API server to answer: whole objects, only each
 * object's metadata (`PartialObjectMetadataList`, what client-go's metadata
 * informers read), or kubectl's server-side table with each row's metadata
 * (what `kubectl get` reads). A Job is ~3.8 KB of JSON, its metadata ~2 KB,
 * its table row with metadata ~2.2 KB; every API server since 1.15 serves
 * all three.
 */
export type ListForm = "objects" | "metadata" | "table";

/** The Accept header of each {@linkcode ListForm}, as kubectl and client-go send it. */
const ACCEPT: Record<ListForm, string> = {
  objects: "application/json",
  metadata: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
  table: "application/json;as=Table;g=meta.k8s.io;v=v1",
};

/** One row of a `table` LIST: the object's metadata and its cells by column name. */
export interface TableRow {
  /** The object's metadata (with `includeObject=Metadata`, the default; else empty). */
  metadata: V1ObjectMeta;
  /** The row's cells, by column name (`Name`, `Status`, `Age`, …, as `kubectl get` heads them). */
  cells: Record<string, unknown>;
}

/** A Table page as the API server sends it. */
interface TablePage {
  columnDefinitions: { name: string }[];
  rows?: { cells: unknown[]; object?: { metadata?: V1ObjectMeta } }[] | null;
}

/** A Table page's rows as {@linkcode TableRow}s. */
function tableRows(page: TablePage): TableRow[] {
  const names = page.columnDefinitions.map((c) => c.name);
  return (page.rows ?? []).map((r) => ({
    metadata: r.object?.metadata ?? {},
    cells: Object.fromEntries(names.map((n, i) => [n, r.cells[i]])),
  }));
}

/** A list's items with the resourceVersion to watch from. */
export interface ListResult<T> {
  /** Every item, across pages. */
  items: T[];
  /** The list's resourceVersion. */
  resourceVersion: string;
}

/** Where to find credentials. */
export interface ConnectOptions {
  /** A kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then in-cluster. */
  kubeconfig?: string;
  /** A context of the kubeconfig; default: its current context. */
  context?: string;
  /** The retry policy. */
  retry?: RetryPolicy;
  /**
   * The run's stop (SIGINT/SIGTERM). Once aborted, nothing is retried, a read
   * in flight is aborted at once, and every other request has
   * {@linkcode STOP_GRACE_MS} left (see {@linkcode attemptSignal}).
   */
  signal?: AbortSignal;
  /**
   * Kills a running exec credential plugin when aborted (a completion's
   * bound). Not the run's stop: the writes a stopped run still makes (an
   * uncordon) may need the plugin's fresh credential.
   */
  pluginSignal?: AbortSignal;
  /**
   * Reads only regular files of a bounded size (a completion, which reads
   * before any time bound): see {@linkcode kubeconfigContexts}.
   */
  regularFilesOnly?: boolean;
  /**
   * How long requests are retried while the API server has never answered
   * (a wrong address, a server still starting); 0 fails the first request at
   * once, as kubectl does. Once it has answered, the retry policy's budget
   * applies. @default the retry policy's `budgetMs`
   */
  apiWaitMs?: number;
  /**
   * Called once, on the first failed contact with an API server that has
   * never answered, when requests will be retried: a wait that would
   * otherwise pass in silence.
   */
  onUnreachable?: (note: UnreachableNote) => void;
  /** The client-side bound on requests. @default {@linkcode DEFAULT_LIMITS} */
  limits?: LimiterOptions;
}

/**
 * After a stop, how long the API server may stay silent before every request
 * still open (a write in flight, the summary's records, the owner guard) is
 * cut. A write is not cut at once: it may already be applied, and its answer
 * (a created Job) is what the summary reports. But past the kubelet's grace
 * period (30 s by default) the process is SIGKILLed with no summary at all,
 * so a silent API server must not hold the shutdown for a request timeout.
 */
export const STOP_GRACE_MS = 3_000;

/**
 * The default bound on requests: 16 in flight (watches aside), 50 a second
 * with bursts of 300. client-go's own 5/10 would hold a rollout at
 * --parallelism 100 (about 3 requests per node) to under 2 nodes a second;
 * 50/300 are kubectl's discovery limits and let one whole wave of 100 nodes
 * start at once. The API server's Priority and Fairness stays the real
 * protection; this bound only keeps one client from flooding it.
 */
export const DEFAULT_LIMITS: LimiterOptions = { concurrency: 16, qps: 50, burst: 300 };

/**
 * The resource a request path names, as RBAC names it: `nodes` for
 * `/api/v1/nodes/n1`, `jobs` for `/apis/batch/v1/namespaces/ns/jobs`,
 * `pods/log` for a subresource.
 *
 * @example
 * ```ts
 * resourceOf("/apis/batch/v1/namespaces/ops/jobs/up-n1?dryRun=All"); // "jobs"
 * ```
 */
export function resourceOf(path: string): string {
  const parts = path.split("?")[0].split("/").filter(Boolean);
  // Drop the group and version: /api/v1/... or /apis/<group>/<version>/...
  const rest = parts[0] === "api" ? parts.slice(2) : parts[0] === "apis" ? parts.slice(3) : parts;
  // A namespaced collection: namespaces/<ns>/<resource>/...; a bare
  // /namespaces/<ns> is the namespace itself.
  const scoped = rest[0] === "namespaces" && rest.length > 2 ? rest.slice(2) : rest;
  const [resource, , sub] = scoped;
  if (!resource) return path;
  return sub ? `${resource}/${sub}` : resource;
}

/**
 * Why a `fetch` failed, in a user's words. Deno says only "fetch failed" and
 * keeps the reason (a refused connection, a proxy or API server certificate
 * that the kubeconfig's CA did not sign) in the error's cause, after the
 * request's URL, which the message names already.
 *
 * @example
 * ```ts
 * fetchFailure(new TypeError("fetch failed", {
 *   cause: new Error("error sending request for url (https://h/): client error (Connect): invalid peer certificate: UnknownIssuer"),
 * })); // "client error (Connect): invalid peer certificate: UnknownIssuer"
 * ```
 */
export function fetchFailure(e: unknown): string {
  const err = e as Error;
  const cause = (err?.cause as Error | undefined)?.message;
  const why = cause || err?.message || String(e);
  return why.replace(/^error sending request for url \([^)]*\): /, "");
}

/**
 * Whether a failed fetch failed on TLS verification: the peer's certificate
 * (the API server's or an https proxy's) is not signed by the CA in use,
 * expired, or names another host. rustls (Deno's TLS) says "invalid peer
 * certificate: UnknownIssuer" and the like.
 */
export function untrusted(e: unknown): boolean {
  return /invalid peer certificate/i.test(fetchFailure(e));
}

/**
 * The context names of the kubeconfig `--kubeconfig` (or kubectl's lookup)
 * names, read from the files alone; what shell completion offers.
 *
 * @throws {ConfigError} when no kubeconfig is found or one cannot be read
 */
export function kubeconfigContexts(kubeconfig?: string): string[] {
  return contextNames({ kubeconfig }, REGULAR_IO);
}

/** The largest kubeconfig a completion reads: a larger one answers nothing. */
export const COMPLETE_KUBECONFIG_BYTES = 16 * 1024 * 1024;

/**
 * Reads `path` only when it is a regular file of at most
 * {@linkcode COMPLETE_KUBECONFIG_BYTES}. A completion reads the kubeconfig
 * synchronously before any time bound, and a FIFO nobody writes (or
 * /dev/zero) would block the prompt for good; a run still reads what kubectl
 * reads, `--kubeconfig <(…)` included.
 */
function readRegularFile(path: string): string {
  const info = Deno.statSync(path);
  if (!info.isFile) throw new Error(`${path} is not a regular file`);
  if (info.size > COMPLETE_KUBECONFIG_BYTES) {
    throw new Error(`${path} is larger than ${COMPLETE_KUBECONFIG_BYTES} bytes`);
  }
  return Deno.readTextFileSync(path);
}

/** What was read of each pipe ({@linkcode readOnceIfPipe}), for this process. */
const PIPED = new Map<string, string>();

/**
 * Reads `path`; a pipe (`--kubeconfig <(…)`, a FIFO) once per process, its
 * text kept: a pipe gives its text to its first reader only, and a fleet
 * connects once per cluster with the same `--kubeconfig` (the second read
 * found no contexts). A regular file is read again each time: a token or
 * certificate file rotates under the run, as kubectl re-reads it.
 */
function readOnceIfPipe(path: string): string {
  const kept = PIPED.get(path);
  if (kept !== undefined) return kept;
  const text = Deno.readTextFileSync(path);
  if (!Deno.statSync(path).isFile) PIPED.set(path, text);
  return text;
}

/** The kubeconfig reads, from the file system and the environment. */
const DENO_IO: KubeconfigIo = {
  env: (name) => Deno.env.get(name),
  readTextFile: readOnceIfPipe,
  exists: (path) => {
    try {
      Deno.statSync(path);
      return true;
    } catch (e) {
      // A file we may not read exists: reading it reports that.
      return !(e instanceof Deno.errors.NotFound);
    }
  },
  listSeparator: Deno.build.os === "windows" ? ";" : ":",
};

/** {@linkcode DENO_IO} that reads regular files only, of a bounded size (completion). */
const REGULAR_IO: KubeconfigIo = { ...DENO_IO, readTextFile: readRegularFile };

/** What bounds one attempt of a request: {@linkcode attemptSignal}'s input. */
export interface AttemptBounds {
  /** The request timeout, in ms. */
  timeoutMs: number;
  /** Whether the request only reads (GET): its answer is moot once the run stops. */
  read: boolean;
  /** The caller's own signal (an informer stopping): aborts the attempt at once. */
  caller?: AbortSignal;
  /** The run's stop. */
  stop?: AbortSignal;
  /** Aborted once the stopped run's API server stays silent (see {@linkcode STOP_GRACE_MS}). */
  cut?: AbortSignal;
}

/**
 * The signal of one attempt, and a way to release it once the attempt is
 * done. It aborts with a TimeoutError after `timeoutMs` or at the shutdown's
 * `cut`; with an AbortError when the caller aborts, or, for a read in flight,
 * when the run stops: its answer is moot. A write in flight at the stop, or
 * a request the shutdown sends, runs until the cut. The timer is cleared with the request:
 * `AbortSignal.timeout` keeps its timer, and with it the signal, for the
 * whole timeout however fast the answer came; at fleet scale (300 requests a
 * second against a fast server) that held about 15,000 timers and signals,
 * a fifth of the live heap.
 *
 * @example
 * ```ts
 * const stop = new AbortController();
 * const a = attemptSignal({ timeoutMs: 30_000, read: true, stop: stop.signal });
 * stop.abort();
 * a.signal.aborted; // true
 * a.clear();
 * ```
 */
export function attemptSignal(b: AttemptBounds): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const timeout = () => controller.abort(new DOMException("Signal timed out.", "TimeoutError"));
  const timer = setTimeout(timeout, b.timeoutMs);
  const abort = () => controller.abort(new DOMException("Stopped.", "AbortError"));
  const onStop = () => b.read && abort();
  if (b.caller?.aborted) abort();
  else if (b.cut?.aborted) timeout();
  b.caller?.addEventListener("abort", abort, { once: true });
  b.cut?.addEventListener("abort", timeout, { once: true });
  if (!b.stop?.aborted) b.stop?.addEventListener("abort", onStop, { once: true });
  return {
    signal: controller.signal,
    clear: () => {
      clearTimeout(timer);
      b.caller?.removeEventListener("abort", abort);
      b.cut?.removeEventListener("abort", timeout);
      b.stop?.removeEventListener("abort", onStop);
    },
  };
}

/** Why an aborted attempt ended: its timeout, or a stop (the caller's or the run's). */
function abortedBy(signal: AbortSignal): "Timeout" | "Stopped" | undefined {
  if (!signal.aborted) return undefined;
  return (signal.reason as Error)?.name === "TimeoutError" ? "Timeout" : "Stopped";
}

/** What every HTTP client of a connection shares: the CA and the proxy. */
interface Transport {
  ca?: string;
  proxy?: ProxyPlan;
}

function httpClient(transport: Transport, id: Identity): Deno.HttpClient {
  return Deno.createHttpClient({
    caCerts: transport.ca ? [transport.ca] : undefined,
    cert: id.cert,
    key: id.key,
    proxy: transport.proxy,
    // HTTP/1.1 on purpose: over HTTP/2 every request shares one connection,
    // so a stalled connection stalls every retry too. With HTTP/1.1 a
    // timed-out request takes its connection with it and the retry gets a
    // fresh one.
    http1: true,
    http2: false,
  } as Deno.CreateHttpClientOptions);
}

/**
 * A client of one API server. Every request goes through {@linkcode Kube.request},
 * which applies the retry policy and counts what it sends.
 */
export class Kube {
  /** The API server's URL. */
  readonly server: string;
  /** The namespace of the kubeconfig's context, if it names one. */
  readonly contextNamespace?: string;
  /** What this client has sent. */
  readonly stats: ApiStats = { requests: {}, throttled: 0, budgetRefusals: 0, retries: 0 };
  /**
   * The API server's clock minus this one's, in ms, at least: the largest
   * `Date` header (whole seconds, truncated, stamped before the answer
   * arrived) minus the local time of its arrival; undefined before the
   * first answer with one. A lower bound, so that a time stamped by the API
   * server (`completionTime`) said on this clock is never earlier than it was.
   */
  serverClockOffsetMs?: number;
  #source: CredentialSource;
  #transport: Transport;
  #headers: [string, string][];
  #client: { cert?: string; key?: string; http: Deno.HttpClient };
  #retired = new Map<Deno.HttpClient, ReturnType<typeof setTimeout>>();
  #retry: RetryPolicy;
  #stop?: AbortSignal;
  #limiter: Limiter;
  #contact: Contact;
  #cut: ShutdownCut;
  /** The API server's clock at its latest answer (its `Date` header), and the local clock then. */

  private constructor(
    target: Target,
    conn: {
      source: CredentialSource;
      transport: Transport;
      headers: [string, string][];
      first: Identity;
    },
    opts: {
      retry: RetryPolicy;
      stop?: AbortSignal;
      limits?: LimiterOptions;
      apiWaitMs?: number;
      onUnreachable?: (note: UnreachableNote) => void;
    },
  ) {
    this.#limiter = new Limiter(opts.limits ?? DEFAULT_LIMITS);
    // A stopping run drains what it queued (and its last records) at once.
    opts.stop?.addEventListener("abort", () => this.#limiter.lift(), { once: true });
    this.#source = conn.source;
    this.#transport = conn.transport;
    this.#headers = conn.headers;
    const { cert, key } = conn.first;
    this.#client = { cert, key, http: httpClient(conn.transport, conn.first) };
    this.#retry = opts.retry;
    this.#stop = opts.stop;
    this.server = target.cluster.server.replace(/\/+$/, "");
    this.contextNamespace = target.context.namespace;
    this.#contact = new Contact(
      this.server,
      opts.apiWaitMs ?? opts.retry.budgetMs,
      opts.onUnreachable,
    );
    this.#cut = new ShutdownCut(opts.stop, STOP_GRACE_MS, () => this.#contact.lastAnswerAt);
  }

  /**
   * Loads credentials as kubectl would (running the exec plugin, if any, once
   * now) and builds a client; makes no request.
   *
   * @throws {ConfigError} when the kubeconfig is missing, unreadable, names no
   *   usable cluster, has a field that cannot be honoured, or its exec plugin fails
   */
  static async connect(opts: ConnectOptions = {}): Promise<Kube> {
    const io = opts.regularFilesOnly ? REGULAR_IO : DENO_IO;
    const target = loadKubeconfig(opts, io);
    const plan = planCredentials(target, io);
    const exec = plan.exec && new ExecPlugin(plan.exec, {
      cluster: plan.execCluster,
      runner: DENO_RUNNER,
      stdinIsTerminal: Deno.stdin.isTerminal(),
      signal: opts.pluginSignal,
    });
    const source = new CredentialSource(plan, io, exec);
    const first = await source.current();
    return new Kube(target, {
      source,
      transport: { ca: plan.tls.ca, proxy: plan.proxy },
      headers: plan.headers,
      first,
    }, {
      retry: opts.retry ?? DEFAULT_RETRY,
      stop: opts.signal,
      limits: opts.limits,
      apiWaitMs: opts.apiWaitMs,
      onUnreachable: opts.onUnreachable,
    });
  }

  /** Releases the HTTP clients' connections. */
  close(): void {
    this.#cut.close();
    this.#client.http.close();
    for (const [client, timer] of this.#retired) {
      clearTimeout(timer);
      client.close();
    }
    this.#retired.clear();
  }

  /**
   * The HTTP client for `id`'s certificate: an exec plugin may rotate it,
   * and Deno binds a client certificate to the client. The previous client
   * serves its requests in flight and is closed once they are surely over.
   */
  #httpFor(id: Identity): Deno.HttpClient {
    if (id.cert === this.#client.cert && id.key === this.#client.key) return this.#client.http;
    const old = this.#client.http;
    this.#client = { cert: id.cert, key: id.key, http: httpClient(this.#transport, id) };
    const timer = setTimeout(() => {
      this.#retired.delete(old);
      old.close();
    }, 2 * this.#retry.requestTimeoutMs + 60_000);
    Deno.unrefTimer(timer);
    this.#retired.set(old, timer);
    return this.#client.http;
  }

  /**
   * Sends one request. A 401 answer to credentials that can be renewed (a
   * token file, an exec plugin) renews them and sends the request once more,
   * as client-go's exec round tripper does: a token may rotate mid-run.
   */
  async #send(
    verb: string,
    method: string,
    path: string,
    body: unknown,
    signal: AbortSignal,
    accept = ACCEPT.objects,
  ): Promise<Response> {
    const key = `${verb} ${resourceOf(path)}`;
    this.stats.requests[key] = (this.stats.requests[key] ?? 0) + 1;
    const req = { verb, method, path, body, signal, accept };
    let id = await this.#identity(req);
    const res = await this.#counted(this.#sendAs(id, req));
    this.#contact.answered();
    if (res.status !== 401 || !this.#source.renewable) return res;
    await res.body?.cancel().catch(() => {});
    this.#source.invalidate(id);
    id = await this.#identity(req);
    return await this.#counted(this.#sendAs(id, req));
  }

  /** Counts an answer by its status code, or as `<error>` when none came. */
  async #counted(sent: Promise<Response>): Promise<Response> {
    const codes = this.stats.codes ??= {};
    const count = (code: string) => (codes[code] = (codes[code] ?? 0) + 1);
    try {
      const res = await sent;
      count(String(res.status));
      return res;
    } catch (e) {
      count("<error>");
      throw e;
    }
  }

  /**
   * The credentials for a request. A credential failure mid-run (a plugin
   * that fails now) becomes an ApiError 401, which is not retried.
   */
  async #identity(req: { verb: string; path: string }): Promise<Identity> {
    try {
      return await this.#source.current();
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      throw new ApiError({
        status: 401,
        reason: "Unauthorized",
        verb: req.verb,
        resource: resourceOf(req.path),
        message: e.message,
      });
    }
  }

  async #sendAs(
    id: Identity,
    { verb, method, path, body, signal, accept }: {
      verb: string;
      method: string;
      path: string;
      body: unknown;
      signal: AbortSignal;
      accept: string;
    },
  ): Promise<Response> {
    // Named, so that audit logs tell the dispatcher's requests from kubectl's.
    // A list, not a Headers object: Deno joins repeated names in a Headers
    // into one "a, b" line, and the API server reads each Impersonate-Group
    // line as one group.
    const headers: [string, string][] = [
      ["Accept", accept],
      ["User-Agent", "job-dispatcher"],
      ...this.#headers,
    ];
    if (id.authorization) headers.push(["Authorization", id.authorization]);
    if (body !== undefined) {
      headers.push([
        "Content-Type",
        method === "PATCH" ? "application/json-patch+json" : "application/json",
      ]);
    }
    try {
      const res = await fetch(this.server + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        client: this.#httpFor(id),
        signal,
      } as RequestInit);
      this.#noteServerClock(res);
      return res;
    } catch (e) {
      const aborted = abortedBy(signal);
      if (aborted) throw this.#abortError(aborted, verb, path);
      const refusedCert = untrusted(e);
      const err = new ApiError({
        status: 0,
        reason: refusedCert ? "Untrusted" : "Unreachable",
        verb,
        resource: resourceOf(path),
        message: `${this.server} ${refusedCert ? "not trusted" : "unreachable"}: ${
          fetchFailure(e)
        }`,
      });
      // hyper's "client error (Connect)": the connection (TCP, TLS) never
      // opened, so no byte of the request went out.
      err.unsent = /client error \(Connect\)/.test(fetchFailure(e));
      throw err;
    }
  }

  /** Tightens {@linkcode serverClockOffsetMs} from an answer's `Date` header. */
  #noteServerClock(res: Response): void {
    const date = Date.parse(res.headers.get("Date") ?? "");
    if (Number.isNaN(date)) return;
    const offset = date - Date.now();
    this.serverClockOffsetMs = Math.max(this.serverClockOffsetMs ?? -Infinity, offset);
  }

  /** The error of an attempt its signal ended: its timeout, or a stop. */
  #abortError(why: "Timeout" | "Stopped", verb: string, path: string): ApiError {
    return new ApiError({
      status: 0,
      reason: why,
      verb,
      resource: resourceOf(path),
      message: why === "Timeout"
        ? `no answer from ${this.server} ${
          this.#stop?.aborted ? "during the shutdown" : `within ${this.#retry.requestTimeoutMs} ms`
        }`
        : `stopped before ${this.server} answered`,
    });
  }

  static async #errorOf(res: Response, verb: string, path: string): Promise<ApiError> {
    let status: { reason?: string; message?: string; details?: { causes?: StatusCause[] } } = {};
    const text = await res.text().catch(() => "");
    try {
      status = JSON.parse(text);
    } catch {
      status = { message: text.trim().slice(0, 200) || res.statusText };
    }
    const retryAfter = res.headers.get("Retry-After");
    const seconds = retryAfter === null ? NaN : Number(retryAfter);
    return new ApiError(
      {
        status: res.status,
        reason: status.reason || res.statusText || String(res.status),
        verb,
        resource: resourceOf(path),
        message: status.message || res.statusText,
        causes: status.details?.causes,
      },
      Number.isFinite(seconds) ? seconds * 1000 : undefined,
    );
  }

  /**
   * Counts a 429 as throttling or as a PodDisruptionBudget's refusal: the
   * Eviction API answers 429 TooManyRequests for both, and only the cause
   * (`DisruptionBudget`, naming the budget) tells them apart.
   */
  #count429(err: ApiError): void {
    if (err.status !== 429) return;
    if (isBudgetRefusal(err)) this.stats.budgetRefusals++;
    else this.stats.throttled++;
  }

  /**
   * Sends one request under the retry policy and returns the decoded body.
   *
   * @param verb the Kubernetes verb, for errors and counts
   * @param once one attempt, no retry: for best-effort reads whose failure only costs a warning
   * @param signal aborts the request at once (a read whose caller stops)
   * @param accept the Accept header (a LIST's {@linkcode ListForm})
   * @throws {ApiError} when the answer is an error that retrying cannot heal, or the budget is
   *   spent; reason `Stopped` when `signal` or, for a read, the run's stop ended it
   */
  async request<T>(
    verb: string,
    method: string,
    path: string,
    body?: unknown,
    once = false,
    signal?: AbortSignal,
    accept = ACCEPT.objects,
  ): Promise<T> {
    const started = this.#contact.began();
    for (let attempt = 1;; attempt++) {
      let err: ApiError;
      // The slot is held until the answer is read (so the connection is back
      // in the pool) and given back before any retry waits.
      const release = await this.#limiter.acquire();
      const bound = attemptSignal({
        timeoutMs: this.#retry.requestTimeoutMs,
        read: method === "GET",
        caller: signal,
        stop: this.#stop,
        cut: this.#cut.signal,
      });
      try {
        const res = await this.#send(verb, method, path, body, bound.signal, accept);
        if (res.ok) return await res.json() as T;
        err = await Kube.#errorOf(res, verb, path);
      } catch (e) {
        if (e instanceof ApiError) err = e;
        else if (e instanceof DOMException || e instanceof TypeError) {
          // The body read was cut off or timed out: the same as no answer.
          const aborted = abortedBy(bound.signal);
          err = aborted ? this.#abortError(aborted, verb, path) : new ApiError({
            status: 0,
            reason: "Timeout",
            verb,
            resource: resourceOf(path),
            message: e.message,
          });
        } else throw e;
      } finally {
        bound.clear();
        release();
      }
      if (err.reason === "Stopped") throw err;
      this.#count429(err);
      const delay = retryDelayMs(attempt, err, this.#retry, Math.random());
      // A stopping run retries nothing: SIGTERM must not wait out a retry budget.
      const stopping = this.#stop?.aborted ?? false;
      // An untrusted certificate (the server's or the proxy's) does not heal
      // within a retry budget: kubectl fails at once, and so does the first
      // request here. Mid-run it still pauses starts like any outage (status 0).
      const untrustedNow = err.reason === "Untrusted";
      if (
        once || stopping || untrustedNow || !mayResend(method, path, err) ||
        Date.now() + delay > this.#contact.deadline(started, this.#retry.budgetMs)
      ) {
        err.uncertain = makesObject(method, path) && !err.unsent &&
          (err.status === 0 || err.status >= 500 && err.retryAfterMs === undefined);
        throw err;
      }
      this.#contact.failed(err, this.#contact.deadline(started, this.#retry.budgetMs));
      this.stats.retries++;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#stop?.removeEventListener("abort", done);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, delay);
        this.#stop?.addEventListener("abort", done, { once: true });
        signal?.addEventListener("abort", done, { once: true });
      });
      if (signal?.aborted) throw this.#abortError("Stopped", verb, path);
    }
  }

  /**
   * Lists a collection page by page (`limit`/`continue`), so that a fleet of
   * thousands of nodes never has to fit one answer. A `continue` token that
   * expired (410) restarts the list.
   *
   * @param keep what to keep of each item, applied page by page: a whole
   * 10,000-node list held until the last page would weigh ten times what
   * the dispatcher keeps of it, and V8 does not give the heap back
   * @param signal aborts the list at once, between pages or in the middle of one
   * @param form whole objects, their metadata, or table rows ({@linkcode TableRow}s: `T`
   * is then `TableRow`); a page of either of the last two is a fraction of the first
   */
  async list<T, U = T>(
    path: string,
    query: Record<string, string>,
    pageSize: number,
    keep?: (item: T) => U,
    signal?: AbortSignal,
    form: ListForm = "objects",
  ): Promise<ListResult<U>> {
    const all = form === "table" ? { includeObject: "Metadata", ...query } : query;
    for (let restart = 0;; restart++) {
      const items: U[] = [];
      let cont = "";
      let resourceVersion = "";
      try {
        do {
          const q = new URLSearchParams({ ...all, limit: String(pageSize) });
          if (cont) q.set("continue", cont);
          const page = await this.request<
            { items: T[]; metadata: { continue?: string; resourceVersion: string } } & TablePage
          >("list", "GET", `${path}?${q}`, undefined, false, signal, ACCEPT[form]);
          // An empty metadata or table page has no items or rows at all.
          const got = (form === "table" ? tableRows(page) as T[] : page.items) ?? [];
          for (const item of got) items.push(keep ? keep(item) : item as unknown as U);
          resourceVersion ||= page.metadata.resourceVersion;
          cont = page.metadata.continue ?? "";
        } while (cont);
        return { items, resourceVersion };
      } catch (e) {
        if (e instanceof ApiError && e.status === 410 && restart < 3) continue;
        throw e;
      }
    }
  }

  /**
   * Watches a collection from `resourceVersion`, yielding events until the
   * server ends the watch (`timeoutSeconds`) or `signal` aborts. The caller
   * re-watches from the last resourceVersion it saw; an ERROR event (410 Gone)
   * is yielded for the caller to re-list.
   *
   * @throws {ApiError} (status 0, `Timeout`) when the stream stays quiet for
   *   longer than the server could stay quiet: a frozen server or a dead path
   */
  async *watch<T>(
    path: string,
    query: Record<string, string>,
    resourceVersion: string,
    signal: AbortSignal,
    timeoutSeconds = 30,
  ): AsyncGenerator<WatchEvent<T>> {
    const q = new URLSearchParams({
      ...query,
      watch: "1",
      resourceVersion,
      allowWatchBookmarks: "true",
      timeoutSeconds: String(timeoutSeconds),
    });
    const idle = new AbortController();
    const both = AbortSignal.any([signal, idle.signal]);
    // The server closes the watch after timeoutSeconds; silence well past that
    // means a dead connection, which a stalled proxy or NAT never reports.
    const idleMs = (timeoutSeconds + 15) * 1000;
    // A watch takes a token but no slot: it stays open for minutes.
    await this.#limiter.admit();
    let timer = setTimeout(() => idle.abort(), idleMs);
    const res = await this.#send("watch", "GET", `${path}?${q}`, undefined, both).finally(() =>
      clearTimeout(timer)
    );
    if (!res.ok) {
      const err = await Kube.#errorOf(res, "watch", path);
      this.#count429(err);
      throw err;
    }
    // One timer for the whole watch, not one per chunk: each chunk only
    // notes its time, and the timer, when due, waits out the rest of the
    // silence since the last one (a timer per chunk was a tenth of the
    // watch's CPU at N=1000).
    let heard = performance.now();
    const quietCheck = () => {
      const left = idleMs - (performance.now() - heard);
      if (left <= 0) idle.abort();
      else timer = setTimeout(quietCheck, left);
    };
    timer = setTimeout(quietCheck, idleMs);
    // The body's bytes decoded here, not through a TextDecoderStream: each
    // chunk through a transform stream cost more CPU than its JSON.parse.
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    // Aborting the fetch does not always end a read: cancel the reader
    // itself, so that a stop never hangs here.
    const cancel = () => reader.cancel().catch(() => {});
    both.addEventListener("abort", cancel, { once: true });
    let buffered = "";
    try {
      while (true) {
        const { value, done } = await reader.read();
        // The idle timer cancels the reader, which ends the stream: that end
        // is silence, not the server closing the watch.
        if (done && idle.signal.aborted && !signal.aborted) throw new Error("quiet");
        if (done) return;
        heard = performance.now();
        // Only the new text is searched for line ends; the rest is kept once.
        let from = buffered.length;
        buffered += decoder.decode(value, { stream: true });
        let start = 0;
        let nl: number;
        while ((nl = buffered.indexOf("\n", from)) >= 0) {
          const line = buffered.slice(start, nl).trim();
          start = from = nl + 1;
          if (line) yield JSON.parse(line) as WatchEvent<T>;
        }
        buffered = buffered.slice(start);
      }
    } catch (e) {
      if (signal.aborted) return;
      // Quiet past the server's own timeout: the server or the path to it
      // is dead. An error, not an end, so that the caller counts the silence.
      const quiet = idle.signal.aborted;
      throw new ApiError({
        status: 0,
        reason: quiet ? "Timeout" : "Unreachable",
        verb: "watch",
        resource: resourceOf(path),
        message: quiet
          ? `watch silent for ${idleMs / 1000} s`
          : `watch stream broke: ${(e as Error).message}`,
      });
    } finally {
      clearTimeout(timer);
      both.removeEventListener("abort", cancel);
      reader.cancel().catch(() => {});
    }
  }

  /**
   * The API server's clock now (ms since the epoch): this clock moved by
   * {@linkcode serverClockOffsetMs}, plus half a second, since an HTTP date
   * has no fraction of a second and is truncated; undefined before any
   * answer carried one. What a reader compares the server's own timestamps
   * with (a ConfigMap's `managedFields` time), where the local clock may be
   * off by any amount (a bastion host without NTP).
   */
  serverNow(): number | undefined {
    const offset = this.serverClockOffsetMs;
    return offset === undefined ? undefined : Date.now() + offset + 500;
  }

  /** GET one object, or undefined when it does not exist; `signal` aborts it. */
  async get<T>(path: string, signal?: AbortSignal): Promise<T | undefined> {
    try {
      return await this.request<T>("get", "GET", path, undefined, false, signal);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return undefined;
      throw e;
    }
  }
}

/** The requests the dispatcher makes, as paths; one place knows the URLs. */
export const paths = {
  nodes: () => "/api/v1/nodes",
  node: (name: string) => `/api/v1/nodes/${encodeURIComponent(name)}`,
  jobs: (ns: string) => `/apis/batch/v1/namespaces/${encodeURIComponent(ns)}/jobs`,
  job: (ns: string, name: string) =>
    `/apis/batch/v1/namespaces/${encodeURIComponent(ns)}/jobs/${encodeURIComponent(name)}`,
  pods: (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`,
  pod: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`,
  eviction: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/eviction`,
  allPods: () => "/api/v1/pods",
  namespace: (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}`,
};

/** Objects the typed helpers return. */
export type { V1Job, V1Node, V1Pod };
