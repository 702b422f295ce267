import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { Maintenance } from "./maintenance.ts";
import { PDB_VIOLATION } from "./drain.ts";
import { isOutage } from "../engine/outage.ts";
import { status, withServer } from "../testing/loopback.ts";
import { pod } from "../testing/pods.ts";
import type { Clock } from "../base/clock.ts";

const KEY = "job-dispatcher/cordoned-by";
/** A node this run already cordoned: the cordon is a read, not a write. */
const NODE = {
  metadata: { name: "n1", uid: "uid-1", annotations: { [KEY]: "run-a" } },
  spec: { unschedulable: true },
};
/** A ReplicaSet's pod on n1: evicted by the drain, gone from the next list once evicted. */
const POD: V1Pod = pod("web-1", { node: "n1", controller: "ReplicaSet" });
const BLOCKED = () =>
  status(429, "TooManyRequests", {
    message: PDB_VIOLATION,
    causes: [{
      reason: "DisruptionBudget",
      message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
    }],
  });

/**
 * Drains n1 against a fake API server whose eviction answers are `answers`
 * in turn (the last one repeats); an evicted pod is gone from the next list.
 */
async function drain(
  answers: (() => Response)[],
  timeoutSecs = 1,
  opts: { clock?: Clock; retryMs?: number; disableEviction?: boolean; applied?: boolean } = {},
) {
  const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  let evictions = 0;
  const times: number[] = [];
  let gone = false;
  /** With `applied`: the eviction took effect whatever it answered; the pod terminates, slowly. */
  let terminating = false;
  let result: string | undefined;
  let error: unknown;
  await withServer((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") return Response.json(NODE);
    if (path === "/api/v1/pods") {
      const pod = terminating
        ? { ...POD, metadata: { ...POD.metadata, deletionTimestamp: new Date() } }
        : POD;
      return Response.json({ metadata: { resourceVersion: "1" }, items: gone ? [] : [pod] });
    }
    if (path.endsWith("/pods/web-1/eviction")) {
      times.push(Date.now());
      const answer = answers[Math.min(evictions++, answers.length - 1)]();
      if (opts.applied) terminating = true;
      else if (answer.status === 201) gone = true;
      return answer;
    }
    if (req.method === "DELETE" && path.endsWith("/pods/web-1")) {
      gone = true;
      return Response.json(POD);
    }
    return status(404, "NotFound");
  }, async (kube) => {
    const m = new Maintenance({
      kube,
      annotation: KEY,
      runId: "run-a",
      drain: {
        deleteEmptyDirData: false,
        force: false,
        timeoutSecs,
        disableEviction: opts.disableEviction ?? false,
      },
      uncordonOnFailure: false,
      warn: () => {},
      log: {
        info: (msg, fields) => lines.push({ level: "info", msg, fields: fields ?? {} }),
        warn: (msg, fields) => lines.push({ level: "warn", msg, fields: fields ?? {} }),
      },
      signal: new AbortController().signal,
      retryMs: opts.retryMs ?? 50,
      clock: opts.clock,
    });
    try {
      result = await m.prepare({ name: "n1", uid: "uid-1" });
    } catch (e) {
      error = e;
    }
  });
  return { result, error, evictions, times, lines };
}

