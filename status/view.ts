/**
 * What `job-dispatcher status` shows, computed without I/O: the run record
 * (`report/record.ts`) merged with what the cluster says now (the Jobs, the
 * nodes' marks and cordons), and that view printed as kubectl prints: a
 * header, counts per phase, then tables of the nodes in flight, failed and
 * blocked; `-o wide` adds columns, `-o json` is one object.
 *
 * The Jobs outrank the record where they are newer: the record is at most
 * 10 s old while the run lives, a Job's conditions are the Job controller's
 * word now. The record outranks the Jobs where only the run knows (a node
 * failed after its Job succeeded, in its post-success work; a node that is
 * draining, blocked or queued has no Job at all).
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { V1Job, V1Node } from "@kubernetes/client-node";
import type { Phase } from "../engine/node_state.ts";
import { FINAL, IN_FLIGHT } from "../engine/node_state.ts";
import {
  classifyJob,
  interpretStatus,
  jobName,
  type OwnerRef,
  type RunIdentity,
  type TrackingKeys,
} from "../job.ts";
import { duration } from "../report/log.ts";
import { keptKey, keptSuccess } from "../nodes/success_mark.ts";
import { jobAction } from "../engine/stale.ts";
import type { RecordGates, RecordWave, RunRecord } from "../report/record.ts";

/** A node's phase as status shows it: the engine's, or `unknown` without a record. */
export type StatusPhase = Phase;

/** One node of the view. */
export interface StatusNode {
  /** The node. */
  node: string;
  /** Where it stands. */
  phase: StatusPhase;
  /** Its Job's name. */
  job: string;
  /** Why it failed, is blocked or stalls. */
  reason?: string;
  /** Its Job's pod is Pending past `--stall-warn-secs`. */
  stalled?: boolean;
  /** When the phase began (ms since the epoch). */
  since?: number;
  /** When its Job started (ms since the epoch). */
  startedAt?: number;
  /** What its Job's conditions say: `Complete`, `Failed`, `Active`, or none. */
  jobStatus?: "Complete" | "Failed" | "Active" | "None";
  /** Cordoned (`spec.unschedulable`), and whether by this dispatcher. */
  cordoned?: "ours" | "other";
  /** The node's outcome mark (`<t>/result`). */
  mark?: string;
}

/** Whether the run lives, ended, or died. */
export type RunLife = "running" | "finished" | "stopped" | "gone" | "unrecorded";

/** What a re-run of the prefix would do now. */
export interface Rerun {
  /** Running Jobs it would adopt. */
  adopt: number;
  /** Finished Jobs it would count. */
  count: number;
  /** Nodes it would start a Job on. */
  start: number;
}

/** Everything status shows. */
export interface StatusView {
  /** The Jobs' namespace. */
  namespace: string;
  /** The Jobs' name prefix. */
  prefix: string;
  /** The owner Job, if any. */
  owner?: OwnerRef;
  /** Whether the run lives. */
  life: RunLife;
  /** The record, when there is one. */
  record?: Omit<RunRecord, "nodes">;
  /** Nodes per phase. */
  counts: Partial<Record<StatusPhase, number>>;
  /** All nodes. */
  total: number;
  /** Every node, in dispatch order. */
  nodes: StatusNode[];
  /** With the run gone, or ended incomplete: what a re-run would do. */
  rerun?: Rerun;
  /** When it was read, on the record writer's clock ({@linkcode recordClockNow}). */
  now: number;
}

/** What {@linkcode buildView} merges. */
export interface ViewInput {
  /** The Jobs' namespace. */
  namespace: string;
  /** The prefix. */
  prefix: string;
  /** The owner, if any. */
  owner?: OwnerRef;
  /** The tracking keys. */
  keys: TrackingKeys;
  /** The run record, if one was found. */
  record?: RunRecord;
  /** The prefix's Jobs (of the owner, with one). */
  jobs: V1Job[];
  /** The nodes, by name (those the cluster still has). */
  nodes: ReadonlyMap<string, V1Node>;
  /** Now (ms since the epoch), on the record writer's clock ({@linkcode recordClockNow}). */
  now: number;
  /** When the record was last written, on the API server's clock ({@linkcode recordWrittenAt}). */
  writtenAt?: number;
}

/** A record older than this past its heartbeat belongs to a run that died. */
const GONE_GRACE_MS = 5_000;

