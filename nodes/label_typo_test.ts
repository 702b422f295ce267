import assert from "node:assert/strict";
import { describeMissingKeys, editDistance, missingKeys, selectorKeys } from "./label_typo.ts";

Deno.test({
  name: "selectorKeys() reads each requirement's key, commas inside a set aside",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[]][] = [
      ["pool=gpu", ["pool"]],
      ["pool==gpu,zone!=a", ["pool", "zone"]],
      ["pool in (a,b),!spot", ["pool", "spot"]],
      ["example.com/role notin (x), gpu", ["example.com/role", "gpu"]],
      ["", []],
    ];
    for (const [selector, want] of cases) {
      await t.step(selector || "(empty)", () => assert.deepEqual(selectorKeys(selector), want));
    }
  },
});

Deno.test({
  name: "editDistance() counts insertions, deletions and substitutions",
  permissions: "none",
  fn() {
    assert.equal(editDistance("pol", "pool"), 1);
    assert.equal(editDistance("pool", "pool"), 0);
    assert.equal(editDistance("role", "pool"), 3);
    assert.equal(editDistance("", "abc"), 3);
  },
});

Deno.test({
  name: "missingKeys() names the keys no node carries and the nearest existing ones",
  permissions: "none",
  async fn(t) {
    const existing = new Set([
      "pool",
      "role",
      "kubernetes.io/hostname",
      "topology.kubernetes.io/zone",
    ]);
    const cases: [string, string[], { key: string; closest: string[] }[]][] = [
      ["a typo one letter short", ["pol=gpu"], [{ key: "pol", closest: ["pool", "role"] }]],
      ["a key every node has: nothing missing", ["pool=cpu"], []],
      [
        "a long key with a typo",
        ["topology.kubernetes.io/zon=a"],
        [{ key: "topology.kubernetes.io/zon", closest: ["topology.kubernetes.io/zone"] }],
      ],
      ["nothing near", ["accelerator=x"], [{ key: "accelerator", closest: [] }]],
      ["united selectors: each key once", ["pol=a", "pol=b"], [{
        key: "pol",
        closest: ["pool", "role"],
      }]],
      // A node without the key satisfies !key, key!=v and key notin (…): such a
      // key cannot be why nothing matched, so it is not named as the typo.
      ["!key of a key no node has: not the cause", ["pool=gpu,!spto"], []],
      ["key!=v of a key no node has: not the cause", ["pool=gpu,spto!=true"], []],
      ["key notin (…) of a key no node has: not the cause", ["pool=gpu,spto notin (a,b)"], []],
      [
        "key in (…) and a bare key are required: named",
        ["pol in (a,b),gpu"],
        [{ key: "pol", closest: ["pool", "role"] }, { key: "gpu", closest: [] }],
      ],
    ];
    for (const [name, selectors, want] of cases) {
      await t.step(name, () => assert.deepEqual(missingKeys(selectors, existing), want));
    }
  },
});

Deno.test({
  name: "describeMissingKeys() says the key, a typo? and the closest keys, or nothing",
  permissions: "none",
  fn() {
    assert.equal(describeMissingKeys([]), undefined);
    assert.equal(
      describeMissingKeys([{ key: "pol", closest: ["pool", "role"] }]),
      "no node has the label key pol (a typo? closest: pool, role)",
    );
    assert.equal(
      describeMissingKeys([{ key: "accelerator", closest: [] }]),
      "no node has the label key accelerator (a typo? no key is close)",
    );
  },
});
