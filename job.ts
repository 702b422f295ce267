/**
 * Pure helpers that turn a Job template and a node into the node's Job, and a
 * Job's status into an outcome. Nothing here does I/O, so every rule is tested
 * without a cluster.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { parseAllDocuments } from "yaml";
import type {
  V1Container,
  V1Job,
  V1ObjectMeta,
  V1OwnerReference,
  V1PodSpec,
  V1Toleration,
} from "@kubernetes/client-node";

/**
 * Tolerations the DaemonSet controller adds to every daemon pod, so that a
 * per-node Job reaches the nodes a DaemonSet would: a node that is not ready,
 * unreachable, under resource pressure or cordoned still gets its pod.
 * `network-unavailable` is added only for host-network pods.
 */
export const DAEMONSET_TOLERATIONS: readonly V1Toleration[] = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/pid-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
];

/** The longest name a Job may have: its pods carry it in a label value. */
export const MAX_JOB_NAME = 63;

/** How many hex digits of the identity hash a shortened name carries. */
const HASH_DIGITS = 10;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_PREFIX = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Error for a template or flag the user must fix; `main.ts` turns it into exit 2. */
export class UsageError extends Error {
  /** @param message what is wrong and how to fix it */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * Whether `text` may be a label value: at most 63 characters of letters,
 * digits, `-`, `_` and `.`, beginning and ending with a letter or digit (or
 * empty).
 *
 * @example
 * ```ts
 * isLabelValue("true"); // true
 * isLabelValue("-x"); // false
 * ```
 */
export function isLabelValue(text: string): boolean {
  return text.length <= 63 && LABEL_VALUE.test(text);
}

/**
 * Whether `key` may be a label key: an optional DNS-subdomain prefix and `/`,
 * then a name of at most 63 characters as {@linkcode isLabelValue} allows,
 * not empty.
 *
 * @example
 * ```ts
 * isLabelKey("kata.example.com/installed"); // true
 * isLabelKey("a/b/c"); // false
 * ```
 */
export function isLabelKey(key: string): boolean {
  const slash = key.indexOf("/");
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !QUALIFIED_PREFIX.test(prefix))) return false;
  return name !== "" && isLabelValue(name);
}

/**
 * Whether `name` is a valid DNS-1123 label of at most 63 characters.
 *
 * @example
 * ```ts
 * isDnsLabel("upgrade-node-1"); // true
 * isDnsLabel("upgrade-node.example.com"); // false
 * ```
 */
export function isDnsLabel(name: string): boolean {
  return name.length <= MAX_JOB_NAME && DNS_LABEL.test(name);
}

/**
 * The stable hash of a prefix-and-node identity: the first 10 hex digits of
 * SHA-256 over `prefix + "/" + node`. Neither part can contain "/", so the
 * joined string identifies the pair. The algorithm is part of the contract:
 * Job names computed by one release are found again by every later one.
 *
 * @example
 * ```ts
 * identityHash("upgrade", "node-1").length; // 10
 * ```
 */
export function identityHash(prefix: string, node: string): string {
  return createHash("sha256").update(`${prefix}/${node}`).digest("hex").slice(0, HASH_DIGITS);
}

/**
 * Lowercases `text` and replaces every run of characters a DNS-1123 label
 * cannot hold with one "-", trimming dashes at both ends.
 *
 * @example
 * ```ts
 * sanitize("Worker_01.Example.COM"); // "worker-01-example-com"
 * ```
 */
export function sanitize(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
}

function shortened(text: string, hash: string): string {
  // Room for "-" and the hash; the cut may leave a trailing dash, which a
  // label may not end with before the separator.
  const base = sanitize(text).slice(0, MAX_JOB_NAME - HASH_DIGITS - 1).replace(/-+$/, "");
  return base ? `${base}-${hash}` : hash;
}

/**
 * The Job name for `node`: `<prefix>-<node>` when that already is a valid
 * DNS-1123 label of at most 63 characters, else its sanitised, truncated form
 * followed by the identity hash. Node names are DNS subdomains of up to 253
 * characters, so dots and length must go; the hash keeps names that sanitise
 * alike apart.
 *
 * @example
 * ```ts
 * jobName("upgrade", "node-1"); // "upgrade-node-1"
 * jobName("upgrade", "node-1.example.com"); // "upgrade-node-1-example-com-<hash>"
 * ```
 */
