import assert from "node:assert/strict";
import { htmlTimeline, PauseSpans } from "./timeline.ts";
import type { ReportInput } from "./report.ts";
import type { DispatchEvent, NodeResult } from "../engine/fanout.ts";

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0);

/** A run of `n` nodes: drains, Jobs, verifications, a failure every 7th, one pause. */
export function sampleRun(n: number): ReportInput {
  const outcomes: NodeResult["outcome"][] = [
    "succeeded",
    "succeeded",
    "failed",
    "succeeded",
    "unknown",
  ];
  const results: NodeResult[] = Array.from({ length: n }, (_, i) => {
    const start = T0 + (i % 50) * 2_000 + Math.floor(i / 50) * 30_000;
    return {
      node: `node-${String(i).padStart(5, "0")}`,
      job: `up-node-${i}`,
      outcome: i % 7 === 3 ? "failed" : outcomes[i % 2],
      reason: i % 7 === 3 ? `work exited 1: </script><b>no backend</b> on node-${i}` : undefined,
      drainStartedAt: start - 3_000,
      drainEndedAt: start,
      startedAt: start,
      jobEndedAt: start + 20_000,
      finishedAt: start + 24_000,
    };
  });
  const last = Math.max(...results.map((r) => r.finishedAt!));
  return {
    startedAt: new Date(T0 - 3_000),
    finishedAt: new Date(last),
    namespace: "ops",
    prefix: "up",
    results,
    uids: new Map(),
    skipped: [{ node: "tainted-1", uid: "u", reason: "taint x=y:NoSchedule is not tolerated" }],
    pauses: [{ from: T0 + 60_000, to: T0 + 90_000, why: "paused by file /tmp/p" }],
  };
}

function embedded(html: string) {
  const m = html.match(/<script type="application\/json" id="data">(.*?)<\/script>/s);
  assert.ok(m, "the data is embedded");
  return JSON.parse(m[1]);
}

Deno.test({
  name:
    "the HTML timeline is one self-contained page: a CSP of default-src 'none', no URL to fetch",
  permissions: "none",
  fn() {
    const html = htmlTimeline(sampleRun(20));
    assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none';/);
    assert.doesNotMatch(html, /\b(src|href)=|https?:\/\/|@import|url\(/, "nothing to load");
    assert.equal(html.match(/<\/script>/g)?.length, 2, "a reason cannot close the data script");
  },
});

Deno.test({
  name:
    "the HTML timeline has one row per node (and per skipped node), with drain, Job and verification times",
  permissions: "none",
  fn() {
    const run = sampleRun(10_000);
    const html = htmlTimeline(run);
    const d = embedded(html);
    assert.equal(d.rows.length, 10_001);
    const [name, outcome, d0, d1, j0, j1, end, reason] = d.rows[3];
    assert.deepEqual([name, outcome, d0, d1, j0, j1, end], [
      "node-00003",
      1,
      6_000,
      9_000,
      9_000,
      29_000,
      33_000,
    ]);
    assert.match(reason, /<\/script><b>no backend/);
    assert.deepEqual(d.pauses, [[63_000, 93_000, "paused by file /tmp/p"]]);
    assert.equal(d.rows[10_000][0], "tainted-1");
    console.log(`10,000 nodes: ${html.length} bytes of HTML`);
    assert.ok(html.length < 2_000_000, `${html.length} bytes`);
  },
});

Deno.test({
  name: "PauseSpans takes the user's pause and resume and API outages from the engine's events",
  permissions: "none",
  fn() {
    let now = 0;
    const p = new PauseSpans(() => now);
    now = 5;
    p.event({
      kind: "notice",
      message: "paused by file /tmp/p: no new Job starts; Jobs in flight finish",
    });
    now = 9;
    p.event({ kind: "notice", message: "resumed: the pause was lifted" });
    now = 20;
    p.event({ kind: "api", state: "paused", detail: "unreachable" });
    assert.deepEqual(p.spans, [
      { from: 5, to: 9, why: "paused by file /tmp/p" },
      { from: 20, why: "API: unreachable" },
    ]);
  },
});

Deno.test({
  name:
    "PauseSpans keeps a person's pause and an API outage apart: the API's return does not end a pause a person still holds",
  permissions: "none",
  fn() {
    let now = 0;
    const p = new PauseSpans(() => now);
    const pause = (by: string) => `paused by ${by}: no new Job starts; Jobs in flight finish`;
    const steps: [number, DispatchEvent][] = [
      [5, { kind: "notice", message: pause("owner job ops/hook") }],
      [10, { kind: "api", state: "paused", detail: "paused" }],
      [20, { kind: "api", state: "resumed", detail: "resumed" }],
      [30, { kind: "notice", message: "resumed: the pause was lifted" }],
      // The other way round: the outage first, a person pauses during it.
      [40, { kind: "api", state: "paused", detail: "paused" }],
      [45, { kind: "notice", message: pause("file /tmp/p") }],
      [50, { kind: "api", state: "resumed", detail: "resumed" }],
      [60, { kind: "notice", message: "resumed: the pause was lifted" }],
    ];
    for (const [at, e] of steps) {
      now = at;
      p.event(e);
    }
    assert.deepEqual(p.spans, [
      { from: 5, to: 30, why: "paused by owner job ops/hook" },
      { from: 10, to: 20, why: "API: paused" },
      { from: 40, to: 50, why: "API: paused" },
      { from: 45, to: 60, why: "paused by file /tmp/p" },
    ]);
  },
});

Deno.test({
  name:
    "the HTML timeline shades each wave's soak and each gate breach until its latch was lifted, and marks where each wave opens",
  permissions: "none",
  fn() {
    const run: ReportInput = {
      ...sampleRun(4),
      waves: [
        {
          wave: 1,
          size: 1,
          openedAt: T0,
          endedAt: T0 + 24_000,
          soakEndsAt: T0 + 34_000,
          soakEndedAt: T0 + 50_000,
        },
        { wave: 2, size: 3, openedAt: T0 + 50_000, endedAt: T0 + 80_000 },
      ],
      breaches: [{
        query: "e2e_broken > 0",
        value: "e2e_broken 1",
        at: T0 + 26_000,
        latchedAt: T0 + 27_000,
        liftedAt: T0 + 49_000,
      }],
      latch: "owner Job ops/hook annotation job-dispatcher/paused",
    };
    const d = embedded(htmlTimeline(run));
    assert.deepEqual(d.soaks, [[27_000, 53_000, "wave 1 soak: 26 s after its last node"]]);
    assert.deepEqual(d.breaches, [[
      29_000,
      52_000,
      'health gate breached 09:00:26: query "e2e_broken > 0" returned e2e_broken 1; ' +
      "latched 09:00:27 (owner Job ops/hook annotation job-dispatcher/paused), lifted 09:00:49",
    ]]);
    assert.deepEqual(d.waves, [[3_000, "wave 1/2 (1)"], [53_000, "wave 2/2 (3)"]]);
    const held = { ...run, breaches: [{ ...run.breaches![0], liftedAt: undefined }] };
    const [[, to, why]] = embedded(htmlTimeline(held)).breaches;
    assert.equal(to, run.finishedAt.getTime() - run.startedAt.getTime(), "held to the end");
    assert.match(why, /never lifted$/);
    assert.deepEqual(embedded(htmlTimeline(sampleRun(2))).waves, [], "no waves, no lines");
  },
});
