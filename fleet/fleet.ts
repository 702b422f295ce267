/**
 * The fleet's order: stages one after another, a stage's clusters rolled
 * out (at most `maxParallelClusters` at once), then its soak, then the next
 * stage's approval. One stop-the-line: the first cluster whose run exits
 * non-zero (a gate breach, the failure budget, a failed node, a refusal)
 * lets no further cluster start, and the fleet exits with that run's code.
 *
 * Where the fleet stands is read from the clusters, never kept by the
 * process: a cluster whose run record says its rollout of this template
 * ended is counted (and not run again), and a stage's soak runs from the
 * latest recorded end of its clusters, so a re-run after `kill -9` goes on
 * where the fleet was.
 *
 * @module
 */

import type { PauseGate } from "../engine/pause.ts";
import type { SoakGate } from "../engine/fanout_types.ts";
import type { StopLine } from "./line.ts";
import type { FleetSpec, Stage } from "./spec.ts";
import { counted } from "../base/plural.ts";

/** What the fleet asks of each cluster (fleet/cluster.ts and main.ts answer it). */
export interface ClusterRunner {
  /** When the cluster's rollout of this template ended cleanly, as its run record says; undefined when it did not. */
  endedAt(cluster: string): Promise<number | undefined>;
  /**
   * After its run exited 0: when the cluster's record says its rollout of
   * this template ended cleanly, or why it does not say so (no record,
   * another template's, still running).
   *
   * @throws when the record cannot be read (an outage): the fleet reads again
   */
  settled(cluster: string): Promise<{ endedAt: number } | { not: string }>;
  /**
   * Runs the cluster's rollout (the CLI's run) and returns its exit code;
   * never throws. `line` is the fleet's stop-the-line as this run sees it.
   */
  run(cluster: string, line: ClusterLine): Promise<number>;
  /** Why the cluster's run exited `code`, in a few words (its record's reason, if any). */
  cause(cluster: string, code: number): Promise<string>;
  /** Who approved `stage` in the cluster, for this template; undefined while no one has. */
  approvedBy(stage: string, cluster: string): Promise<string | undefined>;
  /** The health gates of `clusters` (those configured), measured from now until stopped. */
  soakGates?(clusters: string[]): Promise<SoakGates>;
}

/**
 * The clusters' health gates as the soak between two stages sees them: the
 * engine's {@linkcode SoakGate} over every cluster (clean since the latest
 * of their clean stretches, or what breaks one now), and the stop a breach
 * makes when no pause can hold it.
 */
export interface SoakGates extends SoakGate {
  /** Why the fleet stops (a breach with `--on-gate-breach exit`, an exit latch already set): the cluster and the cause. */
  stopsBy(): { cluster: string; cause: string } | undefined;
  /** Calls `wake` whenever an answer may have changed. */
  onChange(wake: () => void): void;
  /** Stops measuring. */
  stop(): Promise<void>;
}

/** The fleet's stop-the-line as one cluster's run sees it. */
export interface ClusterLine {
  /** Asked with the run's own pauses before every start: holds or stops it once another cluster stopped the line. */
  hold: PauseGate;
  /** The run tells it when it stops the line while it goes on (a gate breach, its failure budget). */
  stopped: (cause: string, code: number) => void;
  /** The run tells it when it selected no node: it ends with nothing undone and writes no record. */
  nothingToDo: () => void;
  /** The run tells it when its closing record write did not land, with why: its end cannot be read. */
  recordLost: (reason: string) => void;
}

