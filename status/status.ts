/**
 * **status/** owns `job-dispatcher status`: a rollout seen from anywhere,
 * read from the cluster alone (the run record, the Jobs, the nodes' marks
 * and cordons), so that it answers while the run lives, after it ended and
 * after it died. It writes nothing; a read-only ServiceAccount (the chart's
 * `viewer` role) is enough. `view.ts` is the pure part; this module reads.
 *
 * @module
 */

import type { V1ConfigMap, V1Job, V1Node } from "@kubernetes/client-node";
import {
  jobName,
  labelValue,
  type OwnerRef,
  type TrackingKeys,
  trackingKeys,
  UsageError,
} from "../job.ts";
import { type Kube, paths, type TableRow } from "../kube/client.ts";
import { cellTellsAll, jobOfCell, type JobRow, jobsOfRows, mergeJobs } from "./jobs.ts";
import { SYSTEM_CLOCK } from "../base/clock.ts";
import { decodeRecord, recordPath, type RunRecord } from "../report/record.ts";
import { type NamespaceSources, resolveNamespace } from "../run/preflight.ts";
import {
  buildView,
  lifeOf,
  type ManagedFieldsEntry,
  recordClockNow,
  recordWrittenAt,
  renderJson,
  renderText,
  statusExitCode,
  type StatusView,
  viewKey,
} from "./view.ts";

/** What `status` is asked. */
export interface StatusConfig {
  /** `-n`: the Jobs' namespace. */
  namespace?: string;
  /** `--name-prefix`: the run's Job name prefix. */
  prefix?: string;
  /** `--owner-job-name`: the run's owner Job. */
  ownerJobName?: string;
  /** `--tracking-label-prefix`. @default "job-dispatcher" */
  trackingLabelPrefix: string;
  /** `-o`: text, wide or json. */
  output: "text" | "wide" | "json";
  /** `--watch`: redraw on change until interrupted. */
  watch: boolean;
  /** How often `--watch` reads again, in s. @default 2 */
  watchIntervalSecs: number;
  /** `--require-ended`: a run still alive (or paused) exits 1, as `helm test` needs. */
  requireEnded?: boolean;
  /** `--kubeconfig`, as for a run (the namespace rules need to know). */
  kubeconfig?: string;
  /** `--context`. */
  context?: string;
}

/** What status needs of the world. */
export interface StatusContext extends NamespaceSources {
  /** The API client. */
  kube: Kube;
  /** Prints the view. */
  stdout(text: string): void;
  /** Ends `--watch`. */
  signal: AbortSignal;
  /** Whether stdout is a terminal: `--watch` then redraws in place. */
  terminal: boolean;
}

/** A run found: its prefix, owner and record. */
interface Found {
  prefix: string;
  owner?: OwnerRef;
  record?: RunRecord;
  /** When the record was written, on the API server's clock (`recordWrittenAt`). */
  writtenAt?: number;
}

/** The owner Job and its record, by the record's `<t>/owner-job` label. */
async function findByOwner(kube: Kube, ns: string, name: string, keys: TrackingKeys) {
  const job = await kube.get<V1Job>(paths.job(ns, name));
  if (!job) {
    throw new UsageError(
      `Invalid --owner-job-name ${name}: no such Job in namespace ${ns} ` +
        "(its run record and per-node Jobs went with it, if it had any)",
    );
  }
  const owner = { name, uid: job.metadata!.uid! };
  const cms = await kube.list<V1ConfigMap>(
    `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps`,
    { labelSelector: `${keys.record}=true,${keys.ownerJob}=${labelValue(name)}` },
    100,
  );
  const mine = cms.items.find((c) => c.metadata?.ownerReferences?.some((r) => r.uid === owner.uid));
  return { owner, cm: mine };
}

