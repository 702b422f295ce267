import assert from "node:assert/strict";
import { destinations, index, normal, sections } from "./readme_map.ts";

const OLD = [
  "# tool",
  "intro line",
  "## Why",
  "because [x](#why)",
  "```sh",
  "# a comment, not a heading",
  "```",
  "## Gone",
  "a line nobody kept",
  "## Parent",
  "### Child",
  "child text",
].join("\n");

Deno.test({
  name: "sections() splits at headings outside code blocks and keeps their lines",
  permissions: "none",
  fn() {
    assert.deepEqual(
      sections(OLD).map((s) => [s.heading, s.lines]),
      [
        ["# tool", ["intro line"]],
        ["## Why", ["because [x]()", "# a comment, not a heading"]],
        ["## Gone", ["a line nobody kept"]],
        ["## Parent", []],
        ["### Child", ["child text"]],
      ],
    );
  },
});

Deno.test({
  name: "normal() ignores padding and link targets, so moved tables and links still match",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string][] = [
      ["padding", "| a   |  b |", "| a | b |"],
      ["link target", "see [RBAC](#rbac).", "see [RBAC]()."],
      ["moved link", "see [RBAC](security.md#rbac).", "see [RBAC]()."],
    ];
    for (const [name, line, want] of cases) {
      await t.step(name, () => assert.equal(normal(line), want));
    }
  },
});

Deno.test({
  name: "destinations() names the page holding a section's lines and the lines found nowhere",
  permissions: "none",
  fn() {
    const pages = {
      "README.md": "# tool\nintro line\n## Why\nbecause [x](docs/why.md)",
      "docs/a.md": "# A\n## Parent\n## Child\nchild text\n```sh\n# a comment, not a heading\n```",
    };
    const heads = ["README.md § tool", "README.md § Why", "docs/a.md § Parent"];
    const got = destinations(sections(OLD), index(pages), heads).map((d) => [
      d.section.heading,
      d.where,
      d.missing,
    ]);
    assert.deepEqual(got, [
      ["# tool", "README.md § tool", []],
      ["## Why", "README.md § Why", []],
      ["## Gone", "", ["a line nobody kept"]],
      ["## Parent", "docs/a.md § Parent", []],
      ["### Child", "docs/a.md § Child", []],
    ]);
  },
});
