/**
 * The node lifecycle around each Job, as pure decisions: which labels to write
 * on a node before its Job and after it succeeded (the owned key, the extra
 * labels, one mark per instance when several share the key), which taints to
 * lift, whether a node is already satisfied, ready, or lacks a fact its Job
 * needs. Each decision returns data; `node_writer.ts` carries it out.
 *
 * Why the dispatcher writes the labels and not the per-node Jobs: those Jobs
 * are usually privileged, on nodes that run untrusted workloads, where root
 * can read any mounted token. Node writes from one unprivileged pod let the
 * per-node Jobs run without a ServiceAccount token at all.
 *
 * @module
 */

import type { V1Node, V1Taint } from "@kubernetes/client-node";
import { isLabelKey, isLabelValue, UsageError } from "../job.ts";
import { type MapWrite, mapWriteOps } from "../kube/metadata_patch.ts";

/** One `--remove-node-taints` entry: a taint key, and an effect when given. */
export interface TaintSelector {
  /** The taint's key. */
  key: string;
  /** `NoSchedule`, `PreferNoSchedule` or `NoExecute`; any effect when unset. */
  effect?: string;
}

/** What the run does to its nodes' labels, from the flags. */
export interface LabelConfig {
  /** `--node-label-key`: the label this run owns. */
  key: string;
  /** `--node-label`: the value once a node is done; unset in a cleanup run. */
  value?: string;
  /** `--node-label-pending-value`: the value of a claimed or demoted node. */
  pendingValue: string;
  /** `--extra-node-label`: written with the finished value, removed with the key. */
  extra: ReadonlyArray<readonly [string, string]>;
  /** `--claim-node-pending`: mark the node before its Job. */
  claim: boolean;
  /** `--remove-node-label`: a cleanup run. */
  remove: boolean;
  /** `<--instance-label-prefix>/<--multi-install-suffix>`: this instance's mark. */
  mark?: string;
  /** `--instance-label-prefix`: every instance's mark starts with `<prefix>/`. */
  instancePrefix?: string;
}

/** Label writes: a value sets the label, `null` removes it. */
export type LabelPlan = Map<string, string | null>;

const EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/**
 * Parses `--extra-node-label k=v` entries.
 *
 * @throws {UsageError} on a bad key or value, a repeated key, or the owned key
 * @example
 * ```ts
 * parseExtraLabels(["tier=kata"], "kata/installed"); // [["tier", "kata"]]
 * ```
 */
export function parseExtraLabels(
  entries: string[],
  ownedKey: string,
): Array<[string, string]> {
  const seen = new Set<string>();
  return entries.map((entry) => {
    const eq = entry.indexOf("=");
    const key = eq < 0 ? entry : entry.slice(0, eq);
    const value = eq < 0 ? "" : entry.slice(eq + 1);
    const bad = (why: string) => new UsageError(`Invalid --extra-node-label ${entry}: ${why}`);
    if (eq < 0) throw bad("expected key=value");
    if (!isLabelKey(key)) throw bad(`${key} is not a valid label key`);
    if (!isLabelValue(value)) throw bad(`${JSON.stringify(value)} is not a valid label value`);
    if (key === ownedKey) throw bad(`${key} is the --node-label-key itself`);
    if (seen.has(key)) throw bad(`${key} is given twice`);
    seen.add(key);
    return [key, value];
  });
}

/**
 * Parses `--remove-node-taints key[:effect],…`.
 *
 * @throws {UsageError} on an empty list, a bad key or an unknown effect
 * @example
 * ```ts
 * parseTaintSelectors("kata/not-ready:NoSchedule,startup");
 * // [{ key: "kata/not-ready", effect: "NoSchedule" }, { key: "startup" }]
 * ```
 */
export function parseTaintSelectors(text: string): TaintSelector[] {
  const items = text.split(",").map((s) => s.trim()).filter(Boolean);
  if (!items.length) {
    throw new UsageError(`Invalid --remove-node-taints ${JSON.stringify(text)}: it names no taint`);
  }
  return items.map((item) => {
    const colon = item.lastIndexOf(":");
    const key = colon < 0 ? item : item.slice(0, colon);
    const effect = colon < 0 ? undefined : item.slice(colon + 1);
    if (!isLabelKey(key)) {
      throw new UsageError(`Invalid --remove-node-taints ${item}: ${key} is not a valid taint key`);
    }
    if (effect !== undefined && !EFFECTS.includes(effect)) {
      throw new UsageError(
        `Invalid --remove-node-taints ${item}: the effect must be one of ${EFFECTS.join(", ")}`,
      );
    }
    return effect ? { key, effect } : { key };
  });
}

