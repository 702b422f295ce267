/**
 * Node lifecycle on a real control plane: the label a run owns is written
 * only after the node's Job succeeded and the node is Ready again (and serves
 * a required runtime handler), start-up taints are lifted only after it,
 * claims survive a killed run, cleanups remove what a run or an instance left,
 * satisfied nodes get no Job, and a node replaced under the same name is never
 * labelled; one pod per node at a time, and a success kept across a killed
 * run (`_one_pod.ts`). Every check reads the API server's view: node labels, taints,
 * Jobs, and for one case kube-apiserver's audit log.
 *
 * Each step owns its own label key, node pool and namespace, since
 * `--cleanup-job-template` acts on every node of the cluster that carries the
 * key. The dispatcher runs as a ServiceAccount bound to the README's RBAC.
 */

import assert from "node:assert/strict";
import { type Cluster, type NodeSpec, OUTCOME_LABEL } from "./cluster.ts";
import {
  eventually,
  type FollowedWatch,
  followWatch,
  jobsIn,
  jobTemplate,
  JobWatcher,
} from "./_dispatcher.ts";
import { DispatcherProcess, type Ended, failedNodes, runDispatcher } from "./_faults.ts";
import {
  clusterTest,
  namespace,
  serviceAccount,
  SUITE,
  suiteNodes as nodes,
  tempFile,
} from "./_fixtures.ts";
import { freePorts } from "./_procs.ts";
import { keptAcrossKill, onePodPerNode } from "./_one_pod.ts";

/** Where the label keys of this suite live; each step owns `${DOMAIN}/<step>`. */
const DOMAIN = "lifecycle.e2e.io";
/** The mark prefix of the two-instance step. */
const INSTANCES = `inst.${DOMAIN}`;
/** The tracking marks the dispatcher leaves on a node (default tracking prefix). */
const RESULT_LABEL = "job-dispatcher/result";
const ERROR_ANNOTATION = "job-dispatcher/error";
const FINISHED_ANNOTATION = "job-dispatcher/finished-at";
/** Every Job's pod tolerates every taint, so start-up taints do not keep it out. */
const TOLERATE_ALL = "      tolerations: [{operator: Exists}]\n";
/** Runs of this suite end within this long, or the test says which hung. */
const RUN_TIMEOUT_MS = 120_000;
/** The ServiceAccount group of the step whose requests the audit log records. */
const AUDITED_NS = "lc-skip";

interface NodeView {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: { taints?: { key: string; value?: string; effect: string }[] };
  status: {
    conditions?: { type: string; status: string }[];
    runtimeHandlers?: { name: string }[];
  };
}

