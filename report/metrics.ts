/**
 * The run's metrics in Prometheus' text exposition format (version 0.0.4),
 * for `--metrics-addr`: the nodes per phase, Jobs created, node durations,
 * whether starts are paused, gate breaches, and the API's answers by code.
 * Names are in base units with their suffix (`_seconds`, `_total`), labels
 * have few values (`phase`, `code`), never a node name.
 *
 * Written here rather than with npm's `prom-client` (15.1.3), which runs
 * under Deno but adds 66 kB to the minified bundle (275 kB today: +24 %),
 * with `@opentelemetry/api` and `tdigest` for exemplars and summaries this
 * needs none of; six metrics and one format are a hundred lines. The
 * exposition rules followed are those of the format's specification:
 * `# HELP` and `# TYPE` once per family before its samples, label values
 * escaped (`\\`, `"`, newline), a histogram's cumulative `_bucket{le}`
 * series ending in `le="+Inf"`, then `_sum` and `_count`.
 *
 * @module
 */

import type { DispatchEvent, Progress } from "../engine/fanout.ts";

/** The histogram buckets of a node's duration, in seconds: from a quick task to a reboot. */
export const DURATION_BUCKETS: readonly number[] = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/** The engine's phases as the metric's few: in flight but not draining is running. */
const METRIC_PHASE: Record<string, string> = {
  queued: "queued",
  draining: "draining",
  succeeded: "succeeded",
  failed: "failed",
  unknown: "unknown",
  blocked: "blocked",
  stillBlocked: "blocked",
};

/** A cumulative histogram. */
interface Histogram {
  counts: number[];
  sum: number;
  count: number;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function num(v: number): string {
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return Number.isNaN(v) ? "NaN" : String(v);
}

function family(name: string, type: string, help: string, samples: string[]): string[] {
  return [
    `# HELP ${name} ${help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`,
    `# TYPE ${name} ${type}`,
    ...samples,
  ];
}

function labelled(name: string, label: string, values: Record<string, number>): string[] {
  return Object.entries(values).sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${name}{${label}="${escapeLabel(k)}"} ${num(v)}`);
}

/**
 * The run's metrics, fed from the engine's progress and events; the
 * exposition is built when scraped.
 */
export class RunMetrics {
  #phases: Record<string, number> = {};
  #latest?: Progress;
  /** The nodes per phase of the fan-outs that ended (the cleanup run's, before the main one). */
  #ended: Record<string, number> = {};
  #created = 0;
  #paused = 0;
  #breaches = 0;
  #started = new Map<string, number>();
  #durations: Histogram = { counts: DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
  #codes: () => Record<string, number>;
  #now: () => number;

  /**
   * @param codes the API's answers by status code so far (the client's stats)
   * @param now the clock, in ms
   */
  constructor(codes: () => Record<string, number> = () => ({}), now: () => number = Date.now) {
    this.#codes = codes;
    this.#now = now;
  }

  /** The counts of one progress report. */
  progress(p: Progress): void {
    this.#latest = p;
    const draining = p.draining ?? 0;
    this.#phases = {
      queued: p.queued,
      draining,
      running: p.inFlight - draining,
      succeeded: p.succeeded,
      failed: p.failed,
      unknown: p.unknown ?? 0,
      blocked: p.blocked ?? 0,
    };
    this.#paused = p.paused !== undefined || p.outage?.paused ? 1 : 0;
  }

  /** One engine event: Jobs created, and each node's duration from its Job's start. */
  event(e: DispatchEvent): void {
    if (e.kind === "created" || e.kind === "replaced") {
      this.#created++;
      this.#started.set(e.node, this.#now());
    } else if (e.kind === "adopted") this.#started.set(e.node, this.#now());
    else if ((e.kind === "succeeded" || e.kind === "failed") && !e.counted) {
      const at = this.#started.get(e.node);
      if (at !== undefined) this.#observe((this.#now() - at) / 1000);
      this.#started.delete(e.node);
    }
  }

  /**
   * A fan-out ended (the cleanup run's, before the main one): its nodes stay
   * counted in `job_dispatcher_nodes` as they ended, since the next fan-out's
   * progress knows only its own nodes and the run's report counts both.
   */
  endPhase(): void {
    this.#ended = this.#nodes();
    this.#latest = undefined;
    this.#phases = {};
  }

  /** A gate (issue "Progressive delivery") breached its condition. */
  breach(): void {
    this.#breaches++;
  }

  #observe(seconds: number): void {
    const h = this.#durations;
    DURATION_BUCKETS.forEach((le, i) => {
      if (seconds <= le) h.counts[i]++;
    });
    h.sum += seconds;
    h.count++;
  }

  /**
   * The nodes per phase now: from the engine's live view of its states when
   * it offers one (a progress report comes only every interval), else from
   * the last report's counts.
   */
  #nodes(): Record<string, number> {
    const out: Record<string, number> = { ...this.#ended };
    const add = (phase: string, n: number) => (out[phase] = (out[phase] ?? 0) + n);
    const states = this.#latest?.states?.();
    if (!states) {
      for (const [phase, n] of Object.entries(this.#phases)) add(phase, n);
      return out;
    }
    for (const phase of Object.keys(this.#phases)) add(phase, 0);
    for (const { state } of states) add(METRIC_PHASE[state.phase] ?? "running", 1);
    return out;
  }

  /** The text exposition, as Prometheus scrapes it. */
  exposition(): string {
    const h = this.#durations;
    const n = "job_dispatcher_node_duration_seconds";
    const lines = [
      ...family(
        "job_dispatcher_nodes",
        "gauge",
        "Nodes of the run per phase.",
        labelled("job_dispatcher_nodes", "phase", this.#nodes()),
      ),
      ...family("job_dispatcher_jobs_created_total", "counter", "Per-node Jobs this run created.", [
        `job_dispatcher_jobs_created_total ${this.#created}`,
      ]),
      ...family(n, "histogram", "Seconds from a node's Job start (or adoption) to its outcome.", [
        ...DURATION_BUCKETS.map((le, i) => `${n}_bucket{le="${num(le)}"} ${h.counts[i]}`),
        `${n}_bucket{le="+Inf"} ${h.count}`,
        `${n}_sum ${num(h.sum)}`,
        `${n}_count ${h.count}`,
      ]),
      ...family(
        "job_dispatcher_paused",
        "gauge",
        "1 while starts are paused (by the user or an API outage).",
        [
          `job_dispatcher_paused ${this.#paused}`,
        ],
      ),
      ...family("job_dispatcher_gate_breaches_total", "counter", "Rollout gate breaches.", [
        `job_dispatcher_gate_breaches_total ${this.#breaches}`,
      ]),
      ...family(
        "job_dispatcher_api_requests_total",
        "counter",
        "API requests answered, by HTTP status code (<error>: no answer).",
        labelled("job_dispatcher_api_requests_total", "code", this.#codes()),
      ),
    ];
    return lines.join("\n") + "\n";
  }
}
