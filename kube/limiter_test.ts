import assert from "node:assert/strict";
import { type Clock, Limiter, type Release } from "./limiter.ts";

/** A clock that moves only when told to, firing due timers in order. */
function fakeClock(): Clock & { advance(ms: number): Promise<void> } {
  let now = 0;
  let timers: { at: number; fn: () => void }[] = [];
  return {
    now: () => now,
    after(ms, fn) {
      const t = { at: now + ms, fn };
      timers.push(t);
      return () => timers = timers.filter((x) => x !== t);
    },
    async advance(ms) {
      const end = now + ms;
      while (true) {
        const due = timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
        if (!due) break;
        timers = timers.filter((t) => t !== due);
        now = due.at;
        due.fn();
        await settle();
      }
      now = end;
      await settle();
    },
  };
}

/** Lets resolved promises run their continuations. */
async function settle() {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

Deno.test("Limiter never has more than `concurrency` requests in flight", {
  permissions: "none",
}, async (t) => {
  for (const concurrency of [1, 3, 16]) {
    await t.step(`concurrency ${concurrency}, 100 requests`, async () => {
      const clock = fakeClock();
      const limiter = new Limiter({ concurrency, qps: 0, burst: 1, clock });
      let inFlight = 0;
      let peak = 0;
      let done = 0;
      const one = async (i: number) => {
        const release = await limiter.acquire();
        inFlight++;
        peak = Math.max(peak, inFlight);
        // Requests take 1 to 7 ms of fake time.
        await new Promise<void>((resolve) => clock.after(1 + (i % 7), resolve));
        inFlight--;
        done++;
        release();
      };
      const all = Promise.all(Array.from({ length: 100 }, (_, i) => one(i)));
      while (done < 100) await clock.advance(1);
      await all;
      assert.equal(peak, concurrency);
      assert.equal(limiter.state.inFlight, 0);
    });
  }
});

Deno.test("Limiter lets a burst through at once, then `qps` a second", {
  permissions: "none",
}, async (t) => {
  const cases = [
    { qps: 5, burst: 10, after1s: 15, after10s: 60 },
    { qps: 50, burst: 300, after1s: 350, after10s: 800 },
    { qps: 0.5, burst: 1, after1s: 1, after10s: 6 },
    // A bucket that fills in under 100 ms (--kube-api-burst 1): its rate is
    // still qps, not a bucketful per wake.
    { qps: 50, burst: 1, after1s: 51, after10s: 501 },
    { qps: 200, burst: 10, after1s: 210, after10s: 2000 },
  ];
  for (const { qps, burst, after1s, after10s } of cases) {
    await t.step(`qps ${qps}, burst ${burst}`, async () => {
      const clock = fakeClock();
      const limiter = new Limiter({ concurrency: 10_000, qps, burst, clock });
      let started = 0;
      for (let i = 0; i < 2000; i++) limiter.acquire().then((r) => (started++, r()));
      await settle();
      assert.equal(started, burst, "the whole burst at once");
      await clock.advance(1000);
      assert.equal(started, after1s);
      await clock.advance(9000);
      assert.equal(started, after10s);
    });
  }
});

Deno.test(
  "Limiter wakes at most every 100 ms while the bucket is empty: tokens go out in small batches at the same rate",
  {
    permissions: "none",
  },
  async (t) => {
    // Each wake of the process costs CPU of its own (the event loop, cold
    // caches: ~0.3 ms on a loaded 2-core machine): one wake per token at 50
    // qps tripled the CPU per node of a rate-limited run.
    const cases = [
      { qps: 50, per100ms: 5, wakesIn1s: 10 },
      { qps: 200, per100ms: 20, wakesIn1s: 10 },
      { qps: 5, per100ms: 0, wakesIn1s: 5 }, // a token every 200 ms: one wake per token
    ];
    for (const { qps, per100ms, wakesIn1s } of cases) {
      await t.step(`qps ${qps}`, async () => {
        const clock = fakeClock();
        let wakes = 0;
        const counting: Clock = {
          now: clock.now,
          after: (ms, fn) => clock.after(ms, () => (wakes++, fn())),
        };
        const limiter = new Limiter({ concurrency: 10_000, qps, burst: 30, clock: counting });
        let started = 0;
        for (let i = 0; i < 1000; i++) limiter.acquire().then((r) => (started++, r()));
        await settle();
        assert.equal(started, 30, "the burst");
        await clock.advance(99);
        if (per100ms) assert.equal(started, 30, "nothing before 100 ms");
        await clock.advance(1);
        if (per100ms) assert.equal(started, 30 + per100ms, "the tokens of 100 ms at once");
        await clock.advance(900);
        assert.equal(started, 30 + qps, "the same rate");
        assert.equal(wakes, wakesIn1s);
      });
    }
  },
);

Deno.test("Limiter serves waiters first come, first served", {
  permissions: "none",
}, async (t) => {
  await t.step("for slots", async () => {
    const clock = fakeClock();
    const limiter = new Limiter({ concurrency: 2, qps: 0, burst: 1, clock });
    const order: number[] = [];
    const held: Release[] = [];
    const all = Array.from(
      { length: 6 },
      (_, i) => limiter.acquire().then((r) => (order.push(i), held.push(r))),
    );
    await settle();
    assert.deepEqual(order, [0, 1]);
    while (held.length) {
      held.shift()!();
      await settle();
    }
    await Promise.all(all);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
  });
  await t.step("for tokens, and a watch does not overtake a request", async () => {
    const clock = fakeClock();
    const limiter = new Limiter({ concurrency: 1, qps: 10, burst: 1, clock });
    const order: string[] = [];
    const first = await limiter.acquire();
    const second = limiter.acquire().then((r) => (order.push("request"), r));
    const watch = limiter.admit().then(() => order.push("watch"));
    await clock.advance(500);
    assert.deepEqual(order, [], "the request waits for the slot; the watch waits behind it");
    first();
    await settle();
    assert.deepEqual(order, ["request"]);
    await clock.advance(100);
    await watch;
    assert.deepEqual(order, ["request", "watch"]);
    (await second)();
  });
  await t.step("lift() lets every queued request through at once, slots permitting", async () => {
    const clock = fakeClock();
    const limiter = new Limiter({ concurrency: 100, qps: 1, burst: 1, clock });
    let started = 0;
    for (let i = 0; i < 50; i++) limiter.acquire().then(() => started++);
    await settle();
    assert.equal(started, 1);
    limiter.lift();
    await settle();
    assert.equal(started, 50);
  });
  await t.step("a released slot is released once", async () => {
    const limiter = new Limiter({ concurrency: 1, qps: 0, burst: 1 });
    const release = await limiter.acquire();
    release();
    release();
    assert.equal(limiter.state.inFlight, 0);
  });
});

Deno.test("Limiter refuses bounds below 1", { permissions: "none" }, async (t) => {
  for (
    const opts of [
      { concurrency: 0, qps: 5, burst: 10 },
      { concurrency: 1, qps: 5, burst: 0 },
      { concurrency: 1, qps: -1, burst: 10 },
      { concurrency: NaN, qps: 5, burst: 10 },
    ]
  ) {
    await t.step(JSON.stringify(opts), () => {
      assert.throws(() => new Limiter(opts), RangeError);
    });
  }
});
