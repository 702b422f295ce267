/**
 * `job-dispatcher rbac` is the one source of the dispatcher's RBAC:
 * - the chart's rendered RBAC grants its ServiceAccount exactly what `rbac`
 *   prints for the flags the chart passes (nothing missing, nothing extra),
 *   and its viewer roles exactly what `rbac --viewer` prints (helm template,
 *   no cluster);
 * - on a bare cluster, `rbac`'s output is enough for a run with the same
 *   flags under that ServiceAccount's own token, and taking any one rule out
 *   makes the pre-flight (`--dry-run=plan`) name it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import { CHART, helmRunner, objects } from "./_helm.ts";
import { grantsTo } from "./_rbac.ts";
import { tempDir, tempFile } from "./_fixtures.ts";
import { parseOptions } from "../cli/options.ts";
import { parseJobTemplate } from "../job.ts";
import { rbacCommandDocuments } from "../rbac/command.ts";

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

const NS = "ops";
const RELEASE = "rel";
const FULL = `${RELEASE}-job-dispatcher`;
const NO_ENV = { env: () => undefined, readFile: () => undefined };

const TEMPLATE = `apiVersion: batch/v1
kind: Job
metadata: {name: upg}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, command: ["true"]}]
`;

/** What `rbac` grants for the flags the chart's hook Job runs with, and the template it mounts. */
function rbacFor(chart: Obj[]): Set<string> {
  const hook = chart.find((o) => o.kind === "Job")!;
  const args: string[] = hook.spec.template.spec.containers[0].args
    .map((a: string) => a.replace("$(POD_NAME)", "the-pod"));
  const cm = chart.find((o) => o.kind === "ConfigMap" && o.data?.["job.yaml"])!;
  const docs = rbacCommandDocuments({
    opts: parseOptions(args),
    template: parseJobTemplate(cm.data["job.yaml"], "job.yaml"),
    serviceAccount: FULL,
    viewer: false,
  }, NO_ENV);
  return grantsTo(docs, NS, FULL);
}

/** The differences of two sets of grants, both ways. */
function diff(chart: Set<string>, rbac: Set<string>) {
  return {
    "missing from the chart": [...rbac].filter((p) => !chart.has(p)).sort(),
    "extra in the chart": [...chart].filter((p) => !rbac.has(p)).sort(),
  };
}

Deno.test("the chart's RBAC is `job-dispatcher rbac`'s for the flags it passes", async (t) => {
  const render = helmRunner(await tempDir("rbac-helm"));
  const cases: [string, Obj][] = [
    ["defaults (owner by name)", {}],
    ["owner.mode=pod", { owner: { mode: "pod" } }],
    ["owner.mode=none", { owner: { mode: "none" } }],
    ["rbac.drain with --drain", { rbac: { drain: true }, extraArgs: ["--drain"] }],
    [
      "gates, pausing the owner",
      { gates: { prometheusUrl: "http://prom:9090", queries: ["up == 0"] } },
    ],
    ["verification.podSelector", { verification: { podSelector: "app=validator" } }],
  ];
  for (const [what, values] of cases) {
    await t.step(what, async () => {
      const file = await tempFile(stringify({
        jobTemplate: TEMPLATE,
        selection: { nodeSelectors: ["pool=a"] },
        ...values,
      }));
      const chart = objects(await render(["template", RELEASE, CHART, "-n", NS, "-f", file]));
      const granted = grantsTo(chart, NS, FULL);
      // The chart's own: patch on this revision's template ConfigMap, named by
      // the hook Job's annotation, which only the chart creates (run/owner_guard.ts).
      for (const p of granted) {
        if (/^patch \/configmaps .*-job-template @/.test(p)) granted.delete(p);
      }
      assert.deepEqual(diff(granted, rbacFor(chart)), {
        "missing from the chart": [],
        "extra in the chart": [],
      });
    });
  }
  await t.step("the viewer roles are `rbac --viewer`'s", async () => {
    const file = await tempFile(stringify({ jobTemplate: TEMPLATE }));
    const chart = objects(await render(["template", RELEASE, CHART, "-n", NS, "-f", file]));
    // The chart's test ServiceAccount is bound to the viewer roles, and to nothing else.
    const granted = grantsTo(chart, NS, `${FULL}-test`);
    const viewer = rbacCommandDocuments({
      opts: parseOptions(["--job-template", "-", "-n", NS]),
      serviceAccount: "v",
      viewer: true,
    }, NO_ENV);
    assert.deepEqual(diff(granted, grantsTo(viewer, NS, "v")), {
      "missing from the chart": [],
      "extra in the chart": [],
    });
  });
});
