import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { ApiError } from "../kube/client.ts";
import { labelValue, type RunIdentity, trackingKeys } from "../job.ts";
import type { NodeEvent } from "./node_state.ts";
import type { DispatchEvent, Target } from "./fanout_types.ts";
import { FakeClock } from "../testing/fake_api.ts";
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
    halted: () => halted,
    state: () => ({ phase: "creating", since: 0 }),
    apply: (_, e) =>
      void steps.push("reason" in e ? ["apply", e.type, e.reason] : ["apply", e.type]),
    outageHit: () => void steps.push(["outage"]),
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
        over: { recheck: () => Promise.reject(apiError(403, "get")) },
        want: [["apply", "fail", `cannot re-read node node-1: ${said(403, "get")}`]],
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
        over: { blockers: () => Promise.reject(apiError(403, "list")) },
        want: [["apply", "fail", `cannot list the pods of node node-1: ${said(403, "list")}`]],
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
