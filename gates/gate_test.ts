import assert from "node:assert/strict";
import { HealthGate, LatchRefused } from "./gate.ts";
import { BadQueryError, directGet, measure, type Measurement } from "./prometheus.ts";
import type { GateConfig } from "./config.ts";
import type { Breach } from "./state.ts";
import type { Clock } from "../base/clock.ts";

/** A loopback Prometheus whose one gauge the test flips, or takes down (503). */
async function withPrometheus(
  fn: (
    url: string,
    set: (s: { value?: number; down?: boolean; dark?: boolean }) => void,
  ) => Promise<void>,
): Promise<void> {
  let state: { value?: number; down?: boolean; dark?: boolean } = {};
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    if (state.down) return new Response("down", { status: 503 });
    if (new URL(req.url).searchParams.get("query")?.includes("gate_selector")) {
      // The selector's presence: there, unless the test took its exporter away.
      const result = state.dark ? [] : [{ metric: { gate_selector: "0" }, value: [1, "1"] }];
      return Response.json({ status: "success", data: { resultType: "vector", result } });
    }
    const result = state.value === undefined
      ? []
      : [{ metric: { __name__: "broken" }, value: [1, String(state.value)] }];
    return Response.json({ status: "success", data: { resultType: "vector", result } });
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, (s) => (state = s));
  } finally {
    await server.shutdown();
  }
}

function config(url: string, onBreach: "pause" | "exit" = "pause"): GateConfig {
  return { url, queries: ["broken > 0"], intervalSecs: 0.2, onBreach };
}

/** A gate on the Prometheus at `url`, measured directly; `config` laid over {@linkcode config}'s. */
function gateOn(
  url: string,
  o: { onBreach?: "pause" | "exit"; config?: Partial<GateConfig>; clock?: Clock } = {},
): HealthGate {
  const c = config(url, o.onBreach);
  return new HealthGate({
    config: { ...c, ...o.config },
    measure: measure(directGet({ url, timeoutMs: 1000 }).get, c),
    clock: o.clock,
  });
}

/** What {@linkcode withGate} sets up before the test's own steps. */
interface GateSetup {
  onBreach?: "pause" | "exit";
  config?: Partial<GateConfig>;
  clock?: Clock;
  /** The gauge before the first measurement. */
  initial?: { value?: number; down?: boolean; dark?: boolean };
  /** Called on the gate before it starts (a subscriber that must see its first state). */
  before?: (gate: HealthGate) => void;
  /** The run's callbacks the started gate is bound to. */
  bind?: Parameters<HealthGate["bind"]>[0];
}

/**
 * A gate on a loopback Prometheus ({@linkcode gateOn}), started and bound as
 * `o` says; `fn` gets it and the gauge's setter; the gate stops after.
 */
async function withGate(
  o: GateSetup,
  fn: (
    gate: HealthGate,
    set: (s: { value?: number; down?: boolean; dark?: boolean }) => void,
  ) => Promise<void>,
): Promise<void> {
  await withPrometheus(async (url, set) => {
    const gate = gateOn(url, o);
    if (o.initial) set(o.initial);
    o.before?.(gate);
    await gate.start();
    try {
      if (o.bind) await gate.bind(o.bind);
      await fn(gate, set);
    } finally {
      await gate.stop();
    }
  });
}

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("HealthGate lets starts through on a fresh clean answer and holds them once it is stale", async () => {
  let now = Date.now();
  const clock = { now: () => now, sleep: () => Promise.resolve() };
  await withGate({ clock }, async (gate) => {
    assert.equal(gate.state.kind, "fresh");
    assert.equal(gate.pausedBy(), undefined);
    now += 10_000; // no answer for longer than the interval
    assert.equal(gate.state.kind, "stale");
    assert.match(gate.pausedBy() ?? "", /waiting for an answer of Prometheus/);
    assert.equal(await gate.checkNow(), undefined, "a new answer makes it fresh again");
  });
});

