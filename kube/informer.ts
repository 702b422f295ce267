/**
 * One reusable list+watch+cache, as client-go's informer: list, watch from the
 * list's resourceVersion, follow bookmarks, re-list on 410 Gone, reconnect
 * with backoff, and fall back to a LIST per poll interval while watches keep
 * failing, trying a watch again every so often. The Jobs of the fan-out and
 * the Nodes of the selection both go through it; callers read the cache and
 * react to upserts and deletes, they keep no list/watch loop of their own.
 *
 * @module
 */

import { ApiError, type ListResult, type WatchEvent } from "./client.ts";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { errorText } from "../base/errors.ts";

/** What an informer needs of an object: a name, a UID and a resourceVersion. */
export interface KubeObject {
  /** The object's metadata. */
  metadata?: { name?: string; uid?: string; resourceVersion?: string };
}

/** Where an informer reads its objects from. */
export interface InformerSource<T> {
  /**
   * Lists every object, with the resourceVersion to watch from; `signal`
   * aborts the LIST (the informer stops), so that a stop never waits for an
   * API server that does not answer.
   */
  list(signal?: AbortSignal): Promise<ListResult<T>>;
  /** Watches from `resourceVersion` until the server ends the watch or `signal` aborts. */
  watch(resourceVersion: string, signal: AbortSignal): AsyncIterable<WatchEvent<T>>;
}

/** A change of how the informer follows its objects, for the log. */
export interface InformerNote {
  /**
   * `relisted`: the watch's history expired (410) and a LIST replaced it;
   * `reconnected`: a watch broke and is opened again; `polling`: watches keep
   * failing, a LIST per poll interval until one opens; `watching`: a watch
   * opened again after polling.
   */
  state: "relisted" | "reconnected" | "polling" | "watching";
  /** What happened, e.g. the error. */
  detail: string;
}

/** How a cached object left the cache. */
export type Departure =
  /** A DELETED watch event, which carries the object's final state. */
  | "deleted"
  /** Absent from a re-list: it went while nobody watched, its final state unseen. */
  | "vanished";

/** Options of {@linkcode Informer}. */
export interface InformerOptions<T> {
  /** Where the objects come from. */
  source: InformerSource<T>;
  /** The clock. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** The LIST interval while polling. @default 5000 */
  pollIntervalMs?: number;
  /** Never watch; LIST every poll interval. */
  pollOnly?: boolean;
  /** While polling, how often a watch is tried again. @default 30000 */
  watchRetryMs?: number;
  /** What to keep of each object in the cache (e.g. `slimNode`). */
  keep?: (obj: T) => T;
  /** An object was added or changed; the cache already holds `obj`. */
  onUpsert?: (obj: T, old: T | undefined) => void;
  /** An object left; the cache no longer holds it. */
  onDelete?: (obj: T, how: Departure) => void;
  /** The way of following changed (re-list, reconnect, polling, watching). */
  onNote?: (note: InformerNote) => void;
}

/**
 * Whether `obj` is another object than `old` under the same name: a new UID.
 * An object without a UID (a test's) is taken for the same one.
 */
function replaced(old: KubeObject, obj: KubeObject): boolean {
  const [was, is] = [old.metadata?.uid, obj.metadata?.uid];
  return was !== undefined && is !== undefined && was !== is;
}

/** Watch failures in a row before the informer polls instead. */
const FAILURES_BEFORE_POLLING = 3;

/**
 * Whether a failed watch says the API server itself is restarting: it denies
 * what it allowed a moment ago because its RBAC caches have not synced yet
 * (`clusterrole … not found`, seen for tens of seconds after a restart on a
 * loaded machine). A LIST is denied the same way, so polling gains nothing
 * there and costs a LIST per interval: such a 403 backs off and reconnects,
 * and does not count towards the fallback to polling, which is for a path
 * that breaks watches while LISTs work.
 */
function restarting(e: unknown, watched: boolean): boolean {
  return watched && e instanceof ApiError && e.status === 403;
}

/**
 * Lists and watches one collection and keeps it in a cache keyed by name.
 *
 * @example
 * ```ts
 * const nodes = new Informer({ source: { list, watch } });
 * await nodes.start();
 * nodes.cache.get("node-1");
 * await nodes.stop();
 * ```
 */
export class Informer<T extends KubeObject> {
  /** The objects, by name. */
  readonly cache = new Map<string, T>();
  #o: InformerOptions<T> & { clock: Clock; pollIntervalMs: number; watchRetryMs: number };
  #rv = "";
  #polling: boolean;
  #forbidden = false;
  /** Whether a watch has answered in this run: a later 403 is then not the role's. */
  #watched = false;
  #nextWatchTry = 0;
  #heardAt = 0;
  #failingSince?: number;
  #lastError = "";
  #synced = false;
  #stop = new AbortController();
  #loop?: Promise<void>;
  /** LISTs begun so far: tells whether a LIST began before an object was made. */
  #listsBegun = 0;
  /** Objects {@linkcode assume}d that no LIST or watch event has shown yet: the LISTs begun when made. */
  #assumed = new Map<string, number>();

