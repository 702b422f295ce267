import assert from "node:assert/strict";
import { dispatch, type Progress, type Target } from "./fanout.ts";
import type { GateWatch, SoakGate, WaveEnd } from "./fanout_types.ts";
import { instantiateJob, labelValue, parseJobTemplate, trackingKeys } from "../job.ts";
import { FakeClock, FakeJobApi, runOn } from "../testing/fake_api.ts";
import { parseWaves, resolveWaves, withWaves } from "./waves.ts";

const KEYS = trackingKeys("job-dispatcher");
const TEMPLATE = parseJobTemplate(
  "apiVersion: batch/v1\nkind: Job\nmetadata: {name: up}\nspec: {template: {spec: " +
    "{restartPolicy: Never, containers: [{name: c, image: busybox}]}}}",
  "test",
);

/** `count` targets n00.. with the waves of `spec`, as run/plan.ts gives them. */
function waved(count: number, spec: string): Target[] {
  const ts = Array.from({ length: count }, (_, i) => {
    const node = { name: `n${String(i).padStart(2, "0")}`, uid: `uid-${i}` };
    const job = () =>
      instantiateJob({ template: TEMPLATE, node, prefix: "up", namespace: "ns", keys: KEYS });
    return { node, name: job().metadata!.name!, job };
  });
  const counts = resolveWaves(parseWaves(spec), ts.length);
  return withWaves(ts, counts, (t, wave) => ({ ...t, wave }));
}

function engine(
  clock: FakeClock,
  api: FakeJobApi,
  targets: Target[],
  extra: Record<string, unknown>,
  progress: Progress[] = [],
) {
  return runOn(
    clock,
    dispatch({
      targets,
      parallelism: 5,
      run: { keys: KEYS, prefix: "up" },
      api,
      reporter: { event: () => {}, progress: (p) => progress.push(p) },
      signal: new AbortController().signal,
      clock,
      progressIntervalMs: 250,
      ...extra,
    }),
  );
}

function fake(clock: FakeClock, opts: Partial<ConstructorParameters<typeof FakeJobApi>[0]> = {}) {
  return new FakeJobApi({ ownerLabel: [KEYS.owner, labelValue("up")], clock, runMs: 100, ...opts });
}

