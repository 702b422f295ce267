/**
 * **maintenance/** owns what is done to a node around its Job: cordon, drain,
 * eviction, the availability budget and the windows. It declares its
 * configuration in `config.ts` and knows no flag; it imports `nodes/`,
 * `kube/`, `base/` and `job.ts`, never `engine/`, `report/`, `run/` or `cli/`.
 *
 * The node maintenance around each Job (`--cordon`, `--drain`,
 * `--uncordon-on-failure`): the I/O the engine's `prepare` and `release`
 * hooks call. What is evicted and what an answer means is decided in
 * `drain.ts`; who may uncordon in `cordon.ts`.
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { cordonNode, type CordonTarget, uncordonNode } from "./cordon.ts";
import {
  describeRefusals,
  type DrainOptions,
  drainTimeoutReason,
  type EvictionVerdict,
  planDrain,
  podRef,
} from "./drain.ts";
import { evictPod, podsOnNode } from "./evict.ts";
import { ApiError, isRetryable, type Kube, paths } from "../kube/client.ts";
import type { DrainConfig, PodSelector } from "./config.ts";
import type { Log } from "../base/log.ts";

/** Options of {@linkcode Maintenance}. */
export interface NodeMaintenanceOptions {
  /** The API client. */
  kube: Kube;
  /** The annotation key `<P>/cordoned-by`. */
  annotation: string;
  /** This run's identity on the nodes it cordons (see {@linkcode CordonTarget.runId}). */
  runId: string;
  /** Drain after the cordon; undefined: cordon only. */
  drain?: DrainConfig;
  /** Lift this run's cordon of a node that failed. */
  uncordonOnFailure: boolean;
  /** Says what happened (a node cordoned by others, eviction warnings, an uncordon that failed). */
  warn: (message: string) => void;
  /**
   * Says what a drain does, a line per event as kubectl drain prints them
   * (cordoned, evicting pod, a budget refusing, uncordoned), with fields for
   * the JSON log. Without it the lines go to `warn`: a drain that says
   * nothing for minutes reads as a hang.
   */
  log?: Log;
  /** Aborts on SIGINT/SIGTERM: a drain under way gives up. */
  signal: AbortSignal;
  /** The clock. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** How often a drain re-lists the node's pods and retries blocked evictions. @default 2000 */
  retryMs?: number;
}

/**
 * How often a node's drain repeats that a budget still refuses: kubectl says
 * it every 5 s per pod, which for a thousand blocked nodes would be a flood.
 */
export const REFUSAL_REPEAT_MS = 30_000;

/** A node, as the engine's targets name it. */
export interface MaintainedNode {
  /** The node's name. */
  name: string;
  /** The node's UID as selected. */
  uid: string;
}

/**
 * Cordons and drains nodes before their Job, and uncordons after: only the
 * nodes this run cordoned, and a failed one only with `--uncordon-on-failure`
 * (otherwise it stays cordoned; the recorder writes the reason to
 * `<P>/error`).
 */
export class Maintenance {
  #o: NodeMaintenanceOptions;
  #clock: Clock;

  #log: Log;

  constructor(opts: NodeMaintenanceOptions) {
    this.#o = opts;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    this.#log = opts.log ?? { info: (m) => opts.warn(m), warn: (m) => opts.warn(m) };
  }

  #target(node: MaintainedNode): CordonTarget {
    return { name: node.name, uid: node.uid, annotation: this.#o.annotation, runId: this.#o.runId };
  }

