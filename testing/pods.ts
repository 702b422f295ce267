/**
 * Pods for unit tests: as the scheduler leaves them, for the folders that
 * explain a stall (`engine/`, `nodes/`), and as a controller makes them, for
 * the folders that drain a node (`maintenance/`, `preview/`, `run/`).
 *
 * @module
 */

import type { V1ObjectMeta, V1OwnerReference, V1Pod } from "@kubernetes/client-node";

/**
 * A pod the scheduler could not place: Pending, with `PodScheduled=False`
 * and reason `Unschedulable`, as kube-scheduler writes it.
 *
 * @param message the scheduler's verdict
 * @example
 * ```ts
 * unschedulablePod("0/1 nodes are available").status?.phase; // "Pending"
 * ```
 */
export function unschedulablePod(message: string): V1Pod {
  return {
    status: {
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }],
    },
  };
}

/**
 * The owner reference a controller writes on the pods it makes
 * (`controller: true`): the one kubectl drain reads to tell a DaemonSet's pod
 * from a ReplicaSet's, and a pod with a controller from a bare one.
 *
 * @param kind the controller's kind, e.g. `ReplicaSet`
 * @param apiVersion its group and version
 * @example
 * ```ts
 * controllerRef("DaemonSet").controller; // true
 * ```
 */
export function controllerRef(kind: string, apiVersion = "apps/v1"): V1OwnerReference {
  return { apiVersion, kind, name: "owner", uid: "owner-uid", controller: true };
}

/** What {@linkcode pod} makes beyond the pod's name. */
export interface PodFixture {
  /**
   * The namespace.
   * @default "shop"
   */
  namespace?: string;
  /**
   * The UID (what an eviction's precondition and a drain's wait compare).
   * @default `uid-${name}`
   */
  uid?: string;
  /** The node it is bound to (`spec.nodeName`); none: unbound. */
  node?: string;
  /** Its controller: a kind in `apps/v1`, or the whole reference; none: a bare pod. */
  controller?: string | V1OwnerReference;
  /**
   * The phase.
   * @default "Running"
   */
  phase?: string;
  /** With an `emptyDir` volume: local storage a drain refuses without --delete-emptydir-data. */
  emptyDir?: boolean;
  /** More metadata, laid over the rest (labels, annotations, a deletionTimestamp, owners). */
  meta?: V1ObjectMeta;
}

/**
 * A pod with one container, as a drain reads it.
 *
 * @param name the pod's name
 * @param f its namespace, UID, node, controller, phase, volumes and metadata
 * @example
 * ```ts
 * pod("web-1", { node: "n1", controller: "ReplicaSet" }).metadata?.ownerReferences?.[0].kind; // "ReplicaSet"
 * ```
 */
export function pod(name: string, f: PodFixture = {}): V1Pod {
  const ref = typeof f.controller === "string" ? controllerRef(f.controller) : f.controller;
  return {
    metadata: {
      namespace: f.namespace ?? "shop",
      name,
      uid: f.uid ?? `uid-${name}`,
      ownerReferences: ref ? [ref] : undefined,
      ...f.meta,
    },
    spec: {
      nodeName: f.node,
      containers: [{ name: "c" }],
      volumes: f.emptyDir ? [{ name: "scratch", emptyDir: {} }] : undefined,
    },
    status: { phase: f.phase ?? "Running" },
  };
}
