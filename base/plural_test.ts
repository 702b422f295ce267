import assert from "node:assert/strict";
import { counted } from "./plural.ts";

Deno.test({
  name: "counted() is singular for one and plural otherwise",
  permissions: "none",
  async fn(t) {
    const cases: [number, string, string | undefined, string][] = [
      [0, "node", undefined, "0 nodes"],
      [1, "node", undefined, "1 node"],
      [2, "node", undefined, "2 nodes"],
      [1, "Job still runs", "Jobs still run", "1 Job still runs"],
      [3, "Job still runs", "Jobs still run", "3 Jobs still run"],
    ];
    for (const [n, noun, plural, want] of cases) {
      await t.step(want, () => assert.equal(counted(n, noun, plural), want));
    }
  },
});