/**
 * What a Job's conditions say, as the Job controller decided them (job.ts
 * `interpretStatus`): a decided outcome (`SuccessCriteriaMet`,
 * `FailureTarget`) is the Job's word already, as the engine counts it.
 */
export function jobStatusOf(job: V1Job | undefined): StatusNode["jobStatus"] {
  if (!job) return "None";
  const phase = interpretStatus(job).phase;
  return phase === "succeeded" ? "Complete" : phase === "failed" ? "Failed" : "Active";
}

function failedMessage(job: V1Job): string | undefined {
  const s = interpretStatus(job);
  if (s.phase !== "failed") return undefined;
  return `job ${job.metadata?.name} failed: ${s.message ? `${s.message} [${s.reason}]` : s.reason}`;
}

/**
 * Phases in which the node's Job may still be the earlier one the run is
 * replacing (an earlier owner's, template's or node's): its word is not
 * the run's, and the record says what the run does with it.
 */
const REPLACING: ReadonlySet<StatusPhase> = new Set(["waitingStale", "deleting"]);

/**
 * One node: the record's phase, corrected by its Job where the Job is newer.
 * Not by an earlier run's Job (another owner's, template's or node's) that a
 * queued node still has: the engine's first sight leaves it in place until
 * a slot replaces it, so it says nothing of this run.
 */
function mergeNode(
  base: StatusNode,
  job: V1Job | undefined,
  live: boolean,
  stale: (job: V1Job) => boolean,
  newer = false,
): StatusNode {
  const n = { ...base, jobStatus: jobStatusOf(job) };
  if (FINAL.has(n.phase) && n.phase !== "unknown" && !newer) return n;
  if (REPLACING.has(n.phase)) return n;
  if (n.phase === "queued" && job && stale(job)) return n;
  if (n.jobStatus === "Complete") {
    // Only the run does the post-success work (verification, labels,
    // taints, uncordon): a node it left finishing still owes it, whether the
    // run is under way or died in it. A Complete Job does not say it was done.
    if (n.phase !== "finishing") n.phase = "succeeded";
  } else if (n.jobStatus === "Failed") {
    if (!(live && n.phase === "explaining")) {
      n.phase = "failed";
      n.reason ??= failedMessage(job!);
    }
  } else if (n.jobStatus === "Active" && !IN_FLIGHT.has(n.phase)) n.phase = "running";
  n.startedAt ??= job?.metadata?.creationTimestamp
    ? new Date(job.metadata.creationTimestamp).getTime()
    : undefined;
  return n;
}

/** A ConfigMap's `managedFields`, as far as {@linkcode recordWrittenAt} reads them. */
export interface ManagedFieldsEntry {
  /** When the API server last changed the fields of this manager (RFC 3339, to the second). */
  time?: string | Date;
  /** The fields this manager owns. */
  fieldsV1?: Record<string, unknown>;
}

/**
 * When the record was last written, on the API server's clock: the
 * `managedFields` time of the manager that owns `data.record`. The API server
 * sets that time itself, at each update that changes a field of the manager
 * (every write of the record does: its `updatedAt` is in `data.record`).
 * Undefined without one (an API server before 1.18, or a proxy that strips
 * managedFields).
 */
export function recordWrittenAt(
  managedFields: readonly ManagedFieldsEntry[] | undefined,
): number | undefined {
  let latest: number | undefined;
  for (const e of managedFields ?? []) {
    const data = e.fieldsV1?.["f:data"] as Record<string, unknown> | undefined;
    if (!data?.["f:record"] || e.time === undefined) continue;
    const t = new Date(e.time).getTime();
    if (!Number.isNaN(t) && (latest === undefined || t > latest)) latest = t;
  }
  return latest;
}

/**
 * Now, on the clock of the record's writer: what status compares the
 * record's times with (is the run alive, how old is the record, how long
 * ago did a node start). Not the reader's clock: a bastion 45 s off would
 * call a live run gone, or a dead one alive. The API server is the one clock
 * both sides see: its `Date` header says its now, and the record's
 * `managedFields` time its write, so the record's age is the server's
 * difference of the two, whatever either dispatcher's clock says; that age
 * added to the record's own `updatedAt` is now on the writer's clock. (Two
 * reads, watching the record's resourceVersion move, would need no clock,
 * but a one-shot `status` cannot wait two heartbeats to answer.) Without the
 * server's write time, its now is taken as the writer's (the writer runs in
 * the cluster); without either, the reader's clock, as before.
 */
