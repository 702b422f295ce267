import { keptKey } from "../nodes/success_mark.ts";
import assert from "node:assert/strict";
import { withServer } from "../testing/loopback.ts";
import { listAnswer } from "../testing/list_answer.ts";
import { encodeRecord, recordConfigMap, type RunRecord } from "../report/record.ts";
import { trackingKeys } from "../job.ts";
import { runStatus, type StatusConfig } from "./status.ts";
import type { Kube } from "../kube/client.ts";

const keys = trackingKeys("job-dispatcher");

function record(succeeded: number): RunRecord {
  return {
    version: 1,
    prefix: "up",
    namespace: "team",
    state: "running",
    startedAt: Date.now() - 5_000,
    updatedAt: Date.now(),
    heartbeatMs: 20_000,
    parallelism: 2,
    summary: "x",
    nodes: ["n0", "n1"].map((node, i) => ({ node, phase: i < succeeded ? "succeeded" : "queued" })),
  };
}

const CONFIG: StatusConfig = {
  prefix: "up",
  trackingLabelPrefix: "job-dispatcher",
  output: "json",
  watch: true,
  watchIntervalSecs: 0.05,
};

/** Runs `status` once with `output` against `kube`; returns its exit code and what it printed. */
async function statusOnce(kube: Kube, output: StatusConfig["output"]) {
  const printed: string[] = [];
  const code = await runStatus({ ...CONFIG, output, watch: false }, {
    kube,
    env: () => undefined,
    readFile: () => undefined,
    terminal: false,
    signal: new AbortController().signal,
    stdout: (text) => printed.push(text),
  });
  return { code, printed: printed.join("") };
}

Deno.test("status --watch reads the record, Jobs and nodes again and prints only when the view changed", async () => {
  let reads = 0;
  const cm = async (succeeded: number) =>
    recordConfigMap(keys, record(succeeded), await encodeRecord(record(succeeded)));
  const first = await cm(0), second = await cm(1);
  await withServer((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/namespaces/team/configmaps/run-record.up") {
      reads++;
      return Response.json(reads < 4 ? first : second);
    }
    if (path.endsWith("/jobs") || path === "/api/v1/nodes") return listAnswer(req, []);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const printed: string[] = [];
    const stop = new AbortController();
    const code = await runStatus(CONFIG, {
      kube,
      env: () => undefined,
      readFile: () => undefined,
      terminal: false,
      signal: stop.signal,
      stdout: (text) => {
        printed.push(text);
        if (printed.length === 2) stop.abort();
      },
    });
    assert.equal(code, 0);
    assert.ok(reads >= 4, `${reads} reads`);
    assert.equal(printed.length, 2, "printed twice: the first view and the one that changed");
    assert.deepEqual(JSON.parse(printed[0]).counts, { queued: 2 });
    assert.deepEqual(JSON.parse(printed[1]).counts, { succeeded: 1, queued: 1 });
  });
});

Deno.test("status in text reads only the nodes it shows (a failed node's error mark), -o json every node", async () => {
  const failed: RunRecord = {
    ...record(1),
    state: "finished",
    nodes: [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "failed" }],
  };
  const cm = recordConfigMap(keys, failed, await encodeRecord(failed));
  const node = (name: string) => ({
    metadata: { name, labels: {}, annotations: { [keys.error]: `${name} broke` } },
    spec: {},
  });
  const seen: string[] = [];
  await withServer((req) => {
    const url = new URL(req.url);
    const field = url.searchParams.get("fieldSelector");
    seen.push(url.pathname + (field ? `?${field}` : ""));
    if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
      return Response.json(cm);
    }
    if (url.pathname.endsWith("/jobs")) return listAnswer(req, []);
    if (url.pathname === "/api/v1/nodes") return listAnswer(req, [node("n0"), node("n1")]);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const run = async (output: StatusConfig["output"]) => {
      seen.length = 0;
      const { code, printed } = await statusOnce(kube, output);
      assert.equal(code, 1);
      return printed;
    };
    const text = await run("text");
    assert.match(text, /n1 .*n1 broke/);
    assert.deepEqual(seen.filter((p) => p.includes("/nodes")), ["/api/v1/nodes?metadata.name=n1"]);
    const json = JSON.parse(await run("json"));
    // Every node's metadata, and which are cordoned from a list the server filters.
    assert.deepEqual(seen.filter((p) => p.includes("/nodes")).sort(), [
      "/api/v1/nodes",
      "/api/v1/nodes?spec.unschedulable=true",
    ]);
    assert.equal(json.nodes[1].reason, "n1 broke");
  });
});

