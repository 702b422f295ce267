import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { ApiError } from "../kube/client.ts";
import { labelValue, type RunIdentity, trackingKeys } from "../job.ts";
import type { NodeEvent } from "./node_state.ts";
import type { DispatchEvent, Target } from "./fanout_types.ts";
import { FakeClock, runOn } from "../testing/fake_api.ts";
import { type StartHost, startNode } from "./start.ts";

const RUN: RunIdentity = { keys: trackingKeys("job-dispatcher"), prefix: "upgrade" };
const TARGET: Target = {
  node: { name: "node-1", uid: "n-uid" },
  name: "upgrade-node-1",
  job: () => ({ metadata: { name: "upgrade-node-1" } }),
};

function apiError(status: number, verb = "create"): ApiError {
  return new ApiError({ status, reason: "x", verb, resource: "jobs", message: `status ${status}` });
}

/** How an {@linkcode apiError} reads in a reason. */
function said(status: number, verb = "create"): string {
  return apiError(status, verb).message;
}

const OURS: V1Job = {
  metadata: { name: TARGET.name, uid: "old", labels: { [RUN.keys.owner]: labelValue("upgrade") } },
};

/** What a start did through its host, in order. */
type Step =
  | ["apply", NodeEvent["type"], string?]
  | ["outage"]
  | ["paused"]
  | ["stop"]
  | ["adopt", string]
  | ["ok"]
  | ["event", DispatchEvent["kind"]]
  | ["release", string]
  | ["created", string]
  | ["meet", string];

function host(over: Partial<StartHost>, halted = false) {
  const steps: Step[] = [];
  const h: StartHost = {
    api: {
      createJob: (job) => Promise.resolve({ ...job, metadata: { ...job.metadata, uid: "new" } }),
      getJob: () => Promise.resolve(undefined),
    },
    reporter: { event: (e) => void steps.push(["event", e.kind]), progress: () => {} },
    clock: new FakeClock(),
    run: RUN,
    signal: new AbortController().signal,
    halted: () => halted,
    state: () => ({ phase: "creating", since: 0 }),
    apply: (_, e) =>
      void steps.push("reason" in e ? ["apply", e.type, e.reason] : ["apply", e.type]),
    outageHit: () => void steps.push(["outage"]),
    outageFailed: () => void steps.push(["paused"]),
    stop: () => void steps.push(["stop"]),
    adopt: (_, job) => void steps.push(["adopt", job.metadata!.uid!]),
    ok: () => void steps.push(["ok"]),
    track: (work) => void work.then(() => {}),
    created: (_, job) => void steps.push(["created", job.metadata!.uid!]),
    meet: (_, job) => void steps.push(["meet", job.metadata!.uid!]),
    ...over,
  };
  return { h, steps };
}

