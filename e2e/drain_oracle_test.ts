/**
 * kubectl is the oracle of `--drain`: on two equivalent kwok nodes holding
 * the same pods, `kubectl drain NODE_A` and the dispatcher's `--drain` on
 * NODE_B run with the same flags, and must evict (or delete) the same pods,
 * leave the same pods, refuse for the same pods with the same reasons, and
 * give the same grace period. What kubectl did is read at run time, never
 * written down here. Then the rollout flags no other suite proves on a real
 * control plane: `--pause-file` and `--post-node-delay-secs`; and an API
 * outage while a drain waits on a budget, which pauses the run and fails no
 * node.
 */

import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { OUTCOME_LABEL } from "./cluster.ts";
import type { Cluster } from "./cluster.ts";
import {
  adminClient,
  dispatcher,
  eventually,
  jobsIn,
  jobTemplate,
  JobWatcher,
  watchEvents,
} from "./_dispatcher.ts";
import { DURATION_ANNOTATION } from "./_nodes.ts";
import { atLeast, DispatcherProcess, throttledCount } from "./_faults.ts";
import {
  clusterTest,
  namespace,
  serviceAccount,
  SUITE,
  suiteNodes,
  suiteStep,
  tempFile,
} from "./_fixtures.ts";
import { EVICTIONS, flowSchema, priorityLevel, rejectedBy } from "./_apf.ts";
import { disruptionsAllowed, holdPod, pinnedDeployment, setMinAvailable } from "./_budget.ts";

/** The pods every node of a row holds, by their `role` label. */
const ROLES = ["agent", "bare", "done", "loose", "scratch", "static", "web"] as const;

/**
 * The same pods for one node, in a namespace of that node's own (so that the
 * names match between the two nodes of a row): a Deployment's pod (`web`), a
 * DaemonSet's (`agent`), a mirror pod (`static`, the kubelet's annotation on
 * a pod without controller), a pod without controller (`bare`), a
 * Deployment's pod with an emptyDir (`scratch`), a pod without controller
 * with an emptyDir (`loose`: which rule names it shows the rules' order) and
 * a finished pod without controller (`done`). `pdb` adds a budget that
 * allows no disruption of `web`.
 */
function podsFor(ns: string, node: string, pdb: boolean): string {
  const meta = (role: string, indent: string, outcome = "serve", extra = "") =>
    `metadata:
${indent}labels: {role: ${role}}
${indent}annotations: {${OUTCOME_LABEL}: ${outcome}${extra}}`;
  const workload = (kind: string, name: string, spec = "") =>
    `apiVersion: apps/v1
kind: ${kind}
metadata: {name: ${name}, namespace: ${ns}}
spec:
  selector: {matchLabels: {role: ${name}}}
  template:
    ${meta(name, "      ")}
    spec:
      nodeSelector: {kubernetes.io/hostname: ${node}}
      containers: [{name: c, image: registry.invalid/${name}:1}]
${spec}`;
  const pod = (name: string, outcome = "serve", extra = "", spec = "") =>
    `apiVersion: v1
kind: Pod
${meta(name, "  ", outcome, extra)}
  name: ${name}
  namespace: ${ns}
spec:
  nodeName: ${node}
  restartPolicy: Never
  containers: [{name: c, image: registry.invalid/${name}:1}]
${spec}`;
  return [
    workload("Deployment", "web"),
    workload("DaemonSet", "agent"),
    workload("Deployment", "scratch", "      volumes: [{name: scratch, emptyDir: {}}]\n"),
    pod("static", "serve", `, kubernetes.io/config.mirror: mirror`),
    pod("bare"),
    pod("loose", "serve", "", "  volumes: [{name: scratch, emptyDir: {}}]\n"),
    pod("done", "succeed", `, ${DURATION_ANNOTATION}: 100ms`),
    ...(pdb
      ? [`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb, namespace: ${ns}}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {role: web}}
`]
      : []),
  ].join("---\n");
}

