/**
 * Pure node admission: which selected nodes a Job template may run on, judged
 * the way the DaemonSet controller judges them. No I/O.
 *
 * @module
 */

import { stringify } from "yaml";
import type {
  V1Node,
  V1NodeSelectorRequirement,
  V1NodeSelectorTerm,
  V1PodSpec,
  V1Taint,
  V1Toleration,
} from "@kubernetes/client-node";
import { DAEMONSET_TOLERATIONS } from "../job.ts";

const HOST_NETWORK_TOLERATION: V1Toleration = {
  key: "node.kubernetes.io/network-unavailable",
  operator: "Exists",
  effect: "NoSchedule",
};

/**
 * Whether `toleration` tolerates `taint`, with Kubernetes' rules: an empty
 * effect matches every effect, an empty key with `Exists` matches every key,
 * `Exists` ignores the value and `Equal` (the default) compares it.
 *
 * @example
 * ```ts
 * toleratesTaint({ operator: "Exists" }, { key: "a", effect: "NoSchedule" }); // true
 * ```
 */
export function toleratesTaint(toleration: V1Toleration, taint: V1Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  const op = toleration.operator ?? "Equal";
  if (!toleration.key) return op === "Exists";
  if (toleration.key !== taint.key) return false;
  if (op === "Exists") return true;
  return op === "Equal" && (toleration.value ?? "") === (taint.value ?? "");
}

/**
 * The tolerations a per-node pod effectively has: the template's, plus the
 * ones the DaemonSet controller would add.
 */
export function effectiveTolerations(podSpec: V1PodSpec): V1Toleration[] {
  return [
    ...(podSpec.tolerations ?? []),
    ...DAEMONSET_TOLERATIONS,
    ...(podSpec.hostNetwork ? [HOST_NETWORK_TOLERATION] : []),
  ];
}

/**
 * The first taint of `node` that keeps a pod with `tolerations` off it, or
 * undefined. Only `NoSchedule` and `NoExecute` keep a pod off; a
 * `PreferNoSchedule` taint is a preference the scheduler may ignore.
 */
export function blockingTaint(node: V1Node, tolerations: V1Toleration[]): V1Taint | undefined {
  return (node.spec?.taints ?? []).find((t) =>
    (t.effect === "NoSchedule" || t.effect === "NoExecute") &&
    !tolerations.some((tol) => toleratesTaint(tol, t))
  );
}

/** A node left out by taint admission, with the taint that kept it out. */
export interface SkippedNode {
  /** The node. */
  node: V1Node;
  /** The taint the template does not tolerate. */
  taint: V1Taint;
}

/**
 * Splits nodes into those the template's tolerations admit and those a taint
 * keeps out, as the DaemonSet controller would.
 *
 * @example
 * ```ts
 * const { admitted, skipped } = partitionByTolerations(nodes, podSpec);
 * ```
 */
export function partitionByTolerations(
  nodes: V1Node[],
  podSpec: V1PodSpec,
): { admitted: V1Node[]; skipped: SkippedNode[] } {
  const tolerations = effectiveTolerations(podSpec);
  const admitted: V1Node[] = [];
  const skipped: SkippedNode[] = [];
  for (const node of nodes) {
    const taint = blockingTaint(node, tolerations);
    if (taint) skipped.push({ node, taint });
    else admitted.push(node);
  }
  return { admitted, skipped };
}

/** Formats a taint as kubectl does: `key=value:Effect`. */
export function formatTaint(taint: V1Taint): string {
  return `${taint.key}${taint.value ? `=${taint.value}` : ""}:${taint.effect}`;
}

/**
 * The `tolerations:` YAML that would admit every one of `taints`, to print
 * when taints kept every matched node out.
 *
 * @example
 * ```ts
 * tolerationsYamlFor([{ key: "gpu", value: "true", effect: "NoSchedule" }]);
 * // "tolerations:\n  - key: gpu\n    operator: Equal\n    value: \"true\"\n    effect: NoSchedule\n"
 * ```
 */
export function tolerationsYamlFor(taints: V1Taint[]): string {
  const seen = new Set<string>();
  const tolerations: V1Toleration[] = [];
  for (const t of taints) {
    const id = formatTaint(t);
    if (seen.has(id)) continue;
    seen.add(id);
    tolerations.push(
      t.value
        ? { key: t.key, operator: "Equal", value: t.value, effect: t.effect }
        : { key: t.key, operator: "Exists", effect: t.effect },
    );
  }
  return stringify({ tolerations }, { defaultStringType: "QUOTE_DOUBLE", defaultKeyType: "PLAIN" });
}

function requirementMatches(req: V1NodeSelectorRequirement, value: string | undefined): boolean {
  const values = req.values ?? [];
  switch (req.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      // Kubernetes parses both sides with strconv.ParseInt: "5.15" or "12abc"
      // is no number, and then the requirement does not match.
      const integer = /^[-+]?\d+$/;
      if (value === undefined || values.length !== 1) return false;
      if (!integer.test(value) || !integer.test(values[0])) return false;
      const [have, want] = [Number.parseInt(value, 10), Number.parseInt(values[0], 10)];
      return req.operator === "Gt" ? have > want : have < want;
    }
    default:
      return false;
  }
}

function termMatches(term: V1NodeSelectorTerm, node: V1Node): boolean {
  const labels = node.metadata?.labels ?? {};
  const fields: Record<string, string | undefined> = { "metadata.name": node.metadata?.name };
  const exprs = term.matchExpressions ?? [];
  const fieldExprs = term.matchFields ?? [];
  // An empty term matches nothing, as in the scheduler.
  if (exprs.length === 0 && fieldExprs.length === 0) return false;
  return exprs.every((r) => requirementMatches(r, labels[r.key])) &&
    fieldExprs.every((r) => requirementMatches(r, fields[r.key]));
}

/**
 * Why the template's `nodeSelector` or required node affinity excludes `node`,
 * or undefined when it does not. A pod pinned with `nodeName` skips the
 * scheduler, and the kubelet then rejects a pod whose selector does not match
 * its node, so such a Job could only fail.
 */
export function affinityMismatch(podSpec: V1PodSpec, node: V1Node): string | undefined {
  const labels = node.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(podSpec.nodeSelector ?? {})) {
    if (labels[k] !== v) return `nodeSelector ${k}=${v} does not match`;
  }
  const required = podSpec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required && !required.nodeSelectorTerms.some((t) => termMatches(t, node))) {
    return "required node affinity does not match";
  }
  return undefined;
}

/**
 * Merges the nodes listed by several selectors into one list without
 * duplicates, ordered by name so that every run dispatches in the same order.
 */
export function unionByName(lists: V1Node[][]): V1Node[] {
  const byName = new Map<string, V1Node>();
  for (const list of lists) {
    for (const n of list) byName.set(n.metadata!.name!, n);
  }
  return [...byName.values()].sort((a, b) =>
    a.metadata!.name! < b.metadata!.name! ? -1 : a.metadata!.name! > b.metadata!.name! ? 1 : 0
  );
}
