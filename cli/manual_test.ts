import assert from "node:assert/strict";
import { enumerated, flagEntries, type FlagEntry, manualSections } from "./manual.ts";

Deno.test({
  name: "manualSections() splits a manual at its capitalised headings",
  permissions: "none",
  fn() {
    const help = "tool: x\n\nUSAGE\n  tool [flags]\n\nNODE VERIFICATION (after a Job;\nbefore)\n" +
      "  --a  A.\n\nFLEET.yaml\n  stages: []\n\nEXIT CODES\n  0  ok\n";
    const sections = manualSections(help);
    assert.deepEqual(sections.map((s) => [s.name, s.topic]), [
      ["", ""],
      ["USAGE", "usage"],
      ["NODE VERIFICATION", "node-verification"],
      ["FLEET.yaml", "fleet.yaml"],
      ["EXIT CODES", "exit-codes"],
    ]);
    assert.equal(sections[2].text, "NODE VERIFICATION (after a Job;\nbefore)\n  --a  A.");
  },
});

Deno.test({
  name: "flagEntries() reads the flags a line defines, not the prose that starts with one",
  permissions: "none",
  async fn(t) {
    const e = (name: string, written: string, value?: string, short?: string): FlagEntry => ({
      name,
      short,
      value,
      written,
    });
    const cases: [string, string, FlagEntry[]][] = [
      ["a value", "  --parallelism N           Most Jobs.", [
        e("parallelism", "--parallelism N", "N"),
      ]],
      ["a switch", "  --drain                   Evict.", [e("drain", "--drain")]],
      ["a short form", "  -o, --output text|json    How.", [
        e("output", "-o, --output text|json", "text|json", "o"),
      ]],
      ["a value after =", "  --dry-run=client|server|plan  client: print", [
        e("dry-run", "--dry-run=client|server|plan", "client|server|plan"),
      ]],
      ["two flags on one head", "  --instance-label-prefix P --multi-install-suffix S", [
        e("instance-label-prefix", "--instance-label-prefix P", "P"),
        e("multi-install-suffix", "--multi-install-suffix S", "S"),
      ]],
      [
        "a switch whose description starts in its column",
        "  --require-node-machine-id Fail a node",
        [
          e("require-node-machine-id", "--require-node-machine-id"),
        ],
      ],
      ["prose that starts with a flag", "  --pause-file the fleet latches it", []],
      ["a description line", "                            --parallelism bounds it", []],
    ];
    for (const [name, line, want] of cases) {
      await t.step(name, () => assert.deepEqual(flagEntries(line), want));
    }
  },
});

Deno.test({
  name: "enumerated() lists a flag's literal values, and no placeholder",
  permissions: "none",
  async fn(t) {
    const cases: [string | undefined, string[] | undefined][] = [
      ["client|server|plan", ["client", "server", "plan"]],
      ["nodeName|affinity", ["nodeName", "affinity"]],
      ["N|P%", undefined],
      ["PATH", undefined],
      [undefined, undefined],
    ];
    for (const [value, want] of cases) {
      await t.step(String(value), () => assert.deepEqual(enumerated(value), want));
    }
  },
});
