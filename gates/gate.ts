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
 * lifted; with `exit`, {@linkcode HealthGate.stopsBy} stops the rollout.
 *
 * The waves call {@linkcode HealthGate.breached} throughout a soak and
 * {@linkcode HealthGate.checkNow} when a wave ends.
 *
 * @module
 */

import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { GateConfig } from "./config.ts";
import { BadQueryError, type Measure } from "./prometheus.ts";
import { blockedBy, type Breach, describeBreach, type GateState, next } from "./state.ts";

/** What a {@linkcode HealthGate} is built from. */
export interface HealthGateOptions {
  /** The gates' configuration. */
  config: GateConfig;
  /** One measurement: the first breach, if any (`prometheus.ts` `measure`). */
  measure: Measure;
  /** The clock. @default SYSTEM_CLOCK */
  clock?: Clock;
}

/** What the run hooks the gate to, once it is under way ({@linkcode HealthGate.bind}). */
export interface GateHooks {
  /** Told once per breach, before the latch is set: the log line and the owner's Event. */
  onBreach: (b: Breach) => void;
  /**
   * Sets the run's pause for a breach (`--on-gate-breach pause`); tried again
   * at every measurement until it succeeds. Undefined with `exit`.
   */
  latch?: (b: Breach) => Promise<void>;
  /** Whether the pause the latch set is seen now (the owner's watch, the file). */
  pauseSeen?: () => boolean;
  /** Told when Prometheus stops answering mid-run, and when it answers again. */
  onOutage?: (state: "paused" | "resumed", detail: string) => void;
}

/**
 * One breach as the report tells it: what breached and when, and when the
 * run's pause for it was set and lifted (a person's "go on").
 */
export interface BreachRecord extends Breach {
  /** When the run's pause (the latch) was set; undefined while not (or with `exit`). */
  latchedAt?: number;
  /** When that pause was seen lifted and the gate let go; undefined while it holds. */
  liftedAt?: number;
}

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
  #history: BreachRecord[] = [];

  /** @param o what the gate is built from */
  constructor(o: HealthGateOptions) {
    this.#o = o;
    this.#clock = o.clock ?? SYSTEM_CLOCK;
  }

  /**
   * Hooks the gate to the run: a breach seen so far (at the first
   * measurement, say) is told and latched now.
   */
  async bind(hooks: GateHooks): Promise<void> {
    this.#o = { ...this.#o, ...hooks };
    const s = this.#state;
    if (s.kind === "breached") hooks.onBreach(s.breach);
    await this.#latch();
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
   * The latch was set outside the gate (`--on-gate-breach exit`'s ConfigMap,
   * after the rollout stopped): the last breach's `latchedAt` is now.
   */
  latchedOutside(): void {
    const last = this.#history.at(-1);
    if (last && last.latchedAt === undefined) last.latchedAt = this.#clock.now();
  }

  /** The interval, in ms: a start needs a result at most this old. */
  get intervalMs(): number {
    return this.#o.config.intervalSecs * 1000;
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
   * Evaluates every query once before the first Job, then measures every
   * half interval.
   *
   * @throws {BadQueryError} when Prometheus rejects a query (bad PromQL)
   * @throws {PrometheusUnreachable} when it gives no usable answer
   */
  async start(): Promise<void> {
    const found = await this.#o.measure();
    this.#answered(found);
    await this.#latch();
    this.#schedule();
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
   * measures once more. Resolves with why the rollout stops
   * (`--on-gate-breach exit`), or undefined: the next wave may open as far
   * as the gate's stop goes (a latched pause or an outage still holds its
   * starts, as the pause gate they are).
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
    return s.kind === "breached" || s.kind === "latched" ? describeBreach(s.breach) : undefined;
  }

  /** Why no Job may start now; undefined when one may. The engine asks before every start. */
  pausedBy(): string | undefined {
    return blockedBy(this.state, this.#o.config.url);
  }

  /** With `--on-gate-breach exit`: why the rollout stops; undefined while nothing breached. */
  stopsBy(): string | undefined {
    if (this.#o.config.onBreach !== "exit") return undefined;
    const b = this.breached();
    return b === undefined ? undefined : `a health gate was breached: ${b}`;
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

  /** The state's kind, unnarrowed (each `#apply` may change it). */
  #kind(): GateState["kind"] {
    return this.#state.kind;
  }

  #apply(e: Parameters<typeof next>[1]): void {
    const before = this.#state;
    this.#state = next(before, e);
    this.#remember(before, this.#state);
    if (before.kind === "outage" && this.#state.kind !== "outage") {
      this.#o.onOutage?.("resumed", `Prometheus ${this.#o.config.url} answers again`);
    }
  }

  /** Keeps the history of breaches: a new breach, its latch set, its latch lifted. */
  #remember(before: GateState, after: GateState): void {
    const last = this.#history.at(-1);
    const at = this.#clock.now();
    if (after.kind === "breached" && before.kind !== "breached") {
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

  /** One measurement, its answer applied; an error is an outage, never a breach. */
  async #measure(): Promise<void> {
    const before = this.pausedBy();
    try {
      this.#answered(await this.#o.measure());
    } catch (e) {
      const error = e instanceof BadQueryError
        ? `a query was rejected: ${e.message}`
        : (e as Error).message;
      const was = this.#state.kind;
      this.#apply({ type: "failed", at: this.#clock.now(), error });
      if (was !== "outage" && this.#kind() === "outage") {
        this.#o.onOutage?.("paused", `${this.pausedBy()}`);
      }
    }
    await this.#latch();
    if (this.pausedBy() !== before) this.#wake();
  }

  #answered(found: { query: string; value: string } | undefined): void {
    const at = this.#clock.now();
    const was = this.#state.kind;
    this.#apply({ type: "answered", at, breach: found && { ...found, at } });
    const s: GateState = this.#state;
    if (s.kind === "breached" && was !== "breached") {
      this.#o.onBreach?.(s.breach);
      this.#wake();
    }
  }

  /** Sets the run's pause for a breach not latched yet; a failure is tried again later. */
  async #latch(): Promise<void> {
    const s = this.#state;
    if (s.kind !== "breached" || !this.#o.latch || this.#latching) return;
    this.#latching = true;
    try {
      await this.#o.latch(s.breach);
      this.#apply({ type: "latched" });
    } catch {
      // The API may be out: the breach still holds every start, and the
      // next measurement tries the latch again.
    } finally {
      this.#latching = false;
    }
  }
}
