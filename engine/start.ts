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
import { isOutage } from "./outage.ts";
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
  /** Re-reads and claims the node: a reason when it may not start. */
  recheck?: FanoutOptions["recheck"];
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
  /** A start begun at `began` met an outage: the node is queued again, starts pause. */
  outageHit(name: string, e: unknown, began: number): void;
  /** A request succeeded: an outage, if any, is over. */
  ok(): void;
  /** Keeps track of work off to the side. */
  track(work: Promise<void>): void;
  /** This run created `job`, the Job of `name`: the engine records it and looks for it in its cache. */
  created(name: string, job: V1Job): void;
  /** A Job of the node's name exists and is ours or stale: count, adopt or replace it. */
  meet(name: string, job: V1Job): void;
}

/**
 * Starts a node whose state is `creating`: each step in turn, until one
 * cannot go on or its Job is created.
 */
export async function startNode(host: StartHost, t: Target): Promise<void> {
  if (!await recheckNode(host, t)) return;
  if (host.blockers && !await unblocked(host, t, host.blockers)) return;
  if (host.prepare && !host.halted() && !await prepareNode(host, t, host.prepare)) return;
  if (host.halted()) {
    // Never leave a node worse than found: a node cordoned and drained for
    // a Job that will not come is given back.
    if (host.prepare && host.release) host.track(host.release(t, "abandoned"));
    return host.apply(t.name, { type: "requeue" });
  }
  await createJob(host, t);
}

/** Re-reads and claims the node; whether it may go on. */
async function recheckNode(host: StartHost, t: Target): Promise<boolean> {
  const began = host.clock.now();
  let why: string | undefined;
  try {
    why = await host.recheck?.(t);
  } catch (e) {
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
    if (isOutage(e)) host.outageHit(t.name, e, began);
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
    if (isOutage(e)) {
      host.outageHit(t.name, e, began);
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
async function createJob(host: StartHost, t: Target): Promise<void> {
  const { name } = t;
  let created: V1Job;
  const began = host.clock.now();
  try {
    created = await host.api.createJob(t.job());
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return await resolveConflict(host, t);
    if (isOutage(e)) return host.outageHit(name, e, began);
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
  if (classifyJob(existing, host.run, t.node.uid) === "notOurs") {
    return host.apply(name, {
      type: "fail",
      reason: `a Job named ${name} exists without label ${host.run.keys.owner}; ` +
        "it is not ours and is left alone: delete it or choose another --name-prefix",
    });
  }
  host.meet(name, existing);
}
