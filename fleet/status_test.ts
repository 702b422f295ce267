import assert from "node:assert/strict";
import type { RunRecord } from "../report/record.ts";
import { parseFleet } from "./spec.ts";
import { type ClusterFacts, fleetView, renderFleetView } from "./status.ts";

const NOW = 1_000_000;
const SPEC = parseFleet(
  `stages:
  - {name: one, clusters: [a], soakSecs: 60}
  - {name: two, clusters: [b, c], approval: true}
`,
  "f.yaml",
);

function record(over: Partial<RunRecord> = {}): RunRecord {
  return {
    version: 1,
    prefix: "drv",
    templateHash: "h",
    namespace: "ops",
    state: "finished",
    startedAt: NOW - 100_000,
    updatedAt: NOW - 10_000,
    heartbeatMs: 20_000,
    parallelism: 2,
    summary: "",
    nodes: [{ node: "n1", phase: "succeeded" }, { node: "n2", phase: "succeeded" }],
    ...over,
  };
}

const CASES: [string, Record<string, ClusterFacts>, string | undefined, RegExp][] = [
  ["nothing begun", {}, "one", /the fleet command to start its clusters/],
  [
    "stage one running, paused",
    { a: { record: record({ state: "running", updatedAt: NOW, paused: "gate breach" }) } },
    "one",
    /cluster a paused: gate breach/,
  ],
  [
    "stage one running, stopped by its gate",
    { a: { record: record({ state: "running", updatedAt: NOW, stoppedBy: "gate breach" }) } },
    "one",
    /cluster a stopped: gate breach \(the line is stopped\)/,
  ],
  [
    "stage one's run gone",
    { a: { record: record({ state: "running", updatedAt: NOW - 60_000 }) } },
    "one",
    /cluster a's run is gone/,
  ],
  [
    "stage one failed: the line is stopped",
    { a: { record: record({ nodes: [{ node: "n1", phase: "failed" }] }) } },
    "one",
    /cluster a failed \(the line is stopped\)/,
  ],
  ["stage one ended 10 s ago: soak left", { a: { record: record() } }, "two", /soak, 50 s left/],
  [
    "soak over, no approval",
    { a: { record: record({ updatedAt: NOW - 70_000 }) } },
    "two",
    /approval \(fleet approve two\)/,
  ],
  [
    "another template's record is not started",
    { a: { record: record({ templateHash: "old" }) } },
    "one",
    /start its clusters/,
  ],
  [
    "every stage ended",
    { a: { record: record() }, b: { record: record() }, c: { record: record() } },
    undefined,
    /every stage ended/,
  ],
  ["a cluster unreadable", { a: { error: "refused" } }, "one", /cluster a could not be read/],
];

for (const [name, facts, stage, waits] of CASES) {
  Deno.test(`fleetView: ${name}`, () => {
    const v = fleetView(SPEC, new Map(Object.entries(facts)), "h", NOW);
    assert.equal(v.stage, stage);
    assert.match(v.waitsFor, waits);
    assert.deepEqual(v.clusters.map((r) => r.cluster), ["a", "b", "c"]);
  });
}

Deno.test("fleetView counts a cluster's nodes from its record", () => {
  const facts = {
    a: {
      record: record({
        nodes: [{ node: "n1", phase: "failed" }, { node: "n2", phase: "succeeded" }],
      }),
    },
  };
  const row = fleetView(SPEC, new Map(Object.entries(facts)), "h", NOW).clusters[0];
  assert.deepEqual(
    { phase: row.phase, succeeded: row.succeeded, failed: row.failed, total: row.total },
    { phase: "failed", succeeded: 1, failed: 1, total: 2 },
  );
});

Deno.test("renderFleetView prints one row per cluster and the fleet's line", () => {
  const text = renderFleetView(fleetView(SPEC, new Map([["a", { record: record() }]]), "h", NOW));
  const lines = text.trimEnd().split("\n");
  assert.match(lines[0], /^CLUSTER\s+STAGE\s+PHASE\s+SUCCEEDED\s+FAILED\s+TOTAL\s+ETA\s+REASON$/);
  assert.match(lines[1], /^a\s+one\s+ended\s+2\s+0\s+2\s+-$/);
  assert.match(lines[2], /^b\s+two\s+notStarted\s+0\s+0\s+0/);
  assert.equal(lines.at(-2), "fleet: stage two; waits for soak, 50 s left");
  assert.equal(
    lines.at(-1),
    "fleet ETA: 2m20s (soak 50s left; stage two 1m30s) plus the approval of stage two",
  );
});