/** The fleet's log: one line per decision. */
export interface FleetLog {
  /** A step taken. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** A wait or a stop. */
  warn(msg: string, fields?: Record<string, unknown>): void;
  /** The stop-the-line. */
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** What the fleet needs around it. */
export interface FleetDeps {
  /** The clusters. */
  runner: ClusterRunner;
  /** The log. */
  log: FleetLog;
  /** Aborted by SIGINT/SIGTERM: no further cluster starts, no wait goes on. */
  signal: AbortSignal;
  /** The clock (ms since the epoch). */
  now: () => number;
  /** Waits `ms`, or less when `signal` aborts. */
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** How often an awaited approval, or a record that could not be read, is looked for. */
  approvalPollMs: number;
  /** The approve command, for the waiting line. */
  approveHint: (stage: string) => string;
  /** The one stop-the-line of this fleet process. */
  line: StopLine;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/**
 * Rolls the fleet out, stage by stage, and returns the exit code: 0 when
 * every cluster ended cleanly, else the code of the first cluster's run
 * that did not (the stop-the-line), or 0 after a stop by signal (the caller
 * turns it into 130/143).
 */
export async function runFleet(spec: FleetSpec, deps: FleetDeps): Promise<number> {
  const { log } = deps;
  let before: { stage: Stage; endedAt: number } | undefined;
  // The clusters of the stages so far: the soak watches every one's gates.
  const rolled: string[] = [];
  for (const stage of spec.stages) {
    const ended = await recordedEnds(stage, deps);
    const left = stage.clusters.filter((c) => !ended.has(c));
    if (left.length === 0) {
      const at = Math.max(...ended.values());
      log.info(`fleet: stage ${stage.name} counted: every cluster ended at or before ${iso(at)}`, {
        event: "fleetStageCounted",
        stage: stage.name,
        endedAt: iso(at),
      });
      before = { stage, endedAt: at };
      rolled.push(...stage.clusters);
      continue;
    }
    if (before) {
      const soaked = await soak(before, [...rolled], deps);
      if (soaked === "signal") return 0;
      if (soaked !== "passed") return soaked;
    }
    if (stage.approval && !await approval(stage, deps)) return 0;
    const outcome = await rollStage(stage, left, deps);
    if (outcome.code !== 0 || deps.signal.aborted) return outcome.code;
    for (const [c, at] of outcome.ended) ended.set(c, at);
    // A cluster that selected no node changed nothing: its end (now, as it
    // has no record) does not move the stage's, else every re-run after a
    // kill -9 would restart the soak from now. Only a stage of such
    // clusters alone ends when they returned.
    const rolledOut = [...ended].filter(([c]) => !outcome.empty.has(c)).map(([, t]) => t);
    const at = Math.max(...(rolledOut.length ? rolledOut : ended.values()));
    log.info(`fleet: stage ${stage.name} ended at ${iso(at)}`, {
      event: "fleetStageEnded",
      stage: stage.name,
      endedAt: iso(at),
    });
    before = { stage, endedAt: at };
    rolled.push(...stage.clusters);
  }
  log.info(`fleet: every stage ended (${counted(spec.stages.length, "stage")})`, {
    event: "fleetEnded",
  });
  return 0;
}

/** The clusters of a stage whose record says they ended, with when; each counted one is said. */
async function recordedEnds(stage: Stage, deps: FleetDeps): Promise<Map<string, number>> {
  const ended = new Map<string, number>();
  for (const c of stage.clusters) {
    const at = await deps.runner.endedAt(c);
    if (at === undefined) continue;
    ended.set(c, at);
    deps.log.info(
      `fleet: cluster ${c} (stage ${stage.name}) counted: its run record says it ended at ${
        iso(at)
      }`,
      { event: "fleetClusterCounted", cluster: c, stage: stage.name, endedAt: iso(at) },
    );
  }
  return ended;
}

/** The soak's outcome: go on, stopped by a signal, or the fleet's exit code. */
type SoakEnd = "passed" | "signal" | number;

/**
 * Waits out the soak after the stages so far: `soakSecs` from the stage's
 * recorded end with every gate of those clusters clean throughout. A break
 * (a breach, latched until a person lifts it; Prometheus unreachable; no
 * data) restarts it, full length, from when the gates are clean again (the
 * engine's {@linkcode SoakGate}); a breach no pause can hold stops the fleet.
 */
async function soak(
  before: { stage: Stage; endedAt: number },
  clusters: string[],
  deps: FleetDeps,
): Promise<SoakEnd> {
  const gates = await deps.runner.soakGates?.(clusters);
  try {
    return await soakWith(before, gates, deps);
  } finally {
    await gates?.stop();
  }
}

async function soakWith(
  before: { stage: Stage; endedAt: number },
  gates: SoakGates | undefined,
  deps: FleetDeps,
): Promise<SoakEnd> {
  const { stage } = before;
  const soakMs = stage.soakSecs * 1000;
  let wake = new AbortController();
  gates?.onChange(() => wake.abort());
  let said: string | undefined;
  while (!deps.signal.aborted) {
    const stop = gates?.stopsBy();
    if (stop) return await stoppedInSoak(stage, stop, deps);
    const w = gates?.watch() ?? { clean: true as const, since: -Infinity };
    const until = w.clean ? Math.max(before.endedAt, w.since) + soakMs : Infinity;
    if (until <= deps.now()) return "passed";
    const line = w.clean
      ? `fleet: soaking after stage ${stage.name} until ${
        iso(until)
      } (soakSecs ${stage.soakSecs} ` +
        `from ${w.since > before.endedAt ? `the gates clean again after ${w.after}` : "its end"} ${
          iso(Math.max(before.endedAt, w.since))
        })`
      : `fleet: the soak after stage ${stage.name} holds: ${w.why}; it restarts, whole, ` +
        "once every gate is clean";
    if (line !== said) {
      // Called on the log, not detached: the Logger's methods need their `this`.
      if (w.clean) {
        deps.log.info(line, { event: "fleetSoak", stage: stage.name, until: iso(until) });
      } else deps.log.warn(line, { event: "fleetSoakHeld", stage: stage.name, why: w.why });
      said = line;
    }
    wake = new AbortController();
    // Woken by a gate's change; looked at every poll too, a stale answer wakes no one.
    const ms = gates ? Math.min(until - deps.now(), deps.approvalPollMs) : until - deps.now();
    await deps.sleep(ms, AbortSignal.any([deps.signal, wake.signal]));
  }
  return "signal";
}

/** A breach in the soak that no pause holds: the fleet stops, exit 5, naming the cluster. */
async function stoppedInSoak(
  stage: Stage,
  stop: { cluster: string; cause: string },
  deps: FleetDeps,
): Promise<number> {
  // The line's stop too: the fleet's report names it (no run is in flight to hold).
  await deps.line.stop({ ...stop, stage: stage.name, code: 5 });
  deps.log.error(
    `fleet: stopped the line: cluster ${stop.cluster} in the soak after stage ${stage.name}: ` +
      `${stop.cause}; no further cluster starts`,
    {
      event: "fleetStopped",
      cluster: stop.cluster,
      stage: stage.name,
      exitCode: 5,
      cause: stop.cause,
    },
  );
  return 5;
}

/** Waits until every cluster of the stage has the approval recorded; false when stopped. */
async function approval(stage: Stage, deps: FleetDeps): Promise<boolean> {
  let said = false;
  while (!deps.signal.aborted) {
    const by = await Promise.all(stage.clusters.map((c) => deps.runner.approvedBy(stage.name, c)));
    const missing = stage.clusters.filter((_, i) => by[i] === undefined);
    if (missing.length === 0) {
      const who = [...new Set(by)].join(", ");
      deps.log.info(`fleet: stage ${stage.name} approved by ${who}`, {
        event: "fleetApproved",
        stage: stage.name,
        by: who,
      });
      return true;
    }
    if (!said) {
      deps.log.warn(
        `fleet: stage ${stage.name} waits for approval (not yet in ${missing.join(", ")}): ` +
          deps.approveHint(stage.name),
        { event: "fleetAwaitsApproval", stage: stage.name, missing },
      );
      said = true;
    }
    await deps.sleep(deps.approvalPollMs, deps.signal);
  }
  return false;
}

/**
 * Rolls out the clusters of one stage, at most `maxParallelClusters` at once;
 * returns the exit code, each cluster's end, and those that selected no node.
 * The first run that stops (a breach or its budget, told while it goes on;
 * a non-zero exit) stops the line: no further cluster starts, and the runs
 * in flight are held through their own pause (fleet/line.ts) until they end.
 */
async function rollStage(
  stage: Stage,
  clusters: string[],
  deps: FleetDeps,
): Promise<{ code: number; ended: Map<string, number>; empty: Set<string> }> {
  const queue = [...clusters];
  const ended = new Map<string, number>();
  const empty = new Set<string>();
  const inFlight = new Set<string>();
  const stop = async (c: string, how: string, cause: string, code: number) => {
    if (deps.signal.aborted) return;
    if (!await deps.line.stop({ cluster: c, stage: stage.name, cause, code })) return;
    stoppedTheLine(deps, { stage, cluster: c, how, cause, code, left: queue.length, inFlight });
  };
  const worker = async () => {
    while (queue.length && !deps.line.stopped && !deps.signal.aborted) {
      const c = queue.shift()!;
      deps.log.info(`fleet: stage ${stage.name}: starting cluster ${c}`, {
        event: "fleetClusterStarted",
        stage: stage.name,
        cluster: c,
      });
      inFlight.add(c);
      const stopping: Promise<void>[] = [];
      let nothing = false;
      let lost: string | undefined;
      const rc = await deps.runner.run(c, {
        hold: deps.line.holdFor(c),
        stopped: (cause, code) => void stopping.push(stop(c, "stopped", cause, code)),
        nothingToDo: () => void (nothing = true),
        recordLost: (reason) => void (lost = reason),
      });
      await Promise.all(stopping);
      inFlight.delete(c);
      deps.line.release(c);
      if (rc === 0 && !deps.signal.aborted) {
        // A run over no node writes no record: it ended, with nothing undone, now.
        if (nothing) empty.add(c);
        // Its record was refused or lost: the run rolled out, but neither this
        // process nor a resume can read that it ended; say so, not a live run.
        if (lost !== undefined && !nothing) {
          if (!deps.line.stopped) {
            await stop(c, "ended its run", recordLostCause(lost), EXIT_NOT_ROLLED);
          }
          continue;
        }
        const end = nothing ? deps.now() : await settledEnd(c, stage, deps);
        if (typeof end === "number") ended.set(c, end);
        // Exit 0 without a record of this rollout ended: it yielded to a live
        // run of the prefix, or waited out an earlier one that is still live.
        // (A line stopped already keeps its stopper's code: this run was held.)
        else if (end && !deps.line.stopped) {
          await stop(c, "exited 0 without rolling out", end.not, EXIT_NOT_ROLLED);
        }
        continue;
      }
      // A run the line stopped ends non-zero too: only the first stop is said.
      const by = (deps.line as StopLine).stopped; // set meanwhile, by another run
      if (by && by.cluster !== c) continue;
      await stop(c, `exited ${rc}`, await deps.runner.cause(c, rc), rc);
    }
  };
  const width = Math.max(1, Math.min(stage.maxParallelClusters, clusters.length));
  await Promise.all(Array.from({ length: width }, worker));
  return { code: deps.line.stopped?.code ?? 0, ended, empty };
}

/**
 * The fleet's exit code when a cluster's run exited 0 but its record does
 * not say it rolled out: the fleet cannot count it, nor go on (1, as a run
 * that failed; the run's own exit 0 means "not mine to do", not "done").
 */
const EXIT_NOT_ROLLED = 1;

/**
 * Why the fleet stops at a run whose closing record write did not land. Not
 * counted from the run's exit 0: where the fleet stands must be read from the
 * clusters (a resume after `kill -9` would run it again, and a soak needs its
 * recorded end), and a refused write stops the line loudly.
 */
function recordLostCause(reason: string): string {
  return `its run record could not be written (${reason}): the fleet cannot tell that it ` +
    "ended; fix the record write (RBAC/policy) and run the fleet again";
}

/**
 * A cluster's end after its run exited 0, from its record: the recorded end,
 * or why the record does not say it ended; undefined when stopped by a
 * signal. A record that cannot be read (the cluster's API server is out)
 * holds this cluster only, as an outage holds its run: it is read again
 * every poll, and its stage waits for it.
 */
async function settledEnd(
  c: string,
  stage: Stage,
  deps: FleetDeps,
): Promise<number | { not: string } | undefined> {
  let said = false;
  while (!deps.signal.aborted) {
    try {
      const s = await deps.runner.settled(c);
      return "endedAt" in s ? s.endedAt : s;
    } catch (e) {
      if (!said) {
        deps.log.warn(
          `fleet: cluster ${c} (stage ${stage.name}) ended its run, but its record cannot be ` +
            `read: ${(e as Error).message}; it waits, and stage ${stage.name} with it`,
          { event: "fleetRecordUnreadable", cluster: c, stage: stage.name },
        );
        said = true;
      }
      await deps.sleep(deps.approvalPollMs, deps.signal);
    }
  }
  return undefined;
}

/** Says the stop of the line: the cluster, the cause, and what the clusters in flight do. */
function stoppedTheLine(
  deps: FleetDeps,
  s: {
    stage: Stage;
    cluster: string;
    how: string;
    cause: string;
    code: number;
    left: number;
    inFlight: Set<string>;
  },
): void {
  const { log, line } = deps;
  const others = [...s.inFlight].filter((c) => c !== s.cluster);
  const list = others.join(", ");
  const held = !others.length
    ? "no other cluster is in flight"
    : line.latches && line.onOwners
    ? `the pause is latched on each owner Job: no Job starts in ${list} until a person ` +
      "lifts it with the kubectl annotate its run prints"
    : line.latches
    ? `the pause file is latched: no Job starts in ${list} until a person removes it`
    : `${list}: no further Job, each run ends once its Jobs in flight finished`;
  log.error(
    `fleet: stopped the line: cluster ${s.cluster} (stage ${s.stage.name}) ${s.how}: ${s.cause}; ` +
      `no further cluster starts (${s.left} left in this stage); ${held}`,
    {
      event: "fleetStopped",
      cluster: s.cluster,
      stage: s.stage.name,
      exitCode: s.code,
      cause: s.cause,
      held: others,
      latched: line.latches,
    },
  );
}
