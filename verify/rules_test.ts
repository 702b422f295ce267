import assert from "node:assert/strict";
import type { V1Job, V1Node, V1Pod } from "@kubernetes/client-node";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";
import {
  existingSmoke,
  keptVerdict,
  podsVerdict,
  smokeState,
  smokeTtlTooShort,
  verdictOf,
  verdictPatch,
} from "./rules.ts";

const FINISHED = Date.parse("2026-12-01T10:00:05.700Z");

function pod(name: string, ready?: { status: string; at: string }, deleting = false): V1Pod {
  return {
    metadata: {
      name,
      namespace: "gpu",
      ...(deleting && { deletionTimestamp: new Date() }),
    },
    status: ready
      ? {
        conditions: [{
          type: "Ready",
          status: ready.status,
          lastTransitionTime: ready.at as unknown as Date,
        }],
      }
      : {},
  };
}

Deno.test({
  name: "podsVerdict() passes only pods Ready with a Ready transition after the Job finished",
  permissions: "none",
  async fn(t) {
    const after = { status: "True", at: "2026-12-01T10:00:09Z" };
    const cases: [string, V1Pod[], ReturnType<typeof podsVerdict>][] = [
      ["every pod Ready after the Job", [pod("v1", after), pod("v2", after)], { ok: true }],
      [
        "the same second counts as after (both in whole seconds)",
        [pod("v1", { status: "True", at: "2026-12-01T10:00:05Z" })],
        { ok: true },
      ],
      ["no pod yet", [], { ok: false, why: "no pod matches app=v" }],
      ["a pod being deleted is passed over", [pod("old", after, true)], {
        ok: false,
        why: "no pod matches app=v",
      }],
      ["a pod not Ready", [pod("v1", after), pod("v2", { status: "False", at: after.at })], {
        ok: false,
        pod: "gpu/v2",
        why: "not Ready",
      }],
      ["a pod without conditions", [pod("v1")], { ok: false, pod: "gpu/v1", why: "not Ready" }],
      [
        "a pod Ready since before the Job finished proves nothing",
        [pod("v1", { status: "True", at: "2026-12-01T09:59:00Z" })],
        {
          ok: false,
          pod: "gpu/v1",
          why: "Ready only since 2026-12-01T09:59:00.000Z, before its node's Job finished",
        },
      ],
    ];
    for (const [name, pods, want] of cases) {
      await t.step(name, () => assert.deepEqual(podsVerdict(pods, FINISHED, "app=v"), want));
    }
  },
});

function job(
  conditions: { type: string; status: string; reason?: string; message?: string }[],
  created: string,
  uid = "node-uid",
): V1Job {
  return {
    metadata: {
      name: "up-verify-n1",
      creationTimestamp: created as unknown as Date,
      annotations: { "job-dispatcher/node-uid": uid },
    },
    status: { conditions },
  } as V1Job;
}

Deno.test({
  name:
    "smokeState() and existingSmoke() tell a smoke-test Job's state and what to do with one found",
  permissions: "none",
  async fn(t) {
    const late = "2026-12-01T10:00:06Z";
    const early = "2026-12-01T09:00:00Z";
    await t.step("running, succeeded, failed with its reason", () => {
      assert.deepEqual(smokeState(job([], late)), { state: "running" });
      assert.deepEqual(smokeState(job([{ type: "Complete", status: "True" }], late)), {
        state: "succeeded",
      });
      assert.deepEqual(
        smokeState(
          job([{
            type: "Failed",
            status: "True",
            reason: "BackoffLimitExceeded",
            message: "Job has reached the specified backoff limit",
          }], late),
        ),
        {
          state: "failed",
          reason: "Job has reached the specified backoff limit [BackoffLimitExceeded]",
        },
      );
    });
    const key = "job-dispatcher/node-uid";
    await t.step("one made for this node after its Job finished is adopted", () => {
      assert.equal(existingSmoke(job([], late), "node-uid", key, FINISHED), "adopt");
    });
    await t.step("an older one still running is waited for", () => {
      assert.equal(existingSmoke(job([], early), "node-uid", key, FINISHED), "wait");
    });
    await t.step("an older one with its outcome decided but not final is waited for", () => {
      // SuccessCriteriaMet and FailureTarget come before the pods are gone;
      // the Job controller sets Complete or Failed once they are.
      for (const type of ["SuccessCriteriaMet", "FailureTarget"]) {
        const decided = [{ type, status: "True" }];
        assert.equal(existingSmoke(job(decided, early), "node-uid", key, FINISHED), "wait", type);
      }
    });
    await t.step("an older finished one, or one of another node, is replaced", () => {
      const done = [{ type: "Complete", status: "True" }];
      assert.equal(existingSmoke(job(done, early), "node-uid", key, FINISHED), "replace");
      assert.equal(existingSmoke(job(done, late, "other"), "node-uid", key, FINISHED), "replace");
    });
  },
});