/** The run's prefix, owner and record, from the flags. */
async function findRun(
  kube: Kube,
  ns: string,
  cfg: StatusConfig,
  keys: TrackingKeys,
): Promise<Found> {
  if (cfg.prefix !== undefined) {
    const cm = await kube.get<V1ConfigMap>(recordPath(ns, cfg.prefix));
    const record = cm && await decodeRecord(cm.data, cm.binaryData);
    const owner = record?.owner;
    return { prefix: cfg.prefix, owner, record, writtenAt: writtenAt(cm) };
  }
  const { owner, cm } = await findByOwner(kube, ns, cfg.ownerJobName!, keys);
  const record = cm && await decodeRecord(cm.data, cm.binaryData);
  if (record) return { prefix: record.prefix, owner, record, writtenAt: writtenAt(cm) };
  // No record (an older dispatcher): the owner's Jobs carry the prefix.
  const jobs = await ownedJobs(kube, ns, keys, owner);
  const prefix = jobs[0]?.metadata?.labels?.[keys.owner];
  if (!prefix) {
    throw new UsageError(
      `No run of owner Job ${cfg.ownerJobName} in namespace ${ns}: ` +
        "no run record and no per-node Jobs it owns",
    );
  }
  return { prefix, owner };
}

function writtenAt(cm: V1ConfigMap | undefined): number | undefined {
  return recordWrittenAt(cm?.metadata?.managedFields as ManagedFieldsEntry[] | undefined);
}

async function ownedJobs(kube: Kube, ns: string, keys: TrackingKeys, owner: OwnerRef) {
  const all = await kube.list<V1Job>(paths.jobs(ns), { labelSelector: keys.owner }, 500);
  return all.items.filter((j) => j.metadata?.ownerReferences?.some((r) => r.uid === owner.uid));
}

/** A Job slimmed to what the view reads, as each LIST page arrives (10,000 Jobs are ~40 MB of JSON). */
function slimJob(j: Pick<V1Job, "metadata" | "status">, keys: TrackingKeys): V1Job {
  const m = j.metadata;
  return {
    metadata: {
      name: m?.name,
      creationTimestamp: m?.creationTimestamp,
      // What the engine's first sight (classifyJob) reads too, for the
      // re-run line: the owner label, a deletion under way, the node's UID.
      deletionTimestamp: m?.deletionTimestamp,
      labels: pick(m?.labels, keys.node, keys.owner),
      annotations: pick(m?.annotations, keys.nodeName, keys.nodeUid, keys.templateHash),
      ownerReferences: m?.ownerReferences?.map((r) => ({ ...r })),
    },
    status: { conditions: j.status?.conditions },
  };
}

/**
 * The prefix's Jobs in two LISTs (`jobs.ts` says why): those that have not
 * succeeded whole, then those that have as table rows.
 */
async function readJobs(kube: Kube, ns: string, prefix: string, keys: TrackingKeys) {
  const labelSelector = `${keys.owner}=${labelValue(prefix)}`;
  const whole = await kube.list<V1Job, V1Job>(
    paths.jobs(ns),
    { labelSelector, fieldSelector: "status.successful!=1" },
    500,
    (j) => slimJob(j, keys),
  );
  const rows = await kube.list<TableRow, JobRow>(
    paths.jobs(ns),
    { labelSelector, fieldSelector: "status.successful=1", includeObject: "None" },
    500,
    (r) => [String(r.cells.Name), String(r.cells.Status ?? "")],
    undefined,
    "table",
  );
  return { whole: whole.items, rows: rows.items };
}

/** The most rows read again one by one; past it, one LIST of them all is cheaper. */
const MAX_ROW_READS = 50;

/**
 * The Jobs of `rows` read again, in `form`: by name (a LIST of
 * `metadata.name`, as `list` is what the viewer's RBAC promises), or past
 * {@linkcode MAX_ROW_READS} one LIST of every succeeded Job; each with the
 * conditions of its row's cell, or whole with its own.
 */
async function reread(
  kube: Kube,
  ns: string,
  labelSelector: string,
  rows: readonly JobRow[],
  form: "objects" | "metadata",
  keys: TrackingKeys,
): Promise<V1Job[]> {
  if (rows.length === 0) return [];
  const cells = new Map(rows);
  const list = (fieldSelector: string, pageSize: number) =>
    kube.list<V1Job, V1Job>(
      paths.jobs(ns),
      { labelSelector, fieldSelector },
      pageSize,
      (j) => slimJob(j, keys),
      undefined,
      form,
    );
  const got = rows.length > MAX_ROW_READS
    ? [await list("status.successful=1", 500)]
    : await Promise.all(rows.map(([name]) => list(`metadata.name=${name}`, 1)));
  return got.flatMap((l) => l.items).filter((j) => cells.has(j.metadata!.name!)).map((j) =>
    form === "objects" ? j : jobOfCell(j.metadata!, cells.get(j.metadata!.name!)!)
  );
}

