/**
 * Starting one node, in named steps: re-read and claim it, check its blocking
 * pods, prepare it (cordon, drain), create its Job, and sort out a Job of its
 * name that exists already. A step that cannot go on has already applied
 * what happened (failed, blocked, requeued by an outage); the engine's state
 * is reached only through a {@linkcode StartHost} it implements, as stale.ts
 * does, so every step is tested with plain functions.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { classifyJob, type RunIdentity } from "../job.ts";
import { ApiError } from "../kube/client.ts";
import type { NodeEvent, NodeState } from "./node_state.ts";
import { isOutage, PROBE_INTERVAL_MS } from "./outage.ts";
import type { Clock } from "../base/clock.ts";
import type { FanoutOptions, JobApi, Reporter, Target } from "./fanout_types.ts";
import { errorText } from "../base/errors.ts";

/** What the start of a node needs from the engine. */
export interface StartHost {
  /** The Job API. */
  api: Pick<JobApi, "createJob" | "getJob">;
  /** Where events go. */
  reporter: Reporter;
  /** The clock. */
  clock: Clock;
  /** The run's identity, to tell its Jobs from others'. */
  run: RunIdentity;
  /** Aborts on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** Re-reads and claims the node: a reason when it may not start. */
  recheck?: FanoutOptions["recheck"];
  /** Re-reads a prepared node just before its create: a reason when it may not get its Job. */
  recheckBeforeCreate?: FanoutOptions["recheckBeforeCreate"];
  /** Names a pod that blocks the node (`--blocking-pod-selector`). */
  blockers?: FanoutOptions["blockers"];
  /** Prepares the node (cordon, drain): a reason when it cannot be. */
  prepare?: FanoutOptions["prepare"];
  /** Gives a prepared node back. */
  release?: FanoutOptions["release"];
  /** Whether nothing more may start: aborted, stopped, or the window closed. */
  halted(): boolean;
  /** The state of the node of a Job name. */
  state(name: string): NodeState | undefined;
  /** Applies an event to a node's state. */
  apply(name: string, e: NodeEvent): void;
  /**
   * A start begun at `began` met an outage: the node is queued again, starts
   * pause; `prepared`: it goes back cordoned (and drained), to be given back
   * if the run ends before it starts again.
   */
  outageHit(name: string, e: unknown, began: number, prepared?: boolean): void;
  /** A request begun at `began` met an outage: starts pause; the node keeps its state. */
  outageFailed(e: unknown, began: number): void;
  /** No new node starts from now on, for `reason`; those in flight finish. */
  stop(reason: string): void;
  /** A request succeeded: an outage, if any, is over. */
  ok(): void;
  /** Keeps track of work off to the side. */
  track(work: Promise<void>): void;
  /** This run created `job`, the Job of `name`: the engine records it and looks for it in its cache. */
  created(name: string, job: V1Job): void;
  /** A Job of the node's name exists and is ours or stale: count, adopt or replace it. */
  meet(name: string, job: V1Job): void;
  /**
   * Our Job, read after its create went unanswered: adopted as this run's,
   * finished or being deleted (it ran on the node).
   */
  adopt(name: string, job: V1Job): void;
}

/**
 * Whether an error is a permission this run lacks: a 403 other than a
 * namespace being deleted or an admission webhook's denial. Waiting does not
 * heal it, and every node would meet it in turn. A webhook denies with the
 * code its policy chooses (Gatekeeper's is 403, the API server's
 * `admission webhook "…" denied the request` message says whose), and a
 * policy may be about this node alone: it is the node's own Job or node
 * write refused, which fails that node, not the run.
 */
function forbidden(e: unknown): e is ApiError {
  if (!(e instanceof ApiError) || e.status !== 403) return false;
  if (/\badmission webhook "[^"]*" denied the request/.test(e.message)) return false;
  return !(e.causes ?? []).some((c) => c.reason === "NamespaceTerminating");
}

/**
 * A request the node's start needs was refused (403): no new node starts,
 * for a refusal would fail node after node; this node is given back (its
 * cordon undone) and waits in the queue, not failed.
 */
function refused(host: StartHost, t: Target, e: ApiError, prepared: boolean): void {
  host.stop(
    `the API server refused a request the run needs (${errorText(e)}); ` +
      "grant it (see the README's RBAC) and run again",
  );
  if (prepared && host.release) host.track(host.release(t, "abandoned"));
  host.apply(t.name, { type: "requeue" });
}

/**
 * Whether `job` is ours to adopt for its node, as {@linkcode classifyJob}
 * says, a deletion under way aside: after a lost create answer the Job may
 * already be going by its `ttlSecondsAfterFinished`, and it still ran on the
 * node.
 */
export function adoptable(job: V1Job, run: RunIdentity, nodeUid?: string): boolean {
  const metadata = { ...job.metadata, deletionTimestamp: undefined };
  return classifyJob({ ...job, metadata }, run, nodeUid) === "current";
}

