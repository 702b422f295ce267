/**
 * A small client of Prometheus's HTTP API: instant queries
 * (`/api/v1/query`) and the alerts (`/api/v1/alerts`). Prometheus is reached
 * directly (a bearer token file read again before every request, as
 * Prometheus's own `authorization.credentials_file` is, so a rotated token
 * is picked up; a CA file), or through the API server's service proxy with
 * the kubeconfig's credentials, so a bastion needs no port-forward.
 *
 * Three kinds of trouble, kept apart: a query Prometheus rejects (400
 * `bad_data`: bad PromQL; 422 `execution`: it cannot evaluate it, which
 * will not change by asking again) is the user's input; an answer without
 * its data (a selector that matches no series, `warnings` of a partial
 * answer) is no data; anything else (no answer, a 5xx, a timeout, a 401 or
 * 403 of a token being rotated, a 404 of a proxy whose Service restarts) is
 * an outage. None of them is a clean answer.
 *
 * @module
 */

import { ApiError, type Kube } from "../kube/client.ts";
import type { GateConfig } from "./config.ts";
import { presenceQuery, type Selector, selectors } from "./promql.ts";

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

/** Prometheus rejected a query (400 `bad_data`, 422 `execution`). */
export class BadQueryError extends Error {
  /** The query it rejected, once known. */
  query?: string;
  /** The HTTP status (400, 422); undefined when the answer was no vector. */
  status?: number;

  /** @param message Prometheus's own words */
  constructor(message: string, query?: string, status?: number) {
    super(message);
    this.name = "BadQueryError";
    this.query = query;
    this.status = status;
  }
}

/**
 * What a 401, 403 or 404 needs before it heals. They are outages (a token
 * being rotated, a Service being replaced behind the proxy), but one that
 * lasts is a wrong token, a missing grant or a wrong URL: the stall says so.
 */
const HEALS: Record<number, string> = {
  401: "; heals only once the token is fixed (--gate-bearer-token-file)",
  403: "; heals only once the token is fixed or granted (--gate-bearer-token-file; " +
    "services/proxy get on the service for the API server's proxy)",
  404: "; heals only once the URL answers (--gate-prometheus-url, the Service behind it)",
};

/** The statuses by which Prometheus rejects a query: asking again gets the same. */
const REJECTED = new Set([400, 422]);

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
const SERVICE_PROXY = /^\/api\/v1\/namespaces\/([^/]+)\/services\/([^/]+)\/proxy$/;

/**
 * The Service a service proxy URL reaches, as RBAC names it (the path's
 * `NAME[:PORT]` segment is the object name `get services/proxy` is asked
 * on), or undefined for any other URL.
 *
 * @example
 * ```ts
 * serviceProxyOf("https://k:6443/api/v1/namespaces/mon/services/prom:9090/proxy");
 * // { namespace: "mon", name: "prom:9090" }
 * ```
 */
export function serviceProxyOf(url: string): { namespace: string; name: string } | undefined {
  const m = SERVICE_PROXY.exec(new URL(url).pathname.replace(/\/+$/, ""));
  return m ? { namespace: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) } : undefined;
}

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
  warnings?: string[];
}

/** An API answer's `data`, and its `warnings` (a partial answer: a store or ingester missing). */
export interface Answer {
  /** The `data` field. */
  data: unknown;
  /** The `warnings` field; empty when there are none. */
  warnings: string[];
}

/**
 * The `data` and `warnings` of an API answer.
 *
 * @throws {BadQueryError} on 400 `bad_data` and 422 `execution`
 * @throws {PrometheusUnreachable} on any other error or a body that is no answer
 */
