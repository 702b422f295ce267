/**
 * What the end-to-end suites set up on the control plane: their own nodes,
 * namespaces, owner Jobs, files, and ServiceAccounts bound to exactly the
 * README's RBAC rules. One place, so that every suite means the same thing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parse, stringify } from "yaml";
import { type Cluster, type ClusterOptions, type NodeSpec, startCluster } from "./cluster.ts";
import { eventually, jobTemplate } from "./_dispatcher.ts";

/**
 * A test that runs `fn` on a control plane of its own: started first,
 * stopped afterwards whatever happens, its component logs printed and its
 * folder kept when a step failed. `options` start that control plane (an
 * audit log, say).
 */
export function clusterTest(
  name: string,
  fn: (t: Deno.TestContext, cluster: Cluster) => Promise<void>,
  options: ClusterOptions = {},
): void {
  Deno.test({
    name,
    // The suites run subprocesses and long-lived watches by design.
    sanitizeOps: false,
    sanitizeResources: false,
    async fn(t) {
      const started = Date.now();
      const cluster = await startCluster(options);
      let ok = false;
      try {
        await fn(t, cluster);
        ok = true;
      } finally {
        removeScratch();
        if (!ok) console.error(await cluster.logs(30));
        await cluster.stop({ removeDir: ok });
        console.log(`${name}: ${((Date.now() - started) / 1000).toFixed(0)} s`);
      }
    },
  });
}

/** The node label the suites select their own nodes by. */
export const SUITE = "e2e.job-dispatcher.io/suite";

/** `count` node specs named `<suite>-000`, … labelled with the suite. */
export function suiteNodes(
  suite: string,
  count: number,
  extra: Partial<NodeSpec> = {},
  first = 0,
): NodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `${suite}-${String(first + i).padStart(3, "0")}`,
    ...extra,
    labels: { [SUITE]: suite, ...extra.labels },
  }));
}

