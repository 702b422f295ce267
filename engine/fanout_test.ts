import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import {
  dispatch,
  type DispatchEvent,
  type FanoutOptions,
  type Progress,
  type Target,
} from "./fanout.ts";
import {
  instantiateJob,
  type JobTemplate,
  labelValue,
  parseJobTemplate,
  trackingKeys,
} from "../job.ts";
import { ApiError } from "../kube/client.ts";
import { FakeClock, FakeJobApi, runOn } from "../testing/fake_api.ts";
import { unschedulablePod } from "../testing/pods.ts";

/** The ApiError the client throws for `verb resource` answered `status reason: message`. */
function apiError(
  status: number,
  reason: string,
  verb: string,
  resource: string,
  message: string,
): ApiError {
  return new ApiError({ status, reason, verb, resource, message });
}

const KEYS = trackingKeys("job-dispatcher");
const PREFIX = "up";
const OWNER = { name: "owner", uid: "owner-uid" };
const TEMPLATE: JobTemplate = parseJobTemplate(
  `apiVersion: batch/v1
kind: Job
metadata: {name: up}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
`,
  "test",
);

function targets(n: number, owner: typeof OWNER | undefined = OWNER, hash?: string): Target[] {
  return Array.from({ length: n }, (_, i) => {
    const node = { name: `node-${String(i).padStart(3, "0")}`, uid: `node-uid-${i}` };
    const job = instantiateJob({
      template: TEMPLATE,
      node,
      prefix: PREFIX,
      namespace: "ns",
      keys: KEYS,
      owner,
      templateHash: hash,
    });
    return { node, name: job.metadata!.name!, job: () => structuredClone(job) };
  });
}

interface Harness {
  clock: FakeClock;
  api: FakeJobApi;
  events: DispatchEvent[];
  stop: AbortController;
}

function harness(extra: Partial<ConstructorParameters<typeof FakeJobApi>[0]> = {}): Harness {
  const clock = new FakeClock();
  const api = new FakeJobApi({ ownerLabel: [KEYS.owner, labelValue(PREFIX)], clock, ...extra });
  return { clock, api, events: [], stop: new AbortController() };
}

function report(
  h: Harness,
  ts: Target[],
  opts: Partial<FanoutOptions> = {},
  progress: Progress[] = [],
) {
  return runOn(
    h.clock,
    dispatch({
      targets: ts,
      parallelism: 3,
      run: { keys: KEYS, prefix: PREFIX, owner: OWNER },
      api: h.api,
      reporter: { event: (e) => h.events.push(e), progress: (p) => progress.push(p) },
      signal: h.stop.signal,
      clock: h.clock,
      pollIntervalMs: 5_000,
      ...opts,
    }),
  );
}

async function run(h: Harness, ts: Target[], opts: Partial<FanoutOptions> = {}) {
  return (await report(h, ts, opts)).results;
}

function kinds(h: Harness, kind: DispatchEvent["kind"]): DispatchEvent[] {
  return h.events.filter((e) => e.kind === kind);
}

/** Seeds a running Job of `name` made by an earlier owner: stale to the run. */
function seedStale(h: Harness, name: string): V1Job {
  const [stale] = targets(1, { name: "old-owner", uid: "old-uid" });
  return h.api.seed({ ...stale.job(), metadata: { ...stale.job().metadata, name } });
}

Deno.test("dispatch() keeps at most parallelism Jobs in flight and runs every node once", async () => {
  const h = harness({ runMs: 1000 });
  const results = await run(h, targets(10), { parallelism: 3 });
  assert.equal(h.api.maxActive, 3);
  assert.equal(h.api.created.length, 10);
  assert.equal(new Set(h.api.created).size, 10);
  assert.ok(results.every((r) => r.outcome === "succeeded"));
});

Deno.test("dispatch() refills a slot the moment a Job finishes", async () => {
  const h = harness({ runMs: 1000 });
  await run(h, targets(7), { parallelism: 3 });
  // ⌈7/3⌉ waves of 1 s each: every create happens at the instant a slot frees,
  // never at a later poll tick.
  assert.deepEqual(h.api.createdAt, [0, 0, 0, 1000, 1000, 1000, 2000]);
});

Deno.test("dispatch() reports failed Jobs with their reason and goes on with the others", async () => {
  const h = harness({ runMs: 500, failing: new Set(["node-001"]) });
  const results = await run(h, targets(4));
  const failed = results.filter((r) => r.outcome === "failed");
  assert.deepEqual(failed.map((r) => r.node), ["node-001"]);
  assert.match(failed[0].reason!, /BackoffLimitExceeded/);
  assert.equal(results.filter((r) => r.outcome === "succeeded").length, 3);
});

Deno.test("dispatch() counts finished Jobs of this owner, adopts running ones, replaces stale ones", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(5);
  h.api.seed(ts[0].job(), "Complete"); // done earlier for this owner: counted
  h.api.seed(ts[1].job(), "Failed"); // failed earlier for this owner: counted, not rerun
  const adopted = h.api.seed(ts[2].job()); // running for this owner: adopted
  const [stale] = targets(1, { name: "old-owner", uid: "old-uid" });
  h.api.seed({
    ...stale.job(),
    metadata: { ...stale.job().metadata, name: ts[3].job().metadata!.name },
  }, "Complete");
  const notOurs: V1Job = structuredClone(ts[4].job());
  delete notOurs.metadata!.labels![KEYS.owner];
  h.api.seed(notOurs);

  const promise = run(h, ts);
  // Let the adopted Job finish a little later.
  h.clock.sleep(700).then(() => h.api.finish(adopted.metadata!.name!, "Complete"));
  const results = await promise;

  const byNode = Object.fromEntries(results.map((r) => [r.node, r]));
  assert.equal(byNode["node-000"].outcome, "succeeded");
  assert.equal(byNode["node-001"].outcome, "failed");
  assert.equal(byNode["node-002"].outcome, "succeeded");
  assert.equal(byNode["node-003"].outcome, "succeeded");
  assert.equal(byNode["node-004"].outcome, "failed");
  assert.match(byNode["node-004"].reason!, /not ours/);
  assert.deepEqual(h.api.created, ["up-node-003"], "only the stale node's Job is created again");
  assert.deepEqual(kinds(h, "adopted").map((e) => "node" in e && e.node), ["node-002"]);
  assert.deepEqual(kinds(h, "replaced").map((e) => "node" in e && e.node), ["node-003"]);
  // The Job that is not ours is left as it was.
  assert.equal(h.api.jobs.get("up-node-004")?.metadata?.labels?.[KEYS.owner], undefined);
});

Deno.test("dispatch() deletes finished leftovers of an earlier owner without holding a slot", async () => {
  const h = harness({ runMs: 1000 });
  const [leftover] = targets(1, { name: "old", uid: "old-uid" });
  for (let i = 0; i < 5; i++) {
    const left = leftover.job();
    left.metadata!.name = `up-gone-node-${i}`;
    left.metadata!.uid = `gone-uid-${i}`;
    h.api.seed(left, "Complete");
  }
  await run(h, targets(2), { parallelism: 2 });
  for (let i = 0; i < 5; i++) {
    assert.equal(h.api.jobs.has(`up-gone-node-${i}`), false, `leftover ${i} was deleted`);
  }
  // Their pods have ended, so they load no node: both Jobs start at once,
  // beside the five deletions, instead of after them.
  assert.deepEqual(h.api.createdAt, [0, 0]);
});

Deno.test("dispatch() deletes a suspended leftover, which runs nothing and never finishes", async () => {
  const h = harness({ runMs: 1000 });
  const [leftover] = targets(1, { name: "old", uid: "old-uid" });
  const left = leftover.job();
  left.metadata!.name = "up-gone-node";
  left.spec!.suspend = true;
  h.api.seed(left);
  await run(h, targets(1), { parallelism: 1 });
  assert.equal(h.api.jobs.has("up-gone-node"), false, "the suspended leftover was deleted");
  assert.deepEqual(h.api.createdAt, [0]);
});

