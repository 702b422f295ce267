/**
 * What `--dry-run=plan` shows, without I/O: the planned nodes grouped by
 * wave, the skipped ones with their reasons, the budget, the window, the
 * estimate and, with `--drain`, each node's evictions; as one JSON object
 * (`-o json`) or a kubectl-like text view.
 *
 * @module
 */

import { counted } from "../base/plural.ts";
import type { TopologyLimit } from "../engine/safety.ts";
import type { JobAction } from "../engine/stale.ts";
import { waveLabel } from "../engine/waves.ts";
import { slotsUnderBudget, type Unavailability } from "../maintenance/budget.ts";
import { type Estimate, estimateRollout, formatDuration, type NodeDurations } from "./estimate.ts";

/** What a node's drain would do now, as the run's drain decides it (maintenance/drain.ts). */
export interface DrainPreview {
  /** The pods the drain would evict (`ns/name`), or delete when `deletes`. */
  evict: string[];
  /**
   * `--disable-eviction`: the drain deletes those pods instead of evicting
   * them, so no PodDisruptionBudget is consulted (kubectl drain's flag).
   */
  deletes?: boolean;
  /** The pods that stay on the node, and why (DaemonSet, mirror pod, `--pod-selector`). */
  stays: { pod: string; reason: string }[];
  /** Why the drain would refuse the node (it would fail before its Job), if it would. */
  refused?: string;
  /** What evicting would lose, e.g. `deleting Pods with local storage: ns/p`. */
  warnings: string[];
  /**
   * The evictions the API server refuses now (its server-side dry run);
   * `budget` when a PDB's, `forGood` when that budget can never allow one.
   */
  refusedNow: { pod: string; budget?: string; message: string; forGood?: string }[];
  /** Finished pods (Succeeded/Failed): removed at once, no budget consulted, no wait. */
  finished?: string[];
  /**
   * The evictions the API server did not judge now: throttled (429 without a
   * budget's cause), a server error, a namespace being deleted. No budget
   * is known to refuse them; the run's drain sends them again.
   */
  notJudged: { pod: string; message: string }[];
}

/** A node the run would give a Job, in dispatch order. */
export interface PlannedNode {
  /** The node. */
  node: string;
  /** Its Job's name. */
  job: string;
  /** Its wave (1-based), with `--waves`/`--canary`. */
  wave?: number;
  /**
   * What the run would do with it, by the Job its node has now (the engine's
   * first sight): start a Job, adopt a running one, count one that
   * succeeded or failed, retry, replace a stale one. @default "start"
   */
  action?: JobAction;
  /** With `--drain`: what its drain would do now (only for a node that would get a new Job). */
  drain?: DrainPreview;
  /**
   * With `--max-per-topology`: its failure domain, the value of the node's
   * label, or the one domain of every node without it (engine/safety.ts `domainOf`).
   */
  domain?: string;
}

/** What the plan's ACTION column says for each {@linkcode JobAction}. */
export const ACTION_WORDS: Readonly<Record<JobAction, string>> = {
  start: "start",
  adopt: "adopt (its Job runs)",
  succeeded: "count (its Job succeeded)",
  failed: "count (its Job failed; --retry-failed runs it again)",
  retry: "retry (its Job failed; --retry-failed)",
  replace: "replace (stale Job)",
  waitStale: "replace once its stale Job ends",
};

/**
 * Whether the run would give the node a new Job, and so cordon and drain it
 * first: a node whose Job runs or has ended is met, never prepared.
 */
export function getsNewJob(action: JobAction | undefined): boolean {
  return action === undefined || !["adopt", "succeeded", "failed"].includes(action);
}

/** Whether the node takes the run's time: all but the ones counted as they are. */
function takesTime(n: PlannedNode): boolean {
  return n.action !== "succeeded" && n.action !== "failed";
}

/** The `--max-unavailable` budget as it stands now. */
export interface BudgetNow {
  /** The flag as given (`2`, `10%`). */
  spec: string;
  /** The budget resolved against the selection. */
  max: number;
  /** How many nodes the selection matched. */
  of: number;
  /** The selection's unavailable nodes now. */
  unavailable: Unavailability;
}

