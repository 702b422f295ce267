import assert from "node:assert/strict";
import { parse } from "yaml";
import {
  archiveName,
  compileTargets,
  fillManifest,
  KREW_PLATFORMS,
  PLUGIN,
  PLUGIN_BIN,
  sha256Hex,
} from "./krew.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const TEMPLATE = `${ROOT}scripts/krew/${PLUGIN}.yaml`;

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** The manifest as krew reads it, filled with a made-up sum per target. */
function filled(sums: Record<string, string>): Obj {
  return parse(fillManifest(Deno.readTextFileSync(TEMPLATE), "0.1.0", sums));
}

const targets = () => compileTargets(Deno.readTextFileSync(`${ROOT}scripts/compile.sh`));
const fakeSums = () =>
  Object.fromEntries(targets().map((t, i) => [t, i.toString(16).repeat(64).slice(0, 64)]));

Deno.test({
  name:
    "the krew manifest is a krew Plugin named job-dispatcher whose bin is kubectl-job_dispatcher",
  permissions: { read: true, env: true },
  fn() {
    const m = parse(Deno.readTextFileSync(TEMPLATE));
    assert.equal(m.apiVersion, "krew.googlecontainertools.github.com/v1alpha2");
    assert.equal(m.kind, "Plugin");
    // krew: the manifest's file name is the plugin's name, which is how kubectl calls it.
    assert.equal(m.metadata.name, PLUGIN);
    assert.ok(m.spec.shortDescription && m.spec.homepage && m.spec.description);
    // kubectl runs `kubectl job-dispatcher` as kubectl-job_dispatcher ("_" reads as "-").
    assert.equal(PLUGIN_BIN, "kubectl-job_dispatcher");
    for (const p of m.spec.platforms) {
      assert.equal(p.bin, PLUGIN_BIN);
      assert.ok(p.files.some((f: Obj) => f.from === PLUGIN_BIN), "the bin is extracted");
    }
  },
});

Deno.test({
  name: "the krew manifest has one platform per target scripts/compile.sh builds",
  permissions: { read: true, env: true },
  fn() {
    const m = filled(fakeSums());
    const want = targets().map((t) => {
      assert.ok(KREW_PLATFORMS[t], `krew os/arch of compile target ${t}`);
      return { ...KREW_PLATFORMS[t], uri: archiveName(t) };
    });
    const got = m.spec.platforms.map((p: Obj) => ({
      ...p.selector.matchLabels,
      uri: p.uri.split("/").at(-1),
    }));
    assert.deepEqual(got, want);
    for (const p of m.spec.platforms) {
      // krew downloads an archive (.tar.gz or .zip) from the release of the version.
      assert.match(p.uri, /^https:\/\/github\.com\/.+\/releases\/download\/v0\.1\.0\/.+\.tar\.gz$/);
    }
    assert.equal(m.spec.version, "v0.1.0", "krew wants a semantic version with its v");
  },
});

Deno.test({
  name: "fillManifest() puts each archive's SHA-256 in and refuses a target without one",
  permissions: { read: true, env: true },
  async fn() {
    const sums = fakeSums();
    const m = filled(sums);
    assert.deepEqual(
      m.spec.platforms.map((p: Obj) => p.sha256),
      targets().map((t) => sums[t]),
    );
    const [first, ...rest] = targets();
    delete sums[first];
    assert.throws(() => filled(sums), RangeError);
    assert.ok(rest.length > 0);
    assert.equal(
      await sha256Hex(new TextEncoder().encode("abc")),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    );
  },
});

Deno.test({
  name:
    "deno task krew packs each compiled binary as kubectl-job_dispatcher with LICENSE and writes the manifest with their sums",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "krew-test-" });
    try {
      await Deno.mkdir(`${dir}/scripts/krew`, { recursive: true });
      await Deno.mkdir(`${dir}/dist`);
      for (
        const f of ["scripts/compile.sh", `scripts/krew/${PLUGIN}.yaml`, "deno.json", "LICENSE"]
      ) {
        await Deno.copyFile(`${ROOT}${f}`, `${dir}/${f}`);
      }
      for (const t of targets()) await Deno.writeTextFile(`${dir}/dist/job-dispatcher-${t}`, t);
      const r = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--allow-read", "--allow-write", "--allow-run=tar", `${ROOT}scripts/krew.ts`],
        cwd: dir,
      }).output();
      assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
      const m = parse(await Deno.readTextFile(`${dir}/dist/${PLUGIN}.yaml`));
      for (const [i, t] of targets().entries()) {
        const archive = `${dir}/dist/${archiveName(t)}`;
        assert.equal(m.spec.platforms[i].sha256, await sha256Hex(await Deno.readFile(archive)));
        const list = await new Deno.Command("tar", { args: ["-tvzf", archive] }).output();
        const lines = new TextDecoder().decode(list.stdout).trim().split("\n");
        const entries = Object.fromEntries(lines.map((l) => [l.split(/\s+/).at(-1), l]));
        assert.deepEqual(Object.keys(entries).sort(), ["LICENSE", PLUGIN_BIN]);
        assert.match(entries[PLUGIN_BIN], /^-rwxr-xr-x/, "the bin is executable");
        const bin = await new Deno.Command("tar", { args: ["-xOzf", archive, PLUGIN_BIN] })
          .output();
        assert.equal(new TextDecoder().decode(bin.stdout), t, "the target's own binary");
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
