/**
 * `job-dispatcher rbac` is the one source of the dispatcher's RBAC:
 * - the chart's rendered RBAC grants its ServiceAccount exactly what `rbac`
 *   prints for the flags the chart passes (nothing missing, nothing extra),
 *   and its viewer roles exactly what `rbac --viewer` prints (helm template,
 *   no cluster);
 * - on a bare cluster, `rbac`'s output is enough for a run with the same
 *   flags under that ServiceAccount's own token, and taking any one rule out
 *   makes the pre-flight (`--dry-run=plan`) name it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import { CHART, helmRunner, objects } from "./_helm.ts";
import { grantsTo } from "./_rbac.ts";
import {
  clusterTest,
  cordonedNodes,
  kubeconfigFor,
  namespace,
  SUITE,
  suiteNodes,
  tempDir,
  tempFile,
} from "./_fixtures.ts";
import type { Cluster } from "./cluster.ts";
import { dispatcher, dispatcherCommand, eventually, jobsIn, jobTemplate } from "./_dispatcher.ts";

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

const NS = "ops";
const RELEASE = "rel";
const FULL = `${RELEASE}-job-dispatcher`;

const TEMPLATE = `apiVersion: batch/v1
kind: Job
metadata: {name: upg}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: ["true"]}]
`;

/** Runs `job-dispatcher rbac args` (no cluster asked) and returns its objects. */
async function rbacCommand(args: string[]): Promise<Obj[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...dispatcherCommand(), "rbac", ...args],
    stdin: "null",
    env: { NO_COLOR: "1" },
  }).output();
  const text = new TextDecoder();
  assert.equal(out.code, 0, text.decode(out.stderr));
  return objects(text.decode(out.stdout));
}

/** What `rbac` grants for the flags the chart's hook Job runs with, and the template it mounts. */
async function rbacFor(chart: Obj[]): Promise<Set<string>> {
  const hook = chart.find((o) => o.kind === "Job")!;
  const cm = chart.find((o) => o.kind === "ConfigMap" && o.data?.["job.yaml"])!;
  const files: Record<string, string> = {};
  for (const [key, text] of Object.entries(cm.data as Record<string, string>)) {
    files[`/etc/job-dispatcher/${key}`] = await tempFile(text);
  }
  const args: string[] = hook.spec.template.spec.containers[0].args.map((a: string) =>
    a.replace("$(POD_NAME)", "the-pod").replace(
      /\/etc\/job-dispatcher\/[^,]+$/,
      (f) => files[f] ?? f,
    )
  );
  return grantsTo(await rbacCommand([...args, "--service-account", FULL]), NS, FULL);
}

/** The differences of two sets of grants, both ways. */
function diff(chart: Set<string>, rbac: Set<string>) {
  return {
    "missing from the chart": [...rbac].filter((p) => !chart.has(p)).sort(),
    "extra in the chart": [...chart].filter((p) => !rbac.has(p)).sort(),
  };
}

Deno.test("the chart's RBAC is `job-dispatcher rbac`'s for the flags it passes", async (t) => {
  const render = helmRunner(await tempDir("rbac-helm"));
  const cases: [string, Obj][] = [
    ["defaults (owner by name)", {}],
    ["owner.mode=pod", { owner: { mode: "pod" } }],
    ["owner.mode=none", { owner: { mode: "none" } }],
    ["rbac.drain with --drain", { rbac: { drain: true }, extraArgs: ["--drain"] }],
    [
      "gates, pausing the owner",
      { gates: { prometheusUrl: "http://prom:9090", queries: ["up == 0"] } },
    ],
    ["verification.podSelector", { verification: { podSelector: "app=validator" } }],
  ];
  for (const [what, values] of cases) {
    await t.step(what, async () => {
      const file = await tempFile(stringify({
        jobTemplate: TEMPLATE,
        selection: { nodeSelectors: ["pool=a"] },
        ...values,
      }));
      const chart = objects(await render(["template", RELEASE, CHART, "-n", NS, "-f", file]));
      const granted = grantsTo(chart, NS, FULL);
      // The chart's own: patch on this revision's template ConfigMap, named by
      // the hook Job's annotation, which only the chart creates (run/owner_guard.ts).
      for (const p of granted) {
        if (/^patch \/configmaps .*-job-template @/.test(p)) granted.delete(p);
      }
      assert.deepEqual(diff(granted, await rbacFor(chart)), {
        "missing from the chart": [],
        "extra in the chart": [],
      });
    });
  }
  await t.step("the viewer roles are `rbac --viewer`'s", async () => {
    const file = await tempFile(stringify({ jobTemplate: TEMPLATE }));
    const chart = objects(await render(["template", RELEASE, CHART, "-n", NS, "-f", file]));
    // The chart's test ServiceAccount is bound to the viewer roles, and to nothing else.
    const granted = grantsTo(chart, NS, `${FULL}-test`);
    const viewer = await rbacCommand(["--viewer", "-n", NS, "--service-account", "v"]);
    assert.deepEqual(diff(granted, grantsTo(viewer, NS, "v")), {
      "missing from the chart": [],
      "extra in the chart": [],
    });
  });
});

