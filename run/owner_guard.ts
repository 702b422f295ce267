/**
 * Keeps a `helm upgrade` from killing per-node Jobs mid-run, with no
 * finalizer: nothing this tool puts on an object can outlive its dispatcher.
 *
 * The chart names its hook Job per release revision and labels it
 * `<tracking-prefix>/hook: <release full name>`. Helm's
 * `before-hook-creation` deletes only an existing object of the *new* hook's
 * name (helm pkg/action hooks.go `deleteHookByPolicy` builds it from the new
 * manifest), so it deletes no earlier revision's hook Job, and the garbage
 * collector never takes that hook's per-node Jobs (it deletes dependents only
 * once their owner is gone). Instead of Helm, the dispatcher:
 *
 * - at its start, waits while an earlier revision's run is live (its hook Job
 *   not finished: the Job controller runs, or will re-run, its dispatcher),
 *   so that two runs never dispatch at once; a dead run (its Job `Failed` on
 *   a deadline or the backoff limit) is never waited for;
 * - at its end, deletes (background) the earlier revisions' hook Jobs that
 *   are over and own no active per-node Job: the retention
 *   `before-hook-creation` gave a fixed name (the last run's hook Job, its
 *   per-node Jobs and their logs, stay until the next run);
 * - for one release, drops the finalizer `<tracking-prefix>/per-node-jobs`
 *   that earlier versions put on the owner, once that owner's Jobs finished;
 * - at its start, makes its hook Job the owner of the revision's template
 *   ConfigMap the chart names on it (`<tracking-prefix>/template-configmap`),
 *   so the garbage collector deletes the template with the Job: one per
 *   revision, kept after its run, would grow etcd by a template per upgrade.
 *
 * Decisions are pure functions; {@linkcode waitForEarlierRuns} and
 * {@linkcode endOfRun} do the I/O.
 *
 * @module
 */

import type { V1Job } from "@kubernetes/client-node";
import { interpretStatus, jobFinished, type OwnerRef, type TrackingKeys } from "../job.ts";
import { ApiError, isRetryable, type Kube, paths } from "../kube/client.ts";
import { pointer, writeMetadataMaps } from "../kube/metadata_patch.ts";
import { SYSTEM_CLOCK } from "../base/clock.ts";

/** What the guard logs. */
export interface GuardLog {
  /** An informational line. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** A warning. */
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * The JSON patch that removes the finalizer of earlier versions from
 * `owner`, or undefined when it has none. It tests the UID and the index, so
 * a replaced owner or a changed list is never touched.
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
 * Whether a Job still has (or may still get) a running pod: until `Complete`
 * or `Failed`, which the Job controller sets only once every pod is gone
 * (`SuccessCriteriaMet` and `FailureTarget` come earlier).
 */
export function isJobActive(job: Pick<V1Job, "status">): boolean {
  return !jobFinished(job);
}

/**
 * Whether the run of an owner Job is live, i.e. a dispatcher runs or will run
 * in it: the Job is not finished, and, once it is being deleted, it still has
 * a pod (the Job controller creates no new pod for a Job being deleted, so a
 * deleted Job without pods never runs a dispatcher again). A terminating pod
 * counts: `status.active` leaves out pods with a `deletionTimestamp`, and the
 * collector marks the dispatcher's pod so first, while it still runs its
 * SIGTERM grace period (`status.terminating`, JobPodReplacementPolicy).
 */
export function isLiveOwner(owner: Pick<V1Job, "metadata" | "status">): boolean {
  if (!isJobActive(owner)) return false;
  const pods = (owner.status?.active ?? 0) + (owner.status?.terminating ?? 0);
  return owner.metadata?.deletionTimestamp === undefined || pods > 0;
}

/**
 * Whether a dispatcher has run in an owner Job: a pod of it is or was ready
 * (running), ended, or is terminating, or a run wrote its progress on it. A
 * hook Job whose pod never started (a wrong image tag in ImagePullBackOff, a
 * pod the namespace's Pod Security refuses, a missing ConfigMap) is not
 * finished and, without `activeDeadlineSeconds`, never will be: waiting for
 * it would block every later `helm upgrade` until someone deletes it, which
 * Helm's `before-hook-creation` did by itself when the hook name was fixed.
 */
export function ranDispatcher(owner: Pick<V1Job, "metadata" | "status">, progressKey: string) {
  const s = owner.status ?? {};
  const pods = (s.ready ?? 0) + (s.terminating ?? 0) + (s.failed ?? 0) + (s.succeeded ?? 0);
  return pods > 0 || owner.metadata?.annotations?.[progressKey] !== undefined;
}

/**
 * Whether owner `a` was created before owner `b`: by creationTimestamp, then
 * by UID, a total order, so that two runs never wait for each other.
 */
export function isEarlier(a: V1Job, b: V1Job): boolean {
  const at = (j: V1Job) => new Date(j.metadata?.creationTimestamp ?? 0).getTime();
  if (at(a) !== at(b)) return at(a) < at(b);
  return (a.metadata?.uid ?? "") < (b.metadata?.uid ?? "");
}

/** What {@linkcode releaseDecision} decides for one owner carrying the old finalizer. */
export type Release = { release: true } | { release: false; why: string };

/**
 * Whether this run may drop the old finalizer from an owner: once none of
 * the owner's per-node Jobs is active and its own run is over (or it is this
 * run's owner).
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
 * Whether the end-of-run sweep deletes an earlier owner: its run is over, or
 * no dispatcher ever ran in it (its pod, should it start, would find a later
 * owner and create nothing), and none of its per-node Jobs is active, so the
 * garbage collector takes only finished Jobs with it. Never this run's
 * owner, never one being deleted.
 */
export function sweepable(
  owner: V1Job,
  ours: string,
  active: Map<string, number>,
  progressKey: string,
): boolean {
  const uid = owner.metadata?.uid ?? "";
  if (uid === ours || owner.metadata?.deletionTimestamp) return false;
  const over = !isLiveOwner(owner) || !ranDispatcher(owner, progressKey);
  return over && !(active.get(uid) ?? 0);
}

/**
 * How many per-node Jobs have their outcome decided (`SuccessCriteriaMet`,
 * `FailureTarget`) but not yet `Complete` / `Failed`: the Job controller is
 * still waiting for their pods to go. The run counts such a node as finished,
 * so its end can come a moment before the terminal condition; the end of the
 * run waits that moment out, so that a `hook-succeeded` deletion of the owner
 * right after the exit has the collector take only finished Jobs.
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
  /** The tracking keys: `hook` groups a release's hook Jobs, `guard` is the old finalizer. */
  keys: TrackingKeys;
  /** The run's logger. */
  log: GuardLog;
  /** Stops the wait for an earlier run (SIGTERM). */
  signal?: AbortSignal;
  /** How long the end waits for decided Jobs to turn Complete / Failed; 30 s unless given. */
  settleMs?: number;
  /** How often the waits read again; 1 s (settle) and 5 s (earlier run) unless given. */
  pollMs?: number;
}

