import assert from "node:assert/strict";
import { StopLine } from "./line.ts";

function lineWith(pauseFile?: string, failWrite = false) {
  const files = new Map<string, string>();
  const line = new StopLine({
    pauseFile,
    write: (path, reason) =>
      failWrite
        ? Promise.reject(new Error("EACCES"))
        : Promise.resolve(void files.set(path, reason)),
    exists: (path) => files.has(path),
  });
  return { line, files };
}

const STOP = { cluster: "a", stage: "one", cause: "budget exceeded", code: 1 };
const REASON = "fleet: the line is stopped by cluster a (stage one): budget exceeded";

Deno.test("StopLine holds each other cluster as its latch says", async (t) => {
  const cases = [
    {
      name: "a pause file: held, not stopped",
      file: "/p",
      fail: false,
      paused: REASON,
      stops: undefined,
    },
    {
      name: "no pause file: stopped",
      file: undefined,
      fail: false,
      paused: undefined,
      stops: REASON,
    },
    {
      name: "a pause file that cannot be written: stopped",
      file: "/p",
      fail: true,
      paused: undefined,
      stops: REASON,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const { line, files } = lineWith(c.file, c.fail);
      const b = line.holdFor("b");
      assert.equal(b.pausedBy(), undefined, "nothing held before a stop");
      assert.equal(await line.stop(STOP), true);
      assert.equal(b.pausedBy(), c.paused);
      assert.equal(b.stopsBy?.(), c.stops);
      const a = line.holdFor("a");
      assert.equal(
        a.pausedBy() ?? a.stopsBy?.(),
        undefined,
        "the stopping cluster's run stops itself",
      );
      if (c.file && !c.fail) assert.equal(files.get(c.file), REASON);
    });
  }
});

Deno.test("StopLine lets go once a person removed the pause file, and not again", async () => {
  const { line, files } = lineWith("/p");
  const b = line.holdFor("b");
  await line.stop(STOP);
  assert.equal(b.pausedBy(), REASON);
  files.delete("/p");
  assert.equal(b.pausedBy(), undefined);
  files.set("/p", "someone else's pause"); // the run's own FilePause holds for that one
  assert.equal(b.pausedBy(), undefined);
});

Deno.test("StopLine holds starts from the stop on, before its pause file is written", async () => {
  let release = () => {};
  const written = new Promise<void>((r) => (release = r));
  const line = new StopLine({ pauseFile: "/p", write: () => written, exists: () => false });
  const b = line.holdFor("b");
  const woken: string[] = [];
  b.onChange(() => woken.push("b"));
  const stopping = line.stop(STOP);
  assert.equal(b.pausedBy(), REASON, "held at once");
  assert.deepEqual(woken, ["b"]);
  release();
  await stopping;
});

Deno.test("StopLine keeps the first stop; its cluster's own exit code replaces the presumed one", async () => {
  const { line } = lineWith();
  assert.equal(await line.stop({ ...STOP, code: 5 }), true);
  assert.equal(await line.stop({ ...STOP, cluster: "b", code: 1 }), false);
  assert.equal(await line.stop({ ...STOP, code: 4 }), false);
  assert.deepEqual(line.stopped, { ...STOP, code: 4 });
});

Deno.test("StopLine latches the pause on each in-flight cluster's owner Job", async () => {
  const owners = new Map<string, string>();
  const line = new StopLine({
    write: () => Promise.reject(new Error("no pause file here")),
    exists: () => false,
    owner: (cluster, reason) =>
      cluster === "c"
        ? Promise.reject(new Error("403 forbidden"))
        : Promise.resolve(void owners.set(cluster, reason)),
  });
  const a = line.holdFor("a");
  const b = line.holdFor("b");
  const c = line.holdFor("c");
  line.holdFor("d");
  line.release("d"); // ended before the stop: its owner is left alone
  await line.stop(STOP);
  assert.deepEqual([...owners], [["b", REASON]]);
  assert.equal(line.latches, true);
  // b holds on its own owner Job's pause (the run's OwnerPause gate), which a person lifts.
  assert.equal(b.pausedBy(), undefined);
  assert.equal(b.stopsBy?.(), undefined);
  // c's owner refused the latch: c stops instead, as a breach's refused latch stops a run.
  assert.equal(c.stopsBy?.(), REASON);
  assert.equal(a.pausedBy(), undefined);
  assert.equal(a.stopsBy?.(), undefined);
});
