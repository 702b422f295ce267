/**
 * The benchmark's arithmetic, without I/O: which scenarios a profile runs,
 * request counts from Prometheus text and from audit lines, slot refill
 * latencies and Jobs in flight from a watcher's timeline.
 *
 * @module
 */

/** One benchmark scenario: N nodes, at most P Jobs in flight, pods that run D seconds. */
export interface Scenario {
  /** Nodes. */
  n: number;
  /** --parallelism. */
  p: number;
  /** Pod duration in seconds. */
  d: number;
}

/** How the dispatcher follows its Jobs. */
export type Mode = "watch" | "poll";

/** The scenario grid of the full profile. */
export const FULL_GRID = { n: [100, 1000, 5000, 10000], p: [10, 100], d: [2, 10] } as const;

/** Every mode, in the order they run on one cluster. */
export const MODES: readonly Mode[] = ["watch", "poll"];

/** The polling mode's flags: never watch, LIST every 5 s, as the Rust original polls. */
export const POLL_FLAGS = ["--poll-only", "--poll-interval-secs", "5"];

function numbers(name: string, text: string | undefined, fallback: readonly number[]): number[] {
  if (text === undefined || text.trim() === "") return [...fallback];
  return text.split(",").map((part) => {
    const value = Number(part.trim());
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`Invalid ${name} ${JSON.stringify(text)}: expected positive integers`);
    }
    return value;
  });
}

/**
 * The scenarios to run: the profile's grid (`quick`: N=100 and D=2 s only;
 * `full`: all of {@linkcode FULL_GRID}), narrowed by comma lists in `BENCH_N`, `BENCH_P`
 * and `BENCH_D`, sorted by N so that each cluster size is built once.
 *
 * @example
 * ```ts
 * scenarios({ BENCH_PROFILE: "full", BENCH_N: "1000", BENCH_P: "100", BENCH_D: "10" });
 * // [{ n: 1000, p: 100, d: 10 }]
 * ```
 * @throws {RangeError} for an unknown profile or a value that is not a positive integer
 */
export function scenarios(env: Record<string, string | undefined>): Scenario[] {
  const profile = env.BENCH_PROFILE ?? "quick";
  if (profile !== "quick" && profile !== "full") {
    throw new RangeError(
      `Invalid BENCH_PROFILE ${JSON.stringify(profile)}: expected quick or full`,
    );
  }
  const ns = numbers("BENCH_N", env.BENCH_N, profile === "quick" ? [100] : FULL_GRID.n);
  const ps = numbers("BENCH_P", env.BENCH_P, FULL_GRID.p);
  // Quick keeps to the short pods: with D=10 s and P=10 one mode alone takes 2 minutes.
  const ds = numbers("BENCH_D", env.BENCH_D, profile === "quick" ? [2] : FULL_GRID.d);
  const out: Scenario[] = [];
  for (const n of ns) for (const p of ps) for (const d of ds) out.push({ n, p, d });
  return out.sort((a, b) => a.n - b.n);
}

/**
 * The modes to run, from a comma list such as `BENCH_MODES=watch`.
 *
 * @throws {RangeError} for an unknown mode
 */
export function modes(text: string | undefined): Mode[] {
  if (!text) return [...MODES];
  return text.split(",").map((m) => {
    const mode = m.trim() as Mode;
    if (!MODES.includes(mode)) {
      throw new RangeError(
        `Invalid BENCH_MODES ${JSON.stringify(text)}: expected watch and/or poll`,
      );
    }
    return mode;
  });
}

/** The ideal makespan in seconds: ⌈N/P⌉ waves of D seconds. */
export function idealSeconds(s: Scenario): number {
  return Math.ceil(s.n / s.p) * s.d;
}

/** The q-th percentile (0–100, nearest rank) of `values`; NaN when empty. */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((q / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Counts by `VERB resource[/subresource]`. */
export type Counts = Record<string, number>;

const REQUEST_TOTAL = /^apiserver_request_total\{([^}]*)\}\s+([0-9.e+]+)/;

/**
 * Sums kube-apiserver's `apiserver_request_total` by verb and resource
 * (codes, scopes and versions added up), from its Prometheus text.
 */
export function requestTotals(metrics: string): Counts {
  const counts: Counts = {};
  for (const line of metrics.split("\n")) {
    const m = line.match(REQUEST_TOTAL);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
    );
    const resource = labels.subresource
      ? `${labels.resource}/${labels.subresource}`
      : labels.resource || "(none)";
    const key = `${labels.verb} ${resource}`;
    counts[key] = (counts[key] ?? 0) + Number(m[2]);
  }
  return counts;
}

