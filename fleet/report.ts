/**
 * The fleet's JSON report (`--report PATH` with `--report-format json`):
 * one document with the fleet's order, who stopped the line and why, and
 * one section per cluster, that cluster's own run report (written beside
 * it, as `PATH` with the context before its ending) as it stands.
 *
 * @module
 */

import type { Stop } from "./line.ts";
import type { FleetSpec } from "./spec.ts";

/** The fleet's report. */
export interface FleetReport {
  /** FLEET.yaml. */
  fleet: string;
  /** The stages, in order, with their clusters. */
  stages: { name: string; clusters: string[] }[];
  /** The fleet's exit code. */
  exitCode: number;
  /** Who stopped the line, and why; null while no one did. */
  stoppedBy: Stop | null;
  /** One section per cluster, in stage order. */
  clusters: Record<string, {
    /** Its stage. */
    stage: string;
    /** Its run's report file. */
    reportFile: string;
    /** That report; null when this process did not run the cluster (counted, not begun). */
    report: unknown;
  }>;
}

/**
 * The fleet's report from each cluster's report file.
 *
 * @param fileOf the report file of a cluster (fleet/command.ts `clusterConfig`)
 * @param read a file's text, or undefined when there is none
 */
export function fleetReport(
  spec: FleetSpec,
  outcome: { exitCode: number; stoppedBy?: Stop },
  fileOf: (cluster: string) => string,
  read: (path: string) => string | undefined,
): FleetReport {
  const clusters: FleetReport["clusters"] = {};
  for (const s of spec.stages) {
    for (const c of s.clusters) {
      const file = fileOf(c);
      const text = read(file);
      let report: unknown = null;
      try {
        report = text === undefined ? null : JSON.parse(text);
      } catch {
        report = null; // not this run's JSON (another format): the file is named
      }
      clusters[c] = { stage: s.name, reportFile: file, report };
    }
  }
  return {
    fleet: spec.source,
    stages: spec.stages.map((s) => ({ name: s.name, clusters: s.clusters })),
    exitCode: outcome.exitCode,
    stoppedBy: outcome.stoppedBy ?? null,
    clusters,
  };
}
