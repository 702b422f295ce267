import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import { cordonNode, cordonPatch, type CordonTarget, uncordonNode } from "./cordon.ts";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";
import { type Hit, status, withServer } from "../testing/loopback.ts";

const KEY = "job-dispatcher/cordoned-by";
const T: CordonTarget = { name: "n1", uid: "uid-1", annotation: KEY, runId: "run-a" };

const applyPatch = applyJsonPatch;

/**
 * A fake API server holding one node: GET returns it, PATCH applies a JSON
 * Patch and answers 422 on a failed test. `beforePatch` changes the node
 * between a read and the write, as another client would.
 */
async function withNode(
  initial: V1Node | undefined,
  fn: (
    kube: Parameters<Parameters<typeof withServer>[1]>[0],
    state: () => V1Node | undefined,
    patches: () => Hit[],
  ) => Promise<void>,
  beforePatch?: (node: V1Node, n: number) => V1Node,
) {
  let node = initial;
  let patchCount = 0;
  await withServer(
    (req, _n, body) => {
      if (!new URL(req.url).pathname.endsWith("/api/v1/nodes/n1")) return status(404, "NotFound");
      if (!node) return status(404, "NotFound");
      if (req.method === "GET") return Response.json(node);
      if (req.method !== "PATCH") return status(405, "MethodNotAllowed");
      assert.equal(req.headers.get("content-type"), "application/json-patch+json");
      patchCount++;
      if (beforePatch) node = beforePatch(node, patchCount);
      try {
        node = applyPatch(node, body as never) as V1Node;
        return Response.json(node);
      } catch {
        return status(422, "Invalid", {
          message: "the server rejected our request due to an error in our request",
        });
      }
    },
    (kube, hits) => fn(kube, () => node, () => hits.filter((h) => h.method === "PATCH")),
  );
}

function node(
  o: { cordoned?: boolean; by?: string; uid?: string; annotations?: boolean } = {},
): V1Node {
  const annotations: Record<string, string> | undefined = o.by
    ? { [KEY]: o.by }
    : o.annotations
    ? { other: "x" }
    : undefined;
  return {
    metadata: {
      name: "n1",
      uid: o.uid ?? "uid-1",
      resourceVersion: "1",
      ...(annotations ? { annotations } : {}),
    },
    spec: o.cordoned ? { podCIDR: "10.0.0.0/24", unschedulable: true } : { podCIDR: "10.0.0.0/24" },
  };
}

Deno.test("cordonNode() cordons with a UID- and spec-tested patch that records this run", async () => {
  await withNode(node(), async (kube, state, patches) => {
    assert.deepEqual(await cordonNode(kube, T), { outcome: "cordoned" });
    assert.deepEqual(patches()[0].body, [
      { op: "test", path: "/metadata/uid", value: "uid-1" },
      { op: "test", path: "/spec", value: { podCIDR: "10.0.0.0/24" } },
      // Read without annotations: the map is made on that version only.
      { op: "test", path: "/metadata/resourceVersion", value: "1" },
      {
        op: "add",
        path: "/metadata/annotations",
        value: { "job-dispatcher/cordoned-by": "run-a" },
      },
      { op: "add", path: "/spec/unschedulable", value: true },
    ]);
    assert.equal(state()!.spec!.unschedulable, true);
    assert.equal(state()!.metadata!.annotations![KEY], "run-a");
  });
});

Deno.test("cordonNode() keeps the node's other annotations", async () => {
  await withNode(node({ annotations: true }), async (kube, state) => {
    assert.deepEqual(await cordonNode(kube, T), { outcome: "cordoned" });
    assert.deepEqual(state()!.metadata!.annotations, { other: "x", [KEY]: "run-a" });
  });
});

Deno.test({
  name: "cordonNode() leaves a node cordoned by someone else as it is, and writes nothing",
  async fn(t) {
    const cases: [string, V1Node, unknown][] = [
      ["an operator's cordon", node({ cordoned: true }), { outcome: "others", by: undefined }],
      ["another run's cordon", node({ cordoned: true, by: "run-b" }), {
        outcome: "others",
        by: "run-b",
      }],
      ["this run's own cordon", node({ cordoned: true, by: "run-a" }), { outcome: "ours" }],
    ];
    for (const [name, initial, want] of cases) {
      await t.step(name, async () => {
        await withNode(initial, async (kube, state, patches) => {
          assert.deepEqual(await cordonNode(kube, T), want);
          assert.equal(patches().length, 0);
          assert.deepEqual(state(), initial);
        });
      });
    }
  },
});

Deno.test("cordonNode() re-decides on a fresh read when someone cordons between its read and write", async () => {
  const operator = (n: V1Node, i: number) =>
    i === 1 ? { ...n, spec: { ...n.spec, unschedulable: true } } : n;
  await withNode(node(), async (kube, state, patches) => {
    assert.deepEqual(await cordonNode(kube, T), { outcome: "others", by: undefined });
    assert.equal(patches().length, 1, "the first write failed its test; nothing else was sent");
    assert.equal(
      state()!.metadata!.annotations,
      undefined,
      "the operator's cordon is not recorded as ours",
    );
  }, operator);
});