  /** @param opts the source, the callbacks and the timing */
  constructor(opts: InformerOptions<T>) {
    this.#o = { clock: SYSTEM_CLOCK, pollIntervalMs: 5_000, watchRetryMs: 30_000, ...opts };
    this.#polling = opts.pollOnly ?? false;
  }

  /** Whether the first LIST is in the cache. */
  get synced(): boolean {
    return this.#synced;
  }

  /** Whether the last LIST or watch answered (false while they fail). */
  get healthy(): boolean {
    return this.#failingSince === undefined;
  }

  /** Whether the informer lists per poll interval instead of watching. */
  get polling(): boolean {
    return this.#polling;
  }

  /** When (clock time) the API server last answered a LIST or a watch. */
  get heardAt(): number {
    return this.#heardAt;
  }

  /** The last LIST or watch error, "" when none. */
  get lastError(): string {
    return this.#lastError;
  }

  /**
   * Fills the cache from `initial` (a LIST the caller already made) or a LIST
   * of its own, then follows changes in the background until {@linkcode stop}.
   * No callback fires for the first fill.
   *
   * @throws {ApiError} when the first LIST fails
   */
  async start(initial?: ListResult<T>): Promise<void> {
    const begun = ++this.#listsBegun;
    this.#replace(initial ?? await this.#o.source.list(this.#stop.signal), false, begun);
    this.#heard();
    this.#synced = true;
    this.#loop = this.#run(this.#stop.signal);
  }

  /**
   * Puts an object the caller just made (a create's answer) in the cache
   * until a LIST or the watch shows it. A Job created while the informer
   * polls can finish and be collected by its TTL before the next LIST: no
   * LIST would ever hold it, and its departure would never be reported. A
   * LIST begun before the object was made does not count it gone.
   */
  assume(obj: T): void {
    const k = this.#keyOf(obj);
    if (this.cache.has(k)) return;
    this.cache.set(k, (this.#o.keep ?? ((o: T) => o))(obj));
    this.#assumed.set(k, this.#listsBegun);
  }

  /**
   * Drops the cached object named `name` until a LIST or a watch event shows
   * it again: the caller needs nothing more of it (the engine, of the Job of
   * a node whose outcome is final). Its later events still come, a DELETED
   * one with no cached object behind it; a re-list reports it as added.
   */
  forget(name: string): void {
    this.cache.delete(name);
    this.#assumed.delete(name);
  }

  /**
   * Stops following; the cache stays as it was. A LIST or watch in flight is
   * aborted, so this resolves at once even while the API server is silent.
   */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  #heard(): void {
    this.#heardAt = this.#o.clock.now();
    this.#failingSince = undefined;
    this.#lastError = "";
  }

  #failed(e: unknown): void {
    this.#failingSince ??= this.#o.clock.now();
    this.#lastError = errorText(e);
  }

