/**
 * The checks and look-ups of a run before anything is created: the
 * namespace, the owner Job, the template's TTL, the API server's own
 * validation of a Job (a dry-run create), and the permissions the flags need
 * (SelfSubjectAccessReviews).
 *
 * @module
 */

import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { type JobTemplate, type OwnerRef, unobservableTtl, UsageError } from "../job.ts";
import { ApiError, type Kube, paths } from "../kube/client.ts";
import type { RunConfig } from "./config.ts";
import { exitLatchName } from "../gates/latch.ts";
import { recordName } from "../report/record.ts";
import { serviceProxyOf, viaApiServer } from "../gates/prometheus.ts";

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
export function resolveNamespace(
  opts: Pick<RunConfig, "namespace" | "kubeconfig" | "context">,
  ctx: NamespaceSources,
): string {
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

/**
 * A permission the run's flags need that the API server does not grant: the
 * run stops before anything is touched (exit 3), naming the verb, the
 * resource and the README's RBAC rule that grants it.
 */
export class PermissionError extends Error {
  /** @param message the missing permissions, the flags that need them and the rules that grant them */
  constructor(message: string) {
    super(message);
    this.name = "PermissionError";
  }
}

/**
 * Why the cluster refused us, with what to do about it, on one line.
 *
 * @example
 * ```ts
 * describeApiError(new ApiError({ status: 401, reason: "Unauthorized", verb: "list",
 *   resource: "nodes", message: "Unauthorized" }));
 * // "Cannot list nodes: Unauthorized (unauthorised: the kubeconfig's credentials were refused; refresh them)"
 * ```
 */
export function describeApiError(e: ApiError): string {
  if (e.status === 401) {
    return `${e.message} (unauthorised: the kubeconfig's credentials were refused; refresh them)`;
  }
  if (e.status === 403) {
    // Said before the pre-flight can name the rule (the plan lists nodes
    // first): the command that prints every rule of the flags is the fix.
    return `${e.message} (forbidden: grant the verb "${e.verb}" on "${e.resource}" to this user; ` +
      "job-dispatcher rbac [the run's flags] prints every rule a run needs, rbac --viewer " +
      "those of status; docs/security.md)";
  }
  if (e.reason === "Untrusted") {
    return `${e.message} (check certificate-authority(-data) of the kubeconfig's cluster, ` +
      "the server address, and an https proxy-url's certificate)";
  }
  if (e.status === 0) return `${e.message} (is the API server up and --context right?)`;
  return e.message;
}

/** One permission a flag needs, as a SelfSubjectAccessReview asks it. */
export interface PermissionNeed {
  /** The Kubernetes verb. */
  verb: string;
  /** The API group; "" is the core group. */
  group: string;
  /** The resource, e.g. `pods`. */
  resource: string;
  /** The subresource, e.g. `eviction`. */
  subresource?: string;
  /** The namespace it is needed in; undefined: all namespaces (cluster-wide). */
  namespace?: string;
  /** The one object it is needed on (a Role may grant it by `resourceNames`). */
  name?: string;
  /** The flags that need it (of an optional need: what uses it). */
  flags: string[];
  /** What else only uses a required need (it would be optional for them alone). */
  uses?: string[];
  /** The README's RBAC rule that grants it. */
  grant: string;
  /**
   * Only recording or speed hangs on it (events, the run record, a watch):
   * the pre-flight warns instead of stopping the run. @default false
   */
  optional?: boolean;
}

const DRAIN_ROLE = "ClusterRole job-dispatcher-drain (chart: rbac.drain=true)";
const NODES_ROLE = "ClusterRole job-dispatcher-nodes";
const RUN_ROLE = "Role job-dispatcher";
const PROXY_ROLE = "a Role in Prometheus's namespace (job-dispatcher rbac prints it)";

/**
 * The permissions the flags need to work at all, each once with every flag
 * that needs it. Cluster-wide: a drain lists and evicts the pods of every
 * namespace. Rules the README calls optional (events, node marks,
 * `nodes/proxy` for `--kubelet-timeout-warn-secs`) cost only a warning and
 * are not needed here.
 *
 * @example
 * ```ts
 * permissionNeeds({ maintenance: { cordon: true, blockingPodSelectors: [] } } as unknown as RunConfig)
 *   .map((n) => `${n.verb} ${n.resource}`); // ["patch nodes"]
 * ```
 */
export function permissionNeeds(
  opts: RunConfig,
  run?: RunShape,
): PermissionNeed[] {
  const m = opts.maintenance;
  const needs: PermissionNeed[] = [];
  const need = needAdder(needs);
  const pods = { group: "", resource: "pods", grant: DRAIN_ROLE };
  if (m.drain) {
    need({ verb: "list", ...pods }, "--drain");
    if (m.drain.disableEviction) need({ verb: "delete", ...pods }, "--disable-eviction");
    else need({ verb: "create", ...pods, subresource: "eviction" }, "--drain");
  }
  if (m.blockingPodSelectors.length) need({ verb: "list", ...pods }, "--blocking-pod-selector");
  // Found out before the first Job, not as every node failing its verification.
  if (opts.verify?.podSelector) need({ verb: "list", ...pods }, "--verify-pod-selector");
  const nodes = { verb: "patch", group: "", resource: "nodes", grant: NODES_ROLE };
  if (m.cordon) need(nodes, m.drain ? "--drain" : "--cordon");
  const labels = opts.nodeLabels;
  if (labels && (labels.value !== undefined || labels.claim || labels.remove)) {
    need(nodes, "--node-label-key");
  }
  // The cleanup run demotes, then unlabels each node (run.ts runCleanup's
  // `remove: true`), whatever the main run's label flags.
  if (opts.cleanupJobTemplate !== undefined) need(nodes, "--cleanup-job-template");
  const marked = run && markedWork(opts, run);
  if (marked) need(nodes, `ttlSecondsAfterFinished with ${marked} (the success mark)`);
  if (opts.gate && run) gateNeeds(opts, run, need);
  return needs;
}

/** Adds a need to `needs`, or its flag to the same need there (required wins over optional). */
function needAdder(needs: PermissionNeed[]) {
  return (n: Omit<PermissionNeed, "flags">, flag: string) => {
    const same = needs.find((x) =>
      x.verb === n.verb && x.group === n.group && x.resource === n.resource &&
      x.subresource === n.subresource && x.namespace === n.namespace && x.name === n.name
    );
    if (!same) needs.push({ ...n, flags: [flag] });
    else if (!n.optional === !same.optional) same.flags.push(flag);
    else if (n.optional) (same.uses ??= []).push(flag);
    else {
      // Required now: the error names what needs it; the optional uses stay told apart.
      same.uses = [...same.uses ?? [], ...same.flags];
      same.flags = [flag];
      delete same.optional;
    }
  };
}

/**
 * Every permission a run with these flags uses: what it cannot work without
 * (the nodes it selects, its Jobs) and what only records or speeds it up
 * (`optional`: the watches, node marks, Events, the run record), then what
 * the flags add ({@linkcode permissionNeeds}). The one list behind the
 * pre-flight, `job-dispatcher rbac` and the chart's RBAC test.
 *
 * @example
 * ```ts
 * accessNeeds({ maintenance: { blockingPodSelectors: [] } } as unknown as RunConfig,
 *   { namespace: "ns", prefix: "p" }).filter((n) => !n.optional).length; // 6
 * ```
 */
export function accessNeeds(opts: RunConfig, run: RunShape): PermissionNeed[] {
  const needs: PermissionNeed[] = [];
  const need = needAdder(needs);
  const nodes = { group: "", resource: "nodes", grant: NODES_ROLE };
  need({ verb: "get", ...nodes }, "node selection");
  need({ verb: "list", ...nodes }, "node selection");
  need({ verb: "watch", ...nodes, optional: true }, "the re-read before each create (else a LIST)");
  need({ verb: "patch", ...nodes, optional: true }, "the node marks");
  if (opts.kubeletTimeoutWarnSecs !== undefined) {
    need(
      { verb: "get", ...nodes, subresource: "proxy", optional: true },
      "--kubelet-timeout-warn-secs",
    );
  }
  const ns = { namespace: run.namespace, grant: RUN_ROLE };
  const jobs = { group: "batch", resource: "jobs", ...ns };
  for (const verb of ["get", "list", "create", "delete"]) {
    need({ verb, ...jobs }, "the per-node Jobs");
  }
  need({ verb: "watch", ...jobs, optional: true }, "the Jobs' watch (else LIST polling)");
  const owned = opts.ownerJobName !== undefined || opts.ownerJobFromPod !== undefined;
  if (owned) need({ verb: "patch", ...jobs, optional: true }, "the owner's progress annotation");
  const core = { group: "", ...ns };
  if (opts.ownerJobFromPod) {
    need({ verb: "get", ...core, resource: "pods" }, "--owner-job-from-pod");
  }
  need({ verb: "list", ...core, resource: "pods", optional: true }, "why a Job failed or stalls");
  need({ verb: "create", ...core, resource: "events", optional: true }, "the rollout Events");
  // Events on Nodes live in "default", the only namespace the API server accepts for them.
  need(
    { verb: "create", ...core, resource: "events", namespace: "default", optional: true },
    "the Events on nodes",
  );
  // The record's read and rewrite by its name: the grant covers that one
  // ConfigMap, not every one in the namespace. Not its create: RBAC cannot
  // limit a create by resourceNames (the Kubernetes RBAC docs: a new object's
  // name may not be known at authorization time), so it stays namespace-wide.
  const record = { ...core, resource: "configmaps", optional: true };
  need({ verb: "get", ...record, name: recordName(run.prefix) }, "the run record");
  need({ verb: "create", ...record }, "the run record");
  need({ verb: "update", ...record, name: recordName(run.prefix) }, "the run record");
  for (const n of permissionNeeds(opts, run)) for (const f of n.flags) need(n, f);
  if (opts.maintenance.drain && !opts.maintenance.drain.disableEviction) {
    // The plan reads a budget that refuses an eviction to tell "blocked for
    // good" (maxUnavailable 0, minAvailable all) from "refused now"; without
    // it every refusal is "refused now". --disable-eviction consults none.
    need(
      {
        verb: "get",
        group: "policy",
        resource: "poddisruptionbudgets",
        grant: DRAIN_ROLE,
        optional: true,
      },
      "--drain's plan: a budget that blocks for good",
    );
  }
  return needs;
}

/** What {@linkcode permissionNeeds} reads of the run's plan. */
export interface RunShape {
  /** The Jobs' namespace. */
  namespace: string;
  /** The main template's name prefix. */
  prefix: string;
  /**
   * The API server the run talks to, to tell its service proxy from another
   * server's (`kubectl proxy`); undefined (`rbac`, no kubeconfig read): by the
   * URL's path alone.
   */
  server?: string;
  /** The main Jobs (the first one's TTL is the template's). */
  targets?: readonly { job(): V1Job }[];
  /** The cleanup Jobs. */
  cleanupTargets?: readonly { job(): V1Job }[];
}

/**
 * The post-success work whose success mark (`nodes/success_mark.ts`) must
 * be written, or undefined. With `ttlSecondsAfterFinished` the Job may be
 * gone when a run killed during a node's post-success work is run again;
 * only the mark on the node then stops the re-run from creating the Job a
 * second time, and without `patch nodes` it cannot be written.
 */
function markedWork(opts: RunConfig, run: RunShape): string | undefined {
  const ttl = [run.targets?.[0], run.cleanupTargets?.[0]].some((t) =>
    t?.job().spec?.ttlSecondsAfterFinished !== undefined
  );
  if (!ttl) return undefined;
  const labels = opts.nodeLabels;
  const work = [
    ...(labels && (labels.value !== undefined || labels.remove) ? ["--node-label-key"] : []),
    ...(opts.maintenance.cordon ? [opts.maintenance.drain ? "--drain" : "--cordon"] : []),
    ...(opts.verify ? ["--verify-*"] : []),
    ...(opts.cleanupJobTemplate !== undefined ? ["--cleanup-job-template"] : []),
  ];
  return work.length ? work.join("/") : undefined;
}

/** What the health gates need: their latches, the soak's record, the API server's proxy. */
function gateNeeds(
  opts: RunConfig,
  { namespace, prefix, server }: RunShape,
  need: (n: Omit<PermissionNeed, "flags">, flag: string) => void,
): void {
  const cms = { group: "", resource: "configmaps", namespace, grant: RUN_ROLE };
  // By its name: the chart grants the read of this one ConfigMap only.
  need({ verb: "get", ...cms, name: exitLatchName(prefix) }, "--gate-prometheus-url");
  need({ verb: "create", ...cms }, `--on-gate-breach ${opts.gate!.onBreach}`);
  const owned = opts.ownerJobName !== undefined || opts.ownerJobFromPod !== undefined;
  const jobs = { verb: "patch", group: "batch", resource: "jobs", namespace, grant: RUN_ROLE };
  if (opts.gate!.onBreach === "pause" && owned) need(jobs, "--on-gate-breach pause");
  // The soak's "clean since" outlives a killed run only on the owner
  // (run/soak_gate.ts): refused, the re-run would open the next wave unsoaked.
  if (opts.waves && owned) need(jobs, "--waves with a gate (the soak's clean-since on the owner)");
  // Queries through the API server's service proxy go with the run's own
  // credentials (another server's proxy, `kubectl proxy`, with its own).
  const url = opts.gate!.url;
  const proxy = serviceProxyOf(url);
  if (proxy && (server === undefined || viaApiServer(url, server))) {
    need({
      verb: "get",
      group: "",
      resource: "services",
      subresource: "proxy",
      namespace: proxy.namespace,
      name: proxy.name,
      grant: PROXY_ROLE,
    }, "--gate-prometheus-url");
  }
}

/** The resources the run needs that belong to no namespace. */
const CLUSTER_SCOPED: ReadonlySet<string> = new Set(["nodes"]);

/**
 * `list pods`, `create pods/eviction`: a need as the user reads it, where,
 * and what needs or uses it (the pre-flight's words).
 *
 * @example
 * ```ts
 * describeNeed({ verb: "list", group: "", resource: "pods", namespace: "ns", flags: ["x"], grant: "" });
 * // "list pods (in namespace ns; for x)"
 * ```
 */
export function describeNeed(n: PermissionNeed): string {
  const what = `${n.verb} ${n.resource}${n.subresource ? `/${n.subresource}` : ""}${
    n.name ? ` ${n.name}` : ""
  }`;
  // Nodes belong to no namespace: "all namespaces" would send the reader to
  // look for a RoleBinding in each, where only a ClusterRole can grant it.
  const where = n.namespace !== undefined
    ? `in namespace ${n.namespace}`
    : CLUSTER_SCOPED.has(n.resource)
    ? "cluster-scoped"
    : "all namespaces";
  return `${what} (${where}; for ${[...new Set(n.flags)].join(", ")})`;
}

/**
 * Asks the API server, one SelfSubjectAccessReview per need (allowed to
 * every authenticated user through `system:basic-user`), whether this user
 * has what the flags need, before anything is cordoned or created: without
 * it, `--drain` would cordon every node and then fail each on its first
 * `list pods`. An API server that cannot answer the review (404, 403) is not
 * asked further: the run goes on, told so, and a missing right shows when it
 * is used.
 *
 * @param warn told of the optional needs lacking too when a required one stops
 *   the run, and that nothing was checked when the review cannot be asked
 * @returns the optional needs this user lacks, for the caller to warn of
 * @throws {PermissionError} naming every missing required permission and the README's rules
 * @throws {ApiError} when the API server cannot be reached
 */
export async function checkPermissions(
  kube: Kube,
  needs: readonly PermissionNeed[],
  warn?: (line: string) => void,
): Promise<PermissionNeed[]> {
  let answers: boolean[];
  try {
    answers = await Promise.all(needs.map((n) => allowed(kube, n)));
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 404 || e.status === 403))) throw e;
    // Unchecked is not "all granted": said, as kubectl auth can-i says it.
    warn?.(
      `Pre-flight: cannot ask the API server about permissions (${e.message}); they are not ` +
        "checked, and a missing one shows when the run uses it (job-dispatcher rbac prints " +
        "the rules for these flags)",
    );
    return [];
  }
  const lacking = needs.filter((_, i) => !answers[i]);
  const missing = lacking.filter((n) => !n.optional);
  if (!missing.length) return lacking;
  // The optional ones too, so that one pre-flight names every rule to add.
  const optional = optionalNeedsLine(lacking.filter((n) => n.optional));
  if (optional) warn?.(optional);
  const grants = [...new Set(missing.map((n) => n.grant))].join(", ");
  const them = missing.length === 1 ? "it" : "them";
  throw new PermissionError(
    `Missing permission: cannot ${missing.map(describeNeed).join(", ")}; ` +
      `grant ${them} with the README's RBAC section: ${grants}`,
  );
}

/**
 * The warning for the optional needs a user lacks, or undefined: the run
 * goes on, and says once per feature what it could not do.
 */
export function optionalNeedsLine(lacking: readonly PermissionNeed[]): string | undefined {
  if (!lacking.length) return undefined;
  return `Pre-flight: no permission to ${lacking.map(describeNeed).join(", ")}; ` +
    "the rollout goes on without it (job-dispatcher rbac prints the rules for these flags)";
}

/** Whether the API server allows `n` to this user (a SelfSubjectAccessReview). */
async function allowed(kube: Kube, n: PermissionNeed): Promise<boolean> {
  const review = await kube.request<{ status?: { allowed?: boolean } }>(
    "create",
    "POST",
    SELF_SUBJECT_ACCESS_REVIEWS,
    {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: {
        resourceAttributes: {
          ...(n.namespace === undefined ? {} : { namespace: n.namespace }),
          ...(n.name === undefined ? {} : { name: n.name }),
          verb: n.verb,
          group: n.group,
          resource: n.resource,
          ...(n.subresource ? { subresource: n.subresource } : {}),
        },
      },
    },
  );
  return review.status?.allowed === true;
}

/** The SelfSubjectAccessReview collection (authorization.k8s.io/v1). */
export const SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
