/**
 * The fleet's report at `--report PATH`: with `--report-format json` one
 * document with the fleet's order, who stopped the line and why, and one
 * section per cluster, that cluster's own run report (written beside it, as
 * `PATH` with the context before its ending) as it stands; with `html` one
 * timeline with a lane per cluster, in stage order; with `junit` one
 * document of each cluster's suites, in stage order.
 *
 * @module
 */

import { junitDocument, junitSuites, type ReportInput, type Suite } from "../report/report.ts";
import { htmlLanes } from "../report/timeline.ts";
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

const NOT_RUN = "no run in this process (counted from its record, or not started)";

/**
 * The fleet's JUnit report: each cluster's suites (those of its single run's
 * report) in stage order, the cluster and its stage heading each suite's
 * name and the cluster in each classname (`job-dispatcher.<cluster>.<prefix>`:
 * CI systems group by it); a cluster this process did not run is an empty
 * suite that says so.
 */
export function fleetJunit(spec: FleetSpec, inputs: ReadonlyMap<string, ReportInput>): string {
  const runs = [...inputs.values()];
  const from = Math.min(...runs.map((r) => r.startedAt.getTime()));
  const to = Math.max(...runs.map((r) => r.finishedAt.getTime()));
  const start = new Date(Number.isFinite(from) ? from : Date.now()).toISOString();
  const suites = spec.stages.flatMap((s) =>
    s.clusters.flatMap((c): Suite[] => {
      const label = `${c} (stage ${s.name})`;
      const r = inputs.get(c);
      if (r) return junitSuites(r, { name: c, label });
      return [{ name: `${label}: ${NOT_RUN}`, cases: [], secs: "0.000", timestamp: start }];
    })
  );
  const secs = runs.length ? ((to - from) / 1000).toFixed(3) : "0.000";
  return junitDocument(`job-dispatcher fleet ${spec.source}`, suites, secs);
}

/** Who stopped the line, in words. */
export function stopText(s: Stop): string {
  return `cluster ${s.cluster} (stage ${s.stage}): ${s.cause}`;
}

/**
 * The fleet's HTML timeline: one lane per cluster in stage order, each the
 * rows of the single run's timeline (its run's report input, as this
 * process ran it), on one time axis; a line where each stage started and,
 * shaded across every lane, the wait between stages (its soak, an approval).
 * A cluster this process did not run (counted from its record on a re-run,
 * or never started) is a lane heading that says so.
 */
export function fleetTimeline(
  spec: FleetSpec,
  outcome: { stoppedBy?: Stop },
  inputs: ReadonlyMap<string, ReportInput>,
): string {
  const lanes = spec.stages.flatMap((s) =>
    s.clusters.map((c) => ({
      title: `${c}: stage ${s.name}`,
      input: inputs.get(c),
      note: inputs.has(c)
        ? undefined
        : "no run in this process: counted from its record, or not started",
    }))
  );
  const span = spec.stages.map((s) => {
    const runs = s.clusters.flatMap((c) => inputs.get(c) ?? []);
    return runs.length
      ? {
        from: Math.min(...runs.map((r) => r.startedAt.getTime())),
        to: Math.max(...runs.map((r) => r.finishedAt.getTime())),
      }
      : undefined;
  });
  const marks = spec.stages.flatMap((s, i) =>
    span[i] ? [{ at: span[i]!.from, label: `stage ${s.name} starts` }] : []
  );
  return htmlLanes({
    title: `fleet ${spec.source}`,
    lanes,
    marks,
    bands: waits(spec, span),
    stoppedBy: outcome.stoppedBy && stopText(outcome.stoppedBy),
    legend: "dark lines: a stage starts; amber across every lane: the wait between stages",
  });
}

/** The wait between each stage's end and the next one's start: its soak, an approval. */
function waits(spec: FleetSpec, span: ({ from: number; to: number } | undefined)[]) {
  return spec.stages.slice(0, -1).flatMap((s, i) => {
    const next = spec.stages[i + 1];
    const [ended, started] = [span[i]?.to, span[i + 1]?.from];
    if (ended === undefined || started === undefined) return [];
    if (s.soakSecs === 0 && !next.approval) return [];
    const what = [
      ...(s.soakSecs ? [`a soak of ${s.soakSecs} s`] : []),
      ...(next.approval ? [`the approval of stage ${next.name}`] : []),
    ].join(" and ");
    const after = Math.round((started - ended) / 1000);
    return [{
      from: ended,
      to: started,
      why: `after stage ${s.name}: ${what}; stage ${next.name} started ${after} s after`,
    }];
  });
}