Deno.test({
  name:
    "keptVerdict() counts a smoke-test verdict kept on the node only for this smoke-test Job and this success of the node's Job",
  permissions: "none",
  async fn(t) {
    const KEY = "up/verified-job", KEYS = { templateHash: "up/template-hash" };
    const smoke = {
      metadata: {
        name: "up-verify-n1",
        ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "o", uid: "owner-1" }],
        annotations: { [KEYS.templateHash]: "h1" },
      },
    };
    const ended = Date.parse("2026-12-01T10:00:05Z");
    const passed = verdictOf(smoke, KEYS, "2026-12-01T10:00:30Z");
    const failed = verdictOf(smoke, KEYS, "2026-12-01T10:00:30Z", "verification: job x failed");
    const on = (v: unknown) => ({
      metadata: { annotations: { [KEY]: typeof v === "string" ? v : JSON.stringify(v) } },
    });
    const cases: [string, ReturnType<typeof on> | { metadata: object }, unknown][] = [
      ["none kept", { metadata: {} }, undefined],
      ["passed, kept after the Job ended", on(passed), passed],
      ["failed: the failure is kept too", on(failed), failed],
      ["kept the same second the Job ended", on({ ...passed, at: "2026-12-01T10:00:05Z" }), {
        ...passed,
        at: "2026-12-01T10:00:05Z",
      }],
      [
        "of an earlier success of the node's Job",
        on({ ...passed, at: "2026-12-01T09:00:00Z" }),
        undefined,
      ],
      ["of another owner", on({ ...passed, owner: "owner-0" }), undefined],
      ["of another template", on({ ...passed, templateHash: "h0" }), undefined],
      ["of another Job name", on({ ...passed, job: "other" }), undefined],
      ["not JSON", on("{"), undefined],
    ];
    for (const [name, node, want] of cases) {
      await t.step(name, () => assert.deepEqual(keptVerdict(node, KEY, smoke, KEYS, ended), want));
    }
  },
});

Deno.test({
  name:
    "smokeTtlTooShort() refuses a smoke-test template whose TTL may remove its Job between two of the verifier's polls",
  permissions: "none",
  async fn(t) {
    const cases: [string, number | undefined, boolean][] = [
      ["no TTL", undefined, false],
      ["0 s: gone at once", 0, true],
      ["3 s: under two polls of 2 s", 3, true],
      ["4 s: two polls", 4, false],
      ["1 h", 3600, false],
    ];
    for (const [name, ttl, refused] of cases) {
      await t.step(name, () => {
        const template = { spec: { ttlSecondsAfterFinished: ttl, template: {} } };
        const why = smokeTtlTooShort(template as never, 2);
        assert.equal(why !== undefined, refused, why ?? "no refusal");
        if (why) assert.match(why, new RegExp(`ttlSecondsAfterFinished ${ttl} .* at least 4`));
      });
    }
  },
});

Deno.test("verdictPatch() of a node read without annotations never replaces those it gained since the read", () => {
  const key = "job-dispatcher/verified-job";
  const read: V1Node = { metadata: { name: "n1", uid: "u1", resourceVersion: "5" } };
  const now: V1Node = {
    metadata: {
      name: "n1",
      uid: "u1",
      resourceVersion: "6",
      annotations: { "job-dispatcher/cordoned-by": "run-a" },
    },
  };
  const ops = verdictPatch(key, read, { job: "smoke-n1", at: "2026-12-01T10:00:00Z" });
  let after: V1Node | undefined;
  try {
    after = applyJsonPatch(now, ops as PatchOp[]);
  } catch {
    return; // refused (422): the writer reads the node again
  }
  assert.equal(after.metadata?.annotations?.["job-dispatcher/cordoned-by"], "run-a");
});