/**
 * This run's owner and the earlier owners of its group: the Jobs labelled
 * `<prefix>/hook` with the owner's value, plus the Job named by that value,
 * the fixed hook name of earlier chart versions, if it is a Helm hook.
 * Empty when the owner carries no such label (not the chart's hook).
 */
export async function earlierOwners(
  opts: OwnerGuardOptions,
): Promise<{ self?: V1Job; earlier: V1Job[]; later: V1Job[] }> {
  const { kube, namespace, owner, keys } = opts;
  const self = await kube.get<V1Job>(paths.job(namespace, owner.name));
  const group = self?.metadata?.labels?.[keys.hook];
  if (!self || self.metadata?.uid !== owner.uid || !group) return { self, earlier: [], later: [] };
  const { items } = await kube.list<V1Job>(
    paths.jobs(namespace),
    { labelSelector: `${keys.hook}=${group}` },
    500,
  );
  const legacy = group === owner.name
    ? undefined
    : await kube.get<V1Job>(paths.job(namespace, group));
  if (
    legacy?.metadata?.annotations?.["helm.sh/hook"] &&
    !items.some((j) => j.metadata?.uid === legacy.metadata?.uid)
  ) {
    items.push(legacy);
  }
  const others = items.filter((j) => j.metadata?.uid !== owner.uid);
  return {
    self,
    earlier: others.filter((j) => isEarlier(j, self)),
    later: others.filter((j) => !isEarlier(j, self)),
  };
}

/**
 * Waits while the run of an earlier owner of the group is live (the
 * rollout of an earlier `helm upgrade`, still going after Helm's `--timeout`
 * gave up on it): two dispatchers at once would race for the same nodes.
 * An earlier owner in which no dispatcher ever ran is not waited for
 * ({@linkcode ranDispatcher}); should its pod start after all, it finds this
 * later owner and creates nothing.
 *
 * @returns false when the signal stopped the wait, or when a later owner
 * supersedes this run before it did anything (its Job's first pod)
 */
