import assert from "node:assert/strict";
import { trackingKeys } from "../job.ts";
import { ApiError, type Kube } from "../kube/client.ts";
import type { Progress } from "../engine/fanout.ts";
import { FakeClock, settle } from "../testing/fake_api.ts";
import { FakeConfigMaps } from "../testing/fake_configmaps.ts";
import { Logger } from "./log.ts";
import { decodeRecord, recordName, type RunRecord } from "./record.ts";
import { Recorder } from "./report.ts";
import { RecordStore, SupersededError, writerOf } from "./record_store.ts";

const NAME = recordName("up");

/** A run's recorder of prefix `up` that keeps its record in `api`; its warnings in `warned`. */
function run(
  api: FakeConfigMaps,
  opts: { signal?: AbortSignal; warned?: string[]; lost?: string[] } = {},
) {
  return new Recorder({
    kube: {
      // The owner's progress and Events go elsewhere: taken, not kept.
      request: (verb: string, method: string, path: string, body?: unknown) =>
        path.includes("/configmaps") ? api.request(verb, method, path, body) : Promise.resolve({}),
    } as unknown as Kube,
    log: new Logger("text", (line) => opts.warned?.push(line)),
    keys: trackingKeys("job-dispatcher"),
    namespace: "ops",
    owner: { name: "hook-r2", uid: "u-2" },
    nodes: new Map(),
    events: false,
    marks: false,
    record: { prefix: "up", parallelism: 1, clock: new FakeClock(), signal: opts.signal },
    onRecordLost: (reason) => opts.lost?.push(reason),
  });
}

function progress(succeeded: number): Progress {
  return {
    succeeded,
    failed: 0,
    inFlight: 1,
    queued: 3 - succeeded - 1,
    total: 3,
    elapsedMs: 0,
    states: () => [],
  };
}

async function stored(api: FakeConfigMaps): Promise<RunRecord> {
  const cm = api.get(NAME)!;
  return await decodeRecord(
    cm.data as Record<string, string>,
    cm.binaryData as Record<string, string>,
  );
}

async function quiet(): Promise<void> {
  for (let k = 0; k < 20; k++) await settle();
}

Deno.test({
  name:
    "an evicted run's closing write does not land over its replacement's: the record stays running",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    const stop = new AbortController();
    const warned: string[] = [];
    // The hook's pod is evicted: it drains (SIGTERM) while the Job
    // controller's replacement pod starts the run again.
    const evicted = run(api, { signal: stop.signal, warned });
    evicted.progress(progress(0));
    await quiet();
    const replacement = run(api);
    replacement.progress(progress(1));
    await quiet();
    assert.equal((await stored(api)).state, "running");
    stop.abort();
    await evicted.finished("stopped by SIGTERM", false, 1_000);
    const r = await stored(api);
    assert.equal(r.state, "running", "the replacement's record, not the evicted run's stop");
    assert.match(r.summary, /1\/3 succeeded/);
    assert.equal(warned.length, 1, warned.join("\n"));
    assert.match(warned[0], /another run .*stops writing it/);
    // The stale writer found out and writes no more; the replacement goes on.
    const before = api.requests.length;
    evicted.progress(progress(2));
    await quiet();
    assert.equal(api.requests.length, before, "the evicted run writes nothing more");
    await replacement.finished("3/3 succeeded", false, 1_000);
    assert.equal((await stored(api)).state, "finished");
  },
});

Deno.test({
  name:
    "a record PUT that finds none and a create that finds one (its answer lost, resent) keeps the record on",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    let lost = 0;
    // The create is applied, its answer lost; the client sends it again
    // (a ConfigMap's create may be resent) and meets 409 AlreadyExists.
    api.intercept = async (method, _name, next) => {
      if (method !== "POST" || lost++) return await next();
      await next();
      return await next();
    };
    const warned: string[] = [];
    const r = run(api, { warned });
    r.progress(progress(0));
    await quiet();
    assert.deepEqual(
      api.requests.map((q) => `${q.method} ${q.status}`).slice(0, 3),
      ["GET 404", "POST 201", "POST 409"],
    );
    await r.finished("3/3 succeeded", false, 1_000);
    assert.deepEqual(warned, []);
    assert.equal((await stored(api)).state, "finished", "the closing write landed");
  },
});

