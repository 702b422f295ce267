import assert from "node:assert/strict";
import { completionScript, valueKind } from "./completion.ts";
import { COMMANDS } from "./commands.ts";
import { flagEntries } from "./manual.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;

/** Whether `shell` is installed here. */
function has(shell: string): boolean {
  try {
    return new Deno.Command(shell, { args: ["-c", "exit 0"], stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

/**
 * A folder with the scripts and a `job-dispatcher` on PATH that runs this
 * checkout (the scripts ask it `__complete` for contexts and namespaces).
 */
function workspace(): { dir: string; env: Record<string, string> } {
  const dir = Deno.makeTempDirSync({ prefix: "completion-" });
  Deno.writeTextFileSync(
    `${dir}/job-dispatcher`,
    `#!/bin/sh\nexec "${Deno.execPath()}" run --allow-all "${MAIN}" "$@"\n`,
    { mode: 0o755 },
  );
  for (const shell of ["bash", "zsh", "fish"]) {
    Deno.writeTextFileSync(`${dir}/completion.${shell}`, completionScript(shell));
  }
  Deno.writeTextFileSync(
    `${dir}/kubeconfig`,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
contexts: [{name: dev, context: {cluster: c}}, {name: prod-eu1, context: {cluster: c}}]
current-context: dev
`,
  );
  return { dir, env: { PATH: `${dir}:${Deno.env.get("PATH")}` } };
}

/** What bash (or zsh, through bashcompinit) offers for `words`, the last being completed. */
function offered(
  shell: "bash" | "zsh",
  ws: ReturnType<typeof workspace>,
  words: string[],
): string[] {
  const quoted = words.map((w) => `'${w}'`).join(" ");
  const script = `source ${ws.dir}/completion.${shell}
COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; COMPREPLY=()
_job_dispatcher
printf '%s\\n' "\${COMPREPLY[@]}"`;
  // bash -i: an interactive shell, as a user's, without their rc files.
  const args = shell === "bash"
    ? ["--norc", "--noprofile", "-i", "-c", script]
    : ["-f", "-c", script];
  const out = new Deno.Command(shell, { args, env: ws.env, cwd: ws.dir, stderr: "piped" })
    .outputSync();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean);
}

const CASES: [string, string[], (got: string[]) => void][] = [
  ["--dr offers --drain and --dry-run", ["job-dispatcher", "--dr"], (got) => {
    assert.ok(got.includes("--drain") && got.includes("--dry-run"), got.join(" "));
  }],
  ["--dra offers --drain, --drain-timeout-secs", ["job-dispatcher", "--dra"], (got) => {
    assert.deepEqual(got, ["--drain", "--drain-timeout-secs"]);
  }],
  ["the subcommands first", ["job-dispatcher", ""], (got) => {
    assert.deepEqual(got, ["status", "fleet", "rbac", "help", "completion"]);
  }],
  ["--on-gate-breach's values", ["job-dispatcher", "--on-gate-breach", ""], (got) => {
    assert.deepEqual(got, ["pause", "exit"]);
  }],
  ["a run's -o", ["job-dispatcher", "-o", ""], (got) => assert.deepEqual(got, ["text", "json"])],
  ["status' -o", ["job-dispatcher", "status", "-o", ""], (got) => {
    assert.deepEqual(got, ["text", "wide", "json"]);
  }],
  ["--dry-run=, split at = by bash", ["job-dispatcher", "--dry-run", "=", "p"], (got) => {
    assert.deepEqual(got, ["plan"]);
  }],
  ["status' own flags", ["job-dispatcher", "status", "--wa"], (got) => {
    assert.deepEqual(got, ["--watch"]);
  }],
  ["fleet's actions", ["job-dispatcher", "fleet", ""], (got) => {
    assert.deepEqual(got, ["approve", "status"]);
  }],
  ["help's topics", ["job-dispatcher", "help", "gat"], (got) => {
    assert.deepEqual(got, ["gates", "gate"]);
  }],
  ["--context from the kubeconfig", [
    "job-dispatcher",
    "--kubeconfig",
    "kubeconfig",
    "--context",
    "",
  ], (got) => {
    assert.deepEqual(got, ["dev", "prod-eu1"]);
  }],
  // zsh's bashcompinit (and bash without "=" in COMP_WORDBREAKS) leaves --context=pr whole.
  ["--context=pr keeps its --context=", [
    "job-dispatcher",
    "--kubeconfig",
    "kubeconfig",
    "--context=pr",
  ], (got) => {
    assert.deepEqual(got, ["--context=prod-eu1"]);
  }],
  ["--namespace: nothing when the cluster does not answer", [
    "job-dispatcher",
    "--kubeconfig",
    "kubeconfig",
    "-n",
    "",
  ], (got) => {
    assert.deepEqual(got, []);
  }],
];

Deno.test({
  name: "the bash completion loads in bash -i and completes flags, values and contexts",
  ignore: !has("bash"),
  async fn(t) {
    const ws = workspace();
    for (const [name, words, check] of CASES) {
      await t.step(name, () => check(offered("bash", ws, words)));
    }
  },
});

Deno.test({
  name: "a kubeconfig's context name is offered as one word, its shell syntax never run",
  ignore: !has("bash"),
  async fn(t) {
    const ws = workspace();
    // Context names are free text: a shared kubeconfig may hold any.
    Deno.writeTextFileSync(
      `${ws.dir}/kubeconfig`,
      `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
contexts:
- {name: "$(touch ran)", context: {cluster: c}}
- {name: "eu west", context: {cluster: c}}
- {name: "x*", context: {cluster: c}}
current-context: "eu west"
`,
    );
    for (const shell of ["bash", "zsh"] as const) {
      if (!has(shell)) continue;
      await t.step(shell, () => {
        const got = offered(shell, ws, [
          "job-dispatcher",
          "--kubeconfig",
          "kubeconfig",
          "--context",
          "",
        ]);
        assert.throws(() => Deno.statSync(`${ws.dir}/ran`), Deno.errors.NotFound, "a name ran");
        assert.deepEqual(got, ["\\$\\(touch\\ ran\\)", "eu\\ west", "x\\*"]);
        const eu = offered(shell, ws, [
          "job-dispatcher",
          "--kubeconfig",
          "kubeconfig",
          "--context",
          "eu",
        ]);
        assert.deepEqual(eu, ["eu\\ west"]);
      });
    }
  },
});

Deno.test({
  name: "the zsh completion loads in zsh and completes through bashcompinit",
  ignore: !has("zsh"),
  async fn(t) {
    const ws = workspace();
    // zsh's compgen leaves the filtering by prefix to compadd: compare what matches.
    for (const [name, words, check] of CASES) {
      const prefix = words.at(-1)!;
      await t.step(
        name,
        () => check(offered("zsh", ws, words).filter((w) => w.startsWith(prefix))),
      );
    }
  },
});

Deno.test({
  name: "the fish completion loads in fish and completes flags, values and contexts",
  ignore: !has("fish"),
  async fn(t) {
    const ws = workspace();
    const complete = (line: string) => {
      const script = `source ${ws.dir}/completion.fish; complete -C '${line}'`;
      const out = new Deno.Command("fish", {
        args: ["--no-config", "-c", script],
        env: ws.env,
        cwd: ws.dir,
      })
        .outputSync();
      assert.ok(out.success);
      return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean).map((l) =>
        l.split("\t")[0]
      );
    };
    await t.step(
      "--dr",
      () =>
        assert.ok(
          ["--drain", "--dry-run"].every((f) => complete("job-dispatcher --dr").includes(f)),
        ),
    );
    await t.step(
      "--on-gate-breach",
      () =>
        assert.deepEqual(complete("job-dispatcher --on-gate-breach ").sort(), ["exit", "pause"]),
    );
    await t.step(
      "status -o",
      () =>
        assert.deepEqual(complete("job-dispatcher status -o ").sort(), ["json", "text", "wide"]),
    );
    await t.step(
      "--context",
      () =>
        assert.deepEqual(complete("job-dispatcher --kubeconfig kubeconfig --context "), [
          "dev",
          "prod-eu1",
        ]),
    );
  },
});

Deno.test({
  name: "completion completes a flag's values exactly where --help lists them",
  permissions: "none",
  fn() {
    const run = COMMANDS[0];
    const listed = flagEntries(run.help).filter((f) => valueKind(run, f).kind === "words").map((
      f,
    ) => f.name);
    assert.deepEqual(listed.sort(), [
      "dry-run",
      "log-format",
      "node-records",
      "on-gate-breach",
      "order",
      "output",
      "pin",
      "report-format",
    ]);
  },
});

Deno.test({
  name: "completion with no shell or another is one line naming the shells",
  permissions: "none",
  fn() {
    assert.throws(
      () => completionScript("tcsh"),
      /^UsageError: Invalid shell "tcsh": write job-dispatcher completion bash\|zsh\|fish$/,
    );
    assert.throws(() => completionScript(undefined), /^UsageError: Missing shell: /);
  },
});

Deno.test({
  name:
    "the scripts run __complete with stdin from /dev/null: an exec plugin never reads the terminal",
  permissions: "none",
  fn() {
    // `__complete namespaces` may run the kubeconfig's exec credential plugin;
    // with the shell's stdin it could read the keys typed at the prompt.
    for (const script of [completionScript("bash"), completionScript("fish")]) {
      const calls = script.split("\n").filter((l) => l.includes("__complete"));
      assert.ok(calls.length > 0);
      const call = script.slice(script.indexOf("job-dispatcher __complete"));
      assert.match(call.slice(0, call.indexOf("2>/dev/null")), /<\s*\/dev\/null/, calls.join("\n"));
    }
  },
});
