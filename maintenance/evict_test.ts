import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { evictPod, podsOnNode } from "./evict.ts";
import { MULTIPLE_PDBS, PDB_VIOLATION } from "./drain.ts";
import { status, withServer } from "../testing/loopback.ts";

const POD: V1Pod = { metadata: { namespace: "shop", name: "web-1", uid: "pod-uid" } };

Deno.test("evictPod() posts a policy/v1 Eviction with the grace period and a UID precondition", async () => {
  await withServer(
    () => Response.json({ kind: "Status", status: "Success", code: 201 }, { status: 201 }),
    async (kube, hits) => {
      assert.deepEqual(await evictPod(kube, POD, { gracePeriodSecs: 30 }), { kind: "evicted" });
      assert.equal(hits.length, 1);
      assert.equal(hits[0].method, "POST");
      assert.equal(new URL(hits[0].url).pathname, "/api/v1/namespaces/shop/pods/web-1/eviction");
      assert.deepEqual(hits[0].body, {
        apiVersion: "policy/v1",
        kind: "Eviction",
        metadata: { namespace: "shop", name: "web-1" },
        deleteOptions: {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: "pod-uid" },
          gracePeriodSeconds: 30,
        },
      });
      assert.equal(kube.stats.requests["create pods/eviction"], 1);
    },
  );
});

Deno.test("evictPod() without a grace period leaves the pod's own", async () => {
  await withServer(
    () => Response.json({}, { status: 201 }),
    async (kube, hits) => {
      await evictPod(kube, POD, {});
      const opts = (hits[0].body as { deleteOptions: Record<string, unknown> }).deleteOptions;
      assert.equal("gracePeriodSeconds" in opts, false);
    },
  );
});

Deno.test("evictPod() with --disable-eviction deletes the pod with the same options", async () => {
  await withServer(
    () => Response.json({ kind: "Pod" }),
    async (kube, hits) => {
      const verdict = await evictPod(kube, POD, { gracePeriodSecs: 0, disableEviction: true });
      assert.deepEqual(verdict, { kind: "evicted" });
      assert.equal(hits[0].method, "DELETE");
      assert.equal(new URL(hits[0].url).pathname, "/api/v1/namespaces/shop/pods/web-1");
      assert.deepEqual(hits[0].body, {
        apiVersion: "v1",
        kind: "DeleteOptions",
        preconditions: { uid: "pod-uid" },
        gracePeriodSeconds: 0,
      });
    },
  );
});

Deno.test({
  name: "evictPod() sends once and interprets the answer, leaving retries to the drain",
  async fn(t) {
    const pdbCause = {
      reason: "DisruptionBudget",
      message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
    };
    const cases: [string, () => Response, unknown][] = [
      [
        "429 of a PodDisruptionBudget names it (the body kube-apiserver 1.36 sends)",
        () =>
          new Response(
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",' +
              `"message":"Cannot evict pod as it would violate the pod's disruption budget.",` +
              '"reason":"TooManyRequests","details":{"causes":[{"reason":"DisruptionBudget",' +
              '"message":"The disruption budget web-pdb needs 2 healthy pods and has 2 currently"}]},' +
              '"code":429}',
            { status: 429, headers: { "content-type": "application/json" } },
          ),
        {
          kind: "blocked",
          budget: "shop/web-pdb",
          detail: pdbCause.message,
          message: `blocked by PodDisruptionBudget shop/web-pdb: ${pdbCause.message}`,
        },
      ],
      [
        "429 with Retry-After of a budget being processed is not waited out in the client",
        () =>
          status(429, "TooManyRequests", {
            message: PDB_VIOLATION,
            headers: { "Retry-After": "10" },
            causes: [{
              reason: "DisruptionBudget",
              message: "The disruption budget web-pdb is still being processed by the server.",
            }],
          }),
        {
          kind: "blocked",
          budget: "shop/web-pdb",
          detail: "The disruption budget web-pdb is still being processed by the server.",
          message: "blocked by PodDisruptionBudget shop/web-pdb: " +
            "The disruption budget web-pdb is still being processed by the server.",
        },
      ],
      [
        "500 of several budgets refuses",
        () => status(500, "InternalError", { message: MULTIPLE_PDBS }),
        {
          kind: "refused",
          message: "cannot evict shop/web-1: more than one PodDisruptionBudget covers it, " +
            "which the Eviction API refuses; make one budget select it",
        },
      ],
      ["404 is gone", () => status(404, "NotFound"), { kind: "gone" }],
      ["409 of the UID precondition is gone", () => status(409, "Conflict"), { kind: "gone" }],
      [
        "503 is retried by the drain",
        () => status(503, "ServiceUnavailable", { message: "etcd leader changed" }),
        { kind: "retry", message: "cannot evict shop/web-1: answered 503: etcd leader changed" },
      ],
      [
        "429 of Priority and Fairness carries its Retry-After for the drain",
        () =>
          status(429, "TooManyRequests", {
            message: "Too many requests, please try again later.",
            headers: { "Retry-After": "1" },
          }),
        {
          kind: "retry",
          message: "cannot evict shop/web-1: throttled by the API server (429): " +
            "Too many requests, please try again later.",
          afterMs: 1000,
        },
      ],
    ];
    for (const [name, answer, want] of cases) {
      await t.step(name, async () => {
        await withServer(answer, async (kube, hits) => {
          const started = Date.now();
          assert.deepEqual(await evictPod(kube, POD, {}), want);
          assert.equal(hits.length, 1, "sent once");
          assert.ok(Date.now() - started < 1500, "no wait in the client");
        });
      });
    }
  },
});

Deno.test("podsOnNode() lists every namespace's pods bound to the node, page by page", async () => {
  await withServer(
    (req) => {
      const q = new URL(req.url).searchParams;
      const page = q.get("continue") ? 2 : 1;
      return Response.json({
        items: [{ metadata: { name: `p${page}` } }],
        metadata: { resourceVersion: "7", continue: page === 1 ? "next" : "" },
      });
    },
    async (kube, hits) => {
      const pods = await podsOnNode(kube, "n1", 1);
      assert.deepEqual(pods.map((p) => p.metadata!.name), ["p1", "p2"]);
      const url = new URL(hits[0].url);
      assert.equal(url.pathname, "/api/v1/pods");
      assert.equal(url.searchParams.get("fieldSelector"), "spec.nodeName=n1");
      assert.equal(url.searchParams.get("limit"), "1");
    },
  );
});
