import assert from "node:assert/strict";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import {
  jsonReport,
  junitReport,
  nodeMarkPatch,
  Recorder,
  type RecorderOptions,
  type ReportInput,
} from "./report.ts";
import type { Kube } from "../kube/client.ts";
import { Logger } from "./log.ts";
import { pointer } from "../nodes/lifecycle.ts";
import { trackingKeys } from "../job.ts";
import type { V1Node } from "@kubernetes/client-node";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";

const INPUT: ReportInput = {
  startedAt: new Date("2026-11-30T10:00:00Z"),
  finishedAt: new Date("2026-11-30T10:01:00Z"),
  namespace: "ops",
  prefix: "up",
  owner: { name: "hook", uid: "owner-uid" },
  results: [
    {
      node: "n1",
      job: "up-n1",
      outcome: "succeeded",
      startedAt: Date.parse("2026-11-30T10:00:00Z"),
      finishedAt: Date.parse("2026-11-30T10:00:12Z"),
      attempts: 1,
    },
    {
      node: "n2",
      job: "up-n2",
      outcome: "failed",
      reason: 'install exited 1: no <virtualization> & "backend" [BackoffLimitExceeded]',
      startedAt: Date.parse("2026-11-30T10:00:00Z"),
      finishedAt: Date.parse("2026-11-30T10:00:30Z"),
      attempts: 2,
    },
    { node: "n3", job: "up-n3", outcome: "notStarted" },
  ],
  uids: new Map([["n1", "u1"], ["n2", "u2"], ["n3", "u3"], ["n4", "u4"]]),
  skipped: [{ node: "n4", uid: "u4", reason: "taint gpu=true:NoSchedule is not tolerated" }],
};

Deno.test({
  name: "jsonReport() lists every node with UID, Job, times, outcome, reason and attempts",
  permissions: "none",
  fn() {
    const r = JSON.parse(jsonReport(INPUT));
    assert.equal(r.kind, "JobDispatcherReport");
    assert.deepEqual(r.summary, {
      total: 3,
      succeeded: 1,
      failed: 1,
      unknown: 0,
      blocked: 0,
      inFlight: 0,
      notStarted: 1,
      skipped: 1,
    });
    assert.deepEqual(r.nodes[1], {
      name: "n2",
      uid: "u2",
      job: "up-n2",
      start: "2026-11-30T10:00:00.000Z",
      end: "2026-11-30T10:00:30.000Z",
      outcome: "failed",
      reason: 'install exited 1: no <virtualization> & "backend" [BackoffLimitExceeded]',
      attempts: 2,
    });
    assert.equal(r.nodes[3].outcome, "skipped");
    assert.equal(r.nodes.length, 4);
  },
});

Deno.test({
  name: "jsonReport() of a run a window stopped says stoppedBy window closed",
  permissions: "none",
  fn() {
    assert.equal(
      JSON.parse(jsonReport({ ...INPUT, windowClosed: true })).stoppedBy,
      "window closed",
    );
    assert.equal(JSON.parse(jsonReport(INPUT)).stoppedBy, null, "a run that finished");
    const both = { ...INPUT, windowClosed: true, stoppedBy: "failure budget" };
    assert.equal(JSON.parse(jsonReport(both)).stoppedBy, "failure budget", "the stop came first");
  },
});

Deno.test({
  name: "junitReport() is well-formed XML with one test case per node",
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const text = junitReport(INPUT);
    assert.equal(XMLValidator.validate(text), true);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text);
    const suite = doc.testsuites.testsuite;
    assert.equal(suite.tests, "4");
    assert.equal(suite.failures, "1");
    assert.equal(suite.skipped, "2");
    const cases = suite.testcase;
    assert.deepEqual(cases.map((c: { name: string }) => c.name), ["n1", "n2", "n3", "n4"]);
    assert.equal(cases[0].time, "12.000");
    assert.equal(
      cases[1].failure.message,
      'install exited 1: no <virtualization> & "backend" [BackoffLimitExceeded]',
    );
    assert.ok(cases[3].skipped);
  },
});