export async function waitForEarlierRuns(opts: OwnerGuardOptions): Promise<boolean> {
  const { log, signal, pollMs = 5000 } = opts;
  let said = "";
  for (;;) {
    if (signal?.aborted) return false;
    const owners = await readOwners(opts, said === "outage");
    if (!owners) {
      said = "outage";
      await SYSTEM_CLOCK.sleep(pollMs, signal);
      continue;
    }
    const { self, earlier, later } = owners;
    if (later.length && self?.metadata?.annotations?.[opts.keys.progress] === undefined) {
      // No pod of this owner began its rollout (markBegun), and a later
      // revision's hook Job was made meanwhile: that run does the rollout. A
      // pod of an owner that began resumes instead (an evicted pod's retry:
      // the podFailurePolicy's Ignore counts no failure): it may have
      // cordoned nodes it must finish.
      log.info(
        `superseded by later hook job ${later.map((j) => j.metadata?.name).join(", ")}: ` +
          "creating nothing",
        { event: "superseded" },
      );
      return false;
    }
    const live = earlier.filter((j) => isLiveOwner(j) && ranDispatcher(j, opts.keys.progress));
    if (!live.length) {
      return self?.metadata?.labels?.[opts.keys.hook] ? await markBegun(opts) : true;
    }
    const names = live.map((j) => j.metadata!.name!).join(", ");
    if (names !== said) {
      log.info(
        `waiting for the run of earlier hook job ${names} to end (its Job is not finished; ` +
          `stop it with: kubectl delete job ${names} -n ${opts.namespace})`,
        { event: "waiting", for: names },
      );
      said = names;
    }
    await SYSTEM_CLOCK.sleep(pollMs, signal);
  }
}

/**
 * Marks this run's owner as begun, before anything is cordoned or created:
 * its progress annotation, which the run's progress then replaces. A later
 * revision's run waits for a begun owner, and a retry pod of it resumes
 * rather than yield. Without the right to patch the owner the run goes on
 * unmarked (said); an outage is waited out.
 *
 * @returns false when the signal stopped it
 */
async function markBegun(opts: OwnerGuardOptions): Promise<boolean> {
  const { kube, namespace, owner, keys, log } = opts;
  const path = paths.job(namespace, owner.name);
  const value = `began ${new Date().toISOString()}`;
  for (;;) {
    if (opts.signal?.aborted) return false;
    try {
      const writes = [{ map: "annotations" as const, key: keys.progress, value }];
      if (!(await writeMetadataMaps(kube, path, owner.uid, writes))) {
        log.warn(`Cannot mark owner job ${owner.name} as begun: it was deleted or replaced`);
      }
      return true;
    } catch (e) {
      if (opts.signal?.aborted) return false;
      if (!isRetryable(e)) {
        log.warn(`Cannot mark owner job ${owner.name} as begun: ${(e as Error).message}`);
        return true;
      }
      await SYSTEM_CLOCK.sleep(opts.pollMs ?? 5000, opts.signal);
    }
  }
}

/**
 * The JSON patch that makes `owner` the only owner of its template
 * ConfigMap, tested to carry the release's hook label `group`, so no
 * ConfigMap outside the release is taken. The chart creates it (a Helm hook)
 * without owners. No `blockOwnerDeletion`: that asks for the right to delete
 * the owner's finalizers, and nothing needs to wait for the ConfigMap.
 */
export function tiePatch(owner: OwnerRef, hookKey: string, group: string): unknown[] {
  return [
    { op: "test", path: `/metadata/labels/${pointer(hookKey)}`, value: group },
    {
      op: "add",
      path: "/metadata/ownerReferences",
      value: [{ apiVersion: "batch/v1", kind: "Job", name: owner.name, uid: owner.uid }],
    },
  ];
}

/**
 * Makes this run's owner the owner of the template ConfigMap its annotation
 * names, so the collector deletes it with the Job (the sweep of a later run,
 * `hook-succeeded`, a `kubectl delete job`). Called as soon as the owner is
 * known, before any early end (nothing to do, the window closed, a refused
 * gate, superseded): every one of those hook Jobs is swept too. Once per
 * owner: a retry pod of a begun owner skips it (its first pod did it, and
 * the chart's Role may by now name a later revision's ConfigMap). A refusal
 * is said with the command that deletes the ConfigMap; the run goes on.
 */
export async function tieTemplate(
  opts: Pick<OwnerGuardOptions, "kube" | "namespace" | "owner" | "keys" | "log">,
): Promise<void> {
  const { kube, namespace, owner, keys, log } = opts;
  let name: string | undefined;
  try {
    const self = await kube.get<V1Job>(paths.job(namespace, owner.name));
    name = self?.metadata?.annotations?.[keys.templateConfigMap];
    const group = self?.metadata?.labels?.[keys.hook];
    if (self?.metadata?.uid !== owner.uid || !name || !group) return;
    if (self.metadata?.annotations?.[keys.progress] !== undefined) return;
    const path = `${paths.namespace(namespace)}/configmaps/${encodeURIComponent(name)}`;
    await kube.request("patch", "PATCH", path, tiePatch(owner, keys.hook, group));
  } catch (e) {
    // 404: the ConfigMap is gone already, nothing to keep. Unread (the
    // owner's GET failed): whether it names one is unknown, and an owner
    // outside the chart names none; the run's next request says the outage.
    if (!name || e instanceof ApiError && e.status === 404) return;
    log.warn(
      `Cannot make hook job ${owner.name} the owner of its template ConfigMap ${name} ` +
        `(${(e as Error).message}): it stays when the Job goes; once its run is over, ` +
        `delete it with: kubectl delete configmap ${name} -n ${namespace}`,
    );
  }
}

