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
 * The soak is a deadline in the cluster, not in memory: it counts from the
 * end of the wave's last node, which for a node counted from an earlier run
 * is its Job's `completionTime`, so a run killed mid-soak (SIGKILL, its own
 * `--drain` evicting the hook's pod) and run again soaks only what is left.
 * It is watched cleanly ({@linkcode SoakGate}): a gate break inside it
 * restarts it, whole, from the moment the gates are clean again.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { Clock } from "../base/clock.ts";
import type { NodeState } from "./node_state.ts";
import type { HoldAfterWave, SoakGate, Target, WaveRecord, WaveView } from "./fanout_types.ts";
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
  /** The health gates the soak is watched by; a break inside it restarts it. */
  gate?: SoakGate;
  /** The API server's clock minus this one's, at least; undefined: unknown (taken as 0). */
  serverOffset?: () => number | undefined;
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
  openedAt?: number;
  endedAt?: number;
  /** The latest end among its final nodes (clock ms): see {@linkcode endOf}. */
  lastEnd: number;
  /** That latest end is a node counted from an earlier run: its Job's completion. */
  lastCounted?: boolean;
  /** What its soak counts from: its last node's end, or the end of a gate break inside it. */
  soakFrom?: number;
  soakEndsAt?: number;
  soakEndedAt?: number;
  /** The hold after it resolved. */
  held?: boolean;
  /** Each gate break that restarted its soak. */
  restarts: { at: number; after: string }[];
  /** What breaks the gates now, while it soaks. */
  broken?: string;
  /** The gates' clean stretch as last seen while it soaked. */
  cleanSince?: number;
}

/**
 * When a final node ended, for its wave's soak: now for a node this run saw
 * end; for one counted from an earlier run, when its Job completed
 * (`completedAt`, the API server's stamp), never later than now (a clock
 * ahead of this one would make the soak longer than asked), and now when
 * that is unknown: a soak is never cut short for want of a time.
 *
 * The Job's stamp, not the run record: the Job controller writes it as the
 * Job ends, before any run can be killed, while the record is written every
 * 10 s or more and a run SIGKILLed in between leaves its wave unrecorded. A
 * Job removed by its `ttlSecondsAfterFinished` takes its stamp with it; its
 * node is then run again (or, counted from a record of its success, has no
 * stamp), so its wave soaks whole from now: what survives a TTL deletion is
 * the rule that an unknown end never shortens a soak. A counted node whose
 * post-success work this run did ends when that work ended: now. The
 * stamp is on the API server's clock, moved onto this one by
 * `serverOffset`, a lower bound of the difference (a bastion's clock ahead
 * would otherwise cut the soak by as much).
 */
