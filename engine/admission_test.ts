import assert from "node:assert/strict";
import { type Admission, admit, countByDomain, type PickRules, takeNext } from "./admission.ts";
import type { SlotFacts } from "./admission.ts";

const FREE: SlotFacts = {
  held: 0,
  limit: 4,
  room: Infinity,
  outage: false,
  creating: 0,
  mayProbe: false,
};

Deno.test({
  name: "admit() starts while a slot and the budget allow, and probes one at a time in an outage",
  permissions: "none",
  async fn(t) {
    const cases: [string, Partial<SlotFacts>, Admission][] = [
      ["a free slot starts", {}, "start"],
      ["the last free slot starts", { held: 3 }, "start"],
      ["every slot taken waits", { held: 4 }, "full"],
      ["more held than slots (a lowered limit) waits", { held: 5 }, "full"],
      ["no room in the budget waits", { room: 0 }, "full"],
      ["room for one starts", { room: 1 }, "start"],
      ["a full run waits in an outage too", { held: 4, outage: true, mayProbe: true }, "full"],
      ["an outage with its probe due probes", { outage: true, mayProbe: true }, "probe"],
      ["an outage before the probe is due waits", { outage: true }, "waitForProbe"],
      [
        "an outage with a start under way waits for it",
        { outage: true, mayProbe: true, creating: 1 },
        "waitForProbe",
      ],
      ["a start under way without an outage does not hold others", { creating: 2 }, "start"],
    ];
    for (const [name, facts, want] of cases) {
      await t.step(name, () => assert.equal(admit({ ...FREE, ...facts }), want));
    }
  },
});

Deno.test({
  name: "takeNext() takes the first startable queued name and keeps the order of the rest",
  permissions: "none",
  async fn(t) {
    const zone = (n: string) => (n.startsWith("x") ? undefined : n[0]);
    const cases: {
      name: string;
      queue: string[];
      rules: Omit<PickRules, "queued" | "inFlight"> & { inFlight?: string[] };
      gone?: string[];
      want: string | undefined;
      rest: string[];
    }[] = [
      { name: "the head", queue: ["a1", "b1"], rules: {}, want: "a1", rest: ["b1"] },
      { name: "an empty queue", queue: [], rules: {}, want: undefined, rest: [] },
      {
        name: "names no longer queued are skipped",
        queue: ["a1", "a2", "b1"],
        rules: {},
        gone: ["a1", "a2"],
        want: "b1",
        rest: [],
      },
      {
        name: "only the open wave's names while a wave is gated",
        queue: ["a1", "a2", "b1"],
        rules: { allowed: (n) => n === "b1" },
        want: "b1",
        rest: ["a1", "a2"],
      },
      {
        name: "nothing when the open wave's nodes have all started",
        queue: ["a1", "a2"],
        rules: { allowed: (n) => n === "b1" },
        want: undefined,
        rest: ["a1", "a2"],
      },
      {
        name: "a gated wave: names no longer queued before the first allowed one are dropped",
        queue: ["a1", "x1", "b1", "b2"],
        rules: { allowed: (n) => n.startsWith("b") },
        gone: ["a1"],
        want: "b1",
        rest: ["x1", "b2"],
      },
      {
        name: "a full domain is passed over, not dropped",
        queue: ["a2", "b1", "a3"],
        rules: { domainOf: zone, inFlight: ["a1"], maxPerDomain: 1 },
        want: "b1",
        rest: ["a2", "a3"],
      },
      {
        name: "every domain full: nothing, and the gone names are dropped",
        queue: ["a2", "b2", "a3"],
        rules: { domainOf: zone, inFlight: ["a1", "b1"], maxPerDomain: 1 },
        gone: ["a3"],
        want: undefined,
        rest: ["a2", "b2"],
      },
      {
        name: "a leftover in flight counts in no domain",
        queue: ["a2"],
        rules: { domainOf: zone, inFlight: ["x1"], maxPerDomain: 1 },
        want: "a2",
        rest: [],
      },
      {
        name: "domains and a gated wave together",
        queue: ["a2", "b2", "b3"],
        rules: {
          allowed: (n) => n === "a2" || n === "b3",
          domainOf: zone,
          inFlight: ["a1"],
          maxPerDomain: 1,
        },
        want: "b3",
        rest: ["a2", "b2"],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const gone = new Set(c.gone);
        const got = takeNext([...c.queue], {
          ...c.rules,
          queued: (n) => !gone.has(n),
          inFlight: c.rules.inFlight ?? [],
        });
        assert.deepEqual(got, { name: c.want, queue: c.rest });
      });
    }
  },
});

Deno.test({
  name: "countByDomain() counts names per domain and leaves out those without one",
  permissions: "none",
  fn() {
    const zone = (n: string) => (n.startsWith("x") ? undefined : n[0]);
    assert.deepEqual(
      countByDomain(["a1", "a2", "b1", "x1"], zone),
      new Map([["a", 2], ["b", 1]]),
    );
    assert.deepEqual(countByDomain(["a1"], undefined), new Map());
  },
});
