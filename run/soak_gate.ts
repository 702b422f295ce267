/**
 * The health gate as the waves' soak sees it (the engine's `SoakGate`):
 * clean since when, or what breaks it now. The engine defines the
 * question; this answers it from the gate's states as they change, so that
 * a break between two of the engine's looks (a breach latched and lifted,
 * an outage that ended) still restarts the soak.
 *
 * The gate wakes the engine whenever what it says of starts may have
 * changed (`onChange`); this wraps that wake so every change is seen here
 * first. A gate whose own state machine keeps "clean since" can implement
 * `SoakGate` itself and replace this.
 *
 * The run's pauses (the owner's annotation, `--pause-file`) break it too:
 * a breach latched by a run that was then killed (SIGKILL, OOM, an evicted
 * hook pod) survives only as that pause, which the re-run's gate, measuring
 * afresh, cannot tell from a person's. Its lift must restart the soak as the
 * lift of this run's own latch does; a person's pause inside a soak costs a
 * soak more, never a wave opened unwatched.
 *
 * @module
 */

import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { GateWatch, SoakGate } from "../engine/fanout_types.ts";
import type { PauseGate } from "../engine/pause.ts";
import type { HealthGate } from "../gates/gate.ts";

/**
 * The run's health gate, as a pause gate (it stands for the gate in the
 * engine's pause list) and as the soak's gate.
 */
export class WatchedGate implements PauseGate, SoakGate {
  #gate: HealthGate;
  /** When the gate answered clean first after its last break; -Infinity: no break yet. */
  #since = -Infinity;
  /** What breaks it now (the first words seen of the break), while it lasts. */
  #broken?: string;
  /** What the last break was. */
  #after?: string;
  /** The current break included a pause. */
  #pausedAcross = false;

  #pauses: readonly PauseGate[];
  #clock: Clock;

  /**
   * @param gate the run's health gate, under way
   * @param pauses the run's pause gates (owner annotation, pause file), each a break while it pauses
   */
  constructor(gate: HealthGate, pauses: readonly PauseGate[] = [], clock: Clock = SYSTEM_CLOCK) {
    this.#gate = gate;
    this.#pauses = pauses;
    this.#clock = clock;
  }

  pausedBy(): string | undefined {
    const why = this.#gate.pausedBy();
    this.#observe();
    return why;
  }

  stopsBy(): string | undefined {
    return this.#gate.stopsBy();
  }

  onChange(wake: () => void): void {
    this.#gate.onChange(() => {
      this.#observe();
      wake();
    });
  }

  watch(): GateWatch {
    this.#observe();
    return this.#broken !== undefined
      ? { clean: false, why: this.#broken }
      : { clean: true, since: this.#since, ...(this.#after && { after: this.#after }) };
  }

  /**
   * Reads the gate's state: a clean answer (fresh, or only older than the
   * interval while the next is under way: no answer said otherwise) after a
   * break starts a new clean stretch at that answer's time. Any other state
   * (no answer yet, Prometheus unreachable, no data, a breach, its latch)
   * is a break.
   */
  #observe(): void {
    const s = this.#gate.state;
    if (s.kind !== "fresh" && s.kind !== "stale") {
      this.#broken ??= this.#gate.pausedBy() ?? `health gate: ${s.kind}`;
      return;
    }
    const paused = this.#pauses.map((p) => p.pausedBy()).find((by) => by !== undefined);
    if (paused !== undefined) {
      this.#broken ??= `paused by ${paused}`;
      this.#pausedAcross = true;
      return;
    }
    if (this.#broken !== undefined) {
      // A pause lifted: clean from when its lift was seen, not from the
      // last answer, which may be older than the pause.
      const at = this.#pausedAcross ? Math.max(s.at, this.#clock.now()) : s.at;
      this.#pausedAcross = false;
      this.#since = Math.max(this.#since, at);
      this.#after = this.#broken;
      this.#broken = undefined;
    }
    // A latch lifted between two looks: the clean answer after it is the start.
    const last = this.#gate.breaches.at(-1);
    if (last?.liftedAt !== undefined && last.liftedAt > this.#since) {
      this.#since = Math.max(last.liftedAt, s.at);
      this.#after = `health gate breached: query ${
        JSON.stringify(last.query)
      } returned ${last.value}`;
    }
  }
}