export function jobName(prefix: string, node: string): string {
  const plain = `${prefix}-${node}`;
  return isDnsLabel(plain) ? plain : shortened(plain, identityHash(prefix, node));
}

/**
 * A label value that stands for `text`: `text` itself when it is a valid label
 * value, else its sanitised, truncated form with the identity hash. Node names
 * can exceed the 63-character label-value limit, so the full name lives in an
 * annotation and the label only has to be unique and selectable.
 *
 * @example
 * ```ts
 * labelValue("node-1.example.com"); // "node-1.example.com"
 * ```
 */
export function labelValue(text: string): string {
  return text.length <= MAX_JOB_NAME && LABEL_VALUE.test(text)
    ? text
    : shortened(text, identityHash("", text));
}

/** The label and annotation keys by which the dispatcher finds its own Jobs. */
export interface TrackingKeys {
  /** Label: which dispatcher (name prefix) a Job belongs to. */
  owner: string;
  /** Label: the node, as a label value. */
  node: string;
  /** Annotation: the node's full name. */
  nodeName: string;
  /** Annotation: the UID of the node the Job was made for. */
  nodeUid: string;
  /** Node label: the outcome of the node's last Job (`succeeded`/`failed`). */
  result: string;
  /** Node annotation: why the node's last Job failed. */
  error: string;
  /** Node annotation: when the node's last Job finished. */
  finishedAt: string;
  /** Owner Job annotation: the rollout's progress. */
  progress: string;
  /**
   * Owner Job finalizer and label of earlier versions, which a run now only
   * removes (run/owner_guard.ts).
   */
  guard: string;
  /** Owner Job label the chart sets: the hook Jobs of one release, one per revision. */
  hook: string;
  /** Job annotation: the hash of the template the Job was made from ({@linkcode templateHash}). */
  templateHash: string;
  /** Node annotation: the run that cordoned the node, so only that run uncordons it. */
  cordonedBy: string;
  /** Owner Job annotation: `true` pauses the rollout (no new Job starts). */
  paused: string;
  /**
   * Owner Job annotation: since when the health gates are clean after their
   * last break (ISO time), or `broken` while one lasts: a re-run restarts a
   * wave's soak from it (run/soak_gate.ts).
   */
  gatesCleanSince: string;
  /** ConfigMap label: the run record of a prefix (`report/record.ts`), for `status`. */
  record: string;
  /** ConfigMap label: the owner Job's name, so `status --owner-job-name` finds its record. */
  ownerJob: string;
  /**
   * Node annotations `<this>.<job>`: a Job's success kept on the node before
   * its post-success work, until that work ends (`nodes/success_mark.ts` `keptKey`).
   */
  kept: string;
  /**
   * Node annotation base: the verdict of the node's smoke-test Job (`verify/rules.ts`
   * `SmokeVerdict`), one key per smoke-test Job (`nodes/success_mark.ts` `keptKey`).
   */
  verified: string;
  /**
   * Owner Job annotation the chart sets: its revision's template ConfigMap,
   * which the run makes the owner Job's dependent (run/owner_guard.ts).
   */
  templateConfigMap: string;
}

/**
 * The tracking keys under `prefix` (`<prefix>/owner`, `<prefix>/node`, …).
 *
 * @throws {UsageError} when `prefix` is not a DNS subdomain usable as a key prefix
 * @example
 * ```ts
 * trackingKeys("job-dispatcher").owner; // "job-dispatcher/owner"
 * ```
 */
export function trackingKeys(prefix: string): TrackingKeys {
  if (prefix.length > 253 || !QUALIFIED_PREFIX.test(prefix)) {
    throw new UsageError(
      `Invalid --tracking-label-prefix ${JSON.stringify(prefix)}: ` +
        "it must be a lowercase DNS subdomain such as job-dispatcher or upgrade.example.com",
    );
  }
  return {
    owner: `${prefix}/owner`,
    node: `${prefix}/node`,
    nodeName: `${prefix}/node-name`,
    nodeUid: `${prefix}/node-uid`,
    result: `${prefix}/result`,
    error: `${prefix}/error`,
    finishedAt: `${prefix}/finished-at`,
    progress: `${prefix}/progress`,
    guard: `${prefix}/per-node-jobs`,
    hook: `${prefix}/hook`,
    templateHash: `${prefix}/template-hash`,
    cordonedBy: `${prefix}/cordoned-by`,
    paused: `${prefix}/paused`,
    gatesCleanSince: `${prefix}/gates-clean-since`,
    record: `${prefix}/run-record`,
    ownerJob: `${prefix}/owner-job`,
    kept: `${prefix}/succeeded-job`,
    verified: `${prefix}/verified-job`,
    templateConfigMap: `${prefix}/template-configmap`,
  };
}

