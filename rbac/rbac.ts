/**
 * **rbac/** owns `job-dispatcher rbac`: the ServiceAccount, Roles,
 * ClusterRole and bindings that grant exactly the permissions a run with
 * given flags uses (`run/preflight.ts` `accessNeeds`, the list the
 * pre-flight asks the API server about), or those `status` reads
 * (`--viewer`), as objects for `kubectl apply -f -`. No I/O here.
 *
 * @module
 */

import type { PermissionNeed } from "../run/preflight.ts";

/** One RBAC PolicyRule. */
export interface RbacRule {
  /** The API group, "" the core group. */
  apiGroups: string[];
  /** The resource, with its subresource (`pods/eviction`). */
  resources: string[];
  /** The one object it is limited to, if any. */
  resourceNames?: string[];
  /** The verbs, in {@linkcode VERB_ORDER}. */
  verbs: string[];
}

/** The rules of the needs: cluster-wide ones, and each namespace's. */
export interface RbacRules {
  /** For a ClusterRole (needs of every namespace, and cluster-scoped resources). */
  cluster: RbacRule[];
  /** For a Role in each namespace. */
  namespaced: Map<string, RbacRule[]>;
}

/** The order verbs are written in, as the README's rules write them. */
export const VERB_ORDER = ["get", "list", "watch", "create", "update", "patch", "delete"];

/**
 * The needs as rules: one rule per resource (and per object name), its verbs
 * merged. A need on one named object, or in one namespace, is left out where
 * the same verb on every object, or in every namespace, is granted anyway: a
 * rule the API server would never consult, which no pre-flight could find
 * missing.
 *
 * @example
 * ```ts
 * rbacRules([{ verb: "list", group: "", resource: "nodes", flags: [], grant: "" }]).cluster;
 * // [{ apiGroups: [""], resources: ["nodes"], verbs: ["list"] }]
 * ```
 */
export function rbacRules(needs: readonly PermissionNeed[]): RbacRules {
  // o covers n: the same verb on the same resource, on every object or n's
  // one, in every namespace or n's own.
  const covers = (o: PermissionNeed, n: PermissionNeed) =>
    o !== n && o.verb === n.verb && o.group === n.group && o.resource === n.resource &&
    o.subresource === n.subresource && (o.name === undefined || o.name === n.name) &&
    (o.namespace === undefined || o.namespace === n.namespace) &&
    (o.name !== n.name || o.namespace !== n.namespace);
  const subsumed = (n: PermissionNeed) => needs.some((o) => covers(o, n));
  const out: RbacRules = { cluster: [], namespaced: new Map() };
  for (const n of needs.filter((n) => !subsumed(n))) {
    const rules = n.namespace === undefined
      ? out.cluster
      : out.namespaced.get(n.namespace) ?? out.namespaced.set(n.namespace, []).get(n.namespace)!;
    const resource = n.subresource ? `${n.resource}/${n.subresource}` : n.resource;
    const same = rules.find((r) =>
      r.apiGroups[0] === n.group && r.resources[0] === resource &&
      r.resourceNames?.[0] === n.name
    );
    if (same) {
      if (!same.verbs.includes(n.verb)) same.verbs.push(n.verb);
      same.verbs.sort((a, b) => VERB_ORDER.indexOf(a) - VERB_ORDER.indexOf(b));
    } else {
      rules.push({
        apiGroups: [n.group],
        resources: [resource],
        ...(n.name === undefined ? {} : { resourceNames: [n.name] }),
        verbs: [n.verb],
      });
    }
  }
  return out;
}

/** What {@linkcode rbacDocuments} is asked. */
export interface RbacDocumentsOptions {
  /** The permissions to grant. */
  needs: readonly PermissionNeed[];
  /** The ServiceAccount's namespace (and the Jobs'). */
  namespace: string;
  /** The ServiceAccount the roles are bound to. */
  serviceAccount: string;
}

const RBAC_API = "rbac.authorization.k8s.io/v1";

/**
 * The ServiceAccount, then a ClusterRole and its binding for the
 * cluster-wide rules, then a Role and RoleBinding per namespace: those of
 * the ServiceAccount's namespace named after it, the others (Events on Nodes
 * live in "default") and the ClusterRole `<namespace>:<account>`, since
 * cluster-scoped names and "default" are shared by every namespace's
 * dispatcher. A colon, as in `system:node`: neither a namespace nor a
 * ServiceAccount name holds one, so no two pairs (nor an account's own
 * Role in "default") get one name; a dash would give `team-a`/`upg` and
 * `team`/`a-upg` the same, and the later `kubectl apply` would rebind the
 * earlier's roles to its own account.
 *
 * @example
 * ```ts
 * rbacDocuments({ needs: [], namespace: "ns", serviceAccount: "sa" }).length; // 1
 * ```
 */
export function rbacDocuments(o: RbacDocumentsOptions): Record<string, unknown>[] {
  const { cluster, namespaced } = rbacRules(o.needs);
  const shared = `${o.namespace}:${o.serviceAccount}`;
  const subjects = [{ kind: "ServiceAccount", name: o.serviceAccount, namespace: o.namespace }];
  const docs: Record<string, unknown>[] = [{
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: o.serviceAccount, namespace: o.namespace },
  }];
  const bound = (kind: "Role" | "ClusterRole", rules: RbacRule[], ns?: string) => {
    const name = ns === o.namespace ? o.serviceAccount : shared;
    const metadata = ns === undefined ? { name } : { name, namespace: ns };
    docs.push(
      { apiVersion: RBAC_API, kind, metadata, rules },
      {
        apiVersion: RBAC_API,
        kind: `${kind}Binding`,
        metadata,
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind, name },
        subjects,
      },
    );
  };
  if (cluster.length) bound("ClusterRole", cluster);
  const namespaces = [...namespaced.keys()].sort((a, b) =>
    a === o.namespace ? -1 : b === o.namespace ? 1 : a.localeCompare(b)
  );
  for (const ns of namespaces) bound("Role", namespaced.get(ns)!, ns);
  return docs;
}