Deno.test({
  name:
    "junitReport() keeps only characters XML 1.0 allows: a reason with U+FFFE, U+FFFF or a lone surrogate stays well-formed",
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const reason =
      "exit 1: \uFFFEbad\uFFFF bytes \uD800 and \uDC00 from a termination message \u{1F600}";
    const text = junitReport({
      ...INPUT,
      results: [{ ...INPUT.results[1], reason }],
    });
    // XML 1.0's Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
    const outside = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
    assert.equal(outside.exec(text)?.[0], undefined, "no character outside XML's Char");
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text);
    assert.equal(
      doc.testsuites.testsuite.testcase[0].failure.message,
      "exit 1: bad bytes  and  from a termination message \u{1F600}",
      "the rest kept, a pair of surrogates (an emoji) too",
    );
  },
});

Deno.test({
  name: "nodeMarkPatch() tests the node's UID first and clears the error on success",
  permissions: "none",
  fn() {
    const keys = trackingKeys("job-dispatcher");
    const node = { uid: "u1" };
    const ok = nodeMarkPatch(keys, node, "succeeded", "2026-11-30T10:00:00Z");
    assert.deepEqual(ok[0], { op: "test", path: "/metadata/uid", value: "u1" });
    assert.deepEqual(ok.slice(1), [
      { op: "add", path: "/metadata/labels/job-dispatcher~1result", value: "succeeded" },
      {
        op: "add",
        path: "/metadata/annotations/job-dispatcher~1finished-at",
        value: "2026-11-30T10:00:00Z",
      },
      { op: "add", path: "/metadata/annotations/job-dispatcher~1error", value: "" },
      { op: "remove", path: "/metadata/annotations/job-dispatcher~1error" },
    ]);
    const failed = nodeMarkPatch(keys, { uid: "u1" }, "failed", "t", "install exited 1");
    assert.ok(
      !failed.some((o) => /^\/metadata\/(labels|annotations)$/.test((o as { path: string }).path)),
      "never an add of a whole map: it would replace the one the node has",
    );
    assert.deepEqual(failed.at(-1), {
      op: "add",
      path: "/metadata/annotations/job-dispatcher~1error",
      value: "install exited 1",
    });
  },
});

Deno.test({
  name: "pointer() escapes ~ and / as RFC 6901 asks",
  permissions: "none",
  fn() {
    assert.equal(pointer("a/b~c"), "a~1b~0c");
  },
});

Deno.test({
  name: "Recorder writes an Event and a mark per outcome, as --node-records asks",
  permissions: "none",
  async fn(t) {
    const cases: { records: RecorderOptions["nodeRecords"]; want: string[] }[] = [
      {
        records: "all",
        want: [
          "POST events JobSucceeded",
          "PATCH node n1",
          "POST events JobFailed",
          "PATCH node n2",
          "POST events NodeFailed",
          "PATCH node n4",
          "POST events JobPending",
        ],
      },
      {
        records: "failures",
        want: [
          "POST events JobFailed",
          "PATCH node n2",
          "POST events NodeFailed",
          "PATCH node n4",
          "POST events JobPending",
        ],
      },
      { records: "none", want: [] },
    ];
    for (const c of cases) {
      await t.step(String(c.records), async () => {
        const writes: string[] = [];
        const kube = {
          request(_verb: string, method: string, path: string, body?: { reason?: string }) {
            writes.push(
              method === "POST"
                ? `POST events ${body?.reason}`
                : `PATCH node ${path.split("/").pop()}`,
            );
            return Promise.resolve({});
          },
        } as unknown as Kube;
        const node = { uid: "u" };
        const recorder = new Recorder({
          kube,
          log: new Logger("text", () => {}),
          keys: trackingKeys("job-dispatcher"),
          namespace: "ops",
          nodes: new Map([["n1", node], ["n2", node], ["n3", node], ["n4", node]]),
          nodeRecords: c.records,
        });
        recorder.event({ kind: "succeeded", node: "n1", job: "up-n1" });
        recorder.event({ kind: "succeeded", node: "n3", job: "up-n3", counted: true });
        recorder.event({ kind: "failed", node: "n2", job: "up-n2", reason: "exit 1" });
        // Its drain failed: no Job ever failed on n4.
        recorder.event({ kind: "failed", node: "n4", job: "up-n4", reason: "drain", noJob: true });
        recorder.event({ kind: "stalled", node: "n3", job: "up-n3", reason: "x", seconds: 120 });
        await recorder.finished("done", false);
        assert.deepEqual(writes, c.want);
      });
    }
  },
});

