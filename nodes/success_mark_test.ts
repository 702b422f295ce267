import assert from "node:assert/strict";
import {
  keptSuccess,
  type MarkedNode,
  SuccessKeeper,
  type SuccessMark,
  successMarkPatch,
} from "./success_mark.ts";
import { ApiError } from "../kube/client.ts";

const KEY = "job-dispatcher/succeeded-job";
const NODE: MarkedNode = { name: "n1", uid: "u1", hasAnnotations: true };
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
    await t.step("set on a node without annotations makes the map first", () => {
      const ops = successMarkPatch(KEY, { ...NODE, hasAnnotations: false }, MARK);
      assert.deepEqual(ops[1], { op: "add", path: "/metadata/annotations", value: {} });
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