export function recordClockNow(o: {
  record?: Pick<RunRecord, "updatedAt">;
  /** {@linkcode recordWrittenAt} of the record's ConfigMap. */
  writtenAt?: number;
  /** The API server's clock now (`Kube.serverNow`). */
  serverNow?: number;
  /** The reader's clock now. */
  localNow: number;
}): number {
  if (o.serverNow === undefined) return o.localNow;
  if (o.record === undefined || o.writtenAt === undefined) return o.serverNow;
  // The Date header and managedFields both count whole seconds: an age of
  // -1 s is the same second.
  return o.record.updatedAt + Math.max(0, o.serverNow - o.writtenAt);
}

/**
 * Whether `job` was made after the record's last write, both by the API
 * server's clock (to the second it stamps): then a later run made it, one
 * whose own record writes were refused (no `configmaps update`, a webhook),
 * and the ended record's word on the node is not the last. Without the
 * server's write time, never: the writer's clock may be off.
 */
function madeSince(job: V1Job | undefined, writtenAt: number | undefined): boolean {
  const made = job?.metadata?.creationTimestamp;
  return writtenAt !== undefined && made !== undefined &&
    new Date(made).getTime() >= writtenAt + 1_000;
}

/**
 * A node its Job made succeeded is still finishing while its node carries
 * that Job's success mark (nodes/success_mark.ts): the run writes the mark
 * before the post-success work and removes it after, so the mark is the
 * cluster's word that the work never ended, where the record, written at
 * most once a heartbeat, may still say running for a run killed after the
 * Job became Complete. Only a mark of this Job (its name, owner, template
 * hash), as a re-run counts it; the node is read only when the run is gone
 * or with `-o json` / `-o wide`. Changes `n` in place.
 */
function owedWork(
  n: StatusNode,
  job: V1Job | undefined,
  node: V1Node | undefined,
  run: RunIdentity,
): void {
  if (n.phase !== "succeeded" || !job || n.jobStatus !== "Complete") return;
  const hash = job.metadata?.annotations?.[run.keys.templateHash];
  if (keptOn(node, job.metadata?.name ?? "", { ...run, templateHash: hash })) {
    n.phase = "finishing";
  }
}

/** Whether `node` keeps the success of Job `job` of `run` (nodes/success_mark.ts `keptSuccess`). */
function keptOn(node: V1Node | undefined, job: string, run: RunIdentity): boolean {
  return keptSuccess(node?.metadata?.annotations, keptKey(run.keys.kept, job), {
    job,
    owner: run.owner?.uid,
    templateHash: run.templateHash,
  }) !== undefined;
}

/** Whether the record says the run lives, ended or died. */
export function lifeOf(record: RunRecord | undefined, now: number): RunLife {
  if (!record) return "unrecorded";
  if (record.state !== "running") return record.state;
  return now - record.updatedAt > 2 * record.heartbeatMs + GONE_GRACE_MS ? "gone" : "running";
}

function nodeFacts(n: StatusNode, node: V1Node | undefined, keys: TrackingKeys): StatusNode {
  if (!node) return n;
  const out = { ...n, mark: node.metadata?.labels?.[keys.result] };
  if (node.spec?.unschedulable) {
    out.cordoned = node.metadata?.annotations?.[keys.cordonedBy] ? "ours" : "other";
  }
  if (out.phase === "failed" && !out.reason) out.reason = node.metadata?.annotations?.[keys.error];
  return out;
}

/**
 * The view: each node of the record (or, without one, of the Jobs) with its
 * Job and node facts, the counts, and what a re-run would do.
 */
