/**
 * **gates/** owns the health gates (`--gate-*`): the Prometheus HTTP API
 * client (`prometheus.ts`), the gate's state as a pure function
 * (`state.ts`), the latches a breach sets (`latch.ts`) and, here, the gate a
 * run checks. It imports `kube/` (the service proxy goes through the one API
 * layer) and `base/`; the engine sees the gate as one more pause gate.
 *
 * The gate measures every query (and the alerts) every half interval, so
 * that a start always finds a result at most the interval old while
 * Prometheus answers; the engine asks {@linkcode HealthGate.pausedBy} before
 * every start, as it asks the other pause gates. A breach latches: with
 * `--on-gate-breach pause` the run sets its pause (the owner's `<P>/paused`,
 * or the pause file) and the gate holds until that pause was seen and
 * lifted; with `exit`, the exit latch is written and
 * {@linkcode HealthGate.stopsBy} stops the rollout. The latch is written the
 * moment the breach is seen, before anything else is told or waited for
 * (latch first, act second); one that cannot be written stops the run.
 *
 * Whoever must know whether the gate was clean over a span (a soak) asks
 * {@linkcode HealthGate.cleanSince}, or follows every change of state with
 * {@linkcode HealthGate.subscribe}.
 *
 * The waves call {@linkcode HealthGate.breached} throughout a soak and
 * {@linkcode HealthGate.checkNow} when a wave ends.
 *
 * @module
 */

import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { GateConfig } from "./config.ts";
import { BadQueryError, type Measure, type Measurement, noDataOf } from "./prometheus.ts";
import {
  blockedBy,
  type Breach,
  describeBreach,
  type GateEvent,
  type GateState,
  isBreached,
  isClean,
  next,
  stopsBy,
} from "./state.ts";

/** What a {@linkcode HealthGate} is built from. */
export interface HealthGateOptions {
  /** The gates' configuration. */
  config: GateConfig;
  /** One measurement: the first breach, and what data it lacked (`prometheus.ts` `measure`). */
  measure: Measure;
  /** The clock. @default SYSTEM_CLOCK */
  clock?: Clock;
}

/**
 * A latch that cannot be written, for good (403, a webhook or a policy
 * denied it, the owner is gone): the run stops instead of holding a pause
 * no one can lift. Its message says why and what to run.
 */
export class LatchRefused extends Error {
  /** @param message why, and the command that clears what was left */
  constructor(message: string) {
    super(message);
    this.name = "LatchRefused";
  }
}

/** A start held, or let go again, by an outage or by no data. */
export interface HoldChange {
  /** What holds: Prometheus unreachable, or an answer without its data. */
  kind: "outage" | "nodata";
  /** Whether starts pause now or resume. */
  state: "paused" | "resumed";
  /** In words: the gate's reason, or what came back. */
  detail: string;
}

/** What the run hooks the gate to, once it is under way ({@linkcode HealthGate.bind}). */
export interface GateHooks {
  /**
   * Told once per breach, after its latch was tried (latch first): the log
   * line and the owner's Event. `latch` is the state that attempt left:
   * `latched`, `unlatched` (refused for good), or `breached` (to be tried
   * again, or no latch to write).
   */
  onBreach: (b: Breach, latch: "breached" | "latched" | "unlatched") => void;
  /**
   * Writes the latch of a breach: the run's pause (`--on-gate-breach
   * pause`) or the exit latch (`exit`). A {@linkcode LatchRefused} stops the
   * run; another error is tried again at every measurement, and stops the
   * run once it has failed for three intervals.
   */
  latch?: (b: Breach) => Promise<void>;
  /**
   * The latch kept failing for three intervals (an error that is no
   * {@linkcode LatchRefused}: a webhook down answers 500 for ever): leaves
   * what it can in its place (the exit latch for a pause) and says so. The
   * run stops with its words; without it, with the last error's.
   */
  giveUp?: (b: Breach, error: Error) => Promise<string>;
  /** Whether the pause the latch set is seen now (the owner's watch, the file); undefined with `exit`. */
  pauseSeen?: () => boolean;
  /** Told when starts pause for an outage or for no data, and when they resume. */
  onHold?: (change: HoldChange) => void;
}