Deno.test("HealthGate latches a breach: it holds after the metric recovers, until the pause it set is lifted", async () => {
  const breaches: Breach[] = [];
  let paused = false;
  let wakes = 0;
  const bind = {
    onBreach: (b: Breach) => void breaches.push(b),
    latch: () => Promise.resolve(void (paused = true)),
    pauseSeen: () => paused,
  };
  await withGate({ before: (g) => g.onChange(() => wakes++), bind }, async (gate, set) => {
    assert.equal(gate.pausedBy(), undefined);
    set({ value: 3 });
    await until("the breach", () => gate.breached() !== undefined);
    assert.match(
      gate.pausedBy() ?? "",
      /health gate breached: query "broken > 0" returned broken 3/,
    );
    await until("the latch", () => gate.state.kind === "latched");
    assert.equal(paused, true, "the gate set the run's pause");
    assert.ok(wakes > 0, "the engine was woken");
    set({}); // the metric recovers
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(gate.state.kind, "latched", "still latched after the metric recovered");
    assert.ok(gate.pausedBy());
    paused = false; // a person lifts the pause
    await until("the release", () => gate.pausedBy() === undefined);
    assert.equal(breaches.length, 1, "one breach told once");
    assert.equal(breaches[0].value, "broken 3");
  });
});

Deno.test("HealthGate: an unanswering Prometheus is an outage that pauses and resumes by itself, never a breach", async () => {
  const told: string[] = [];
  const bind = {
    onBreach: () => void told.push("breach"),
    onHold: (c: { state: string }) => void told.push(c.state),
  };
  await withGate({ bind }, async (gate, set) => {
    set({ down: true });
    await until("the outage", () => gate.state.kind === "outage");
    assert.match(
      gate.pausedBy() ?? "",
      /unreachable since .*HTTP 503: down.*resume by themselves/,
    );
    assert.equal(gate.breached(), undefined);
    assert.equal(gate.stopsBy(), undefined);
    set({});
    await until("the recovery", () => gate.pausedBy() === undefined);
    assert.deepEqual(told, ["paused", "resumed"]);
  });
});

Deno.test("HealthGate with --on-gate-breach exit stops the rollout on a breach and sets no pause", async () => {
  await withGate({ onBreach: "exit", initial: { value: 1 } }, async (gate) => {
    assert.equal(
      gate.stopsBy(),
      'a health gate was breached: query "broken > 0" returned broken 1',
    );
    assert.equal(
      await gate.checkNow(),
      'health gate breached: query "broken > 0" returned broken 1',
    );
  });
});

Deno.test("HealthGate.afterWave() measures once more when the soak ends and says stop on a breach (exit)", async () => {
  // No measurement of its own during the soak.
  await withGate({ onBreach: "exit", config: { intervalSecs: 60 } }, async (gate, set) => {
    assert.equal(await gate.afterWave(0), undefined, "healthy: the next wave may open");
    const soak = gate.afterWave(300);
    set({ value: 1 }); // breached during the soak: seen at its end
    const began = Date.now();
    assert.match((await soak) ?? "", /^a health gate was breached: query "broken > 0"/);
    assert.ok(Date.now() - began >= 250, "it held the soak");
  });
});

Deno.test("HealthGate.breaches records each breach with its query, value and when its latch was set and lifted", async () => {
  let paused = false;
  const bind = {
    onBreach: () => {},
    latch: () => Promise.resolve(void (paused = true)),
    pauseSeen: () => paused,
  };
  await withGate({ bind }, async (gate, set) => {
    assert.equal(gate.breaches.length, 0, "no breach yet");
    const before = Date.now();
    set({ value: 2 });
    await until("the latch", () => gate.state.kind === "latched");
    const [held] = gate.breaches;
    assert.equal(held.query, "broken > 0");
    assert.equal(held.value, "broken 2");
    assert.ok(held.at >= before && held.latchedAt! >= held.at, "breached, then latched");
    assert.equal(held.liftedAt, undefined, "still held");
    set({});
    paused = false;
    await until("the release", () => gate.pausedBy() === undefined);
    assert.ok(gate.breaches[0].liftedAt! >= held.latchedAt!, "lifted after it was latched");
    set({ value: 5 });
    await until("a second breach", () => gate.breaches.length === 2);
    assert.equal(gate.breaches[1].value, "broken 5");
  });
});

