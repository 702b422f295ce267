import assert from "node:assert/strict";
import { status, withServer } from "../testing/loopback.ts";
import { pauseFile, pauseOwner, resumeOwnerCommand } from "./latch.ts";
import type { V1Job } from "@kubernetes/client-node";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";

const B = { query: "up == 0", value: "{} 0", at: 0 };
const OWNER = { name: "hook", uid: "u-1" };

Deno.test("pauseOwner() sets <P>/paused=true and the reason on the owner, tested by its UID", async () => {
  await withServer(
    (_req, n) =>
      n === 1
        ? status(422, "Invalid")
        : Response.json({ metadata: { name: "hook", uid: "u-1", resourceVersion: "7" } }),
    async (kube, hits) => {
      await pauseOwner({ kube, namespace: "ops", owner: OWNER, pausedKey: "p/paused" }, B);
      assert.deepEqual(
        hits.map((h) => h.method),
        ["PATCH", "GET", "PATCH"],
        "a missing annotations map is made with ours, from a fresh read",
      );
      assert.equal(new URL(hits[0].url).pathname, "/apis/batch/v1/namespaces/ops/jobs/hook");
      assert.deepEqual(hits[0].body, [
        { op: "test", path: "/metadata/uid", value: "u-1" },
        { op: "add", path: "/metadata/annotations/p~1paused", value: "true" },
        {
          op: "add",
          path: "/metadata/annotations/p~1paused-reason",
          value: 'query "up == 0" returned {} 0',
        },
      ]);
      assert.deepEqual(hits[2].body, [
        { op: "test", path: "/metadata/uid", value: "u-1" },
        { op: "test", path: "/metadata/resourceVersion", value: "7" },
        {
          op: "add",
          path: "/metadata/annotations",
          value: { "p/paused": "true", "p/paused-reason": 'query "up == 0" returned {} 0' },
        },
      ]);
    },
  );
  assert.equal(
    resumeOwnerCommand({ namespace: "ops", owner: OWNER, pausedKey: "p/paused" }),
    "kubectl annotate job -n ops hook p/paused- p/paused-reason-",
  );
});

Deno.test("pauseFile() creates the pause file with the breach in it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await pauseFile(`${dir}/pause`, B);
    assert.equal(await Deno.readTextFile(`${dir}/pause`), 'query "up == 0" returned {} 0\n');
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pauseOwner() never replaces the annotations the owner gained between its 422 and the map's creation", async () => {
  let job: V1Job = { metadata: { name: "hook", uid: "u-1", resourceVersion: "1" } };
  let patches = 0;
  await withServer((req, _n, body) => {
    if (req.method === "GET") return Response.json(job);
    if (++patches === 2) {
      // Another writer (the run's progress) made the map meanwhile.
      job = {
        metadata: { ...job.metadata, resourceVersion: "2", annotations: { "p/progress": "3/5" } },
      };
    }
    try {
      job = applyJsonPatch(job, body as PatchOp[]);
      return Response.json(job);
    } catch {
      return status(422, "Invalid");
    }
  }, async (kube) => {
    await pauseOwner({ kube, namespace: "ops", owner: OWNER, pausedKey: "p/paused" }, B);
  });
  assert.equal(job.metadata?.annotations?.["p/progress"], "3/5");
  assert.equal(job.metadata?.annotations?.["p/paused"], "true");
});
