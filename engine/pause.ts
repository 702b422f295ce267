/**
 * Pause and resume a running rollout: while the owner Job carries
 * `<P>/paused=true` (followed by a watch on that one Job, not a read per
 * node), or while `--pause-file` exists for a run without owner, no new Job
 * starts; Jobs in flight finish. The engine asks {@linkcode PauseGate.pausedBy}
 * before each start.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { Informer } from "../kube/informer.ts";
import { type Kube, paths } from "../kube/client.ts";
import type { OwnerRef } from "../job.ts";
import { pausedReasonKey } from "../gates/latch.ts";

/** What the engine asks before a start. */
export interface PauseGate {
  /** Why starts are paused, as the progress line says it; undefined: not paused. */
  pausedBy(): string | undefined;
  /** Calls `wake` whenever the answer may have changed. */
  onChange(wake: () => void): void;
  /**
   * Why the rollout stops (no more starts, in flight finishes, the run
   * ends), if it must: a health gate with `--on-gate-breach exit`.
   */
  stopsBy?(): string | undefined;
  /**
   * While paused by a health gate's latch (`<P>/paused-reason` beside the
   * pause, as gates/latch.ts sets it): the breach in words. A pod retried
   * under the same owner finds the latch of the pod it replaces; its own
   * gate never saw that breach, so only this says it.
   */
  heldFor?(): string | undefined;
}

/**
 * Why the owner Job pauses the rollout, or undefined: only the value `true`
 * pauses, so that `false` (or removing the annotation) resumes.
 *
 * @example
 * ```ts
 * ownerPausedBy({ metadata: { name: "hook", namespace: "ops", annotations: { "p/paused": "true" } } }, "p/paused");
 * // "annotation p/paused=true on Job ops/hook"
 * ```
 */
export function ownerPausedBy(job: V1Job | undefined, key: string): string | undefined {
  if (job?.metadata?.annotations?.[key] !== "true") return undefined;
  // Namespace and name, so that the resume command printed from it works
  // whatever namespace the user's own kubectl context is in.
  const { name, namespace } = job.metadata;
  return `annotation ${key}=true on Job ${namespace ? `${namespace}/` : ""}${name}`;
}

/** Keeps of the owner Job only what the pause reads. */
function slimOwner(job: V1Job): V1Job {
  const { name, namespace, uid, resourceVersion, annotations } = job.metadata ?? {};
  return { metadata: { name, namespace, uid, resourceVersion, annotations } };
}

/** The owner Job's pause annotation, followed by an informer on that Job alone. */
export class OwnerPause implements PauseGate {
  #informer: Informer<V1Job>;
  #name: string;
  #key: string;
  #wake = () => {};

  /** @param key the annotation `<P>/paused` */
  constructor(kube: Kube, namespace: string, owner: OwnerRef, key: string) {
    this.#name = owner.name;
    this.#key = key;
    const query = { fieldSelector: `metadata.name=${owner.name}` };
    this.#informer = new Informer<V1Job>({
      source: {
        list: (signal) => kube.list<V1Job>(paths.jobs(namespace), query, 1, undefined, signal),
        watch: (rv, signal) => kube.watch<V1Job>(paths.jobs(namespace), query, rv, signal),
      },
      keep: slimOwner,
      onUpsert: () => this.#wake(),
      onDelete: () => this.#wake(),
    });
  }

  /**
   * Reads the owner Job and starts following it.
   *
   * @throws {ApiError} when the first LIST fails
   */
  async start(): Promise<void> {
    await this.#informer.start();
  }

  pausedBy(): string | undefined {
    return ownerPausedBy(this.#informer.cache.get(this.#name), this.#key);
  }

  heldFor(): string | undefined {
    const job = this.#informer.cache.get(this.#name);
    if (ownerPausedBy(job, this.#key) === undefined) return undefined;
    return job?.metadata?.annotations?.[pausedReasonKey(this.#key)];
  }

  onChange(wake: () => void): void {
    this.#wake = wake;
  }

  /** Stops following. */
  async stop(): Promise<void> {
    await this.#informer.stop();
  }
}

/**
 * Whether the pause file at `path` is there now (a stat, not a read). Only
 * ENOENT/ENOTDIR say it was removed: a stat that fails otherwise (EACCES,
 * EIO, NFS's ESTALE, ELOOP) says nothing about a person's `rm`, and taken
 * as absent it would lift a pause, the gate's latch among them, that nobody
 * lifted. So it counts as there: a pause holds until the file is seen gone.
 */
export function pauseFileExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch (e) {
    return !(e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory);
  }
}

/**
 * `--pause-file PATH`: paused while the file exists. A local file has no
 * watch that works everywhere (inotify misses bind-mounted ConfigMaps), so it
 * is looked at every `intervalMs`.
 */
export class FilePause implements PauseGate {
  #path: string;
  #exists = false;
  #wake = () => {};
  #timer?: ReturnType<typeof setInterval>;

  /** @param intervalMs how often the file is looked at */
  constructor(path: string, intervalMs = 1000) {
    this.#path = path;
    this.#exists = this.#look();
    this.#timer = setInterval(() => {
      const now = this.#look();
      if (now === this.#exists) return;
      this.#exists = now;
      this.#wake();
    }, intervalMs);
  }

  #look(): boolean {
    return pauseFileExists(this.#path);
  }

  pausedBy(): string | undefined {
    return this.#exists ? `file ${this.#path}` : undefined;
  }

  onChange(wake: () => void): void {
    this.#wake = wake;
  }

  /** Stops looking. */
  stop(): Promise<void> {
    clearInterval(this.#timer);
    return Promise.resolve();
  }
}
