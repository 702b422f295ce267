import assert from "node:assert/strict";
import {
  decodeRecord,
  encodeRecord,
  RECORD_BUDGET_BYTES,
  recordConfigMap,
  type RecordGates,
  recordName,
  type RunRecord,
  WritePacer,
} from "./record.ts";
import { RecordWriter, type RecordWriterOptions } from "./record_writer.ts";
import { trackingKeys } from "../job.ts";
import type { Progress } from "../engine/fanout.ts";
import type { Phase } from "../engine/node_state.ts";
import { FakeClock, runOn, settle } from "../testing/fake_api.ts";

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0);

function fleet(n: number, reasons: (i: number) => string | undefined): RunRecord {
  const phases: Phase[] = ["succeeded", "running", "queued", "failed", "draining", "blocked"];
  return {
    version: 1,
    prefix: "upgrade",
    namespace: "ops",
    owner: { name: "hook", uid: "u-1" },
    state: "running",
    startedAt: T0,
    updatedAt: T0 + 600_000,
    heartbeatMs: 30_000,
    parallelism: 100,
    paused: "annotation job-dispatcher/paused=true on Job ops/hook",
    summary: "1/6 succeeded",
    nodes: Array.from({ length: n }, (_, i) => ({
      // Names as EKS gives them: they differ in four octets, not in a counter.
      node: `ip-10-${(i * 7) % 256}-${(i * 13) % 256}-${i % 256}.eu-west-1.compute.internal`,
      phase: phases[i % phases.length],
      since: T0 + i * 1000,
      startedAt: i % 3 === 2 ? undefined : T0 + i * 1000,
      reason: reasons(i),
      stalled: i % 97 === 1 || undefined,
    })),
  };
}

Deno.test({
  name: "the run record survives its encoding: every field of every node comes back",
  permissions: "none",
  async fn() {
    const r = fleet(50, (i) => (i % 6 === 3 ? `exit ${i}: <no backend> "x"` : undefined));
    const enc = await encodeRecord(r);
    const back = await decodeRecord(enc.data, enc.binaryData);
    const strip = (x: RunRecord) =>
      JSON.parse(JSON.stringify({ ...x, reasonsDropped: x.reasonsDropped ?? undefined }));
    assert.deepEqual(strip(back), strip(r));
    assert.equal(JSON.parse(enc.data.record).nodes, undefined, "the nodes are in binaryData");
    assert.equal(enc.data.summary, "1/6 succeeded");
  },
});

Deno.test({
  name: "a 10,000-node record fits a ConfigMap with room to spare, and a worst case drops reasons",
  permissions: "none",
  async fn(t) {
    await t.step("EKS-like names, every failed node with a reason", async () => {
      const r = fleet(
        10_000,
        (i) => (i % 6 === 3 ? `job upgrade-x failed: exit 1 [#${i}]` : undefined),
      );
      const enc = await encodeRecord(r);
      console.log(`10,000 nodes: ${enc.bytes} bytes`);
      assert.ok(enc.bytes < 256 * 1024, `${enc.bytes} bytes`);
      const back = await decodeRecord(enc.data, enc.binaryData);
      assert.equal(back.nodes.length, 10_000);
      assert.equal(back.reasonsDropped, undefined);
      assert.equal(back.nodes[9_999].node, r.nodes[9_999].node);
    });
    await t.step("every node failed with a distinct random reason", async () => {
      const noise = (i: number) =>
        Array.from({ length: 40 }, (_, k) => ((i * 7919 + k * 104729) % 1e9).toString(36)).join("");
      const r = fleet(10_000, noise);
      const enc = await encodeRecord(r);
      assert.ok(enc.bytes <= RECORD_BUDGET_BYTES, `${enc.bytes} bytes`);
      const back = await decodeRecord(enc.data, enc.binaryData);
      assert.ok((back.reasonsDropped ?? 0) > 0, "some reasons left out");
      assert.equal(back.nodes.filter((n) => n.reason).length + back.reasonsDropped!, 10_000);
    });
    await t.step(
      "names alone beyond the budget are a RangeError, not a refused write",
      async () => {
        await assert.rejects(() => encodeRecord(fleet(200, () => undefined), 100), RangeError);
      },
    );
  },
});

