/**
 * Writes chart/templates/admission-policies.yaml from policy/chart.ts.
 *
 * Usage: `deno run --allow-write scripts/admission_chart.ts` (from the repository's root).
 *
 * @module
 */
import { CHART_ADMISSION_PATH, chartAdmissionTemplate } from "../policy/chart.ts";

await Deno.writeTextFile(CHART_ADMISSION_PATH, chartAdmissionTemplate());