Deno.test("dispatch() never deletes a stale Job that still runs: the node waits, holding its slot", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(3);
  const running = seedStale(h, ts[0].name);
  const promise = run(h, ts, { parallelism: 2 });
  h.clock.sleep(5_000).then(() => h.api.finish(running.metadata!.name!, "Complete"));
  const results = await promise;
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  assert.equal(kinds(h, "waiting").length, 1);
  // One slot held by the stale Job: the others ran one at a time meanwhile.
  assert.deepEqual(h.api.created, ["up-node-001", "up-node-002", "up-node-000"]);
  assert.deepEqual(h.api.createdAt, [0, 1000, 5100]);
  assert.deepEqual(kinds(h, "replaced").map((e) => "node" in e && e.node), ["node-000"]);
});

Deno.test("dispatch() deletes a stale Job only once it is Complete, not at SuccessCriteriaMet", async () => {
  // The Job controller sets SuccessCriteriaMet first and Complete once the
  // pod is gone and its finalizer removed; a deletion in between is a Job
  // deleted before it finished, for any watcher.
  const h = harness({ runMs: 1000 });
  const ts = targets(1);
  const running = seedStale(h, ts[0].name);
  const name = running.metadata!.name!;
  const promise = run(h, ts, { parallelism: 1 });
  h.clock.sleep(2_000).then(() => h.api.meetCriteria(name));
  h.clock.sleep(5_000).then(() => h.api.finish(name, "Complete"));
  const results = await promise;
  assert.deepEqual(results.map((r) => r.outcome), ["succeeded"]);
  assert.deepEqual(h.api.removedWith.get(name), ["SuccessCriteriaMet", "Complete"]);
  assert.ok(h.api.createdAt[0] >= 5_000, `created at ${h.api.createdAt[0]} ms, before Complete`);
});

Deno.test("dispatch() fails, never waits forever for, a stale Job whose decided outcome never turns final", async () => {
  // FailureTarget set, its pod deleted but stuck terminating on an unreachable
  // node: the Job controller sets Failed only once status.terminating is 0,
  // which never comes until the node returns or is deleted (PodGC).
  const h = harness({ runMs: 1000 });
  const ts = targets(2);
  const stuck = seedStale(h, ts[0].name);
  stuck.status = {
    terminating: 1,
    conditions: [{ type: "FailureTarget", status: "True", reason: "BackoffLimitExceeded" }],
  };
  h.clock.sleep(3_600_000).then(() => h.stop.abort());
  const results = await run(h, ts, { parallelism: 1, staleDeleteDeadlineMs: 120_000 });
  assert.ok(h.clock.now() < 3_600_000, `the run still waited at ${h.clock.now()} ms`);
  assert.equal(results[0].outcome, "failed");
  assert.match(results[0].reason!, /FailureTarget.*not Failed within 120 s/);
  assert.equal(results[1].outcome, "succeeded");
  assert.equal(h.api.calls.delete ?? 0, 0, "the stale Job is left, never deleted unfinished");
});

Deno.test("dispatch() gives up on a leftover whose decided outcome never turns final, and ends", async () => {
  // A leftover waits holding a slot and no node timeout covers it.
  const h = harness({ runMs: 1000 });
  const [leftover] = targets(1, { name: "old", uid: "old-uid" });
  const left = leftover.job();
  left.metadata!.name = "up-gone-node";
  const stuck = h.api.seed(left);
  stuck.status = { terminating: 1, conditions: [{ type: "FailureTarget", status: "True" }] };
  h.clock.sleep(3_600_000).then(() => h.stop.abort());
  const results = await run(h, targets(1), { parallelism: 1, nodeTimeoutMs: 600_000 });
  assert.ok(h.clock.now() < 3_600_000, `the run still waited at ${h.clock.now()} ms`);
  assert.deepEqual(results.map((r) => r.outcome), ["succeeded"]);
  assert.ok(h.api.jobs.has("up-gone-node"), "the leftover is left, never deleted unfinished");
  assert.ok(
    kinds(h, "notice").some((e) =>
      "message" in e && /up-gone-node has FailureTarget/.test(e.message)
    ),
  );
});

Deno.test("dispatch() fails a node whose stale Job a finalizer holds, naming it; the others go on", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(3);
  const [stale] = targets(1, { name: "old-owner", uid: "old-uid" });
  const held = h.api.seed({
    ...stale.job(),
    metadata: { ...stale.job().metadata, name: ts[0].name, finalizers: ["example.com/hold"] },
  }, "Complete");
  const results = await run(h, ts, { parallelism: 2, staleDeleteDeadlineMs: 120_000 });
  assert.equal(results[0].outcome, "failed");
  assert.match(results[0].reason!, /not gone within 120 s.*finalizers example\.com\/hold/);
  assert.equal(results[1].outcome, "succeeded");
  assert.equal(results[2].outcome, "succeeded");
  assert.ok(h.api.createdAt.every((t) => t < 5_000), "the stuck deletion blocked no other node");
  assert.equal(h.api.jobs.get(ts[0].name)?.metadata?.uid, held.metadata!.uid);
});

Deno.test("dispatch() records a Job its TTL deleted from the DELETED event's final state", async () => {
  const h = harness({ runMs: 1000, ttlZero: true });
  const results = await run(h, targets(3), { parallelism: 3 });
  assert.ok(results.every((r) => r.outcome === "succeeded"), JSON.stringify(results));
});

Deno.test("dispatch() reports a Job collected unseen as unknown, never as failed", async () => {
  const h = harness({ runMs: 1000, ttlZero: true });
  const progress: Progress[] = [];
  const promise = report(h, targets(2), { parallelism: 2, maxFailures: 0 }, progress);
  h.clock.sleep(10).then(() => {
    h.api.down = true;
    h.api.breakWatches();
  });
  h.clock.sleep(20_000).then(() => (h.api.down = false));
  const { results, stoppedBy } = await promise;
  assert.equal(stoppedBy, undefined, "no failure counted against the budget");
  assert.deepEqual(results.map((r) => r.outcome), ["unknown", "unknown"]);
  assert.match(results[0].reason!, /collected before its outcome was seen/);
});

Deno.test("dispatch() reads the outcome of a Job collected unseen from its pods", async () => {
  const h = harness({ runMs: 1000, ttlZero: true });
  h.api.listPods = () => Promise.resolve([{ status: { phase: "Succeeded" } }]);
  const promise = run(h, targets(1), { parallelism: 1 });
  h.clock.sleep(10).then(() => {
    h.api.down = true;
    h.api.breakWatches();
  });
  h.clock.sleep(20_000).then(() => (h.api.down = false));
  const results = await promise;
  assert.equal(results[0].outcome, "succeeded");
});

