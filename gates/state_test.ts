import assert from "node:assert/strict";
import { blockedBy, type Breach, type GateEvent, type GateState, next, stopsBy } from "./state.ts";

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
      [
        "an answer with a dark selector is no data, not healthy",
        { kind: "fresh", at: 0 },
        { type: "answered", at: 3, noData: "selector x matches no series" },
        { kind: "nodata", since: 3, detail: "selector x matches no series" },
      ],
      [
        "no data keeps its start and says what is dark now",
        { kind: "nodata", since: 3, detail: "selector x matches no series" },
        { type: "answered", at: 8, noData: "warnings: store down" },
        { kind: "nodata", since: 3, detail: "warnings: store down" },
      ],
      [
        "no data ends with a clean answer",
        { kind: "nodata", since: 3, detail: "d" },
        { type: "answered", at: 9 },
        { kind: "fresh", at: 9 },
      ],
      [
        "a breach wins over no data in the same answer",
        { kind: "fresh", at: 0 },
        { type: "answered", at: 5, breach: B, noData: "d" },
        { kind: "breached", breach: B },
      ],
      [
        "no data, then Prometheus gone, is an outage",
        { kind: "nodata", since: 3, detail: "d" },
        { type: "failed", at: 9, error: "refused" },
        { kind: "outage", since: 9, error: "refused" },
      ],
      [
        "an outage, then an answer without data, is no data",
        { kind: "outage", since: 7, error: "x" },
        { type: "answered", at: 12, noData: "d" },
        { kind: "nodata", since: 12, detail: "d" },
      ],
      [
        "a rejected query (4xx) stops the line as a breach, not an outage",
        { kind: "fresh", at: 0 },
        { type: "rejected", at: 4, query: "q", error: "HTTP 422: many-to-many" },
        {
          kind: "breached",
          breach: { query: "q", value: "HTTP 422: many-to-many", at: 4, rejected: true },
        },
      ],
      [
        "a rejected query during an outage stops the line",
        { kind: "outage", since: 1, error: "x" },
        { type: "rejected", at: 4, query: "q", error: "e" },
        { kind: "breached", breach: { query: "q", value: "e", at: 4, rejected: true } },
      ],
      [
        "a breach holds through no data",
        { kind: "breached", breach: B },
        { type: "answered", at: 9, noData: "d" },
        { kind: "breached", breach: B },
      ],
      [
        "a latch holds through a rejection",
        { kind: "latched", breach: B, seen: true },
        { type: "rejected", at: 9, query: "q", error: "e" },
        { kind: "latched", breach: B, seen: true },
      ],
      [
        "a latch that cannot be written is unlatched",
        { kind: "breached", breach: B },
        { type: "latchRefused", error: "403" },
        { kind: "unlatched", breach: B, error: "403" },
      ],
      [
        "unlatched holds through a clean answer and a pause's absence",
        { kind: "unlatched", breach: B, error: "403" },
        { type: "pause", paused: false },
        { kind: "unlatched", breach: B, error: "403" },
      ],
      [
        "a refusal means nothing once latched",
        { kind: "latched", breach: B, seen: false },
        { type: "latchRefused", error: "403" },
        { kind: "latched", breach: B, seen: false },
      ],
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
      [
        "stale",
        { kind: "stale", at: 0 },
        /waiting for an answer of .* \(the last came at 1970-01-01T00:00:00.000Z; a start needs one at most --gate-interval-secs old\)/,
      ],
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
      [
        "no data",
        { kind: "nodata", since: 0, detail: "selector x matches no series" },
        /no data since 1970-01-01T00:00:00.000Z: selector x matches no series; starts resume by themselves when it is back/,
      ],
      [
        "rejected",
        { kind: "breached", breach: { query: "q", value: "bad", at: 0, rejected: true } },
        /breached: query "q" was rejected by Prometheus: bad/,
      ],
      ["unlatched", { kind: "unlatched", breach: B, error: "403" }, /breached: query "up == 0"/],
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

Deno.test({
  name: "stopsBy() stops on a breach with exit, and on a latch that cannot be written in any mode",
  permissions: "none",
  async fn(t) {
    const cases: [string, GateState, "pause" | "exit", RegExp | undefined][] = [
      ["fresh never stops", { kind: "fresh", at: 0 }, "exit", undefined],
      ["an outage pauses only", { kind: "outage", since: 0, error: "x" }, "exit", undefined],
      ["no data pauses only", { kind: "nodata", since: 0, detail: "d" }, "exit", undefined],
      ["a breach with pause pauses", { kind: "breached", breach: B }, "pause", undefined],
      [
        "a breach with exit stops",
        { kind: "breached", breach: B },
        "exit",
        /^a health gate was breached: query "up == 0"/,
      ],
      ["latched with exit stops", { kind: "latched", breach: B, seen: false }, "exit", /breached/],
      [
        "unlatched stops with pause",
        { kind: "unlatched", breach: B, error: "denied" },
        "pause",
        /the run cannot pause itself: denied$/,
      ],
    ];
    for (const [what, s, mode, want] of cases) {
      await t.step(what, () => {
        const by = stopsBy(s, mode);
        if (want === undefined) assert.equal(by, undefined);
        else assert.match(by ?? "", want);
      });
    }
  },
});
