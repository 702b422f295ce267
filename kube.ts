/**
 * The one API layer: credentials from the kubeconfig (`kubeconfig.ts`, with
 * `@kubernetes/client-node`'s KubeConfig loaded on demand for exec plugins and
 * auth providers), requests over Deno's own `fetch`, one retry policy,
 * paginated lists and watches that survive idle periods.
 *
 * client-node's own `Watch` (undici) stalls silently under Deno once a watch
 * has been idle for 30 s (client-node #3020), so the watch here reads the
 * stream itself with a server-side `timeoutSeconds` and an inactivity timer.
 *
 * @module
 */

import type { V1Job, V1Node, V1Pod } from "@kubernetes/client-node";
import {
  authorizationOf,
  ConfigError,
  type KubeconfigIo,
  loadKubeconfig,
  type Target,
  type TlsMaterial,
  tlsOf,
} from "./kubeconfig.ts";

export { ConfigError };

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

  /** Builds an error; `message` is the server's Status message or the network error. */
  constructor(
    init: { status: number; reason: string; verb: string; resource: string; message: string },
    retryAfterMs?: number,
  ) {
    super(`Cannot ${init.verb} ${init.resource}: ${init.message}`);
    this.name = "ApiError";
    this.status = init.status;
    this.reason = init.reason;
    this.verb = init.verb;
    this.resource = init.resource;
    this.retryAfterMs = retryAfterMs;
  }
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
 * Whether a failed request may succeed if sent again: throttled (429), a
 * server error (5xx), a timeout or a connection failure. Other 4xx answers
 * cannot heal by waiting.
 */
export function isRetryable(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  return err.status === 0 || err.status === 429 || err.status >= 500;
}

/**
 * How long to wait before attempt `attempt` (1 = the first retry): the
 * server's `Retry-After` when it gave one, else exponential backoff with full
 * jitter, so many clients throttled together do not return together.
 *
 * @param random a number in [0, 1), for jitter
 */
export function retryDelayMs(
  attempt: number,
  err: ApiError,
  policy: RetryPolicy,
  random: number,
): number {
  if (err.retryAfterMs !== undefined) return err.retryAfterMs;
  const cap = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(cap / 2 + (cap / 2) * random);
}

/** Counts of what the API layer did, for the summary and the benchmarks. */
export interface ApiStats {
  /** Requests sent, by `verb resource`. */
  requests: Record<string, number>;
  /** 429 answers seen. */
  throttled: number;
  /** Requests sent again under the retry policy. */
  retries: number;
}

/** One event of a watch. */
export interface WatchEvent<T> {
  /** ADDED, MODIFIED, DELETED, BOOKMARK or ERROR. */
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  /** The object; a Status for ERROR. */
  object: T & { code?: number; reason?: string; message?: string };
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
  /** Once aborted (SIGINT/SIGTERM), a failed request is not retried. */
  signal?: AbortSignal;
}

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

/** The kubeconfig reads, from the file system and the environment. */
const DENO_IO: KubeconfigIo = {
  env: (name) => Deno.env.get(name),
  readTextFile: (path) => Deno.readTextFileSync(path),
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

/** The TLS material and a way to derive the Authorization header. */
interface Credentials {
  tls: TlsMaterial;
  authorize: () => Promise<string | undefined>;
}

function fastCredentials(target: Target): Credentials {
  const tls = tlsOf(target, DENO_IO);
  // Read once now, so that an unreadable token file is a configuration error.
  authorizationOf(target.user, DENO_IO);
  return { tls, authorize: () => Promise.resolve(authorizationOf(target.user, DENO_IO)) };
}

type Bytes = string | Uint8Array | { toString(): string };

/**
 * A signal that aborts with a TimeoutError after `ms`, and a way to release
 * it once the request is done. `AbortSignal.timeout` keeps its timer, and
 * with it the signal, for the whole `ms` however fast the answer came: at
 * fleet scale (300 requests a second against a fast server) that held about
 * 15,000 timers and signals, a fifth of the live heap.
 */
function timeoutSignal(ms: number): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException("Signal timed out.", "TimeoutError")),
    ms,
  );
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

/**
 * Credentials through client-node's KubeConfig, for what the fast path leaves
 * to it (exec plugins, auth providers, impersonation, a proxy). Its module
 * graph is most of the bundle and costs a start about 0.1 s of CPU, so it is
 * imported only here; in the bundle it is a string compiled on this import
 * (scripts/bundle.sh).
 */