Deno.test("dispatch() ends when a running Job is deleted and re-created under its name during a watch gap", async () => {
  // No runMs: the Jobs never finish by themselves. The relist after the gap
  // shows the name with a new UID; before the fix the engine dropped it for
  // the UID and, with no delete of the old Job, the node stayed running.
  const h = harness();
  h.api.listPods = () => Promise.resolve([]);
  // Bounded: before the fix the run never ends, and the clock would tick on.
  const promise = runOn(
    h.clock,
    dispatch({
      targets: targets(2),
      parallelism: 2,
      run: { keys: KEYS, prefix: PREFIX, owner: OWNER },
      api: h.api,
      reporter: { event: (e) => h.events.push(e), progress: () => {} },
      signal: h.stop.signal,
      clock: h.clock,
      pollIntervalMs: 5_000,
    }),
    3_000,
  );
  let replaced: V1Job | undefined;
  h.clock.sleep(10).then(() => {
    h.api.down = true;
    h.api.breakWatches();
    h.api.finish("up-node-001", "Complete", true);
    replaced = h.api.replaceSilently("up-node-000");
  });
  h.clock.sleep(20_000).then(() => (h.api.down = false));
  const { results } = (await promise) ?? { results: [] };
  assert.equal(results.length, 2, "the run ended");
  const first = results.find((r) => r.node === "node-000")!;
  assert.equal(first.outcome, "unknown", JSON.stringify(first));
  assert.match(first.reason!, /collected before its outcome was seen/);
  assert.ok(replaced, "the Job was replaced");
  assert.equal(results.find((r) => r.node === "node-001")!.outcome, "succeeded");
  assert.deepEqual(h.api.created, ["up-node-000", "up-node-001"], "no second create for the node");
});

Deno.test("dispatch() re-lists after 410 Gone and misses no completion", async () => {
  const h = harness();
  const ts = targets(3);
  const promise = run(h, ts, { parallelism: 3 });
  h.clock.sleep(10).then(() => {
    // Completions whose events were compacted away, then the watch expires.
    for (const t of ts) h.api.finish(t.name, "Complete", true);
    h.api.expireWatches();
  });
  const results = await promise;
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  assert.ok(h.events.some((e) => e.kind === "watch" && e.state === "relisted"));
});

Deno.test("dispatch() falls back to one LIST per poll interval when watching is forbidden", async () => {
  const h = harness({ runMs: 1000, watchForbidden: true });
  const results = await run(h, targets(6), { parallelism: 3, pollIntervalMs: 5_000 });
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  assert.ok(h.events.some((e) => e.kind === "watch" && e.state === "polling"));
  assert.equal(h.api.calls.get ?? 0, 0, "never one GET per Job");
  // One initial LIST, then one per 5 s interval: two waves need two polls.
  assert.equal(h.api.calls.list, 3);
  assert.deepEqual(h.api.createdAt, [0, 0, 0, 5000, 5000, 5000]);
});

Deno.test("dispatch() fails a node whose Job is deleted before it finishes", async () => {
  const h = harness();
  const ts = targets(2);
  const promise = run(h, ts, { parallelism: 2 });
  h.clock.sleep(10).then(() => {
    h.api.remove("up-node-000");
    h.api.finish("up-node-001", "Complete");
  });
  const results = await promise;
  assert.equal(results[0].outcome, "failed");
  assert.match(results[0].reason!, /deleted before it finished/);
  assert.equal(results[1].outcome, "succeeded");
});

Deno.test("dispatch() creates nothing after the stop signal and reports what is left", async () => {
  const h = harness({ runMs: 1000 });
  h.clock.sleep(1500).then(() => h.stop.abort());
  const results = await run(h, targets(10), { parallelism: 2 });
  assert.deepEqual(h.api.createdAt, [0, 0, 1000, 1000]);
  const outcomes = results.map((r) => r.outcome);
  assert.equal(outcomes.filter((o) => o === "succeeded").length, 2);
  assert.equal(outcomes.filter((o) => o === "inFlight").length, 2);
  assert.equal(outcomes.filter((o) => o === "notStarted").length, 6);
});

Deno.test("dispatch() fails a node whose recheck says it changed, without creating its Job", async () => {
  const h = harness({ runMs: 100 });
  const results = await run(h, targets(3), {
    recheck: (t) =>
      Promise.resolve(t.node.name === "node-001" ? "the node was deleted" : undefined),
  });
  assert.equal(results[1].outcome, "failed");
  assert.equal(results[1].reason, "the node was deleted");
  assert.deepEqual(h.api.created, ["up-node-000", "up-node-002"]);
});

Deno.test("dispatch() adopts a Job of this owner that appeared between its LIST and its create", async () => {
  const h = harness({ runMs: 100 });
  const ts = targets(1);
  const api = h.api;
  const create = api.createJob.bind(api);
  // Another process created the same Job (same owner) just before us.
  api.createJob = (job) => {
    api.createJob = create;
    api.seed(job);
    return create(job);
  };
  const promise = run(h, ts);
  h.clock.sleep(50).then(() => api.finish("up-node-000", "Complete"));
  const results = await promise;
  assert.equal(results[0].outcome, "succeeded");
  assert.deepEqual(kinds(h, "adopted").length, 1);
});

Deno.test("dispatch() fails no node during a 5-minute outage: it pauses, says so, and resumes", async () => {
  const h = harness({ runMs: 1000 });
  const progress: Progress[] = [];
  const promise = report(h, targets(10), {
    parallelism: 2,
    progressIntervalMs: 10_000,
    progressOnChange: false,
  }, progress);
  h.clock.sleep(10).then(() => {
    h.api.down = true;
    h.api.breakWatches();
  });
  let atResume = 0;
  h.clock.sleep(300_000).then(() => {
    h.api.down = false;
    atResume = h.api.calls.list;
  });
  const { results } = await promise;
  assert.ok(results.every((r) => r.outcome === "succeeded"), JSON.stringify(results));
  assert.equal(h.api.created.length, 10, "one Job per node, none twice");
  const paused = kinds(h, "api").filter((e) => e.kind === "api" && e.state === "paused");
  const resumed = kinds(h, "api").filter((e) => e.kind === "api" && e.state === "resumed");
  assert.equal(paused.length, 1, JSON.stringify(h.events));
  assert.equal(resumed.length, 1);
  // Said within a minute, with the outage's length, never an ETA.
  const first = progress.find((p) => p.outage);
  assert.ok(first && first.elapsedMs <= 70_000, `first outage line at ${first?.elapsedMs}`);
  assert.ok(progress.filter((p) => p.outage).every((p) => p.outage!.paused));
  // Back on a watch within one watch retry (30 s) of the end: no polling for good.
  const lists = h.api.calls.list - atResume;
  assert.ok(lists <= 7, `${lists} LISTs after the outage`);
  assert.deepEqual(kinds(h, "watch").at(-1), {
    kind: "watch",
    state: "watching",
    detail: "a watch opened again; polling stopped",
  });
});

Deno.test("dispatch() goes back to a watch after polling through broken watches", async () => {
  const h = harness({ runMs: 200_000 });
  const promise = run(h, targets(2), { parallelism: 2 });
  for (const at of [10, 2_000, 6_000]) h.clock.sleep(at).then(() => h.api.breakWatches());
  h.clock.sleep(1).then(() => (h.api.down = true));
  h.clock.sleep(60_000).then(() => (h.api.down = false));
  const results = await promise;
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  const states = kinds(h, "watch").map((e) => e.kind === "watch" && e.state);
  assert.ok(states.includes("polling"), JSON.stringify(states));
  assert.equal(states.at(-1), "watching", JSON.stringify(states));
  // 200 s of running Jobs: polling for all of it would be 40 LISTs.
  assert.ok(h.api.calls.list < 20, `${h.api.calls.list} LISTs`);
});

Deno.test("dispatch() reports a Job whose pod stays Pending, with the pod's reason, and again later", async () => {
  const h = harness();
  const pending = unschedulablePod("0/1 nodes are available: 1 Insufficient cpu.");
  h.api.listPods = () => Promise.resolve([pending]);
  const promise = run(h, targets(1), { stallAfterMs: 120_000, stallRepeatMs: 300_000 });
  h.clock.sleep(700_000).then(() => h.api.finish("up-node-000", "Complete"));
  await promise;
  const stalls = h.events.filter((e) => e.kind === "stalled");
  // Reported at 2 min, then every 5 min: 120 s, 420 s.
  assert.equal(stalls.length, 2);
  assert.match(
    stalls[0].kind === "stalled" ? stalls[0].reason : "",
    /^Unschedulable: 0\/1 nodes are available: 1 Insufficient cpu\.$/,
  );
});