Deno.test("dispatch() with waves 1,25%,100% starts no Job of a wave before the one before ended and soaked", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const progress: Progress[] = [];
  const report = await engine(clock, api, waved(12, "1,25%"), {
    waves: { soakMs: 1000 },
  }, progress);
  assert.ok(report.results.every((r) => r.outcome === "succeeded"));
  // Wave 1 (1 node) at 0, done at 100, soaked until 1100; wave 2 (2 nodes)
  // at 1100, done at 1200, soaked until 2200; wave 3 (9) at parallelism 5.
  assert.deepEqual(api.createdAt, [
    0,
    1100,
    1100,
    2200,
    2200,
    2200,
    2200,
    2200,
    2300,
    2300,
    2300,
    2300,
  ]);
  assert.deepEqual(report.results.map((r) => r.wave), [1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
  assert.deepEqual(report.waves, [
    {
      wave: 1,
      size: 1,
      openedAt: 0,
      endedAt: 100,
      soakEndsAt: 1100,
      soakEndedAt: 1100,
      soakFrom: 100,
      soakRestarts: [],
    },
    {
      wave: 2,
      size: 2,
      openedAt: 1100,
      endedAt: 1200,
      soakEndsAt: 2200,
      soakEndedAt: 2200,
      soakFrom: 1200,
      soakRestarts: [],
    },
    {
      wave: 3,
      size: 9,
      openedAt: 2200,
      endedAt: 2400,
      soakEndsAt: undefined,
      soakEndedAt: undefined,
    },
  ]);
  const soaking = progress.find((p) => p.wave?.stage === "soaking");
  assert.equal(soaking?.wave?.wave, 1, "the progress says the wave soaks");
  assert.ok(soaking!.wave!.soakLeftMs! > 0 && soaking!.wave!.soakLeftMs! <= 1000);
});

Deno.test("dispatch() with waves: without a budget the first failure stops the next wave", async () => {
  const clock = new FakeClock();
  const api = fake(clock, { failing: new Set(["n01"]) });
  const report = await engine(clock, api, waved(8, "1,50%"), { waves: {} });
  assert.equal(report.stoppedBy, "wave 2 of 3 failed on n01");
  assert.deepEqual(api.created.length, 4, "wave 2 (n01..n03) ran, wave 3 never started");
  assert.deepEqual(
    report.results.slice(4).map((r) => r.outcome),
    ["notStarted", "notStarted", "notStarted", "notStarted"],
  );
});

Deno.test("dispatch() with waves and a failure budget: a failure counts there and the next wave goes on", async () => {
  const clock = new FakeClock();
  const api = fake(clock, { failing: new Set(["n00"]) });
  const report = await engine(clock, api, waved(6, "1,50%"), { waves: {}, maxFailures: 1 });
  assert.equal(report.stoppedBy, undefined);
  assert.equal(api.created.length, 6);
  assert.deepEqual(report.results.map((r) => r.outcome), [
    "failed",
    ...Array(5).fill("succeeded"),
  ]);
});

Deno.test("dispatch() holds the next wave until holdAfterWave resolves; a string stops the rollout", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const ends: WaveEnd[] = [];
  const report = await engine(clock, api, waved(4, "1,2"), {
    waves: {
      soakMs: 500,
      holdAfterWave: async (end: WaveEnd) => {
        ends.push(end);
        // The gate checks through the soak and once more at its end.
        await clock.sleep(end.soakEndsAt - clock.now() + 2000);
        return end.wave === 2 ? "a health gate breached: up == 0" : undefined;
      },
    },
  });
  assert.deepEqual(ends.map((e) => [e.wave, e.waves, e.soakEndsAt]), [[1, 3, 600], [2, 3, 3200]]);
  // Wave 2 opens when the hold after wave 1 resolved (2600), not at the soak's end (600).
  assert.deepEqual(api.createdAt, [0, 2600]);
  assert.equal(report.stoppedBy, "a health gate breached: up == 0");
  assert.deepEqual(report.results.map((r) => r.outcome), [
    "succeeded",
    "succeeded",
    "notStarted",
    "notStarted",
  ]);
});

/** `job` as an earlier run left it: Complete, `completionTime` at clock ms `at` (whole seconds). */
function completed(job: ReturnType<Target["job"]>, at: number) {
  const when = new Date(at).toISOString().replace(/\.\d+Z$/, "Z");
  return {
    ...job,
    status: {
      completionTime: when as unknown as Date,
      conditions: [{
        type: "Complete",
        status: "True",
        lastTransitionTime: when as unknown as Date,
      }],
    },
  };
}

Deno.test("dispatch() with waves: a re-run soaks what is left of a wave's soak since its last Job completed", async (t) => {
  // [case, completionTime of wave 1's Job (clock ms; the clock starts at 0), creates]
  const cases: [string, number | undefined, number[]][] = [
    // Completed at -2 s (that whole second ends at -1 s): 4 s of the 5 s soak are left.
    ["2 s into the soak: the rest of it", -2000, [4000, 9100]],
    ["longer ago than the soak: wave 2 at once", -10_000, [0, 5100]],
    // The API server's clock ahead of this one: never more than the soak from now.
    ["a completion after now: at most the whole soak", 60_000, [5000, 10_100]],
    // No time to count from (a Job without completionTime): the whole soak.
    ["no completion time known: the whole soak", undefined, [5000, 10_100]],
  ];
  for (const [name, at, want] of cases) {
    await t.step(name, async () => {
      const clock = new FakeClock();
      const api = fake(clock);
      const targets = waved(3, "1,2");
      const job = targets[0].job();
      if (at === undefined) api.seed(job, "Complete");
      else api.seed(completed(job, at));
      const report = await engine(clock, api, targets, { waves: { soakMs: 5000 } });
      assert.ok(report.results.every((r) => r.outcome === "succeeded"));
      assert.deepEqual(api.createdAt, want);
    });
  }
});