/** The `--window`s as they stand now. */
export interface WindowNow {
  /** The windows as given. */
  specs: string[];
  /** Whether one is open now. */
  openNow: boolean;
  /** When the open one closes (ms), if one is open and closes. */
  closesAt?: number;
  /** The next opening (ms; now while one is open). */
  nextOpening?: number;
  /** The next opening as the run's log says it. */
  nextOpeningText?: string;
}

/** The health gate as it stands now. */
export interface GateNow {
  /** `--gate-prometheus-url`. */
  url: string;
  /** How many checks (queries, and the alerts check). */
  queries: number;
  /** Why it holds every start now (a breach), or undefined when healthy. */
  heldBy?: string;
}

/** Everything the plan view is made from. */
export interface PreviewInput {
  /** The Jobs' namespace. */
  namespace: string;
  /** The Jobs' name prefix. */
  prefix: string;
  /** The owner Job, if any. */
  owner?: string;
  /** How the nodes were selected, as the log says it. */
  selection: string;
  /** `--parallelism`. */
  parallelism: number;
  /** The nodes to get a Job, in dispatch order. */
  targets: PlannedNode[];
  /** The first wave is `--canary`'s. */
  canary?: boolean;
  /** The matched nodes that get no Job, and why. */
  skipped: { node: string; reason: string }[];
  /** The cleanup Jobs (`--cleanup-job-template`), run before the main ones. */
  cleanup: { node: string; job: string }[];
  /** `--max-unavailable`, now. */
  budget?: BudgetNow;
  /** `--window`s, now. */
  window?: WindowNow;
  /** The health gate (`--gate-*`), measured once now as the run measures it before its first Job. */
  gate?: GateNow;
  /** `--wave-soak-secs`. */
  soakSecs: number;
  /** `--post-node-delay-secs`. */
  postNodeDelaySecs: number;
  /** `--estimate-from`'s durations. */
  durations?: NodeDurations;
  /** With `--drain`, its `--drain-timeout-secs`: what a refused eviction may cost a node. */
  drainTimeoutSecs?: number;
  /** `--max-per-topology`: each target's `domain` says its domain. */
  maxPerTopology?: TopologyLimit;
}

/** One wave of the plan. */
export interface PlanWave {
  /** 1-based. */
  wave: number;
  /** As the run's log calls it: `the canary`, `wave 2 of 3`, or `all` without waves. */
  label: string;
  /** Its nodes, each with its place in the dispatch order (1-based). */
  nodes: (PlannedNode & { order: number })[];
}

/** The plan as `-o json` prints it. */
export interface Preview {
  kind: "JobDispatcherPlan";
  version: 1;
  namespace: string;
  prefix: string;
  owner: string | null;
  selection: string;
  parallelism: number;
  counts: {
    nodes: number;
    waves: number;
    skipped: number;
    cleanup: number;
    refusedNow: number;
    /** The nodes with an eviction a budget can never allow: the run would fail them (exit 1). */
    blockedForGood: number;
    /** The nodes by what the run would do with each (`start`, `adopt`, `succeeded`, …). */
    actions: Partial<Record<JobAction, number>>;
    /** The nodes that take the run's time: all but those counted as their Job ended. */
    toRun: number;
  };
  waves: { wave: number; label: string; size: number; nodes: PlanWave["nodes"] }[];
  skipped: { node: string; reason: string }[];
  cleanup: { node: string; job: string }[];
  budget: (BudgetNow & { mayStartNow: number }) | null;
  gate: { url: string; queries: number; heldBy: string | null } | null;
  window: {
    windows: string[];
    openNow: boolean;
    closesAt: string | null;
    nextOpening: string | null;
    nextOpeningText: string | null;
  } | null;
  estimate: {
    from: string;
    sampledNodes: number;
    nodeMedianSeconds: number;
    /** The most nodes at once in any wave: `--parallelism`, the budget's room now, `--max-per-topology`. */
    concurrency: number;
    /** `--max-per-topology`, which bounds each wave's concurrency by its domains. */
    maxPerTopology: TopologyLimit | null;
    /** The nodes with an eviction refused now, each counted as waiting up to the drain timeout. */
    drainWaits: { nodes: number; timeoutSecs: number } | null;
    seconds: number;
    text: string;
  } | null;
}

