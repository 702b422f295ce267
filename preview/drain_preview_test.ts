import assert from "node:assert/strict";
import type { V1Pod, V1PodDisruptionBudget } from "@kubernetes/client-node";
import { neverAllows, previewDrain, previewDrains } from "./drain_preview.ts";
import type { DrainPreview } from "./plan_view.ts";
import type { DrainConfig } from "../maintenance/config.ts";
import { PDB_VIOLATION } from "../maintenance/drain.ts";
import { Maintenance } from "../maintenance/maintenance.ts";
import { parseLabelSelector } from "../nodes/label_selector.ts";
import { type Hit, status, withServer } from "../testing/loopback.ts";
import { pod } from "../testing/pods.ts";

const DRAIN = { deleteEmptyDirData: false, force: false, timeoutSecs: 600, disableEviction: false };
/** The flags under which a drain evicts every pod but a DaemonSet's. */
const ALL_PODS = { force: true, deleteEmptyDirData: true };

/** A pod on n1, with a controller of kind `owner` (none: a bare pod). */
const onN1 = (name: string, owner?: string): V1Pod => pod(name, { node: "n1", controller: owner });

const PODS: Record<string, V1Pod[]> = {
  n1: [onN1("web-1", "ReplicaSet"), onN1("agent-1", "DaemonSet"), onN1("api-1", "ReplicaSet")],
  n2: [onN1("bare")],
};

/** Pods by node; every eviction of web-1 refused by its budget, the rest allowed. */
function server(req: Request): Response {
  const url = new URL(req.url);
  if (req.method === "GET") {
    const node = url.searchParams.get("fieldSelector")!.replace("spec.nodeName=", "");
    return Response.json({ kind: "PodList", metadata: {}, items: PODS[node] ?? [] });
  }
  if (url.pathname.endsWith("/web-1/eviction")) {
    return status(429, "TooManyRequests", {
      message: PDB_VIOLATION,
      causes: [{
        reason: "DisruptionBudget",
        message: "The disruption budget web-pdb needs 1 healthy pods and has 1 currently",
      }],
    });
  }
  return Response.json({ kind: "Status", status: "Success" }, { status: 201 });
}

Deno.test("previewDrains() sorts pods by the drain's rules and asks each eviction with dryRun=All", async () => {
  await withServer(server, async (kube, hits) => {
    const drains = await previewDrains(kube, ["n1", "n2"], DRAIN);
    assert.deepEqual(drains.get("n1"), {
      evict: ["shop/web-1", "shop/api-1"],
      stays: [{ pod: "shop/agent-1", reason: "ignoring DaemonSet-managed Pods" }],
      warnings: [],
      refusedNow: [{
        pod: "shop/web-1",
        budget: "shop/web-pdb",
        message: "cannot evict pod shop/web-1: blocked by PodDisruptionBudget shop/web-pdb: " +
          "The disruption budget web-pdb needs 1 healthy pods and has 1 currently",
      }],
      notJudged: [],
    });
    // A pod without a controller refuses the drain, as the run's drain does: nothing is asked.
    assert.match(
      drains.get("n2")!.refused!,
      /^drain refused: cannot delete Pods that declare no controller/,
    );
    const writes = hits.filter((h) => h.method !== "GET");
    assert.deepEqual(
      writes.map((h) => new URL(h.url).pathname + new URL(h.url).search).sort(),
      [
        "/api/v1/namespaces/shop/pods/api-1/eviction?dryRun=All",
        "/api/v1/namespaces/shop/pods/web-1/eviction?dryRun=All",
      ],
    );
    // Sent once each: a budget's 429 is an answer, not a reason to retry.
    assert.equal(kube.stats.budgetRefusals, 1);
  });
});

Deno.test("previewDrains() with --disable-eviction asks dry-run deletes, which no budget refuses", async () => {
  await withServer(server, async (kube, hits) => {
    const drains = await previewDrains(kube, ["n1"], { ...DRAIN, disableEviction: true });
    assert.deepEqual(drains.get("n1")?.refusedNow, []);
    assert.equal(drains.get("n1")?.deletes, true, "the plan says the pods are deleted");
    assert.deepEqual(
      hits.filter((h) => h.method === "DELETE").map((h) => new URL(h.url).search),
      ["?dryRun=All", "?dryRun=All"],
    );
  });
});

Deno.test("previewDrains() does not take Priority and Fairness throttling (a 429 without a budget) for a budget's refusal", async () => {
  const throttled = (req: Request) =>
    req.method === "GET" ? server(req) : new Response(
      JSON.stringify({
        kind: "Status",
        status: "Failure",
        code: 429,
        reason: "TooManyRequests",
        message: "Too many requests, please try again later.",
      }),
      { status: 429, headers: { "content-type": "application/json", "retry-after": "1" } },
    );
  await withServer(throttled, async (kube) => {
    const d = (await previewDrains(kube, ["n1"], DRAIN)).get("n1")!;
    assert.deepEqual(d.refusedNow, [], "no budget refused: the API server did not judge them");
    assert.deepEqual(d.notJudged.map((x) => x.pod), ["shop/web-1", "shop/api-1"]);
    assert.match(d.notJudged[0].message, /throttled by the API server \(429\)/);
  });
});