Deno.test({
  name: "startNode() goes through its steps and stops at the first that cannot go on",
  permissions: "none",
  async fn(t) {
    const created: Step[] = [["ok"], ["apply", "created"], ["event", "created"], [
      "created",
      "new",
    ]];
    const cases: { name: string; over: Partial<StartHost>; halted?: boolean; want: Step[] }[] = [
      { name: "nothing to check: the Job is created", over: {}, want: created },
      {
        name: "the re-read refuses the node: it fails with the reason",
        over: { recheck: () => Promise.resolve("it left the selection") },
        want: [["apply", "fail", "it left the selection"]],
      },
      {
        name: "the re-read throws: it fails naming the node",
        over: { recheck: () => Promise.reject(apiError(400, "get")) },
        want: [["apply", "fail", `cannot re-read node node-1: ${said(400, "get")}`]],
      },
      {
        name: "the re-read meets an outage: requeued, never failed",
        over: { recheck: () => Promise.reject(apiError(503, "get")) },
        want: [["outage"]],
      },
      {
        name: "a blocking pod: the node waits, blocked",
        over: { blockers: () => Promise.resolve("pod a/b runs") },
        want: [["apply", "blocked", "pod a/b runs"]],
      },
      {
        name: "the blocking pods cannot be listed: it fails",
        over: { blockers: () => Promise.reject(apiError(400, "list")) },
        want: [["apply", "fail", `cannot list the pods of node node-1: ${said(400, "list")}`]],
      },
      {
        name: "listing the blocking pods meets an outage",
        over: { blockers: () => Promise.reject(apiError(0, "list")) },
        want: [["outage"]],
      },
      {
        name: "no blocking pod: the Job is created",
        over: { blockers: () => Promise.resolve(undefined) },
        want: created,
      },
      {
        name: "prepared: then the Job is created",
        over: { prepare: () => Promise.resolve(undefined) },
        want: [["apply", "prepare"], ["apply", "prepared"], ...created],
      },
      {
        name: "the preparation fails: the node fails with its reason",
        over: { prepare: () => Promise.resolve("cannot drain node node-1: a PDB") },
        want: [["apply", "prepare"], ["apply", "fail", "cannot drain node node-1: a PDB"]],
      },
      {
        name: "the preparation throws: it fails naming the node",
        over: { prepare: () => Promise.reject(new Error("boom")) },
        want: [["apply", "prepare"], ["apply", "fail", "cannot prepare node node-1: boom"]],
      },
      {
        name: "the preparation meets an outage",
        over: { prepare: () => Promise.reject(apiError(429)) },
        want: [["apply", "prepare"], ["outage"]],
      },
      {
        name: "halted with a preparation: requeued, and the node given back",
        over: {
          prepare: () => Promise.resolve(undefined),
          release: (_, why) => Promise.resolve(void steps.push(["release", why])),
        },
        halted: true,
        want: [["release", "abandoned"], ["apply", "requeue"]],
      },
      {
        name: "halted without a preparation: requeued",
        over: {},
        halted: true,
        want: [["apply", "requeue"]],
      },
      {
        name: "the create fails: the node fails naming its Job",
        over: { api: { createJob: () => Promise.reject(apiError(422)), getJob: () => never() } },
        want: [["apply", "fail", `cannot create Job upgrade-node-1: ${said(422)}`]],
      },
      {
        name: "the create meets an outage",
        over: { api: { createJob: () => Promise.reject(apiError(500)), getJob: () => never() } },
        want: [["outage"]],
      },
      {
        name: "a stale Job replaced: the event says so",
        over: { state: () => ({ phase: "creating", since: 0, replaced: true }) },
        want: [["ok"], ["apply", "created"], ["event", "replaced"], ["created", "new"]],
      },
      {
        name: "a Job of its name exists and is ours: met",
        over: { api: conflict(() => Promise.resolve(OURS)) },
        want: [["meet", "old"]],
      },
      {
        name: "a Job of its name exists and is not ours: it fails, left alone",
        over: { api: conflict(() => Promise.resolve({ metadata: { name: TARGET.name } })) },
        want: [[
          "apply",
          "fail",
          `a Job named upgrade-node-1 exists without label ${RUN.keys.owner}; it is not ours ` +
          "and is left alone: delete it or choose another --name-prefix",
        ]],
      },
      {
        name: "the existing Job is gone by the read: requeued",
        over: { api: conflict(() => Promise.resolve(undefined)) },
        want: [["apply", "requeue"]],
      },
      {
        name: "the existing Job cannot be read: it fails",
        over: { api: conflict(() => Promise.reject(apiError(403, "get"))) },
        want: [["apply", "fail", `cannot read existing Job upgrade-node-1: ${said(403, "get")}`]],
      },
      {
        name: "reading the existing Job meets an outage",
        over: { api: conflict(() => Promise.reject(apiError(503, "get"))) },
        want: [["outage"]],
      },
    ];
    // The release case pushes onto the steps of its own host.
    let steps: Step[] = [];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const made = host(c.over, c.halted);
        steps = made.steps;
        await startNode(made.h, TARGET);
        assert.deepEqual(steps, c.want);
      });
    }
  },
});

function never(): Promise<never> {
  return Promise.reject(new Error("not called"));
}

function conflict(getJob: StartHost["api"]["getJob"]): StartHost["api"] {
  return { createJob: () => Promise.reject(apiError(409)), getJob };
}

