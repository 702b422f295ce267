/**
 * Live node selection: explicit names, or the union of label selectors (with
 * an optional field selector) listed server-side page by page, then taint
 * admission. The API server evaluates the selectors, so the dispatcher and
 * kubectl always agree on what a selector matches.
 *
 * @module
 */

import type { V1Node, V1PodSpec } from "@kubernetes/client-node";
import { ApiError, type Kube, paths } from "./kube.ts";
import { UsageError } from "./job.ts";
import {
  blockingTaint,
  effectiveTolerations,
  formatTaint,
  partitionByTolerations,
  type SkippedNode,
  unionByName,
} from "./nodes.ts";

/** How nodes are chosen. */
export interface Selection {
  /** Explicit node names; taints are not checked for them. */
  nodes?: string[];
  /** Label selectors, united. */
  labelSelectors: string[];
  /** A field selector every node must match. */
  fieldSelector?: string;
  /** Page size of LISTs. */
  pageSize: number;
  /** Admit tainted nodes too. */
  ignoreTaints: boolean;
}

/** The outcome of one resolution of the selection. */
export interface Resolved {
  /** Every node the selection matched. */
  matched: V1Node[];
  /** The nodes taint admission let through, in dispatch order. */
  eligible: V1Node[];
  /** The nodes a taint kept out. */
  skipped: SkippedNode[];
}

/** Describes the selection for messages, e.g. `--node-selector a=b or c=d, --node-field-selector …`. */
export function describeSelection(s: Selection): string {
  if (s.nodes) return `--nodes ${s.nodes.join(",")}`;
  const parts = s.labelSelectors.map((l) => `--node-selector ${l}`);
  if (s.fieldSelector) parts.push(`--node-field-selector ${s.fieldSelector}`);
  return parts.length
    ? parts.join(" or ").replace(/ or (--node-field-selector)/, " and $1")
    : "all nodes";
}

function badSelector(e: unknown, what: string): never {
  if (e instanceof ApiError && e.status === 400) {
    throw new UsageError(
      `Invalid ${what}: the API server rejected it: ${
        e.message.replace(/^Cannot list nodes: /, "")
      }`,
    );
  }
  throw e;
}

async function listMatching(kube: Kube, s: Selection): Promise<V1Node[]> {
  if (s.nodes) {
    const found = await Promise.all(s.nodes.map((n) => kube.get<V1Node>(paths.node(n))));
    const missing = s.nodes.filter((_, i) => !found[i]);
    if (missing.length) {
      throw new UsageError(
        `Invalid --nodes: no node named ${missing.join(", ")} (kubectl get nodes lists them)`,
      );
    }
    // Keep the user's order, without repeats.
    return [...new Map(found.map((n) => [n!.metadata!.name!, n!])).values()];
  }
  const selectors = s.labelSelectors.length ? s.labelSelectors : [""];
  const lists = await Promise.all(selectors.map(async (labelSelector) => {
    const query: Record<string, string> = {};
    if (labelSelector) query.labelSelector = labelSelector;
    if (s.fieldSelector) query.fieldSelector = s.fieldSelector;
    try {
      return (await kube.list<V1Node>(paths.nodes(), query, s.pageSize)).items;
    } catch (e) {
      const what = labelSelector
        ? `--node-selector ${JSON.stringify(labelSelector)}${
          s.fieldSelector ? ` or --node-field-selector ${JSON.stringify(s.fieldSelector)}` : ""
        }`
        : `--node-field-selector ${JSON.stringify(s.fieldSelector)}`;
      return badSelector(e, what);
    }
  }));
  return unionByName(lists);
}

/** Lists the selection once and applies taint admission. */
export async function resolveSelection(
  kube: Kube,
  s: Selection,
  podSpec: V1PodSpec,
): Promise<Resolved> {
  const matched = await listMatching(kube, s);
  if (s.nodes || s.ignoreTaints) return { matched, eligible: matched, skipped: [] };
  const { admitted, skipped } = partitionByTolerations(matched, podSpec);
  return { matched, eligible: admitted, skipped };
}

/** Options of {@linkcode waitForSelection}. */
export interface WaitOptions {
  /** How long to wait in all, in seconds; 0 resolves once. */
  waitSecs: number;
  /** How long the eligible set must stay unchanged, in seconds. */
  settleSecs: number;
  /** Called each time the eligible set changes while waiting. */
  onChange?: (r: Resolved) => void;
  /** Aborts the wait. */
  signal?: AbortSignal;
}

/**
 * Resolves the selection until the eligible set is non-empty and has stayed
 * the same for `settleSecs`, or `waitSecs` pass. Nodes joining a fleet
 * (autoscaling, a fresh cluster) appear over several seconds; dispatching on
 * the first sight would leave the late ones out.
 */
export async function waitForSelection(
  kube: Kube,
  s: Selection,
  podSpec: V1PodSpec,
  w: WaitOptions,
): Promise<Resolved> {
  let current = await resolveSelection(kube, s, podSpec);
  if (w.waitSecs <= 0) return current;
  const deadline = Date.now() + w.waitSecs * 1000;
  const key = (r: Resolved) => r.eligible.map((n) => n.metadata!.uid).join(",");
  let stableSince = Date.now();
  while (Date.now() < deadline && !w.signal?.aborted) {
    if (current.eligible.length && Date.now() - stableSince >= w.settleSecs * 1000) return current;
    await new Promise((r) => setTimeout(r, Math.min(1000, Math.max(0, deadline - Date.now()))));
    const next = await resolveSelection(kube, s, podSpec);
    if (key(next) !== key(current)) {
      stableSince = Date.now();
      w.onChange?.(next);
    }
    current = next;
  }
  return current;
}

/**
 * Re-reads one node just before its Job is created and says why it may no
 * longer get one: gone, replaced under the same name (new UID), no longer
 * selected, or newly tainted. The node may have changed since selection, and
 * a Job pinned to a replaced node would run on a machine nobody chose.
 */
export async function recheckNode(
  kube: Kube,
  s: Selection,
  podSpec: V1PodSpec,
  name: string,
  uid: string,
): Promise<string | undefined> {
  let node: V1Node | undefined;
  if (s.nodes) {
    node = await kube.get<V1Node>(paths.node(name));
  } else {
    const byName = `metadata.name=${name}`;
    for (const labelSelector of s.labelSelectors.length ? s.labelSelectors : [""]) {
      const query: Record<string, string> = {
        fieldSelector: s.fieldSelector ? `${byName},${s.fieldSelector}` : byName,
      };
      if (labelSelector) query.labelSelector = labelSelector;
      node = (await kube.list<V1Node>(paths.nodes(), query, 1)).items[0];
      if (node) break;
    }
    if (!node && !(await kube.get<V1Node>(paths.node(name)))) return "the node was deleted";
    if (!node) return "the node no longer matches the selection";
  }
  if (!node) return "the node was deleted";
  if (node.metadata?.uid !== uid) {
    return `the node was replaced under the same name (UID ${uid} is now ${node.metadata?.uid})`;
  }
  if (!s.nodes && !s.ignoreTaints) {
    const taint = blockingTaint(node, effectiveTolerations(podSpec));
    if (taint) {
      return `the node is now tainted ${formatTaint(taint)}, which the template does not tolerate`;
    }
  }
  return undefined;
}
