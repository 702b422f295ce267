/**
 * The chart refuses every Job template the dispatcher's first check
 * ({@linkcode parseJobTemplate}) refuses, at `helm template` time: in the
 * hook, the same template fails only after the release exists (a stored
 * release, RBAC, a hook Job that exits 2), which a user then has to clean up.
 *
 * Table-driven: each case runs through both the dispatcher's check and
 * `helm template` (as `jobTemplate` and as `verification.jobTemplate`, both
 * of which the dispatcher parses), and both must refuse. The table must
 * cover every refusal of {@linkcode parseJobTemplate}: its `fail(...)`
 * calls are read from job.ts, so a check added there without a case (and
 * so without the chart's twin) fails this test. No cluster: `helm template`
 * renders offline.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseJobTemplate } from "../job.ts";
import { CHART, helmResult } from "./_helm.ts";
import { tempFile } from "./_fixtures.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** A pod spec body the dispatcher accepts, for cases that break one other thing. */
const GOOD_POD = "restartPolicy: Never\n      containers: [{name: c, image: busybox}]";

/** One refusal: the template text, and what the dispatcher and the chart each say. */
interface Case {
  name: string;
  text: string;
  dispatcher: RegExp;
  chart: RegExp;
}

const CASES: Case[] = [
  {
    name: "not YAML",
    text: "kind: Job\nmetadata: {name: a\n",
    dispatcher: /not valid YAML/,
    chart: /is not valid YAML/,
  },
  {
    name: "empty",
    text: "# nothing here\n",
    dispatcher: /it is empty/,
    chart: /must be one batch\/v1 Job/,
  },
  {
    name: "two documents",
    text: `apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n    spec:\n` +
      `      ${GOOD_POD}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n`,
    dispatcher: /it holds 2 documents/,
    chart: /holds 2 YAML documents/,
  },
  {
    name: "a list, not a mapping",
    text: "- apiVersion: batch/v1\n- kind: Job\n",
    dispatcher: /it is not a YAML mapping/,
    chart: /not valid YAML|must be one batch\/v1 Job/,
  },
  {
    name: "kind Pod",
    text: "apiVersion: batch/v1\nkind: Pod\nmetadata: {name: a}\n",
    dispatcher: /kind is "Pod"; it must be Job/,
    chart: /must be one batch\/v1 Job/,
  },
  {
    name: "apiVersion batch/v1beta1",
    text: "apiVersion: batch/v1beta1\nkind: Job\nmetadata: {name: a}\n",
    dispatcher: /apiVersion is "batch\/v1beta1"; it must be batch\/v1/,
    chart: /must be one batch\/v1 Job/,
  },
  {
    name: "no pod spec",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec: {backoffLimit: 0}\n",
    dispatcher: /spec\.template\.spec is missing/,
    chart: /spec\.template\.spec is missing/,
  },
  {
    name: "no container",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
      "    spec:\n      restartPolicy: Never\n      containers: []\n",
    dispatcher: /containers is empty/,
    chart: /spec\.template\.spec\.containers is empty/,
  },
  {
    name: "restartPolicy Always",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
      "    spec:\n      restartPolicy: Always\n      containers: [{name: c, image: busybox}]\n",
    dispatcher: /restartPolicy is "Always"; a Job needs Never or OnFailure/,
    chart: /spec\.template\.spec\.restartPolicy is "Always": a Job needs Never or OnFailure/,
  },
  {
    name: "no restartPolicy",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
      "    spec:\n      containers: [{name: c, image: busybox}]\n",
    dispatcher: /restartPolicy is null; a Job needs Never or OnFailure/,
    chart: /spec\.template\.spec\.restartPolicy is "": a Job needs Never or OnFailure/,
  },
  {
    name: "nodeName set",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
      `    spec:\n      nodeName: node-000\n      ${GOOD_POD}\n`,
    dispatcher: /nodeName is set; remove it, the dispatcher pins each Job to its node/,
    chart: /spec\.template\.spec\.nodeName is set: remove it, the dispatcher pins each Job/,
  },
  {
    name: "nodeName set to a list",
    text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
      `    spec:\n      nodeName: []\n      ${GOOD_POD}\n`,
    dispatcher: /nodeName is set; remove it, the dispatcher pins each Job to its node/,
    chart: /spec\.template\.spec\.nodeName is set: remove it, the dispatcher pins each Job/,
  },
];

