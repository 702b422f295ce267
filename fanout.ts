/**
 * The fan-out engine: keeps at most `parallelism` per-node Jobs in flight and
 * refills a slot as soon as a watch event says a Job finished. It talks to the
 * cluster only through {@linkcode JobApi}, so it runs unchanged against the
 * real API layer and against the in-memory fake of the unit tests.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { classifyJob, interpretStatus, type NodeFacts, type RunIdentity } from "./job.ts";
import { podFailure, stallReason } from "./pods.ts";
import { ApiError, type ListResult, type WatchEvent } from "./kube.ts";
import { budgetExceeded, canaryVerdict, nextStartable } from "./safety.ts";

/** The Job operations the engine needs, scoped to the run's namespace and owner label. */
export interface JobApi {
  /** Lists the Jobs that carry this dispatcher's owner label. */
  listJobs(): Promise<ListResult<V1Job>>;
  /** Watches those Jobs from `resourceVersion` until the server ends the watch. */
  watchJobs(resourceVersion: string, signal: AbortSignal): AsyncIterable<WatchEvent<V1Job>>;
  /** Reads one Job by name, whatever its labels; undefined when it does not exist. */
  getJob(name: string): Promise<V1Job | undefined>;
  /** Creates a Job; throws an {@linkcode ApiError} with status 409 when the name is taken. */
  createJob(job: V1Job): Promise<V1Job>;
  /** Deletes a Job in the foreground, only if it still has `uid`; a missing Job is fine. */
  deleteJob(name: string, uid: string): Promise<void>;
  /** Lists the pods of a Job, to say why it stalls. */
  listPods?(jobName: string): Promise<V1Pod[]>;
}

/** Time, injected so that tests run on a fake clock. */
export interface Clock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Resolves after `ms`, or early when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real clock. */
export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    }),
};

/** One node to dispatch: its facts, its Job's name, and how to make the Job. */
export interface Target {
  /** The node. */
  node: NodeFacts;
  /** The name of the node's Job. */
  name: string;
  /**
   * Makes the node's Job (`instantiateJob`). Called when the Job is created,
   * not before: a fleet of 10,000 would otherwise hold 10,000 Jobs in memory
   * for the whole run.
   */
  job(): V1Job;
}

/** What the engine did, one line each. */
export type DispatchEvent =
  | { kind: "created" | "adopted" | "replaced"; node: string; job: string }
  | { kind: "succeeded"; node: string; job: string; counted?: boolean }
  | { kind: "failed"; node: string; job: string; reason: string; counted?: boolean }
  | { kind: "deleting"; job: string; why: string }
  | { kind: "watch"; state: "relisted" | "polling" | "reconnected"; detail: string }
  | { kind: "stopped"; reason: string }
  | { kind: "stalled"; node: string; job: string; reason: string; seconds: number }
  | { kind: "notice"; message: string };

/** Counts at one moment of the rollout. */
export interface Progress {
  /** Nodes whose Job succeeded. */
  succeeded: number;
  /** Nodes that failed. */
  failed: number;
  /** Jobs in flight. */
  inFlight: number;
  /** Nodes not started yet. */
  queued: number;
  /** All nodes of the run. */
  total: number;
  /** Time since the dispatch began, in ms. */
  elapsedMs: number;
}

/** Where the engine reports to; `log.ts` implements it. */
export interface Reporter {
  /** One thing happened. */
  event(e: DispatchEvent): void;
  /** The counts, at least every progress interval. */
  progress(p: Progress): void;
}

/** The final state of one node. */
export interface NodeResult {
  /** The node. */
  node: string;
  /** Its Job's name. */
  job: string;
  /** `notStarted` and `inFlight` only occur when the run was stopped. */
  outcome: "succeeded" | "failed" | "notStarted" | "inFlight";
  /** Why it failed. */
  reason?: string;
  /** When its Job started (ms since the epoch on the real clock). */
  startedAt?: number;
  /** When it finished. */
  finishedAt?: number;
  /** Pods its Job ran (failed + succeeded), when known. */
  attempts?: number;
}