/**
 * Starts a node whose state is `creating`: each step in turn, until one
 * cannot go on or its Job is created.
 */
export async function startNode(host: StartHost, t: Target): Promise<void> {
  if (!await recheckNode(host, t)) return;
  if (host.blockers && !await unblocked(host, t, host.blockers)) return;
  const prepared = !!host.prepare && !host.halted();
  if (prepared && !await prepareNode(host, t, host.prepare!)) return;
  if (host.halted()) {
    // Never leave a node worse than found: a node cordoned and drained for
    // a Job that will not come is given back.
    if (host.prepare && host.release) host.track(host.release(t, "abandoned"));
    return host.apply(t.name, { type: "requeue" });
  }
  // A drain can take --drain-timeout-secs: the node may have been deleted,
  // re-created under its name or tainted meanwhile, and a Job pinned by
  // nodeName would go to whatever node has the name now.
  if (prepared && !await recheckBeforeCreate(host, t)) return;
  await createJob(host, t, prepared);
}

/**
 * Re-reads a prepared node just before its create; whether it may go on. A
 * reason fails it, and the node is given back (uncordoned) first, whatever
 * `--uncordon-on-failure` says: it got no Job, so nothing of a task is left
 * on it to inspect, and the cordon is only the run's.
 */
async function recheckBeforeCreate(host: StartHost, t: Target): Promise<boolean> {
  if (!host.recheckBeforeCreate) return true;
  const began = host.clock.now();
  let why: string | undefined;
  try {
    why = await host.recheckBeforeCreate(t);
  } catch (e) {
    if (forbidden(e)) refused(host, t, e, true);
    else if (isOutage(e)) host.outageHit(t.name, e, began, true);
    else why = `cannot re-read node ${t.node.name} before its Job: ${errorText(e)}`;
    if (!why) return false;
  }
  if (!why) return true;
  if (host.release) host.track(host.release(t, "abandoned"));
  host.apply(t.name, { type: "fail", reason: why });
  return false;
}

/** Re-reads and claims the node; whether it may go on. */
async function recheckNode(host: StartHost, t: Target): Promise<boolean> {
  const began = host.clock.now();
  let why: string | undefined;
  try {
    why = await host.recheck?.(t);
  } catch (e) {
    if (forbidden(e)) {
      refused(host, t, e, false);
      return false;
    }
    if (isOutage(e)) {
      host.outageHit(t.name, e, began);
      return false;
    }
    why = `cannot re-read node ${t.node.name}: ${errorText(e)}`;
  }
  if (why) host.apply(t.name, { type: "fail", reason: why });
  return !why;
}

/** Whether no pod of `--blocking-pod-selector` runs on the node; else it waits, blocked. */
async function unblocked(
  host: StartHost,
  t: Target,
  blockers: NonNullable<StartHost["blockers"]>,
): Promise<boolean> {
  const began = host.clock.now();
  try {
    const blocking = await blockers(t);
    if (!blocking) return true;
    host.apply(t.name, { type: "blocked", reason: blocking });
  } catch (e) {
    if (forbidden(e)) refused(host, t, e, false);
    else if (isOutage(e)) host.outageHit(t.name, e, began);
    else {
      host.apply(t.name, {
        type: "fail",
        reason: `cannot list the pods of node ${t.node.name}: ${errorText(e)}`,
      });
    }
  }
  return false;
}

/** Prepares the node (cordon, drain) while it holds its slot; whether it may go on. */
async function prepareNode(
  host: StartHost,
  t: Target,
  prepare: NonNullable<StartHost["prepare"]>,
): Promise<boolean> {
  host.apply(t.name, { type: "prepare" });
  const began = host.clock.now();
  let why: string | undefined;
  try {
    why = await prepare(t);
  } catch (e) {
    if (forbidden(e)) {
      // Half prepared (cordoned, maybe partly drained): given back.
      refused(host, t, e, true);
      return false;
    }
    if (isOutage(e)) {
      host.outageHit(t.name, e, began, true);
      return false;
    }
    why = `cannot prepare node ${t.node.name}: ${errorText(e)}`;
  }
  if (why) {
    host.apply(t.name, { type: "fail", reason: why });
    return false;
  }
  host.apply(t.name, { type: "prepared" });
  return true;
}