Deno.test("HealthGate: a selector gone dark is no data: starts pause, say which, and resume when it is back", async () => {
  const told: string[] = [];
  const bind = {
    onBreach: () => void told.push("breach"),
    onHold: (c: { kind: string; state: string }) => void told.push(`${c.kind} ${c.state}`),
  };
  await withGate({ bind }, async (gate, set) => {
    const cleanFrom = gate.cleanSince();
    assert.ok(cleanFrom !== undefined, "clean since the first answer");
    set({ dark: true });
    await until("no data", () => gate.state.kind === "nodata");
    assert.match(
      gate.pausedBy() ?? "",
      /no data since .*: selector broken of query "broken > 0" matches no series/,
    );
    assert.equal(gate.cleanSince(), undefined, "not clean while dark");
    assert.equal(gate.stopsBy(), undefined);
    set({});
    await until("the data back", () => gate.pausedBy() === undefined);
    assert.deepEqual(told, ["nodata paused", "nodata resumed"]);
    assert.ok(gate.cleanSince()! > cleanFrom, "clean again, since the data came back");
  });
});

Deno.test("HealthGate writes the latch before it tells the breach, and a latch refused stops the run", async () => {
  const order: string[] = [];
  const kinds: string[] = [];
  const bind = {
    onBreach: (_: Breach, latch: string) => void order.push(`told ${latch}`),
    latch: () => {
      order.push("latch");
      return Promise.reject(new LatchRefused("denied by policy"));
    },
    pauseSeen: () => false,
  };
  const before = (g: HealthGate) => g.subscribe((s) => kinds.push(s.kind));
  await withGate({ before, bind }, async (gate, set) => {
    set({ value: 1 });
    await until("the refusal", () => gate.state.kind === "unlatched");
    assert.deepEqual(order, ["latch", "told unlatched"]);
    assert.match(gate.stopsBy() ?? "", /the run cannot pause itself: denied by policy/);
    assert.equal(kinds[0], "fresh", "subscribers see every change");
    assert.deepEqual(kinds.slice(-2), ["breached", "unlatched"]);
  });
});

Deno.test("HealthGate: a latch that keeps failing (API out) is tried again, then stops the run after three intervals", async () => {
  let tries = 0;
  const bind = {
    onBreach: () => {},
    latch: () => Promise.reject(new Error(`HTTP 503 (try ${++tries})`)),
    pauseSeen: () => false,
  };
  await withGate({ bind }, async (gate, set) => {
    set({ value: 1 });
    await until("the stop", () => gate.state.kind === "unlatched");
    assert.ok(tries >= 3, `${tries} tries`);
    assert.match(gate.stopsBy() ?? "", /cannot pause itself: HTTP 503/);
  });
});

/**
 * A measure the test answers by hand: each call waits until `answer(m)`
 * resolves it, so a measurement can be held in flight across a lift.
 */
function heldMeasure() {
  const calls: ((m: Measurement) => void)[] = [];
  const measure = () => new Promise<Measurement>((resolve) => calls.push(resolve));
  return {
    measure,
    /** How many measurements were asked for so far. */
    get asked() {
      return calls.length;
    },
    /** Answers the `i`-th measurement, if it was asked for. */
    answer: (i: number, m: Measurement) => calls[i]?.(m),
  };
}

const BREACH: Measurement = {
  breach: { query: "broken > 0", value: "broken 1" },
  dark: [],
  warnings: [],
};
const CLEAN: Measurement = { dark: [], warnings: [] };

