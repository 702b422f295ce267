import assert from "node:assert/strict";
import { type MapWrite, mapWriteOps, writeMetadataMaps } from "./metadata_patch.ts";
import { status, withServer } from "../testing/loopback.ts";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";

const SET: MapWrite = { map: "annotations", key: "p/a", value: "1" };
const DROP: MapWrite = { map: "labels", key: "p/r", value: null };

Deno.test({
  name: "mapWriteOps() never adds a whole map but on a read that lacks it, tested by its version",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; read?: Parameters<typeof mapWriteOps>[1]; ops: unknown[] }[] = [
      {
        name: "no read: the maps are assumed",
        ops: [
          { op: "add", path: "/metadata/annotations/p~1a", value: "1" },
          { op: "add", path: "/metadata/labels/p~1r", value: "" },
          { op: "remove", path: "/metadata/labels/p~1r" },
        ],
      },
      {
        name: "read with both maps: the same",
        read: { metadata: { resourceVersion: "3", labels: {}, annotations: {} } },
        ops: [
          { op: "add", path: "/metadata/annotations/p~1a", value: "1" },
          { op: "add", path: "/metadata/labels/p~1r", value: "" },
          { op: "remove", path: "/metadata/labels/p~1r" },
        ],
      },
      {
        name: "read with neither: the set map is made, the removal is moot",
        read: { metadata: { resourceVersion: "3" } },
        ops: [
          { op: "test", path: "/metadata/resourceVersion", value: "3" },
          { op: "add", path: "/metadata/annotations", value: { "p/a": "1" } },
        ],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.deepEqual(mapWriteOps([SET, DROP], c.read), c.ops));
    }
  },
});

Deno.test({
  name: "writeMetadataMaps() makes a missing map from a fresh read, and reads again when " +
    "another writer made it meanwhile: every key another writer set stays",
  permissions: { net: true, read: true, write: true, env: true },
  async fn() {
    let node: Record<string, unknown> = { metadata: { uid: "u1", resourceVersion: "1" } };
    let patches = 0;
    await withServer((req, _n, body) => {
      if (req.method === "GET") return Response.json(node);
      if (++patches === 2) {
        // Between this write's read and its map: the run's cordon record.
        node = { metadata: { uid: "u1", resourceVersion: "2", annotations: { "p/by": "run" } } };
      }
      try {
        node = applyJsonPatch(node, body as PatchOp[]);
        return Response.json(node);
      } catch {
        return status(422, "Invalid");
      }
    }, async (kube) => {
      assert.equal(await writeMetadataMaps(kube, "/api/v1/nodes/n1", "u1", [SET]), true);
      assert.equal(await writeMetadataMaps(kube, "/api/v1/nodes/n1", "u0", [SET]), false);
    });
    assert.deepEqual(node, {
      metadata: { uid: "u1", resourceVersion: "2", annotations: { "p/by": "run", "p/a": "1" } },
    });
  },
});