Deno.test("dispatch() says once that it cannot read pods and goes on", async () => {
  const h = harness();
  h.api.listPods = () =>
    Promise.reject(
      apiError(403, "Forbidden", "list", "pods", "forbidden"),
    );
  const promise = run(h, targets(1), {
    stallAfterMs: 1000,
    stallRepeatMs: 1000,
    progressIntervalMs: 1000,
  });
  h.clock.sleep(10_000).then(() => h.api.finish("up-node-000", "Complete"));
  const results = await promise;
  assert.equal(results[0].outcome, "succeeded");
  assert.equal(h.events.filter((e) => e.kind === "notice").length, 1);
});

Deno.test("dispatch() with pollOnly never watches and refills only at a poll", async () => {
  const h = harness({ runMs: 1000 });
  const results = await run(h, targets(4), {
    parallelism: 2,
    pollOnly: true,
    pollIntervalMs: 5_000,
  });
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  assert.equal(h.api.calls.watch ?? 0, 0);
  assert.deepEqual(h.api.createdAt, [0, 0, 5000, 5000]);
});

Deno.test("dispatch() fails a node whose re-read throws, with the reason, and goes on", async () => {
  const h = harness({ runMs: 100 });
  const results = await run(h, targets(3), {
    recheck: (t) =>
      t.node.name === "node-001"
        ? Promise.reject(
          apiError(400, "BadRequest", "list", "nodes", "bad field selector"),
        )
        : Promise.resolve(undefined),
  });
  assert.equal(results[1].outcome, "failed");
  assert.match(
    results[1].reason!,
    /^cannot re-read node node-001: Cannot list nodes: bad field selector$/,
  );
  assert.deepEqual(h.api.created, ["up-node-000", "up-node-002"]);
});

Deno.test("dispatch() stops new starts on a 403 mid-run rather than failing node after node", async () => {
  const h = harness({ runMs: 100 });
  const forbidden = apiError(403, "Forbidden", "patch", "nodes", 'nodes "node-001" is forbidden');
  const { results, stoppedBy } = await report(h, targets(4), {
    parallelism: 1,
    recheck: (t) =>
      t.node.name === "node-000" ? Promise.resolve(undefined) : Promise.reject(forbidden),
  });
  assert.deepEqual(results.map((r) => r.outcome), [
    "succeeded",
    "notStarted",
    "notStarted",
    "notStarted",
  ]);
  assert.match(stoppedBy ?? "", /refused .*forbidden.*RBAC/);
  assert.equal(kinds(h, "stopped").length, 1, "said once");
  assert.deepEqual(h.api.created, ["up-node-000"]);
});

Deno.test("dispatch() reports a Job whose create was already sent when the run was stopped", async () => {
  const h = harness();
  const create = h.api.createJob.bind(h.api);
  // The API server takes 50 ms to answer a create; the stop comes at 10 ms.
  h.api.createJob = async (job) => {
    await h.clock.sleep(50);
    return await create(job);
  };
  h.clock.sleep(10).then(() => h.stop.abort());
  const results = await run(h, targets(3), { parallelism: 1 });
  assert.deepEqual(h.api.created, ["up-node-000"]);
  assert.deepEqual(kinds(h, "created").map((e) => "job" in e && e.job), ["up-node-000"]);
  assert.deepEqual(results.map((r) => r.outcome), ["inFlight", "notStarted", "notStarted"]);
});

Deno.test("dispatch() holds a node's slot through its post-success work, then counts its verdict", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(4);
  const afterAt: Record<string, number> = {};
  const results = await run(h, ts, {
    parallelism: 2,
    afterSuccess: async (t) => {
      afterAt[t.node.name] = h.clock.now();
      // node-000 is slow to become Ready; node-001 is refused its label.
      await h.clock.sleep(t.node.name === "node-000" ? 3000 : 500);
      return t.node.name === "node-001" ? "the write was refused" : undefined;
    },
  });
  // node-000's slot stays taken until its work ends at 4000; node-001's frees
  // at 1500, so node-002 starts then, and node-003 when node-002's slot frees.
  assert.deepEqual(h.api.createdAt, [0, 0, 1500, 3000]);
  assert.deepEqual(afterAt, {
    "node-000": 1000,
    "node-001": 1000,
    "node-002": 2500,
    "node-003": 4000,
  });
  const byNode = Object.fromEntries(results.map((r) => [r.node, r]));
  assert.equal(byNode["node-000"].outcome, "succeeded");
  assert.equal(byNode["node-001"].outcome, "failed");
  assert.equal(byNode["node-001"].reason, "the write was refused");
  assert.equal(byNode["node-003"].finishedAt, 4500);
  // The "succeeded" event comes after the work, so the summary and the records agree.
  assert.deepEqual(kinds(h, "succeeded").map((e) => "node" in e && e.node), [
    "node-002",
    "node-000",
    "node-003",
  ]);
});

Deno.test("dispatch() runs the post-success work for successes an earlier run counted", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(2);
  h.api.seed(ts[0].job(), "Complete");
  const seen: string[] = [];
  const results = await run(h, ts, {
    afterSuccess: (t) => {
      seen.push(t.node.name);
      return Promise.resolve(undefined);
    },
  });
  assert.deepEqual(seen.sort(), ["node-000", "node-001"]);
  assert.ok(results.every((r) => r.outcome === "succeeded"));
});

Deno.test("dispatch() counts, never creates again, a node whose success an earlier run kept on it before its post-success work, once the Job's TTL removed it", async (t) => {
  // The earlier run saw node-000's Job succeed, kept that on the node, and
  // was killed during its post-success work; the TTL then collected the Job.
  const cases: { name: string; seed?: "deleting" }[] = [
    { name: "the Job is gone" },
    { name: "the Job is being deleted by its TTL", seed: "deleting" },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const h = harness({ runMs: 1000 });
      const ts = targets(2);
      Object.assign(ts[0], { keptSuccess: true });
      if (c.seed) {
        const job = h.api.seed(ts[0].job(), "Complete");
        job.metadata!.deletionTimestamp = new Date(0);
        job.metadata!.finalizers = ["foregroundDeletion"];
      }
      const seen: string[] = [];
      const { results } = await report(h, ts, {
        afterSuccess: (t) => {
          seen.push(t.node.name);
          return Promise.resolve(undefined);
        },
      });
      assert.deepEqual(h.api.created, [ts[1].name], "no second Job for node-000");
      assert.deepEqual(seen.sort(), ["node-000", "node-001"], "its post-success work ran");
      assert.equal(results[0].outcome, "succeeded");
      assert.ok(
        kinds(h, "succeeded").some((e) =>
          e.kind === "succeeded" && e.node === "node-000" && e.counted
        ),
      );
    });
  }
});

Deno.test("dispatch() tells the post-success work of a kept success the end its mark kept, not the re-run's now", async () => {
  // Verification judges validator pods against the Job's end: "now" would
  // reject a pod that turned Ready between the Job's end and the re-run.
  const h = harness({ runMs: 1000 });
  const ts = targets(1);
  const ended = -42_000;
  Object.assign(ts[0], { keptSuccess: true, keptEndedAt: ended });
  const told: number[] = [];
  await run(h, ts, {
    afterSuccess: (_t, jobEndedAt) => {
      told.push(jobEndedAt);
      return Promise.resolve(undefined);
    },
  });
  assert.deepEqual(h.api.created, [], "no Job created");
  assert.deepEqual(told, [ended]);
});