/** A Job template that passed {@linkcode parseJobTemplate}. */
export type JobTemplate = V1Job & {
  spec: NonNullable<V1Job["spec"]>;
};

// Labels the Job controller adds to a Job and its pods; a template exported
// with `kubectl get job -o yaml` carries them, and a selector on them would tie
// every per-node Job to the pods of the exported one.
const CONTROLLER_LABELS = [
  "controller-uid",
  "job-name",
  "batch.kubernetes.io/controller-uid",
  "batch.kubernetes.io/job-name",
];

function withoutKeys(
  map: Record<string, string> | undefined,
  keys: string[],
): Record<string, string> | undefined {
  if (!map) return undefined;
  const out = Object.fromEntries(Object.entries(map).filter(([k]) => !keys.includes(k)));
  return Object.keys(out).length ? out : undefined;
}

/**
 * Parses and validates a Job template: exactly one `batch/v1` Job document
 * that the API server could accept for any node. Server-set fields are
 * stripped so that `kubectl get job -o yaml` output works as a template; every
 * other field is kept as written.
 *
 * @param text the template's text
 * @param source how to name the template in errors (a path, or "stdin")
 * @throws {UsageError} naming the template and what is wrong with it
 * @example
 * ```ts
 * const t = parseJobTemplate(
 *   "apiVersion: batch/v1\nkind: Job\nmetadata: {name: up}\n" +
 *     "spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}",
 *   "job.yaml",
 * );
 * t.metadata?.name; // "up"
 * ```
 */
export function parseJobTemplate(text: string, source: string): JobTemplate {
  const fail = (what: string): never => {
    throw new UsageError(`Invalid job template ${source}: ${what}`);
  };
  // YAML 1.1, as kubectl reads manifests (sigs.k8s.io/yaml): `defaultMode: 0400`
  // is octal there, and a template that kubectl accepts must mean the same here.
  const docs = parseAllDocuments(text, { version: "1.1" });
  for (const doc of docs) {
    if (doc.errors.length) fail(`not valid YAML: ${doc.errors[0].message.split("\n")[0]}`);
  }
  const values = docs.map((d) => d.toJS()).filter((v) => v !== null && v !== undefined);
  if (values.length === 0) fail("it is empty; it must hold one batch/v1 Job");
  if (values.length > 1) {
    fail(`it holds ${values.length} documents; it must hold exactly one batch/v1 Job`);
  }
  const job = values[0];
  if (typeof job !== "object" || Array.isArray(job)) fail("it is not a YAML mapping");
  if (job.kind !== "Job") {
    fail(`kind is ${JSON.stringify(job.kind ?? null)}; it must be Job`);
  }
  if (job.apiVersion !== "batch/v1") {
    fail(`apiVersion is ${JSON.stringify(job.apiVersion ?? null)}; it must be batch/v1`);
  }
  const podSpec = job.spec?.template?.spec;
  if (!podSpec || typeof podSpec !== "object") fail("spec.template.spec is missing");
  if (!Array.isArray(podSpec.containers) || podSpec.containers.length === 0) {
    fail("spec.template.spec.containers is empty; a Job needs at least one container");
  }
  const restart = podSpec.restartPolicy;
  if (restart !== "Never" && restart !== "OnFailure") {
    fail(
      `spec.template.spec.restartPolicy is ${JSON.stringify(restart ?? null)}; ` +
        "a Job needs Never or OnFailure",
    );
  }
  if (podSpec.nodeName) {
    fail(
      "spec.template.spec.nodeName is set; remove it, the dispatcher pins each Job to its node",
    );
  }
  return stripServerFields(job);
}

