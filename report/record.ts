/**
 * The durable run record: what `job-dispatcher status` needs of a run, kept
 * in the cluster while it runs and after it ended or died. One ConfigMap per
 * name prefix in the Jobs' namespace, owned by the owner Job when there is
 * one (so the garbage collector removes it with the owner and its per-node
 * Jobs), else belonging to the prefix (the next run of the prefix replaces
 * it). A ConfigMap, not annotations on the owner: every watcher of Jobs (the
 * Job controller, our own pause watch) would receive the whole record on
 * every write, and without an owner there is no Job to annotate.
 *
 * The run's facts are plain JSON under `data.record` (readable with
 * `kubectl get cm -o yaml`); the node table is gzip-compressed JSON under
 * `binaryData.nodes`, column by column (names, one letter per phase, ages in
 * seconds), so that 10,000 nodes fit well within the API server's 1 MiB
 * limit on a ConfigMap's data. Reading it needs `configmaps get` only.
 *
 * Pure but for the compression streams; {@linkcode Recorder} writes it.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { Phase } from "../engine/node_state.ts";
import { labelValue, type OwnerRef, type TrackingKeys } from "../job.ts";

/** The record's format version; a reader refuses another. */
export const RECORD_VERSION = 1;

/**
 * The most bytes the record may take in its ConfigMap: the API server
 * refuses a ConfigMap whose data exceed 1 MiB (1,048,576 bytes), and
 * binaryData travel base64-encoded in the object etcd stores; this leaves
 * room for the metadata.
 */
export const RECORD_BUDGET_BYTES = 900_000;

/** The longest reason kept per node; the full one is in the node's Event and mark. */
export const MAX_REASON = 256;

/** One node as the record keeps it. */
export interface RecordNode {
  /** The node. */
  node: string;
  /** Where it stands, as the engine says (`engine/node_state.ts`). */
  phase: Phase;
  /** When that phase began (ms since the epoch, to the second). */
  since?: number;
  /** When its Job started (ms since the epoch, to the second). */
  startedAt?: number;
  /** Why it failed, is blocked, or stalls. */
  reason?: string;
  /** Its Job's pod is still Pending past `--stall-warn-secs` (the reason says why). */
  stalled?: boolean;
}

/** What a run is doing, as its record says. */
export type RunState = "running" | "finished" | "stopped";

/** The open wave, as the record keeps it (engine/fanout_types.ts `WaveView`). */
export interface RecordWave {
  /** The open wave, 1-based. */
  wave: number;
  /** How many waves the run has. */
  waves: number;
  /** `running`, `soaking` or `holding` (the soak is over; a gate has not let the next open). */
  stage: "running" | "soaking" | "holding";
  /** While soaking: the soak left, in ms, when the record was written. */
  soakLeftMs?: number;
}

/** The longest query, selector or error the record keeps of the gates (`--gate-*` can be long). */
export const MAX_GATE_DETAIL = 256;

/**
 * The health gates' state as the run knows it (gates/state.ts, in a few
 * short words): what `status` says of a rollout idle for its gates. Never
 * a query's result: the record stays bounded.
 */
export interface RecordGates {
  /**
   * `ok` (the last answer is clean and fresh), `waiting` (no answer yet, or
   * the last clean one is older than the interval), `outage` (Prometheus
   * does not answer), `nodata` (a selector matches nothing, or a partial
   * answer), `breached` (its latch not written yet), `latched` (a person
   * lifts it), `unlatched` (the latch was refused: the run stops).
   */
  state: "ok" | "waiting" | "outage" | "nodata" | "breached" | "latched" | "unlatched";
  /** How many queries the gates measure (`--gate-alerts` counts as one). */
  queries: number;
  /** When Prometheus was last asked (ms since the epoch, the writer's clock as `updatedAt`). */
  checkedAt?: number;
  /** When an outage or a spell of no data began (ms since the epoch). */
  since?: number;
  /**
   * What fails, at most {@linkcode MAX_GATE_DETAIL} characters: the
   * breached query and its value, the dark selector, or the outage's error.
   */
  detail?: string;
  /** While latched: the command that lifts the latch. */
  lift?: string;
}