Deno.test("dispatch() leaves a node in flight when the run stops during its post-success work", async () => {
  const h = harness({ runMs: 1000 });
  const stop = h.stop;
  const results = await run(h, targets(1), {
    afterSuccess: async () => {
      stop.abort();
      await h.clock.sleep(10);
      return "stopped";
    },
  });
  assert.equal(results[0].outcome, "inFlight");
});

Deno.test("dispatch() pauses while Job creates are refused and reads work, naming the error once", async () => {
  const h = harness({ runMs: 1000 });
  const webhook = 'Internal error occurred: failed calling webhook "deny.example.com": ' +
    "connection refused";
  h.api.refuseCreates = webhook;
  const progress: Progress[] = [];
  const promise = report(h, targets(6), { parallelism: 3 }, progress);
  h.clock.sleep(120_000).then(() => (h.api.refuseCreates = undefined));
  const { results } = await promise;
  assert.ok(results.every((r) => r.outcome === "succeeded"), JSON.stringify(results));
  const api = kinds(h, "api");
  assert.equal(api.length, 2, JSON.stringify(api));
  assert.deepEqual(api[0], {
    kind: "api",
    state: "paused",
    detail: `Cannot create jobs: ${webhook}`,
  });
  assert.equal(api[1].kind === "api" && api[1].state, "resumed");
  // Paused: one probe every 5 s, not a create per node per retry (the first
  // three were sent together, before the first answer).
  assert.ok(h.api.calls.create <= 3 + 120 / 5 + 6, `${h.api.calls.create} creates`);
  const during = progress.filter((p) => p.outage);
  assert.ok(during.length > 0 && during.every((p) => p.outage!.word === "failing"));
});

Deno.test("dispatch() without an owner replaces Jobs of another template and counts its own", async () => {
  const h = harness({ runMs: 1000 });
  const run1 = { keys: KEYS, prefix: PREFIX, templateHash: "hash-1" };
  await report(h, targets(3, undefined, "hash-1"), { run: run1 });
  assert.equal(h.api.created.length, 3);
  // The same template again: nothing created.
  const again = await report(h, targets(3, undefined, "hash-1"), { run: run1 });
  assert.equal(h.api.created.length, 3);
  assert.ok(again.results.every((r) => r.outcome === "succeeded"));
  // Another template: every node runs once more.
  const run2 = { keys: KEYS, prefix: PREFIX, templateHash: "hash-2" };
  const changed = await report(h, targets(3, undefined, "hash-2"), { run: run2 });
  assert.equal(h.api.created.length, 6);
  assert.ok(changed.results.every((r) => r.outcome === "succeeded"));
  assert.equal(kinds(h, "replaced").length, 3);
});

Deno.test("dispatch() frees a slot on SuccessCriteriaMet but starts post-success work only on Complete", async () => {
  const h = harness();
  const ts = targets(1);
  let afterAt: number | undefined;
  const promise = run(h, ts, {
    parallelism: 1,
    afterSuccess: () => {
      afterAt = h.clock.now();
      return Promise.resolve(undefined);
    },
  });
  h.clock.sleep(1_000).then(() => h.api.meetCriteria(ts[0].name));
  h.clock.sleep(4_000).then(() => h.api.finish(ts[0].name, "Complete"));
  const results = await promise;
  assert.equal(results[0].outcome, "succeeded");
  assert.equal(afterAt, 4_000);
});

Deno.test("dispatch() keeps a success through a post-success outage and never runs its Job twice", async () => {
  // ttlSecondsAfterFinished: 0: the Job is gone the moment it finished, so
  // nothing but the node's own state remembers the success.
  const h = harness({ runMs: 1000, ttlZero: true });
  const calls = new Map<string, number>();
  const progress: Progress[] = [];
  const ts = targets(2);
  const started = ts.map((t) => t.name);
  const { results } = await report(h, ts, {
    parallelism: 2,
    // A webhook down 15 s, within the node timeout: retried, never failed.
    nodeTimeoutMs: 60_000,
    afterSuccess: (t) => {
      const n = (calls.get(t.node.name) ?? 0) + 1;
      calls.set(t.node.name, n);
      if (n > 3) return Promise.resolve(undefined);
      return Promise.reject(
        apiError(
          500,
          "InternalError",
          "patch",
          "nodes",
          'failed calling webhook "deny.example": connection refused',
        ),
      );
    },
  }, progress);
  assert.deepEqual(h.api.created, started, "one Job per node, never a second");
  assert.ok(results.every((r) => r.outcome === "succeeded"), JSON.stringify(results));
  assert.deepEqual([...calls.values()], [4, 4], "only the post-success work was retried");
  const waits = progress.flatMap((p) => p.waits ?? []);
  assert.ok(
    waits.some((w) => /^node node-000: post-success work .*retrying: .*webhook/.test(w)),
    `the progress said what the node waits for: ${waits}`,
  );
  assert.ok(progress.every((p) => p.queued === 0 || p.elapsedMs === 0), "never requeued");
});

Deno.test("dispatch() runs a node's post-success work once when its Complete Job changes again meanwhile", async () => {
  // The TTL controller's foreground deletion, a label anyone sets: a Job
  // already Complete is MODIFIED again while its node's work runs.
  const h = harness({ runMs: 1000 });
  const calls: string[] = [];
  const results = await run(h, targets(1), {
    afterSuccess: async (t) => {
      calls.push(t.node.name);
      if (calls.length === 1) h.api.podFailed(t.name);
      await h.clock.sleep(3_000);
      return undefined;
    },
  });
  assert.deepEqual(calls, ["node-000"]);
  assert.equal(results[0].outcome, "succeeded");
});

Deno.test("dispatch() fails a node whose post-success write keeps failing while the run's other writes go through, after the node timeout; an unreachable API only pauses it", async (t) => {
  const webhookDown = () =>
    apiError(
      500,
      "InternalError",
      "patch",
      "nodes",
      'Internal error occurred: failed calling webhook "nodes.example.com": ' +
        "connection refused",
    );
  const unreachable = () => apiError(0, "Unreachable", "patch", "nodes", "connection refused");
  const cases = [
    {
      name: "a node webhook that never comes back: failed at the node timeout",
      error: webhookDown,
      outcome: "failed",
    },
    {
      name: "the API unreachable past the node timeout: paused, then done",
      error: unreachable,
      outcome: "succeeded",
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const h = harness({ runMs: 1000 });
      // node-002's Job is created, and its node written, after node-000's
      // writes began to fail: the API takes other writes.
      const ts = targets(3);
      let calls = 0;
      const { results } = await report(h, ts, {
        parallelism: 2,
        nodeTimeoutMs: 30_000,
        afterSuccess: (target) => {
          if (target.node.name !== "node-000") return Promise.resolve(undefined);
          calls++;
          // The unreachable API answers again after 2 minutes.
          if (c.outcome === "succeeded" && h.clock.now() > 120_000) {
            return Promise.resolve(undefined);
          }
          // Stops a run that would retry forever.
          if (h.clock.now() > 300_000) h.stop.abort();
          return Promise.reject(c.error());
        },
      });
      assert.equal(results[0].outcome, c.outcome, JSON.stringify(results[0]));
      assert.deepEqual(h.api.created, ts.map((x) => x.name), "never a second Job");
      assert.deepEqual(results.slice(1).map((r) => r.outcome), ["succeeded", "succeeded"]);
      if (c.outcome === "failed") {
        assert.match(
          results[0].reason!,
          /post-success work failed for 3\d s \(--node-timeout-secs 30\)/,
        );
        assert.match(results[0].reason!, /failed calling webhook "nodes\.example\.com"/);
        assert.ok(calls >= 6 && calls <= 9, `retried every 5 s until then: ${calls}`);
      }
    });
  }
});