export function answerOf(what: string, r: { status: number; body: unknown }): Answer {
  const env: Envelope = typeof r.body === "object" && r.body !== null ? r.body : {};
  const words = env.error ?? (typeof r.body === "string" && r.body ? r.body : undefined);
  if (REJECTED.has(r.status)) {
    throw new BadQueryError(
      `HTTP ${r.status}: ${words ?? env.errorType ?? "rejected"}`,
      undefined,
      r.status,
    );
  }
  if (r.status !== 200 || env.status !== "success") {
    throw new PrometheusUnreachable(
      `${what}: HTTP ${r.status}: ${words ?? "no API answer"}${HEALS[r.status] ?? ""}`,
    );
  }
  // PromQL's own annotations ("PromQL warning: …", "PromQL info: …", since
  // Prometheus 2.46) are about the query, not missing data, and would hold
  // every start forever; the rest (a store, an ingester unreachable) say the
  // answer is partial.
  const warnings = (Array.isArray(env.warnings) ? env.warnings.map(String) : [])
    .filter((w) => !/^PromQL (warning|info):/.test(w));
  return { data: env.data, warnings };
}

/** A vector and its answer's warnings. */
export interface VectorAnswer {
  /** The samples. */
  samples: Sample[];
  /** The answer's `warnings`. */
  warnings: string[];
}

/**
 * Evaluates an instant query: the vector it returns, and the answer's warnings.
 *
 * @throws {BadQueryError} when Prometheus rejects it, or it returns no vector
 * (a gate's query is an alerting rule's expression, which must be one)
 * @throws {PrometheusUnreachable} without a usable answer
 */
export async function instantQuery(get: PromGet, query: string): Promise<VectorAnswer> {
  const a = answerOf("query", await get(`/api/v1/query?query=${encodeURIComponent(query)}`));
  const data = a.data as { resultType?: string; result?: Sample[] } | undefined;
  if (data?.resultType !== "vector") {
    throw new BadQueryError(
      `it returns a ${
        data?.resultType ?? "nothing"
      }, not a vector (write it as an alerting rule's expression)`,
    );
  }
  return { samples: data.result ?? [], warnings: a.warnings };
}

/**
 * The alerts Prometheus's rules have now.
 *
 * @throws {PrometheusUnreachable} without a usable answer
 */
export async function alerts(get: PromGet): Promise<Alert[]> {
  const data = answerOf("alerts", await get("/api/v1/alerts")).data as { alerts?: Alert[] };
  return data?.alerts ?? [];
}

/**
 * The names of the alerting rules Prometheus has (`/api/v1/rules?type=alert`).
 *
 * @throws {PrometheusUnreachable} without a usable answer
 */
