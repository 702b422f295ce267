/**
 * What the fleet reads and writes in one cluster: the run record the run
 * keeps there (report/record.ts; read, never written here) and the stage
 * approvals `fleet approve` records.
 *
 * An approval is a ConfigMap of its own, `fleet-approval.<prefix>.<stage>`
 * in the Jobs' namespace, not an annotation on the run record: a stage's
 * clusters have no record before their run begins, and the run replaces
 * its record's ConfigMap whole when it writes it. It carries the template
 * hash, so an approval given for one rollout never lets the next one pass.
 *
 * @module
 */

import { labelValue } from "../job.ts";
import { ApiError, type Kube } from "../kube/client.ts";
import { decodeRecord, recordPath, type RunRecord } from "../report/record.ts";
import { type ManagedFieldsEntry, recordWrittenAt } from "../status/view.ts";

/** Where one cluster's rollout lives: its namespace, the Jobs' prefix and the template's hash. */
export interface RolloutKey {
  /** The Jobs' namespace in that cluster. */
  namespace: string;
  /** The Jobs' name prefix. */
  prefix: string;
  /** The template's hash (job.ts `templateHash`). */
  templateHash: string;
}

/** The run record of the prefix in the cluster, or undefined when there is none (or it is unreadable). */
export async function readRecord(kube: Kube, key: RolloutKey): Promise<RunRecord | undefined> {
  return (await readRecordWritten(kube, key)).record;
}

/** The record, and when the API server stamped its last write (`managedFields`), if it did. */
async function readRecordWritten(
  kube: Kube,
  key: RolloutKey,
): Promise<{ record?: RunRecord; writtenAt?: number }> {
  const cm = await kube.get<{
    metadata?: { managedFields?: ManagedFieldsEntry[] };
    data?: Record<string, string>;
    binaryData?: Record<string, string>;
  }>(recordPath(key.namespace, key.prefix));
  if (!cm) return {};
  try {
    const record = await decodeRecord(cm.data, cm.binaryData);
    return { record, writtenAt: recordWrittenAt(cm.metadata?.managedFields) };
  } catch {
    // Another version's record: not ours to count; the run will say more.
    return {};
  }
}

/**
 * When a record says its rollout of this template ended cleanly: finished
 * (not stopped, not running), not stopped early, every node ended as a
 * single run's exit 0 would have it (none failed, blocked or left). A record
 * of another template, or one that ended otherwise, is not counted: the
 * cluster is run again, and the run adopts what is there.
 *
 * @example
 * ```ts
 * endedCleanly(undefined, "abc"); // undefined
 * ```
 */
export function endedCleanly(record: RunRecord | undefined, hash: string): number | undefined {
  if (!record || record.state !== "finished" || record.templateHash !== hash) return undefined;
  if (record.stoppedBy || !record.nodes.every(endedWell)) return undefined;
  return record.updatedAt;
}

/**
 * A node the run's exit code does not hold against it (report/summary.ts
 * `exitCode`): a run whose window closed leaves its nodes queued with no
 * `stoppedBy` (exit 4), and one still blocked by its PDB is exit 1.
 */
function endedWell(n: RunRecord["nodes"][number]): boolean {
  return n.phase === "succeeded" || n.phase === "unknown";
}

/**
 * When the cluster's rollout of this template ended cleanly, on this
 * process's clock, or undefined when its record does not say it did
 * ({@linkcode endedCleanly}).
 */
export async function recordedEnd(kube: Kube, key: RolloutKey): Promise<number | undefined> {
  return endOnOurClock(kube, key, await readRecordWritten(kube, key));
}

/**
 * After a run exited 0: its recorded end ({@linkcode recordedEnd}), or why
 * its record does not say it rolled out. A run exits 0 without rolling out
 * when it yields to a live run of the prefix (`--yield-to-live-run`) or
 * waits out an earlier revision's run that stays live (run/owner_guard.ts).
 *
 * @throws {ApiError} when the record cannot be read (the API server is out)
 */
