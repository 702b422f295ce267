import assert from "node:assert/strict";
import { dispatch, type Progress, type Target } from "./fanout.ts";
import type { WaveEnd } from "./fanout_types.ts";
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
    { wave: 1, size: 1, openedAt: 0, endedAt: 100, soakEndsAt: 1100, soakEndedAt: 1100 },
    { wave: 2, size: 2, openedAt: 1100, endedAt: 1200, soakEndsAt: 2200, soakEndedAt: 2200 },
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

Deno.test("dispatch() with waves soaks no wave whose nodes were all counted from an earlier run", async () => {
  const clock = new FakeClock();
  const api = fake(clock);
  const targets = waved(3, "1,2");
  // n00's Job succeeded in an earlier run.
  api.seed(targets[0].job(), "Complete");
  const report = await engine(clock, api, targets, { waves: { soakMs: 5000 } });
  assert.ok(report.results.every((r) => r.outcome === "succeeded"));
  // Wave 2 starts at once (nothing changed in wave 1), wave 3 after wave 2's soak.
  assert.deepEqual(api.createdAt, [0, 5100]);
});
