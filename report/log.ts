/**
 * **report/** owns what a run tells: the one logger, the report files (JSON,
 * JUnit), the summary and the exit code, the Events and marks on nodes. It
 * imports `engine/` for the events it describes and the folders below; never
 * `run/` or `cli/`. The folders below log through `base/log.ts`'s `Log`, which
 * the logger implements.
 *
 * The one logger: a line per event, in text or as JSON lines, on stderr.
 * stdout is kept for data (`--dry-run=client` YAML, `--help`, `--version`).
 *
 * @module
 */

import type { DispatchEvent, Progress, Reporter } from "../engine/fanout.ts";
import { ActiveTime } from "../engine/outcome.ts";
import type { Log } from "../base/log.ts";

/** `text` for people, `json` for log pipelines. */
export type LogFormat = "text" | "json";

/** A sink for finished lines; stderr by default, an array in tests. */
export type Sink = (line: string) => void;

const encoder = new TextEncoder();

/** Writes a line to stderr, synchronously so that nothing is lost on exit. */
export const STDERR: Sink = (line) => {
  Deno.stderr.writeSync(encoder.encode(line + "\n"));
};

/** Writes text to stderr as it is, for the live progress line. */
function writeRaw(text: string): void {
  Deno.stderr.writeSync(encoder.encode(text));
}

/**
 * Formats one line of the rollout's story, the same way for every event.
 *
 * @example
 * ```ts
 * describeEvent({ kind: "created", node: "n1", job: "up-n1" }); // "created job up-n1 for node n1"
 * ```
 */
export function describeEvent(e: DispatchEvent): string {
  switch (e.kind) {
    case "created":
    case "adopted":
    case "replaced":
      return `${e.kind} job ${e.job} for node ${e.node}`;
    case "succeeded":
      return `node ${e.node}: job ${e.job} succeeded${e.counted ? " (earlier, counted)" : ""}`;
    case "failed":
      if (e.noJob) return `node ${e.node}: failed before its Job was created: ${e.reason}`;
      return `node ${e.node}: job ${e.job} failed${
        e.counted ? " (earlier, counted)" : ""
      }: ${e.reason}`;
    case "deleting":
      return `deleting job ${e.job}: ${e.why}`;
    case "waiting":
      return `node ${e.node}: waiting: ${e.why}`;
    case "api":
      return e.state === "paused"
        ? `API outage: ${e.detail}; starts paused, no node fails for it: ` +
          "nodes wait in the queue until the API answers"
        : `starts resume: ${e.detail}`;
    case "watch":
      return `watch ${e.state}: ${e.detail}`;
    case "stalled":
      return `node ${e.node}: job ${e.job} pending for ${e.seconds} s: ${e.reason}`;
    case "notice":
    case "wave":
      return e.message;
    case "stopped":
      return `stopping the rollout: ${e.reason}; Jobs in flight finish, no new Job starts`;
  }
}

/**
 * Formats the progress line.
 *
 * @example
 * ```ts
 * describeProgress({ succeeded: 120, failed: 3, inFlight: 100, queued: 4777, total: 5000 });
 * // "120/5000 succeeded, 3 failed, 100 in flight, 4777 queued"
 * ```
 */
export function describeProgress(p: Progress): string {
  const unknown = (p.unknown ? `, ${p.unknown} unknown` : "") +
    (p.blocked ? `, ${p.blocked} blocked` : "");
  // A node being drained holds a slot but has no Job yet: said apart, so
  // that a drain a budget holds up does not read as a Job that hangs.
  const draining = p.draining ?? 0;
  const flight = draining
    ? `${p.inFlight - draining} in flight, ${draining} draining`
    : `${p.inFlight} in flight`;
  // A node that holds its slot and waits (post-success work retrying, pods
  // failing under backoffLimit) says for what, else it reads as a hang.
  const waits = p.waits?.length ? ` (${p.waits.join("; ")})` : "";
  const counts = waveWords(p) +
    `${p.succeeded}/${p.total} succeeded, ${p.failed} failed${unknown}, ` +
    `${flight}${waits}, ${p.queued} queued`;
  // During an outage a rate and an ETA would be fiction: say what is going on.
  if (p.outage) {
    return `API ${p.outage.word} for ${clock(p.outage.forMs / 1000)}: ` +
      `${p.outage.paused ? "paused, " : ""}${p.inFlight} in flight; ${counts}`;
  }
  const budget = p.budget ? `${counts}; ${p.budget}` : counts;
  // Paused by the user: nothing starts until they lift it, so an ETA would
  // only grow with every line; say how to resume instead.
  if (p.paused) return `paused by ${p.paused} (${resumeHint(p.paused)}): ${budget}`;
  const line = budget;
  const done = p.succeeded + p.failed + (p.unknown ?? 0);
  if (done === 0 || p.elapsedMs <= 0 || done === p.total) return line;
  const rate = done / (p.elapsedMs / 1000);
  const left = (p.total - done) / rate;
  return `${line}, ${rate.toFixed(rate < 10 ? 2 : 0)} nodes/s, ETA ${duration(left)}`;
}

/**
 * The open wave, as the progress line begins: `wave 2/4: `, `wave 1/4 soaking
 * (40s left): `, `wave 1/4 soaked, held: ` while the hold after it (the
 * health gates) keeps the next one shut, `wave 1/4 soak interrupted …: `
 * while a gate break will restart the soak; empty without waves.
 */
