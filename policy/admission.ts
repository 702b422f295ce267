/**
 * ValidatingAdmissionPolicies that narrow what the dispatcher's ServiceAccount
 * may do with the two rights RBAC cannot narrow by content: `create jobs` (a
 * pod of any spec) and `patch nodes` (any label, any taint, any node). Each
 * policy matches only requests whose user is that ServiceAccount
 * (`matchConditions`), fails closed (`failurePolicy: Fail`), and reads the
 * release's parameters from one ConfigMap (`paramKind`), so that a changed
 * image or flag changes the ConfigMap and not the policy.
 *
 * A ConfigMap holds strings only, and CEL on admission has no YAML or JSON
 * parser: lists are comma-separated (`split` of the Kubernetes strings
 * library) and flags are "true"/"false". docs/admission-policies.md says what
 * the policies block and what CEL cannot see.
 *
 * The chart's chart/templates/admission-policies.yaml is generated from
 * {@linkcode chartAdmissionTemplate} (scripts/admission_chart.ts); a unit test
 * fails when the two differ.
 *
 * @module
 */

import type { V1Container, V1PodSpec } from "@kubernetes/client-node";
import { type JobTemplate, labelValue, trackingKeys, UsageError } from "../job.ts";
import type { TaintSelector } from "../nodes/lifecycle.ts";
import { JOB_VALIDATIONS, JOB_VARIABLES, NODE_VALIDATIONS, NODE_VARIABLES } from "./cel.ts";

/** The release's parameters, as the params ConfigMap holds them (lists comma-separated). */
export interface AdmissionParams {
  /** `system:serviceaccount:<namespace>:<name>`: the only user the policies judge. */
  username: string;
  /** Namespace of the params ConfigMap (the release's). */
  namespace: string;
  /** Base of every object's name: policies `<name>.<namespace>.jobs|nodes`, ConfigMap `<name>-admission`. */
  name: string;
  /** `--tracking-label-prefix`. */
  prefix: string;
  /**
   * Values of `<prefix>/owner` on its Jobs: the label values of the name
   * prefix, of `<prefix>-verify` (the smoke-test Jobs) and of the cleanup
   * template's name.
   */
  owners: string[];
  /** Value of `<prefix>/hook` on the release's hook Jobs (deletable too); "" for none. */
  hook: string;
  /** Every image of every container and initContainer of the templates. */
  images: string[];
  /** The templates' ServiceAccounts ("default" where a template names none). */
  serviceAccounts: string[];
  /** Whether any template asks for it. */
  privileged: boolean;
  /** Whether any template asks for it. */
  hostPID: boolean;
  /** Whether any template asks for it. */
  hostNetwork: boolean;
  /** Whether any template asks for it. */
  hostIPC: boolean;
  /** The hostPath paths the templates mount. */
  hostPaths: string[];
  /** The capabilities the templates add. */
  capabilities: string[];
  /** The kinds of volume the templates mount (`persistentVolumeClaim`, `csi`…): keys of their volumes. */
  volumeTypes: string[];
  /** The templates' `priorityClassName`s (none: the cluster's default only). */
  priorityClasses: string[];
  /** Node label keys it may set or remove (`--node-label-key`, `--extra-node-label`, the instance mark). */
  labelKeys: string[];
  /** Node label key prefixes (with the `/`) it may set or remove under: `<prefix>/`, `<instance-label-prefix>/`. */
  labelPrefixes: string[];
  /** `--remove-node-taints` entries as given: `key` or `key:effect`. */
  removeTaints: string[];
}

/** What {@linkcode admissionParams} builds the parameters from: the run's options and templates. */
export interface AdmissionInput {
  /** The ServiceAccount's namespace (the release's). */
  namespace: string;
  /** The ServiceAccount's name. */
  serviceAccount: string;
  /** Base of the objects' names; default the ServiceAccount's name. */
  name?: string;
  /** `--tracking-label-prefix`. */
  trackingPrefix: string;
  /** The per-node Jobs' name prefix (`--name-prefix` or the template's name). */
  namePrefix: string;
  /** The hook group label value, when run as the chart's hook. */
  hook?: string;
  /** The per-node template. */
  template: JobTemplate;
  /** `--verify-job-template`. */
  verifyTemplate?: JobTemplate;
  /** `--cleanup-job-template`. */
  cleanupTemplate?: JobTemplate;
  /** `--node-label-key`. */
  nodeLabelKey?: string;
  /** `--extra-node-label` keys. */
  extraLabelKeys?: string[];
  /** `--instance-label-prefix` and `--multi-install-suffix`. */
  instance?: { prefix: string; suffix: string };
  /** `--remove-node-taints`. */
  removeTaints?: TaintSelector[];
}

const uniq = (xs: Iterable<string>) => [...new Set(xs)].sort();

