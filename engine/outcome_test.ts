import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import type { NodeResult, Progress, Target } from "./fanout.ts";
import type { NodeState, Phase } from "./node_state.ts";
import { ActiveTime, jobEnd, nodeResult, progressKey, progressOf, resultFacts } from "./outcome.ts";

const JOB: V1Job = {
  metadata: { name: "j-n1", creationTimestamp: new Date(1_000) },
  status: {
    completionTime: new Date(4_000),
    conditions: [{ type: "Complete", status: "True" }],
    failed: 2,
    succeeded: 1,
  },
};

Deno.test({
  name: "resultFacts() times a Job seen in this run by the run, one counted from before by the Job",
  permissions: "none",
  async fn(t) {
    const cases: [string, NodeState, Parameters<typeof resultFacts>[1], Partial<NodeState>][] = [
      [
        "seen in this run",
        { phase: "running", since: 50, startedAt: 50 },
        { now: 90 },
        { startedAt: 50, finishedAt: 90, attempts: undefined },
      ],
      [
        "seen in this run, with its Job's counters",
        { phase: "running", since: 50, startedAt: 50 },
        { now: 90, job: JOB },
        { startedAt: 50, finishedAt: 90, attempts: 3 },
      ],
      [
        // "attempts": null for succeeded nodes in the report.
        "SuccessCriteriaMet before the counters: the uncounted pods count",
        { phase: "running", since: 50, startedAt: 50 },
        {
          now: 90,
          job: {
            metadata: { name: "j-n1" },
            status: {
              conditions: [{ type: "SuccessCriteriaMet", status: "True" }],
              uncountedTerminatedPods: { succeeded: ["pod-uid-2"], failed: ["pod-uid-1"] },
            },
          },
        },
        { startedAt: 50, finishedAt: 90, attempts: 2 },
      ],
      [
        "more pods than the counters say",
        { phase: "running", since: 50, startedAt: 50 },
        { now: 90, job: JOB, pods: 5 },
        { startedAt: 50, finishedAt: 90, attempts: 5 },
      ],
      [
        "counted from an earlier run",
        { phase: "running", since: 50, startedAt: 50, counted: true },
        { now: 90, job: JOB },
        // completedAt: the end of the whole second the API server stamped.
        { startedAt: 1_000, finishedAt: 4_000, attempts: 3, completedAt: 5_000 },
      ],
      [
        "counted, its Job without times",
        { phase: "running", since: 50, startedAt: 50, counted: true },
        { now: 90, job: { metadata: { name: "j-n1" } } },
        { startedAt: 50, finishedAt: 50, attempts: undefined, completedAt: undefined },
      ],
      [
        "never started, its Job unknown",
        { phase: "queued", since: 50 },
        { now: 90 },
        { startedAt: undefined, finishedAt: 90, attempts: undefined },
      ],
    ];
    for (const [what, s, seen, want] of cases) {
      await t.step(what, () => assert.deepEqual(resultFacts(s, seen), want));
    }
  },
});

const FINAL_WANTED = new Set<NodeResult["outcome"]>(["succeeded", "failed", "unknown", "blocked"]);

Deno.test({
  name: "nodeResult() says final states as they are, and a node in work as inFlight",
  permissions: "none",
  async fn(t) {
    const target: Target = {
      node: { name: "n1", uid: "u1" },
      name: "j-n1",
      job: () => ({}) as V1Job,
    };
    const cases: [Phase, NodeResult["outcome"]][] = [
      ["succeeded", "succeeded"],
      ["failed", "failed"],
      ["unknown", "unknown"],
      ["stillBlocked", "blocked"],
      ["running", "inFlight"],
      ["finishing", "inFlight"],
      ["explaining", "inFlight"],
      ["queued", "notStarted"],
      ["blocked", "notStarted"],
      ["creating", "notStarted"],
      ["draining", "notStarted"],
      ["waitingStale", "notStarted"],
      ["deleting", "notStarted"],
    ];
    for (const [phase, outcome] of cases) {
      await t.step(`${phase} → ${outcome}`, () => {
        const s: NodeState = { phase, since: 0, reason: "r", startedAt: 1, finishedAt: 2 };
        const want: NodeResult = FINAL_WANTED.has(outcome)
          ? {
            node: "n1",
            job: "j-n1",
            outcome,
            reason: "r",
            startedAt: 1,
            finishedAt: 2,
            attempts: undefined,
          }
          : { node: "n1", job: "j-n1", outcome };
        assert.deepEqual(nodeResult(target, s), want);
      });
    }
    await t.step("a stop while a create's answer is lost: inFlight, its Job may run", () => {
      // A re-run adopts it by name; "not started" would hide a Job on the node.
      for (const phase of ["creating", "queued"] as const) {
        const s: NodeState = { phase, since: 0, unsure: true };
        assert.equal(nodeResult(target, s).outcome, "inFlight", phase);
      }
    });
  },
});

