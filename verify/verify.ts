/**
 * **verify/** owns node verification: after a node's Job succeeded (and,
 * where asked, the node is Ready), before it is labelled, uncordoned and
 * counted, the pods of `--verify-pod-selector` on it must be Ready with a
 * Ready transition after the Job finished, and the smoke-test Job of
 * `--verify-job-template` must succeed, all within `--verify-timeout-secs`.
 * It imports `kube/`, `base/` and `job.ts`; `run/` wires it into the
 * post-success work.
 *
 * @module
 */

import type { V1Job, V1Node, V1Pod } from "@kubernetes/client-node";
import { type NodeFacts, outcomeAt, type TrackingKeys } from "../job.ts";
import { isRetryable, type Kube, paths } from "../kube/client.ts";
import { writeMetadataMaps } from "../kube/metadata_patch.ts";
import { keptKey } from "../nodes/success_mark.ts";
import { errorText } from "../base/errors.ts";
import {
  existingSmoke,
  keptVerdict,
  podsVerdict,
  smokeState,
  verdictOf,
  verdictWrite,
} from "./rules.ts";

/** What `--verify-pod-selector`, `--verify-job-template` and `--verify-timeout-secs` ask. */
export interface VerifyConfig {
  /** Pods on the node this label selector matches must be Ready after its Job. */
  podSelector?: string;
  /** Path of the smoke-test Job's template. */
  jobTemplate?: string;
  /** How long the verification may take before the node fails. @default 600 */
  timeoutSecs: number;
}

/** What a {@linkcode NodeVerifier} needs. */
export interface VerifierOptions {
  /** The API client. */
  kube: Pick<Kube, "get" | "list" | "request">;
  /** The namespace of the Jobs. */
  namespace: string;
  /**
   * The tracking keys: the node UID and template hash annotations of a
   * smoke-test Job, and the node annotation that keeps its verdict.
   */
  keys: Pick<TrackingKeys, "nodeUid" | "templateHash" | "verified">;
  /** Says once that a verdict cannot be kept on its node. */
  warn?: (message: string) => void;
  /** What to verify. */
  config: VerifyConfig;
  /** The smoke-test Job for a node, with `--verify-job-template`. */
  smokeJob?: (node: NodeFacts) => V1Job;
  /** Aborts when the run is stopped. */
  signal: AbortSignal;
  /** How often the pods and the smoke-test Job are read. @default 2000 */
  pollMs?: number;
}

/** How often the verifier reads the pods and the smoke-test Job, by default (ms). */
export const VERIFY_POLL_MS = 2000;

/** What the verifier says when the run was stopped midway: not the node's fault. */
export const STOPPED = "the run was stopped during verification";

/**
 * Verifies nodes after their Job succeeded. Each check returns why the node
 * fails (`verification: …`), or undefined; an outage (the API unreachable,
 * 5xx, 429) is thrown, so that the engine pauses and does the post-success
 * work again instead of failing the node.
 */
export class NodeVerifier {
  #o: VerifierOptions;
  #refused = false;

  /** A verifier with its options. */
  constructor(opts: VerifierOptions) {
    this.#o = opts;
  }

