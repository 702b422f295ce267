import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { explainedReason, failureReason, PodReader, stallDue, stalledBy } from "./explain.ts";
import { ApiError } from "../kube/client.ts";

const NOT_SCHEDULED = { type: "PodScheduled", status: "False", reason: "Unschedulable" };
const UNSCHEDULABLE: V1Pod = { status: { phase: "Pending", conditions: [NOT_SCHEDULED] } };
const RUNNING: V1Pod = { status: { phase: "Running" } };
const EXITED: V1Pod = {
  status: {
    phase: "Failed",
    containerStatuses: [{
      name: "install",
      image: "i",
      imageID: "",
      ready: false,
      restartCount: 0,
      state: { terminated: { exitCode: 1, message: "no backend" } },
    }],
  },
};

Deno.test({
  name:
    "failureReason() and explainedReason() prefer the pods' word, keeping the condition's reason",
  permissions: "none",
  async fn(t) {
    const failed = { phase: "failed", final: true, reason: "BackoffLimitExceeded" } as const;
    const cases: [string, string, string][] = [
      ["a reason alone", failureReason({ reason: "DeadlineExceeded" }), "DeadlineExceeded"],
      [
        "a message and a reason",
        failureReason({ reason: "BackoffLimitExceeded", message: "Job has reached the limit" }),
        "Job has reached the limit [BackoffLimitExceeded]",
      ],
      [
        "a failed pod",
        explainedReason(failed, [EXITED]),
        "install exited 1: no backend [BackoffLimitExceeded]",
      ],
      ["no pods readable", explainedReason(failed, undefined), "BackoffLimitExceeded"],
      ["pods that say nothing", explainedReason(failed, [RUNNING]), "BackoffLimitExceeded"],
    ];
    for (const [what, got, want] of cases) await t.step(what, () => assert.equal(got, want));
  },
});

Deno.test({
  name: "stallDue() is due after the first wait, then every repeat",
  permissions: "none",
  async fn(t) {
    const cases: [string, number | undefined, number, number][] = [
      ["just started", undefined, 1_000, 120_000],
      ["at the first check", undefined, 121_000, 0],
      ["checked once", 121_000, 200_000, 221_000],
      ["due again", 121_000, 421_000, 0],
    ];
    for (const [what, checkedAt, now, want] of cases) {
      await t.step(what, () => {
        const s = {
          phase: "running" as const,
          since: 1_000,
          startedAt: 1_000,
          stallCheckedAt: checkedAt,
        };
        assert.equal(stallDue(s, now, 120_000, 300_000), want);
      });
    }
  },
});

Deno.test({
  name: "stalledBy() names a stall only when every pod is stuck",
  permissions: "none",
  async fn(t) {
    const cases: [string, V1Pod[], string | undefined][] = [
      ["no pods", [], undefined],
      ["one stuck pod", [UNSCHEDULABLE], "Unschedulable"],
      ["one stuck, one running", [UNSCHEDULABLE, RUNNING], undefined],
      ["a running pod", [RUNNING], undefined],
    ];
    for (const [what, pods, want] of cases) {
      await t.step(what, () => assert.equal(stalledBy(pods), want));
    }
  },
});

Deno.test({
  name: "PodReader stops reading pods for the run after a 403, and says so once",
  permissions: "none",
  async fn() {
    const notices: string[] = [];
    let calls = 0;
    const [verb, resource, message] = ["list", "pods", "forbidden"];
    const refusal = new ApiError({ status: 403, reason: "Forbidden", verb, resource, message });
    const reader = new PodReader({
      listPods: () => {
        calls++;
        return Promise.reject(refusal);
      },
    }, (m) => notices.push(m));
    assert.equal(reader.readable, true);
    assert.equal(await reader.list("j-n1"), undefined);
    assert.equal(await reader.list("j-n2"), undefined);
    assert.equal(reader.readable, false);
    assert.equal(calls, 1);
    assert.deepEqual(notices, [
      "cannot list pods (Cannot list pods: forbidden); failures and stalls are not explained",
    ]);
    assert.equal(new PodReader({}, () => {}).readable, false);
  },
});
