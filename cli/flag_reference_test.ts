import assert from "node:assert/strict";
import { commandFlags, COMMANDS } from "./commands.ts";
import { FLAG_REFERENCE_PATH, flagReference } from "./flag_reference.ts";

const PAGE = new URL(`../${FLAG_REFERENCE_PATH}`, import.meta.url);

Deno.test({
  name: "docs/flags.md names every flag each command's --help defines",
  permissions: { read: true },
  async fn(t) {
    const page = Deno.readTextFileSync(PAGE);
    for (const cmd of COMMANDS) {
      await t.step(cmd.name || "run", () => {
        const missing = commandFlags(cmd).filter((f) => !page.includes(`- \`${f.written}\``));
        assert.deepEqual(
          missing.map((f) => `--${f.name}`),
          [],
          `in --help, not in ${FLAG_REFERENCE_PATH}: run deno task docs:flags`,
        );
      });
    }
  },
});

Deno.test({
  name: "docs/flags.md is what deno task docs:flags writes from --help today",
  permissions: { read: true },
  fn() {
    const page = Deno.readTextFileSync(PAGE);
    assert.ok(
      page === flagReference(),
      `${FLAG_REFERENCE_PATH} and --help disagree: run deno task docs:flags and commit the page`,
    );
  },
});
