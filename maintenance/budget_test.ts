import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import {
  describeBudget,
  parseMaxUnavailable,
  resolveMaxUnavailable,
  slotsUnderBudget,
  unavailableCount,
} from "./budget.ts";
import { UsageError } from "../job.ts";

Deno.test({
  name: "parseMaxUnavailable() and resolveMaxUnavailable() round a percentage down, to at least 1",
  permissions: "none",
  async fn(t) {
    const cases: [string, number, number][] = [
      ["1", 10, 1],
      ["3", 2, 3],
      ["10%", 25, 2],
      ["10%", 29, 2],
      ["10%", 30, 3],
      ["10%", 5, 1],
      ["1%", 1, 1],
      ["50%", 7, 3],
      ["100%", 7, 7],
      [" 25% ", 8, 2],
    ];
    for (const [text, total, want] of cases) {
      await t.step(`${text} of ${total} → ${want}`, () => {
        assert.equal(resolveMaxUnavailable(parseMaxUnavailable(text), total), want);
      });
    }
  },
});

Deno.test({
  name: "parseMaxUnavailable() refuses zero, over 100% and what is not a count",
  permissions: "none",
  async fn(t) {
    const cases: [string, RegExp][] = [
      ["0", /"0": 0 would never let a node start; give at least 1 \(or 1%\)/],
      ["0%", /"0%": 0 would never let a node start/],
      ["101%", /"101%": a percentage is at most 100%/],
      ["-1", /"-1": expected a whole number of nodes or a percentage such as 10%/],
      ["1.5", /expected a whole number/],
      ["ten", /expected a whole number/],
      ["", /expected a whole number/],
      ["%", /expected a whole number/],
    ];
    for (const [text, want] of cases) {
      await t.step(JSON.stringify(text), () => {
        assert.throws(() => parseMaxUnavailable(text), (e: Error) => {
          assert.ok(e instanceof UsageError);
          assert.match(e.message, /^Invalid --max-unavailable /);
          assert.match(e.message, want);
          return true;
        });
      });
    }
  },
});

function node(
  name: string,
  o: { ready?: "True" | "False" | "Unknown" | null; cordoned?: boolean },
) {
  const conditions = o.ready === null ? [] : [{ type: "Ready", status: o.ready ?? "True" }];
  return {
    metadata: { name },
    spec: o.cordoned ? { unschedulable: true } : {},
    status: { conditions },
  } as V1Node;
}

Deno.test({
  name: "unavailableCount() counts NotReady, cordoned-by-anyone and in-work nodes once each",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      nodes: V1Node[];
      inWork: string[];
      want: { count: number; notReady: string[]; cordoned: string[]; inWork: string[] };
    }[] = [
      {
        name: "all available",
        nodes: [node("a", {}), node("b", {})],
        inWork: [],
        want: { count: 0, notReady: [], cordoned: [], inWork: [] },
      },
      {
        name: "NotReady, Unknown and no condition are all not ready",
        nodes: [
          node("a", { ready: "False" }),
          node("b", { ready: "Unknown" }),
          node("c", { ready: null }),
        ],
        inWork: [],
        want: { count: 3, notReady: ["a", "b", "c"], cordoned: [], inWork: [] },
      },
      {
        name: "an operator's cordon counts",
        nodes: [node("a", { cordoned: true }), node("b", {})],
        inWork: [],
        want: { count: 1, notReady: [], cordoned: ["a"], inWork: [] },
      },
      {
        name: "a node in work counts once, even cordoned and NotReady (a reboot)",
        nodes: [node("a", { cordoned: true, ready: "False" }), node("b", {})],
        inWork: ["a"],
        want: { count: 1, notReady: [], cordoned: [], inWork: ["a"] },
      },
      {
        name: "a cordoned NotReady node counts once, as NotReady",
        nodes: [node("a", { cordoned: true, ready: "False" })],
        inWork: [],
        want: { count: 1, notReady: ["a"], cordoned: [], inWork: [] },
      },
      {
        // the informers drop a node that stops matching the selection.
        name: "in-work names outside the selection count (a node that left the selection)",
        nodes: [node("a", {})],
        inWork: ["gone"],
        want: { count: 1, notReady: [], cordoned: [], inWork: ["gone"] },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(unavailableCount(c.nodes, new Set(c.inWork)), c.want);
      });
    }
  },
});

Deno.test({
  name: "slotsUnderBudget() opens a slot only under both the budget and --parallelism",
  permissions: "none",
  async fn(t) {
    const cases: [string, Parameters<typeof slotsUnderBudget>[0], number][] = [
      ["no budget: parallelism decides", { unavailable: 5, parallelism: 3, inFlight: 1 }, 2],
      ["budget smaller", { maxUnavailable: 2, unavailable: 0, parallelism: 3, inFlight: 0 }, 2],
      [
        "parallelism smaller",
        { maxUnavailable: 5, unavailable: 1, parallelism: 2, inFlight: 1 },
        1,
      ],
      [
        "one node down already",
        { maxUnavailable: 2, unavailable: 1, parallelism: 3, inFlight: 0 },
        1,
      ],
      ["down plus in flight fill it", {
        maxUnavailable: 2,
        unavailable: 2,
        parallelism: 3,
        inFlight: 1,
      }, 0],
      ["more down than the budget: wait", {
        maxUnavailable: 1,
        unavailable: 3,
        parallelism: 3,
        inFlight: 0,
      }, 0],
      ["parallelism full", { maxUnavailable: 9, unavailable: 3, parallelism: 3, inFlight: 3 }, 0],
    ];
    for (const [name, input, want] of cases) {
      await t.step(name, () => assert.equal(slotsUnderBudget(input), want));
    }
  },
});

Deno.test({
  name: "describeBudget() says how much of the budget is used and by what",
  permissions: "none",
  async fn(t) {
    await t.step("with reasons", () => {
      const u = unavailableCount(
        [node("a", { ready: "False" }), node("b", { cordoned: true }), node("c", {})],
        new Set(["c"]),
      );
      assert.equal(describeBudget(u, 3), "unavailable 3/3 (1 in work, 1 NotReady, 1 cordoned)");
    });
    await t.step("none unavailable", () => {
      assert.equal(
        describeBudget(unavailableCount([node("a", {})], new Set()), 1),
        "unavailable 0/1",
      );
    });
  },
});
