import assert from "node:assert/strict";
import type { PermissionNeed } from "../run/preflight.ts";
import { rbacDocuments, rbacRules } from "./rbac.ts";

const need = (verb: string, resource: string, more: Partial<PermissionNeed> = {}) =>
  ({ verb, group: "", resource, flags: [], grant: "", ...more }) as PermissionNeed;

Deno.test({
  name: "rbacRules() merges verbs per resource and object, and leaves out a name already covered",
  permissions: "none",
  async fn(t) {
    const cases: [string, PermissionNeed[], ReturnType<typeof rbacRules>][] = [
      [
        "verbs of one resource in one rule, in the README's order",
        [need("patch", "nodes"), need("get", "nodes"), need("list", "nodes")],
        {
          cluster: [{ apiGroups: [""], resources: ["nodes"], verbs: ["get", "list", "patch"] }],
          namespaced: new Map(),
        },
      ],
      [
        "a subresource is its own rule",
        [need("list", "pods"), need("create", "pods", { subresource: "eviction" })],
        {
          cluster: [
            { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
            { apiGroups: [""], resources: ["pods/eviction"], verbs: ["create"] },
          ],
          namespaced: new Map(),
        },
      ],
      [
        "a named need alone: resourceNames",
        [need("get", "configmaps", { namespace: "ns", name: "latch" })],
        {
          cluster: [],
          namespaced: new Map([["ns", [{
            apiGroups: [""],
            resources: ["configmaps"],
            resourceNames: ["latch"],
            verbs: ["get"],
          }]]]),
        },
      ],
      [
        "a named need covered by the same verb on all: left out",
        [
          need("get", "configmaps", { namespace: "ns", name: "latch" }),
          need("get", "configmaps", { namespace: "ns" }),
        ],
        {
          cluster: [],
          namespaced: new Map([["ns", [{
            apiGroups: [""],
            resources: ["configmaps"],
            verbs: ["get"],
          }]]]),
        },
      ],
      [
        "a namespace's need covered by the cluster-wide one: left out",
        [need("list", "pods", { namespace: "ns" }), need("list", "pods")],
        {
          cluster: [{ apiGroups: [""], resources: ["pods"], verbs: ["list"] }],
          namespaced: new Map(),
        },
      ],
      [
        "each namespace its own rules",
        [
          need("create", "events", { namespace: "ns" }),
          need("create", "events", { namespace: "default" }),
          need("list", "jobs", { group: "batch", namespace: "ns" }),
        ],
        {
          cluster: [],
          namespaced: new Map([
            ["ns", [
              { apiGroups: [""], resources: ["events"], verbs: ["create"] },
              { apiGroups: ["batch"], resources: ["jobs"], verbs: ["list"] },
            ]],
            ["default", [{ apiGroups: [""], resources: ["events"], verbs: ["create"] }]],
          ]),
        },
      ],
    ];
    for (const [what, needs, want] of cases) {
      await t.step(what, () => assert.deepEqual(rbacRules(needs), want));
    }
  },
});

Deno.test({
  name:
    "rbacDocuments() binds a ClusterRole and each namespace's Role to the ServiceAccount, shared names prefixed with the namespace",
  permissions: "none",
  fn() {
    const docs = rbacDocuments({
      needs: [
        need("list", "nodes"),
        need("create", "events", { namespace: "default" }),
        need("create", "events", { namespace: "ops" }),
      ],
      namespace: "ops",
      serviceAccount: "sa",
    });
    const ids = docs.map((d) => {
      const m = d.metadata as { name: string; namespace?: string };
      return `${d.kind} ${m.namespace ?? ""}/${m.name}`;
    });
    assert.deepEqual(ids, [
      "ServiceAccount ops/sa",
      "ClusterRole /ops:sa",
      "ClusterRoleBinding /ops:sa",
      "Role ops/sa",
      "RoleBinding ops/sa",
      "Role default/ops:sa",
      "RoleBinding default/ops:sa",
    ]);
    for (const b of docs.filter((d) => String(d.kind).endsWith("Binding"))) {
      assert.deepEqual(b.subjects, [{ kind: "ServiceAccount", name: "sa", namespace: "ops" }]);
    }
  },
});

Deno.test({
  name: "rbacDocuments() gives two dispatchers different names wherever their objects share a " +
    "scope: applying one's output never rebinds the other's roles",
  permissions: "none",
  async fn(t) {
    const needs = [need("list", "nodes"), need("create", "events", { namespace: "default" })];
    /** The cluster's and "default"'s objects of `ns/sa`, as `Kind namespace/name`. */
    const shared = (namespace: string, serviceAccount: string) =>
      rbacDocuments({ needs, namespace, serviceAccount })
        .map((d) => d.metadata as { name: string; namespace?: string })
        .filter((m) => m.namespace === undefined || m.namespace === "default")
        .map((m) => `${m.namespace ?? ""}/${m.name}`);
    const pairs: [string, [string, string], [string, string]][] = [
      ["a dash in the namespace or in the account", ["team-a", "upg"], ["team", "a-upg"]],
      ["a dispatcher of default and another's Events there", ["default", "ops-sa"], ["ops", "sa"]],
    ];
    for (const [what, [ns1, sa1], [ns2, sa2]] of pairs) {
      await t.step(what, () => {
        const one = shared(ns1, sa1);
        const clash = shared(ns2, sa2).filter((id) => one.includes(id));
        assert.deepEqual(clash, []);
      });
    }
  },
});