/** A Job both checks accept, for the accepted variants below. */
const GOOD_JOB = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  template:\n" +
  `    spec:\n      ${GOOD_POD}\n`;

/** Templates the dispatcher accepts, so the chart must too (no false refusal). */
const ACCEPTED: { name: string; text: string }[] = [
  { name: "a plain Job", text: GOOD_JOB },
  { name: "a %YAML directive before ---", text: `%YAML 1.1\n---\n${GOOD_JOB}` },
  { name: "a null document before the Job", text: `null\n---\n${GOOD_JOB}` },
  { name: "a ~ document after the Job", text: `${GOOD_JOB}---\n~\n` },
  {
    name: "an empty nodeName",
    text: GOOD_JOB.replace("restartPolicy", 'nodeName: ""\n      restartPolicy'),
  },
];

/** The fixed start of each message parseJobTemplate refuses with (its `fail(...)` calls). */
async function dispatcherRefusals(): Promise<string[]> {
  const source = await Deno.readTextFile(`${ROOT}job.ts`);
  const start = source.indexOf("export function parseJobTemplate(");
  assert.ok(start >= 0, "job.ts has parseJobTemplate");
  const body = source.slice(start, source.indexOf("\n}\n", start));
  // Every refusal goes through `fail` with a fixed start this test can look
  // for: another `throw`, or a message that starts with a value (its fixed
  // start "" is in every message), would let a check slip past the table.
  assert.equal(body.match(/\bthrow\b/g)?.length, 1, "parseJobTemplate throws only in `fail`");
  const calls = body.match(/\bfail\(/g)?.length ?? 0;
  const fixed = [...body.matchAll(/\bfail\(\s*[`"]([^`"$]{6,})/g)].map((m) => m[1]);
  assert.equal(
    fixed.length,
    calls,
    "each fail(...) of parseJobTemplate starts with fixed text",
  );
  assert.ok(fixed.length >= 8, `found the refusals of parseJobTemplate: ${fixed}`);
  return fixed;
}

/** How the dispatcher's first check ends for `text`: its message, or undefined when accepted. */
function dispatcherSays(text: string): string | undefined {
  try {
    parseJobTemplate(text, "case.yaml");
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

Deno.test("the chart refuses every Job template the dispatcher's first check refuses", async (t) => {
  const home = await Deno.makeTempDir({ prefix: "helm-checks-" });
  const helm = helmResult(home);

  await t.step("the table covers every refusal of parseJobTemplate", async () => {
    const said = CASES.map((c) => dispatcherSays(c.text) ?? "");
    for (const refusal of await dispatcherRefusals()) {
      assert.ok(
        said.some((s) => s.includes(refusal)),
        `parseJobTemplate refuses with "${refusal}…" but no case here makes it: add one ` +
          "(and the chart's check in chart/templates/_helpers.tpl checkedJob)",
      );
    }
  });

  for (const c of CASES) {
    await t.step(c.name, async () => {
      const says = dispatcherSays(c.text);
      assert.ok(says !== undefined, "the dispatcher accepted it");
      assert.match(says, c.dispatcher);
      const file = await tempFile(c.text);
      for (const value of ["jobTemplate", "verification.jobTemplate"]) {
        const r = await helm(["template", "checks", CHART, "--set-file", `${value}=${file}`]);
        assert.notEqual(r.code, 0, `helm template accepted it as ${value}`);
        assert.match(r.stderr, c.chart, value);
        assert.match(r.stderr, new RegExp(`${value.replace(".", "\\.")}[ :]`), "names the value");
      }
    });
  }

  for (const c of ACCEPTED) {
    await t.step(`accepted by both: ${c.name}`, async () => {
      assert.equal(dispatcherSays(c.text), undefined);
      const r = await helm([
        "template",
        "checks",
        CHART,
        "--set-file",
        `jobTemplate=${await tempFile(c.text)}`,
      ]);
      assert.equal(r.code, 0, r.stderr);
    });
  }
});
