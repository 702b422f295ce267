/**
 * The per-node deadlines the engine checks on every pass of its loop: the
 * node timeout (`--node-timeout-secs`), the stall warning
 * (`--stall-warn-secs`), the wait for a stale Job and its deletion, and the
 * retry and timeout of a blocked node (`--blocked-timeout-secs`). Each check
 * acts through a {@linkcode DeadlineHost} that the engine implements and
 * returns the ms until it is next due, so that the loop sleeps exactly that
 * long and polls nothing.
 *
 * @module
 */

import type { NodeEvent, NodeState } from "./node_state.ts";
import type { Clock } from "../base/clock.ts";
import type { FanoutOptions, JobApi, Reporter } from "./fanout_types.ts";
import { type PodReader, STALL_AFTER_MS, STALL_REPEAT_MS, stallDue, stalledBy } from "./explain.ts";
import { checkDeletion, type StaleHost, staleWaitTimeout } from "./stale.ts";
import { isOutage, PROBE_INTERVAL_MS } from "./outage.ts";
import { errorText } from "../base/errors.ts";

/** How long a blocked node waits before it is checked again, unless told. */
const BLOCKED_RETRY_MS = 5_000;

/** What the deadline checks need from the engine. */
export interface DeadlineHost {
  /** The timeouts and intervals of the run. */
  options: Pick<
    FanoutOptions,
    | "nodeTimeoutMs"
    | "deleteTimedOut"
    | "stallAfterMs"
    | "stallRepeatMs"
    | "blockedRetryMs"
    | "blockedTimeoutMs"
    | "namespace"
  >;
  /** The Job API, to delete a timed-out Job (`--delete-timed-out`). */
  api: Pick<JobApi, "deleteJob">;
  /** Where events go. */
  reporter: Reporter;
  /** The clock. */
  clock: Clock;
  /** The pods of the Jobs, which tell why one stalls. */
  pods: Pick<PodReader, "readable" | "list">;
  /** The engine as the stale-Job work sees it, for the deletions' deadline. */
  stale: StaleHost;
  /** The names of the nodes holding a slot. */
  inFlight(): Iterable<string>;
  /** The names of the blocked nodes. */
  blocked(): Iterable<string>;
  /** The node of a Job name; undefined for a leftover of an earlier owner. */
  nodeOf(name: string): string | undefined;
  /** The state of a node. */
  state(name: string): NodeState | undefined;
  /** Sets a state as is, keeping the engine's indexes. */
  put(name: string, s: NodeState): void;
  /** Applies an event to a node's state, with facts for a final result. */
  apply(name: string, e: NodeEvent, facts?: Partial<NodeState>): void;
  /** Keeps track of work off to the side: the run waits for it before it ends. */
  track(work: Promise<void>): void;
}

/**
 * Checks the deadlines of the nodes in flight: the node timeout and stall of
 * a running Job, a stale Job's deletion, the wait for a stale Job that runs.
 *
 * @returns ms until the next one is due
 */
export function checkDeadlines(host: DeadlineHost, now: number): number {
  let nextIn = Infinity;
  for (const name of [...host.inFlight()]) {
    const s = host.state(name)!;
    if (s.phase === "running") {
      nextIn = Math.min(nextIn, expire(host, name, s, now));
      const current = host.state(name)!;
      if (current.phase === "running") {
        nextIn = Math.min(nextIn, checkStall(host, name, current, now));
      }
    } else if (s.phase === "deleting") {
      nextIn = Math.min(nextIn, checkDeletion(host.stale, name, s, now));
    } else if (s.phase === "waitingStale") {
      nextIn = Math.min(nextIn, checkStaleWait(host, name, s, now));
    }
  }
  return nextIn;
}

/**
 * Bounds the wait for a stale Job that runs: by the node timeout, and, once
 * its outcome is decided, by {@linkcode checkDecided}. The stale Job is
 * never killed.
 *
 * @returns ms until the next deadline
 */
function checkStaleWait(host: DeadlineHost, name: string, s: NodeState, now: number): number {
  const decided = s.decided ? checkDecided(host, name, s, now) : Infinity;
  const timeout = host.options.nodeTimeoutMs;
  const current = host.state(name);
  if (current?.phase !== "waitingStale" || !timeout || host.nodeOf(name) === undefined) {
    return decided;
  }
  const wait = staleWaitTimeout(name, current, now, timeout);
  if ("left" in wait) return Math.min(decided, wait.left);
  host.apply(name, { type: "fail", reason: wait.reason });
  return Infinity;
}

/**
 * Gives up on a stale Job whose outcome is decided but whose final condition
 * has not come within the deletions' deadline: its pods are still
 * terminating, which on an unreachable node lasts until the node returns or
 * is deleted. The Job is left as it is, never deleted unfinished; its node
 * fails, naming it; a leftover is only reported and forgotten.
 *
 * @returns the ms left, or Infinity once given up
 */
