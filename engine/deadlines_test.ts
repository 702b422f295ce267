import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import {
  type BlockedVerdict,
  blockedVerdict,
  checkBlocked,
  checkDeadlines,
  type DeadlineHost,
} from "./deadlines.ts";
import type { NodeEvent, NodeState } from "./node_state.ts";
import type { DispatchEvent } from "./fanout_types.ts";
import type { StaleHost } from "./stale.ts";
import { FakeClock, runOn } from "../testing/fake_api.ts";
import { ApiError } from "../kube/client.ts";
import { unschedulablePod } from "../testing/pods.ts";

Deno.test({
  name: "blockedVerdict() retries a blocked node after its wait and ends it past the timeout",
  permissions: "none",
  async fn(t) {
    const s: NodeState = { phase: "blocked", since: 10_000, blockedAt: 0, reason: "pod a/b" };
    const cases: [string, number, number | undefined, BlockedVerdict][] = [
      ["within the wait", 12_000, undefined, { waitMs: 3_000 }],
      ["the wait is over", 15_000, undefined, { type: "unblock" }],
      ["within the timeout", 12_000, 60_000, { waitMs: 3_000 }],
      [
        "the timeout counts from when it was first found blocked",
        60_000,
        60_000,
        { type: "blockedTimeout", reason: "still blocked after 60 s: pod a/b" },
      ],
    ];
    for (const [name, now, timeout, want] of cases) {
      await t.step(name, () => assert.deepEqual(blockedVerdict(s, now, 5_000, timeout), want));
    }
  },
});

function host(
  states: Map<string, NodeState>,
  options: DeadlineHost["options"],
  pods?: V1Pod[],
  deleteJob?: DeadlineHost["api"]["deleteJob"],
) {
  const applied: [string, NodeEvent, Partial<NodeState>?][] = [];
  const events: DispatchEvent[] = [];
  const deleted: string[] = [];
  const tasks: Promise<void>[] = [];
  const clock = new FakeClock();
  const h: DeadlineHost = {
    options,
    api: { deleteJob: deleteJob ?? ((name) => Promise.resolve(void deleted.push(name))) },
    reporter: { event: (e) => void events.push(e), progress: () => {} },
    clock,
    pods: { readable: pods !== undefined, list: () => Promise.resolve(pods) },
    stale: { signal: new AbortController().signal, deadlineMs: 120_000 } as StaleHost,
    inFlight: () => [...states.keys()].filter((n) => states.get(n)!.phase !== "blocked"),
    blocked: () => [...states.keys()].filter((n) => states.get(n)!.phase === "blocked"),
    nodeOf: (name) => name.startsWith("j-") ? name.slice(2) : undefined,
    state: (name) => states.get(name),
    put: (name, s) => void states.set(name, s),
    apply: (name, e, facts) => void applied.push(facts ? [name, e, facts] : [name, e]),
    track: (work) => void tasks.push(work),
  };
  const settled = async () => {
    while (tasks.length) await tasks.shift();
  };
  return { h, applied, events, deleted, settled, clock };
}

