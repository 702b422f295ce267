/**
 * Credentials exactly as kubectl: for each kubeconfig variant, the kubectl
 * built for the tests (`kubectl auth whoami`) and the dispatcher run with the
 * same kubeconfig, and kube-apiserver's audit log says who the dispatcher's
 * requests were made as. Where kubectl fails, the dispatcher fails too (exit
 * 3, one line, nothing created); where Deno's HTTP client cannot do what a
 * field asks, the dispatcher refuses it by name. Then a proxy that counts its
 * tunnels, and exec plugins whose credentials expire mid-rollout.
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import type { Cluster, CommandResult } from "./cluster.ts";
import { dispatcher, jobsIn, jobTemplate } from "./_dispatcher.ts";
import { errorLines } from "./_faults.ts";
import {
  clusterTest,
  namespace,
  serviceAccount,
  SUITE,
  suiteNodes,
  tempFile,
} from "./_fixtures.ts";
import { ConnectProxy } from "./_proxy.ts";

const K8S = new URL("./.bin/k8s", import.meta.url).pathname;
const NS = "cred";
const ADMIN = "kubernetes-admin";

/** `kubectl auth whoami -o json` with a kubeconfig: the username, or the failure. */
async function whoami(
  kubeconfig: string | undefined,
  env: Record<string, string> = {},
  args: string[] = [],
): Promise<{ user?: string; groups?: string[]; result: CommandResult }> {
  const out = await new Deno.Command(K8S, {
    args: [
      "kubectl",
      ...(kubeconfig ? [`--kubeconfig=${kubeconfig}`] : []),
      ...args,
      "auth",
      "whoami",
      "-o",
      "json",
    ],
    env,
    stdin: "null",
  }).output();
  const text = new TextDecoder();
  const result = {
    code: out.code,
    stdout: text.decode(out.stdout),
    stderr: text.decode(out.stderr),
  };
  if (result.code !== 0) return { result };
  const info = JSON.parse(result.stdout).status.userInfo;
  return { user: info.username, groups: info.groups, result };
}

/** The audit events the dispatcher caused since `offset` (its requests carry its User-Agent). */
async function dispatcherAudit(cluster: Cluster, offset: number) {
  // kube-apiserver writes an event as the request completes; let the last one land.
  await new Promise((r) => setTimeout(r, 300));
  const text = (await Deno.readTextFile(cluster.auditLog!)).slice(offset);
  return text.split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((e) =>
    e.userAgent === "job-dispatcher"
  ) as {
    verb: string;
    user: { username: string };
    impersonatedUser?: { username: string; groups?: string[] };
    objectRef?: { resource?: string };
    responseStatus?: { code: number };
  }[];
}

async function auditSize(cluster: Cluster): Promise<number> {
  return (await Deno.readTextFile(cluster.auditLog!)).length;
}

/** The user the dispatcher's first line names. */
function firstLineUser(stderr: string): string | undefined {
  const first = stderr.split("\n")[0];
  return first.match(/ connected to https:\/\/\S+ as (\S+)$/)?.[1];
}

/** Runs the dispatcher with `kubeconfig` over the suite's nodes `pool`, one Job `<prefix>-<node>` each. */
async function dispatchWith(
  cluster: Cluster,
  kubeconfig: string | undefined,
  opts: {
    prefix: string;
    pool?: string;
    duration?: string;
    /** `-n`; false: none. @default NS */
    namespace?: string | false;
    args?: string[];
    env?: Record<string, string>;
  },
): Promise<CommandResult> {
  const ns = opts.namespace ?? NS;
  return await dispatcher(cluster, [
    ...(kubeconfig ? ["--kubeconfig", kubeconfig] : []),
    ...(opts.args ?? []),
    "--job-template",
    await tempFile(jobTemplate(opts.prefix, opts.duration ?? "100ms")),
    ...(ns ? ["-n", ns] : []),
    "--node-selector",
    `${SUITE}=${opts.pool ?? "cred"}`,
  ], { env: opts.env ?? {} });
}

/** A kubeconfig with one context `x` of cluster `c` and user `u`, as YAML. */
function kubeconfigText(opts: {
  cluster: Record<string, unknown>;
  user: Record<string, unknown>;
  context?: Record<string, unknown>;
}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: opts.cluster }],
    users: [{ name: "u", user: opts.user }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u", ...opts.context } }],
    "current-context": "x",
  });
}

/**
 * A new P-256 key and its certificate for `subject`, signed by the CA whose
 * `ca.crt` and `ca.key` are in `caDir` (the cluster's PKI), or self-signed
 * without `caDir`; `ext` is what `openssl x509 -extfile` takes.
 */