function waveWords(p: Progress): string {
  const w = p.wave;
  if (!w) return "";
  const at = `wave ${w.wave}/${w.waves}`;
  if (w.stage === "soaking") return `${at} soaking (${clock((w.soakLeftMs ?? 0) / 1000)} left): `;
  if (w.stage === "holding" && w.soakInterrupted) {
    return `${at} soak interrupted (a health gate break, a pause), restarts once it is over: `;
  }
  if (w.stage === "holding") return `${at} soaked, held before the next wave: `;
  return `${at}: `;
}

/**
 * What lifts a pause, from the words that name it (`file PATH`, or
 * `annotation KEY=true on Job NAME`, as `engine/pause.ts` says them).
 */
function resumeHint(by: string): string {
  const file = by.match(/^file (.+)$/);
  if (file) return `rm ${file[1]} resumes`;
  // The health gate's words (gates/state.ts): a breach latched on the
  // run's own pause, or an outage of Prometheus, which ends by itself.
  if (by.startsWith("health gate breached")) return "latched: lifting the run's pause resumes";
  if (by.startsWith("health gate")) return "resumes by itself";
  const note = by.match(/^annotation (\S+)=true on Job (?:(\S+)\/)?(\S+)$/);
  if (note) {
    const ns = note[2] ? ` -n ${note[2]}` : "";
    return `kubectl annotate job ${note[3]}${ns} ${note[1]}- resumes`;
  }
  return "lift it to resume";
}

/** Formats seconds as kubectl formats ages: `45s`, `12m`, `3h20m`. */
export function duration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.round(s / 60)}m`;
  return `${Math.floor(s / 3600)}h${String(Math.round((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** Formats seconds to the second: `45s`, `2m10s`, `1h02m05s`. */
function clock(seconds: number): string {
  const s = Math.round(seconds);
  const two = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  return `${Math.floor(s / 3600)}h${two(Math.floor((s % 3600) / 60))}m${two(s % 60)}s`;
}

/** How many successes of an earlier run get a text line of their own. */
const COUNTED_LINES = 20;

/** The logger every module reports through. */
export class Logger implements Reporter, Log {
  #format: LogFormat;
  #sink: Sink;
  #live: boolean;
  #status = "";
  #counted = 0;
  #active = new ActiveTime();

  /**
   * @param format text or json
   * @param sink where lines go
   * @param live keep the progress as one line that updates in place (a terminal)
   */
  constructor(format: LogFormat = "text", sink: Sink = STDERR, live = false) {
    this.#format = format;
    this.#sink = sink;
    this.#live = live && format === "text";
  }

  #line(level: "info" | "warn" | "error", msg: string, fields: Record<string, unknown>): void {
    const time = new Date().toISOString();
    if (this.#format === "json") {
      this.#sink(JSON.stringify({ ...fields, time, level, msg }));
      return;
    }
    const tag = level === "info" ? "" : `${level}: `;
    const text = `${time.slice(11, 19)} ${tag}${msg}`;
    // On a terminal the progress line stays last: clear it, print, redraw.
    if (this.#live && this.#status) writeRaw(`\r\x1b[2K${text}\n${this.#status}`);
    else this.#sink(text);
  }

  /** An ordinary line. */
  info(msg: string, fields: Record<string, unknown> = {}): void {
    this.#line("info", msg, fields);
  }

  /** Something the user should look at; the run goes on. */
  warn(msg: string, fields: Record<string, unknown> = {}): void {
    this.#line("warn", msg, fields);
  }

  /** Something failed. */
  error(msg: string, fields: Record<string, unknown> = {}): void {
    this.#line("error", msg, fields);
  }

  /**
   * A fan-out event. In text, successes an earlier run already counted get a
   * line each only up to a point: a re-run over a done fleet of thousands
   * would otherwise print thousands of lines that say nothing new (the
   * summary counts them; JSON keeps every one).
   */
  event(e: DispatchEvent): void {
    const level = ["failed", "stopped", "stalled"].includes(e.kind) ||
        (e.kind === "notice" && e.level !== "info") || (e.kind === "api" && e.state === "paused")
      ? "warn"
      : "info";
    if (e.kind === "succeeded" && e.counted && this.#format === "text") {
      this.#counted++;
      if (this.#counted > COUNTED_LINES) return;
      if (this.#counted === COUNTED_LINES) {
        this.#line(
          level,
          `${describeEvent(e)}; further earlier successes are counted silently`,
          {},
        );
        return;
      }
    }
    this.#line(level, describeEvent(e), { event: e.kind, ...e });
  }

  /** The counts of the rollout; on a terminal, one line updated in place. */
  progress(p: Progress): void {
    // The rate and ETA leave out the time starts were paused; the JSON
    // fields keep the engine's elapsed time.
    const text = describeProgress({ ...p, elapsedMs: this.#active.observe(p) });
    if (!this.#live) {
      this.#line("info", text, { event: "progress", ...p });
      return;
    }
    this.#status = text;
    writeRaw(`\r\x1b[2K${this.#status}`);
  }

  /** Ends the live line, so that what follows starts on a line of its own. */
  done(): void {
    if (this.#live && this.#status) writeRaw("\n");
    this.#status = "";
  }
}
