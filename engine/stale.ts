/**
 * Stale Jobs: a Job of a node's name that an earlier run, owner, node or
 * template left. What the engine does with one on first sight, and when a
 * node that waits on one gives up, are pure decisions; the foreground
 * deletion of a finished one, and the failure of its node when that deletion
 * hangs, run here through a {@linkcode StaleHost} that the engine implements.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import {
  classifyJob,
  type Disposition,
  interpretStatus,
  type JobOutcome,
  type RunIdentity,
  stillRuns,
} from "../job.ts";
import type { NodeEvent, NodeState } from "./node_state.ts";
import { isOutage } from "./outage.ts";
import { deletionHolds } from "../nodes/pods.ts";
import type { Clock } from "../base/clock.ts";
import type { JobApi, Reporter } from "./fanout_types.ts";
import { errorText } from "../base/errors.ts";

/**
 * How long the deletion of a stale Job may take before its node fails. A
 * finished Job's pods are gone or terminate in seconds; two minutes more
 * means something holds it (a finalizer, a pod on an unreachable node), which
 * waiting longer would not cure, and the node's slot is needed.
 */
export const STALE_DELETE_DEADLINE_MS = 120_000;

/** How long a deletion that met an outage waits before it is sent again. */
const OUTAGE_RETRY_MS = 5_000;

/** What the engine knows of a Job on its first LIST, for {@linkcode firstSight}. */
export interface Sighting {
  /** Whose the Job is ({@linkcode classifyJob}), judged against the node of its name if any. */
  disposition: Disposition;
  /** A node of this run has the Job's name. */
  target: boolean;
  /** The Job is an earlier run's failure that `--retry-failed` replaces. */
  retry: boolean;
  /** The Job still runs (`stillRuns`). */
  runs: boolean;
  /** What its conditions say (`interpretStatus`). */
  phase: JobOutcome["phase"];
  /** The run has an owner Job: Jobs of other owners are its leftovers. */
  owned: boolean;
}

/**
 * What a run does with the Job it finds for one of its nodes (or `start`
 * when there is none, or it is not ours): `adopt` a running one of ours (it
 * holds a slot, is not run again), count one of ours that `succeeded` or
 * `failed` (not run again), `retry` an earlier failure (`--retry-failed`:
 * deleted, then a new Job), `replace` a finished stale one, or `waitStale`:
 * wait for a stale one that still runs, then replace it. The engine's first
 * sight, `--dry-run=plan` and `status` all read it from here.
 */
export type JobAction =
  | "start"
  | "adopt"
  | "succeeded"
  | "failed"
  | "retry"
  | "replace"
  | "waitStale";

/**
 * The {@linkcode JobAction} for a sighted Job of one of the run's nodes.
 *
 * @example
 * ```ts
 * actionOn({ disposition: "current", retry: false, runs: false, phase: "succeeded" }); // "succeeded"
 * ```
 */
export function actionOn(s: Pick<Sighting, "disposition" | "retry" | "runs" | "phase">): JobAction {
  if (s.disposition === "notOurs") return "start";
  // Never deleted mid-run: for node maintenance a Job killed midway can leave the node broken.
  if (s.disposition === "stale") return s.runs ? "waitStale" : "replace";
  if (s.retry) return "retry";
  return s.phase === "active" ? "adopt" : s.phase;
}

/** Whether `job` is an earlier failure that `--retry-failed` replaces (a Job of this run never is). */
export function retriesFailed(job: V1Job, retryFailed: boolean | undefined): boolean {
  return !!retryFailed && interpretStatus(job).phase === "failed";
}

/**
 * What a run of `run` does with `job`, the Job of its node's name: the same
 * sighting the engine makes on its first LIST.
 *
 * @param nodeUid the node's UID now (a Job made for another UID is stale)
 * @param retryFailed `--retry-failed`
 */
export function jobAction(
  job: V1Job | undefined,
  run: RunIdentity,
  o: { nodeUid?: string; retryFailed?: boolean },
): JobAction {
  if (!job) return "start";
  return actionOn(sightingOf(job, run, o.nodeUid, retriesFailed(job, o.retryFailed)));
}

