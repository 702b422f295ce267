/**
 * **nodes/** owns which nodes and what is written on them: the selection,
 * eligibility by taints and affinity, the lifecycle labels, the node writer,
 * label selectors and the pods on a node. It imports `kube/`, `base/` and
 * `job.ts` only.
 *
 * Live node selection: explicit names, or the union of label selectors (with
 * an optional field selector) listed server-side page by page, then taint
 * admission. The API server evaluates the selectors, so the dispatcher and
 * kubectl always agree on what a selector matches.
 *
 * @module
 */

import type { V1Node, V1NodeCondition, V1NodeSystemInfo, V1PodSpec } from "@kubernetes/client-node";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import { UsageError } from "../job.ts";
import { Informer } from "../kube/informer.ts";
import {
  blockingTaint,
  effectiveTolerations,
  formatTaint,
  partitionByTolerations,
  type SkippedNode,
  unionByName,
} from "./eligibility.ts";

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

/** One label selector's LIST: what it matched and the resourceVersion to watch from. */
export interface Listing {
  /** The label selector ("" for all nodes). */
  labelSelector: string;
  /** The nodes it matched. */
  nodes: V1Node[];
  /** The LIST's resourceVersion. */
  resourceVersion: string;
}

/** The outcome of one resolution of the selection. */
export interface Resolved {
  /** Every node the selection matched. */
  matched: V1Node[];
  /** Each label selector's LIST; empty for explicit `--nodes`. */
  listings: Listing[];
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

/**
 * Keeps of a Node what the dispatcher reads: its metadata without
 * managedFields (name, UID, labels, annotations), its spec (taints),
 * of status.nodeInfo the two fields the Job's environment and the admission
 * read (machineID, containerRuntimeVersion; the other eight, three of them
 * UUIDs, were a tenth of a slim node at 65,000) and status.runtimeHandlers
 * (`--skip-satisfied-nodes`), and of the conditions only Ready's status
 * (`--max-unavailable` counts NotReady nodes). The selection is held for the
 * whole run, and after the node marks the watch cache holds a second copy;
 * the rest of a Node (managedFields, conditions, and on a real node
 * status.images, often tens of KB) is most of its size.
 */
export function slimNode(node: V1Node): V1Node {
  // The node informers start from the selection's LIST, already slim: a copy
  // of each would hold a second node, metadata and status object per node
  // (~340 bytes, 22 MB at 65,000 nodes) for the same content.
  if (alreadySlim(node)) return node;
  const { managedFields: _, ...metadata } = node.metadata ?? {};
  shareValues(metadata);
  const { nodeInfo, runtimeHandlers } = node.status ?? {};
  const ready = node.status?.conditions?.find((c) => c.type === "Ready");
  const status: V1Node["status"] = {};
  if (nodeInfo) {
    const { machineID } = nodeInfo;
    const containerRuntimeVersion = shared(nodeInfo.containerRuntimeVersion);
    status.nodeInfo = { machineID, containerRuntimeVersion } as V1NodeSystemInfo;
  }
  if (runtimeHandlers) status.runtimeHandlers = runtimeHandlers;
  if (ready) status.conditions = readyConditions(ready.status);
  const slim = {
    ...node,
    metadata,
    status: nodeInfo || runtimeHandlers || ready ? status : undefined,
  };
  if (slim.spec && Object.keys(slim.spec).length === 0) slim.spec = EMPTY_SPEC;
  // A watch event's node carries its kind and apiVersion: two strings a node.
  if (slim.kind !== undefined) slim.kind = shared(slim.kind);
  if (slim.apiVersion !== undefined) slim.apiVersion = shared(slim.apiVersion);
  return slim;
}

/**
 * One empty spec for every node without one (kwok's nodes): frozen, as
 * nothing writes to a cached node, and shared, as each was ~50 B a node.
 */
const EMPTY_SPEC: V1Node["spec"] = Object.freeze({});

/** The frozen Ready condition list of each status ("True", "False", "Unknown"). */
const READY = new Map<string, V1NodeCondition[]>();

/**
 * The one frozen list `[{ type: "Ready", status }]` of that status: a list
 * and a condition per node were ~100 B a node, 6 MB at 65,000 (read only:
 * `isReady`, `alreadySlim`).
 */
function readyConditions(status: string): V1NodeCondition[] {
  let list = READY.get(status);
  if (!list) {
    list = Object.freeze([Object.freeze({ type: "Ready", status })]) as V1NodeCondition[];
    // Bounded: the API knows three statuses; anything else is kept unshared.
    if (READY.size < 8) READY.set(status, list);
  }
  return list;
}

/**
 * One string for each value many nodes repeat. JSON.parse makes a string of
 * every value it reads, and the selection holds each node for the whole
 * run: at 65,000 kwok nodes the same eight label values, two annotation
 * values, creation time and runtime version were ~270 bytes a node of
 * copies (a cloud's nodes carry twenty-odd labels, mostly shared: zone,
 * instance type, pool). Bounded: a value first seen once the table is full
 * (names, hashes) is kept as it is.
 */
const SHARED = new Map<string, string>();
const SHARED_MAX = 20_000;

function shared<T extends string | undefined>(value: T): T {
  if (value === undefined) return value;
  const had = SHARED.get(value);
  if (had !== undefined) return had as T;
  if (SHARED.size < SHARED_MAX) SHARED.set(value, value);
  return value;
}

/**
 * Replaces, in place, each label and annotation value and the creation time
 * with the equal {@linkcode shared} string (the hostname label with the
 * node's name): the content stays as it was, only the copies go.
 */
function shareValues(metadata: NonNullable<V1Node["metadata"]>): void {
  // A string as JSON.parse left it, whatever the client's type says.
  const created = metadata.creationTimestamp as unknown;
  if (typeof created === "string") metadata.creationTimestamp = shared(created) as unknown as Date;
  for (const map of [metadata.labels, metadata.annotations]) {
    for (const k in map) map[k] = map[k] === metadata.name ? metadata.name : shared(map[k]);
  }
}

/** The keys of a slim node's status: {@linkcode slimNode} keeps no other. */
const SLIM_STATUS = new Set(["nodeInfo", "runtimeHandlers", "conditions"]);

/** Whether {@linkcode slimNode} of `node` would be a copy equal to it: it is its own output. */
function alreadySlim(node: V1Node): boolean {
  const { metadata, status } = node;
  if (!metadata || "managedFields" in metadata) return false;
  // slimNode always sets status, undefined when nothing of it is kept.
  if (status === undefined) return "status" in node;
  // JSON may say null where the types say absent: slimNode drops those.
  if (status === null) return false;
  const keys = Object.keys(status);
  const part = status as Record<string, unknown>;
  if (!keys.length || !keys.every((k) => SLIM_STATUS.has(k) && part[k] != null)) return false;
  const info = status.nodeInfo && Object.keys(status.nodeInfo);
  if (
    info &&
    (info.length !== 2 || !("machineID" in status.nodeInfo!) ||
      !("containerRuntimeVersion" in status.nodeInfo!))
  ) return false;
  const c = status.conditions;
  return c === undefined ||
    (c.length === 1 && c[0].type === "Ready" && Object.keys(c[0]).length === 2 && "status" in c[0]);
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

function selectorQuery(s: Selection, labelSelector: string): Record<string, string> {
  const query: Record<string, string> = {};
  if (labelSelector) query.labelSelector = labelSelector;
  if (s.fieldSelector) query.fieldSelector = s.fieldSelector;
  return query;
}

async function listMatching(
  kube: Kube,
  s: Selection,
): Promise<{ matched: V1Node[]; listings: Listing[] }> {
  if (s.nodes) {
    const found = await Promise.all(s.nodes.map((n) => kube.get<V1Node>(paths.node(n))));
    const missing = s.nodes.filter((_, i) => !found[i]);
    if (missing.length) {
      throw new UsageError(
        `Invalid --nodes: no node named ${missing.join(", ")} (kubectl get nodes lists them)`,
      );
    }
    // Keep the user's order, without repeats.
    const matched = [...new Map(found.map((n) => [n!.metadata!.name!, slimNode(n!)])).values()];
    return { matched, listings: [] };
  }
  const selectors = s.labelSelectors.length ? s.labelSelectors : [""];
  const listings = await Promise.all(selectors.map(async (labelSelector): Promise<Listing> => {
    try {
      const list = await kube.list<V1Node>(
        paths.nodes(),
        selectorQuery(s, labelSelector),
        s.pageSize,
        slimNode,
      );
      return { labelSelector, nodes: list.items, resourceVersion: list.resourceVersion };
    } catch (e) {
      const what = labelSelector
        ? `--node-selector ${JSON.stringify(labelSelector)}${
          s.fieldSelector ? ` or --node-field-selector ${JSON.stringify(s.fieldSelector)}` : ""
        }`
        : `--node-field-selector ${JSON.stringify(s.fieldSelector)}`;
      return badSelector(e, what);
    }
  }));
  return { matched: unionByName(listings.map((l) => l.nodes)), listings };
}

/** Lists the selection once and applies taint admission. */
export async function resolveSelection(
  kube: Kube,
  s: Selection,
  podSpec: V1PodSpec,
): Promise<Resolved> {
  const { matched, listings } = await listMatching(kube, s);
  if (s.nodes || s.ignoreTaints) return { matched, listings, eligible: matched, skipped: [] };
  const { admitted, skipped } = partitionByTolerations(matched, podSpec);
  return { matched, listings, eligible: admitted, skipped };
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
 * Why a node may no longer get its Job, judged on a fresh view of it: gone,
 * replaced under the same name (new UID), or newly tainted. undefined: it
 * may.
 */
export function nodeVerdict(
  node: V1Node | undefined,
  uid: string,
  s: Selection,
  podSpec: V1PodSpec,
): string | undefined {
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

/**
 * Re-reads one node with the API server just before its Job is created, when
 * no node watch is available: one LIST per selector (by name), so the server
 * judges "still selected" exactly as it did at selection.
 */
export async function recheckNode(
  kube: Kube,
  s: Selection,
  podSpec: V1PodSpec,
  name: string,
  uid: string,
): Promise<string | undefined> {
  if (s.nodes) return nodeVerdict(await kube.get<V1Node>(paths.node(name)), uid, s, podSpec);
  const byName = `metadata.name=${name}`;
  for (const labelSelector of s.labelSelectors.length ? s.labelSelectors : [""]) {
    const query: Record<string, string> = {
      fieldSelector: s.fieldSelector ? `${byName},${s.fieldSelector}` : byName,
    };
    if (labelSelector) query.labelSelector = labelSelector;
    const node = (await kube.list<V1Node>(paths.nodes(), query, 1)).items[0];
    if (node) return nodeVerdict(node, uid, s, podSpec);
  }
  if (!(await kube.get<V1Node>(paths.node(name)))) return "the node was deleted";
  return "the node no longer matches the selection";
}

/**
 * Keeps the selection's nodes in view with one informer per label selector,
 * started from the selection's own LISTs, so that the re-read of a node
 * before its Job is created costs no request: a fleet of thousands would
 * otherwise pay one LIST per node. While an informer is not healthy, the
 * re-read falls back to {@linkcode recheckNode}.
 */
export class NodeWatch {
  #informers: Informer<V1Node>[];
  #started: Promise<void>[];
  #kube: Kube;
  #s: Selection;
  #podSpec: V1PodSpec;

  /** Starts the informers; explicit `--nodes` are re-read one by one instead. */
  constructor(
    kube: Kube,
    s: Selection,
    podSpec: V1PodSpec,
    listings: Listing[],
    onNotice: (msg: string) => void,
    onChange: () => void = () => {},
  ) {
    this.#kube = kube;
    this.#s = s;
    this.#podSpec = podSpec;
    let noticed = false;
    this.#informers = listings.map((l) => {
      const query = selectorQuery(s, l.labelSelector);
      return new Informer<V1Node>({
        source: {
          list: (signal) => kube.list(paths.nodes(), query, s.pageSize, slimNode, signal),
          watch: (rv, signal) => kube.watch<V1Node>(paths.nodes(), query, rv, signal),
        },
        keep: slimNode,
        onUpsert: onChange,
        onDelete: onChange,
        // While polling, a re-read goes to the API server anyway (recheck):
        // the LIST only keeps the cache from ageing, so it need not be often.
        pollIntervalMs: 30_000,
        onNote: (n) => {
          if (n.state !== "polling" || noticed) return;
          noticed = true;
          onNotice(`cannot watch nodes (${n.detail}); nodes are re-read with a LIST meanwhile`);
        },
      });
    });
    this.#started = this.#informers.map((inf, i) =>
      inf.start({ items: listings[i].nodes, resourceVersion: listings[i].resourceVersion })
    );
  }

  /** Why the node may no longer get its Job (see {@linkcode nodeVerdict}). */
  async recheck(name: string, uid: string): Promise<string | undefined> {
    // A cache is exact only while its watch runs: polling, it lags a poll interval.
    if (this.#s.nodes || this.#informers.some((i) => !i.healthy || i.polling)) {
      return await recheckNode(this.#kube, this.#s, this.#podSpec, name, uid);
    }
    const node = this.#informers.map((i) => i.cache.get(name)).find((n) => n !== undefined);
    if (node) return nodeVerdict(node, uid, this.#s, this.#podSpec);
    // Gone from every selector: deleted, or no longer matching. Ask which.
    if (!(await this.#kube.get<V1Node>(paths.node(name)))) return "the node was deleted";
    return "the node no longer matches the selection";
  }

  /**
   * Why a prepared node may no longer get its Job, judged again just before
   * its create (see {@linkcode nodeVerdict}): deleted, re-created under its
   * name, or newly tainted. The run's own cordon taint
   * (`node.kubernetes.io/unschedulable`) is tolerated as DaemonSets do, and
   * the labels are not judged: the run may change them on purpose. A node
   * the cache no longer holds (it left the watched selection) is read.
   */
  async recheckBeforeCreate(name: string, uid: string): Promise<string | undefined> {
    const watched = !this.#s.nodes && this.#informers.every((i) => i.healthy && !i.polling);
    const cached = watched
      ? this.#informers.map((i) => i.cache.get(name)).find((n) => n !== undefined)
      : undefined;
    const node = cached ?? await this.#kube.get<V1Node>(paths.node(name));
    return nodeVerdict(node, uid, this.#s, this.#podSpec);
  }

  /**
   * The selected nodes as last seen (each once), for the availability
   * budget; empty with explicit `--nodes`, which are not watched.
   */
  nodes(): V1Node[] {
    const byName = new Map<string, V1Node>();
    for (const i of this.#informers) {
      for (const [name, node] of i.cache) byName.set(name, node);
    }
    return [...byName.values()];
  }

  /** Stops the informers, all at once: each aborts its LIST or watch in flight. */
  async stop(): Promise<void> {
    await Promise.all(this.#informers.map((inf, i) => this.#started[i].then(() => inf.stop())));
  }
}