export function buildView(v: ViewInput): StatusView {
  const life = lifeOf(v.record, v.now);
  const live = life === "running";
  const byNode = new Map<string, V1Job>();
  for (const j of v.jobs) {
    const name = j.metadata?.annotations?.[v.keys.nodeName] ?? j.metadata?.labels?.[v.keys.node];
    if (name) byNode.set(name, j);
  }
  const seen = new Set<string>();
  const nodes: StatusNode[] = [];
  const run = runOf(v);
  const add = (base: StatusNode) => {
    seen.add(base.node);
    const nodeUid = v.nodes.get(base.node)?.metadata?.uid;
    const stale = (j: V1Job) => classifyJob(j, run, nodeUid) === "stale";
    const job = byNode.get(base.node);
    // A later run's Complete Job says nothing of its post-success work
    // (verification, labels): only its failure or its activity is news.
    const newer = !live && madeSince(job, v.writtenAt) && jobStatusOf(job) !== "Complete";
    const merged = mergeNode(base, job, live, stale, newer);
    // The record's own succeeded is the run's word that the work ended (a
    // mark it could not remove after is left for a re-run, said in its log).
    if (base.phase !== "succeeded") owedWork(merged, job, v.nodes.get(base.node), run);
    nodes.push(nodeFacts(merged, v.nodes.get(base.node), v.keys));
  };
  // The Job's own name where it exists: jobName() hashes every long name.
  for (const r of v.record?.nodes ?? []) {
    add({ ...r, job: byNode.get(r.node)?.metadata?.name ?? jobName(v.prefix, r.node) });
  }
  // Without a record (or a Job the record does not know): the Job alone says.
  for (const [node, j] of byNode) {
    if (!seen.has(node)) add({ node, phase: "unknown", job: j.metadata!.name! });
  }
  const counts: Partial<Record<StatusPhase, number>> = {};
  for (const n of nodes) counts[n.phase] = (counts[n.phase] ?? 0) + 1;
  const { nodes: _, ...record } = v.record ?? { nodes: [] };
  return {
    namespace: v.namespace,
    prefix: v.prefix,
    owner: v.owner ?? v.record?.owner,
    life,
    record: v.record ? record as Omit<RunRecord, "nodes"> : undefined,
    counts,
    total: nodes.length,
    nodes,
    rerun: live ? undefined : rerunOf(nodes, byNode, v),
    now: v.now,
  };
}

/**
 * The run as the engine's first sight judges Jobs by (job.ts `classifyJob`):
 * the prefix, the owner, and the record's template hash.
 */
function runOf(v: ViewInput): RunIdentity {
  return {
    keys: v.keys,
    prefix: v.prefix,
    owner: v.owner ?? v.record?.owner,
    templateHash: v.record?.templateHash,
  };
}

/**
 * What a re-run of the same command would do with each node's Job, as the
 * engine decides it on its first sight (engine/stale.ts `jobAction`, which
 * `--dry-run=plan` shows per node too): adopt the running Jobs, count the
 * ended ones, start the rest (no Job, or a stale one). The template is the
 * recorded run's (a re-run of the same command); `--retry-failed` is the
 * re-run's, which status does not know: a failed Job is counted, as a
 * re-run without the flag counts it.
 */
function rerunOf(
  nodes: readonly StatusNode[],
  jobs: ReadonlyMap<string, V1Job>,
  v: ViewInput,
): Rerun | undefined {
  const r = { adopt: 0, count: 0, start: 0 };
  const run = runOf(v);
  for (const n of nodes) {
    const job = jobs.get(n.node);
    // As engine/fanout.ts #keptSuccesses: a success kept on the node whose
    // Job is gone or going (its TTL) is counted, its Job never started again.
    const gone = !job || job.metadata?.deletionTimestamp !== undefined;
    if (gone && keptOn(v.nodes.get(n.node), job?.metadata?.name ?? n.job, run)) {
      r.count++;
      continue;
    }
    const nodeUid = v.nodes.get(n.node)?.metadata?.uid;
    const action = jobAction(job, run, { nodeUid });
    if (action === "adopt") r.adopt++;
    else if (action === "succeeded" || action === "failed") r.count++;
    else r.start++;
  }
  return r.adopt + r.start === 0 ? undefined : r;
}

/**
 * The exit code status ends with: 0 while nothing failed (and, once the run
 * ended, every node succeeded), 1 otherwise. With `requireEnded`
 * (`--require-ended`, what `helm test` asks: "did it work?"), a run still
 * alive is 1 too: a run paused by a gate, or still going after Helm's
 * `--timeout` gave up waiting for its hook, has not worked yet.
 */
export function statusExitCode(view: StatusView, o: { requireEnded?: boolean } = {}): number {
  const failed = (view.counts.failed ?? 0) + (view.counts.stillBlocked ?? 0);
  if (failed > 0) return 1;
  if (view.life === "running") return o.requireEnded ? 1 : 0;
  return view.nodes.every((n) => n.phase === "succeeded") ? 0 : 1;
}

