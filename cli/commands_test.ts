import assert from "node:assert/strict";
import { commandFlags, COMMANDS, helpText, helpTopics, TOPIC_ALIASES } from "./commands.ts";
import { flagEntries, manualSections } from "./manual.ts";
import { HELP } from "./options.ts";

Deno.test({
  name: "help TOPIC prints one section of --help, found by heading, common word or flag",
  permissions: "none",
  async fn(t) {
    const cases: [string, string][] = [
      ["gates", "HEALTH GATES\n"],
      ["drain", "NODE MAINTENANCE (in the style of kubectl drain)\n"],
      ["HEALTH-GATES", "HEALTH GATES\n"],
      ["exit-codes", "EXIT CODES\n"],
      ["parallelism", "PACING AND OWNERSHIP\n"],
      ["--max-unavailable", "NODE MAINTENANCE"],
      ["n", "TEMPLATE\n"],
      ["status", "job-dispatcher status:"],
    ];
    for (const [topic, start] of cases) {
      await t.step(topic, () => {
        const text = helpText(topic);
        assert.ok(text.startsWith(start), text.slice(0, 80));
        if (topic !== "status") assert.ok(HELP.includes(text.trimEnd()), "a section as printed");
      });
    }
  },
});

Deno.test({
  name: "help FLAG finds a subcommand's own flag (help watch, help fleet-file) in its manual",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string][] = [
      ["watch", "FLAGS\n", "--watch"],
      ["--fleet-file", "FLAGS\n", "--fleet-file PATH"],
    ];
    for (const [topic, start, has] of cases) {
      await t.step(topic, () => {
        const text = helpText(topic);
        assert.ok(text.startsWith(start) && text.includes(has), text.slice(0, 80));
      });
    }
  },
});

Deno.test({
  name: "help with an unknown topic is one line that lists the topics",
  permissions: "none",
  fn() {
    assert.throws(() => helpText("gatez"), (e: Error) => {
      assert.equal(e.name, "UsageError");
      assert.ok(!e.message.includes("\n"));
      assert.match(e.message, /^Unknown help topic "gatez": try one of most-used, usage, /);
      assert.match(e.message, /health-gates, .*status, fleet/);
      return true;
    });
  },
});

Deno.test({
  name: "every help topic alias names a section --help has",
  permissions: "none",
  async fn(t) {
    const topics = helpTopics();
    for (const [alias, topic] of Object.entries(TOPIC_ALIASES)) {
      await t.step(alias, () => assert.ok(topics.includes(topic), `${alias} -> ${topic}`));
    }
  },
});

Deno.test({
  name: "--help starts with the ten most used flags, each written as its full definition",
  permissions: "none",
  fn() {
    const [title, first, ...rest] = manualSections(HELP);
    assert.equal(title.name, "");
    assert.equal(first.topic, "most-used");
    const top = flagEntries(first.text);
    assert.equal(top.length, 10);
    const full = rest.flatMap((s) => flagEntries(s.text));
    for (const flag of top) {
      assert.equal(full.find((f) => f.name === flag.name)?.written, flag.written, flag.name);
    }
  },
});

Deno.test({
  name: "each command's manual defines exactly the flags its table parses",
  permissions: "none",
  async fn(t) {
    for (const cmd of COMMANDS.filter((c) => c.table)) {
      await t.step(cmd.name || "run", () => {
        const documented = commandFlags(cmd).map((f) => f.name).sort();
        assert.deepEqual(documented, Object.keys(cmd.table!).sort());
        for (const f of commandFlags(cmd)) {
          assert.equal(f.short, cmd.table![f.name].short, `-${f.short} of --${f.name}`);
          assert.equal(f.value === undefined, cmd.table![f.name].type === "boolean", f.name);
        }
      });
    }
  },
});

Deno.test({
  name: "every cli/*_options.ts manual is a command that help, completion and the reference know",
  permissions: { read: true },
  async fn() {
    const dir = new URL(".", import.meta.url);
    for (const entry of Deno.readDirSync(dir)) {
      const m = entry.name.match(/^([a-z]+)_options\.ts$/);
      if (!m) continue;
      const mod = await import(new URL(entry.name, dir).href);
      const help = mod[`${m[1].toUpperCase()}_HELP`];
      if (typeof help !== "string") continue;
      assert.ok(
        COMMANDS.some((c) => c.help === help),
        `cli/${entry.name} exports ${m[1].toUpperCase()}_HELP, which COMMANDS lacks: add ` +
          `{ name: "${m[1]}", help: ${m[1].toUpperCase()}_HELP, table: ... } to cli/commands.ts`,
      );
    }
  },
});

Deno.test({
  name: "every (help TOPIC) --help points to is a topic help knows",
  permissions: "none",
  async fn(t) {
    for (const [, topic] of HELP.matchAll(/\(help ([a-z-]+)\)/g)) {
      await t.step(topic, () => assert.doesNotThrow(() => helpText(topic)));
    }
  },
});
