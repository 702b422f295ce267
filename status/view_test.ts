import { keptKey } from "../nodes/success_mark.ts";
import assert from "node:assert/strict";
import type { V1Job, V1Node } from "@kubernetes/client-node";
import { trackingKeys } from "../job.ts";
import type { RunRecord } from "../report/record.ts";
import {
  ageText,
  buildView,
  lifeOf,
  recordClockNow,
  recordWrittenAt,
  renderJson,
  renderText,
  statusExitCode,
  type StatusView,
  type ViewInput,
  viewKey,
} from "./view.ts";
import { previewSource } from "../run/plan_preview.ts";
import type { Plan } from "../run/plan.ts";
import type { RunConfig } from "../run/config.ts";

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0);
const keys = trackingKeys("job-dispatcher");

function record(extra: Partial<RunRecord> = {}): RunRecord {
  return {
    version: 1,
    prefix: "up",
    namespace: "ops",
    state: "running",
    startedAt: T0,
    updatedAt: T0 + 60_000,
    heartbeatMs: 20_000,
    parallelism: 3,
    paused: "file /tmp/pause",
    summary: "…",
    nodes: [
      { node: "n0", phase: "running", since: T0, startedAt: T0 },
      { node: "n1", phase: "running", since: T0, startedAt: T0 },
      {
        node: "n2",
        phase: "running",
        since: T0,
        startedAt: T0,
        reason: "Unschedulable: x",
        stalled: true,
      },
      { node: "n3", phase: "queued", since: T0 },
      { node: "n4", phase: "blocked", since: T0 + 5_000, reason: "pod ops/db-0 (app=db)" },
      { node: "n5", phase: "queued", since: T0 },
    ],
    ...extra,
  };
}

function job(node: string, condition?: string, message = ""): V1Job {
  return {
    metadata: {
      name: `up-${node}`,
      // As the dispatcher labels its Jobs, and status lists them by.
      labels: { [keys.owner]: "up" },
      annotations: { [keys.nodeName]: node },
      creationTimestamp: new Date(T0) as unknown as Date,
    },
    status: condition
      ? {
        conditions: [{
          type: condition,
          status: "True",
          message,
          // As the Job controller words a Failed condition: a reason always.
          ...(condition === "Failed" && { reason: "BackoffLimitExceeded" }),
        }],
      }
      : {},
  } as V1Job;
}

const cordoned: V1Node = {
  metadata: {
    name: "n1",
    annotations: { [keys.cordonedBy]: "u" },
    labels: { [keys.result]: "failed" },
  },
  spec: { unschedulable: true },
};

/** The view of run `up` in `ops` from these parts: no node of the cluster unless given. */
function viewOf(
  parts: Omit<ViewInput, "namespace" | "prefix" | "keys" | "nodes"> & {
    nodes?: ViewInput["nodes"];
  },
): StatusView {
  return buildView({ namespace: "ops", prefix: "up", keys, nodes: new Map(), ...parts });
}

function view(rec = record(), now = T0 + 70_000) {
  return viewOf({
    record: rec,
    jobs: [
      job("n0", "Complete"),
      job("n1", "Failed", "Job has reached the specified backoff limit"),
      job("n2"),
    ],
    nodes: new Map([["n1", cordoned]]),
    now,
  });
}

/** A stopped run's record: each of `names` in `phase`. */
function stopped(names: string[], phase: "succeeded" | "queued"): RunRecord {
  return record({ state: "stopped", nodes: names.map((node) => ({ node, phase })) });
}

Deno.test({
  name:
    "status merges the record with the Jobs: Complete is succeeded, Failed failed, no Job as recorded",
  permissions: "none",
  fn() {
    const v = view();
    assert.equal(v.life, "running");
    assert.deepEqual(v.counts, { succeeded: 1, failed: 1, running: 1, queued: 2, blocked: 1 });
    const n = Object.fromEntries(v.nodes.map((x) => [x.node, x]));
    assert.equal(
      n.n1.reason,
      "job up-n1 failed: Job has reached the specified backoff limit [BackoffLimitExceeded]",
    );
    assert.equal(n.n1.cordoned, "ours");
    assert.equal(n.n1.mark, "failed");
    assert.equal(n.n2.stalled, true);
    assert.equal(n.n3.jobStatus, "None");
    assert.equal(statusExitCode(v), 1, "a failed node fails status");
  },
});