Deno.test("dispatch() only pauses a finishing node while every write is refused with 5xx and reads answer (etcd down behind the API server's watch cache), however long", async () => {
  // The watch cache serves reads and watches (bookmarks, reconnects) while
  // every write waits for etcd and ends 500/504: the API answers, but
  // refuses the run's Job creates as much as this node's writes. That is
  // the outage the README waits for, not a node webhook of this node's.
  const h = harness({ runMs: 1000 });
  const ts = targets(3);
  const storage = "etcdserver: request timed out";
  // etcd is down from the first Job's end (1 s) for two minutes.
  const down = () => h.clock.now() >= 1000 && h.clock.now() < 120_000;
  Object.defineProperty(h.api, "refuseCreates", { get: () => down() ? storage : undefined });
  const { results } = await report(h, ts, {
    parallelism: 2,
    nodeTimeoutMs: 30_000,
    afterSuccess: () => {
      if (!down()) return Promise.resolve(undefined);
      return Promise.reject(
        apiError(500, "InternalError", "patch", "nodes", storage),
      );
    },
  });
  assert.deepEqual(
    results.map((r) => `${r.node} ${r.outcome} ${r.reason ?? ""}`.trim()),
    ts.map((t) => `${t.node.name} succeeded`),
  );
  assert.deepEqual(h.api.created, ts.map((t) => t.name), "never a second Job");
});

Deno.test("dispatch() says what a slow post-success work holds the slot for", async () => {
  const h = harness({ runMs: 1000 });
  const progress: Progress[] = [];
  await report(h, targets(1), {
    parallelism: 1,
    progressIntervalMs: 1000,
    // A node write the client retries for a while before it answers.
    afterSuccess: () => h.clock.sleep(8_000).then(() => undefined),
  }, progress);
  const waits = progress.flatMap((p) => p.waits ?? []);
  assert.ok(
    waits.some((w) => /^node node-000: post-success work \(.*\) under way for [5-8] s$/.test(w)),
    `${waits}`,
  );
});

Deno.test("dispatch() adopts a Job whose create answer was lost and never creates it twice", async () => {
  const h = harness({ runMs: 1000, ttlZero: true });
  h.api.loseCreateAnswers = 3;
  const ts = targets(3);
  const results = await run(h, ts, { parallelism: 3 });
  assert.deepEqual(h.api.created, ts.map((t) => t.name), "exactly one Job per node");
  assert.ok(results.every((r) => r.outcome === "succeeded"), JSON.stringify(results));
  assert.equal(kinds(h, "adopted").length, 3, "each lost create was adopted");
  assert.equal(h.api.calls.create, 3, "no create was sent again");
});

Deno.test("dispatch() adopts by identity a lost create's Job the watch shows finished and gone", async () => {
  // The Job runs 0 ms: by the read it is gone (TTL 0), and only the watch's
  // events of the unsure node's Job tell its outcome.
  const h = harness({ runMs: 0, ttlZero: true });
  h.api.loseCreateAnswers = 1;
  const ts = targets(1);
  const results = await run(h, ts, { parallelism: 1 });
  assert.deepEqual(h.api.created, [ts[0].name]);
  assert.equal(results[0].outcome, "succeeded", JSON.stringify(results));
});

Deno.test("dispatch() names the pod failures of a Job its backoffLimit retries", async () => {
  const h = harness();
  const ts = targets(1);
  const progress: Progress[] = [];
  h.api.listPods = () =>
    Promise.resolve([{
      metadata: { name: "p1" },
      status: {
        phase: "Failed",
        containerStatuses: [{
          name: "c",
          image: "busybox",
          imageID: "",
          ready: false,
          restartCount: 0,
          state: { terminated: { exitCode: 3, reason: "Error", message: "disk full" } },
        }],
      },
    }]);
  const done = report(h, ts, { parallelism: 1, progressIntervalMs: 1000 }, progress);
  h.clock.sleep(2_000).then(() => h.api.podFailed(ts[0].name));
  h.clock.sleep(4_000).then(() => h.api.podFailed(ts[0].name));
  h.clock.sleep(8_000).then(() => h.api.finish(ts[0].name, "Complete"));
  await done;
  const waits = progress.flatMap((p) => p.waits ?? []);
  assert.ok(waits.some((w) => /^node node-000: Job retrying, 1 pod failure\b/.test(w)), `${waits}`);
  assert.ok(
    waits.some((w) => /^node node-000: Job retrying, 2 pod failures: .*disk full/.test(w)),
    `the progress named the failing pods: ${waits}`,
  );
});

Deno.test("dispatch() counts a failure against the budget before its pods have told why", async () => {
  const failing = new Set(["node-000", "node-001", "node-002", "node-003", "node-004"]);
  const h = harness({ runMs: 300, failing });
  h.api.listPods = () => h.clock.sleep(50).then(() => []);
  const { stoppedBy } = await report(h, targets(10), { parallelism: 2, maxFailures: 2 });
  assert.match(stoppedBy!, /failure budget of 2 was exceeded/);
  // The third failure exceeds it; at most one more was in flight.
  assert.ok(h.api.created.length <= 4, `created ${h.api.created.length}`);
});

Deno.test("dispatch() bounds the wait for a stale Job that still runs by the node timeout", async () => {
  const h = harness({ runMs: 1000 });
  const ts = targets(2);
  seedStale(h, ts[0].name);
  const results = await run(h, ts, { parallelism: 2, nodeTimeoutMs: 60_000 });
  assert.equal(results[0].outcome, "failed");
  assert.match(results[0].reason!, /still ran after 60 s; it was left running/);
  assert.equal(results[1].outcome, "succeeded");
  assert.equal(h.api.calls.delete, undefined, "the running stale Job was never deleted");
});

