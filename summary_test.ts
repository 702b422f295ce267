import assert from "node:assert/strict";
import type { NodeResult } from "./fanout.ts";
import { EXIT, exitCode, outcomeCounts } from "./summary.ts";

function results(...outcomes: NodeResult["outcome"][]): NodeResult[] {
  return outcomes.map((outcome, i) => ({ node: `n${i}`, job: `j-n${i}`, outcome }));
}

Deno.test({
  name:
    "exitCode() fails on a failure, a blocked node or a stop, and says window only when all else is well",
  permissions: "none",
  async fn(t) {
    const cases: [string, Parameters<typeof exitCode>[0], number][] = [
      ["nothing ran", { cleanup: [], results: [] }, EXIT.ok],
      ["all succeeded", { cleanup: [], results: results("succeeded", "succeeded") }, EXIT.ok],
      ["unknown is no failure", { cleanup: [], results: results("succeeded", "unknown") }, EXIT.ok],
      ["a failed node", { cleanup: [], results: results("succeeded", "failed") }, EXIT.failed],
      ["a blocked node", { cleanup: [], results: results("blocked") }, EXIT.failed],
      [
        "a failed cleanup node",
        { cleanup: results("failed"), results: results("succeeded") },
        EXIT.failed,
      ],
      ["a blocked cleanup node", { cleanup: results("blocked"), results: [] }, EXIT.ok],
      [
        "a stopped rollout",
        { cleanup: [], results: results("succeeded", "notStarted"), stoppedBy: "canary" },
        EXIT.failed,
      ],
      [
        "the window closed",
        { cleanup: [], results: results("succeeded", "notStarted"), windowClosed: true },
        EXIT.window,
      ],
      [
        "the window closed after a failure",
        { cleanup: [], results: results("failed", "notStarted"), windowClosed: true },
        EXIT.failed,
      ],
      [
        "the window closed after a failed cleanup",
        { cleanup: results("failed"), results: results("notStarted"), windowClosed: true },
        EXIT.failed,
      ],
    ];
    for (const [what, ending, want] of cases) {
      await t.step(`${what} → ${want}`, () => assert.equal(exitCode(ending), want));
    }
  },
});

Deno.test({
  name: "outcomeCounts() counts every outcome, zero included, in the order the log shows them",
  permissions: "none",
  fn() {
    const counts = outcomeCounts(results("succeeded", "failed", "succeeded", "inFlight"));
    assert.deepEqual(Object.entries(counts), [
      ["succeeded", 2],
      ["failed", 1],
      ["unknown", 0],
      ["blocked", 0],
      ["inFlight", 1],
      ["notStarted", 0],
    ]);
  },
});
