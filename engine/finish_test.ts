import assert from "node:assert/strict";
import type { V1Job, V1Pod } from "@kubernetes/client-node";
import { ApiError } from "../kube/client.ts";
import { next, type NodeEvent, type NodeState, type Phase } from "./node_state.ts";
import type { Target } from "./fanout_types.ts";
import { FakeClock, runOn } from "../testing/fake_api.ts";
import { concludeJob, type FinishHost, judgeCollected } from "./finish.ts";

const NAME = "upgrade-node-1";
const RUNNING: NodeState = { phase: "running", since: 0, uid: "u1", startedAt: 0 };

function job(condition?: string): V1Job {
  return {
    metadata: { name: NAME, uid: "u1" },
    status: condition ? { conditions: [{ type: condition, status: "True" }] } : {},
  };
}

function pod(phase: string): V1Pod {
  return { metadata: { ownerReferences: [] }, status: { phase } } as V1Pod;
}

/** A host over one node's state that applies the real transitions of node_state.ts. */
function host(options: FinishHost["options"], pods?: V1Pod[], start = RUNNING) {
  const states = new Map([[NAME, start]]);
  const steps: string[] = [];
  const tasks: Promise<void>[] = [];
  const h: FinishHost = {
    options,
    clock: new FakeClock(),
    pods: { readable: pods !== undefined, list: () => Promise.resolve(pods) },
    target: () => ({ node: { name: "node-1", uid: "n1" }, name: NAME } as Target),
    state: (name) => states.get(name),
    apply: (name, e: NodeEvent, facts = {}) => {
      steps.push(e.type);
      const after = next(states.get(name)!, e, 0);
      states.set(name, { ...after, ...facts });
      return states.get(name);
    },
    track: (work) => void tasks.push(work),
    ok: () => void steps.push("ok"),
    outageFailed: () => void steps.push("outage"),
    wroteSince: () => true,
  };
  const settled = async () => {
    while (tasks.length) await tasks.shift();
  };
  return { h, steps, settled, phase: (): Phase => states.get(NAME)!.phase, states };
}

const SIGNAL = new AbortController().signal;
const outage = new ApiError({
  status: 503,
  reason: "ServiceUnavailable",
  verb: "patch",
  resource: "nodes",
  message: "down",
});

Deno.test({
  name: "concludeJob() records the outcome at once, then explains it or runs the post-success work",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      job: V1Job;
      options?: Partial<FinishHost["options"]>;
      pods?: V1Pod[];
      steps: string[];
      phase: Phase;
    }[] = [
      { name: "still active: nothing", job: job(), steps: [], phase: "running" },
      {
        name: "succeeded, no post-success work",
        job: job("Complete"),
        steps: ["succeeded"],
        phase: "succeeded",
      },
      {
        name: "succeeded, the post-success work goes through",
        job: job("Complete"),
        options: { afterSuccess: () => Promise.resolve(undefined) },
        steps: ["succeeded", "ok", "afterDone"],
        phase: "succeeded",
      },
      {
        name: "succeeded, the post-success work fails the node",
        job: job("Complete"),
        options: { afterSuccess: () => Promise.resolve("cannot label node node-1: no") },
        steps: ["succeeded", "afterDone"],
        phase: "failed",
      },
      {
        name: "failed, its pods readable: explained",
        job: job("Failed"),
        pods: [pod("Failed")],
        steps: ["failed", "explained"],
        phase: "failed",
      },
      {
        name: "failed, its pods unreadable: failed as the Job says",
        job: job("Failed"),
        steps: ["failed"],
        phase: "failed",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const { h, steps, settled, phase } = host({ signal: SIGNAL, ...c.options }, c.pods);
        concludeJob(h, NAME, c.job, false);
        await settled();
        assert.deepEqual(steps, c.steps);
        assert.equal(phase(), c.phase);
      });
    }
  },
});

Deno.test({
  name: "judgeCollected() takes a vanished Job's outcome from its pods, else calls it unknown",
  permissions: "none",
  async fn(t) {
    const cases: [string, V1Pod[], NodeState, string[], Phase][] = [
      ["a pod succeeded", [pod("Succeeded")], RUNNING, ["succeeded"], "succeeded"],
      ["every pod failed", [pod("Failed")], RUNNING, ["fail"], "failed"],
      ["no pod left", [], RUNNING, ["collected"], "unknown"],
      ["the node moved on meanwhile", [pod("Failed")], { ...RUNNING, uid: "u2" }, [], "running"],
    ];
    for (const [name, pods, start, want, wantPhase] of cases) {
      await t.step(name, async () => {
        const { h, steps, settled, phase } = host({ signal: SIGNAL }, pods, start);
        await judgeCollected(h, NAME, "u1");
        await settled();
        assert.deepEqual(steps, want);
        assert.equal(phase(), wantPhase);
      });
    }
  },
});

