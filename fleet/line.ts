/**
 * The fleet's one stop-the-line: the first cluster that stops (a gate
 * breach, its failure budget, a non-zero exit) stops it for every cluster.
 * No further cluster starts; each cluster still in flight is held through
 * its run's own pause, as a breach holds a run:
 * - with `--pause-file` (and `--on-gate-breach pause`, the default): the
 *   pause file is written, the run's own latch (gates/latch.ts), which every
 *   cluster's run watches; no Job starts anywhere until a person removes it;
 * - with an owner Job (`--owner-job-name`): `<P>/paused` and its reason are
 *   set on each in-flight cluster's owner Job, as a breach latches it there;
 *   the run's own owner gate then holds it, and a person lifts each with the
 *   `kubectl annotate` its run prints (a refused latch stops that cluster);
 * - else (`--on-gate-breach exit`, or no pause file to latch): each run
 *   stops as a gate's exit stops it: no further Job, its Jobs in flight
 *   finish, its run ends; the fleet exits once every run ended.
 *
 * Each run sees the line as one more pause gate of the engine
 * ({@linkcode StopLine.holdFor}), asked before every start with the run's own.
 *
 * @module
 */

import type { PauseGate } from "../engine/pause.ts";

/** Who stopped the line, and why. */
export interface Stop {
  /** The cluster (kubeconfig context). */
  cluster: string;
  /** Its stage. */
  stage: string;
  /** Why, in a few words (the breach's query and value, the budget, its record's reason). */
  cause: string;
  /** The fleet's exit code for it: the cluster's run's, or 5 for a breach whose run goes on. */
  code: number;
}

/** Where the line's pause is latched. */
export interface LineLatch {
  /** `--pause-file`, when the clusters hold on it; undefined: they stop instead. */
  pauseFile?: string;
  /** Writes the pause file with the reason in it (gates/latch.ts `pauseFileFor`). */
  write: (path: string, reason: string) => Promise<void>;
  /** Whether the file is there now (a person removes it to lift the pause). */
  exists: (path: string) => boolean;
  /**
   * Latches the pause on cluster `cluster`'s owner Job (gates/latch.ts
   * `pauseOwnerFor`); undefined when the runs have no owner Job.
   */
  owner?: (cluster: string, reason: string) => Promise<void>;
}

/** The line, shared by every cluster's run of one fleet process. */
export class StopLine {
  #latch: LineLatch;
  #stop?: Stop;
  /** The pause file was written (and so a missing one was lifted by a person). */
  #written = false;
  #lifted = false;
  /** The pause could not be written: the clusters stop instead. */
  #unlatched = false;
  #wakes = new Set<() => void>();
  /** The clusters whose runs are in flight (their owner Jobs get the latch). */
  #running = new Set<string>();
  /** Owner Jobs latched (their runs' owner gates hold them) and refused (they stop). */
  #ownerLatched = new Set<string>();
  #ownerRefused = new Set<string>();

  /** @param latch where the pause is latched */
  constructor(latch: LineLatch) {
    this.#latch = latch;
  }

  /** Who stopped the line; undefined while no one has. */
  get stopped(): Stop | undefined {
    return this.#stop;
  }

  /** Whether the clusters in flight hold on a latched pause (else they stop). */
  get latches(): boolean {
    if (this.#latch.owner) return true;
    return this.#latch.pauseFile !== undefined && !this.#unlatched;
  }

  /** Whether the pause is latched on each cluster's owner Job (else on the pause file). */
  get onOwners(): boolean {
    return this.#latch.owner !== undefined;
  }

  /** The reason a held cluster's run gives (its progress line, its report's stop). */
  reason(): string | undefined {
    const s = this.#stop;
    return s && `fleet: the line is stopped by cluster ${s.cluster} (stage ${s.stage}): ${s.cause}`;
  }

  /**
   * Stops the line, the first time; the cluster that stopped it may later
   * give its run's exit code. Latches the pause (latch first: the runs are
   * woken once it is written or refused).
   *
   * @returns whether this call stopped it
   * @throws nothing: a pause that cannot be written makes the clusters stop instead
   */
  async stop(s: Stop): Promise<boolean> {
    if (this.#stop) {
      if (this.#stop.cluster === s.cluster && s.code !== 0) this.#stop.code = s.code;
      return false;
    }
    this.#stop = { ...s };
    this.#wake();
    if (this.#latch.owner) {
      await this.#latchOwners(s.cluster);
      return true;
    }
    const path = this.#latch.pauseFile;
    if (path !== undefined) {
      try {
        await this.#latch.write(path, this.reason()!);
        this.#written = true;
      } catch {
        this.#unlatched = true;
      }
      this.#wake();
    }
    return true;
  }

  /** Cluster `cluster`'s run ended: a later stop leaves its owner Job alone. */
  release(cluster: string): void {
    this.#running.delete(cluster);
  }

  /** Latches every in-flight cluster's owner Job but the stopper's (latch first, then wake). */
  async #latchOwners(stopper: string): Promise<void> {
    const held = [...this.#running].filter((c) => c !== stopper);
    await Promise.all(held.map(async (c) => {
      try {
        await this.#latch.owner!(c, this.reason()!);
        this.#ownerLatched.add(c);
      } catch {
        this.#ownerRefused.add(c);
      }
    }));
    this.#wake();
  }

  /**
   * The line as cluster `cluster`'s run sees it: one more pause gate of its
   * engine. Counts the cluster in flight until {@linkcode StopLine.release}.
   */
  holdFor(cluster: string): PauseGate {
    this.#running.add(cluster);
    const mine = () => this.#stop !== undefined && this.#stop.cluster !== cluster;
    return this.#latch.owner ? this.#ownerHold(cluster, mine) : {
      pausedBy: () => {
        if (!mine() || !this.latches || this.#lifted) return undefined;
        // Written and gone: a person lifted it. Before it is written, starts hold too.
        if (this.#written && !this.#latch.exists(this.#latch.pauseFile!)) {
          this.#lifted = true;
          return undefined;
        }
        return this.reason();
      },
      stopsBy: () => (mine() && !this.latches ? this.reason() : undefined),
      onChange: (wake) => void this.#wakes.add(wake),
    };
  }

  /**
   * Held until its owner Job is latched; from then the run's own owner gate
   * holds it (so the `kubectl annotate` that lifts a breach lifts this too).
   */
  #ownerHold(cluster: string, mine: () => boolean): PauseGate {
    const settled = () => this.#ownerLatched.has(cluster) || this.#ownerRefused.has(cluster);
    return {
      pausedBy: () => (mine() && !settled() ? this.reason() : undefined),
      stopsBy: () => (mine() && this.#ownerRefused.has(cluster) ? this.reason() : undefined),
      onChange: (wake) => void this.#wakes.add(wake),
    };
  }

  #wake(): void {
    for (const w of this.#wakes) w();
  }
}