/**
 * Groups the planned nodes by wave, in dispatch order: consecutive nodes of
 * one wave number form one group (the plan step cuts waves from the head of
 * the order); without waves, all nodes are one group called `all`.
 *
 * @example
 * ```ts
 * groupByWave([{ node: "a", job: "j-a", wave: 1 }, { node: "b", job: "j-b", wave: 2 }], true)
 *   .map((w) => w.label); // ["the canary", "wave 2 of 2"]
 * ```
 */
export function groupByWave(targets: readonly PlannedNode[], canary?: boolean): PlanWave[] {
  const groups: PlanWave[] = [];
  targets.forEach((t, i) => {
    const wave = t.wave ?? 1;
    if (groups.at(-1)?.wave !== wave) groups.push({ wave, label: "", nodes: [] });
    groups.at(-1)!.nodes.push({ ...t, order: i + 1 });
  });
  const waved = targets.some((t) => t.wave !== undefined);
  for (const g of groups) g.label = waved ? waveLabel(g.wave, groups.length, canary) : "all";
  return groups;
}

/**
 * How many nodes may run at once: `--parallelism`, or fewer where the budget
 * has less room now (at least one: the estimate assumes the room comes back).
 */
export function concurrencyOf(parallelism: number, budget?: BudgetNow): number {
  if (!budget) return parallelism;
  return Math.max(1, Math.min(parallelism, budget.max - budget.unavailable.count));
}

const iso = (
  ms?: number,
) => (ms === undefined || !Number.isFinite(ms) ? null : new Date(ms).toISOString());

/**
 * The estimate of the plan's waves: a node whose Job already ended is
 * counted at once and takes no round; with `--max-per-topology` the domains
 * of each wave's nodes that take time, in dispatch order, as the engine
 * meets them.
 */
function estimatePlan(p: PreviewInput, waves: PlanWave[], concurrency: number): Estimate {
  const running = waves.map((w) => w.nodes.filter(takesTime));
  return estimateRollout({
    waveWaits: running.map((nodes) => nodes.filter(waitsOnBudget).length),
    waitSecs: p.drainTimeoutSecs ?? 0,
    waveSizes: running.map((nodes) => nodes.length),
    concurrency,
    waveDomains: p.maxPerTopology && running.map((nodes) => nodes.map((n) => n.domain ?? "")),
    maxPerDomain: p.maxPerTopology?.max,
    nodeSecs: p.durations!.medianSecs,
    postNodeDelaySecs: p.postNodeDelaySecs,
    soakSecs: p.soakSecs,
  });
}

/** Whether the node's drain has an eviction refused now, which it sends again until its timeout. */
function waitsOnBudget(t: PlannedNode): boolean {
  return !!t.drain?.refusedNow.length && !t.drain.refused;
}

/** The plan as one object: what `-o json` prints and the text view reads. */
export function buildPreview(p: PreviewInput): Preview {
  const waves = groupByWave(p.targets, p.canary);
  const concurrency = concurrencyOf(p.parallelism, p.budget);
  const actions: Partial<Record<JobAction, number>> = {};
  for (const t of p.targets) actions[t.action ?? "start"] = (actions[t.action ?? "start"] ?? 0) + 1;
  const estimate = p.durations && estimatePlan(p, waves, concurrency);
  return {
    kind: "JobDispatcherPlan",
    version: 1,
    namespace: p.namespace,
    prefix: p.prefix,
    owner: p.owner ?? null,
    selection: p.selection,
    parallelism: p.parallelism,
    counts: {
      nodes: p.targets.length,
      waves: waves.length,
      skipped: p.skipped.length,
      cleanup: p.cleanup.length,
      refusedNow: p.targets.filter((t) => t.drain?.refusedNow.length || t.drain?.refused).length,
      blockedForGood: p.targets.filter((t) => t.drain?.refusedNow.some((r) => r.forGood)).length,
      actions,
      toRun: p.targets.filter(takesTime).length,
    },
    waves: waves.map((w) => ({
      wave: w.wave,
      label: w.label,
      size: w.nodes.length,
      nodes: w.nodes,
    })),
    skipped: p.skipped,
    cleanup: p.cleanup,
    budget: p.budget
      ? {
        ...p.budget,
        mayStartNow: slotsUnderBudget({
          maxUnavailable: p.budget.max,
          unavailable: p.budget.unavailable.count,
          parallelism: p.parallelism,
          inFlight: 0,
        }),
      }
      : null,
    gate: p.gate
      ? { url: p.gate.url, queries: p.gate.queries, heldBy: p.gate.heldBy ?? null }
      : null,
    window: p.window
      ? {
        windows: p.window.specs,
        openNow: p.window.openNow,
        closesAt: iso(p.window.closesAt),
        nextOpening: iso(p.window.nextOpening),
        nextOpeningText: p.window.nextOpeningText ?? null,
      }
      : null,
    estimate: estimate && p.durations
      ? {
        from: p.durations.from,
        sampledNodes: p.durations.seconds.length,
        nodeMedianSeconds: p.durations.medianSecs,
        // The most at once in any wave that runs a node; the budget's alone without one.
        concurrency: Math.max(
          0,
          ...estimate.waves.filter((w) => w.rounds).map((w) => w.concurrency),
        ) || concurrency,
        maxPerTopology: p.maxPerTopology ?? null,
        drainWaits: drainWaitsOf(p),
        seconds: estimate.totalSecs,
        text: formatDuration(estimate.totalSecs),
      }
      : null,
  };
}

