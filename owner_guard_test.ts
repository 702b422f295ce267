import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import {
  activeByOwner,
  holdPatch,
  isJobActive,
  releaseDecision,
  releasePatch,
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