/** The engine's facts of a Job on first sight, whose node (if any) is `nodeUid`. */
export function sightingOf(
  job: V1Job,
  run: RunIdentity,
  nodeUid: string | undefined,
  retry: boolean,
): Pick<Sighting, "disposition" | "retry" | "runs" | "phase"> {
  return {
    disposition: classifyJob(job, run, nodeUid),
    retry,
    runs: stillRuns(job),
    phase: interpretStatus(job).phase,
  };
}

/** The actions a first sight meets at once (counted, adopted, or waited for). */
const MET_AT_ONCE: ReadonlySet<JobAction> = new Set(["adopt", "succeeded", "failed", "waitStale"]);

/** What the engine does with a Job on its first LIST. */
export interface FirstSight {
  /**
   * A leftover of an earlier owner, whose node is no longer selected: it
   * joins the queue, to be deleted.
   */
  leftover: boolean;
  /** Met at once (counted, adopted, or waited for while it runs). */
  meet: boolean;
}

/**
 * What the engine does with a Job on its first LIST: ours is counted or
 * adopted at once; a stale one that still runs is waited for from now, since
 * its pods run and hold the node; a finished stale one, and a failure to
 * retry, wait in the queue, since their deletion takes a slot.
 *
 * @example
 * ```ts
 * firstSight({
 *   disposition: "stale", target: false, retry: false, runs: true, phase: "active", owned: true,
 * });
 * // { leftover: true, meet: true }
 * ```
 */
export function firstSight(s: Sighting): FirstSight {
  if (s.target) return { leftover: false, meet: MET_AT_ONCE.has(actionOn(s)) };
  // Leftovers of an earlier owner go even when their node is no longer
  // selected: their pods would count against nobody's parallelism.
  const leftover = s.disposition === "stale" && s.owned;
  return { leftover, meet: leftover && s.runs };
}

/**
 * Whether a node waiting for a running stale Job has waited past the node
 * timeout. The stale Job is never killed: the node fails and the Job is left
 * running.
 *
 * @returns the ms left, or the node's failure reason once none are
 */
export function staleWaitTimeout(
  name: string,
  s: NodeState,
  now: number,
  timeoutMs: number,
): { left: number } | { reason: string } {
  const left = s.since + timeoutMs - now;
  if (left > 0) return { left };
  return {
    reason: `timeout: stale Job ${name} of an earlier run still ran after ${
      timeoutMs / 1000
    } s; it was left running and not replaced`,
  };
}

/** What the stale-Job work needs from the engine. */
export interface StaleHost {
  /** The Job API. */
  api: Pick<JobApi, "getJob" | "deleteJob">;
  /** Where events go. */
  reporter: Reporter;
  /** The clock. */
  clock: Clock;
  /** Aborts on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** How long a deletion may take before the node fails. */
  deadlineMs: number;
  /** The state of the node (or leftover) of a Job name. */
  state(name: string): NodeState | undefined;
  /** Sets a state as is, keeping the engine's indexes. */
  put(name: string, s: NodeState): void;
  /** Applies an event to a state. */
  apply(name: string, e: NodeEvent): void;
  /** Forgets a leftover. */
  drop(name: string): void;
  /** Whether a node of this run has the name (else it is a leftover). */
  isTarget(name: string): boolean;
  /** A request succeeded: an outage, if any, is over. */
  ok(): void;
  /** A request begun at `began` met an outage. */
  outage(e: unknown, began: number): void;
  /** The pods of a Job, or undefined when they cannot be read. */
  listPods(name: string): Promise<V1Pod[] | undefined>;
  /** Keeps track of work off to the side, which fails the node if it throws. */
  track(work: Promise<void>, name: string): void;
}

/**
 * Deletes a finished stale Job in the foreground; the node waits in
 * `deleting` (holding its slot) until the Job is gone or the deadline
 * passes. An outage only delays the request.
 */
export async function deleteStale(
  host: StaleHost,
  name: string,
  job: V1Job,
  why: string,
): Promise<void> {
  const uid = job.metadata!.uid!;
  host.reporter.event({ kind: "deleting", job: name, why });
  if (job.metadata?.deletionTimestamp) return;
  const began = host.clock.now();
  try {
    await host.api.deleteJob(name, uid);
    host.ok();
    // The deadline is for a deletion the server accepted, not for the time
    // the request waited behind others in the client's bound.
    const s = host.state(name);
    if (s?.phase === "deleting" && s.uid === uid) host.put(name, { ...s, since: host.clock.now() });
  } catch (e) {
    const s = host.state(name);
    if (s?.phase !== "deleting" || s.uid !== uid) return;
    if (isOutage(e)) {
      host.outage(e, began);
      // The deadline is for a deletion the server accepted: start it again.
      host.put(name, { ...s, since: host.clock.now() });
      await host.clock.sleep(OUTAGE_RETRY_MS, host.signal);
      if (!host.signal.aborted) await deleteStale(host, name, job, why);
      return;
    }
    if (!host.isTarget(name)) return host.drop(name);
    host.apply(name, {
      type: "fail",
      reason: `cannot delete stale Job ${name}: ${errorText(e)}`,
    });
  }
}

