/**
 * Saying what happened, on a real control plane: failure reasons from the
 * pods, stalls with the scheduler's reason, Events on the Nodes, marks on the
 * Nodes, the report files, and a run without permission to record Events.
 */

import assert from "node:assert/strict";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { type Cluster, OUTCOME_LABEL } from "./cluster.ts";
import { dispatcher, eventually, jobTemplate } from "./_dispatcher.ts";
import {
  clusterTest,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteNodes as nodes,
  tempFile as file,
} from "./_fixtures.ts";

async function node(cluster: Cluster, name: string) {
  return JSON.parse((await cluster.kubectl(["get", "node", name, "-o", "json"])).stdout);
}

clusterTest("what happened to every node, on a real control plane", async (t, cluster) => {
  const ns = await namespace(cluster, "report");
  await cluster.createNodes([
    ...nodes("rep", 2),
    ...nodes("rep", 1, { labels: { [OUTCOME_LABEL]: "fail" } }, 2),
  ]);
  const json = `${await Deno.makeTempDir()}/report.json`;
  const junit = `${await Deno.makeTempDir()}/report.xml`;
  const args = ["--job-template", await file(jobTemplate("rep", "300ms")), "-n", ns];
  const run = await dispatcher(cluster, [
    ...args,
    "--node-selector",
    `${SUITE}=rep`,
    "--report",
    json,
  ]);

  await t.step(
    "a failed node's reason names the container, its exit code and its message",
    async () => {
      assert.equal(run.code, 1, run.stderr);
      const reason = /work exited 3: simulated failure on rep-002 \[BackoffLimitExceeded\]/;
      assert.match(
        run.stderr,
        new RegExp(`failed node rep-002: job rep-rep-002: ${reason.source}`),
      );
      const report = JSON.parse(await Deno.readTextFile(json));
      const entry = report.nodes.find((n: { name: string }) => n.name === "rep-002");
      assert.match(entry.reason, reason);
      assert.equal(entry.outcome, "failed");
      assert.equal(entry.attempts, 1);
      assert.ok(entry.uid && entry.start && entry.end, "UID, start and end recorded");
      await eventually(
        async () =>
          /work exited 3/.test(
            (await node(cluster, "rep-002")).metadata.annotations?.["job-dispatcher/error"] ??
              "",
          ),
        15_000,
        "the error annotation on the Node",
      );
      const marked = await node(cluster, "rep-002");
      assert.match(marked.metadata.annotations["job-dispatcher/error"], reason);
      assert.equal(marked.metadata.labels["job-dispatcher/result"], "failed");
      assert.ok(Date.parse(marked.metadata.annotations["job-dispatcher/finished-at"]) > 0);
      const good = await node(cluster, "rep-000");
      assert.equal(good.metadata.labels["job-dispatcher/result"], "succeeded");
      assert.equal(good.metadata.annotations["job-dispatcher/error"], undefined);
    },
  );

  await t.step("Events on the Nodes show in kubectl describe node", async () => {
    await eventually(
      async () => /JobFailed/.test((await cluster.kubectl(["describe", "node", "rep-002"])).stdout),
      15_000,
      "JobFailed in kubectl describe node",
    );
    const described = (await cluster.kubectl(["describe", "node", "rep-002"])).stdout;
    assert.match(described, /Warning\s+JobFailed\s+.*job rep-rep-002 failed: work exited 3/);
    assert.match(
      (await cluster.kubectl(["describe", "node", "rep-000"])).stdout,
      /Normal\s+JobSucceeded/,
    );
  });

  await t.step("the JUnit report parses and has one test case per node", async () => {
    await cluster.createNodes(
      nodes("rep", 1, { taints: [{ key: "gpu", value: "true", effect: "NoSchedule" }] }, 3),
    );
    const r = await dispatcher(cluster, [
      ...args,
      "--node-selector",
      `${SUITE}=rep`,
      "--report",
      junit,
      "--report-format",
      "junit",
    ]);
    assert.equal(r.code, 1, r.stderr);
    const text = await Deno.readTextFile(junit);
    assert.equal(XMLValidator.validate(text), true);
    const suite = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text)
      .testsuites.testsuite;
    const cases = suite.testcase as {
      name: string;
      failure?: { message: string };
      skipped?: unknown;
    }[];
    assert.deepEqual(cases.map((c) => c.name).sort(), [
      "rep-000",
      "rep-001",
      "rep-002",
      "rep-003",
    ]);
    assert.match(cases.find((c) => c.name === "rep-002")!.failure!.message, /work exited 3/);
    assert.ok(
      cases.find((c) => c.name === "rep-003")!.skipped,
      "the tainted node is a skipped case",
    );
  });

  await t.step(
    "one run writes several reports: --report json=… --report html=… --report junit=…",
    async () => {
      const dir = await Deno.makeTempDir();
      const r = await dispatcher(cluster, [
        ...args,
        "--node-selector",
        `${SUITE}=rep`,
        ...["--report", `json=${dir}/r.json`, "--report", `html=${dir}/r.html`],
        ...["--report", `junit=${dir}/r.xml`],
      ]);
      assert.equal(r.code, 1, r.stderr); // rep-002's work fails, as above
      const report = JSON.parse(await Deno.readTextFile(`${dir}/r.json`));
      const names = report.nodes.map((n: { name: string }) => n.name);
      for (const n of ["rep-000", "rep-001", "rep-002"]) assert.ok(names.includes(n), names);
      assert.match(await Deno.readTextFile(`${dir}/r.html`), /^<!DOCTYPE html>/i);
      assert.equal(XMLValidator.validate(await Deno.readTextFile(`${dir}/r.xml`)), true);
      for (const f of ["r.json (json)", "r.html (html)", "r.xml (junit)"]) {
        assert.ok(r.stderr.includes(`report: ${dir}/${f}`), r.stderr);
      }
    },
  );

  await t.step(
    "the JUnit report of a run in waves: a testsuite per wave, the wave in each classname, one test case per node",
    async () => {
      await cluster.createNodes(nodes("jw", 3));
      const xmlPath = `${await Deno.makeTempDir()}/waves.xml`;
      const r = await dispatcher(cluster, [
        ...["--job-template", await file(jobTemplate("jw", "300ms")), "-n", ns],
        ...["--node-selector", `${SUITE}=jw`, "--waves", "1,100%", "--wave-soak-secs", "1"],
        ...["--report", xmlPath, "--report-format", "junit"],
      ]);
      assert.equal(r.code, 0, r.stderr);
      const text = await Deno.readTextFile(xmlPath);
      assert.equal(XMLValidator.validate(text), true);
      const doc = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(text);
      const suites = doc.testsuites.testsuite as {
        name: string;
        testcase: { name: string; classname: string } | { name: string; classname: string }[];
      }[];
      assert.deepEqual(suites.map((s) => s.name), [`${ns}/jw wave 1 of 2`, `${ns}/jw wave 2 of 2`]);
      const cases = suites.flatMap((s) => [s.testcase].flat());
      assert.deepEqual(cases.map((c) => [c.name, c.classname]), [
        ["jw-000", "job-dispatcher.jw.wave-1"],
        ["jw-001", "job-dispatcher.jw.wave-2"],
        ["jw-002", "job-dispatcher.jw.wave-2"],
      ]);
      assert.equal(doc.testsuites.tests, "3");
    },
  );

  await t.step(
    "a stalled node (unschedulable pod) is reported as pending with the scheduler's reason",
    async () => {
      await cluster.createNodes(nodes("stall", 1));
      const big = jobTemplate("stall", "300ms", "", "64");
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(big),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=stall`,
        "--pin",
        "affinity",
        "--stall-warn-secs",
        "2",
        "--node-timeout-secs",
        "6",
      ]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /node stall-000: job stall-stall-000 pending for \d+ s: Unschedulable: .*Insufficient cpu/,
      );
      await eventually(
        async () =>
          /JobPending/.test((await cluster.kubectl(["describe", "node", "stall-000"])).stdout),
        15_000,
        "JobPending in kubectl describe node",
      );
    },
  );

  await t.step(
    "the owner Job shows the rollout: an Event and a progress annotation",
    async () => {
      await ownerJob(cluster, ns, "hook");
      const r = await dispatcher(cluster, [
        ...args,
        "--node-selector",
        `${SUITE}=rep`,
        "--owner-job-name",
        "hook",
        "--parallelism",
        "2",
      ]);
      assert.equal(r.code, 1, r.stderr);
      await eventually(
        async () =>
          /RolloutFailed/.test(
            (await cluster.kubectl(["describe", "job", "hook", "-n", ns])).stdout,
          ),
        15_000,
        "RolloutFailed in kubectl describe job",
      );
      const described = (await cluster.kubectl(["describe", "job", "hook", "-n", ns])).stdout;
      assert.match(
        described,
        /Normal\s+RolloutStarted\s+.*dispatching one Job to each of 3 nodes/,
      );
      assert.match(described, /Warning\s+RolloutFailed\s+.*2 succeeded, 1 failed of 3 nodes/);
      const hook = JSON.parse(
        (await cluster.kubectl(["get", "job", "hook", "-n", ns, "-o", "json"])).stdout,
      );
      assert.match(
        hook.metadata.annotations["job-dispatcher/progress"],
        /2 succeeded, 1 failed of 3 nodes/,
      );
    },
  );

  await t.step(
    "without permission to record Events the rollout succeeds and says so once",
    async () => {
      const quiet = await namespace(cluster, "report-quiet");
      await cluster.createNodes(nodes("quiet", 3));
      const { kubeconfig } = await serviceAccount(cluster, quiet, "dispatcher", {
        rbac: { events: false },
      });
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("quiet", "300ms")),
        "--node-selector",
        `${SUITE}=quiet`,
        "--kubeconfig",
        kubeconfig,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal((r.stderr.match(/cannot record events/g) ?? []).length, 1, r.stderr);
      assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
    },
  );
});

clusterTest("the report of a run a window stopped", async (t, cluster) => {
  await t.step(
    "--window closing mid-run: the JSON report says stoppedBy window closed, and each succeeded node its attempts",
    async () => {
      const ns = await namespace(cluster, "rwin");
      await cluster.createNodes(nodes("rwin", 6));
      // A window of whole minutes that closes 15-20 s from now.
      while (new Date().getUTCSeconds() < 40 || new Date().getUTCSeconds() >= 45) {
        await new Promise((r) => setTimeout(r, 200));
      }
      const now = new Date();
      const minute = now.getUTCHours() * 60 + now.getUTCMinutes();
      const hhmm = (m: number) =>
        `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
      const json = `${await Deno.makeTempDir()}/report.json`;
      const r = await dispatcher(cluster, [
        "--job-template",
        await file(jobTemplate("rwin", "4s")),
        "-n",
        ns,
        "--node-selector",
        `${SUITE}=rwin`,
        "--parallelism",
        "1",
        "--window",
        `* ${hhmm(Math.max(0, minute - 5))}-${hhmm(minute + 1)} UTC`,
        "--report",
        json,
      ]);
      assert.equal(r.code, 4, r.stderr);
      const report = JSON.parse(await Deno.readTextFile(json));
      console.log(`report: ${JSON.stringify(report.summary)}, stoppedBy ${report.stoppedBy}`);
      assert.equal(report.stoppedBy, "window closed");
      const succeeded = report.nodes.filter((n: { outcome: string }) => n.outcome === "succeeded");
      assert.ok(succeeded.length >= 1 && succeeded.length < 6, JSON.stringify(report.nodes));
      for (const n of succeeded) assert.equal(n.attempts, 1, JSON.stringify(n));
      assert.ok(report.nodes.some((n: { outcome: string }) => n.outcome === "notStarted"));
    },
  );
});