/**
 * Whether a label key's prefix (or a prefix) lies in the domains Kubernetes
 * reserves for its own components: `kubernetes.io/hostname` (topology,
 * affinity, local volumes), `node-role.kubernetes.io/*`,
 * `node.kubernetes.io/exclude-from-external-load-balancers` (the cloud's load
 * balancers), `node-restriction.kubernetes.io/*` (the labels NodeRestriction
 * keeps from node credentials, so that workloads may trust them).
 */
function reserved(keyOrPrefix: string): boolean {
  const domain = keyOrPrefix.includes("/") ? keyOrPrefix.slice(0, keyOrPrefix.indexOf("/")) : "";
  return ["kubernetes.io", "k8s.io"].some((d) => domain === d || domain.endsWith(`.${d}`));
}

/** Refuses node keys a policy would let the token write on every node though others read them. */
function refuseReserved(flags: [string, string | undefined][]): void {
  for (const [flag, key] of flags) {
    // A prefix (tracking, instance) is judged as the domain of its keys.
    if (key === undefined || !reserved(flag.endsWith("-prefix") ? `${key}/` : key)) continue;
    throw new UsageError(
      `Cannot admit ${flag} ${key}: keys under kubernetes.io and k8s.io are read by ` +
        "Kubernetes components (scheduler, load balancers, NodeRestriction), and the policy " +
        "would let the ServiceAccount's token set it to any value on every node; choose a key " +
        "under your own domain, or leave the policies out (admissionPolicies.enabled=false, " +
        "rbac --admission-policies=false)",
    );
  }
}

function containersOf(pod: V1PodSpec): V1Container[] {
  return [...(pod.initContainers ?? []), ...(pod.containers ?? [])];
}

/**
 * The parameters of one release from its options and templates: the union of
 * what the templates ask (an image, a privilege of any one of them is allowed
 * to all), and the node keys the flags make it write.
 *
 * @example
 * ```ts
 * admissionParams({ namespace: "ops", serviceAccount: "jd", trackingPrefix: "job-dispatcher",
 *   namePrefix: "node-task", template }).username; // "system:serviceaccount:ops:jd"
 * ```
 */
export function admissionParams(input: AdmissionInput): AdmissionParams {
  const templates = [input.template, input.verifyTemplate, input.cleanupTemplate]
    .filter((t): t is JobTemplate => t !== undefined);
  const pods = templates.map((t) => t.spec.template.spec ?? { containers: [] });
  const owners = [
    input.namePrefix,
    ...(input.verifyTemplate ? [`${input.namePrefix}-verify`] : []),
    ...(input.cleanupTemplate?.metadata?.name ? [input.cleanupTemplate.metadata.name] : []),
  ];
  const containers = pods.flatMap(containersOf);
  const any = (f: (p: V1PodSpec) => boolean | undefined) => pods.some((p) => f(p) === true);
  refuseReserved([
    ["--node-label-key", input.nodeLabelKey],
    ...(input.extraLabelKeys ?? []).map((k): [string, string] => ["--extra-node-label", k]),
    ["--tracking-label-prefix", input.trackingPrefix],
    ["--instance-label-prefix", input.instance?.prefix],
  ]);
  const keys = trackingKeys(input.trackingPrefix);
  const labelKeys = [
    ...(input.nodeLabelKey ? [input.nodeLabelKey] : []),
    ...(input.extraLabelKeys ?? []),
    ...(input.instance ? [`${input.instance.prefix}/${input.instance.suffix}`] : []),
  ];
  return {
    username: `system:serviceaccount:${input.namespace}:${input.serviceAccount}`,
    namespace: input.namespace,
    name: input.name ?? input.serviceAccount,
    prefix: input.trackingPrefix,
    owners: uniq(owners.map(labelValue)),
    hook: input.hook ?? "",
    images: uniq(containers.map((c) => c.image ?? "")),
    serviceAccounts: uniq(
      pods.map((p) => p.serviceAccountName ?? p.serviceAccount ?? "default"),
    ),
    privileged: containers.some((c) => c.securityContext?.privileged === true),
    hostPID: any((p) => p.hostPID),
    hostNetwork: any((p) => p.hostNetwork),
    hostIPC: any((p) => p.hostIPC),
    hostPaths: uniq(pods.flatMap((p) => (p.volumes ?? []).flatMap((v) => v.hostPath?.path ?? []))),
    capabilities: uniq(containers.flatMap((c) => c.securityContext?.capabilities?.add ?? [])),
    volumeTypes: uniq(
      pods.flatMap((p) => (p.volumes ?? []).flatMap((v) => Object.keys(v))).filter((k) =>
        k !== "name"
      ),
    ),
    priorityClasses: uniq(pods.flatMap((p) => p.priorityClassName ?? [])),
    labelKeys: uniq(labelKeys),
    labelPrefixes: uniq([
      `${keys.owner.slice(0, keys.owner.indexOf("/") + 1)}`,
      ...(input.instance ? [`${input.instance.prefix}/`] : []),
    ]),
    removeTaints: uniq(
      (input.removeTaints ?? []).map((t) => t.effect ? `${t.key}:${t.effect}` : t.key),
    ),
  };
}