/** Creates the node's Job; a Job of its name that exists already is met instead. */
async function createJob(host: StartHost, t: Target, prepared: boolean): Promise<void> {
  const { name } = t;
  let created: V1Job;
  const began = host.clock.now();
  const job = t.job();
  try {
    created = await host.api.createJob(job);
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return await resolveConflict(host, t);
    if (e instanceof ApiError && e.uncertain) {
      const ttl = job.spec?.ttlSecondsAfterFinished;
      return await resolveLost(host, t, e, { began, ttlMs: ttl === undefined ? ttl : ttl * 1000 });
    }
    if (forbidden(e)) return refused(host, t, e, prepared);
    if (isOutage(e)) return host.outageHit(name, e, began, prepared);
    return host.apply(name, { type: "fail", reason: `cannot create Job ${name}: ${errorText(e)}` });
  }
  host.ok();
  const replaced = host.state(name)!.replaced;
  host.apply(name, { type: "created", uid: created.metadata!.uid! });
  host.reporter.event({ kind: replaced ? "replaced" : "created", node: t.node.name, job: name });
  host.created(name, created);
}

/** A Job of the node's name already exists: ours, stale, or someone else's. */
async function resolveConflict(host: StartHost, t: Target): Promise<void> {
  const { name } = t;
  const began = host.clock.now();
  let existing: V1Job | undefined;
  try {
    existing = await host.api.getJob(name);
  } catch (e) {
    if (isOutage(e)) return host.outageHit(name, e, began);
    return host.apply(name, {
      type: "fail",
      reason: `cannot read existing Job ${name}: ${errorText(e)}`,
    });
  }
  // Deleted between our create and our read: try again in the next slot.
  if (!existing) return host.apply(name, { type: "requeue" });
  // An unsure node's own Job, landed late: adopted, not replaced.
  if (host.state(name)?.unsure && adoptable(existing, host.run, t.node.uid)) {
    return host.adopt(name, existing);
  }
  if (!notOurs(host, name, existing)) host.meet(name, existing);
}

/**
 * A create whose answer was lost (a timeout, a 504) may have made the Job:
 * it is resolved by reading, never by sending it again blind. The node keeps
 * its slot and reads the Job by name until the API answers: ours is adopted
 * (finished or being deleted, it ran on the node); none means the create
 * was not stored, and the node is created again in its next slot. Until
 * then the node is `unsure`: the watch adopts a Job of ours it shows.
 *
 * None proves nothing once `ttlSecondsAfterFinished` has passed since the
 * create was sent: the Job may have been stored, run and collected by the
 * TTL controller while the answer and the reads were lost (and the watch,
 * broken meanwhile, relisted without it). Its outcome is then unknown, and
 * it is never created a second time.
 */
async function resolveLost(
  host: StartHost,
  t: Target,
  lost: ApiError,
  sent: { began: number; ttlMs?: number },
): Promise<void> {
  const { began, ttlMs } = sent;
  const { name } = t;
  host.apply(name, { type: "unsure" });
  host.outageFailed(lost, began);
  while (true) {
    const readAt = host.clock.now();
    let job: V1Job | undefined;
    try {
      job = await host.api.getJob(name);
    } catch (e) {
      if (!isOutage(e)) {
        const reason = `cannot read Job ${name} after its create went unanswered ` +
          `(${errorText(lost)}): ${errorText(e)}`;
        return host.apply(name, { type: "fail", reason });
      }
      host.outageFailed(e, readAt);
      await host.clock.sleep(PROBE_INTERVAL_MS, host.signal);
      if (host.signal.aborted) return;
      continue;
    }
    // The watch may have shown the Job and adopted it meanwhile.
    const s = host.state(name);
    if (s?.phase !== "creating" || s.uid) return;
    // Only an answer that never came (a cut connection, a 504 "may still be
    // processing") can hide a Job that ran and was collected; a 500 or 503 the
    // API server answered (a failing admission webhook) stored nothing, and
    // counting it as collected would end every node of an outage unknown.
    const unanswered = lost.status === 0 || lost.status === 504;
    if (!job && unanswered && ttlMs !== undefined && host.clock.now() - began >= ttlMs) {
      const reason = `its create went unanswered (${errorText(lost)}) and no Job ${name} ` +
        `exists ${Math.round((host.clock.now() - began) / 1000)} s later, past its ` +
        "ttlSecondsAfterFinished: it may have run and been collected, so it is not created " +
        "again; see the node, then run again";
      return host.apply(name, { type: "collected", reason });
    }
    // A read that answers proves reads work, not creates: with no Job stored
    // the outage goes on, and its probe sends the next create. Resuming here
    // asked a webhook that answers 500 to every create again at once, in a loop.
    if (!job) return host.apply(name, { type: "requeue" });
    host.ok();
    if (adoptable(job, host.run, t.node.uid)) return host.adopt(name, job);
    if (!notOurs(host, name, job)) host.meet(name, job);
    return;
  }
}

/** Fails the node when `job` is not ours; whether it did. */
function notOurs(host: StartHost, name: string, job: V1Job): boolean {
  if (classifyJob(job, host.run) !== "notOurs") return false;
  host.apply(name, {
    type: "fail",
    reason: `a Job named ${name} exists without label ${host.run.keys.owner}; ` +
      "it is not ours and is left alone: delete it or choose another --name-prefix",
  });
  return true;
}