function stripServerFields(job: JobTemplate): JobTemplate {
  const out = structuredClone(job);
  delete out.status;
  const meta = out.metadata ?? {};
  for (
    const k of [
      "uid",
      "resourceVersion",
      "creationTimestamp",
      "deletionTimestamp",
      "deletionGracePeriodSeconds",
      "generation",
      "managedFields",
      "selfLink",
      "ownerReferences",
    ] as const
  ) delete meta[k];
  meta.labels = withoutKeys(meta.labels, CONTROLLER_LABELS);
  meta.annotations = withoutKeys(meta.annotations, [
    "kubectl.kubernetes.io/last-applied-configuration",
    "batch.kubernetes.io/job-tracking",
  ]);
  out.metadata = meta;
  // The controller fills the selector from a controller-uid; keeping an exported
  // one would select the pods of the Job it was exported from.
  if (!out.spec.manualSelector) delete out.spec.selector;
  const podMeta = out.spec.template.metadata;
  if (podMeta) {
    podMeta.labels = withoutKeys(podMeta.labels, CONTROLLER_LABELS);
    delete podMeta.creationTimestamp;
  }
  return out;
}

/**
 * The template without this tool's own keys: every label and annotation
 * under `<prefix>/` and every finalizer that starts with it, on the Job and
 * on its pod template. A template copied with `kubectl get job -o yaml` from
 * an owner or a per-node Job carries them (the progress annotation, the
 * hook label, the finalizer of earlier versions): kept, they would change
 * the template hash with every run, and a finalizer would outlive the
 * dispatcher on every per-node Job. The dispatcher sets its own keys on each
 * Job anyway.
 *
 * @param prefix the tracking label prefix
 * @returns the template, and what was dropped (`label a/b`, `annotation a/c`, `finalizer a/d`)
 * @example
 * ```ts
 * const t = parseJobTemplate(
 *   "apiVersion: batch/v1\nkind: Job\nmetadata: {name: up, labels: {job-dispatcher/owner: up}}\n" +
 *     "spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}",
 *   "job.yaml",
 * );
 * withoutOwnKeys(t, "job-dispatcher").dropped; // ["label job-dispatcher/owner"]
 * ```
 */
export function withoutOwnKeys(
  template: JobTemplate,
  prefix: string,
): { template: JobTemplate; dropped: string[] } {
  const out = structuredClone(template);
  const dropped: string[] = [];
  const own = (k: string) => k.startsWith(`${prefix}/`);
  const strip = (meta: V1ObjectMeta | undefined, where: string) => {
    if (!meta) return;
    for (const field of ["labels", "annotations"] as const) {
      const map = meta[field];
      if (!map) continue;
      const keys = Object.keys(map).filter(own);
      for (const k of keys) dropped.push(`${where}${field.slice(0, -1)} ${k}`);
      meta[field] = withoutKeys(map, keys);
    }
    const finalizers = meta.finalizers?.filter((f) => !own(f));
    for (const f of meta.finalizers?.filter(own) ?? []) dropped.push(`${where}finalizer ${f}`);
    if (meta.finalizers) meta.finalizers = finalizers?.length ? finalizers : undefined;
  };
  strip(out.metadata, "");
  strip(out.spec.template.metadata, "pod template ");
  return { template: out, dropped };
}

/** What the dispatcher knows of a node when it makes the node's Job. */
export interface NodeFacts {
  /** The node's name. */
  name: string;
  /** The node's UID at selection time. */
  uid: string;
  /** `status.nodeInfo.machineID`, when the node reports it. */
  machineID?: string;
  /** `status.nodeInfo.containerRuntimeVersion`, when the node reports it. */
  containerRuntimeVersion?: string;
}

/** The Job that owns a run's per-node Jobs. */
export interface OwnerRef {
  /** The owner Job's name. */
  name: string;
  /** The owner Job's UID. */
  uid: string;
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== "object" || value instanceof Date) return value;
  return Object.fromEntries(
    Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
  );
}

/**
 * The identity of what a run's Jobs do: a hash of the template and the
 * pinning, i.e. of the instantiated Job without its per-node fields (name,
 * node, node UID, the node's facts). Key order does not matter. A Job of
 * another hash was made from another template and is stale: without an
 * owner, prefix and node alone would count an old image's Jobs as done.
 *
 * @example
 * ```ts
 * templateHash(template, "nodeName").length; // 16
 * ```
 */
export function templateHash(
  template: JobTemplate,
  pin: "nodeName" | "affinity" = "nodeName",
): string {
  const text = JSON.stringify(canonical({ template, pin }));
  return createHash("sha256").update(text).digest("hex").slice(0, 16);
}