/** Options of {@linkcode dispatch}. */
export interface FanoutOptions {
  /** The nodes, in dispatch order. */
  targets: Target[];
  /** Most Jobs in flight at once. */
  parallelism: number;
  /** The run's identity, to tell our Jobs from others'. */
  run: RunIdentity;
  /** The Job API. */
  api: JobApi;
  /** Where events go. */
  reporter: Reporter;
  /** Aborts on SIGINT/SIGTERM: nothing more is created. */
  signal: AbortSignal;
  /** The clock. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** The LIST interval when a watch is not possible. @default 5000 */
  pollIntervalMs?: number;
  /** How often progress is reported. @default 10000 */
  progressIntervalMs?: number;
  /** How long the Jobs may be unreadable before their nodes fail. @default 300000 */
  lostBudgetMs?: number;
  /** Checked just before a node's Job is created; a string fails the node with that reason. */
  recheck?: (target: Target) => Promise<string | undefined>;
  /**
   * Work after a node's Job succeeded (labels, taints), holding the node's
   * slot until it ends; a string fails the node with that reason. It also
   * runs for successes counted from an earlier run, whose work a crash may
   * have cut short. When the run is stopped meanwhile, the node is in flight.
   */
  afterSuccess?: (target: Target) => Promise<string | undefined>;
  /** Failed nodes tolerated; one more stops the rollout. Default: no budget. */
  maxFailures?: number;
  /** Run the first `canary` targets first (at most that many at once); go on only if all succeed. */
  canary?: number;
  /** The failure domain of a target, for `maxPerDomain`. */
  domain?: (target: Target) => string;
  /** Most Jobs in flight per domain, in addition to `parallelism`. */
  maxPerDomain?: number;
  /** A node whose Job has not finished this long after it started fails with reason timeout. */
  nodeTimeoutMs?: number;
  /** Delete a timed-out Job in the foreground instead of leaving it running. */
  deleteTimedOut?: boolean;
  /** How long a Job may run with a Pending pod before it is reported as stalled. @default 120000 */
  stallAfterMs?: number;
  /** How often a stall is reported again. @default 300000 */
  stallRepeatMs?: number;
  /** Never watch; LIST every poll interval (a polling tool's behaviour, for comparison). */
  pollOnly?: boolean;
  /** Also report progress whenever the counts change (a live terminal line). */
  progressOnChange?: boolean;
}

/** What {@linkcode dispatch} returns. */
export interface DispatchReport {
  /** Each node's result, in target order. */
  results: NodeResult[];
  /** Why the rollout stopped early (failure budget, canary), if it did. */
  stoppedBy?: string;
}

/** How many watch failures in a row make the engine give up watching and poll. */
const WATCH_FAILURES_BEFORE_POLLING = 3;