/**
 * One breach as the report tells it: what breached and when, and when the
 * run's pause for it was set and lifted (a person's "go on").
 */
export interface BreachRecord extends Breach {
  /** When the latch was set; undefined while not. */
  latchedAt?: number;
  /** When that pause was seen lifted and the gate let go; undefined while it holds. */
  liftedAt?: number;
}

/** A change of the gate's state, as {@linkcode HealthGate.subscribe} tells it. */
export type GateListener = (state: GateState, at: number) => void;

/**
 * How many times one measurement is asked for again when latches keep
 * being lifted while it is under way; the last answer then stands.
 */
const MEASURE_TRIES = 3;

/** How many intervals a latch may keep failing (an API outage) before the run stops. */
const LATCH_RETRY_INTERVALS = 3;

/** The gate a run checks before every start, through a soak and when a wave ends. */
export class HealthGate {
  #o: HealthGateOptions & Partial<GateHooks>;
  #clock: Clock;
  #state: GateState = { kind: "unchecked" };
  #wake = () => {};
  #timer?: ReturnType<typeof setTimeout>;
  #running?: Promise<void>;
  #stopped = false;
  #latching = false;
  #latchFailingSince?: number;
  #told = new Set<Breach>();
  #history: BreachRecord[] = [];
  #listeners = new Set<GateListener>();
  #cleanSince?: number;
  #checkedAt?: number;
  /** How many latches were lifted so far: an answer asked before one is stale. */
  #lifts = 0;

  /** @param o what the gate is built from */
  constructor(o: HealthGateOptions) {
    this.#o = o;
    this.#clock = o.clock ?? SYSTEM_CLOCK;
  }

  /**
   * Hooks the gate to the run: a breach seen so far (at the first
   * measurement, say) is latched and told now.
   */
  async bind(hooks: GateHooks): Promise<void> {
    this.#o = { ...this.#o, ...hooks };
    await this.#settle();
  }

  /**
   * Every breach of the run so far, in order, with when its latch was set
   * and lifted: for the report, which outlives the Events and the log.
   */
  get breaches(): readonly BreachRecord[] {
    void this.state; // a lift seen only now is recorded with its time
    return this.#history;
  }

  /**
   * The latch was set outside the gate (the exit latch written when the
   * run ended, the gate's own write having failed): the last breach's
   * `latchedAt` is now.
   */
  latchedOutside(): void {
    const last = this.#history.at(-1);
    if (last && last.latchedAt === undefined) last.latchedAt = this.#clock.now();
  }

  /** The interval, in ms: a start needs a result at most this old. */
  get intervalMs(): number {
    return this.#o.config.intervalSecs * 1000;
  }

  /** When Prometheus was last asked (ms since the epoch); undefined before the first answer. */
  get checkedAt(): number | undefined {
    return this.#checkedAt;
  }

  /** The state, as of now (a clean answer older than the interval is stale). */
  get state(): GateState {
    this.#apply({ type: "tick", now: this.#clock.now(), intervalMs: this.intervalMs });
    if (this.#state.kind === "latched" && this.#o.pauseSeen) {
      this.#apply({ type: "pause", paused: this.#o.pauseSeen() });
    }
    return this.#state;
  }

  /**
   * Since when every answer was clean (nothing breached, all data there,
   * Prometheus answering), in ms since the epoch; undefined while the gate
   * is not clean now. A soak is clean when this is at or before its start.
   */
  cleanSince(): number | undefined {
    return isClean(this.state) ? this.#cleanSince : undefined;
  }

