import assert from "node:assert/strict";
import { measureFunctions } from "./long_functions.ts";

Deno.test({
  name: "measureFunctions() names and measures each kind of function",
  permissions: "none",
  fn: async (t) => {
    const cases: { name: string; source: string; want: [string, number][] }[] = [
      {
        name: "a function declaration",
        source: "function f() {\n  return 1;\n}\n",
        want: [["f", 3]],
      },
      {
        name: "methods, private ones and the constructor, by class",
        source: "class C {\n  constructor() {}\n  m() {\n  }\n  #p() {}\n}\n",
        want: [["C.constructor", 1], ["C.m", 2], ["C.#p", 1]],
      },
      {
        name: "an arrow function by its variable",
        source: "const g = () => {\n};\n",
        want: [["g", 2]],
      },
      { name: "a callback", source: "[].map((x) => x);\n", want: [["<anonymous>", 1]] },
      { name: "a declaration without a body", source: "declare function h(): void;\n", want: [] },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const got = measureFunctions("x.ts", c.source).map((f) => [f.name, f.lines]);
        assert.deepEqual(got, c.want);
      });
    }
  },
});
