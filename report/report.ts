/**
 * Saying what happened to every node where it outlives the run: a report file
 * (JSON or JUnit XML), Events against each Node and the owner Job, and marks
 * on the Node itself. A run's log goes with its pod and the per-node Jobs go
 * with their `ttlSecondsAfterFinished`, usually before anyone looks.
 *
 * The builders are pure; {@linkcode Recorder} does the best-effort writes.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { DispatchEvent, NodeResult, Progress, Reporter } from "../engine/fanout.ts";
import type { WaveRecord } from "../engine/fanout_types.ts";
import type { BreachRecord } from "../gates/gate.ts";
import type { OwnerRef, TrackingKeys } from "../job.ts";
import { ApiError, isRetryable, type Kube, paths } from "../kube/client.ts";
import { describeProgress, type Logger } from "./log.ts";
import { type MapWrite, mapWriteOps, writeMetadataMaps } from "../kube/metadata_patch.ts";
import { type RecordOptions, RecordWriter } from "./record_writer.ts";
import type { RecordGates } from "./record.ts";
import { RecordStore, SupersededError } from "./record_store.ts";

/** How many nodes ended in each outcome. */
export type OutcomeCounts = Record<NodeResult["outcome"], number>;

/**
 * How many nodes ended in each outcome, in the order the log and the report
 * show them.
 *
 * @example
 * ```ts
 * outcomeCounts([{ node: "n1", job: "j-n1", outcome: "failed" }]).failed; // 1
 * ```
 */
export function outcomeCounts(results: readonly NodeResult[]): OutcomeCounts {
  const count = (o: NodeResult["outcome"]) => results.filter((r) => r.outcome === o).length;
  return {
    succeeded: count("succeeded"),
    failed: count("failed"),
    unknown: count("unknown"),
    blocked: count("blocked"),
    inFlight: count("inFlight"),
    notStarted: count("notStarted"),
  };
}

/** A node left out before dispatch, with why. */
export interface SkippedEntry {
  /** The node. */
  node: string;
  /** The node's UID. */
  uid: string;
  /** Why it was left out, e.g. the taint. */
  reason: string;
}

/** Everything a report says. */
export interface ReportInput {
  /** When the dispatch began. */
  startedAt: Date;
  /** When it ended. */
  finishedAt: Date;
  /** Namespace of the Jobs. */
  namespace: string;
  /** Job name prefix. */
  prefix: string;
  /** The owner Job, if any. */
  owner?: OwnerRef;
  /** Why the rollout stopped early, if it did. */
  stoppedBy?: string;
  /** The window closed with nodes left (exit 4): `stoppedBy` says so. */
  windowClosed?: boolean;
  /** Each dispatched node's result. */
  results: NodeResult[];
  /**
   * Node UIDs by name: only read by `get` (a run's is a view of its
   * selection, not a second map of 65,000 entries built at its end).
   */
  uids: Pick<ReadonlyMap<string, string>, "get">;
  /** Nodes left out by taint admission. */
  skipped: SkippedEntry[];
  /** When starts were paused (ms since the epoch), for the HTML timeline. */
  pauses?: readonly { from: number; to?: number; why: string }[];
  /** Each wave's size, its end and its soak, with `--waves`/`--canary`. */
  waves?: WaveRecord[];
  /** Each health gate breach (`--gate-*`): when, the query and value, its latch set and lifted. */
  breaches?: readonly BreachRecord[];
  /** Where a breach's latch lives, in words (`owner Job ops/hook <P>/paused`, the pause file). */
  latch?: string;
}

/**
 * The report's `stoppedBy` of a run whose window closed with nodes left: a
 * reader of the report must tell it from a run that finished (exit 4, not 0).
 */
export const WINDOW_CLOSED = "window closed";

const iso = (ms?: number) => (ms === undefined ? undefined : new Date(ms).toISOString());

/**
 * The JSON report: the run, then per node its name, UID, Job, start, end,
 * outcome, reason and attempts.
 */