Deno.test({
  name: "status prints the header, counts and the in-flight, failed and blocked tables",
  permissions: "none",
  fn() {
    const text = renderText(view(), T0 + 70_000);
    assert.match(text, /^run up in ops: running, started 70s ago, record 10s old$/m);
    assert.match(text, /^paused by file \/tmp\/pause$/m);
    assert.match(text, /^6 nodes: 1 succeeded, 1 failed, 1 running, 1 blocked, 2 queued$/m);
    assert.match(
      text,
      /^IN FLIGHT\nNODE +PHASE +AGE +JOB +NOTE\nn2 +running +70s +up-n2 +stalled: Unschedulable: x$/m,
    );
    assert.match(
      text,
      /^FAILED\nNODE +JOB +REASON\nn1 +up-n1 +job up-n1 failed: Job has reached the specified backoff limit \[BackoffLimitExceeded\]$/m,
    );
    assert.match(
      text,
      /^BLOCKED\nNODE +PHASE +AGE +PODS\nn4 +blocked +65s +pod ops\/db-0 \(app=db\)$/m,
    );
    const wide = renderText(view(), T0 + 70_000, true);
    assert.match(wide, /^n1 +up-n1 +70s +Failed +ours +failed +job up-n1 failed/m);
    assert.match(wide, /^OTHERS\n/m);
  },
});

Deno.test({
  name: "status -o json has nodes [{node, phase, job, reason}] and the counts",
  permissions: "none",
  fn() {
    const j = JSON.parse(renderJson(view()));
    assert.equal(j.run.state, "running");
    assert.equal(j.run.paused, "file /tmp/pause");
    assert.equal(j.total, 6);
    assert.deepEqual(j.nodes[1].node, "n1");
    assert.deepEqual(j.nodes[1].phase, "failed");
    assert.deepEqual(j.nodes[1].job, "up-n1");
    assert.equal(j.counts.queued, 2);
  },
});

Deno.test({
  name:
    "a running record unwritten past two heartbeats is a gone run, and status says what a re-run would do",
  permissions: "none",
  fn() {
    assert.equal(lifeOf(record(), T0 + 60_000 + 44_000), "running");
    assert.equal(lifeOf(record(), T0 + 60_000 + 46_000), "gone");
    const v = view(record(), T0 + 200_000);
    assert.equal(v.life, "gone");
    assert.deepEqual(v.rerun, { adopt: 1, count: 2, start: 3 });
    const text = renderText(v, T0 + 200_000);
    assert.match(text, /gone: its record was last written 2m20s ago while it ran/);
    assert.match(
      text,
      /a re-run would adopt 1 running Jobs, count 2 finished ones and start 3 nodes/,
    );
    assert.equal(statusExitCode(v), 1);
  },
});

Deno.test({
  name: "status of a finished clean run exits 0; without a record the Jobs alone say",
  permissions: "none",
  fn() {
    const done = viewOf({
      record: record({
        state: "finished",
        paused: undefined,
        nodes: [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "succeeded" }],
      }),
      jobs: [job("n0", "Complete")],
      now: T0,
    });
    assert.equal(statusExitCode(done), 0);
    const bare = viewOf({
      jobs: [job("n0", "Complete"), job("n1")],
      now: T0,
    });
    assert.equal(bare.life, "unrecorded");
    assert.deepEqual(bare.counts, { succeeded: 1, running: 1 });
    assert.match(renderText(bare, T0), /no run record/);
  },
});

Deno.test({
  name:
    "status --require-ended exits 1 while the run still runs or is paused, 0 once it ended clean",
  permissions: "none",
  fn() {
    const nodes = [{ node: "n0", phase: "succeeded" as const }, {
      node: "n1",
      phase: "queued" as const,
    }];
    const live = viewOf({
      record: record({ nodes, paused: "health gate: up == 0" }),
      jobs: [job("n0", "Complete")],
      now: T0 + 70_000,
    });
    assert.equal(live.life, "running");
    assert.equal(statusExitCode(live), 0, "a person watching: nothing failed yet");
    assert.equal(
      statusExitCode(live, { requireEnded: true }),
      1,
      "helm test: it has not worked yet",
    );
    const done = viewOf({
      record: record({ state: "finished", paused: undefined, nodes: [nodes[0]] }),
      jobs: [job("n0", "Complete")],
      now: T0 + 70_000,
    });
    assert.equal(statusExitCode(done, { requireEnded: true }), 0);
  },
});

