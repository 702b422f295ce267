import assert from "node:assert/strict";
import { withServer } from "../testing/loopback.ts";
import { encodeRecord, recordConfigMap, type RunRecord } from "../report/record.ts";
import { trackingKeys } from "../job.ts";
import { runStatus, type StatusConfig } from "./status.ts";

const keys = trackingKeys("job-dispatcher");

function record(succeeded: number): RunRecord {
  return {
    version: 1,
    prefix: "up",
    namespace: "team",
    state: "running",
    startedAt: Date.now() - 5_000,
    updatedAt: Date.now(),
    heartbeatMs: 20_000,
    parallelism: 2,
    summary: "x",
    nodes: ["n0", "n1"].map((node, i) => ({ node, phase: i < succeeded ? "succeeded" : "queued" })),
  };
}

const CONFIG: StatusConfig = {
  prefix: "up",
  trackingLabelPrefix: "job-dispatcher",
  output: "json",
  watch: true,
  watchIntervalSecs: 0.05,
};

Deno.test("status --watch reads the record, Jobs and nodes again and prints only when the view changed", async () => {
  let reads = 0;
  const cm = async (succeeded: number) =>
    recordConfigMap(keys, record(succeeded), await encodeRecord(record(succeeded)));
  const first = await cm(0), second = await cm(1);
  await withServer((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/namespaces/team/configmaps/run-record.up") {
      reads++;
      return Response.json(reads < 4 ? first : second);
    }
    if (path.endsWith("/jobs") || path === "/api/v1/nodes") {
      return Response.json({ items: [], metadata: { resourceVersion: "1" } });
    }
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const printed: string[] = [];
    const stop = new AbortController();
    const code = await runStatus(CONFIG, {
      kube,
      env: () => undefined,
      readFile: () => undefined,
      terminal: false,
      signal: stop.signal,
      stdout: (text) => {
        printed.push(text);
        if (printed.length === 2) stop.abort();
      },
    });
    assert.equal(code, 0);
    assert.ok(reads >= 4, `${reads} reads`);
    assert.equal(printed.length, 2, "printed twice: the first view and the one that changed");
    assert.deepEqual(JSON.parse(printed[0]).counts, { queued: 2 });
    assert.deepEqual(JSON.parse(printed[1]).counts, { succeeded: 1, queued: 1 });
  });
});
