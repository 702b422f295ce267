/**
 * Keeps a run's record (`record.ts`) up to date in the cluster, paced: a
 * change at most every 10 s, a heartbeat every 30 s (or every progress
 * interval, if longer) while nothing changes, and the closing write when the
 * run ends. {@linkcode Recorder} drives it from the engine's progress and
 * events and sends its writes, best effort.
 *
 * @module
 */

import type { DispatchEvent, Progress } from "../engine/fanout.ts";
import { ActiveTime, progressKey } from "../engine/outcome.ts";
import { FINAL } from "../engine/node_state.ts";
import type { OwnerRef, TrackingKeys } from "../job.ts";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { describeProgress } from "./log.ts";
import {
  encodeRecord,
  RECORD_MIN_GAP_MS,
  RECORD_VERSION,
  recordConfigMap,
  type RecordGates,
  type RecordNode,
  type RecordNodes,
  type RecordToWrite,
  type RunRecord,
  WritePacer,
} from "./record.ts";

/** What the run record needs to know of a run, besides its progress. */
export interface RecordOptions {
  /** The Jobs' name prefix. */
  prefix: string;
  /** The run's template hash (job.ts `templateHash`): a Job of another is stale. */
  templateHash?: string;
  /** `--parallelism`. */
  parallelism: number;
  /** The most ms between two writes while nothing changes. @default 30000 */
  heartbeatMs?: number;
  /** When the open `--window` closes (ms since the epoch). */
  windowClosesAt?: number;
  /** The run's stop signal: aborted at the end, the record says `stopped`. */
  signal?: AbortSignal;
  /** The clock the pacing waits on. @default SYSTEM_CLOCK */
  clock?: Clock;
}

/** Options of {@linkcode RecordWriter}. */
export interface RecordWriterOptions extends RecordOptions {
  /** The tracking keys, for the record's labels. */
  keys: TrackingKeys;
  /** The Jobs' namespace. */
  namespace: string;
  /** The owner Job, if any: it owns the record. */
  owner?: OwnerRef;
  /** This process's id as the record's writer (`record_store.ts`). */
  writer?: string;
  /** Writes the record's ConfigMap; best effort, never throws. */
  send(configMap: Record<string, unknown>): Promise<unknown>;
  /** Says once that the record cannot be kept. */
  warn(message: string): void;
}

/** The record writer: {@linkcode progress} and {@linkcode event} in, paced writes out. */
export class RecordWriter {
  #o: RecordWriterOptions;
  #clock: Clock;
  #pacer: WritePacer;
  #active = new ActiveTime();
  #started = Date.now();
  #latest?: Progress;
  #activeMs = 0;
  #lastKey = "";
  #dirty = false;
  #stalls = new Map<string, string>();
  #stoppedBy?: string;
  #gates?: () => RecordGates | undefined;
  #writing?: Promise<void>;
  #timer?: AbortController;
  #timerAt = 0;
  #closed = false;
  #broken = false;

  /** @param opts the run and where to send the record */
  constructor(opts: RecordWriterOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    this.#pacer = new WritePacer(RECORD_MIN_GAP_MS, opts.heartbeatMs ?? 3 * RECORD_MIN_GAP_MS);
  }

  /** The dispatch began now. */
  started(): void {
    this.#started = Date.now();
  }

