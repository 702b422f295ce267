import assert from "node:assert/strict";
import type { V1Job, V1Node } from "@kubernetes/client-node";
import { trackingKeys } from "../job.ts";
import { previewSource, runPlanPreview, skippedNodes } from "./plan_preview.ts";
import { PermissionError, SELF_SUBJECT_ACCESS_REVIEWS } from "./preflight.ts";
import { status, withServer } from "../testing/loopback.ts";
import { pod } from "../testing/pods.ts";
import { domainOf, NO_DOMAIN } from "../engine/safety.ts";
import { estimateLine } from "../preview/preview.ts";
import { Logger } from "../report/log.ts";
import { EXIT } from "../report/summary.ts";

const quiet = new Logger("text", () => {});
import type { Plan } from "./plan.ts";
import type { RunConfig } from "./config.ts";

const node = (name: string): V1Node => ({ metadata: { name, uid: `uid-${name}` } });
const [a, b, c, t] = ["a", "b", "c", "t"].map(node);

/** A plan as far as the preview reads it: a tainted node, one already done, two to run. */
const keys = trackingKeys("job-dispatcher");

const PLAN = {
  namespace: "ops",
  prefix: "up",
  keys,
  run: { keys, prefix: "up", templateHash: "h1" },
  selection: { labelSelectors: ["pool=gpu"], pageSize: 500, ignoreTaints: false },
  resolved: {
    matched: [a, b, c, t],
    listings: [],
    eligible: [a, b, c],
    skipped: [{ node: t, taint: { key: "gpu", value: "broken", effect: "NoSchedule" } }],
  },
  eligible: [a, c],
  targets: [
    { node: { name: "a", uid: "uid-a" }, name: "up-a", job: () => ({}), wave: 1 },
    { node: { name: "c", uid: "uid-c" }, name: "up-c", job: () => ({}), wave: 2 },
  ],
  cleanupTargets: [],
} as unknown as Plan;

const OPTS = {
  parallelism: 3,
  waveSoakSecs: 0,
  waves: { sizes: [{ count: 1 }, { percent: 100 }], canary: true },
  nodeLabels: { key: "example.com/done", value: "v2" },
  maintenance: { windows: [] },
} as unknown as RunConfig;

Deno.test({
  name: "skippedNodes() gives each matched node without a Job the reason the run's log gives",
  permissions: "none",
  fn() {
    assert.deepEqual(skippedNodes(OPTS, PLAN), [
      { node: "t", reason: "taint gpu=broken:NoSchedule is not tolerated by the template" },
      { node: "b", reason: "already done (example.com/done=v2)" },
    ]);
  },
});

Deno.test({
  name: "previewSource() keeps the dispatch order and each target's wave",
  permissions: "none",
  fn() {
    const src = previewSource(OPTS, PLAN, new Map());
    assert.deepEqual(src.targets, [
      { node: "a", job: "up-a", wave: 1, action: "start" },
      { node: "c", job: "up-c", wave: 2, action: "start" },
    ]);
    assert.equal(src.canary, true);
    assert.equal(src.selection, "--node-selector pool=gpu");
    assert.equal(src.matched.length, 4);
  },
});

Deno.test({
  name:
    "previewSource() with --max-per-topology gives each target its domain as the engine counts it, and the estimate runs at most M per domain",
  permissions: "none",
  fn() {
    const zone = "topology.kubernetes.io/zone";
    const labels: Record<string, Record<string, string>> = {
      a: { [zone]: "z1" },
      b: { [zone]: "z1" },
      c: { [zone]: "z2" },
    };
    const plan = {
      ...FOUR,
      // As the plan step gives the engine its domains: the label, or one domain for all without.
      domain: (t: { node: { name: string } }) => domainOf(labels[t.node.name], zone),
    } as unknown as Plan;
    const opts = {
      ...OPTS,
      parallelism: 4,
      waves: undefined,
      maxPerTopology: { key: zone, max: 1 },
    };
    const src = previewSource(opts as unknown as RunConfig, plan, new Map(), {
      from: "r.json",
      seconds: [60],
      medianSecs: 60,
    });
    assert.deepEqual(src.targets.map((t) => [t.node, t.domain]), [
      ["a", "z1"],
      ["b", "z1"],
      ["c", "z2"],
      ["d", NO_DOMAIN],
    ]);
    // Three domains, 1 each: 3 at once, and z1's two nodes take two rounds.
    assert.equal(
      estimateLine({ ...src, maintenance: { ...src.maintenance, postNodeDelaySecs: 0 } }),
      "estimate: 2m00s for 4 nodes (per-node median 1m00s of 1 node in r.json; " +
        `3 at once, at most 1 per ${zone})`,
    );
  },
});