Deno.test("HealthGate: an answer asked before the pause was lifted does not latch again once it is lifted", async () => {
  const m = heldMeasure();
  const breaches: Breach[] = [];
  let paused = false;
  const gate = new HealthGate({
    // A long interval: only the test's checkNow() measures.
    config: { url: "http://prom", queries: ["broken > 0"], intervalSecs: 3600, onBreach: "pause" },
    measure: m.measure,
  });
  const started = gate.start();
  m.answer(0, BREACH);
  await started;
  await gate.bind({
    onBreach: (b) => void breaches.push(b),
    latch: () => Promise.resolve(void (paused = true)),
    pauseSeen: () => paused,
  });
  try {
    assert.equal(gate.state.kind, "latched");
    // A measurement goes out while the gauge still says unhealthy…
    const inFlight = gate.checkNow();
    await until("the measurement asked", () => m.asked === 2);
    // …the fleet recovers and a person lifts the pause before it answers.
    paused = false;
    assert.equal(gate.state.kind, "unchecked", "the lift is seen");
    m.answer(1, BREACH); // evaluated before the lift
    // Either the pause is written again (the defect), or Prometheus is asked again.
    await until("the answer applied or asked again", () => paused || m.asked === 3);
    m.answer(2, CLEAN);
    assert.equal(await inFlight, undefined, "healthy after the lift: starts go on");
    assert.equal(paused, false, "no pause written again for data older than the lift");
    assert.equal(breaches.length, 1, "one breach, told once");
  } finally {
    await gate.stop();
  }
});

Deno.test("HealthGate at every interval, whatever Prometheus's latency: a lift with the fleet healthy lets starts go and wakes the engine; a hold always says why", async (t) => {
  for (const intervalSecs of [1, 2, 5, 30, 300]) {
    // The latency of one measurement, as a share of the interval: under half,
    // over half (the answer is stale before the next lands), over a whole one.
    for (const share of [0, 0.4, 0.6, 1.5]) {
      await t.step(`--gate-interval-secs ${intervalSecs}, latency ${share} interval`, async () => {
        await liftAndResume(intervalSecs, share * intervalSecs * 1000);
      });
    }
  }
});

/** One row: a breach latched and seen, lifted while a measurement is out, then healthy. */
async function liftAndResume(intervalSecs: number, latencyMs: number): Promise<void> {
  let now = 1_000_000;
  const m = heldMeasure();
  let paused = false;
  let wakes = 0;
  const gate = new HealthGate({
    config: { url: "http://prom", queries: ["broken > 0"], intervalSecs, onBreach: "pause" },
    measure: m.measure,
    clock: { now: () => now, sleep: () => Promise.resolve() },
  });
  gate.onChange(() => wakes++);
  const started = gate.start();
  m.answer(0, BREACH);
  await started;
  await gate.bind({
    onBreach: () => {},
    latch: () => Promise.resolve(void (paused = true)),
    pauseSeen: () => paused,
  });
  try {
    assert.equal(gate.state.kind, "latched");
    // Answered `latencyMs` after it was asked, with what held when asked.
    const answer = async (i: number, a: Measurement) => {
      await until(`measurement ${i}`, () => m.asked > i || (i === 2 && paused));
      now += latencyMs;
      assert.ok(gate.pausedBy(), "held: the engine is told why");
      m.answer(i, a);
    };
    const lifted = gate.checkNow();
    await until("the measurement asked", () => m.asked === 2);
    paused = false;
    const woken = wakes;
    await answer(1, BREACH);
    await answer(2, CLEAN);
    assert.equal(await lifted, undefined, "the first answer after the lift lets starts go");
    assert.equal(paused, false, "the pause is not written again");
    assert.ok(wakes > woken, "the engine is woken to start");
    // The next measurement, asked half an interval later: while it is out the
    // last answer may grow stale (starts wait); its answer wakes the engine.
    now += intervalSecs * 500;
    const woken2 = wakes;
    const next = gate.checkNow();
    await until("the next measurement", () => m.asked === 4);
    now += latencyMs;
    const held = gate.pausedBy();
    m.answer(3, CLEAN);
    assert.equal(await next, undefined);
    if (held) assert.ok(wakes > woken2, `held (${held}) then fresh: the engine is woken`);
  } finally {
    await gate.stop();
  }
}