async function certificate(
  subject: string,
  ext: string,
  caDir?: string,
): Promise<{ cert: string; key: string }> {
  const d = await Deno.makeTempDir({ prefix: "e2e-cert-" });
  const openssl = async (...args: string[]) => {
    const out = await new Deno.Command("openssl", { args, stdin: "null" }).output();
    if (out.code !== 0) {
      throw new Error(`Cannot run openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
    }
  };
  await Deno.writeTextFile(`${d}/ext`, ext);
  await openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${d}/key`);
  await openssl("req", "-new", "-key", `${d}/key`, "-subj", subject, "-out", `${d}/csr`);
  await openssl(
    "x509",
    "-req",
    "-in",
    `${d}/csr`,
    ...(caDir
      ? ["-CA", `${caDir}/ca.crt`, "-CAkey", `${caDir}/ca.key`, "-set_serial", `${Date.now()}`]
      : ["-key", `${d}/key`]),
    "-days",
    "1",
    "-extfile",
    `${d}/ext`,
    "-out",
    `${d}/crt`,
  );
  const pair = {
    cert: await Deno.readTextFile(`${d}/crt`),
    key: await Deno.readTextFile(`${d}/key`),
  };
  await Deno.remove(d, { recursive: true });
  return pair;
}

/** A TCP port nothing listens on. */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** What a variant must show. */
type Want =
  /** kubectl and the dispatcher act as `user`; the dispatcher's run succeeds. */
  | { same: string; groups?: string[] }
  /** kubectl fails; the dispatcher exits 3 with `message`. */
  | { bothFail: RegExp }
  /** kubectl works as `kubectl`; the dispatcher refuses the field by name (exit 3). */
  | { refused: RegExp; kubectl: string }
  /** Both act as `user`, which may not list nodes: the dispatcher exits 3 on a 403. */
  | { forbidden: string };

interface Variant {
  name: string;
  /** The kubeconfig's text, written to `dir/<name>/config`. */
  config?: string;
  /** Instead of --kubeconfig: $KUBECONFIG. */
  env?: Record<string, string>;
  /** Given to both kubectl and the dispatcher. */
  args?: string[];
  want: Want;
}

clusterTest("credentials exactly as kubectl", async (t, cluster) => {
  await cluster.createNodes(suiteNodes("cred", 1));
  await namespace(cluster, NS);
  const tokenOf = async (kubeconfig: string) =>
    (await Deno.readTextFile(kubeconfig)).match(/token: (\S+)/)![1];
  const one = await serviceAccount(cluster, NS, "one");
  const two = await serviceAccount(cluster, NS, "two");
  const dispatcherSa = await serviceAccount(cluster, NS, "dispatcher");
  const tokenOne = await tokenOf(one.kubeconfig);
  const tokenTwo = await tokenOf(two.kubeconfig);

  // A folder with the PKI, token files and plugins, referenced relatively.
  const dir = await Deno.makeTempDir({ prefix: "e2e-cred-" });
  await Deno.mkdir(`${dir}/pki`);
  for (const f of ["ca.crt", "admin.crt", "admin.key"]) {
    await Deno.copyFile(`${cluster.dir}/pki/${f}`, `${dir}/pki/${f}`);
  }
  await Deno.writeTextFile(`${dir}/token-one`, `${tokenOne}\n`);
  await Deno.writeTextFile(`${dir}/token-two`, `${tokenTwo}\n`);
  const pem = (f: string) => Deno.readTextFileSync(`${dir}/pki/${f}`);
  const b64 = (text: string) => btoa(text);
  const server = cluster.server;
  const caData = { server, "certificate-authority-data": b64(pem("ca.crt")) };
  const adminData = {
    "client-certificate-data": b64(pem("admin.crt")),
    "client-key-data": b64(pem("admin.key")),
  };
  const exec = (extra: Record<string, unknown>) => ({
    exec: {
      apiVersion: "client.authentication.k8s.io/v1",
      interactiveMode: "Never",
      ...extra,
    },
  });
  // A plugin that proves what client-go passes: env, and the cluster only with provideClusterInfo.
  await Deno.writeTextFile(
    `${dir}/plugin.sh`,
    `#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in
  *'"interactive":false'*) ;;
  *) echo "KUBERNETES_EXEC_INFO lacks interactive: $KUBERNETES_EXEC_INFO" >&2; exit 1 ;;
esac
if [ -n "$WANT_SERVER" ]; then
  case "$KUBERNETES_EXEC_INFO" in
    *"\\"server\\":\\"$WANT_SERVER\\""*) ;;
    *) echo "KUBERNETES_EXEC_INFO lacks the cluster" >&2; exit 1 ;;
  esac
fi
if [ -n "$FAIL" ]; then echo "$FAIL" >&2; echo "second line" >&2; exit 4; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\\n' "$(cat "$TOKEN_FILE")"
`,
  );
  await Deno.chmod(`${dir}/plugin.sh`, 0o755);
  const nobody = "e2e-nobody";

  // Files of the merged $KUBECONFIG: the first names the context and cluster, the second the user.
  await Deno.mkdir(`${dir}/merged`);
  await Deno.writeTextFile(
    `${dir}/merged/a`,
    stringify({
      clusters: [{ name: "c", cluster: caData }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  await Deno.writeTextFile(
    `${dir}/merged/b`,
    stringify({
      users: [{ name: "u", user: { tokenFile: "../token-two" } }],
      "current-context": "elsewhere",
    }),
  );

  const variants: Variant[] = [
    {
      name: "client certificate data",
      config: kubeconfigText({ cluster: caData, user: adminData }),
      want: { same: ADMIN },
    },
    {
      name: "client certificate files, relative to the kubeconfig",
      config: kubeconfigText({
        cluster: { server, "certificate-authority": "../pki/ca.crt" },
        user: { "client-certificate": "../pki/admin.crt", "client-key": "../pki/admin.key" },
      }),
      want: { same: ADMIN },
    },
    {
      name: "token",
      config: kubeconfigText({ cluster: caData, user: { token: tokenOne } }),
      want: { same: one.user },
    },
    {
      name: "tokenFile, relative",
      config: kubeconfigText({ cluster: caData, user: { tokenFile: "../token-two" } }),
      want: { same: two.user },
    },
    {
      name: "token and tokenFile: the file wins",
      config: kubeconfigText({
        cluster: caData,
        user: { token: tokenOne, tokenFile: "../token-two" },
      }),
      want: { same: two.user },
    },
    {
      name: "token and a missing tokenFile: the token",
      config: kubeconfigText({ cluster: caData, user: { token: tokenOne, tokenFile: "../gone" } }),
      want: { same: one.user },
    },
    {
      name: "a missing tokenFile alone",
      config: kubeconfigText({ cluster: caData, user: { tokenFile: "../gone" } }),
      want: { bothFail: /Cannot read token file \S+gone: no such file/ },
    },
    {
      name: "token and username/password",
      config: kubeconfigText({
        cluster: caData,
        user: { token: tokenOne, username: "a", password: "b" },
      }),
      want: { bothFail: /token and username\/password are both set; keep one/ },
    },
    {
      name: "username/password the server does not accept",
      config: kubeconfigText({ cluster: caData, user: { username: "a", password: "b" } }),
      // The API server has no basic auth: the request counts as anonymous.
      want: { bothFail: /Cannot list nodes: .*User "system:anonymous" cannot list/ },
    },
    {
      name: "certificate-authority and its data",
      config: kubeconfigText({
        cluster: { ...caData, "certificate-authority": "../pki/ca.crt" },
        user: adminData,
      }),
      want: { bothFail: /certificate-authority and certificate-authority-data are both set/ },
    },
    {
      name: "client-certificate and its data",
      config: kubeconfigText({
        cluster: caData,
        user: { ...adminData, "client-certificate": "../pki/admin.crt" },
      }),
      want: { bothFail: /client-certificate and client-certificate-data are both set/ },
    },
    {
      name: "an unreadable client certificate file",
      config: kubeconfigText({
        cluster: caData,
        user: { "client-certificate": "../pki/gone.crt", "client-key": "../pki/admin.key" },
      }),
      want: { bothFail: /cannot read client-certificate \S+gone\.crt: no such file/ },
    },
    {
      name: "as: a ServiceAccount with exactly the README's RBAC",
      config: kubeconfigText({ cluster: caData, user: { ...adminData, as: dispatcherSa.user } }),
      want: { same: dispatcherSa.user },
    },
    {
      name: "as, as-groups, as-uid and as-user-extra",
      config: kubeconfigText({
        cluster: caData,
        user: {
          ...adminData,
          as: "e2e-jane",
          "as-uid": "42",
          "as-groups": ["system:masters", "e2e-team"],
          "as-user-extra": { "example.com/scopes": ["a", "b"] },
        },
      }),
      want: { same: "e2e-jane", groups: ["system:masters", "e2e-team", "system:authenticated"] },
    },
    {
      name: "as: a user with no rights",
      config: kubeconfigText({ cluster: caData, user: { ...adminData, as: nobody } }),
      want: { forbidden: nobody },
    },
    {
      name: "as-groups without as",
      config: kubeconfigText({ cluster: caData, user: { ...adminData, "as-groups": ["g"] } }),
      want: { bothFail: /as-uid, as-groups or as-user-extra without as/ },
    },
    {
      name: "insecure-skip-tls-verify: no (YAML 1.1)",
      config: kubeconfigText({ cluster: caData, user: adminData }).replace(
        "server:",
        "insecure-skip-tls-verify: no\n      server:",
      ),
      want: { same: ADMIN },
    },
    {
      name: "insecure-skip-tls-verify: yes (YAML 1.1), which Deno cannot honour",
      config: kubeconfigText({ cluster: { server }, user: adminData }).replace(
        "server:",
        "insecure-skip-tls-verify: yes\n      server:",
      ),
      want: { refused: /insecure-skip-tls-verify is not supported/, kubectl: ADMIN },
    },
    {
      name: "tls-server-name other than the URL's host, which Deno cannot honour",
      config: kubeconfigText({
        cluster: { ...caData, "tls-server-name": "localhost" },
        user: adminData,
      }),
      want: { refused: /tls-server-name localhost is not supported/, kubectl: ADMIN },
    },
    {
      name: "disable-compression",
      config: kubeconfigText({
        cluster: { ...caData, "disable-compression": true },
        user: adminData,
      }),
      want: { same: ADMIN },
    },
    {
      name: "auth-provider oidc, refused for an exec plugin",
      config: kubeconfigText({
        cluster: caData,
        user: {
          "auth-provider": {
            name: "oidc",
            config: {
              "idp-issuer-url": "https://127.0.0.1:1",
              "client-id": "k",
              "id-token": tokenOne,
            },
          },
        },
      }),
      want: {
        refused: /auth-provider "oidc" is not supported; log in through an exec plugin/,
        kubectl: one.user,
      },
    },
    {
      name: "exec plugin, relative command, env and provideClusterInfo",
      config: kubeconfigText({
        cluster: caData,
        user: exec({
          command: "../plugin.sh",
          env: [{ name: "TOKEN_FILE", value: `${dir}/token-one` }, {
            name: "WANT_SERVER",
            value: server,
          }],
          provideClusterInfo: true,
        }),
      }),
      want: { same: one.user },
    },
    {
      name: "exec plugin v1beta1 without interactiveMode",
      config: kubeconfigText({
        cluster: caData,
        user: exec({
          apiVersion: "client.authentication.k8s.io/v1beta1",
          interactiveMode: undefined,
          command: `${dir}/plugin.sh`,
          env: [{ name: "TOKEN_FILE", value: `${dir}/token-two` }],
        }),
      }).replace('client.authentication.k8s.io/v1"', 'client.authentication.k8s.io/v1beta1"'),
      want: {
        bothFail: /it is configured for client\.authentication\.k8s\.io\/v1beta1 but answered/,
      },
    },
    {
      name: "exec plugin that is not installed",
      config: kubeconfigText({
        cluster: caData,
        user: exec({
          command: "e2e-no-such-plugin",
          installHint: "Install it with: brew install e2e-plugin",
        }),
      }),
      want: { bothFail: /no such command; Install it with: brew install e2e-plugin$/ },
    },
    {
      name: "exec plugin that exits non-zero",
      config: kubeconfigText({
        cluster: caData,
        user: exec({
          command: `${dir}/plugin.sh`,
          env: [{ name: "FAIL", value: "SSO session expired" }],
        }),
      }),
      want: { bothFail: /exited with code 4: SSO session expired$/ },
    },
    {
      name: "$KUBECONFIG merged: cluster from the first file, user from the second",
      env: { KUBECONFIG: `${dir}/merged/a:${dir}/missing:${dir}/merged/b` },
      want: { same: two.user },
    },
    {
      name: "an unknown --context",
      config: kubeconfigText({ cluster: caData, user: adminData }),
      args: ["--context", "nope"],
      want: { bothFail: /Cannot use context "nope": not in/ },
    },
    {
      name: "a context whose user does not exist",
      config: kubeconfigText({ cluster: caData, user: adminData }).replace(
        "user: u\n",
        "user: ghost\n",
      ),
      want: { bothFail: /its user "ghost" is not defined/ },
    },
  ];
  assert.ok(variants.length >= 20);

  // A refused proxy costs the retry budget of the first request: it runs
  // while the table does.
  const refusingProxy = (async () => {
    const refusing = `http://127.0.0.1:${closedPort()}`;
    const kubeconfig = await tempFile(kubeconfigText({
      cluster: { ...caData, "proxy-url": refusing },
      user: adminData,
    }));
    const kubectl = await whoami(kubeconfig);
    const r = await dispatchWith(cluster, kubeconfig, { prefix: "cr-noproxy" });
    return { r, kubectl };
  })();

  // So does an https proxy whose own certificate the kubeconfig's CA did not
  // sign: client-go verifies the proxy with the cluster's TLS settings, and
  // so does Deno's client (its caCerts serve both hops).
  const untrustedProxy = (async () => {
    const proxy = ConnectProxy.start(
      {},
      await certificate("/CN=e2e-untrusted-proxy", "subjectAltName=IP:127.0.0.1\n"),
    );
    try {
      const kubeconfig = await tempFile(kubeconfigText({
        cluster: { ...caData, "proxy-url": proxy.url },
        user: { token: tokenOne },
      }));
      const kubectl = await whoami(kubeconfig);
      const began = Date.now();
      const r = await dispatchWith(cluster, kubeconfig, { prefix: "cr-untrusted" });
      return { r, kubectl, tunnels: proxy.total, secs: (Date.now() - began) / 1000 };
    } finally {
      await proxy.close();
    }
  })();

  let run = 0;
  for (const v of variants) {
    await t.step(v.name, async () => {
      run++;
      let kubeconfig: string | undefined;
      if (v.config) {
        await Deno.mkdir(`${dir}/v${run}`, { recursive: true });
        kubeconfig = `${dir}/v${run}/config`;
        await Deno.writeTextFile(kubeconfig, v.config);
      }
      const kubectl = await whoami(kubeconfig, v.env, v.args);
      const prefix = `cr-${run}`;
      const offset = await auditSize(cluster);
      const r = await dispatchWith(cluster, kubeconfig, { prefix, args: v.args, env: v.env });
      const audit = await dispatcherAudit(cluster, offset);
      const seenAs = new Set(audit.map((e) => e.impersonatedUser?.username ?? e.user.username));
      const created = (await jobsIn(cluster, NS)).filter((j) => j.name.startsWith(`${prefix}-`));
      const w = v.want;
      if ("same" in w) {
        assert.equal(kubectl.user, w.same, kubectl.result.stderr);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(firstLineUser(r.stderr), w.same, r.stderr);
        assert.deepEqual([...seenAs], [w.same], "every request of the run, by the audit log");
        if (w.groups) {
          assert.deepEqual(kubectl.groups, w.groups);
          const review = audit.find((e) => e.objectRef?.resource === "selfsubjectreviews");
          assert.deepEqual(review?.impersonatedUser?.groups, w.groups);
        }
        assert.equal(created.length, 1, "one Job for the one node");
      } else if ("forbidden" in w) {
        assert.equal(kubectl.user, w.forbidden, kubectl.result.stderr);
        assert.equal(r.code, 3, r.stderr);
        assert.equal(firstLineUser(r.stderr), w.forbidden, r.stderr);
        assert.match(
          errorLines(r.stderr)[0],
          /Cannot list nodes: .*forbidden.*grant the verb "list" on "nodes"/,
        );
        assert.deepEqual([...seenAs], [w.forbidden]);
        assert.ok(audit.some((e) => e.responseStatus?.code === 403), "the API server said 403");
        assert.equal(created.length, 0, "nothing created");
      } else {
        if ("bothFail" in w) {
          assert.notEqual(kubectl.result.code, 0, `kubectl should fail:\n${kubectl.result.stdout}`);
        } else {
          assert.equal(kubectl.user, w.kubectl, kubectl.result.stderr);
        }
        assert.equal(r.code, 3, r.stderr);
        const errors = errorLines(r.stderr);
        assert.equal(errors.length, 1, r.stderr);
        assert.match(errors[0], "bothFail" in w ? w.bothFail : w.refused);
        assert.doesNotMatch(r.stderr, /Uncaught|^\s+at /m);
        assert.ok(
          audit.every((e) => e.verb !== "create" || e.objectRef?.resource === "selfsubjectreviews"),
        );
        assert.equal(created.length, 0, "nothing created");
      }
      console.log(
        `    kubectl: ${
          kubectl.user ?? `exit ${kubectl.result.code}`
        }; dispatcher: exit ${r.code}` +
          `${
            r.code === 0
              ? ` as ${firstLineUser(r.stderr)}`
              : `: ${errorLines(r.stderr)[0]?.slice(15, 110)}`
          }` +
          `; audit: ${audit.length} requests as ${[...seenAs].join(", ") || "nobody"}`,
      );
    });
  }

  await t.step("context namespace beats $POD_NAMESPACE with an explicit --kubeconfig", async () => {
    await namespace(cluster, "cred-pod");
    const kubeconfig = await tempFile(
      kubeconfigText({ cluster: caData, user: adminData, context: { namespace: NS } }),
    );
    const r = await dispatchWith(cluster, kubeconfig, {
      prefix: "cr-ns",
      namespace: false,
      env: { POD_NAMESPACE: "cred-pod" },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await jobsIn(cluster, NS)).filter((j) => j.name.startsWith("cr-ns-")).length, 1);
    assert.equal((await jobsIn(cluster, "cred-pod")).length, 0);
  });

  for (const scheme of ["http", "socks5", "https"] as const) {
    await t.step(
      `proxy-url ${scheme}: every request of the run goes through the proxy`,
      async () => {
        // The kubeconfig's server is a closed port that only the proxy maps to
        // the API server: a request that bypassed the proxy could not succeed.
        const closed = `127.0.0.1:${closedPort()}`;
        // The https proxy's certificate is signed by the cluster's CA, which
        // the kubeconfig's certificate-authority-data already holds: kubectl
        // (Go's transport verifies the proxy with the TLS config of the
        // cluster) and the dispatcher (Deno's caCerts serve both the proxy
        // and the API server) trust it with no other setting.
        const proxy = ConnectProxy.start(
          { [closed]: new URL(server).host },
          scheme === "https"
            ? await certificate(
              "/CN=e2e-https-proxy",
              "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
              `${cluster.dir}/pki`,
            )
            : undefined,
        );
        try {
          const kubeconfig = await tempFile(kubeconfigText({
            cluster: {
              ...caData,
              server: `https://${closed}`,
              "proxy-url": scheme === "socks5" ? proxy.socksUrl : proxy.url,
            },
            user: { token: tokenOne },
          }));
          assert.equal(new URL(proxy.url).protocol, scheme === "https" ? "https:" : "http:");
          const kubectl = await whoami(kubeconfig);
          assert.equal(kubectl.user, one.user, kubectl.result.stderr);
          assert.ok(proxy.total >= 1, "kubectl went through the proxy");
          const before = proxy.total;
          const offset = await auditSize(cluster);
          const r = await dispatchWith(cluster, kubeconfig, { prefix: `cr-${scheme}` });
          assert.equal(r.code, 0, r.stderr);
          assert.equal(firstLineUser(r.stderr), one.user);
          const audit = await dispatcherAudit(cluster, offset);
          const tunnels = proxy.total - before;
          assert.ok(tunnels >= 1, "the run opened tunnels");
          assert.deepEqual(Object.keys(proxy.tunnels), [closed], "only to the API server");
          assert.deepEqual([...new Set(audit.map((e) => e.user.username))], [one.user]);
          console.log(`    ${audit.length} requests through ${tunnels} tunnels`);
          // The same kubeconfig without the proxy cannot reach the server at all.
          const direct = await tempFile(kubeconfigText({
            cluster: { ...caData, server: `https://${closed}` },
            user: { token: tokenOne },
          }));
          assert.notEqual((await whoami(direct)).result.code, 0);
        } finally {
          await proxy.close();
        }
      },
    );
  }

  await t.step("an https proxy of another CA: both refuse it, nothing created", async () => {
    const { r, kubectl, tunnels, secs } = await untrustedProxy;
    assert.notEqual(kubectl.result.code, 0, "kubectl fails too");
    assert.match(kubectl.result.stderr, /proxyconnect tcp: tls: .*certificate/);
    assert.equal(r.code, 3, r.stderr);
    assert.equal(errorLines(r.stderr).length, 1, r.stderr);
    assert.match(
      errorLines(r.stderr)[0],
      /not trusted: .*invalid peer certificate: UnknownIssuer .*check certificate-authority/,
    );
    // At once, as kubectl: a certificate does not heal within the 90 s retry budget.
    assert.ok(secs < 30, `refused after ${secs} s, not at once`);
    assert.equal(tunnels, 0, "no tunnel opened");
    assert.equal(
      (await jobsIn(cluster, NS)).filter((j) => j.name.startsWith("cr-untrusted-")).length,
      0,
    );
    console.log(`    kubectl: ${kubectl.result.stderr.trim().split("\n").at(-1)}`);
    console.log(`    dispatcher after ${secs.toFixed(1)} s: ${errorLines(r.stderr)[0]}`);
  });

  await t.step("a proxy that refuses: exit 3, one line, nothing created", async () => {
    const { r, kubectl } = await refusingProxy;
    assert.notEqual(kubectl.result.code, 0, "kubectl fails too");
    assert.equal(r.code, 3, r.stderr);
    assert.equal(errorLines(r.stderr).length, 1, r.stderr);
    assert.match(
      errorLines(r.stderr)[0],
      /unreachable.*\(is the API server up and --context right\?\)/,
    );
    assert.equal(
      (await jobsIn(cluster, NS)).filter((j) => j.name.startsWith("cr-noproxy-")).length,
      0,
    );
  });

  await t.step(
    "exec plugins whose credentials expire every 20 s, over a 60 s rollout",
    async () => {
      await cluster.createNodes([...suiteNodes("ex-token", 3), ...suiteNodes("ex-cert", 3)]);
      await Deno.writeTextFile(
        `${dir}/expiring.sh`,
        `#!/bin/sh
n=$(( $(cat "$COUNT_FILE" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNT_FILE"
echo "$n $(date +%s%3N)" >> "$COUNT_FILE.runs"
exp=$(date -u -d "@$(( $(date +%s) + 20 ))" +%Y-%m-%dT%H:%M:%SZ)
if [ "$n" = "$REVOKE_RUN" ]; then status='"token":"revoked"'; else status=$(cat "$STATUS_FILE"); fi
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{%s,"expirationTimestamp":"%s"}}\\n' "$API_VERSION" "$status" "$exp"
`,
      );
      await Deno.chmod(`${dir}/expiring.sh`, 0o755);
      await Deno.writeTextFile(`${dir}/status-token`, `"token":${JSON.stringify(tokenOne)}`);
      await Deno.writeTextFile(
        `${dir}/status-cert`,
        `"clientCertificateData":${JSON.stringify(pem("admin.crt"))},` +
          `"clientKeyData":${JSON.stringify(pem("admin.key"))}`,
      );
      const variant = (kind: "token" | "cert", apiVersion: string, revoke: string) =>
        tempFile(kubeconfigText({
          cluster: caData,
          user: exec({
            apiVersion,
            command: `${dir}/expiring.sh`,
            env: [
              { name: "COUNT_FILE", value: `${dir}/count-${kind}` },
              { name: "STATUS_FILE", value: `${dir}/status-${kind}` },
              { name: "API_VERSION", value: apiVersion },
              // The token variant's second credential is one the API server
              // refuses (401), as a revoked token: the run must renew and go on.
              { name: "REVOKE_RUN", value: revoke },
            ],
          }),
        }));
      const rollout = async (kind: "token" | "cert", kubeconfig: string) => {
        const started = Date.now();
        const offset = await auditSize(cluster);
        const r = await dispatchWith(cluster, kubeconfig, {
          prefix: `ex-${kind}`,
          pool: `ex-${kind}`,
          duration: "20s",
          args: ["--parallelism", "1"],
        });
        const runs = Number(await Deno.readTextFile(`${dir}/count-${kind}`));
        return {
          r,
          runs,
          secs: (Date.now() - started) / 1000,
          audit: await dispatcherAudit(cluster, offset),
        };
      };
      // One after the other: the audit log tells the two apart only by time.
      const tok = await rollout(
        "token",
        await variant("token", "client.authentication.k8s.io/v1", "2"),
      );
      const cert = await rollout(
        "cert",
        await variant("cert", "client.authentication.k8s.io/v1beta1", ""),
      );
      for (const [kind, x, user] of [["token", tok, one.user], ["cert", cert, ADMIN]] as const) {
        console.log(
          `    ${kind}: exit ${x.r.code} after ${
            x.secs.toFixed(0)
          } s; plugin ran ${x.runs} times; ` +
            `${x.audit.length} requests`,
        );
        assert.equal(x.r.code, 0, x.r.stderr);
        assert.equal(firstLineUser(x.r.stderr), user);
        assert.match(x.r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
        // 401 as a word: the server's random port may hold the digits (:43401).
        assert.doesNotMatch(x.r.stderr, /\b401\b|nauthori[sz]ed/);
        assert.ok(x.secs >= 55, `a rollout of about 60 s, took ${x.secs}`);
        assert.ok(x.runs >= 3, `the plugin ran ${x.runs} times`);
        const users = new Set(
          x.audit.filter((e) => e.responseStatus?.code !== 401).map((e) => e.user.username),
        );
        assert.deepEqual([...users], [user]);
      }
      // The revoked credential (run 2) was refused and renewed at once (run
      // 3), not at its expiry 15 s later: the 401 was met and not surfaced.
      // (The audit policy omits the stage at which kube-apiserver logs a 401.)
      const runsAt = (await Deno.readTextFile(`${dir}/count-token.runs`)).trim().split("\n")
        .map((l) => Number(l.split(" ")[1]));
      console.log(
        `    token plugin ran at +${
          runsAt.map((t) => ((t - runsAt[0]) / 1000).toFixed(1)).join(" s, +")
        } s`,
      );
      assert.ok(runsAt[2] - runsAt[1] < 5_000, "renewed right after the 401");
    },
  );

  await t.step(
    "an exec plugin that signs a new client certificate each run, expiring every 15 s",
    async () => {
      await cluster.createNodes(suiteNodes("ex-rotate", 3));
      // Each run: a new key, and a certificate of the cluster's CA for its
      // own user, so the audit log tells which run's certificate each request
      // carried. Deno binds a client certificate to its HTTP client: each new
      // one needs a new client.
      await Deno.writeTextFile(
        `${dir}/rotating.sh`,
        String.raw`#!/bin/sh
set -e
n=$(( $(cat "$COUNT_FILE" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNT_FILE"
d="$COUNT_FILE.$n"
mkdir -p "$d"
openssl ecparam -name prime256v1 -genkey -noout -out "$d/key"
openssl req -new -key "$d/key" -subj "/O=system:masters/CN=e2e-rotated-$n" -out "$d/csr"
printf 'extendedKeyUsage=clientAuth\n' > "$d/ext"
openssl x509 -req -in "$d/csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "$(date +%s%N)" \
  -days 1 -extfile "$d/ext" -out "$d/crt" 2>/dev/null
exp=$(date -u -d "@$(( $(date +%s) + 15 ))" +%Y-%m-%dT%H:%M:%SZ)
pem() { awk '{ printf "%s\\n", $0 }' "$1"; }
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"%s","clientKeyData":"%s","expirationTimestamp":"%s"}}\n' \
  "$(pem "$d/crt")" "$(pem "$d/key")" "$exp"
`,
      );
      await Deno.chmod(`${dir}/rotating.sh`, 0o755);
      const kubeconfig = await tempFile(kubeconfigText({
        cluster: caData,
        user: exec({
          command: `${dir}/rotating.sh`,
          env: [
            { name: "COUNT_FILE", value: `${dir}/count-rotate` },
            { name: "PKI", value: `${cluster.dir}/pki` },
          ],
        }),
      }));
      // The audit policy omits the stage at which kube-apiserver logs a 401;
      // its metrics count every request it could not authenticate.
      const failedAuth = async () => {
        const metrics = await cluster.kubectl(["get", "--raw", "/metrics"]);
        const count = (result: string) =>
          Number(
            metrics.stdout.match(
              new RegExp(`^authentication_attempts\\{result="${result}"\\} (\\S+)$`, "m"),
            )?.[1] ?? NaN,
          );
        return (count("error") || 0) + (count("failure") || 0);
      };
      // Calibration: a client certificate of another CA counts as a failure.
      const before = await failedAuth();
      const stranger = await certificate(
        "/O=system:masters/CN=e2e-stranger",
        "extendedKeyUsage=clientAuth\n",
      );
      const strangerConfig = await tempFile(kubeconfigText({
        cluster: caData,
        user: {
          "client-certificate-data": b64(stranger.cert),
          "client-key-data": b64(stranger.key),
        },
      }));
      assert.match((await whoami(strangerConfig)).result.stderr, /Unauthorized/);
      const failedBefore = await failedAuth();
      assert.ok(failedBefore > before, "the metric counts a refused certificate");
      const started = Date.now();
      const offset = await auditSize(cluster);
      const r = await dispatchWith(cluster, kubeconfig, {
        prefix: "ex-rotate",
        pool: "ex-rotate",
        duration: "15s",
        args: ["--parallelism", "1"],
      });
      const secs = (Date.now() - started) / 1000;
      const audit = await dispatcherAudit(cluster, offset);
      const failed = (await failedAuth()) - failedBefore;
      const runs = Number(await Deno.readTextFile(`${dir}/count-rotate`));
      const requestsBy: Record<string, number> = {};
      for (const e of audit) requestsBy[e.user.username] = (requestsBy[e.user.username] ?? 0) + 1;
      console.log(
        `    exit ${r.code} after ${secs.toFixed(0)} s; plugin ran ${runs} times; ` +
          `requests by user: ${JSON.stringify(requestsBy)}; failed authentications: ${failed} ` +
          `(the stranger's: ${failedBefore - before})`,
      );
      assert.equal(r.code, 0, r.stderr);
      assert.equal(firstLineUser(r.stderr), "e2e-rotated-1");
      assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3 nodes/);
      // 401 as a word: the server's random port may hold the digits.
      assert.doesNotMatch(r.stderr, /\b401\b|nauthori[sz]ed/);
      assert.ok(secs > 30, `the run crossed two expirations, took ${secs} s`);
      assert.ok(runs >= 3, `the plugin ran ${runs} times`);
      // Every certificate the plugin issued carried requests, and no request
      // carried anything else.
      assert.deepEqual(
        Object.keys(requestsBy).sort(),
        Array.from({ length: runs }, (_, i) => `e2e-rotated-${i + 1}`).sort(),
      );
      assert.equal(failed, 0, "the API server refused no credentials");
    },
  );

  await Deno.remove(dir, { recursive: true });
}, { audit: {}, nodes: 0 });
