import assert from "node:assert/strict";
import { status, withServer } from "../testing/loopback.ts";
import { pauseFile, pauseOwner, resumeOwnerCommand } from "./latch.ts";

const B = { query: "up == 0", value: "{} 0", at: 0 };
const OWNER = { name: "hook", uid: "u-1" };

Deno.test("pauseOwner() sets <P>/paused=true and the reason on the owner, tested by its UID", async () => {
  await withServer(
    (_req, n) => n === 1 ? status(422, "Invalid") : Response.json({}),
    async (kube, hits) => {
      await pauseOwner({ kube, namespace: "ops", owner: OWNER, pausedKey: "p/paused" }, B);
      assert.equal(hits.length, 2, "a missing annotations map is created with ours");
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
      assert.deepEqual(hits[1].body, [
        { op: "test", path: "/metadata/uid", value: "u-1" },
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