Deno.test("status reads the Jobs that have not succeeded whole, the others as table rows, and again by name those the record cannot vouch for", async (t) => {
  const own = { name: "hook", uid: "owner-uid" };
  const job = (node: string, o: { done?: boolean; owner?: string; deleting?: boolean } = {}) => ({
    metadata: {
      name: `up-${node}`,
      labels: { [keys.owner]: "up", [keys.node]: node },
      annotations: { [keys.nodeName]: node },
      ownerReferences: [{
        apiVersion: "batch/v1",
        kind: "Job",
        name: "hook",
        uid: o.owner ?? own.uid,
      }],
    },
    status: o.done
      ? { succeeded: 1, conditions: [{ type: "Complete", status: "True" }] }
      : { active: 1 },
  });
  const run = async (
    nodes: RunRecord["nodes"],
    jobs: Record<string, unknown>[],
    cluster: Record<string, unknown>[] = [],
    answer: (req: Request, items: Record<string, unknown>[]) => Response | Promise<Response> =
      listAnswer,
  ) => {
    const rec: RunRecord = { ...record(0), owner: own, state: "stopped", nodes };
    const cm = recordConfigMap(keys, rec, await encodeRecord(rec));
    const seen: string[] = [];
    let view: Record<string, unknown> = {};
    let code = -1;
    await withServer((req) => {
      const url = new URL(req.url);
      if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
        return Response.json(cm);
      }
      if (url.pathname.endsWith("/jobs")) {
        const form = req.headers.get("accept")!.match(/as=(\w+)/)?.[1] ?? "whole";
        seen.push(`${form} ${url.searchParams.get("fieldSelector")}`);
        return answer(req, jobs);
      }
      if (url.pathname === "/api/v1/nodes") return listAnswer(req, cluster);
      return new Response("{}", { status: 404 });
    }, async (kube) => {
      const once = await statusOnce(kube, "json");
      view = JSON.parse(once.printed);
      code = once.code;
    });
    return {
      seen,
      code,
      view: view as {
        counts: Record<string, number>;
        rerun?: Record<string, number>;
        nodes: { node: string; reason?: string }[];
      },
    };
  };
  await t.step("the record's own Jobs: one whole LIST and one of rows", async () => {
    const { seen, view } = await run(
      [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "running" }, {
        node: "n2",
        phase: "running",
      }],
      [job("n0", { done: true }), job("n1", { done: true }), job("n2")],
    );
    assert.deepEqual(seen, ["whole status.successful!=1", "Table status.successful=1"]);
    assert.deepEqual(view.counts, { succeeded: 2, running: 1 });
    assert.deepEqual(view.rerun, { adopt: 1, count: 2, start: 0 });
  });
  await t.step(
    "an earlier owner's succeeded Job of a node being replaced is read again, and judged stale",
    async () => {
      const { seen, view } = await run(
        [{ node: "n0", phase: "waitingStale" }, { node: "n1", phase: "succeeded" }],
        [
          job("n0", { done: true, owner: "earlier-owner" }),
          job("n1", { done: true }),
          job("gone", { done: true }),
        ],
      );
      assert.deepEqual(seen.sort(), [
        "PartialObjectMetadataList metadata.name=up-gone",
        "PartialObjectMetadataList metadata.name=up-n0",
        "Table status.successful=1",
        "whole status.successful!=1",
      ]);
      // n0 waits on the earlier owner's Job, which is not this run's: neither
      // its success nor, for a re-run, its count. The owner's Job of a node
      // the record does not have says for itself.
      assert.deepEqual(view.counts, { waitingStale: 1, succeeded: 2 });
      assert.deepEqual(view.rerun, { adopt: 0, count: 2, start: 1 });
    },
  );
  await t.step("past 50 such Jobs, one metadata LIST of every succeeded Job instead", async () => {
    const many = Array.from({ length: 60 }, (_, i) => `old${i}`);
    const { seen, view } = await run(
      [{ node: "n0", phase: "succeeded" }],
      [job("n0", { done: true }), ...many.map((n) => job(n, { done: true }))],
    );
    assert.deepEqual(seen.sort(), [
      "PartialObjectMetadataList status.successful=1",
      "Table status.successful=1",
      "whole status.successful!=1",
    ]);
    assert.deepEqual(view.counts, { succeeded: 61 });
  });
  await t.step(
    "a queued node's earlier owner's succeeded Job (replaced when its turn comes) is neither a success nor counted",
    async () => {
      // A Helm upgrade's run: the engine leaves each finished Job of the
      // earlier release in place, its node queued, until a slot deletes it.
      const { view, code } = await run(
        [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "queued" }],
        [job("n0", { done: true }), job("n1", { done: true, owner: "earlier-owner" })],
      );
      assert.deepEqual(view.counts, { succeeded: 1, queued: 1 });
      assert.deepEqual(view.rerun, { adopt: 0, count: 1, start: 1 });
      assert.equal(code, 1, "a stopped run with a node not done is not a success");
    },
  );
  await t.step(
    "a succeeded Job made for a node since replaced under its name is started again by a re-run",
    async () => {
      const made = job("n0", { done: true });
      made.metadata.annotations[keys.nodeUid] = "old-uid";
      const born = (ago: number) => new Date(Date.now() - ago).toISOString();
      const { view } = await run(
        [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "queued" }],
        [made],
        [
          { metadata: { name: "n0", uid: "new-uid", creationTimestamp: born(1_000) }, spec: {} },
          { metadata: { name: "n1", uid: "n1-uid", creationTimestamp: born(3_600_000) }, spec: {} },
        ],
      );
      assert.deepEqual(view.rerun, { adopt: 0, count: 0, start: 2 });
    },
  );
  await t.step(
    "a Failed Job with one pod succeeded (completions > 1) keeps its failure's message",
    async () => {
      const failed = {
        ...job("n0"),
        status: {
          succeeded: 1,
          failed: 3,
          conditions: [{
            type: "Failed",
            status: "True",
            reason: "BackoffLimitExceeded",
            message: "Job has reached the specified backoff limit",
          }],
        },
      };
      const { view } = await run([{ node: "n0", phase: "running" }], [failed]);
      assert.match(view.nodes[0].reason ?? "", /backoff limit \[BackoffLimitExceeded\]/);
    },
  );
  await t.step(
    "a Job being deleted with one pod succeeded is judged stale, as the engine's first sight does",
    async () => {
      const deleting = {
        ...job("n0"),
        status: { succeeded: 1, active: 1 },
      };
      (deleting.metadata as Record<string, unknown>).deletionTimestamp = new Date().toISOString();
      const { view } = await run([{ node: "n0", phase: "running" }], [deleting]);
      // Whole, its deletionTimestamp makes it stale and, still running, waited for.
      assert.deepEqual(view.rerun, { adopt: 0, count: 0, start: 1 });
    },
  );
  await t.step(
    "an API server before 1.30, whose Jobs' table has no Status column, has its succeeded Jobs read whole",
    async () => {
      // printJob's cells were Name, Completions, Duration, Age until 1.30.
      const before130 = async (req: Request, items: Record<string, unknown>[]) => {
        const page = await listAnswer(req, items).json();
        if (page.kind !== "Table") return Response.json(page);
        const drop = (cells: unknown[]) => cells.filter((_, i) => i !== 1);
        page.columnDefinitions = drop(page.columnDefinitions);
        for (const r of page.rows) r.cells = drop(r.cells);
        return Response.json(page);
      };
      const { view, code } = await run(
        // Not finishing: a stopped run's node left finishing owes its post-success work.
        [{ node: "n0", phase: "running" }, { node: "n1", phase: "succeeded" }],
        [job("n0", { done: true }), job("n1", { done: true })],
        [],
        before130,
      );
      assert.deepEqual(view.counts, { succeeded: 2 });
      assert.equal(code, 0);
    },
  );
  await t.step(
    "a Job being deleted that met its success criteria is Complete, as whole",
    async () => {
      // Terminating outranks every condition but Complete and Failed in the cell.
      const met = {
        ...job("n0"),
        status: { succeeded: 1, conditions: [{ type: "SuccessCriteriaMet", status: "True" }] },
      };
      (met.metadata as Record<string, unknown>).deletionTimestamp = new Date().toISOString();
      const { view } = await run([{ node: "n0", phase: "running" }], [met]);
      assert.deepEqual(view.counts, { succeeded: 1 });
    },
  );
});