/**
 * What `status --watch` compares between two reads: the view without what
 * only the passing of time moves (the clock, the record's heartbeat, its
 * rate, ETA and progress line, a soak's countdown), so that a heartbeat
 * that changed nothing prints nothing, as `kubectl get --watch` prints only
 * changes; the next change prints every age anew.
 *
 * @example
 * ```ts
 * viewKey(a) === viewKey({ ...a, now: a.now + 2_000 }); // true
 * ```
 */
export function viewKey(view: StatusView): string {
  const { now: _, record, ...rest } = view;
  if (!record) return JSON.stringify(rest);
  const { updatedAt: _u, rate: _r, etaSecs: _e, summary, wave, ...facts } = record;
  return JSON.stringify({
    ...rest,
    record: {
      ...facts,
      // A live run's summary is its progress line (elapsed, rate): time alone moves it.
      summary: view.life === "running" ? undefined : summary,
      wave: wave && { ...wave, soakLeftMs: undefined },
      // When the gates were last asked is an age: a new answer alone prints nothing.
      gates: record.gates && { ...record.gates, checkedAt: undefined },
      paused: record.paused,
      stoppedBy: record.stoppedBy,
    },
  });
}

const age = (now: number, at?: number) => (at === undefined ? "-" : ageText((now - at) / 1000));

/**
 * kubectl's units past seconds: under `below` of a unit it says the one
 * before; under `detail` of it, it adds the remainder in the one before.
 */
const AGE_UNITS = [
  { name: "m", of: 60, below: 2, detail: 10 },
  { name: "h", of: 60, below: 3, detail: 8 },
  { name: "d", of: 24, below: 2, detail: 8 },
  { name: "y", of: 365, below: 2, detail: 8 },
];

/**
 * An age as kubectl prints one (apimachinery's `HumanDuration`), so the
 * AGE of `status` and of `kubectl get jobs` agree: seconds under two
 * minutes (`61s`, not a rounded `1m` for a Job started a minute ago), then
 * floored, never rounded up: `2m30s` under ten minutes, `60m` to `179m`,
 * `3h20m` under eight hours, `47h`, `3d5h`, `8d`.
 *
 * @example
 * ```ts
 * ageText(150); // "2m30s"
 * ```
 */
export function ageText(seconds: number): string {
  let value = Math.max(0, Math.floor(seconds));
  let unit = "s";
  for (const u of AGE_UNITS) {
    if (value < u.of * u.below) return `${value}${unit}`;
    const whole = Math.floor(value / u.of);
    const rest = value % u.of;
    if (whole < u.detail) return `${whole}${u.name}${rest ? `${rest}${unit}` : ""}`;
    value = whole;
    unit = u.name;
  }
  return `${value}${unit}`;
}

/** Columns padded as kubectl pads them: three spaces between. */
export function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("   ").trimEnd());
}

function headLines(view: StatusView, now: number): string[] {
  const r = view.record;
  const owner = view.owner ? `, owner job ${view.owner.name}` : "";
  const lines = [`run ${view.prefix} in ${view.namespace}${owner}: ${lifeLine(view, now)}`];
  if (!r) return lines;
  if (r.paused) lines.push(`paused by ${r.paused}`);
  if (r.stoppedBy) lines.push(`stopped: ${r.stoppedBy}`);
  if (r.wave) lines.push(waveLine(r.wave));
  if (r.gates) lines.push(gatesLine(r.gates, now));
  lines.push(
    `window: ${
      r.windowClosesAt === undefined ? "none" : `closes in ${age(r.windowClosesAt, now)}`
    }` +
      `; parallelism ${r.parallelism}` +
      (r.rate ? `; rate ${r.rate.toFixed(r.rate < 10 ? 2 : 0)} nodes/s` : "") +
      etaText(view),
  );
  if (r.budget) lines.push(`budget: ${r.budget}`);
  return lines;
}