function nameOf(job: V1Job): string {
  return job.metadata!.name!;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Runs every target's Job with at most `parallelism` in flight and returns
 * each node's result. Per-node failures never stop the others. When the run
 * has an owner, Jobs of earlier owners are deleted first and no slot opens
 * until they are gone, since their pods would exceed `parallelism`.
 */
export async function dispatch(opts: FanoutOptions): Promise<DispatchReport> {
  return await new Fanout(opts).run();
}

type Optional =
  | "recheck"
  | "afterSuccess"
  | "maxFailures"
  | "canary"
  | "domain"
  | "maxPerDomain"
  | "nodeTimeoutMs"
  | "deleteTimedOut"
  | "stallAfterMs"
  | "stallRepeatMs"
  | "pollOnly"
  | "progressOnChange";

class Fanout {
  #o: Required<Omit<FanoutOptions, Optional>> & Pick<FanoutOptions, Optional>;
  /** When each Job in flight started (clock time), for the node timeout. */
  #startedAt = new Map<string, number>();
  /** Names of the canary targets; empty once the canary passed. */
  #canary = new Set<string>();
  #canaryOutcomes = new Map<string, "succeeded" | "failed">();
  #failed = 0;
  #stoppedBy?: string;
  /** When each Job was last checked for a stall. */
  #stallCheckedAt = new Map<string, number>();
  #podsUnreadable = false;
  /** Start calls under way: a create sent before a stop still makes a Job. */
  #inProgress = new Set<Promise<void>>();
  /** Failed Jobs whose pods are being read for the reason. */
  #explaining = new Set<string>();
  #began = 0;
  #byName = new Map<string, Target>();
  #pending: Target[] = [];
  /** Jobs in flight, by name, with the UID we created or adopted. */
  #active = new Map<string, string>();
  /** Targets whose create call has not returned yet. */
  #starting = new Set<string>();
  /** Succeeded Jobs whose post-success work is under way; each holds its slot. */
  #finishing = new Set<string>();
  /** Jobs seen by the watch while their create call was under way. */
  #early = new Map<string, V1Job>();
  /** Stale Jobs being deleted, by name; the node waits for the name to free. */
  #deleting = new Map<string, string>();
  #results = new Map<string, NodeResult>();
  #replaced = new Set<string>();
  #wake: () => void = () => {};
  #woken = false;
  #resourceVersion = "";
  #polling: boolean;
  #lostSince?: number;
  #lostError = "";

  constructor(opts: FanoutOptions) {
    this.#o = {
      clock: SYSTEM_CLOCK,
      pollIntervalMs: 5_000,
      progressIntervalMs: 10_000,
      lostBudgetMs: 300_000,
      recheck: undefined,
      ...opts,
    };
    this.#polling = opts.pollOnly ?? false;
    for (const t of opts.targets) this.#byName.set(t.name, t);
    for (const t of opts.targets.slice(0, opts.canary ?? 0)) this.#canary.add(t.name);
  }

  #stop(reason: string): void {
    if (this.#stoppedBy) return;
    this.#stoppedBy = reason;
    this.#o.reporter.event({ kind: "stopped", reason });
  }

  #notify(): void {
    this.#woken = true;
    this.#wake();
  }

  #finish(
    name: string,
    outcome: NodeResult["outcome"],
    reason?: string,
    counted = false,
    job?: V1Job,
    pods?: number,
  ): void {
    const t = this.#byName.get(name)!;
    const started = this.#startedAt.get(name) ?? timestamp(job?.metadata?.creationTimestamp);
    this.#active.delete(name);
    this.#startedAt.delete(name);
    if (this.#results.has(t.node.name)) return;
    const st = job?.status;
    this.#results.set(t.node.name, {
      node: t.node.name,
      job: name,
      outcome,
      reason,
      startedAt: started,
      finishedAt: counted ? timestamp(st?.completionTime) ?? started : this.#o.clock.now(),
      // The Job's counters can lag its terminal condition; its pods cannot.
      attempts: Math.max(pods ?? 0, (st?.failed ?? 0) + (st?.succeeded ?? 0)) || undefined,
    });
    if (outcome === "failed") this.#failed++;
    if (this.#canary.has(name) && (outcome === "succeeded" || outcome === "failed")) {
      this.#canaryOutcomes.set(t.node.name, outcome);
      const verdict = canaryVerdict(this.#canaryOutcomes);
      if (verdict) this.#stop(verdict);
      else if (this.#canaryOutcomes.size === this.#canary.size) this.#canary.clear();
    }
    if (budgetExceeded(this.#failed, this.#o.maxFailures)) {
      this.#stop(
        `the failure budget of ${this.#o.maxFailures} was exceeded (${this.#failed} failed)`,
      );
    }
    if (outcome === "succeeded") {
      this.#o.reporter.event({ kind: "succeeded", node: t.node.name, job: name, counted });
    } else if (outcome === "failed") {
      this.#o.reporter.event({
        kind: "failed",
        node: t.node.name,
        job: name,
        reason: reason!,
        counted,
      });
    }
    this.#notify();
  }

  /** Takes a Job that is ours for this run: counts it when finished, else holds its slot. */
  #adopt(job: V1Job, counted: boolean): void {
    const name = nameOf(job);
    const status = interpretStatus(job);
    if (status.phase === "active") {
      this.#active.set(name, job.metadata!.uid!);
      this.#startedAt.set(name, this.#o.clock.now());
      const node = this.#byName.get(name)!.node.name;
      this.#o.reporter.event({ kind: "adopted", node, job: name });
    } else {
      this.#conclude(job, counted);
    }
  }

  /**
   * Records a finished Job. A failure is explained from its pods while they
   * exist (the failing container, exit code, termination message), since the
   * Job's own condition only says BackoffLimitExceeded; the slot frees at once.
   */
  #conclude(job: V1Job, counted: boolean): void {
    const name = nameOf(job);
    const status = interpretStatus(job);
    if (status.phase === "active") return;
    if (status.phase === "succeeded") {
      if (this.#o.afterSuccess) return this.#afterSuccess(job, counted);
      return this.#finish(name, "succeeded", undefined, counted, job);
    }
    const listPods = this.#o.api.listPods;
    if (!listPods || this.#podsUnreadable) {
      return this.#finish(name, "failed", reasonOf(status), counted, job);
    }
    this.#active.delete(name);
    this.#explaining.add(name);
    listPods.call(this.#o.api, name).then((pods) => ({ why: podFailure(pods), pods }), (e) => {
      this.#podsForbidden(e);
      return { why: undefined, pods: [] };
    }).then(({ why, pods }) => {
      this.#explaining.delete(name);
      const reason = why ? `${why} [${status.reason}]` : reasonOf(status);
      this.#finish(name, "failed", reason, counted, job, pods.length);
    });
  }

  /**
   * Runs the post-success work off to the side: the slot stays taken until it
   * ends, so one slow node holds one slot and never stalls the others.
   */
  #afterSuccess(job: V1Job, counted: boolean): void {
    const name = nameOf(job);
    this.#active.delete(name);
    this.#finishing.add(name);
    const work = this.#o.afterSuccess!(this.#byName.get(name)!)
      .catch((e) => `post-success work failed: ${errorText(e)}`)
      .then((why) => {
        // Stopped midway: the node is neither done nor failed, still in flight.
        if (why && this.#o.signal.aborted) return;
        this.#finishing.delete(name);
        this.#finish(name, why ? "failed" : "succeeded", why, counted, job);
      })
      .finally(() => this.#inProgress.delete(work));
    this.#inProgress.add(work);
  }

  #podsForbidden(e: unknown): void {
    if (e instanceof ApiError && e.status === 403 && !this.#podsUnreadable) {
      this.#podsUnreadable = true;
      this.#o.reporter.event({
        kind: "notice",
        message: `cannot list pods (${errorText(e)}); failures and stalls are not explained`,
      });
    }
  }

  async #deleteStale(job: V1Job, why: string): Promise<void> {
    const name = nameOf(job);
    const uid = job.metadata!.uid!;
    this.#deleting.set(name, uid);
    this.#o.reporter.event({ kind: "deleting", job: name, why });
    if (job.metadata?.deletionTimestamp) return;
    try {
      await this.#o.api.deleteJob(name, uid);
    } catch (e) {
      this.#deleting.delete(name);
      const t = this.#byName.get(name);
      if (t) this.#finish(name, "failed", `cannot delete stale Job ${name}: ${errorText(e)}`);
    }
  }

  async #initialList(): Promise<void> {
    const { items, resourceVersion } = await this.#o.api.listJobs();
    this.#resourceVersion = resourceVersion;
    const seen = new Set<string>();
    const deletions: Promise<void>[] = [];
    for (const job of items) {
      const name = nameOf(job);
      const target = this.#byName.get(name);
      const disposition = classifyJob(job, this.#o.run, target?.node.uid);
      if (disposition === "stale") {
        // Leftovers of an earlier owner go even when their node is no longer
        // selected: their pods would count against nobody's parallelism.
        if (target || this.#o.run.owner) {
          deletions.push(
            this.#deleteStale(
              job,
              target ? "made for an earlier run" : "leftover of an earlier run",
            ),
          );
        }
        if (target) this.#replaced.add(name);
      } else if (disposition === "current" && target) {
        seen.add(name);
        this.#adopt(job, true);
      }
    }
    await Promise.all(deletions);
    for (const t of this.#o.targets) {
      if (!seen.has(t.name)) this.#pending.push(t);
    }
  }

  #observe(job: V1Job, deleted: boolean): void {
    const name = nameOf(job);
    const uid = job.metadata?.uid;
    if (deleted && this.#deleting.get(name) === uid) {
      this.#deleting.delete(name);
      this.#notify();
    }
    if (this.#starting.has(name)) {
      this.#early.set(
        name,
        deleted ? { ...job, status: { conditions: [{ type: "Deleted", status: "True" }] } } : job,
      );
      return;
    }
    if (this.#active.get(name) !== uid) return;
    if (deleted) {
      this.#finish(name, "failed", "its Job was deleted before it finished");
      return;
    }
    this.#conclude(job, false);
  }

  /** Brings the state in line with a fresh LIST, after a lost watch or in poll mode. */
  #reconcile(list: ListResult<V1Job>): void {
    this.#resourceVersion = list.resourceVersion;
    const byName = new Map(list.items.map((j) => [nameOf(j), j]));
    for (const [name, uid] of [...this.#deleting]) {
      if (byName.get(name)?.metadata?.uid !== uid) this.#deleting.delete(name);
    }
    for (const [name, uid] of [...this.#active]) {
      const job = byName.get(name);
      if (!job || job.metadata?.uid !== uid) this.#observe({ metadata: { name, uid } }, true);
      else this.#observe(job, false);
    }
    this.#notify();
  }

  async #start(t: Target): Promise<void> {
    const name = t.name;
    this.#starting.add(name);
    try {
      let why: string | undefined;
      try {
        why = await this.#o.recheck?.(t);
      } catch (e) {
        // The API layer already retried within its budget; the node fails with
        // the reason and no Job, so a re-run picks it up.
        why = `cannot re-read node ${t.node.name}: ${errorText(e)}`;
      }
      if (why) return this.#finish(name, "failed", why);
      if (this.#o.signal.aborted || this.#stoppedBy) {
        this.#pending.unshift(t);
        return;
      }
      let created: V1Job;
      try {
        created = await this.#o.api.createJob(t.job());
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) return await this.#resolveConflict(t);
        return this.#finish(name, "failed", `cannot create Job ${name}: ${errorText(e)}`);
      }
      this.#active.set(name, created.metadata!.uid!);
      this.#startedAt.set(name, this.#o.clock.now());
      const kind = this.#replaced.has(name) ? "replaced" : "created";
      this.#o.reporter.event({ kind, node: t.node.name, job: name });
    } finally {
      this.#starting.delete(name);
      const early = this.#early.get(name);
      this.#early.delete(name);
      if (early) {
        const deleted = early.status?.conditions?.[0]?.type === "Deleted";
        this.#observe(early, deleted);
      }
      this.#notify();
    }
  }

  /** A Job of the node's name already exists: ours, stale, or someone else's. */
  async #resolveConflict(t: Target): Promise<void> {
    const name = t.name;
    const existing = await this.#o.api.getJob(name).catch((e) => e as Error);
    if (existing instanceof Error) {
      return this.#finish(name, "failed", `cannot read existing Job ${name}: ${existing.message}`);
    }
    if (!existing) {
      // Deleted between our create and our read: try again in the next slot.
      this.#pending.unshift(t);
      return;
    }
    switch (classifyJob(existing, this.#o.run, t.node.uid)) {
      case "notOurs":
        return this.#finish(
          name,
          "failed",
          `a Job named ${name} exists without label ${this.#o.run.keys.owner}; ` +
            "it is not ours and is left alone: delete it or choose another --name-prefix",
        );
      case "current":
        return this.#adopt(existing, false);
      case "stale":
        this.#replaced.add(name);
        this.#pending.unshift(t);
        await this.#deleteStale(existing, "made for an earlier run");
    }
  }

  #mayStart(t: Target): boolean {
    const name = t.name;
    // During the canary only canary nodes start.
    return !this.#deleting.has(name) && (this.#canary.size === 0 || this.#canary.has(name));
  }

  /** Jobs in flight per failure domain. */
  #inFlightByDomain(): Map<string, number> {
    const counts = new Map<string, number>();
    const domain = this.#o.domain;
    if (!domain) return counts;
    for (const name of [...this.#active.keys(), ...this.#starting, ...this.#finishing]) {
      const d = domain(this.#byName.get(name)!);
      counts.set(d, (counts.get(d) ?? 0) + 1);
    }
    return counts;
  }

  #fill(): void {
    if (this.#o.signal.aborted || this.#stoppedBy) return;
    // A stale Job being deleted still has pods: with an owner set, no slot
    // opens until every one is gone, or the pods would exceed parallelism.
    if (this.#o.run.owner && this.#deleting.size > 0) return;
    const limit = this.#canary.size
      ? Math.min(this.#canary.size, this.#o.parallelism)
      : this.#o.parallelism;
    const domain = this.#o.domain ?? (() => "");
    while (this.#inFlight() < limit) {
      const candidates = this.#pending.filter((t) => this.#mayStart(t));
      const j = nextStartable(candidates, domain, this.#inFlightByDomain(), this.#o.maxPerDomain);
      if (j < 0) return;
      const i = this.#pending.indexOf(candidates[j]);
      const [t] = this.#pending.splice(i, 1);
      const started = this.#start(t).catch((e) => {
        // #start handles every API error itself; this is a last guard so that
        // no node is silently left out.
        this.#finish(t.name, "failed", `unexpected error: ${errorText(e)}`);
      }).finally(() => this.#inProgress.delete(started));
      this.#inProgress.add(started);
    }
  }

  /**
   * Reports Jobs whose pod is still Pending long after they started, with the
   * pod's own reason, instead of letting them look busy until a deadline.
   */
  #checkStalls(now: number): number {
    const listPods = this.#o.api.listPods;
    if (!listPods || this.#podsUnreadable) return Infinity;
    const after = this.#o.stallAfterMs ?? 120_000;
    const repeat = this.#o.stallRepeatMs ?? 300_000;
    let next = Infinity;
    for (const [name, started] of this.#startedAt) {
      if (!this.#active.has(name)) continue;
      const last = this.#stallCheckedAt.get(name);
      const due = last === undefined ? started + after : last + repeat;
      if (due > now) {
        next = Math.min(next, due - now);
        continue;
      }
      this.#stallCheckedAt.set(name, now);
      listPods.call(this.#o.api, name).then((pods) => {
        if (!this.#active.has(name)) return;
        const reasons = pods.map(stallReason).filter((r): r is string => r !== undefined);
        if (reasons.length === 0 || reasons.length < pods.length) return;
        const node = this.#byName.get(name)!.node.name;
        const seconds = Math.round((this.#o.clock.now() - started) / 1000);
        this.#o.reporter.event({ kind: "stalled", node, job: name, reason: reasons[0], seconds });
      }, (e) => this.#podsForbidden(e));
    }
    return next;
  }

  /** Fails the Jobs in flight past the node timeout; returns ms until the next deadline. */
  #expire(now: number): number {
    const timeout = this.#o.nodeTimeoutMs;
    if (timeout === undefined) return Infinity;
    let next = Infinity;
    for (const [name, started] of [...this.#startedAt]) {
      if (!this.#active.has(name)) continue;
      const left = started + timeout - now;
      if (left > 0) {
        next = Math.min(next, left);
        continue;
      }
      const uid = this.#active.get(name)!;
      this.#finish(name, "failed", `timeout: not finished within ${timeout / 1000} s`);
      if (this.#o.deleteTimedOut) {
        this.#o.api.deleteJob(name, uid).catch(() => {});
        this.#o.reporter.event({ kind: "deleting", job: name, why: "it timed out" });
      }
    }
    return next;
  }

  /** Slots taken: Jobs running, being created, or in their post-success work. */
  #inFlight(): number {
    return this.#active.size + this.#starting.size + this.#finishing.size;
  }

  #done(): boolean {
    const idle = this.#inFlight() === 0 && this.#explaining.size === 0;
    // A stopped rollout lets what is in flight finish and starts nothing more.
    return idle && (this.#pending.length === 0 || this.#stoppedBy !== undefined);
  }

  #progress(): Progress {
    let succeeded = 0, failed = 0;
    for (const r of this.#results.values()) {
      if (r.outcome === "succeeded") succeeded++;
      else if (r.outcome === "failed") failed++;
    }
    return {
      succeeded,
      failed,
      inFlight: this.#inFlight(),
      queued: this.#pending.length,
      total: this.#o.targets.length,
      elapsedMs: this.#o.clock.now() - this.#began,
    };
  }

  /** Keeps the Jobs in view: a watch while one works, else a LIST per poll interval. */
  async #follow(stop: AbortSignal): Promise<void> {
    let failures = 0;
    while (!stop.aborted) {
      if (this.#polling) {
        await this.#o.clock.sleep(this.#o.pollIntervalMs, stop);
        if (stop.aborted) return;
        await this.#relist();
        continue;
      }
      try {
        for await (const ev of this.#o.api.watchJobs(this.#resourceVersion, stop)) {
          failures = 0;
          this.#lostSince = undefined;
          if (ev.type === "BOOKMARK") {
            this.#resourceVersion = ev.object.metadata?.resourceVersion ?? this.#resourceVersion;
          } else if (ev.type === "ERROR") {
            // 410 Gone: the history we watched from was compacted. Only a fresh
            // LIST can tell what finished in between.
            this.#o.reporter.event({
              kind: "watch",
              state: "relisted",
              detail: ev.object.message ?? `watch error ${ev.object.code}`,
            });
            await this.#relist();
            break;
          } else {
            this.#resourceVersion = ev.object.metadata?.resourceVersion ?? this.#resourceVersion;
            this.#observe(ev.object, ev.type === "DELETED");
          }
        }
      } catch (e) {
        if (stop.aborted) return;
        const forbidden = e instanceof ApiError && (e.status === 403 || e.status === 405);
        failures++;
        if (forbidden || failures >= WATCH_FAILURES_BEFORE_POLLING) {
          this.#polling = true;
          this.#o.reporter.event({
            kind: "watch",
            state: "polling",
            detail: `${errorText(e)}; listing every ${this.#o.pollIntervalMs / 1000} s instead`,
          });
        } else {
          this.#o.reporter.event({ kind: "watch", state: "reconnected", detail: errorText(e) });
          await this.#o.clock.sleep(Math.min(1000 * 2 ** failures, 10_000), stop);
          await this.#relist();
        }
      }
    }
  }

  async #relist(): Promise<void> {
    try {
      this.#reconcile(await this.#o.api.listJobs());
      this.#lostSince = undefined;
    } catch (e) {
      this.#lostSince ??= this.#o.clock.now();
      this.#lostError = errorText(e);
      this.#notify();
    }
  }

  async run(): Promise<DispatchReport> {
    this.#began = this.#o.clock.now();
    await this.#initialList();
    const stopFollowing = new AbortController();
    const follow = this.#follow(stopFollowing.signal);
    const onAbort = () => this.#notify();
    this.#o.signal.addEventListener("abort", onAbort);
    let lastProgress = this.#o.clock.now();
    let lastCounts = "";
    try {
      while (true) {
        this.#fill();
        if (this.#done() || this.#o.signal.aborted) break;
        if (
          this.#lostSince !== undefined &&
          this.#o.clock.now() - this.#lostSince > this.#o.lostBudgetMs
        ) {
          for (const name of [...this.#active.keys()]) {
            this.#finish(name, "failed", `lost track of its Job: ${this.#lostError}`);
          }
          this.#lostSince = undefined;
          continue;
        }
        const now = this.#o.clock.now();
        if (this.#o.progressOnChange) {
          const p = this.#progress();
          const key = `${p.succeeded}/${p.failed}/${p.inFlight}/${p.queued}`;
          if (key !== lastCounts) {
            this.#o.reporter.progress(p);
            lastCounts = key;
          }
        }
        const nextDeadline = Math.min(this.#expire(now), this.#checkStalls(now));
        if (now - lastProgress >= this.#o.progressIntervalMs) {
          this.#o.reporter.progress(this.#progress());
          lastProgress = now;
        }
        const wait = new AbortController();
        this.#wake = () => wait.abort();
        if (!this.#woken) {
          await this.#o.clock.sleep(
            Math.max(1, Math.min(nextDeadline, this.#o.progressIntervalMs - (now - lastProgress))),
            wait.signal,
          );
        }
        this.#woken = false;
        this.#wake = () => {};
      }
    } finally {
      this.#o.signal.removeEventListener("abort", onAbort);
      // A create already sent when the run was stopped may still make its
      // Job; wait for the answer so that the Job is reported, not lost.
      await Promise.allSettled([...this.#inProgress]);
      stopFollowing.abort();
      await follow.catch(() => {});
    }
    this.#o.reporter.progress(this.#progress());
    const results = this.#o.targets.map((t): NodeResult => {
      const name = t.name;
      return this.#results.get(t.node.name) ??
        {
          node: t.node.name,
          job: name,
          outcome: this.#active.has(name) || this.#finishing.has(name) ? "inFlight" : "notStarted",
        };
    });
    return { results, stoppedBy: this.#stoppedBy };
  }
}

function timestamp(t: Date | string | undefined): number | undefined {
  return t === undefined ? undefined : new Date(t).getTime();
}

function reasonOf(status: { reason: string; message?: string }): string {
  return status.message ? `${status.message} [${status.reason}]` : status.reason;
}
