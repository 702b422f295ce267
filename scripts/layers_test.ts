import assert from "node:assert/strict";
import {
  ABSOLUTE,
  checkLayers,
  circles,
  type ImportGraph,
  importsOf,
  OUTSIDE_THE_REPOSITORY,
} from "./layers.ts";

const graph = (edges: Record<string, string[]>): ImportGraph => {
  const g = new Map<string, string[]>(Object.entries(edges));
  for (const tos of Object.values(edges)) for (const t of tos) if (!g.has(t)) g.set(t, []);
  return g;
};

Deno.test({
  name: "importsOf() resolves relative imports, static, type-only, re-exported and dynamic",
  permissions: "none",
  fn: () => {
    const text = [
      'import { a } from "../kube/client.ts";',
      'import type { B } from "./b.ts";',
      'export { c } from "../base/errors.ts";',
      'const d = await import("../job.ts");',
      'import { parse } from "yaml";',
      '// import { e } from "./commented.ts";',
      'const s = "from \\"./in_a_string.ts\\"";',
    ].join("\n");
    assert.deepEqual(importsOf("run/plan.ts", text).sort(), [
      "base/errors.ts",
      "job.ts",
      "kube/client.ts",
      "run/b.ts",
    ]);
    assert.deepEqual(importsOf("main.ts", 'import "./cli/options.ts";'), ["cli/options.ts"]);
  },
});

Deno.test({
  name: "circles() finds each strongly connected set, and a module importing itself",
  permissions: "none",
  fn: () => {
    assert.deepEqual(circles(graph({ "a.ts": ["b.ts"], "b.ts": ["c.ts"], "c.ts": [] })), []);
    assert.deepEqual(
      circles(graph({ "x/a.ts": ["x/b.ts"], "x/b.ts": ["x/c.ts"], "x/c.ts": ["x/a.ts"] })),
      [["x/a.ts", "x/b.ts", "x/c.ts"]],
    );
    assert.deepEqual(circles(graph({ "s.ts": ["s.ts"] })), [["s.ts"]]);
  },
});

Deno.test({
  name: "checkLayers() fails each rule of the house and passes a house in order",
  permissions: "none",
  fn: async (t) => {
    const cases: { name: string; edges: Record<string, string[]>; want: string[] }[] = [
      {
        name: "a house in order",
        edges: {
          "main.ts": ["cli/options.ts", "run/run.ts"],
          "cli/options.ts": ["run/config.ts", "maintenance/config.ts"],
          "run/run.ts": ["engine/fanout.ts", "report/log.ts"],
          "report/log.ts": ["engine/fanout.ts", "base/log.ts"],
          "engine/fanout.ts": ["kube/client.ts", "nodes/pods.ts"],
          "kube/client.ts": ["base/errors.ts", "job.ts"],
          "engine/fanout_test.ts": ["testing/fake_api.ts", "engine/fanout.ts"],
          "testing/fake_api.ts": ["engine/fanout.ts"],
          "e2e/cluster.ts": ["kube/client.ts"],
        },
        want: [],
      },
      {
        name: "a circle",
        edges: { "run/a.ts": ["run/b.ts"], "run/b.ts": ["run/a.ts"] },
        want: ["circle"],
      },
      {
        name: "cli/ imported below main.ts",
        edges: { "maintenance/maintenance.ts": ["cli/options.ts"] },
        want: ["cli"],
      },
      {
        name: "cli/ imported by a test of another folder",
        edges: { "run/run_test.ts": ["cli/options.ts"] },
        want: ["cli"],
      },
      {
        name: "cli/ imported by e2e",
        edges: { "e2e/x_test.ts": ["cli/options.ts"] },
        want: ["cli"],
      },
      {
        name: "the engine importing the logger above it",
        edges: { "engine/fanout.ts": ["report/log.ts"] },
        want: ["outward"],
      },
      {
        name: "job.ts importing a folder",
        edges: { "job.ts": ["nodes/eligibility.ts"] },
        want: ["outward"],
      },
      {
        name: "the house importing e2e",
        edges: { "kube/client.ts": ["e2e/_procs.ts"] },
        want: ["outward"],
      },
      {
        name: "testing/ imported by a module that is no test",
        edges: { "engine/fanout.ts": ["testing/fake_api.ts"] },
        want: ["testing"],
      },
      { name: "a module at the top level", edges: { "helpers.ts": [] }, want: ["top-level"] },
      {
        name: "a folder in no layer",
        edges: { "util/x.ts": [], "util/y.ts": [] },
        want: ["no-layer"],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(checkLayers(graph(c.edges)).map((v) => v.rule), c.want);
      });
    }
  },
});