Deno.test({
  name:
    "a 65,000-node record (GKE's largest cluster) with long names and reasons stays in its budget",
  permissions: "none",
  async fn(t) {
    // GKE names: `gke-<cluster>-<pool>-<instance group hash>-<4 characters>`,
    // 50-odd characters; the hash is the pool's (1,000 nodes a pool here),
    // the suffix the node's, which gzip cannot fold.
    const hex = (i: number, k: number) =>
      ((i * 2654435761 + k * 40503) >>> 0).toString(16).padStart(8, "0");
    const gke = (i: number) =>
      `gke-prod-europe-west4-pool-${(i / 1000) | 0}-${hex((i / 1000) | 0, 1)}-` +
      ((i * 2654435761) >>> 0).toString(36).slice(-4);
    const withNames = (r: RunRecord): RunRecord => ({
      ...r,
      nodes: r.nodes.map((n, i) => ({ ...n, node: gke(i) })),
    });
    await t.step("one failed node in six with its own reason: every reason kept", async () => {
      const r = withNames(fleet(
        65_000,
        (i) =>
          i % 6 === 3
            ? `job upgrade-${gke(i)} failed: work exited 1: driver install ${hex(i, 3)} ` +
              `did not load, see the pod's log [BackoffLimitExceeded]`
            : undefined,
      ));
      const enc = await encodeRecord(r);
      console.log(`65,000 nodes, ${65_000 / 6 | 0} reasons: ${enc.bytes} bytes`);
      assert.ok(enc.bytes <= RECORD_BUDGET_BYTES, `${enc.bytes} bytes`);
      const back = await decodeRecord(enc.data, enc.binaryData);
      assert.equal(back.nodes.length, 65_000);
      assert.equal(back.nodes[64_999].node, gke(64_999));
      assert.equal(back.nodes[64_999].phase, r.nodes[64_999].phase);
    });
    await t.step(
      "every node failed with a long distinct reason: reasons dropped, names kept",
      async () => {
        const noise = (i: number) =>
          `work exited 1 on ${gke(i)}: ` +
          Array.from({ length: 24 }, (_, k) => hex(i, k * 104729)).join("");
        const r = withNames(fleet(65_000, noise));
        const enc = await encodeRecord(r);
        console.log(`65,000 nodes, all with reasons: ${enc.bytes} bytes`);
        assert.ok(enc.bytes <= RECORD_BUDGET_BYTES, `${enc.bytes} bytes`);
        const back = await decodeRecord(enc.data, enc.binaryData);
        assert.equal(back.nodes.length, 65_000, "every node is in the record");
        assert.ok((back.reasonsDropped ?? 0) > 0, "some reasons left out");
        assert.equal(back.nodes.filter((n) => n.reason).length + back.reasonsDropped!, 65_000);
      },
    );
    await t.step(
      "names that do not compress: the times coarsen before the record is given up",
      async () => {
        // Names of 12 random hex digits each (a provider that hashes every
        // node) and every node's times a distinct second: over the budget
        // with no reason kept, which once threw and left the run unrecorded.
        const r = fleet(65_000, (i) => `exit ${i}`);
        r.nodes.forEach((n, i) => n.node = `node-${hex(i, 1)}${hex(i, 7).slice(0, 4)}.internal`);
        const enc = await encodeRecord(r);
        console.log(`65,000 random names: ${enc.bytes} bytes`);
        assert.ok(enc.bytes <= RECORD_BUDGET_BYTES, `${enc.bytes} bytes`);
        const back = await decodeRecord(enc.data, enc.binaryData);
        assert.equal(back.nodes.length, 65_000);
        assert.deepEqual(back.nodes.map((n) => n.node), r.nodes.map((n) => n.node));
        assert.deepEqual(back.nodes.map((n) => n.phase), r.nodes.map((n) => n.phase));
        assert.ok(back.timeStepSecs! > 1, `times kept to ${back.timeStepSecs} s`);
        const s = back.timeStepSecs!;
        // Each time is kept to its step or left out (-1), never moved further.
        back.nodes.forEach((n, i) => {
          if (n.since !== undefined) assert.ok(Math.abs(n.since - r.nodes[i].since!) <= s * 500);
        });
      },
    );
  },
});