/** `after − before`, keeping only what grew. */
export function delta(before: Counts, after: Counts): Counts {
  const out: Counts = {};
  for (const [key, value] of Object.entries(after)) {
    const grew = value - (before[key] ?? 0);
    if (grew > 0) out[key] = grew;
  }
  return out;
}

/** The fields of an audit.k8s.io/v1 Event the benchmark reads. */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; name?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

/** What one user sent, from the audit log. */
export interface AuditSummary {
  /** Requests by `verb resource`; a dry-run create is `create jobs (dryRun)`. */
  requests: Counts;
  /** All requests. */
  total: number;
  /** Node LIST pages (not watches). */
  nodeListPages: number;
  /** From the first node LIST page received to the last one answered, in ms. */
  listNodesMs: number;
  /** When the first request was received (epoch ms). */
  firstRequestAt: number;
  /** Answers with status 429. */
  throttled: number;
}

/** Epoch milliseconds, with the fraction, of an RFC 3339 UTC timestamp such as the audit log's. */
export function epochMs(ts: string): number {
  const m = ts.match(/^(.*?)(?:\.(\d+))?Z$/);
  if (!m) return new Date(ts).getTime();
  return new Date(`${m[1]}Z`).getTime() + Number(`0.${m[2] ?? "0"}`) * 1000;
}

/** Summarises the audit events of `username`. */
export function auditSummary(events: readonly AuditEvent[], username: string): AuditSummary {
  const requests: Counts = {};
  let nodeListPages = 0, firstList = Infinity, lastList = -Infinity;
  let first = Infinity, throttled = 0, total = 0;
  for (const e of events) {
    if (e.user?.username !== username) continue;
    total++;
    const resource = e.objectRef?.subresource
      ? `${e.objectRef.resource}/${e.objectRef.subresource}`
      : e.objectRef?.resource ?? "(none)";
    const dry = e.verb === "create" && /[?&]dryRun=/.test(e.requestURI) ? " (dryRun)" : "";
    const key = `${e.verb} ${resource}${dry}`;
    requests[key] = (requests[key] ?? 0) + 1;
    const received = epochMs(e.requestReceivedTimestamp);
    first = Math.min(first, received);
    if (e.responseStatus?.code === 429) throttled++;
    if (e.verb === "list" && resource === "nodes") {
      nodeListPages++;
      firstList = Math.min(firstList, received);
      lastList = Math.max(lastList, epochMs(e.stageTimestamp));
    }
  }
  return {
    requests,
    total,
    nodeListPages,
    listNodesMs: nodeListPages ? lastList - firstList : NaN,
    firstRequestAt: first,
    throttled,
  };
}

/** When the independent watcher saw one Job created and finished (epoch ms, at receipt). */
export interface JobTimes {
  createdAt: number;
  finishedAt?: number;
  /** It finished Failed (or FailureTarget), not Complete. */
  failed?: boolean;
}

/**
 * Slot refill latencies in ms: each creation that follows a completion
 * still unanswered is matched with the oldest such completion (a slot freed
 * → the next Job created). Creations with no freed slot waiting are the
 * initial fill and are not counted.
 */
export function refillLatencies(jobs: readonly JobTimes[]): number[] {
  const points: { t: number; kind: "done" | "new" }[] = [];
  for (const j of jobs) {
    points.push({ t: j.createdAt, kind: "new" });
    if (j.finishedAt !== undefined) points.push({ t: j.finishedAt, kind: "done" });
  }
  // At equal times a completion comes first: it is what freed the slot.
  points.sort((a, b) => a.t - b.t || (a.kind === "done" ? -1 : 1));
  const freed: number[] = [];
  const out: number[] = [];
  let head = 0;
  for (const p of points) {
    if (p.kind === "done") freed.push(p.t);
    else if (head < freed.length) out.push(p.t - freed[head++]);
  }
  return out;
}

