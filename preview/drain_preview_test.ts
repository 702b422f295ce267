import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { previewDrains } from "./drain_preview.ts";
import { PDB_VIOLATION } from "../maintenance/drain.ts";
import { status, withServer } from "../testing/loopback.ts";
import { pod } from "../testing/pods.ts";

const DRAIN = { deleteEmptyDirData: false, force: false, timeoutSecs: 600, disableEviction: false };

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