Deno.test({
  name:
    "Maintenance.prepare() drains: a budget's 429 is retried, then fails naming it; an outage is thrown",
  async fn(t) {
    await t.step("429 twice, then evicted: the drain ends, the node may get its Job", async () => {
      const created = () => Response.json({ kind: "Status", status: "Success" }, { status: 201 });
      const { result, error, evictions } = await drain([BLOCKED, BLOCKED, created]);
      assert.equal(error, undefined);
      assert.equal(result, undefined);
      assert.equal(evictions, 3);
    });
    await t.step("429 until the timeout: the reason names the budget and the pod", async () => {
      const { result, evictions } = await drain([BLOCKED], 1);
      assert.equal(
        result,
        "drain did not finish within 1 s; blocked by PodDisruptionBudget shop/web-pdb " +
          "(The disruption budget web-pdb needs 2 healthy pods and has 2 currently); " +
          "pods still on the node: shop/web-1",
      );
      assert.ok(evictions > 2, `retried: ${evictions} evictions`);
    });
    await t.step(
      "429 for 100 s, retried every 5 s: the pod's eviction said once, the budget's refusal every 30 s",
      async () => {
        // A clock whose sleeps pass at once: 100 s of drain in a few ms.
        let now = 0;
        const clock: Clock = {
          now: () => now,
          sleep: (ms) => Promise.resolve(void (now += ms)),
        };
        const { result, evictions, lines } = await drain([BLOCKED], 100, { clock, retryMs: 5000 });
        assert.match(result ?? "", /^drain did not finish within 100 s; /);
        assert.equal(evictions, 21, "kubectl's pace: every 5 s");
        const said = lines.map((l) => [l.level, l.fields.event, l.fields.pod, l.fields.pdb]);
        const refused = ["warn", "evictionBlocked", "shop/web-1", "shop/web-pdb"];
        assert.deepEqual(said, [
          ["info", "evicting", "shop/web-1", undefined],
          refused,
          refused,
          refused,
          refused,
        ]);
        assert.equal(
          lines[1].msg,
          "node n1: cannot evict pod shop/web-1: blocked by PodDisruptionBudget shop/web-pdb: " +
            "The disruption budget web-pdb needs 2 healthy pods and has 2 currently " +
            "(retrying, 100 s left of --drain-timeout-secs)",
        );
        assert.equal(lines[0].msg, "node n1: evicting pod shop/web-1");
      },
    );
    await t.step("--disable-eviction: the pod's deletion is said as such", async () => {
      const { result, lines } = await drain([BLOCKED], 1, { disableEviction: true });
      assert.equal(result, undefined);
      assert.deepEqual(lines.map((l) => [l.level, l.msg]), [
        ["info", "node n1: deleting pod shop/web-1"],
      ]);
    });
    await t.step(
      "503 until the drain timeout: an outage is thrown for the engine to pause, never a reason",
      async () => {
        const { result, error, evictions } = await drain([() => status(503, "ServiceUnavailable")]);
        assert.equal(result, undefined);
        assert.ok(isOutage(error), String(error));
        assert.ok(evictions > 2, `retried until the timeout: ${evictions} evictions`);
      },
    );
  },
});

Deno.test({
  name: "a throttled or failed eviction is retried within the drain, never an outage",
  async fn(t) {
    const created = () => Response.json({ kind: "Status", status: "Success" }, { status: 201 });
    const throttled = () =>
      status(429, "TooManyRequests", {
        message: "Too many requests, please try again later.",
        headers: { "Retry-After": "1" },
      });
    await t.step(
      "Priority and Fairness' 429 with Retry-After: 1, twice: waited out, drained",
      async () => {
        const { result, error, evictions, times, lines } = await drain(
          [throttled, throttled, created],
          30,
        );
        assert.equal(error, undefined, String(error));
        assert.equal(result, undefined);
        assert.equal(evictions, 3);
        // The drain's own pace here is 50 ms: the server's Retry-After wins.
        for (let i = 1; i < times.length; i++) {
          assert.ok(times[i] - times[i - 1] >= 1000, `Retry-After honoured: ${times.join(", ")}`);
        }
        assert.deepEqual(lines.map((l) => l.fields.event), ["evicting", "evictionRetried"]);
        assert.match(lines[1].msg, /throttled by the API server \(429\).*\(retrying, \d+ s left/);
      },
    );
    await t.step(
      "a Retry-After longer than --drain-timeout-secs: the drain still ends at its timeout",
      async () => {
        const long = () =>
          status(429, "TooManyRequests", {
            message: "Too many requests, please try again later.",
            headers: { "Retry-After": "20" },
          });
        const t0 = Date.now();
        const { error } = await drain([long], 1);
        const took = Date.now() - t0;
        assert.ok(isOutage(error), String(error));
        assert.ok(took < 5000, `drain bounded by its 1 s timeout, took ${took} ms`);
      },
    );
    await t.step(
      "a 500 whose eviction was applied, the pod slow to go: a drain timeout, not an outage",
      async () => {
        // The answer was lost, the eviction was not: the pod terminates past
        // the drain timeout. kubectl drain fails the node on its timeout; an
        // outage here would pause every start and requeue the node cordoned.
        const { result, error, evictions } = await drain(
          [() => status(500, "InternalError", { message: "etcd leader changed" })],
          1,
          { applied: true },
        );
        assert.equal(error, undefined, String(error));
        assert.match(result ?? "", /drain did not finish within 1 s/);
        assert.equal(evictions, 1, "a pod on its way out is not evicted again");
      },
    );
    for (const code of [500, 503]) {
      await t.step(`one ${code}, then evicted: drained, no throw`, async () => {
        const { result, error, evictions } = await drain(
          [() => status(code, "InternalError", { message: "etcd leader changed" }), created],
          30,
        );
        assert.equal(error, undefined, String(error));
        assert.equal(result, undefined);
        assert.equal(evictions, 2);
      });
    }
  },
});
