import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import {
  canaryWaves,
  parseWaves,
  resolveWaves,
  waveLabel,
  type WaveSize,
  waveVerdict,
  withWaves,
} from "./waves.ts";

Deno.test({
  name: "parseWaves() reads cumulative counts and percentages and adds 100% when missing",
  permissions: "none",
  async fn(t) {
    const cases: [string, WaveSize[]][] = [
      ["1,5%,25%,100%", [{ count: 1 }, { percent: 5 }, { percent: 25 }, { percent: 100 }]],
      ["1,25%", [{ count: 1 }, { percent: 25 }, { percent: 100 }]],
      ["3", [{ count: 3 }, { percent: 100 }]],
      ["100%", [{ percent: 100 }]],
      [" 2 , 10 , 50% ", [{ count: 2 }, { count: 10 }, { percent: 50 }, { percent: 100 }]],
      ["2.5%,100%", [{ percent: 2.5 }, { percent: 100 }]],
    ];
    for (const [text, want] of cases) {
      await t.step(text, () => assert.deepEqual(parseWaves(text), want));
    }
  },
});

Deno.test({
  name: "parseWaves() refuses waves not growing, 0, over 100%, a non-number, naming the entry",
  permissions: "none",
  async fn(t) {
    const cases: [string, RegExp][] = [
      ["5,3", /"3" does not grow after 5|3 does not grow after 5/],
      ["10%,10%", /10% does not grow after 10%/],
      ["0,50%", /a wave of 0 holds no node/],
      ["1,0%", /a wave of 0% holds no node/],
      ["1,150%", /150% is over 100%/],
      ["1,abc", /"abc" is neither a whole number nor a percentage/],
      ["1.5", /"1.5" is neither a whole number nor a percentage/],
      ["1,,2", /"" is neither/],
      ["-1", /"-1" is neither/],
    ];
    for (const [text, want] of cases) {
      await t.step(text, () => {
        assert.throws(() => parseWaves(text), (e: Error) => {
          assert.ok(e instanceof UsageError);
          assert.match(e.message, /^Invalid --waves /);
          assert.match(e.message, want);
          assert.match(e.message, /write growing cumulative sizes such as 1,5%,25%,100%$/);
          assert.doesNotMatch(e.message, /\n/);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "resolveWaves() rounds percentages down, at least 1, merges waves that do not grow",
  permissions: "none",
  async fn(t) {
    const w = (text: string) => parseWaves(text);
    const cases: [string, WaveSize[], number, number[]][] = [
      ["1,25%,100% of 12", w("1,25%"), 12, [1, 3, 12]],
      ["1,5%,25%,100% of 1000", w("1,5%,25%"), 1000, [1, 50, 250, 1000]],
      ["1,5% of 12: 5% rounds to 0, at least 1, merged", w("1,5%,25%"), 12, [1, 3, 12]],
      ["5% of 10 is at least 1", w("5%"), 10, [1, 10]],
      ["a count above the selection is the selection", w("50"), 12, [12]],
      ["a count after a percentage that is no larger is merged", w("50%,3"), 4, [2, 3, 4]],
      ["100% of 1", w("100%"), 1, [1]],
      ["no nodes", w("1,25%"), 0, []],
      ["the canary of 3 over 6", canaryWaves(3).sizes, 6, [3, 6]],
      ["a canary larger than the selection", canaryWaves(9).sizes, 6, [6]],
    ];
    for (const [name, sizes, total, want] of cases) {
      await t.step(name, () => assert.deepEqual(resolveWaves(sizes, total), want));
    }
  },
});

Deno.test({
  name: "resolveWaves() takes a fractional percentage exactly, not in floating point",
  permissions: "none",
  async fn(t) {
    // In binary floating point 2.3 * 3000 / 100 is 68.99999999999999, which
    // rounds down to 68: the wave would hold one node fewer than 2.3% of 3000.
    const cases: [string, number, number][] = [
      ["2.3%", 3000, 69],
      ["4.1%", 3000, 123],
      ["8.2%", 3000, 246],
      ["16.4%", 3000, 492],
      ["33.3%", 3000, 999],
      ["2.5%", 1000, 25],
      ["12.5%", 7, 1],
      ["0.01%", 10000, 1],
    ];
    for (const [percent, total, want] of cases) {
      await t.step(`${percent} of ${total} is ${want}`, () => {
        assert.deepEqual(resolveWaves(parseWaves(percent), total), [want, total]);
      });
    }
  },
});

Deno.test({
  name: "withWaves() gives each item its 1-based wave from the cumulative counts",
  permissions: "none",
  fn() {
    const items = Array.from({ length: 12 }, (_, i) => i);
    const waves = withWaves(items, [1, 3, 12], (_, wave) => wave);
    assert.deepEqual(waves, [1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
    assert.deepEqual(withWaves(["a"], [1], (x, wave) => `${x}${wave}`), ["a1"]);
  },
});

Deno.test({
  name:
    "waveVerdict() stops on a failure without a budget, on any unknown outcome and on a node that got no Job",
  permissions: "none",
  async fn(t) {
    const canary = waveLabel(1, 2, true);
    const cases: [
      string,
      string,
      Parameters<typeof waveVerdict>[1],
      boolean,
      string | undefined,
    ][] = [
      ["a success", canary, { node: "c1", outcome: "succeeded" }, false, undefined],
      [
        "the canary failed, no budget",
        canary,
        { node: "c1", outcome: "failed" },
        false,
        "the canary failed on c1",
      ],
      ["a failure within a budget", canary, { node: "c1", outcome: "failed" }, true, undefined],
      [
        "an unknown outcome, even with a budget",
        waveLabel(2, 4, false),
        { node: "n2", outcome: "unknown", reason: "collected" },
        true,
        "wave 2 of 4's outcome on n2 is unknown: collected",
      ],
      [
        "a wave of --waves failed",
        waveLabel(1, 3, false),
        { node: "n1", outcome: "failed" },
        false,
        "wave 1 of 3 failed on n1",
      ],
      [
        "a node still blocked got no Job: it stops, even with a budget",
        canary,
        { node: "c1", outcome: "blocked", reason: "still blocked after 600 s: pod a/db-0" },
        true,
        "the canary got no Job on c1: still blocked after 600 s: pod a/db-0",
      ],
      [
        "a node failed before its Job (a re-check, a drain) stops, even with a budget",
        canary,
        { node: "c1", outcome: "failed", noJob: true, reason: "node c1 is gone" },
        true,
        "the canary got no Job on c1: node c1 is gone",
      ],
      [
        "a Job's failure within a budget goes on",
        waveLabel(1, 3, false),
        { node: "n1", outcome: "failed", reason: "BackoffLimitExceeded" },
        true,
        undefined,
      ],
    ];
    for (const [name, label, outcome, budget, want] of cases) {
      await t.step(name, () => assert.equal(waveVerdict(label, outcome, budget), want));
    }
  },
});