  /**
   * Verifies one node whose Job succeeded: the pods, then the smoke-test
   * Job, within one deadline.
   *
   * @param jobEndedAt when the node's Job succeeded (ms since the epoch), as
   *   the engine saw it: the Job itself may be gone by its TTL
   * @throws an outage error (see `isRetryable`): the caller pauses and retries
   */
  async verify(node: NodeFacts, jobEndedAt: number): Promise<string | undefined> {
    const { config } = this.#o;
    const deadline = Date.now() + config.timeoutSecs * 1000;
    try {
      if (config.podSelector) {
        const why = await this.#pods(node.name, config.podSelector, jobEndedAt, deadline);
        if (why) return why;
      }
      if (this.#o.smokeJob) return await this.#smoke(node, jobEndedAt, deadline);
      return undefined;
    } catch (e) {
      if (this.#o.signal.aborted) return STOPPED;
      if (isRetryable(e)) throw e;
      return `verification: cannot verify node ${node.name}: ${errorText(e)}`;
    }
  }

  /** Waits until the node's pods of the selector are proven Ready, or the deadline. */
  async #pods(
    node: string,
    selector: string,
    finishedAt: number,
    deadline: number,
  ): Promise<string | undefined> {
    const query = { fieldSelector: `spec.nodeName=${node}`, labelSelector: selector };
    while (true) {
      const pods = (await this.#o.kube.list<V1Pod>(paths.allPods(), query, 100)).items;
      const verdict = podsVerdict(pods, finishedAt, selector);
      if (verdict.ok) return undefined;
      if (Date.now() >= deadline) {
        const secs = this.#o.config.timeoutSecs;
        return verdict.pod
          ? `verification: pod ${verdict.pod} not Ready after ${secs} s` +
            (verdict.why === "not Ready" ? "" : ` (${verdict.why})`)
          : `verification: ${verdict.why} on node ${node} after ${secs} s`;
      }
      if (!(await this.#sleep(deadline))) throw new Error(STOPPED);
    }
  }

  /**
   * The node's smoke-test verdict: the one kept on the node for this success
   * of its Job, else the smoke-test Job's, then kept there.
   */
  async #smoke(node: NodeFacts, finishedAt: number, deadline: number): Promise<string | undefined> {
    const job = this.#o.smokeJob!(node);
    const keys = this.#o.keys;
    const seen = await this.#node(node.name);
    const kept = seen?.metadata?.uid === node.uid
      ? keptVerdict(seen, keptKey(keys.verified, job.metadata?.name ?? ""), job, keys, finishedAt)
      : undefined;
    if (kept) return kept.failed;
    const { why, decidedAt } = await this.#runSmoke(node, job, finishedAt, deadline);
    // A timeout is not kept: the Job may yet succeed, and a re-run waits for it.
    if (seen && decidedAt !== undefined) {
      await this.#keep(seen, verdictOf(job, keys, new Date(decidedAt).toISOString(), why));
    }
    return why;
  }

  /** The node, to read and keep a verdict on; undefined when it cannot be read (said once). */
  async #node(name: string): Promise<V1Node | undefined> {
    try {
      return await this.#o.kube.get<V1Node>(paths.node(name));
    } catch (e) {
      if (isRetryable(e)) throw e;
      this.#cannotKeep(e);
      return undefined;
    }
  }

  #cannotKeep(e: unknown): void {
    if (this.#refused) return;
    this.#refused = true;
    this.#o.warn?.(
      `cannot keep smoke-test verdicts on their nodes (annotation ${this.#o.keys.verified}: ` +
        `${errorText(e)}); a run stopped before a node's post-success work ended runs its ` +
        "smoke-test Job again once the Job's TTL removed it",
    );
  }

  /**
   * Keeps a verdict on its node, before the post-success work goes on: an
   * outage is thrown (the work is done again); a refusal (no `nodes patch`,
   * a webhook) is said once, and the run goes on without it.
   */
  async #keep(node: V1Node, verdict: ReturnType<typeof verdictOf>): Promise<void> {
    // One key per smoke-test Job, as the success mark's: two rollouts
    // sharing the prefix on a node keep their verdicts apart.
    const write = verdictWrite(keptKey(this.#o.keys.verified, verdict.job), verdict);
    try {
      // Gone or replaced since: its verification says so, nothing to keep.
      await writeMetadataMaps(this.#o.kube, paths.node(node.metadata!.name!), node.metadata!.uid!, [
        write,
      ]);
    } catch (e) {
      if (isRetryable(e)) throw e;
      // 422: the patch's test of the node's UID failed, the node was replaced
      // under its name since it was read: no verdict is owed to the new one,
      // and no refusal of the write is said (as nodes/success_mark.ts).
      if ((e as { status?: number }).status === 422) return;
      this.#cannotKeep(e);
    }
  }

  /** Creates (or adopts) the node's smoke-test Job and waits for its outcome, or the deadline. */
  async #runSmoke(
    node: NodeFacts,
    job: V1Job,
    finishedAt: number,
    deadline: number,
  ): Promise<{ why?: string; decidedAt?: number }> {
    const name = job.metadata!.name!;
    const ns = this.#o.namespace;
    const secs = this.#o.config.timeoutSecs;
    let created = false;
    while (true) {
      const seen = await this.#o.kube.get<V1Job>(paths.job(ns, name));
      if (
        seen &&
        (created || existingSmoke(seen, node.uid, this.#o.keys.nodeUid, finishedAt) === "adopt")
      ) {
        created = true;
        const s = smokeState(seen);
        // When the smoke-test Job's outcome was decided, on the API server's
        // clock, as the node's Job's end the kept verdict is compared with
        // (keptVerdict): this run's clock may be a minute off the server's.
        // The Job was created after the node's Job ended (existingSmoke), so
        // its own end is after it too; "now" only when the Job says no time.
        const decidedAt = outcomeAt(seen) ?? Date.now();
        if (s.state === "succeeded") return { decidedAt };
        if (s.state === "failed") {
          return { why: `verification: job ${ns}/${name} failed: ${s.reason}`, decidedAt };
        }
      } else if (
        seen && existingSmoke(seen, node.uid, this.#o.keys.nodeUid, finishedAt) === "replace"
      ) {
        await this.#delete(name, seen.metadata!.uid!);
      } else if (!seen && created) {
        // Ours, gone before a poll saw its outcome: its TTL (shorter than the
        // poll) or a person removed it. Creating it again would run the smoke
        // test a second time for one success of the node's Job; the node
        // fails instead, naming the cause.
        return {
          why: `verification: job ${ns}/${name} was removed before its outcome was seen ` +
            `(its ttlSecondsAfterFinished must outlast two polls of ${this.#pollSecs()} s)`,
        };
      } else if (!seen) {
        created = await this.#create(job);
      }
      if (Date.now() >= deadline) {
        return {
          why: `verification: job ${ns}/${name} not succeeded after ${secs} s`,
        };
      }
      if (!(await this.#sleep(deadline))) throw new Error(STOPPED);
    }
  }

  /** Creates the smoke-test Job; false when its name is taken (it is read again). */
  async #create(job: V1Job): Promise<boolean> {
    try {
      await this.#o.kube.request("create", "POST", paths.jobs(this.#o.namespace), job);
      return true;
    } catch (e) {
      if ((e as { status?: number }).status === 409) return false;
      throw e;
    }
  }

  /** Deletes an earlier smoke-test Job (foreground, only that UID); gone or replaced is fine. */
  async #delete(name: string, uid: string): Promise<void> {
    try {
      await this.#o.kube.request("delete", "DELETE", paths.job(this.#o.namespace, name), {
        apiVersion: "v1",
        kind: "DeleteOptions",
        propagationPolicy: "Foreground",
        preconditions: { uid },
      });
    } catch (e) {
      const status = (e as { status?: number }).status;
      if (status !== 404 && status !== 409) throw e;
    }
  }

  #pollSecs(): number {
    return (this.#o.pollMs ?? VERIFY_POLL_MS) / 1000;
  }

  /** Sleeps one poll interval, or until the deadline; false when the run was stopped. */
  async #sleep(deadline: number): Promise<boolean> {
    const ms = Math.max(1, Math.min(this.#o.pollMs ?? VERIFY_POLL_MS, deadline - Date.now()));
    const signal = this.#o.signal;
    if (signal.aborted) return false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done);
    });
    return !signal.aborted;
  }
}
