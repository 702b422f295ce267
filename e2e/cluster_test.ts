// Smoke test of the e2e control plane itself: real Job and garbage collector
// controllers, kwok pods that end as their node's outcome label says.
// Run: deno test --allow-all e2e/cluster_test.ts

import assert from "node:assert/strict";
import { type Cluster, DURATION_ANNOTATION, OUTCOME_LABEL, startCluster } from "./cluster.ts";

const DEADLINE_MS = 60_000;

/** Polls `fn` until it returns a value other than undefined, or fails after the deadline. */
async function poll<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await fn();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`Cannot observe ${what} within ${DEADLINE_MS} ms${last ? `: ${last}` : ""}`);
}

// deno-lint-ignore no-explicit-any
type Obj = any;

async function getJson(cluster: Cluster, args: string[]): Promise<Obj | undefined> {
  const { code, stdout, stderr } = await cluster.kubectl(["get", ...args, "-o", "json"]);
  if (code !== 0) {
    if (stderr.includes("NotFound")) return undefined;
    throw new Error(`Cannot kubectl get ${args.join(" ")}: ${stderr}`);
  }
  return JSON.parse(stdout);
}

async function apply(cluster: Cluster, object: Obj): Promise<void> {
  const { code, stderr } = await cluster.kubectl(["create", "-f", "-"], JSON.stringify(object));
  assert.equal(code, 0, stderr);
}

function job(name: string, node: string, extra: Obj = {}): Obj {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace: "default", ...extra.metadata },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { annotations: { [DURATION_ANNOTATION]: "500ms" } },
        spec: {
          nodeName: node,
          restartPolicy: "Never",
          containers: [{ name: "main", image: "registry.example/agent:1", command: ["agent"] }],
        },
      },
    },
  };
}

function condition(job: Obj, type: string): boolean {
  return job?.status?.conditions?.some((c: Obj) => c.type === type && c.status === "True");
}

async function podsOf(cluster: Cluster, jobName: string): Promise<Obj[]> {
  const list = await getJson(cluster, ["pods", "-l", `job-name=${jobName}`]);
  return list?.items ?? [];
}