/** Labels of other instances' marks: every `<instancePrefix>/…` key but ours. */
function otherMarks(cfg: LabelConfig, labels: Record<string, string>): string[] {
  if (!cfg.instancePrefix || !cfg.mark) return [];
  const prefix = `${cfg.instancePrefix}/`;
  // The shared key and the extra labels may live under the same prefix.
  const ours = new Set([cfg.mark, cfg.key, ...cfg.extra.map(([k]) => k)]);
  return Object.keys(labels).filter((k) => k.startsWith(prefix) && !ours.has(k))
    .map((k) => labels[k]);
}

/**
 * Labels to write before a node's Job. An install with `claim` marks the node
 * pending, so that a cleanup finds a node a crashed run touched; a cleanup
 * demotes the node to pending, so that nothing selecting on the finished value
 * lands there while it is being undone. The shared key is left finished while
 * another instance's mark is finished: that instance still serves the node.
 *
 * @example
 * ```ts
 * const cfg = { key: "k", value: "true", pendingValue: "false", extra: [], claim: true, remove: false };
 * planBeforeJob(cfg, {}); // Map { "k" => "false" }
 * ```
 */
export function planBeforeJob(cfg: LabelConfig, labels: Record<string, string>): LabelPlan {
  const plan: LabelPlan = new Map();
  if (!cfg.claim && !cfg.remove) return plan;
  const present = (k: string) => labels[k] !== undefined;
  const othersFinished = otherMarks(cfg, labels).some((v) => v !== cfg.pendingValue);
  // A cleanup only demotes what is there: a node never labelled stays unlabelled.
  if (cfg.mark && (cfg.claim || present(cfg.mark))) plan.set(cfg.mark, cfg.pendingValue);
  if (!othersFinished && (cfg.claim || present(cfg.key))) plan.set(cfg.key, cfg.pendingValue);
  return dropUnchanged(plan, labels);
}

/**
 * Labels to write once a node's Job succeeded (and the node is ready). An
 * install sets the key, its mark and the extra labels to their values. A
 * cleanup removes its mark; then the shared key and the extra labels go when
 * no other instance's mark remains, the key is demoted when the others only
 * claimed the node, and left alone while another instance is finished there.
 *
 * @example
 * ```ts
 * const cfg = { key: "k", pendingValue: "false", extra: [], claim: false, remove: true };
 * planAfterSuccess(cfg, { k: "true" }); // Map { "k" => null }
 * ```
 */
export function planAfterSuccess(cfg: LabelConfig, labels: Record<string, string>): LabelPlan {
  const plan: LabelPlan = new Map();
  if (!cfg.remove) {
    if (cfg.value === undefined) return plan;
    plan.set(cfg.key, cfg.value);
    if (cfg.mark) plan.set(cfg.mark, cfg.value);
    for (const [k, v] of cfg.extra) plan.set(k, v);
    // Written even when the read shows them: a claim may have demoted the key
    // since the labels were read, and the write is idempotent.
    return plan;
  }
  if (cfg.mark) plan.set(cfg.mark, null);
  const others = otherMarks(cfg, labels);
  if (others.length === 0) {
    plan.set(cfg.key, null);
    for (const [k] of cfg.extra) plan.set(k, null);
  } else if (others.every((v) => v === cfg.pendingValue)) {
    plan.set(cfg.key, cfg.pendingValue);
  }
  return dropUnchanged(plan, labels);
}

function dropUnchanged(plan: LabelPlan, labels: Record<string, string>): LabelPlan {
  for (const [k, v] of [...plan]) {
    if ((v === null && labels[k] === undefined) || labels[k] === v) plan.delete(k);
  }
  return plan;
}

/** Whether every write of `plan` shows in `labels` (a re-registering kubelet may drop them). */
export function planHolds(plan: LabelPlan, labels: Record<string, string>): boolean {
  return [...plan].every(([k, v]) => v === null ? labels[k] === undefined : labels[k] === v);
}

/** Escapes a map key for a JSON Patch path (RFC 6901); kube/'s, for the node writes. */
export { pointer } from "../kube/metadata_patch.ts";

/** The label writes that carry out `plan` (`null`: remove). */
export function labelWrites(plan: LabelPlan): MapWrite[] {
  return [...plan].map(([key, value]) => ({ map: "labels", key, value }));
}

/**
 * The JSON Patch that carries out `plan`, guarded by a `test` of the node's
 * UID: a node deleted and recreated under the same name is a rejected write,
 * not a label on a machine that never ran the Job. A removal is an add then a
 * remove, so that it succeeds whether or not the label is still there. It
 * assumes the node's labels map (`writeMetadataMaps` makes a missing one from
 * a fresh read): an `add` of the map would replace every label it gained.
 *
 * @example
 * ```ts
 * labelPatch("uid-1", new Map([["k", "true"]]));
 * // [{ op: "test", path: "/metadata/uid", value: "uid-1" },
 * //  { op: "add", path: "/metadata/labels/k", value: "true" }]
 * ```
 */
