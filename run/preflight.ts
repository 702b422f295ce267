/**
 * The checks and look-ups of a run before anything is created: the
 * namespace, the owner Job, the template's TTL, and the API server's own
 * validation of a Job (a dry-run create).
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { type JobTemplate, type OwnerRef, unobservableTtl, UsageError } from "../job.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import type { RunConfig } from "./config.ts";

/** Where the namespace may come from besides the options (a part of `RunContext`). */
export interface NamespaceSources {
  /** The API client, for its kubeconfig context's namespace. */
  kube: Pick<Kube, "contextNamespace">;
  /** Reads an environment variable. */
  env: (name: string) => string | undefined;
  /** Reads a file, or undefined when it cannot. */
  readFile: (path: string) => string | undefined;
}

const SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/**
 * The namespace of the Jobs: the flag, then the context's of an explicitly
 * given `--kubeconfig` or `--context`, then `$POD_NAMESPACE`, then the
 * in-cluster service account's namespace, then the kubeconfig context's, then
 * `default` — the order in which each is the more deliberate choice.
 */
export function resolveNamespace(opts: RunConfig, ctx: NamespaceSources): string {
  // client-go reads $POD_NAMESPACE only for its in-cluster configuration: an
  // explicitly given --kubeconfig or --context brings its context's namespace.
  const explicit = opts.kubeconfig || opts.context ? ctx.kube.contextNamespace : undefined;
  return opts.namespace || explicit || ctx.env("POD_NAMESPACE") ||
    ctx.readFile(SERVICE_ACCOUNT_NAMESPACE)?.trim() || ctx.kube.contextNamespace || "default";
}

/**
 * The owner Job of the run's Jobs: `--owner-job-name`, or the Job that owns
 * the pod `--owner-job-from-pod`; undefined when neither is given.
 *
 * @throws {UsageError} when the named Job or pod does not exist, or the pod has no owner Job
 */
export async function resolveOwner(
  opts: RunConfig,
  kube: Kube,
  ns: string,
): Promise<OwnerRef | undefined> {
  if (opts.ownerJobName) {
    const job = await kube.get<V1Job>(paths.job(ns, opts.ownerJobName));
    if (!job) {
      throw new UsageError(
        `Invalid --owner-job-name ${opts.ownerJobName}: no such Job in namespace ${ns} ` +
          "(the owner must be in the namespace of the per-node Jobs)",
      );
    }
    return { name: opts.ownerJobName, uid: job.metadata!.uid! };
  }
  if (opts.ownerJobFromPod) {
    const pod = await kube.get<V1Pod>(paths.pod(ns, opts.ownerJobFromPod));
    if (!pod) {
      throw new UsageError(
        `Invalid --owner-job-from-pod ${opts.ownerJobFromPod}: no such pod in namespace ${ns}`,
      );
    }
    const ref = pod.metadata?.ownerReferences?.find((r) => r.kind === "Job");
    if (!ref) {
      throw new UsageError(
        `Invalid --owner-job-from-pod ${opts.ownerJobFromPod}: the pod is not owned by a Job; ` +
          "use --owner-job-name or run the dispatcher from a Job",
      );
    }
    return { name: ref.name, uid: ref.uid };
  }
  return undefined;
}

/**
 * Asks the API server to validate one Job without creating it.
 *
 * @throws {UsageError} when the namespace is missing or the server rejects the Job
 */
export async function validateOnServer(kube: Kube, ns: string, job: V1Job): Promise<void> {
  try {
    await kube.request("create", "POST", `${paths.jobs(ns)}?dryRun=All`, job);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.status === 409) return; // valid; a Job of that name exists, which dispatch handles
    if (e.status === 404) {
      throw new UsageError(
        `Invalid namespace ${ns}: it does not exist (kubectl create namespace ${ns})`,
      );
    }
    if (e.status === 400 || e.status === 422) {
      throw new UsageError(
        `Invalid job template: the API server rejected it: ${
          e.message.replace(/^Cannot create jobs: /, "")
        }`,
      );
    }
    throw e;
  }
}

/**
 * Refuses a template whose Jobs would be collected before the run could see
 * them finish.
 *
 * @throws {UsageError} naming the template and why
 */
export function checkTtl(opts: RunConfig, template: JobTemplate, source: string | undefined): void {
  const why = unobservableTtl(template, opts.pollOnly ? opts.pollIntervalSecs : undefined);
  if (why) throw new UsageError(`Invalid job template ${source}: ${why}`);
}