/**
 * The record's nodes made again under their names since the run began
 * (their node is younger than the run, to the second the API server
 * stamps): a Job of theirs may have been made for the earlier node.
 * A node's creationTimestamp is on the API server's clock, the record's
 * startedAt on its writer's (a bastion's may be off by minutes): the
 * record's last write, stamped on both (`updatedAt`, `writtenAt`), gives
 * the difference; without the server's stamp the writer is taken to keep
 * the server's time (it runs in the cluster).
 */
function replacedSince(
  record: RunRecord | undefined,
  nodes: ReadonlyMap<string, V1Node> | undefined,
  writtenAt?: number,
): (node: string) => boolean {
  if (!record || !nodes) return () => false;
  const ahead = writtenAt === undefined ? 0 : record.updatedAt - writtenAt;
  const began = record.startedAt - ahead;
  return (node) => {
    const born = nodes.get(node)?.metadata?.creationTimestamp;
    return !!born && new Date(born).getTime() >= began - 1_000;
  };
}

/**
 * The Jobs of the rows: those the record vouches for as the run made them,
 * the others with their own metadata, or whole where their cell hides
 * what the view reads (a Failed Job's message, a deletion, a server before
 * 1.30 that prints no Status).
 */
async function jobsOf(
  kube: Kube,
  ns: string,
  read: { whole: V1Job[]; rows: JobRow[] },
  found: Found,
  keys: TrackingKeys,
  nodes?: ReadonlyMap<string, V1Node>,
): Promise<V1Job[]> {
  const replaced = replacedSince(found.record, nodes, found.writtenAt);
  const { jobs, unvouched } = jobsOfRows(read.rows, found.record, keys, replaced);
  const labelSelector = `${keys.owner}=${labelValue(found.prefix)}`;
  const again = await Promise.all([
    reread(kube, ns, labelSelector, unvouched.filter(([, c]) => !cellTellsAll(c)), "objects", keys),
    reread(kube, ns, labelSelector, unvouched.filter(([, c]) => cellTellsAll(c)), "metadata", keys),
  ]);
  return mergeJobs(read.whole, [...jobs, ...again.flat()]);
}

/** A node slimmed to the facts status shows: its mark, our cordon, its error, a kept success. */
function slimNode(n: Pick<V1Node, "metadata" | "spec">, keys: TrackingKeys): V1Node {
  return {
    metadata: {
      name: n.metadata?.name,
      // A Job made for another UID ran on a node since replaced: a re-run replaces it.
      uid: n.metadata?.uid,
      creationTimestamp: n.metadata?.creationTimestamp,
      labels: pick(n.metadata?.labels, keys.result),
      // keys.kept: a success kept before post-success work that never ended,
      // one annotation per Job (`keptKey`: the key and a dot, then the Job).
      annotations: {
        ...pick(n.metadata?.annotations, keys.cordonedBy, keys.error),
        ...Object.fromEntries(
          Object.entries(n.metadata?.annotations ?? {}).filter(([k]) =>
            k.startsWith(`${keys.kept}.`)
          ),
        ),
      },
    },
    spec: { unschedulable: n.spec?.unschedulable },
  };
}

/**
 * Every node, in pages of 500 as kubectl's --chunk-size: their metadata
 * only (10,000 kwok nodes are ~34 MB of JSON whole, ~18 MB as metadata), and
 * which are cordoned from a second LIST that the API server filters
 * (`spec.unschedulable=true`: a few at a time).
 */
async function listNodes(kube: Kube, keys: TrackingKeys): Promise<Map<string, V1Node>> {
  const [nodes, cordoned] = await Promise.all([
    kube.list<V1Node, V1Node>(
      paths.nodes(),
      {},
      500,
      (n) => slimNode(n, keys),
      undefined,
      "metadata",
    ),
    kube.list<V1Node, string>(
      paths.nodes(),
      { fieldSelector: "spec.unschedulable=true" },
      500,
      (n) => n.metadata!.name!,
    ),
  ]);
  const unschedulable = new Set(cordoned.items);
  return new Map(nodes.items.map((n) => {
    n.spec = { unschedulable: unschedulable.has(n.metadata!.name!) || undefined };
    return [n.metadata!.name!, n];
  }));
}

