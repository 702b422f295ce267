import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import { previewSource, skippedNodes } from "./plan_preview.ts";
import type { Plan } from "./plan.ts";
import type { RunConfig } from "./config.ts";

const node = (name: string): V1Node => ({ metadata: { name, uid: `uid-${name}` } });
const [a, b, c, t] = ["a", "b", "c", "t"].map(node);

/** A plan as far as the preview reads it: a tainted node, one already done, two to run. */
const PLAN = {
  namespace: "ops",
  prefix: "up",
  selection: { labelSelectors: ["pool=gpu"], pageSize: 500, ignoreTaints: false },
  resolved: {
    matched: [a, b, c, t],
    listings: [],
    eligible: [a, b, c],
    skipped: [{ node: t, taint: { key: "gpu", value: "broken", effect: "NoSchedule" } }],
  },
  eligible: [a, c],
  targets: [
    { node: { name: "a", uid: "uid-a" }, name: "up-a", job: () => ({}), wave: 1 },
    { node: { name: "c", uid: "uid-c" }, name: "up-c", job: () => ({}), wave: 2 },
  ],
  cleanupTargets: [],
} as unknown as Plan;

const OPTS = {
  parallelism: 3,
  waveSoakSecs: 0,
  waves: { sizes: [{ count: 1 }, { percent: 100 }], canary: true },
  nodeLabels: { key: "example.com/done", value: "v2" },
  maintenance: { windows: [] },
} as unknown as RunConfig;

Deno.test({
  name: "skippedNodes() gives each matched node without a Job the reason the run's log gives",
  permissions: "none",
  fn() {
    assert.deepEqual(skippedNodes(OPTS, PLAN), [
      { node: "t", reason: "taint gpu=broken:NoSchedule is not tolerated by the template" },
      { node: "b", reason: "already done (example.com/done=v2)" },
    ]);
  },
});

Deno.test({
  name: "previewSource() keeps the dispatch order and each target's wave",
  permissions: "none",
  fn() {
    const src = previewSource(OPTS, PLAN);
    assert.deepEqual(src.targets, [
      { node: "a", job: "up-a", wave: 1 },
      { node: "c", job: "up-c", wave: 2 },
    ]);
    assert.equal(src.canary, true);
    assert.equal(src.selection, "--node-selector pool=gpu");
    assert.equal(src.matched.length, 4);
  },
});
