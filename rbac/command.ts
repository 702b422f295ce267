/**
 * `job-dispatcher rbac`: from the run flags and the templates to the YAML
 * documents, with no cluster asked.
 *
 * @module
 */

import { stringify } from "yaml";
import type { JobTemplate } from "../job.ts";
import type { RunConfig } from "../run/config.ts";
import { namePrefixOf } from "../run/plan.ts";
import {
  accessNeeds,
  describeNeed,
  type NamespaceSources,
  type PermissionNeed,
  resolveNamespace,
} from "../run/preflight.ts";
import { viewerNeeds } from "../status/access.ts";
import { rbacDocuments } from "./rbac.ts";
import { admissionParams, admissionPolicies } from "../policy/admission.ts";

/** What `rbac` reads of the process besides its flags. */
export type RbacEnv = Omit<NamespaceSources, "kube">;

/** What `rbac` prints: for a run, or with `--viewer`. */
export interface RbacRequest {
  /** The run flags. */
  opts: RunConfig;
  /** The run's template (not read with `viewer`). */
  template?: JobTemplate;
  /** The cleanup template, if any. */
  cleanup?: JobTemplate;
  /** The verification (smoke-test) template, if any. */
  verify?: JobTemplate;
  /** `--service-account`. */
  serviceAccount: string;
  /** `--viewer`. */
  viewer: boolean;
  /** Print the admission policies too (`--admission-policies`, default true). */
  admissionPolicies?: boolean;
  /** `--required-only`: leave out the optional needs (node marks, Events, the run record). */
  requiredOnly?: boolean;
}

/**
 * The namespace as a run would resolve it, without its kubeconfig: the flag,
 * `$POD_NAMESPACE`, the in-cluster account's, "default".
 */
function namespaceOf(opts: RunConfig, env: RbacEnv): string {
  return resolveNamespace({ ...opts, kubeconfig: undefined, context: undefined }, {
    ...env,
    kube: { contextNamespace: undefined },
  });
}

/** Every need of the run, required and optional (`run/preflight.ts` `accessNeeds`). */
function runNeeds(r: RbacRequest, namespace: string): PermissionNeed[] {
  const job = (t: JobTemplate) => [{ job: () => t }];
  return accessNeeds(r.opts, {
    namespace,
    prefix: namePrefixOf(r.opts, r.template!),
    targets: job(r.template!),
    cleanupTargets: r.cleanup ? job(r.cleanup) : [],
  });
}

/**
 * The documents `rbac` prints, in order. THE one place the objects of
 * `rbac`'s output are listed: the admission policies (issue 27, items 1 and
 * 3) are appended here, at the marked line.
 *
 * @throws {UsageError} for a template without a usable name prefix, as the run
 */
export function rbacCommandDocuments(r: RbacRequest, env: RbacEnv): Record<string, unknown>[] {
  const namespace = namespaceOf(r.opts, env);
  if (r.viewer) {
    return rbacDocuments({
      needs: viewerNeeds(namespace),
      namespace,
      serviceAccount: r.serviceAccount,
    });
  }
  const template = r.template!;
  const needs = runNeeds(r, namespace).filter((n) => !r.requiredOnly || !n.optional);
  const labels = r.opts.nodeLabels;
  // Only with the policies: admissionParams refuses keys under kubernetes.io,
  // which RBAC alone (--admission-policies=false) may still grant.
  const params = () =>
    admissionParams({
      namespace,
      serviceAccount: r.serviceAccount,
      trackingPrefix: r.opts.trackingLabelPrefix,
      namePrefix: namePrefixOf(r.opts, template),
      template,
      verifyTemplate: r.verify,
      cleanupTemplate: r.cleanup,
      nodeLabelKey: labels?.key,
      extraLabelKeys: labels?.extra.map(([k]) => k),
      instance: labels?.mark && labels.instancePrefix
        ? {
          prefix: labels.instancePrefix,
          suffix: labels.mark.slice(labels.instancePrefix.length + 1),
        }
        : undefined,
      removeTaints: r.opts.removeNodeTaints,
    });
  // RBAC cannot narrow `create jobs` and `patch nodes` by content; the
  // admission policies do (docs/admission-policies.md), with the same flags.
  return [
    ...rbacDocuments({ needs, namespace, serviceAccount: r.serviceAccount }),
    ...(r.admissionPolicies ? admissionPolicies(params()) : []),
  ];
}

/**
 * What `rbac` prints: with `--required-only`, a comment naming each optional
 * need left out in the pre-flight's own words (it warns of the same when the
 * run starts), so that whoever applies it knows what the run will not record;
 * then the documents.
 *
 * @throws {UsageError} for a template without a usable name prefix, as the run
 */
export function rbacCommandText(r: RbacRequest, env: RbacEnv): string {
  const yaml = rbacYaml(rbacCommandDocuments(r, env));
  if (!r.requiredOnly || r.viewer) return yaml;
  const left = runNeeds(r, namespaceOf(r.opts, env)).filter((n) => n.optional);
  if (!left.length) return yaml;
  return [
    "# --required-only: the optional rules are left out. The run's pre-flight",
    "# warns of them and the rollout goes on without:",
    ...left.map((n) => `#   ${describeNeed(n)}`),
    yaml,
  ].join("\n");
}

/**
 * The documents as multi-document YAML for `kubectl apply -f -`.
 *
 * @example
 * ```ts
 * rbacYaml([{ kind: "A" }, { kind: "B" }]); // "kind: A\n---\nkind: B\n"
 * ```
 */
export function rbacYaml(docs: readonly Record<string, unknown>[]): string {
  return docs.map((d) => stringify(d)).join("---\n");
}
