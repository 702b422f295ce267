/**
 * **engine/** owns the fan-out: one state per node and its pure transitions,
 * the start decision, create, finish, deadlines, stale Jobs, outages and
 * pauses. It reaches the cluster through `JobApi` and the informer, and the
 * maintenance through hooks `run/` wires; it imports `nodes/`, `kube/`,
 * `base/` and `job.ts`, never `report/`, `run/` or `cli/`.
 *
 * The fan-out engine: keeps at most `parallelism` per-node Jobs in flight and
 * refills a slot as soon as a watch event says a Job finished. It talks to the
 * cluster only through {@linkcode JobApi}, so it runs unchanged against the
 * real API layer and against the in-memory fake of the unit tests.
 *
 * The engine owns the one `Map<job name, NodeState>` and the loop; the steps
 * of a node's life live beside it and reach the map only through the host
 * the engine gives them: who may start next (admission.ts, pure), the start
 * (start.ts), the end of its Job (finish.ts), its deadlines (deadlines.ts),
 * and stale Jobs (stale.ts).
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { classifyJob, interpretStatus, settledJob, slimJob, stillRuns } from "../job.ts";
import { budgetExceeded } from "./safety.ts";
import { WaveState } from "./wave_state.ts";
import { admit, takeNext } from "./admission.ts";
import { adoptable, type StartHost, startNode } from "./start.ts";
import { checkBlocked, checkDeadlines, type DeadlineHost } from "./deadlines.ts";
import { concludeJob, type FinishHost, judgeCollected, runAfterSuccess } from "./finish.ts";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { type Departure, Informer } from "../kube/informer.ts";
import {
  FINAL,
  IN_FLIGHT,
  next,
  type NodeEvent,
  type NodeState,
  type Phase,
} from "./node_state.ts";
import { Outage, SILENT_MS } from "./outage.ts";
import type {
  DispatchReport,
  FanoutOptions,
  NodeStateView,
  Progress,
  Target,
} from "./fanout_types.ts";
import { nodeResult, progressKey, progressOf } from "./outcome.ts";
import { PodReader } from "./explain.ts";
import { errorText } from "../base/errors.ts";
import { podFailure } from "../nodes/pods.ts";
import {
  deleteStale,
  firstSight,
  retriesFailed,
  sightingOf,
  STALE_DELETE_DEADLINE_MS,
  type StaleHost,
  staleWhy,
} from "./stale.ts";

export { type Clock, SYSTEM_CLOCK };
export type {
  DispatchEvent,
  DispatchReport,
  FanoutOptions,
  JobApi,
  NodeResult,
  NodeStateView,
  Progress,
  Reporter,
  StartBudget,
  Target,
} from "./fanout_types.ts";

/** The phases that count against `--max-failures`. */
const COUNTS_AS_FAILED: ReadonlySet<Phase> = new Set(["failed", "explaining", "stillBlocked"]);

/** How many nodes' waits the progress line names. */
const MAX_WAITS = 3;

/** How long a node may finish before the progress line says what it waits for. */
const SLOW_FINISH_MS = 5_000;

/**
 * What a node in flight waits for, for the progress line: what it said
 * (`waitingFor`), or, for a success whose finish takes long, which part:
 * the client retries a node write for up to its budget before the engine
 * hears of an outage, and that minute must not read as a hang.
 */
function waitOf(s: NodeState, now: number): string | undefined {
  if (s.waitingFor || s.phase !== "finishing" || now - s.since < SLOW_FINISH_MS) {
    return s.waitingFor;
  }
  const secs = Math.round((now - s.since) / 1000);
  return s.afterStarted
    ? `post-success work (node labels, uncordon) under way for ${secs} s`
    : `its Job succeeded; waiting ${secs} s for its Complete condition (its pods to end)`;
}

/** Why the loop's sleep ended early: woken by an event (the sleep only resolves; nobody reads it). */
const WOKEN = "woken";

/** The longest the loop sleeps: silence must be noticed within a minute. */
const MAX_SLEEP_MS = 10_000;

function nameOf(job: V1Job): string {
  return job.metadata!.name!;
}

/**
 * Runs every target's Job with at most `parallelism` in flight and returns
 * each node's result. Per-node failures never stop the others, and an API
 * outage fails no node: starts pause until the API answers again. A stale Job
 * of a node's name (earlier owner, earlier node, other template) is replaced:
 * never while it still runs, and its deletion holds the node's slot.
 */
export async function dispatch(opts: FanoutOptions): Promise<DispatchReport> {
  return await new Fanout(opts).run();
}