const DOMAIN = "e2e.job-dispatcher.io";
const LABEL = `${DOMAIN}/rbac-done`;
const TAINT = `${DOMAIN}/rbac-startup`;

/**
 * Whether `user` may `verb` `resource` (the object `name` of it, if given;
 * `-n ns` unless cluster-wide), as the authorizer says now.
 */
async function canI(
  cluster: Cluster,
  user: string,
  verb: string,
  resource: string,
  ns?: string,
  name?: string,
) {
  const where = ns ? ["-n", ns] : ["--all-namespaces"];
  // kubectl reads "pods/eviction" as the pod named eviction: the subresource is a flag.
  const [base, sub] = resource.split("/");
  const subresource = sub ? [`--subresource=${sub}`] : [];
  const r = await cluster.kubectl([
    "auth",
    "can-i",
    verb,
    name ? `${base}/${name}` : base,
    ...subresource,
    ...where,
    "--as",
    user,
  ]);
  return r.stdout.trim() === "yes";
}

/** Applies `docs` and waits until the authorizer grants (or denies) `probe`. */
async function applyUntil(
  cluster: Cluster,
  docs: readonly Obj[],
  user: string,
  probe: { verb: string; resource: string; ns?: string; name?: string; allowed: boolean },
): Promise<void> {
  const r = await cluster.kubectl(
    ["apply", "-f", "-"],
    docs.map((d) => stringify(d)).join("---\n"),
  );
  assert.equal(r.code, 0, r.stderr);
  // The authorizer's view of a changed Role lags a moment behind the write.
  await eventually(
    async () =>
      await canI(cluster, user, probe.verb, probe.resource, probe.ns, probe.name) === probe.allowed,
    30_000,
    `${probe.verb} ${probe.resource}${probe.name ? ` ${probe.name}` : ""} ` +
      `${probe.allowed ? "granted" : "denied"} to ${user}`,
  );
}

/** Every rule of every Role and ClusterRole of `docs`, as where it is. */
function rulesOf(docs: readonly Obj[]) {
  return docs.flatMap((d, doc) =>
    d.kind === "Role" || d.kind === "ClusterRole"
      ? (d.rules as Obj[]).map((rule, i) => ({ doc, i, rule, ns: d.metadata.namespace }))
      : []
  );
}