Deno.test({
  name:
    "status's re-run counts follow the engine's first sight: a Job being deleted or made for a replaced node is started again",
  permissions: "none",
  fn() {
    const deleting = job("n0", "Complete");
    deleting.metadata!.deletionTimestamp = new Date(T0) as unknown as Date;
    const replaced = job("n1", "Complete");
    replaced.metadata!.annotations![keys.nodeUid] = "uid-old";
    const v = viewOf({
      record: stopped(["n0", "n1", "n2", "n3"], "succeeded"),
      jobs: [deleting, replaced, job("n2", "Complete"), job("n3")],
      nodes: new Map([["n1", { metadata: { name: "n1", uid: "uid-new" } }]]),
      now: T0 + 200_000,
    });
    assert.deepEqual(v.rerun, { adopt: 1, count: 1, start: 2 });
  },
});

Deno.test({
  name: "status and --dry-run=plan agree on what a re-run would adopt, count and start",
  permissions: "none",
  fn() {
    const names = ["n0", "n1", "n2", "n3", "n4"];
    const jobs = [job("n0", "Complete"), job("n1", "Failed"), job("n2"), job("n3", "Complete")];
    jobs[2].status = { active: 1 };
    jobs[3].metadata!.annotations![keys.nodeUid] = "uid-old";
    const nodes = new Map(names.map((n) => [n, { metadata: { name: n, uid: `uid-${n}` } }]));
    const plan = {
      namespace: "ops",
      prefix: "up",
      keys,
      run: { keys, prefix: "up" },
      selection: { labelSelectors: [], pageSize: 500, ignoreTaints: false },
      resolved: { matched: [...nodes.values()], listings: [], eligible: [], skipped: [] },
      eligible: [],
      targets: names.map((n) => ({ node: { name: n, uid: `uid-${n}` }, name: `up-${n}` })),
      cleanupTargets: [],
    } as unknown as Plan;
    const opts = { parallelism: 1, waveSoakSecs: 0, maintenance: { windows: [] } };
    const planned = previewSource(
      opts as unknown as RunConfig,
      plan,
      new Map(jobs.map((j) => [j.metadata!.name!, j])),
    ).targets.map((t) => t.action!);
    assert.deepEqual(planned, ["succeeded", "failed", "adopt", "replace", "start"]);
    const v = viewOf({
      record: stopped(names, "queued"),
      jobs,
      nodes,
      now: T0 + 200_000,
    });
    const n = (...a: string[]) => planned.filter((x) => a.includes(x)).length;
    assert.deepEqual(v.rerun, {
      adopt: n("adopt"),
      count: n("succeeded", "failed"),
      start: n("start", "retry", "replace", "waitStale"),
    });
  },
});

Deno.test({
  name:
    "status keeps queued a node whose Job is an earlier template's: the run replaces it, so it counts for nothing yet",
  permissions: "none",
  fn() {
    const hashed = (node: string, hash: string) => {
      const j = job(node, "Complete");
      j.metadata!.annotations![keys.templateHash] = hash;
      return j;
    };
    const nodes = [
      { node: "n0", phase: "queued" as const },
      { node: "n1", phase: "queued" as const },
      { node: "n2", phase: "queued" as const },
    ];
    const jobs = [hashed("n0", "old"), hashed("n1", "now"), job("n2", "Complete")];
    const live = viewOf({ record: record({ nodes, templateHash: "now" }), jobs, now: T0 + 70_000 });
    const phases = Object.fromEntries(live.nodes.map((n) => [n.node, n.phase]));
    // n1: this template's Job (the engine counts it); n2: made before the
    // annotation existed, which the engine counts too (job.ts classifyJob).
    assert.deepEqual(phases, { n0: "queued", n1: "succeeded", n2: "succeeded" });
    assert.equal(live.nodes[0].jobStatus, "Complete", "-o wide still shows the Job it has");

    const dead = viewOf({
      record: record({ nodes, templateHash: "now", state: "stopped" }),
      jobs,
      now: T0 + 70_000,
    });
    assert.deepEqual(dead.counts, { queued: 1, succeeded: 2 });
    assert.deepEqual(dead.rerun, { adopt: 0, count: 2, start: 1 }, "the re-run replaces n0's");

    const unhashed = viewOf({ record: record({ nodes }), jobs, now: T0 + 70_000 });
    assert.deepEqual(unhashed.counts, { succeeded: 3 }, "an older record: no hash to judge by");
  },
});

