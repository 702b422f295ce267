/**
 * The command without `deno compile`: `deno install -g` of the bundle
 * (docs/install.md), with the permissions `deno compile` gives the binary,
 * yields a `job-dispatcher` command and, as `kubectl-job_dispatcher`, the
 * kubectl plugin. No cluster: the commands answer --version and --help.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PLUGIN_BIN } from "../scripts/krew.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const K8S = new URL("./.bin/k8s", import.meta.url).pathname;

/** Runs `cmd args` from the repository's root; its exit code and output. */
async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, { args, cwd: ROOT, env, stdin: "null" }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/** The permissions scripts/compile.sh gives the binary: the `dispatch` task's. */
function compilePermissions(): string[] {
  const task = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks.dispatch as string;
  return task.split(/\s+/).filter((w) => /^--(allow-|v8-flags=)/.test(w));
}

Deno.test({
  name: "deno install -g of the bundle gives a job-dispatcher command and the kubectl plugin",
  async fn(t) {
    const root = await Deno.makeTempDir({ prefix: "install-" });
    try {
      await t.step(
        "the bundle, installed by hand with the binary's permissions, runs",
        async () => {
          const bundle = await run("deno", ["task", "bundle"]);
          assert.equal(bundle.code, 0, bundle.stderr);
          const perms = compilePermissions();
          assert.ok(
            perms.includes("--allow-net") && perms.includes("--allow-run"),
            perms.join(" "),
          );
          const install = await run(Deno.execPath(), [
            "install",
            "-g",
            "--no-config",
            ...perms,
            "--root",
            `${root}/by-hand`,
            "--name",
            "job-dispatcher",
            "dist/job-dispatcher.js",
          ]);
          assert.equal(install.code, 0, install.stderr);
          const version = await run(`${root}/by-hand/bin/job-dispatcher`, ["--version"]);
          assert.equal(version.code, 0, version.stderr);
          assert.match(
            version.stdout,
            /^job-dispatcher \d+\.\d+\.\d+ \(deno [\d.]+, commit [\w.-]+\)\n$/,
          );
          assert.doesNotMatch(version.stdout, /commit dev\)/, "the bundle's commit is stamped");
          const help = await run(`${root}/by-hand/bin/job-dispatcher`, ["--help"]);
          assert.equal(help.code, 0, help.stderr);
          assert.match(
            help.stdout,
            /^job-dispatcher: run exactly one Kubernetes Job per selected node/,
          );
        },
      );
      await t.step("deno task install puts both commands in ROOT/bin", async () => {
        const install = await run("deno", ["task", "install", `${root}/task`]);
        assert.equal(install.code, 0, install.stderr);
        for (const name of ["job-dispatcher", PLUGIN_BIN]) {
          const version = await run(`${root}/task/bin/${name}`, ["--version"]);
          assert.equal(version.code, 0, `${name}: ${version.stderr}`);
          assert.match(version.stdout, /^job-dispatcher \d/);
        }
        // It runs a copy of the bundle: cleaning dist/ does not break the command.
        const shim = Deno.readTextFileSync(`${root}/task/bin/job-dispatcher`);
        assert.match(shim, /share\/job-dispatcher\/job-dispatcher\.js/);
        for (const p of compilePermissions()) assert.ok(shim.includes(p), `${p} in ${shim}`);
      });
      await t.step("kubectl finds the plugin: kubectl job-dispatcher --help", async () => {
        const env = { PATH: `${root}/task/bin:${Deno.env.get("PATH")}` };
        const help = await run(K8S, ["kubectl", "job-dispatcher", "help", "gates"], env);
        assert.equal(help.code, 0, help.stderr);
        assert.match(help.stdout, /^HEALTH GATES\n/);
      });
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  },
});