/** A Job of this run's prefix for `node`, as the dispatcher made it, with a condition or running. */
function jobOf(node: string, condition?: "Complete" | "Failed", hash = "h1"): V1Job {
  return {
    metadata: {
      name: `up-${node}`,
      uid: `job-${node}`,
      labels: { [keys.owner]: "up" },
      annotations: {
        [keys.nodeName]: node,
        [keys.nodeUid]: `uid-${node}`,
        [keys.templateHash]: hash,
      },
    },
    status: condition ? { conditions: [{ type: condition, status: "True" }] } : { active: 1 },
  };
}

/** Four targets, each with the Job named. */
const FOUR = {
  ...PLAN,
  targets: ["a", "b", "c", "d"].map((n) => ({
    node: { name: n, uid: `uid-${n}` },
    name: `up-${n}`,
    job: () => ({}),
  })),
} as unknown as Plan;
const JOBS = new Map(
  [jobOf("a", "Complete"), jobOf("b", "Failed"), jobOf("c"), jobOf("d", "Complete", "h0")].map(
    (j) => [j.metadata!.name!, j],
  ),
);

Deno.test({
  name:
    "previewSource() says what a re-run does with each node's Job: a success and a failure counted, a running Job adopted, a stale one replaced",
  permissions: "none",
  fn() {
    const actions = (retryFailed: boolean) =>
      previewSource(
        { ...OPTS, maintenance: { windows: [], retryFailed } } as unknown as RunConfig,
        FOUR,
        JOBS,
      )
        .targets.map((t) => [t.node, t.action]);
    assert.deepEqual(actions(false), [
      ["a", "succeeded"],
      ["b", "failed"],
      ["c", "adopt"],
      ["d", "replace"],
    ]);
    assert.deepEqual(actions(true)[1], ["b", "retry"]);
  },
});

const DRAIN = { deleteEmptyDirData: false, force: false, timeoutSecs: 600, disableEviction: false };

/** A run with --drain over FOUR, printing the plan as JSON. */
const DRAINING = {
  ...OPTS,
  output: "json",
  maintenance: {
    windows: [],
    cordon: true,
    drain: DRAIN,
    retryFailed: false,
    blockingPodSelectors: [],
    postNodeDelaySecs: 0,
    uncordonOnFailure: false,
  },
} as unknown as RunConfig;

/** The API: access reviews answered by `allowed`, the Jobs of JOBS, one ReplicaSet pod per node. */
function api(allowed: (attrs: { verb: string; subresource?: string }) => boolean) {
  return (req: Request, _n: number, body: unknown): Response => {
    const url = new URL(req.url);
    if (url.pathname === SELF_SUBJECT_ACCESS_REVIEWS) {
      const attrs = (body as { spec: { resourceAttributes: { verb: string } } }).spec
        .resourceAttributes;
      return Response.json({ status: { allowed: allowed(attrs) } }, { status: 201 });
    }
    if (url.pathname.endsWith("/jobs")) {
      return Response.json({ kind: "JobList", metadata: {}, items: [...JOBS.values()] });
    }
    if (url.pathname === "/api/v1/pods") {
      const node = url.searchParams.get("fieldSelector")!.replace("spec.nodeName=", "");
      return Response.json({
        kind: "PodList",
        metadata: {},
        items: [pod(`web-${node}`, { node, controller: "ReplicaSet" })],
      });
    }
    return Response.json({ kind: "Status", status: "Success" }, { status: 201 });
  };
}

