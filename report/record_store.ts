/**
 * Writes the run record's ConfigMap (`record.ts`) under the API server's
 * optimistic concurrency, so that of two runs writing one record the newer
 * one wins and the other finds out.
 *
 * Two dispatchers do write one record: the owner guard (`run/owner_guard.ts`)
 * keeps two owners' runs apart, but not two pods of one owner. When the pod
 * of an owner Job without a `podFailurePolicy` is evicted, it drains on
 * SIGTERM and writes its closing `stopped` while the Job controller's
 * replacement pod has already started the run again (with one, as the
 * chart's hook Job has, `podReplacementPolicy` can only be `Failed`: the
 * replacement waits until the pod ended); a pod on a node cut off from the
 * cluster runs on after the pod GC deleted it. An unconditional PUT lets
 * that `stopped` land last, and `status` calls a live run stopped.
 *
 * Which writer wins: the one that claimed the record last, as the API server
 * ordered the writes. Each writer has an id (`RunRecord.writer`); its first
 * write claims the record whatever is there (the record it replaces is an
 * earlier run's: a pod that started after it, or its own if it died), with
 * the resourceVersion of the record it read just before. Every later write
 * carries the resourceVersion of the writer's last one; on 409 it reads the
 * record again: still its own (a write whose answer was lost and was
 * resent), it writes again over it; another writer's, it was superseded and
 * writes no more. A claim whose answer never came (an outage) may have
 * landed or not: until one lands, the writer claims over only the writers it
 * saw before it, never over a run that claimed since, so an evicted pod whose
 * first write met an outage does not put its closing `stopped` over its
 * replacement. No merge: each write is the whole record of one run.
 *
 * @module
 */

import { ApiError } from "../kube/client.ts";
import { recordPath } from "./record.ts";

/** `Kube.request`, as far as the store needs it. */
export type StoreRequest = <T>(
  verb: string,
  method: string,
  path: string,
  body?: unknown,
) => Promise<T>;

/** The run record was claimed by another run: this one must stop writing it. */
export class SupersededError extends Error {
  /** @param message what took over, and that this run stops writing */
  constructor(message: string) {
    super(message);
    this.name = "SupersededError";
  }
}

/** Options of {@linkcode RecordStore}. */
export interface RecordStoreOptions {
  /** The Jobs' namespace, where the record lives. */
  namespace: string;
  /** The Jobs' name prefix: the record's name. */
  prefix: string;
  /** Sends one request (the API client's retry policy applies). */
  request: StoreRequest;
  /** This writer's id, put in the record. @default crypto.randomUUID() */
  writer?: string;
}

type ConfigMap = {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
};

/** How many times one write reads the record again after a 409 before it gives up. */
const MAX_CONFLICTS = 5;

/** The id of the writer of a record's ConfigMap, as its facts say; undefined when none. */
export function writerOf(cm: ConfigMap): string | undefined {
  try {
    const w = JSON.parse(cm.data?.record ?? "null")?.writer;
    return typeof w === "string" ? w : undefined;
  } catch {
    return undefined;
  }
}

function describe(cm: ConfigMap): string {
  try {
    const r = JSON.parse(cm.data?.record ?? "null") ?? {};
    const owner = r.owner?.name ? `, owner Job ${r.owner.name}` : "";
    const started = typeof r.startedAt === "number"
      ? `, started ${new Date(r.startedAt).toISOString()}`
      : "";
    return `writer ${r.writer ?? "unnamed"}${owner}${started}`;
  } catch {
    return "a record this dispatcher cannot read";
  }
}

/** One run's writes of its record; see the module's comment for who wins. */
export class RecordStore {
  /** This writer's id. */
  readonly writer: string;
  #o: RecordStoreOptions;
  #path: string;
  /** The resourceVersion of this writer's last write (or of the record it will claim). */
  #rv?: string;
  /** The record was read before the first write (what it claims over). */
  #read = false;
  /** No `configmaps get`: the first write claims unconditionally, as blind as before. */
  #blind = false;
  /** The writers whose records this one saw before its claim: older runs. */
  #seen = new Set<string | undefined>();
  /** This writer has written the record once: from now on only with a precondition. */
  #claimed = false;
  /**
   * A claim was sent and its answer never came (an outage, a timeout): it
   * may have landed or not, and a record by a writer not seen before it is
   * a newer run's, not one this writer may still claim over.
   */
  #uncertain = false;
  #superseded?: SupersededError;

