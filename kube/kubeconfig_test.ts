import assert from "node:assert/strict";
import {
  ConfigError,
  type KubeconfigIo,
  loadKubeconfig,
  mergeKubeconfigs,
  parseKubeconfig,
  SERVICE_ACCOUNT_DIR,
} from "./kubeconfig.ts";

/** An in-memory file system and environment; a value that is an Error is thrown on read. */
function fakeIo(files: Record<string, string | Error>, env: Record<string, string> = {}) {
  const reads: string[] = [];
  const io: KubeconfigIo = {
    env: (name) => env[name],
    readTextFile: (path) => {
      reads.push(path);
      const f = files[path];
      if (f === undefined) throw new Deno.errors.NotFound(`No such file: ${path}`);
      if (f instanceof Error) throw f;
      return f;
    },
    exists: (path) => path in files,
    listSeparator: ":",
  };
  return { io, reads };
}

const b64 = (text: string) => btoa(text);

// The yaml parser reads $LOG_TOKENS and $LOG_STREAM (its debug switches) on
// every parse, so a test that parses YAML needs read access to those two.
const YAML_ENV: Deno.PermissionOptions = { env: ["LOG_TOKENS", "LOG_STREAM"] };

/** A kubeconfig with one context `name` → cluster `name` → user `name`. */
function kubeconfig(
  name: string,
  opts: { user?: string; cluster?: string; current?: boolean; namespace?: string } = {},
): string {
  return `apiVersion: v1
kind: Config
clusters: [{name: ${name}, cluster: ${
    opts.cluster ??
      `{server: "https://${name}.example:6443/", certificate-authority-data: ${
        b64(`CA of ${name}`)
      }}`
  }}]
users: [{name: ${name}, user: ${opts.user ?? `{token: token-of-${name}}`}}]
contexts: [{name: ${name}, context: {cluster: ${name}, user: ${name}${
    opts.namespace ? `, namespace: ${opts.namespace}` : ""
  }}}]
${opts.current === false ? "" : `current-context: ${name}`}
`;
}