Deno.test({
  name: "the record's ConfigMap is named for the prefix, labelled and owned by the owner Job",
  permissions: "none",
  async fn() {
    const r = fleet(2, () => undefined);
    const cm = recordConfigMap(trackingKeys("job-dispatcher"), r, await encodeRecord(r)) as {
      metadata: { name: string; labels: Record<string, string>; ownerReferences: unknown[] };
    };
    assert.equal(cm.metadata.name, recordName("upgrade"));
    assert.deepEqual(cm.metadata.labels, {
      "job-dispatcher/owner": "upgrade",
      "job-dispatcher/run-record": "true",
      "job-dispatcher/owner-job": "hook",
    });
    assert.deepEqual(cm.metadata.ownerReferences, [{
      apiVersion: "batch/v1",
      kind: "Job",
      name: "hook",
      uid: "u-1",
      controller: false,
      blockOwnerDeletion: false,
    }]);
    const alone = recordConfigMap(
      trackingKeys("job-dispatcher"),
      { ...r, owner: undefined },
      await encodeRecord(r),
    ) as { metadata: { ownerReferences?: unknown } };
    assert.equal(alone.metadata.ownerReferences, undefined);
  },
});

Deno.test({
  name: "WritePacer allows a change every 10 s and a heartbeat every 30 s",
  permissions: "none",
  fn() {
    const p = new WritePacer(10_000, 30_000);
    assert.equal(p.wait(0, false), 0);
    p.wrote(0);
    assert.equal(p.wait(1_000, true), 9_000);
    assert.equal(p.wait(1_000, false), 29_000);
    assert.equal(p.wait(12_000, true), 0);
    assert.equal(p.wait(31_000, false), 0);
  },
});

/** A record writer of prefix `up` on `clock`, sending as `opts` says. */
function writer(
  clock: FakeClock,
  opts: Pick<RecordWriterOptions, "send"> & Partial<RecordWriterOptions>,
): RecordWriter {
  return new RecordWriter({
    prefix: "up",
    parallelism: 10,
    keys: trackingKeys("job-dispatcher"),
    namespace: "ops",
    clock,
    warn: (m) => assert.fail(m),
    ...opts,
  });
}

/** Moves the fake clock to `t`, firing every timer due on the way. */
async function until(clock: FakeClock, t: number): Promise<void> {
  clock.sleep(t - clock.now());
  while (clock.now() < t && clock.advance()) await settle();
  await settle();
}

function progress(succeeded: number, elapsedMs: number): Progress {
  const total = 100;
  return {
    succeeded,
    failed: 0,
    inFlight: 0,
    queued: total - succeeded,
    total,
    elapsedMs,
    states: () =>
      Array.from({ length: total }, (_, i) => ({
        node: `n${i}`,
        job: `j-n${i}`,
        state: { phase: i < succeeded ? "succeeded" : "queued", since: 0 } as const,
      })),
  };
}

