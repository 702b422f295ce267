/**
 * A suite cleans up what it makes. A child test process writes files
 * with the fixtures, as every suite does, and exits; its temp directory
 * (TMPDIR, its own, so that other suites running meanwhile do not count)
 * must then be empty. No control plane needed.
 *
 * @module
 */

import assert from "node:assert/strict";

const FIXTURES = new URL("./_fixtures.ts", import.meta.url).href;

Deno.test("a suite leaves no e2e-* file in the temp directory", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "fixtures-tmp-" });
  const suite = await Deno.makeTempFile({ prefix: "fixtures-suite-", suffix: "_test.ts" });
  try {
    await Deno.writeTextFile(
      suite,
      `import { tempDir, tempFile } from ${JSON.stringify(FIXTURES)};
Deno.test("makes files", async () => {
  for (let i = 0; i < 3; i++) await Deno.stat(await tempFile("a: 1\\n"));
  await tempFile("x", ".kubeconfig");
  await Deno.writeTextFile(\`\${await tempDir("helm-")}/f\`, "y");
});
`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["test", "--allow-all", "--quiet", suite],
      env: { TMPDIR: tmp },
      stdin: "null",
    }).output();
    const text = new TextDecoder();
    assert.equal(out.code, 0, text.decode(out.stdout) + text.decode(out.stderr));
    const left = [...Deno.readDirSync(tmp)].map((e) => e.name).filter((n) => !n.startsWith("deno"));
    assert.deepEqual(left, [], "the suite left these behind");
  } finally {
    await Deno.remove(tmp, { recursive: true });
    await Deno.remove(suite);
  }
});
