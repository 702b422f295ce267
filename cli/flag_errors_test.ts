import assert from "node:assert/strict";
import { closestFlag, describeFlagError, type FlagSpec, switchValues } from "./flag_errors.ts";

const FLAGS: Record<string, FlagSpec> = {
  parallelism: { type: "string" },
  nodes: { type: "string" },
  "multi-install-suffix": { type: "string" },
  namespace: { type: "string", short: "n" },
  "dry-run": { type: "string" },
  cordon: { type: "boolean" },
  drain: { type: "boolean" },
  "max-unavailable": { type: "string" },
  "max-failures": { type: "string" },
};
const HELP = `  --parallelism N   Most Jobs.
  -n, --namespace NS  Namespace.
  --dry-run=client|server  Print.
  --nodes a,b,...   Exactly these.
  --instance-label-prefix P --multi-install-suffix S
  --max-unavailable N|P%  With --max-failures the smaller wins.`;

Deno.test({
  name: "switchValues() reads --switch=true and --switch=false as pflag does",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[], string[]][] = [
      ["=true is the switch", ["--cordon=true"], ["--cordon"]],
      ["=false is no switch", ["--cordon=false", "--drain"], ["--drain"]],
      ["another value is left to refuse", ["--cordon=yes"], ["--cordon=yes"]],
      ["a flag with a value is untouched", ["--parallelism=true"], ["--parallelism=true"]],
      ["after -- nothing is a flag", ["--", "--cordon=false"], ["--", "--cordon=false"]],
    ];
    for (const [name, argv, want] of cases) {
      await t.step(name, () => assert.deepEqual(switchValues(argv, FLAGS), want));
    }
  },
});

Deno.test({
  name: "closestFlag() suggests a flag only when it is near",
  permissions: "none",
  async fn(t) {
    const names = Object.keys(FLAGS);
    const cases: [string, string | undefined][] = [
      ["paralelism", "parallelism"],
      ["drian", "drain"],
      ["max-unavailble", "max-unavailable"],
      ["max-fail", "max-failures"],
      ["max", undefined], // a prefix of two flags: no guess
      ["zzzzzzzz", undefined],
    ];
    for (const [typed, want] of cases) {
      await t.step(`${typed} → ${want}`, () => assert.equal(closestFlag(typed, names), want));
    }
  },
});

Deno.test({
  name: "describeFlagError() names the input and the fix in one line",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string[], string][] = [
      [
        "an unknown flag near a known one",
        "Unknown option '--paralelism'. To specify a positional argument starting with a '-', place it at the end",
        ["--paralelism", "3"],
        "Unknown flag --paralelism: did you mean --parallelism?",
      ],
      [
        "an unknown short flag",
        "Unknown option '-x'",
        ["-x"],
        "Unknown flag -x: it is not a flag of job-dispatcher",
      ],
      [
        "a missing value, spelled as the manual spells it",
        "Option '--dry-run <value>' argument missing",
        ["--dry-run"],
        "Missing value of --dry-run: write --dry-run=client|server",
      ],
      [
        "a missing value of a short flag",
        "Option '-n, --namespace <value>' argument missing",
        ["-n"],
        "Missing value of --namespace: write --namespace NS",
      ],
      [
        "a missing list, spelled whole",
        "Option '--nodes <value>' argument missing",
        ["--nodes"],
        "Missing value of --nodes: write --nodes a,b,...",
      ],
      [
        "a missing value of the second flag of a line",
        "Option '--multi-install-suffix <value>' argument missing",
        ["--multi-install-suffix"],
        "Missing value of --multi-install-suffix: write --multi-install-suffix S",
      ],
      [
        "a missing value the manual does not spell",
        "Option '--max-failures <value>' argument missing",
        ["--max-failures"],
        "Missing value of --max-failures: give it one",
      ],
      [
        "a value for a switch",
        "Option '--cordon' does not take an argument",
        ["--cordon=yes"],
        "Invalid --cordon=yes: --cordon is a switch; write --cordon (or --cordon=false)",
      ],
      [
        "a positional argument, with what came before it",
        "Unexpected argument 'b'. This command does not take positional arguments",
        ["--parallelism", "3", "--namespace", "a", "b"],
        'Invalid argument "b" (after --namespace a): job-dispatcher takes flags only; ' +
        "quote a value that has spaces, and write a list as a,b",
      ],
      [
        "a positional argument first",
        "Unexpected argument 'job.yaml'. This command does not take positional arguments",
        ["job.yaml"],
        'Invalid argument "job.yaml": job-dispatcher takes flags only; ' +
        "quote a value that has spaces, and write a list as a,b",
      ],
      ["anything else, first line only", "Odd\nmore", [], "Odd"],
    ];
    for (const [name, message, argv, want] of cases) {
      await t.step(name, () => {
        assert.equal(describeFlagError(message, { argv, flags: FLAGS, help: HELP }), want);
      });
    }
  },
});
