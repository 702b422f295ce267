/**
 * The rollout's waves as run state (`--waves`, `--canary`): which wave is
 * open, its boundary, its soak and the hold after it. Each node's wave is
 * the `wave` of its target; the engine's one `Map<job name, NodeState>`
 * stays the only per-node state, and this keeps per wave only counts.
 *
 * A wave opens only when every node of the one before has ended, its
 * verdict passed, its soak elapsed and the hold after it (`holdAfterWave`,
 * where the health gates plug in) resolved.
 *
 * @module
 */

import type { Clock } from "../base/clock.ts";
import type { NodeState } from "./node_state.ts";
import type { HoldAfterWave, Target, WaveRecord, WaveView } from "./fanout_types.ts";
import { waveLabel, type WaveOutcome, waveVerdict } from "./waves.ts";

/** What the wave state needs from the engine. */
export interface WaveHost {
  /** The clock. */
  clock: Clock;
  /** Aborts when the run is stopped. */
  signal: AbortSignal;
  /** Seconds to hold after each wave (`--wave-soak-secs`), in ms. */
  soakMs: number;
  /** The first wave came from `--canary`. */
  canary?: boolean;
  /** A failure budget (`--max-failures`) is set: failures count there. */
  budget: boolean;
  /** Called once a wave's soak began; the next wave opens once it resolves. */
  hold?: HoldAfterWave;
  /** Stops the rollout with a reason. */
  stop(reason: string): void;
  /** Says a wave boundary: a wave ended, its soak began, the next opened. */
  notice(wave: number, message: string): void;
  /** Wakes the engine's loop. */
  wake(): void;
}

/** One wave's counts and times. */
interface Wave {
  size: number;
  /** Nodes not yet final. */
  left: number;
  /** A node of it was not counted from an earlier run: this run changed something. */
  worked: boolean;
  openedAt?: number;
  endedAt?: number;
  soakEndsAt?: number;
  soakEndedAt?: number;
  /** The hold after it resolved. */
  held?: boolean;
}

/** Where the open wave stands. */
type Stage = "running" | "soaking" | "holding";

/**
 * The waves of one dispatch. The engine tells it of every node that became
 * final ({@linkcode settled}), asks it which nodes may start
 * ({@linkcode allows}, {@linkcode limit}) and lets it move on in its loop
 * ({@linkcode tick}).
 */
export class WaveState {
  #h: WaveHost;
  #waves: Wave[];
  /** The open wave, 1-based. */
  #open = 1;
  #stage: Stage = "running";

  /** Takes the waves from the targets' `wave` (1-based, in order). */
  constructor(targets: readonly Target[], host: WaveHost) {
    this.#h = host;
    const count = Math.max(1, ...targets.map((t) => t.wave ?? 1));
    this.#waves = Array.from({ length: count }, () => ({ size: 0, left: 0, worked: false }));
    for (const t of targets) {
      const w = this.#waves[(t.wave ?? 1) - 1];
      w.size++;
      w.left++;
    }
    this.#waves[0].openedAt = host.clock.now();
  }

  /** Whether the open wave is the last: no wave is gated any more. */
  get last(): boolean {
    return this.#open >= this.#waves.length;
  }