/** Options for {@linkcode instantiateJob}. */
export interface InstantiateOptions {
  /** A template from {@linkcode parseJobTemplate}. */
  template: JobTemplate;
  /** The node the Job is for. */
  node: NodeFacts;
  /** The Job name prefix. */
  prefix: string;
  /** The namespace of the Jobs. */
  namespace: string;
  /** The tracking keys. */
  keys: TrackingKeys;
  /** The owner Job, when the run has one. */
  owner?: OwnerRef;
  /** How the pod is pinned to its node. @default "nodeName" */
  pin?: "nodeName" | "affinity";
  /** {@linkcode templateHash} of `template` and `pin`, computed once per run; computed here when absent. */
  templateHash?: string;
}

/**
 * Pins a pod spec to `node` through the scheduler, as the DaemonSet controller
 * does: a required node affinity on `metadata.name` added to every term the
 * template already requires (terms are ORed, so each must carry it), and the
 * DaemonSet tolerations the template lacks. The scheduler then checks
 * resources and taints, so a full node leaves the pod Pending instead of the
 * kubelet failing it OutOfcpu (Kubernetes #106419, #120160).
 */
export function pinByAffinity(pod: V1PodSpec, node: string): void {
  const byName = { key: "metadata.name", operator: "In", values: [node] };
  pod.affinity ??= {};
  pod.affinity.nodeAffinity ??= {};
  const required = pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  if (required?.nodeSelectorTerms?.length) {
    required.nodeSelectorTerms = required.nodeSelectorTerms.map((t) => ({
      ...t,
      matchFields: [...(t.matchFields ?? []), byName],
    }));
  } else {
    pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution = {
      nodeSelectorTerms: [{ matchFields: [byName] }],
    };
  }
  const have = pod.tolerations ?? [];
  const missing = DAEMONSET_TOLERATIONS.filter((d) =>
    !have.some((t) => t.key === d.key && t.effect === d.effect)
  );
  if (missing.length) pod.tolerations = [...have, ...missing.map((t) => ({ ...t }))];
}

function addEnv(container: V1Container, name: string, value: string | undefined): void {
  if (!value) return;
  container.env ??= [];
  // The template's own value wins: it may deliberately override the fact.
  if (container.env.some((e) => e.name === name)) return;
  container.env.push({ name, value });
}

/**
 * The Job for one node: the template with a deterministic name, pinned with
 * `spec.template.spec.nodeName`, the tracking labels on the Job and its pods,
 * the full node name and UID as annotations, an ownerReference to the owner
 * Job, and the node's facts as environment variables.
 *
 * @example
 * ```ts
 * const job = instantiateJob({ template, node: { name: "n1", uid: "u1" }, prefix: "up",
 *   namespace: "default", keys: trackingKeys("job-dispatcher") });
 * job.spec?.template.spec?.nodeName; // "n1"
 * ```
 */
export function instantiateJob(opts: InstantiateOptions): V1Job {
  const { node, keys, prefix, owner } = opts;
  const job = structuredClone(opts.template);
  const tracking = { [keys.owner]: labelValue(prefix), [keys.node]: labelValue(node.name) };
  const meta = job.metadata ?? {};
  delete meta.generateName;
  meta.name = jobName(prefix, node.name);
  meta.namespace = opts.namespace;
  meta.labels = { ...meta.labels, ...tracking };
  meta.annotations = {
    ...meta.annotations,
    [keys.nodeName]: node.name,
    [keys.nodeUid]: node.uid,
    [keys.templateHash]: opts.templateHash ?? templateHash(opts.template, opts.pin),
  };
  if (owner) {
    // Not a controller reference and no blockOwnerDeletion: the per-node Jobs
    // only follow their owner into garbage collection, and blockOwnerDeletion
    // would need delete permission on the owner's finalizers subresource.
    const ref: V1OwnerReference = {
      apiVersion: "batch/v1",
      kind: "Job",
      name: owner.name,
      uid: owner.uid,
      controller: false,
      blockOwnerDeletion: false,
    };
    meta.ownerReferences = [ref];
  }
  job.metadata = meta;
  // The API's default, TerminatingOrFailed, creates a replacement pod as soon
  // as the first one has a deletionTimestamp (an eviction, a kubectl delete,
  // a node-pressure kill), pinned to the same node while the first still runs
  // its grace period: two copies of a task on one node (system-upgrade-controller
  // PR #328). Failed waits until the first pod is Failed or Succeeded. It is
  // the only value the API accepts with a podFailurePolicy (and that
  // policy's default), and a Job's other fields do not constrain it; GA
  // in Kubernetes 1.34, on by default since 1.29 (an API server with the
  // feature off drops the field). Not part of templateHash: the template
  // is unchanged, so Jobs made before this default stay current.
  job.spec.podReplacementPolicy ??= "Failed";
  const template = job.spec.template;
  template.metadata = template.metadata ?? {};
  template.metadata.labels = { ...template.metadata.labels, ...tracking };
  const pod = template.spec!;
  // nodeName bypasses the scheduler: the pod lands on this node or nowhere,
  // which is what "exactly one per node" needs.
  if (opts.pin === "affinity") pinByAffinity(pod, node.name);
  else pod.nodeName = node.name;
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    addEnv(c, "NODE_MACHINE_ID", node.machineID);
    addEnv(c, "CONTAINER_RUNTIME_VERSION", node.containerRuntimeVersion);
  }
  return job;
}

