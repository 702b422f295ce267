/**
 * What becomes of a node once its Job finished: the outcome is recorded at
 * once (the slot frees), a failure is explained from its pods, the
 * post-success work runs off to the side, and a Job collected unseen is
 * judged by its pods. The engine's state is reached only through a
 * {@linkcode FinishHost} it implements, as stale.ts and start.ts do.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { interpretStatus, type JobOutcome, outcomeAt } from "../job.ts";
import type { NodeEvent, NodeState } from "./node_state.ts";
import { isOutage, PROBE_INTERVAL_MS } from "./outage.ts";
import { collectedOutcome } from "../nodes/pods.ts";
import { explainedReason, failureReason, type PodReader } from "./explain.ts";
import { resultFacts } from "./outcome.ts";
import type { Clock } from "../base/clock.ts";
import type { FanoutOptions, Target } from "./fanout_types.ts";
import { errorText } from "../base/errors.ts";

/** What the end of a node's Job needs from the engine. */
export interface FinishHost {
  /** The post-success work and the pause after each node. */
  options: Pick<FanoutOptions, "afterSuccess" | "postNodeDelayMs" | "signal" | "nodeTimeoutMs">;
  /** The clock. */
  clock: Clock;
  /** The pods of the Jobs, which explain failures. */
  pods: Pick<PodReader, "readable" | "list">;
  /** The target of a node's Job name. */
  target(name: string): Target;
  /** The state of a node. */
  state(name: string): NodeState | undefined;
  /** Applies an event to a node's state, with facts for a final result; the state after. */
  apply(name: string, e: NodeEvent, facts?: Partial<NodeState>): NodeState | undefined;
  /** Keeps track of work off to the side, which fails the node if it throws. */
  track(work: Promise<void>, name: string): void;
  /** A request succeeded: an outage, if any, is over. */
  ok(): void;
  /** Work begun at `began` met an outage: starts pause; the node keeps its state. */
  outageFailed(e: unknown, began: number): void;
  /**
   * Whether a write of the run (a Job created or deleted, another node's
   * post-success work) went through after `at`.
   */
  wroteSince(at: number): boolean;
}

/** What the final result says of a Job (outcome.ts), as of now. */
function factsOf(host: FinishHost, s: NodeState, job?: V1Job, pods?: number): Partial<NodeState> {
  return resultFacts(s, { now: host.clock.now(), job, pods });
}

/**
 * Records a finished Job. A failure is explained from its pods while they
 * exist (the failing container, exit code, termination message), since the
 * Job's own condition only says BackoffLimitExceeded; the slot frees at once.
 *
 * @param counted the outcome is an earlier run's, counted, not run again
 */
export function concludeJob(host: FinishHost, name: string, job: V1Job, counted: boolean): void {
  const status = interpretStatus(job);
  const s = host.state(name)!;
  if (status.phase === "active") return;
  const { afterSuccess, postNodeDelayMs } = host.options;
  if (status.phase === "succeeded") {
    const n = host.apply(
      name,
      {
        type: "succeeded",
        afterWork: !!afterSuccess || (!counted && !!postNodeDelayMs),
        final: status.final,
        counted,
        endedAt: outcomeAt(job),
      },
      factsOf(host, { ...s, counted }, job),
    );
    // Only on the edge into finishing: a Job seen again (the watch and a read
    // of the same Job) must not run the post-success work twice.
    if (n?.phase === "finishing" && n.afterStarted && s.phase !== "finishing") {
      runAfterSuccess(host, name, job);
    }
    return;
  }
  const explain = host.pods.readable;
  host.apply(
    name,
    { type: "failed", reason: failureReason(status), explain, counted },
    factsOf(host, { ...s, counted }, job),
  );
  if (explain) host.track(explainFailure(host, name, job, status), name);
}

async function explainFailure(
  host: FinishHost,
  name: string,
  job: V1Job,
  status: JobOutcome & { phase: "failed" },
): Promise<void> {
  const pods = await host.pods.list(name);
  const reason = explainedReason(status, pods);
  const s = host.state(name)!;
  host.apply(name, { type: "explained", reason }, factsOf(host, s, job, pods?.length));
}

/**
 * Runs the post-success work off to the side: the slot stays taken until it
 * ends, so one slow node holds one slot and never stalls the others.
 */
export function runAfterSuccess(host: FinishHost, name: string, job: V1Job): void {
  host.track(afterSuccessWork(host, name, job), name);
}

