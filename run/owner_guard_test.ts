import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { trackingKeys } from "../job.ts";
import { withServer } from "../testing/loopback.ts";
import {
  activeByOwner,
  holdPatch,
  isJobActive,
  OwnerGuard,
  releaseDecision,
  releasePatch,
  settlingJobs,
} from "./owner_guard.ts";

const KEY = "job-dispatcher/per-node-jobs";
const done = (type: "Complete" | "Failed" | "SuccessCriteriaMet") => ({
  status: { conditions: [{ type, status: "True" }] },
});

Deno.test("holdPatch() adds the finalizer and the label, testing UID and resourceVersion", {
  permissions: "none",
}, async (t) => {
  const tests = [
    { op: "test", path: "/metadata/uid", value: "u1" },
    { op: "test", path: "/metadata/resourceVersion", value: "7" },
  ];
  const cases: { name: string; meta: V1Job["metadata"]; want: unknown[] | undefined }[] = [
    {
      name: "an owner with neither finalizers nor labels",
      meta: { uid: "u1", resourceVersion: "7" },
      want: [
        ...tests,
        { op: "add", path: "/metadata/finalizers", value: [KEY] },
        { op: "add", path: "/metadata/labels", value: { [KEY]: "true" } },
      ],
    },
    {
      name: "an owner with other finalizers and labels keeps them",
      meta: { uid: "u1", resourceVersion: "7", finalizers: ["x/y"], labels: { a: "b" } },
      want: [
        ...tests,
        { op: "add", path: "/metadata/finalizers/-", value: KEY },
        { op: "add", path: "/metadata/labels/job-dispatcher~1per-node-jobs", value: "true" },
      ],
    },
    {
      name: "an owner that has both needs nothing",
      meta: { uid: "u1", resourceVersion: "7", finalizers: [KEY], labels: { [KEY]: "true" } },
      want: undefined,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => assert.deepEqual(holdPatch({ metadata: c.meta }, KEY), c.want));
  }
});

Deno.test("releasePatch() removes only our finalizer, at the index it was read", {
  permissions: "none",
}, async (t) => {
  await t.step("among others", () => {
    assert.deepEqual(releasePatch({ metadata: { uid: "u", finalizers: ["x/y", KEY] } }, KEY), [
      { op: "test", path: "/metadata/uid", value: "u" },
      { op: "test", path: "/metadata/finalizers/1", value: KEY },
      { op: "remove", path: "/metadata/finalizers/1" },
    ]);
  });
  await t.step("nothing when it is not there", () => {
    assert.equal(releasePatch({ metadata: { uid: "u", finalizers: ["x/y"] } }, KEY), undefined);
    assert.equal(releasePatch({ metadata: { uid: "u" } }, KEY), undefined);
  });
});

Deno.test("isJobActive() holds until Complete or Failed, when the pods are gone", {
  permissions: "none",
}, async (t) => {
  const cases = [
    { name: "no status", job: {}, want: true },
    {
      name: "SuccessCriteriaMet: pods may still terminate",
      job: done("SuccessCriteriaMet"),
      want: true,
    },
    { name: "Complete", job: done("Complete"), want: false },
    { name: "Failed", job: done("Failed"), want: false },
  ];
  for (const c of cases) await t.step(c.name, () => assert.equal(isJobActive(c.job), c.want));
});