Deno.test({
  name: "FakeConfigMaps refuses a PUT with a stale resourceVersion, as the API server does",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    const cm = (rv?: string) => ({ metadata: { name: "x", resourceVersion: rv } });
    const path = "/api/v1/namespaces/ops/configmaps";
    await assert.rejects(api.request("update", "PUT", `${path}/x`, cm()), ApiError);
    const made = await api.request<{ metadata: { resourceVersion: string } }>(
      "create",
      "POST",
      path,
      cm(),
    );
    const rv = made.metadata.resourceVersion;
    await api.request("update", "PUT", `${path}/x`, cm(rv));
    await assert.rejects(
      api.request("update", "PUT", `${path}/x`, cm(rv)),
      (e: ApiError) => e.status === 409 && e.reason === "Conflict",
    );
    await api.request("update", "PUT", `${path}/x`, cm());
  },
});

/** A bare ConfigMap of the record, written by `writer`, saying `state`. */
function cm(writer: string, state = "running"): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: NAME, namespace: "ops" },
    data: { record: JSON.stringify({ writer, state, startedAt: 0, owner: { name: "hook-r2" } }) },
  };
}

function store(api: FakeConfigMaps, writer: string): RecordStore {
  return new RecordStore({
    namespace: "ops",
    prefix: "up",
    request: api.request.bind(api),
    writer,
  });
}

function stateOf(api: FakeConfigMaps): string {
  const o = api.get(NAME)!;
  return `${writerOf(o)} ${JSON.parse((o.data as Record<string, string>).record).state}`;
}

function log(api: FakeConfigMaps): string[] {
  return api.requests.map((q) =>
    `${q.method} ${q.status}${q.resourceVersion ? ` @${q.resourceVersion}` : ""}`
  );
}

Deno.test({
  name: "RecordStore writes with the resourceVersion of its last write, after a first claim",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    const a = store(api, "a");
    await a.write(cm("a"));
    await a.write(cm("a"));
    await a.write(cm("a", "finished"));
    assert.deepEqual(log(api), ["GET 404", "POST 201", "PUT 200 @101", "PUT 200 @102"]);
    assert.equal(stateOf(api), "a finished");
  },
});