/**
 * Whether an outage error is an answer: the API server (or its admission
 * webhook) answered 5xx or 429. Only an error with no answer at all (a
 * connection refused or reset, a timeout) says the API is unreachable.
 */
function answered(e: unknown): boolean {
  return ((e as { status?: number }).status ?? 0) > 0;
}

/**
 * Why the post-success work gives up, or undefined while it retries. An API
 * that cannot be reached is an outage: the work waits for it, however long.
 * So is one that answers every write 5xx or 429 (etcd down behind the API
 * server's watch cache, which goes on serving reads and watches; a server
 * shedding load): the run's other writes fail as this node's do. A write
 * refused with an answer while another write of the run went through since
 * is this node's (a node admission webhook down, `failurePolicy: Fail`,
 * answers 500 to every node write and nothing else): it fails the node once
 * it has lasted `--node-timeout-secs`. A last node with no other write to
 * compare waits, as for an outage.
 *
 * @param since when the answered failures began; undefined: none yet
 */
function givesUp(
  host: FinishHost,
  e: unknown,
  since: number | undefined,
): { since?: number; why?: string } {
  if (!answered(e)) return {};
  const now = host.clock.now();
  const first = since ?? now;
  const limit = host.options.nodeTimeoutMs;
  if (limit === undefined || now - first < limit || !host.wroteSince(first)) {
    return { since: first };
  }
  const secs = Math.round((now - first) / 1000);
  return {
    since: first,
    why: `post-success work failed for ${secs} s (--node-timeout-secs ${limit / 1000}) ` +
      `while the API server took the run's other writes: ${errorText(e)}`,
  };
}

/**
 * The post-success work, retried through an outage while the node keeps its
 * success, its slot and its place in the budget: the Job may be gone by
 * now (`ttlSecondsAfterFinished`, a foreground deletion), so "done" is never
 * derived from the Job again, and the node never goes back to the queue.
 * Retried forever while the API cannot be reached or refuses every write; a
 * write the API refuses with 5xx or 429 while it takes the run's other
 * writes fails the node at `--node-timeout-secs`.
 */
async function afterSuccessWork(host: FinishHost, name: string, job: V1Job): Promise<void> {
  const { afterSuccess, signal } = host.options;
  let why: string | undefined;
  let failingSince: number | undefined;
  while (afterSuccess) {
    const began = host.clock.now();
    try {
      const s = host.state(name)!;
      why = await afterSuccess(host.target(name), s.jobEndedAt ?? s.since);
      break;
    } catch (e) {
      if (!isOutage(e)) {
        why = `post-success work failed: ${errorText(e)}`;
        break;
      }
      host.outageFailed(e, began);
      const verdict = givesUp(host, e, failingSince);
      failingSince = verdict.since;
      if (verdict.why) {
        why = verdict.why;
        break;
      }
      const waitingFor = `post-success work (node labels, uncordon) retrying: ${errorText(e)}`;
      host.apply(name, { type: "note", waitingFor });
      await host.clock.sleep(PROBE_INTERVAL_MS, signal);
      // Stopped midway: the node is neither done nor failed, still in flight.
      if (signal.aborted) return;
    }
  }
  if (!why) host.ok(); // its node writes went through
  const delay = host.options.postNodeDelayMs;
  if (!why && delay && !host.state(name)?.counted) await host.clock.sleep(delay, signal);
  if (why && signal.aborted) return;
  const s = host.state(name)!;
  host.apply(name, { type: "afterDone", reason: why }, factsOf(host, s, job));
}

/**
 * A Job that vanished while nobody watched (collected by its TTL, or
 * deleted): its pods may still tell the outcome; else it is unknown, never
 * a failure.
 */
export async function judgeCollected(host: FinishHost, name: string, uid: string): Promise<void> {
  const pods = await host.pods.list(name) ?? [];
  const s = host.state(name);
  if (s?.phase !== "running" || s.uid !== uid) return;
  const seen = collectedOutcome(pods, uid);
  if (seen.outcome === "succeeded") {
    const done = {
      metadata: { name, uid },
      status: { conditions: [{ type: "Complete", status: "True" }] },
    };
    return concludeJob(host, name, done as V1Job, false);
  }
  const facts = factsOf(host, s, undefined, seen.outcome === "failed" ? seen.pods : undefined);
  const event: NodeEvent = seen.outcome === "failed"
    ? { type: "fail", reason: seen.reason }
    : { type: "collected", reason: seen.reason };
  host.apply(name, event, facts);
}
