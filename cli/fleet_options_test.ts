import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import { parseFleetOptions } from "./fleet_options.ts";

Deno.test("parseFleetOptions takes -f and passes the run flags on", () => {
  const f = parseFleetOptions(["-f", "fleet.yaml", "--job-template", "t.yaml", "--parallelism=3"]);
  assert.equal(f.action, "run");
  assert.equal(f.fleetFile, "fleet.yaml");
  assert.equal(f.run.jobTemplate, "t.yaml");
  assert.equal(f.run.parallelism, 3);
});

Deno.test("parseFleetOptions reads approve's stage", () => {
  const f = parseFleetOptions(["approve", "--fleet-file=f.yaml", "eu", "--job-template", "t"]);
  assert.equal(f.action, "approve");
  assert.equal(f.stage, "eu");
  assert.equal(f.fleetFile, "f.yaml");
});

Deno.test("parseFleetOptions reads status's -o", () => {
  const f = parseFleetOptions(["status", "-f", "f.yaml", "-o", "json", "--job-template", "t"]);
  assert.equal(f.action, "status");
  assert.equal(f.output, "json");
});

const BAD: [string, string[], RegExp][] = [
  ["no fleet file", ["--job-template", "t"], /Missing -f FLEET\.yaml/],
  ["approve without a stage", ["approve", "-f", "f", "--job-template", "t"], /Missing STAGE/],
  ["status -o yaml", ["status", "-f", "f", "--job-template", "t", "-o", "yaml"], /--output/],
  ["--context", ["-f", "f", "--job-template", "t", "--context", "x"], /--context with fleet/],
  [
    "--dry-run with approve",
    ["approve", "-f", "f", "s", "--job-template", "t", "--dry-run=plan"],
    /--dry-run with fleet approve/,
  ],
  ["--metrics-addr", ["-f", "f", "--job-template", "t", "--metrics-addr", ":9"], /metrics-addr/],
];

for (const [name, argv, message] of BAD) {
  Deno.test(`parseFleetOptions refuses ${name}`, () => {
    assert.throws(() => parseFleetOptions(argv), (e: Error) => {
      assert.ok(e instanceof UsageError);
      assert.match(e.message, message);
      return true;
    });
  });
}

Deno.test("parseFleetOptions gives help without asking for -f", () => {
  assert.equal(parseFleetOptions(["--help"]).help, true);
});
