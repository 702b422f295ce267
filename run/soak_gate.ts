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
 * "Clean since" outlives the run: each break and each end of one is written
 * on the owner Job (`<P>/gates-clean-since`: `broken`, or the time), and a
 * re-run starts from what it finds there, so that a soak restarted by a run
 * then killed is restarted in the re-run too (the Jobs' completion alone
 * would open the next wave at once). `broken`: the earlier run died inside a
 * break, whose end nobody saw; the re-run's gate, clean as it starts, counts
 * from its start.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import type { OwnerRef } from "../job.ts";
import { pointer } from "../nodes/lifecycle.ts";
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

  #persist?: (value: string) => Promise<void>;
  #writes = Promise.resolve();

  /**
   * @param gate the run's health gate, under way
   * @param o.pauses the run's pause gates (owner annotation, pause file), each a break while it pauses
   * @param o.earlier what an earlier run left (`broken`, or an ISO time), if anything
   * @param o.persist writes "clean since" where a re-run finds it (`broken`, or an ISO time)
   */
  constructor(
    gate: HealthGate,
    o: {
      pauses?: readonly PauseGate[];
      clock?: Clock;
      earlier?: string;
      persist?: (value: string) => Promise<void>;
    } = {},
  ) {
    this.#gate = gate;
    this.#pauses = o.pauses ?? [];
    this.#clock = o.clock ?? SYSTEM_CLOCK;
    this.#persist = o.persist;
    const earlier = o.earlier === "broken" ? this.#clock.now() : Date.parse(o.earlier ?? "");
    if (!Number.isNaN(earlier)) {
      this.#since = earlier;
      this.#after = "a health gate break (or a pause) seen by an earlier run of this owner";
    }
  }

  /** The writes of "clean since" so far, settled. */
  flushed(): Promise<void> {
    return this.#writes;
  }

  /** Writes `value` after the writes before it: the last one stands. */
  #write(value: string): void {
    const persist = this.#persist;
    // The persist says its own failures; the chain must outlive them.
    if (persist) this.#writes = this.#writes.then(() => persist(value)).catch(() => {});
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
      this.#broke(this.#gate.pausedBy() ?? `health gate: ${s.kind}`);
      return;
    }
    const paused = this.#pauses.map((p) => p.pausedBy()).find((by) => by !== undefined);
    if (paused !== undefined) {
      this.#broke(`paused by ${paused}`);
      this.#pausedAcross = true;
      return;
    }
    const since = this.#since;
    this.#mended(s);
    if (this.#since !== since) this.#write(new Date(this.#since).toISOString());
  }

  /** A break, as first seen: written before the run acts on it. */
  #broke(why: string): void {
    if (this.#broken !== undefined) return;
    this.#broken = why;
    this.#write("broken");
  }

  /** A clean answer: a break (or a latch lifted between two looks) ends. */
  #mended(s: { at: number }): void {
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

/** Where "clean since" lives: the owner Job's annotation `<P>/gates-clean-since`. */
export interface CleanSinceStore {
  /** The API client. */
  kube: Kube;
  /** The owner's namespace. */
  namespace: string;
  /** The owner Job. */
  owner: OwnerRef;
  /** The annotation key. */
  key: string;
  /** Says a write that failed: the soak's restart then lives in this run only. */
  warn(message: string): void;
}

/**
 * The run's {@linkcode WatchedGate}, from what an earlier run of the owner
 * left and writing on the owner as it goes; without an owner, this run's
 * alone (a person runs it, and sees it end).
 */
export async function watchedGate(
  gate: HealthGate,
  pauses: readonly PauseGate[],
  store?: CleanSinceStore,
): Promise<WatchedGate> {
  if (!store) return new WatchedGate(gate, { pauses });
  const path = paths.job(store.namespace, store.owner.name);
  const job = await store.kube.get<V1Job>(path);
  const found = job?.metadata?.uid === store.owner.uid
    ? job.metadata?.annotations?.[store.key]
    : undefined;
  return new WatchedGate(gate, {
    pauses,
    earlier: found,
    persist: (value) => writeCleanSince(store, value),
  });
}

/** Writes "clean since" on the owner, only while it is the same Job (its UID). */
async function writeCleanSince(store: CleanSinceStore, value: string): Promise<void> {
  const path = paths.job(store.namespace, store.owner.name);
  const test = { op: "test", path: "/metadata/uid", value: store.owner.uid };
  try {
    try {
      await store.kube.request("patch", "PATCH", path, [
        test,
        { op: "add", path: `/metadata/annotations/${pointer(store.key)}`, value },
      ]);
    } catch (e) {
      // No annotations map yet (JSON Patch cannot add into a missing map).
      if (!(e instanceof ApiError && e.status === 422)) throw e;
      await store.kube.request("patch", "PATCH", path, [
        test,
        { op: "add", path: "/metadata/annotations", value: { [store.key]: value } },
      ]);
    }
  } catch (e) {
    store.warn(
      `Cannot write ${store.key}=${value} on owner Job ${store.namespace}/${store.owner.name}: ` +
        `${(e as Error).message}; a re-run after this one is killed will not restart the soak ` +
        "for this break (grant patch on jobs)",
    );
  }
}