Deno.test("dispatch() prepares a node (cordon, drain) before its Job, holding its slot", async (t) => {
  const outage = () =>
    apiError(503, "ServiceUnavailable", "create", "pods/eviction", "etcd leader changed");
  await t.step("the Job is created only after its node's prepare ended", async () => {
    const h = harness({ runMs: 100 });
    const preparedAt: Record<string, number> = {};
    const results = await run(h, targets(3), {
      parallelism: 1,
      prepare: async (tg) => {
        await h.clock.sleep(200);
        preparedAt[tg.name] = h.clock.now();
        return undefined;
      },
    });
    assert.ok(results.every((r) => r.outcome === "succeeded"));
    assert.deepEqual(h.api.createdAt, Object.values(preparedAt));
    // One slot: the second node's drain waits for the first node's Job.
    assert.ok(h.api.createdAt[1] >= h.api.createdAt[0] + 100 + 200);
  });
  await t.step("a drain that fails fails the node, with no Job, and releases it", async () => {
    const h = harness({ runMs: 100 });
    const released: string[] = [];
    const results = await run(h, targets(3), {
      prepare: (tg) =>
        Promise.resolve(
          tg.node.name === "node-001" ? "drain did not finish within 10 s" : undefined,
        ),
      release: (tg, why) => Promise.resolve(void released.push(`${tg.node.name}:${why}`)),
    });
    assert.equal(results[1].outcome, "failed");
    assert.equal(results[1].reason, "drain did not finish within 10 s");
    assert.deepEqual(h.api.created, ["up-node-000", "up-node-002"]);
    assert.deepEqual(released, ["node-001:failed"]);
  });
  await t.step(
    "an outage during a drain requeues the node and pauses; it never fails",
    async () => {
      const h = harness({ runMs: 100 });
      let tries = 0;
      const results = await run(h, targets(1), {
        prepare: () => ++tries < 3 ? Promise.reject(outage()) : Promise.resolve(undefined),
      });
      assert.equal(tries, 3);
      assert.equal(results[0].outcome, "succeeded");
      assert.deepEqual(h.api.created, ["up-node-000"]);
      assert.deepEqual(kinds(h, "api").map((e) => "state" in e && e.state), ["paused", "resumed"]);
    },
  );
  await t.step("a stop during a drain releases the node and creates no Job", async () => {
    const h = harness({ runMs: 100 });
    const released: string[] = [];
    const results = await run(h, targets(2), {
      parallelism: 1,
      prepare: async () => {
        h.stop.abort();
        await h.clock.sleep(10);
        return undefined;
      },
      release: (tg, why) => Promise.resolve(void released.push(`${tg.node.name}:${why}`)),
    });
    assert.deepEqual(h.api.created, []);
    assert.deepEqual(released, ["node-000:abandoned"]);
    assert.deepEqual(results.map((r) => r.outcome), ["notStarted", "notStarted"]);
  });
  await t.step(
    "a stop while a drained node waits out an outage on its create gives it back",
    async () => {
      // The create meets an outage: the node goes back to the queue cordoned
      // and drained, to be tried again; the run stopped before, it must not
      // stay cordoned with no Job.
      const h = harness({ runMs: 100 });
      h.api.refuseCreates = 'Internal error occurred: failed calling webhook "x": refused';
      h.clock.sleep(20_000).then(() => h.stop.abort());
      const released: string[] = [];
      const results = await run(h, targets(1), {
        prepare: () => Promise.resolve(undefined),
        release: (tg, why) => Promise.resolve(void released.push(`${tg.node.name}:${why}`)),
      });
      assert.deepEqual(h.api.created, []);
      assert.deepEqual(results.map((r) => r.outcome), ["notStarted"]);
      assert.deepEqual(released, ["node-000:abandoned"]);
    },
  );
  await t.step(
    "a stop during a drain: the run ends only once the node's uncordon is done",
    async () => {
      // The release is tracked as the stopped drain ends, after the run began
      // to wait for its tasks: Ctrl-C left the node cordoned when it was not waited for.
      const h = harness({ runMs: 100 });
      const released: string[] = [];
      await run(h, targets(1), {
        prepare: async () => {
          h.stop.abort();
          await h.clock.sleep(10);
          return undefined;
        },
        release: async (tg, why) => {
          await h.clock.sleep(50);
          released.push(`${tg.node.name}:${why}`);
        },
      });
      assert.deepEqual(released, ["node-000:abandoned"]);
    },
  );
});

Deno.test("dispatch() with retryFailed replaces an earlier run's failed Job, once", async (t) => {
  for (const retryFailed of [false, true]) {
    await t.step(retryFailed ? "retryFailed: created again" : "by default: counted", async () => {
      const h = harness({ runMs: 100 });
      const ts = targets(3);
      h.api.seed(ts[0].job(), "Complete");
      h.api.seed(ts[1].job(), "Failed");
      const results = await run(h, ts, { retryFailed });
      // The retried node's Job comes after its old one's deletion.
      assert.deepEqual(
        [...h.api.created].sort(),
        retryFailed ? ["up-node-001", "up-node-002"] : ["up-node-002"],
      );
      assert.deepEqual(results.map((r) => r.outcome), [
        "succeeded",
        retryFailed ? "succeeded" : "failed",
        "succeeded",
      ]);
      assert.equal(h.api.calls.delete ?? 0, retryFailed ? 1 : 0);
    });
  }
  await t.step("a Job of this run that fails is not retried", async () => {
    const h = harness({ runMs: 100, failing: new Set(["node-000"]) });
    const results = await run(h, targets(1), { retryFailed: true });
    assert.deepEqual(h.api.created, ["up-node-000"]);
    assert.equal(results[0].outcome, "failed");
  });
});

Deno.test("dispatch() with retryFailed deletes an earlier FailureTarget Job only once it is Failed", async () => {
  // FailureTarget comes first, Failed once every pod is gone (the Job
  // controller's enactJobFinished waits for status.terminating to be 0):
  // deleting it in between is a Job deleted before it finished.
  const h = harness({ runMs: 100 });
  const ts = targets(1);
  const failing = h.api.seed(ts[0].job());
  const name = failing.metadata!.name!;
  failing.status = {
    terminating: 1,
    conditions: [{ type: "FailureTarget", status: "True", reason: "BackoffLimitExceeded" }],
  };
  const promise = run(h, ts, { retryFailed: true });
  h.clock.sleep(5_000).then(() => h.api.finish(name, "Failed"));
  const results = await promise;
  assert.deepEqual(results.map((r) => r.outcome), ["succeeded"]);
  assert.deepEqual(h.api.removedWith.get(name), ["FailureTarget", "Failed"]);
  assert.ok(h.api.createdAt[0] >= 5_000, `created at ${h.api.createdAt[0]} ms, before Failed`);
});

Deno.test("dispatch() with postNodeDelayMs holds a finished node's slot that much longer", async (t) => {
  await t.step("each next Job starts the delay after the last finished", async () => {
    const h = harness({ runMs: 100 });
    const results = await run(h, targets(3), { parallelism: 1, postNodeDelayMs: 500 });
    assert.ok(results.every((r) => r.outcome === "succeeded"));
    assert.deepEqual(h.api.createdAt, [0, 600, 1200]);
  });
  await t.step("successes counted from an earlier run do not wait", async () => {
    const h = harness({ runMs: 100 });
    const ts = targets(3);
    h.api.seed(ts[0].job(), "Complete");
    h.api.seed(ts[1].job(), "Complete");
    await run(h, ts, { parallelism: 1, postNodeDelayMs: 500 });
    assert.deepEqual(h.api.createdAt, [0]);
  });
});

Deno.test("dispatch() with a budget starts a node only while the budget has room", async () => {
  const h = harness({ runMs: 1000 });
  // node-009 is down (not a target); the budget is 2 unavailable at once.
  const down = new Set(["node-009"]);
  let wake = () => {};
  const count = (inWork: readonly string[]) => down.size + inWork.length;
  h.clock.sleep(3500).then(() => {
    down.clear();
    wake();
  });
  const results = await run(h, targets(6), {
    parallelism: 3,
    budget: {
      slots: (inWork) => Math.max(0, 2 - count(inWork)),
      describe: (inWork) => `unavailable ${count(inWork)}/2`,
      onChange: (w) => (wake = w),
    },
  });
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  // One at a time while node-009 is down (0, 1000, 2000, 3000), then two at once.
  assert.deepEqual(h.api.createdAt, [0, 1000, 2000, 3000, 3500, 4000]);
  assert.equal(h.api.maxActive, 2);
});

Deno.test("dispatch() with closesAt starts nothing after the window closed; in flight finishes", async () => {
  const h = harness({ runMs: 1000 });
  const { results, windowClosed } = await report(h, targets(5), { parallelism: 2, closesAt: 1500 });
  assert.deepEqual(h.api.createdAt, [0, 0, 1000, 1000]);
  assert.deepEqual(results.map((r) => r.outcome), [
    "succeeded",
    "succeeded",
    "succeeded",
    "succeeded",
    "notStarted",
  ]);
  assert.equal(windowClosed, true);
});

