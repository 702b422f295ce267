import assert from "node:assert/strict";
import type { RunConfig } from "../run/config.ts";
import { clusterConfig, fleetOrder, fleetPath } from "./command.ts";
import { parseFleet } from "./spec.ts";

const PATHS: [string, string, string][] = [
  ["~/.kube/eu2.yaml", "FLEET.yaml", "/home/ops/.kube/eu2.yaml"],
  ["/etc/kube/eu2.yaml", "conf/FLEET.yaml", "/etc/kube/eu2.yaml"],
  ["eu2.yaml", "/etc/fleet/FLEET.yaml", "/etc/fleet/eu2.yaml"],
  ["kube/eu2.yaml", "FLEET.yaml", "./kube/eu2.yaml"],
];

for (const [path, source, want] of PATHS) {
  Deno.test(`fleetPath reads ${path} in ${source} as ${want}`, () => {
    assert.equal(fleetPath(path, source, "/home/ops"), want);
  });
}

const SPEC = parseFleet(
  "stages: [{name: s, clusters: [a, b]}]\nclusters: {b: {kubeconfig: b.yaml, namespace: ops}}",
  "/f/FLEET.yaml",
);
const OPTS = { kubeconfig: "/k.yaml", namespace: "jobs", report: "out/r.json" } as RunConfig;

Deno.test("clusterConfig gives each cluster its context, overrides and report", () => {
  const a = clusterConfig(OPTS, SPEC, "a");
  assert.deepEqual([a.context, a.kubeconfig, a.namespace, a.report], [
    "a",
    "/k.yaml",
    "jobs",
    "out/r.a.json",
  ]);
  const b = clusterConfig({ ...OPTS, report: "out/report" }, SPEC, "b");
  assert.deepEqual([b.context, b.kubeconfig, b.namespace, b.report], [
    "b",
    "/f/b.yaml",
    "ops",
    "out/report.b",
  ]);
});

Deno.test("clusterConfig gives a cluster its own Prometheus for the gates", () => {
  const spec = parseFleet(
    "stages: [{name: s, clusters: [a, b]}]\nclusters: {b: {gatePrometheusUrl: 'http://b:9090'}}",
    "f",
  );
  const gate = {
    url: "http://all:9090",
    queries: ["up == 0"],
    intervalSecs: 30,
    onBreach: "pause",
  };
  const opts = { ...OPTS, gate } as RunConfig;
  assert.equal(clusterConfig(opts, spec, "a").gate?.url, "http://all:9090");
  assert.equal(clusterConfig(opts, spec, "b").gate?.url, "http://b:9090");
  assert.deepEqual(clusterConfig(opts, spec, "b").gate?.queries, ["up == 0"]);
  assert.throws(() => clusterConfig(OPTS, spec, "b"), /cluster b: gatePrometheusUrl replaces/);
});

Deno.test("fleetOrder says the stages, their clusters, soaks and approvals in one line", () => {
  const spec = parseFleet(
    `stages:
  - {name: one, clusters: [a], soakSecs: 30}
  - {name: two, clusters: [b, c], approval: true, soakSecs: 9}
`,
    "f",
  );
  assert.equal(
    fleetOrder(spec),
    "stage one: a, then a soak of 30 s; stage two (after approval): b, c",
  );
});