  /** @param opts where the record lives and how to reach it */
  constructor(opts: RecordStoreOptions) {
    this.#o = opts;
    this.writer = opts.writer ?? crypto.randomUUID();
    this.#path = recordPath(opts.namespace, opts.prefix);
  }

  /**
   * Writes the record's ConfigMap (its facts naming {@linkcode writer}).
   *
   * @throws {SupersededError} once another run claimed the record after this one
   * @throws {ApiError} when the API server refuses the write otherwise
   */
  async write(cm: Record<string, unknown>): Promise<void> {
    for (let conflicts = 0;; conflicts++) {
      if (this.#superseded) throw this.#superseded;
      try {
        if (!this.#read) await this.#readFirst();
        return await this.#send(cm);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 409) || conflicts >= MAX_CONFLICTS) throw e;
        await this.#reread();
      }
    }
  }

  /**
   * Before the first write, what it claims over: the claim itself then
   * carries that record's resourceVersion, so that a claim sent again after
   * an outage can tell a record it saw (an older run's) from one written
   * since (a newer run's). Without `configmaps get` the claim is blind.
   */
  async #readFirst(): Promise<void> {
    try {
      const cm = await this.#o.request<ConfigMap>("get", "GET", this.#path);
      this.#rv = cm.metadata?.resourceVersion;
      this.#seen.add(writerOf(cm));
    } catch (e) {
      if (!(e instanceof ApiError && (e.status === 404 || e.status === 403))) throw e;
      this.#blind = e.status === 403;
    }
    this.#read = true;
  }

  /** A PUT with this writer's resourceVersion, or a create where there is no record. */
  async #send(cm: Record<string, unknown>): Promise<void> {
    const meta = (rv?: string) => ({
      ...cm,
      metadata: { ...(cm.metadata as object), resourceVersion: rv },
    });
    let saved: ConfigMap | undefined;
    try {
      // A writer that claimed the record never replaces it unconditionally: the
      // record it lost track of (deleted, then made by another) may be newer.
      if (this.#rv !== undefined || (this.#blind && !this.#claimed)) {
        try {
          saved = await this.#o.request<ConfigMap>("update", "PUT", this.#path, meta(this.#rv));
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 404)) throw e;
        }
      }
      saved ??= await this.#o.request<ConfigMap>(
        "create",
        "POST",
        this.#path.slice(0, this.#path.lastIndexOf("/")),
        meta(undefined),
      );
    } catch (e) {
      // A refusal (4xx) was not applied; anything else may have been.
      const refused = e instanceof ApiError && e.status >= 400 && e.status < 500 &&
        e.status !== 429;
      if (!this.#claimed && !refused) this.#uncertain = true;
      throw e;
    }
    this.#rv = saved.metadata?.resourceVersion;
    this.#claimed = true;
  }

  /** After a 409: whose is the record now? */
  async #reread(): Promise<void> {
    let cm: ConfigMap;
    try {
      cm = await this.#o.request<ConfigMap>("get", "GET", this.#path);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      this.#rv = undefined; // deleted since: the next write creates it
      return;
    }
    const w = writerOf(cm);
    if (w === this.writer) {
      // A write of this writer's landed, its answer lost: the claim holds.
      this.#claimed = true;
      this.#rv = cm.metadata?.resourceVersion;
      return;
    }
    // Before its claim lands, this writer claims over what it finds (a run
    // that wrote between its read and its claim started before it did), but
    // after a claim that may have landed, only over what it saw before.
    if (!this.#claimed && (!this.#uncertain || this.#seen.has(w))) {
      if (!this.#uncertain) this.#seen.add(w);
      this.#rv = cm.metadata?.resourceVersion;
      return;
    }
    this.#superseded = new SupersededError(
      `the run record ${this.#o.namespace}/${this.#path.split("/").pop()} is now kept by ` +
        `another run (${describe(cm)}); this run stops writing it`,
    );
  }
}