/** `wave: 2 of 3, soaking: 42s left before wave 3`: where a run in waves stands. */
function waveLine(w: RecordWave): string {
  const next = w.wave < w.waves ? ` before wave ${w.wave + 1}` : "";
  if (w.stage === "soaking") {
    return `wave: ${w.wave} of ${w.waves}, soaking: ${
      ageText((w.soakLeftMs ?? 0) / 1000)
    } left${next}`;
  }
  if (w.stage === "holding") {
    return `wave: ${w.wave} of ${w.waves}, soaked; holding${next} until the gates let it open`;
  }
  return `wave: ${w.wave} of ${w.waves}, running`;
}

/**
 * `gates: ok (3 queries, checked 4s ago)`: the health gates' state, so that
 * a rollout idle for its gates says so (a dark selector pauses starts
 * without pausing the run).
 */
function gatesLine(g: RecordGates, now: number): string {
  const checked = `${counted(g.queries, "query", "queries")}, ${
    g.checkedAt === undefined ? "not checked yet" : `checked ${age(now, g.checkedAt)} ago`
  }`;
  switch (g.state) {
    case "ok":
      return `gates: ok (${checked})`;
    case "waiting":
      return `gates: waiting for an answer of Prometheus (${checked})`;
    case "outage":
      return `gates: Prometheus unreachable for ${age(now, g.since)}: ${g.detail} (starts paused)`;
    case "nodata":
      return `gates: no data: ${g.detail} (starts paused)`;
    case "breached":
      return `gates: breached: ${g.detail} (the latch is not written yet)`;
    case "latched":
      return `gates: breached: ${g.detail} (latched; lift with ${g.lift})`;
    case "unlatched":
      return `gates: breached: ${g.detail} (the latch was refused: the run stops)`;
  }
  // A state a newer dispatcher wrote (the record's version stays 1 for it): its word, not a blank.
  const other = g as RecordGates;
  return `gates: ${other.state}${other.detail ? `: ${other.detail}` : ""} (${checked})`;
}

/**
 * The ETA of a live run: none while paused or after a stop, which the rate
 * (measured while starts ran) cannot foresee; said as such, not as a time.
 */
function etaText(view: StatusView): string {
  const r = view.record;
  if (!r || view.life !== "running") return "";
  if (r.stoppedBy) return "; ETA none (stopped)";
  if (r.paused) return "; ETA none (paused)";
  return r.etaSecs !== undefined ? `; ETA ${duration(r.etaSecs)}` : "";
}

/** The ETA as `-o json` gives it: null while paused or after a stop. */
function etaSecsOf(view: StatusView): number | null {
  const r = view.record;
  if (!r || r.paused || r.stoppedBy) return null;
  return r.etaSecs ?? null;
}

function lifeLine(view: StatusView, now: number): string {
  const r = view.record;
  if (!r) {
    return "no run record (a dispatcher before it, or it may not write ConfigMaps); from the Jobs";
  }
  const started = `started ${age(now, r.startedAt)} ago`;
  if (view.life === "gone") {
    return `gone: its record was last written ${age(now, r.updatedAt)} ago while it ran ` +
      `(killed, or its pod evicted); ${started}`;
  }
  if (view.life === "running") return `running, ${started}, record ${age(now, r.updatedAt)} old`;
  return `${view.life} ${age(now, r.updatedAt)} ago, ${started}: ${r.summary}`;
}

function rerunLine(view: StatusView): string[] {
  const r = view.rerun;
  if (!r) return [];
  return [
    `a re-run would adopt ${r.adopt} running Jobs, count ${r.count} finished ones ` +
    `and start ${counted(r.start, "node")}`,
  ];
}

/** The counts, in the order a rollout moves through them. */
function countLines(view: StatusView): string[] {
  const order: StatusPhase[] = [
    "succeeded",
    "failed",
    "running",
    "finishing",
    "explaining",
    "creating",
    "draining",
    "waitingStale",
    "deleting",
    "blocked",
    "stillBlocked",
    "queued",
    "unknown",
  ];
  const parts = order.filter((p) => view.counts[p]).map((p) => `${view.counts[p]} ${p}`);
  return [`${counted(view.total, "node")}: ${parts.join(", ") || "none"}`];
}

function section(title: string, rows: string[][]): string[] {
  return rows.length > 1 ? ["", title, ...table(rows)] : [];
}

/** The NOTE of a node in flight: its stall, or post-success work a dead run left owed. */
function note(n: StatusNode, life: RunLife): string {
  if (n.stalled) return `stalled: ${n.reason}`;
  if (n.phase === "finishing" && life !== "running") {
    return "its post-success work never ended (verification, labels, uncordon): a re-run does it";
  }
  return "";
}