Deno.test({
  name: "jsonReport() names each node's wave and each wave's end and soak",
  permissions: "none",
  fn() {
    const r = JSON.parse(jsonReport({
      ...INPUT,
      results: [{ node: "n1", job: "up-n1", outcome: "succeeded", wave: 1 }],
      waves: [
        { wave: 1, size: 1, openedAt: 0, endedAt: 1000, soakEndsAt: 61_000, soakEndedAt: 61_000 },
        { wave: 2, size: 3, openedAt: 61_000, endedAt: 62_000 },
      ],
    }));
    assert.equal(r.nodes[0].wave, 1);
    assert.deepEqual(r.waves, [
      {
        wave: 1,
        size: 1,
        opened: "1970-01-01T00:00:00.000Z",
        ended: "1970-01-01T00:00:01.000Z",
        soak: { start: "1970-01-01T00:00:01.000Z", end: "1970-01-01T00:01:01.000Z" },
      },
      {
        wave: 2,
        size: 3,
        opened: "1970-01-01T00:01:01.000Z",
        ended: "1970-01-01T00:01:02.000Z",
        soak: null,
      },
    ]);
    assert.equal(JSON.parse(jsonReport(INPUT)).waves, undefined, "no waves, no key");
  },
});

Deno.test({
  name:
    "jsonReport() says what a wave's soak counted from, each gate break that restarted it, and since when the gates were clean",
  permissions: "none",
  fn() {
    const wave = (extra: Partial<NonNullable<ReportInput["waves"]>[number]>) =>
      JSON.parse(jsonReport({
        ...INPUT,
        waves: [
          {
            wave: 1,
            size: 1,
            openedAt: 0,
            endedAt: 1000,
            soakEndsAt: 61_000,
            soakEndedAt: 61_000,
            ...extra,
          },
          { wave: 2, size: 3, openedAt: 61_000 },
        ],
      })).waves[0].soak;
    assert.deepEqual(wave({ soakFrom: 500, soakRestarts: [] }), {
      start: "1970-01-01T00:00:01.000Z",
      end: "1970-01-01T00:01:01.000Z",
      from: "1970-01-01T00:00:00.500Z",
      restarts: [],
    });
    assert.deepEqual(
      wave({
        soakFrom: 20_000,
        soakRestarts: [{ at: 20_000, after: "health gate breached: up == 0" }],
        soakCleanSince: 20_000,
      }),
      {
        start: "1970-01-01T00:00:01.000Z",
        end: "1970-01-01T00:01:01.000Z",
        from: "1970-01-01T00:00:20.000Z",
        restarts: [{ at: "1970-01-01T00:00:20.000Z", after: "health gate breached: up == 0" }],
        gates: { cleanSince: "1970-01-01T00:00:20.000Z" },
      },
    );
    const clean = wave({ soakFrom: 1000, soakRestarts: [], soakCleanSince: -Infinity });
    assert.deepEqual(clean.gates, { cleanSince: null }, "clean through the whole run");
  },
});

/** A run of two waves with a soak, a breach latched and lifted during the soak. */
const WAVED: ReportInput = {
  ...INPUT,
  results: [
    { ...INPUT.results[0], wave: 1 },
    { ...INPUT.results[1], wave: 2 },
    { ...INPUT.results[2], wave: 2 },
  ],
  waves: [
    {
      wave: 1,
      size: 1,
      openedAt: Date.parse("2026-11-30T10:00:00Z"),
      endedAt: Date.parse("2026-11-30T10:00:12Z"),
      soakEndsAt: Date.parse("2026-11-30T10:00:22Z"),
      soakEndedAt: Date.parse("2026-11-30T10:00:40Z"),
    },
    { wave: 2, size: 2, openedAt: Date.parse("2026-11-30T10:00:40Z") },
  ],
  breaches: [{
    query: "e2e_broken > 0",
    value: 'e2e_broken{job="e2e"} 1',
    at: Date.parse("2026-11-30T10:00:15Z"),
    latchedAt: Date.parse("2026-11-30T10:00:16Z"),
    liftedAt: Date.parse("2026-11-30T10:00:38Z"),
  }],
  latch: "owner Job ops/hook annotation job-dispatcher/paused",
  pauses: [{
    from: Date.parse("2026-11-30T10:00:15Z"),
    to: Date.parse("2026-11-30T10:00:38Z"),
    why: "paused by health gate breached",
  }],
};