/** The nodes of `suite` that are cordoned (`spec.unschedulable`), sorted. */
export async function cordonedNodes(cluster: Cluster, suite: string): Promise<string[]> {
  const r = await cluster.kubectl([
    "get",
    "nodes",
    "-l",
    `${SUITE}=${suite}`,
    "-o",
    "jsonpath={range .items[?(@.spec.unschedulable)]}{.metadata.name}{'\\n'}{end}",
  ]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split("\n").filter(Boolean).sort();
}

/** Creates a namespace and waits for its default ServiceAccount, which pods need. */
export async function namespace(cluster: Cluster, name: string): Promise<string> {
  const r = await cluster.kubectl(["create", "namespace", name]);
  assert.equal(r.code, 0, r.stderr);
  await eventually(
    async () =>
      (await cluster.kubectl(["get", "serviceaccount", "default", "-n", name])).code === 0,
    30_000,
    `serviceaccount default in ${name}`,
  );
  return name;
}

let scratch: string | undefined;

/**
 * The process's one scratch directory in the system's temp directory, made
 * on first use; {@linkcode removeScratch} removes it with everything in it.
 * World-readable (0755): a step runs the bundle as the image's UID 65532,
 * which must read the template and kubeconfig files made here.
 */
export function scratchDir(): string {
  if (!scratch) {
    scratch = Deno.makeTempDirSync({ prefix: "e2e-" });
    Deno.chmodSync(scratch, 0o755);
  }
  return scratch;
}

/**
 * Removes the scratch directory, if any: at the end of every
 * {@linkcode clusterTest}, and when the test process unloads (suites that
 * start their cluster themselves), so that a suite leaves no file behind.
 */
export function removeScratch(): void {
  if (!scratch) return;
  try {
    Deno.removeSync(scratch, { recursive: true });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  scratch = undefined;
}

globalThis.addEventListener("unload", removeScratch);

/** Writes `text` to a new file in the scratch directory and returns its path. */
export async function tempFile(text: string, suffix = ".yaml"): Promise<string> {
  const path = await Deno.makeTempFile({ dir: scratchDir(), prefix: "e2e-", suffix });
  await Deno.writeTextFile(path, text);
  return path;
}

/** A new directory in the scratch directory, removed with it. */
export async function tempDir(prefix: string): Promise<string> {
  return await Deno.makeTempDir({ dir: scratchDir(), prefix });
}

/**
 * Creates a suspended owner Job (it never runs a pod, as a Helm hook that
 * owns a rollout) and returns its UID.
 */
export async function ownerJob(cluster: Cluster, ns: string, name: string): Promise<string> {
  const r = await cluster.kubectl(
    ["apply", "-f", "-"],
    `apiVersion: batch/v1
kind: Job
metadata: {name: ${name}, namespace: ${ns}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: hook, image: registry.invalid/hook:1}]
`,
  );
  assert.equal(r.code, 0, r.stderr);
  return await jobField(cluster, ns, name, "{.metadata.uid}");
}

/** One field of Job `name` in `ns`, read by kubectl's jsonpath (e.g. `{.metadata.uid}`). */
export async function jobField(
  cluster: Cluster,
  ns: string,
  name: string,
  jsonpath: string,
): Promise<string> {
  const got = await cluster.kubectl(["get", "job", name, "-n", ns, "-o", `jsonpath=${jsonpath}`]);
  assert.equal(got.code, 0, got.stderr);
  return got.stdout.trim();
}

/**
 * Writes a kubeconfig for `cluster`: the admin's certificate by default, or a
 * bearer `token`; `server` replaces the API server's URL (a proxy), and
 * `namespace` becomes the context's namespace.
 */
export async function kubeconfigFor(
  cluster: Cluster,
  opts: { server?: string; token?: string; namespace?: string } = {},
): Promise<string> {
  const kc = parse(await Deno.readTextFile(cluster.kubeconfig));
  if (opts.server) { for (const c of kc.clusters) c.cluster.server = opts.server; }
  if (opts.token !== undefined) {
    kc.users = [{ name: kc.users[0].name, user: { token: opts.token } }];
  }
  if (opts.namespace) { for (const c of kc.contexts) c.context.namespace = opts.namespace; }
  return await tempFile(stringify(kc));
}

/** The verbs of the README's RBAC section, by resource; a suite may take some away. */
export interface Rbac {
  /** Cluster-scoped. @default get, list, watch, patch */
  nodes: string[];
  /** In the Jobs' namespace. @default get, list, watch, create, delete, patch */
  jobs: string[];
  /** In the Jobs' namespace. @default get, list */
  pods: string[];
  /** `create` on events in the Jobs' namespace and in "default". @default true */
  events: boolean;
  /** In the Jobs' namespace: the run record (report/record.ts), the gates' exit latch. @default get, create, update */
  configmaps?: string[];
  /** `get` on nodes/proxy, the README's optional rule for --kubelet-timeout-warn-secs. */
  nodesProxy?: boolean;
  /**
   * The required rules for --drain: `list` pods and `create` pods/eviction,
   * cluster-wide; not the optional `get` poddisruptionbudgets (the plan then
   * says "refused now", never "blocked for good").
   */
  drain?: boolean;
}

/** The README's RBAC section. */
export const README_RBAC: Rbac = {
  nodes: ["get", "list", "watch", "patch"],
  jobs: ["get", "list", "watch", "create", "delete", "patch"],
  pods: ["get", "list"],
  events: true,
  configmaps: ["get", "create", "update"],
};

function rbacManifest(ns: string, name: string, rbac: Rbac): string {
  const id = `e2e-${ns}-${name}`;
  const subject = `subjects: [{kind: ServiceAccount, name: ${name}, namespace: ${ns}}]`;
  const binding = (kind: string, roleKind: string, where: string) =>
    `apiVersion: rbac.authorization.k8s.io/v1
kind: ${kind}
metadata: {name: ${id}${where ? `, namespace: ${where}` : ""}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ${roleKind}, name: ${id}}
${subject}
`;
  const events = `  - {apiGroups: [""], resources: [events], verbs: [create]}\n`;
  const drain = `  - {apiGroups: [""], resources: [pods], verbs: [list]}
  - {apiGroups: [""], resources: [pods/eviction], verbs: [create]}
`;
  return `apiVersion: v1
kind: ServiceAccount
metadata: {name: ${name}, namespace: ${ns}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ${id}}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [${rbac.nodes.join(", ")}]}
${rbac.nodesProxy ? `  - {apiGroups: [""], resources: [nodes/proxy], verbs: [get]}\n` : ""}${
    rbac.drain ? drain : ""
  }---
${binding("ClusterRoleBinding", "ClusterRole", "")}---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ${id}, namespace: ${ns}}
rules:
  - {apiGroups: [batch], resources: [jobs], verbs: [${rbac.jobs.join(", ")}]}
  - {apiGroups: [""], resources: [pods], verbs: [${rbac.pods.join(", ")}]}
${rbac.events ? events : ""}${
    rbac.configmaps?.length
      ? `  - {apiGroups: [""], resources: [configmaps], verbs: [${rbac.configmaps.join(", ")}]}\n`
      : ""
  }---
${binding("RoleBinding", "Role", ns)}---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ${id}, namespace: default}
rules:
${rbac.events ? events : "  []\n"}---
${binding("RoleBinding", "Role", "default")}`;
}

/**
 * Creates ServiceAccount `name` in `ns` bound to the README's RBAC rules, less
 * whatever `rbac` takes away (or none at all with `rbac: false`), waits until
 * the authorizer agrees, and returns a token kubeconfig for it (a token of
 * `kubectl create token`'s default lifetime, one hour, unless `tokenDuration`).
 */
export async function serviceAccount(
  cluster: Cluster,
  ns: string,
  name: string,
  opts: { rbac?: Partial<Rbac> | false; server?: string; tokenDuration?: string } = {},
): Promise<{ kubeconfig: string; user: string }> {
  const rbac = opts.rbac === false ? undefined : { ...README_RBAC, ...opts.rbac };
  const manifest = rbac
    ? rbacManifest(ns, name, rbac)
    : `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: ${name}, namespace: ${ns}}\n`;
  const applied = await cluster.kubectl(["apply", "-f", "-"], manifest);
  assert.equal(applied.code, 0, applied.stderr);
  const user = `system:serviceaccount:${ns}:${name}`;
  // The authorizer's view of new bindings lags a moment behind the write.
  const expected = rbac?.jobs.includes("create") ? "yes" : "no";
  await eventually(
    async () =>
      (await cluster.kubectl(["auth", "can-i", "create", "jobs", "-n", ns, "--as", user]))
        .stdout.trim() === expected,
    30_000,
    `RBAC for ${user}`,
  );
  const duration = opts.tokenDuration ? [`--duration=${opts.tokenDuration}`] : [];
  const token = await cluster.kubectl(["create", "token", name, "-n", ns, ...duration]);
  assert.equal(token.code, 0, token.stderr);
  const kubeconfig = await kubeconfigFor(cluster, {
    token: token.stdout.trim(),
    namespace: ns,
    server: opts.server,
  });
  return { kubeconfig, user };
}

/** The arguments every run over a suite's nodes shares: its template (Jobs of `duration`), its nodes, its namespace. */
export async function suiteArgs(suite: string, ns: string, duration = "200ms"): Promise<string[]> {
  const template = await tempFile(jobTemplate(suite, duration));
  return ["--job-template", template, "--node-selector", `${SUITE}=${suite}`, "--namespace", ns];
}

/**
 * The opening of a step over fresh nodes: its namespace, `nodes` nodes of the
 * suite, and the arguments every run over them shares.
 */
export async function suiteStep(
  cluster: Cluster,
  suite: string,
  opts: { namespace?: string; nodes: number; duration?: string },
): Promise<{ ns: string; args: string[] }> {
  const ns = await namespace(cluster, opts.namespace ?? suite);
  await cluster.createNodes(suiteNodes(suite, opts.nodes));
  return { ns, args: await suiteArgs(suite, ns, opts.duration) };
}