/** The ConfigMap's data: every parameter the policies read, as strings. */
export function paramsData(p: AdmissionParams): Record<string, string> {
  const list = (xs: string[]) => xs.join(",");
  return {
    prefix: p.prefix,
    owners: list(p.owners),
    hook: p.hook,
    images: list(p.images),
    serviceAccounts: list(p.serviceAccounts),
    privileged: String(p.privileged),
    hostPID: String(p.hostPID),
    hostNetwork: String(p.hostNetwork),
    hostIPC: String(p.hostIPC),
    hostPaths: list(p.hostPaths),
    capabilities: list(p.capabilities),
    volumeTypes: list(p.volumeTypes),
    priorityClasses: list(p.priorityClasses),
    labelKeys: list(p.labelKeys),
    labelPrefixes: list(p.labelPrefixes),
    removeTaints: list(p.removeTaints),
  };
}

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** The names of one release's admission objects. */
export function admissionNames(p: Pick<AdmissionParams, "name" | "namespace">) {
  return {
    jobs: `${p.name}.${p.namespace}.jobs`,
    nodes: `${p.name}.${p.namespace}.nodes`,
    paramsGuard: `${p.name}.${p.namespace}.params`,
    params: `${p.name}-admission`,
  };
}

function policy(
  name: string,
  username: string,
  rules: Obj[],
  variables: Obj[],
  validations: Obj[],
  withParams = true,
): Obj {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name },
    spec: {
      failurePolicy: "Fail",
      ...(withParams ? { paramKind: { apiVersion: "v1", kind: "ConfigMap" } } : {}),
      matchConstraints: { resourceRules: rules },
      // Only the dispatcher's own requests: the cluster's other users, the
      // kubelet and the controllers are never judged by the release's policy.
      matchConditions: [{
        name: "dispatcher-service-account",
        expression: `request.userInfo.username == '${username}'`,
      }],
      variables,
      validations,
    },
  };
}

function binding(name: string, p: AdmissionParams, params?: string): Obj {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name },
    spec: {
      policyName: name,
      // A missing ConfigMap denies: failing open would lift every check.
      ...(params
        ? { paramRef: { name: params, namespace: p.namespace, parameterNotFoundAction: "Deny" } }
        : {}),
      validationActions: ["Deny"],
    },
  };
}

/**
 * The guard of the params themselves: the run record's RBAC lets the
 * ServiceAccount update any ConfigMap of its namespace, and so, without this
 * policy, rewrite its own parameters (privileged: "true") and lift every check.
 */
function paramsGuard(p: AdmissionParams, name: string, params: string): Obj {
  const rules = [{
    apiGroups: [""],
    apiVersions: ["*"],
    resources: ["configmaps"],
    operations: ["CREATE", "UPDATE", "DELETE"],
  }];
  return policy(name, p.username, rules, [], [{
    expression: `request.namespace != '${p.namespace}' || request.name != '${params}'`,
    message: `job-dispatcher admission policy: the ConfigMap ${params} holds the release's ` +
      "admission parameters; its ServiceAccount may not write it",
    reason: "Forbidden",
  }], false);
}

/**
 * The release's ValidatingAdmissionPolicies, their bindings and the params
 * ConfigMap, in the order to apply them (the ConfigMap last: its absence
 * denies, never allows).
 *
 * @example
 * ```ts
 * admissionPolicies(params).map((o) => o.kind);
 * // ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", (nodes, params guard: the
 * //  same two), "ConfigMap"]
 * ```
 */
export function admissionPolicies(p: AdmissionParams): Obj[] {
  const n = admissionNames(p);
  const jobRules = [{
    apiGroups: ["batch"],
    apiVersions: ["*"],
    resources: ["jobs"],
    operations: ["CREATE", "UPDATE", "DELETE"],
  }];
  const nodeRules = [{
    apiGroups: [""],
    apiVersions: ["*"],
    resources: ["nodes", "nodes/status"],
    operations: ["CREATE", "UPDATE", "DELETE"],
  }];
  return [
    policy(n.jobs, p.username, jobRules, JOB_VARIABLES, JOB_VALIDATIONS),
    binding(n.jobs, p, n.params),
    policy(n.nodes, p.username, nodeRules, NODE_VARIABLES, NODE_VALIDATIONS),
    binding(n.nodes, p, n.params),
    paramsGuard(p, n.paramsGuard, n.params),
    binding(n.paramsGuard, p),
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: n.params, namespace: p.namespace },
      data: paramsData(p),
    },
  ];
}