/**
 * The text view: header, counts, then the nodes in flight (age, phase), the
 * failed ones with their reasons and the blocked ones with their pods;
 * `wide` adds the Job's start, its conditions, cordons and marks.
 */
export function renderText(view: StatusView, now: number, wide = false): string {
  const extra = (n: StatusNode) =>
    wide ? [age(now, n.startedAt), n.jobStatus ?? "-", n.cordoned ?? "-", n.mark ?? "-"] : [];
  const extraHead = wide ? ["STARTED", "JOB STATUS", "CORDONED", "MARK"] : [];
  const flight = view.nodes.filter((n) => IN_FLIGHT.has(n.phase) || n.phase === "explaining");
  const failed = view.nodes.filter((n) => n.phase === "failed" || n.phase === "unknown");
  const blocked = view.nodes.filter((n) => n.phase === "blocked" || n.phase === "stillBlocked");
  const lines = [
    ...headLines(view, now),
    ...countLines(view),
    ...rerunLine(view),
    ...section("IN FLIGHT", [
      ["NODE", "PHASE", "AGE", "JOB", ...extraHead, "NOTE"],
      ...flight.map((n) => [
        n.node,
        n.phase,
        age(now, n.since),
        n.job,
        ...extra(n),
        note(n, view.life),
      ]),
    ]),
    ...section("FAILED", [
      ["NODE", "JOB", ...extraHead, "REASON"],
      ...failed.map((n) => [n.node, n.job, ...extra(n), n.reason ?? "-"]),
    ]),
    ...section("BLOCKED", [
      ["NODE", "PHASE", "AGE", ...extraHead, "PODS"],
      ...blocked.map((n) => [n.node, n.phase, age(now, n.since), ...extra(n), n.reason ?? "-"]),
    ]),
  ];
  if (wide) {
    const rest = view.nodes.filter((n) =>
      !flight.includes(n) && !failed.includes(n) && !blocked.includes(n)
    );
    lines.push(...section("OTHERS", [
      ["NODE", "PHASE", "AGE", "JOB", ...extraHead],
      ...rest.map((n) => [n.node, n.phase, age(now, n.since), n.job, ...extra(n)]),
    ]));
  }
  return lines.join("\n") + "\n";
}

/** The JSON view: the run, the counts and every node. */
export function renderJson(view: StatusView): string {
  const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());
  const r = view.record;
  return JSON.stringify(
    {
      kind: "JobDispatcherStatus",
      version: 1,
      namespace: view.namespace,
      prefix: view.prefix,
      owner: view.owner ?? null,
      run: {
        state: view.life,
        startedAt: iso(r?.startedAt) ?? null,
        updatedAt: iso(r?.updatedAt) ?? null,
        paused: r?.paused ?? null,
        stoppedBy: r?.stoppedBy ?? null,
        windowClosesAt: iso(r?.windowClosesAt) ?? null,
        parallelism: r?.parallelism ?? null,
        rate: r?.rate ?? null,
        etaSecs: etaSecsOf(view),
        wave: r?.wave
          ? {
            wave: r.wave.wave,
            waves: r.wave.waves,
            stage: r.wave.stage,
            ...(r.wave.soakLeftMs === undefined
              ? {}
              : { soakLeftSecs: Math.round(r.wave.soakLeftMs / 1000) }),
          }
          : null,
        gates: r?.gates
          ? {
            state: r.gates.state,
            queries: r.gates.queries,
            checkedAt: iso(r.gates.checkedAt) ?? null,
            since: iso(r.gates.since) ?? null,
            detail: r.gates.detail ?? null,
            lift: r.gates.lift ?? null,
          }
          : null,
        summary: r?.summary ?? null,
      },
      total: view.total,
      counts: view.counts,
      rerun: view.rerun ?? null,
      nodes: view.nodes.map((n) => ({
        node: n.node,
        phase: n.phase,
        job: n.job,
        reason: n.reason ?? null,
        stalled: n.stalled ?? false,
        since: iso(n.since) ?? null,
        startedAt: iso(n.startedAt) ?? null,
        jobStatus: n.jobStatus ?? null,
        cordoned: n.cordoned ?? null,
        mark: n.mark ?? null,
      })),
    },
    null,
    2,
  ) + "\n";
}