/** The pods of n1 for the plan-and-run comparison: one for each of the drain's rules. */
const MIXED: V1Pod[] = [
  pod("web", { node: "n1", controller: "ReplicaSet", meta: { labels: { app: "web" } } }),
  pod("cache", { node: "n1", controller: "ReplicaSet", emptyDir: true }),
  pod("bare", { node: "n1", meta: { labels: { app: "web" } } }),
  pod("agent", { node: "n1", controller: "DaemonSet" }),
  pod("db", { node: "n1", controller: "StatefulSet", meta: { labels: { app: "db" } } }),
];

/**
 * n1, cordoned by run-a already (the run's cordon is a read), with `pods`:
 * each gone once removed, and one already being deleted gone after the first
 * LIST (its own termination ends, as the kubelet's would).
 */
function mixedServer(pods: V1Pod[] = MIXED): (req: Request) => Response {
  const removed = new Set<string>();
  return (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/api/v1/nodes/n1") {
      return Response.json({
        metadata: { name: "n1", uid: "uid-1", annotations: { "jd/cordoned-by": "run-a" } },
        spec: { unschedulable: true },
      });
    }
    if (req.method === "GET") {
      const items = pods.filter((p) => !removed.has(p.metadata!.name!));
      for (const p of pods) if (p.metadata!.deletionTimestamp) removed.add(p.metadata!.name!);
      return Response.json({ kind: "PodList", metadata: {}, items });
    }
    const name = url.pathname.replace(/\/eviction$/, "").split("/").pop()!;
    if (url.searchParams.get("dryRun") !== "All") removed.add(name);
    return Response.json({ kind: "Status", status: "Success" }, { status: 201 });
  };
}

/** The removals a drain sent: method, path without the query, body; and whether each was a dry run. */
function removals(hits: Hit[]) {
  return hits.filter((h) => h.method !== "GET").map((h) => {
    const url = new URL(h.url);
    return { method: h.method, path: url.pathname, body: h.body, dryRun: url.search };
  });
}

Deno.test("--dry-run=plan and the run drain by the same options from the same drain flags", async (t) => {
  const web = parseLabelSelector("app=web");
  const every = ["shop/web", "shop/cache", "shop/bare", "shop/db"];
  const cases: { name: string; flags: Partial<DrainConfig>; evicts: string[] }[] = [
    { name: "no flags: the bare and the emptyDir pod refuse the drain", flags: {}, evicts: [] },
    { name: "--force: the emptyDir pod still refuses", flags: { force: true }, evicts: [] },
    {
      name: "--delete-emptydir-data: the bare pod still refuses",
      flags: { deleteEmptyDirData: true },
      evicts: [],
    },
    {
      name: "--force --delete-emptydir-data: all but the DaemonSet's",
      flags: ALL_PODS,
      evicts: every,
    },
    {
      name: "--pod-selector app=web: only the selected pods are judged",
      flags: { force: true, podSelector: { text: "app=web", requirements: web } },
      evicts: ["shop/web", "shop/bare"],
    },
    { name: "--grace-period 30", flags: { ...ALL_PODS, gracePeriodSecs: 30 }, evicts: every },
    { name: "--grace-period 0", flags: { ...ALL_PODS, gracePeriodSecs: 0 }, evicts: every },
    {
      name: "--disable-eviction: deleted, no budget asked",
      flags: { ...ALL_PODS, disableEviction: true },
      evicts: every,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const { plan, sent } = await planAndRun(MIXED, { ...DRAIN, timeoutSecs: 5, ...c.flags });
      assert.deepEqual(plan.evict, c.evicts);
      assert.deepEqual(sent.map((r) => `shop/${r.path.split("/")[6]}`), c.evicts);
    });
  }
});

/**
 * The plan's preview and the run's drain of n1 holding `pods` under the same
 * flags, each against its own server: the same refusal, the same requests and
 * bodies, dry runs in the plan only.
 */
async function planAndRun(pods: V1Pod[], flags: DrainConfig) {
  let plan: DrainPreview | undefined;
  let planned: ReturnType<typeof removals> = [];
  await withServer(mixedServer(pods), async (kube, hits) => {
    plan = await previewDrain(kube, "n1", flags);
    planned = removals(hits);
  });
  let ran: string | undefined;
  let sent: ReturnType<typeof removals> = [];
  await withServer(mixedServer(pods), async (kube, hits) => {
    const m = new Maintenance({
      kube,
      annotation: "jd/cordoned-by",
      runId: "run-a",
      drain: flags,
      uncordonOnFailure: false,
      warn: () => {},
      signal: new AbortController().signal,
      retryMs: 10,
    });
    ran = await m.prepare({ name: "n1", uid: "uid-1" });
    sent = removals(hits);
  });
  assert.equal(plan!.refused, ran, "the plan refuses the drain exactly as the run does");
  const unDry = ({ dryRun: _, ...r }: (typeof sent)[number]) => r;
  assert.deepEqual(planned.map(unDry), sent.map(unDry), "the same requests, the same bodies");
  assert.ok(planned.every((r) => r.dryRun === "?dryRun=All"), "the plan's are dry runs");
  assert.ok(sent.every((r) => r.dryRun === ""), "the run's are not");
  return { plan: plan!, sent };
}