/** The run record. */
export interface RunRecord {
  /** The format version. */
  version: number;
  /** The Jobs' name prefix. */
  prefix: string;
  /**
   * The run's template hash (job.ts `templateHash`): `status` judges the
   * Job of a node not yet started by it, as the engine's first sight does
   * (an earlier template's Job is replaced, not counted).
   */
  templateHash?: string;
  /** The Jobs' namespace. */
  namespace: string;
  /** The owner Job, if any. */
  owner?: OwnerRef;
  /**
   * The id of the dispatcher process that writes the record: a writer that
   * finds another's id here after its own write was superseded by a newer
   * run and stops writing (`record_store.ts`).
   */
  writer?: string;
  /** Running, finished (its summary written), or stopped by a signal. */
  state: RunState;
  /** When the dispatch began (ms since the epoch). */
  startedAt: number;
  /** When the record was written (ms since the epoch). */
  updatedAt: number;
  /**
   * The longest the run leaves its record unwritten while it lives: a
   * reader that finds a running record older than twice this says the run
   * is gone (killed, its pod evicted).
   */
  heartbeatMs: number;
  /** `--parallelism`. */
  parallelism: number;
  /** Why starts are paused (`<P>/paused`, `--pause-file`, an API outage), if they are. */
  paused?: string;
  /** Why the rollout stopped early (failure budget, canary), if it did. */
  stoppedBy?: string;
  /** When the open maintenance window closes (ms since the epoch), with `--window`. */
  windowClosesAt?: number;
  /** The availability budget, as the progress line says it. */
  budget?: string;
  /** Nodes finished per second over the time starts were not paused. */
  rate?: number;
  /** Seconds left at that rate. */
  etaSecs?: number;
  /**
   * With `--waves`/`--canary`: the open wave, how many, its stage (running,
   * soaking, holding for the gates) and, while soaking, the soak left (ms)
   * when the record was written: what `status` says of an idle rollout.
   */
  wave?: RecordWave;
  /** With `--gate-*`: the gates' state; absent without gates (and in records of older runs). */
  gates?: RecordGates;
  /** The progress line or, once ended, the summary. */
  summary: string;
  /** Every node, in dispatch order. */
  nodes: RecordNode[];
  /** How many reasons were left out to stay within {@linkcode RECORD_BUDGET_BYTES}. */
  reasonsDropped?: number;
  /**
   * The step, in seconds, the node table's times were rounded to when even
   * without reasons it did not fit (absent: to the second; -1: left out).
   */
  timeStepSecs?: number;
}

/**
 * A node table as {@linkcode encodeRecord} reads it: an array, or (the run
 * record's writer) a table that makes each node as it is read, read once or
 * more (`length` nodes each time), so that no write holds an object for
 * every node at once (~7 MB at 65,000 nodes, every 10 s).
 */
export interface RecordNodes extends Iterable<RecordNode> {
  /** How many nodes each reading yields. */
  readonly length: number;
}

/** A record to encode: a {@linkcode RunRecord} whose node table may be read a node at a time. */
export type RecordToWrite = Omit<RunRecord, "nodes"> & { nodes: RecordNodes };

/** The ConfigMap fields the record takes. */
export interface EncodedRecord {
  /** Plain: `record` (the run's facts as JSON) and `summary` (one line). */
  data: Record<string, string>;
  /** `nodes`: the node table, gzip-compressed JSON, base64. */
  binaryData: Record<string, string>;
  /** The bytes the two take in the object. */
  bytes: number;
}

const CODES: Record<Phase, string> = {
  queued: "q",
  waitingStale: "w",
  deleting: "x",
  creating: "c",
  draining: "d",
  running: "r",
  finishing: "f",
  explaining: "e",
  blocked: "b",
  stillBlocked: "B",
  succeeded: "s",
  failed: "F",
  unknown: "u",
};
const PHASES = new Map(Object.entries(CODES).map(([p, c]) => [c, p as Phase]));

/** The node table, one column per field (it compresses far better than objects). */
interface Columns {
  names: string[];
  phases: string;
  /** Seconds from the run's start; -1: not known. */
  since: number[];
  started: number[];
  /** Node index → reason. */
  reasons: Record<string, string>;
  stalled: number[];
}

/**
 * The record's ConfigMap name for a prefix: `run-record.<prefix>` (the
 * prefix as a label value, so a long one is shortened with its hash).
 *
 * @example
 * ```ts
 * recordName("upgrade"); // "run-record.upgrade"
 * ```
 */
