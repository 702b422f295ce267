/**
 * Cordon and uncordon, so that a run never uncordons a node it did not
 * cordon: the cordon records the run on the node (`<P>/cordoned-by`), and the
 * uncordon tests that record and removes it in the same JSON Patch. A node
 * an operator cordoned stays cordoned whatever happens to the run.
 *
 * @module
 */

import type { V1Node } from "@kubernetes/client-node";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import { mapWriteOps, pointer } from "../kube/metadata_patch.ts";

/** What a cordon found and did. */
export interface CordonResult {
  /**
   * `cordoned`: this run cordoned it now; `ours`: this run's cordon was
   * already there (a re-run of the same run); `others`: someone else had
   * cordoned it, so it is left as it is and never uncordoned by this run.
   */
  outcome: "cordoned" | "ours" | "others";
  /** With `others`: the run recorded on the node, if any. */
  by?: string;
}

/** What an uncordon found and did. */
export interface UncordonResult {
  /** `uncordoned`: this run's cordon is lifted; `notOurs`: left alone. */
  outcome: "uncordoned" | "notOurs";
  /** With `notOurs`: the run recorded on the node, if any. */
  by?: string;
}

/** Which node, and who this run is. */
export interface CordonTarget {
  /** The node's name. */
  name: string;
  /** The UID selected: a node replaced under the same name is never written. */
  uid: string;
  /** The annotation key `<P>/cordoned-by` (`trackingKeys(P).cordonedBy`). */
  annotation: string;
  /**
   * This run's identity: the owner Job's UID, so a retried hook pod of the
   * same owner adopts its own cordons.
   */
  runId: string;
}

const ATTEMPTS = 5;

/**
 * The JSON Patch that cordons `node` for `runId`, or undefined when nothing
 * is to be written. The node's spec is tested as read: if anyone cordoned
 * (or changed) it since, the patch fails and the decision is made again on a
 * fresh read, so a cordon of someone else's is never recorded as ours.
 */
export function cordonPatch(
  node: V1Node,
  t: Pick<CordonTarget, "uid" | "annotation" | "runId">,
): { result: CordonResult; ops?: unknown[] } {
  const by = node.metadata?.annotations?.[t.annotation];
  const cordoned = node.spec?.unschedulable === true;
  if (cordoned) {
    return by === t.runId ? { result: { outcome: "ours" } } : { result: { outcome: "others", by } };
  }
  const ops: unknown[] = [
    { op: "test", path: "/metadata/uid", value: t.uid },
    { op: "test", path: "/spec", value: node.spec ?? {} },
  ];
  // The node as read: a map it lacks is made under a test of its version,
  // so one made since (another rollout's mark) fails the write, not vanishes.
  ops.push(
    ...mapWriteOps([{ map: "annotations", key: t.annotation, value: t.runId }], node),
    { op: "add", path: "/spec/unschedulable", value: true },
  );
  return { result: { outcome: "cordoned" }, ops };
}

/**
 * The JSON Patch that lifts this run's cordon, or undefined when the
 * cordon is not this run's. The record is tested and removed in one patch:
 * between the read and the write nobody can slip in a cordon of theirs that
 * this patch would lift. A node someone already uncordoned only loses the
 * record.
 */
export function uncordonPatch(
  node: V1Node,
  t: Pick<CordonTarget, "uid" | "annotation" | "runId">,
): unknown[] | undefined {
  if (node.metadata?.annotations?.[t.annotation] !== t.runId) return undefined;
  const path = `/metadata/annotations/${pointer(t.annotation)}`;
  const ops: unknown[] = [
    { op: "test", path: "/metadata/uid", value: t.uid },
    { op: "test", path, value: t.runId },
    { op: "remove", path },
  ];
  if (node.spec?.unschedulable) {
    ops.push(
      { op: "test", path: "/spec/unschedulable", value: true },
      // kubectl uncordon leaves the field out rather than false.
      { op: "remove", path: "/spec/unschedulable" },
    );
  }
  return ops;
}

async function readNode(kube: Kube, t: CordonTarget, action: string): Promise<V1Node> {
  const node = await kube.get<V1Node>(paths.node(t.name));
  if (!node) throw new Error(`Cannot ${action} node ${t.name}: the node was deleted`);
  if (node.metadata?.uid !== t.uid) {
    throw new Error(
      `Cannot ${action} node ${t.name}: it was replaced under the same name ` +
        `(UID ${t.uid} is now ${node.metadata?.uid})`,
    );
  }
  return node;
}

/**
 * Reads the node, then writes the patch `plan` makes of it; a 422 (a test
 * failed: the node changed since the read) is answered by a fresh read.
 */
async function patchFromRead<R>(
  kube: Kube,
  t: CordonTarget,
  action: string,
  plan: (node: V1Node) => { result: R; ops?: unknown[] },
): Promise<R> {
  for (let attempt = 1;; attempt++) {
    const { result, ops } = plan(await readNode(kube, t, action));
    if (!ops) return result;
    try {
      await kube.request("patch", "PATCH", paths.node(t.name), ops);
      return result;
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 422) || attempt >= ATTEMPTS) {
        if (e instanceof ApiError && e.status === 422) {
          throw new Error(`Cannot ${action} node ${t.name}: it kept changing under the write`);
        }
        throw e;
      }
    }
  }
}

/**
 * Cordons a node for this run, unless it is cordoned already.
 *
 * @throws {Error} when the node is gone or replaced, or keeps changing
 * @throws {ApiError} when the API server refuses the read or the write
 */
export function cordonNode(kube: Kube, t: CordonTarget): Promise<CordonResult> {
  return patchFromRead(kube, t, "cordon", (node) => cordonPatch(node, t));
}

/**
 * Uncordons a node only if this run cordoned it; another's cordon is left.
 *
 * @throws {Error} when the node is gone or replaced, or keeps changing
 * @throws {ApiError} when the API server refuses the read or the write
 */
export function uncordonNode(kube: Kube, t: CordonTarget): Promise<UncordonResult> {
  return patchFromRead(kube, t, "uncordon", (node): { result: UncordonResult; ops?: unknown[] } => {
    const ops = uncordonPatch(node, t);
    return ops
      ? { result: { outcome: "uncordoned" }, ops }
      : { result: { outcome: "notOurs", by: node.metadata?.annotations?.[t.annotation] } };
  });
}