Deno.test({
  name:
    "runAfterSuccess() keeps a success through an outage and retries only the post-success work",
  permissions: "none",
  async fn() {
    let calls = 0;
    const afterSuccess = () => ++calls <= 3 ? Promise.reject(outage) : Promise.resolve(undefined);
    const { h, steps, settled, phase, states } = host({ signal: SIGNAL, afterSuccess });
    const waits: (string | undefined)[] = [];
    const apply = h.apply;
    h.apply = (name, e, facts) => {
      const after = apply(name, e, facts);
      waits.push(after?.waitingFor);
      return after;
    };
    concludeJob(h, NAME, job("Complete"), false);
    assert.equal(phase(), "finishing");
    await runOn(h.clock as FakeClock, settled());
    assert.equal(calls, 4, "the work was tried again after each outage");
    assert.equal(steps.filter((s) => s === "outage").length, 3, "each outage paused starts");
    assert.ok(!steps.includes("requeue"), "the node never went back to the queue");
    assert.ok(
      waits.some((w) => /post-success work .*retrying: .*down/.test(w ?? "")),
      `the node said what it waits for: ${waits}`,
    );
    assert.equal(phase(), "succeeded");
    assert.equal(states.get(NAME)!.waitingFor, undefined);
  },
});

Deno.test({
  name: "the post-success work fails its node at the node timeout only for a refusal the API " +
    "answered while it took the run's other writes; an unreachable API, or one refusing every " +
    "write, only pauses it",
  permissions: "none",
  async fn(t) {
    const refusal = (status: number) =>
      new ApiError({ status, reason: "x", verb: "patch", resource: "nodes", message: "webhook" });
    const cases: { name: string; status: number; wrote: boolean; failed: boolean }[] = [
      { name: "500 while other writes go through: failed", status: 500, wrote: true, failed: true },
      { name: "429 while other writes go through: failed", status: 429, wrote: true, failed: true },
      { name: "no answer at all: paused", status: 0, wrote: true, failed: false },
      {
        name: "503 while no other write goes through (a load balancer with no API server): paused",
        status: 503,
        wrote: false,
        failed: false,
      },
      {
        name: "500 to every write (etcd down behind the watch cache): paused",
        status: 500,
        wrote: false,
        failed: false,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const stop = new AbortController();
        let calls = 0;
        const { h, settled, phase, states } = host({
          signal: stop.signal,
          nodeTimeoutMs: 20_000,
          afterSuccess: () => {
            // Past a minute, the test stops a work that would go on.
            if (++calls > 12) stop.abort();
            return Promise.reject(refusal(c.status));
          },
        });
        h.wroteSince = () => c.wrote;
        concludeJob(h, NAME, job("Complete"), false);
        await runOn(h.clock as FakeClock, settled());
        assert.equal(phase(), c.failed ? "failed" : "finishing");
        if (c.failed) {
          assert.match(
            states.get(NAME)!.reason!,
            /^post-success work failed for 20 s \(--node-timeout-secs 20\)/,
          );
          assert.equal(calls, 5, "tried every 5 s until the timeout");
        }
      });
    }
  },
});

Deno.test({
  name:
    "the post-success work is told when the Job ended: its completionTime, also for a success counted from an earlier run, else when it was seen",
  permissions: "none",
  async fn(t) {
    const done = "2026-12-01T10:00:05Z";
    const complete: V1Job = {
      metadata: { name: NAME, uid: "u1" },
      status: {
        completionTime: done as unknown as Date,
        conditions: [{ type: "Complete", status: "True" }],
      },
    };
    const cases: [string, V1Job, boolean, number][] = [
      ["a Job of this run", complete, false, Date.parse(done)],
      ["a success counted from an earlier run", complete, true, Date.parse(done)],
      ["a Job that says no time: when it was seen", job("Complete"), false, 0],
    ];
    for (const [name, j, counted, want] of cases) {
      await t.step(name, async () => {
        const ended: number[] = [];
        const afterSuccess = (_t: Target, at: number) => {
          ended.push(at);
          return Promise.resolve(undefined);
        };
        const { h, settled } = host({ signal: SIGNAL, afterSuccess });
        concludeJob(h, NAME, j, counted);
        await settled();
        assert.deepEqual(ended, [want]);
      });
    }
  },
});