export function recordName(prefix: string): string {
  return `run-record.${labelValue(prefix)}`;
}

/**
 * The node table's columns from one reading of it, and how many of its nodes
 * had a reason in that reading: the writer's table reads the engine's states
 * live, so a reading after an over-budget try may have more or fewer.
 */
function columns(
  nodes: RecordNodes,
  startedAt: number,
  reasons: number,
  step = 1,
): { c: Columns; withReasons: number } {
  // A coarser step repeats values gzip then folds; Infinity leaves the times out.
  const sec = (ms?: number) =>
    ms === undefined || step === Infinity
      ? -1
      : Math.max(0, Math.round((ms - startedAt) / 1000 / step) * step);
  // Each column made at its size, in one reading of the table: the record is
  // written every 10 s, and at 65,000 nodes growing arrays and a string a
  // character at a time made ~7 MB of garbage a write.
  const n = nodes.length;
  const names = new Array<string>(n), codes = new Array<string>(n);
  const since = new Array<number>(n), started = new Array<number>(n);
  const c: Columns = { names, phases: "", since, started, reasons: {}, stalled: [] };
  let i = 0, kept = 0, withReasons = 0;
  for (const node of nodes) {
    if (node.reason) withReasons++;
    names[i] = node.node;
    codes[i] = CODES[node.phase] ?? "q";
    since[i] = sec(node.since);
    started[i] = sec(node.startedAt);
    if (node.reason && kept < reasons) {
      c.reasons[i] = node.reason.slice(0, MAX_REASON);
      kept++;
    }
    if (node.stalled) c.stalled.push(i);
    i++;
  }
  // A table shorter than it said: no holes (they would read as null).
  if (i < n) {
    names.length =
      codes.length =
      since.length =
      started.length =
        i;
  }
  c.phases = codes.join("");
  return { c, withReasons };
}

async function gzip(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function gunzip(bytes: Uint8Array): Promise<string> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  return await new Response(stream).text();
}