/** A dead run of n0 and n1 in `phase`, each with its Job made for `<node>-first`, shown both ways. */
async function deadRun(
  phase: RunRecord["nodes"][number]["phase"],
  status: Record<string, unknown>,
  nodes: Record<string, unknown>[],
) {
  const rec: RunRecord = {
    ...record(0),
    state: "stopped",
    nodes: [{ node: "n0", phase }, { node: "n1", phase }],
  };
  const cm = recordConfigMap(keys, rec, await encodeRecord(rec));
  const job = (node: string) => ({
    metadata: {
      name: `up-${node}`,
      labels: { [keys.owner]: "up", [keys.node]: node },
      annotations: { [keys.nodeName]: node, [keys.nodeUid]: `${node}-first` },
    },
    status,
  });
  let shown: { json: { rerun?: unknown }; text: string } = { json: {}, text: "" };
  await withServer((req) => {
    const url = new URL(req.url);
    if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
      return Response.json(cm);
    }
    if (url.pathname.endsWith("/jobs")) return listAnswer(req, [job("n0"), job("n1")]);
    if (url.pathname === "/api/v1/nodes") return listAnswer(req, nodes);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const show = async (output: StatusConfig["output"]) => (await statusOnce(kube, output)).printed;
    shown = { json: JSON.parse(await show("json")), text: await show("text") };
  });
  return shown;
}