/**
 * What an estimate is made of, as the plan and a run's log say it after its
 * duration: the per-node median, its sample, how many nodes at once.
 *
 * @example
 * ```ts
 * // "(per-node median 1m00s of 4 nodes in r.json; 2 at once, at most 1 per zone)"
 * ```
 */
export function estimateBasis(e: NonNullable<Preview["estimate"]>): string {
  const limit = e.maxPerTopology
    ? `, at most ${e.maxPerTopology.max} per ${e.maxPerTopology.key}`
    : "";
  const waits = e.drainWaits
    ? `; ${counted(e.drainWaits.nodes, "node")} refused now wait up to the drain timeout ` +
      `(${e.drainWaits.timeoutSecs} s)`
    : "";
  return `(per-node median ${formatDuration(e.nodeMedianSeconds)} of ` +
    `${counted(e.sampledNodes, "node")} in ${e.from}; ${e.concurrency} at once${limit}${waits})`;
}

/** The nodes that would wait on a refused eviction, and how long at most; null when none. */
function drainWaitsOf(p: PreviewInput): NonNullable<Preview["estimate"]>["drainWaits"] {
  const nodes = p.targets.filter((t) => takesTime(t) && waitsOnBudget(t)).length;
  return nodes && p.drainTimeoutSecs ? { nodes, timeoutSecs: p.drainTimeoutSecs } : null;
}

/** Columns padded as kubectl pads them: three spaces between. */
function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("   ").trimEnd());
}

/** The lines above the tables: what, the budget, the window, the estimate. */
function headLines(v: Preview): string[] {
  const waves = v.counts.waves > 1 ? ` in ${v.counts.waves} waves` : "";
  const lines = [
    `Plan: ${
      counted(v.counts.nodes, "node")
    }${waves}, namespace ${v.namespace}, prefix ${v.prefix}, ` +
    `parallelism ${v.parallelism}${v.owner ? `, owner job ${v.owner}` : ""}; ` +
    "nothing created, cordoned or written (--dry-run=plan)",
    `Jobs there now: ${actionsLine(v.counts.actions)}`,
    `Selection: ${v.selection}; ${v.counts.skipped} skipped` +
    (v.counts.cleanup ? `; ${counted(v.counts.cleanup, "cleanup Job")} first` : ""),
  ];
  if (v.budget) {
    const b = v.budget;
    lines.push(
      `Budget: --max-unavailable ${b.spec} = ${b.max} of ${
        counted(b.of, "node")
      }; unavailable now ` +
        `${b.unavailable.count} (${b.unavailable.notReady.length} NotReady, ` +
        `${b.unavailable.cordoned.length} cordoned); ${b.mayStartNow} may start now`,
    );
  }
  if (v.window) {
    const w = v.window;
    lines.push(
      `Window: ${w.windows.join(" or ")}: ` +
        (w.openNow
          ? `open now${w.closesAt ? `, closes ${w.closesAt}` : ""}`
          : `closed now; next opening ${w.nextOpeningText ?? "never"}`),
    );
  }
  if (v.gate) {
    const g = v.gate;
    lines.push(
      `Gate: ${counted(g.queries, "check")} on ${g.url}: ` +
        (g.heldBy ? `holds every start now (${g.heldBy})` : "healthy now"),
    );
  }
  if (v.estimate) lines.push(`Estimate: ${v.estimate.text} ${estimateBasis(v.estimate)}`);
  if (v.counts.blockedForGood) {
    lines.push(
      `Blocked for good: ${counted(v.counts.blockedForGood, "node")} with an eviction no ` +
        "budget will ever allow (below); the run would fail each at the drain timeout; " +
        "scale the workload up or relax the budget (exit 1)",
    );
  }
  return lines;
}