/**
 * Fails a node whose stale Job is not gone by the deadline, naming what
 * holds it: its finalizers, or its pods still terminating. A leftover is
 * only reported and forgotten.
 *
 * @returns the ms until the deadline, or Infinity once it has passed
 */
export function checkDeletion(host: StaleHost, name: string, s: NodeState, now: number): number {
  const left = s.since + host.deadlineMs - now;
  if (left > 0) return left;
  // Once: the next check comes only if the explanation is lost.
  host.put(name, { ...s, since: now });
  host.track(
    (async () => {
      const secs = host.deadlineMs / 1000;
      let finalizers: string[];
      try {
        const job = await host.api.getJob(name);
        if (job?.metadata?.uid !== s.uid) return; // gone meanwhile: the watch will say
        finalizers = job?.metadata?.finalizers ?? [];
      } catch (e) {
        finalizers = [`(cannot read the Job: ${errorText(e)})`];
      }
      const holds = deletionHolds(finalizers, (await host.listPods(name)) ?? []);
      const reason =
        `stale Job ${name} not gone within ${secs} s of its deletion: held by ${holds}`;
      const current = host.state(name);
      if (current?.phase !== "deleting" || current.uid !== s.uid) return;
      if (!host.isTarget(name)) {
        host.reporter.event({ kind: "notice", message: reason });
        return host.drop(name);
      }
      host.apply(name, { type: "fail", reason });
    })(),
    name,
  );
  return Infinity;
}

/**
 * Why a Job of a node's name is stale to this run, in words: the owner or
 * the node changed, or the template did, naming the image that changed
 * (`image of container c (a -> b)`) by comparing the stale Job's containers
 * with the ones this run would create.
 *
 * @param next the Job this run makes for the node; undefined: the node is not in this run
 * @example
 * ```ts
 * staleWhy(oldJob, () => newJob, run, "uid-1");
 * // "the template changed: image of container c (busybox -> busybox:1.37)"
 * ```
 */
export function staleWhy(
  job: V1Job,
  next: (() => V1Job) | undefined,
  run: RunIdentity,
  nodeUid?: string,
): string {
  if (!next) return "leftover of an earlier run";
  const meta = job.metadata ?? {};
  if (meta.deletionTimestamp) return "being deleted";
  if (run.owner && !(meta.ownerReferences ?? []).some((r) => r.uid === run.owner!.uid)) {
    return "made for an earlier owner (release or Job)";
  }
  const madeFor = meta.annotations?.[run.keys.nodeUid];
  if (nodeUid && madeFor && madeFor !== nodeUid) {
    return "made for an earlier node of the same name";
  }
  const change = templateChange(job, next());
  return change ? `the template changed: ${change}` : "the template changed (not its images)";
}

/**
 * The first container (init containers first) whose image differs, or that
 * was added or removed, in words; undefined when none does. The engine's
 * cache keeps of a Job's spec only its containers' and init containers'
 * names and images (`slimJob`, about 100 bytes a Job): any other change
 * (env, args, resources) is known by the hash alone.
 */
function templateChange(old: V1Job, next: V1Job): string | undefined {
  const lists = [["initContainers", "init container"], ["containers", "container"]] as const;
  for (const [field, what] of lists) {
    const was = old.spec?.template?.spec?.[field] ?? [];
    const now = next.spec?.template?.spec?.[field] ?? [];
    for (const c of now) {
      const o = was.find((x) => x.name === c.name);
      if (!o) return `${what} ${c.name} added`;
      if (o.image !== c.image) return `image of ${what} ${c.name} (${o.image} -> ${c.image})`;
    }
    const gone = was.find((o) => !now.some((c) => c.name === o.name));
    if (gone) return `${what} ${gone.name} removed`;
  }
  return undefined;
}