/** The most nodes read one by one; past it, one LIST is cheaper. */
const MAX_NODE_GETS = 50;

/**
 * The nodes whose facts the text view shows or judges: a failed node without
 * a reason of its own takes one from its node (its error mark); and once the
 * run no longer lives (or, living, it is a queued node of the record that its
 * Job moved on in the first sketch), a node whose Job names the UID it was made for tells
 * the re-run line whether that node was since replaced (its Job is then
 * stale), as `-o json` tells it, and a dead run's finishing node with no Job
 * left whether it keeps its success (the re-run counts it). Marks and cordons are in `-o wide` and
 * `-o json`, which read every node.
 */
async function shownNodes(
  kube: Kube,
  keys: TrackingKeys,
  sketch: StatusView,
  jobs: V1Job[],
  read: ReadonlyMap<string, V1Node> = new Map(),
  record?: RunRecord,
) {
  const failed = sketch.nodes.filter((n) => n.phase === "failed" && !n.reason).map((n) => n.node);
  // A queued node of the record that its Job moved on in the sketch (no
  // node UIDs in it): that Job may be for the node its name had before,
  // which the view, as the engine, leaves queued: read while the run lives too.
  const queued = new Set(record?.nodes.filter((n) => n.phase === "queued").map((n) => n.node));
  const movedOn = new Set(
    sketch.nodes.filter((n) => queued.has(n.node) && n.phase !== "queued")
      .map((n) => n.node),
  );
  const madeFor = jobs
    .filter((j) => j.metadata?.annotations?.[keys.nodeUid])
    .map((j) => j.metadata!.annotations![keys.nodeName] ?? j.metadata!.labels![keys.node])
    .filter((n) => sketch.life !== "running" || movedOn.has(n));
  // A dead run's finishing node with no Job left (its TTL): a success kept
  // on the node (nodes/success_mark.ts) makes the re-run count it, not start it.
  const withJob = new Set(
    jobs.map((j) => j.metadata?.annotations?.[keys.nodeName] ?? j.metadata?.labels?.[keys.node]),
  );
  const owed = sketch.life === "running" ? [] : sketch.nodes
    .filter((n) => n.phase === "finishing" && !withJob.has(n.node)).map((n) => n.node);
  // The nodes the rows' judgement already read are not read again.
  const names = new Set([...failed, ...madeFor, ...owed].filter((n) => !read.has(n)));
  return await nodesNamed(kube, keys, [...names]);
}

/**
 * In text, the nodes of a dead run's table rows that the record would
 * vouch for: the record cannot tell a node made again under its name since
 * the run began (`replacedSince`), whose Job the re-run line judges stale;
 * `-o json` reads every node anyway. Undefined while the run lives (no
 * re-run line) or without a record (nothing is vouched for).
 */
async function rowNodes(
  kube: Kube,
  keys: TrackingKeys,
  found: Found,
  rows: readonly JobRow[],
  now: number,
): Promise<Map<string, V1Node> | undefined> {
  const record = found.record;
  if (!record || lifeOf(record, now) === "running" || rows.length === 0) return undefined;
  const named = new Set(rows.map(([name]) => name));
  const names = record.nodes.map((n) => n.node).filter((n) => named.has(jobName(record.prefix, n)));
  return await nodesNamed(kube, keys, names);
}

/** The nodes of `names` that exist: read by name, or past {@linkcode MAX_NODE_GETS} all of them. */
async function nodesNamed(kube: Kube, keys: TrackingKeys, names: readonly string[]) {
  if (names.length > MAX_NODE_GETS) return await listNodes(kube, keys);
  // A LIST by name, not a GET: the viewer's RBAC promises `list` on nodes.
  const got = await Promise.all(names.map((name) =>
    kube.list<V1Node, V1Node>(
      paths.nodes(),
      { fieldSelector: `metadata.name=${name}` },
      1,
      (n) => slimNode(n, keys),
      undefined,
      "metadata",
    )
  ));
  return new Map(got.flatMap((l) => l.items).map((n) => [n.metadata!.name!, n]));
}

