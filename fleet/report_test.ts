import assert from "node:assert/strict";
import { fleetReport } from "./report.ts";
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