Deno.test({
  name:
    "jsonReport() lists each gate breach with its time, query and value, and when its latch was set and lifted",
  permissions: "none",
  fn() {
    const r = JSON.parse(jsonReport(WAVED));
    assert.deepEqual(r.breaches, [{
      at: "2026-11-30T10:00:15.000Z",
      query: "e2e_broken > 0",
      value: 'e2e_broken{job="e2e"} 1',
      latch: {
        where: "owner Job ops/hook annotation job-dispatcher/paused",
        set: "2026-11-30T10:00:16.000Z",
        lifted: "2026-11-30T10:00:38.000Z",
      },
    }]);
    assert.deepEqual(r.pauses, [{
      from: "2026-11-30T10:00:15.000Z",
      to: "2026-11-30T10:00:38.000Z",
      why: "paused by health gate breached",
    }]);
    assert.deepEqual(r.waves[0].soak, {
      start: "2026-11-30T10:00:12.000Z",
      end: "2026-11-30T10:00:40.000Z",
    });
    const held = { ...WAVED, breaches: [{ ...WAVED.breaches![0], liftedAt: undefined }] };
    assert.equal(JSON.parse(jsonReport(held)).breaches[0].latch.lifted, null, "still latched");
    const unlatched = { ...WAVED, breaches: [{ ...WAVED.breaches![0], latchedAt: undefined }] };
    assert.equal(JSON.parse(jsonReport(unlatched)).breaches[0].latch, null, "never latched");
    assert.equal(JSON.parse(jsonReport(INPUT)).breaches, undefined, "no gate, no breaches");
  },
});

Deno.test({
  name:
    "junitReport() with waves: a testsuite per wave with its soak, the wave in each test case's classname",
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const text = junitReport(WAVED);
    assert.equal(XMLValidator.validate(text), true);
    const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text);
    assert.equal(doc.testsuites.tests, "4", "still one test case per node");
    const [one, two, rest] = doc.testsuites.testsuite;
    assert.equal(one.name, "ops/up wave 1 of 2");
    assert.equal(one.timestamp, "2026-11-30T10:00:00.000Z");
    assert.equal(one.time, "40.000", "the wave with its soak");
    const props = (s: { properties: { property: { name: string; value: string }[] } }) =>
      Object.fromEntries([s.properties.property].flat().map((p) => [p.name, p.value]));
    assert.deepEqual(props(one), {
      wave: "1",
      size: "1",
      opened: "2026-11-30T10:00:00.000Z",
      ended: "2026-11-30T10:00:12.000Z",
      soakEnded: "2026-11-30T10:00:40.000Z",
    });
    assert.equal(one.testcase.classname, "job-dispatcher.up.wave-1");
    assert.equal(one.testcase.name, "n1");
    assert.equal(two.name, "ops/up wave 2 of 2");
    assert.deepEqual(
      two.testcase.map((c: { name: string; classname: string }) => [c.name, c.classname]),
      [["n2", "job-dispatcher.up.wave-2"], ["n3", "job-dispatcher.up.wave-2"]],
    );
    assert.equal(two.failures, "1");
    assert.equal(rest.name, "ops/up", "the node a taint left out, in no wave");
    assert.equal(rest.testcase.name, "n4");
    assert.equal(rest.testcase.classname, "job-dispatcher.up");
  },
});

Deno.test({
  name: "nodeMarkPatch() on a node selected without labels or annotations keeps those it " +
    "gained since (the run's own cordon record): an add of the map would replace it",
  permissions: "none",
  fn() {
    const keys = trackingKeys("job-dispatcher");
    const selected = { uid: "u1" };
    const now: V1Node = {
      metadata: {
        uid: "u1",
        labels: { "kubernetes.io/hostname": "n1" },
        annotations: { [keys.cordonedBy]: "run-a" },
      },
    };
    const ops = nodeMarkPatch(keys, selected, "failed", "2026-11-30T10:00:00Z", "boom");
    const after = applyJsonPatch(now, ops as PatchOp[]);
    assert.equal(after.metadata?.annotations?.[keys.cordonedBy], "run-a");
    assert.equal(after.metadata?.labels?.["kubernetes.io/hostname"], "n1");
    assert.equal(after.metadata?.labels?.[keys.result], "failed");
  },
});