Deno.test("--dry-run=plan without create pods/eviction stops as the run stops: the missing permission, no eviction asked", async () => {
  await withServer(api((a) => a.subresource !== "eviction"), async (kube, hits) => {
    const out: string[] = [];
    const err = await runPlanPreview(DRAINING, FOUR, {
      kube,
      stdout: (t) => out.push(t),
      log: quiet,
    })
      .then(() => undefined, (e) => e);
    assert.ok(err instanceof PermissionError, String(err));
    assert.match(err.message, /^Missing permission: cannot create pods\/eviction/);
    assert.deepEqual(out, [], "no plan printed as if the run could drain");
    assert.ok(!hits.some((h) => h.url.includes("/eviction")));
  });
});

Deno.test("--dry-run=plan --drain drains only the nodes a re-run would give a new Job", async () => {
  await withServer(api(() => true), async (kube, hits) => {
    const out: string[] = [];
    assert.equal(
      await runPlanPreview(DRAINING, FOUR, { kube, stdout: (t) => out.push(t), log: quiet }),
      0,
    );
    const plan = JSON.parse(out.join(""));
    const nodes = plan.waves.flatMap((w: { nodes: unknown[] }) => w.nodes) as {
      node: string;
      action: string;
      drain?: unknown;
    }[];
    assert.deepEqual(nodes.map((n) => [n.node, n.action, n.drain !== undefined]), [
      ["a", "succeeded", false],
      ["b", "failed", false],
      ["c", "adopt", false],
      ["d", "replace", true],
    ]);
    const evictions = hits.filter((h) => h.url.includes("/eviction"));
    assert.deepEqual(evictions.map((h) => new URL(h.url).pathname), [
      "/api/v1/namespaces/shop/pods/web-d/eviction",
    ]);
  });
});

Deno.test("--dry-run=plan with a gate refuses as the run refuses while an earlier run's exit latch is set (exit 5), and prints no plan", async () => {
  const lines: string[] = [];
  const latched = (req: Request, n: number, body: unknown) =>
    new URL(req.url).pathname.endsWith("/configmaps/up-gate-breach")
      ? Response.json({ data: { breach: 'query "bad > 0" returned {} 2' } })
      : api(() => true)(req, n, body);
  await withServer(latched, async (kube, hits) => {
    const out: string[] = [];
    const opts = {
      ...DRAINING,
      gate: { url: "http://127.0.0.1:1", queries: ["bad > 0"], intervalSecs: 30, onBreach: "exit" },
    } as RunConfig;
    const log = new Logger("text", (l) => lines.push(l));
    assert.equal(
      await runPlanPreview(opts, FOUR, { kube, stdout: (t) => out.push(t), log }),
      EXIT.gate,
    );
    assert.deepEqual(out, []);
    assert.match(lines.join("\n"), /Refusing to start: a health gate stopped an earlier run/);
    assert.ok(hits.every((h) => h.method === "GET" || h.url.includes("selfsubjectaccessreviews")));
  });
});

Deno.test("--dry-run=plan with a gate measures every query once, as the run does before its first Job, and says it holds every start", async () => {
  const prom = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    // One sample for every query: the breach, and its selector's presence.
    () =>
      Response.json({
        status: "success",
        data: {
          resultType: "vector",
          result: [{ metric: { gate_selector: "0" }, value: [1, "2"] }],
        },
      }),
  );
  try {
    const url = `http://127.0.0.1:${prom.addr.port}`;
    const noLatch = (req: Request, n: number, body: unknown) =>
      new URL(req.url).pathname.includes("/configmaps/")
        ? status(404, "NotFound")
        : api(() => true)(req, n, body);
    await withServer(noLatch, async (kube) => {
      const out: string[] = [];
      const opts = {
        ...DRAINING,
        output: "text",
        gate: { url, queries: ["bad > 0"], intervalSecs: 30, onBreach: "pause" },
      } as RunConfig;
      assert.equal(
        await runPlanPreview(opts, FOUR, { kube, stdout: (t) => out.push(t), log: quiet }),
        0,
      );
      assert.match(
        out.join(""),
        new RegExp(`^Gate: 1 check on ${url}: holds every start now \\(.*bad > 0`, "m"),
      );
    });
  } finally {
    await prom.shutdown();
  }
});
