import assert from "node:assert/strict";
import { FakeClock } from "../testing/fake_api.ts";
import type { NodeEvent, NodeState } from "./node_state.ts";
import {
  checkDeletion,
  deleteStale,
  firstSight,
  type Sighting,
  type StaleHost,
  staleWaitTimeout,
  staleWhy,
} from "./stale.ts";
import type { V1Job } from "@kubernetes/client-node";
import { slimJob, trackingKeys } from "../job.ts";
import { ApiError } from "../kube/client.ts";
import type { DispatchEvent } from "./fanout.ts";

Deno.test({
  name:
    "firstSight() counts ours, waits for a running stale Job, queues a leftover of an earlier owner",
  permissions: "none",
  async fn(t) {
    const base: Sighting = {
      disposition: "current",
      target: true,
      retry: false,
      runs: false,
      phase: "succeeded",
      owned: true,
    };
    const cases: [string, Partial<Sighting>, { leftover: boolean; meet: boolean }][] = [
      ["ours, finished", {}, { leftover: false, meet: true }],
      ["ours, running", { runs: true }, { leftover: false, meet: true }],
      ["ours, a failure to retry: queued", { retry: true }, { leftover: false, meet: false }],
      ["stale, running: waited for", { disposition: "stale", runs: true }, {
        leftover: false,
        meet: true,
      }],
      ["stale, finished: queued for deletion", { disposition: "stale" }, {
        leftover: false,
        meet: false,
      }],
      ["not ours", { disposition: "notOurs", runs: true }, { leftover: false, meet: false }],
      ["a finished leftover", { disposition: "stale", target: false }, {
        leftover: true,
        meet: false,
      }],
      ["a running leftover", { disposition: "stale", target: false, runs: true }, {
        leftover: true,
        meet: true,
      }],
      ["a leftover of a run without owner", {
        disposition: "stale",
        target: false,
        owned: false,
        runs: true,
      }, { leftover: false, meet: false }],
      ["ours, of no node of this run", { target: false }, { leftover: false, meet: false }],
    ];
    for (const [what, given, want] of cases) {
      await t.step(what, () => assert.deepEqual(firstSight({ ...base, ...given }), want));
    }
  },
});

Deno.test({
  name: "staleWaitTimeout() gives the ms left, then the reason the node fails",
  permissions: "none",
  async fn(t) {
    const s: NodeState = { phase: "waitingStale", since: 1_000, uid: "u1" };
    await t.step("before the timeout", () => {
      assert.deepEqual(staleWaitTimeout("j-n1", s, 5_000, 10_000), { left: 6_000 });
    });
    await t.step("at the timeout", () => {
      assert.deepEqual(staleWaitTimeout("j-n1", s, 11_000, 10_000), {
        reason: "timeout: stale Job j-n1 of an earlier run still ran after 10 s; " +
          "it was left running and not replaced",
      });
    });
  },
});

/** A host over one map of states, recording what the stale-Job work did. */
function host(states: Map<string, NodeState>, api: Partial<StaleHost["api"]>) {
  const events: DispatchEvent[] = [];
  const applied: [string, NodeEvent][] = [];
  const outages: unknown[] = [];
  const tasks: Promise<void>[] = [];
  const clock = new FakeClock();
  const h: StaleHost = {
    api: {
      getJob: () => Promise.resolve(undefined),
      deleteJob: () => Promise.resolve(),
      ...api,
    },
    reporter: { event: (e) => events.push(e), progress: () => {} },
    clock,
    signal: new AbortController().signal,
    deadlineMs: 120_000,
    state: (name) => states.get(name),
    put: (name, s) => void states.set(name, s),
    apply: (name, e) => void applied.push([name, e]),
    drop: (name) => void states.delete(name),
    isTarget: (name) => name.startsWith("j-"),
    ok: () => {},
    outage: (e) => void outages.push(e),
    listPods: () => Promise.resolve([]),
    track: (work) => void tasks.push(work),
  };
  return { h, events, applied, outages, tasks, clock };
}

