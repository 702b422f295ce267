import assert from "node:assert/strict";
import { securityTable, TABLE_BEGIN, TABLE_END, withTable } from "./docs.ts";

/** The page with its tables' cells unpadded, as they are before `deno fmt` aligns them. */
function unpadded(page: string): string {
  return page.split("\n").filter((l) => l.trim() !== "").map((l) =>
    l.startsWith("|") ? l.replace(/\s*\|\s*/g, "|").replace(/\|-+(?=\|)/g, "|---") : l
  ).join("\n");
}

Deno.test("docs/security.md's permissions table is the one generated from accessNeeds()", () => {
  const page = Deno.readTextFileSync(new URL("../docs/security.md", import.meta.url));
  assert.equal(unpadded(page), unpadded(withTable(page)), "stale: run deno task security-doc");
});

Deno.test({
  name: "withTable() replaces what is between the markers, and refuses a page without them",
  permissions: "none",
  fn() {
    const page = `a\n${TABLE_BEGIN}\nold\n${TABLE_END}\nb\n`;
    assert.equal(withTable(page), `a\n${TABLE_BEGIN}\n${securityTable()}\n${TABLE_END}\nb\n`);
    assert.throws(() => withTable("no markers"), SyntaxError);
  },
});
