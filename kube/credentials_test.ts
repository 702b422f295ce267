import assert from "node:assert/strict";
import {
  CredentialSource,
  headerKeyEscape,
  impersonationHeaders,
  planCredentials,
  proxyOf,
  staticAuthorization,
} from "./credentials.ts";
import { ConfigError, type KubeconfigIo, loadKubeconfig } from "./kubeconfig.ts";
import { type ExecCredential, ExecPlugin } from "./exec.ts";

// The yaml parser reads $LOG_TOKENS and $LOG_STREAM (its debug switches) on every parse.
const YAML_ENV: Deno.PermissionOptions = { env: ["LOG_TOKENS", "LOG_STREAM"] };

const b64 = (text: string) => btoa(text);

/** An in-memory file system whose files may change; an Error value is thrown on read. */
function fakeIo(files: Record<string, string | Error>): KubeconfigIo {
  return {
    env: () => undefined,
    readTextFile: (path) => {
      const f = files[path];
      if (f === undefined) throw new Deno.errors.NotFound(path);
      if (f instanceof Error) throw f;
      return f;
    },
    exists: (path) => path in files,
    listSeparator: ":",
  };
}

/** A kubeconfig /k/config with one context `a` of cluster `cluster` and user `user` (flow YAML). */
function config(
  user: string,
  cluster = `{server: "https://h:6443", certificate-authority-data: ${b64("CA")}}`,
): string {
  return `clusters: [{name: a, cluster: ${cluster}}]
users: [{name: a, user: ${user}}]
contexts: [{name: a, context: {cluster: a, user: a}}]
current-context: a
`;
}

function plan(user: string, cluster?: string, files: Record<string, string | Error> = {}) {
  const io = fakeIo({ "/k/config": config(user, cluster), ...files });
  return { plan: planCredentials(loadKubeconfig({ kubeconfig: "/k/config" }, io), io), io };
}

Deno.test({
  name: "planCredentials() applies client-go's precedence",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: {
      name: string;
      user: string;
      cluster?: string;
      files?: Record<string, string>;
      want: { ca?: string; cert?: string; key?: string; authorization?: string };
    }[] = [
      {
        name: "certificate data is decoded",
        user: `{client-certificate-data: ${b64("CERT")}, client-key-data: ${b64("KEY")}}`,
        want: { ca: "CA", cert: "CERT", key: "KEY" },
      },
      {
        name: "files are read, relative to the kubeconfig's folder",
        user: "{client-certificate: u.crt, client-key: u.key}",
        cluster: "{server: 'https://h', certificate-authority: pki/ca.crt}",
        files: { "/k/pki/ca.crt": "CA FILE", "/k/u.crt": "CERT FILE", "/k/u.key": "KEY FILE" },
        want: { ca: "CA FILE", cert: "CERT FILE", key: "KEY FILE" },
      },
      {
        name: "certificate data and a key file mix",
        user: `{client-certificate-data: ${b64("CERT")}, client-key: /u.key}`,
        files: { "/u.key": "KEY FILE" },
        want: { ca: "CA", cert: "CERT", key: "KEY FILE" },
      },
      {
        name: "a token is a bearer token",
        user: "{token: abc}",
        want: { ca: "CA", authorization: "Bearer abc" },
      },
      {
        name: "tokenFile wins over token when it can be read",
        user: "{token: abc, tokenFile: /t}",
        files: { "/t": "from-file\n" },
        want: { ca: "CA", authorization: "Bearer from-file" },
      },
      {
        name: "token is the fallback of an unreadable tokenFile",
        user: "{token: abc, tokenFile: /gone}",
        want: { ca: "CA", authorization: "Bearer abc" },
      },
      {
        name: "client-node's token-file spelling is ignored, as kubectl ignores it",
        user: "{token-file: /t}",
        files: { "/t": "tf" },
        want: { ca: "CA" },
      },
      {
        name: "basic auth is base64 of UTF-8 user:password",
        user: "{username: jürgen, password: 'p:w'}",
        want: { ca: "CA", authorization: `Basic ${btoa("j\xc3\xbcrgen:p:w")}` },
      },
      {
        name: "a certificate and a token are both sent",
        user: `{token: t, client-certificate-data: ${b64("C")}, client-key-data: ${b64("K")}}`,
        want: { ca: "CA", cert: "C", key: "K", authorization: "Bearer t" },
      },
      {
        name: "plain HTTP needs no insecure-skip-tls-verify, as in client-go",
        user: "{token: t}",
        cluster: "{server: 'http://h:8080'}",
        want: { authorization: "Bearer t" },
      },
      {
        name: "insecure-skip-tls-verify on plain HTTP changes nothing",
        user: "{token: t}",
        cluster: "{server: 'http://h:8080', insecure-skip-tls-verify: yes}",
        want: { authorization: "Bearer t" },
      },
      {
        name: "tls-server-name equal to the URL's host changes nothing",
        user: "{}",
        cluster: "{server: 'https://h:6443', tls-server-name: h}",
        want: {},
      },
      {
        name: "no credentials, no header",
        user: "{}",
        want: { ca: "CA" },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, async () => {
        const { plan: p, io } = plan(c.user, c.cluster, c.files);
        const id = await new CredentialSource(p, io).current();
        assert.deepEqual(
          { ca: p.tls.ca, cert: id.cert, key: id.key, authorization: id.authorization },
          { ca: undefined, cert: undefined, key: undefined, authorization: undefined, ...c.want },
        );
      });
    }
  },
});