Deno.test("--dry-run=plan sends no eviction for a pod already being deleted, as the run sends none, and lists it as the run waits for it", async (t) => {
  const going = pod("going", {
    node: "n1",
    controller: "ReplicaSet",
    meta: { deletionTimestamp: new Date() },
  });
  const pods = [pod("web", { node: "n1", controller: "ReplicaSet" }), going];
  for (
    const [name, flags] of [
      ["evicted", {}],
      ["deleted (--disable-eviction)", { disableEviction: true }],
      ["with --grace-period 0", { gracePeriodSecs: 0 }],
    ] as const
  ) {
    await t.step(name, async () => {
      const { plan, sent } = await planAndRun(pods, { ...DRAIN, timeoutSecs: 5, ...flags });
      assert.deepEqual(sent.map((r) => r.path.split("/")[6]), ["web"]);
      assert.deepEqual(plan.evict, ["shop/web", "shop/going"]);
    });
  }
});

Deno.test("previewDrains() says a budget that can never allow an eviction blocks for good, and lists a finished pod apart, asking no eviction for it", async () => {
  const pods = [
    onN1("web-1", "ReplicaSet"),
    pod("old-job-pod", { node: "n1", controller: "Job", phase: "Succeeded" }),
  ];
  const handler = (req: Request): Response => {
    const url = new URL(req.url);
    if (url.pathname === "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web-pdb") {
      return Response.json({
        kind: "PodDisruptionBudget",
        metadata: { namespace: "shop", name: "web-pdb" },
        spec: { minAvailable: 1 },
        status: { expectedPods: 1, currentHealthy: 1, desiredHealthy: 1, disruptionsAllowed: 0 },
      });
    }
    if (req.method === "GET") return Response.json({ kind: "PodList", metadata: {}, items: pods });
    return server(req);
  };
  await withServer(handler, async (kube, hits) => {
    const d = (await previewDrains(kube, ["n1"], DRAIN)).get("n1")! as DrainPreview & {
      finished?: string[];
    };
    assert.deepEqual(d.evict, ["shop/web-1"]);
    assert.deepEqual(d.finished, ["shop/old-job-pod"]);
    assert.equal(d.refusedNow.length, 1);
    assert.equal(
      (d.refusedNow[0] as { forGood?: string }).forGood,
      "minAvailable 1 of the 1 pod it matches: it never allows an eviction",
    );
    const evictions = hits.filter((h) => h.method === "POST").map((h) => new URL(h.url).pathname);
    assert.deepEqual(evictions, ["/api/v1/namespaces/shop/pods/web-1/eviction"]);
  });
});

Deno.test({
  name: "neverAllows() tells a budget no eviction ever passes from one that waits for room",
  permissions: "none",
  async fn(t) {
    const cases: [string, V1PodDisruptionBudget, string | undefined][] = [
      [
        "maxUnavailable 0",
        { spec: { maxUnavailable: 0 } },
        "maxUnavailable 0: it never allows an eviction",
      ],
      [
        "maxUnavailable 0%",
        { spec: { maxUnavailable: "0%" } },
        "maxUnavailable 0%: it never allows an eviction",
      ],
      ["maxUnavailable 1", { spec: { maxUnavailable: 1 } }, undefined],
      [
        "minAvailable equal to the pods",
        {
          spec: { minAvailable: 2 },
          status: { expectedPods: 2 } as V1PodDisruptionBudget["status"],
        },
        "minAvailable 2 of the 2 pods it matches: it never allows an eviction",
      ],
      [
        "minAvailable 100%",
        {
          spec: { minAvailable: "100%" },
          status: { expectedPods: 3 } as V1PodDisruptionBudget["status"],
        },
        "minAvailable 100% of the 3 pods it matches: it never allows an eviction",
      ],
      [
        "minAvailable 50% of 3: room for one",
        {
          spec: { minAvailable: "50%" },
          status: { expectedPods: 3 } as V1PodDisruptionBudget["status"],
        },
        undefined,
      ],
      ["minAvailable below the pods", {
        spec: { minAvailable: 1 },
        status: { expectedPods: 2 } as V1PodDisruptionBudget["status"],
      }, undefined],
      ["no status yet: not judged", { spec: { minAvailable: 1 } }, undefined],
    ];
    for (const [name, pdb, want] of cases) {
      await t.step(name, () => assert.equal(neverAllows(pdb), want));
    }
  },
});
