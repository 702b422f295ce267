import assert from "node:assert/strict";
import { HealthGate } from "../gates/gate.ts";
import { PrometheusUnreachable } from "../gates/prometheus.ts";
import { WatchedGate } from "./soak_gate.ts";
import type { GateConfig } from "../gates/config.ts";
import type { Clock } from "../base/clock.ts";

/** The gate of these tests: one query, pausing on a breach. */
const CONFIG: GateConfig = {
  url: "http://prom:9090",
  queries: ["up == 0"],
  intervalSecs: 30,
  onBreach: "pause",
};

/** A gate whose every measurement is clean, on the test's clock. */
function cleanGate(clock: Clock): HealthGate {
  return new HealthGate({
    config: CONFIG,
    measure: () => Promise.resolve({ dark: [], warnings: [] }),
    clock,
  });
}

type Answer = { query: string; value: string } | undefined | "down";

/** A gate whose measurements answer as the test says, on a clock the test moves. */
function scripted() {
  let now = 1_000;
  let answer: Answer;
  let paused = false;
  const gate = new HealthGate({
    config: CONFIG,
    measure: () =>
      answer === "down"
        ? Promise.reject(new PrometheusUnreachable("connection refused"))
        : Promise.resolve({ breach: answer, dark: [], warnings: [] }),
    clock: { now: () => now, sleep: () => Promise.resolve() },
  });
  const watched = new WatchedGate(gate);
  let wakes = 0;
  watched.onChange(() => wakes++);
  return {
    gate,
    watched,
    wakes: () => wakes,
    /** At `at`, one measurement answers `a`. */
    async answer(at: number, a: Answer) {
      now = at;
      answer = a;
      await gate.checkNow();
    },
    /** The run's pause as a person sets and lifts it. */
    pause(p: boolean, at: number) {
      now = at;
      paused = p;
    },
    pauseSeen: () => paused,
  };
}

const BREACH = { query: "up == 0", value: '{job="x"} 0' };

Deno.test({
  name:
    "WatchedGate: clean since the first clean answer after each break (a latch lifted, an outage ended)",
  permissions: "none",
  async fn(t) {
    const g = scripted();
    await g.gate.bind({
      onBreach: () => {},
      latch: () => Promise.resolve(),
      pauseSeen: g.pauseSeen,
    });
    await t.step("clean from the start: no break in this run", async () => {
      await g.answer(1_000, undefined);
      assert.deepEqual(g.watched.watch(), { clean: true, since: -Infinity });
    });
    await t.step("a breach breaks it, and its latch holds it past clean answers", async () => {
      await g.answer(2_000, BREACH);
      const w = g.watched.watch();
      assert.equal(w.clean, false);
      assert.match((w as { why: string }).why, /health gate breached: query "up == 0"/);
      g.pause(true, 2_500);
      await g.answer(3_000, undefined);
      assert.equal(g.watched.watch().clean, false, "latched: the metric's recovery is no lift");
    });
    await t.step("lifted, then clean: since that clean answer, after the breach", async () => {
      g.pause(false, 4_000);
      assert.equal(g.watched.watch().clean, false, "lifted, no answer yet");
      await g.answer(5_000, undefined);
      const w = g.watched.watch();
      assert.equal(w.clean && w.since, 5_000);
      assert.match(w.clean ? w.after ?? "" : "", /breached: query "up == 0"/);
    });
    await t.step("Prometheus down, then back: since its first answer back", async () => {
      await g.answer(6_000, "down");
      const down = g.watched.watch();
      assert.match(down.clean ? "" : down.why, /unreachable/);
      await g.answer(7_000, "down");
      await g.answer(8_000, undefined);
      const w = g.watched.watch();
      assert.equal(w.clean && w.since, 8_000);
      assert.match(w.clean ? w.after ?? "" : "", /unreachable/);
    });
    await t.step("the engine is woken at each change, and sees it first", () => {
      assert.ok(g.wakes() >= 4, `woken ${g.wakes()} times`);
    });
    await g.gate.stop();
  },
});

Deno.test({
  name:
    "WatchedGate: a run's pause (a breach latched by a killed run, left on the owner) breaks it; lifted, clean since the lift",
  permissions: "none",
  async fn() {
    let now = 1_000;
    const clock = { now: () => now, sleep: () => Promise.resolve() };
    const gate = cleanGate(clock);
    let paused: string | undefined = "annotation p/paused=true on Job ops/hook";
    const owner = { pausedBy: () => paused, onChange: () => {} };
    const watched = new WatchedGate(gate, { pauses: [owner], clock });
    await gate.bind({ onBreach: () => {}, latch: () => Promise.resolve(), pauseSeen: () => false });
    await gate.checkNow();
    const w = watched.watch();
    assert.equal(w.clean, false, "the metric is healthy, but the run is paused");
    assert.match(w.clean ? "" : w.why, /paused by annotation p\/paused=true/);
    now = 5_000;
    assert.equal(watched.watch().clean, false, "still paused");
    now = 9_000;
    paused = undefined;
    const lifted = watched.watch();
    assert.equal(
      lifted.clean && lifted.since,
      9_000,
      "clean since the lift, not the answer at 1000",
    );
    assert.match(lifted.clean ? lifted.after ?? "" : "", /paused by annotation/);
    await gate.stop();
  },
});

Deno.test({
  name:
    "WatchedGate: clean since outlives the run: each break and its end are written, and a re-run starts from what it finds",
  permissions: "none",
  async fn(t) {
    let now = 1_000;
    const clock = { now: () => now, sleep: () => Promise.resolve() };
    const gateAt = () => cleanGate(clock);
    await t.step("a break and its end, written in order", async () => {
      const gate = gateAt();
      let paused: string | undefined;
      const written: string[] = [];
      const watched = new WatchedGate(gate, {
        pauses: [{ pausedBy: () => paused, onChange: () => {} }],
        clock,
        persist: (v) => Promise.resolve(void written.push(v)),
      });
      await gate.checkNow();
      watched.watch();
      paused = "file /tmp/p";
      watched.watch();
      now = 4_000;
      paused = undefined;
      watched.watch();
      await watched.flushed();
      assert.deepEqual(written, ["broken", new Date(4_000).toISOString()]);
      await gate.stop();
    });
    const cases: [string, string | undefined, number][] = [
      ["an earlier run's clean stretch: since its start", new Date(3_000).toISOString(), 3_000],
      ["an earlier run killed inside a break: since this run's start", "broken", 7_000],
      ["nothing left: no break", undefined, -Infinity],
      ["a value that is no time: no break", "garbage", -Infinity],
    ];
    for (const [name, earlier, since] of cases) {
      await t.step(name, async () => {
        now = 7_000;
        const gate = gateAt();
        const watched = new WatchedGate(gate, { clock, earlier });
        await gate.checkNow();
        const w = watched.watch();
        assert.equal(w.clean && w.since, since);
        await gate.stop();
      });
    }
  },
});