Deno.test({
  name: "recordWrittenAt() reads the API server's time of the write of data.record",
  permissions: "none",
  async fn(t) {
    const data = { "f:data": { ".": {}, "f:record": {}, "f:summary": {} } };
    const cases: [string, Parameters<typeof recordWrittenAt>[0], number | undefined][] = [
      ["no managedFields", undefined, undefined],
      [
        "the manager of data.record",
        [{ time: "2026-12-01T09:01:00Z", fieldsV1: data }],
        T0 + 60_000,
      ],
      [
        "another manager's later change of a label is not a write of the record",
        [
          { time: "2026-12-01T09:01:00Z", fieldsV1: data },
          { time: "2026-12-01T09:05:00Z", fieldsV1: { "f:metadata": { "f:labels": {} } } },
        ],
        T0 + 60_000,
      ],
      [
        "of two managers of it (another dispatcher took it over), the later",
        [
          { time: "2026-12-01T09:01:00Z", fieldsV1: data },
          { time: new Date(T0 + 90_000), fieldsV1: data },
        ],
        T0 + 90_000,
      ],
      ["a time that is no time", [{ time: "soon", fieldsV1: data }], undefined],
    ];
    for (const [name, fields, want] of cases) {
      await t.step(name, () => assert.equal(recordWrittenAt(fields), want));
    }
  },
});

Deno.test({
  name: "recordClockNow() is now on the record writer's clock, bridged by the API server's",
  permissions: "none",
  async fn(t) {
    const record = { updatedAt: T0 }; // the writer's clock
    const cases: [string, Parameters<typeof recordClockNow>[0], number][] = [
      [
        "the server wrote it 5 s before its now; the writer's clock 1 h off, the reader's 45 s",
        { record, writtenAt: T0 + 3_600_000, serverNow: T0 + 3_605_000, localNow: T0 + 50_000 },
        T0 + 5_000,
      ],
      [
        "a server second behind its write (both to the second) is the same moment",
        { record, writtenAt: T0 + 1_000, serverNow: T0 + 500, localNow: T0 + 99_000 },
        T0,
      ],
      [
        "no write time (managedFields stripped): the server's now",
        { record, serverNow: T0 + 7_000, localNow: T0 + 99_000 },
        T0 + 7_000,
      ],
      [
        "no Date header: the reader's clock",
        { record, writtenAt: T0, localNow: T0 + 9_000 },
        T0 + 9_000,
      ],
      ["no record: the server's now", { serverNow: T0 + 3_000, localNow: T0 }, T0 + 3_000],
    ];
    for (const [name, input, want] of cases) {
      await t.step(name, () => assert.equal(recordClockNow(input), want));
    }
  },
});

Deno.test({
  name:
    "status keeps finishing a node of a dead run whose Job is Complete: its post-success work never ended, and --require-ended fails",
  permissions: "none",
  async fn(t) {
    const nodes = [
      { node: "n0", phase: "succeeded" as const },
      { node: "n1", phase: "finishing" as const, since: T0 + 30_000 },
    ];
    const jobs = [job("n0", "Complete"), job("n1", "Complete")];
    const cases: [string, RunRecord, number][] = [
      ["killed (gone)", record({ nodes }), T0 + 200_000],
      ["stopped by a signal", record({ nodes, state: "stopped" }), T0 + 70_000],
    ];
    for (const [name, rec, now] of cases) {
      await t.step(name, () => {
        const v = viewOf({ record: rec, jobs, now });
        assert.notEqual(v.life, "running");
        assert.deepEqual(v.counts, { succeeded: 1, finishing: 1 });
        assert.equal(v.nodes[1].jobStatus, "Complete", "-o wide still shows its Job's word");
        assert.equal(statusExitCode(v), 1, "not every node succeeded");
        assert.equal(statusExitCode(v, { requireEnded: true }), 1, "helm test fails");
        assert.match(renderText(v, now), /^n1 +finishing .*post-success work never ended/m);
      });
    }
  },
});