  /**
   * Calls `listener` at every change of the state's kind (breached,
   * latched, outage, no data, fresh, …) from now on.
   *
   * @returns what unsubscribes it
   */
  subscribe(listener: GateListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Measures once before the first Job (also whether `--gate-alerts` names
   * an alerting rule), then every half interval.
   *
   * @returns that first measurement: the caller refuses a dark selector
   * @throws {BadQueryError} when Prometheus rejects a query (bad PromQL, 422)
   * @throws {PrometheusUnreachable} when it gives no usable answer
   */
  async start(): Promise<Measurement> {
    const m = await this.#o.measure({ first: true });
    this.#answered(m);
    await this.#settle();
    this.#schedule();
    return m;
  }

  /**
   * Measures now (or joins the measurement under way) and says why no Job
   * may start, if none may: what the waves call when a wave ends.
   */
  async checkNow(): Promise<string | undefined> {
    await (this.#running ??= this.#measure().finally(() => (this.#running = undefined)));
    return this.pausedBy();
  }

  /**
   * The hold after a wave (the waves' `holdAfterWave`), called as its soak
   * begins: throughout the soak the gate goes on measuring, and a breach
   * latches and holds every start as before any Job; when the soak ends it
   * measures once more. Resolves with why the rollout stops, or undefined:
   * the next wave may open as far as the gate's stop goes (a latched pause,
   * an outage or no data still holds its starts, as the pause gate they are).
   *
   * @param soakMs the soak (`--wave-soak-secs`), in ms
   */
  async afterWave(soakMs: number, signal?: AbortSignal): Promise<string | undefined> {
    if (soakMs > 0) await this.#clock.sleep(soakMs, signal);
    await this.checkNow();
    return this.stopsBy();
  }

  /** The breach that holds the rollout, in words (query and value); undefined while none. */
  breached(): string | undefined {
    const s = this.state;
    return isBreached(s) ? describeBreach(s.breach) : undefined;
  }

  /** Why no Job may start now; undefined when one may. The engine asks before every start. */
  pausedBy(): string | undefined {
    return blockedBy(this.state, this.#o.config.url);
  }

  /** Why the rollout stops (a breach with `exit`, a latch that cannot be written); undefined else. */
  stopsBy(): string | undefined {
    return stopsBy(this.state, this.#o.config.onBreach);
  }

  /** Calls `wake` whenever the answer of {@linkcode pausedBy} may have changed. */
  onChange(wake: () => void): void {
    this.#wake = wake;
  }

  /** Stops measuring; waits for a measurement under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #apply(e: GateEvent): void {
    const before = this.#state;
    const at = this.#clock.now();
    this.#state = next(before, e);
    const after = this.#state;
    if (after === before) return;
    this.#remember(before, after, at);
    if (isClean(after) && !isClean(before)) this.#cleanSince = at;
    if (before.kind === "latched" && after.kind === "unchecked") this.#lifts++;
    this.#holds(before, after);
    if (after.kind !== before.kind) { for (const l of this.#listeners) l(after, at); }
  }

  /** Tells the outages and the spells of no data, as they begin and end. */
  #holds(before: GateState, after: GateState): void {
    const url = this.#o.config.url;
    for (const kind of ["outage", "nodata"] as const) {
      const was = before.kind === kind;
      const is = after.kind === kind;
      if (
        is && (!was || (after.kind === "nodata" && before.kind === "nodata" &&
          after.detail !== before.detail))
      ) {
        this.#o.onHold?.({ kind, state: "paused", detail: blockedBy(after, url)! });
      } else if (was && !is) {
        const detail = kind === "outage"
          ? `Prometheus ${url} answers again`
          : "data again for every selector";
        this.#o.onHold?.({ kind, state: "resumed", detail });
      }
    }
  }

  /** Keeps the history of breaches: a new breach, its latch set, its latch lifted. */
  #remember(before: GateState, after: GateState, at: number): void {
    const last = this.#history.at(-1);
    if (isBreached(after) && !isBreached(before)) {
      this.#history.push({ ...after.breach });
    } else if (after.kind === "latched" && before.kind === "breached" && last) {
      last.latchedAt = at;
    } else if (before.kind === "latched" && after.kind !== "latched" && last) {
      last.liftedAt = at;
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(async () => {
      await (this.#running ??= this.#measure().finally(() => (this.#running = undefined)));
      this.#schedule();
    }, this.intervalMs / 2);
  }

  /** One measurement, its answer applied; then the latch of a new breach. */
  async #measure(): Promise<void> {
    const before = this.pausedBy();
    // A pause lifted while Prometheus was being asked: its answer says how
    // the fleet was before the person's go-on (with a short interval one is
    // in flight half the time), and a breach in it would write the pause
    // again on data the lift already judged. Asked again instead; a person
    // cannot lift faster than that answers.
    for (let tries = 1; !this.#stopped; tries++) {
      if (await this.#measureOnce(tries === MEASURE_TRIES)) break;
    }
    // Woken after every answer, not only when it differs from `before`: an
    // answer that took longer than half the interval finds the last one
    // stale (starts waited, the engine asleep) and is "go" again, as at the
    // start. One more pass of the engine per half interval costs nothing.
    this.#wake();
    await this.#settle();
    if (this.pausedBy() !== before) this.#wake();
  }

  /**
   * Asks Prometheus once and applies the answer (or the failure), unless a
   * latch was lifted meanwhile and this is not the `last` try.
   *
   * @returns whether the answer was applied
   */
  async #measureOnce(last: boolean): Promise<boolean> {
    const lifts = this.#lifts;
    const at = this.#clock.now();
    let answer: Measurement | undefined;
    let error: unknown;
    try {
      answer = await this.#o.measure();
    } catch (e) {
      error = e;
    }
    void this.state; // a lift seen only now counts as during this measurement
    if (this.#lifts !== lifts && !last) return false;
    if (answer) {
      this.#answered(answer);
      return true;
    }
    this.#checkedAt = this.#clock.now();
    if (error instanceof BadQueryError) {
      // Deterministic: asking again gets the same; a stop a person lifts.
      const query = error.query ?? `--gate-alerts ${this.#o.config.alerts}`;
      this.#apply({ type: "rejected", at, query, error: error.message });
    } else this.#apply({ type: "failed", at, error: (error as Error).message });
    return true;
  }

  #answered(m: Measurement): void {
    const at = this.#checkedAt = this.#clock.now();
    this.#apply({
      type: "answered",
      at,
      breach: m.breach && { ...m.breach, at },
      noData: noDataOf(m),
    });
  }

  /** A breach not latched yet: its latch written first, then it is told. */
  async #settle(): Promise<void> {
    const s = this.#state;
    if (s.kind === "breached" && this.#o.latch && !this.#latching) await this.#tryLatch(s.breach);
    const now = this.#state;
    if (isBreached(now) && this.#o.onBreach && !this.#told.has(now.breach)) {
      this.#told.add(now.breach);
      this.#o.onBreach(now.breach, now.kind);
      this.#wake();
    }
  }

  /** Writes the latch; a refusal (or failing for three intervals) is the state `unlatched`. */
  async #tryLatch(b: Breach): Promise<void> {
    this.#latching = true;
    try {
      await this.#o.latch!(b);
      this.#latchFailingSince = undefined;
      this.#apply({ type: "latched" });
    } catch (e) {
      const now = this.#clock.now();
      this.#latchFailingSince ??= now;
      const tooLong = now - this.#latchFailingSince >= LATCH_RETRY_INTERVALS * this.intervalMs;
      if (e instanceof LatchRefused) {
        this.#apply({ type: "latchRefused", error: e.message });
      } else if (tooLong) {
        const error = this.#o.giveUp ? await this.#o.giveUp(b, e as Error) : (e as Error).message;
        this.#apply({ type: "latchRefused", error });
      }
      // Else the API may be out for a moment: the breach still holds
      // every start, and the next measurement tries the latch again.
    } finally {
      this.#latching = false;
    }
  }
}