/** One node, as the API server has it now. */
async function node(cluster: Cluster, name: string): Promise<NodeView> {
  const r = await cluster.kubectl(["get", "node", name, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** The value of label `key` on node `name`, or undefined. */
async function label(cluster: Cluster, name: string, key: string): Promise<string | undefined> {
  return (await node(cluster, name)).metadata.labels?.[key];
}

/** The labels of `keys` on each node of the pool, by node name; absent keys are left out. */
async function labelsOf(
  cluster: Cluster,
  pool: string,
  keys: string[],
): Promise<Record<string, Record<string, string>>> {
  const r = await cluster.kubectl(["get", "nodes", "-l", `${SUITE}=${pool}`, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  const out: Record<string, Record<string, string>> = {};
  for (const n of JSON.parse(r.stdout).items as NodeView[]) {
    const labels = n.metadata.labels ?? {};
    out[n.metadata.name] = Object.fromEntries(
      keys.filter((k) => k in labels).map((k) => [k, labels[k]]),
    );
  }
  return out;
}

/** Asserts that `check` holds at every look for `ms` (looking every 250 ms). */
async function holds(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    assert.ok(await check(), `${what} stopped holding`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Resolves once the Job of `nodeName` exists in `ns`, or once it is Complete. */
function jobOf(cluster: Cluster, ns: string, nodeName: string, complete = false): Promise<void> {
  return eventually(
    async () =>
      (await jobsIn(cluster, ns)).some((j) => j.node === nodeName && (!complete || j.complete)),
    60_000,
    `the Job of ${nodeName}${complete ? " to be Complete" : ""}`,
  );
}

/** A namespace with a ServiceAccount bound to the README's RBAC; returns its kubeconfig. */
async function place(cluster: Cluster, ns: string): Promise<string> {
  await namespace(cluster, ns);
  return (await serviceAccount(cluster, ns, "dispatcher")).kubeconfig;
}

/** The flags of a run over `selector` that labels its nodes `key=true` once done. */
function labelling(template: string, ns: string, selector: string, key: string): string[] {
  return [
    "--job-template",
    template,
    "-n",
    ns,
    "--node-selector",
    selector,
    "--node-label-key",
    key,
    "--node-label",
    "true",
  ];
}

/** Starts the dispatcher as the ServiceAccount of `kubeconfig`. */
function start(cluster: Cluster, kubeconfig: string, args: string[]): DispatcherProcess {
  return new DispatcherProcess(cluster, args, { kubeconfig, timeoutMs: RUN_TIMEOUT_MS });
}

/** Runs the dispatcher to its end as the ServiceAccount of `kubeconfig`. */
async function run(cluster: Cluster, kubeconfig: string, args: string[]): Promise<Ended> {
  const r = await runDispatcher(cluster, args, { kubeconfig, timeoutMs: RUN_TIMEOUT_MS });
  assert.ok(!r.timedOut, `the dispatcher hung:\n${r.stderr}`);
  return r;
}

/** Ends a started dispatcher's run and checks it did not hang. */
async function ended(p: DispatcherProcess): Promise<Ended> {
  const r = await p.ended;
  assert.ok(!r.timedOut, `the dispatcher hung:\n${r.stderr}`);
  return r;
}

/**
 * Every version of one node the API server sends to a watch, from the version
 * current at start, in order.
 */
class NodeWatch {
  /** The versions seen so far, oldest first. */
  readonly versions: NodeView[] = [];
  #watch: FollowedWatch;

  private constructor(cluster: Cluster, first: NodeView) {
    this.versions.push(first);
    const name = first.metadata.name;
    const url = `${cluster.server}/api/v1/nodes?watch=1&fieldSelector=metadata.name%3D${name}`;
    // A gap would hide versions, which is what this watch is for: followWatch ends on one.
    this.#watch = followWatch<NodeView>(
      cluster,
      url,
      first.metadata.resourceVersion,
      "node",
      (_, v) => void this.versions.push(v),
    );
  }

  /** Starts watching node `name` from its current version. */
  static async start(cluster: Cluster, name: string): Promise<NodeWatch> {
    return new NodeWatch(cluster, await node(cluster, name));
  }

  /** Stops watching; throws if the watch lost versions. */
  stop(): Promise<void> {
    return this.#watch.stop();
  }
}

/**
 * A ValidatingWebhookConfiguration named `e2e-refuse-nodes` on node updates
 * of one pool, pointing at a closed port with failurePolicy Fail: every node
 * write of the pool is answered 500, as a Node admission webhook that is down.
 */
function nodeWebhook(webhook: string, pool: string): string {
  const [port] = freePorts(1);
  return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: e2e-refuse-nodes}
webhooks:
  - name: ${webhook}
    clientConfig: {url: "https://127.0.0.1:${port}/refuse"}
    rules:
      - {apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [nodes], scope: Cluster}
    objectSelector: {matchLabels: {${SUITE}: ${pool}}}
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: 2
`;
}

/** Resolves after `ms`. */
function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The `key=value` requests of the audit log made by `user`, as `verb resource`. */
async function auditedRequests(cluster: Cluster, user: string): Promise<string[]> {
  const text = await Deno.readTextFile(cluster.auditLog!);
  return text.split("\n").filter(Boolean).map((l) => JSON.parse(l))
    .filter((e) => e.user?.username === user)
    .map((e) =>
      `${e.verb} ${e.objectRef?.resource ?? e.requestURI}${
        e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ""
      }`
    );
}

clusterTest("node lifecycle on a real control plane", async (t, cluster) => {
  await t.step(
    "the cluster holds a node NotReady until told, and keeps its runtime handlers",
    async () => {
      await cluster.createNodes(nodes("infra", 1, { runtimeHandlers: ["runc"] }));
      await cluster.setRuntimeHandlers("infra-000", ["kata", "runc"]);
      await cluster.setNodeReady("infra-000", false);
      const readyOf = async () =>
        (await node(cluster, "infra-000")).status.conditions?.find((c) => c.type === "Ready")
          ?.status;
      // kwok's node-initialize would make it Ready within a moment without the annotation.
      await holds(async () => (await readyOf()) === "False", 3_000, "NotReady");
      await cluster.setNodeReady("infra-000", true);
      assert.equal(await readyOf(), "True");
      const n = await node(cluster, "infra-000");
      assert.deepEqual(n.status.runtimeHandlers?.map((h) => h.name), ["kata", "runc"]);
    },
  );

  await t.step("label only after success and Ready", async (t) => {
    const KEY = `${DOMAIN}/ready`;
    const EXTRA = `${DOMAIN}/extra`;
    const ns = "lc-ready";
    const kubeconfig = await place(cluster, ns);
    const args = (pool: string, duration: string, ...more: string[]) =>
      tempFile(jobTemplate(pool, duration)).then((tpl) => [
        ...labelling(tpl, ns, `${SUITE}=${pool}`, KEY),
        ...more,
      ]);

    await t.step("a node NotReady after its Job is labelled only once Ready", async () => {
      await cluster.createNodes(nodes("ready", 2));
      const watch = await NodeWatch.start(cluster, "ready-000");
      const p = start(
        cluster,
        kubeconfig,
        await args("ready", "4s", "--extra-node-label", `${EXTRA}=yes`),
      );
      await jobOf(cluster, ns, "ready-000");
      await cluster.setNodeReady("ready-000", false);
      assert.equal(await label(cluster, "ready-000", KEY), undefined, "no label while running");
      await jobOf(cluster, ns, "ready-000", true);
      // The Ready node of the same run is labelled meanwhile; the other is not.
      await eventually(
        async () => (await label(cluster, "ready-001", KEY)) === "true",
        30_000,
        "the label on the Ready node ready-001",
      );
      await holds(
        async () => {
          const labels = (await node(cluster, "ready-000")).metadata.labels ?? {};
          return !(KEY in labels) && !(EXTRA in labels);
        },
        3_000,
        "no label on NotReady ready-000 after its Job succeeded",
      );
      assert.equal((await jobsIn(cluster, ns)).length, 2);
      await cluster.setNodeReady("ready-000", true);
      const r = await ended(p);
      await watch.stop();
      assert.equal(r.code, 0, r.stderr);
      const isReady = (v: NodeView) =>
        v.status.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      for (const v of watch.versions.filter((v) => v.metadata.labels?.[KEY])) {
        assert.ok(isReady(v), `version ${v.metadata.resourceVersion}: labelled while NotReady`);
      }
      assert.deepEqual(await labelsOf(cluster, "ready", [KEY, EXTRA]), {
        "ready-000": { [KEY]: "true", [EXTRA]: "yes" },
        "ready-001": { [KEY]: "true", [EXTRA]: "yes" },
      });
      assert.match(r.stderr, /summary: 2 succeeded, 0 failed of 2 nodes/);
    });

    await t.step("a node not Ready within --wait-node-ready-secs fails unlabelled", async () => {
      await cluster.createNodes([
        ...nodes("late", 1),
        ...nodes("late", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 1),
      ]);
      const p = start(cluster, kubeconfig, await args("late", "3s", "--wait-node-ready-secs", "3"));
      await jobOf(cluster, ns, "late-000");
      await cluster.setNodeReady("late-000", false);
      const r = await ended(p);
      assert.equal(r.code, 1, r.stderr);
      const failed = failedNodes(r.stderr);
      assert.deepEqual([...failed.keys()].sort(), ["late-000", "late-001"], r.stderr);
      assert.match(failed.get("late-000")!, /ready/i);
      const jobs = await jobsIn(cluster, ns);
      const job = jobs.find((j) => j.node === "late-000");
      assert.ok(job?.complete && !job.failed, "its Job succeeded");
      assert.ok(jobs.find((j) => j.node === "late-001")?.failed, "the other's Job failed");
      // Neither a failed Job nor a node that stayed NotReady gets the label.
      assert.deepEqual(await labelsOf(cluster, "late", [KEY]), {
        "late-000": {},
        "late-001": {},
      });
      await cluster.setNodeReady("late-000", true);
    });

    await t.step(
      "--require-node-handlers: a node serving other handlers only waits for one of them",
      async () => {
        await cluster.createNodes([
          ...nodes("hand", 1, { runtimeHandlers: ["runc"] }),
          ...nodes("hand", 1, {}, 1), // reports no handlers: passes
          ...nodes("hand", 1, { runtimeHandlers: ["kata"] }, 2),
        ]);
        const p = start(
          cluster,
          kubeconfig,
          await args("hand", "1s", "--require-node-handlers", "kata,kata-qemu"),
        );
        await jobOf(cluster, ns, "hand-000", true);
        await eventually(
          async () => {
            const l = await labelsOf(cluster, "hand", [KEY]);
            return l["hand-001"][KEY] === "true" && l["hand-002"][KEY] === "true";
          },
          30_000,
          "the labels on hand-001 (no handlers) and hand-002 (kata)",
        );
        await holds(
          async () => (await label(cluster, "hand-000", KEY)) === undefined,
          3_000,
          "no label on hand-000, which serves runc only",
        );
        await cluster.setRuntimeHandlers("hand-000", ["runc", "kata-qemu"]);
        const r = await ended(p);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(await label(cluster, "hand-000", KEY), "true");
      },
    );
  });

  await t.step(
    "a Node webhook down after the Jobs succeeded (TTL 0): one Job per node, all labelled once it is back",
    async () => {
      const KEY = `${DOMAIN}/hook`;
      const ns = "lc-hook";
      const pool = "hook";
      const kubeconfig = await place(cluster, ns);
      await cluster.createNodes(nodes(pool, 2));
      // ttlSecondsAfterFinished 0: each Job goes the moment it finished, so
      // only the dispatcher's own state remembers that it succeeded.
      const tpl = await tempFile(
        jobTemplate(pool, "8s").replace("spec:\n", "spec:\n  ttlSecondsAfterFinished: 0\n"),
      );
      const webhook = "refuse-nodes.lifecycle.e2e.io";
      const config = nodeWebhook(webhook, pool);
      // A server-side dry run of a node label goes through the webhooks.
      const refused = async () =>
        (await cluster.kubectl([
          "label",
          "node",
          `${pool}-000`,
          `${DOMAIN}/probe=x`,
          "--dry-run=server",
        ])).stderr.includes(webhook);
      const until = async (want: boolean) => {
        for (let i = 0; i < 100 && (await refused()) !== want; i++) await sleep(200);
        assert.equal(await refused(), want, `the webhook ${want ? "refuses" : "lets"} node writes`);
      };
      const watcher = await JobWatcher.start(cluster, ns);
      const p = new DispatcherProcess(cluster, [
        ...labelling(tpl, ns, `${SUITE}=${pool}`, KEY),
        "--progress-interval-secs",
        "5",
      ], { kubeconfig, timeoutMs: 400_000 });
      let installed = false;
      try {
        await jobOf(cluster, ns, `${pool}-000`);
        await jobOf(cluster, ns, `${pool}-001`);
        const applied = await cluster.kubectl(["apply", "-f", "-"], config);
        assert.equal(applied.code, 0, applied.stderr);
        installed = true;
        await until(true);
        // The client retries a node write for its 90 s budget, the progress
        // line says what the node waits for meanwhile; then the post-success
        // work fails as a whole, and the success must outlive that.
        await eventually(
          () => Promise.resolve(/post-success work .*under way/.test(p.stderr)),
          60_000,
          "the progress line to say what the nodes wait for",
        );
        await eventually(
          () => Promise.resolve(/post-success work .*retrying: .*refuse-nodes/.test(p.stderr)),
          150_000,
          "the post-success work to meet the outage",
        );
        await sleep(15_000);
      } finally {
        if (installed) {
          await cluster.kubectl(["delete", "validatingwebhookconfiguration", "e2e-refuse-nodes"]);
          await until(false);
        }
      }
      const r = await ended(p);
      await watcher.stop();
      const perNode = new Map<string, number>();
      for (const node of watcher.seen.values()) perNode.set(node, (perNode.get(node) ?? 0) + 1);
      assert.deepEqual(
        Object.fromEntries(perNode),
        { [`${pool}-000`]: 1, [`${pool}-001`]: 1 },
        `exactly one Job per node over the whole run:\n${r.stderr}`,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await labelsOf(cluster, pool, [KEY]), {
        [`${pool}-000`]: { [KEY]: "true" },
        [`${pool}-001`]: { [KEY]: "true" },
      });
    },
  );

  await t.step("taints lifted after the label", async () => {
    const KEY = `${DOMAIN}/taints`;
    const ns = "lc-taints";
    const kubeconfig = await place(cluster, ns);
    const startup = { key: `${DOMAIN}/startup`, effect: "NoSchedule" as const };
    const startupExec = { key: `${DOMAIN}/startup`, effect: "NoExecute" as const };
    const other = { key: `${DOMAIN}/other`, value: "x", effect: "NoSchedule" as const };
    const kept = { key: `${DOMAIN}/kept`, effect: "NoSchedule" as const };
    await cluster.createNodes(
      nodes("taint", 1, { taints: [startup, startupExec, other, kept] }),
    );
    const lifted = (n: NodeView) =>
      !(n.spec.taints ?? []).some((x) =>
        (x.key === startup.key && x.effect === "NoSchedule") || x.key === other.key
      );
    const watch = await NodeWatch.start(cluster, "taint-000");
    let r: Ended;
    try {
      r = await run(cluster, kubeconfig, [
        ...labelling(
          await tempFile(jobTemplate("taint", "1s", TOLERATE_ALL)),
          ns,
          `${SUITE}=taint`,
          KEY,
        ),
        "--remove-node-taints",
        `${startup.key}:NoSchedule,${other.key}`,
      ]);
      await eventually(
        () => Promise.resolve(watch.versions.some(lifted)),
        10_000,
        "the watch to see the taints lifted",
      );
    } finally {
      await watch.stop();
    }
    assert.equal(r.code, 0, r.stderr);
    for (const v of watch.versions) {
      if (lifted(v)) {
        assert.equal(
          v.metadata.labels?.[KEY],
          "true",
          `version ${v.metadata.resourceVersion} has the taints lifted but not the label`,
        );
      }
    }
    assert.ok(!lifted(watch.versions[0]), "the taints were there at first");
    const last = await node(cluster, "taint-000");
    assert.equal(last.metadata.labels?.[KEY], "true");
    assert.deepEqual(
      (last.spec.taints ?? []).map((x) => `${x.key}:${x.effect}`).sort(),
      [`${kept.key}:NoSchedule`, `${startupExec.key}:NoExecute`],
      "only the named taints are lifted: the NoExecute one of the same key and others stay",
    );
  });

  await t.step("claim survives a killed run and cleanup finds it", async () => {
    const KEY = `${DOMAIN}/claim`;
    const ns = "lc-claim";
    const kubeconfig = await place(cluster, ns);
    await cluster.createNodes(nodes("claim", 4));
    const p = start(cluster, kubeconfig, [
      "--job-template",
      await tempFile(jobTemplate("claim", "60s")),
      "-n",
      ns,
      "--node-selector",
      `${SUITE}=claim`,
      "--parallelism",
      "2",
      "--node-label-key",
      KEY,
      "--node-label",
      "true",
      "--claim-node-pending",
    ]);
    await eventually(async () => (await jobsIn(cluster, ns)).length >= 2, 60_000, "two Jobs");
    p.kill("SIGKILL");
    await p.ended;
    // Both slots hold 60 s Jobs, so no third Job was on its way at the kill.
    const claimed = (await jobsIn(cluster, ns)).map((j) => j.node).sort();
    assert.equal(claimed.length, 2);
    const before = await labelsOf(cluster, "claim", [KEY]);
    for (const [name, labels] of Object.entries(before)) {
      assert.deepEqual(labels, claimed.includes(name) ? { [KEY]: "false" } : {}, name);
    }

    const r = await run(cluster, kubeconfig, [
      "--job-template",
      await tempFile(jobTemplate("undo", "500ms")),
      "-n",
      ns,
      "--node-selector",
      KEY,
      "--node-label-key",
      KEY,
      "--remove-node-label",
    ]);
    assert.equal(r.code, 0, r.stderr);
    const undone = (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith("undo-"));
    assert.deepEqual(undone.map((j) => j.node).sort(), claimed, "cleanup Jobs on the claimed");
    const after = await labelsOf(cluster, "claim", [KEY, RESULT_LABEL]);
    for (const [name, labels] of Object.entries(after)) assert.deepEqual(labels, {}, name);
    for (const name of claimed) {
      const a = (await node(cluster, name)).metadata.annotations ?? {};
      assert.equal(a[ERROR_ANNOTATION], undefined, `${name}: ${ERROR_ANNOTATION}`);
      assert.equal(a[FINISHED_ANNOTATION], undefined, `${name}: ${FINISHED_ANNOTATION}`);
    }
  });

  await t.step("two instances sharing a key", async (t) => {
    const KEY = `${DOMAIN}/shared`;
    const A = `${INSTANCES}/a`;
    const B = `${INSTANCES}/b`;
    const ns = "lc-multi";
    const kubeconfig = await place(cluster, ns);
    await cluster.createNodes(nodes("multi", 2));
    const instance = async (suffix: string, ...more: string[]) => {
      const name = more.includes("--remove-node-label") ? `undo-${suffix}` : `inst-${suffix}`;
      return await run(cluster, kubeconfig, [
        "--job-template",
        await tempFile(jobTemplate(name, "300ms")),
        "-n",
        ns,
        "--node-label-key",
        KEY,
        "--instance-label-prefix",
        INSTANCES,
        "--multi-install-suffix",
        suffix,
        ...more,
      ]);
    };
    const marks = () => labelsOf(cluster, "multi", [KEY, A, B]);
    const pool = ["--node-selector", `${SUITE}=multi`];

    await t.step("each instance writes the key and its own mark", async () => {
      const a = await instance("a", ...pool, "--node-label", "v1");
      assert.equal(a.code, 0, a.stderr);
      assert.deepEqual(await marks(), {
        "multi-000": { [KEY]: "v1", [A]: "v1" },
        "multi-001": { [KEY]: "v1", [A]: "v1" },
      });
      const b = await instance("b", ...pool, "--node-label", "v2");
      assert.equal(b.code, 0, b.stderr);
      assert.deepEqual(await marks(), {
        "multi-000": { [KEY]: "v2", [A]: "v1", [B]: "v2" },
        "multi-001": { [KEY]: "v2", [A]: "v1", [B]: "v2" },
      });
    });

    await t.step("a cleanup leaves the key while another instance's mark is finished", async () => {
      const r = await instance("a", "--nodes", "multi-000", "--remove-node-label");
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((await marks())["multi-000"], { [KEY]: "v2", [B]: "v2" });
    });

    await t.step("the last instance's cleanup removes the key", async () => {
      const r = await instance("b", "--nodes", "multi-000", "--remove-node-label");
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((await marks())["multi-000"], {});
    });

    await t.step("a cleanup demotes the key when the other instance only claimed", async () => {
      // As instance b leaves a node it claimed (--claim-node-pending) and has not finished.
      const claim = await cluster.kubectl([
        "label",
        "node",
        "multi-001",
        `${B}=false`,
        "--overwrite",
      ]);
      assert.equal(claim.code, 0, claim.stderr);
      const r = await instance("a", "--nodes", "multi-001", "--remove-node-label");
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((await marks())["multi-001"], { [KEY]: "false", [B]: "false" });
    });
  });

  await t.step(
    "a narrowed selector cleaned by --cleanup-job-template on the next run",
    async () => {
      const KEY = `${DOMAIN}/narrow`;
      const GROUP = `${DOMAIN}/group`;
      const ns = "lc-narrow";
      const kubeconfig = await place(cluster, ns);
      await cluster.createNodes(nodes("narrow", 4));
      const tpl = await tempFile(jobTemplate("narrow", "300ms"));
      const args = (selector: string, ...more: string[]) => [
        ...labelling(tpl, ns, selector, KEY),
        ...more,
      ];
      const first = await run(cluster, kubeconfig, args(`${SUITE}=narrow`));
      assert.equal(first.code, 0, first.stderr);
      for (const name of ["narrow-002", "narrow-003"]) {
        const r = await cluster.kubectl(["label", "node", name, `${GROUP}=out`]);
        assert.equal(r.code, 0, r.stderr);
      }
      await cluster.createNodes(nodes("narrow", 1, {}, 4));
      const watcher = await JobWatcher.start(cluster, ns);
      const watch = await NodeWatch.start(cluster, "narrow-002");
      let second: Ended;
      try {
        second = await run(
          cluster,
          kubeconfig,
          args(
            `${SUITE}=narrow,${GROUP}!=out`,
            "--cleanup-job-template",
            await tempFile(jobTemplate("undo", "300ms")),
          ),
        );
      } finally {
        await watcher.stop();
        await watch.stop();
      }
      assert.equal(second.code, 0, second.stderr);
      // The --remove-node-label steps: demoted to pending before the Job, removed after it.
      const values = watch.versions.map((v) => v.metadata.labels?.[KEY] ?? "(none)")
        .filter((v, i, all) => i === 0 || v !== all[i - 1]);
      assert.deepEqual(values, ["true", "false", "(none)"]);
      const jobs = await jobsIn(cluster, ns);
      assert.deepEqual(
        jobs.filter((j) => j.name.startsWith("undo-")).map((j) => j.name).sort(),
        ["undo-narrow-002", "undo-narrow-003"],
        "cleanup Jobs, named from the cleanup template, on the nodes left out only",
      );
      assert.ok(jobs.filter((j) => j.name.startsWith("undo-")).every((j) => j.complete));
      // The watcher saw Jobs in the order the API server created them.
      const order = [...watcher.seen.values()];
      assert.deepEqual(order.at(-1), "narrow-004", `cleanup Jobs first: ${order.join(", ")}`);
      assert.deepEqual(await labelsOf(cluster, "narrow", [KEY]), {
        "narrow-000": { [KEY]: "true" },
        "narrow-001": { [KEY]: "true" },
        "narrow-002": {},
        "narrow-003": {},
        "narrow-004": { [KEY]: "true" },
      });
    },
  );

  await t.step("--skip-satisfied-nodes makes zero Jobs on a satisfied fleet", async (t) => {
    const KEY = `${DOMAIN}/skip`;
    const ns = AUDITED_NS;
    await namespace(cluster, ns);
    const { kubeconfig, user } = await serviceAccount(cluster, ns, "dispatcher");
    await cluster.createNodes([
      ...nodes("sat", 2, { labels: { [KEY]: "true" } }),
      ...nodes("sat", 1, { labels: { [KEY]: "true" }, runtimeHandlers: ["kata"] }, 2),
    ]);
    const tpl = await tempFile(jobTemplate("skip", "300ms"));
    const args = (pool: string, ...more: string[]) => [
      ...labelling(tpl, ns, `${SUITE}=${pool}`, KEY),
      "--skip-satisfied-nodes",
      "--require-node-handlers",
      "kata",
      ...more,
    ];

    await t.step("every node satisfied: exit 0, no Job, one node LIST", async () => {
      const r = await run(cluster, kubeconfig, args("sat"));
      assert.equal(r.code, 0, r.stderr);
      assert.equal((await jobsIn(cluster, ns)).length, 0);
      // The audit log is written as each request completes, before the answer.
      const requests = await auditedRequests(cluster, user);
      assert.ok(requests.length > 0, "the audit log records the dispatcher");
      // Besides the one LIST, only the SelfSubjectReview of the first line (nothing is stored).
      assert.deepEqual(
        [...new Set(requests)],
        ["create selfsubjectreviews", "list nodes"],
        requests.join("\n"),
      );
    });

    await t.step(
      "pending, other values and a missing required handler are not satisfied",
      async () => {
        await cluster.createNodes([
          ...nodes("mixed", 1, { labels: { [KEY]: "true" } }),
          ...nodes("mixed", 1, { labels: { [KEY]: "false" } }, 1),
          ...nodes("mixed", 1, { labels: { [KEY]: "old" } }, 2),
          ...nodes("mixed", 1, { labels: { [KEY]: "true" }, runtimeHandlers: ["runc"] }, 3),
        ]);
        const p = start(cluster, kubeconfig, args("mixed"));
        await jobOf(cluster, ns, "mixed-003");
        // Its Job was made because it lacked kata; once it serves kata it is done.
        await cluster.setRuntimeHandlers("mixed-003", ["runc", "kata"]);
        const r = await ended(p);
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(
          (await jobsIn(cluster, ns)).map((j) => j.node).sort(),
          ["mixed-001", "mixed-002", "mixed-003"],
        );
        assert.deepEqual(await labelsOf(cluster, "mixed", [KEY]), {
          "mixed-000": { [KEY]: "true" },
          "mixed-001": { [KEY]: "true" },
          "mixed-002": { [KEY]: "true" },
          "mixed-003": { [KEY]: "true" },
        });
      },
    );

    await t.step("with instances, a node is satisfied only by its own mark", async () => {
      const A = `${INSTANCES}/a`;
      await cluster.createNodes([
        ...nodes("isat", 1, { labels: { [KEY]: "true", [A]: "true" } }),
        // Another instance's work, or a run before instances: not this instance's.
        ...nodes("isat", 1, { labels: { [KEY]: "true" } }, 1),
      ]);
      const r = await run(cluster, kubeconfig, [
        ...args("isat"),
        "--instance-label-prefix",
        INSTANCES,
        "--multi-install-suffix",
        "a",
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(
        (await jobsIn(cluster, ns)).map((j) => j.node).filter((n) => n.startsWith("isat-")),
        ["isat-001"],
      );
      assert.deepEqual(await labelsOf(cluster, "isat", [KEY, A]), {
        "isat-000": { [KEY]: "true", [A]: "true" },
        "isat-001": { [KEY]: "true", [A]: "true" },
      });
    });
  });

  await t.step(
    "a node deleted and recreated under the same name between selection and labelling is refused",
    async () => {
      const KEY = `${DOMAIN}/replaced`;
      const ns = "lc-replaced";
      const kubeconfig = await place(cluster, ns);
      const specs: NodeSpec[] = nodes("repl", 2);
      await cluster.createNodes(specs);
      const oldUid = (await node(cluster, "repl-000")).metadata.uid;
      // Without a wait for Ready nothing reads the node between the Job's
      // success and the label, so only the write's UID test can refuse it.
      const p = start(cluster, kubeconfig, [
        ...labelling(await tempFile(jobTemplate("repl", "8s")), ns, `${SUITE}=repl`, KEY),
        "--wait-node-ready-secs",
        "0",
      ]);
      await jobOf(cluster, ns, "repl-000");
      await cluster.deleteNode("repl-000");
      // The pod garbage collector leaves the pods of a missing node for 40 s,
      // so the same pod runs on to success on the node of the same name.
      await cluster.createNodes([specs[0]]);
      const replaced = await node(cluster, "repl-000");
      assert.notEqual(replaced.metadata.uid, oldUid);
      const r = await ended(p);
      assert.equal(r.code, 1, r.stderr);
      const job = (await jobsIn(cluster, ns)).find((j) => j.node === "repl-000");
      assert.ok(job?.complete, "the Job ran to success on the new node");
      const now = await node(cluster, "repl-000");
      assert.equal(now.metadata.uid, replaced.metadata.uid);
      assert.equal(now.metadata.labels?.[KEY], undefined, "no label on the new node");
      assert.equal(now.metadata.labels?.[RESULT_LABEL], undefined, "no mark on the new node");
      assert.equal(await label(cluster, "repl-001", KEY), "true");
      assert.match(failedNodes(r.stderr).get("repl-000") ?? r.stderr, /replaced/);
    },
  );

  await t.step("nodes lacking a required fact fail without a Job", async () => {
    const KEY = `${DOMAIN}/facts`;
    const ns = "lc-facts";
    const kubeconfig = await place(cluster, ns);
    await cluster.createNodes([
      ...nodes("facts", 1, { machineID: "" }),
      ...nodes("facts", 1, { containerRuntimeVersion: "" }, 1),
      ...nodes("facts", 1, {}, 2),
    ]);
    const r = await run(cluster, kubeconfig, [
      ...labelling(await tempFile(jobTemplate("facts", "300ms")), ns, `${SUITE}=facts`, KEY),
      "--require-node-machine-id",
      "--require-node-runtime-version",
    ]);
    assert.equal(r.code, 1, r.stderr);
    assert.deepEqual((await jobsIn(cluster, ns)).map((j) => j.node), ["facts-002"]);
    const failed = failedNodes(r.stderr);
    assert.deepEqual([...failed.keys()].sort(), ["facts-000", "facts-001"], r.stderr);
    assert.match(failed.get("facts-000")!, /machine.?id/i);
    assert.match(failed.get("facts-001")!, /runtime.?version/i);
    assert.deepEqual(await labelsOf(cluster, "facts", [KEY]), {
      "facts-000": {},
      "facts-001": {},
      "facts-002": { [KEY]: "true" },
    });
  });

  await t.step("a kubelet whose runtimeRequestTimeout is below the limit is named", async () => {
    // Two fake kubelets behind the API server's node proxy: the nodes' status
    // points at them, as a real kubelet's does at itself.
    const ns = "lc-kubelet";
    await namespace(cluster, ns);
    const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
      rbac: { nodesProxy: true },
    });
    const dir = new URL("./testdata/", import.meta.url);
    const tls = {
      cert: await Deno.readTextFile(new URL("kubelet.crt", dir)),
      key: await Deno.readTextFile(new URL("kubelet.key", dir)),
    };
    // The API server proxies to no loopback or link-local address, as it
    // would not to a real kubelet: the fakes listen on this machine's own.
    const address = Deno.networkInterfaces().find((i) =>
      i.family === "IPv4" && !i.address.startsWith("127.") && !i.address.startsWith("169.254.")
    )?.address;
    assert.ok(address, "this machine has no non-loopback IPv4 address for the fake kubelets");
    const timeouts: Record<string, string> = { "kubelet-000": "2m0s", "kubelet-001": "15m0s" };
    const servers = Object.entries(timeouts).map(([, timeout]) =>
      Deno.serve(
        { port: 0, hostname: address, ...tls, onListen: () => {} },
        (req) =>
          new URL(req.url).pathname === "/configz"
            ? Response.json({ kubeletconfig: { runtimeRequestTimeout: timeout } })
            : new Response("not found", { status: 404 }),
      )
    );
    try {
      await cluster.createNodes(nodes("kubelet", 2));
      for (const [i, name] of Object.keys(timeouts).entries()) {
        const status = {
          status: {
            addresses: [{ type: "InternalIP", address }],
            daemonEndpoints: { kubeletEndpoint: { Port: servers[i].addr.port } },
          },
        };
        const patched = await cluster.kubectl([
          "patch",
          "node",
          name,
          "--subresource=status",
          "--type=merge",
          "-p",
          JSON.stringify(status),
        ]);
        assert.equal(patched.code, 0, patched.stderr);
      }
      const r = await run(cluster, kubeconfig, [
        "--job-template",
        await tempFile(jobTemplate("kubelet", "300ms")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=kubelet`,
        "--kubelet-timeout-warn-secs",
        "600",
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        r.stderr,
        /node kubelet-000: the kubelet's runtimeRequestTimeout is 2m0s, below --kubelet-timeout-warn-secs 600/,
      );
      assert.doesNotMatch(r.stderr, /node kubelet-001: the kubelet's/);
      assert.doesNotMatch(r.stderr, /cannot read the kubelet configuration/);
    } finally {
      await Promise.all(servers.map((s) => s.shutdown()));
    }
  });

  await t.step("misused label flags exit 2 and touch nothing", async (t) => {
    const KEY = `${DOMAIN}/usage`;
    const ns = "lc-usage";
    const kubeconfig = await place(cluster, ns);
    await cluster.createNodes(
      nodes("usage", 1, { taints: [{ key: `${DOMAIN}/startup`, effect: "NoSchedule" }] }),
    );
    const base = [
      "--job-template",
      await tempFile(jobTemplate("usage", "300ms", TOLERATE_ALL)),
      "-n",
      ns,
      "--node-selector",
      `${SUITE}=usage`,
    ];
    const cases: [string, string[], RegExp][] = [
      ["--node-label without --node-label-key", ["--node-label", "true"], /node-label-key/],
      [
        "--extra-node-label repeating the owned key",
        ["--node-label-key", KEY, "--node-label", "true", "--extra-node-label", `${KEY}=x`],
        /extra-node-label/,
      ],
      [
        "--remove-node-taints without --node-label",
        ["--node-label-key", KEY, "--remove-node-taints", `${DOMAIN}/startup`],
        /remove-node-taints/,
      ],
    ];
    for (const [name, more, reason] of cases) {
      await t.step(name, async () => {
        const r = await run(cluster, kubeconfig, [...base, ...more]);
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, reason);
        assert.equal((await jobsIn(cluster, ns)).length, 0);
        const n = await node(cluster, "usage-000");
        assert.equal(n.metadata.labels?.[KEY], undefined);
        assert.equal(n.spec.taints?.length, 1);
      });
    }
  });

  await t.step(
    "a task pod deleted with a grace period: no second pod on its node until the first ended",
    (t) => onePodPerNode(t, cluster),
  );

  await t.step(
    "a run killed during the post-success work, its Job removed by the TTL: the re-run counts the kept success, no second Job",
    () => keptAcrossKill(cluster),
  );
}, { audit: { userGroups: [`system:serviceaccounts:${AUDITED_NS}`] } });
