import assert from "node:assert/strict";
import { parseStatusOptions, STATUS_HELP } from "./status_options.ts";

Deno.test({
  name: "parseStatusOptions() reads status' flags as kubectl spells them",
  permissions: "none",
  fn() {
    const o = parseStatusOptions(["-n", "ops", "--owner-job-name", "hook", "-o", "wide", "-w"]);
    assert.equal(o.namespace, "ops");
    assert.equal(o.ownerJobName, "hook");
    assert.equal(o.output, "wide");
    assert.equal(o.watch, true);
    assert.equal(o.trackingLabelPrefix, "job-dispatcher");
    assert.equal(parseStatusOptions(["--name-prefix=up"]).output, "text");
  },
});

Deno.test({
  name: "parseStatusOptions() refuses a mistake in one line that names it",
  permissions: "none",
  fn() {
    const cases: [string[], RegExp][] = [
      [["--name-prefx", "x"], /^Unknown flag --name-prefx: did you mean --name-prefix\?$/],
      [["-o", "yaml"], /^Invalid --output yaml: write -o text, -o wide or -o json$/],
      [
        ["--name-prefix", "a", "--owner-job-name", "b"],
        /^Invalid --name-prefix with --owner-job-name/,
      ],
      [["--name-prefix"], /^Missing value of --name-prefix/],
    ];
    for (const [argv, line] of cases) {
      assert.throws(() => parseStatusOptions(argv), (e: Error) => line.test(e.message));
    }
    assert.match(STATUS_HELP, /EXIT CODES/);
  },
});

Deno.test({
  name: "parseStatusOptions() reads --require-ended, off by default, and --help names it",
  permissions: "none",
  fn() {
    assert.equal(parseStatusOptions(["--name-prefix=up"]).requireEnded, false);
    assert.equal(parseStatusOptions(["--name-prefix=up", "--require-ended"]).requireEnded, true);
    assert.match(STATUS_HELP, /--require-ended/);
  },
});

Deno.test({
  name: "status --help says the gates' state is shown, and run.gates in -o json",
  permissions: "none",
  fn() {
    assert.match(STATUS_HELP, /the health gates' state/);
    assert.match(STATUS_HELP, /gates \{state, /);
  },
});
