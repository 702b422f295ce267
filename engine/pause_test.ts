import assert from "node:assert/strict";
import { FilePause, ownerPausedBy, pauseFileExists } from "./pause.ts";

Deno.test({
  name: "ownerPausedBy() pauses only on the value true of the owner's annotation",
  permissions: "none",
  async fn(t) {
    const job = (annotations?: Record<string, string>) => ({
      metadata: { name: "hook", namespace: "ops", annotations },
    });
    const cases: [string, ReturnType<typeof job> | undefined, string | undefined][] = [
      ["true pauses", job({ "p/paused": "true" }), "annotation p/paused=true on Job ops/hook"],
      ["false does not", job({ "p/paused": "false" }), undefined],
      ["another value does not", job({ "p/paused": "yes" }), undefined],
      ["no annotation", job(), undefined],
      ["another prefix's", job({ "q/paused": "true" }), undefined],
      ["the owner gone: not paused", undefined, undefined],
    ];
    for (const [name, owner, want] of cases) {
      await t.step(name, () => assert.equal(ownerPausedBy(owner, "p/paused"), want));
    }
  },
});

Deno.test("FilePause is paused while its file exists and wakes on each change", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/pause`;
  await Deno.writeTextFile(path, "");
  const gate = new FilePause(path, 10);
  try {
    assert.equal(gate.pausedBy(), `file ${path}`);
    const woken = new Promise<void>((resolve) => gate.onChange(resolve));
    await Deno.remove(path);
    await woken;
    assert.equal(gate.pausedBy(), undefined);
  } finally {
    await gate.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pauseFileExists(): only a file that is not there is absent; a stat that fails otherwise keeps the pause", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/there`, "x\n");
    await Deno.symlink(`${dir}/loop`, `${dir}/loop`);
    const rows: [string, boolean][] = [
      ["there", true],
      ["gone", false], // ENOENT: removed, the lift
      ["no-dir/run.pause", false], // ENOENT in a directory that is not there
      ["there/run.pause", false], // ENOTDIR: nothing can be there
      ["loop", true], // ELOOP, like EACCES or EIO: says nothing of an `rm`
    ];
    for (const [name, want] of rows) assert.equal(pauseFileExists(`${dir}/${name}`), want, name);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
