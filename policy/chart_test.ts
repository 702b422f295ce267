import assert from "node:assert/strict";
import { CHART_ADMISSION_PATH, chartAdmissionTemplate } from "./chart.ts";

const ROOT = new URL("../", import.meta.url).pathname;

Deno.test("chart/templates/admission-policies.yaml is generated from policy/admission.ts", async () => {
  const file = await Deno.readTextFile(`${ROOT}${CHART_ADMISSION_PATH}`);
  assert.deepEqual(
    file,
    chartAdmissionTemplate(),
    "the chart's policies differ from policy/: run deno run --allow-write scripts/admission_chart.ts",
  );
});
