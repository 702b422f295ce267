/**
 * kubectl drain's rules, without I/O: which of a node's pods are evicted,
 * which stay, and which stop the drain, each with the reason the user reads
 * (k8s.io/kubectl/pkg/drain/filters.go); and what an answer of the Eviction
 * API means for the drain.
 *
 * @module
 */

import type { V1Pod } from "@kubernetes/client-node";
import { matchesLabels, type Requirement } from "../nodes/label_selector.ts";

/** What the drain does with a pod, as the filters decide. */
export interface DrainOptions {
  /** Evict pods with emptyDir volumes (`--delete-emptydir-data`). @default false */
  deleteEmptyDirData: boolean;
  /** Evict pods that declare no controller (`--force`). @default false */
  force: boolean;
  /** Only pods this selector matches are drained (`--pod-selector`); the rest stay. */
  podSelector?: { text: string; requirements: Requirement[] };
  /**
   * Leave alone pods deleted more than this many seconds ago, which a node
   * that is down will never finish (kubectl's `--skip-wait-for-delete-timeout`).
   * @default 0 (off)
   */
  skipDeletedAfterSecs?: number;
  /** The current time in ms, for `skipDeletedAfterSecs`. */
  now?: number;
}

/**
 * One filter's decision: keep the pod in the eviction list (with a warning
 * that goes to the user when evicting it is worth saying), skip it (it stays
 * on the node) or refuse to drain the node because of it.
 */
export type FilterVerdict =
  | { action: "keep"; warning?: string }
  | { action: "skip"; reason: string }
  | { action: "refuse"; reason: string };

/** A named drain rule, as kubectl's `PodFilter`. */
export type PodFilter = (pod: V1Pod, opts: DrainOptions) => FilterVerdict;

/** A pod the drain leaves alone or refuses, and why. */
export interface PodReason {
  /** The pod. */
  pod: V1Pod;
  /** Why, as the user reads it. */
  reason: string;
}

/** What draining a node will do to its pods. */
export interface DrainPlan {
  /** The pods to evict, in the order given. */
  evict: V1Pod[];
  /** Warnings about evicted pods, e.g. "deleting Pods with local storage: ns/p". */
  warnings: string[];
  /** The pods that stay on the node. */
  skipped: PodReason[];
  /** The pods that forbid the drain: while any is here, nothing is evicted. */
  refused: PodReason[];
}

/** The annotation the kubelet puts on the API's copy of a static pod. */
export const MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror";

const KEEP: FilterVerdict = { action: "keep" };

/** `ns/name` of a pod, as kubectl names pods in drain messages. */
export function podRef(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
}

/**
 * Whether a pod is already on its way out (`deletionTimestamp` set): the
 * drain sends it no eviction, only waits for it to go. An eviction of it
 * would say nothing: the API server lets every such pod go without asking
 * its PodDisruptionBudget (eviction.go `canIgnorePDB`). The run's drain and
 * `--dry-run=plan`'s preview both read this, so the plan sends what the run sends.
 */
export function terminating(pod: V1Pod): boolean {
  return !!pod.metadata?.deletionTimestamp;
}

function finished(pod: V1Pod): boolean {
  return pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
}

function controllerOf(pod: V1Pod) {
  return pod.metadata?.ownerReferences?.find((r) => r.controller);
}

/**
 * Pods outside `--pod-selector` stay. kubectl passes the selector to its
 * LIST, so it decides before every other rule; so does this filter.
 */
export function podSelectorFilter(pod: V1Pod, opts: DrainOptions): FilterVerdict {
  if (!opts.podSelector || matchesLabels(opts.podSelector.requirements, pod.metadata?.labels)) {
    return KEEP;
  }
  return { action: "skip", reason: `not selected by --pod-selector ${opts.podSelector.text}` };
}

/** Pods deleted longer ago than `skipDeletedAfterSecs` stay: waiting for them would hang. */
export function skipDeletedFilter(pod: V1Pod, opts: DrainOptions): FilterVerdict {
  const limit = opts.skipDeletedAfterSecs ?? 0;
  const deleted = pod.metadata?.deletionTimestamp;
  if (limit <= 0 || !deleted) return KEEP;
  const age = ((opts.now ?? Date.now()) - new Date(deleted).getTime()) / 1000;
  return age > limit
    ? { action: "skip", reason: `pod has DeletionTimestamp older than ${limit} seconds` }
    : KEEP;
}

/**
 * DaemonSet pods stay: the DaemonSet controller ignores `spec.unschedulable`
 * and would put them straight back, so evicting them only disrupts. This is
 * `kubectl drain --ignore-daemonsets`; without it kubectl refuses the node,
 * which would make every node with a DaemonSet undrainable. Unlike kubectl,
 * the DaemonSet is not read to find orphans (that needs `get daemonsets`): an
 * orphaned DaemonSet pod stays too.
 */
export function daemonSetFilter(pod: V1Pod, _opts: DrainOptions): FilterVerdict {
  const ref = controllerOf(pod);
  if (!ref || ref.kind !== "DaemonSet" || ref.apiVersion !== "apps/v1" || finished(pod)) {
    return KEEP;
  }
  return { action: "skip", reason: "ignoring DaemonSet-managed Pods" };
}