export async function alertRuleNames(get: PromGet): Promise<string[]> {
  const data = answerOf("rules", await get("/api/v1/rules?type=alert")).data as {
    groups?: { rules?: { name?: string; type?: string }[] }[];
  };
  return (data?.groups ?? []).flatMap((g) => g.rules ?? [])
    .filter((r) => r.type === undefined || r.type === "alerting").map((r) => r.name ?? "");
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

/** A selector of a gate query that matches no series now. */
export interface DarkSelector {
  /** The `--gate-query` it is in, or `--gate-alerts`'s pattern. */
  query: string;
  /** The selector as written (for `--gate-alerts`: the pattern, which names no alerting rule). */
  selector: string;
  /** It is `--gate-alerts`'s pattern, which names no alerting rule. */
  alerts?: boolean;
  /** An `ALERTS` selector whose alertname matcher (as written) names no alerting rule. */
  rule?: string;
}

/** One measurement: the first breach, and what data it lacked. */
export interface Measurement {
  /** The first breach, in words (query and value); undefined when nothing breached. */
  breach?: { query: string; value: string };
  /** The selectors that matched no series (checked ones only). */
  dark: DarkSelector[];
  /** The `warnings` of the answers: a partial answer. */
  warnings: string[];
}

/** The gate's measurement: every query and the alerts, read once. */
export interface Measure {
  /**
   * One measurement. `first`: also whether `--gate-alerts` names an alerting
   * rule Prometheus has (its alerts are empty while healthy, as meant, but
   * a pattern that names no rule can never fire).
   */
  (opts?: { first?: boolean }): Promise<Measurement>;
}

/** The selectors of every query the gate checks for data, with their queries. */
interface Checked {
  query: string;
  selector: Selector;
}

/**
 * The selectors whose data the gate checks: every one of every query, but
 * those meant to be empty (`absent()`, `ALERTS`) and those `allowEmpty`
 * names (by the selector, or by its whole query).
 *
 * @throws {SyntaxError} naming the query the scanner cannot read
 */
export function checkedSelectors(
  cfg: Pick<GateConfig, "queries" | "allowEmpty">,
): Checked[] {
  const allowed = new Set(cfg.allowEmpty ?? []);
  return cfg.queries.filter((q) => !allowed.has(q)).flatMap((query) => {
    let found: Selector[];
    try {
      found = selectors(query);
    } catch (e) {
      throw new SyntaxError(
        `Cannot read the selectors of --gate-query ${JSON.stringify(query)}: ${
          (e as Error).message
        }; write it without that, or exempt it with --gate-allow-empty ${JSON.stringify(query)}`,
      );
    }
    return found.filter((s) => !s.exempt && !allowed.has(s.text)).map((selector) => ({
      query,
      selector,
    }));
  });
}

/** An `ALERTS` selector of a query, and the alerting rules its alertname matcher admits. */
interface AlertSelector {
  query: string;
  selector: string;
  /** The matcher as written: `"NodeDown"`. */
  shown: string;
  /** Anchored, as PromQL anchors `=~`. */
  names: RegExp;
}

const ALERTNAME = /\balertname\s*(=~|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)/;

/** The value of a PromQL string literal. */
function unquote(lit: string): string {
  if (lit[0] === "`") return lit.slice(1, -1);
  const inner = lit.slice(1, -1);
  return JSON.parse(
    `"${lit[0] === "'" ? inner.replace(/\\'/g, "'").replace(/"/g, '\\"') : inner}"`,
  );
}

/**
 * The `ALERTS`/`ALERTS_FOR_STATE` selectors of the queries with an alertname
 * matcher (`=` or `=~`), but those `allowEmpty` names. Their series are
 * empty while nothing fires, as meant, so their data is not asked for; but
 * a name that no alerting rule has (a typo, a rule not loaded) can never
 * fire, and would pass every start.
 */
function alertSelectors(cfg: Pick<GateConfig, "queries" | "allowEmpty">): AlertSelector[] {
  const allowed = new Set(cfg.allowEmpty ?? []);
  return cfg.queries.filter((q) => !allowed.has(q)).flatMap((query) =>
    selectors(query).flatMap((sel) => {
      const m = /^ALERTS(_FOR_STATE)?\b/.test(sel.text) && !allowed.has(sel.text)
        ? ALERTNAME.exec(sel.text)
        : null;
      if (!m) return [];
      try {
        const value = unquote(m[2]);
        const source = m[1] === "=" ? value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : value;
        return [{ query, selector: sel.text, shown: m[2], names: new RegExp(`^(?:${source})$`) }];
      } catch {
        return []; // an escape or an RE2 regex JavaScript cannot read: not checked
      }
    })
  );
}

/** The `ALERTS` selectors whose alertname names no alerting rule Prometheus has, as dark. */
async function unknownAlertnames(
  get: PromGet,
  cfg: Pick<GateConfig, "queries" | "allowEmpty">,
): Promise<DarkSelector[]> {
  const found = alertSelectors(cfg);
  if (!found.length) return [];
  const rules = await alertRuleNames(get);
  return found.filter((a) => !rules.some((n) => a.names.test(n))).map((a) => ({
    query: a.query,
    selector: a.selector,
    rule: a.shown,
  }));
}

/**
 * One instant query that answers which of `checked` match data now: each
 * selector's presence query, labelled with its index, joined by `or`
 * (one request per measurement, however many selectors).
 */
export function presenceOf(checked: readonly Checked[]): string {
  return checked.map((c, i) =>
    `label_replace(${presenceQuery(c.selector)}, "gate_selector", "${i}", "", "")`
  ).join(" or ");
}

/**
 * One measurement over `get`: each query in order, then which checked
 * selectors match no series (one query), then the alerts; the first breach
 * found is the breach, and all the answers' warnings are kept.
 *
 * @throws {SyntaxError} when a query's selectors cannot be read (at the
 * first measurement, once Prometheus accepted every query)
 * @throws {BadQueryError} when Prometheus rejects a query
 * @throws {PrometheusUnreachable} without a usable answer
 */
export function measure(
  get: PromGet,
  cfg: Pick<GateConfig, "queries" | "alerts" | "allowEmpty">,
): Measure {
  // Read once the queries were accepted: bad PromQL is Prometheus's to name.
  let checked: Checked[] | undefined;
  return async (opts = {}) => {
    const m: Measurement = { dark: [], warnings: [] };
    for (const query of cfg.queries) {
      const { samples, warnings } = await queryOf(get, query, query);
      m.warnings.push(...warnings);
      if (samples.length && !m.breach) {
        const more = samples.length > 1 ? ` (and ${samples.length - 1} more)` : "";
        m.breach = { query, value: describeSample(samples[0]) + more };
      }
    }
    checked ??= checkedSelectors(cfg);
    if (checked.length) {
      const presence = presenceOf(checked);
      const a = await queryOf(get, presence, presence);
      const present = new Set(a.samples.map((s) => Number(s.metric.gate_selector)));
      m.dark = checked.filter((_, i) => !present.has(i)).map((c) => ({
        query: c.query,
        selector: c.selector.text,
      }));
      m.warnings.push(...a.warnings);
    }
    if (opts.first) m.dark.push(...await unknownAlertnames(get, cfg));
    if (cfg.alerts !== undefined) {
      await measureAlerts(
        get,
        cfg.alerts,
        m,
        opts.first === true && !cfg.allowEmpty?.includes(cfg.alerts),
      );
    }
    return m;
  };
}

/**
 * The alerts' part of a measurement: a breach when one matching fires
 * (unless a query breached first); with `rules`, a pattern that names no
 * alerting rule is dark.
 */
async function measureAlerts(
  get: PromGet,
  pattern: string,
  m: Measurement,
  rules: boolean,
): Promise<void> {
  if (rules) {
    const re = new RegExp(`^(?:${pattern})$`);
    if (!(await alertRuleNames(get)).some((n) => re.test(n))) {
      m.dark.push({ query: pattern, selector: pattern, alerts: true });
    }
  }
  const hit = firing(await alerts(get), pattern);
  if (!hit.length || m.breach) return;
  const names = [...new Set(hit.map((a) => a.labels.alertname))].join(", ");
  m.breach = {
    query: `ALERTS{alertstate="firing",alertname=~${JSON.stringify(pattern)}}`,
    value: `firing: ${names}${hit[0].value === undefined ? "" : ` (value ${hit[0].value})`}`,
  };
}

/**
 * An instant query whose rejection names `query` (the gate query it is, or
 * of which it checks the selectors).
 */
async function queryOf(get: PromGet, expr: string, query: string): Promise<VectorAnswer> {
  try {
    return await instantQuery(get, expr);
  } catch (e) {
    if (!(e instanceof BadQueryError)) throw e;
    throw new BadQueryError(e.message, query, e.status);
  }
}

/**
 * What a measurement lacked, in words: the dark selectors and the warnings;
 * undefined when it had all its data.
 *
 * @example
 * ```ts
 * noDataOf({ dark: [{ query: "x > 0", selector: "x" }], warnings: [] });
 * // 'selector x of query "x > 0" matches no series'
 * ```
 */
export function noDataOf(m: Pick<Measurement, "dark" | "warnings">): string | undefined {
  const parts = m.dark.map((d) =>
    d.alerts
      ? `--gate-alerts ${JSON.stringify(d.selector)} names no alerting rule`
      : d.rule !== undefined
      ? `selector ${d.selector} of query ${JSON.stringify(d.query)}: alertname ${d.rule} ` +
        `names no alerting rule`
      : `selector ${d.selector} of query ${JSON.stringify(d.query)} matches no series`
  );
  if (m.warnings.length) {
    parts.push(`a partial answer (warnings: ${[...new Set(m.warnings)].join("; ")})`);
  }
  return parts.length ? parts.join(", ") : undefined;
}