async function clientNodeCredentials(target: Target): Promise<Credentials> {
  const { KubeConfig } = await import("@kubernetes/client-node/dist/config.js");
  const kc = new KubeConfig();
  const str = (x: unknown) => (typeof x === "string" && x ? x : undefined);
  const tokenOf = (raw: Record<string, unknown>) => {
    const file = str(raw.tokenFile) ?? str(raw["token-file"]);
    return str(raw.token) ?? (file ? DENO_IO.readTextFile(file).trim() : undefined);
  };
  // The shapes client-node's own kubeconfig parser (config_types.js) produces.
  kc.loadFromOptions({
    clusters: target.config.clusters.map((c) => ({
      name: c.name,
      server: c.server,
      caData: c.caData,
      caFile: c.caFile,
      skipTLSVerify: c.skipTLSVerify,
      tlsServerName: str(c.raw["tls-server-name"]),
      proxyUrl: str(c.raw["proxy-url"]),
    })),
    users: target.config.users.map((u) => ({
      name: u.name,
      authProvider: u.raw["auth-provider"],
      exec: u.raw.exec,
      certData: str(u.raw["client-certificate-data"]),
      certFile: str(u.raw["client-certificate"]),
      keyData: str(u.raw["client-key-data"]),
      keyFile: str(u.raw["client-key"]),
      // Only the user in use: another user's missing token file is no error.
      token: u === target.user ? tokenOf(u.raw) : str(u.raw.token),
      username: str(u.raw.username),
      password: str(u.raw.password),
      impersonateUser: str(u.raw.as),
    })) as never,
    contexts: target.config.contexts.map((c) => ({ ...c })),
    currentContext: target.context.name,
  });
  const tls: { ca?: Bytes; cert?: Bytes; key?: Bytes } = {};
  await kc.applyToHTTPSOptions(tls as never);
  const text = (b?: Bytes) => (b === undefined ? undefined : b.toString());
  return {
    tls: { ca: text(tls.ca), cert: text(tls.cert), key: text(tls.key) },
    authorize: async () => {
      const opts: { headers?: Record<string, string>; auth?: string } = {};
      await kc.applyToHTTPSOptions(opts as never);
      return opts.headers?.Authorization ?? (opts.auth ? `Basic ${btoa(opts.auth)}` : undefined);
    },
  };
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
  readonly stats: ApiStats = { requests: {}, throttled: 0, retries: 0 };
  #authorize: () => Promise<string | undefined>;
  #client: Deno.HttpClient;
  #retry: RetryPolicy;
  #auth?: { header?: string; at: number };
  #stop?: AbortSignal;

  private constructor(
    target: Target,
    authorize: () => Promise<string | undefined>,
    client: Deno.HttpClient,
    opts: { retry: RetryPolicy; stop?: AbortSignal },
  ) {
    this.#authorize = authorize;
    this.#client = client;
    this.#retry = opts.retry;
    this.#stop = opts.stop;
    this.server = target.cluster.server.replace(/\/+$/, "");
    this.contextNamespace = target.context.namespace;
  }

  /**
   * Loads credentials and builds a client; makes no request.
   *
   * @throws {ConfigError} when the kubeconfig is missing, unreadable or names no usable cluster
   */
  static async connect(opts: ConnectOptions = {}): Promise<Kube> {
    const target = loadKubeconfig(opts, DENO_IO);
    let creds: Credentials;
    try {
      creds = target.fallback ? await clientNodeCredentials(target) : fastCredentials(target);
    } catch (e) {
      throw new ConfigError(
        `Cannot load credentials of context ${target.context.name}: ${(e as Error).message}`,
      );
    }
    const { tls } = creds;
    const client = Deno.createHttpClient({
      caCerts: tls.ca ? [tls.ca] : undefined,
      cert: tls.cert,
      key: tls.key,
      // HTTP/1.1 on purpose: over HTTP/2 every request shares one connection,
      // so a stalled connection stalls every retry too. With HTTP/1.1 a
      // timed-out request takes its connection with it and the retry gets a
      // fresh one.
      http1: true,
      http2: false,
    } as Deno.CreateHttpClientOptions);
    return new Kube(target, creds.authorize, client, {
      retry: opts.retry ?? DEFAULT_RETRY,
      stop: opts.signal,
    });
  }

  /** Releases the HTTP client's connections. */
  close(): void {
    this.#client.close();
  }

  // Exec plugins and projected token files rotate credentials, so the header
  // is re-derived now and then rather than once; client-node caches exec
  // tokens until they expire.
  async #authorization(): Promise<string | undefined> {
    if (this.#auth && Date.now() - this.#auth.at < 10_000) return this.#auth.header;
    const header = await this.#authorize();
    this.#auth = { header, at: Date.now() };
    return header;
  }

  async #send(
    verb: string,
    method: string,
    path: string,
    body: unknown,
    signal: AbortSignal,
  ): Promise<Response> {
    const key = `${verb} ${resourceOf(path)}`;
    this.stats.requests[key] = (this.stats.requests[key] ?? 0) + 1;
    const headers: Record<string, string> = { Accept: "application/json" };
    const auth = await this.#authorization();
    if (auth) headers.Authorization = auth;
    if (body !== undefined) {
      headers["Content-Type"] = method === "PATCH"
        ? "application/json-patch+json"
        : "application/json";
    }
    try {
      return await fetch(this.server + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        client: this.#client,
        signal,
      } as RequestInit);
    } catch (e) {
      const timedOut = signal.aborted && (signal.reason as Error)?.name === "TimeoutError";
      throw new ApiError({
        status: 0,
        reason: timedOut ? "Timeout" : "Unreachable",
        verb,
        resource: resourceOf(path),
        message: timedOut
          ? `no answer from ${this.server} within ${this.#retry.requestTimeoutMs} ms`
          : `${this.server} unreachable: ${(e as Error).message}`,
      });
    }
  }

  static async #errorOf(res: Response, verb: string, path: string): Promise<ApiError> {
    let status: { reason?: string; message?: string } = {};
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
      },
      Number.isFinite(seconds) ? seconds * 1000 : undefined,
    );
  }

  /**
   * Sends one request under the retry policy and returns the decoded body.
   *
   * @param verb the Kubernetes verb, for errors and counts
   * @param once one attempt, no retry: for best-effort reads whose failure only costs a warning
   * @throws {ApiError} when the answer is an error that retrying cannot heal, or the budget is spent
   */
  async request<T>(
    verb: string,
    method: string,
    path: string,
    body?: unknown,
    once = false,
  ): Promise<T> {
    const started = Date.now();
    for (let attempt = 1;; attempt++) {
      let err: ApiError;
      const timeout = timeoutSignal(this.#retry.requestTimeoutMs);
      try {
        const res = await this.#send(verb, method, path, body, timeout.signal);
        if (res.ok) return await res.json() as T;
        err = await Kube.#errorOf(res, verb, path);
      } catch (e) {
        if (e instanceof ApiError) err = e;
        else if (e instanceof DOMException || e instanceof TypeError) {
          // The body read was cut off or timed out: the same as no answer.
          err = new ApiError({
            status: 0,
            reason: "Timeout",
            verb,
            resource: resourceOf(path),
            message: e.message,
          });
        } else throw e;
      } finally {
        timeout.clear();
      }
      if (err.status === 429) this.stats.throttled++;
      const delay = retryDelayMs(attempt, err, this.#retry, Math.random());
      // A stopping run retries nothing: SIGTERM must not wait out a retry budget.
      const stopping = this.#stop?.aborted ?? false;
      if (
        once || stopping || !isRetryable(err) || Date.now() - started + delay > this.#retry.budgetMs
      ) {
        throw err;
      }
      this.stats.retries++;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#stop?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, delay);
        this.#stop?.addEventListener("abort", done, { once: true });
      });
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
   */
  async list<T, U = T>(
    path: string,
    query: Record<string, string>,
    pageSize: number,
    keep?: (item: T) => U,
  ): Promise<ListResult<U>> {
    for (let restart = 0;; restart++) {
      const items: U[] = [];
      let cont = "";
      let resourceVersion = "";
      try {
        do {
          const q = new URLSearchParams({ ...query, limit: String(pageSize) });
          if (cont) q.set("continue", cont);
          const page = await this.request<
            { items: T[]; metadata: { continue?: string; resourceVersion: string } }
          >(
            "list",
            "GET",
            `${path}?${q}`,
          );
          for (const item of page.items) items.push(keep ? keep(item) : item as unknown as U);
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
    let timer = setTimeout(() => idle.abort(), idleMs);
    const res = await this.#send("watch", "GET", `${path}?${q}`, undefined, both).finally(() =>
      clearTimeout(timer)
    );
    if (!res.ok) {
      if (res.status === 429) this.stats.throttled++;
      throw await Kube.#errorOf(res, "watch", path);
    }
    timer = setTimeout(() => idle.abort(), idleMs);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    // Aborting the fetch does not always end a read through a transform
    // stream: cancel the reader itself, so that a stop never hangs here.
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
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(), idleMs);
        buffered += value;
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line) yield JSON.parse(line) as WatchEvent<T>;
        }
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

  /** GET one object, or undefined when it does not exist. */
  async get<T>(path: string): Promise<T | undefined> {
    try {
      return await this.request<T>("get", "GET", path);
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
  namespace: (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}`,
};

/** Objects the typed helpers return. */
export type { V1Job, V1Node, V1Pod };