Deno.test({
  name: "RecordStore: who wins when two runs write one record",
  permissions: "none",
  async fn(t) {
    await t.step(
      "the later claim wins; the earlier writer is told once and writes no more",
      async () => {
        const api = new FakeConfigMaps();
        const a = store(api, "a");
        const b = store(api, "b");
        await a.write(cm("a"));
        await b.write(cm("b")); // the replacement's first write claims the record
        await assert.rejects(a.write(cm("a", "stopped")), SupersededError);
        const n = api.requests.length;
        await assert.rejects(
          a.write(cm("a", "stopped")),
          (e: Error) =>
            e instanceof SupersededError &&
            /another run \(writer b, owner Job hook-r2/.test(e.message),
        );
        assert.equal(api.requests.length, n, "no request once superseded");
        await b.write(cm("b", "finished"));
        assert.equal(stateOf(api), "b finished");
      },
    );
    await t.step(
      "a first write claims the record though another writer creates and updates it meanwhile",
      async () => {
        const api = new FakeConfigMaps();
        const a = store(api, "a");
        const b = store(api, "b");
        let armed = true;
        /** a writes while b's request waits, unseen by the intercept. */
        const aWrites = async () => {
          armed = false;
          await a.write(cm("a"));
          armed = true;
        };
        api.intercept = async (method, _name, next) => {
          if (!armed) return await next();
          // a creates the record between b's PUT (404) and b's POST (409 AlreadyExists).
          if (method === "POST") await aWrites();
          const answer = await next();
          // a's heartbeat lands between b's read and b's PUT (409 Conflict) once.
          if (
            method === "GET" && !api.requests.some((q) => q.status === 409 && q.method === "PUT")
          ) {
            await aWrites();
          }
          return answer;
        };
        await b.write(cm("b"));
        assert.deepEqual(log(api), [
          "GET 404",
          "GET 404", // a
          "POST 201", // a
          "POST 409",
          "GET 200",
          "PUT 200 @101", // a
          "PUT 409 @101",
          "GET 200",
          "PUT 200 @102",
        ]);
        assert.equal(stateOf(api), "b running");
        await assert.rejects(a.write(cm("a", "stopped")), SupersededError);
        assert.equal(stateOf(api), "b running");
      },
    );
    await t.step("a writer whose record was deleted and made again by another stops", async () => {
      const api = new FakeConfigMaps();
      const a = store(api, "a");
      await a.write(cm("a"));
      api.delete(NAME);
      await store(api, "b").write(cm("b"));
      api.delete(NAME);
      await store(api, "c").write(cm("c"));
      await assert.rejects(a.write(cm("a", "stopped")), SupersededError);
      assert.equal(stateOf(api), "c running");
    });
  },
});

Deno.test({
  name: "RecordStore keeps writing its own record after a 409 of its own making",
  permissions: "none",
  async fn(t) {
    await t.step(
      "an update applied, its answer lost, resent: 409, read, written again",
      async () => {
        const api = new FakeConfigMaps();
        const a = store(api, "a");
        await a.write(cm("a"));
        let lost = true;
        api.intercept = async (method, _name, next) => {
          if (method === "PUT" && lost) {
            lost = false;
            await next();
          }
          return await next();
        };
        await a.write(cm("a", "finished"));
        assert.deepEqual(log(api).slice(2), [
          "PUT 200 @101",
          "PUT 409 @101",
          "GET 200",
          "PUT 200 @102",
        ]);
        assert.equal(stateOf(api), "a finished");
      },
    );
    await t.step("its record deleted mid-run: made again", async () => {
      const api = new FakeConfigMaps();
      const a = store(api, "a");
      await a.write(cm("a"));
      api.delete(NAME);
      await a.write(cm("a", "finished"));
      assert.deepEqual(log(api).slice(2), ["PUT 404 @101", "POST 201"]);
      assert.equal(stateOf(api), "a finished");
    });
  },
});

Deno.test({
  name: "RecordStore gives up a write after five conflicts in a row, with the 409",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    const a = store(api, "a");
    await a.write(cm("a"));
    const replace = () => api.request("update", "PUT", `/x/configmaps/${NAME}`, cm("a"));
    await replace(); // moves the resourceVersion on under a
    // Someone keeps replacing a's own record between a's read and its write.
    api.intercept = async (method, _name, next) => {
      const answer = await next();
      if (method === "GET") await replace();
      return answer;
    };
    await assert.rejects(a.write(cm("a")), (e: ApiError) => e.status === 409);
  },
});