export async function recordSettled(
  kube: Kube,
  key: RolloutKey,
): Promise<{ endedAt: number } | { not: string }> {
  const written = await readRecordWritten(kube, key);
  const end = endOnOurClock(kube, key, written);
  if (end !== undefined) return { endedAt: end };
  return { not: notEnded(written.record, key) };
}

/** Why a record does not say the rollout of this template ended cleanly, in a few words. */
export function notEnded(record: RunRecord | undefined, key: RolloutKey): string {
  const live = "another run of prefix " + key.prefix + " may be live: it yielded to it or " +
    "waited out an earlier one";
  if (!record) return `it has no run record of prefix ${key.prefix} (${live})`;
  if (record.templateHash !== key.templateHash) {
    return `its run record is of template ${record.templateHash}, not ${key.templateHash} (${live})`;
  }
  if (record.state !== "finished") return `its run record says ${record.state} (${live})`;
  return recordCause(record) ?? "its run record does not say every node succeeded";
}

/**
 * The record and, when it says its rollout ended cleanly, when, on this
 * process's clock ({@linkcode recordedEnd}): one read for `fleet status`.
 */
export async function readRecordEnd(
  kube: Kube,
  key: RolloutKey,
): Promise<{ record?: RunRecord; endedAt?: number }> {
  const written = await readRecordWritten(kube, key);
  return { record: written.record, endedAt: endOnOurClock(kube, key, written) };
}

function endOnOurClock(
  kube: Kube,
  key: RolloutKey,
  { record, writtenAt }: { record?: RunRecord; writtenAt?: number },
): number | undefined {
  const end = endedCleanly(record, key.templateHash);
  // The record's updatedAt is its writer's clock: another bastion's after a
  // resume elsewhere, or one without NTP, which would cut the next soak short
  // or stretch it. The API server stamps the write itself (to the second,
  // hence the second added: a soak never ends early), and its Date header
  // says how far its clock is from ours.
  const offset = kube.serverClockOffsetMs;
  if (end === undefined || writtenAt === undefined || offset === undefined) return end;
  return writtenAt + 1000 - offset;
}

/** Why a record's run ended as it did, in a few words. */
export function recordCause(record: RunRecord | undefined): string | undefined {
  if (!record) return undefined;
  return record.stoppedBy ? `stopped: ${record.stoppedBy}` : record.summary;
}

/**
 * The approval's ConfigMap name.
 *
 * @example
 * ```ts
 * approvalName("upgrade", "eu"); // "fleet-approval.upgrade.eu"
 * ```
 */
export function approvalName(prefix: string, stage: string): string {
  // A ConfigMap name is a DNS subdomain: a label value may have capitals and "_".
  return `fleet-approval.${labelValue(prefix).toLowerCase().replace(/[^a-z0-9.-]/g, "-")}.${stage}`;
}

const configMaps = (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps`;

/** Who approved the stage for this rollout in the cluster, or undefined while no one has. */
export async function approvedBy(
  kube: Kube,
  key: RolloutKey,
  stage: string,
): Promise<string | undefined> {
  const cm = await kube.get<{ data?: Record<string, string> }>(
    `${configMaps(key.namespace)}/${approvalName(key.prefix, stage)}`,
  );
  if (cm?.data?.templateHash !== key.templateHash) return undefined;
  return cm.data.approvedBy || "an unnamed user";
}

/**
 * Records the approval of `stage` in the cluster: creates the ConfigMap, or
 * replaces an earlier one (another rollout's).
 *
 * @throws {ApiError} when the cluster refuses it
 */
export async function recordApproval(
  kube: Kube,
  key: RolloutKey,
  stage: string,
  by: string,
  at: number,
): Promise<void> {
  const name = approvalName(key.prefix, stage);
  const body = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: key.namespace },
    data: {
      stage,
      prefix: key.prefix,
      templateHash: key.templateHash,
      approvedBy: by,
      approvedAt: new Date(at).toISOString(),
    },
  };
  try {
    await kube.request("create", "POST", configMaps(key.namespace), body);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 409) throw e;
    // No resourceVersion: an approval replaces whatever approval was there.
    await kube.request("update", "PUT", `${configMaps(key.namespace)}/${name}`, body);
  }
}