  /**
   * Whether a queued name may start now: a node of an opened wave; a
   * leftover of an earlier owner (no target) only once the last wave is
   * open, as with the canary before.
   */
  allows(t: Target | undefined): boolean {
    if (this.last && this.#stage === "running") return true;
    return this.#stage === "running" && t !== undefined && (t.wave ?? 1) <= this.#open;
  }

  /** The slots while a wave is gated: at most its size, none in its soak and hold. */
  limit(parallelism: number): number {
    if (this.#stage !== "running") return 0;
    return this.last ? parallelism : Math.min(parallelism, this.#waves[this.#open - 1].size);
  }

  /** A target's node became final with state `s`: its wave's counts and verdict. */
  settled(t: Target, s: NodeState): void {
    const wave = t.wave ?? 1;
    const w = this.#waves[wave - 1];
    w.left--;
    if (!s.counted) w.worked = true;
    if (w.left === 0) w.endedAt ??= this.#h.clock.now();
    if (wave === this.#waves.length) return;
    const outcome = s.phase === "stillBlocked" ? "blocked" : s.phase as WaveOutcome["outcome"];
    const label = waveLabel(wave, this.#waves.length, this.#h.canary);
    const o = { node: t.node.name, outcome, reason: s.reason };
    const verdict = waveVerdict(label, o, this.#h.budget);
    if (verdict) this.#h.stop(verdict);
  }

  /**
   * Moves the waves on as far as `now` allows: an ended wave begins its soak
   * and its hold, a soaked and held one opens the next.
   *
   * @param halted nothing more may start (stopped, aborted, window closed)
   * @returns ms until the soak ends, or Infinity
   */
  tick(now: number, halted: boolean): number {
    while (!halted && !this.last) {
      const w = this.#waves[this.#open - 1];
      if (this.#stage === "running") {
        if (w.left > 0) return Infinity;
        this.#end(w, now);
      }
      if (now < w.soakEndsAt!) return w.soakEndsAt! - now;
      if (w.soakEndedAt === undefined) w.soakEndedAt = w.soakEndsAt;
      if (!w.held) {
        this.#stage = "holding";
        return Infinity;
      }
      this.#open++;
      this.#stage = "running";
      const opened = this.#waves[this.#open - 1];
      opened.openedAt = now;
      this.#h.notice(
        this.#open,
        `wave ${this.#open} of ${this.#waves.length} opens: ${opened.size} nodes`,
      );
      // The loop fills slots before it checks the timers: wake it to fill the new wave.
      this.#h.wake();
    }
    return Infinity;
  }

  /** A wave's nodes all ended: its soak (when this run changed something) and hold begin. */
  #end(w: Wave, now: number): void {
    w.endedAt ??= now;
    // A wave whose every node was counted from an earlier run changed
    // nothing in this one: there is nothing to soak.
    w.soakEndsAt = now + (w.worked ? this.#h.soakMs : 0);
    this.#stage = "soaking";
    const soak = w.soakEndsAt > now ? `; soaking ${(w.soakEndsAt - now) / 1000} s` : "";
    this.#h.notice(
      this.#open,
      `wave ${this.#open} of ${this.#waves.length} ended (${w.size} nodes)${soak} ` +
        `before wave ${this.#open + 1}`,
    );
    const hold = this.#h.hold;
    if (!hold) {
      w.held = true;
      return;
    }
    const wave = this.#open;
    hold({ wave, waves: this.#waves.length, soakEndsAt: w.soakEndsAt, signal: this.#h.signal })
      .then((why) => {
        if (why) this.#h.stop(why);
        else w.held = true;
      }, (e) => this.#h.stop(`the hold after wave ${wave} failed: ${e}`))
      .finally(() => this.#h.wake());
  }

  /** The waves for the progress line and the owner Job. */
  view(now: number): WaveView {
    const w = this.#waves[this.#open - 1];
    return {
      wave: this.#open,
      waves: this.#waves.length,
      stage: this.#stage,
      soakLeftMs: this.#stage === "soaking" ? Math.max(0, w.soakEndsAt! - now) : undefined,
    };
  }

  /** Each wave's size and times, for the report. */
  records(): WaveRecord[] {
    return this.#waves.map((w, i) => ({
      wave: i + 1,
      size: w.size,
      openedAt: w.openedAt,
      endedAt: w.endedAt,
      soakEndsAt: w.endedAt === undefined || i + 1 === this.#waves.length
        ? undefined
        : w.soakEndsAt,
      soakEndedAt: w.soakEndedAt,
    }));
  }
}