/**
 * Where a Job stands, as the dispatcher counts it. `final` is false while only
 * `SuccessCriteriaMet` / `FailureTarget` are set: the outcome is decided but
 * the Job's pods may still be terminating.
 */
export type JobOutcome =
  | { phase: "active" }
  | { phase: "succeeded"; final: boolean }
  | { phase: "failed"; final: boolean; reason: string; message?: string };

/**
 * Reads a Job's conditions. `SuccessCriteriaMet` and `FailureTarget` decide
 * the outcome (current Kubernetes sets them first, and a slot may free on
 * them); the terminal `Complete` / `Failed` come only once the pods are gone,
 * which is what work on the node after its Job must wait for.
 *
 * @example
 * ```ts
 * interpretStatus({ status: { conditions: [{ type: "Complete", status: "True" }] } });
 * // { phase: "succeeded", final: true }
 * ```
 */
export function interpretStatus(job: Pick<V1Job, "status">): JobOutcome {
  const conds = job.status?.conditions ?? [];
  const isTrue = (type: string) => conds.find((c) => c.type === type && c.status === "True");
  if (isTrue("Complete")) return { phase: "succeeded", final: true };
  if (isTrue("SuccessCriteriaMet")) return { phase: "succeeded", final: false };
  const terminal = isTrue("Failed");
  const failed = terminal ?? isTrue("FailureTarget");
  if (failed) {
    return {
      phase: "failed",
      final: terminal !== undefined,
      reason: failed.reason || "Failed",
      message: failed.message,
    };
  }
  return { phase: "active" };
}

/**
 * Whether a Job is finished: `Complete` or `Failed`, which the Job
 * controller sets only once every pod is gone (`SuccessCriteriaMet` and
 * `FailureTarget` come earlier, while a pod may still run its grace period).
 *
 * @example
 * ```ts
 * jobFinished({ status: { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] } }); // false
 * ```
 */
export function jobFinished(job: Pick<V1Job, "status">): boolean {
  const outcome = interpretStatus(job);
  return outcome.phase !== "active" && outcome.final;
}

/**
 * When the Job controller decided a Job's outcome (ms since the epoch): its
 * `completionTime` once `Complete`, else the `lastTransitionTime` of the
 * condition {@linkcode interpretStatus} reads it from (`SuccessCriteriaMet`,
 * `Failed`, `FailureTarget`); undefined while it runs or when the Job says no
 * time. Work on the node after its Job (verification) is judged against this
 * time, which the Job's TTL may remove with the Job: the engine keeps it.
 *
 * @example
 * ```ts
 * outcomeAt({ status: { completionTime: new Date("2026-12-01T10:00:05Z"),
 *   conditions: [{ type: "Complete", status: "True" }] } }); // 1796119205000
 * ```
 */
export function outcomeAt(job: Pick<V1Job, "status">): number | undefined {
  const outcome = interpretStatus(job);
  if (outcome.phase === "active") return undefined;
  const type = outcome.phase === "succeeded"
    ? (outcome.final ? "Complete" : "SuccessCriteriaMet")
    : (outcome.final ? "Failed" : "FailureTarget");
  const cond = job.status?.conditions?.find((c) => c.type === type && c.status === "True");
  const completion = outcome.phase === "succeeded" && outcome.final
    ? job.status?.completionTime
    : undefined;
  const at = completion ?? cond?.lastTransitionTime;
  return at === undefined ? undefined : new Date(at).getTime();
}

