/**
 * The fan-out's {@linkcode JobApi} over the API layer, scoped to one
 * namespace and owner label, and what those Jobs tell before a run starts.
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { interpretStatus, type OwnerRef } from "../job.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import type { JobApi } from "../engine/fanout_types.ts";

/** The Job operations of the fan-out, over the API layer. */
export function jobApiFor(kube: Kube, namespace: string, labelSelector: string): JobApi {
  const query = { labelSelector };
  return {
    listJobs: (signal) => kube.list<V1Job>(paths.jobs(namespace), query, 500, undefined, signal),
    watchJobs: (rv, signal) => kube.watch<V1Job>(paths.jobs(namespace), query, rv, signal),
    getJob: (name) => kube.get<V1Job>(paths.job(namespace, name)),
    createJob: (job) => kube.request<V1Job>("create", "POST", paths.jobs(namespace), job),
    listPods: async (jobName) =>
      (await kube.list<V1Pod>(
        paths.pods(namespace),
        { labelSelector: `batch.kubernetes.io/job-name=${jobName}` },
        50,
      )).items,
    deleteJob: async (name, uid) => {
      try {
        // Foreground: the Job object stays until its pods are gone, so its
        // disappearance from the watch means the node is free again.
        await kube.request("delete", "DELETE", paths.job(namespace, name), {
          apiVersion: "v1",
          kind: "DeleteOptions",
          propagationPolicy: "Foreground",
          preconditions: { uid },
        });
      } catch (e) {
        // 404: already gone; 409: the precondition failed, another Job of that
        // name replaced it, which the watch will show.
        if (!(e instanceof ApiError && (e.status === 404 || e.status === 409))) throw e;
      }
    },
  };
}

/**
 * Another owner's run that is still going, or undefined: a Job of this
 * prefix owned by another owner Job that is itself still active.
 *
 * @param api the Jobs of this prefix
 * @param owner this run's owner, whose own Jobs do not count
 */
export async function liveRun(
  kube: Kube,
  ns: string,
  api: JobApi,
  owner: OwnerRef,
): Promise<OwnerRef | undefined> {
  const { items } = await api.listJobs();
  const others = new Map<string, string>();
  for (const job of items) {
    for (const ref of job.metadata?.ownerReferences ?? []) {
      if (ref.kind === "Job" && ref.uid !== owner.uid) others.set(ref.uid, ref.name);
    }
  }
  for (const [uid, name] of others) {
    const job = await kube.get<V1Job>(paths.job(ns, name));
    if (job?.metadata?.uid === uid && interpretStatus(job).phase === "active") return { name, uid };
  }
  return undefined;
}
