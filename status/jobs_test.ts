import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { classifyJob, interpretStatus, jobName, trackingKeys } from "../job.ts";
import type { RecordNode } from "../report/record.ts";
import { jobOfCell, jobsOfRows, mergeJobs } from "./jobs.ts";
import { jobStatusOf } from "./view.ts";

const keys = trackingKeys("job-dispatcher");
const owner = { name: "hook", uid: "owner-uid" };

Deno.test("jobOfCell() gives each Status cell of the Jobs' table the conditions the printer read it from", () => {
  const cases: [cell: string, view: string, engine: string][] = [
    ["Complete", "Complete", "succeeded"],
    ["SuccessCriteriaMet", "Complete", "succeeded"],
    ["Failed", "Failed", "failed"],
    ["FailureTarget", "Failed", "failed"],
    ["Running", "Active", "active"],
    ["Suspended", "Active", "active"],
    // Neither finished nor judged: the whole Job says more (deletionTimestamp).
    ["Terminating", "Active", "active"],
  ];
  for (const [cell, view, engine] of cases) {
    const job = jobOfCell({ name: "j" }, cell);
    assert.equal(jobStatusOf(job), view, cell);
    assert.equal(interpretStatus(job).phase, engine, cell);
  }
});

Deno.test("jobsOfRows() vouches for the Jobs the run made and leaves the others to be read again", () => {
  const nodes = (phases: Record<string, RecordNode["phase"]>) =>
    Object.entries(phases).map(([node, phase]) => ({ node, phase }));
  const cases: {
    name: string;
    phases: Record<string, RecordNode["phase"]>;
    rows: [string, string][];
    vouched: string[];
    unvouched: string[];
  }[] = [
    {
      name: "every node's Job of the record",
      phases: { n0: "succeeded", n1: "running", n2: "finishing" },
      rows: [["up-n0", "Complete"], ["up-n1", "Complete"], ["up-n2", "Complete"]],
      vouched: ["up-n0", "up-n1", "up-n2"],
      unvouched: [],
    },
    {
      // The engine's first sight leaves a finished stale Job in place and the
      // node queued (engine/stale.ts firstSight: a replacement takes a slot);
      // it goes to `deleting` only when its turn comes. A node that failed
      // waiting for or deleting a stale Job leaves that Job behind.
      name:
        "a queued node's Job, or a failed one's, may be an earlier owner's waiting to be replaced",
      phases: { n0: "queued", n1: "failed", n2: "succeeded" },
      rows: [["up-n0", "Complete"], ["up-n1", "Complete"], ["up-n2", "Complete"]],
      vouched: ["up-n2"],
      unvouched: ["up-n0", "up-n1"],
    },
    {
      // The cell hides the deletion (Terminating) the engine's first sight
      // judges stale, or the message of a Failed Job.
      name: "a row whose cell hides what the view needs of the Job: Terminating, Failed",
      phases: { n0: "running", n1: "running", n2: "running" },
      rows: [["up-n0", "Terminating"], ["up-n1", "Failed"], ["up-n2", "Running"]],
      vouched: ["up-n2"],
      unvouched: ["up-n0", "up-n1"],
    },
    {
      name: "a Job no node of the record has (an earlier, wider selection)",
      phases: { n0: "succeeded" },
      rows: [["up-n0", "Complete"], ["up-old", "Complete"]],
      vouched: ["up-n0"],
      unvouched: ["up-old"],
    },
    {
      name: "a node still replacing an earlier Job: that Job may be another owner's",
      phases: { n0: "waitingStale", n1: "deleting", n2: "succeeded" },
      rows: [["up-n0", "Complete"], ["up-n1", "Complete"], ["up-n2", "Complete"]],
      vouched: ["up-n2"],
      unvouched: ["up-n0", "up-n1"],
    },
  ];
  for (const c of cases) {
    const got = jobsOfRows(c.rows, { prefix: "up", owner, nodes: nodes(c.phases) }, keys);
    assert.deepEqual(got.jobs.map((j) => j.metadata!.name), c.vouched, c.name);
    assert.deepEqual(got.unvouched.map(([n]) => n), c.unvouched, c.name);
    for (const j of got.jobs) {
      // The engine judges a vouched Job as the run's own, for its node.
      assert.equal(classifyJob(j, { keys, prefix: "up", owner }, "any-uid"), "current", c.name);
      assert.equal(j.metadata!.annotations![keys.nodeName], j.metadata!.name!.slice(3), c.name);
    }
  }
  const unrecorded = jobsOfRows([["up-n0", "Complete"]], undefined, keys);
  assert.deepEqual(
    unrecorded,
    { jobs: [], unvouched: [["up-n0", "Complete"]] },
    "no record vouches for nothing",
  );
});

Deno.test("jobsOfRows() finds a long node name's Job by the hashed name the engine gave it", () => {
  const node = `n-${"x".repeat(80)}.example.com`;
  const name = jobName("up", node);
  assert.notEqual(name, `up-${node}`, "the name is hashed");
  const { jobs, unvouched } = jobsOfRows([[name, "Complete"]], {
    prefix: "up",
    nodes: [{ node, phase: "running" }],
  }, keys);
  assert.deepEqual(unvouched, []);
  assert.equal(jobs[0].metadata!.annotations![keys.nodeName], node);
});

Deno.test("mergeJobs() keeps a whole Job's metadata and takes the conditions of its later row", () => {
  const whole: V1Job = {
    metadata: {
      name: "up-n0",
      ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "hook", uid: "u" }],
    },
    status: { conditions: [] },
  };
  const other: V1Job = { metadata: { name: "up-n1" }, status: { conditions: [] } };
  const row = jobOfCell({ name: "up-n0" }, "Complete");
  const merged = mergeJobs([whole, other], [row]);
  assert.deepEqual(merged.map((j) => j.metadata!.name), ["up-n0", "up-n1"]);
  assert.equal(merged[0].metadata!.ownerReferences![0].uid, "u");
  assert.equal(jobStatusOf(merged[0]), "Complete");
  assert.equal(jobStatusOf(merged[1]), "Active");
});