/**
 * Why the template's `ttlSecondsAfterFinished` is too short for the run to
 * see a Job's outcome, or undefined. Only polling can miss it: a Job that
 * finishes just after one LIST is seen by the next, one interval later (and a
 * slow paginated LIST takes longer), so the TTL must cover two intervals. A
 * watch sees the DELETED event, which carries the final state, so any TTL
 * works with one.
 *
 * @param pollOnlySecs the poll interval when the run only polls; undefined when it watches
 * @example
 * ```ts
 * unobservableTtl(template, 5); // with ttlSecondsAfterFinished: 0, "... at least 10 ..."
 * ```
 */
export function unobservableTtl(template: JobTemplate, pollOnlySecs?: number): string | undefined {
  const ttl = template.spec.ttlSecondsAfterFinished;
  if (pollOnlySecs === undefined || ttl === undefined || ttl >= 2 * pollOnlySecs) return undefined;
  return `ttlSecondsAfterFinished ${ttl} is too short to see a Job's outcome with --poll-only ` +
    `(a LIST every ${pollOnlySecs} s): set it to at least ${2 * pollOnlySecs}, or drop --poll-only`;
}

/**
 * Why the template's `spec.podReplacementPolicy` risks two pods of a node's
 * Job on its node at once, or undefined. `TerminatingOrFailed` (which
 * `kubectl get job -o yaml` exports, the API's default) starts the
 * replacement pod the moment the first one is terminating; unset, the
 * dispatcher sets `Failed` ({@linkcode instantiateJob}).
 *
 * @example
 * ```ts
 * podReplacementRisk(template); // with TerminatingOrFailed: "spec.podReplacementPolicy: ..."
 * ```
 */
export function podReplacementRisk(template: JobTemplate): string | undefined {
  if (template.spec.podReplacementPolicy !== "TerminatingOrFailed") return undefined;
  return "spec.podReplacementPolicy: TerminatingOrFailed starts a replacement pod on the " +
    "same node while the first is still terminating (an eviction, a deleted pod): two copies " +
    "of the task at once; set it to Failed, or remove it and the dispatcher sets Failed";
}

/**
 * Keeps of a Job what the engine reads: its metadata without managedFields
 * (labels, annotations, owners, finalizers, deletion), its status, and of
 * its spec `suspend` and each container's name and image. The engine's
 * cache holds every Job of the run; the spec (the whole pod template) and
 * managedFields are most of a Job's size. The images stay so that a Job
 * replaced for a new template can say the image changed, the most common
 * change, which the template's hash alone cannot tell.
 *
 * @example
 * ```ts
 * slimJob({ metadata: { name: "a" }, spec: { template: {} } }).spec; // undefined
 * ```
 */
export function slimJob(job: V1Job): V1Job {
  const { managedFields: _, ...metadata } = job.metadata ?? {};
  // spec.suspend: a suspended stale Job runs nothing (stillRuns).
  const suspend = job.spec?.suspend;
  const pod = job.spec?.template?.spec;
  const images = (cs?: { name: string; image?: string }[]) =>
    cs?.map(({ name, image }) => ({ name, image }));
  const containers = images(pod?.containers);
  const initContainers = images(pod?.initContainers);
  if (suspend === undefined && !containers) return { metadata, status: job.status };
  const spec = {
    ...(suspend === undefined ? {} : { suspend }),
    ...(containers
      ? { template: { spec: { containers, ...(initContainers ? { initContainers } : {}) } } }
      : {}),
  } as V1Job["spec"];
  return { metadata, spec, status: job.status };
}

/**
 * Keeps of the Job of a node whose outcome is final only what its informer
 * compares: name, UID and resourceVersion (a re-list tells a changed or a
 * replaced Job by them). The engine reads nothing else of it any more (a
 * final node state never changes), and at 65,000 nodes the whole slim Jobs
 * of the finished nodes were the largest part of the heap (~870 bytes each).
 *
 * @example
 * ```ts
 * settledJob({ metadata: { name: "a", uid: "u", resourceVersion: "7", labels: {} }, status: {} });
 * // { metadata: { name: "a", uid: "u", resourceVersion: "7" } }
 * ```
 */
export function settledJob(job: V1Job): V1Job {
  const { name, uid, resourceVersion } = job.metadata ?? {};
  return { metadata: { name, uid, resourceVersion } };
}