Deno.test({
  name: "deleteStale() fails a node whose Job cannot be deleted, and forgets such a leftover",
  permissions: "none",
  async fn() {
    const job = { metadata: { name: "j-n1", uid: "u1" } };
    const states = new Map<string, NodeState>([
      ["j-n1", { phase: "deleting", since: 0, uid: "u1" }],
      ["old-n2", { phase: "deleting", since: 0, uid: "u2" }],
    ]);
    const forbidden = () =>
      Promise.reject(
        new ApiError({
          status: 403,
          reason: "Forbidden",
          verb: "delete",
          resource: "jobs",
          message: "forbidden",
        }),
      );
    const { h, events, applied } = host(states, { deleteJob: forbidden });
    await deleteStale(h, "j-n1", job, "made for an earlier run");
    await deleteStale(h, "old-n2", { metadata: { name: "old-n2", uid: "u2" } }, "leftover");
    assert.deepEqual(events[0], { kind: "deleting", job: "j-n1", why: "made for an earlier run" });
    assert.deepEqual(applied, [["j-n1", {
      type: "fail",
      reason: "cannot delete stale Job j-n1: Cannot delete jobs: forbidden",
    }]]);
    assert.equal(states.has("old-n2"), false);
  },
});

Deno.test({
  name: "checkDeletion() waits out the deadline, then fails the node naming what holds its Job",
  permissions: "none",
  async fn() {
    const s: NodeState = { phase: "deleting", since: 0, uid: "u1" };
    const states = new Map([["j-n1", s]]);
    const getJob = () =>
      Promise.resolve({ metadata: { name: "j-n1", uid: "u1", finalizers: ["example.com/hold"] } });
    const { h, applied, tasks } = host(states, { getJob });
    assert.equal(checkDeletion(h, "j-n1", s, 100_000), 20_000);
    assert.equal(tasks.length, 0);
    assert.equal(checkDeletion(h, "j-n1", s, 120_000), Infinity);
    await Promise.all(tasks);
    assert.equal(applied.length, 1);
    const [name, e] = applied[0];
    assert.equal(name, "j-n1");
    assert.equal(e.type, "fail");
    assert.match(
      (e as { reason: string }).reason,
      /^stale Job j-n1 not gone within 120 s of its deletion: held by .*example\.com\/hold/,
    );
  },
});

Deno.test({
  name:
    "staleWhy() names a changed init container image and a removed container, never 'not its images' for them",
  permissions: "none",
  async fn(t) {
    const run = { keys: trackingKeys("job-dispatcher"), prefix: "up" };
    const job = (spec: Record<string, unknown>): V1Job =>
      ({ metadata: { name: "up-n0" }, spec: { template: { spec } } }) as unknown as V1Job;
    const cases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
      [
        "an init container's image",
        { initContainers: [{ name: "i", image: "a:1" }], containers: [{ name: "c", image: "x" }] },
        { initContainers: [{ name: "i", image: "a:2" }], containers: [{ name: "c", image: "x" }] },
        "the template changed: image of init container i (a:1 -> a:2)",
      ],
      [
        "a container removed",
        { containers: [{ name: "c", image: "x" }, { name: "d", image: "y" }] },
        { containers: [{ name: "c", image: "x" }] },
        "the template changed: container d removed",
      ],
      [
        "an env-only change",
        { containers: [{ name: "c", image: "x", env: [{ name: "A", value: "1" }] }] },
        { containers: [{ name: "c", image: "x", env: [{ name: "A", value: "2" }] }] },
        "the template changed (not its images)",
      ],
    ];
    for (const [name, was, now, want] of cases) {
      await t.step(name, () => {
        // The engine's cache holds the slim Job (slimJob), so judge that.
        assert.equal(staleWhy(slimJob(job(was)), () => job(now), run), want);
      });
    }
  },
});
