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

Deno.test("status in text reads only the nodes it shows (a failed node's error mark), -o json every node", async () => {
  const failed: RunRecord = {
    ...record(1),
    state: "finished",
    nodes: [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "failed" }],
  };
  const cm = recordConfigMap(keys, failed, await encodeRecord(failed));
  const node = (name: string) => ({
    metadata: { name, labels: {}, annotations: { [keys.error]: `${name} broke` } },
    spec: {},
  });
  const seen: string[] = [];
  await withServer((req) => {
    const url = new URL(req.url);
    seen.push(url.pathname + (url.searchParams.get("fieldSelector") ? "?one" : ""));
    if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
      return Response.json(cm);
    }
    if (url.pathname.endsWith("/jobs")) {
      return Response.json({ items: [], metadata: { resourceVersion: "1" } });
    }
    if (url.pathname === "/api/v1/nodes") {
      const field = url.searchParams.get("fieldSelector")?.match(/^metadata\.name=(.+)$/)?.[1];
      const items = field ? [node(field)] : [node("n0"), node("n1")];
      return Response.json({ items, metadata: { resourceVersion: "1" } });
    }
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const run = async (output: StatusConfig["output"]) => {
      seen.length = 0;
      const printed: string[] = [];
      const code = await runStatus({ ...CONFIG, output, watch: false }, {
        kube,
        env: () => undefined,
        readFile: () => undefined,
        terminal: false,
        signal: new AbortController().signal,
        stdout: (text) => printed.push(text),
      });
      assert.equal(code, 1);
      return printed.join("");
    };
    const text = await run("text");
    assert.match(text, /n1 .*n1 broke/);
    assert.deepEqual(seen.filter((p) => p.includes("/nodes")), ["/api/v1/nodes?one"]);
    const json = JSON.parse(await run("json"));
    assert.deepEqual(seen.filter((p) => p.includes("/nodes")), ["/api/v1/nodes"]);
    assert.equal(json.nodes[1].reason, "n1 broke");
  });
});
