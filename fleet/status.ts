/**
 * `job-dispatcher fleet status`: where the fleet stands, read from each
 * cluster's run record and approvals alone (read-only), as the fleet itself
 * reads them to resume: one row per cluster, and the fleet's stage and what
 * it waits for.
 *
 * @module
 */

import type { RunRecord } from "../report/record.ts";
import { endedCleanly } from "./cluster.ts";
import type { FleetSpec } from "./spec.ts";

/** What was read of one cluster. */
export interface ClusterFacts {
  /** Its run record of the prefix, if it has one. */
  record?: RunRecord;
  /** Why it could not be read, if it could not. */
  error?: string;
  /** Who approved its stage for this template, if anyone. */
  approvedBy?: string;
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
  /** Seconds left at the run's rate, while it runs. */
  etaSecs?: number;
}

/** The fleet as a whole. */
export interface FleetView {
  /** One row per cluster, in stage order. */
  clusters: ClusterRow[];
  /** The first stage not ended everywhere; undefined when every stage ended. */
  stage?: string;
  /** What the fleet waits for, in words. */
  waitsFor: string;
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
  if (phase === "running" && f.record!.etaSecs !== undefined) row.etaSecs = f.record!.etaSecs;
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
): FleetView {
  const clusters = spec.stages.flatMap((s) =>
    s.clusters.map((c) => rowOf(c, s.name, facts.get(c) ?? {}, hash, now))
  );
  const at = spec.stages.findIndex((s) =>
    clusters.some((r) => r.stage === s.name && r.phase !== "ended")
  );
  if (at < 0) return { clusters, waitsFor: "nothing: every stage ended" };
  const stage = spec.stages[at];
  const mine = clusters.filter((r) => r.stage === stage.name);
  const bad = mine.find((r) => ["failed", "stopped", "dead", "unreadable"].includes(r.phase));
  if (bad) return { clusters, stage: stage.name, waitsFor: waitOnBad(bad) };
  if (mine.some((r) => r.phase === "running")) {
    const paused = mine.find((r) => r.reason);
    const waits = paused ? `cluster ${paused.cluster} paused: ${paused.reason}` : "its clusters";
    return { clusters, stage: stage.name, waitsFor: waits };
  }
  const before = spec.stages[at - 1];
  if (before && before.soakSecs > 0) {
    const ends = before.clusters.map((c) => facts.get(c)?.record?.updatedAt ?? 0);
    const left = Math.ceil((Math.max(...ends) + before.soakSecs * 1000 - now) / 1000);
    if (left > 0) return { clusters, stage: stage.name, waitsFor: `soak, ${left} s left` };
  }
  const unapproved = stage.clusters.filter((c) => facts.get(c)?.approvedBy === undefined);
  if (stage.approval && unapproved.length) {
    return { clusters, stage: stage.name, waitsFor: `approval (fleet approve ${stage.name})` };
  }
  return { clusters, stage: stage.name, waitsFor: "the fleet command to start its clusters" };
}

function waitOnBad(r: ClusterRow): string {
  const why = r.reason ? `: ${r.reason}` : "";
  if (r.phase === "dead") return `cluster ${r.cluster}'s run is gone (a re-run resumes it)`;
  if (r.phase === "unreadable") return `cluster ${r.cluster} could not be read${why}`;
  return `cluster ${r.cluster} ${r.phase}${why} (the line is stopped)`;
}

/** The view as text: a table, then the fleet's line. */
export function renderFleetView(v: FleetView): string {
  const head = ["CLUSTER", "STAGE", "PHASE", "SUCCEEDED", "FAILED", "TOTAL", "ETA", "REASON"];
  const rows = v.clusters.map((r) => [
    r.cluster,
    r.stage,
    r.phase,
    String(r.succeeded),
    String(r.failed),
    String(r.total),
    r.etaSecs === undefined ? "-" : `${Math.round(r.etaSecs)}s`,
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
  return [line(head), ...rows.map(line), "", fleet, ...lease].join("\n") + "\n";
}