async function getJson<T>(cluster: Cluster, args: string[]): Promise<T> {
  const r = await cluster.kubectl(["get", ...args, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as T;
}

/** The pods of `ns` by role, once each runs (and `done` has finished). */
async function settledPods(cluster: Cluster, ns: string): Promise<Map<string, V1Pod>> {
  let pods = new Map<string, V1Pod>();
  await eventually(
    async () => {
      const list = await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", ns]);
      pods = new Map(list.items.map((p) => [p.metadata!.labels!.role, p]));
      return ROLES.every((r) =>
        pods.get(r)?.status?.phase === (r === "done" ? "Succeeded" : "Running")
      );
    },
    60_000,
    `the pods of ${ns} running`,
  );
  return pods;
}

/**
 * Records, for every pod of the cluster, the `deletionGracePeriodSeconds`
 * it carried when first seen deleted: the grace an eviction or deletion gave
 * it (kwok removes the pod right after, so only a watch sees it).
 */
function watchGrace(cluster: Cluster): { grace: Map<string, number>; stop: () => Promise<void> } {
  const grace = new Map<string, number>();
  const stop = new AbortController();
  const client = adminClient(cluster);
  const url = `${cluster.server}/api/v1/pods`;
  const done = (async () => {
    let rv = "";
    while (!stop.signal.aborted) {
      try {
        if (!rv) {
          rv = (await (await fetch(url, { client, signal: stop.signal })).json())
            .metadata.resourceVersion;
        }
        const res = await fetch(`${url}?watch=1&resourceVersion=${rv}`, {
          client,
          signal: stop.signal,
        });
        for await (const ev of watchEvents<V1Pod>(res)) {
          if (ev.type === "ERROR") {
            rv = "";
            break;
          }
          const m = ev.object.metadata!;
          rv = m.resourceVersion ?? rv;
          if (m.deletionTimestamp && !grace.has(m.uid!)) {
            grace.set(m.uid!, m.deletionGracePeriodSeconds ?? -1);
          }
        }
      } catch {
        if (stop.signal.aborted) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return {
    grace,
    stop: async () => {
      stop.abort();
      await done;
      client.close();
    },
  };
}

/** What one drain did to one node's pods, by role, comparable between the two tools. */
interface DrainEffect {
  /** The drain was refused (kubectl exited non-zero; the dispatcher failed the node). */
  refused: boolean;
  /** `reason: role` of each pod the refusal names, with the reason as printed. */
  refusals: string[];
  /**
   * `warning: role` of each pod a warning names. Deliberately apart from
   * kubectl's: kubectl names the DaemonSet pods it ignores (the dispatcher
   * would say it for every node of a fleet), and drops its own warning about
   * local storage whenever a later filter passes the pod (a TODO in
   * filters.go), which the dispatcher keeps; both are left out of this list.
   */
  warnings: string[];
  /** The roles whose pod is gone. */
  removed: string[];
  /** How each removed pod was asked to go: `evict` (pods/eviction) or `delete`. */
  how: Record<string, string>;
  /** The grace each removed pod got, from its deletionGracePeriodSeconds. */
  grace: Record<string, number>;
  /** The node is left cordoned. */
  cordoned: boolean;
}

/** A pod reference as both tools print it: `ns/name`. */
const REF = String.raw`[a-z0-9.-]+/[a-z0-9.-]+`;
const REFUSAL = new RegExp(`cannot delete (Pods [^:]+): (${REF}(?:, ${REF})*)`, "g");
const WARNING = new RegExp(
  `(deleting Pods that declare no controller|deleting Pods with local storage|ignoring DaemonSet-managed Pods): (${REF}(?:, ${REF})*)`,
  "g",
);
const NOT_COMPARED = /^(ignoring DaemonSet-managed Pods|deleting Pods with local storage):/;

/** An audit log entry, as far as read here. */
interface AuditEvent {
  verb: string;
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
}

/**
 * Sorts what happened to the pods `before` (by role, in `ns`) on `node`:
 * the refusals `output` names, the pods gone, the successful pod requests
 * of the audit log made by `agent` (a User-Agent prefix), and the grace.
 */
async function effect(
  cluster: Cluster,
  o: {
    ns: string;
    node: string;
    before: Map<string, V1Pod>;
    code: number;
    output: string;
    agent: string;
    grace: Map<string, number>;
  },
): Promise<DrainEffect> {
  const roleOf = new Map([...o.before].map(([role, p]) => [p.metadata!.name!, role]));
  // `what: role` of each pod that lines matching `re` name.
  const named = (re: RegExp) => {
    const out = new Set<string>();
    for (const m of o.output.matchAll(re)) {
      for (const ref of m[2].split(", ")) {
        const [ns, name] = ref.split("/");
        assert.equal(ns, o.ns, `a pod of another node named: ${m[0]}`);
        out.add(`${m[1]}: ${roleOf.get(name)}`);
      }
    }
    return [...out].sort();
  };
  const after = await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", o.ns]);
  const uids = new Set(after.items.map((p) => p.metadata!.uid));
  const removed = [...o.before].filter(([, p]) => !uids.has(p.metadata!.uid))
    .map(([role]) => role).sort();
  const how: Record<string, string> = {};
  for (const e of await auditEvents(cluster, o.ns)) {
    const ref = e.objectRef;
    if (!e.userAgent?.startsWith(o.agent) || ref?.resource !== "pods" || !ref.name) continue;
    if ((e.responseStatus?.code ?? 0) >= 300) continue;
    const role = roleOf.get(ref.name);
    if (!role) continue;
    if (e.verb === "create" && ref.subresource === "eviction") how[role] = "evict";
    else if (e.verb === "delete" && !ref.subresource) how[role] = "delete";
  }
  const grace: Record<string, number> = {};
  for (const role of removed) {
    const g = o.grace.get(o.before.get(role)!.metadata!.uid!);
    if (g !== undefined) grace[role] = g;
  }
  const node = await getJson<{ spec?: { unschedulable?: boolean } }>(cluster, ["node", o.node]);
  return {
    refused: o.code !== 0,
    refusals: named(REFUSAL),
    warnings: named(WARNING).filter((w) => !NOT_COMPARED.test(w)),
    removed,
    how,
    grace,
    cordoned: node.spec?.unschedulable ?? false,
  };
}

/** A line of the dispatcher that says the API is out (see e2e/outage_test.ts). */
const OUTAGE_SAID = /API outage: |API (unreachable|failing|throttling) for \S+: paused/;

/** The audit log's requests on objects of `ns`. */
async function auditEvents(cluster: Cluster, ns: string): Promise<AuditEvent[]> {
  return (await Deno.readTextFile(cluster.auditLog!)).split("\n")
    .filter((l) => l.includes(`"namespace":"${ns}"`)).map((l) => JSON.parse(l));
}

/** One flag combination, given to both tools as written. */
interface Row {
  /** The flags, spelled the same for kubectl drain and the dispatcher. */
  flags: string[];
  /** A budget that allows no disruption covers `web`. */
  pdb?: boolean;
  /** What this row proves of kubectl itself, so that the comparison means something. */
  premise?: (kubectl: DrainEffect) => void;
}

const ROWS: Row[] = [
  { flags: [], premise: (k) => assert.ok(k.refused && k.refusals.length === 3) },
  { flags: ["--force"], premise: (k) => assert.ok(k.refused) },
  { flags: ["--delete-emptydir-data"], premise: (k) => assert.ok(k.refused) },
  {
    flags: ["--force", "--delete-emptydir-data"],
    premise: (k) => assert.deepEqual(k.removed, ["bare", "done", "loose", "scratch", "web"]),
  },
  {
    flags: ["--pod-selector", "role in (web,done)"],
    premise: (k) => assert.deepEqual(k.removed, ["done", "web"]),
  },
  { flags: ["--pod-selector", "role=bare"], premise: (k) => assert.ok(k.refused) },
  {
    flags: ["--force", "--delete-emptydir-data", "--disable-eviction"],
    pdb: true,
    premise: (k) => assert.equal(k.how.web, "delete", "kubectl deletes despite the budget"),
  },
  {
    flags: ["--force", "--delete-emptydir-data", "--grace-period", "7"],
    premise: (k) => assert.equal(k.grace.web, 7),
  },
  {
    flags: ["--force", "--delete-emptydir-data", "--disable-eviction", "--grace-period", "5"],
    premise: (k) => assert.deepEqual([k.how.web, k.grace.web], ["delete", 5]),
  },
];

clusterTest(
  "kubectl drain is the oracle of --drain; --pause-file; --post-node-delay-secs; an outage mid-drain",
  async (
    t,
    cluster,
  ) => {
    const jobs = await namespace(cluster, "jobs");
    const template = await tempFile(jobTemplate("oracle", "200ms"));
    /** The dispatcher's arguments that drain `node` alone and then give it its Job. */
    const drainOne = (node: string, timeoutSecs: number) => [
      "--job-template",
      template,
      "--node-selector",
      `kubernetes.io/hostname=${node}`,
      "--namespace",
      jobs,
      "--drain",
      "--drain-timeout-secs",
      String(timeoutSecs),
    ];
    await cluster.createNodes(ROWS.flatMap((_, i) => suiteNodes(`row${i}`, 2)));
    // Every row's pods at once: the rows then run one after the other.
    const rows = await Promise.all(ROWS.map(async (row, i) => {
      const [a, b] = [`row${i}-000`, `row${i}-001`];
      const [nsA, nsB] = await Promise.all([
        namespace(cluster, `row${i}-a`),
        namespace(cluster, `row${i}-b`),
      ]);
      const applied = await cluster.kubectl(
        ["apply", "-f", "-"],
        `${podsFor(nsA, a, !!row.pdb)}---\n${podsFor(nsB, b, !!row.pdb)}`,
      );
      assert.equal(applied.code, 0, applied.stderr);
      return { ...row, a, b, nsA, nsB };
    }));
    const watch = watchGrace(cluster);
    try {
      for (const row of rows) {
        await t.step(`kubectl drain ${row.flags.join(" ") || "(no flags)"}`, async () => {
          const [beforeA, beforeB] = await Promise.all([
            settledPods(cluster, row.nsA),
            settledPods(cluster, row.nsB),
          ]);
          if (row.pdb) {
            for (const ns of [row.nsA, row.nsB]) {
              await disruptionsAllowed(cluster, ns, "web-pdb", 1, 0);
            }
          }
          // kubectl refuses a node with DaemonSet pods unless told to ignore
          // them; the dispatcher always ignores them (a DaemonSet would put its
          // pod straight back), so kubectl gets --ignore-daemonsets.
          const [k, d] = await Promise.all([
            cluster.kubectl(["drain", row.a, "--ignore-daemonsets", "--timeout=60s", ...row.flags]),
            dispatcher(cluster, [...drainOne(row.b, 60), ...row.flags]),
          ]);
          const kubectl = await effect(cluster, {
            ns: row.nsA,
            node: row.a,
            before: beforeA,
            code: k.code,
            output: k.stdout + k.stderr,
            agent: "kubectl",
            grace: watch.grace,
          });
          const ours = await effect(cluster, {
            ns: row.nsB,
            node: row.b,
            before: beforeB,
            code: d.code,
            output: d.stderr,
            agent: "job-dispatcher",
            grace: watch.grace,
          });
          console.log(`${row.flags.join(" ") || "(no flags)"}: kubectl ${JSON.stringify(kubectl)}`);
          row.premise?.(kubectl);
          // kubectl drain leaves the node cordoned; the dispatcher runs the
          // node's Job and then lifts its own cordon, unless the node failed.
          assert.equal(kubectl.cordoned, true);
          assert.deepEqual(
            ours,
            { ...kubectl, cordoned: kubectl.refused },
            `kubectl:\n${k.stdout}${k.stderr}\ndispatcher:\n${d.stderr}`,
          );
          const mine = (await jobsIn(cluster, jobs)).filter((j) => j.node === row.b);
          assert.equal(mine.length, ours.refused ? 0 : 1, "a Job only after a drain that went");
          if (ours.refused) assert.equal(d.code, 1, d.stderr);
        });
      }
    } finally {
      await watch.stop();
    }

    await t.step(
      "a pod already terminating: kubectl and --drain both wait for it to their timeout; only kubectl evicts it again",
      async () => {
        await cluster.createNodes(suiteNodes("held", 2));
        const side = async (ns: string, node: string) => {
          await namespace(cluster, ns);
          const applied = await cluster.kubectl(
            ["apply", "-f", "-"],
            `apiVersion: v1
kind: Pod
metadata:
  name: held
  namespace: ${ns}
  finalizers: [e2e.job-dispatcher.io/hold]
  annotations: {${OUTCOME_LABEL}: serve}
spec:
  nodeName: ${node}
  containers: [{name: c, image: registry.invalid/held:1}]
`,
          );
          assert.equal(applied.code, 0, applied.stderr);
          await eventually(
            async () =>
              (await getJson<V1Pod>(cluster, ["pod", "held", "-n", ns])).status?.phase ===
                "Running",
            30_000,
            `pod held of ${ns} running`,
          );
          const del = await cluster.kubectl(["delete", "pod", "held", "-n", ns, "--wait=false"]);
          assert.equal(del.code, 0, del.stderr);
        };
        await Promise.all([side("held-a", "held-000"), side("held-b", "held-001")]);
        try {
          const [k, d] = await Promise.all([
            cluster.kubectl(["drain", "held-000", "--ignore-daemonsets", "--timeout=5s"]),
            dispatcher(cluster, drainOne("held-001", 5)),
          ]);
          assert.notEqual(k.code, 0, k.stdout + k.stderr);
          assert.match(
            k.stderr,
            /error when waiting for pod "held" in namespace "held-a" to terminate/,
          );
          assert.equal(d.code, 1, d.stderr);
          assert.match(
            d.stderr,
            /drain did not finish within 5 s; pods still on the node: held-b\/held \(terminating\)/,
          );
          const evictions = async (ns: string) =>
            (await auditEvents(cluster, ns)).filter((e) =>
              e.objectRef?.subresource === "eviction" && e.verb === "create"
            ).map((e) => e.userAgent?.split("/")[0]);
          // By design: evicting a pod that is already going asks nothing new.
          assert.ok((await evictions("held-a")).includes("kubectl"), "kubectl evicts it again");
          assert.deepEqual(await evictions("held-b"), [], "the dispatcher only waits");
        } finally {
          for (const ns of ["held-a", "held-b"]) {
            await cluster.kubectl([
              "patch",
              "pod",
              "held",
              "-n",
              ns,
              "--type=json",
              "-p",
              '[{"op":"remove","path":"/metadata/finalizers"}]',
            ]);
          }
        }
      },
    );

    await t.step(
      "--pause-file: no Job while the file exists (the progress line names it); removed, the run finishes",
      async () => {
        const { ns, args } = await suiteStep(cluster, "pause", { nodes: 3 });
        const file = await tempFile("", ".pause");
        const watcher = await JobWatcher.start(cluster, ns);
        try {
          const run = new DispatcherProcess(cluster, [
            ...args,
            "--pause-file",
            file,
            "--parallelism",
            "1",
            "--progress-interval-secs",
            "0.5",
          ]);
          // The progress line: `paused by file F (rm F resumes): 0/3 succeeded, …`.
          const f = file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
          const paused = new RegExp(`paused by file ${f} \\(rm ${f} resumes\\): 0/3 succeeded`);
          // Several progress lines, each the dispatcher's word that it is
          // still paused: the time a Job would have needed to appear.
          assert.ok(await run.waitFor(atLeast(6, paused)), run.stderr);
          assert.equal(watcher.seen.size, 0, `no Job while ${file} exists`);
          const resumedAt = Date.now();
          await Deno.remove(file);
          const r = await run.ended;
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /resumed: the pause was lifted/);
          assert.equal(watcher.seen.size, 3, "every node got its Job after the file went");
          const added = [...watcher.times.values()].map((j) => j.added);
          assert.ok(added.every((a) => a >= resumedAt), "no Job before the file was removed");
        } finally {
          await watcher.stop();
        }
      },
    );

    await t.step(
      "--post-node-delay-secs 3 --parallelism 1: each next Job ≥ 3 s after the previous one finished",
      async () => {
        const { ns, args } = await suiteStep(cluster, "delay", { nodes: 3 });
        const watcher = await JobWatcher.start(cluster, ns);
        let r;
        try {
          r = await dispatcher(cluster, [
            ...args,
            "--parallelism",
            "1",
            "--post-node-delay-secs",
            "3",
          ]);
        } finally {
          await watcher.stop();
        }
        assert.equal(r.code, 0, r.stderr);
        const jobs = [...watcher.times.values()].sort((x, y) => x.added - y.added);
        assert.equal(jobs.length, 3);
        // Seen by this watch's clock: the next Job's ADDED event against the
        // first event that showed the previous one finished (both as late as
        // the watch delivers them, so the gap is the dispatcher's own).
        const gaps = jobs.slice(1).map((j, i) => (j.added - jobs[i].finished!) / 1000);
        console.log(`--post-node-delay-secs 3: gaps ${gaps.map((g) => g.toFixed(2)).join(", ")} s`);
        assert.ok(gaps.every((g) => g >= 3 - 0.25), `gaps ${gaps} s`);
      },
    );

    await t.step(
      "kube-apiserver frozen while a drain waits on a budget: the run pauses, the node succeeds once the budget allows, exit 0",
      async () => {
        const { ns, args } = await suiteStep(cluster, "freeze", { nodes: 1 });
        const hold = await holdPod(cluster, ns, "hold", "freeze-000");
        const p = new DispatcherProcess(cluster, [
          ...args,
          "--drain",
          "--drain-timeout-secs",
          "240",
          "--progress-interval-secs",
          "1",
        ], { timeoutMs: 200_000 });
        let frozenAt = 0;
        let said = false;
        try {
          // The budget has refused the dispatcher's eviction: the drain waits.
          await eventually(
            async () =>
              (await auditEvents(cluster, ns)).some((e) =>
                e.userAgent?.startsWith("job-dispatcher") &&
                e.objectRef?.subresource === "eviction" &&
                e.responseStatus?.code === 429
              ),
            60_000,
            "the budget to refuse the dispatcher's eviction",
          );
          const from = p.stderr.length;
          cluster.signalApiServer("SIGSTOP");
          frozenAt = Date.now();
          // Bounded: a dispatcher that never says it would hold the freeze forever.
          said = await Promise.race([
            p.waitFor((s) => OUTAGE_SAID.test(s.slice(from))),
            new Promise<boolean>((r) => setTimeout(() => r(false), 90_000)),
          ]);
          cluster.signalApiServer("SIGCONT");
          console.log(`frozen ${((Date.now() - frozenAt) / 1000).toFixed(1)} s`);
          frozenAt = 0;
          assert.ok(said, `the dispatcher never said the API is out:\n${p.stderr}`);
          await setMinAvailable(cluster, ns, "hold-pdb", 0);
        } finally {
          // Whatever failed, the API server must not stay frozen under the suite.
          if (frozenAt) cluster.signalApiServer("SIGCONT");
        }
        const r = await p.ended;
        for (
          const l of r.stderr.split("\n").filter((l) => /API outage|starts resume|evict/.test(l))
        ) {
          console.log(`  ${l}`);
        }
        assert.ok(!r.timedOut, r.stderr);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, /summary: 1 succeeded, 0 failed/);
        assert.match(r.stderr, /starts resume: /, "the log says the rollout resumed");
        const left = (await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", ns])).items;
        assert.ok(!left.some((x) => x.metadata!.uid === hold.metadata!.uid), "the pod was evicted");
        const node = await getJson<{ spec?: { unschedulable?: boolean } }>(cluster, [
          "node",
          "freeze-000",
        ]);
        assert.equal(node.spec?.unschedulable ?? false, false, "uncordoned after its Job");
      },
    );

    await planSteps(t, cluster);
  },
  { audit: {} },
);

/**
 * A Priority and Fairness level with no seat of its own and nothing to
 * borrow, and a FlowSchema that sends the evictions (`create pods/eviction`)
 * of ServiceAccount `sa` of `ns` to it: each is rejected with 429 (no
 * DisruptionBudget cause, a `Retry-After`) while it is in place.
 */
function evictionThrottle(level: string, ns: string, sa: string): string {
  return `${priorityLevel(level, 0, 0, 0)}---
${flowSchema(level, { precedence: 500, ns, sa, rules: EVICTIONS })}`;
}

clusterTest("a throttled eviction is retried within the drain", async (t, cluster) => {
  await t.step(
    "API Priority and Fairness rejects the dispatcher's evictions (429) for a while: the drains complete, no node requeued, no pause",
    async () => {
      const ns = await namespace(cluster, "apf");
      const nodes = suiteNodes("apf", 3);
      await cluster.createNodes(nodes);
      for (const { name } of nodes) {
        const applied = await cluster.kubectl(
          ["apply", "-f", "-"],
          pinnedDeployment(ns, `w-${name}`, name, 2),
        );
        assert.equal(applied.code, 0, applied.stderr);
      }
      await eventually(
        async () =>
          (await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", ns])).items
            .filter((p) => p.status?.phase === "Running").length === 6,
        60_000,
        "6 pods running",
      );
      const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", {
        rbac: { drain: true },
      });
      const level = "e2e-evictions-throttled";
      const apf = await cluster.kubectl(
        ["apply", "-f", "-"],
        evictionThrottle(level, ns, "dispatcher"),
      );
      assert.equal(apf.code, 0, apf.stderr);
      const lifted = async () => {
        await cluster.kubectl([
          "delete",
          `flowschema/${level}`,
          `prioritylevelconfiguration/${level}`,
          "--ignore-not-found",
        ]);
      };
      let r;
      try {
        const p = new DispatcherProcess(cluster, [
          "--job-template",
          await tempFile(jobTemplate("apf", "500ms")),
          "--node-selector",
          `${SUITE}=apf`,
          "--kubeconfig",
          kubeconfig,
          "--drain",
          "--grace-period",
          "0",
          "--parallelism",
          "3",
          "--drain-timeout-secs",
          "120",
        ], { timeoutMs: 150_000 });
        // Every node's drain meets the throttling (as the API server counts
        // it), and the dispatcher waits it out a while.
        await eventually(
          async () => (await rejectedBy(cluster, level)) >= 3,
          60_000,
          `3 evictions rejected by priority level ${level}`,
        );
        await new Promise((r) => setTimeout(r, 6000));
        await lifted();
        r = await p.ended;
      } finally {
        await lifted();
      }
      for (const l of r.stderr.split("\n").filter((l) => /evict|API |resume|throttled/.test(l))) {
        console.log(`  ${l}`);
      }
      assert.ok(!r.timedOut, r.stderr);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
      const rejected = throttledCount(r.stderr);
      console.log(
        `evictions throttled: the dispatcher counted ${rejected} 429s; ` +
          `the API server rejected ${await rejectedBy(cluster, level)}`,
      );
      assert.match(r.stderr, /node apf-\d+: cannot evict \S+: throttled by the API server \(429\)/);
      assert.ok(rejected >= 3, `the 429s are counted:\n${r.stderr}`);
      assert.doesNotMatch(r.stderr, OUTAGE_SAID, "no pause");
      // A requeued node is drained afresh, and says "evicting" again.
      const evicting = r.stderr.split("\n").filter((l) => /: evicting pod /.test(l));
      assert.equal(evicting.length, 6, `each pod's eviction said once:\n${r.stderr}`);
      const jobs = await jobsIn(cluster, ns);
      assert.deepEqual(jobs.map((j) => j.node).sort(), nodes.map((n) => n.name));
    },
  );
});

/** The pods of `ns` as `ns/name` by node, once `count` of them run. */
async function runningPods(cluster: Cluster, ns: string, count: number) {
  let byNode = new Map<string, { ref: string; uid: string }[]>();
  await eventually(
    async () => {
      const list = await getJson<{ items: V1Pod[] }>(cluster, ["pods", "-n", ns]);
      const running = list.items.filter((p) => p.status?.phase === "Running");
      byNode = new Map();
      for (const p of running) {
        const at = byNode.get(p.spec!.nodeName!) ?? [];
        at.push({ ref: `${ns}/${p.metadata!.name}`, uid: p.metadata!.uid! });
        byNode.set(p.spec!.nodeName!, at);
      }
      return running.length === count;
    },
    60_000,
    `${count} pods of ${ns} running`,
  );
  return byNode;
}

/** What `kubectl drain NODE --dry-run=server` says it would evict, and the pods a budget refuses. */
async function kubectlDryDrain(cluster: Cluster, node: string) {
  // kubectl retries a budget's 429 every 5 s until --timeout: one try or two.
  const k = await cluster.kubectl([
    "drain",
    node,
    "--dry-run=server",
    "--ignore-daemonsets",
    "--timeout=6s",
  ]);
  const out = k.stdout + k.stderr;
  const evicting = [...out.matchAll(/^evicting pod (\S+)/gm)].map((m) => m[1]);
  const refused = [
    ...out.matchAll(/error when evicting pods\/"([^"]+)" -n "([^"]+)".*disruption budget/g),
  ].map((m) => `${m[2]}/${m[1]}`);
  return {
    code: k.code,
    evicting: [...new Set(evicting)].sort(),
    refused: [...new Set(refused)],
    out,
  };
}

/** A plan node as `-o json` prints it, as far as read here. */
interface PlanNode {
  node: string;
  job: string;
  wave?: number;
  order: number;
  action?: string;
  drain?: { evict: string[]; refusedNow: { pod: string; budget?: string; message: string }[] };
}

/** `--dry-run=plan -o json`'s object, as far as read here. */
interface PlanJson {
  kind: string;
  waves: { wave: number; label: string; nodes: PlanNode[] }[];
  skipped: { node: string; reason: string }[];
  estimate: { sampledNodes: number; nodeMedianSeconds: number; seconds: number } | null;
  counts: { actions: Record<string, number>; toRun: number };
}

/** The audit log's lines from line `from` on. */
async function auditFrom(cluster: Cluster, from: number): Promise<PlanAudit[]> {
  return (await Deno.readTextFile(cluster.auditLog!)).split("\n").slice(from)
    .filter((l) => l.trim()).map((l) => JSON.parse(l));
}

/** An audit entry with who asked and the URI, as the plan's check reads it. */
interface PlanAudit extends AuditEvent {
  user?: { username?: string };
  requestURI?: string;
}

const auditLines = async (cluster: Cluster) =>
  (await Deno.readTextFile(cluster.auditLog!)).split("\n").length - 1;

/** --dry-run=plan on the real control plane: the budgets, the oracle, the audit log, a real run after. */
async function planSteps(t: Deno.TestContext, cluster: Cluster): Promise<void> {
  await t.step(
    "--dry-run=plan --drain names the budget refusing each node now, as kubectl drain --dry-run=server; the dispatcher's user writes nothing (audit log)",
    async () => {
      const { ns, args } = await suiteStep(cluster, "plan", { nodes: 3 });
      await holdPod(cluster, ns, "hold-a", "plan-000");
      await holdPod(cluster, ns, "hold-b", "plan-001");
      const applied = await cluster.kubectl(
        ["apply", "-f", "-"],
        pinnedDeployment(ns, "free", "plan-002"),
      );
      assert.equal(applied.code, 0, applied.stderr);
      const before = await runningPods(cluster, ns, 3);
      const { kubeconfig, user } = await serviceAccount(cluster, ns, "planner", {
        rbac: { drain: true },
      });
      const from = await auditLines(cluster);
      const env = { KUBECONFIG: kubeconfig };
      const plan = [...args, "--drain", "--dry-run=plan"];
      const r = await dispatcher(cluster, [...plan, "-o", "json"], { env });
      // Without the optional get poddisruptionbudgets: a warning, and every
      // refusal "refused now" (exit 0), never "blocked for good".
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /Pre-flight: no permission to .*poddisruptionbudgets/);
      const text = await dispatcher(cluster, plan, { env });
      assert.equal(text.code, 0, text.stderr);
      console.log(text.stdout);
      const view = JSON.parse(r.stdout) as PlanJson;
      const nodes = new Map(view.waves.flatMap((w) => w.nodes).map((n) => [n.node, n]));
      assert.deepEqual([...nodes.keys()], ["plan-000", "plan-001", "plan-002"]);
      for (const [node, pdb] of [["plan-000", "hold-a-pdb"], ["plan-001", "hold-b-pdb"]]) {
        const refused = nodes.get(node)!.drain!.refusedNow;
        assert.deepEqual(refused.map((x) => x.budget), [`${ns}/${pdb}`], r.stdout);
        assert.match(
          refused[0].message,
          new RegExp(`blocked by PodDisruptionBudget ${ns}/${pdb}: The disruption budget ${pdb} `),
        );
        assert.match(
          text.stdout,
          new RegExp(`^\\S.* ${node} +\\S+ +1 +${ns}/${pdb} +start$`, "m"),
        );
      }
      assert.deepEqual(nodes.get("plan-002")!.drain!.refusedNow, []);
      // Asked by a user who may read the budgets: each holds its one pod
      // (minAvailable 1 of 1), which no eviction ever passes: blocked for
      // good, and the plan fails (exit 1), as the run would fail those nodes.
      const judged = await dispatcher(cluster, plan);
      assert.equal(judged.code, 1, judged.stderr);
      for (const pdb of ["hold-a-pdb", "hold-b-pdb"]) {
        assert.match(
          judged.stdout,
          new RegExp(`blocked for good: .*${pdb}.*; minAvailable 1 of the 1 pod it matches`),
        );
      }
      assert.match(judged.stdout, /^Blocked for good: 2 nodes/m);
      // kubectl is the oracle: the same pods to evict, the same pods a budget refuses.
      for (const [node, n] of nodes) {
        const k = await kubectlDryDrain(cluster, node);
        console.log(
          `kubectl drain ${node} --dry-run=server: ${JSON.stringify(k.evicting)} refused ${
            JSON.stringify(k.refused)
          }`,
        );
        assert.deepEqual([...n.drain!.evict].sort(), k.evicting, k.out);
        assert.deepEqual(n.drain!.refusedNow.map((x) => x.pod), k.refused, k.out);
      }
      // Nothing changed: no Job, no cordon, every pod where it was.
      assert.deepEqual(await jobsIn(cluster, ns), []);
      const after = await runningPods(cluster, ns, 3);
      assert.deepEqual(after, before);
      const cordoned = await getJson<{ items: { spec?: { unschedulable?: boolean } }[] }>(cluster, [
        "nodes",
        "-l",
        `${SUITE}=plan`,
      ]);
      assert.ok(cordoned.items.every((n) => !n.spec?.unschedulable), "no node cordoned");
      // The audit log: every request the dispatcher's user made that is not a
      // read is a dry-run eviction, which stores nothing.
      // (A SelfSubjectReview, the "connected as" line, is a create that stores
      // nothing too, and so is each SelfSubjectAccessReview: the run's
      // permission check before its first cordon, which the plan makes too.)
      const mine = (await auditFrom(cluster, from)).filter((e) => e.user?.username === user);
      assert.ok(mine.some((e) => e.verb === "list" && e.objectRef?.resource === "nodes"));
      assert.ok(
        mine.some((e) => e.verb === "list" && e.objectRef?.resource === "jobs"),
        "the plan read the Jobs a re-run would adopt or count",
      );
      const reviews = ["selfsubjectreviews", "selfsubjectaccessreviews"];
      const writes = mine.filter((e) =>
        !["get", "list", "watch"].includes(e.verb) && !reviews.includes(e.objectRef?.resource!)
      );
      console.log(`audit: ${mine.length} requests by ${user}, ${writes.length} not reads`);
      assert.equal(writes.length, 2 * 3, "one dry-run eviction per pod, per run");
      for (const w of writes) {
        assert.equal(
          `${w.verb} ${w.objectRef?.resource}/${w.objectRef?.subresource}`,
          "create pods/eviction",
        );
        assert.match(w.requestURI ?? "", /\?dryRun=All$/);
      }
      assert.deepEqual(
        writes.map((w) => w.responseStatus?.code).sort(),
        [201, 201, 429, 429, 429, 429],
      );
    },
  );

  await t.step(
    "the plan's waves and skips are what the run then does; --estimate-from its report adds the waves' rounds and the soak",
    async () => {
      const { ns, args } = await suiteStep(cluster, "pr", { nodes: 4 });
      const taint = { key: "e2e.job-dispatcher.io/broken", effect: "NoSchedule" as const };
      await cluster.createNodes(suiteNodes("pr", 1, { taints: [taint] }, 4));
      const flags = [...args, "--canary", "1", "--parallelism", "2", "--wave-soak-secs", "1"];
      const planned = await dispatcher(cluster, [...flags, "--dry-run=plan", "-o", "json"]);
      assert.equal(planned.code, 0, planned.stderr);
      const plan = JSON.parse(planned.stdout) as PlanJson;
      assert.deepEqual(plan.waves.map((w) => [w.label, w.nodes.map((n) => n.node)]), [
        ["the canary", ["pr-000"]],
        ["wave 2 of 2", ["pr-001", "pr-002", "pr-003"]],
      ]);
      assert.deepEqual(plan.skipped.map((s) => s.node), ["pr-004"]);
      assert.equal(plan.estimate, null);
      assert.deepEqual(await jobsIn(cluster, ns), [], "the plan created no Job");
      const report = await tempFile("", ".json");
      const run = await dispatcher(cluster, [...flags, "--report", report]);
      assert.equal(run.code, 0, run.stderr);
      const done = JSON.parse(await Deno.readTextFile(report)) as {
        nodes: {
          name: string;
          wave?: number;
          outcome: string;
          reason: string | null;
          start: string | null;
          end: string | null;
        }[];
      };
      const ran = done.nodes.filter((n) => n.outcome !== "skipped");
      assert.deepEqual(
        ran.map((n) => [n.name, n.wave]).sort(),
        plan.waves.flatMap((w) => w.nodes.map((n) => [n.node, n.wave])).sort(),
      );
      assert.deepEqual(
        done.nodes.filter((n) => n.outcome === "skipped").map((n) => [n.name, n.reason]),
        plan.skipped.map((s) => [s.node, s.reason]),
      );
      // A plan now says what a re-run does: every node's Job succeeded, so it
      // is counted, neither drained nor run again (the engine's first sight).
      const replanned = await dispatcher(cluster, [...flags, "--dry-run=plan", "-o", "json"]);
      assert.equal(replanned.code, 0, replanned.stderr);
      const again0 = JSON.parse(replanned.stdout) as PlanJson;
      assert.deepEqual(
        again0.waves.flatMap((w) => w.nodes.map((n) => [n.node, n.action])),
        ["pr-000", "pr-001", "pr-002", "pr-003"].map((n) => [n, "succeeded"]),
      );
      assert.deepEqual(again0.counts.actions, { succeeded: 4 });
      // Without the Jobs (their TTL, or deleted) a re-run starts every node again.
      const deleted = await cluster.kubectl(["delete", "jobs", "-n", ns, "--all", "--wait"]);
      assert.equal(deleted.code, 0, deleted.stderr);
      // The next plan's estimate from this run: the median node, one round for
      // the canary, its soak, two rounds of two for the other three.
      const estimated = await dispatcher(cluster, [
        ...flags,
        "--dry-run=plan",
        "-o",
        "json",
        "--estimate-from",
        report,
      ]);
      assert.equal(estimated.code, 0, estimated.stderr);
      const secs = ran.map((n) => (Date.parse(n.end!) - Date.parse(n.start!)) / 1000).sort((a, b) =>
        a - b
      );
      const median = (secs[1] + secs[2]) / 2;
      const e = (JSON.parse(estimated.stdout) as PlanJson).estimate!;
      assert.equal(e.sampledNodes, 4);
      assert.equal(e.nodeMedianSeconds, median);
      assert.equal(e.seconds, median + 1 + 2 * median);
      // A real run with the flag says the estimate and runs unchanged.
      const again = await dispatcher(cluster, [...flags, "--estimate-from", report]);
      assert.equal(again.code, 0, again.stderr);
      assert.match(
        again.stderr,
        /estimate: \S+ for 4 nodes \(per-node median .* of 4 nodes in /,
      );
    },
  );
}