  #keyOf(obj: T): string {
    return obj.metadata?.name ?? "";
  }

  /**
   * Replaces the cache with a LIST, the `begun`th; with `notify`, reports what
   * changed since.
   */
  #replace(list: ListResult<T>, notify: boolean, begun: number): void {
    this.#rv = list.resourceVersion;
    const keep = this.#o.keep ?? ((o: T) => o);
    const fresh = new Map(list.items.map((o) => [this.#keyOf(o), keep(o)]));
    // Made after this LIST began: its absence from it says nothing yet.
    const unseen = new Map(
      [...this.#assumed].filter(([k, at]) => at >= begun && !fresh.has(k) && this.cache.has(k)),
    );
    const kept = [...unseen.keys()].map((k) => [k, this.cache.get(k)!] as const);
    this.#assumed = unseen;
    const gone = [...this.cache].filter(([k]) => !fresh.has(k) && !unseen.has(k)).map(([, o]) => o);
    const changed: [T, T | undefined][] = [];
    for (const [k, obj] of fresh) {
      const old = this.cache.get(k);
      if (old && replaced(old, obj)) {
        // Deleted and made again under the same name while nobody watched:
        // client-go's consumers see a UID change as a delete and an add.
        gone.push(old);
        changed.push([obj, undefined]);
      } else if (old?.metadata?.resourceVersion !== obj.metadata?.resourceVersion) {
        changed.push([obj, old]);
      }
    }
    this.cache.clear();
    for (const [k, o] of [...fresh, ...kept]) this.cache.set(k, o);
    if (!notify) return;
    for (const o of gone) this.#o.onDelete?.(o, "vanished");
    for (const [o, old] of changed) this.#o.onUpsert?.(o, old);
  }

  async #relist(): Promise<boolean> {
    try {
      const begun = ++this.#listsBegun;
      this.#replace(await this.#o.source.list(this.#stop.signal), true, begun);
      this.#heard();
      return true;
    } catch (e) {
      this.#failed(e);
      return false;
    }
  }

  #apply(ev: WatchEvent<T>): void {
    const obj = ev.object as T;
    this.#rv = obj.metadata?.resourceVersion ?? this.#rv;
    if (ev.type === "BOOKMARK") return;
    const k = this.#keyOf(obj);
    this.#assumed.delete(k);
    if (ev.type === "DELETED") {
      this.cache.delete(k);
      this.#o.onDelete?.(obj, "deleted");
      return;
    }
    const old = this.cache.get(k);
    this.cache.set(k, (this.#o.keep ?? ((o: T) => o))(obj));
    if (old && replaced(old, obj)) {
      // A new object under a cached name: the old one went, its DELETED
      // event unseen (a watch resumed past it). A delete, then an add.
      this.#o.onDelete?.(old, "vanished");
      this.#o.onUpsert?.(obj, undefined);
      return;
    }
    this.#o.onUpsert?.(obj, old);
  }

  #watching(): void {
    this.#watched = true;
    if (!this.#polling) return;
    this.#polling = false;
    this.#o.onNote?.({ state: "watching", detail: "a watch opened again; polling stopped" });
  }

  async #run(signal: AbortSignal): Promise<void> {
    const clock = this.#o.clock;
    // Failures in a row, for the backoff; those that count towards polling.
    let failures = 0;
    let towardPolling = 0;
    while (!signal.aborted) {
      const now = clock.now();
      const pollForGood = this.#o.pollOnly || this.#forbidden;
      if (this.#polling && (pollForGood || now < this.#nextWatchTry)) {
        const wait = pollForGood
          ? this.#o.pollIntervalMs
          : Math.min(this.#o.pollIntervalMs, this.#nextWatchTry - now);
        await clock.sleep(wait, signal);
        if (signal.aborted) return;
        await this.#relist();
        continue;
      }
      try {
        let expired = false;
        for await (const ev of this.#o.source.watch(this.#rv, signal)) {
          this.#heard();
          failures = towardPolling = 0;
          this.#watching();
          if (ev.type === "ERROR") {
            // 410 Gone: the history we watched from was compacted. Only a
            // fresh LIST can tell what changed in between.
            this.#o.onNote?.({
              state: "relisted",
              detail: ev.object.message ?? `watch error ${ev.object.code}`,
            });
            expired = true;
            break;
          }
          this.#apply(ev);
        }
        if (signal.aborted) return;
        if (expired) {
          if (!(await this.#relist())) throw new Error(`cannot re-list: ${this.#lastError}`);
          continue;
        }
        // The server ended the watch (timeoutSeconds): it answered.
        this.#heard();
        failures = towardPolling = 0;
        this.#watching();
      } catch (e) {
        if (signal.aborted) return;
        this.#failed(e);
        failures++;
        if (!restarting(e, this.#watched)) towardPolling++;
        // A kube-apiserver that has just restarted denies requests until its
        // RBAC caches have synced: a 403 after watches worked passes, as
        // any other failure does.
        const forbidden = e instanceof ApiError && (e.status === 403 || e.status === 405) &&
          !this.#watched;
        if (forbidden) {
          // A watch the RBAC role does not allow will not heal by waiting.
          this.#forbidden = true;
          this.#polling = true;
          this.#o.onNote?.({
            state: "polling",
            detail: `${errorText(e)}; listing every ${this.#o.pollIntervalMs / 1000} s instead`,
          });
          continue;
        }
        if (this.#polling) {
          this.#nextWatchTry = clock.now() + this.#o.watchRetryMs;
          continue;
        }
        if (towardPolling >= FAILURES_BEFORE_POLLING) {
          this.#polling = true;
          this.#nextWatchTry = clock.now() + this.#o.watchRetryMs;
          this.#o.onNote?.({
            state: "polling",
            detail: `${errorText(e)}; listing every ${this.#o.pollIntervalMs / 1000} s ` +
              `and trying a watch every ${this.#o.watchRetryMs / 1000} s`,
          });
          continue;
        }
        this.#o.onNote?.({ state: "reconnected", detail: errorText(e) });
        // Resume from the last resourceVersion, as client-go does: a LIST
        // per reconnect would cost a full read of the collection each time
        // an API server restarts; a history too old comes back as 410.
        await clock.sleep(Math.min(1000 * 2 ** failures, 10_000), signal);
      }
    }
  }
}
