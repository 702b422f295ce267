/**
 * Writes the generated permissions table into docs/security.md (between its
 * markers), from the one list of the dispatcher's permissions
 * (rbac/docs.ts). rbac/docs_test.ts fails while the page is stale.
 *
 * @module
 */

import { withTable } from "../rbac/docs.ts";

const PAGE = new URL("../docs/security.md", import.meta.url);

if (import.meta.main) {
  Deno.writeTextFileSync(PAGE, withTable(Deno.readTextFileSync(PAGE)));
}