/** Mirror pods stay: they are the kubelet's copy of a static pod and cannot be evicted. */
export function mirrorPodFilter(pod: V1Pod, _opts: DrainOptions): FilterVerdict {
  return pod.metadata?.annotations?.[MIRROR_POD_ANNOTATION] === undefined
    ? KEEP
    : { action: "skip", reason: "mirror pod of a static pod (managed by the kubelet)" };
}

/** A running pod with emptyDir data loses it when evicted: only with `--delete-emptydir-data`. */
export function localStorageFilter(pod: V1Pod, opts: DrainOptions): FilterVerdict {
  if (!pod.spec?.volumes?.some((v) => v.emptyDir) || finished(pod)) return KEEP;
  return opts.deleteEmptyDirData
    ? { action: "keep", warning: "deleting Pods with local storage" }
    : {
      action: "refuse",
      reason: "Pods with local storage (use --delete-emptydir-data to override)",
    };
}

/** A running pod without a controller is never recreated: only with `--force`. */
export function unreplicatedFilter(pod: V1Pod, opts: DrainOptions): FilterVerdict {
  if (finished(pod) || controllerOf(pod)) return KEEP;
  return opts.force
    ? { action: "keep", warning: "deleting Pods that declare no controller" }
    : { action: "refuse", reason: "Pods that declare no controller (use --force to override)" };
}

/** The filters in kubectl's order; the first that does not keep a pod decides. */
export const DRAIN_FILTERS: readonly PodFilter[] = [
  podSelectorFilter,
  skipDeletedFilter,
  daemonSetFilter,
  mirrorPodFilter,
  localStorageFilter,
  unreplicatedFilter,
];

/**
 * Sorts a node's pods into those to evict, those that stay and those that
 * forbid the drain. A refused pod's reason reads as kubectl's error:
 * `cannot delete Pods with local storage (use --delete-emptydir-data to override): ns/p`.
 *
 * @example
 * ```ts
 * const pod = { metadata: { namespace: "ns", name: "p" }, spec: { containers: [] } };
 * planDrain([pod], { deleteEmptyDirData: false, force: false }).refused[0].reason;
 * // "cannot delete Pods that declare no controller (use --force to override): ns/p"
 * ```
 */
export function planDrain(pods: readonly V1Pod[], opts: DrainOptions): DrainPlan {
  const plan: DrainPlan = { evict: [], warnings: [], skipped: [], refused: [] };
  const warned = new Map<string, string[]>();
  for (const pod of pods) {
    let warning: string | undefined;
    let verdict: FilterVerdict = KEEP;
    for (const filter of DRAIN_FILTERS) {
      verdict = filter(pod, opts);
      if (verdict.action !== "keep") break;
      warning = verdict.warning ?? warning;
    }
    if (verdict.action === "skip") plan.skipped.push({ pod, reason: verdict.reason });
    else if (verdict.action === "refuse") {
      plan.refused.push({ pod, reason: `cannot delete ${verdict.reason}: ${podRef(pod)}` });
    } else {
      plan.evict.push(pod);
      if (warning) warned.set(warning, [...warned.get(warning) ?? [], podRef(pod)]);
    }
  }
  plan.warnings = [...warned].map(([w, refs]) => `${w}: ${refs.join(", ")}`);
  return plan;
}

/**
 * The refusals of a plan in one line, grouped by reason as kubectl prints
 * them: `cannot delete Pods with local storage (…): a/p, a/q; cannot delete …`.
 */
export function describeRefusals(refused: readonly PodReason[]): string {
  const byReason = new Map<string, string[]>();
  for (const { pod, reason } of refused) {
    const head = reason.slice(0, reason.length - podRef(pod).length - 2);
    byReason.set(head, [...byReason.get(head) ?? [], podRef(pod)]);
  }
  return [...byReason].map(([head, refs]) => `${head}: ${refs.join(", ")}`).join("; ");
}

/** The parts of an API answer to an eviction (or delete) that decide what it means. */
export interface EvictionAnswer {
  /** HTTP status; 0 when the server was not reached; 2xx when the request succeeded. */
  status: number;
  /** The Status message. */
  message?: string;
  /** The Status's `details.causes`. */
  causes?: { reason?: string; message?: string }[];
  /** The answer's `Retry-After`, in ms. */
  retryAfterMs?: number;
}

/**
 * What an eviction answer means for the drain:
 * - `evicted`: the pod is on its way out (wait for it to go);
 * - `gone`: it is already gone, or was replaced under its name (404, or 409 on the UID precondition);
 * - `blocked`: a PodDisruptionBudget allows no disruption now; retry until the drain timeout;
 * - `retry`: the API server could not answer now (throttled by Priority and
 *   Fairness, 5xx, unreachable, a namespace being deleted): send it again after
 *   `afterMs` (the server's `Retry-After`) at the drain's pace, never a reason
 *   to fail the node;
 * - `refused`: retrying cannot help (several PDBs cover the pod, forbidden, invalid).
 */