  /**
   * Cordons the node, then drains it; a string is why the node fails.
   *
   * @throws {ApiError} an outage (the engine pauses and requeues the node)
   */
  async prepare(node: MaintainedNode): Promise<string | undefined> {
    const cordon = await cordonNode(this.#o.kube, this.#target(node));
    if (cordon.outcome === "cordoned") {
      this.#log.info(`node ${node.name}: cordoned`, { event: "cordoned", node: node.name });
    }
    if (cordon.outcome === "others") {
      this.#o.warn(
        `node ${node.name} was cordoned already${
          cordon.by ? ` by ${cordon.by}` : ""
        }: it stays cordoned after its Job`,
      );
    }
    if (!this.#o.drain) return undefined;
    return await this.#drain(node.name, this.#o.drain);
  }

  /**
   * Evicts the node's pods by kubectl drain's rules until none of them is
   * left; a PodDisruptionBudget's refusal is retried until the drain timeout.
   */
  async #drain(node: string, flags: DrainConfig): Promise<string | undefined> {
    const { kube, signal } = this.#o;
    const deadline = this.#clock.now() + flags.timeoutSecs * 1000;
    const opts: DrainOptions = {
      deleteEmptyDirData: flags.deleteEmptyDirData,
      force: flags.force,
      podSelector: flags.podSelector,
    };
    const plan = planDrain(await podsOnNode(kube, node), opts);
    if (plan.refused.length) {
      return `drain refused: ${describeRefusals(plan.refused)}`;
    }
    for (const w of plan.warnings) this.#o.warn(`node ${node}: ${w}`);
    const evict = {
      gracePeriodSecs: flags.gracePeriodSecs,
      disableEviction: flags.disableEviction,
    };
    const wanted = new Set(plan.evict.map((p) => p.metadata?.uid));
    const asked = new Set<string | undefined>();
    const blocked = new Map<string | undefined, { pod: V1Pod; verdict: EvictionVerdict }>();
    let remaining = plan.evict;
    let saidAt = -Infinity;
    while (!signal.aborted) {
      for (const pod of remaining) {
        const uid = pod.metadata?.uid;
        if (asked.has(uid) || pod.metadata?.deletionTimestamp) continue;
        if (!blocked.has(uid)) this.#evicting(node, pod, flags.disableEviction);
        const verdict = await evictPod(kube, pod, evict);
        if (verdict.kind === "evicted" || verdict.kind === "gone") {
          asked.add(uid);
          blocked.delete(uid);
        } else if (verdict.kind === "blocked") {
          blocked.set(uid, { pod, verdict });
          if (this.#clock.now() - saidAt >= REFUSAL_REPEAT_MS) {
            saidAt = this.#clock.now();
            this.#refused(node, pod, verdict, deadline);
          }
        } else if (verdict.kind === "refused") return `drain refused: ${verdict.message}`;
        else {
          // An outage: the engine pauses and requeues the node, never fails it.
          throw new ApiError({
            status: 0,
            reason: "Unavailable",
            verb: "create",
            resource: "pods/eviction",
            message: verdict.message,
          });
        }
      }
      // The pods meant that are still bound to the node (a pod recreated
      // under the same name elsewhere is another UID).
      remaining = (await podsOnNode(kube, node)).filter((p) => wanted.has(p.metadata?.uid));
      if (!remaining.length) return undefined;
      if (this.#clock.now() >= deadline) {
        return drainTimeoutReason({
          timeoutSecs: flags.timeoutSecs,
          blocked: [...blocked.values()],
          remaining,
        });
      }
      await this.#clock.sleep(this.#o.retryMs ?? 2000, signal);
    }
    return undefined;
  }

  /** Says that `pod` is being evicted (or deleted), as kubectl drain does. */
  #evicting(node: string, pod: V1Pod, deleted: boolean): void {
    const fields = { event: deleted ? "deleting" : "evicting", node, pod: podRef(pod) };
    this.#log.info(`node ${node}: ${fields.event} pod ${podRef(pod)}`, fields);
  }

  /** Says which budget refuses an eviction and until when the drain retries. */
  #refused(node: string, pod: V1Pod, v: EvictionVerdict & { kind: "blocked" }, deadline: number) {
    const left = Math.max(0, Math.round((deadline - this.#clock.now()) / 1000));
    this.#log.warn(
      `node ${node}: cannot evict pod ${podRef(pod)}: ${v.message} ` +
        `(retrying, ${left} s left of --drain-timeout-secs)`,
      { event: "evictionBlocked", node, pod: podRef(pod), pdb: v.budget, detail: v.detail },
    );
  }

  /** Lifts this run's cordon; says so when there was one to lift. */
  async #uncordon(node: MaintainedNode): Promise<void> {
    const r = await uncordonNode(this.#o.kube, this.#target(node));
    if (r.outcome === "uncordoned") {
      this.#log.info(`node ${node.name}: uncordoned`, { event: "uncordoned", node: node.name });
    }
  }

  /**
   * Lifts this run's cordon after the node's Job succeeded; a string fails
   * the node (it stays cordoned, which is safe, and says so).
   *
   * @throws {ApiError} an outage: the engine queues the node again, finds its
   * Job Complete and uncordons it then
   */
  async afterSuccess(node: MaintainedNode): Promise<string | undefined> {
    try {
      await this.#uncordon(node);
      return undefined;
    } catch (e) {
      if (isRetryable(e)) throw e;
      return `cannot uncordon node ${node.name} after its Job succeeded: ${(e as Error).message}`;
    }
  }

  /**
   * A node that gets no Job after all: an abandoned one (the run stopped)
   * is always given back; a failed one only with `--uncordon-on-failure`.
   */
  async release(node: MaintainedNode, why: "failed" | "abandoned"): Promise<void> {
    if (why === "failed" && !this.#o.uncordonOnFailure) return;
    try {
      await this.#uncordon(node);
    } catch (e) {
      this.#o.warn(`Cannot uncordon node ${node.name}: ${(e as Error).message}`);
    }
  }
}

/**
 * The pods on `node` that block its Job (`--blocking-pod-selector`, each
 * selector a label selector the API server applies): those not finished, in
 * one line, or undefined when none runs. Needs `list pods` cluster-wide.
 *
 * @throws {ApiError} when the list fails under the retry policy
 */
export async function blockingPods(
  kube: Kube,
  node: string,
  selectors: readonly PodSelector[],
): Promise<string | undefined> {
  const parts: string[] = [];
  for (const sel of selectors) {
    const query = { fieldSelector: `spec.nodeName=${node}`, labelSelector: sel.text };
    const pods = (await kube.list<V1Pod>(paths.allPods(), query, 100)).items
      .filter((p) => p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed");
    if (pods.length) {
      parts.push(`pods ${pods.map(podRef).join(", ")} match --blocking-pod-selector ${sel.text}`);
    }
  }
  return parts.length ? parts.join("; ") : undefined;
}
