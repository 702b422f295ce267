import assert from "node:assert/strict";
import {
  keptKey,
  keptSuccess,
  type MarkedNode,
  SuccessKeeper,
  type SuccessMark,
  successMarkPatch,
} from "./success_mark.ts";
import type { V1Node } from "@kubernetes/client-node";
import { ApiError, type Kube } from "../kube/client.ts";
import { status, withServer } from "../testing/loopback.ts";
import { applyJsonPatch } from "../testing/json_patch.ts";

const KEY = "job-dispatcher/succeeded-job";
const NODE: MarkedNode = { name: "n1", uid: "u1" };
const MARK: SuccessMark = { job: "up-n1", owner: "o1", templateHash: "h1" };

Deno.test({
  name: "successMarkPatch() tests the node's UID, then sets or removes the mark",
  permissions: "none",
  async fn(t) {
    const test = { op: "test", path: "/metadata/uid", value: "u1" };
    const path = "/metadata/annotations/job-dispatcher~1succeeded-job";
    await t.step("set", () => {
      assert.deepEqual(successMarkPatch(KEY, NODE, MARK), [
        test,
        { op: "add", path, value: JSON.stringify(MARK) },
      ]);
    });
    await t.step("set on a node read without annotations: the map, on that version only", () => {
      assert.deepEqual(successMarkPatch(KEY, NODE, MARK, { resourceVersion: "7" }), [
        test,
        { op: "test", path: "/metadata/resourceVersion", value: "7" },
        { op: "add", path: "/metadata/annotations", value: { [KEY]: JSON.stringify(MARK) } },
      ]);
    });
    await t.step("remove: add-then-remove, so a missing mark is no error", () => {
      assert.deepEqual(successMarkPatch(KEY, NODE, null), [
        test,
        { op: "add", path, value: "" },
        { op: "remove", path },
      ]);
    });
  },
});

Deno.test({
  name: "keptSuccess() counts only the mark of the same Job, owner and template",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      value?: string;
      expected?: Partial<SuccessMark>;
      kept: boolean;
    }[] = [
      { name: "the same", value: JSON.stringify(MARK), kept: true },
      { name: "none", kept: false },
      { name: "not JSON", value: "yes", kept: false },
      { name: "JSON null", value: "null", kept: false },
      { name: "another Job", value: JSON.stringify({ ...MARK, job: "up-n2" }), kept: false },
      { name: "another owner", value: JSON.stringify({ ...MARK, owner: "o0" }), kept: false },
      {
        name: "no owner, the run has one",
        value: JSON.stringify({ ...MARK, owner: undefined }),
        kept: false,
      },
      {
        name: "no owner, nor the run",
        value: JSON.stringify({ ...MARK, owner: undefined }),
        expected: { owner: undefined },
        kept: true,
      },
      {
        name: "another template",
        value: JSON.stringify({ ...MARK, templateHash: "h0" }),
        kept: false,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const annotations: Record<string, string> = c.value === undefined ? {} : { [KEY]: c.value };
        const got = keptSuccess(annotations, KEY, { ...MARK, ...c.expected });
        assert.equal(got !== undefined, c.kept);
      });
    }
  },
});

function kube(answer: (n: number) => unknown) {
  const sent: unknown[][] = [];
  return {
    sent,
    kube: {
      request: <T>(...args: unknown[]): Promise<T> => {
        sent.push(args);
        const a = answer(sent.length);
        return a instanceof Error ? Promise.reject(a) : Promise.resolve(a as T);
      },
      get: <T>(): Promise<T | undefined> => Promise.resolve(undefined),
    },
  };
}

const error = (status: number, message = "no") =>
  new ApiError({ status, reason: "x", verb: "patch", resource: "nodes", message });