export function jsonReport(r: ReportInput): string {
  return JSON.stringify(
    {
      kind: "JobDispatcherReport",
      version: 1,
      startedAt: r.startedAt.toISOString(),
      finishedAt: r.finishedAt.toISOString(),
      namespace: r.namespace,
      prefix: r.prefix,
      owner: r.owner ?? null,
      stoppedBy: r.stoppedBy ?? (r.windowClosed ? WINDOW_CLOSED : null),
      summary: {
        total: r.results.length,
        ...outcomeCounts(r.results),
        skipped: r.skipped.length,
      },
      ...(r.waves && { waves: r.waves.map(waveEntry) }),
      ...(r.breaches && {
        breaches: r.breaches.map((b) => ({
          at: iso(b.at),
          query: b.query,
          value: b.value,
          latch: b.latchedAt === undefined ? null : {
            where: r.latch ?? null,
            set: iso(b.latchedAt),
            lifted: iso(b.liftedAt) ?? null,
          },
        })),
      }),
      ...(r.pauses && {
        pauses: r.pauses.map((p) => ({ from: iso(p.from), to: iso(p.to) ?? null, why: p.why })),
      }),
      nodes: [
        ...r.results.map((x) => ({
          name: x.node,
          uid: r.uids.get(x.node) ?? null,
          job: x.job,
          start: iso(x.startedAt) ?? null,
          end: iso(x.finishedAt) ?? null,
          outcome: x.outcome,
          reason: x.reason ?? null,
          attempts: x.attempts ?? null,
          ...(x.wave !== undefined && { wave: x.wave }),
        })),
        ...r.skipped.map((s) => ({
          name: s.node,
          uid: s.uid,
          job: null,
          start: null,
          end: null,
          outcome: "skipped",
          reason: s.reason,
          attempts: null,
        })),
      ],
    },
    null,
    2,
  ) + "\n";
}

/** One wave in the JSON report: its size, when it opened and ended, its soak. */
function waveEntry(w: WaveRecord) {
  return {
    wave: w.wave,
    size: w.size,
    opened: iso(w.openedAt) ?? null,
    ended: iso(w.endedAt) ?? null,
    soak: w.soakEndsAt === undefined || w.endedAt === undefined
      ? null
      : { start: iso(w.endedAt), end: iso(w.soakEndedAt) ?? null, ...soakChecks(w) },
  };
}

/**
 * How a wave's soak was counted and watched: `from` its last Job's end (an
 * earlier run's `completionTime` on a re-run) or the end of the last gate
 * break inside it; each `restart` after a break; and, with health gates,
 * since when they were clean (`null`: the whole run).
 */
function soakChecks(w: WaveRecord) {
  if (w.soakFrom === undefined) return {};
  const since = w.soakCleanSince;
  return {
    from: iso(w.soakFrom),
    restarts: (w.soakRestarts ?? []).map((r) => ({ at: iso(r.at), after: r.after })),
    ...(since !== undefined && {
      gates: { cleanSince: Number.isFinite(since) ? iso(since) : null },
    }),
  };
}