// The fleet's ETA: what is left of the stage in flight, the soak left, the
// stages after it from each cluster's estimate; a word, not a number, while
// a cluster is paused or the line is stopped.
const ETA_CASES: {
  name: string;
  facts: Record<string, ClusterFacts>;
  seconds?: number;
  text: RegExp;
}[] = [
  {
    name: "stage one running, none ended: no estimate for the clusters not started",
    facts: { a: { record: record({ state: "running", updatedAt: NOW, etaSecs: 40 }) } },
    text: /^unknown: no estimate yet for b, c$/,
  },
  {
    name: "a running cluster stopped by its gate (its Jobs in flight finish): stopped, not paused",
    facts: {
      a: {
        record: record({ state: "running", updatedAt: NOW, etaSecs: 40, stoppedBy: "gate" }),
      },
    },
    text: /^stopped \(cluster a: gate\)$/,
  },
  {
    name: "stage one ended 10 s ago: soak left, then stage two at the ended clusters' mean",
    facts: { a: { record: record() } },
    seconds: 50 + 90,
    text: /^2m20s \(soak 50s left; stage two 1m30s\) plus the approval of stage two$/,
  },
  {
    name: "stage two running: the longest of its clusters",
    facts: {
      a: { record: record({ updatedAt: NOW - 500_000, startedAt: NOW - 600_000 }) },
      b: { record: record({ state: "running", updatedAt: NOW, etaSecs: 30 }) },
      c: { record: record({ state: "running", updatedAt: NOW, etaSecs: 70 }) },
    },
    seconds: 70,
    text: /^1m10s \(stage two 1m10s\)$/,
  },
  {
    name: "a running cluster paused: no number",
    facts: {
      a: { record: record({ state: "running", updatedAt: NOW, etaSecs: 40, paused: "gate" }) },
    },
    text: /^paused \(cluster a: gate\)$/,
  },
  {
    name: "a failed cluster: the line is stopped",
    facts: { a: { record: record({ nodes: [{ node: "n1", phase: "failed" }] }) } },
    text: /^stopped \(cluster a failed\)$/,
  },
  {
    name: "every stage ended",
    facts: { a: { record: record() }, b: { record: record() }, c: { record: record() } },
    seconds: 0,
    text: /^0s$/,
  },
];

for (const c of ETA_CASES) {
  Deno.test(`fleetView ETA: ${c.name}`, () => {
    const v = fleetView(SPEC, new Map(Object.entries(c.facts)), "h", NOW);
    assert.match(v.eta.text, c.text);
    assert.equal(v.eta.seconds, c.seconds);
  });
}

Deno.test("fleetView shows no per-cluster ETA while that cluster is paused", () => {
  const facts = {
    a: { record: record({ state: "running", updatedAt: NOW, etaSecs: 40, paused: "gate" }) },
  };
  const v = fleetView(SPEC, new Map(Object.entries(facts)), "h", NOW);
  assert.equal(v.clusters[0].etaSecs, undefined);
  assert.match(
    renderFleetView(v).split("\n")[1],
    /^a\s+one\s+running\s+2\s+0\s+2\s+paused\s+gate$/,
  );
  assert.match(renderFleetView(v), /^fleet ETA: paused \(cluster a: gate\)$/m);
});

Deno.test("renderFleetView names the fleet process holding the lease, while one does", () => {
  const view = fleetView(SPEC, new Map([["a", { record: record() }]]), "h", NOW);
  view.heldBy = {
    holder: "bob@bastion pid 7",
    fleet: "f.yaml",
    renewedAt: "2026-12-03T12:00:00Z",
    cluster: "a",
  };
  assert.equal(
    renderFleetView(view).trimEnd().split("\n").at(-1),
    "fleet: run by bob@bastion pid 7 (fleet f.yaml), its lease renewed 2026-12-03T12:00:00Z",
  );
});

Deno.test({
  name: "fleet status counts the soak from the end the API server stamped, not the writer's clock",
  permissions: "none",
  fn() {
    // The bastion that wrote the record runs 5 minutes fast: its updatedAt is
    // in our future. The fleet itself soaks from the server's stamp
    // (fleet/cluster.ts recordedEnd); status must say the same soak left.
    const skewed = record({ updatedAt: NOW + 300_000 - 10_000 });
    const v = fleetView(
      SPEC,
      new Map([["a", { record: skewed, endedAt: NOW - 10_000 }]]),
      "h",
      NOW,
    );
    assert.equal(v.waitsFor, "soak, 50 s left");
    assert.match(v.eta.text, /soak 50s left/);
  },
});

Deno.test({
  name:
    "fleet status gives no ETA while the soak between stages is latched (pause file, exit latch)",
  permissions: "none",
  async fn(t) {
    // Stage one ended 2 min ago: its 60 s soak is over by the clock, but a
    // breach in the soak latched it (fleet/soak_gates.ts): the fleet holds on
    // the pause file, or stopped (exit 5) on the cluster's exit latch.
    const ended = { record: record({ updatedAt: NOW - 120_000 }) };
    await t.step("the pause file exists", () => {
      const v = fleetView(SPEC, new Map([["a", ended]]), "h", NOW, { paused: "/run/pause" });
      assert.equal(v.eta.seconds, undefined, v.eta.text);
      assert.match(v.eta.text, /^paused \(the pause file \/run\/pause exists/);
    });
    await t.step("a cluster's exit latch is set", () => {
      const facts = new Map([["a", { ...ended, latch: "error rate 0.2 > 0.05" }]]);
      const v = fleetView(SPEC, facts, "h", NOW);
      assert.equal(v.eta.seconds, undefined, v.eta.text);
      assert.match(v.eta.text, /^stopped \(cluster a: a health gate latched: error rate/);
    });
  },
});