Deno.test({
  name: "checkDeadlines() fails a node past its timeout and says when the next deadline is",
  permissions: "none",
  async fn(t) {
    const running: NodeState = { phase: "running", since: 0, startedAt: 0, uid: "u1" };
    await t.step("before the timeout: the time left", () => {
      const { h, applied } = host(new Map([["j-a", running]]), { nodeTimeoutMs: 60_000 });
      assert.equal(checkDeadlines(h, 45_000), 15_000);
      assert.deepEqual(applied, []);
    });
    await t.step("past the timeout: failed, its Job kept", () => {
      const { h, applied, deleted } = host(new Map([["j-a", running]]), { nodeTimeoutMs: 60_000 });
      assert.equal(checkDeadlines(h, 60_000), Infinity);
      assert.deepEqual(applied, [["j-a", {
        type: "fail",
        reason: "timeout: not finished within 60 s",
      }]]);
      assert.deepEqual(deleted, []);
    });
    await t.step("past the timeout with --delete-timed-out: its Job deleted", async () => {
      const { h, events, deleted, settled } = host(new Map([["j-a", running]]), {
        nodeTimeoutMs: 60_000,
        deleteTimedOut: true,
      });
      checkDeadlines(h, 61_000);
      await settled();
      assert.deepEqual(deleted, ["j-a"]);
      assert.deepEqual(events, [{ kind: "deleting", job: "j-a", why: "it timed out" }]);
    });
    await t.step("a stale Job that still runs past the timeout fails the node", () => {
      const waiting: NodeState = { phase: "waitingStale", since: 0, uid: "old" };
      const { h, applied } = host(new Map([["j-a", waiting]]), { nodeTimeoutMs: 10_000 });
      checkDeadlines(h, 10_000);
      assert.equal(applied[0][1].type, "fail");
    });
    await t.step("a leftover waits for its stale Job without a timeout", () => {
      const waiting: NodeState = { phase: "waitingStale", since: 0, uid: "old" };
      const { h, applied } = host(new Map([["left", waiting]]), { nodeTimeoutMs: 10_000 });
      assert.equal(checkDeadlines(h, 10_000), Infinity);
      assert.deepEqual(applied, []);
    });
    await t.step("a stalled Job is reported once due, and due again after the repeat", async () => {
      const pending: V1Pod = unschedulablePod("0/1 nodes are available");
      const states = new Map([["j-a", running]]);
      const { h, events } = host(states, { stallAfterMs: 30_000, stallRepeatMs: 60_000 }, [
        pending,
      ]);
      assert.equal(checkDeadlines(h, 10_000), 20_000);
      assert.equal(checkDeadlines(h, 30_000), 60_000);
      await Promise.resolve();
      assert.equal(states.get("j-a")!.stallCheckedAt, 30_000);
      assert.equal(events.length, 1);
      assert.equal(events[0].kind, "stalled");
    });
  },
});

Deno.test({
  name: "checkBlocked() applies each blocked node's verdict and returns the next wait",
  permissions: "none",
  fn() {
    const states = new Map<string, NodeState>([
      ["j-a", { phase: "blocked", since: 0, blockedAt: 0, reason: "pod x" }],
      ["j-b", { phase: "blocked", since: 3_000, blockedAt: 3_000, reason: "pod y" }],
    ]);
    const { h, applied } = host(states, { blockedRetryMs: 5_000 });
    assert.equal(checkBlocked(h, 5_000), 3_000);
    assert.deepEqual(applied, [["j-a", { type: "unblock" }]]);
  },
});

const down = new ApiError({
  status: 0,
  reason: "Unreachable",
  verb: "delete",
  resource: "jobs",
  message: "connection refused",
});

Deno.test({
  name:
    "--delete-timed-out tracks its DELETE, retries it through an outage and warns when it cannot",
  permissions: "none",
  async fn(t) {
    const running: NodeState = { phase: "running", since: 0, startedAt: 0, uid: "u1" };
    const options = { nodeTimeoutMs: 60_000, deleteTimedOut: true, namespace: "ops" };
    /** The events of a node timed out whose DELETE does as `deleteJob` says, to its end. */
    const expired = async (deleteJob: DeadlineHost["api"]["deleteJob"]) => {
      const made = host(new Map([["j-a", running]]), options, undefined, deleteJob);
      checkDeadlines(made.h, 61_000);
      await runOn(made.clock, made.settled());
      return made.events;
    };
    await t.step("an outage once: tracked, sent again, said once sent", async () => {
      let calls = 0;
      const deleteJob = () => ++calls === 1 ? Promise.reject(down) : Promise.resolve();
      const { h, events, settled, clock } = host(
        new Map([["j-a", running]]),
        options,
        undefined,
        deleteJob,
      );
      checkDeadlines(h, 61_000);
      await Promise.resolve();
      assert.deepEqual(events, [], "not said before it is sent");
      await runOn(clock, settled());
      assert.equal(calls, 2);
      assert.deepEqual(events, [{ kind: "deleting", job: "j-a", why: "it timed out" }]);
    });
    await t.step("refused for good: a warning with the kubectl command", async () => {
      const forbidden = new ApiError({
        status: 403,
        reason: "Forbidden",
        verb: "delete",
        resource: "jobs",
        message: "forbidden",
      });
      const events = await expired(() => Promise.reject(forbidden));
      assert.equal(events.length, 1);
      assert.equal(events[0].kind, "notice");
      assert.match(
        (events[0] as { message: string }).message,
        /cannot delete timed-out Job j-a .*forbidden.*kubectl delete job j-a -n ops/,
      );
    });
    await t.step("an outage past the deadline: the warning too", async () => {
      const events = await expired(() => Promise.reject(down));
      assert.match((events[0] as { message: string }).message, /kubectl delete job j-a -n ops/);
    });
  },
});
