import assert from "node:assert/strict";
import {
  auditSummary,
  delta,
  epochMs,
  idealSeconds,
  inflightSeries,
  modes,
  percentile,
  recordWrites,
  refillLatencies,
  requestTotals,
  scenarios,
  slotUtilisation,
} from "./_analysis.ts";

Deno.test({
  name: "scenarios() runs N=100 only by default and narrows the full grid by BENCH_N/P/D",
  permissions: "none",
  async fn(t) {
    await t.step("quick is N=100, D=2 s, both P", () => {
      assert.deepEqual(scenarios({}), [{ n: 100, p: 10, d: 2 }, { n: 100, p: 100, d: 2 }]);
    });
    await t.step("full is the whole grid, sorted by N", () => {
      const all = scenarios({ BENCH_PROFILE: "full" });
      assert.equal(all.length, 16);
      assert.deepEqual(all.map((s) => s.n), [...all.map((s) => s.n)].sort((a, b) => a - b));
    });
    await t.step("one scenario by env", () => {
      assert.deepEqual(
        scenarios({ BENCH_PROFILE: "full", BENCH_N: "1000", BENCH_P: "100", BENCH_D: "10" }),
        [{ n: 1000, p: 100, d: 10 }],
      );
    });
    await t.step("bad values are refused", () => {
      assert.throws(() => scenarios({ BENCH_PROFILE: "huge" }), RangeError);
      assert.throws(() => scenarios({ BENCH_N: "10,x" }), RangeError);
      assert.throws(() => modes("watch,push"), RangeError);
    });
  },
});

Deno.test({
  name: "idealSeconds() is ⌈N/P⌉ waves of D and percentile() is nearest-rank",
  permissions: "none",
  fn() {
    assert.equal(idealSeconds({ n: 1000, p: 100, d: 10 }), 100);
    assert.equal(idealSeconds({ n: 101, p: 10, d: 2 }), 22);
    assert.equal(percentile([5, 1, 3, 2, 4], 50), 3);
    assert.equal(percentile([1, 2, 3, 4, 100], 99), 100);
    assert.ok(Number.isNaN(percentile([], 50)));
  },
});

Deno.test({
  name: "requestTotals() sums apiserver_request_total by verb and resource; delta() keeps growth",
  permissions: "none",
  fn() {
    const text = `# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_duration_seconds_count{verb="POST"} 9
`;
    const counts = requestTotals(text);
    assert.deepEqual(counts, { "POST jobs": 8, "PUT jobs/status": 3 });
    assert.deepEqual(delta({ "POST jobs": 5, "PUT jobs/status": 3 }, counts), { "POST jobs": 3 });
  },
});

Deno.test({
  name: "auditSummary() counts one user's requests, node LIST pages and dry runs apart",
  permissions: "none",
  fn() {
    const ev = (verb: string, resource: string, uri: string, at: string, user = "sa") => ({
      verb,
      requestURI: uri,
      user: { username: user },
      objectRef: { resource },
      responseStatus: { code: 200 },
      requestReceivedTimestamp: at,
      stageTimestamp: at.replace(/\.(\d)/, ".9"),
    });
    const summary = auditSummary([
      ev("list", "nodes", "/api/v1/nodes?limit=500", "2026-01-01T00:00:01.100000Z"),
      ev("list", "nodes", "/api/v1/nodes?limit=500&continue=x", "2026-01-01T00:00:01.200000Z"),
      ev("create", "jobs", "/apis/batch/v1/namespaces/a/jobs?dryRun=All", "2026-01-01T00:00:02Z"),
      ev("create", "jobs", "/apis/batch/v1/namespaces/a/jobs", "2026-01-01T00:00:03Z"),
      ev("create", "jobs", "/apis/batch/v1/namespaces/a/jobs", "2026-01-01T00:00:00Z", "other"),
    ], "sa");
    assert.equal(summary.total, 4);
    assert.equal(summary.nodeListPages, 2);
    assert.deepEqual(summary.requests, {
      "list nodes": 2,
      "create jobs (dryRun)": 1,
      "create jobs": 1,
    });
    assert.equal(summary.firstRequestAt, epochMs("2026-01-01T00:00:01.100000Z"));
    assert.equal(Math.round(summary.listNodesMs), 800);
  },
});

Deno.test({
  name:
    "refillLatencies() pairs each freed slot with the next creation; the initial fill is not one",
  permissions: "none",
  fn() {
    const jobs = [
      { createdAt: 0, finishedAt: 1000 },
      { createdAt: 0, finishedAt: 1500 },
      { createdAt: 1030, finishedAt: 2000 },
      { createdAt: 1600 },
    ];
    assert.deepEqual(refillLatencies(jobs), [30, 100]);
    const series = inflightSeries(jobs, 0);
    assert.deepEqual(series, [[0, 2], [1, 1], [1.03, 2], [1.5, 1], [1.6, 2], [2, 1]]);
    assert.equal(slotUtilisation([[0, 2], [1, 1], [2, 0]], 2, 0, 2), 0.75);
  },
});

Deno.test({
  name: "recordWrites() counts the run record's answered writes, their gaps and the most in 10 s",
  permissions: "none",
  fn() {
    const user = "system:serviceaccount:ns:dispatcher";
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
    const write = (s: number, verb: string, code: number, name = "run-record.bench") => ({
      verb,
      requestURI: `/api/v1/namespaces/ns/configmaps${verb === "create" ? "" : `/${name}`}`,
      user: { username: user },
      objectRef: { resource: "configmaps", name },
      responseStatus: { code },
      requestReceivedTimestamp: at(s),
      stageTimestamp: at(s),
    });
    const t0 = Date.UTC(2026, 0, 1);
    const w = recordWrites(
      [
        write(0, "update", 404),
        write(0.01, "create", 201),
        write(10.5, "update", 200),
        write(25, "update", 200),
        write(26, "update", 200),
        write(27, "update", 200, "gate-latch.bench"),
        { ...write(28, "update", 200), user: { username: "someone-else" } },
        { ...write(29, "get", 200) },
      ],
      user,
      t0,
      40_000,
    );
    assert.equal(w.writes, 4);
    assert.deepEqual(w.attempts, { "update 404": 1, "create 201": 1, "update 200": 3 });
    assert.equal(Math.round(w.minGapMs), 1000);
    assert.equal(Math.round(w.medianGapMs), 10_490);
    assert.equal(w.maxPer10s, 2);
    assert.equal(w.maxPer10sBeforeLast, 1);
    assert.equal(Math.round(w.minGapBeforeLastMs), 10_490);
    assert.equal(w.meanPer10s, 1);
    assert.deepEqual(w.at, [0, 10.5, 25, 26]);
  },
});