Deno.test("status in text judges a dead run's Jobs by their nodes' UIDs, as -o json does: a node replaced since is started again", async () => {
  // n0 is the node its Job was made for; n1 was replaced under its name.
  const { json, text } = await deadRun("running", { active: 1 }, [
    { metadata: { name: "n0", uid: "n0-first" } },
    { metadata: { name: "n1", uid: "n1-second" } },
  ]);
  assert.deepEqual(json.rerun, { adopt: 1, count: 0, start: 1 });
  assert.match(text, /adopt 1 running Job.*start 1 node/);
});

Deno.test("status in text judges a dead run's succeeded Jobs (read as table rows) by their nodes too: a node replaced since the run began is started again", async () => {
  // As the API server sends it, a string (the client's type says Date).
  const born = (ago: number) => new Date(Date.now() - ago).toISOString() as unknown as Date;
  // n1 was made again under its name after the run began (the record's startedAt).
  const { json, text } = await deadRun(
    "succeeded",
    { succeeded: 1, conditions: [{ type: "Complete", status: "True" }] },
    [
      { metadata: { name: "n0", uid: "n0-first", creationTimestamp: born(3_600_000) } },
      { metadata: { name: "n1", uid: "n1-second", creationTimestamp: born(1_000) } },
    ],
  );
  assert.deepEqual(json.rerun, { adopt: 0, count: 1, start: 1 });
  assert.match(text, /count 1 finished ones and start 1 node/);
});

Deno.test("status in text keeps queued a live run's node whose failed Job was made for the node its name had before, as -o json does", async () => {
  // The run lives; n1 waits in the queue. Its Job is an earlier run's, made
  // for the node n1 was before it was replaced: the engine replaces it.
  const rec: RunRecord = {
    ...record(1),
    nodes: [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "queued" }],
  };
  const cm = recordConfigMap(keys, rec, await encodeRecord(rec));
  const old = {
    metadata: {
      name: "up-n1",
      labels: { [keys.owner]: "up", [keys.node]: "n1" },
      annotations: { [keys.nodeName]: "n1", [keys.nodeUid]: "n1-first" },
    },
    status: { failed: 1, conditions: [{ type: "Failed", status: "True", message: "old broke" }] },
  };
  const nodes = [{ metadata: { name: "n0", uid: "n0-first" } }, {
    metadata: { name: "n1", uid: "n1-second" },
  }];
  await withServer((req) => {
    const url = new URL(req.url);
    if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
      return Response.json(cm);
    }
    if (url.pathname.endsWith("/jobs")) return listAnswer(req, [old]);
    if (url.pathname === "/api/v1/nodes") return listAnswer(req, nodes);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const json = await statusOnce(kube, "json");
    assert.deepEqual(JSON.parse(json.printed).counts, { succeeded: 1, queued: 1 });
    assert.equal(json.code, 0);
    const text = await statusOnce(kube, "text");
    assert.doesNotMatch(text.printed, /old broke|failed/);
    assert.equal(text.code, 0, text.printed);
  });
});

