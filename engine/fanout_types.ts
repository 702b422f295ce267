/**
 * The contract of the fan-out engine ({@linkcode dispatch} in `fanout.ts`):
 * the Job operations it needs, the targets and options it takes, and what it
 * reports and returns. `fanout.ts` re-exports all of it; the modules the
 * engine is built from import it from here, so that none depends on the
 * engine itself.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import type { NodeFacts, RunIdentity } from "../job.ts";
import type { ListResult, WatchEvent } from "../kube/client.ts";
import type { Clock } from "../base/clock.ts";
import type { OutageView } from "./outage.ts";
import type { PauseGate } from "./pause.ts";
import type { NodeState } from "./node_state.ts";

/** The Job operations the engine needs, scoped to the run's namespace and owner label. */
export interface JobApi {
  /** Lists the Jobs that carry this dispatcher's owner label; `signal` aborts the LIST. */
  listJobs(signal?: AbortSignal): Promise<ListResult<V1Job>>;
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

/** One node to dispatch: its facts, its Job's name, and how to make the Job. */
export interface Target {
  /** The node. */
  node: NodeFacts;
  /** The name of the node's Job. */
  name: string;
  /**
   * Makes the node's Job (`instantiateJob`). Called when the Job is created,
   * not before: a fleet of 10,000 would otherwise hold 10,000 Jobs in memory
   * for the whole run. Called as a method (`t.job()`): the plan's is one
   * function for every target, which reads the node from `this`.
   */
  job(): V1Job;
  /** Its wave (1-based) with `--waves`/`--canary`; without, the run is one wave. */
  wave?: number;
  /**
   * Its node carries the success of this run's Job for it, kept by an
   * earlier run before its post-success work (`nodes/success_mark.ts`): when
   * the Job is gone or going (its TTL), the success is counted and the
   * post-success work done, and the Job is never created again.
   */
  keptSuccess?: boolean;
  /** When the kept success's Job ended (ms), as its mark says; its stand-in's completionTime. */
  keptEndedAt?: number;
}

/** Where the open wave stands, for the progress line and the owner Job. */
export interface WaveView {
  /** The open wave, 1-based. */
  wave: number;
  /** How many waves the run has. */
  waves: number;
  /**
   * `running`: its nodes start and run; `soaking`: they all ended and the
   * soak (`--wave-soak-secs`) runs; `holding`: the soak is over and the hold
   * after the wave (the health gates) has not yet let the next one open.
   */
  stage: "running" | "soaking" | "holding";
  /** While soaking: how long the soak still runs, in ms. */
  soakLeftMs?: number;
  /** Holding because a health gate break (or a pause) inside the soak will restart it. */
  soakInterrupted?: boolean;
}

/** One wave as the report shows it (clock ms). */
export interface WaveRecord {
  /** The wave, 1-based. */
  wave: number;
  /** Its nodes. */
  size: number;
  /** When its nodes could first start. */
  openedAt?: number;
  /** When its last node ended. */
  endedAt?: number;
  /** When its soak was to end (no soak after the last wave). */
  soakEndsAt?: number;
  /** When its soak ended. */
  soakEndedAt?: number;
  /**
   * When its soak was counted from: its last node's end (for a node counted
   * from an earlier run, its Job's `completionTime`), or the end of the last
   * gate break inside the soak.
   */
  soakFrom?: number;
  /** Each time a gate break inside the soak restarted it: when it started again, and after what. */
  soakRestarts?: { at: number; after: string }[];
  /** The gates' clean stretch the soak closed on: clean since (clock ms; -Infinity: the whole run). */
  soakCleanSince?: number;
}

/** What {@linkcode HoldAfterWave} is told when a wave ended and its soak began. */
export interface WaveEnd {
  /** The wave that ended, 1-based. */
  wave: number;
  /** How many waves the run has. */
  waves: number;
  /** When its soak ends (clock ms); the next wave opens no earlier. */
  soakEndsAt: number;
  /** Aborts when the run is stopped. */
  signal: AbortSignal;
}

/**
 * The hold after a wave: called once its nodes all ended and passed, as its
 * soak begins; the next wave opens once the soak elapsed and this resolved.
 * A string stops the rollout with that reason (the in-flight Jobs are none
 * by then). The health gates check here, throughout the soak and once more
 * at its end; without gates the engine opens the next wave when the soak ends.
 */
export type HoldAfterWave = (end: WaveEnd) => Promise<string | undefined>;

/**
 * The health gates as a soak sees them ({@linkcode SoakGate.watch}): clean
 * since when, or what breaks them now. `since` is -Infinity while no break
 * was seen in this run; `after` says what the last break was.
 */
export type GateWatch =
  | { clean: true; since: number; after?: string }
  | { clean: false; why: string };

/**
 * The health gates as the soak after a wave sees them: the soak is watched
 * cleanly, so a break inside it (a breach, latched until a person lifts it;
 * Prometheus unreachable; no data) restarts it, full length, from the
 * moment the gates are clean again. The engine asks at each pass of its
 * loop while a wave soaks; the gate wakes the loop through its pause gate.
 *
 * A gate's state machine implements it from its transitions: `since` is the
 * time of the first clean answer after its last break.
 */
export interface SoakGate {
  /** Clean since when, or what breaks the gates now. */
  watch(): GateWatch;
}

/** The waves of a dispatch (`--waves`, `--canary`); each target's wave is its `wave`. */
export interface WaveOptions {
  /** How long to hold after each wave before the next opens, in ms. @default 0 */
  soakMs?: number;
  /** The first wave came from `--canary N`: it is called the canary. */
  canary?: boolean;
  /** The hold after each wave (health gates). Default: none, the soak alone. */
  holdAfterWave?: HoldAfterWave;
  /** The gates the soak is watched by: a break inside it restarts it. Default: none. */
  soakGate?: SoakGate;
  /**
   * The API server's clock minus this one's, in ms, at least (a lower bound,
   * undefined while unknown): an earlier run's `completionTime` is the API
   * server's, and a clock ahead of it would cut a re-run's soak short.
   */
  serverClockOffsetMs?: () => number | undefined;
}

/** What the engine did, one line each. */
export type DispatchEvent =
  | { kind: "created" | "adopted" | "replaced"; node: string; job: string }
  | { kind: "succeeded"; node: string; job: string; counted?: boolean }
  | {
    kind: "failed";
    node: string;
    job: string;
    reason: string;
    counted?: boolean;
    /** It failed before its Job was created (a drain refused or timed out): no logs to read. */
    noJob?: boolean;
  }
  | { kind: "deleting"; job: string; why: string }
  | { kind: "waiting"; node: string; job: string; why: string }
  | { kind: "watch"; state: "relisted" | "polling" | "reconnected" | "watching"; detail: string }
  | { kind: "api"; state: "paused" | "resumed"; detail: string }
  | { kind: "stopped"; reason: string }
  | { kind: "stalled"; node: string; job: string; reason: string; seconds: number }
  /** A notice is a warning unless `level` says it is good news (a lifted pause). */
  | { kind: "notice"; message: string; level?: "info" }
  | { kind: "wave"; wave: number; message: string };

/** Counts at one moment of the rollout. */
export interface Progress {
  /** Nodes whose Job succeeded. */
  succeeded: number;
  /** Nodes that failed. */
  failed: number;
  /** Jobs in flight (nodes draining included). */
  inFlight: number;
  /** Nodes whose drain is under way (phase `draining`), a part of `inFlight`. */
  draining?: number;
  /** Nodes not started yet. */
  queued: number;
  /** All nodes of the run. */
  total: number;
  /** Time since the dispatch began, in ms. */
  elapsedMs: number;
  /** Nodes whose outcome is unknown (their Job was collected unseen). */
  unknown?: number;
  /** Nodes waiting for their blocking pods, or that ended blocked. */
  blocked?: number;
  /** The API outage under way, if any: starts are paused. */
  outage?: OutageView;
  /** The availability budget, as said: `unavailable 2/3 (1 in work, 1 NotReady)`. */
  budget?: string;
  /** Why starts are paused by the user (`<P>/paused`, `--pause-file`), if they are. */
  paused?: string;
  /**
   * Each node's state now, in dispatch order, built only when called: the run
   * record (`report/record.ts`) reads it at most every 10 s, while a terminal
   * gets a progress report every second that must not copy 10,000 states.
   * One node at a time, in order (65,000 views at once were 3 MB).
   */
  states?: () => Iterable<NodeStateView>;
  /**
   * What nodes in flight wait for, when they say (`node n1: Job retrying, 2
   * pod failures: …`, `node n2: post-success work … retrying: …`): a few.
   */
  waits?: string[];
  /** The open wave, with `--waves`/`--canary`. */
  wave?: WaveView;
}

/** One node's state as {@linkcode Progress.states} shows it. */
export interface NodeStateView {
  /** The node. */
  node: string;
  /** Its Job's name. */
  job: string;
  /** Where it stands. */
  state: Readonly<NodeState>;
}

/** An availability budget (`--max-unavailable`) on top of `parallelism`. */
export interface StartBudget {
  /** How many more nodes may start now, given the nodes this run works on. */
  slots(inWork: readonly string[]): number;
  /** The budget for the progress line. */
  describe(inWork: readonly string[]): string;
  /** Calls `wake` whenever a node's availability may have changed. */
  onChange(wake: () => void): void;
}

/** Where the engine reports to; `report/log.ts` implements it. */
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
  /**
   * `notStarted` and `inFlight` only occur when the run was stopped;
   * `unknown`: its Job was collected before its outcome was seen and no pod
   * was left to tell; it is not a failure. `blocked`: a blocking pod still ran
   * on it at `--blocked-timeout-secs`; it got no Job.
   */
  outcome: "succeeded" | "failed" | "unknown" | "blocked" | "notStarted" | "inFlight";
  /** Why it failed, or why its outcome is unknown. */
  reason?: string;
  /** When its Job started (ms since the epoch on the real clock). */
  startedAt?: number;
  /** When it finished. */
  finishedAt?: number;
  /** Pods its Job ran (failed + succeeded), when known. */
  attempts?: number;
  /** When its drain began and ended (`--cordon`, `--drain`), for the timeline. */
  drainStartedAt?: number;
  drainEndedAt?: number;
  /** When its Job succeeded and its post-success work began, if it had any. */
  jobEndedAt?: number;
  /** Its wave (1-based), with `--waves`/`--canary`. */
  wave?: number;
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
  /** While polling, how often a watch is tried again. @default 30000 */
  watchRetryMs?: number;
  /** How long a stale Job's deletion may take before its node fails. @default 120000 */
  staleDeleteDeadlineMs?: number;
  /**
   * Checked just before a node's Job is created; a string fails the node with
   * that reason. An outage error thrown (see `isOutage`) puts the node back
   * in the queue and pauses starts instead.
   */
  recheck?: (target: Target) => Promise<string | undefined>;
  /**
   * Checked again just before the Job of a prepared node (`prepare`) is
   * created, since a drain can take minutes: a string fails the node with
   * that reason (and `release` gives it back). It judges the node itself
   * (gone, re-created under its name, newly tainted), not its labels: the
   * run may change those on purpose.
   */
  recheckBeforeCreate?: (target: Target) => Promise<string | undefined>;
  /** The namespace of the Jobs, for the kubectl commands the engine prints. */
  namespace?: string;
  /**
   * Work before a node's Job is created, after `recheck` (cordon, drain),
   * holding the node's slot in phase `draining`; a string fails the node
   * with that reason. An outage error thrown puts the node back in the queue
   * and pauses starts: an outage during a drain never fails the node.
   */
  prepare?: (target: Target) => Promise<string | undefined>;
  /**
   * Undoes what `prepare` did to a node that gets no Job after all: it
   * failed (`failed`), or the run stopped before its Job was created
   * (`abandoned`). Its errors are its own to report.
   */
  release?: (target: Target, why: "failed" | "abandoned") => Promise<void>;
  /**
   * Work after a node's Job succeeded (labels, taints), holding the node's
   * slot until it ends; a string fails the node with that reason, an outage
   * error thrown pauses starts and the work is tried again every few
   * seconds: the success is kept, the node never goes back to the queue
   * (its Job may be gone by then, by its TTL). It also
   * runs for successes counted from an earlier run, whose work a crash may
   * have cut short. When the run is stopped meanwhile, the node is in flight.
   * `jobEndedAt` is when the node's Job succeeded (`NodeState.jobEndedAt`),
   * which the Job, gone by its TTL, may no longer say.
   */
  afterSuccess?: (target: Target, jobEndedAt: number) => Promise<string | undefined>;
  /**
   * A node whose Job of this owner failed before this run (`--retry-failed`)
   * is dispatched again: the failed Job is deleted and replaced, once.
   */
  retryFailed?: boolean;
  /**
   * A node whose Job succeeded in this run holds its slot this much longer,
   * after its post-success work, for the cluster to settle
   * (`--post-node-delay-secs`). Successes counted from an earlier run do not wait.
   */
  postNodeDelayMs?: number;
  /**
   * When the maintenance window closes (clock ms; `--window`): no Job starts
   * from then on, those in flight finish, and the rest is left for a re-run.
   */
  closesAt?: number;
  /**
   * Checked before a node is prepared and its Job created: a string names the
   * pods that block it (`--blocking-pod-selector`). A blocked node waits
   * without a slot and is checked again after `blockedRetryMs`. An outage
   * error thrown requeues it and pauses starts.
   */
  blockers?: (target: Target) => Promise<string | undefined>;
  /** A node still blocked this long after it was first blocked ends as `blocked`. */
  blockedTimeoutMs?: number;
  /** How long a blocked node waits before it is checked again. @default 5000 */
  blockedRetryMs?: number;
  /** Pause/resume by the user: no Job starts while it says paused; in flight finishes. */
  pause?: PauseGate;
  /** An availability budget: a node starts only while the budget has room. */
  budget?: StartBudget;
  /** Failed nodes tolerated; one more stops the rollout. Default: no budget. */
  maxFailures?: number;
  /**
   * Waves (`--waves`, `--canary`): the nodes of wave k+1 start only once every
   * node of wave k ended, none failed without a failure budget (a failure
   * counts against `maxFailures` with one), its soak elapsed and the hold
   * after it resolved. Each wave at most its size, `parallelism` and the
   * budget at once.
   */
  waves?: WaveOptions;
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
  /** The maintenance window closed with nodes not started. */
  windowClosed?: boolean;
  /** Each wave's size and times, with waves. */
  waves?: WaveRecord[];
}
