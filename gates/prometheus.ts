/**
 * A small client of Prometheus's HTTP API: instant queries
 * (`/api/v1/query`) and the alerts (`/api/v1/alerts`). Prometheus is reached
 * directly (a bearer token file read again before every request, as
 * Prometheus's own `authorization.credentials_file` is, so a rotated token
 * is picked up; a CA file), or through the API server's service proxy with
 * the kubeconfig's credentials, so a bastion needs no port-forward.
 *
 * Two kinds of failure, kept apart: a query Prometheus rejects (400
 * `bad_data`: bad PromQL) is the user's input; anything else (no answer, a
 * 5xx, a 401) is an outage, inconclusive, never a breach.
 *
 * @module
 */

import { ApiError, type Kube } from "../kube/client.ts";
import type { GateConfig } from "./config.ts";

/** One sample of an instant vector. */
export interface Sample {
  /** Its labels. */
  metric: Record<string, string>;
  /** `[unix seconds, value as text]`. */
  value: [number, string];
}

/** One alert of `/api/v1/alerts`. */
export interface Alert {
  /** Its labels; `alertname` names it. */
  labels: Record<string, string>;
  /** `pending` until its `for:` passed, then `firing`. */
  state: string;
  /** The value of the rule's expression when it was last evaluated. */
  value?: string;
}

/** Prometheus rejected a query (400 `bad_data`): bad PromQL. */
export class BadQueryError extends Error {
  /** The query it rejected, once known. */
  query?: string;

  /** @param message Prometheus's own words */
  constructor(message: string, query?: string) {
    super(message);
    this.name = "BadQueryError";
    this.query = query;
  }
}

/** Prometheus gave no usable answer: unreachable, an error status, a body that is no API answer. */
export class PrometheusUnreachable extends Error {
  /** @param message what went wrong */
  constructor(message: string) {
    super(message);
    this.name = "PrometheusUnreachable";
  }
}

/** One GET of an API path (with its query string): the status and the decoded body. */
export type PromGet = (path: string) => Promise<{ status: number; body: unknown }>;

/** The service proxy's path: `/api/v1/namespaces/NS/services/NAME[:PORT]/proxy`. */
const SERVICE_PROXY = /^\/api\/v1\/namespaces\/[^/]+\/services\/[^/]+\/proxy$/;

/**
 * Whether `url` is the API server's service proxy to Prometheus: the same
 * scheme, host and port as the API server, and a service proxy path.
 *
 * @example
 * ```ts
 * viaApiServer("https://k:6443/api/v1/namespaces/mon/services/prom:9090/proxy", "https://k:6443"); // true
 * ```
 */
export function viaApiServer(url: string, server: string): boolean {
  const u = new URL(url);
  return u.origin === new URL(server).origin && SERVICE_PROXY.test(u.pathname.replace(/\/+$/, ""));
}

/** Options of {@linkcode directGet}. */
export interface DirectOptions {
  /** Prometheus's base URL. */
  url: string;
  /** A bearer token file, read again before every request. */
  bearerTokenFile?: string;
  /** A PEM file of CAs that sign Prometheus's certificate. */
  caFile?: string;
  /** How long one request may take. */
  timeoutMs: number;
}

/**
 * GETs straight from Prometheus with Deno's `fetch`.
 *
 * @throws {Deno.errors.NotFound} when the CA file cannot be read
 */
export function directGet(o: DirectOptions): { get: PromGet; close: () => void } {
  const base = o.url.replace(/\/+$/, "");
  const client = o.caFile
    ? Deno.createHttpClient({ caCerts: [Deno.readTextFileSync(o.caFile)] })
    : undefined;
  const get: PromGet = async (path) => {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (o.bearerTokenFile) {
      let token: string;
      try {
        token = (await Deno.readTextFile(o.bearerTokenFile)).trim();
      } catch (e) {
        throw new PrometheusUnreachable(
          `cannot read --gate-bearer-token-file ${o.bearerTokenFile}: ${(e as Error).message}`,
        );
      }
      headers.Authorization = `Bearer ${token}`;
    }
    try {
      const res = await fetch(base + path, {
        headers,
        client,
        signal: AbortSignal.timeout(o.timeoutMs),
      });
      const text = await res.text();
      return { status: res.status, body: parseBody(text) };
    } catch (e) {
      throw new PrometheusUnreachable((e as Error).message);
    }
  };
  return { get, close: () => client?.close() };
}

/** A body as JSON, or its text when it is none (a proxy's HTML error page). */
function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text.trim().slice(0, 200);
  }
}

/**
 * GETs through the API server's service proxy, with the kubeconfig's
 * credentials and the one API layer; one attempt each (the gate asks again
 * at its next interval, and an outage must show within it).
 */