Deno.test("dispatch() with waves: a re-run that does a counted node's post-success work (verification, uncordon) soaks from its end, not from the Job's completion", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const targets = waved(3, "1,2");
  // The earlier run was killed during n00's post-success work, 10 s after
  // its Job completed (a verification, a cordon not yet lifted): the node
  // comes back into service only when this run's post-success work ends.
  api.seed(completed(targets[0].job(), -10_000));
  const afterSuccess = async (t: Target) => {
    if (t.node.name === "n00") await clock.sleep(3000);
    return undefined;
  };
  const report = await engine(clock, api, targets, { waves: { soakMs: 5000 }, afterSuccess });
  assert.ok(report.results.every((r) => r.outcome === "succeeded"));
  // n00 ends at 3000, when its post-success work did: a whole soak from then.
  assert.ok(api.createdAt[0] >= 8000, `wave 2 opened at ${api.createdAt[0]}, before 8000`);
  assert.equal(report.waves![0].soakFrom, 3000);
});

Deno.test("dispatch() with waves: a re-run whose clock is ahead of the API server's soaks what is left by the API server's clock", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const targets = waved(3, "1,2");
  // This clock reads 0 where the API server's reads -30 s (a bastion 30 s
  // ahead): wave 1's Job completed 2 s ago by the API server's clock.
  api.seed(completed(targets[0].job(), -32_000));
  const report = await engine(clock, api, targets, {
    waves: { soakMs: 5000, serverClockOffsetMs: () => -30_000 },
  });
  assert.ok(report.results.every((r) => r.outcome === "succeeded"));
  // Completed in the second ending at -31 s server time, -1 s here: 4 s left.
  assert.equal(api.createdAt[0], 4000, `wave 2 opened at ${api.createdAt[0]}`);
});

/** A health gate as the soak sees it: its watch at each clock time, from `at`. */
function gateOf(clock: FakeClock, at: (now: number) => GateWatch): SoakGate {
  return { watch: () => at(clock.now()) };
}

Deno.test("dispatch() with waves restarts the soak after a gate break inside it, and reports it", async (t) => {
  const breach = 'health gate breached: query "up == 0" returned 0';
  const down = "health gate: Prometheus http://prom:9090 unreachable";
  // Wave 1 (n00) ends at 100; its soak of 1000 would end at 1100.
  const cases: [string, (now: number) => GateWatch, number, { at: number; after: string }[]][] = [
    ["clean throughout: the soak as it was", () => ({ clean: true, since: -Infinity }), 1100, []],
    [
      "a breach latched and lifted inside it (600 to 800): 1000 more from 800",
      (now) =>
        now < 600
          ? { clean: true, since: -Infinity }
          : now < 800
          ? { clean: false, why: breach }
          : { clean: true, since: 800, after: breach },
      1800,
      [{ at: 800, after: breach }],
    ],
    [
      "Prometheus down for the whole soak, back at 1500: not at the first clean answer",
      (now) => now < 1500 ? { clean: false, why: down } : { clean: true, since: 1500, after: down },
      2500,
      [{ at: 1500, after: down }],
    ],
    [
      "a break that ended before the wave did: no restart",
      () => ({ clean: true, since: 50, after: down }),
      1100,
      [],
    ],
  ];
  for (const [name, watch, opens, restarts] of cases) {
    await t.step(name, async () => {
      const clock = new FakeClock();
      const api = fake(clock);
      const progress: Progress[] = [];
      const report = await engine(clock, api, waved(2, "1"), {
        waves: { soakMs: 1000, soakGate: gateOf(clock, watch) },
      }, progress);
      if (watch(1100).clean === false) {
        assert.ok(
          progress.some((p) => p.wave?.stage === "holding" && p.wave.soakInterrupted),
          "the progress says the soak is interrupted",
        );
      }
      assert.ok(report.results.every((r) => r.outcome === "succeeded"));
      // The loop looks again at least every progress interval (250 ms here)
      // while the gate is not clean: wave 2 opens within that of `opens`.
      assert.equal(api.createdAt.length, 2);
      assert.ok(
        api.createdAt[1] >= opens && api.createdAt[1] < opens + 250,
        `wave 2 opened at ${api.createdAt[1]}, not at ${opens}`,
      );
      const w = report.waves![0];
      assert.equal(w.soakEndsAt, opens);
      assert.deepEqual(w.soakRestarts ?? [], restarts);
    });
  }
});