clusterTest("job-dispatcher rbac on a bare cluster", async (t, cluster) => {
  const ns = await namespace(cluster, "e2e-rbac");
  await cluster.createNodes(
    suiteNodes("rbac", 2, { taints: [{ key: TAINT, effect: "NoSchedule" }] }),
  );
  const tolerate = "      tolerations: [{operator: Exists}]\n";
  const template = await tempFile(jobTemplate("rbac", "200ms", tolerate));
  const flags = [
    ...["--job-template", template, "-n", ns, "--node-selector", `${SUITE}=rbac`],
    ...["--drain", "--node-label-key", LABEL, "--node-label", "true"],
    ...["--remove-node-taints", `${TAINT}:NoSchedule`, "--verify-job-template", template],
  ];
  const printed = await dispatcher(cluster, ["rbac", ...flags, "--service-account", "upg"]);
  assert.equal(printed.code, 0, printed.stderr);
  const docs = objects(printed.stdout);
  const user = `system:serviceaccount:${ns}:upg`;
  await applyUntil(cluster, docs, user, { verb: "create", resource: "jobs", ns, allowed: true });
  const token = await cluster.kubectl(["create", "token", "upg", "-n", ns]);
  assert.equal(token.code, 0, token.stderr);
  const kubeconfig = await kubeconfigFor(cluster, { token: token.stdout.trim() });
  const env = { KUBECONFIG: kubeconfig };

  await t.step("its output is enough for a run with the same flags", async () => {
    const r = await dispatcher(cluster, flags, { env });
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /Pre-flight|forbidden|cannot record|cannot watch/i, r.stderr);
    const jobs = await jobsIn(cluster, ns);
    assert.equal(jobs.filter((j) => j.complete).length, 4, "2 Jobs and 2 verification Jobs");
    assert.deepEqual(await cordonedNodes(cluster, "rbac"), [], "uncordoned again");
    const nodes = JSON.parse(
      (await cluster.kubectl(["get", "nodes", "-l", `${SUITE}=rbac`, "-o", "json"])).stdout,
    ).items as Obj[];
    for (const n of nodes) {
      assert.equal(n.metadata.labels[LABEL], "true", n.metadata.name);
      assert.equal((n.spec.taints ?? []).some((x: Obj) => x.key === TAINT), false, "taint lifted");
    }
  });

  await t.step("taking any one rule out makes the pre-flight name it", async (t) => {
    const rules = rulesOf(docs);
    assert.ok(rules.length >= 7, `${rules.length} rules`);
    for (const { doc, i, rule, ns: where } of rules) {
      const resource = rule.resources[0] as string;
      // A rule limited by resourceNames (the run record, the gate latch) is asked about that object.
      const name = rule.resourceNames?.[0] as string | undefined;
      const what = `${rule.verbs.join(",")} ${resource}${name ? ` ${name}` : ""}` +
        `${where ? ` in ${where}` : ""}`;
      await t.step(what, async () => {
        const less = structuredClone(docs);
        less[doc].rules.splice(i, 1);
        const probe = { verb: rule.verbs[0], resource, ns: where, name };
        await applyUntil(cluster, less, user, { ...probe, allowed: false });
        try {
          const r = await dispatcher(cluster, [...flags, "--dry-run=plan"], { env });
          const [base, sub] = resource.split("/");
          const names = (verb: string) =>
            // The pre-flight's own words, or the plan step's 403 where the
            // plan needs the rule before the pre-flight runs (list nodes).
            new RegExp(`(cannot|permission to|,) ${verb} ${base}${sub ? `/${sub}` : ""} `)
              .test(r.stderr) ||
            r.stderr.includes(`grant the verb "${verb}" on "${base}"`);
          const named = rule.verbs.filter(names);
          assert.ok(named.length > 0, `${what} is not named:\n${r.stderr}`);
          if (/Missing permission|Pre-flight: no permission/.test(r.stderr)) {
            assert.deepEqual(named, rule.verbs, `every verb of ${what} named:\n${r.stderr}`);
          } else {
            // Only the nodes' rule is used by the plan step (the selection's
            // LIST) before the pre-flight can ask: its 403 names the verb.
            assert.equal(resource, "nodes", `${what}: named by the pre-flight:\n${r.stderr}`);
            assert.equal(r.code, 3, r.stderr);
          }
        } finally {
          await applyUntil(cluster, docs, user, { ...probe, allowed: true });
        }
      });
    }
  });

  await t.step(
    "--required-only: no patch nodes for flags that write none; the run passes and warns of " +
      "each rule the header names",
    async () => {
      const plain = [
        ...["--job-template", template, "-n", ns, "--node-selector", `${SUITE}=rbac`],
        ...["--name-prefix", "req"],
      ];
      const out = await dispatcher(cluster, [
        "rbac",
        ...plain,
        "--service-account",
        "req",
        "--required-only",
      ]);
      assert.equal(out.code, 0, out.stderr);
      const left = out.stdout.split("\n").filter((l) => l.startsWith("#   ")).map((l) =>
        l.slice(4)
      );
      assert.ok(left.includes("patch nodes (cluster-scoped; for the node marks)"), out.stdout);
      const less = objects(out.stdout);
      const patches = rulesOf(less).filter(({ rule }) =>
        rule.resources.includes("nodes") && rule.verbs.includes("patch")
      );
      assert.deepEqual(patches, [], "no patch nodes");
      const req = `system:serviceaccount:${ns}:req`;
      await applyUntil(cluster, less, req, { verb: "create", resource: "jobs", ns, allowed: true });
      const tok = await cluster.kubectl(["create", "token", "req", "-n", ns]);
      assert.equal(tok.code, 0, tok.stderr);
      const r = await dispatcher(cluster, plain, {
        env: { KUBECONFIG: await kubeconfigFor(cluster, { token: tok.stdout.trim() }) },
      });
      assert.equal(r.code, 0, r.stderr);
      const jobs = (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("req"));
      assert.equal(jobs.filter((j) => j.complete).length, 2, "a Job per node");
      // The pre-flight's warning names each rule the header named, in the same words.
      for (const need of left) {
        assert.ok(r.stderr.includes(need), `${need} not warned:\n${r.stderr}`);
      }
    },
  );
});
