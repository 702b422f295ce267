import assert from "node:assert/strict";
import { imageEnv } from "./_measure.ts";

Deno.test({
  name:
    "imageEnv() gives a benchmark the image's ENV lines, so it measures the process the chart runs",
  permissions: { read: true, write: true },
  fn() {
    // The 65,000-node figure of issue 29 holds with one malloc arena: the
    // image must set it, and the benches must run with it.
    assert.equal(imageEnv().MALLOC_ARENA_MAX, "1");
    const file = Deno.makeTempFileSync();
    Deno.writeTextFileSync(file, "FROM x\nENV A=1\n# ENV B=2\nENV C=three \nRUN ENV=4\n");
    assert.deepEqual(imageEnv(file), { A: "1", C: "three" });
    Deno.removeSync(file);
  },
});

Deno.test({
  name: "imageEnv() reads the final stage's ENV lines only: a build stage's ENV is not the image's",
  permissions: { read: true, write: true },
  fn() {
    const file = Deno.makeTempFileSync();
    Deno.writeTextFileSync(
      file,
      "FROM deno AS build\nENV DENO_DIR=/cache\nRUN x\nFROM distroless\nUSER 1\nENV A=1\n",
    );
    assert.deepEqual(imageEnv(file), { A: "1" });
    Deno.removeSync(file);
  },
});