function checkDecided(host: DeadlineHost, name: string, s: NodeState, now: number): number {
  const { deadlineMs } = host.stale;
  const left = s.decided!.at + deadlineMs - now;
  if (left > 0) return left;
  const final = s.decided!.condition === "SuccessCriteriaMet" ? "Complete" : "Failed";
  const reason = `stale Job ${name} has ${s.decided!.condition} but not ${final} within ` +
    `${deadlineMs / 1000} s: its pods are still terminating (a node unreachable?); ` +
    "it was left and not replaced";
  if (host.nodeOf(name) === undefined) {
    host.reporter.event({ kind: "notice", message: reason });
    host.stale.drop(name);
  } else host.apply(name, { type: "fail", reason });
  return Infinity;
}

/** Fails a running node past the node timeout; returns ms until its deadline. */
function expire(host: DeadlineHost, name: string, s: NodeState, now: number): number {
  const timeout = host.options.nodeTimeoutMs;
  if (timeout === undefined) return Infinity;
  const left = s.startedAt! + timeout - now;
  if (left > 0) return left;
  host.apply(name, { type: "fail", reason: `timeout: not finished within ${timeout / 1000} s` });
  if (host.options.deleteTimedOut) host.track(deleteTimedOut(host, name, s.uid!));
  return Infinity;
}

/**
 * Deletes a timed-out Job (`--delete-timed-out`), tracked so that the run
 * waits for it: retried through an outage until the deletions' deadline,
 * said "deleting" once the API server took it, and when it cannot be, a
 * warning names the kubectl command that does it by hand.
 */
async function deleteTimedOut(host: DeadlineHost, name: string, uid: string): Promise<void> {
  const { signal, deadlineMs } = host.stale;
  const deadline = host.clock.now() + deadlineMs;
  while (true) {
    try {
      await host.api.deleteJob(name, uid);
      host.reporter.event({ kind: "deleting", job: name, why: "it timed out" });
      return;
    } catch (e) {
      const late = host.clock.now() + PROBE_INTERVAL_MS > deadline;
      if (isOutage(e) && !late && !signal.aborted) {
        await host.clock.sleep(PROBE_INTERVAL_MS, signal);
        continue;
      }
      const ns = host.options.namespace ? ` -n ${host.options.namespace}` : "";
      host.reporter.event({
        kind: "notice",
        message: `cannot delete timed-out Job ${name} (${errorText(e)}); it still runs: ` +
          `kubectl delete job ${name}${ns}`,
      });
      return;
    }
  }
}

/**
 * Reports a Job whose pod is still Pending long after it started, with the
 * pod's own reason, instead of letting it look busy until a deadline.
 *
 * @returns ms until the node is due for its next check
 */
function checkStall(host: DeadlineHost, name: string, s: NodeState, now: number): number {
  if (!host.pods.readable) return Infinity;
  const { stallAfterMs, stallRepeatMs } = host.options;
  const repeat = stallRepeatMs ?? STALL_REPEAT_MS;
  const left = stallDue(s, now, stallAfterMs ?? STALL_AFTER_MS, repeat);
  if (left > 0) return left;
  host.put(name, { ...s, stallCheckedAt: now });
  host.track(
    host.pods.list(name).then((pods) => {
      const current = host.state(name);
      if (!pods || current?.phase !== "running" || current.uid !== s.uid) return;
      const reason = stalledBy(pods);
      if (reason === undefined) return;
      const seconds = Math.round((host.clock.now() - s.startedAt!) / 1000);
      host.reporter.event({
        kind: "stalled",
        node: host.nodeOf(name)!,
        job: name,
        reason,
        seconds,
      });
    }),
  );
  return repeat;
}

/** What becomes of a blocked node now: see {@linkcode blockedVerdict}. */
export type BlockedVerdict =
  | { type: "blockedTimeout"; reason: string }
  | { type: "unblock" }
  | { waitMs: number };

/**
 * What becomes of a blocked node at `now`: it ends as still blocked past
 * `timeoutMs` from when it was first found blocked; it goes back to the queue
 * to be checked again `retryMs` after it was last found blocked; else it
 * waits.
 *
 * @example
 * ```ts
 * blockedVerdict({ phase: "blocked", since: 0, blockedAt: 0, reason: "pod a" }, 6_000, 5_000, undefined);
 * // { type: "unblock" }
 * ```
 */
export function blockedVerdict(
  s: NodeState,
  now: number,
  retryMs: number,
  timeoutMs: number | undefined,
): BlockedVerdict {
  if (timeoutMs !== undefined && s.blockedAt! + timeoutMs <= now) {
    return {
      type: "blockedTimeout",
      reason: `still blocked after ${timeoutMs / 1000} s: ${s.reason}`,
    };
  }
  if (s.since + retryMs <= now) return { type: "unblock" };
  return { waitMs: s.since + retryMs - now };
}

/**
 * Sends blocked nodes back to the queue once their wait is over, or ends
 * them as blocked past the timeout.
 *
 * @returns ms until the next is due
 */
export function checkBlocked(host: DeadlineHost, now: number): number {
  let nextIn = Infinity;
  const retry = host.options.blockedRetryMs ?? BLOCKED_RETRY_MS;
  for (const name of [...host.blocked()]) {
    const verdict = blockedVerdict(host.state(name)!, now, retry, host.options.blockedTimeoutMs);
    if ("waitMs" in verdict) nextIn = Math.min(nextIn, verdict.waitMs);
    else if (verdict.type === "unblock") host.apply(name, verdict);
    else host.apply(name, verdict, { finishedAt: now });
  }
  return nextIn;
}
