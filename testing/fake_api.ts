/**
 * **testing/** owns the stand-ins for unit tests: this in-memory API and the
 * loopback HTTP server. Only tests import it; end-to-end suites use the real
 * control plane instead.
 *
 * An in-memory stand-in for the Job API and a virtual clock, for unit tests of
 * the fan-out engine. It keeps Jobs, resourceVersions and a watch stream the
 * way the API server does, closely enough for the engine's decisions; the
 * end-to-end suite proves the same behaviour on a real API server.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { ApiError, type ListResult, type WatchEvent } from "../kube/client.ts";
import type { JobApi } from "../engine/fanout.ts";
import type { Clock } from "../base/clock.ts";

interface Timer {
  at: number;
  resolve: () => void;
}

/** A clock whose time moves only when the test advances it. */
export class FakeClock implements Clock {
  #now = 0;
  #timers: Timer[] = [];

  /** The virtual time in ms. */
  now(): number {
    return this.#now;
  }

  /** Resolves when the virtual time passes `ms` from now, or `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer: Timer = { at: this.#now + ms, resolve };
      this.#timers.push(timer);
      signal?.addEventListener("abort", () => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        resolve();
      }, { once: true });
    });
  }

  /** Moves to the earliest pending timer and fires every timer due; false when none is pending. */
  advance(): boolean {
    if (this.#timers.length === 0) return false;
    this.#now = Math.max(this.#now, Math.min(...this.#timers.map((t) => t.at)));
    const due = this.#timers.filter((t) => t.at <= this.#now);
    this.#timers = this.#timers.filter((t) => t.at > this.#now);
    for (const t of due) t.resolve();
    return true;
  }
}

/** Lets every ready promise and I/O callback run. */
export function settle(): Promise<void> {
  return new Promise((r) => setTimeout(r, 0));
}

/**
 * Runs `work` to completion, advancing `clock` whenever nothing else can
 * move. Throws when the work is stuck with no timer left.
 */
export async function runOn<T>(clock: FakeClock, work: Promise<T>, maxSteps = 100_000): Promise<T> {
  let done = false;
  let result: T | undefined;
  let error: unknown;
  work.then((r) => {
    done = true;
    result = r;
  }, (e) => {
    done = true;
    error = e;
  });
  for (let step = 0; step < maxSteps; step++) {
    await settle();
    if (done) break;
    if (!clock.advance()) {
      await settle();
      if (!done) throw new Error("stuck: the work waits on nothing the clock can fire");
    }
  }
  if (error) throw error;
  return result as T;
}

type Listener = (ev: WatchEvent<V1Job>) => void;

/** How long a watch of the fake lasts, as `timeoutSeconds` of the dispatcher's watches. */
const WATCH_TIMEOUT_MS = 30_000;

/** What a test can make the fake do. */
export interface FakeOptions {
  /** The owner label selector as key and value. */
  ownerLabel: [string, string];
  /** The clock that times Job runs. */
  clock: FakeClock;
  /** How long a created Job runs before it finishes, in virtual ms; undefined: until the test finishes it. */
  runMs?: number;
  /** Nodes whose Jobs fail. */
  failing?: Set<string>;
  /** Watches are refused with 403. */
  watchForbidden?: boolean;
  /** How long the Job of a node runs, overriding `runMs`. */
  runMsOf?: (node: string) => number;
  /** A finished Job is deleted at once, as `ttlSecondsAfterFinished: 0` does. */
  ttlZero?: boolean;
  /** A Job's failure domain, for {@linkcode FakeJobApi.maxActivePerDomain}. */
  domainOf?: (node: string) => string;
}

/** An in-memory Job API with watch semantics. */
export class FakeJobApi implements JobApi {
  /** The Jobs, by name. */
  jobs = new Map<string, V1Job>();
  /** Calls made, by method. */
  calls: Record<string, number> = {};
  /** Most Jobs active at once (created, not finished, not deleted). */
  maxActive = 0;
  /** Most Jobs active at once in any one domain. */
  maxActivePerDomain = 0;
  /** Names in the order they were created. */
  created: string[] = [];
  /** Virtual time of each create. */
  createdAt: number[] = [];
  /** The pods of a Job, for stall reports; unset: the fake has no pods API. */
  listPods?: (jobName: string) => Promise<V1Pod[]>;
  /** A hook that may throw to fail a list. */
  failLists = false;
  /** The API is unreachable: every call fails, every watch breaks. */
  down = false;
  /** Creates are refused with this 5xx message (a failing admission webhook); reads work. */
  refuseCreates?: string;
  /**
   * This many of the next creates are stored, and then their answer is lost
   * (a 504, marked uncertain, as kube/client.ts throws it).
   */
  loseCreateAnswers = 0;
  #rv = 1;
  /** Every event sent, for watches from an older resourceVersion, as the server keeps them. */
  #history: { rv: number; ev: WatchEvent<V1Job> }[] = [];
  /** Watches from below this resourceVersion get 410 Gone: their history is compacted. */
  #compactedBelow = 0;
  #uid = 0;
  #listeners = new Set<Listener>();
  #o: FakeOptions;

