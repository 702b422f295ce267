/**
 * `job-dispatcher fleet status`: where the fleet stands, read from each
 * cluster's run record and approvals alone (read-only), as the fleet itself
 * reads them to resume: one row per cluster, and the fleet's stage and what
 * it waits for.
 *
 * @module
 */

import { formatDuration } from "../preview/estimate.ts";
import type { RunRecord } from "../report/record.ts";
import { endedCleanly } from "./cluster.ts";
import { fleetEta, stageParts } from "./eta.ts";
import type { FleetSpec } from "./spec.ts";

/** What was read of one cluster. */
export interface ClusterFacts {
  /** Its run record of the prefix, if it has one. */
  record?: RunRecord;
  /** Why it could not be read, if it could not. */
  error?: string;
  /** Who approved its stage for this template, if anyone. */
  approvedBy?: string;
  /**
   * When its run ended cleanly, on this reader's clock (fleet/cluster.ts
   * `recordedEnd`: the API server's stamp); else the record's updatedAt,
   * its writer's clock, stands in.
   */
  endedAt?: number;
  /**
   * The breach its exit latch holds (gates/latch.ts), if set: a breach in the
   * soak between stages stopped the fleet there, with no record to say so.
   */
  latch?: string;
}

/** What holds the whole fleet, beyond its clusters' records. */
export interface FleetHolds {
  /** The pause file, when it exists: a breach in the soak latched it and the fleet holds. */
  paused?: string;
}

/** Where one cluster stands. */
export type ClusterPhase =
  | "ended"
  | "running"
  | "dead"
  | "stopped"
  | "failed"
  | "notStarted"
  | "unreadable";

/** One row of the view. */
export interface ClusterRow {
  /** The context. */
  cluster: string;
  /** Its stage. */
  stage: string;
  /** Where it stands. */
  phase: ClusterPhase;
  /** Nodes succeeded, failed, and all, as its record says. */
  succeeded: number;
  failed: number;
  total: number;
  /** A pause, a stop or a read error, if any. */
  reason?: string;
  /** Seconds left at the run's rate, while it runs and is not held. */
  etaSecs?: number;
  /** While it runs: held by a pause, or stopped by its gate with its Jobs in flight finishing. */
  held?: "paused" | "stopped";
}

/**
 * The fleet's ETA: `seconds` only when it is a number; else `text` says why
 * not (a paused cluster, the line stopped, a cluster without an estimate).
 */
export interface ViewEta {
  /** Seconds until the last stage ends, approvals' waits not counted. */
  seconds?: number;
  /** The ETA in words: `2m20s (soak 50s left; stage two 1m30s)`, `paused (…)`, `stopped (…)`. */
  text: string;
}

/** The fleet as a whole. */
export interface FleetView {
  /** One row per cluster, in stage order. */
  clusters: ClusterRow[];
  /** The first stage not ended everywhere; undefined when every stage ended. */
  stage?: string;
  /** What the fleet waits for, in words. */
  waitsFor: string;
  /** The whole fleet's ETA. */
  eta: ViewEta;
  /** The fleet process holding the lease (fleet/lease.ts), while one does. */
  heldBy?: { holder: string; fleet: string; renewedAt: string; cluster: string };
}

function phaseOf(f: ClusterFacts, hash: string, now: number): ClusterPhase {
  if (f.error !== undefined) return "unreadable";
  const r = f.record;
  if (!r || r.templateHash !== hash) return "notStarted";
  if (endedCleanly(r, hash) !== undefined) return "ended";
  if (r.state === "running") {
    // A record unwritten for two heartbeats is a dead run's (status/ judges it so too).
    return now - r.updatedAt > 2 * r.heartbeatMs ? "dead" : "running";
  }
  return r.state === "stopped" ? "stopped" : "failed";
}

