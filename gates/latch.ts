/**
 * The latches a breach sets, so that it outlives the metric's recovery and
 * the process:
 * - `--on-gate-breach pause`: the run's own pause, as a person would set it:
 *   `<P>/paused=true` on the owner Job (with the breach in
 *   `<P>/paused-reason`), or the `--pause-file`; it is lifted the way any
 *   pause is;
 * - `--on-gate-breach exit`: a ConfigMap `<prefix>-gate-breach` in the run's
 *   namespace, read before the next run starts; deleting it clears it. A
 *   ConfigMap, not the owner Job: a Helm hook's next run has a new owner.
 *
 * @module
 */

import { ApiError, type Kube, paths } from "../kube/client.ts";
import type { OwnerRef } from "../job.ts";
import { writeMetadataMaps } from "../kube/metadata_patch.ts";
import { type Breach, describeBreach } from "./state.ts";

/**
 * Whether an API error refuses a latch for good: a 4xx other than a
 * timeout (408) or a throttle (429): RBAC's 403, a webhook's or a
 * ValidatingAdmissionPolicy's denial (400, 403, 422), the owner gone (404).
 * Asking again gets the same, so the run stops instead of holding a pause
 * it could not set.
 */
export function refusesLatch(e: unknown): boolean {
  return e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 408 &&
    e.status !== 429;
}

/** The annotation beside `<P>/paused` that says why the gate set it. */
export function pausedReasonKey(pausedKey: string): string {
  return `${pausedKey}-reason`;
}

/** The owner Job to pause, and the keys of its pause. */
export interface OwnerLatch {
  /** The API client. */
  kube: Kube;
  /** The owner's namespace. */
  namespace: string;
  /** The owner Job. */
  owner: OwnerRef;
  /** `<P>/paused`. */
  pausedKey: string;
}

/**
 * Sets `<P>/paused=true` and the reason on the owner Job, guarded by a test
 * of its UID (a recreated owner is another run's).
 *
 * @throws {ApiError} when the API refuses or cannot be reached
 */
export async function pauseOwner(o: OwnerLatch, b: Breach): Promise<void> {
  await pauseOwnerFor(o, describeBreach(b));
}

/**
 * Sets `<P>/paused=true` and `reason` on the owner Job: the same latch for a
 * stop that is not this run's breach (a fleet's stop-the-line).
 *
 * @throws {ApiError} when the API refuses or cannot be reached
 */
export async function pauseOwnerFor(o: OwnerLatch, reason: string): Promise<void> {
  const path = paths.job(o.namespace, o.owner.name);
  const values = { [o.pausedKey]: "true", [pausedReasonKey(o.pausedKey)]: reason };
  const writes = Object.entries(values).map(([key, value]) => ({
    map: "annotations" as const,
    key,
    value,
  }));
  if (await writeMetadataMaps(o.kube, path, o.owner.uid, writes)) return;
  // A refusal (refusesLatch): the exit latch holds the next run instead.
  throw new ApiError({
    status: 404,
    reason: "NotFound",
    verb: "patch",
    resource: "jobs",
    message:
      `owner job ${o.namespace}/${o.owner.name} (UID ${o.owner.uid}) was deleted or replaced`,
  });
}

/** The command that lifts the pause the gate set on the owner Job. */
export function resumeOwnerCommand(o: Omit<OwnerLatch, "kube">): string {
  return `kubectl annotate job -n ${o.namespace} ${o.owner.name} ${o.pausedKey}- ` +
    `${pausedReasonKey(o.pausedKey)}-`;
}

/** Creates the pause file with the breach in it (its existence is what pauses). */
export async function pauseFile(path: string, b: Breach): Promise<void> {
  await pauseFileFor(path, describeBreach(b));
}

/**
 * Creates the pause file with `reason` in it: the same latch for a stop
 * that is not this run's breach (a fleet's stop-the-line).
 */
export async function pauseFileFor(path: string, reason: string): Promise<void> {
  await Deno.writeTextFile(path, `${reason}\n`);
}

/**
 * The exit latch's ConfigMap name: `<prefix>-gate-breach`, within the 253
 * characters of a name.
 *
 * @example
 * ```ts
 * exitLatchName("gpu-driver"); // "gpu-driver-gate-breach"
 * ```
 */
export function exitLatchName(prefix: string): string {
  return `${prefix.slice(0, 253 - 13)}-gate-breach`;
}

/** The command that clears the exit latch. */
export function clearExitLatchCommand(namespace: string, prefix: string): string {
  return `kubectl delete configmap -n ${namespace} ${exitLatchName(prefix)}`;
}

/**
 * The breach an earlier run latched with `--on-gate-breach exit`, in words;
 * undefined when no latch is set.
 *
 * @throws {ApiError} when the API refuses or cannot be reached
 */
export async function readExitLatch(
  kube: Kube,
  namespace: string,
  prefix: string,
): Promise<string | undefined> {
  const cm = await kube.get<{ data?: Record<string, string> }>(
    `${paths.namespace(namespace)}/configmaps/${exitLatchName(prefix)}`,
  );
  return cm && (cm.data?.breach ?? "a health gate was breached");
}

/**
 * Sets the exit latch: a ConfigMap with the breach and when; one that is
 * already there (a breach latched twice) is kept.
 *
 * @throws {ApiError} when the API refuses or cannot be reached
 */
export async function setExitLatch(
  kube: Kube,
  o: { namespace: string; prefix: string; labels: Record<string, string> },
  b: Breach,
): Promise<void> {
  const body = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: exitLatchName(o.prefix), namespace: o.namespace, labels: o.labels },
    data: { breach: describeBreach(b), at: new Date(b.at).toISOString() },
  };
  try {
    await kube.request("create", "POST", `${paths.namespace(o.namespace)}/configmaps`, body);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 409)) throw e;
  }
}