Deno.test({
  name:
    "status shows finishing a Complete node of a dead run whose record, a heartbeat old, still says running, when its success is kept on the node: its post-success work never ended, and --require-ended fails",
  permissions: "none",
  async fn(t) {
    // Killed after it kept n1's success on the node (nodes/success_mark.ts)
    // and before its next heartbeat wrote n1 finishing.
    const nodes = [
      { node: "n0", phase: "succeeded" as const },
      { node: "n1", phase: "running" as const, since: T0, startedAt: T0 },
    ];
    const marked = (mark: object): V1Node => ({
      metadata: {
        name: "n1",
        uid: "u1",
        annotations: { [keptKey(keys.kept, "up-n1")]: JSON.stringify(mark) },
      },
    });
    const cases: [string, V1Node | undefined, string][] = [
      ["its Job's success kept", marked({ job: "up-n1", at: "2026-12-01T09:00:30Z" }), "finishing"],
      ["another template's mark", marked({ job: "up-n1", templateHash: "other" }), "succeeded"],
      ["no mark", undefined, "succeeded"],
      // The run ended the work and could not remove the mark (said in its log).
      ["the record's own succeeded", marked({ job: "up-n1" }), "succeeded"],
    ];
    for (const [name, node, phase] of cases) {
      await t.step(name, () => {
        const now = T0 + 200_000;
        const own = name === "the record's own succeeded";
        const v = viewOf({
          record: record({ nodes: own ? [nodes[0], { node: "n1", phase: "succeeded" }] : nodes }),
          jobs: [job("n0", "Complete"), job("n1", "Complete")],
          nodes: new Map(node ? [["n1", node]] : []),
          now,
        });
        assert.equal(v.life, "gone");
        assert.equal(v.nodes[1].phase, phase);
        assert.equal(statusExitCode(v, { requireEnded: true }), phase === "finishing" ? 1 : 0);
      });
    }
  },
});

Deno.test("status's re-run line counts a finishing node whose Job its TTL removed when the node keeps that Job's success: the re-run does its post-success work and never starts its Job", () => {
  const nodes = [
    { node: "n0", phase: "succeeded" as const },
    { node: "n1", phase: "finishing" as const, since: T0 + 30_000 },
  ];
  const kept: V1Node = {
    metadata: {
      name: "n1",
      uid: "u1",
      annotations: {
        [keptKey(keys.kept, "up-n1")]: JSON.stringify({ job: "up-n1", at: "2026-12-01T09:00:30Z" }),
      },
    },
  };
  const now = T0 + 200_000;
  const v = viewOf({
    record: record({ nodes }),
    jobs: [job("n0", "Complete")],
    nodes: new Map([["n1", kept]]),
    now,
  });
  assert.equal(v.nodes[1].phase, "finishing");
  assert.equal(v.rerun, undefined, "nothing to start or adopt: n1's success is counted");
  assert.doesNotMatch(renderText(v, now), /start 1 node/);
});

Deno.test({
  name:
    "an ended record does not outrank a Job made after its last write: a later run whose record write was refused failed the node",
  permissions: "none",
  async fn(t) {
    // The record says n0 succeeded and was last written at T0 + 60 s (the
    // API server's stamp). A later run, its record write refused (no
    // `configmaps update`), made n0's Job again an hour later, and it failed.
    const ended = record({
      state: "finished",
      nodes: [{ node: "n0", phase: "succeeded", since: T0, startedAt: T0 }],
    });
    const later = (at: number) => {
      const j = job("n0", "Failed", "BackoffLimitExceeded");
      j.metadata!.creationTimestamp = new Date(at) as unknown as Date;
      return j;
    };
    const cases: [string, number, number | undefined, string, number][] = [
      [
        "a Job made an hour after the record's last write",
        T0 + 3_600_000,
        T0 + 60_000,
        "failed",
        1,
      ],
      [
        "a Job made before it (this run's): the record says",
        T0 + 30_000,
        T0 + 60_000,
        "succeeded",
        0,
      ],
      ["the same second: the record says", T0 + 60_000, T0 + 60_000, "succeeded", 0],
      ["no write time of the server: the record says", T0 + 3_600_000, undefined, "succeeded", 0],
    ];
    for (const [name, made, writtenAt, phase, code] of cases) {
      await t.step(name, () => {
        const parts = { record: ended, jobs: [later(made)], now: T0 + 3_700_000, writtenAt };
        const v = viewOf(parts);
        assert.equal(v.nodes[0].phase, phase);
        assert.equal(statusExitCode(v, { requireEnded: true }), code);
      });
    }
    await t.step("a later Complete Job of a node the record failed: still failed", () => {
      const failed = record({
        state: "finished",
        nodes: [{ node: "n0", phase: "failed", since: T0, reason: "verification failed" }],
      });
      const done = job("n0", "Complete");
      done.metadata!.creationTimestamp = new Date(T0 + 3_600_000) as unknown as Date;
      const parts = { record: failed, jobs: [done], now: T0 + 3_700_000, writtenAt: T0 + 60_000 };
      assert.equal(viewOf(parts).nodes[0].phase, "failed");
    });
  },
});

