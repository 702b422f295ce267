/**
 * Saying what happened, on a real control plane: failure reasons from the
 * pods, stalls with the scheduler's reason, Events on the Nodes, marks on the
 * Nodes, the report files, and a run without permission to record Events.
 */

import assert from "node:assert/strict";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { type Cluster, type NodeSpec, OUTCOME_LABEL, startCluster } from "./cluster.ts";
import { dispatcher, eventually, jobTemplate } from "./_dispatcher.ts";

const SUITE = "e2e.job-dispatcher.io/suite";

function nodes(suite: string, count: number, extra: Partial<NodeSpec> = {}, first = 0): NodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `${suite}-${String(first + i).padStart(3, "0")}`,
    ...extra,
    labels: { [SUITE]: suite, ...extra.labels },
  }));
}

async function namespace(cluster: Cluster, name: string): Promise<string> {
  assert.equal((await cluster.kubectl(["create", "namespace", name])).code, 0);
  await eventually(
    async () =>
      (await cluster.kubectl(["get", "serviceaccount", "default", "-n", name])).code === 0,
    30_000,
    `serviceaccount default in ${name}`,
  );
  return name;
}

async function file(text: string, suffix = ".yaml"): Promise<string> {
  const path = await Deno.makeTempFile({ suffix });
  await Deno.writeTextFile(path, text);
  return path;
}

async function node(cluster: Cluster, name: string) {
  return JSON.parse((await cluster.kubectl(["get", "node", name, "-o", "json"])).stdout);
}

/** A kubeconfig for a ServiceAccount bound to `rules` in `ns` plus nodes get/list/patch. */
async function serviceAccount(cluster: Cluster, ns: string, rules: string): Promise<string> {
  const manifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: dispatcher, namespace: ${ns}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ${ns}-nodes}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [get, list, watch, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ${ns}-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${ns}-nodes}
subjects: [{kind: ServiceAccount, name: dispatcher, namespace: ${ns}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: dispatcher, namespace: ${ns}}
rules:
${rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dispatcher, namespace: ${ns}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: dispatcher}
subjects: [{kind: ServiceAccount, name: dispatcher, namespace: ${ns}}]
`;
  const applied = await cluster.kubectl(["apply", "-f", "-"], manifest);
  assert.equal(applied.code, 0, applied.stderr);
  const token = (await cluster.kubectl(["create", "token", "dispatcher", "-n", ns])).stdout.trim();
  const ca = btoa(await Deno.readTextFile(`${cluster.dir}/pki/ca.crt`));
  return await file(`apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "${cluster.server}", certificate-authority-data: ${ca}}}]
