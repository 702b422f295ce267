/**
 * RBAC objects as the permissions they grant: for comparing the chart's
 * rendered RBAC with `job-dispatcher rbac`'s, and for taking one rule out.
 *
 * @module
 */

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/**
 * Every permission the objects grant ServiceAccount `ns/sa` through their
 * bindings, as `verb group/resource name @namespace` (`*` for cluster-wide,
 * `-` for no name); a name is left out where the same verb on every object
 * of its resource, or in every namespace, is granted anyway (the API server would never consult it).
 */
export function grantsTo(objs: readonly Obj[], ns: string, sa: string): Set<string> {
  const all = new Set<string>();
  const bindings = objs.filter((o) =>
    (o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding") &&
    o.subjects?.some((s: Obj) => s.kind === "ServiceAccount" && s.name === sa && s.namespace === ns)
  );
  for (const b of bindings) {
    const where = b.kind === "RoleBinding" ? b.metadata.namespace : undefined;
    const role = objs.find((o) =>
      o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name &&
      (o.kind === "ClusterRole" || o.metadata.namespace === where)
    );
    if (!role) throw new Error(`${b.kind} ${b.metadata.name} binds a missing ${b.roleRef.kind}`);
    for (const p of rulePermissions(role.rules ?? [], where ?? "*")) all.add(p);
  }
  return subsume(all);
}

/** The permissions of `rules` granted in namespace `where` (`*`: all). */
export function rulePermissions(rules: readonly Obj[], where: string): string[] {
  return rules.flatMap((r) =>
    r.apiGroups.flatMap((g: string) =>
      r.resources.flatMap((res: string) =>
        r.verbs.flatMap((v: string) =>
          (r.resourceNames ?? ["-"]).map((n: string) => `${v} ${g}/${res} ${n} @${where}`)
        )
      )
    )
  );
}

/** Leaves out a permission on one name, or in one namespace, that a wider one covers. */
function subsume(all: Set<string>): Set<string> {
  return new Set(
    [...all].filter((p) => {
      const [verb, res, name, where] = p.split(" ");
      const wider = [
        `${verb} ${res} - ${where}`,
        `${verb} ${res} ${name} @*`,
        `${verb} ${res} - @*`,
      ];
      return !wider.some((w) => w !== p && all.has(w));
    }),
  );
}