Deno.test({
  name: "status says the wave, its soak left, and no ETA while paused or after a stop",
  permissions: "none",
  async fn(t) {
    const view = (extra: Partial<RunRecord>) =>
      buildView({
        namespace: "ops",
        prefix: "up",
        keys,
        record: record({ paused: undefined, etaSecs: 300, rate: 0.5, ...extra }),
        jobs: [],
        nodes: new Map(),
        now: T0 + 60_000,
      });
    const soaking = {
      wave: { wave: 2, waves: 3, stage: "soaking" as const, soakLeftMs: 42_000 },
    } as Partial<RunRecord>;
    await t.step("text: the wave and its soak left", () => {
      const text = renderText(view(soaking), T0 + 60_000);
      assert.match(text, /^wave: 2 of 3, soaking: 42s left before wave 3$/m);
      assert.match(text, /; ETA 5m/);
    });
    await t.step("-o wide says it too", () => {
      assert.match(renderText(view(soaking), T0 + 60_000, true), /^wave: 2 of 3, soaking/m);
    });
    await t.step("-o json: run.wave", () => {
      const json = JSON.parse(renderJson(view(soaking)));
      assert.deepEqual(json.run.wave, { wave: 2, waves: 3, stage: "soaking", soakLeftSecs: 42 });
    });
    await t.step("paused: no ETA, it says paused", () => {
      const v = view({ paused: "file /tmp/pause" });
      const text = renderText(v, T0 + 60_000);
      assert.doesNotMatch(text, /ETA \d/);
      assert.match(text, /; ETA none \(paused\)/);
      assert.equal(JSON.parse(renderJson(v)).run.etaSecs, null);
    });
    await t.step("stopped: no ETA, it says stopped", () => {
      const v = view({ stoppedBy: "health gate breached" });
      assert.match(renderText(v, T0 + 60_000), /; ETA none \(stopped\)/);
      assert.equal(JSON.parse(renderJson(v)).run.etaSecs, null);
    });
    await t.step("an age under two minutes is said in seconds, as kubectl says it", () => {
      const v = buildView({
        namespace: "ops",
        prefix: "up",
        keys,
        record: record({
          paused: undefined,
          nodes: [{ node: "n0", phase: "running", since: T0 + 60_000 - 61_000 }],
        }),
        jobs: [],
        nodes: new Map(),
        now: T0 + 60_000,
      });
      assert.match(renderText(v, T0 + 60_000), /^n0 +running +61s +/m);
    });
  },
});