/** The nodes by action, in a few words: `2 start, 1 adopt (its Job runs)`. */
function actionsLine(actions: Preview["counts"]["actions"]): string {
  const parts = (Object.keys(ACTION_WORDS) as JobAction[]).filter((a) => actions[a])
    .map((a) => `${actions[a]} ${ACTION_WORDS[a]}`);
  return parts.join(", ") || "none";
}

/** The drain lines of one node: what it evicts, what stays, what refuses now. */
function drainLines(n: PlannedNode): string[] {
  const d = n.drain;
  if (!d) return [`  ${n.node}: not drained (${ACTION_WORDS[n.action ?? "start"]})`];
  if (d.refused) return [`  ${n.node}: ${d.refused} (the node would fail before its Job)`];
  const stays = d.stays.map((s) => `${s.pod} (${s.reason})`);
  const lines = [
    `  ${n.node}: ${d.deletes ? "delete" : "evict"} ${d.evict.join(", ") || "nothing"}` +
    (d.deletes && d.evict.length ? " (--disable-eviction: no budget consulted)" : "") +
    (d.finished?.length ? `; removes finished ${d.finished.join(", ")} (no budget, no wait)` : "") +
    (stays.length ? `; stays ${stays.join(", ")}` : ""),
  ];
  for (const w of d.warnings) lines.push(`    ${w}`);
  for (const r of d.refusedNow) {
    lines.push(
      r.forGood
        ? `    blocked for good: ${r.message}; ${r.forGood}`
        : `    refused now: ${r.message}`,
    );
  }
  for (const r of d.notJudged) {
    lines.push(`    not judged now: ${r.message} (the run's drain sends it again)`);
  }
  return lines;
}

/**
 * The plan as text: the head lines, a table of the nodes in order with their
 * wave (and with `--drain` how many pods each evicts and the budgets that
 * refuse now), the drain's details, and the skipped nodes with their reasons.
 */
export function previewText(v: Preview): string {
  const nodes = v.waves.flatMap((w) => w.nodes.map((n) => ({ ...n, label: w.label })));
  const drained = nodes.some((n) => n.drain);
  const out = headLines(v);
  if (nodes.length) {
    const head = [
      "WAVE",
      "#",
      "NODE",
      "JOB",
      ...(drained ? ["EVICT", "REFUSED NOW BY"] : []),
      "ACTION",
    ];
    const rows = nodes.map((n) => [
      n.label,
      String(n.order),
      n.node,
      n.job,
      ...(drained ? [String(n.drain?.evict.length ?? "-"), refusedBy(n.drain)] : []),
      ACTION_WORDS[n.action ?? "start"],
    ]);
    out.push("", ...table([head, ...rows]));
  }
  if (drained) out.push("", "Drain (server-side dry run, now):", ...nodes.flatMap(drainLines));
  if (v.cleanup.length) {
    out.push(
      "",
      "Cleanup first:",
      ...table([["NODE", "JOB"], ...v.cleanup.map((c) => [c.node, c.job])]),
    );
  }
  if (v.skipped.length) {
    out.push(
      "",
      "Skipped:",
      ...table([["NODE", "REASON"], ...v.skipped.map((s) => [s.node, s.reason])]),
    );
  }
  return out.join("\n");
}

/** The PDBs (or the drain rule) that refuse a node's drain now; `-` when none. */
function refusedBy(d: DrainPreview | undefined): string {
  if (!d) return "-";
  if (d.refused) return "drain refused";
  // A refusal that is no budget's (several budgets over one pod, forbidden) is no PDB's name.
  const budgets = [...new Set(d.refusedNow.map((r) => r.budget ?? "refused"))];
  return budgets.join(",") || "-";
}