function base64(bytes: Uint8Array): string {
  // The runtime's own encoder where it has one (V8 14+): the spread of each
  // 32 kB chunk below made ~12 MB of garbage for a 200 kB record.
  const native = (bytes as { toBase64?: () => string }).toBase64;
  if (native) return native.call(bytes);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function unbase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * The steps, in seconds, the node table's times are rounded to when the
 * record does not fit without reasons: a minute, ten minutes, an hour, then
 * none (the record says -1).
 */
const TIME_STEPS = [1, 60, 600, 3600, Infinity];

/**
 * Encodes a record into ConfigMap fields within
 * {@linkcode RECORD_BUDGET_BYTES}: when the reasons do not fit, the later
 * ones are left out (counted in `reasonsDropped`); when the table does not fit
 * without them (65,000 nodes whose names do not compress), its times are
 * rounded to a coarser step (`timeStepSecs`), and at last left out: names
 * and phases are what `status` cannot do without.
 *
 * @throws {RangeError} when even the names and phases alone do not fit
 */
export async function encodeRecord(
  r: RecordToWrite,
  budget = RECORD_BUDGET_BYTES,
): Promise<EncodedRecord> {
  let withReasons = 0;
  for (const n of r.nodes) if (n.reason) withReasons++;
  let bytes = 0;
  for (const step of TIME_STEPS) {
    const keeps = step === 1 ? reasonCounts(withReasons) : [0];
    for (const keep of keeps) {
      const { nodes: _, ...facts } = r;
      const table = columns(r.nodes, r.startedAt, keep, step);
      // Counted in the reading written, not the first one.
      const dropped = Math.max(0, table.withReasons - keep);
      const head = JSON.stringify({
        ...facts,
        reasonsDropped: dropped || undefined,
        timeStepSecs: step === 1 ? undefined : step === Infinity ? -1 : step,
      });
      const nodes = base64(await gzip(JSON.stringify(table.c)));
      const data = { record: head, summary: r.summary };
      bytes = head.length + r.summary.length + nodes.length;
      if (bytes <= budget) return { data, binaryData: { nodes }, bytes };
    }
  }
  throw new RangeError(
    `Cannot keep the run record of ${counted(r.nodes.length, "node")} in a ConfigMap: ` +
      `${bytes} bytes with names and phases alone, over ${budget}`,
  );
}

/** How many reasons to try keeping: all, then halving past 16, then one less down to none. */
function reasonCounts(all: number): number[] {
  const out: number[] = [];
  for (let keep = all; keep > 0; keep = keep > 16 ? Math.floor(keep / 2) : keep - 1) {
    out.push(keep);
  }
  out.push(0);
  return out;
}

/**
 * Decodes a record's ConfigMap fields.
 *
 * @throws {SyntaxError} when they are not a record of this version
 */
export async function decodeRecord(
  data: Record<string, string> | undefined,
  binaryData: Record<string, string> | undefined,
): Promise<RunRecord> {
  const facts = JSON.parse(data?.record ?? "null");
  if (facts?.version !== RECORD_VERSION || typeof binaryData?.nodes !== "string") {
    throw new SyntaxError(
      `Cannot read the run record: not a version ${RECORD_VERSION} record (a newer dispatcher wrote it?)`,
    );
  }
  const c: Columns = JSON.parse(await gunzip(unbase64(binaryData.nodes)));
  const at = (s: number) => (s < 0 ? undefined : facts.startedAt + s * 1000);
  const stalled = new Set(c.stalled);
  const nodes = c.names.map((node, i): RecordNode => {
    const n: RecordNode = { node, phase: PHASES.get(c.phases[i]) ?? "queued" };
    if (at(c.since[i]) !== undefined) n.since = at(c.since[i]);
    if (at(c.started[i]) !== undefined) n.startedAt = at(c.started[i]);
    if (c.reasons[i] !== undefined) n.reason = c.reasons[i];
    if (stalled.has(i)) n.stalled = true;
    return n;
  });
  return { ...facts, nodes };
}

/**
 * The record's ConfigMap: labelled with the prefix (`<t>/owner`), as a
 * record (`<t>/run-record`) and with the owner's name (`<t>/owner-job`), and
 * owned by the owner Job when there is one.
 */
export function recordConfigMap(
  keys: TrackingKeys,
  r: Pick<RunRecord, "prefix" | "namespace" | "owner">,
  encoded: EncodedRecord,
): Record<string, unknown> {
  const labels: Record<string, string> = {
    [keys.owner]: labelValue(r.prefix),
    [keys.record]: "true",
  };
  if (r.owner) labels[keys.ownerJob] = labelValue(r.owner.name);
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: recordName(r.prefix),
      namespace: r.namespace,
      labels,
      ownerReferences: r.owner
        ? [{
          apiVersion: "batch/v1",
          kind: "Job",
          name: r.owner.name,
          uid: r.owner.uid,
          controller: false,
          blockOwnerDeletion: false,
        }]
        : undefined,
    },
    data: encoded.data,
    binaryData: encoded.binaryData,
  };
}

/** The API path of the record's ConfigMap. */
export function recordPath(namespace: string, prefix: string): string {
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps/${recordName(prefix)}`;
}

/** The fewest ms between two writes of the record. */
export const RECORD_MIN_GAP_MS = 10_000;

/**
 * When the record may be written: a change at most every
 * {@linkcode RECORD_MIN_GAP_MS}, and a heartbeat when nothing changed, so
 * that a reader can tell a quiet run from a dead one. Pure: the caller
 * passes the time.
 *
 * @example
 * ```ts
 * const p = new WritePacer(10_000, 30_000);
 * p.wait(0, true); // 0: never written
 * p.wrote(0);
 * p.wait(4_000, true); // 6_000
 * p.wait(4_000, false); // 26_000
 * ```
 */
export class WritePacer {
  #last?: number;
  #minGapMs: number;
  #heartbeatMs: number;

  /**
   * @param minGapMs the fewest ms between two writes
   * @param heartbeatMs the most ms between two writes while the run lives
   */
  constructor(minGapMs = RECORD_MIN_GAP_MS, heartbeatMs = 3 * RECORD_MIN_GAP_MS) {
    this.#minGapMs = minGapMs;
    this.#heartbeatMs = Math.max(heartbeatMs, minGapMs);
  }

  /** Ms to wait before the next write at `now`; `changed`: there is something new to say. */
  wait(now: number, changed: boolean): number {
    if (this.#last === undefined) return 0;
    const gap = now - this.#last;
    return Math.max(0, (changed ? this.#minGapMs : this.#heartbeatMs) - gap);
  }

  /** Notes a write at `now`. */
  wrote(now: number): void {
    this.#last = now;
  }
}