Deno.test("status judges whether a run lives on the API server's clock, not the reader's", async (t) => {
  /** A record the cluster wrote `writtenAgo` ms ago; the reader's clock is `readerAhead` ms ahead of it. */
  const cases: { name: string; readerAhead: number; writtenAgo: number; want: string }[] = [
    {
      name: "a bastion 45 s ahead sees a live run live",
      readerAhead: 45_000,
      writtenAgo: 5_000,
      want: "running",
    },
    {
      name: "a bastion 2 min behind sees a dead run gone",
      readerAhead: -120_000,
      writtenAgo: 60_000,
      want: "gone",
    },
    {
      name: "one clock, written 5 s ago: running",
      readerAhead: 0,
      writtenAgo: 5_000,
      want: "running",
    },
    { name: "one clock, written 60 s ago: gone", readerAhead: 0, writtenAgo: 60_000, want: "gone" },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const clusterNow = Date.now() - c.readerAhead;
      // The writer runs in the cluster: its clock is the API server's.
      const r = {
        ...record(0),
        startedAt: clusterNow - 300_000,
        updatedAt: clusterNow - c.writtenAgo,
      };
      const cm = recordConfigMap(keys, r, await encodeRecord(r)) as {
        metadata: Record<string, unknown>;
      };
      // The API server stamps the write in managedFields (to the second), as it does each update.
      cm.metadata.managedFields = [{
        manager: "job-dispatcher",
        operation: "Update",
        apiVersion: "v1",
        time: new Date(r.updatedAt).toISOString().replace(/\.\d+Z$/, "Z"),
        fieldsType: "FieldsV1",
        fieldsV1: { "f:data": { ".": {}, "f:record": {}, "f:summary": {} }, "f:binaryData": {} },
      }];
      await withServer(async (req) => {
        const path = new URL(req.url).pathname;
        const answer = path === "/api/v1/namespaces/team/configmaps/run-record.up"
          ? Response.json(cm)
          : path.endsWith("/jobs") || path === "/api/v1/nodes"
          ? await listAnswer(req, [])
          : new Response("{}", { status: 404 });
        // Every answer carries the API server's clock, as an HTTP server's must (RFC 9110).
        const headers = new Headers(answer.headers);
        headers.set("date", new Date(Date.now() - c.readerAhead).toUTCString());
        return new Response(answer.body, { status: answer.status, headers });
      }, async (kube) => {
        const { printed } = await statusOnce(kube, "json");
        assert.equal(JSON.parse(printed).run.state, c.want);
        const text = (await statusOnce(kube, "text")).printed;
        const age = Math.round(c.writtenAgo / 1000);
        if (c.want === "running") {
          assert.match(text, new RegExp(`record (${age - 1}|${age}|${age + 1})s old`));
        }
      });
    });
  }
});

Deno.test("status in text and -o json shows finishing a dead run's Complete node whose success is still kept on the node, where its record, a heartbeat old, says running", async () => {
  const complete = { succeeded: 1, conditions: [{ type: "Complete", status: "True" }] };
  const { json, text } = await deadRun("running", complete, [
    {
      metadata: {
        name: "n0",
        uid: "n0-first",
        annotations: { [keptKey(keys.kept, "up-n0")]: JSON.stringify({ job: "up-n0" }) },
      },
    },
    { metadata: { name: "n1", uid: "n1-first" } },
  ]);
  assert.deepEqual((json as { counts?: unknown }).counts, { finishing: 1, succeeded: 1 });
  assert.match(text, /^n0 +finishing .*post-success work never ended/m);
});

Deno.test("status in text reads a dead run's finishing node that has no Job left: the success it keeps means the re-run starts nothing, as -o json says", async () => {
  const rec: RunRecord = {
    ...record(0),
    state: "stopped",
    nodes: [{ node: "n0", phase: "finishing" }],
  };
  const cm = recordConfigMap(keys, rec, await encodeRecord(rec));
  const node = {
    metadata: {
      name: "n0",
      uid: "n0-first",
      annotations: { [keptKey(keys.kept, "up-n0")]: '{"job":"up-n0"}' },
    },
  };
  await withServer((req) => {
    const url = new URL(req.url);
    if (url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up") {
      return Response.json(cm);
    }
    if (url.pathname.endsWith("/jobs")) return listAnswer(req, []);
    if (url.pathname === "/api/v1/nodes") return listAnswer(req, [node]);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const json = JSON.parse((await statusOnce(kube, "json")).printed);
    assert.equal(json.rerun ?? undefined, undefined);
    const { printed, code } = await statusOnce(kube, "text");
    assert.doesNotMatch(printed, /start 1 node/);
    assert.match(printed, /^n0 +finishing .*post-success work never ended/m);
    assert.equal(code, 1);
  });
});