Deno.test({
  name:
    "RecordStore: a first write whose outcome is unknown never lands later over a newer run's claim",
  permissions: "none",
  async fn(t) {
    const outage = () =>
      new ApiError({
        status: 503,
        reason: "ServiceUnavailable",
        verb: "update",
        resource: "configmaps",
        message: "the API server is down",
      });
    // Yesterday's run left its record; the evicted pod a's first write
    // meets an outage (applied or not, its answer never comes); the
    // replacement b claims the record; a's closing `stopped` must not
    // replace b's `running` (the unconditional first PUT, sent again,
    // did), nor make b the one that stops writing.
    for (const applied of [false, true]) {
      await t.step(`the first write ${applied ? "applied" : "not applied"}`, async () => {
        const api = new FakeConfigMaps();
        await store(api, "z").write(cm("z", "finished"));
        const a = store(api, "a");
        api.intercept = async (method, _name, next) => {
          if (method === "GET") return await next();
          if (applied) await next();
          throw outage();
        };
        await assert.rejects(a.write(cm("a")), (e: ApiError) => e.status === 503);
        api.intercept = undefined;
        const b = store(api, "b");
        await b.write(cm("b"));
        await assert.rejects(a.write(cm("a", "stopped")), SupersededError);
        assert.equal(stateOf(api), "b running");
        await b.write(cm("b", "finished"));
        assert.equal(stateOf(api), "b finished");
      });
    }
    await t.step(
      "the first write not applied, no other run since: the next one claims",
      async () => {
        const api = new FakeConfigMaps();
        await store(api, "z").write(cm("z", "finished"));
        const a = store(api, "a");
        api.intercept = async (method, _name, next) => {
          if (method === "GET") return await next();
          throw outage();
        };
        await assert.rejects(a.write(cm("a")), (e: ApiError) => e.status === 503);
        api.intercept = undefined;
        await a.write(cm("a"));
        await a.write(cm("a", "finished"));
        assert.equal(stateOf(api), "a finished");
      },
    );
  },
});

Deno.test({
  name: "RecordStore without configmaps get claims the record unconditionally, as before",
  permissions: "none",
  async fn() {
    const api = new FakeConfigMaps();
    await store(api, "z").write(cm("z", "finished"));
    api.intercept = async (method, _name, next) => {
      if (method !== "GET") return await next();
      throw new ApiError({
        status: 403,
        reason: "Forbidden",
        verb: "get",
        resource: "configmaps",
        message: "forbidden",
      });
    };
    const a = store(api, "a");
    await a.write(cm("a"));
    await a.write(cm("a", "finished"));
    assert.deepEqual(log(api).slice(-2), ["PUT 200", "PUT 200 @102"]);
    assert.equal(stateOf(api), "a finished");
  },
});

// The closing write is the one a caller counts the run by (fleet/): one that
// a policy refuses, or that an outage loses (a write is sent again only on
// Retry-After), leaves the record "running" after an exit 0.
const CLOSING: { name: string; answer?: number; want?: RegExp; firstOnly?: boolean }[] = [
  { name: "a closing write that lands", want: undefined },
  { name: "a write lost mid-run (503), the closing one lands", answer: 503, firstOnly: true },
  { name: "every write refused by a policy (403)", answer: 403, want: /denied by policy/ },
  { name: "the closing write lost to an outage (503)", answer: 503, want: /etcd is down/ },
];

for (const c of CLOSING) {
  Deno.test({
    name: `a run tells its caller when its closing record write does not land: ${c.name}`,
    permissions: "none",
    async fn() {
      const api = new FakeConfigMaps();
      const lost: string[] = [];
      let writes = 0;
      api.intercept = (method, _name, next) => {
        if (method === "GET" || !c.answer) return next();
        if (c.firstOnly && writes++ > 0) return next();
        // A 403 refuses every write; an outage loses the closing one only.
        if (c.answer === 503 && writes++ === 0) return next();
        const message = c.answer === 403
          ? "configmaps is forbidden: ValidatingAdmissionPolicy 'records' denied by policy"
          : "etcd is down";
        return Promise.reject(
          new ApiError({
            status: c.answer,
            reason: "x",
            verb: "update",
            resource: "configmaps",
            message,
          }),
        );
      };
      const r = run(api, { lost });
      r.progress(progress(0));
      await quiet();
      await r.finished("3/3 succeeded", false, 1_000);
      if (!c.want) return assert.deepEqual(lost, []);
      assert.equal(lost.length, 1, lost.join("\n"));
      assert.match(lost[0], c.want);
    },
  });
}