Deno.test("dispatch() with a canary: a canary node that got no Job stops the rest, even within a budget, and counts there", async (t) => {
  // [case, extra options, the stop's reason]
  const cases: [string, Record<string, unknown>, RegExp][] = [
    [
      "still blocked at --blocked-timeout-secs",
      {
        blockers: (tg: Target) =>
          Promise.resolve(tg.node.name === "n00" ? "pod a/db-0" : undefined),
        blockedTimeoutMs: 1000,
      },
      /^the canary got no Job on n00: still blocked after 1 s: pod a\/db-0$/,
    ],
    [
      "skipped by the re-check before its start",
      {
        recheck: (tg: Target) =>
          Promise.resolve(tg.node.name === "n00" ? "node n00 is gone" : undefined),
      },
      /^the canary got no Job on n00: node n00 is gone$/,
    ],
    [
      "its drain timed out before its Job",
      {
        prepare: (tg: Target) =>
          Promise.resolve(
            tg.node.name === "n00"
              ? "drain timed out after 60 s: pod a/web-0 not evicted"
              : undefined,
          ),
        release: () => Promise.resolve(),
      },
      /^the canary got no Job on n00: drain timed out after 60 s: pod a\/web-0 not evicted$/,
    ],
  ];
  for (const [name, extra, want] of cases) {
    await t.step(name, async () => {
      const clock = new FakeClock();
      const api = fake(clock);
      const targets = waved(4, "1");
      const report = await engine(clock, api, targets, {
        waves: { canary: true },
        maxFailures: 5,
        ...extra,
      });
      assert.match(report.stoppedBy ?? "", want);
      assert.equal(api.created.length, 0, "nothing after the canary");
      assert.deepEqual(report.results.slice(1).map((r) => r.outcome), [
        "notStarted",
        "notStarted",
        "notStarted",
      ]);
    });
  }
});

Deno.test("dispatch(): a node still blocked at its timeout counts against --max-failures", async () => {
  const clock = new FakeClock();
  // n00 ends blocked at its first re-check (5 s) while n03 still waits for a slot.
  const api = fake(clock, { runMs: 3000 });
  const targets = waved(4, "100%");
  const report = await engine(clock, api, targets, {
    parallelism: 1,
    maxFailures: 0,
    blockers: (tg: Target) => Promise.resolve(tg.node.name === "n00" ? "pod a/db-0" : undefined),
    blockedTimeoutMs: 1000,
  });
  assert.match(report.stoppedBy ?? "", /^the failure budget of 0 was exceeded/);
  assert.equal(report.results[0].outcome, "blocked");
  assert.ok(
    report.results.some((r) => r.outcome === "notStarted"),
    "the run stopped starting nodes once the blocked node counted",
  );
});

Deno.test("dispatch() with waves says 1 node, not 1 nodes, when a wave has one node", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const said: string[] = [];
  await runOn(
    clock,
    dispatch({
      targets: waved(3, "1,2"),
      parallelism: 5,
      run: { keys: KEYS, prefix: "up" },
      api,
      reporter: { event: (e) => e.kind === "wave" && said.push(e.message), progress: () => {} },
      signal: new AbortController().signal,
      clock,
      waves: { soakMs: 0 },
    }),
  );
  assert.ok(said.some((m) => m.startsWith("wave 1 of 3 ended (1 node)")), said.join("\n"));
  assert.ok(said.some((m) => m === "wave 2 of 3 opens: 1 node"), said.join("\n"));
  assert.ok(said.every((m) => !/\b1 nodes\b/.test(m)), said.join("\n"));
});