Deno.test("status in text tells a node replaced since the run began on the API server's clock, though the run's writer ran 45 s ahead of it", async () => {
  const ahead = 45_000; // the dispatcher ran on a bastion whose clock is 45 s ahead
  const began = Date.now() - 120_000; // on the API server's clock
  const wrote = Date.now() - 60_000;
  const rec: RunRecord = {
    ...record(0),
    state: "stopped",
    startedAt: began + ahead,
    updatedAt: wrote + ahead,
    nodes: [{ node: "n0", phase: "succeeded" }, { node: "n1", phase: "succeeded" }],
  };
  const cm = recordConfigMap(keys, rec, await encodeRecord(rec)) as {
    metadata: Record<string, unknown>;
  };
  cm.metadata.managedFields = [{
    manager: "job-dispatcher",
    operation: "Update",
    time: new Date(wrote).toISOString().replace(/\.\d+Z$/, "Z"),
    fieldsType: "FieldsV1",
    fieldsV1: { "f:data": { "f:record": {}, "f:summary": {} } },
  }];
  const born = (at: number) => new Date(at).toISOString() as unknown as Date;
  // n1 was made again under its name 10 s into the run, by the API server's clock.
  const nodes = [
    { metadata: { name: "n0", uid: "n0-first", creationTimestamp: born(began - 3_600_000) } },
    { metadata: { name: "n1", uid: "n1-second", creationTimestamp: born(began + 10_000) } },
  ];
  const job = (node: string) => ({
    metadata: {
      name: `up-${node}`,
      labels: { [keys.owner]: "up", [keys.node]: node },
      annotations: { [keys.nodeName]: node, [keys.nodeUid]: `${node}-first` },
    },
    status: { succeeded: 1, conditions: [{ type: "Complete", status: "True" }] },
  });
  await withServer(async (req) => {
    const url = new URL(req.url);
    const answer = url.pathname === "/api/v1/namespaces/team/configmaps/run-record.up"
      ? Response.json(cm)
      : url.pathname.endsWith("/jobs")
      ? await listAnswer(req, [job("n0"), job("n1")])
      : url.pathname === "/api/v1/nodes"
      ? await listAnswer(req, nodes)
      : new Response("{}", { status: 404 });
    const headers = new Headers(answer.headers);
    headers.set("date", new Date().toUTCString());
    return new Response(answer.body, { status: answer.status, headers });
  }, async (kube) => {
    const { printed } = await statusOnce(kube, "text");
    assert.match(printed, /count 1 finished ones and start 1 node/, printed);
  });
});

Deno.test("status --watch in text prints again only when the view changes, not on a heartbeat that changed nothing", async () => {
  let reads = 0;
  const base = record(0);
  const cm = async (r: RunRecord) => recordConfigMap(keys, r, await encodeRecord(r));
  // A heartbeat write (a new updatedAt, nothing else), then a node succeeds.
  const views = [
    await cm(base),
    await cm({ ...base, updatedAt: base.updatedAt + 10_000 }),
    await cm({ ...record(1), startedAt: base.startedAt, updatedAt: base.updatedAt + 20_000 }),
  ];
  await withServer((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/namespaces/team/configmaps/run-record.up") {
      reads++;
      return Response.json(views[reads < 3 ? 0 : reads < 6 ? 1 : 2]);
    }
    if (path.endsWith("/jobs") || path === "/api/v1/nodes") return listAnswer(req, []);
    return new Response("{}", { status: 404 });
  }, async (kube) => {
    const printed: string[] = [];
    const stop = new AbortController();
    await runStatus({ ...CONFIG, output: "text" }, {
      kube,
      env: () => undefined,
      readFile: () => undefined,
      terminal: false,
      signal: stop.signal,
      stdout: (text) => {
        printed.push(text);
        if (printed.length === 2) stop.abort();
      },
    });
    assert.equal(printed.length, 2);
    assert.match(printed[0], /2 nodes: 2 queued/);
    assert.match(printed[1], /2 nodes: 1 succeeded, 1 queued/, "the second print is the change");
  });
});
