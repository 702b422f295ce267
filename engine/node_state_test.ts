import assert from "node:assert/strict";
import { next, type NodeEvent, type NodeState, type Phase } from "./node_state.ts";

const at = (phase: Phase, extra: Partial<NodeState> = {}): NodeState => ({
  phase,
  since: 0,
  ...extra,
});

Deno.test({
  name: "next() moves a node along one edge per event, and ignores what does not apply",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; from: NodeState; event: NodeEvent; want: Partial<NodeState> }[] = [
      {
        name: "queued starts: creating",
        from: at("queued"),
        event: { type: "start" },
        want: { phase: "creating" },
      },
      {
        name: "creating requeues (outage): queued",
        from: at("creating"),
        event: { type: "requeue" },
        want: { phase: "queued" },
      },
      {
        name: "creating prepares (cordon, drain): draining",
        from: at("creating"),
        event: { type: "prepare" },
        want: { phase: "draining" },
      },
      {
        name: "draining prepared: creating",
        from: at("draining"),
        event: { type: "prepared" },
        want: { phase: "creating" },
      },
      {
        name: "draining requeues (outage during the drain): queued, never failed",
        from: at("draining"),
        event: { type: "requeue" },
        want: { phase: "queued" },
      },
      {
        name: "draining fails (drain timeout): failed with the reason",
        from: at("draining"),
        event: { type: "fail", reason: "drain did not finish within 10 s" },
        want: { phase: "failed", reason: "drain did not finish within 10 s" },
      },
      {
        name: "creating blocked by a pod: blocked, first blocked now",
        from: at("creating"),
        event: { type: "blocked", reason: "pod a/db-0" },
        want: { phase: "blocked", reason: "pod a/db-0", blockedAt: 7 },
      },
      {
        name: "blocked again keeps when it was first blocked",
        from: at("creating", { blockedAt: 2 }),
        event: { type: "blocked", reason: "pod a/db-0" },
        want: { phase: "blocked", blockedAt: 2 },
      },
      {
        name: "blocked unblocks: queued, to be checked again",
        from: at("blocked", { blockedAt: 2 }),
        event: { type: "unblock" },
        want: { phase: "queued", blockedAt: 2 },
      },
      {
        name: "blocked past its timeout: stillBlocked, final",
        from: at("blocked", { blockedAt: 2 }),
        event: { type: "blockedTimeout", reason: "still blocked after 60 s" },
        want: { phase: "stillBlocked", reason: "still blocked after 60 s" },
      },
      {
        name: "queued ignores prepared",
        from: at("queued"),
        event: { type: "prepared" },
        want: { phase: "queued" },
      },
      {
        name: "finishing never requeues: a success once seen is kept",
        from: at("finishing", { afterStarted: true }),
        event: { type: "requeue" },
        want: { phase: "finishing", afterStarted: true },
      },
      {
        name: "adopted keeps the start already seen: the node timeout is not reset",
        from: at("queued", { startedAt: 2 }),
        event: { type: "adopted", uid: "u1" },
        want: { phase: "running", startedAt: 2, uid: "u1" },
      },
      {
        name: "creating unsure: marked, still creating",
        from: at("creating"),
        event: { type: "unsure" },
        want: { phase: "creating", unsure: true },
      },
      {
        name: "an unsure node adopted: running, no longer unsure",
        from: at("queued", { unsure: true }),
        event: { type: "adopted", uid: "u1" },
        want: { phase: "running", unsure: undefined, startedAt: 7 },
      },
      {
        name: "finishing noted: says what it waits for, same phase",
        from: at("finishing", { afterStarted: true }),
        event: { type: "note", waitingFor: "post-success work retrying" },
        want: { phase: "finishing", waitingFor: "post-success work retrying" },
      },
      {
        name: "running noted with pod failures: counted",
        from: at("running"),
        event: { type: "note", waitingFor: "Job retrying", podFailures: 2 },
        want: { phase: "running", podFailures: 2 },
      },
      {
        name: "a noted node that moves on forgets what it waited for",
        from: at("running", { waitingFor: "Job retrying" }),
        event: { type: "succeeded", afterWork: false, final: true },
        want: { phase: "succeeded", waitingFor: undefined },
      },
      {
        name: "creating created: running, started now, with the Job's UID",
        from: at("creating"),
        event: { type: "created", uid: "u1" },
        want: { phase: "running", uid: "u1", startedAt: 7 },
      },
      {
        name: "queued adopts a Job of this owner: running",
        from: at("queued"),
        event: { type: "adopted", uid: "u1", counted: true },
        want: { phase: "running", uid: "u1", counted: true },
      },
      {
        name: "a running stale Job: waitingStale, to be replaced",
        from: at("queued"),
        event: { type: "staleFound", uid: "s1", active: true },
        want: { phase: "waitingStale", uid: "s1", replaced: true },
      },
      {
        name: "a finished stale Job: deleting",
        from: at("creating"),
        event: { type: "staleFound", uid: "s1", active: false },
        want: { phase: "deleting", uid: "s1", replaced: true },
      },
      {
        name: "the stale Job finished: deleting",
        from: at("waitingStale", { uid: "s1" }),
        event: { type: "staleFinished" },
        want: { phase: "deleting", uid: "s1" },
      },
      {
        name: "the stale Job is gone: queued again, replaced",
        from: at("deleting", { uid: "s1", replaced: true }),
        event: { type: "staleGone" },
        want: { phase: "queued", uid: undefined, replaced: true },
      },
      {
        name: "running succeeded without post-success work: succeeded",
        from: at("running"),
        event: { type: "succeeded", afterWork: false, final: false },
        want: { phase: "succeeded" },
      },
      {
        name: "running succeeded (Complete) with post-success work: finishing, work begun",
        from: at("running"),
        event: { type: "succeeded", afterWork: true, final: true },
        want: { phase: "finishing", afterStarted: true },
      },
      {
        name: "succeeded with the Job's own end time: finishing from then on, jobEndedAt that time",
        from: at("running"),
        event: { type: "succeeded", afterWork: true, final: true, endedAt: 3 },
        want: { phase: "finishing", afterStarted: true, jobEndedAt: 3 },
      },
      {
        name: "SuccessCriteriaMet with post-success work: finishing, waiting for Complete",
        from: at("running"),
        event: { type: "succeeded", afterWork: true, final: false },
        want: { phase: "finishing", afterStarted: false },
      },
      {
        name: "Complete while finishing: the work begins",
        from: at("finishing", { afterStarted: false }),
        event: { type: "complete" },
        want: { phase: "finishing", afterStarted: true },
      },
      {
        name: "the work is done: succeeded",
        from: at("finishing", { afterStarted: true }),
        event: { type: "afterDone" },
        want: { phase: "succeeded" },
      },
      {
        name: "the work failed: failed with its reason",
        from: at("finishing", { afterStarted: true }),
        event: { type: "afterDone", reason: "not labelled" },
        want: { phase: "failed", reason: "not labelled" },
      },
      {
        name: "running failed, pods to read: explaining",
        from: at("running"),
        event: { type: "failed", reason: "BackoffLimitExceeded", explain: true },
        want: { phase: "explaining", reason: "BackoffLimitExceeded" },
      },
      {
        name: "running failed, no pods to read: failed",
        from: at("running"),
        event: { type: "failed", reason: "BackoffLimitExceeded", explain: false },
        want: { phase: "failed", reason: "BackoffLimitExceeded" },
      },
      {
        name: "explained: failed with the pod's reason",
        from: at("explaining"),
        event: { type: "explained", reason: "exit 3" },
        want: { phase: "failed", reason: "exit 3" },
      },
      {
        name: "collected unseen: unknown, not failed",
        from: at("running"),
        event: { type: "collected", reason: "collected" },
        want: { phase: "unknown", reason: "collected" },
      },
      {
        name: "a timeout fails a running node",
        from: at("running"),
        event: { type: "fail", reason: "timeout" },
        want: { phase: "failed", reason: "timeout" },
      },
      {
        name: "a stuck deletion fails its node",
        from: at("deleting"),
        event: { type: "fail", reason: "finalizers" },
        want: { phase: "failed", reason: "finalizers" },
      },
      // Edges that do not apply leave the state as it is.
      {
        name: "a final state stays",
        from: at("succeeded"),
        event: { type: "fail", reason: "x" },
        want: { phase: "succeeded" },
      },
      {
        name: "an unknown state stays",
        from: at("unknown"),
        event: { type: "start" },
        want: { phase: "unknown" },
      },
      {
        name: "running ignores start",
        from: at("running"),
        event: { type: "start" },
        want: { phase: "running" },
      },
      {
        name: "running ignores requeue",
        from: at("running"),
        event: { type: "requeue" },
        want: { phase: "running" },
      },
      {
        name: "a late created after a requeue is ignored",
        from: at("queued"),
        event: { type: "created", uid: "u" },
        want: { phase: "queued" },
      },
      {
        name: "staleGone of a running node is ignored",
        from: at("running"),
        event: { type: "staleGone" },
        want: { phase: "running" },
      },
      {
        name: "Complete twice starts the work once",
        from: at("finishing", { afterStarted: true }),
        event: { type: "complete" },
        want: { phase: "finishing", afterStarted: true },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const got = next(c.from, c.event, 7);
        assert.deepEqual(
          Object.fromEntries(Object.keys(c.want).map((k) => [k, got[k as keyof NodeState]])),
          c.want,
        );
        const marks = ["complete", "note", "unsure"].includes(c.event.type);
        if (c.want.phase === c.from.phase && !marks) {
          assert.equal(got, c.from, "an event that does not apply changes nothing");
        }
      });
    }
  },
});