type Optional =
  | "blockers"
  | "blockedTimeoutMs"
  | "blockedRetryMs"
  | "pause"
  | "closesAt"
  | "budget"
  | "postNodeDelayMs"
  | "retryFailed"
  | "recheck"
  | "recheckBeforeCreate"
  | "namespace"
  | "prepare"
  | "release"
  | "afterSuccess"
  | "maxFailures"
  | "waves"
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
  /** The one state per node, by its Job's name; leftovers of an earlier owner too. */
  #nodes = new Map<string, NodeState>();
  /** The targets by Job name (fixed for the run). */
  #byName = new Map<string, Target>();
  /** The waves (`--waves`, `--canary`): the open one, its soak and hold. */
  #waves?: WaveState;
  /** The order queued nodes start in; a requeued node goes first. Holds no state. */
  #queue: string[] = [];
  /** Names whose phase holds a slot: an index of #nodes, kept by #apply. */
  #inFlight = new Set<string>();
  /**
   * Leftovers of an earlier owner (no node of this run) whose finished Job is
   * being deleted. They hold no slot: their pods have ended, so they load no
   * node, and at P=4 a `helm upgrade` that left 2,000 of them would otherwise
   * wait for 500 foreground deletions in a row before the first real start.
   * The client's concurrency bound and rate limit pace their requests.
   */
  #leftoversDeleting = new Set<string>();
  /** Names of the blocked nodes: an index of #nodes, kept by #put. */
  #blocked = new Set<string>();
  /** Nodes per phase: an index of #nodes, kept by #apply. */
  #counts = new Map<Phase, number>();
  #stoppedBy?: string;
  /** Why starts are paused by the user, as last seen. */
  #pausedBy?: string;
  /** The pods of the Jobs, which explain failures and stalls. */
  #pods: PodReader;
  /** Calls under way: a create sent before a stop still makes a Job. */
  #tasks = new Set<Promise<void>>();
  #began = 0;
  #wake: () => void = () => {};
  #woken = false;
  #jobs: Informer<V1Job>;
  #outage: Outage;
  /** UIDs of the Jobs this run created: never retried by `retryFailed`. */
  #created = new Set<string>();
  /** The engine as the stale-Job work sees it (stale.ts). */
  #stale: StaleHost;
  /** The engine as the start of a node (start.ts) sees it. */
  #starter: StartHost;
  /** The engine as the deadline checks (deadlines.ts) see it. */
  #deadlines: DeadlineHost;
  /** The engine as the end of a node's Job (finish.ts) sees it. */
  #finisher: FinishHost;

  constructor(opts: FanoutOptions) {
    this.#o = {
      clock: SYSTEM_CLOCK,
      pollIntervalMs: 5_000,
      progressIntervalMs: 10_000,
      watchRetryMs: 30_000,
      staleDeleteDeadlineMs: STALE_DELETE_DEADLINE_MS,
      recheck: undefined,
      ...opts,
    };
    for (const t of opts.targets) this.#byName.set(t.name, t);
    this.#waves = this.#waveState();
    this.#outage = new Outage(this.#o.clock.now());
    this.#pods = new PodReader(
      opts.api,
      (message) => this.#o.reporter.event({ kind: "notice", message }),
    );
    this.#jobs = this.#watchJobs();
    this.#stale = this.#staleHost();
    this.#starter = this.#startHost();
    this.#deadlines = this.#deadlineHost();
    this.#finisher = this.#finishHost();
  }

  /** The waves of the run, with `waves`; they are told of each final node in #settled. */
  #waveState(): WaveState | undefined {
    const w = this.#o.waves;
    if (!w) return undefined;
    return new WaveState(this.#o.targets, {
      clock: this.#o.clock,
      signal: this.#o.signal,
      soakMs: w.soakMs ?? 0,
      canary: w.canary,
      budget: this.#o.maxFailures !== undefined,
      hold: w.holdAfterWave,
      gate: w.soakGate,
      serverOffset: w.serverClockOffsetMs,
      stop: (reason) => this.#stop(reason),
      notice: (wave, message) => this.#o.reporter.event({ kind: "wave", wave, message }),
      wake: () => this.#notify(),
    });
  }

  /** The one informer of the run's Jobs; its events drive the node states. */
  #watchJobs(): Informer<V1Job> {
    const { api, pollOnly } = this.#o;
    return new Informer<V1Job>({
      source: { list: (s) => api.listJobs(s), watch: (rv, s) => api.watchJobs(rv, s) },
      clock: this.#o.clock,
      pollIntervalMs: this.#o.pollIntervalMs,
      pollOnly,
      watchRetryMs: this.#o.watchRetryMs,
      // A final node state never changes: of its Job only what the informer compares stays.
      keep: (job) => (this.#final(job.metadata?.name ?? "") ? settledJob(job) : slimJob(job)),
      onUpsert: (job) => this.#onUpsert(job),
      onDelete: (job, how) => this.#onDelete(job, how),
      onNote: (n) => {
        this.#o.reporter.event({ kind: "watch", state: n.state, detail: n.detail });
        this.#notify();
      },
    });
  }

  /** The engine as the stale-Job work of stale.ts sees it. */
  #staleHost(): StaleHost {
    return {
      api: this.#o.api,
      reporter: this.#o.reporter,
      clock: this.#o.clock,
      signal: this.#o.signal,
      deadlineMs: this.#o.staleDeleteDeadlineMs,
      state: (name) => this.#nodes.get(name),
      put: (name, s) => this.#put(name, s),
      apply: (name, e) => void this.#apply(name, e),
      drop: (name) => this.#drop(name),
      isTarget: (name) => this.#byName.has(name),
      ok: () => this.#ok(),
      outage: (e, began) => this.#outageFailed(e, began),
      listPods: (name) => this.#pods.list(name),
      track: (work, name) => this.#track(work, name),
    };
  }

  /** The engine as the start of a node (start.ts) sees it. */
  #startHost(): StartHost {
    const { api, reporter, clock, run, signal, recheck, recheckBeforeCreate } = this.#o;
    const { blockers, prepare, release } = this.#o;
    return {
      api,
      reporter,
      clock,
      run,
      signal,
      recheck,
      recheckBeforeCreate,
      blockers,
      prepare,
      release,
      halted: () => this.#halted(),
      state: (name) => this.#nodes.get(name),
      apply: (name, e) => void this.#apply(name, e),
      outageHit: (name, e, began, prepared) => this.#outageHit(name, e, began, prepared),
      outageFailed: (e, began) => this.#outageFailed(e, began),
      stop: (reason) => this.#stop(reason),
      ok: () => this.#ok(),
      track: (work) => this.#track(work),
      created: (name, job) => this.#createdJob(name, job),
      meet: (name, job) => this.#meet(name, job, false),
      adopt: (name, job) => this.#adoptRead(name, job),
    };
  }

  /** This run created `job`: never retried by `--retry-failed`, and met in the cache. */
  #createdJob(name: string, job: V1Job): void {
    this.#created.add(job.metadata!.uid!);
    // The watch may have seen it finish before the create returned.
    const seen = this.#jobs.cache.get(name);
    if (seen && seen.metadata?.uid === job.metadata!.uid) this.#onUpsert(seen);
    // Else in the cache until a LIST or the watch shows it, so that a Job
    // collected before any of them did is still noticed as gone.
    else if (!seen) this.#jobs.assume(job);
  }

  /**
   * Whether `job` is the Job of an unsure node (its create went unanswered)
   * that this run made: adopted wherever it is seen, never created again.
   */
  #lost(name: string, job: V1Job): boolean {
    const s = this.#nodes.get(name);
    const t = this.#byName.get(name);
    if (!s?.unsure || s.uid || !t) return false;
    if (s.phase !== "queued" && s.phase !== "creating") return false;
    return adoptable(job, this.#o.run, t.node.uid);
  }

  /** Adopts an unsure node's Job as this run's: running, reported, never `--retry-failed`. */
  #adopt(name: string, job: V1Job): void {
    const uid = job.metadata!.uid!;
    this.#created.add(uid);
    this.#apply(name, { type: "adopted", uid });
    this.#o.reporter.event({ kind: "adopted", node: this.#byName.get(name)!.node.name, job: name });
  }

  /** Adopts an unsure node's Job found by a read, and concludes it as the cache or the read says. */
  #adoptRead(name: string, job: V1Job): void {
    if (!this.#lost(name, job)) return;
    this.#adopt(name, job);
    const seen = this.#jobs.cache.get(name);
    if (seen && seen.metadata?.uid === job.metadata!.uid) return this.#onUpsert(seen);
    if (!seen) this.#jobs.assume(job);
    concludeJob(this.#finisher, name, job, false);
  }

  /** The engine as the deadline checks (deadlines.ts) see it. */
  #deadlineHost(): DeadlineHost {
    return {
      options: this.#o,
      api: this.#o.api,
      reporter: this.#o.reporter,
      clock: this.#o.clock,
      pods: this.#pods,
      stale: this.#stale,
      inFlight: () => this.#inFlight,
      blocked: () => this.#blocked,
      nodeOf: (name) => this.#byName.get(name)?.node.name,
      state: (name) => this.#nodes.get(name),
      put: (name, s) => this.#put(name, s),
      apply: (name, e, facts) => void this.#apply(name, e, facts),
      track: (work) => this.#track(work),
    };
  }

  /** The engine as the end of a node's Job (finish.ts) sees it. */
  #finishHost(): FinishHost {
    return {
      options: this.#o,
      clock: this.#o.clock,
      pods: this.#pods,
      target: (name) => this.#byName.get(name)!,
      state: (name) => this.#nodes.get(name),
      apply: (name, e, facts) => this.#apply(name, e, facts),
      track: (work, name) => this.#track(work, name),
      ok: () => this.#ok(),
      outageFailed: (e, began) => this.#outageFailed(e, began),
      wroteSince: (at) => this.#outage.lastOkAt > at,
    };
  }

  #now(): number {
    return this.#o.clock.now();
  }

  #notify(): void {
    this.#woken = true;
    this.#wake();
  }

  #track(work: Promise<void>, name?: string): void {
    const guarded = work.catch((e) => {
      // Every API error is handled where it happens; this is a last guard so
      // that no node is silently left out.
      if (name) this.#apply(name, { type: "fail", reason: `unexpected error: ${errorText(e)}` });
    }).finally(() => this.#tasks.delete(guarded));
    this.#tasks.add(guarded);
  }

  #count(phase: Phase): number {
    return this.#counts.get(phase) ?? 0;
  }

  /** Sets a node's state, keeping the indexes; a node new to the map starts queued. */
  #put(name: string, s: NodeState): void {
    const before = this.#nodes.get(name);
    if (before) this.#counts.set(before.phase, this.#count(before.phase) - 1);
    this.#nodes.set(name, s);
    this.#counts.set(s.phase, this.#count(s.phase) + 1);
    if (IN_FLIGHT.has(s.phase)) this.#inFlight.add(name);
    else this.#inFlight.delete(name);
    if (s.phase === "deleting" && !this.#byName.has(name)) this.#leftoversDeleting.add(name);
    else this.#leftoversDeleting.delete(name);
    if (s.phase === "blocked") this.#blocked.add(name);
    else this.#blocked.delete(name);
  }

  #drop(name: string): void {
    const before = this.#nodes.get(name);
    if (!before) return;
    this.#counts.set(before.phase, this.#count(before.phase) - 1);
    this.#nodes.delete(name);
    this.#inFlight.delete(name);
    this.#leftoversDeleting.delete(name);
    this.#blocked.delete(name);
  }

  /** Applies one event to a node's state; reports what became final. */
  #apply(name: string, e: NodeEvent, facts: Partial<NodeState> = {}): NodeState | undefined {
    const before = this.#nodes.get(name);
    if (!before) return undefined;
    const after = next(before, e, this.#now());
    if (after === before) return before;
    const target = this.#byName.get(name);
    // A leftover of an earlier owner, once deleted, is no concern of the run.
    if (!target && after.phase === "queued" && before.phase !== "queued") {
      this.#drop(name);
      this.#notify();
      return undefined;
    }
    const s = FINAL.has(after.phase) ? { ...after, ...facts } : after;
    this.#put(name, s);
    // A requeued node goes first; a blocked one last, so that the others
    // use the slot meanwhile.
    if (s.phase === "queued") {
      if (before.phase === "blocked") this.#queue.push(name);
      else this.#queue.unshift(name);
    }
    // A failed Job counts against the budget at once, not once its pods
    // have told why: the slot it frees must not start one node too many. A
    // node still blocked at its timeout got no Job: not done, it counts too.
    const blocked = this.#count("stillBlocked");
    const failed = this.#count("failed") + this.#count("explaining") + blocked;
    if (COUNTS_AS_FAILED.has(s.phase) && target && budgetExceeded(failed, this.#o.maxFailures)) {
      const of = blocked ? `, ${blocked} of them still blocked` : "";
      this.#stop(
        `the failure budget of ${this.#o.maxFailures} was exceeded (${failed} failed${of})`,
      );
    }
    if (FINAL.has(s.phase) && target) this.#settled(target, s);
    this.#notify();
    return s;
  }

  #stop(reason: string): void {
    if (this.#stoppedBy) return;
    this.#stoppedBy = reason;
    this.#o.reporter.event({ kind: "stopped", reason });
  }

  /** Whether `name` is a target's Job whose node's state is final (it never changes again). */
  #final(name: string): boolean {
    const s = this.#nodes.get(name);
    return s !== undefined && FINAL.has(s.phase) && this.#byName.has(name);
  }

  /** A node reached its final state: its wave, the budget, the report. */
  #settled(t: Target, s: NodeState): void {
    const node = t.node.name;
    // Its Job's outcome is in `s`, which never changes again: its Job leaves
    // the cache (an event of it later is cached as the informer compares it).
    this.#jobs.forget(t.name);
    this.#waves?.settled(t, s);
    const counted = s.counted ?? false;
    if (s.phase === "succeeded") {
      this.#o.reporter.event({ kind: "succeeded", node, job: t.name, counted });
    } else if (s.phase === "failed") {
      const noJob = s.startedAt === undefined || undefined;
      this.#o.reporter.event({
        kind: "failed",
        node,
        job: t.name,
        reason: s.reason!,
        counted,
        noJob,
      });
      // Counted from an earlier run: this run prepared nothing on the node.
      if (this.#o.release && !counted) this.#track(this.#o.release(t, "failed"));
    } else if (s.phase === "stillBlocked") {
      this.#o.reporter.event({ kind: "notice", message: `node ${node}: blocked: ${s.reason}` });
    } else {
      this.#o.reporter.event({
        kind: "notice",
        message: `node ${node}: job ${t.name}: ${s.reason}`,
      });
    }
  }

  /** A request succeeded: an outage, if any, is over. */
  #ok(): void {
    const change = this.#outage.ok(this.#now());
    if (change) this.#o.reporter.event({ kind: "api", ...change });
  }

  /** A start met an outage: the node goes back to the front of the queue, starts pause. */
  #outageHit(name: string, e: unknown, began: number, prepared?: boolean): void {
    this.#apply(name, { type: "requeue", prepared });
    this.#outageFailed(e, began);
  }

  /** A request begun at `began` met an outage: starts pause, and the user is told once. */
  #outageFailed(e: unknown, began: number): void {
    const change = this.#outage.fail(e, began, this.#now());
    if (change) this.#o.reporter.event({ kind: "api", ...change });
  }

  /** A Job of the node's name exists: count or adopt ours, replace a stale one. */
  #meet(name: string, job: V1Job, counted: boolean): void {
    const t = this.#byName.get(name);
    const disposition = classifyJob(job, this.#o.run, t?.node.uid);
    if (disposition === "current" && t) {
      const uid = job.metadata!.uid!;
      this.#apply(name, { type: "adopted", uid, counted });
      if (interpretStatus(job).phase === "active") {
        this.#o.reporter.event({ kind: "adopted", node: t.node.name, job: name });
      } else concludeJob(this.#finisher, name, job, counted);
      return;
    }
    if (disposition !== "stale") return;
    const active = stillRuns(job);
    // Called on its target: `job` may build the Job of the target it is called on.
    const why = staleWhy(job, t && (() => t.job()), this.#o.run, t?.node.uid);
    this.#apply(name, { type: "staleFound", uid: job.metadata!.uid!, active });
    this.#decided(name, job);
    if (active) {
      // Never deleted mid-run: for node maintenance a Job killed midway can
      // leave the node broken. Its pods run, so it holds the node's slot.
      this.#o.reporter.event({
        kind: "waiting",
        node: t?.node.name ?? name,
        job: name,
        why: `stale Job ${name} (${why}) still runs; it is replaced once it finishes`,
      });
    } else this.#track(deleteStale(this.#stale, name, job, why), name);
  }

  /** The first view of the Jobs: ours are counted or adopted, stale ones wait or go. */
  #initial(): void {
    const leftovers: string[] = [];
    const kept = this.#keptSuccesses();
    for (const job of this.#jobs.cache.values()) {
      const name = nameOf(job);
      if (kept.has(name)) continue;
      const target = this.#byName.get(name);
      const sight = firstSight({
        ...sightingOf(job, this.#o.run, target?.node.uid, this.#retry(job)),
        target: target !== undefined,
        owned: !!this.#o.run.owner,
      });
      if (sight.leftover) {
        this.#put(name, { phase: "queued", since: this.#now() });
        leftovers.push(name);
      }
      if (sight.meet) this.#meet(name, job, true);
    }
    this.#queue = [
      ...leftovers.filter((n) => this.#nodes.get(n)?.phase === "queued"),
      ...this.#o.targets.map((t) => t.name).filter((n) => this.#nodes.get(n)!.phase === "queued"),
    ];
  }

  /**
   * Counts the successes an earlier run kept on their nodes before it was
   * stopped during their post-success work (`Target.keptSuccess`), whose
   * Job is gone or being deleted (its TTL): the post-success work is done
   * again, and the Job never created a second time. A Job of the name that
   * is still there and not going is judged as usual instead.
   *
   * @returns the names counted so
   */
  #keptSuccesses(): Set<string> {
    const counted = new Set<string>();
    for (const t of this.#o.targets) {
      if (!t.keptSuccess) continue;
      const job = this.#jobs.cache.get(t.name);
      if (job && !job.metadata?.deletionTimestamp) continue;
      if (job && !adoptable(job, this.#o.run, t.node.uid)) continue;
      counted.add(t.name);
      const done = {
        metadata: { name: t.name, uid: job?.metadata?.uid ?? `kept-${t.name}` },
        status: {
          conditions: [{ type: "Complete", status: "True" }],
          // The end the mark kept: verification judges the validator pods by
          // it, as it would by the Job's, which the TTL removed.
          ...(t.keptEndedAt !== undefined && { completionTime: new Date(t.keptEndedAt) }),
        },
      } as V1Job;
      this.#apply(t.name, { type: "adopted", uid: done.metadata!.uid!, counted: true });
      concludeJob(this.#finisher, t.name, done, true);
    }
    return counted;
  }

  #onUpsert(job: V1Job): void {
    const name = nameOf(job);
    if (this.#lost(name, job)) this.#adopt(name, job);
    const s = this.#nodes.get(name);
    if (!s || s.uid !== job.metadata?.uid) return;
    const status = interpretStatus(job);
    if (s.phase === "running" && status.phase === "active") this.#podFailures(name, s, job);
    else if (s.phase === "running") concludeJob(this.#finisher, name, job, false);
    else if (s.phase === "finishing" && status.phase === "succeeded" && status.final) {
      this.#completed(name, s, job);
    } else if (s.phase === "waitingStale" && !stillRuns(job)) {
      this.#apply(name, { type: "staleFinished" });
      this.#track(deleteStale(this.#stale, name, job, "its run finished"), name);
    } else if (s.phase === "waitingStale") this.#decided(name, job);
  }

  /**
   * A finishing node's Job is Complete: its post-success work starts, only
   * on the edge. A Job already Complete is seen again (the TTL controller's
   * foreground deletion, a label, a relist), and a second run of the work
   * beside the first would write the node twice at once.
   */
  #completed(name: string, s: NodeState, job: V1Job): void {
    if (s.afterStarted) return;
    if (this.#apply(name, { type: "complete" })?.afterStarted) {
      runAfterSuccess(this.#finisher, name, job);
    }
  }

  /** Notes when the stale Job a node waits for got its decided, not yet final, outcome. */
  #decided(name: string, job: V1Job): void {
    const s = this.#nodes.get(name);
    const status = interpretStatus(job);
    if (s?.phase !== "waitingStale" || s.decided || status.phase === "active") return;
    const condition = status.phase === "succeeded" ? "SuccessCriteriaMet" : "FailureTarget";
    this.#put(name, { ...s, decided: { at: this.#now(), condition } });
    this.#notify();
  }

  /**
   * A running Job whose pods fail and are retried (its backoffLimit) shows
   * only a growing ETA otherwise: its node says how many failed and why.
   */
  #podFailures(name: string, s: NodeState, job: V1Job): void {
    const failed = job.status?.failed ?? 0;
    if (failed <= (s.podFailures ?? 0)) return;
    const said = `Job retrying, ${failed} pod failure${failed === 1 ? "" : "s"}`;
    this.#apply(name, { type: "note", waitingFor: said, podFailures: failed });
    if (!this.#pods.readable) return;
    this.#track(
      this.#pods.list(name).then((pods) => {
        const now = this.#nodes.get(name);
        const why = pods && podFailure(pods);
        if (!why || now?.phase !== "running" || now.uid !== s.uid) return;
        if (now.podFailures !== failed) return; // a later failure says it
        this.#apply(name, { type: "note", waitingFor: `${said}: ${why}`, podFailures: failed });
      }),
    );
  }

  #onDelete(job: V1Job, how: Departure): void {
    const name = nameOf(job);
    if (this.#lost(name, job)) this.#adopt(name, job);
    const s = this.#nodes.get(name);
    if (!s || s.uid !== job.metadata?.uid) return;
    if (s.phase === "waitingStale" || s.phase === "deleting") {
      this.#apply(name, { type: "staleGone" });
    } else if (s.phase === "finishing" && !s.afterStarted) {
      // Gone with only SuccessCriteriaMet seen: its pods are gone too.
      this.#completed(name, s, job);
    } else if (s.phase === "running" && how === "vanished") {
      this.#track(judgeCollected(this.#finisher, name, s.uid!), name);
    } else if (s.phase === "running") {
      // A DELETED event carries the Job's final state: a Job removed by its
      // TTL right after it finished still tells its outcome.
      if (interpretStatus(job).phase !== "active") concludeJob(this.#finisher, name, job, false);
      else this.#apply(name, { type: "fail", reason: "its Job was deleted before it finished" });
    }
  }

  /** Takes the next queued node (or leftover) for which a slot may open; undefined when none. */
  #pick(): string | undefined {
    const domain = this.#o.domain;
    const { name, queue } = takeNext(this.#queue, {
      queued: (n) => this.#nodes.get(n)?.phase === "queued",
      allowed: this.#waves && !this.#waves.last
        ? (n) => this.#waves!.allows(this.#byName.get(n))
        : undefined,
      domainOf: domain && ((n) => {
        const t = this.#byName.get(n);
        return t && domain(t);
      }),
      inFlight: this.#inFlight,
      maxPerDomain: this.#o.maxPerDomain,
    });
    this.#queue = queue;
    return name;
  }

  /** Whether the maintenance window has closed: nothing more starts. */
  #closed(): boolean {
    return this.#o.closesAt !== undefined && this.#now() >= this.#o.closesAt;
  }

  /** Whether nothing more may start: aborted, stopped, or the window closed. */
  #halted(): boolean {
    return this.#o.signal.aborted || !!this.#stoppedBy || this.#closed();
  }

  /** Starts what the slots allow; while paused, one probe start at a time. */
  #fill(): void {
    if (this.#halted()) return;
    if (this.#pausedBy) return;
    const limit = this.#waves?.limit(this.#o.parallelism) ?? this.#o.parallelism;
    // The budget counts the nodes in work: each start below takes one of its slots.
    let room = this.#o.budget?.slots(this.#inWork()) ?? Infinity;
    while (true) {
      const admission = admit({
        held: this.#inFlight.size - this.#leftoversDeleting.size,
        limit,
        room,
        outage: this.#outage.paused,
        creating: this.#count("creating"),
        mayProbe: this.#outage.mayProbe(this.#now()),
      });
      if (admission === "full" || admission === "waitForProbe") return;
      const name = this.#pick();
      if (name === undefined) return;
      if (this.#byName.has(name)) room--;
      this.#begin(name);
      if (admission === "probe") return;
    }
  }

  /** Whether `job` is an earlier run's failure that `--retry-failed` replaces. */
  #retry(job: V1Job): boolean {
    return retriesFailed(job, this.#o.retryFailed) && !this.#created.has(job.metadata!.uid!);
  }

  /** The names of the nodes in flight. */
  #inWork(): string[] {
    // A leftover of an earlier owner is no node of the selection.
    return [...this.#inFlight].flatMap((n) => this.#byName.get(n)?.node.name ?? []);
  }

  #begin(name: string): void {
    const job = this.#jobs.cache.get(name);
    if (job && this.#lost(name, job)) return this.#adoptRead(name, job);
    if (job && classifyJob(job, this.#o.run) !== "notOurs") {
      if (!this.#retry(job)) return this.#meet(name, job, false);
      // Replaced as a stale Job is: deleted (holding the slot), then created;
      // with only FailureTarget, once Failed, as a stale Job waits for it.
      const active = stillRuns(job);
      this.#apply(name, { type: "staleFound", uid: job.metadata!.uid!, active });
      if (active) return this.#decided(name, job);
      return this.#track(
        deleteStale(this.#stale, name, job, "it failed in an earlier run (--retry-failed)"),
        name,
      );
    }
    if (!this.#byName.has(name)) return this.#drop(name); // a leftover already gone
    this.#apply(name, { type: "start" });
    this.#track(startNode(this.#starter, this.#byName.get(name)!), name);
  }

  /** Notices the user's pause and resume, and says so once each. */
  #checkPause(): void {
    const stop = this.#o.pause?.stopsBy?.();
    if (stop) this.#stop(stop);
    const by = this.#o.pause?.pausedBy();
    if (by === this.#pausedBy) return;
    this.#pausedBy = by;
    this.#o.reporter.event(
      by
        ? { kind: "notice", message: `paused by ${by}: no new Job starts; Jobs in flight finish` }
        : { kind: "notice", message: "resumed: the pause was lifted", level: "info" },
    );
  }

  /** Notices an API that has gone silent, and its return. */
  #checkSilence(now: number): void {
    const silentMs = Math.max(SILENT_MS, 3 * this.#o.pollIntervalMs);
    const change = this.#outage.observe(this.#jobs.heardAt, now, silentMs, this.#jobs.lastError);
    if (change) this.#o.reporter.event({ kind: "api", ...change });
  }

  #done(): boolean {
    const idle = this.#inFlight.size === 0 && this.#count("explaining") === 0;
    // A stopped rollout lets what is in flight finish and starts nothing more.
    const waiting = this.#count("queued") + this.#count("blocked");
    return idle && (waiting === 0 || this.#stoppedBy !== undefined || this.#closed());
  }

  #progress(): Progress {
    const now = this.#now();
    const progress = progressOf({
      count: (phase) => this.#count(phase),
      inFlight: this.#inFlight.size,
      total: this.#o.targets.length,
      elapsedMs: now - this.#began,
      outage: this.#outage.view(now),
      budget: this.#o.budget?.describe(this.#inWork()),
      paused: this.#pausedBy,
      waits: this.#waits(),
      wave: this.#waves?.view(now),
    });
    // A view, not a copy: the run record reads it at most every 10 s. One
    // node at a time, not an array of 65,000 views (3 MB a write): each view
    // dies young, in the scavenger's space, not in the old generation.
    const targets = this.#o.targets, nodes = this.#nodes;
    const states = function* (): Generator<NodeStateView> {
      for (const t of targets) yield { node: t.node.name, job: t.name, state: nodes.get(t.name)! };
    };
    return { ...progress, states };
  }

  /** What the nodes in flight wait for, when they say: the first few. */
  #waits(): string[] | undefined {
    const waits: string[] = [];
    const now = this.#now();
    for (const name of this.#inFlight) {
      const why = waitOf(this.#nodes.get(name)!, now);
      if (why) waits.push(`node ${this.#byName.get(name)?.node.name ?? name}: ${why}`);
    }
    if (waits.length > MAX_WAITS) {
      waits.splice(MAX_WAITS, Infinity, `${waits.length - MAX_WAITS} more`);
    }
    return waits.length ? waits : undefined;
  }

  /**
   * Runs the rollout: starts what the slots allow, checks deadlines, and
   * sleeps until a watch event, a timer or the user wakes it.
   */
  async run(): Promise<DispatchReport> {
    await this.#open();
    const onAbort = () => this.#notify();
    this.#o.signal.addEventListener("abort", onAbort);
    try {
      await this.#loop();
    } finally {
      this.#o.signal.removeEventListener("abort", onAbort);
      this.#giveBack();
      // A create already sent when the run was stopped may still make its
      // Job; wait for the answer so that the Job is reported, not lost. Until
      // none is left: a stopped drain tracks the uncordon of its node as it
      // ends, and that must run before the process exits.
      while (this.#tasks.size) await Promise.allSettled([...this.#tasks]);
      await this.#jobs.stop();
    }
    this.#o.reporter.progress(this.#progress());
    return this.#report();
  }

  /**
   * Gives back each node an outage sent back to the queue cordoned (and
   * drained) that the run ends without starting again: never leave a node
   * worse than found. An unsure one is kept: its Job may run on it.
   */
  #giveBack(): void {
    const release = this.#o.release;
    if (!release) return;
    for (const t of this.#o.targets) {
      const s = this.#nodes.get(t.name);
      if (s?.phase === "queued" && s.leftPrepared && !s.unsure) {
        this.#track(release(t, "abandoned"));
      }
    }
  }

  /** Queues every target, takes the first view of the Jobs, and listens to the gates. */
  async #open(): Promise<void> {
    this.#began = this.#now();
    for (const t of this.#o.targets) this.#put(t.name, { phase: "queued", since: this.#began });
    await this.#jobs.start();
    this.#initial();
    this.#o.budget?.onChange(() => this.#notify());
    this.#o.pause?.onChange(() => this.#notify());
  }

  /** One pass per wake-up until every node is done, the run stopped or it was aborted. */
  async #loop(): Promise<void> {
    let lastProgress = this.#now();
    let lastCounts = "";
    while (true) {
      this.#checkPause();
      this.#fill();
      if (this.#done() || this.#o.signal.aborted) return;
      const now = this.#now();
      this.#checkSilence(now);
      if (this.#o.progressOnChange) lastCounts = this.#progressOnChange(lastCounts);
      const nextDeadline = this.#checkTimers(now);
      if (now - lastProgress >= this.#o.progressIntervalMs) {
        this.#o.reporter.progress(this.#progress());
        lastProgress = now;
      }
      await this.#sleep(Math.min(nextDeadline, this.#o.progressIntervalMs - (now - lastProgress)));
    }
  }

  /** Reports the progress when its counts changed since `last`; returns the counts' key. */
  #progressOnChange(last: string): string {
    const p = this.#progress();
    const key = progressKey(p);
    if (key !== last) this.#o.reporter.progress(p);
    return key;
  }

  /** Acts on the deadlines due by `now`; returns ms until the next one. */
  #checkTimers(now: number): number {
    // Wake when the window closes, once: after, nothing is waited for.
    const closesIn = (this.#o.closesAt ?? -Infinity) > now ? this.#o.closesAt! - now : Infinity;
    return Math.min(
      this.#waves?.tick(now, this.#halted()) ?? Infinity,
      checkDeadlines(this.#deadlines, now),
      checkBlocked(this.#deadlines, now),
      closesIn,
    );
  }

  /**
   * Sleeps `ms` (at least 1 ms, at most {@linkcode MAX_SLEEP_MS}) unless woken
   * first; a wake-up that came since the last sleep ends it at once.
   */
  async #sleep(ms: number): Promise<void> {
    const wait = new AbortController();
    // With a reason: abort() without one builds a DOMException, stack trace
    // and all, on every watch event that wakes the loop (about 90 µs each).
    this.#wake = () => wait.abort(WOKEN);
    if (!this.#woken) {
      // While the API is out, a probe start may be due within the second.
      const probe = this.#outage.paused ? 1_000 : Infinity;
      await this.#o.clock.sleep(Math.max(1, Math.min(ms, probe, MAX_SLEEP_MS)), wait.signal);
    }
    this.#woken = false;
    this.#wake = () => {};
  }

  /** Each target's result, why the rollout stopped, whether the window left nodes. */
  #report(): DispatchReport {
    return {
      results: this.#o.targets.map((t) => nodeResult(t, this.#nodes.get(t.name)!)),
      stoppedBy: this.#stoppedBy,
      windowClosed: this.#closed() && this.#count("queued") + this.#count("blocked") > 0 ||
        undefined,
      waves: this.#waves?.records(),
    };
  }
}