Deno.test({
  name:
    "the run record is written at most once per 10 s however often progress comes, plus the closing write",
  permissions: "none",
  async fn() {
    const clock = new FakeClock();
    const writes: { at: number; state: string; succeeded: number }[] = [];
    const w = writer(clock, {
      send: async (cm) => {
        const c = cm as { data: Record<string, string>; binaryData: Record<string, string> };
        const r = await decodeRecord(c.data, c.binaryData);
        writes.push({
          at: clock.now(),
          state: r.state,
          succeeded: r.nodes.filter((n) => n.phase === "succeeded").length,
        });
      },
    });
    w.started();
    // A terminal's progress: every second, a change every second for 95 s.
    for (let s = 0; s <= 95; s++) {
      await until(clock, s * 1000);
      w.progress(progress(Math.min(s, 100), s * 1000));
      for (let k = 0; k < 10; k++) await settle();
    }
    const running = writes.filter((x) => x.state === "running");
    assert.ok(running.length >= 9 && running.length <= 10, JSON.stringify(running));
    for (let i = 1; i < running.length; i++) {
      assert.ok(running[i].at - running[i - 1].at >= 10_000, JSON.stringify(running));
    }
    await w.close("done");
    const last = writes[writes.length - 1];
    assert.equal(last.state, "finished");
    assert.equal(last.succeeded, 95, "the closing write has the last progress");
    assert.equal(writes.length, running.length + 1);
  },
});

Deno.test({
  name:
    "the run record's next write waits 10 s from the last one's answer, so a slow answer never brings two within 10 s to the API server",
  permissions: "none",
  async fn() {
    const clock = new FakeClock();
    const sent: { start: number; end: number }[] = [];
    const w = writer(clock, {
      send: async () => {
        const start = clock.now();
        // The API server (or the client's queue) takes 3 s to answer.
        await clock.sleep(3_000);
        sent.push({ start, end: clock.now() });
      },
    });
    w.started();
    for (let s = 0; s <= 60; s++) {
      await until(clock, s * 1000);
      w.progress(progress(s, s * 1000));
      for (let k = 0; k < 10; k++) await settle();
    }
    assert.ok(sent.length >= 4, JSON.stringify(sent));
    for (let i = 1; i < sent.length; i++) {
      assert.ok(sent[i].start - sent[i - 1].end >= 10_000, JSON.stringify(sent));
    }
    // The closing write waits for the one in flight, then takes its own 3 s.
    await runOn(clock, w.close("done"));
    assert.ok(sent.at(-1)!.end > 60_000);
  },
});

Deno.test({
  name: "a quiet run writes its record every heartbeat, so a reader can tell it lives",
  permissions: "none",
  async fn() {
    const clock = new FakeClock();
    const at: number[] = [];
    const w = writer(clock, {
      heartbeatMs: 30_000,
      send: () => Promise.resolve(at.push(clock.now())),
    });
    w.progress(progress(3, 0));
    for (let k = 0; k < 10; k++) await settle();
    // Nothing more is reported: the pending heartbeat timer fires by itself.
    for (let i = 0; i < 3; i++) {
      w.progress(progress(3, 0));
      assert.ok(clock.advance());
      for (let k = 0; k < 10; k++) await settle();
    }
    assert.deepEqual(at, [0, 30_000, 60_000, 90_000]);
    await w.close("x");
  },
});

Deno.test({
  name:
    "the run record carries the run's template hash, which status judges a queued node's Job by",
  permissions: "none",
  async fn() {
    const clock = new FakeClock();
    let hash: string | undefined;
    const w = writer(clock, {
      templateHash: "0123456789abcdef",
      send: async (cm) => {
        const c = cm as { data: Record<string, string>; binaryData: Record<string, string> };
        hash = (await decodeRecord(c.data, c.binaryData)).templateHash;
      },
    });
    w.started();
    w.progress(progress(1, 1000));
    await w.close("done");
    assert.equal(hash, "0123456789abcdef");
  },
});

