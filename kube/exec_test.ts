import assert from "node:assert/strict";
import {
  DENO_RUNNER,
  type ExecConfig,
  execInfo,
  ExecPlugin,
  type ExecRunner,
  isInteractive,
  parseExecCredential,
} from "./exec.ts";

const V1 = "client.authentication.k8s.io/v1";

const CONFIG: ExecConfig = {
  command: "get-token",
  args: ["--cluster", "c"],
  env: [{ name: "PROFILE", value: "ops" }],
  apiVersion: V1,
  installHint: "Install get-token:\n  brew install get-token",
  provideClusterInfo: true,
  interactiveMode: "Never",
};

function credential(status: Record<string, unknown>, apiVersion = V1): string {
  return JSON.stringify({ apiVersion, kind: "ExecCredential", status });
}

Deno.test({
  name: "parseExecCredential() reads what client-go accepts and refuses the rest",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; stdout: string; want: RegExp | object }[] = [
      { name: "a token", stdout: credential({ token: "t" }), want: { token: "t" } },
      {
        name: "a certificate pair with an expiry",
        stdout: credential({
          clientCertificateData: "C",
          clientKeyData: "K",
          expirationTimestamp: "2030-01-01T00:00:00Z",
        }),
        want: { cert: "C", key: "K", expiresAt: Date.parse("2030-01-01T00:00:00Z") },
      },
      { name: "not JSON", stdout: "token: t", want: /not an ExecCredential \(not JSON\)/ },
      {
        name: "another apiVersion",
        stdout: credential({ token: "t" }, "client.authentication.k8s.io/v1beta1"),
        want: /configured for client\.authentication\.k8s\.io\/v1 but answered/,
      },
      {
        name: "no status",
        stdout: JSON.stringify({ apiVersion: V1, kind: "ExecCredential" }),
        want: /no status/,
      },
      {
        name: "nothing in status",
        stdout: credential({}),
        want: /neither a token nor a certificate/,
      },
      {
        name: "a certificate alone",
        stdout: credential({ clientCertificateData: "C" }),
        want: /not both/,
      },
      {
        name: "a bad expiry",
        stdout: credential({ token: "t", expirationTimestamp: "soon" }),
        want: /expirationTimestamp soon is not an RFC 3339 time/,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        if (c.want instanceof RegExp) {
          assert.throws(() => parseExecCredential(c.stdout, V1), c.want);
        } else {
          assert.deepEqual(
            parseExecCredential(c.stdout, V1),
            { token: undefined, cert: undefined, key: undefined, expiresAt: undefined, ...c.want },
          );
        }
      });
    }
  },
});

Deno.test({
  name: "isInteractive() follows client-go's interactiveMode rules",
  permissions: "none",
  async fn(t) {
    const cases: [ExecConfig["interactiveMode"], boolean, boolean | RegExp][] = [
      ["Never", true, false],
      ["Never", false, false],
      ["IfAvailable", true, true],
      ["IfAvailable", false, false],
      ["Always", true, true],
      ["Always", false, /interactiveMode is Always but standard input is not a terminal/],
    ];
    for (const [mode, terminal, want] of cases) {
      await t.step(`${mode}, stdin ${terminal ? "a terminal" : "not a terminal"}`, () => {
        if (want instanceof RegExp) assert.throws(() => isInteractive(mode, terminal), want);
        else assert.equal(isInteractive(mode, terminal), want);
      });
    }
  },
});

Deno.test({
  name: "execInfo() always says whether the run is interactive, and the cluster on request",
  permissions: "none",
  fn() {
    const cluster = { server: "https://h", "certificate-authority-data": "Q0E=" };
    assert.deepEqual(JSON.parse(execInfo(CONFIG, cluster, false)), {
      kind: "ExecCredential",
      apiVersion: V1,
      spec: { interactive: false, cluster },
    });
    assert.deepEqual(
      JSON.parse(execInfo({ ...CONFIG, provideClusterInfo: false }, cluster, true)).spec,
      { interactive: true },
    );
  },
});

/** A runner that answers with `outcomes` in turn and records its calls. */
function scripted(outcomes: (() => { code: number; stdout: string; stderr: string })[]) {
  const calls: Parameters<ExecRunner>[0][] = [];
  const runner: ExecRunner = (run) => {
    calls.push(run);
    return Promise.resolve(outcomes[Math.min(calls.length, outcomes.length) - 1]());
  };
  return { calls, runner };
}

/** A plugin of {@linkcode CONFIG} whose runs answer with a token credential. */
function tokenPlugin() {
  const { calls, runner } = scripted([
    () => ({ code: 0, stderr: "", stdout: credential({ token: "t" }) }),
  ]);
  const plugin = new ExecPlugin(CONFIG, {
    cluster: { server: "s" },
    runner,
    stdinIsTerminal: false,
  });
  return { calls, plugin };
}