/** An error of a create whose answer was lost, as kube/client.ts marks it. */
function lostAnswer(status = 504): ApiError {
  const e = apiError(status);
  e.uncertain = true;
  return e;
}

const FINISHED_GOING: V1Job = {
  metadata: { ...OURS.metadata, deletionTimestamp: new Date(0) },
  status: { conditions: [{ type: "Complete", status: "True" }] },
};

Deno.test({
  name: "startNode() resolves a create whose answer was lost by reading, never by sending it again",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; reads: (V1Job | undefined | ApiError)[]; want: Step[] }[] = [
      {
        name: "our Job is there: adopted",
        reads: [OURS],
        want: [["apply", "unsure"], ["paused"], ["ok"], ["adopt", "old"]],
      },
      {
        name: "our Job, finished and being deleted by its TTL: adopted all the same",
        reads: [FINISHED_GOING],
        want: [["apply", "unsure"], ["paused"], ["ok"], ["adopt", "old"]],
      },
      {
        name: "no Job: the create was not stored; requeued, still unsure, starts still paused",
        reads: [undefined],
        // No "ok": the read answering proves reads work, not creates (a
        // webhook refusing every create with a 500 was asked again at once).
        want: [["apply", "unsure"], ["paused"], ["apply", "requeue"]],
      },
      {
        name: "the read meets an outage: read again, the node keeps its slot",
        reads: [apiError(503, "get"), apiError(0, "get"), OURS],
        want: [["apply", "unsure"], ["paused"], ["paused"], ["paused"], ["ok"], ["adopt", "old"]],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        let creates = 0;
        const reads = [...c.reads];
        const { h, steps } = host({
          api: {
            createJob: () => (creates++, Promise.reject(lostAnswer())),
            getJob: () => {
              const r = reads.shift();
              return r instanceof ApiError ? Promise.reject(r) : Promise.resolve(r);
            },
          },
        });
        await runOn(h.clock as FakeClock, startNode(h, TARGET));
        assert.equal(creates, 1, "the create was sent once");
        assert.deepEqual(steps, c.want);
      });
    }
    await t.step("a requeued unsure node whose create lands late: its 409 adopts it", async () => {
      const { h, steps } = host({
        api: conflict(() => Promise.resolve(OURS)),
        state: () => ({ phase: "creating", since: 0, unsure: true }),
      });
      await startNode(h, TARGET);
      assert.deepEqual(steps, [["adopt", "old"]]);
    });
  },
});

Deno.test({
  name: "startNode() never creates again a lost create's Job that its TTL may have collected",
  permissions: "none",
  async fn(t) {
    const withTtl = (secs: number): Target => ({
      ...TARGET,
      job: () => ({
        metadata: { name: TARGET.name },
        spec: { ttlSecondsAfterFinished: secs } as never,
      }),
    });
    const cases = [
      { name: "TTL 0: no Job proves nothing", target: withTtl(0), outages: 0, want: "collected" },
      {
        name: "TTL 30 s, read at once: not stored",
        target: withTtl(30),
        outages: 0,
        want: "requeue",
      },
      { name: "TTL 30 s, reads lost for 35 s", target: withTtl(30), outages: 7, want: "collected" },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        let creates = 0;
        let outages = c.outages;
        const { h, steps } = host({
          api: {
            createJob: () => (creates++, Promise.reject(lostAnswer())),
            getJob: () =>
              outages-- > 0 ? Promise.reject(apiError(0, "get")) : Promise.resolve(undefined),
          },
          state: () => ({ phase: "creating", since: 0, unsure: true }),
        });
        await runOn(h.clock as FakeClock, startNode(h, c.target));
        assert.equal(creates, 1, "the create was sent once");
        const last = steps.at(-1)!;
        assert.deepEqual(last.slice(0, 2), ["apply", c.want], JSON.stringify(steps));
      });
    }
  },
});