Deno.test({
  name:
    "the run record carries the gates' state: read at every write, a change written within 10 s, not at the 30 s heartbeat",
  permissions: "none",
  async fn() {
    const clock = new FakeClock();
    const writes: { at: number; gates?: string }[] = [];
    const w = writer(clock, {
      send: async (cm) => {
        const c = cm as { data: Record<string, string>; binaryData: Record<string, string> };
        const r = await decodeRecord(c.data, c.binaryData);
        writes.push({ at: clock.now(), gates: r.gates?.state });
      },
    });
    let gates: RecordGates = { state: "ok", queries: 2, checkedAt: 0 };
    w.followGates(() => gates);
    w.started();
    w.progress(progress(0, 0));
    await until(clock, 1_000);
    assert.deepEqual(writes.map((x) => x.gates), ["ok"]);
    // Nothing else moves: the dark selector alone is a change, written once 10 s passed.
    gates = {
      state: "nodata",
      queries: 2,
      checkedAt: 1_000,
      detail: "selector up matches no series",
    };
    w.gatesChanged();
    await until(clock, 12_000);
    assert.deepEqual(writes.map((x) => x.gates), ["ok", "nodata"]);
    assert.ok(writes[1].at >= 10_000 && writes[1].at <= 12_000, JSON.stringify(writes));
    await w.close("done");
  },
});

Deno.test("encodeRecord() writes the same bytes with the runtime's base64 encoder as without it", async () => {
  const proto = Uint8Array.prototype as { toBase64?: unknown };
  const native = proto.toBase64;
  for (const n of [0, 1, 6, 10_000]) {
    const r = fleet(n, (i) => (i % 6 === 3 ? `reason ${i}` : undefined));
    const withNative = await encodeRecord(r);
    delete proto.toBase64;
    try {
      assert.deepEqual(await encodeRecord(r), withNative, `${n} nodes`);
    } finally {
      if (native) proto.toBase64 = native;
    }
    const back = await decodeRecord(withNative.data, withNative.binaryData);
    assert.deepEqual(
      back.nodes.map((x) => [x.node, x.phase]),
      r.nodes.map((x) => [x.node, x.phase]),
    );
  }
});

Deno.test({
  name:
    "encodeRecord() reads a node table made one node at a time, as often as it needs, into the same bytes",
  permissions: "none",
  async fn() {
    // The writer's table: each node made as it is read, none kept (at
    // 65,000 nodes an array of them was ~7 MB every write).
    for (
      const reasons of [(i: number) => (i % 5 ? undefined : `exit ${i}`), () => "x".repeat(300)]
    ) {
      const r = fleet(3000, reasons);
      let passes = 0;
      const lazy = {
        ...r,
        nodes: {
          length: r.nodes.length,
          *[Symbol.iterator]() {
            passes++;
            for (const n of r.nodes) yield { ...n };
          },
        },
      };
      const budget = reasons(0) === "x".repeat(300) ? 60_000 : undefined;
      assert.deepEqual(await encodeRecord(lazy, budget), await encodeRecord(r, budget));
      assert.ok(passes >= 1);
    }
  },
});

Deno.test({
  name:
    "encodeRecord() of a table whose reasons change between readings counts the reasons dropped from the table it writes",
  permissions: "none",
  async fn() {
    // The writer's table reads the engine's states live: a write that does
    // not fit reads them again, after nodes have moved on (here, every
    // reason of the first readings is gone by the third).
    const noise = (i: number) =>
      Array.from({ length: 8 }, (_, k) => ((i * 7919 + k * 104729) % 1e9).toString(36)).join("");
    const r = fleet(400, noise);
    const bare = await encodeRecord(fleet(400, () => undefined));
    let readings = 0;
    const live = {
      ...r,
      nodes: {
        length: r.nodes.length,
        *[Symbol.iterator]() {
          const withReasons = ++readings <= 2;
          for (const n of r.nodes) yield { ...n, reason: withReasons ? n.reason : undefined };
        },
      },
    };
    const enc = await encodeRecord(live, bare.bytes + 100);
    assert.ok(readings >= 3, "written from a later reading");
    const back = await decodeRecord(enc.data, enc.binaryData);
    assert.equal(back.nodes.filter((n) => n.reason).length, 0);
    assert.equal(back.reasonsDropped, undefined, "no reason of the table written was left out");
  },
});