function endOf(s: NodeState, now: number, serverOffset = 0): number {
  // A counted success whose post-success work (verification, labels, the
  // uncordon) this run did came back into service only now: the earlier
  // run may have been killed before it, and its soak must watch the node
  // serving, as the first run's would have (it settles after that work).
  if (!s.counted || s.afterStarted) return now;
  // The stamp is the API server's clock: said on this one, never earlier
  // than it was (the offset is a lower bound).
  return Math.min(now, s.completedAt === undefined ? now : s.completedAt - serverOffset);
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
    this.#waves = Array.from({ length: count }, () => ({
      size: 0,
      left: 0,
      lastEnd: -Infinity,
      restarts: [],
    }));
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
    const now = this.#h.clock.now();
    w.left--;
    const end = endOf(s, now, this.#h.serverOffset?.() ?? 0);
    if (end >= w.lastEnd) {
      w.lastEnd = end;
      w.lastCounted = s.counted;
    }
    if (w.left === 0) w.endedAt ??= now;
    if (wave === this.#waves.length) return;
    const outcome = s.phase === "stillBlocked" ? "blocked" : s.phase as WaveOutcome["outcome"];
    const label = waveLabel(wave, this.#waves.length, this.#h.canary);
    // A failure before its Job (a re-check, a drain, a stale Job's wait) proved nothing.
    const noJob = s.phase === "failed" && !s.counted && s.startedAt === undefined;
    const o = { node: t.node.name, outcome, reason: s.reason, noJob };
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
      // Watched until the next wave opens: a break while the hold still
      // holds restarts the soak too.
      const left = this.#soakLeft(w, now);
      if (left > 0) return left;
      if (!w.held) {
        this.#stage = "holding";
        return Infinity;
      }
      w.soakEndedAt = w.soakEndsAt;
      this.#open++;
      this.#stage = "running";
      const opened = this.#waves[this.#open - 1];
      opened.openedAt = now;
      this.#h.notice(
        this.#open,
        `wave ${this.#open} of ${this.#waves.length} opens: ${counted(opened.size, "node")}`,
      );
      // The loop fills slots before it checks the timers: wake it to fill the new wave.
      this.#h.wake();
    }
    return Infinity;
  }

  /**
   * The ms left of a wave's soak, as the gates have watched it: Infinity
   * while they are not clean (a breach, its latch, an outage, no data); once
   * clean again after a break inside the soak, the whole soak from then.
   */
  #soakLeft(w: Wave, now: number): number {
    const g = this.#h.gate?.watch();
    const soakSecs = this.#h.soakMs / 1000;
    if (g && !g.clean) {
      if (w.broken === undefined) {
        w.broken = g.why;
        this.#h.notice(
          this.#open,
          `wave ${this.#open}'s soak is interrupted (${g.why}); it starts again, ${soakSecs} s, ` +
            "once the health gates are clean and the run is not paused",
        );
      }
      this.#stage = "holding";
      return Infinity;
    }
    if (g && g.since > w.soakFrom!) {
      w.soakFrom = g.since;
      w.restarts.push({ at: g.since, after: w.broken ?? g.after ?? "a health gate break" });
      this.#h.notice(
        this.#open,
        `wave ${this.#open}'s soak starts again: the health gates are clean since ` +
          `${new Date(g.since).toISOString()}; soaking ${soakSecs} s`,
      );
    }
    w.broken = undefined;
    w.cleanSince = g?.since;
    w.soakEndsAt = w.soakFrom! + this.#h.soakMs;
    this.#stage = "soaking";
    return Math.max(0, w.soakEndsAt - now);
  }

  /** A wave's nodes all ended: its soak (from its last node's end) and hold begin. */
  #end(w: Wave, now: number): void {
    w.endedAt ??= now;
    // This run's own ends count from now, as the loop sees the wave end.
    w.soakFrom = w.lastCounted ? Math.min(now, w.lastEnd) : now;
    w.soakEndsAt = w.soakFrom + this.#h.soakMs;
    this.#stage = "soaking";
    const soak = w.lastCounted
      ? earlierSoakText(w.soakEndsAt - now, this.#h.soakMs)
      : this.#h.soakMs > 0
      ? `; soaking ${this.#h.soakMs / 1000} s`
      : "";
    this.#h.notice(
      this.#open,
      `wave ${this.#open} of ${this.#waves.length} ended (${counted(w.size, "node")})${soak} ` +
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
      ...(this.#stage === "holding" && w.broken !== undefined && { soakInterrupted: true }),
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
      ...(w.soakFrom !== undefined && i + 1 < this.#waves.length && {
        soakFrom: w.soakFrom,
        soakRestarts: w.restarts,
        ...(w.cleanSince !== undefined && { soakCleanSince: w.cleanSince }),
      }),
    }));
  }
}

/**
 * The soak a wave ended by an earlier run's Job says: what is left of it,
 * counted from that Job's completion, or that it passed.
 */
function earlierSoakText(leftMs: number, soakMs: number): string {
  if (soakMs <= 0) return "";
  if (leftMs <= 0) {
    return `; its ${soakMs / 1000} s soak passed since its last Job completed (an earlier run)`;
  }
  return `; soaking ${Math.ceil(leftMs / 1000)} s (the rest of its ${soakMs / 1000} s soak ` +
    "since its last Job completed in an earlier run)";
}