Deno.test({
  name: "ExecPlugin runs the plugin as client-go does and keeps its credential until near expiry",
  permissions: "none",
  async fn(t) {
    await t.step("env, args and KUBERNETES_EXEC_INFO are passed", async () => {
      const { calls, runner } = scripted([
        () => ({ code: 0, stderr: "", stdout: credential({ token: "t" }) }),
      ]);
      const plugin = new ExecPlugin(CONFIG, {
        cluster: { server: "https://h" },
        runner,
        stdinIsTerminal: false,
      });
      assert.equal((await plugin.get()).token, "t");
      assert.deepEqual(calls[0].args, ["--cluster", "c"]);
      assert.equal(calls[0].env.PROFILE, "ops");
      assert.equal(JSON.parse(calls[0].env.KUBERNETES_EXEC_INFO).spec.cluster.server, "https://h");
      assert.equal(calls[0].interactive, false);
    });
    await t.step("cached until a quarter of its lifetime is left, then run again", async () => {
      let now = Date.parse("2030-01-01T00:00:00Z");
      const expiring = (token: string) => () => ({
        code: 0,
        stderr: "",
        stdout: credential({ token, expirationTimestamp: new Date(now + 20_000).toISOString() }),
      });
      const { calls, runner } = scripted([expiring("one"), expiring("two")]);
      const plugin = new ExecPlugin(CONFIG, {
        cluster: { server: "s" },
        runner,
        stdinIsTerminal: false,
        now: () => now,
      });
      assert.equal((await plugin.get()).token, "one");
      now += 14_000;
      assert.equal((await plugin.get()).token, "one");
      now += 2_000; // 4 s left of 20: refresh
      assert.equal((await plugin.get()).token, "two");
      assert.equal(calls.length, 2);
    });
    await t.step("concurrent callers share one run", async () => {
      const { calls, plugin } = tokenPlugin();
      await Promise.all([plugin.get(), plugin.get(), plugin.get()]);
      assert.equal(calls.length, 1);
      assert.equal(plugin.runs, 1);
    });
    await t.step("a refused credential is dropped; the next get runs the plugin", async () => {
      const { calls, plugin } = tokenPlugin();
      const used = await plugin.get();
      plugin.invalidate({ ...used }); // not the current one: kept
      await plugin.get();
      assert.equal(calls.length, 1);
      plugin.invalidate(used);
      await plugin.get();
      assert.equal(calls.length, 2);
    });
  },
});

Deno.test({
  name: "ExecPlugin says in one line why a plugin gave no credential",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; runner: ExecRunner; message: RegExp }[] = [
      {
        name: "a missing command, with its installHint on the same line",
        runner: () => Promise.reject(new Deno.errors.NotFound("No such file or directory")),
        message:
          /^Cannot run exec plugin get-token: no such command; Install get-token: brew install get-token$/,
      },
      {
        name: "a non-zero exit, with stderr's first line",
        runner: () =>
          Promise.resolve({ code: 2, stdout: "", stderr: "\nerror: SSO session expired\nmore\n" }),
        message:
          /^Cannot get credentials from exec plugin get-token: it exited with code 2: error: SSO session expired$/,
      },
      {
        name: "output that is no credential",
        runner: () => Promise.resolve({ code: 0, stdout: "hello", stderr: "" }),
        message:
          /^Cannot get credentials from exec plugin get-token: its output is not an ExecCredential/,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const plugin = new ExecPlugin(CONFIG, {
          cluster: { server: "s" },
          runner: c.runner,
          stdinIsTerminal: false,
        });
        await assert.rejects(() => plugin.get(), (e: Error) => {
          assert.equal(e.name, "ConfigError");
          assert.match(e.message, c.message);
          assert.ok(!e.message.includes("\n"), "one line");
          return true;
        });
      });
    }
  },
});

Deno.test({
  name:
    "DENO_RUNNER kills the plugin when its signal aborts: a completion's bound leaves no plugin running",
  ignore: Deno.build.os === "windows",
  permissions: { run: true },
  async fn() {
    const started = Date.now();
    const run = DENO_RUNNER({
      command: "sleep",
      args: ["30"],
      env: {},
      interactive: false,
      signal: AbortSignal.timeout(200),
    });
    await assert.rejects(run);
    assert.ok(Date.now() - started < 10_000, `the plugin ran ${Date.now() - started} ms`);
  },
});

Deno.test({
  name: "ExecPlugin hands its signal to the runner",
  permissions: "none",
  async fn() {
    const { calls, runner } = scripted([
      () => ({ code: 0, stderr: "", stdout: credential({ token: "t" }) }),
    ]);
    const signal = new AbortController().signal;
    const plugin = new ExecPlugin(CONFIG, {
      cluster: { server: "s" },
      runner,
      stdinIsTerminal: false,
      signal,
    });
    await plugin.get();
    assert.equal(calls[0].signal, signal);
  },
});