Deno.test("cordonPatch() re-cordons a node whose cordon of this run was lifted by someone", () => {
  const n = node({ by: "run-a" });
  const { result, ops } = cordonPatch(n, T);
  assert.deepEqual(result, { outcome: "cordoned" });
  assert.ok(ops?.some((o) => (o as { path: string }).path === "/spec/unschedulable"));
});

Deno.test("uncordonNode() tests and removes this run's record and the cordon in one patch", async () => {
  await withNode(node({ cordoned: true, by: "run-a" }), async (kube, state, patches) => {
    assert.deepEqual(await uncordonNode(kube, T), { outcome: "uncordoned" });
    assert.deepEqual(patches()[0].body, [
      { op: "test", path: "/metadata/uid", value: "uid-1" },
      { op: "test", path: "/metadata/annotations/job-dispatcher~1cordoned-by", value: "run-a" },
      { op: "remove", path: "/metadata/annotations/job-dispatcher~1cordoned-by" },
      { op: "test", path: "/spec/unschedulable", value: true },
      { op: "remove", path: "/spec/unschedulable" },
    ]);
    assert.deepEqual(state()!.spec, { podCIDR: "10.0.0.0/24" });
    assert.deepEqual(state()!.metadata!.annotations, {});
  });
});

Deno.test({
  name: "uncordonNode() refuses to lift a cordon that is not this run's",
  async fn(t) {
    const cases: [string, V1Node, unknown][] = [
      ["an operator's cordon", node({ cordoned: true }), { outcome: "notOurs", by: undefined }],
      ["another run's cordon", node({ cordoned: true, by: "run-b" }), {
        outcome: "notOurs",
        by: "run-b",
      }],
    ];
    for (const [name, initial, want] of cases) {
      await t.step(name, async () => {
        await withNode(initial, async (kube, state, patches) => {
          assert.deepEqual(await uncordonNode(kube, T), want);
          assert.equal(patches().length, 0);
          assert.equal(state()!.spec!.unschedulable, true, "still cordoned");
        });
      });
    }
  },
});

Deno.test("uncordonNode() leaves the node cordoned when another run takes it over between read and write", async () => {
  const takeover = (n: V1Node, i: number) =>
    i === 1 ? { ...n, metadata: { ...n.metadata, annotations: { [KEY]: "run-b" } } } : n;
  await withNode(node({ cordoned: true, by: "run-a" }), async (kube, state, patches) => {
    assert.deepEqual(await uncordonNode(kube, T), { outcome: "notOurs", by: "run-b" });
    assert.equal(patches().length, 1);
    assert.equal(state()!.spec!.unschedulable, true);
  }, takeover);
});

Deno.test("uncordonNode() only drops the record of a node someone already uncordoned", async () => {
  await withNode(node({ by: "run-a" }), async (kube, state, patches) => {
    assert.deepEqual(await uncordonNode(kube, T), { outcome: "uncordoned" });
    assert.equal((patches()[0].body as unknown[]).length, 3);
    assert.deepEqual(state()!.metadata!.annotations, {});
  });
});

Deno.test({
  name: "cordonNode() and uncordonNode() never write a node that is gone or replaced",
  async fn(t) {
    const cases: [string, V1Node | undefined, RegExp][] = [
      ["deleted", undefined, /: Cannot cordon node n1: the node was deleted$/],
      [
        "replaced",
        node({ uid: "uid-2" }),
        /: Cannot cordon node n1: it was replaced under the same name \(UID uid-1 is now uid-2\)$/,
      ],
    ];
    for (const [name, initial, want] of cases) {
      await t.step(name, async () => {
        await withNode(initial, async (kube, _state, patches) => {
          await assert.rejects(cordonNode(kube, T), want);
          await assert.rejects(uncordonNode(kube, T), /: Cannot uncordon node n1/);
          assert.equal(patches().length, 0);
        });
      });
    }
  },
});

Deno.test("cordonNode() gives up naming the node when it keeps changing under the write", async () => {
  const churn = (n: V1Node, i: number) => ({
    ...n,
    spec: { ...n.spec, podCIDR: `10.0.${i}.0/24` },
  });
  await withNode(node(), async (kube, _state, patches) => {
    await assert.rejects(
      cordonNode(kube, T),
      /: Cannot cordon node n1: it kept changing under the write$/,
    );
    assert.equal(patches().length, 5);
  }, churn);
});

Deno.test("cordonPatch() of a node read without annotations never replaces those it gained since the read", () => {
  const read: V1Node = { metadata: { name: "n1", uid: "uid-1", resourceVersion: "5" }, spec: {} };
  const now: V1Node = {
    metadata: { name: "n1", uid: "uid-1", resourceVersion: "6", annotations: { other: "x" } },
    spec: {},
  };
  const { ops } = cordonPatch(read, T);
  let after: V1Node | undefined;
  try {
    after = applyJsonPatch(now, ops as PatchOp[]);
  } catch {
    return; // refused (422): the cordon reads the node again
  }
  assert.equal(after.metadata?.annotations?.other, "x");
});