/**
 * Whether a stale Job may still be doing work on its node, so that deleting
 * it could kill a task mid-way: not finished, not already being deleted, and
 * not suspended with no pod left. A suspended Job runs nothing (the Job
 * controller deleted its pods), and it never finishes by itself: waiting
 * for it would wait forever.
 *
 * Finished means `Complete` or `Failed`. The Job controller sets
 * `SuccessCriteriaMet` or `FailureTarget` first and the final condition only
 * once every pod is gone and its finalizer removed (k8s 1.31+): until then a
 * pod may still run its grace period, and a deletion in between loses the
 * final condition from the watch's DELETED event.
 *
 * @example
 * ```ts
 * stillRuns({ spec: { suspend: true }, status: {} }); // false
 * stillRuns({ status: { active: 1 } }); // true
 * stillRuns({ status: { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] } }); // true
 * ```
 *
 * A suspended Job whose outcome is decided still runs until it is final:
 * suspend no longer stops the Job controller from finishing it.
 */
export function stillRuns(job: Pick<V1Job, "metadata" | "spec" | "status">): boolean {
  if (job.metadata?.deletionTimestamp) return false;
  // Decided: the Job controller no longer heeds suspend (syncJob skips
  // manageJob once an outcome is set) and sets the final condition itself.
  if (interpretStatus(job).phase !== "active") return !jobFinished(job);
  const idle = !job.status?.active && !job.status?.terminating;
  return !(job.spec?.suspend === true && idle);
}

/**
 * How an existing Job of a node's name relates to this run:
 * - `notOurs`: it lacks our owner label; it is never touched;
 * - `stale`: ours, but made for an earlier owner, an earlier node of the
 *   same name or another template (its template-hash annotation), or already
 *   being deleted; it is replaced (once it no longer runs);
 * - `current`: ours for this owner and node; it is counted or adopted.
 */
export type Disposition = "notOurs" | "stale" | "current";

/** What {@linkcode classifyJob} compares a Job with. */
export interface RunIdentity {
  /** The tracking keys. */
  keys: TrackingKeys;
  /** The Job name prefix. */
  prefix: string;
  /** The owner, when the run has one. */
  owner?: OwnerRef;
  /** {@linkcode templateHash} of the run's template; a Job of another hash is stale. */
  templateHash?: string;
}

/**
 * Classifies an existing Job for a node against this run.
 *
 * @param nodeUid the node's current UID; a Job made for another UID ran on a
 *   node that has since been replaced under the same name
 * @example
 * ```ts
 * classifyJob({ metadata: { labels: {} } }, run, "uid"); // "notOurs"
 * ```
 */
export function classifyJob(job: V1Job, run: RunIdentity, nodeUid?: string): Disposition {
  const meta = job.metadata ?? {};
  if (meta.labels?.[run.keys.owner] !== labelValue(run.prefix)) return "notOurs";
  if (meta.deletionTimestamp) return "stale";
  if (run.owner && !(meta.ownerReferences ?? []).some((r) => r.uid === run.owner!.uid)) {
    return "stale";
  }
  const madeFor = meta.annotations?.[run.keys.nodeUid];
  if (nodeUid && madeFor && madeFor !== nodeUid) return "stale";
  // A Job without the annotation predates it: its template is not known, and
  // re-running a whole fleet on an upgrade of the dispatcher would surprise.
  const hash = meta.annotations?.[run.keys.templateHash];
  if (run.templateHash && hash && hash !== run.templateHash) return "stale";
  return "current";
}

/**
 * Refuses a template whose `metadata.namespace` is not the namespace the
 * Jobs go to, as kubectl refuses such an object ("the namespace from the
 * provided object … does not match the namespace …"): which one the user
 * meant is not ours to guess. A template without a namespace takes the one in use.
 *
 * @param source how to name the template in the error
 * @throws {UsageError} naming both namespaces and the fix
 *
 * @example
 * ```ts
 * checkTemplateNamespace({ metadata: { namespace: "ops" } } as JobTemplate, "ops", "job.yaml");
 * ```
 */
export function checkTemplateNamespace(
  template: JobTemplate,
  namespace: string,
  source: string,
): void {
  const own = template.metadata?.namespace;
  if (!own || own === namespace) return;
  throw new UsageError(
    `Invalid job template ${source}: the namespace from the provided object ${
      JSON.stringify(own)
    } does not match the namespace ${JSON.stringify(namespace)}; pass --namespace ${own} ` +
      "or remove metadata.namespace from the template",
  );
}