  /** @param opts what the fake does */
  constructor(opts: FakeOptions) {
    this.#o = opts;
  }

  #count(method: string): void {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
  }

  #emit(type: WatchEvent<V1Job>["type"], job: V1Job, silent = false): void {
    job.metadata!.resourceVersion = String(++this.#rv);
    if (silent) return;
    this.#history.push({ rv: this.#rv, ev: { type, object: structuredClone(job) } });
    for (const l of this.#listeners) l({ type, object: structuredClone(job) });
  }

  #unreachable(verb: string): ApiError {
    return new ApiError({
      status: 0,
      reason: "Unreachable",
      verb,
      resource: "jobs",
      message: "connection refused",
    });
  }

  /** Breaks every watch with an error, as a dropped connection does. */
  breakWatches(): void {
    for (const l of this.#listeners) l({ type: "BREAK" as never, object: {} as never });
  }

  #active(): number {
    return [...this.jobs.values()].filter((j) => !j.status?.conditions?.length).length;
  }

  /** Adds a Job as if someone else had created it. */
  seed(job: V1Job, status?: "Complete" | "Failed"): V1Job {
    const copy = structuredClone(job);
    copy.metadata!.uid ??= `seed-${++this.#uid}`;
    if (status) copy.status = { conditions: [{ type: status, status: "True", reason: status }] };
    this.jobs.set(copy.metadata!.name!, copy);
    this.#emit("ADDED", copy);
    return copy;
  }

  /** Finishes a Job; `silent` changes it without a watch event, as if the event was compacted away. */
  finish(name: string, type: "Complete" | "Failed", silent = false): void {
    const job = this.jobs.get(name);
    const terminal = (c: { type: string }) => c.type === "Complete" || c.type === "Failed";
    if (!job || job.status?.conditions?.some(terminal)) return;
    job.status = {
      conditions: [...job.status?.conditions ?? [], {
        type,
        status: "True",
        reason: type === "Failed" ? "BackoffLimitExceeded" : undefined,
        message: type === "Failed" ? "Job has reached the specified backoff limit" : undefined,
      }],
    };
    this.#emit("MODIFIED", job, silent);
    if (this.#o.ttlZero) this.remove(name);
  }

  /** Counts one more failed pod of a running Job, as the Job controller does before a retry. */
  podFailed(name: string): void {
    const job = this.jobs.get(name);
    if (!job) return;
    job.status = { ...job.status, failed: (job.status?.failed ?? 0) + 1 };
    this.#emit("MODIFIED", job);
  }

  /** Sets `SuccessCriteriaMet`, as the Job controller does before `Complete`. */
  meetCriteria(name: string): void {
    const job = this.jobs.get(name);
    if (!job) return;
    job.status = { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] };
    this.#emit("MODIFIED", job);
  }

  /**
   * The conditions each removed Job had when it went, by name (the first
   * removal): a Job gone before `Complete` or `Failed` was deleted unfinished.
   */
  removedWith = new Map<string, string[]>();

  /** Deletes a Job at once, as `kubectl delete` by someone else would. */
  remove(name: string): void {
    const job = this.jobs.get(name);
    if (!job) return;
    if (!this.removedWith.has(name)) {
      this.removedWith.set(name, (job.status?.conditions ?? []).map((c) => c.type));
    }
    this.jobs.delete(name);
    this.#emit("DELETED", job);
  }

  /**
   * Deletes a Job and creates another under its name (a new UID), with no
   * watch event for either, as when both happen while no watch is open: only
   * a LIST shows it, as the same name with another UID.
   */
  replaceSilently(name: string): V1Job | undefined {
    const job = this.jobs.get(name);
    if (!job) return undefined;
    const next = structuredClone(job);
    next.metadata!.uid = `uid-${++this.#uid}`;
    delete next.status;
    this.jobs.set(name, next);
    this.#emit("DELETED", job, true);
    this.#emit("ADDED", next, true);
    return next;
  }

  /** Sends an ERROR event (410 Gone) to every watch; its history is compacted. */
  expireWatches(): void {
    this.#compactedBelow = this.#rv;
    for (const l of this.#listeners) {
      l({
        type: "ERROR",
        object: { code: 410, reason: "Expired", message: "too old resource version" } as never,
      });
    }
  }

