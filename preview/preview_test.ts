import assert from "node:assert/strict";
import type { V1Node } from "@kubernetes/client-node";
import { estimateLine, loadDurations, previewPlan, type PreviewSource } from "./preview.ts";
import type { Kube } from "../kube/client.ts";
import { parseMaxUnavailable } from "../maintenance/budget.ts";
import { parseWindow } from "../maintenance/window.ts";
import type { MaintenanceConfig } from "../maintenance/config.ts";
import type { Preview } from "./plan_view.ts";
import { UsageError } from "../job.ts";

const node = (name: string, o: { ready?: boolean; cordoned?: boolean } = {}): V1Node => ({
  metadata: { name, uid: `uid-${name}` },
  spec: { unschedulable: o.cordoned },
  status: { conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }] },
});

const MAINTENANCE: MaintenanceConfig = {
  cordon: false,
  uncordonOnFailure: false,
  blockingPodSelectors: [],
  windows: [],
  retryFailed: false,
  postNodeDelaySecs: 0,
};

const SOURCE: PreviewSource = {
  namespace: "ops",
  prefix: "up",
  selection: "--node-selector pool=gpu",
  parallelism: 4,
  targets: ["n1", "n2", "n3"].map((n, i) => ({ node: n, job: `up-${n}`, wave: i ? 2 : 1 })),
  canary: true,
  skipped: [],
  cleanup: [],
  matched: [
    node("n1"),
    node("n2"),
    node("n3"),
    node("n4", { ready: false }),
    node("n5", {
      cordoned: true,
    }),
  ],
  maintenance: {
    ...MAINTENANCE,
    maxUnavailable: parseMaxUnavailable("3"),
    windows: [parseWindow("Mon 02:00-04:00 UTC")],
  },
  soakSecs: 10,
  output: "json",
  durations: { from: "r.json", seconds: [60], medianSecs: 60 },
};

/** No request is made without --drain: a client that would throw on any use. */
const NO_KUBE = new Proxy({}, {
  get: () => {
    throw new Error("the preview asked the cluster without --drain");
  },
}) as Kube;

Deno.test("previewPlan() -o json: the budget counts NotReady and cordoned nodes now; the window's next opening; the estimate", async () => {
  let out = "";
  const monday5 = Date.UTC(2026, 5, 1, 5); // Mon 05:00 UTC, after the window closed
  const code = await previewPlan(SOURCE, {
    kube: NO_KUBE,
    stdout: (t) => (out += t),
    now: monday5,
  });
  assert.equal(code, 0);
  const v = JSON.parse(out) as Preview;
  assert.deepEqual(v.budget, {
    spec: "3",
    max: 3,
    of: 5,
    unavailable: { count: 2, notReady: ["n4"], cordoned: ["n5"], inWork: [] },
    mayStartNow: 1,
  });
  assert.deepEqual(v.window, {
    windows: ["Mon 02:00-04:00 UTC"],
    openNow: false,
    closesAt: null,
    nextOpening: "2026-06-08T02:00:00.000Z",
    nextOpeningText: "Mon 02:00 UTC, in 6d21h",
  });
  // One at once (the budget's room now): the canary, its soak, two rounds.
  assert.equal(v.estimate?.seconds, 60 + 10 + 2 * 60);
});

Deno.test("previewPlan() says the window open now and when it closes", async () => {
  let out = "";
  const monday3 = Date.UTC(2026, 5, 1, 3);
  await previewPlan({ ...SOURCE, output: "text" }, {
    kube: NO_KUBE,
    stdout: (t) => (out += t),
    now: monday3,
  });
  assert.match(out, /^Window: Mon 02:00-04:00 UTC: open now, closes 2026-06-01T04:00:00.000Z$/m);
  assert.match(
    out,
    /^Budget: --max-unavailable 3 = 3 of 5 nodes; unavailable now 2 \(1 NotReady, 1 cordoned\); 1 may start now$/m,
  );
});

Deno.test("estimateLine() is the line a run logs; none without --estimate-from", () => {
  const { output: _, ...src } = SOURCE;
  assert.equal(
    estimateLine(src),
    "estimate: 3m10s for 3 nodes (per-node median 1m00s of 1 node in r.json; 1 at once)",
  );
  assert.equal(estimateLine({ ...src, durations: undefined }), undefined);
});

Deno.test("loadDurations() refuses a file it cannot read in one line naming it", () => {
  assert.throws(
    () => loadDurations("/no/such.json", () => undefined),
    (e: Error) =>
      e instanceof UsageError &&
      e.message ===
        "Cannot read --estimate-from /no/such.json: no such file or not readable; " +
          "give the JSON report of an earlier run (--report PATH)",
  );
});
