/**
 * The fleet's ETA for `--dry-run=plan`: each cluster's estimate (its plan's,
 * from `--estimate-from`), its stage's clusters run `maxParallelClusters` at
 * once in the fleet's order, and each soak between stages; an approval's
 * wait is a person's and is not counted.
 *
 * @module
 */

import { formatDuration } from "../preview/estimate.ts";
import type { FleetSpec } from "./spec.ts";

/** The fleet's ETA, or the clusters without an estimate. */
export type FleetEta =
  | {
    seconds: number;
    text: string;
    stages: { name: string; seconds: number; soakSecs: number; approval: boolean }[];
  }
  | { missing: string[] };

/**
 * The fleet's ETA from each cluster's estimated seconds.
 *
 * @example
 * ```ts
 * fleetEta(parseFleet("stages: [{name: a, clusters: [x], soakSecs: 60}, {name: b, clusters: [y, z], maxParallelClusters: 1}]", "f"),
 *   (c) => 100);
 * // { seconds: 360, text: "6m00s (stage a 1m40s, soak 1m00s; stage b 3m20s)", … }
 * ```
 */
export function fleetEta(
  spec: FleetSpec,
  secsOf: (cluster: string) => number | undefined,
): FleetEta {
  const missing = spec.stages.flatMap((s) => s.clusters).filter((c) => secsOf(c) === undefined);
  if (missing.length) return { missing };
  const stages = spec.stages.map((s, i) => ({
    name: s.name,
    seconds: stageSecs(s.clusters.map((c) => secsOf(c)!), s.maxParallelClusters),
    soakSecs: i < spec.stages.length - 1 ? s.soakSecs : 0,
    approval: s.approval,
  }));
  const seconds = stages.reduce((sum, s) => sum + s.seconds + s.soakSecs, 0);
  const approvals = stages.some((s) => s.approval) ? " plus the approvals' waits" : "";
  return {
    seconds,
    text: `${formatDuration(seconds)} (${stageParts(stages).join("; ")})${approvals}`,
    stages,
  };
}

/**
 * Each stage's part of the ETA in words, for the plan's and `fleet status`'s line.
 *
 * @example
 * ```ts
 * stageParts([{ name: "a", seconds: 100, soakSecs: 60 }]); // ["stage a 1m40s, soak 1m00s"]
 * ```
 */
export function stageParts(stages: { name: string; seconds: number; soakSecs: number }[]) {
  return stages.map((s) =>
    `stage ${s.name} ${formatDuration(s.seconds)}${
      s.soakSecs ? `, soak ${formatDuration(s.soakSecs)}` : ""
    }`
  );
}

/** A stage's clusters in order, each to the first free of `width` slots: when the last ends. */
function stageSecs(secs: number[], width: number): number {
  const slots = Array.from({ length: Math.max(1, Math.min(width, secs.length)) }, () => 0);
  for (const s of secs) {
    const i = slots.indexOf(Math.min(...slots));
    slots[i] += s;
  }
  return Math.max(...slots);
}