Deno.test("releaseDecision() drops a finalizer only once no per-node Job of that owner is active", {
  permissions: "none",
}, async (t) => {
  const owner = (uid: string, extra: Partial<V1Job> = {}): V1Job => ({
    metadata: { uid, name: `o-${uid}`, ...extra.metadata },
    status: extra.status,
  });
  const jobs: V1Job[] = [
    { metadata: { ownerReferences: [{ kind: "Job", uid: "old", name: "o", apiVersion: "" }] } },
    {
      metadata: { ownerReferences: [{ kind: "Job", uid: "ours", name: "o", apiVersion: "" }] },
      ...done("Complete"),
    },
  ];
  const active = activeByOwner(jobs);
  assert.deepEqual([...active], [["old", 1]]);
  const cases = [
    { name: "ours, all finished", o: owner("ours"), want: true },
    { name: "ours, one still active", o: owner("ours"), active: [["ours", 1]], want: false },
    { name: "an earlier owner with an active Job", o: owner("old", done("Complete")), want: false },
    {
      name: "an earlier owner, finished, none active",
      o: owner("old2", done("Complete")),
      want: true,
    },
    {
      name: "an earlier owner being deleted, none active",
      o: owner("old2", { metadata: { deletionTimestamp: new Date() } }),
      want: true,
    },
    { name: "an earlier owner whose run is live", o: owner("old2"), want: false },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const counts = c.active ? new Map(c.active as [string, number][]) : active;
      assert.equal(releaseDecision(c.o, "ours", counts).release, c.want);
    });
  }
});

Deno.test("settlingJobs() counts Jobs whose outcome is decided but whose pods are not gone", {
  permissions: "none",
}, () => {
  const jobs = [
    {},
    done("SuccessCriteriaMet"),
    { status: { conditions: [{ type: "FailureTarget", status: "True" }] } },
    done("Complete"),
    done("Failed"),
    {
      status: {
        conditions: [
          { type: "SuccessCriteriaMet", status: "True" },
          ...done("Complete").status.conditions,
        ],
      },
    },
  ];
  assert.equal(settlingJobs(jobs), 2);
});

Deno.test(
  "OwnerGuard.release() waits for a decided Job to turn Complete, then drops the finalizer",
  async (t) => {
    const keys = trackingKeys("job-dispatcher");
    const ref = [{ kind: "Job", uid: "ours", name: "owner", apiVersion: "batch/v1" }];
    const ownerJob = { metadata: { name: "owner", uid: "ours", finalizers: [keys.guard] } };
    // The run counted the node on SuccessCriteriaMet; Complete follows a read later.
    const serve = (perNodeReads: V1Job[][]) => {
      let reads = 0;
      return (req: Request) => {
        if (req.method === "PATCH") return Response.json(ownerJob);
        const selector = new URL(req.url).searchParams.get("labelSelector");
        if (selector === `${keys.guard}=true`) {
          return Response.json({ metadata: {}, items: [ownerJob] });
        }
        const items = perNodeReads[Math.min(reads++, perNodeReads.length - 1)];
        return Response.json({ metadata: {}, items });
      };
    };
    const job = (cond: "SuccessCriteriaMet" | "Complete"): V1Job => ({
      metadata: { name: "node-task-a", ownerReferences: ref },
      ...done(cond),
    });
    const cases = [
      { name: "Complete comes within the wait", settleMs: 5000, reads: 2, patched: true },
      {
        name: "it does not: the finalizer stays for a later run",
        settleMs: 0,
        reads: 1,
        patched: false,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const lines: string[] = [];
        const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
        await withServer(
          serve([[job("SuccessCriteriaMet")], [job("Complete")]]),
          async (kube, hits) => {
            const guard = new OwnerGuard({
              kube,
              namespace: "team",
              owner: { name: "owner", uid: "ours" },
              keys,
              log,
              settleMs: c.settleMs,
              pollMs: 10,
            });
            await guard.release();
            // One read of the guarded owners, `reads` of the per-node Jobs.
            assert.equal(
              hits.filter((h) => h.method === "GET").length - 1,
              c.reads,
              lines.join("\n"),
            );
            assert.equal(hits.some((h) => h.method === "PATCH"), c.patched, lines.join("\n"));
            const said = lines.join("\n");
            if (c.patched) {
              assert.match(said, /waiting for 1 per-node Jobs .*\n.*removed finalizer/);
            } else {assert.match(
                said,
                /kept finalizer .*: 1 of its per-node Jobs are still active/,
              );}
          },
        );
      });
    }
  },
);