Deno.test({
  name:
    "progressOf() leaves out the rare counts while they are zero; progressKey() ignores the time",
  permissions: "none",
  fn() {
    const counts: Partial<Record<Phase, number>> = { succeeded: 3, queued: 2, stillBlocked: 1 };
    const tally = {
      count: (p: Phase) => counts[p] ?? 0,
      inFlight: 1,
      total: 7,
      elapsedMs: 5_000,
    };
    const p = progressOf(tally);
    assert.deepEqual(p, {
      succeeded: 3,
      failed: 0,
      unknown: undefined,
      blocked: 1,
      inFlight: 1,
      draining: undefined,
      queued: 2,
      total: 7,
      elapsedMs: 5_000,
      outage: undefined,
      budget: undefined,
      paused: undefined,
      waits: undefined,
    });
    const later: Progress = { ...p, elapsedMs: 9_000 };
    assert.equal(progressKey(later), progressKey(p));
    assert.notEqual(progressKey({ ...p, paused: "a file" }), progressKey(p));
    assert.notEqual(progressKey({ ...p, waits: ["node a: Job retrying"] }), progressKey(p));
  },
});

Deno.test({
  name: "ActiveTime leaves the spans paused by the user or an outage out of the elapsed time",
  permissions: "none",
  async fn(t) {
    const outage: Progress["outage"] = {
      word: "unreachable",
      forMs: 1,
      paused: true,
      detail: "connection refused",
    };
    // [name, reports as [elapsedMs, paused by the user, outage], active ms after each]
    const cases: [string, [number, boolean, boolean][], number[]][] = [
      ["never paused", [[10_000, false, false], [20_000, false, false]], [10_000, 20_000]],
      [
        "paused and resumed by the user",
        [[10_000, false, false], [20_000, true, false], [80_000, true, false], [
          90_000,
          false,
          false,
        ]],
        // Resumed as the last report came: the pause ran until it was seen lifted.
        [10_000, 20_000, 20_000, 20_000],
      ],
      [
        "two pauses, the second still on",
        [[5_000, true, false], [15_000, false, false], [25_000, true, false], [
          45_000,
          true,
          false,
        ]],
        [5_000, 5_000, 15_000, 15_000],
      ],
      [
        "an API outage pauses starts too",
        [[10_000, false, true], [40_000, false, false], [50_000, false, false]],
        [10_000, 10_000, 20_000],
      ],
    ];
    for (const [name, reports, want] of cases) {
      await t.step(name, () => {
        const time = new ActiveTime();
        const got = reports.map(([elapsedMs, paused, out]) =>
          time.observe({
            succeeded: 1,
            failed: 0,
            inFlight: 0,
            queued: 1,
            total: 2,
            elapsedMs,
            paused: paused ? "file /tmp/p" : undefined,
            outage: out ? outage : undefined,
          })
        );
        assert.deepEqual(got, want);
      });
    }
  },
});

Deno.test({
  name:
    "jobEnd() reads completionTime, else the deciding condition's time, as the end of its second",
  permissions: "none",
  async fn(t) {
    const at = (iso: string) => iso as unknown as Date;
    const cond = (type: string, time: string) => ({
      type,
      status: "True",
      lastTransitionTime: at(time),
    });
    // The API server sets completionTime with the Complete condition.
    const complete = { type: "Complete", status: "True" };
    const cases: [string, Pick<V1Job, "status"> | undefined, number | undefined][] = [
      [
        "completionTime, whole seconds: that second's end",
        { status: { completionTime: at("2026-01-01T00:00:10Z"), conditions: [complete] } },
        Date.parse("2026-01-01T00:00:11Z"),
      ],
      [
        "a failed Job: its Failed condition's time",
        { status: { conditions: [cond("Failed", "2026-01-01T00:00:20Z")] } },
        Date.parse("2026-01-01T00:00:21Z"),
      ],
      [
        // Kubernetes 1.31+: FailureTarget at the decision, Failed once the
        // pods have terminated (their grace period later): the node ends then.
        "FailureTarget, then Failed once its pods are gone: Failed's time",
        {
          status: {
            conditions: [
              cond("FailureTarget", "2026-01-01T00:00:20Z"),
              cond("Failed", "2026-01-01T00:00:50Z"),
            ],
          },
        },
        Date.parse("2026-01-01T00:00:51Z"),
      ],
      [
        "only SuccessCriteriaMet so far: its time",
        { status: { conditions: [cond("SuccessCriteriaMet", "2026-01-01T00:00:30Z")] } },
        Date.parse("2026-01-01T00:00:31Z"),
      ],
      [
        "a stamp with milliseconds is taken as it is",
        { status: { completionTime: at("2026-01-01T00:00:10.250Z"), conditions: [complete] } },
        Date.parse("2026-01-01T00:00:10.250Z"),
      ],
      ["a running Job: none", { status: { active: 1 } }, undefined],
      ["no Job: none", undefined, undefined],
    ];
    for (const [name, job, want] of cases) {
      await t.step(name, () => assert.equal(jobEnd(job), want));
    }
  },
});