Deno.test({
  name: "planCredentials() refuses what kubectl refuses or Deno cannot do, naming the field",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: { name: string; user: string; cluster?: string; message: RegExp }[] = [
      {
        name: "certificate-authority and its data both set",
        user: "{}",
        cluster: `{server: 'https://h', certificate-authority: /ca, certificate-authority-data: ${
          b64("D")
        }}`,
        message:
          /^Cannot use cluster a: certificate-authority and certificate-authority-data are both set; keep one$/,
      },
      {
        name: "client-certificate and its data both set",
        user: `{client-certificate: /c, client-certificate-data: ${b64("C")}, client-key: /k}`,
        message: /^Cannot use user a: client-certificate and client-certificate-data are both set/,
      },
      {
        name: "client-key and its data both set",
        user: `{client-certificate: /c, client-key-data: ${b64("K")}, client-key: /k}`,
        message: /^Cannot use user a: client-key and client-key-data are both set/,
      },
      {
        name: "a certificate without a key",
        user: `{client-certificate-data: ${b64("C")}}`,
        message: /^Cannot use user a: client-certificate without client-key\(-data\)/,
      },
      {
        name: "a token and basic auth",
        user: "{token: t, username: u, password: p}",
        message: /^Cannot use user a: token and username\/password are both set; keep one$/,
      },
      {
        name: "an unreadable certificate file",
        user: "{client-certificate: /gone.crt, client-key: /gone.key}",
        message: /^Cannot use context a: cannot read client-certificate \/gone\.crt: no such file$/,
      },
      {
        name: "an unreadable token file without a token",
        user: "{tokenFile: /gone}",
        message: /^Cannot read token file \/gone: no such file$/,
      },
      {
        name: "insecure-skip-tls-verify on https",
        user: "{}",
        cluster: "{server: 'https://h', insecure-skip-tls-verify: yes}",
        message:
          /^Cannot use cluster a: insecure-skip-tls-verify is not supported .*; set certificate-authority\(-data\)$/,
      },
      {
        name: "tls-server-name other than the URL's host",
        user: "{}",
        cluster: "{server: 'https://10.0.0.1', tls-server-name: api.example}",
        message: /^Cannot use cluster a: tls-server-name api\.example is not supported/,
      },
      {
        name: "an auth-provider",
        user: "{auth-provider: {name: oidc, config: {idp-issuer-url: 'https://i'}}}",
        message:
          /^Cannot use user a: auth-provider "oidc" is not supported; log in through an exec plugin/,
      },
      {
        name: "a proxy of another scheme",
        user: "{}",
        cluster: "{server: 'https://h', proxy-url: 'ftp://p:21'}",
        message: /^Cannot use cluster a: proxy-url scheme "ftp" is not http, https or socks5$/,
      },
      {
        name: "as-groups without as",
        user: "{as-groups: [g]}",
        message: /^Cannot use user a: as-uid, as-groups or as-user-extra without as/,
      },
      {
        name: "an exec plugin without apiVersion",
        user: "{exec: {command: aws}}",
        message: /^Cannot use the exec plugin of user a: exec\.apiVersion is missing/,
      },
      {
        name: "a v1 exec plugin without interactiveMode",
        user: "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}",
        message: /^Cannot use the exec plugin of user a: exec\.interactiveMode is missing/,
      },
      {
        name: "an exec plugin of an unknown apiVersion",
        user: "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1alpha1}}",
        message: /exec\.apiVersion client\.authentication\.k8s\.io\/v1alpha1 is not one of/,
      },
      {
        name: "an exec env entry without a name",
        user:
          "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1beta1, env: [{value: x}]}}",
        message: /exec\.env\[0\]\.name is missing/,
      },
    ];
    for (const c of cases) {
      await t.step(`it refuses ${c.name}`, () => {
        assert.throws(() => plan(c.user, c.cluster), (e: Error) => {
          assert.ok(e instanceof ConfigError, `${e.name}: ${e.message}`);
          assert.match(e.message, c.message);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "impersonationHeaders() sends what client-go's impersonating round tripper sends",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: { name: string; raw: Record<string, unknown>; want: [string, string][] }[] = [
      { name: "no as, no headers", raw: { token: "t" }, want: [] },
      { name: "as alone", raw: { as: "jane" }, want: [["Impersonate-User", "jane"]] },
      {
        name: "uid, one header per group, one per extra value",
        raw: {
          as: "jane",
          "as-uid": "42",
          "as-groups": ["dev", "ops"],
          "as-user-extra": { scopes: ["a", "b"], "example.com/team": ["x"] },
        },
        want: [
          ["Impersonate-User", "jane"],
          ["Impersonate-Uid", "42"],
          ["Impersonate-Group", "dev"],
          ["Impersonate-Group", "ops"],
          ["Impersonate-Extra-scopes", "a"],
          ["Impersonate-Extra-scopes", "b"],
          ["Impersonate-Extra-example.com%2Fteam", "x"],
        ],
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.deepEqual(impersonationHeaders({ name: "u", raw: c.raw }), c.want);
      });
    }
    await t.step("headerKeyEscape() escapes %, / and non-ASCII bytes", () => {
      assert.equal(headerKeyEscape("a%b/c é"), "a%25b%2Fc%20%C3%A9");
    });
  },
});

Deno.test({
  name: "proxyOf() takes http, https and socks5 proxies, user information apart",
  permissions: "none",
  async fn(t) {
    const cases: [string, ReturnType<typeof proxyOf>][] = [
      ["http://127.0.0.1:3128", { url: "http://127.0.0.1:3128", basicAuth: undefined }],
      ["https://proxy.example", { url: "https://proxy.example", basicAuth: undefined }],
      ["socks5://127.0.0.1:1080", { url: "socks5://127.0.0.1:1080", basicAuth: undefined }],
      [
        "http://me:p%40ss@p:3128",
        { url: "http://p:3128", basicAuth: { username: "me", password: "p@ss" } },
      ],
    ];
    for (const [raw, want] of cases) {
      await t.step(raw, () => {
        assert.deepEqual(
          proxyOf({
            name: "c",
            server: "https://h",
            skipTLSVerify: false,
            raw: { "proxy-url": raw },
          }),
          want,
        );
      });
    }
  },
});

Deno.test({
  name: "disable-compression asks for an uncompressed answer",
  permissions: YAML_ENV,
  fn() {
    const { plan: p } = plan("{}", "{server: 'https://h', disable-compression: true}");
    assert.deepEqual(p.headers, [["Accept-Encoding", "identity"]]);
    assert.equal(p.execCluster["disable-compression"], true);
  },
});

Deno.test({
  name: "CredentialSource re-reads a token file and layers an exec plugin under static credentials",
  permissions: YAML_ENV,
  async fn(t) {
    await t.step("a rotated token file is read again after a 401", async () => {
      const files: Record<string, string> = { "/t": "first\n" };
      const { plan: p } = plan("{tokenFile: /t}", undefined, files);
      const io = fakeIo(files);
      const source = new CredentialSource(p, io);
      const first = await source.current();
      assert.equal(first.authorization, "Bearer first");
      files["/t"] = "second\n";
      // Within the re-read interval the file is not read again …
      assert.equal((await source.current()).authorization, "Bearer first");
      // … but a refusal forces it.
      source.invalidate(first);
      assert.equal((await source.current()).authorization, "Bearer second");
      assert.ok(source.renewable);
    });
    await t.step(
      "a static token wins over the plugin's; its certificate is still used",
      async () => {
        const { plan: p, io } = plan(
          "{token: own, exec: {command: x, apiVersion: client.authentication.k8s.io/v1beta1}}",
        );
        const cred: ExecCredential = { token: "plugin", cert: "C", key: "K" };
        const exec = new ExecPlugin(p.exec!, {
          cluster: p.execCluster,
          stdinIsTerminal: false,
          runner: () =>
            Promise.resolve({
              code: 0,
              stderr: "",
              stdout: JSON.stringify({
                apiVersion: "client.authentication.k8s.io/v1beta1",
                kind: "ExecCredential",
                status: { token: cred.token, clientCertificateData: "C", clientKeyData: "K" },
              }),
            }),
        });
        const id = await new CredentialSource(p, io, exec).current();
        assert.deepEqual([id.authorization, id.cert, id.key], ["Bearer own", "C", "K"]);
      },
    );
    await t.step("a static token alone is not renewable", () => {
      const { plan: p, io } = plan("{token: t}");
      assert.equal(new CredentialSource(p, io).renewable, false);
      assert.equal(staticAuthorization(p.auth, io), "Bearer t");
    });
  },
});