  /** One progress report: written now, or when the pacing allows. */
  progress(p: Progress): void {
    this.#latest = p;
    this.#activeMs = this.#active.observe(p);
    const key = progressKey(p);
    if (key !== this.#lastKey) this.#dirty = true;
    this.#lastKey = key;
    this.#schedule();
  }

  /** One engine event: stalls and why the rollout stopped are the record's too. */
  event(e: DispatchEvent): void {
    if (e.kind === "stalled") this.#stalls.set(e.node, e.reason);
    else if (e.kind === "succeeded" || e.kind === "failed") this.#stalls.delete(e.node);
    else if (e.kind === "stopped") this.#stoppedBy = e.reason;
    else return;
    this.#dirty = true;
  }

  /**
   * The gates' state, read at every write (so that a heartbeat carries when
   * they were last checked); {@linkcode gatesChanged} says when it changed.
   */
  followGates(source: () => RecordGates | undefined): void {
    this.#gates = source;
  }

  /** The gates' state changed (ok, no data, breached, …): written as a change, not a heartbeat. */
  gatesChanged(): void {
    this.#dirty = true;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed || this.#broken || this.#writing || !this.#latest) return;
    const now = this.#clock.now();
    const wait = this.#pacer.wait(now, this.#dirty);
    // A change comes sooner than the heartbeat that is waiting: wait for it instead.
    if (this.#timer && this.#timerAt <= now + wait) return;
    this.#timer?.abort();
    this.#timer = undefined;
    if (wait === 0) {
      this.#write("running");
      return;
    }
    const timer = this.#timer = new AbortController();
    this.#timerAt = now + wait;
    this.#clock.sleep(wait, timer.signal).then(() => {
      if (this.#timer !== timer) return;
      this.#timer = undefined;
      this.#schedule();
    });
  }

  #write(state: RunRecord["state"], summary?: string): Promise<void> {
    this.#pacer.wrote(this.#clock.now());
    this.#dirty = false;
    const done = this.#send(this.#record(state, summary)).finally(() => {
      // Paced from the answer, not the send: a write that waited in the
      // client's queue or on a busy API server arrives late, and the next
      // one, timed from the send, would reach the server under 10 s after it.
      this.#pacer.wrote(this.#clock.now());
      this.#writing = undefined;
      this.#schedule();
    });
    this.#writing = done;
    return done;
  }

  async #send(r: RecordToWrite): Promise<void> {
    try {
      const encoded = await encodeRecord(r);
      await this.#o.send(recordConfigMap(this.#o.keys, r, encoded));
    } catch (e) {
      // Only a record too big for a ConfigMap throws here; say so once.
      this.#broken = true;
      this.#o.warn(`cannot keep the run record (${(e as Error).message}); status reads the Jobs`);
    }
  }

  /** The record now, from the latest progress. */
  #record(state: RunRecord["state"], summary?: string): RecordToWrite {
    const p = this.#latest!;
    const done = p.succeeded + p.failed + (p.unknown ?? 0);
    const rate = this.#activeMs > 0 && done > 0 ? done / (this.#activeMs / 1000) : undefined;
    const paused = p.paused ?? (p.outage?.paused ? `API ${p.outage.word}` : undefined);
    return {
      version: RECORD_VERSION,
      prefix: this.#o.prefix,
      templateHash: this.#o.templateHash,
      namespace: this.#o.namespace,
      owner: this.#o.owner,
      writer: this.#o.writer,
      state,
      startedAt: this.#started,
      updatedAt: Date.now(),
      heartbeatMs: this.#o.heartbeatMs ?? 3 * RECORD_MIN_GAP_MS,
      parallelism: this.#o.parallelism,
      paused,
      stoppedBy: this.#stoppedBy,
      windowClosesAt: this.#o.windowClosesAt,
      budget: p.budget,
      rate,
      etaSecs: rate && done < p.total ? Math.round((p.total - done) / rate) : undefined,
      wave: p.wave &&
        {
          wave: p.wave.wave,
          waves: p.wave.waves,
          stage: p.wave.stage,
          soakLeftMs: p.wave.soakLeftMs,
        },
      gates: this.#gates?.(),
      summary: summary ?? describeProgress({ ...p, elapsedMs: this.#activeMs }),
      nodes: this.#nodes(p),
    };
  }

  /**
   * Each node as the record keeps it, made from the engine's state as the
   * encoding reads it: none is kept, so that a write never holds 65,000 of
   * them at once (they die young, in the scavenger's space).
   */
  #nodes(p: Progress): RecordNodes {
    const stalls = this.#stalls;
    const states = p.states;
    let length = 0;
    for (const _ of states?.() ?? []) length++;
    return {
      length,
      *[Symbol.iterator](): Generator<RecordNode> {
        for (const { node, state: s } of states?.() ?? []) {
          const stall = FINAL.has(s.phase) ? undefined : stalls.get(node);
          yield {
            node,
            phase: s.phase,
            since: s.since,
            startedAt: s.startedAt,
            reason: s.reason ?? stall,
            stalled: stall !== undefined || undefined,
          };
        }
      },
    };
  }

  /**
   * The closing write, with the run's summary: at once (the one write that
   * does not wait out the pacing, so that `status` right after the run sees
   * its end), after the write in flight.
   */
  async close(summary: string): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#timer?.abort();
    this.#timer = undefined;
    await this.#writing;
    if (!this.#latest || this.#broken) return;
    await this.#write(this.#o.signal?.aborted ? "stopped" : "finished", summary);
  }
}