Deno.test({
  name: "SuccessKeeper writes the mark, throws an outage, and says a refusal once and goes on",
  permissions: "none",
  async fn(t) {
    const warned: string[] = [];
    const opts = { key: KEY, node: () => NODE, warn: (m: string) => void warned.push(m) };
    await t.step("keep then release: two PATCHes of the node", async () => {
      const k = kube(() => ({}));
      const keeper = new SuccessKeeper({ ...opts, kube: k.kube });
      await keeper.keep("n1", MARK);
      await keeper.release("n1");
      assert.deepEqual(k.sent.map((s) => `${s[1]} ${s[2]}`), [
        "PATCH /api/v1/nodes/n1",
        "PATCH /api/v1/nodes/n1",
      ]);
    });
    await t.step("an outage is thrown: the work waits for its mark", async () => {
      const keeper = new SuccessKeeper({ ...opts, kube: kube(() => error(503)).kube });
      await assert.rejects(keeper.keep("n1", MARK), ApiError);
    });
    await t.step("a 403 is said once, and nothing more is sent", async () => {
      warned.length = 0;
      const k = kube(() => error(403, "nodes is forbidden"));
      const keeper = new SuccessKeeper({ ...opts, kube: k.kube });
      await keeper.keep("n1", MARK);
      await keeper.keep("n2", MARK);
      await keeper.release("n1");
      assert.equal(k.sent.length, 1);
      assert.equal(warned.length, 1);
      assert.match(warned[0], /cannot keep successes on their nodes .*forbidden/);
    });
    await t.step("a mark this run did not write is not removed", async () => {
      const k = kube(() => ({}));
      await new SuccessKeeper({ ...opts, kube: k.kube }).release("n1");
      assert.equal(k.sent.length, 0);
    });
  },
});

const applyPatch = applyJsonPatch;

/** A fake API server holding node n1: GET returns it, PATCH applies a JSON Patch (422 on a failure). */
async function withNode(
  initial: V1Node,
  fn: (kube: Kube, state: () => V1Node) => Promise<void>,
): Promise<void> {
  let node = initial;
  await withServer((req, _n, body) => {
    if (!new URL(req.url).pathname.endsWith("/api/v1/nodes/n1")) return status(404, "NotFound");
    if (req.method === "GET") return Response.json(node);
    if (req.method !== "PATCH") return status(405, "MethodNotAllowed");
    try {
      node = applyPatch(node, body as never) as V1Node;
      return Response.json(node);
    } catch {
      return status(422, "Invalid", { message: "the request is invalid" });
    }
  }, (kube) => fn(kube, () => node));
}

Deno.test({
  name: "SuccessKeeper never replaces the annotations a node gained after its selection " +
    "(the run's own cordon record): the mark and the release leave every other annotation",
  permissions: { net: true, read: true, write: true, env: true },
  async fn() {
    const CORDONED_BY = "job-dispatcher/cordoned-by";
    // Selected without annotations (a node made by a tool, a kwok node);
    // --cordon then recorded its cordon on it before the Job.
    const selected: MarkedNode = { name: "n1", uid: "u1" };
    const cordoned: V1Node = {
      metadata: { name: "n1", uid: "u1", annotations: { [CORDONED_BY]: "run-a" } },
      spec: { unschedulable: true },
    };
    await withNode(cordoned, async (kube, state) => {
      const keeper = new SuccessKeeper({ kube, key: KEY, node: () => selected, warn: () => {} });
      await keeper.keep("n1", MARK);
      assert.equal(
        state().metadata?.annotations?.[CORDONED_BY],
        "run-a",
        "the cordon record is kept, else the uncordon finds it not ours and the node stays cordoned",
      );
      assert.deepEqual(JSON.parse(state().metadata!.annotations![keptKey(KEY, MARK.job)]), MARK);
      await keeper.release("n1");
      assert.deepEqual(state().metadata?.annotations, { [CORDONED_BY]: "run-a" });
    });
  },
});

