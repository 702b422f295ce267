import assert from "node:assert/strict";
import { fleetEta } from "./eta.ts";
import { parseFleet } from "./spec.ts";

Deno.test("fleetEta adds each stage's clusters, maxParallelClusters at once, and the soaks between", async (t) => {
  const cases: { name: string; yaml: string; secs: Record<string, number>; want: number }[] = [
    {
      name: "a stage at once takes its longest cluster",
      yaml: "stages: [{name: a, clusters: [x, y]}]",
      secs: { x: 100, y: 300 },
      want: 300,
    },
    {
      name: "one at a time adds them up",
      yaml: "stages: [{name: a, clusters: [x, y, z], maxParallelClusters: 1}]",
      secs: { x: 100, y: 300, z: 50 },
      want: 450,
    },
    {
      name: "two slots, in the fleet's order",
      yaml: "stages: [{name: a, clusters: [x, y, z], maxParallelClusters: 2}]",
      secs: { x: 100, y: 300, z: 50 },
      want: 300,
    },
    {
      name: "the soak between stages, none after the last",
      yaml:
        "stages: [{name: a, clusters: [x], soakSecs: 60}, {name: b, clusters: [y], soakSecs: 999}]",
      secs: { x: 100, y: 100 },
      want: 260,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const eta = fleetEta(parseFleet(c.yaml, "f"), (x) => c.secs[x]);
      assert.ok("seconds" in eta);
      assert.equal(eta.seconds, c.want);
    });
  }
});

Deno.test("fleetEta says the text with each stage and the approvals' waits", () => {
  const spec = parseFleet(
    "stages: [{name: a, clusters: [x], soakSecs: 60}, {name: b, clusters: [y, z], maxParallelClusters: 1, approval: true}]",
    "f",
  );
  const eta = fleetEta(spec, () => 100);
  assert.ok("text" in eta);
  assert.equal(
    eta.text,
    "6m00s (stage a 1m40s, soak 1m00s; stage b 3m20s) plus the approvals' waits",
  );
});

Deno.test("fleetEta names the clusters without an estimate", () => {
  const spec = parseFleet("stages: [{name: a, clusters: [x, y]}]", "f");
  assert.deepEqual(fleetEta(spec, (c) => (c === "x" ? 1 : undefined)), { missing: ["y"] });
});