/** Jobs in flight over time: `[seconds since t0, count]` at every change. */
export function inflightSeries(jobs: readonly JobTimes[], t0: number): [number, number][] {
  const steps: [number, number][] = [];
  for (const j of jobs) {
    steps.push([j.createdAt, 1]);
    if (j.finishedAt !== undefined) steps.push([j.finishedAt, -1]);
  }
  steps.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const out: [number, number][] = [[0, 0]];
  let count = 0;
  for (const [t, d] of steps) {
    count += d;
    const x = (t - t0) / 1000;
    if (out.length && out[out.length - 1][0] === x) out[out.length - 1][1] = count;
    else out.push([x, count]);
  }
  return out;
}

/**
 * The mean of Jobs in flight over [from, to] divided by `parallelism`: 1
 * means every slot was busy all the time.
 */
export function slotUtilisation(
  series: readonly [number, number][],
  parallelism: number,
  from: number,
  to: number,
): number {
  let area = 0;
  for (let i = 0; i < series.length; i++) {
    const start = Math.max(from, series[i][0]);
    const end = Math.min(to, i + 1 < series.length ? series[i + 1][0] : to);
    if (end > start) area += (end - start) * series[i][1];
  }
  return to > from ? area / ((to - from) * parallelism) : NaN;
}

/** The run record's writes by one user, from the audit log. */
export interface RecordWrites {
  /** create, update and patch of a `run-record.*` ConfigMap answered 2xx. */
  writes: number;
  /** Every such request by `verb code`, refused ones too (a first update answered 404, then the create). */
  attempts: Counts;
  /** The fewest ms between two consecutive writes; NaN with fewer than two. */
  minGapMs: number;
  /** The median ms between two consecutive writes. */
  medianGapMs: number;
  /** The most writes received in any 10 s (a sliding window). */
  maxPer10s: number;
  /** The same without the last write (the closing one, sent at once by design). */
  maxPer10sBeforeLast: number;
  /** The fewest ms between two consecutive writes, the last one left out. */
  minGapBeforeLastMs: number;
  /** Writes per 10 s over the run's span (spawn → exit). */
  meanPer10s: number;
  /** Each write's time, s since the span's start. */
  at: number[];
}

const RECORD_WRITE_VERBS = new Set(["create", "update", "patch"]);

/**
 * The writes `username` sent to its run record's ConfigMap (`run-record.*`)
 * over a span of `spanMs` that began at `t0` (epoch ms), from audit events.
 */
export function recordWrites(
  events: readonly AuditEvent[],
  username: string,
  t0: number,
  spanMs: number,
): RecordWrites {
  const attempts: Counts = {};
  const times: number[] = [];
  for (const e of events) {
    if (e.user?.username !== username || e.objectRef?.resource !== "configmaps") continue;
    if (!RECORD_WRITE_VERBS.has(e.verb) || !isRecordWrite(e)) continue;
    const code = e.responseStatus?.code ?? 0;
    const key = `${e.verb} ${code}`;
    attempts[key] = (attempts[key] ?? 0) + 1;
    if (code >= 200 && code < 300) times.push(epochMs(e.requestReceivedTimestamp));
  }
  times.sort((a, b) => a - b);
  const gaps = times.slice(1).map((t, i) => t - times[i]);
  return {
    writes: times.length,
    attempts,
    minGapMs: gaps.length ? Math.min(...gaps) : NaN,
    medianGapMs: percentile(gaps, 50),
    maxPer10s: mostWithin(times, 10_000),
    maxPer10sBeforeLast: mostWithin(times.slice(0, -1), 10_000),
    minGapBeforeLastMs: gaps.length > 1 ? Math.min(...gaps.slice(0, -1)) : NaN,
    meanPer10s: spanMs > 0 ? times.length / (spanMs / 10_000) : NaN,
    at: times.map((t) => Math.round((t - t0) / 100) / 10),
  };
}

/** The most of the sorted `times` within any `windowMs`. */
function mostWithin(times: readonly number[], windowMs: number): number {
  let most = 0;
  for (let lo = 0, hi = 0; hi < times.length; hi++) {
    while (times[hi] - times[lo] >= windowMs) lo++;
    most = Math.max(most, hi - lo + 1);
  }
  return most;
}

/**
 * Whether a ConfigMap write is the run record's: a create's URI has no name
 * (the API server fills objectRef.name from the body once decoded), so an
 * unnamed create counts; the gate latch has a name of its own.
 */
function isRecordWrite(e: AuditEvent): boolean {
  const name = e.objectRef?.name ?? e.requestURI.match(/\/configmaps\/([^/?]+)/)?.[1];
  return name === undefined ? e.verb === "create" : name.startsWith("run-record.");
}
