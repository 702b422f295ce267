import assert from "node:assert/strict";
import { percentOf } from "./percent.ts";

Deno.test({
  name: "percentOf() rounds down exactly where floating point falls one short",
  permissions: "none",
  async fn(t) {
    const cases: [string | number, number, number][] = [
      // Each of these is one less in floating point (Math.floor(p * n / 100)).
      ["2.3", 3000, 69],
      [2.3, 3000, 69],
      ["4.1", 3000, 123],
      ["8.2", 3000, 246],
      [16.4, 3000, 492],
      ["33.3", 3000, 999],
      // Rounding down, as Kubernetes rounds maxUnavailable.
      ["25", 12, 3],
      [10, 45, 4],
      ["12.5", 7, 0],
      ["0.01", 10000, 1],
      ["0.01", 9999, 0],
      ["100", 3000, 3000],
      ["0", 3000, 0],
      ["50", 0, 0],
      // Written with an exponent, as String() writes a small number.
      [1e-7, 1e8, 0],
      [1e-7, 1e9, 1],
      ["1e-7", 2e9 - 1, 1],
      ["1.5e1", 100, 15],
      ["2.", 100, 2],
    ];
    for (const [percent, total, want] of cases) {
      await t.step(`${percent}% of ${total} is ${want}`, () => {
        assert.equal(percentOf(percent, total), want);
      });
    }
  },
});

Deno.test({
  name: "percentOf() refuses what is not a non-negative decimal and a whole count",
  permissions: "none",
  async fn(t) {
    const cases: [string | number, number][] = [
      ["-1", 10],
      ["abc", 10],
      [Number.NaN, 10],
      [Infinity, 10],
      ["5", 1.5],
      ["5", -1],
    ];
    for (const [percent, total] of cases) {
      await t.step(`${percent}% of ${total}`, () => {
        assert.throws(() => percentOf(percent, total), RangeError);
      });
    }
  },
});
