import assert from "node:assert/strict";
import { COMPLETE_TIMEOUT_MS, completeWords, typedValue } from "./complete.ts";

/** A kubeconfig of two contexts whose cluster is `server`, in a temporary folder. */
function kubeconfig(server: string): string {
  const dir = Deno.makeTempDirSync({ prefix: "complete-" });
  Deno.writeTextFileSync(
    `${dir}/config`,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: c, user: u}}, {name: prod-eu1, context: {cluster: c, user: u}}]
current-context: dev
`,
  );
  return `${dir}/config`;
}

Deno.test({
  name: "typedValue() reads a flag's value as typed so far, the last one winning",
  permissions: "none",
  async fn(t) {
    const cases: [string[], string | undefined][] = [
      [["--context", "a"], "a"],
      [["--context=a", "--context", "b"], "b"],
      [["--context"], undefined],
      [["--contexts", "a"], undefined],
      [["--context="], undefined],
      // bash splits --context=a at "=" (COMP_WORDBREAKS): the words the script passes.
      [["--context", "=", "a"], "a"],
      [["--context", "=", "a", "-n"], "a"],
    ];
    for (const [words, want] of cases) {
      await t.step(words.join(" "), () => assert.equal(typedValue(words, "context"), want));
    }
  },
});

Deno.test({
  name: "__complete contexts lists the kubeconfig's contexts without asking the cluster",
  permissions: { read: true, write: true, env: true },
  async fn() {
    const path = kubeconfig("https://192.0.2.1:6443");
    assert.equal(await completeWords("contexts", ["--kubeconfig", path]), "dev\nprod-eu1\n");
    assert.equal(await completeWords("contexts", [`--kubeconfig=${path}`]), "dev\nprod-eu1\n");
    assert.equal(await completeWords("contexts", ["--kubeconfig", `${path}.missing`]), "");
  },
});

Deno.test({
  name: "__complete namespaces lists the namespaces by one list call, and nothing on failure",
  permissions: { read: true, write: true, env: true, net: true },
  async fn(t) {
    const paths: string[] = [];
    let answer = () =>
      Response.json({ items: [{ metadata: { name: "default" } }, { metadata: { name: "ops" } }] });
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
      paths.push(new URL(req.url).pathname);
      return answer();
    });
    const path = kubeconfig(`http://127.0.0.1:${server.addr.port}`);
    try {
      await t.step("the names, from the context typed", async () => {
        const words = ["--kubeconfig", path, "--context", "prod-eu1"];
        assert.equal(await completeWords("namespaces", words), "default\nops\n");
        assert.deepEqual(paths, ["/api/v1/namespaces"]);
      });
      await t.step("forbidden: nothing, and no retry", async () => {
        paths.length = 0;
        answer = () => Response.json({ kind: "Status", code: 403 }, { status: 403 });
        assert.equal(await completeWords("namespaces", ["--kubeconfig", path]), "");
        assert.equal(paths.length, 1);
      });
      await t.step("an unknown context: nothing", async () => {
        assert.equal(
          await completeWords("namespaces", ["--kubeconfig", path, "--context", "x"]),
          "",
        );
      });
    } finally {
      await server.shutdown();
    }
    await t.step("a server that accepts and never answers: nothing, within the bound", async () => {
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const held: Deno.Conn[] = [];
      const accepting = (async () => {
        for await (const conn of listener) held.push(conn);
      })();
      const start = Date.now();
      try {
        const words = ["--kubeconfig", kubeconfig(`http://127.0.0.1:${listener.addr.port}`)];
        assert.equal(await completeWords("namespaces", words), "");
        const took = Date.now() - start;
        assert.ok(
          took >= COMPLETE_TIMEOUT_MS - 100 && took < COMPLETE_TIMEOUT_MS + 1000,
          `${took} ms`,
        );
      } finally {
        listener.close();
        for (const conn of held) conn.close();
        await accepting.catch(() => {});
      }
    });
  },
});

Deno.test({
  name:
    "__complete contexts answers nothing, at once, for a kubeconfig that is a FIFO or too large",
  ignore: Deno.build.os === "windows",
  permissions: { read: true, write: true, env: true, run: true },
  async fn() {
    const dir = Deno.makeTempDirSync({ prefix: "complete-" });
    const fifo = `${dir}/fifo`;
    assert.equal((await new Deno.Command("mkfifo", { args: [fifo] }).output()).code, 0);
    const big = `${dir}/big`;
    Deno.writeTextFileSync(big, `# ${"x".repeat(33 * 1024 * 1024)}\n`);
    for (const path of [fifo, big]) {
      // A child process: a read of a FIFO nobody writes blocks its thread for good.
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-check",
          new URL("../main.ts", import.meta.url).pathname,
          "__complete",
          "contexts",
          "--kubeconfig",
          path,
        ],
        stdin: "null",
        signal: AbortSignal.timeout(20_000),
      }).output();
      assert.equal(out.success, true, `${path}: ${new TextDecoder().decode(out.stderr)}`);
      assert.equal(new TextDecoder().decode(out.stdout), "");
    }
  },
});
