import assert from "node:assert/strict";
import { matchesLabels, parseLabelSelector } from "./label_selector.ts";

Deno.test({
  name: "parseLabelSelector() reads kubectl's selector syntax",
  permissions: "none",
  async fn(t) {
    const cases: [string, unknown][] = [
      ["", []],
      ["app=web", [{ key: "app", operator: "=", values: ["web"] }]],
      ["app==web", [{ key: "app", operator: "==", values: ["web"] }]],
      [" app != web , tier ", [
        { key: "app", operator: "!=", values: ["web"] },
        { key: "tier", operator: "exists", values: [] },
      ]],
      ["!canary", [{ key: "canary", operator: "!", values: [] }]],
      ["env in (b, a,b)", [{ key: "env", operator: "in", values: ["a", "b"] }]],
      ["env notin ()", [{ key: "env", operator: "notin", values: [""] }]],
      ["example.com/rank>2", [{ key: "example.com/rank", operator: ">", values: ["2"] }]],
      ["app=", [{ key: "app", operator: "=", values: [""] }]],
      ["in in (in)", [{ key: "in", operator: "in", values: ["in"] }]],
    ];
    for (const [text, want] of cases) {
      await t.step(JSON.stringify(text), () => assert.deepEqual(parseLabelSelector(text), want));
    }
  },
});

Deno.test({
  name: "parseLabelSelector() refuses what kubectl refuses, saying what it found",
  permissions: "none",
  async fn(t) {
    const cases: [string, RegExp][] = [
      ["app=web=x", /found '=', expected: ',' or 'end of string'/],
      ["app=web,", /found 'end of string', expected: identifier after ','/],
      ["app web", /found 'web', expected: !=, =, ==, >, <, in, notin/],
      ["env in a", /found 'a', expected: '\('/],
      ["env in (a b)", /found 'b', expected: ',' or '\)'/],
      ["=web", /found '=', expected: identifier/],
      ["a/b/c=d", /invalid label key "a\/b\/c"/],
      ["app=-web", /invalid label value "-web" of app/],
      ["rank>two", /'>' and '<' need an integer/],
      ["!app=web", /found '=', expected: ',' or 'end of string'/],
    ];
    for (const [text, want] of cases) {
      await t.step(text, () => assert.throws(() => parseLabelSelector(text), want));
    }
  },
});

Deno.test({
  name: "matchesLabels() has apimachinery's meaning of each operator",
  permissions: "none",
  async fn(t) {
    const labels = { app: "web", rank: "3", gpu: "" };
    const cases: [string, boolean][] = [
      ["", true],
      ["app=web", true],
      ["app=db", false],
      ["app!=db", true],
      ["missing!=x", true],
      ["missing notin (x)", true],
      ["app notin (web,db)", false],
      ["app in (web,db)", true],
      ["missing in (x)", false],
      ["gpu", true],
      ["gpu=", true],
      ["!gpu", false],
      ["!missing", true],
      ["rank>2", true],
      ["rank<3", false],
      ["app>1", false],
      ["app=web,rank>5", false],
    ];
    for (const [text, want] of cases) {
      await t.step(`${text || "(empty)"} → ${want}`, () => {
        assert.equal(matchesLabels(parseLabelSelector(text), labels), want);
      });
    }
  },
});