/** The Jobs of `owner`, when the run has one (another owner's run may share the prefix). */
function ownedBy(jobs: V1Job[], owner: OwnerRef | undefined): V1Job[] {
  if (!owner) return jobs;
  return jobs.filter((j) => j.metadata?.ownerReferences?.some((r) => r.uid === owner.uid));
}

function pick(map: Record<string, string> | undefined, ...keys: string[]) {
  const out: Record<string, string> = {};
  for (const k of keys) if (map?.[k] !== undefined) out[k] = map[k];
  return out;
}

/**
 * Reads the run once and builds its view.
 *
 * @throws {UsageError} when neither a prefix nor an owner is given, or no such run exists
 * @throws {ApiError} when the cluster refuses a read
 */
export async function readStatus(cfg: StatusConfig, ctx: StatusContext): Promise<StatusView> {
  if (cfg.prefix === undefined && cfg.ownerJobName === undefined) {
    throw new UsageError(
      "Missing --name-prefix or --owner-job-name: status needs to know which run to show",
    );
  }
  const keys = trackingKeys(cfg.trackingLabelPrefix);
  const ns = resolveNamespace(cfg, ctx);
  // The reads go out at once where they can: at 10,000 nodes each LIST is
  // 20 pages, and the API server answers one page at a time per LIST.
  const [found, prefixJobs, allNodes] = await Promise.all([
    findRun(ctx.kube, ns, cfg, keys),
    cfg.prefix !== undefined ? readJobs(ctx.kube, ns, cfg.prefix, keys) : undefined,
    cfg.output === "text" ? undefined : listNodes(ctx.kube, keys),
  ]);
  const read = prefixJobs ?? await readJobs(ctx.kube, ns, found.prefix, keys);
  const now = recordClockNow({
    record: found.record,
    writtenAt: found.writtenAt,
    serverNow: ctx.kube.serverNow(),
    localNow: Date.now(),
  });
  const judged = allNodes ?? await rowNodes(ctx.kube, keys, found, read.rows, now);
  const jobs = ownedBy(await jobsOf(ctx.kube, ns, read, found, keys, judged), found.owner);
  if (!found.record && jobs.length === 0) {
    throw new UsageError(
      `No run of prefix ${found.prefix} in namespace ${ns}: no run record ` +
        `(ConfigMap run-record.${labelValue(found.prefix)}) and no Jobs labelled ` +
        `${keys.owner}=${labelValue(found.prefix)} (check -n and --name-prefix)`,
    );
  }
  const input = { namespace: ns, ...found, keys, jobs, now };
  const nodes = allNodes ?? new Map([
    ...judged ?? [],
    ...await shownNodes(
      ctx.kube,
      keys,
      buildView({ ...input, nodes: new Map() }),
      jobs,
      judged,
      found.record,
    ),
  ]);
  return buildView({ ...input, nodes });
}

function render(view: StatusView, cfg: StatusConfig): string {
  if (cfg.output === "json") return renderJson(view);
  return renderText(view, view.now, cfg.output === "wide");
}

/**
 * `job-dispatcher status`: prints the run's view once, or with `--watch`
 * again whenever it changes until interrupted; returns the exit code of
 * the last view ({@linkcode statusExitCode}).
 */
export async function runStatus(cfg: StatusConfig, ctx: StatusContext): Promise<number> {
  let view = await readStatus(cfg, ctx);
  let shown = viewKey(view);
  ctx.stdout(render(view, cfg));
  while (cfg.watch && !ctx.signal.aborted) {
    await SYSTEM_CLOCK.sleep(cfg.watchIntervalSecs * 1000, ctx.signal);
    if (ctx.signal.aborted) break;
    view = await readStatus(cfg, ctx);
    // Redraw only on change, as kubectl get --watch prints only changes: not
    // on the ages and the heartbeat alone, which move at every read.
    const key = viewKey(view);
    if (key === shown) continue;
    shown = key;
    const text = render(view, cfg);
    ctx.stdout(ctx.terminal ? `\x1b[H\x1b[2J${text}` : text);
  }
  return statusExitCode(view, { requireEnded: cfg.requireEnded });
}