export function labelPatch(uid: string, plan: LabelPlan): unknown[] {
  return [{ op: "test", path: "/metadata/uid", value: uid }, ...mapWriteOps(labelWrites(plan))];
}

/**
 * Splits a node's taints into those `--remove-node-taints` lifts and those it keeps.
 *
 * @example
 * ```ts
 * taintsToLift([{ key: "startup", effect: "NoSchedule" }], [{ key: "startup" }]).lifted.length; // 1
 * ```
 */
export function taintsToLift(
  taints: V1Taint[],
  selectors: TaintSelector[],
): { keep: V1Taint[]; lifted: V1Taint[] } {
  const keep: V1Taint[] = [];
  const lifted: V1Taint[] = [];
  for (const t of taints) {
    const hit = selectors.some((s) => s.key === t.key && (!s.effect || s.effect === t.effect));
    (hit ? lifted : keep).push(t);
  }
  return { keep, lifted };
}

/**
 * The JSON Patch that lifts taints: the taint list is tested as it was read
 * and replaced whole, so a taint another controller added meanwhile is never
 * lost (the write is rejected and made again from a fresh read).
 */
export function taintPatch(uid: string, read: V1Taint[], keep: V1Taint[]): unknown[] {
  return [
    { op: "test", path: "/metadata/uid", value: uid },
    { op: "test", path: "/spec/taints", value: read },
    keep.length
      ? { op: "replace", path: "/spec/taints", value: keep }
      : { op: "remove", path: "/spec/taints" },
  ];
}

/** Whether the node's Ready condition is True. */
export function isReady(node: V1Node): boolean {
  return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/**
 * Whether the node serves one of `handlers` in `.status.runtimeHandlers`. A
 * node that reports no handlers at all passes: kubelets before 1.30 do not
 * report them, and refusing those would refuse every older node.
 */
export function servesHandler(node: V1Node, handlers: string[]): boolean {
  if (!handlers.length) return true;
  const reported = node.status?.runtimeHandlers ?? [];
  if (!reported.length) return true;
  return reported.some((h) => h.name !== undefined && handlers.includes(h.name));
}

/**
 * Whether a node is done already, for `--skip-satisfied-nodes`: its mark (or,
 * without instances, the owned key) holds the finished value, the shared key
 * is there and finished, and it serves a required handler. A node at the
 * pending value is never satisfied: a run touched it and did not finish.
 */
export function isSatisfied(cfg: LabelConfig, node: V1Node, handlers: string[]): boolean {
  if (cfg.remove || cfg.value === undefined || cfg.value === cfg.pendingValue) return false;
  const labels = node.metadata?.labels ?? {};
  // With instances, the instance's own mark says it is done there; the shared
  // key may hold another instance's value, which must not make the two undo
  // each other on every run. It must still be there, and not pending.
  const key = labels[cfg.key];
  const keyDone = cfg.mark ? key !== undefined && key !== cfg.pendingValue : key === cfg.value;
  return labels[cfg.mark ?? cfg.key] === cfg.value && keyDone && servesHandler(node, handlers);
}

/** The node facts a run may require before it creates a Job. */
export interface RequiredFacts {
  /** `--require-node-runtime-version`. */
  runtimeVersion: boolean;
  /** `--require-node-machine-id`. */
  machineId: boolean;
}

/**
 * Why a node cannot get its Job for lack of a fact it must report, or
 * undefined. A Job certain to fail is not started.
 */
export function missingFact(node: V1Node, req: RequiredFacts): string | undefined {
  const info = node.status?.nodeInfo;
  if (req.runtimeVersion && !info?.containerRuntimeVersion) {
    return "the node reports no status.nodeInfo.containerRuntimeVersion (--require-node-runtime-version)";
  }
  if (req.machineId && !info?.machineID) {
    return "the node reports no status.nodeInfo.machineID (--require-node-machine-id)";
  }
  return undefined;
}

/**
 * Nodes a cleanup run owes: they carry this instance's label but the current
 * selection no longer matches them. Judged on the matched set, not the
 * taint-admitted one: a matched node skipped for a taint is still selected.
 */
export function ownedButUnselected(owned: V1Node[], matched: ReadonlySet<string>): V1Node[] {
  return owned.filter((n) => !matched.has(n.metadata!.name!));
}

/**
 * Parses a Go duration as the kubelet writes it (`2m0s`, `15m`, `1h0m0s`,
 * `500ms`) into milliseconds; undefined when it is not one.
 *
 * @example
 * ```ts
 * goDurationMs("2m0s"); // 120000
 * ```
 */
export function goDurationMs(text: string): number | undefined {
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001 };
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g)];
  if (!parts.length || parts.map((p) => p[0]).join("") !== text) return undefined;
  return parts.reduce((sum, [, n, u]) => sum + Number(n) * unit[u], 0);
}
