import assert from "node:assert/strict";
import { trackingKeys } from "../job.ts";
import { ApiError, type Kube } from "../kube/client.ts";
import type { Progress } from "../engine/fanout.ts";
import { FakeClock, settle } from "../testing/fake_api.ts";
import { FakeConfigMaps } from "../testing/fake_configmaps.ts";
import { Logger } from "./log.ts";
import { decodeRecord, recordName, type RunRecord } from "./record.ts";
import { Recorder } from "./report.ts";

const NAME = recordName("up");

/** A run's recorder of prefix `up` that keeps its record in `api`; its warnings in `warned`. */
function run(api: FakeConfigMaps, opts: { signal?: AbortSignal; warned?: string[] } = {}) {
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
      ["PUT 404", "POST 201", "POST 409"],
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