Deno.test({
  name: "cluster runs Jobs to their node's outcome and garbage-collects dependents",
  // The API client's connection pool and the reaping of detached components
  // outlive individual steps by design; stop() releases them.
  sanitizeResources: false,
  sanitizeOps: false,
}, async (t) => {
  const cluster = await startCluster();
  let ok = false;
  try {
    await cluster.createNodes([
      { name: "node-ok" },
      { name: "node-fail", labels: { [OUTCOME_LABEL]: "fail" } },
      { name: "node-stall", labels: { [OUTCOME_LABEL]: "stall" } },
    ]);

    await t.step("nodes are Ready with the requested node info", async () => {
      const nodes = await getJson(cluster, ["nodes"]);
      assert.equal(nodes.items.length, 3);
      const ids = new Set(nodes.items.map((n: Obj) => n.status.nodeInfo.machineID));
      assert.equal(ids.size, 3, "machine IDs are unique");
      for (const node of nodes.items) {
        assert.equal(node.status.nodeInfo.containerRuntimeVersion, "containerd://2.1.0");
        assert.equal(node.metadata.labels["kubernetes.io/hostname"], node.metadata.name);
        assert.ok(condition(node, "Ready"), `${node.metadata.name} is Ready`);
      }
    });

    await apply(cluster, job("ok", "node-ok"));
    await apply(cluster, job("fail", "node-fail"));
    await apply(cluster, job("stall", "node-stall"));

    await t.step("a Job on an ok node completes", async () => {
      await poll("job ok Complete", async () => {
        const j = await getJson(cluster, ["job", "ok"]);
        return condition(j, "Complete") ? j : undefined;
      });
      const [pod] = await podsOf(cluster, "ok");
      assert.equal(pod.status.phase, "Succeeded");
      assert.match(pod.status.podIP, /^10\.244\./);
      assert.equal(pod.status.containerStatuses[0].state.terminated.exitCode, 0);
    });

    await t.step("a Job on a fail node fails with exit code 3 and a message", async () => {
      await poll("job fail Failed", async () => {
        const j = await getJson(cluster, ["job", "fail"]);
        return condition(j, "Failed") ? j : undefined;
      });
      const [pod] = await podsOf(cluster, "fail");
      assert.equal(pod.status.phase, "Failed");
      const terminated = pod.status.containerStatuses[0].state.terminated;
      assert.equal(terminated.exitCode, 3);
      assert.equal(terminated.message, "simulated failure on node-fail");
    });

    await t.step("a Job on a stall node stays Pending", async () => {
      const pod = await poll("the stall pod to be annotated", async () => {
        const [p] = await podsOf(cluster, "stall");
        return p?.metadata.annotations?.[OUTCOME_LABEL] === "stall" ? p : undefined;
      });
      assert.ok(pod);
      await new Promise((r) => setTimeout(r, 3000));
      const [later] = await podsOf(cluster, "stall");
      assert.equal(later.status.phase, "Pending");
      const j = await getJson(cluster, ["job", "stall"]);
      assert.equal(j.status.active, 1);
      assert.ok(!condition(j, "Complete") && !condition(j, "Failed"));
    });

    await t.step("a dependent Job is garbage-collected with its owner", async () => {
      await apply(cluster, job("owner", "node-ok"));
      const owner = await getJson(cluster, ["job", "owner"]);
      await apply(
        cluster,
        job("dependent", "node-stall", {
          metadata: {
            ownerReferences: [{
              apiVersion: "batch/v1",
              kind: "Job",
              name: "owner",
              uid: owner.metadata.uid,
            }],
          },
        }),
      );
      await poll("the dependent's pod", async () => (await podsOf(cluster, "dependent"))[0]);
      const del = await cluster.kubectl(["delete", "job", "owner", "--cascade=background"]);
      assert.equal(del.code, 0, del.stderr);
      await poll("the dependent Job to be deleted", async () => {
        return (await getJson(cluster, ["job", "dependent"])) === undefined ? true : undefined;
      });
      await poll("the dependent's pods to be deleted", async () => {
        return (await podsOf(cluster, "dependent")).length === 0 ? true : undefined;
      });
    });

    await t.step("foreground deletion of a Job with a Pending pod completes", async () => {
      const del = await cluster.kubectl(["delete", "job", "stall", "--cascade=foreground"]);
      assert.equal(del.code, 0, del.stderr);
      assert.equal(await getJson(cluster, ["job", "stall"]), undefined);
      assert.deepEqual(await podsOf(cluster, "stall"), []);
    });

    await t.step("deleteNode() removes a node", async () => {
      await cluster.deleteNode("node-fail");
      const nodes = await getJson(cluster, ["nodes"]);
      assert.deepEqual(nodes.items.map((n: Obj) => n.metadata.name).sort(), [
        "node-ok",
        "node-stall",
      ]);
    });

    await t.step("metrics() returns the API server's metrics", async () => {
      const text = await cluster.metrics();
      assert.match(text, /^apiserver_request_total\{/m);
    });

    await t.step("restartApiServer() brings the API back on the same URL", async () => {
      const before = cluster.server;
      await cluster.restartApiServer();
      assert.equal(cluster.server, before);
      await apply(cluster, job("after-restart", "node-ok"));
      await poll("job after-restart Complete", async () => {
        const j = await getJson(cluster, ["job", "after-restart"]);
        return condition(j, "Complete") ? j : undefined;
      });
    });

    await t.step("compactEtcd() makes reads and watches from older versions expire", async () => {
      const raw = await cluster.kubectl(["get", "--raw", "/apis/batch/v1/jobs"]);
      const old = Number(JSON.parse(raw.stdout).metadata.resourceVersion);
      await apply(cluster, job("after-compaction", "node-ok"));
      const revision = await cluster.compactEtcd();
      assert.ok(revision > old);
      const list = await cluster.kubectl([
        "get",
        "--raw",
        `/apis/batch/v1/jobs?resourceVersion=${old}&resourceVersionMatch=Exact`,
      ]);
      assert.notEqual(list.code, 0);
      assert.match(list.stderr, /Expired|too old/);
      const { stdout, code } = await cluster.kubectl([
        "get",
        "--raw",
        `/apis/batch/v1/jobs?watch=1&resourceVersion=${old}&timeoutSeconds=1`,
      ]);
      // A too-old watch is refused either up front (HTTP 410) or as an ERROR event.
      assert.ok(code !== 0 || stdout.includes('"code":410'), stdout);
    });

    ok = true;
  } finally {
    if (!ok) console.error(`component logs:\n${await cluster.logs(40)}`);
    await cluster.stop({ removeDir: ok });
  }

  await t.step("stop() leaves no component running", async () => {
    // Every component's command line names a file in the cluster directory.
    const ps = await new Deno.Command("pgrep", { args: ["-fa", `${cluster.dir}/`] }).output();
    assert.equal(new TextDecoder().decode(ps.stdout).trim(), "");
  });
});