Deno.test({
  name: "startNode() re-checks a prepared node just before its create",
  permissions: "none",
  async fn(t) {
    const replaced = "the node was replaced under the same name (UID n-uid is now n2)";
    await t.step("replaced during the drain: failed with the reason, no Job", async () => {
      let creates = 0;
      const { h, steps } = host({
        prepare: () => Promise.resolve(undefined),
        release: (_, why) => Promise.resolve(void steps.push(["release", why])),
        recheckBeforeCreate: () => Promise.resolve(replaced),
        api: { createJob: () => (creates++, never()), getJob: () => never() },
      });
      await startNode(h, TARGET);
      assert.equal(creates, 0);
      assert.deepEqual(steps, [
        ["apply", "prepare"],
        ["apply", "prepared"],
        ["release", "abandoned"],
        ["apply", "fail", replaced],
      ]);
    });
    await t.step("still the same node: the Job is created", async () => {
      const checked: string[] = [];
      const { h, steps } = host({
        prepare: () => Promise.resolve(undefined),
        recheckBeforeCreate: (t) => Promise.resolve(void checked.push(t.node.name)),
      });
      await startNode(h, TARGET);
      assert.deepEqual(checked, ["node-1"]);
      assert.deepEqual(steps.at(-1), ["created", "new"]);
    });
    await t.step("the re-read meets an outage: requeued, never failed", async () => {
      const { h, steps } = host({
        prepare: () => Promise.resolve(undefined),
        recheckBeforeCreate: () => Promise.reject(apiError(503, "get")),
      });
      await startNode(h, TARGET);
      assert.deepEqual(steps, [["apply", "prepare"], ["apply", "prepared"], ["outage"]]);
    });
  },
});

Deno.test({
  name:
    "startNode() stops new starts on a 403 mid-run; the node is given back and requeued, not failed",
  permissions: "none",
  async fn(t) {
    const released: string[] = [];
    const release = (_: Target, why: string) => Promise.resolve(void released.push(why));
    const cases: { name: string; over: Partial<StartHost>; want: Step[]; released: string[] }[] = [
      {
        name: "the re-read and claim refused",
        over: { recheck: () => Promise.reject(apiError(403, "patch")) },
        want: [["stop"], ["apply", "requeue"]],
        released: [],
      },
      {
        name: "the blocking pods may not be listed",
        over: { blockers: () => Promise.reject(apiError(403, "list")) },
        want: [["stop"], ["apply", "requeue"]],
        released: [],
      },
      {
        name: "the drain refused: the node given back",
        over: { prepare: () => Promise.reject(apiError(403, "list")), release },
        want: [["apply", "prepare"], ["stop"], ["apply", "requeue"]],
        released: ["abandoned"],
      },
      {
        name: "the create refused after the drain: the node given back",
        over: {
          prepare: () => Promise.resolve(undefined),
          release,
          api: { createJob: () => Promise.reject(apiError(403)), getJob: () => never() },
        },
        want: [["apply", "prepare"], ["apply", "prepared"], ["stop"], ["apply", "requeue"]],
        released: ["abandoned"],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        released.length = 0;
        const { h, steps } = host(c.over);
        await startNode(h, TARGET);
        assert.deepEqual(steps, c.want);
        assert.deepEqual(released, c.released);
      });
    }
    await t.step("a namespace being deleted still fails the node", async () => {
      const terminating = apiError(403);
      terminating.causes = [{ reason: "NamespaceTerminating" }];
      const { h, steps } = host({
        api: { createJob: () => Promise.reject(terminating), getJob: () => never() },
      });
      await startNode(h, TARGET);
      assert.equal(steps[0][1], "fail");
    });
    await t.step("an admission webhook's 403 fails only its node: the run goes on", async () => {
      // Gatekeeper and others deny with code 403; the policy may be about
      // this node alone (its name, its labels), not a permission the run lacks.
      const denied = new ApiError({
        status: 403,
        reason: "Forbidden",
        verb: "create",
        resource: "jobs",
        message: 'admission webhook "validation.gatekeeper.sh" denied the request: ' +
          "[protected-node] node-1 takes no maintenance Jobs",
      });
      const { h, steps } = host({
        api: { createJob: () => Promise.reject(denied), getJob: () => never() },
      });
      await startNode(h, TARGET);
      assert.deepEqual(steps.map((s) => s[0] + " " + (s[1] ?? "")), ["apply fail"]);
    });
  },
});