function rowOf(cluster: string, stage: string, f: ClusterFacts, hash: string, now: number) {
  const phase = phaseOf(f, hash, now);
  const nodes = phase === "notStarted" || phase === "unreadable" ? [] : f.record!.nodes;
  const row: ClusterRow = {
    cluster,
    stage,
    phase,
    succeeded: nodes.filter((n) => n.phase === "succeeded").length,
    failed: nodes.filter((n) => n.phase === "failed").length,
    total: nodes.length,
  };
  const reason = f.error ?? (phase === "notStarted" ? undefined : f.record!.stoppedBy ??
    f.record!.paused);
  if (reason) row.reason = reason;
  if (phase !== "running") return row;
  const r = f.record!;
  if (r.stoppedBy !== undefined) row.held = "stopped";
  else if (r.paused !== undefined) row.held = "paused";
  // A held run's rate says nothing of when it ends: no number while it holds.
  else if (r.etaSecs !== undefined) row.etaSecs = r.etaSecs;
  return row;
}

/**
 * The fleet's view from what was read of its clusters.
 *
 * @param hash the template's hash: a record of another template is "notStarted"
 */
export function fleetView(
  spec: FleetSpec,
  facts: ReadonlyMap<string, ClusterFacts>,
  hash: string,
  now: number,
  holds: FleetHolds = {},
): FleetView {
  const clusters = spec.stages.flatMap((s) =>
    s.clusters.map((c) => rowOf(c, s.name, facts.get(c) ?? {}, hash, now))
  );
  const at = spec.stages.findIndex((s) =>
    clusters.some((r) => r.stage === s.name && r.phase !== "ended")
  );
  const where = waitOf(spec, clusters, facts, at, now);
  const eta = viewEta(spec, clusters, facts, at, where, holds);
  return { clusters, stage: where.stage, waitsFor: where.waitsFor, eta };
}

/** Where the fleet stands: its stage, what it waits for, the soak left, an approval pending. */
interface Wait {
  stage?: string;
  waitsFor: string;
  soakLeft?: number;
  approval?: boolean;
}

function waitOf(
  spec: FleetSpec,
  clusters: ClusterRow[],
  facts: ReadonlyMap<string, ClusterFacts>,
  at: number,
  now: number,
): Wait {
  if (at < 0) return { waitsFor: "nothing: every stage ended" };
  const stage = spec.stages[at];
  const mine = clusters.filter((r) => r.stage === stage.name);
  const bad = mine.find((r) => ["failed", "stopped", "dead", "unreadable"].includes(r.phase));
  if (bad) return { stage: stage.name, waitsFor: waitOnBad(bad) };
  if (mine.some((r) => r.phase === "running")) {
    const held = mine.find((r) => r.held);
    const waits = !held
      ? "its clusters"
      : held.held === "paused"
      ? `cluster ${held.cluster} paused: ${held.reason}`
      : `cluster ${held.cluster} stopped: ${held.reason} (the line is stopped)`;
    return { stage: stage.name, waitsFor: waits };
  }
  const unapproved = stage.clusters.filter((c) => facts.get(c)?.approvedBy === undefined);
  const approval = stage.approval && unapproved.length > 0;
  const before = spec.stages[at - 1];
  if (before && before.soakSecs > 0) {
    // The soak the fleet waits out runs from the server-stamped end: the same clock as `now`.
    const ends = before.clusters.map((c) => {
      const f = facts.get(c);
      return f?.endedAt ?? f?.record?.updatedAt ?? 0;
    });
    const left = Math.ceil((Math.max(...ends) + before.soakSecs * 1000 - now) / 1000);
    if (left > 0) {
      return { stage: stage.name, waitsFor: `soak, ${left} s left`, soakLeft: left, approval };
    }
  }
  if (approval) {
    return { stage: stage.name, waitsFor: `approval (fleet approve ${stage.name})`, approval };
  }
  return { stage: stage.name, waitsFor: "the fleet command to start its clusters" };
}

function waitOnBad(r: ClusterRow): string {
  const why = r.reason ? `: ${r.reason}` : "";
  if (r.phase === "dead") return `cluster ${r.cluster}'s run is gone (a re-run resumes it)`;
  if (r.phase === "unreadable") return `cluster ${r.cluster} could not be read${why}`;
  return `cluster ${r.cluster} ${r.phase}${why} (the line is stopped)`;
}

/**
 * The fleet's ETA from where it stands: the stage in flight and those after
 * it through {@linkcode fleetEta}, each cluster's seconds its run's own ETA
 * (0 once ended) and, not yet begun, the mean time the fleet's ended
 * clusters took; the soak left before them. No number while a cluster holds
 * paused or the line is stopped: neither ends by itself.
 */