Deno.test("HealthGate: after a lift during a measurement, what the answer asked again says holds as it would without the lift", async (t) => {
  const rows: {
    name: string;
    again: Measurement | Error;
    kind: string;
    repaused: boolean;
  }[] = [
    {
      name: "the fleet still broken: the pause is written again",
      again: BREACH,
      kind: "latched",
      repaused: true,
    },
    {
      name: "Prometheus out: starts wait",
      again: new Error("connection refused"),
      kind: "outage",
      repaused: false,
    },
    {
      name: "no data: starts wait",
      again: {
        dark: [{ selector: "up", query: "broken > 0" }],
        warnings: [],
      } as unknown as Measurement,
      kind: "nodata",
      repaused: false,
    },
    {
      name: "a rejected query: latched as a breach",
      again: new BadQueryError("bad", "broken > 0", 422),
      kind: "latched",
      repaused: true,
    },
  ];
  for (const row of rows) {
    await t.step(row.name, async () => {
      const calls: { resolve: (m: Measurement) => void; reject: (e: Error) => void }[] = [];
      const measure = () =>
        new Promise<Measurement>((resolve, reject) => calls.push({ resolve, reject }));
      const reply = (i: number, a: Measurement | Error) =>
        a instanceof Error ? calls[i].reject(a) : calls[i].resolve(a);
      let paused = false;
      let latches = 0;
      const gate = new HealthGate({
        config: {
          url: "http://prom",
          queries: ["broken > 0"],
          intervalSecs: 3600,
          onBreach: "pause",
        },
        measure,
      });
      const started = gate.start();
      reply(0, BREACH);
      await started;
      await gate.bind({
        onBreach: () => {},
        latch: () => Promise.resolve(void (paused = true, latches++)),
        pauseSeen: () => paused,
      });
      try {
        const inFlight = gate.checkNow();
        await until("the measurement asked", () => calls.length === 2);
        paused = false; // a person lifts while the answer is out
        assert.equal(gate.state.kind, "unchecked");
        reply(1, CLEAN); // asked before the lift: not the fleet as the lift left it
        await until("asked again", () => calls.length === 3);
        assert.ok(gate.pausedBy(), "no start between the lift and the answer asked after it");
        reply(2, row.again);
        const by = await inFlight;
        assert.equal(gate.state.kind, row.kind);
        assert.ok(by ?? gate.stopsBy(), "starts wait or the run stops");
        assert.equal(paused, row.repaused);
        assert.equal(latches, row.repaused ? 2 : 1);
      } finally {
        await gate.stop();
      }
    });
  }
});

Deno.test("HealthGate: stopped while asking again after a lift, it lets no start go on an answer older than the lift", async () => {
  const m = heldMeasure();
  let paused = false;
  const gate = new HealthGate({
    config: { url: "http://prom", queries: ["broken > 0"], intervalSecs: 3600, onBreach: "pause" },
    measure: m.measure,
  });
  const started = gate.start();
  m.answer(0, BREACH);
  await started;
  await gate.bind({
    onBreach: () => {},
    latch: () => Promise.resolve(void (paused = true)),
    pauseSeen: () => paused,
  });
  const inFlight = gate.checkNow();
  await until("the measurement asked", () => m.asked === 2);
  paused = false;
  assert.equal(gate.state.kind, "unchecked");
  const stopped = gate.stop();
  m.answer(1, CLEAN); // asked before the lift, answered after the stop
  await stopped;
  assert.ok(await inFlight, "held: no answer after the lift");
  assert.equal(m.asked, 2, "not asked again once stopped");
});