Deno.test({
  name: "SuccessKeeper makes the annotations map of a node that has none, on the version it read",
  permissions: { net: true, read: true, write: true, env: true },
  async fn() {
    const bare: V1Node = { metadata: { name: "n1", uid: "u1", resourceVersion: "7" } };
    await withNode(bare, async (kube, state) => {
      const keeper = new SuccessKeeper({ kube, key: KEY, node: () => NODE, warn: () => {} });
      await keeper.keep("n1", MARK);
      assert.deepEqual(JSON.parse(state().metadata!.annotations![keptKey(KEY, MARK.job)]), MARK);
      await keeper.release("n1");
      assert.deepEqual(state().metadata?.annotations, {});
    });
    const replaced: V1Node = { metadata: { name: "n1", uid: "u2", resourceVersion: "7" } };
    await withNode(replaced, async (kube, state) => {
      const warned: string[] = [];
      const keeper = new SuccessKeeper({
        kube,
        key: KEY,
        node: () => NODE,
        warn: (m) => void warned.push(m),
      });
      await keeper.keep("n1", MARK);
      assert.equal(state().metadata?.annotations, undefined, "a replaced node gets no mark");
      assert.deepEqual(warned, []);
    });
  },
});

Deno.test({
  name: "SuccessKeeper keeps the success of each Job on a node apart: a second rollout sharing " +
    "the tracking prefix (another chart release) neither replaces nor removes the first's mark",
  permissions: { net: true, read: true, write: true, env: true },
  async fn() {
    const node: V1Node = { metadata: { name: "n1", uid: "u1", annotations: { other: "x" } } };
    await withNode(node, async (kube, state) => {
      const keeper = () => new SuccessKeeper({ kube, key: KEY, node: () => NODE, warn: () => {} });
      const driver = { job: "gpu-driver-n1", owner: "o1", templateHash: "h1" };
      const firmware = { job: "nic-firmware-n1", owner: "o2", templateHash: "h2" };
      const a = keeper(), b = keeper();
      await a.keep("n1", driver);
      // Release b's own, while a is killed during its post-success work.
      await b.keep("n1", firmware);
      await b.release("n1");
      const annotations = state().metadata?.annotations ?? {};
      const kept = Object.keys(annotations).filter((k) =>
        keptSuccess(annotations, k, driver) !== undefined
      );
      assert.equal(
        kept.length,
        1,
        `a re-run of gpu-driver finds its success: ${JSON.stringify(annotations)}`,
      );
      assert.equal(annotations.other, "x");
    });
  },
});

Deno.test({
  name: "keptKey() names a mark per Job, within the 63 characters of a key's name",
  permissions: "none",
  fn() {
    assert.equal(keptKey(KEY, "up-n1"), "job-dispatcher/succeeded-job.up-n1");
    const long = (n: string) => `${"a".repeat(50)}-${n}`;
    const [one, two] = [keptKey(KEY, long("node-1")), keptKey(KEY, long("node-2"))];
    assert.notEqual(one, two);
    for (const key of [one, two]) {
      const name = key.split("/")[1];
      assert.equal(name.length, 63, key);
      assert.match(name, /^[a-z0-9][-a-z0-9_.]*[a-z0-9]$/, key);
    }
  },
});

Deno.test({
  name:
    "SuccessKeeper: a node deleted during its post-success work (404) stops no other node's mark",
  permissions: "none",
  async fn() {
    const warned: string[] = [];
    const k = kube((n) => n === 1 ? error(404, 'nodes "n1" not found') : {});
    const keeper = new SuccessKeeper({
      kube: k.kube,
      key: KEY,
      node: (name) => ({ name, uid: `u-${name}` }),
      warn: (m) => void warned.push(m),
    });
    await keeper.keep("n1", MARK);
    await keeper.keep("n2", { ...MARK, job: "up-n2" });
    assert.deepEqual(k.sent.map((s) => s[2]), ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]);
    assert.deepEqual(warned, [], "a node gone is its own work's failure, not a refusal of marks");
  },
});