Deno.test("dispatch() starts nothing while paused, lets in flight finish, and resumes", async () => {
  const h = harness({ runMs: 1000 });
  let paused: string | undefined;
  let wake = () => {};
  const set = (by: string | undefined) => {
    paused = by;
    wake();
  };
  h.clock.sleep(500).then(() => set("annotation p/paused=true on Job hook"));
  h.clock.sleep(4000).then(() => set(undefined));
  const progress: Progress[] = [];
  const { results } = await report(h, targets(4), {
    parallelism: 2,
    progressIntervalMs: 1000,
    pause: { pausedBy: () => paused, onChange: (w) => (wake = w) },
  }, progress);
  assert.ok(results.every((r) => r.outcome === "succeeded"));
  // The two in flight at the pause finish; the next two wait for the resume.
  assert.deepEqual(h.api.createdAt, [0, 0, 4000, 4000]);
  assert.ok(progress.some((p) => p.paused === "annotation p/paused=true on Job hook"));
  assert.deepEqual(
    kinds(h, "notice").map((e) => "message" in e && e.message),
    [
      "paused by annotation p/paused=true on Job hook: no new Job starts; Jobs in flight finish",
      "resumed: the pause was lifted",
    ],
  );
  // A lifted pause is good news: told as info, not as a warning.
  const resumed = kinds(h, "notice").find((e) => "message" in e && e.message.startsWith("resumed"));
  assert.equal((resumed as { level?: string }).level, "info");
});

Deno.test("dispatch() names the template field that changed when it replaces a Job of an older template", async () => {
  const h = harness({ runMs: 1000 });
  const run1 = { keys: KEYS, prefix: PREFIX, templateHash: "hash-1" };
  await report(h, targets(1, undefined, "hash-1"), { run: run1 });
  const run2 = { keys: KEYS, prefix: PREFIX, templateHash: "hash-2" };
  const [t] = targets(1, undefined, "hash-2");
  const newer = () => {
    const job = t.job();
    job.spec!.template.spec!.containers[0].image = "busybox:1.37";
    return job;
  };
  await report(h, [{ ...t, job: newer }], { run: run2 });
  const deleting = kinds(h, "deleting").map((e) => "why" in e && e.why);
  assert.deepEqual(deleting, [
    "the template changed: image of container c (busybox -> busybox:1.37)",
  ]);
});

Deno.test("dispatch() stops when a pause gate says stop (a health gate's exit): in flight finishes, the rest never starts", async () => {
  const h = harness({ runMs: 1000 });
  let stop: string | undefined;
  let wake = () => {};
  h.clock.sleep(500).then(() => {
    stop = 'a health gate was breached: query "q" returned 1';
    wake();
  });
  const { results, stoppedBy } = await report(h, targets(4), {
    parallelism: 2,
    pause: {
      pausedBy: () => stop && `health gate breached`,
      onChange: (w) => (wake = w),
      stopsBy: () => stop,
    },
  });
  assert.equal(stoppedBy, stop);
  assert.deepEqual(results.map((r) => r.outcome), [
    "succeeded",
    "succeeded",
    "notStarted",
    "notStarted",
  ]);
  assert.deepEqual(h.api.createdAt, [0, 0]);
});

Deno.test("dispatch() with blockers: a blocked node waits without a slot, then runs or ends blocked", async (t) => {
  await t.step("blocked until its pod ends: the others use the slot meanwhile", async () => {
    const h = harness({ runMs: 1000 });
    let podRuns = true;
    h.clock.sleep(6500).then(() => (podRuns = false));
    const results = await run(h, targets(3), {
      parallelism: 1,
      blockedRetryMs: 2000,
      blockers: (tg) =>
        Promise.resolve(tg.node.name === "node-000" && podRuns ? "pod a/db-0" : undefined),
    });
    assert.ok(results.every((r) => r.outcome === "succeeded"));
    assert.deepEqual(h.api.created, ["up-node-001", "up-node-002", "up-node-000"]);
    // Checked again at 2000, 4000 (node-002 runs), 6000, then free at 8000.
    assert.deepEqual(h.api.createdAt, [0, 1000, 8000]);
  });
  await t.step("still blocked at the timeout: outcome blocked, no Job", async () => {
    const h = harness({ runMs: 100 });
    const results = await run(h, targets(2), {
      blockedRetryMs: 1000,
      blockedTimeoutMs: 5000,
      blockers: (tg) => Promise.resolve(tg.node.name === "node-001" ? "pod a/db-0" : undefined),
    });
    assert.deepEqual(results.map((r) => r.outcome), ["succeeded", "blocked"]);
    assert.equal(results[1].reason, "still blocked after 5 s: pod a/db-0");
    assert.deepEqual(h.api.created, ["up-node-000"]);
  });
});

Deno.test("dispatch() never gives a second Job to a node whose lost create's Job its TTL collected unseen", async () => {
  // The create is stored and its answer lost; the Job runs, its TTL (0)
  // deletes it, and the watch shows none of it (a gap the relist cannot
  // fill), while the first read is lost too: the next read finds no Job,
  // which proves nothing past the TTL.
  class Gap extends FakeJobApi {
    readsLost = 1;
    override getJob(name: string) {
      if (this.readsLost-- <= 0) return super.getJob(name);
      const cut = apiError(0, "Timeout", "get", "jobs", "cut");
      return Promise.reject(cut);
    }
    override async *watchJobs(rv: string, signal: AbortSignal) {
      for await (const e of super.watchJobs(rv, signal)) {
        if (e.type === "ERROR" || !e.object.metadata?.name?.endsWith("node-000")) yield e;
      }
    }
  }
  const clock = new FakeClock();
  const api = new Gap({
    ownerLabel: [KEYS.owner, labelValue(PREFIX)],
    clock,
    runMs: 0,
    ttlZero: true,
  });
  api.loseCreateAnswers = 1;
  const h: Harness = { clock, api, events: [], stop: new AbortController() };
  const ts = targets(1).map((t) => {
    const job = t.job();
    job.spec!.ttlSecondsAfterFinished = 0;
    return { ...t, job: () => structuredClone(job) };
  });
  // The bound makes a second Job (unseen too) end the run, as a failure.
  const results = await run(h, ts, { parallelism: 1, nodeTimeoutMs: 60_000 });
  assert.deepEqual(h.api.created, [ts[0].name], "one Job for the node, never a second");
  assert.equal(results[0].outcome, "unknown", JSON.stringify(results));
});

Deno.test("dispatch() never acts again on a finished node's Job: deleted, made again under its name, re-listed", async () => {
  // The engine forgets the Job of a node whose outcome is final; whatever
  // its name shows afterwards (a second writer's Job, a stale owner's, a
  // failed one, a 410's re-list) must leave the node and that Job alone.
  const h = harness({ runMsOf: (node) => (node === "node-000" ? 1_000 : 20_000) });
  const ts = targets(2);
  const [stale] = targets(1, { name: "old-owner", uid: "old-uid" });
  const promise = run(h, ts, { parallelism: 2 });
  let seeded: V1Job | undefined;
  h.clock.sleep(3_000).then(() => {
    h.api.remove("up-node-000");
    // A running Job of another owner under the finished node's Job's name:
    // met before the node was final, it would have been waited for and replaced.
    seeded = h.api.seed({
      ...stale.job(),
      metadata: { ...stale.job().metadata, name: ts[0].name },
    });
  });
  h.clock.sleep(6_000).then(() => h.api.replaceSilently(ts[0].name));
  h.clock.sleep(7_000).then(() => h.api.expireWatches());
  h.clock.sleep(9_000).then(() => h.api.finish(ts[0].name, "Failed"));
  const results = await promise;
  assert.deepEqual(results.map((r) => [r.node, r.outcome]), [
    ["node-000", "succeeded"],
    ["node-001", "succeeded"],
  ]);
  assert.ok(seeded, "the other Job was made");
  assert.ok(h.events.some((e) => e.kind === "watch" && e.state === "relisted"));
  assert.equal(h.api.calls.delete ?? 0, 0, "no Job deleted");
  assert.deepEqual(h.api.created, ["up-node-000", "up-node-001"], "no second create");
  assert.ok(h.api.jobs.has(ts[0].name), "the other writer's Job is left alone");
  const nodeEvents = h.events.filter((e) => "node" in e && e.node === "node-000");
  assert.deepEqual(nodeEvents.map((e) => e.kind), ["created", "succeeded"]);
});