Deno.test({
  name: "parseKubeconfig() rejects what client-node rejected, with its messages",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: [string, string, RegExp][] = [
      ["not YAML", "clusters: [unterminated\n  : :\n", /\S/],
      ["a list, not a mapping", "- a\n- b\n", /expected a YAML mapping, found object/],
      [
        "a cluster without a name",
        "clusters: [{cluster: {server: s}}]",
        /clusters\[0\]\.name is missing/,
      ],
      ["a cluster without cluster", "clusters: [{name: c}]", /clusters\[0\]\.cluster is missing/],
      [
        "a cluster without a server",
        "clusters: [{name: c, cluster: {}}]",
        /clusters\[0\]\.cluster\.server is missing/,
      ],
      ["a user without a name", "users: [{user: {token: t}}]", /users\[0\]\.name is missing/],
      ["a context without context", "contexts: [{name: x}]", /contexts\[0\]\.context is missing/],
      [
        "a context without a cluster",
        "contexts: [{name: x, context: {user: u}}]",
        /contexts\[0\]\.context\.cluster is missing/,
      ],
    ];
    for (const [what, text, message] of cases) {
      await t.step(`it rejects ${what}`, () => {
        assert.throws(() => parseKubeconfig(text, "/k/config"), (e: Error) => {
          assert.ok(e instanceof SyntaxError, `${e.name}: ${e.message}`);
          assert.match(e.message, message);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "parseKubeconfig() reads entries as kubectl does",
  permissions: YAML_ENV,
  async fn(t) {
    await t.step("an empty file is an empty kubeconfig", () => {
      assert.deepEqual(parseKubeconfig("", "/k/config"), {
        clusters: [],
        users: [],
        contexts: [],
        currentContext: undefined,
      });
    });
    await t.step("relative file references are made absolute against the file's folder", () => {
      const kc = parseKubeconfig(
        `clusters: [{name: c, cluster: {server: s, certificate-authority: pki/ca.crt}}]
users:
  - {name: u, user: {client-certificate: u.crt, client-key: /abs/u.key, tokenFile: ../t}}
  - {name: e, user: {exec: {command: ./bin/token, apiVersion: v}}}
  - {name: p, user: {exec: {command: aws, apiVersion: v}}}`,
        "/home/me/.kube/config",
      );
      assert.equal(kc.clusters[0].caFile, "/home/me/.kube/pki/ca.crt");
      assert.equal(kc.users[0].raw["client-certificate"], "/home/me/.kube/u.crt");
      assert.equal(kc.users[0].raw["client-key"], "/abs/u.key");
      assert.equal(kc.users[0].raw.tokenFile, "/home/me/.kube/../t");
      // An exec command is resolved only when it names a path, not a $PATH lookup.
      assert.equal(
        (kc.users[1].raw.exec as { command: string }).command,
        "/home/me/.kube/./bin/token",
      );
      assert.equal((kc.users[2].raw.exec as { command: string }).command, "aws");
    });
    await t.step("a file named without a folder keeps relative references as they are", () => {
      const kc = parseKubeconfig(
        "clusters: [{name: c, cluster: {server: s, certificate-authority: ca.crt}}]",
        "config",
      );
      assert.equal(kc.clusters[0].caFile, "ca.crt");
    });
    await t.step("the server loses its trailing slashes", () => {
      const kc = parseKubeconfig("clusters: [{name: c, cluster: {server: 'https://h/'}}]", "/k");
      assert.equal(kc.clusters[0].server, "https://h");
    });
    await t.step("insecure-skip-tls-verify is a YAML 1.1 boolean, as client-go reads it", () => {
      const values = [
        ["true", true],
        ["yes", true],
        ["on", true],
        ["y", true],
        ['"true"', false],
        ["false", false],
        ["no", false],
      ] as const;
      for (const [value, want] of values) {
        const kc = parseKubeconfig(
          `clusters: [{name: c, cluster: {server: s, insecure-skip-tls-verify: ${value}}}]`,
          "/k",
        );
        assert.equal(kc.clusters[0].skipTLSVerify, want, value);
      }
    });
    await t.step("a context keeps its namespace; a section that is not a list is ignored", () => {
      const kc = parseKubeconfig(
        "contexts: [{name: x, context: {cluster: c, namespace: ops}}]\nusers: {}\n",
        "/k",
      );
      assert.deepEqual(kc.contexts, [{
        name: "x",
        cluster: "c",
        user: undefined,
        namespace: "ops",
      }]);
      assert.deepEqual(kc.users, []);
    });
  },
});

Deno.test({
  name: "mergeKubeconfigs() lets the first file win, as kubectl merges $KUBECONFIG",
  permissions: YAML_ENV,
  async fn(t) {
    const a = parseKubeconfig(kubeconfig("a", { current: false }), "/a");
    const b = parseKubeconfig(kubeconfig("b"), "/b");
    const a2 = parseKubeconfig(
      kubeconfig("a", { cluster: `{server: "https://other:1"}` }),
      "/a2",
    );
    await t.step("the first file that sets current-context sets it", () => {
      assert.equal(mergeKubeconfigs([a, b, a2]).currentContext, "b");
      assert.equal(mergeKubeconfigs([a2, b]).currentContext, "a");
    });
    await t.step("the first file to name an entry wins it", () => {
      const merged = mergeKubeconfigs([a, b, a2]);
      assert.deepEqual(merged.clusters.map((c) => [c.name, c.server]), [
        ["a", "https://a.example:6443"],
        ["b", "https://b.example:6443"],
      ]);
      assert.deepEqual(merged.contexts.map((c) => c.name), ["a", "b"]);
    });
  },
});

Deno.test({
  name: "loadKubeconfig() finds the kubeconfig and context kubectl would use",
  permissions: YAML_ENV,
  async fn(t) {
    const files = {
      "/k/a": kubeconfig("a", { namespace: "team" }),
      "/k/b": kubeconfig("b"),
      "/home/me/.kube/config": kubeconfig("home"),
    };
    const cases: {
      name: string;
      opts?: { kubeconfig?: string; context?: string };
      env?: Record<string, string>;
      files?: Record<string, string | Error>;
      want: { source: string; context: string; server: string; namespace?: string };
    }[] = [
      {
        name: "--kubeconfig wins over $KUBECONFIG and ~/.kube/config",
        opts: { kubeconfig: "/k/b" },
        env: { KUBECONFIG: "/k/a", HOME: "/home/me" },
        want: { source: "/k/b", context: "b", server: "https://b.example:6443" },
      },
      {
        name: "$KUBECONFIG's files are merged, the first current-context wins",
        env: { KUBECONFIG: "/k/a:/k/b", HOME: "/home/me" },
        want: {
          source: "$KUBECONFIG (/k/a:/k/b)",
          context: "a",
          server: "https://a.example:6443",
          namespace: "team",
        },
      },
      {
        name: "--context picks a context of a later file",
        opts: { context: "b" },
        env: { KUBECONFIG: "/k/a:/k/b" },
        want: { source: "$KUBECONFIG (/k/a:/k/b)", context: "b", server: "https://b.example:6443" },
      },
      {
        name: "files of $KUBECONFIG that do not exist are skipped, as kubectl skips them",
        env: { KUBECONFIG: "/k/missing::/k/b" },
        want: {
          source: "$KUBECONFIG (/k/missing::/k/b)",
          context: "b",
          server: "https://b.example:6443",
        },
      },
      {
        name: "without $KUBECONFIG, ~/.kube/config",
        env: { HOME: "/home/me" },
        want: { source: "~/.kube/config", context: "home", server: "https://home.example:6443" },
      },
      {
        name: "without any file, the pod's service account",
        env: {
          HOME: "/nowhere",
          KUBERNETES_SERVICE_HOST: "10.96.0.1",
          KUBERNETES_SERVICE_PORT: "443",
        },
        files: {
          [`${SERVICE_ACCOUNT_DIR}/token`]: "sa-token\n",
          [`${SERVICE_ACCOUNT_DIR}/namespace`]: "ops\n",
        },
        want: {
          source: "the in-cluster service account",
          context: "inClusterContext",
          server: "https://10.96.0.1:443",
          namespace: "ops",
        },
      },
      {
        name: "an IPv6 service host is bracketed",
        env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" },
        files: { [`${SERVICE_ACCOUNT_DIR}/token`]: "t" },
        want: {
          source: "the in-cluster service account",
          context: "inClusterContext",
          server: "https://[fd00::1]:443",
        },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const { io } = fakeIo({ ...files, ...c.files }, c.env);
        const target = loadKubeconfig(c.opts ?? {}, io);
        assert.deepEqual(
          {
            source: target.source,
            context: target.context.name,
            server: target.cluster.server,
            namespace: target.context.namespace,
          },
          { namespace: undefined, ...c.want },
        );
      });
    }
  },
});

Deno.test({
  name: "loadKubeconfig() says which kubeconfig cannot be used and why",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: {
      name: string;
      opts?: { kubeconfig?: string; context?: string };
      env?: Record<string, string>;
      files?: Record<string, string | Error>;
      message: RegExp;
    }[] = [
      {
        name: "a missing --kubeconfig",
        opts: { kubeconfig: "/nonexistent/kubeconfig" },
        message: /^Cannot load kubeconfig \/nonexistent\/kubeconfig: no such file$/,
      },
      {
        name: "an unreadable --kubeconfig",
        opts: { kubeconfig: "/k/x" },
        files: { "/k/x": new Deno.errors.PermissionDenied("EACCES") },
        message: /^Cannot load kubeconfig \/k\/x: permission denied$/,
      },
      {
        name: "a --kubeconfig that is a folder",
        opts: { kubeconfig: "/k" },
        files: { "/k": new Deno.errors.IsADirectory("EISDIR") },
        message: /^Cannot load kubeconfig \/k: is a directory$/,
      },
      {
        name: "a --kubeconfig that is not YAML",
        opts: { kubeconfig: "/k/x" },
        files: { "/k/x": "clusters: [unterminated\n  : :\n" },
        message: /^Cannot load kubeconfig \/k\/x: \S.*[^:]$/,
      },
      {
        name: "a single $KUBECONFIG file that does not exist",
        env: { KUBECONFIG: "/k/gone" },
        message: /^Cannot load kubeconfig \$KUBECONFIG \(\/k\/gone\): no such file$/,
      },
      {
        name: "$KUBECONFIG files none of which exists",
        env: { KUBECONFIG: "/k/gone:/k/gone2" },
        message: /^Cannot load kubeconfig \$KUBECONFIG \(\/k\/gone:\/k\/gone2\): no such file$/,
      },
      {
        name: "a bad file among $KUBECONFIG's, by name",
        env: { KUBECONFIG: "/k/a:/k/bad" },
        files: { "/k/a": kubeconfig("a"), "/k/bad": "clusters: [{name: c}]" },
        message:
          /^Cannot load kubeconfig \$KUBECONFIG \(\/k\/a:\/k\/bad\): \/k\/bad: clusters\[0\]\.cluster is missing$/,
      },
      {
        name: "no kubeconfig and no service account",
        env: { HOME: "/home/me" },
        message:
          /^Cannot find a kubeconfig: pass --kubeconfig, set \$KUBECONFIG, create ~\/\.kube\/config, or run in a pod with a service account$/,
      },
      {
        name: "a service account without the service's environment",
        files: { [`${SERVICE_ACCOUNT_DIR}/token`]: "t" },
        message: /^Cannot use the in-cluster service account: KUBERNETES_SERVICE_HOST/,
      },
      {
        name: "an unknown --context, with the known ones",
        opts: { kubeconfig: "/k/a", context: "nope" },
        files: { "/k/a": kubeconfig("a") },
        message: /^Cannot use context "nope": not in \/k\/a \(contexts: a\)$/,
      },
      {
        name: "no current context",
        opts: { kubeconfig: "/k/a" },
        files: { "/k/a": kubeconfig("a", { current: false }) },
        message:
          /^Cannot find a cluster in \/k\/a: it has no current-context; pass --context \(contexts: a\)$/,
      },
      {
        name: "a Job manifest passed as the kubeconfig, by its kind",
        opts: { kubeconfig: "/k/job.yaml" },
        files: { "/k/job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: up}\n" },
        message:
          /^Cannot load kubeconfig \/k\/job\.yaml: it is a Job \(apiVersion batch\/v1\), not a kubeconfig \(kind: Config, apiVersion: v1\); pass the file kubectl uses, e\.g\. --kubeconfig ~\/\.kube\/config$/,
      },
      {
        name: "a YAML file without contexts, as not a kubeconfig",
        opts: { kubeconfig: "/k/values.yaml" },
        files: { "/k/values.yaml": "replicas: 3\n" },
        message:
          /^Cannot find a cluster in \/k\/values\.yaml: it defines no context; is it a kubeconfig\? Pass the file kubectl uses, e\.g\. --kubeconfig ~\/\.kube\/config$/,
      },
      {
        name: "a context whose cluster is not defined",
        opts: { kubeconfig: "/k/a" },
        files: { "/k/a": "contexts: [{name: x, context: {cluster: gone}}]\ncurrent-context: x\n" },
        message:
          /^Cannot find a cluster in \/k\/a: its context x names cluster "gone", which it does not define \(clusters: none\)$/,
      },
      {
        name: "a context whose user is not defined",
        opts: { kubeconfig: "/k/a" },
        files: {
          "/k/a": kubeconfig("a").replace(
            "contexts: [{name: a, context: {cluster: a, user: a",
            "contexts: [{name: a, context: {cluster: a, user: gone",
          ),
        },
        message: /^Cannot use context a of \/k\/a: its user "gone" is not defined \(users: a\)$/,
      },
    ];
    for (const c of cases) {
      await t.step(`it refuses ${c.name}`, () => {
        const { io } = fakeIo(c.files ?? {}, c.env);
        assert.throws(() => loadKubeconfig(c.opts ?? {}, io), (e: Error) => {
          assert.ok(e instanceof ConfigError, `${e.name}: ${e.message}`);
          assert.match(e.message, c.message);
          return true;
        });
      });
    }
  },
});
