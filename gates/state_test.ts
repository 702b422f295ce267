import assert from "node:assert/strict";
import { blockedBy, type Breach, type GateEvent, type GateState, next } from "./state.ts";

const B: Breach = { query: "up == 0", value: '{job="x"} 0', at: 5 };
const URL = "http://prom:9090";

Deno.test({
  name: "next() moves the gate through fresh, stale, breached, latched and outage, edge by edge",
  permissions: "none",
  async fn(t) {
    const cases: [string, GateState, GateEvent, GateState][] = [
      ["a clean first answer is fresh", { kind: "unchecked" }, { type: "answered", at: 1 }, {
        kind: "fresh",
        at: 1,
      }],
      [
        "a breaching first answer breaches",
        { kind: "unchecked" },
        { type: "answered", at: 5, breach: B },
        { kind: "breached", breach: B },
      ],
      [
        "fresh within the interval stays fresh",
        { kind: "fresh", at: 0 },
        { type: "tick", now: 30_000, intervalMs: 30_000 },
        { kind: "fresh", at: 0 },
      ],
      [
        "fresh past the interval is stale",
        { kind: "fresh", at: 0 },
        { type: "tick", now: 30_001, intervalMs: 30_000 },
        { kind: "stale", at: 0 },
      ],
      ["stale answered clean is fresh again", { kind: "stale", at: 0 }, {
        type: "answered",
        at: 40_000,
      }, { kind: "fresh", at: 40_000 }],
      ["fresh answered with a breach breaches", { kind: "fresh", at: 0 }, {
        type: "answered",
        at: 5,
        breach: B,
      }, { kind: "breached", breach: B }],
      ["no answer is an outage, not a breach", { kind: "fresh", at: 0 }, {
        type: "failed",
        at: 7,
        error: "connection refused",
      }, { kind: "outage", since: 7, error: "connection refused" }],
      [
        "an outage keeps its start",
        { kind: "outage", since: 7, error: "refused" },
        { type: "failed", at: 9, error: "timeout" },
        { kind: "outage", since: 7, error: "refused" },
      ],
      ["an outage ends with a clean answer", { kind: "outage", since: 7, error: "x" }, {
        type: "answered",
        at: 12,
      }, { kind: "fresh", at: 12 }],
      [
        "a breach holds through a clean answer",
        { kind: "breached", breach: B },
        { type: "answered", at: 9 },
        { kind: "breached", breach: B },
      ],
      [
        "a breach holds through an outage",
        { kind: "breached", breach: B },
        { type: "failed", at: 9, error: "x" },
        { kind: "breached", breach: B },
      ],
      ["the run's pause latches a breach", { kind: "breached", breach: B }, { type: "latched" }, {
        kind: "latched",
        breach: B,
        seen: false,
      }],
      [
        "a latch holds through a clean answer",
        { kind: "latched", breach: B, seen: true },
        { type: "answered", at: 99 },
        { kind: "latched", breach: B, seen: true },
      ],
      [
        "a latch not yet seen ignores the pause's absence (the watch lags)",
        { kind: "latched", breach: B, seen: false },
        { type: "pause", paused: false },
        { kind: "latched", breach: B, seen: false },
      ],
      [
        "a latch sees its pause",
        { kind: "latched", breach: B, seen: false },
        { type: "pause", paused: true },
        { kind: "latched", breach: B, seen: true },
      ],
      [
        "a seen pause lifted releases the latch, to a new answer",
        { kind: "latched", breach: B, seen: true },
        { type: "pause", paused: false },
        { kind: "unchecked" },
      ],
      ["a pause means nothing without a latch", { kind: "fresh", at: 0 }, {
        type: "pause",
        paused: false,
      }, { kind: "fresh", at: 0 }],
      ["latched means nothing without a breach", { kind: "fresh", at: 0 }, { type: "latched" }, {
        kind: "fresh",
        at: 0,
      }],
    ];
    for (const [what, from, event, want] of cases) {
      await t.step(what, () => assert.deepEqual(next(from, event), want));
    }
  },
});

Deno.test({
  name: "blockedBy() lets a start through only on a fresh clean answer, and says why not",
  permissions: "none",
  async fn(t) {
    const cases: [string, GateState, RegExp | undefined][] = [
      ["fresh", { kind: "fresh", at: 0 }, undefined],
      [
        "unchecked",
        { kind: "unchecked" },
        /waiting for an answer of Prometheus http:\/\/prom:9090/,
      ],
      ["stale", { kind: "stale", at: 0 }, /waiting for an answer/],
      [
        "outage",
        { kind: "outage", since: 0, error: "connection refused" },
        /unreachable since 1970-01-01T00:00:00.000Z \(connection refused\); starts resume by themselves/,
      ],
      [
        "breached",
        { kind: "breached", breach: B },
        /breached: query "up == 0" returned \{job="x"\} 0/,
      ],
      ["latched", { kind: "latched", breach: B, seen: true }, /breached: query "up == 0"/],
    ];
    for (const [what, s, want] of cases) {
      await t.step(what, () => {
        const by = blockedBy(s, URL);
        if (want === undefined) assert.equal(by, undefined);
        else assert.match(by ?? "", want);
      });
    }
  },
});
