import assert from "node:assert/strict";
import type { GateState } from "../gates/state.ts";
import { MAX_GATE_DETAIL, type RecordGates } from "./record.ts";
import { recordGates } from "./record_gates.ts";

const breach = { query: "up == 0", value: '{job="x"} 0', at: 5 };
const said = 'query "up == 0" returned {job="x"} 0';

Deno.test({
  name: "recordGates() says every state of the gates in the record's words",
  permissions: "none",
  fn() {
    const facts = { queries: 3, checkedAt: 9, lift: "kubectl annotate job …" };
    const cases: [GateState, Omit<RecordGates, "queries" | "checkedAt">][] = [
      [{ kind: "fresh", at: 9 }, { state: "ok" }],
      [{ kind: "unchecked" }, { state: "waiting" }],
      [{ kind: "stale", at: 1 }, { state: "waiting" }],
      [{ kind: "outage", since: 2, error: "refused" }, {
        state: "outage",
        since: 2,
        detail: "refused",
      }],
      [{ kind: "nodata", since: 3, detail: "selector up matches no series" }, {
        state: "nodata",
        since: 3,
        detail: "selector up matches no series",
      }],
      [{ kind: "breached", breach }, { state: "breached", detail: said }],
      [{ kind: "latched", breach, seen: true }, {
        state: "latched",
        detail: said,
        lift: facts.lift,
      }],
      [{ kind: "unlatched", breach, error: "403" }, { state: "unlatched", detail: said }],
    ];
    for (const [state, want] of cases) {
      assert.deepEqual(
        JSON.parse(JSON.stringify(recordGates(state, facts))),
        { queries: 3, checkedAt: 9, ...want },
        state.kind,
      );
    }
  },
});

Deno.test({
  name: "recordGates() cuts a long query or error to MAX_GATE_DETAIL: the record stays bounded",
  permissions: "none",
  fn() {
    const query = `sum(rate(x{${"a".repeat(5_000)}}[5m])) > 0`;
    const g = recordGates({ kind: "breached", breach: { ...breach, query } }, { queries: 1 });
    assert.equal(g.detail!.length, MAX_GATE_DETAIL);
    assert.ok(g.detail!.endsWith("…"));
    const o = recordGates({ kind: "outage", since: 0, error: "e".repeat(9_000) }, { queries: 1 });
    assert.equal(o.detail!.length, MAX_GATE_DETAIL);
  },
});

Deno.test({
  name:
    "recordGates() never cuts a character in half: a label value in emoji keeps well-formed text",
  permissions: "none",
  fn() {
    // 'query "' is 7 UTF-16 units: 124 pairs then end the 255 units kept on a high surrogate.
    const value = `{team="${"🚨".repeat(400)}"} 1`;
    const g = recordGates({ kind: "breached", breach: { ...breach, value } }, { queries: 1 });
    assert.ok(g.detail!.length <= MAX_GATE_DETAIL);
    assert.ok(g.detail!.endsWith("…"));
    assert.ok(g.detail!.isWellFormed(), `a lone surrogate: ${JSON.stringify(g.detail!.slice(-3))}`);
  },
});

Deno.test({
  name:
    "recordGates() says a latch held for a breach this process never saw (a retried pod) as latched, not ok",
  permissions: "none",
  fn() {
    const f = { queries: 1, checkedAt: 9, lift: "kubectl annotate job …", heldFor: said };
    for (const s of [{ kind: "fresh", at: 9 }, { kind: "unchecked" }] as GateState[]) {
      assert.deepEqual(recordGates(s, f), {
        state: "latched",
        queries: 1,
        checkedAt: 9,
        detail: said,
        lift: f.lift,
      }, s.kind);
    }
    // Its own breach says itself; without a held latch (a person's pause) the state is the gate's.
    const own = { ...breach, query: "other" };
    assert.match(recordGates({ kind: "breached", breach: own }, f).detail!, /other/);
    assert.equal(recordGates({ kind: "fresh", at: 9 }, { ...f, heldFor: undefined }).state, "ok");
  },
});
