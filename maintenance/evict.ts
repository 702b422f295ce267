/**
 * Evicting (or, with `--disable-eviction`, deleting) one pod, and listing a
 * node's pods: the I/O of a drain. What the answers mean is decided in
 * `drain.ts`.
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";
import { type EvictionVerdict, interpretEviction } from "./drain.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";

/** How a pod is removed. */
export interface EvictOptions {
  /** Seconds the pod gets to terminate; undefined: its own terminationGracePeriodSeconds. */
  gracePeriodSecs?: number;
  /** DELETE the pod instead of evicting it: PodDisruptionBudgets are not consulted. @default false */
  disableEviction?: boolean;
  /**
   * Send it with `dryRun=All`: the API server judges it (a budget's 429
   * included) and stores nothing, as `kubectl drain --dry-run=server`.
   * @default false
   */
  dryRun?: boolean;
}

/**
 * The DeleteOptions of an eviction or deletion. The precondition on the
 * pod's UID makes sure that a pod recreated under the same name (a
 * StatefulSet's, perhaps already on another node) is never the one removed:
 * the server answers 409 and the pod meant is known to be gone.
 */
export function deleteOptions(pod: V1Pod, opts: EvictOptions): Record<string, unknown> {
  const options: Record<string, unknown> = {
    apiVersion: "v1",
    kind: "DeleteOptions",
    preconditions: { uid: pod.metadata?.uid },
  };
  if (opts.gracePeriodSecs !== undefined) options.gracePeriodSeconds = opts.gracePeriodSecs;
  return options;
}

/**
 * The policy/v1 Eviction that asks the API server to evict `pod`.
 *
 * @example
 * ```ts
 * evictionOf({ metadata: { namespace: "ns", name: "p", uid: "u" } }, { gracePeriodSecs: 30 }).kind;
 * // "Eviction"
 * ```
 */
export function evictionOf(pod: V1Pod, opts: EvictOptions): Record<string, unknown> {
  return {
    apiVersion: "policy/v1",
    kind: "Eviction",
    metadata: { namespace: pod.metadata?.namespace, name: pod.metadata?.name },
    deleteOptions: deleteOptions(pod, opts),
  };
}

/**
 * Evicts one pod through `POST …/pods/NAME/eviction` (or deletes it) and
 * says what the answer means. The request is sent once, outside the
 * client's retry policy: a PodDisruptionBudget's 429 is retried by the drain
 * until its own timeout, and the 500 of a pod under several budgets can
 * never succeed; throttling, a server error or no answer comes back as
 * `retry` (with the server's `Retry-After`), for the drain to send again.
 *
 * @throws only what is not an API answer (a bug)
 */
export async function evictPod(
  kube: Kube,
  pod: V1Pod,
  opts: EvictOptions,
): Promise<EvictionVerdict> {
  const ns = pod.metadata?.namespace ?? "";
  const name = pod.metadata?.name ?? "";
  const dry = opts.dryRun ? "?dryRun=All" : "";
  try {
    if (opts.disableEviction) {
      const path = paths.pod(ns, name) + dry;
      await kube.request("delete", "DELETE", path, deleteOptions(pod, opts), true);
    } else {
      const path = paths.eviction(ns, name) + dry;
      await kube.request("create", "POST", path, evictionOf(pod, opts), true);
    }
    return interpretEviction(pod, { status: 201 });
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const message = e.message.replace(`Cannot ${e.verb} ${e.resource}: `, "");
    return interpretEviction(pod, {
      status: e.status,
      message,
      causes: e.causes,
      retryAfterMs: e.retryAfterMs,
    });
  }
}

/**
 * Lists every pod bound to a node, in all namespaces, as kubectl drain
 * does (`spec.nodeName` field selector; needs `list pods` cluster-wide).
 *
 * @throws {ApiError} when the list fails under the retry policy
 */
export async function podsOnNode(kube: Kube, node: string, pageSize = 500): Promise<V1Pod[]> {
  const query = { fieldSelector: `spec.nodeName=${node}` };
  return (await kube.list<V1Pod>(paths.allPods(), query, pageSize)).items;
}
