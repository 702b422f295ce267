import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import { fleetClusters, parseFleet } from "./spec.ts";

Deno.test("parseFleet reads stages in order with their defaults and the overrides", () => {
  const spec = parseFleet(
    `stages:
  - name: canary
    clusters: [dev]
    soakSecs: 30
  - name: eu
    clusters: [eu1, eu2]
    maxParallelClusters: 1
    approval: true
clusters:
  eu2: { kubeconfig: /k/eu2.yaml, namespace: ops }
`,
    "f.yaml",
  );
  assert.deepEqual(spec.stages, [
    { name: "canary", clusters: ["dev"], soakSecs: 30, maxParallelClusters: 1, approval: false },
    { name: "eu", clusters: ["eu1", "eu2"], soakSecs: 0, maxParallelClusters: 1, approval: true },
  ]);
  assert.deepEqual(spec.clusters, { eu2: { kubeconfig: "/k/eu2.yaml", namespace: "ops" } });
  assert.deepEqual(fleetClusters(spec), ["dev", "eu1", "eu2"]);
});

const BAD: [string, string, RegExp][] = [
  ["not YAML", "stages: [", /not YAML/],
  ["no stages", "clusters: {}", /names no stages/],
  ["unknown top key", "stages: [{name: a, clusters: [x]}]\nstage: []", /unknown key "stage"/],
  [
    "unknown stage key",
    "stages: [{name: a, clusters: [x], soak: 3}]",
    /stage a has unknown key "soak"/,
  ],
  ["empty stage", "stages: [{name: a, clusters: []}]", /stage a is empty/],
  ["stage without clusters", "stages: [{name: a}]", /stage a is empty/],
  ["bad stage name", "stages: [{name: Eu, clusters: [x]}]", /stage 1 needs a name/],
  [
    "stage named twice",
    "stages: [{name: a, clusters: [x]}, {name: a, clusters: [y]}]",
    /stage a is named twice/,
  ],
  [
    "cluster in two stages",
    "stages: [{name: a, clusters: [x]}, {name: b, clusters: [y, x]}]",
    /cluster x is in two stages \(a, b\)/,
  ],
  ["negative soak", "stages: [{name: a, clusters: [x], soakSecs: -1}]", /stage a: soakSecs/],
  [
    "zero parallel",
    "stages: [{name: a, clusters: [x], maxParallelClusters: 0}]",
    /maxParallelClusters/,
  ],
  ["approval not boolean", "stages: [{name: a, clusters: [x], approval: yes}]", /approval must be/],
  [
    "unknown cluster key",
    "stages: [{name: a, clusters: [x]}]\nclusters: {x: {prometheus: u}}",
    /cluster x has unknown key "prometheus"/,
  ],
  [
    "overrides of a cluster in no stage",
    "stages: [{name: a, clusters: [x]}]\nclusters: {y: {namespace: n}}",
    /cluster y has overrides but is in no stage/,
  ],
];

for (const [name, text, message] of BAD) {
  Deno.test(`parseFleet refuses, naming it: ${name}`, () => {
    assert.throws(() => parseFleet(text, "f.yaml"), (e: Error) => {
      assert.ok(e instanceof UsageError);
      assert.match(e.message, message);
      assert.match(e.message, /^Invalid fleet file f\.yaml: [^\n]+$/);
      return true;
    });
  });
}
