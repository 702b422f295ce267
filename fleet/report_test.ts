import assert from "node:assert/strict";
import { fleetJunit, fleetReport, fleetTimeline } from "./report.ts";
import type { ReportInput } from "../report/report.ts";
import { parseFleet } from "./spec.ts";

const SPEC = parseFleet(
  "stages: [{name: one, clusters: [a]}, {name: two, clusters: [b, c]}]",
  "FLEET.yaml",
);

Deno.test("fleetReport has one section per cluster, in stage order, with its run's report", () => {
  const files: Record<string, string> = {
    "r.a.json": JSON.stringify({ summary: { succeeded: 3 } }),
    "r.b.json": "<testsuites/>", // another format: named, not read
  };
  const stop = { cluster: "b", stage: "two", cause: "the failure budget", code: 1 };
  const r = fleetReport(
    SPEC,
    { exitCode: 1, stoppedBy: stop },
    (c) => `r.${c}.json`,
    (p) => files[p],
  );
  assert.deepEqual(Object.keys(r.clusters), ["a", "b", "c"]);
  assert.deepEqual(r.clusters.a, {
    stage: "one",
    reportFile: "r.a.json",
    report: { summary: { succeeded: 3 } },
  });
  assert.deepEqual([r.clusters.b.report, r.clusters.c.report], [null, null]);
  assert.deepEqual([r.exitCode, r.stoppedBy], [1, stop]);
  assert.deepEqual(r.stages, [{ name: "one", clusters: ["a"] }, {
    name: "two",
    clusters: ["b", "c"],
  }]);
});

Deno.test("fleetReport says no stop as null", () => {
  const r = fleetReport(SPEC, { exitCode: 0 }, (c) => c, () => undefined);
  assert.equal(r.stoppedBy, null);
});

/** A cluster's run of `nodes`, from `from` to `to` (ms since the epoch). */
function run(nodes: string[], from: number, to: number): ReportInput {
  return {
    startedAt: new Date(from),
    finishedAt: new Date(to),
    namespace: "ops",
    prefix: "drv",
    results: nodes.map((node) => ({
      node,
      job: `drv-${node}`,
      outcome: "succeeded" as const,
      startedAt: from + 1_000,
      finishedAt: to - 1_000,
    })),
    uids: new Map(),
    skipped: [],
    pauses: [{ from: from + 2_000, to: from + 3_000, why: "paused by file /tmp/p" }],
  };
}

function embedded(html: string) {
  const m = html.match(/<script type="application\/json" id="data">(.*?)<\/script>/s);
  assert.ok(m, "the data is embedded");
  return JSON.parse(m[1]);
}

Deno.test("fleetTimeline draws one lane per cluster, in stage order, each with its nodes, the stages and the soak", () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a], soakSecs: 60}, {name: two, clusters: [c, b], approval: true}]",
    "FLEET.yaml",
  );
  const T = Date.UTC(2026, 11, 3, 9);
  const inputs = new Map([
    // Given out of order: the lanes follow the stages, not the order the runs ended.
    ["b", run(["b-1", "b-2", "b-3"], T + 100_000, T + 130_000)],
    ["a", run(["a-1", "a-2"], T, T + 30_000)],
  ]);
  const stop = { cluster: "b", stage: "two", cause: "the failure budget", code: 1 };
  const d = embedded(fleetTimeline(spec, { stoppedBy: stop }, inputs));
  assert.deepEqual(d.lanes.map((l: { title: string }) => l.title), [
    "a: stage one",
    "c: stage two",
    "b: stage two",
  ]);
  const names = d.lanes.map((l: { rows: string[][] }) => l.rows.map((r) => r[0]));
  assert.deepEqual(names, [["a-1", "a-2"], [], ["b-1", "b-2", "b-3"]]);
  assert.match(d.lanes[1].note, /no run in this process/);
  // One time axis from the fleet's first start: b's pause is at +102 s.
  assert.deepEqual(d.lanes[2].pauses, [[102_000, 103_000, "paused by file /tmp/p"]]);
  assert.deepEqual(d.marks, [[0, "stage one starts"], [100_000, "stage two starts"]]);
  assert.deepEqual(d.bands, [[
    30_000,
    100_000,
    "after stage one: a soak of 60 s and the approval of stage two; stage two started 70 s after",
  ]]);
  assert.match(d.stoppedBy, /cluster b \(stage two\): the failure budget/);
  assert.equal(d.title, "fleet FLEET.yaml");
});

Deno.test("fleetJunit is one JUnit document with each cluster's suites in stage order, the cluster in their names and classnames", () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a]}, {name: two, clusters: [c, b]}]",
    "FLEET.yaml",
  );
  const T = Date.UTC(2026, 11, 3, 9);
  const inputs = new Map([
    ["b", run(["b-1", "b-2"], T + 100_000, T + 130_000)],
    ["a", run(["a-1"], T, T + 30_000)],
  ]);
  const xml = fleetJunit(spec, inputs);
  assert.equal(xml.match(/<testsuites /g)?.length, 1, "one document");
  assert.match(xml, /<testsuites name="job-dispatcher fleet FLEET.yaml" tests="3" failures="0"/);
  const suites = [...xml.matchAll(/<testsuite name="([^"]+)" tests="(\d+)"/g)].map((m) => [
    m[1],
    m[2],
  ]);
  assert.deepEqual(suites, [
    ["a (stage one): ops/drv", "1"],
    ["c (stage two): no run in this process (counted from its record, or not started)", "0"],
    ["b (stage two): ops/drv", "2"],
  ]);
  assert.match(xml, /<testcase classname="job-dispatcher\.b\.drv" name="b-1"/);
});
