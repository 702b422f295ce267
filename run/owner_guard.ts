/**
 * Keeps a `helm upgrade` from killing per-node Jobs mid-run.
 *
 * Helm's hook-delete-policy `before-hook-creation` deletes the previous hook
 * Job (the owner of the per-node Jobs) with background propagation and waits
 * for it to be gone. Without more, the garbage collector would then delete
 * every per-node Job whose ownerReference names it, running or not. So while
 * a run has per-node Jobs active, the owner carries the finalizer
 * `<tracking-prefix>/per-node-jobs`: the owner stays (terminating), the
 * garbage collector leaves its dependents alone while it exists, the Job
 * controller creates no new pod for it but leaves the dispatcher's own pod
 * running, and Helm waits until the run ends and drops the finalizer.
 *
 * The owner is also labelled with the same key, so that a later run finds
 * an earlier owner whose run was stopped with Jobs in flight (SIGTERM) and
 * drops its finalizer once none of its per-node Jobs is active any more.
 *
 * Decisions are pure functions; {@linkcode holdOwner} and
 * {@linkcode OwnerGuard.release} do the I/O.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { interpretStatus, type OwnerRef, type TrackingKeys } from "../job.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import { pointer } from "../nodes/lifecycle.ts";

/** What the guard logs. */
export interface GuardLog {
  /** An informational line. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** A warning. */
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * The JSON patch that adds the finalizer and the label to `owner`, or
 * undefined when it carries both. It tests the UID (a replaced owner of the
 * same name is never touched) and the resourceVersion (an `add` of
 * `/metadata/finalizers` would otherwise overwrite a finalizer written since
 * the read).
 *
 * @example
 * ```ts
 * holdPatch({ metadata: { uid: "u", resourceVersion: "7" } }, "job-dispatcher/per-node-jobs");
 * // [test uid, test resourceVersion, add /metadata/finalizers, add /metadata/labels]
 * ```
 */
export function holdPatch(owner: V1Job, key: string): unknown[] | undefined {
  const meta = owner.metadata ?? {};
  const finalizers = meta.finalizers ?? [];
  const labels = meta.labels;
  const ops: unknown[] = [];
  if (!finalizers.includes(key)) {
    ops.push(
      meta.finalizers
        ? { op: "add", path: "/metadata/finalizers/-", value: key }
        : { op: "add", path: "/metadata/finalizers", value: [key] },
    );
  }
  if (labels?.[key] !== "true") {
    ops.push(
      labels
        ? { op: "add", path: `/metadata/labels/${pointer(key)}`, value: "true" }
        : { op: "add", path: "/metadata/labels", value: { [key]: "true" } },
    );
  }
  if (!ops.length) return undefined;
  return [
    { op: "test", path: "/metadata/uid", value: meta.uid },
    { op: "test", path: "/metadata/resourceVersion", value: meta.resourceVersion },
    ...ops,
  ];
}

/**
 * The JSON patch that removes the finalizer from `owner`, or undefined when
 * it has none. The label stays: it is harmless, and the owner goes soon.
 */
export function releasePatch(owner: V1Job, key: string): unknown[] | undefined {
  const at = owner.metadata?.finalizers?.indexOf(key) ?? -1;
  if (at < 0) return undefined;
  return [
    { op: "test", path: "/metadata/uid", value: owner.metadata?.uid },
    { op: "test", path: `/metadata/finalizers/${at}`, value: key },
    { op: "remove", path: `/metadata/finalizers/${at}` },
  ];
}

/**
 * Whether a per-node Job still has (or may still get) a running pod: until
 * `Complete` or `Failed`, which the Job controller sets only once every pod
 * is gone (`SuccessCriteriaMet` and `FailureTarget` come earlier).
 */
export function isJobActive(job: Pick<V1Job, "status">): boolean {
  const conds = job.status?.conditions ?? [];
  return !conds.some((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
}

/** What {@linkcode releaseDecision} decides for one guarded owner. */
export type Release = { release: true } | { release: false; why: string };

/**
 * Whether this run may drop the finalizer of a guarded owner.
 *
 * - Its own owner: once none of the owner's per-node Jobs is active.
 * - An earlier owner: also only once its own run is over, i.e. the owner Job
 *   finished or is being deleted; a live owner's run drops its own.
 *
 * @param active how many active per-node Jobs each owner UID has
 */
export function releaseDecision(
  owner: V1Job,
  ours: string | undefined,
  active: Map<string, number>,
): Release {
  const uid = owner.metadata?.uid ?? "";
  const running = active.get(uid) ?? 0;
  if (running) return { release: false, why: `${running} of its per-node Jobs are still active` };
  if (uid === ours) return { release: true };
  const over = owner.metadata?.deletionTimestamp !== undefined || !isJobActive(owner);
  return over ? { release: true } : { release: false, why: "its own run is still live" };
}

/**
 * How many per-node Jobs have their outcome decided (`SuccessCriteriaMet`,
 * `FailureTarget`) but not yet `Complete` / `Failed`: the Job controller is
 * still waiting for their pods to go. The run counts such a node as finished,
 * so its end can come a moment before the terminal condition; the guard waits
 * that moment out rather than keep the finalizer for a later run.
 */
export function settlingJobs(jobs: Pick<V1Job, "status">[]): number {
  return jobs.filter((job) => isJobActive(job) && interpretStatus(job).phase !== "active").length;
}

/** Counts the active per-node Jobs by owner UID. */
export function activeByOwner(jobs: V1Job[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const job of jobs) {
    if (!isJobActive(job)) continue;
    for (const ref of job.metadata?.ownerReferences ?? []) {
      if (ref.kind === "Job") counts.set(ref.uid, (counts.get(ref.uid) ?? 0) + 1);
    }
  }
  return counts;
}

/** What the guard needs to do its I/O. */
export interface OwnerGuardOptions {
  /** The API client. */
  kube: Kube;
  /** The namespace of the owner and the per-node Jobs. */
  namespace: string;
  /** The run's owner. */
  owner: OwnerRef;
  /** The tracking keys: `guard` names the finalizer and label, `owner` finds the per-node Jobs. */
  keys: TrackingKeys;
  /** The run's logger. */
  log: GuardLog;
  /** How long release waits for decided Jobs to turn Complete / Failed; 30 s unless given. */
  settleMs?: number;
  /** How often release reads them again meanwhile; 1 s unless given. */
  pollMs?: number;
}

/** The finalizer on a run's owner, held until {@linkcode OwnerGuard.release}. */
export class OwnerGuard {
  #o: OwnerGuardOptions;

  /** Use {@linkcode holdOwner}. */
  constructor(opts: OwnerGuardOptions) {
    this.#o = opts;
  }

  /**
   * The per-node Jobs of this tracking prefix, read again while some have
   * their outcome decided but their pods not yet gone (at most `settleMs`).
   */
  async #settledJobs(): Promise<V1Job[]> {
    const { kube, namespace, keys, log, settleMs = 30_000, pollMs = 1000 } = this.#o;
    const deadline = Date.now() + settleMs;
    for (let said = false;;) {
      // Only what the decision reads: at 10,000 nodes the whole Jobs would
      // weigh tens of MB at the very end of the run.
      const { items } = await kube.list<V1Job, V1Job>(
        paths.jobs(namespace),
        { labelSelector: keys.owner },
        500,
        (job) => ({
          metadata: { ownerReferences: job.metadata?.ownerReferences },
          status: { conditions: job.status?.conditions },
        }),
      );
      const settling = settlingJobs(items);
      if (!settling || Date.now() >= deadline) return items;
      if (!said) {
        log.info(
          `waiting for ${settling} per-node Jobs to turn Complete or Failed (their pods are ` +
            `ending) before removing finalizer ${keys.guard}`,
        );
        said = true;
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /**
   * Drops the finalizer from the run's owner, and from earlier owners of
   * this tracking prefix, whose per-node Jobs are all finished; keeps it on
   * an owner with Jobs still active (a stopped run), for a later run to drop.
   * Never throws: a finalizer left behind is named with the command that
   * removes it.
   */
  async release(): Promise<void> {
    const { kube, namespace, keys, log, owner } = this.#o;
    try {
      const active = activeByOwner(await this.#settledJobs());
      const guarded = await kube.list<V1Job>(
        paths.jobs(namespace),
        { labelSelector: `${keys.guard}=true` },
        500,
      );
      for (const job of guarded.items) {
        const name = job.metadata!.name!;
        const ops = releasePatch(job, keys.guard);
        if (!ops) continue;
        const decision = releaseDecision(job, owner.uid, active);
        if (!decision.release) {
          log.info(`kept finalizer ${keys.guard} on owner job ${name}: ${decision.why}`);
          continue;
        }
        try {
          await kube.request("patch", "PATCH", paths.job(namespace, name), ops);
          log.info(`removed finalizer ${keys.guard} from owner job ${name}`);
        } catch (e) {
          // 404: gone; 422: the finalizers changed since the list: the next run sees them.
          if (!(e instanceof ApiError && (e.status === 404 || e.status === 422))) throw e;
        }
      }
    } catch (e) {
      log.warn(
        `Cannot remove finalizer ${keys.guard} from owner job ${owner.name}: ` +
          `${(e as Error).message}; a later run removes it, or, once its per-node Jobs ` +
          `have finished, remove it from metadata.finalizers with: ` +
          `kubectl edit job ${owner.name} -n ${namespace}`,
      );
    }
  }
}

/**
 * Puts the finalizer (and the label that finds it again) on the run's owner
 * before the first per-node Job is created. An owner already being deleted
 * can take no new finalizer: its per-node Jobs are then not protected, which
 * is said.
 *
 * @returns the guard, whose `release` the run calls when it ends
 */
export async function holdOwner(opts: OwnerGuardOptions): Promise<OwnerGuard> {
  const { kube, namespace, owner, keys, log } = opts;
  const path = paths.job(namespace, owner.name);
  const unprotected = (why: string) =>
    log.warn(
      `owner job ${owner.name} ${why}: its per-node Jobs are garbage-collected as soon as ` +
        "it is gone, running or not (a helm upgrade now would kill them)",
    );
  for (let attempt = 0;; attempt++) {
    const job = await kube.get<V1Job>(path);
    // Gone or replaced: the ownerReferences of the Jobs still to be created
    // name a UID that no longer exists, which creation reports.
    if (!job || job.metadata?.uid !== owner.uid) break;
    // Held already (a retried hook pod): nothing to add, even while deleted.
    if (job.metadata?.finalizers?.includes(keys.guard)) break;
    if (job.metadata?.deletionTimestamp) {
      unprotected("is already being deleted, so it takes no new finalizer");
      break;
    }
    const ops = holdPatch(job, keys.guard);
    if (!ops) break;
    try {
      await kube.request("patch", "PATCH", path, ops);
      log.info(`added finalizer ${keys.guard} to owner job ${owner.name}`);
      break;
    } catch (e) {
      // 422: a test failed, i.e. the owner changed since the read: read again.
      if (!(e instanceof ApiError && e.status === 422)) throw e;
      if (attempt === 4) {
        unprotected("changed under every attempt to add a finalizer");
        break;
      }
    }
  }
  return new OwnerGuard(opts);
}
