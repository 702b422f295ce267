import assert from "node:assert/strict";
import type { RunRecord } from "../report/record.ts";
import { encodeRecord } from "../report/record.ts";
import { withServer } from "../testing/loopback.ts";
import { approvalName, endedCleanly, notEnded, recordCause, recordedEnd } from "./cluster.ts";

const RECORD: RunRecord = {
  version: 1,
  prefix: "drv",
  templateHash: "h1",
  namespace: "ops",
  state: "finished",
  startedAt: 1_000,
  updatedAt: 9_000,
  heartbeatMs: 20_000,
  parallelism: 2,
  summary: "2 succeeded of 2 nodes",
  nodes: [{ node: "n1", phase: "succeeded" }, { node: "n2", phase: "succeeded" }],
};

const CASES: [string, RunRecord | undefined, number | undefined][] = [
  ["finished, this template, every node succeeded: its last write", RECORD, 9_000],
  ["no record", undefined, undefined],
  ["still running", { ...RECORD, state: "running" }, undefined],
  ["stopped by a signal", { ...RECORD, state: "stopped" }, undefined],
  ["another template's", { ...RECORD, templateHash: "h0" }, undefined],
  ["stopped early", { ...RECORD, stoppedBy: "failure budget" }, undefined],
  [
    "a node failed",
    { ...RECORD, nodes: [{ node: "n1", phase: "failed", reason: "exit 1" }] },
    undefined,
  ],
  // A run whose window closed with nodes left records no stoppedBy (exit 4).
  [
    "the window closed with a node left queued",
    { ...RECORD, nodes: [{ node: "n1", phase: "succeeded" }, { node: "n2", phase: "queued" }] },
    undefined,
  ],
  [
    "a node still blocked by its disruption budget (exit 1)",
    { ...RECORD, nodes: [{ node: "n1", phase: "stillBlocked" }] },
    undefined,
  ],
];

for (const [name, record, want] of CASES) {
  Deno.test(`endedCleanly: ${name}`, () => {
    assert.equal(endedCleanly(record, "h1"), want);
  });
}

Deno.test("recordCause says why the run stopped, else its summary", () => {
  assert.equal(recordCause({ ...RECORD, stoppedBy: "gate breach" }), "stopped: gate breach");
  assert.equal(recordCause(RECORD), "2 succeeded of 2 nodes");
  assert.equal(recordCause(undefined), undefined);
});

Deno.test("approvalName is a ConfigMap name of the prefix and the stage", () => {
  assert.equal(approvalName("upgrade", "eu"), "fleet-approval.upgrade.eu");
  assert.match(approvalName("Up_Grade", "eu"), /^[a-z0-9.-]+$/);
});

Deno.test("recordedEnd takes the end from the API server's clock: a record written by a bastion an hour behind does not end its soak at once", async () => {
  // The API server stamps the record's write (managedFields) and says its
  // now (Date): the write was 10 s ago, whatever the writer's clock said.
  const serverNow = Math.floor(Date.now() / 1000) * 1000 + 3_600_000;
  const written = serverNow - 10_000;
  const encoded = await encodeRecord({ ...RECORD, updatedAt: written - 7_200_000 });
  const cm = {
    metadata: {
      managedFields: [{
        manager: "job-dispatcher",
        time: new Date(written).toISOString(),
        fieldsV1: { "f:data": { "f:record": {}, "f:summary": {} } },
      }],
    },
    data: encoded.data,
    binaryData: encoded.binaryData,
  };
  await withServer(
    () => Response.json(cm, { headers: { Date: new Date(serverNow).toUTCString() } }),
    async (kube) => {
      const at = await recordedEnd(kube, { namespace: "ops", prefix: "drv", templateHash: "h1" });
      assert.ok(at !== undefined);
      const ago = Date.now() - at;
      assert.ok(ago >= 8_000 && ago <= 12_000, `ended ${ago} ms ago on this clock, not 10 s`);
    },
  );
});

const KEY = { namespace: "ops", prefix: "drv", templateHash: "h1" };
const NOT_ENDED: [string, RunRecord | undefined, RegExp][] = [
  ["no record (it yielded before writing one)", undefined, /no run record of prefix drv.*yielded/],
  ["another template's", { ...RECORD, templateHash: "h0" }, /template h0, not h1/],
  ["a live run's", { ...RECORD, state: "running" }, /says running \(another run of prefix drv/],
  ["stopped early", { ...RECORD, stoppedBy: "failure budget" }, /stopped: failure budget/],
];

for (const [name, record, want] of NOT_ENDED) {
  Deno.test(`notEnded says why a run that exited 0 is not counted: ${name}`, () => {
    assert.match(notEnded(record, KEY), want);
  });
}