export type EvictionVerdict =
  | { kind: "evicted" }
  | { kind: "gone" }
  | { kind: "blocked"; budget?: string; detail: string; message: string }
  | { kind: "retry"; message: string; afterMs?: number }
  | { kind: "refused"; message: string };

/** The message of the API server's 429 when a PodDisruptionBudget forbids the eviction. */
export const PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget.";

/** The 500 message of an eviction when more than one PodDisruptionBudget covers the pod. */
export const MULTIPLE_PDBS =
  "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/**
 * Interprets the API server's answer to evicting `pod`
 * (k8s.io/kubernetes/pkg/registry/core/pod/storage/eviction.go): a 429 with a
 * `DisruptionBudget` cause names the budget in the cause's message ("The
 * disruption budget web-pdb needs 2 healthy pods and has 2 currently"), and a
 * budget lives in the pod's namespace.
 *
 * @example
 * ```ts
 * interpretEviction(
 *   { metadata: { namespace: "shop", name: "web-1" } },
 *   { status: 429, message: PDB_VIOLATION, causes: [{ reason: "DisruptionBudget",
 *     message: "The disruption budget web needs 2 healthy pods and has 2 currently" }] },
 * ).kind; // "blocked"
 * ```
 */
export function interpretEviction(pod: V1Pod, answer: EvictionAnswer): EvictionVerdict {
  const { status } = answer;
  const message = answer.message ?? "";
  if (status >= 200 && status < 300) return { kind: "evicted" };
  if (status === 404 || status === 409) return { kind: "gone" };
  const budgetCause = answer.causes?.find((c) => c.reason === "DisruptionBudget");
  if (status === 429 && (budgetCause || message === PDB_VIOLATION)) {
    const detail = budgetCause?.message ?? message;
    const name = detail.match(/^The disruption budget (\S+) /)?.[1];
    const budget = name ? `${pod.metadata?.namespace}/${name}` : undefined;
    return {
      kind: "blocked",
      budget,
      detail,
      message: `blocked by PodDisruptionBudget ${budget ?? "(unnamed)"}: ${detail}`,
    };
  }
  if (status === 500 && message === MULTIPLE_PDBS) {
    return {
      kind: "refused",
      message: `cannot evict ${podRef(pod)}: more than one PodDisruptionBudget covers it, ` +
        "which the Eviction API refuses; make one budget select it",
    };
  }
  // Evicting in a namespace being deleted is forbidden until the namespace
  // controller deletes the pod, which it will: kubectl waits, so do we.
  const terminating = answer.causes?.some((c) => c.reason === "NamespaceTerminating");
  if (status === 403 && terminating) {
    return pod.metadata?.deletionTimestamp
      ? { kind: "evicted" }
      : { kind: "retry", message: `namespace of ${podRef(pod)} is terminating: ${message}` };
  }
  // Throttling (a 429 without a budget's cause), a server error, no answer:
  // kubectl drain retries a 429 every 5 s until its timeout and client-go
  // honours Retry-After; an eviction is safe to send again (the UID
  // precondition, and 404/409 for a pod already gone).
  if (status === 0 || status === 429 || status >= 500) {
    const what = status === 429
      ? "throttled by the API server (429)"
      : `answered ${status || "nothing"}`;
    const retry: EvictionVerdict = {
      kind: "retry",
      message: `cannot evict ${podRef(pod)}: ${what}: ${message}`,
    };
    if (answer.retryAfterMs !== undefined) retry.afterMs = answer.retryAfterMs;
    return retry;
  }
  return { kind: "refused", message: `cannot evict ${podRef(pod)}: ${message}` };
}

/** What a drain that ran out of time knows. */
export interface DrainTimeout {
  /** `--drain-timeout-secs`. */
  timeoutSecs: number;
  /** The last verdict of each pod whose eviction a budget blocked. */
  blocked: readonly { pod: V1Pod; verdict: EvictionVerdict }[];
  /** The pods to evict that are still on the node (terminating or not). */
  remaining: readonly V1Pod[];
}

/**
 * The reason a node fails when its drain runs out of time, naming each
 * PodDisruptionBudget that blocked (once, with the server's own account of
 * it) and the pods still on the node, so that the user knows whom to ask.
 *
 * @example
 * ```ts
 * drainTimeoutReason({ timeoutSecs: 10, blocked: [], remaining: [] });
 * // "drain did not finish within 10 s"
 * ```
 */
export function drainTimeoutReason(d: DrainTimeout): string {
  const budgets = new Map<string, string>();
  for (const { verdict } of d.blocked) {
    if (verdict.kind === "blocked") budgets.set(verdict.budget ?? "(unnamed)", verdict.detail);
  }
  const parts = [`drain did not finish within ${d.timeoutSecs} s`];
  for (const [budget, detail] of budgets) {
    parts.push(`blocked by PodDisruptionBudget ${budget} (${detail})`);
  }
  if (d.remaining.length) {
    const refs = d.remaining.map((p) =>
      `${podRef(p)}${p.metadata?.deletionTimestamp ? " (terminating)" : ""}`
    );
    parts.push(`pods still on the node: ${refs.join(", ")}`);
  }
  return parts.join("; ");
}