/**
 * {@linkcode earlierOwners}, or undefined while the API server is out (said
 * once): the wait for an earlier rollout can last hours, and an outage
 * meanwhile pauses it, as it pauses a rollout, rather than end the hook with
 * exit 3, which its podFailurePolicy makes final.
 */
async function readOwners(opts: OwnerGuardOptions, told: boolean) {
  try {
    return await earlierOwners(opts);
  } catch (e) {
    if (opts.signal?.aborted || !isRetryable(e)) throw e;
    if (!told) {
      opts.log.warn(
        `API server out while waiting for earlier hook jobs (${(e as Error).message}); retrying`,
      );
    }
    return undefined;
  }
}

/**
 * The per-node Jobs of this tracking prefix (what the decisions read), read
 * again while some have their outcome decided but their pods not yet gone
 * (at most `settleMs`).
 */
async function settledJobs(opts: OwnerGuardOptions): Promise<V1Job[]> {
  const { kube, namespace, keys, log, settleMs = 30_000, pollMs = 1000 } = opts;
  const deadline = Date.now() + settleMs;
  for (let said = false;;) {
    // Only what the decisions read: at 10,000 nodes the whole Jobs would
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
    // Stopped (SIGTERM): the kubelet's grace period is short; no waiting.
    if (!settling || Date.now() >= deadline || opts.signal?.aborted) return items;
    if (!said) {
      log.info(
        `waiting for ${settling} per-node Jobs to turn Complete or Failed (their pods are ending)`,
      );
      said = true;
    }
    await SYSTEM_CLOCK.sleep(pollMs, opts.signal);
  }
}

/** Drops the old finalizer from every owner that carries it and whose Jobs finished. */
async function releaseOld(opts: OwnerGuardOptions, active: Map<string, number>): Promise<void> {
  const { kube, namespace, keys, log, owner } = opts;
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
      log.info(
        `kept finalizer ${keys.guard} of an earlier version on owner job ${name}: ${decision.why}`,
      );
      continue;
    }
    try {
      await kube.request("patch", "PATCH", paths.job(namespace, name), ops);
      log.info(`removed finalizer ${keys.guard} of an earlier version from owner job ${name}`);
    } catch (e) {
      // 404: gone; 422: the finalizers changed since the list: the next run sees them.
      if (!(e instanceof ApiError && (e.status === 404 || e.status === 422))) throw e;
    }
  }
}

/** Deletes (background) the earlier owners of the group that {@linkcode sweepable} allows. */
async function sweep(opts: OwnerGuardOptions, active: Map<string, number>): Promise<void> {
  const { kube, namespace, log, owner } = opts;
  for (const job of (await earlierOwners(opts)).earlier) {
    if (!sweepable(job, owner.uid, active, opts.keys.progress)) continue;
    const name = job.metadata!.name!;
    try {
      // Background, as Helm deletes hooks: the collector then deletes its
      // per-node Jobs, all finished (sweepable), with their pods.
      await kube.request("delete", "DELETE", paths.job(namespace, name), {
        apiVersion: "v1",
        kind: "DeleteOptions",
        propagationPolicy: "Background",
        preconditions: { uid: job.metadata!.uid },
      });
      log.info(
        `deleted earlier hook job ${name}: its run is over, none of its per-node Jobs active`,
      );
    } catch (e) {
      // 404: gone; 409: replaced by another Job of that name.
      if (!(e instanceof ApiError && (e.status === 404 || e.status === 409))) throw e;
    }
  }
}

/**
 * The end of a run with an owner: waits (at most `settleMs`) for decided
 * per-node Jobs to turn Complete / Failed, drops the old finalizer where it
 * may, and deletes earlier hook Jobs whose runs are over. Never throws: what
 * is left is for the next run, and said.
 */
export async function endOfRun(opts: OwnerGuardOptions): Promise<void> {
  try {
    const active = activeByOwner(await settledJobs(opts));
    await releaseOld(opts, active);
    await sweep(opts, active);
  } catch (e) {
    opts.log.warn(
      `Cannot clean up earlier owner jobs of ${opts.owner.name}: ${(e as Error).message}; ` +
        "the next run tries again",
    );
  }
}
