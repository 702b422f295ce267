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
  drainTimeoutReason,
  type EvictionVerdict,
  planDrain,
  podRef,
  terminating,
} from "./drain.ts";
import { evictPod, podsOnNode } from "./evict.ts";
import { ApiError, isRetryable, type Kube, paths } from "../kube/client.ts";
import { type DrainConfig, drainParts, type PodSelector } from "./config.ts";
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

/** What one node's drain knows between its passes. */
interface DrainState {
  node: string;
  flags: DrainConfig;
  /** When `--drain-timeout-secs` runs out (clock ms). */
  deadline: number;
  /** The pods whose eviction (or deletion) was accepted, by UID. */
  asked: Set<string | undefined>;
  /** The last answer for each pod not yet accepted, by UID. */
  last: Map<string | undefined, { pod: V1Pod; verdict: EvictionVerdict }>;
  /** When each kind of refusal was last said. */
  saidAt: Partial<Record<EvictionVerdict["kind"], number>>;
}

/**
 * How a drain that ran out of time ends: a node fails for a budget's
 * refusals or for pods that do not leave; but when the API itself refused
 * every try of a pod that is left (throttled, 5xx, no answer), that is an
 * outage, which never fails a node: the engine pauses and requeues it.
 */
function drainEnd(d: DrainState, remaining: readonly V1Pod[]): string {
  const left = remaining.map((p) => d.last.get(p.metadata?.uid)?.verdict);
  const api = left.find((v) => v?.kind === "retry");
  if (api && !left.some((v) => v?.kind === "blocked")) {
    throw new ApiError({
      status: 0,
      reason: "Unavailable",
      verb: "create",
      resource: "pods/eviction",
      message: `${api.kind === "retry" ? api.message : ""} for ${d.flags.timeoutSecs} s`,
    });
  }
  return drainTimeoutReason({
    timeoutSecs: d.flags.timeoutSecs,
    blocked: [...d.last.values()].filter((b) => b.verdict.kind === "blocked"),
    remaining,
  });
}

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
   * left; a PodDisruptionBudget's refusal, throttling and server errors are
   * retried until the drain timeout.
   *
   * @throws {ApiError} an outage: the API refused every try until the drain
   * timeout for no budget's sake, or the pods could not be listed
   */
  async #drain(node: string, flags: DrainConfig): Promise<string | undefined> {
    const { kube, signal } = this.#o;
    const deadline = this.#clock.now() + flags.timeoutSecs * 1000;
    const plan = planDrain(await podsOnNode(kube, node), drainParts(flags).pods);
    if (plan.refused.length) {
      return `drain refused: ${describeRefusals(plan.refused)}`;
    }
    for (const w of plan.warnings) this.#o.warn(`node ${node}: ${w}`);
    const wanted = new Set(plan.evict.map((p) => p.metadata?.uid));
    const d: DrainState = { node, flags, deadline, asked: new Set(), last: new Map(), saidAt: {} };
    let remaining = plan.evict;
    while (!signal.aborted) {
      const pass = await this.#evictPass(d, remaining);
      if (typeof pass === "string") return pass;
      // The pods meant that are still bound to the node (a pod recreated
      // under the same name elsewhere is another UID).
      remaining = (await podsOnNode(kube, node)).filter((p) => wanted.has(p.metadata?.uid));
      if (!remaining.length) return undefined;
      if (this.#clock.now() >= deadline) return drainEnd(d, remaining);
      // The server's Retry-After paces the drain, but never past its own
      // deadline: a 429 asking for an hour must not hold a cordoned node
      // that long when --drain-timeout-secs says otherwise.
      const pace = Math.max(this.#o.retryMs ?? 2000, pass.afterMs);
      await this.#clock.sleep(Math.min(pace, Math.max(0, deadline - this.#clock.now())), signal);
    }
    return undefined;
  }

  /**
   * Sends each pod of `remaining` not yet on its way out its eviction once;
   * a string fails the node, else how long the API asked to wait
   * (`Retry-After`, 0 without one).
   */
  async #evictPass(
    d: DrainState,
    remaining: readonly V1Pod[],
  ): Promise<string | { afterMs: number }> {
    let afterMs = 0;
    for (const pod of remaining) {
      const uid = pod.metadata?.uid;
      if (d.asked.has(uid)) continue;
      if (terminating(pod)) {
        // On its way out: an eviction whose answer was lost (500, no answer)
        // was applied after all, so that answer says nothing of the API any
        // more; a pod slow to go is a drain timeout, as kubectl's, not an outage.
        d.last.delete(uid);
        continue;
      }
      if (!d.last.has(uid)) this.#evicting(d.node, pod, d.flags.disableEviction);
      const verdict = await evictPod(this.#o.kube, pod, drainParts(d.flags).evict);
      if (verdict.kind === "evicted" || verdict.kind === "gone") {
        d.asked.add(uid);
        d.last.delete(uid);
        continue;
      }
      if (verdict.kind === "refused") return `drain refused: ${verdict.message}`;
      d.last.set(uid, { pod, verdict });
      if (verdict.kind === "retry") afterMs = Math.max(afterMs, verdict.afterMs ?? 0);
      // kubectl says each refusal every 5 s per pod: a thousand blocked
      // nodes would flood the log, so once per REFUSAL_REPEAT_MS per kind.
      const now = this.#clock.now();
      if (now - (d.saidAt[verdict.kind] ?? -Infinity) >= REFUSAL_REPEAT_MS) {
        d.saidAt[verdict.kind] = now;
        this.#refused(d.node, pod, verdict, d.deadline);
      }
    }
    return { afterMs };
  }

  /** Says that `pod` is being evicted (or deleted), as kubectl drain does. */
  #evicting(node: string, pod: V1Pod, deleted: boolean): void {
    const fields = { event: deleted ? "deleting" : "evicting", node, pod: podRef(pod) };
    this.#log.info(`node ${node}: ${fields.event} pod ${podRef(pod)}`, fields);
  }

  /** Says which budget refuses an eviction (or that the API did), and until when the drain retries. */
  #refused(
    node: string,
    pod: V1Pod,
    v: EvictionVerdict & { kind: "blocked" | "retry" },
    deadline: number,
  ) {
    const left = Math.max(0, Math.round((deadline - this.#clock.now()) / 1000));
    const retrying = `(retrying, ${left} s left of --drain-timeout-secs)`;
    if (v.kind === "retry") {
      this.#log.warn(`node ${node}: ${v.message} ${retrying}`, {
        event: "evictionRetried",
        node,
        pod: podRef(pod),
        detail: v.message,
      });
      return;
    }
    this.#log.warn(
      `node ${node}: cannot evict pod ${podRef(pod)}: ${v.message} ${retrying}`,
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