  listJobs(): Promise<ListResult<V1Job>> {
    this.#count("list");
    if (this.down) return Promise.reject(this.#unreachable("list"));
    if (this.failLists) {
      return Promise.reject(
        new ApiError({
          status: 0,
          reason: "Unreachable",
          verb: "list",
          resource: "jobs",
          message: "connection refused",
        }),
      );
    }
    const [k, v] = this.#o.ownerLabel;
    const items = [...this.jobs.values()].filter((j) => j.metadata?.labels?.[k] === v);
    return Promise.resolve({ items: structuredClone(items), resourceVersion: String(this.#rv) });
  }

  async *watchJobs(rv: string, signal: AbortSignal): AsyncGenerator<WatchEvent<V1Job>> {
    this.#count("watch");
    if (this.#o.watchForbidden) {
      throw new ApiError({
        status: 403,
        reason: "Forbidden",
        verb: "watch",
        resource: "jobs",
        message: "forbidden",
      });
    }
    if (this.down) throw this.#unreachable("watch");
    const [k, v] = this.#o.ownerLabel;
    const from = Number(rv);
    const queue: WatchEvent<V1Job>[] = from < this.#compactedBelow
      ? [{
        type: "ERROR",
        object: { code: 410, reason: "Expired", message: "too old resource version" } as never,
      }]
      : this.#history.filter((h) => h.rv > from && h.ev.object.metadata?.labels?.[k] === v)
        .map((h) => structuredClone(h.ev));
    let wake = () => {};
    const listener: Listener = (ev) => {
      const passes = ev.type === "ERROR" || (ev.type as string) === "BREAK";
      if (!passes && ev.object.metadata?.labels?.[k] !== v) return;
      queue.push(ev);
      wake();
    };
    this.#listeners.add(listener);
    const onAbort = () => wake();
    signal.addEventListener("abort", onAbort);
    // The API server ends every watch after its timeoutSeconds; so does the fake.
    const ends = new AbortController();
    let ended = false;
    this.#o.clock.sleep(WATCH_TIMEOUT_MS, ends.signal).then(() => {
      ended = true;
      wake();
    });
    try {
      while (!signal.aborted && !ended) {
        if (queue.length === 0) await new Promise<void>((r) => (wake = r));
        while (queue.length) {
          const ev = queue.shift()!;
          if ((ev.type as string) === "BREAK" || this.down) throw this.#unreachable("watch");
          yield ev;
          if (ev.type === "ERROR") return;
        }
      }
    } finally {
      ends.abort();
      this.#listeners.delete(listener);
      signal.removeEventListener("abort", onAbort);
    }
  }

  getJob(name: string): Promise<V1Job | undefined> {
    this.#count("get");
    if (this.down) return Promise.reject(this.#unreachable("get"));
    const job = this.jobs.get(name);
    return Promise.resolve(job && structuredClone(job));
  }

  createJob(job: V1Job): Promise<V1Job> {
    this.#count("create");
    if (this.down) return Promise.reject(this.#unreachable("create"));
    if (this.refuseCreates) {
      const refused = new ApiError({
        status: 500,
        reason: "InternalError",
        verb: "create",
        resource: "jobs",
        message: this.refuseCreates,
      });
      return Promise.reject(refused);
    }
    const name = job.metadata!.name!;
    if (this.jobs.has(name)) {
      return Promise.reject(
        new ApiError({
          status: 409,
          reason: "AlreadyExists",
          verb: "create",
          resource: "jobs",
          message: `jobs "${name}" already exists`,
        }),
      );
    }
    const copy = structuredClone(job);
    copy.metadata!.uid = `uid-${++this.#uid}`;
    this.jobs.set(name, copy);
    this.created.push(name);
    this.createdAt.push(this.#o.clock.now());
    this.maxActive = Math.max(this.maxActive, this.#active());
    if (this.#o.domainOf) {
      const counts = new Map<string, number>();
      for (const j of this.jobs.values()) {
        if (j.status?.conditions?.length) continue;
        const d = this.#o.domainOf(j.spec?.template.spec?.nodeName ?? "");
        counts.set(d, (counts.get(d) ?? 0) + 1);
      }
      this.maxActivePerDomain = Math.max(this.maxActivePerDomain, ...counts.values());
    }
    this.#emit("ADDED", copy);
    const node = copy.spec?.template.spec?.nodeName ?? "";
    const runMs = this.#o.runMsOf?.(node) ?? this.#o.runMs;
    if (runMs !== undefined) {
      const uid = copy.metadata!.uid;
      this.#o.clock.sleep(runMs).then(() => {
        if (this.jobs.get(name)?.metadata?.uid !== uid) return;
        this.finish(name, this.#o.failing?.has(node) ? "Failed" : "Complete");
      });
    }
    if (this.loseCreateAnswers > 0) {
      this.loseCreateAnswers--;
      const lost = new ApiError({
        status: 504,
        reason: "Timeout",
        verb: "create",
        resource: "jobs",
        message: "the server was unable to return a response in the time allotted",
      });
      lost.uncertain = true;
      return Promise.reject(lost);
    }
    return Promise.resolve(structuredClone(copy));
  }

  deleteJob(name: string, uid: string): Promise<void> {
    this.#count("delete");
    if (this.down) return Promise.reject(this.#unreachable("delete"));
    const job = this.jobs.get(name);
    if (!job || job.metadata?.uid !== uid) return Promise.resolve();
    // Foreground deletion: marked first, gone once its pods are, a moment later.
    job.metadata!.deletionTimestamp = new Date(0);
    this.#emit("MODIFIED", job);
    // A finalizer holds it until someone removes the finalizer.
    if (job.metadata?.finalizers?.length) return Promise.resolve();
    this.#o.clock.sleep(100).then(() => this.remove(name));
    return Promise.resolve();
  }
}