Deno.test({
  name: "status says the gates' state: text, -o wide and -o json, nothing without gates",
  permissions: "none",
  async fn(t) {
    const now = T0 + 60_000;
    const view = (extra: Partial<RunRecord>) =>
      buildView({
        namespace: "ops",
        prefix: "up",
        keys,
        record: record({ paused: undefined, ...extra }),
        jobs: [],
        nodes: new Map(),
        now,
      });
    const lift = "kubectl annotate job -n ops owner job-dispatcher/paused-";
    const cases: { name: string; gates: RunRecord["gates"]; line: RegExp }[] = [
      {
        name: "ok",
        gates: { state: "ok", queries: 3, checkedAt: now - 4_000 },
        line: /^gates: ok \(3 queries, checked 4s ago\)$/m,
      },
      {
        name: "waiting",
        gates: { state: "waiting", queries: 1, checkedAt: now - 40_000 },
        line: /^gates: waiting for an answer of Prometheus \(1 query, checked 40s ago\)$/m,
      },
      {
        name: "outage",
        gates: { state: "outage", queries: 1, since: now - 12_000, detail: "connection refused" },
        line: /^gates: Prometheus unreachable for 12s: connection refused \(starts paused\)$/m,
      },
      {
        name: "nodata",
        gates: {
          state: "nodata",
          queries: 2,
          since: now - 5_000,
          detail: 'selector up{job="x"} of query "up == 0" matches no series',
        },
        line:
          /^gates: no data: selector up\{job="x"\} of query "up == 0" matches no series \(starts paused\)$/m,
      },
      {
        name: "breached",
        gates: { state: "breached", queries: 1, detail: 'query "q" returned 1' },
        line: /^gates: breached: query "q" returned 1 \(the latch is not written yet\)$/m,
      },
      {
        name: "latched",
        gates: { state: "latched", queries: 1, detail: 'query "q" returned 1', lift },
        line: new RegExp(
          `^gates: breached: query "q" returned 1 \\(latched; lift with ${lift}\\)$`,
          "m",
        ),
      },
      {
        name: "unlatched",
        gates: { state: "unlatched", queries: 1, detail: 'query "q" returned 1' },
        line: /^gates: breached: query "q" returned 1 \(the latch was refused: the run stops\)$/m,
      },
    ];
    for (const c of cases) {
      await t.step(`${c.name}: one line in text and -o wide, run.gates in -o json`, () => {
        const v = view({ gates: c.gates });
        assert.match(renderText(v, now), c.line);
        assert.match(renderText(v, now, true), c.line);
        const gates = JSON.parse(renderJson(v)).run.gates;
        assert.equal(gates.state, c.gates!.state);
        assert.equal(gates.queries, c.gates!.queries);
        assert.equal(gates.detail, c.gates!.detail ?? null);
      });
    }
    await t.step("-o json: times as ISO, the lift command", () => {
      const gates = JSON.parse(renderJson(view({ gates: cases[5].gates }))).run.gates;
      assert.equal(gates.lift, lift);
      const ok = JSON.parse(renderJson(view({ gates: cases[0].gates }))).run.gates;
      assert.equal(ok.checkedAt, new Date(now - 4_000).toISOString());
    });
    await t.step("status -w: a new check alone prints nothing, a new state prints", () => {
      const ok = view({ gates: cases[0].gates });
      const later = view({ gates: { ...cases[0].gates!, checkedAt: now } });
      assert.equal(viewKey(later), viewKey(ok));
      assert.notEqual(viewKey(view({ gates: cases[3].gates })), viewKey(ok));
    });
    await t.step("a state a newer dispatcher writes: said as such, not a blank line", () => {
      const gates = { state: "held", queries: 2, detail: "by the fleet" } as unknown as RunRecord[
        "gates"
      ];
      const text = renderText(view({ gates }), now);
      assert.match(text, /^gates: held: by the fleet \(2 queries, not checked yet\)$/m);
    });
    await t.step(
      "no gates (a run without them, or an older record): no line, run.gates null",
      () => {
        const v = view({});
        assert.doesNotMatch(renderText(v, now), /^gates:/m);
        assert.doesNotMatch(renderText(v, now, true), /^gates:/m);
        assert.equal(JSON.parse(renderJson(v)).run.gates, null);
      },
    );
  },
});

Deno.test("status ages are kubectl's (HumanDuration): floored, minutes with seconds under 10 m, minutes under 3 h", () => {
  // k8s.io/apimachinery/pkg/util/duration.HumanDuration, which kubectl's AGE column prints.
  const cases: [number, string][] = [
    [0, "0s"],
    [119, "119s"],
    [120, "2m"],
    [150, "2m30s"],
    [179, "2m59s"],
    [599, "9m59s"],
    [600, "10m"],
    [659, "10m"],
    [3600, "60m"],
    [3 * 3600 - 1, "179m"],
    [3 * 3600, "3h"],
    [3 * 3600 + 20 * 60 + 59, "3h20m"],
    [8 * 3600, "8h"],
    [47 * 3600 + 59 * 60, "47h"],
    [48 * 3600, "2d"],
    [3 * 86400 + 5 * 3600, "3d5h"],
    [8 * 86400, "8d"],
  ];
  for (const [secs, want] of cases) assert.equal(ageText(secs), want, `${secs}s`);
});