function viewEta(
  spec: FleetSpec,
  clusters: ClusterRow[],
  facts: ReadonlyMap<string, ClusterFacts>,
  at: number,
  wait: Wait,
  holds: FleetHolds,
): ViewEta {
  if (at < 0) return { seconds: 0, text: "0s" };
  // A breach in the soak between stages latches outside any record: neither ends by itself.
  const latched = clusters.find((r) => facts.get(r.cluster)?.latch !== undefined);
  if (latched) {
    const why = facts.get(latched.cluster)!.latch;
    return { text: `stopped (cluster ${latched.cluster}: a health gate latched: ${why})` };
  }
  if (holds.paused) {
    return {
      text: `paused (the pause file ${holds.paused} exists; the fleet holds until removed)`,
    };
  }
  // A run stopped by its gate (`--on-gate-breach exit`) runs on while its Jobs in flight finish.
  const stopped = clusters.find((r) =>
    ["failed", "stopped", "dead"].includes(r.phase) || r.held === "stopped"
  );
  if (stopped) return { text: `stopped (${etaStop(stopped)})` };
  const paused = clusters.find((r) => r.held === "paused");
  if (paused) return { text: `paused (cluster ${paused.cluster}: ${paused.reason})` };
  const unread = clusters.find((r) => r.phase === "unreadable");
  if (unread) return { text: `unknown: cluster ${unread.cluster} could not be read` };
  const took = clusters.filter((r) => r.phase === "ended").map((r) => {
    const rec = facts.get(r.cluster)!.record!;
    return (rec.updatedAt - rec.startedAt) / 1000;
  });
  const mean = took.length ? took.reduce((a, b) => a + b, 0) / took.length : undefined;
  const row = new Map(clusters.map((r) => [r.cluster, r]));
  const eta = fleetEta({ ...spec, stages: spec.stages.slice(at) }, (c) => {
    const r = row.get(c)!;
    return r.phase === "ended" ? 0 : r.phase === "running" ? r.etaSecs : mean;
  });
  if (!("seconds" in eta)) {
    return { text: `unknown: no estimate yet for ${eta.missing.join(", ")}` };
  }
  const soak = wait.soakLeft ?? 0;
  const parts = [...(soak ? [`soak ${formatDuration(soak)} left`] : []), ...stageParts(eta.stages)];
  const asked = spec.stages.slice(at).filter((s, i) => s.approval && (i > 0 || wait.approval));
  const approvals = asked.length
    ? ` plus the approval of stage ${asked.map((s) => s.name).join(", ")}`
    : "";
  const seconds = soak + eta.seconds;
  return { seconds, text: `${formatDuration(seconds)} (${parts.join("; ")})${approvals}` };
}

function etaStop(r: ClusterRow): string {
  if (r.phase === "dead") return `cluster ${r.cluster}'s run is gone; a re-run resumes it`;
  return r.phase === "running"
    ? `cluster ${r.cluster}: ${r.reason}`
    : `cluster ${r.cluster} ${r.phase}`;
}

/** The view as text: a table, then the fleet's line and its ETA. */
export function renderFleetView(v: FleetView): string {
  const head = ["CLUSTER", "STAGE", "PHASE", "SUCCEEDED", "FAILED", "TOTAL", "ETA", "REASON"];
  const rows = v.clusters.map((r) => [
    r.cluster,
    r.stage,
    r.phase,
    String(r.succeeded),
    String(r.failed),
    String(r.total),
    r.etaSecs !== undefined ? formatDuration(r.etaSecs) : r.held ?? "-",
    r.reason ?? "",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
  const fleet = v.stage === undefined
    ? "fleet: every stage ended"
    : `fleet: stage ${v.stage}; waits for ${v.waitsFor}`;
  const h = v.heldBy;
  const lease = h
    ? [`fleet: run by ${h.holder} (fleet ${h.fleet}), its lease renewed ${h.renewedAt}`]
    : [];
  return [line(head), ...rows.map(line), "", fleet, `fleet ETA: ${v.eta.text}`, ...lease].join(
    "\n",
  ) + "\n";
}
