/**
 * How `status` reads a prefix's Jobs at 10,000 nodes within a few seconds.
 *
 * Whole, 10,000 Jobs are ~38 MB of JSON that the API server encodes and
 * status parses, though a succeeded Job's story is one word. So the Jobs
 * that have not succeeded (`status.successful!=1`: running, failed, fresh;
 * a few hundred while a run lives) come whole, with their failure's
 * message, and those that have come as the rows of `kubectl get jobs`
 * without their objects: a name and a Status cell. Measured on 10,000
 * succeeded Jobs of a 10,000-node kwok cluster, median of 7 paginated
 * LISTs: whole 1.31 s, metadata only 0.74 s, table rows 0.38 s, table rows
 * with metadata 1.26 s (the printer's cost adds to the metadata's).
 *
 * A row has no owner, node or UID, and the view and the re-run line judge
 * a Job by them. The run record supplies them for the Jobs the run made:
 * a node of the record that the run has started (creating, running or
 * past it) got the Job of its name from this run, so it is the record's
 * owner's, for the record's node. Not a queued node: the engine's first
 * sight leaves a finished earlier Job (another owner's, template's or
 * node's) in place, its node queued, until a slot deletes it
 * (engine/stale.ts `firstSight`); nor one still replacing it
 * (`waitingStale`, `deleting`), nor a failed one (it may have failed
 * waiting for or deleting that Job, which stays). The rows the record
 * cannot vouch for are read again with their metadata, and whole those
 * whose cell hides what the view needs ({@linkcode cellTellsAll}).
 *
 * @module
 */

import type { V1Job, V1ObjectMeta } from "@kubernetes/client-node";
import { jobName, labelValue, type OwnerRef, type TrackingKeys } from "../job.ts";
import type { Phase } from "../engine/node_state.ts";
import type { RunRecord } from "../report/record.ts";

/** One succeeded Job as its table row tells it: its name and Status cell. */
export type JobRow = readonly [name: string, status: string];

/**
 * The conditions a Job's `Status` cell stands for: the cell is the API
 * server's printer's summary of them (Complete, then Failed, Terminating,
 * Suspended, FailureTarget, SuccessCriteriaMet, else Running: the column
 * `kubectl get jobs` shows), and the view reads no more of them.
 */
const CELL_CONDITIONS: Record<string, string> = {
  Complete: "Complete",
  Failed: "Failed",
  Suspended: "Suspended",
  FailureTarget: "FailureTarget",
  SuccessCriteriaMet: "SuccessCriteriaMet",
};

/** A Job of `metadata` whose conditions are those its Status cell stands for. */
export function jobOfCell(metadata: V1ObjectMeta, cell: string): V1Job {
  const type = CELL_CONDITIONS[cell];
  return { metadata, status: { conditions: type ? [{ type, status: "True" }] : [] } };
}

/**
 * Phases whose node's Job of its name is the run's own: the engine met or
 * removed any earlier Job before it started the node (engine/fanout.ts
 * `#begin`).
 */
const STARTED: ReadonlySet<Phase> = new Set([
  "creating",
  "draining",
  "running",
  "finishing",
  "succeeded",
]);

/**
 * Cells that say all the view and the re-run line read of a Job's
 * conditions. Not `Failed` (its message), not `Terminating` (it outranks
 * every condition but Complete and Failed, and the engine's first sight
 * judges a Job being deleted stale), nor none at all: API servers before
 * 1.30 print no Status column.
 */
const TELLING: ReadonlySet<string> = new Set([
  "Complete",
  "SuccessCriteriaMet",
  "FailureTarget",
  "Suspended",
  "Running",
]);

/** Whether a row's cell says all the view reads of its Job's conditions (else read it whole). */
export function cellTellsAll(cell: string): boolean {
  return TELLING.has(cell);
}

/** What {@linkcode jobsOfRows} makes of the rows. */
export interface RowJobs {
  /** The Jobs the record vouches for, with the metadata the engine gave them. */
  jobs: V1Job[];
  /** The rows it cannot vouch for: their metadata must be read. */
  unvouched: JobRow[];
}

/**
 * The Jobs of the rows of succeeded Jobs, by the record: the metadata the
 * engine gave each Job of a node of the record (the prefix and node labels,
 * the node's name, the record's owner), and the rows left to read again.
 *
 * @param replaced whether a node was made again under its name since the
 *   run began: its Job may be the earlier node's, which the re-run line
 *   judges by the UID the Job was made for
 */
export function jobsOfRows(
  rows: readonly JobRow[],
  record: Pick<RunRecord, "prefix" | "nodes" | "owner"> | undefined,
  keys: TrackingKeys,
  replaced: (node: string) => boolean = () => false,
): RowJobs {
  const nodeOf = new Map(record?.nodes.map((n) => [jobName(record.prefix, n.node), n]));
  const jobs: V1Job[] = [];
  const unvouched: JobRow[] = [];
  for (const row of rows) {
    const n = nodeOf.get(row[0]);
    const vouched = n && STARTED.has(n.phase) && TELLING.has(row[1]) && !replaced(n.node);
    if (!vouched) unvouched.push(row);
    else jobs.push(jobOfCell(madeBy(record!.prefix, n.node, record!.owner, row[0], keys), row[1]));
  }
  return { jobs, unvouched };
}

/** The metadata the engine gives the Job of `node` (job.ts `buildJob`), as far as status reads it. */
function madeBy(
  prefix: string,
  node: string,
  owner: OwnerRef | undefined,
  name: string,
  keys: TrackingKeys,
): V1ObjectMeta {
  return {
    name,
    labels: { [keys.owner]: labelValue(prefix), [keys.node]: labelValue(node) },
    annotations: { [keys.nodeName]: node },
    ownerReferences: owner
      ? [{ apiVersion: "batch/v1", kind: "Job", name: owner.name, uid: owner.uid }]
      : undefined,
  };
}

/**
 * The prefix's Jobs: the whole ones that have not succeeded, and the
 * succeeded ones of their rows, by name. The whole ones are read first, so
 * a Job that succeeded between the two reads is in both (never in
 * neither), and its row, the later word, gives its conditions.
 */
export function mergeJobs(whole: readonly V1Job[], succeeded: readonly V1Job[]): V1Job[] {
  const byName = new Map(whole.map((j) => [j.metadata!.name!, j]));
  for (const j of succeeded) {
    const earlier = byName.get(j.metadata!.name!);
    byName.set(j.metadata!.name!, earlier ? { ...earlier, status: j.status } : j);
  }
  return [...byName.values()];
}