users: [{name: sa, user: {token: "${token}"}}]
contexts: [{name: sa, context: {cluster: e2e, user: sa, namespace: ${ns}}}]
current-context: sa
`);
}

Deno.test({
  name: "what happened to every node, on a real control plane",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const cluster = await startCluster();
    let ok = false;
    try {
      const ns = await namespace(cluster, "report");
      await cluster.createNodes([
        ...nodes("rep", 2),
        ...nodes("rep", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 2),
      ]);
      const json = `${await Deno.makeTempDir()}/report.json`;
      const junit = `${await Deno.makeTempDir()}/report.xml`;
      const args = ["--job-template", await file(jobTemplate("rep", "300ms")), "-n", ns];
      const run = await dispatcher(cluster, [
        ...args,
        "--node-selector",
        `${SUITE}=rep`,
        "--report",
        json,
      ]);

      await t.step(
        "a failed node's reason names the container, its exit code and its message",
        async () => {
          assert.equal(run.code, 1, run.stderr);
          const reason = /work exited 3: simulated failure on rep-002 \[BackoffLimitExceeded\]/;
          assert.match(
            run.stderr,
            new RegExp(`failed node rep-002: job rep-rep-002: ${reason.source}`),
          );
          const report = JSON.parse(await Deno.readTextFile(json));
          const entry = report.nodes.find((n: { name: string }) => n.name === "rep-002");
          assert.match(entry.reason, reason);
          assert.equal(entry.outcome, "failed");
          assert.equal(entry.attempts, 1);
          assert.ok(entry.uid && entry.start && entry.end, "UID, start and end recorded");
          await eventually(
            async () =>
              /work exited 3/.test(
                (await node(cluster, "rep-002")).metadata.annotations?.["job-dispatcher/error"] ??
                  "",
              ),
            15_000,
            "the error annotation on the Node",
          );
          const marked = await node(cluster, "rep-002");
          assert.match(marked.metadata.annotations["job-dispatcher/error"], reason);
          assert.equal(marked.metadata.labels["job-dispatcher/result"], "failed");
          assert.ok(Date.parse(marked.metadata.annotations["job-dispatcher/finished-at"]) > 0);
          const good = await node(cluster, "rep-000");
          assert.equal(good.metadata.labels["job-dispatcher/result"], "succeeded");
          assert.equal(good.metadata.annotations["job-dispatcher/error"], undefined);
        },
      );

      await t.step("Events on the Nodes show in kubectl describe node", async () => {
        await eventually(
          async () =>
            /JobFailed/.test((await cluster.kubectl(["describe", "node", "rep-002"])).stdout),
          15_000,
          "JobFailed in kubectl describe node",
        );
        const described = (await cluster.kubectl(["describe", "node", "rep-002"])).stdout;
        assert.match(described, /Warning\s+JobFailed\s+.*job rep-rep-002 failed: work exited 3/);
        assert.match(
          (await cluster.kubectl(["describe", "node", "rep-000"])).stdout,
          /Normal\s+JobSucceeded/,
        );
      });

      await t.step("the JUnit report parses and has one test case per node", async () => {
        await cluster.createNodes(
          nodes("rep", 1, { taints: [{ key: "gpu", value: "true", effect: "NoSchedule" }] }, 3),
        );
        const r = await dispatcher(cluster, [
          ...args,
          "--node-selector",
          `${SUITE}=rep`,
          "--report",
          junit,
          "--report-format",
          "junit",
        ]);
        assert.equal(r.code, 1, r.stderr);
        const text = await Deno.readTextFile(junit);
        assert.equal(XMLValidator.validate(text), true);
        const suite =
          new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text)
            .testsuites.testsuite;
        const cases = suite.testcase as {
          name: string;
          failure?: { message: string };
          skipped?: unknown;
        }[];
        assert.deepEqual(cases.map((c) => c.name).sort(), [
          "rep-000",
          "rep-001",
          "rep-002",
          "rep-003",
        ]);
        assert.match(cases.find((c) => c.name === "rep-002")!.failure!.message, /work exited 3/);
        assert.ok(
          cases.find((c) => c.name === "rep-003")!.skipped,
          "the tainted node is a skipped case",
        );
      });

      await t.step(
        "a stalled node (unschedulable pod) is reported as pending with the scheduler's reason",
        async () => {
          await cluster.createNodes(nodes("stall", 1));
          const big = jobTemplate("stall", "300ms").replace(
            '          command: ["/bin/true"]\n',
            '          command: ["/bin/true"]\n          resources: {requests: {cpu: "64"}}\n',
          );
          const r = await dispatcher(cluster, [
            "--job-template",
            await file(big),
            "-n",
            ns,
            "--node-selector",
            `${SUITE}=stall`,
            "--pin",
            "affinity",
            "--stall-warn-secs",
            "2",
            "--node-timeout-secs",
            "6",
          ]);
          assert.equal(r.code, 1, r.stderr);
          assert.match(
            r.stderr,
            /node stall-000: job stall-stall-000 pending for \d+ s: Unschedulable: .*Insufficient cpu/,
          );
          await eventually(
            async () =>
              /JobPending/.test((await cluster.kubectl(["describe", "node", "stall-000"])).stdout),
            15_000,
            "JobPending in kubectl describe node",
          );
        },
      );

      await t.step(
        "the owner Job shows the rollout: an Event and a progress annotation",
        async () => {
          const owner = await cluster.kubectl(
            ["apply", "-f", "-"],
            `apiVersion: batch/v1
kind: Job
metadata: {name: hook, namespace: ${ns}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: hook, image: registry.invalid/hook:1}]
`,
          );
          assert.equal(owner.code, 0, owner.stderr);
          const r = await dispatcher(cluster, [
            ...args,
            "--node-selector",
            `${SUITE}=rep`,
            "--owner-job-name",
            "hook",
            "--parallelism",
            "2",
          ]);
          assert.equal(r.code, 1, r.stderr);
          await eventually(
            async () =>
              /RolloutFailed/.test(
                (await cluster.kubectl(["describe", "job", "hook", "-n", ns])).stdout,
              ),
            15_000,
            "RolloutFailed in kubectl describe job",
          );
          const described = (await cluster.kubectl(["describe", "job", "hook", "-n", ns])).stdout;
          assert.match(
            described,
            /Normal\s+RolloutStarted\s+.*dispatching one Job to each of 3 nodes/,
          );
          assert.match(described, /Warning\s+RolloutFailed\s+.*2 succeeded, 1 failed of 3 nodes/);
          const hook = JSON.parse(
            (await cluster.kubectl(["get", "job", "hook", "-n", ns, "-o", "json"])).stdout,
          );
          assert.match(
            hook.metadata.annotations["job-dispatcher/progress"],
            /2 succeeded, 1 failed of 3 nodes/,
          );
        },
      );

      await t.step(
        "without permission to record Events the rollout succeeds and says so once",
        async () => {
          const quiet = await namespace(cluster, "report-quiet");
          await cluster.createNodes(nodes("quiet", 3));
          const kubeconfig = await serviceAccount(
            cluster,
            quiet,
            `  - {apiGroups: [batch], resources: [jobs], verbs: [get, list, watch, create, delete, patch]}
  - {apiGroups: [""], resources: [pods], verbs: [get, list]}`,
          );
          const r = await dispatcher(cluster, [
            "--job-template",
            await file(jobTemplate("quiet", "300ms")),
            "--node-selector",
            `${SUITE}=quiet`,
            "--kubeconfig",
            kubeconfig,
          ]);
          assert.equal(r.code, 0, r.stderr);
          assert.equal((r.stderr.match(/cannot record events/g) ?? []).length, 1, r.stderr);
          assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
        },
      );
      ok = true;
    } finally {
      if (!ok) console.error(await cluster.logs(30));
      await cluster.stop({ removeDir: ok });
    }
  },
});