function xml(text: string): string {
  const named: Record<string, string> = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&apos;",
  };
  return text.replace(/[&<>"']/g, (c) => named[c])
    // XML 1.0 forbids most control characters, which termination messages can hold.
    // deno-lint-ignore no-control-regex -- exactly those characters must go
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "")
    // …and U+FFFE, U+FFFF and a surrogate without its pair (Jenkins' and
    // expat's parsers refuse the whole file for one of them).
    .replace(
      /[\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
      "",
    );
}

/** One node's test case, and whether it counts as a failure or a skip. */
function testCase(x: NodeResult, classname: string): { text: string; as?: "failure" | "skipped" } {
  const secs = x.startedAt !== undefined && x.finishedAt !== undefined
    ? ((x.finishedAt - x.startedAt) / 1000).toFixed(3)
    : "0";
  const head = `    <testcase classname="${xml(classname)}" name="${xml(x.node)}" time="${secs}"`;
  if (x.outcome === "succeeded") return { text: `${head}/>` };
  if (x.outcome === "failed" || x.outcome === "blocked") {
    const reason = x.reason ?? x.outcome;
    const type = x.outcome === "blocked" ? "NodeBlocked" : "JobFailed";
    return {
      as: "failure",
      text: `${head}>\n      <failure message="${xml(reason)}" type="${type}">` +
        `job ${xml(x.job)}: ${xml(reason)}</failure>\n    </testcase>`,
    };
  }
  const why = x.outcome === "inFlight"
    ? "still running when the run stopped"
    : x.outcome === "unknown"
    ? `outcome unknown: ${x.reason ?? "its Job was collected before it was seen"}`
    : "not started";
  return {
    as: "skipped",
    text: `${head}>\n      <skipped message="${xml(why)}"/>\n    </testcase>`,
  };
}

/** One `<testsuite>`: its test cases, counts, time and properties. */
/** A JUnit `<testsuite>`: its name, its test cases' XML, its time, its properties. */
export interface Suite {
  /** Its name. */
  name: string;
  /** Its test cases, as XML, each with what it counts as. */
  cases: { text: string; as?: "failure" | "skipped" }[];
  /** Seconds it took, as the attribute says it. */
  secs: string;
  /** When it began (ISO). */
  timestamp: string;
  /** Its `<properties>`. */
  properties?: [string, string][];
}

function suiteXml(s: Suite): string {
  const count = (as: string) => s.cases.filter((c) => c.as === as).length;
  const props = s.properties?.length
    ? `    <properties>\n${
      s.properties.map(([k, v]) => `      <property name="${xml(k)}" value="${xml(v)}"/>`).join(
        "\n",
      )
    }\n    </properties>\n`
    : "";
  return `  <testsuite name="${xml(s.name)}" tests="${s.cases.length}" failures="${
    count("failure")
  }" errors="0" skipped="${count("skipped")}" time="${s.secs}" timestamp="${s.timestamp}">
${props}${s.cases.map((c) => c.text).join("\n")}
  </testsuite>`;
}

/** A wave's suite properties: its number, size, when it opened and ended, its soak. */
function waveProperties(w: WaveRecord | undefined, wave: number): [string, string][] {
  const props: [string, string][] = [["wave", String(wave)]];
  if (!w) return props;
  props.push(["size", String(w.size)]);
  const at = (k: string, ms?: number) => ms !== undefined && props.push([k, iso(ms)!]);
  at("opened", w.openedAt);
  at("ended", w.endedAt);
  if (w.soakEndsAt !== undefined) at("soakEnded", w.soakEndedAt);
  return props;
}

/**
 * The JUnit XML report: one test case per node, so that CI systems show the
 * rollout as a test run. A failed node is a failure, a node not started or
 * left out by a taint is skipped.
 *
 * With waves, each wave is a `<testsuite>` of its own (its size, opening,
 * end and soak as properties), and the wave is in each test case's
 * `classname` too (`job-dispatcher.<prefix>.wave-2`): GitLab shows the
 * `classname` as a test's suite and ignores `<testsuite>` names and
 * properties, Jenkins groups by `classname` as package and class; so the
 * wave shows in both. Nodes outside the waves (cleanup, left out by a
 * taint) are in the run's suite.
 */
export function junitReport(r: ReportInput): string {
  const secs = ((r.finishedAt.getTime() - r.startedAt.getTime()) / 1000).toFixed(3);
  return junitDocument("job-dispatcher", junitSuites(r), secs);
}

/**
 * One run's JUnit suites (its waves', then its own). With `scope` (a fleet's
 * cluster) the scope heads each suite's name and stands in each classname
 * (`job-dispatcher.<scope>.<prefix>`), so one document can hold several runs.
 */
export function junitSuites(r: ReportInput, scope?: { name: string; label: string }): Suite[] {
  const base = `job-dispatcher.${scope ? `${scope.name}.` : ""}${r.prefix}`;
  const head = scope ? `${scope.label}: ` : "";
  const t0 = r.startedAt.getTime();
  const run: Suite = {
    name: `${head}${r.namespace}/${r.prefix}`,
    cases: [],
    secs: ((r.finishedAt.getTime() - t0) / 1000).toFixed(3),
    timestamp: r.startedAt.toISOString(),
  };
  const waves = new Map<number, Suite>();
  for (const x of r.results) {
    if (x.wave === undefined) {
      run.cases.push(testCase(x, base));
      continue;
    }
    let suite = waves.get(x.wave);
    if (!suite) {
      const w = r.waves?.find((w) => w.wave === x.wave);
      const from = w?.openedAt ?? t0, to = w?.soakEndedAt ?? w?.endedAt ?? r.finishedAt.getTime();
      suite = {
        name: `${head}${r.namespace}/${r.prefix} wave ${x.wave}${
          r.waves ? ` of ${r.waves.length}` : ""
        }`,
        cases: [],
        secs: (Math.max(0, to - from) / 1000).toFixed(3),
        timestamp: new Date(from).toISOString(),
        properties: waveProperties(w, x.wave),
      };
      waves.set(x.wave, suite);
    }
    suite.cases.push(testCase(x, `${base}.wave-${x.wave}`));
  }
  for (const s of r.skipped) {
    run.cases.push({
      as: "skipped",
      text: `    <testcase classname="${xml(base)}" name="${xml(s.node)}" time="0">\n` +
        `      <skipped message="${xml(s.reason)}"/>\n    </testcase>`,
    });
  }
  return [
    ...[...waves].sort(([a], [b]) => a - b).map(([, s]) => s),
    ...(run.cases.length || !waves.size ? [run] : []),
  ];
}

/** Suites as one JUnit document, its totals theirs. */
export function junitDocument(name: string, suites: Suite[], secs: string): string {
  const all = suites.flatMap((s) => s.cases);
  const count = (as: string) => all.filter((c) => c.as === as).length;
  return `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="${xml(name)}" tests="${all.length}" failures="${count("failure")}" skipped="${
    count("skipped")
  }" time="${secs}">
${suites.map(suiteXml).join("\n")}
</testsuites>
`;
}

/** What the recorder needs to know of a node. */
export interface RecordedNode {
  /** The UID selected for it; every write tests it. */
  uid: string;
}

/**
 * The writes that mark a node with its outcome: label `<p>/result`,
 * annotations `<p>/finished-at` and `<p>/error` (removed on success).
 */
export function nodeMarkWrites(
  keys: TrackingKeys,
  outcome: "succeeded" | "failed",
  finishedAt: string,
  error?: string,
): MapWrite[] {
  return [
    { map: "labels", key: keys.result, value: outcome },
    { map: "annotations", key: keys.finishedAt, value: finishedAt },
    {
      map: "annotations",
      key: keys.error,
      value: outcome === "succeeded" ? null : (error ?? "").slice(0, 1024),
    },
  ];
}

/**
 * The JSON Patch that marks a node with its outcome ({@linkcode nodeMarkWrites}),
 * guarded by a `test` of the node's UID so that a node replaced under the
 * same name is a rejected write, not a race. It assumes the node's maps
 * (`writeMetadataMaps` makes a missing one from a fresh read): the
 * selection's view of them is stale by the time a Job ends.
 */
export function nodeMarkPatch(
  keys: TrackingKeys,
  node: RecordedNode,
  outcome: "succeeded" | "failed",
  finishedAt: string,
  error?: string,
): unknown[] {
  return [
    { op: "test", path: "/metadata/uid", value: node.uid },
    ...mapWriteOps(nodeMarkWrites(keys, outcome, finishedAt, error)),
  ];
}

/** Options of {@linkcode Recorder}. */
export interface RecorderOptions {
  /** The API client. */
  kube: Kube;
  /** The logger, to say once that a kind of write is refused. */
  log: Logger;
  /** The tracking keys. */
  keys: TrackingKeys;
  /** Namespace of the Jobs (and of the owner's Events). */
  namespace: string;
  /** The owner Job, if any. */
  owner?: OwnerRef;
  /** The run's nodes, by name (a Map, or a view of the selection's). */
  nodes: Pick<ReadonlyMap<string, RecordedNode>, "get">;
  /** Write Events. @default true */
  events?: boolean;
  /** Mark the nodes. @default true */
  marks?: boolean;
  /**
   * Which node outcomes get an Event and a mark: every one, failures and
   * stalls only (one request per healthy node instead of three), or none.
   * @default "all"
   */
  nodeRecords?: "all" | "failures" | "none";
  /** Keep the run record (`record.ts`) for `job-dispatcher status`; the main phase only. */
  record?: RecordOptions;
  /**
   * Told, once the run ended, when its closing record write did not land
   * (refused, lost to an outage, too big, no answer in time), with why.
   */
  onRecordLost?: (reason: string) => void;
}

type Kind = "events" | "node marks" | "owner progress" | "run record";

/** The failure of a write of the run record another run took over: not a lost record. */
const SUPERSEDED = "superseded";

/**
 * Records the rollout in the cluster, best effort: an Event per finished or
 * stalled node (in `default`, the only namespace the API server accepts for a
 * Node's Event), marks on the Node, and progress on the owner Job. A refused
 * write is said once per kind and never fails a node.
 */
export class Recorder implements Reporter {
  #o: RecorderOptions;
  #pending = new Set<Promise<unknown>>();
  #refused = new Set<Kind>();
  /** Kinds of which a record was lost to an outage (said once). */
  #lost = new Set<Kind>();
  #lastOwnerPatch = 0;
  #ownerChain: Promise<unknown> = Promise.resolve();
  #record?: RecordWriter;
  /** Why the latest write of the run record did not land; undefined after one that did. */
  #recordLost?: string;
  /** Why the latest failed write of each kind failed. */
  #why = new Map<Kind, string>();

  /** @param opts what to record and where */
  constructor(opts: RecorderOptions) {
    this.#o = opts;
    if (opts.record) {
      const store = new RecordStore({
        namespace: opts.namespace,
        prefix: opts.record.prefix,
        request: (verb, method, path, body) => opts.kube.request(verb, method, path, body),
      });
      this.#record = new RecordWriter({
        ...opts.record,
        keys: opts.keys,
        namespace: opts.namespace,
        owner: opts.owner,
        writer: store.writer,
        send: (cm) => this.#sendRecord(() => store.write(cm)),
        warn: (message) => {
          // Only a record too big for a ConfigMap: no write of it is sent again.
          this.#recordLost = message;
          opts.log.warn(message);
        },
      });
    }
  }

  /** One write of the run record, and whether it landed (for {@linkcode finished}). */
  async #sendRecord(write: () => Promise<unknown>): Promise<void> {
    let landed = false;
    await this.#try("run record", async () => {
      await write();
      landed = true;
    });
    // A record another run took over (SupersededError) is that run's to
    // write: not lost, and a caller reads whose it is from the record itself.
    const superseded = this.#why.get("run record") === SUPERSEDED;
    this.#recordLost = landed || superseded
      ? undefined
      : this.#why.get("run record") ?? "not written";
  }

  #try(kind: Kind, write: () => Promise<unknown>): Promise<unknown> {
    if (this.#refused.has(kind)) return Promise.resolve();
    const p = write().catch((e) => {
      this.#why.set(kind, e instanceof SupersededError ? SUPERSEDED : (e as Error).message);
      if (this.#refused.has(kind)) return;
      if (e instanceof SupersededError) {
        this.#refused.add(kind);
        this.#o.log.warn(e.message);
        return;
      }
      // A node that kept changing under the write (422 after the map was
      // made from three reads): this record is lost, the later ones are not.
      if (e instanceof ApiError && e.status === 422 && kind === "node marks") return;
      // An outage loses this one record, not every later one.
      if (isRetryable(e)) {
        if (this.#lost.has(kind)) return;
        this.#lost.add(kind);
        this.#o.log.warn(
          `cannot record ${kind} (${(e as Error).message}); records lost to an API outage ` +
            "are not written again, the rollout goes on",
        );
        return;
      }
      this.#refused.add(kind);
      this.#o.log.warn(
        `cannot record ${kind} (${(e as Error).message}); the rollout goes on without them`,
      );
    }).finally(() => this.#pending.delete(p));
    this.#pending.add(p);
    return p;
  }

  #event(
    involved: Record<string, string>,
    namespace: string,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ): void {
    if (this.#o.events === false) return;
    const now = new Date().toISOString();
    this.#try(
      "events",
      () =>
        this.#o.kube.request("create", "POST", `/api/v1/namespaces/${namespace}/events`, {
          apiVersion: "v1",
          kind: "Event",
          metadata: { generateName: `${involved.name}.`, namespace },
          involvedObject: involved,
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component: "job-dispatcher" },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        }),
    );
  }

  #nodeEvent(node: string, type: "Normal" | "Warning", reason: string, message: string): void {
    const uid = this.#o.nodes.get(node)?.uid ?? "";
    this.#event(
      { apiVersion: "v1", kind: "Node", name: node, uid },
      "default",
      type,
      reason,
      message,
    );
  }

  #ownerEvent(type: "Normal" | "Warning", reason: string, message: string): void {
    const owner = this.#o.owner;
    if (!owner) return;
    const { name, uid } = owner;
    const ns = this.#o.namespace;
    this.#event(
      { apiVersion: "batch/v1", kind: "Job", name, uid, namespace: ns },
      ns,
      type,
      reason,
      message,
    );
  }

  /** A Warning Event on the owner Job, such as a health gate's breach. */
  ownerWarning(reason: string, message: string): void {
    this.#ownerEvent("Warning", reason, message);
  }

  /**
   * The run record carries the health gates' state: `source` is read at
   * every write; call the returned function when the state changed.
   */
  followGates(source: () => RecordGates | undefined): () => void {
    this.#record?.followGates(source);
    return () => this.#record?.gatesChanged();
  }

  /** Records the start of the rollout on the owner Job. */
  started(total: number): void {
    this.#record?.started();
    this.#ownerEvent(
      "Normal",
      "RolloutStarted",
      `dispatching one Job to each of ${counted(total, "node")}`,
    );
  }

  /** One rollout event. */
  event(e: DispatchEvent): void {
    this.#record?.event(e);
    const records = this.#o.nodeRecords ?? "all";
    if (records === "none" || (records === "failures" && e.kind === "succeeded")) return;
    if (e.kind === "succeeded" && !e.counted) {
      this.#nodeEvent(e.node, "Normal", "JobSucceeded", `job ${e.job} succeeded`);
      this.#mark(e.node, "succeeded");
    } else if (e.kind === "failed" && !e.counted) {
      // A node that failed before its Job existed (its drain) had no Job fail.
      if (e.noJob) {
        this.#nodeEvent(e.node, "Warning", "NodeFailed", `failed before job ${e.job}: ${e.reason}`);
      } else {
        this.#nodeEvent(e.node, "Warning", "JobFailed", `job ${e.job} failed: ${e.reason}`);
      }
      this.#mark(e.node, "failed", e.reason);
    } else if (e.kind === "stalled") {
      this.#nodeEvent(
        e.node,
        "Warning",
        "JobPending",
        `job ${e.job} pending for ${e.seconds} s: ${e.reason}`,
      );
    }
  }

  #mark(node: string, outcome: "succeeded" | "failed", error?: string): void {
    const n = this.#o.nodes.get(node);
    if (this.#o.marks === false || !n) return;
    const writes = nodeMarkWrites(this.#o.keys, outcome, new Date().toISOString(), error);
    // A node deleted or replaced since: nothing to mark.
    this.#try("node marks", () => writeMetadataMaps(this.#o.kube, paths.node(node), n.uid, writes));
  }

  /** Progress, kept on the owner Job's annotation at most every 10 s. */
  progress(p: Progress): void {
    this.#record?.progress(p);
    const owner = this.#o.owner;
    if (!owner || Date.now() - this.#lastOwnerPatch < 10_000) return;
    this.#lastOwnerPatch = Date.now();
    this.#ownerProgress(describeProgress(p));
  }

  #ownerProgress(text: string): void {
    // One write at a time, in order: the final summary must land last, not
    // race an earlier progress patch still in flight.
    this.#try("owner progress", () => {
      const next = this.#ownerChain.catch(() => {}).then(() => this.#patchOwner(text));
      this.#ownerChain = next;
      return next;
    });
  }

  async #patchOwner(text: string): Promise<void> {
    const owner = this.#o.owner!;
    const path = paths.job(this.#o.namespace, owner.name);
    await writeMetadataMaps(this.#o.kube, path, owner.uid, [
      { map: "annotations", key: this.#o.keys.progress, value: text },
    ]);
  }

  /**
   * Records the end of the rollout on the owner Job and waits for every
   * write; tells `onRecordLost` when the run record's closing write did not land.
   */
  async finished(summary: string, failed: boolean, timeoutMs = 15_000): Promise<void> {
    let closed = false;
    const closing = this.#record?.close(summary).then(() => void (closed = true));
    if (this.#o.owner) {
      this.#ownerProgress(summary);
      this.#ownerEvent(
        failed ? "Warning" : "Normal",
        failed ? "RolloutFailed" : "RolloutSucceeded",
        summary,
      );
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      closing?.then(() => Promise.all([...this.#pending])) ?? Promise.all([...this.#pending]),
      new Promise((r) => (timer = setTimeout(r, timeoutMs))),
    ]);
    clearTimeout(timer);
    if (!this.#record) return;
    // A record left "running" (or none) after an exit 0: a caller that counts
    // the run by its record (fleet/) must know the record, not the run, failed.
    const lost = closed
      ? this.#recordLost
      : `the closing write got no answer in ${Math.round(timeoutMs / 1000)} s`;
    if (lost) this.#o.onRecordLost?.(lost);
  }
}