Deno.test({
  name: "checkLayers() names the import, the rule and the fix in one line",
  permissions: "none",
  fn: () => {
    const [v] = checkLayers(graph({ "engine/fanout.ts": ["report/log.ts"] }));
    assert.equal(
      v.message,
      "engine/fanout.ts imports report/log.ts: engine may import only gates, maintenance, verify, " +
        "policy, nodes, kube, base, job.ts (imports point inward: move what both need below report)",
    );
  },
});

Deno.test({
  name: "importsOf() leads where Deno leads: every way a review once slipped cli/ past the check",
  permissions: "none",
  fn: async (t) => {
    const cases: { name: string; text: string; map?: Record<string, string>; want: string[] }[] = [
      {
        name: "an empty segment",
        text: 'export * from "..//cli/options.ts";',
        want: ["cli/options.ts"],
      },
      {
        name: "a percent-encoded name",
        text: 'export * from "../%63li/options.ts";',
        want: ["cli/options.ts"],
      },
      { name: "a query string", text: 'import "../cli/options.ts?x=1";', want: ["cli/options.ts"] },
      { name: "a hash", text: 'import "../cli/options.ts#h";', want: ["cli/options.ts"] },
      { name: "a detour", text: 'import "../engine/../cli/options.ts";', want: ["cli/options.ts"] },
      {
        name: "above the root and back",
        text: 'export * from "../../checkout/cli/options.ts";',
        want: [OUTSIDE_THE_REPOSITORY],
      },
      {
        name: "an absolute path",
        text: 'export * from "/tmp/x/cli/options.ts";',
        want: [ABSOLUTE],
      },
      {
        name: "a file: URL",
        text: 'export * from "file:///tmp/x/cli/options.ts";',
        want: [ABSOLUTE],
      },
      {
        name: "deno.json's import map",
        text: 'import { HELP } from "#cli/options.ts";',
        map: { "#cli/": "./cli/", "yaml": "npm:yaml@2" },
        want: ["cli/options.ts"],
      },
      {
        name: "an npm package through the map",
        text: 'import "yaml";',
        map: { yaml: "npm:yaml@2" },
        want: [],
      },
      {
        name: "a triple-slash reference",
        text: '/// <reference path="../cli/options.ts" />',
        want: ["cli/options.ts"],
      },
      {
        name: "a @ts-types pragma",
        text: '// @ts-types="../cli/options.ts"\nimport x from "npm:x";',
        want: ["cli/options.ts"],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(importsOf("engine/p.ts", c.text, c.map), c.want);
      });
    }
  },
});

Deno.test({
  name: "checkLayers() refuses an import out of the repository, and testing/ importing e2e/",
  permissions: "none",
  fn: () => {
    assert.deepEqual(checkLayers(graph({ "engine/p.ts": [ABSOLUTE] })).map((v) => v.rule), [
      "outward",
    ]);
    assert.deepEqual(
      checkLayers(graph({ "testing/p.ts": ["e2e/_procs.ts"] })).map((v) => v.rule),
      ["outward"],
    );
    // A circle hidden behind a query string: the edge is the module itself.
    const hidden = new Map([
      ["engine/ca.ts", importsOf("engine/ca.ts", 'import "./cb.ts?x";')],
      ["engine/cb.ts", importsOf("engine/cb.ts", 'import "./ca.ts";')],
    ]);
    assert.deepEqual(checkLayers(hidden).map((v) => v.rule), ["circle"]);
    // Every module Deno loads counts, not only .ts: a .mts at the top, a .js shim.
    assert.deepEqual(checkLayers(graph({ "helpers.mts": [] })).map((v) => v.rule), ["top-level"]);
    assert.deepEqual(
      checkLayers(graph({ "engine/shim.js": ["cli/options.ts"] })).map((v) => v.rule),
      ["cli"],
    );
  },
});