export function proxyGet(kube: Kube, url: string): PromGet {
  const prefix = new URL(url).pathname.replace(/\/+$/, "");
  return async (path) => {
    try {
      const body = await kube.request<unknown>("get", "GET", prefix + path, undefined, true);
      return { status: 200, body };
    } catch (e) {
      // The proxy passes Prometheus's status on; the body's words are lost
      // to the API layer's Status reading, the status is not.
      if (e instanceof ApiError && e.status > 0) return { status: e.status, body: e.message };
      throw new PrometheusUnreachable((e as Error).message);
    }
  };
}

/** Prometheus's answer envelope. */
interface Envelope {
  status?: string;
  errorType?: string;
  error?: string;
  data?: unknown;
}

/**
 * The `data` of an API answer.
 *
 * @throws {BadQueryError} on 400 `bad_data`
 * @throws {PrometheusUnreachable} on any other error or a body that is no answer
 */
export function dataOf(what: string, r: { status: number; body: unknown }): unknown {
  const env: Envelope = typeof r.body === "object" && r.body !== null ? r.body : {};
  if (r.status === 400) {
    throw new BadQueryError(env.error ?? (typeof r.body === "string" ? r.body : "bad_data"));
  }
  if (r.status !== 200 || env.status !== "success") {
    const detail = env.error ?? (typeof r.body === "string" && r.body ? r.body : "no API answer");
    throw new PrometheusUnreachable(`${what}: HTTP ${r.status}: ${detail}`);
  }
  return env.data;
}

/**
 * Evaluates an instant query: the vector it returns.
 *
 * @throws {BadQueryError} when Prometheus rejects it, or it returns no vector
 * (a gate's query is an alerting rule's expression, which must be one)
 * @throws {PrometheusUnreachable} without a usable answer
 */
export async function instantQuery(get: PromGet, query: string): Promise<Sample[]> {
  const data = dataOf("query", await get(`/api/v1/query?query=${encodeURIComponent(query)}`)) as {
    resultType?: string;
    result?: Sample[];
  };
  if (data?.resultType !== "vector") {
    throw new BadQueryError(
      `it returns a ${
        data?.resultType ?? "nothing"
      }, not a vector (write it as an alerting rule's expression)`,
    );
  }
  return data.result ?? [];
}

/**
 * The alerts Prometheus's rules have now.
 *
 * @throws {PrometheusUnreachable} without a usable answer
 */
export async function alerts(get: PromGet): Promise<Alert[]> {
  const data = dataOf("alerts", await get("/api/v1/alerts")) as { alerts?: Alert[] };
  return data?.alerts ?? [];
}

/**
 * A sample in words, as Prometheus shows it: `name{label="v"} value`.
 *
 * @example
 * ```ts
 * describeSample({ metric: { __name__: "up", job: "x" }, value: [0, "0"] }); // 'up{job="x"} 0'
 * ```
 */
export function describeSample(s: Sample): string {
  const { __name__: name = "", ...labels } = s.metric;
  const pairs = Object.entries(labels).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return `${name}${pairs.length || !name ? `{${pairs.join(",")}}` : ""} ${s.value[1]}`;
}

/**
 * The firing alerts whose name matches `pattern`, anchored as Prometheus
 * anchors its regex matchers.
 *
 * @example
 * ```ts
 * firing([{ labels: { alertname: "NodeDown" }, state: "firing" }], "Node.*").length; // 1
 * ```
 */
export function firing(list: readonly Alert[], pattern: string): Alert[] {
  const re = new RegExp(`^(?:${pattern})$`);
  return list.filter((a) => a.state === "firing" && re.test(a.labels.alertname ?? ""));
}

/** The gate's measurement: every query and the alerts, read once. */
export interface Measure {
  /** The first breach, in words (query and value); undefined when nothing breached. */
  (): Promise<{ query: string; value: string } | undefined>;
}

/**
 * One measurement over `get`: each query in order, then the alerts; the
 * first breach found is the answer.
 *
 * @throws {BadQueryError} when Prometheus rejects a query
 * @throws {PrometheusUnreachable} without a usable answer
 */
export function measure(get: PromGet, cfg: Pick<GateConfig, "queries" | "alerts">): Measure {
  return async () => {
    for (const query of cfg.queries) {
      let samples: Sample[];
      try {
        samples = await instantQuery(get, query);
      } catch (e) {
        if (!(e instanceof BadQueryError)) throw e;
        throw new BadQueryError(e.message, query);
      }
      if (samples.length) {
        const more = samples.length > 1 ? ` (and ${samples.length - 1} more)` : "";
        return { query, value: describeSample(samples[0]) + more };
      }
    }
    if (cfg.alerts === undefined) return undefined;
    const hit = firing(await alerts(get), cfg.alerts);
    if (!hit.length) return undefined;
    const names = [...new Set(hit.map((a) => a.labels.alertname))].join(", ");
    return {
      query: `ALERTS{alertstate="firing",alertname=~${JSON.stringify(cfg.alerts)}}`,
      value: `firing: ${names}${hit[0].value === undefined ? "" : ` (value ${hit[0].value})`}`,
    };
  };
}
