/**
 * What a kubeconfig's cluster and user mean for each request, by client-go's
 * rules (k8s.io/client-go/tools/clientcmd and rest/transport): the TLS
 * material, the Authorization header, impersonation headers, the proxy, and
 * the fields Deno's HTTP client cannot honour, refused by name. kubectl is the
 * oracle: a field it honours is honoured the same way here or refused, never
 * dropped.
 *
 * Every file read goes through a {@linkcode KubeconfigIo}.
 *
 * @module
 */

import {
  type ClusterEntry,
  ConfigError,
  type KubeconfigIo,
  readError,
  type Target,
  type UserEntry,
} from "./kubeconfig.ts";
import {
  type ExecCluster,
  type ExecConfig,
  execConfigOf,
  type ExecCredential,
  type ExecPlugin,
} from "./exec.ts";

/** PEM text of the TLS material to connect with. */
export interface TlsMaterial {
  /** The CA bundle to verify the server with. */
  ca?: string;
  /** The client certificate. */
  cert?: string;
  /** The client key. */
  key?: string;
}

/** The kubeconfig's own bearer token or basic auth, before any exec plugin. */
export type StaticAuth =
  | { kind: "none" }
  | { kind: "bearer"; token?: string; file?: string }
  | { kind: "basic"; header: string };

/** A proxy, as Deno's HTTP client takes it. */
export interface ProxyPlan {
  /** The proxy's URL without user information. */
  url: string;
  /** Credentials of the URL's user information. */
  basicAuth?: { username: string; password: string };
}

/** Everything about a connection that the kubeconfig decides. */
export interface CredentialPlan {
  /** The API server's URL. */
  server: string;
  /** The kubeconfig's TLS material, files read and data decoded. */
  tls: TlsMaterial;
  /** The kubeconfig's own token or basic auth. */
  auth: StaticAuth;
  /** The exec plugin, if the user has one. */
  exec?: ExecConfig;
  /** The cluster as an exec plugin's `KUBERNETES_EXEC_INFO` describes it. */
  execCluster: ExecCluster;
  /** Headers every request carries: impersonation, `Accept-Encoding`. */
  headers: [string, string][];
  /** `proxy-url`; undefined: the environment's proxy, as Go's default transport. */
  proxy?: ProxyPlan;
}

function str(x: unknown): string | undefined {
  return typeof x === "string" && x !== "" ? x : undefined;
}

function decodeBase64(data: string): string {
  const bin = atob(data.replace(/\s+/g, ""));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

function base64Utf8(text: string): string {
  return btoa(String.fromCharCode(...new TextEncoder().encode(text)));
}

/**
 * A PEM from `*-data` or else from a file. client-go takes the data when both
 * are set; kubectl's validation refuses that combination before, so it never
 * gets here (see {@linkcode planCredentials}).
 */
function dataOrFile(
  io: KubeconfigIo,
  what: string,
  data: unknown,
  file: unknown,
): string | undefined {
  if (str(data)) {
    try {
      return decodeBase64(data as string);
    } catch {
      throw new Error(`${what}-data is not base64`);
    }
  }
  if (str(file)) {
    try {
      return io.readTextFile(file as string);
    } catch (e) {
      throw new Error(`cannot read ${what} ${file}: ${readError(e)}`);
    }
  }
  return undefined;
}

/** Characters a header name may hold (RFC 7230 tchar), as client-go's headerKeyEscape. */
const HEADER_KEY_CHAR = /^[!#$&'*+\-.^_`|~0-9A-Za-z]$/;

/**
 * Escapes an `as-user-extra` key for an `Impersonate-Extra-<key>` header name
 * as client-go does: every byte that is not a header name character, and `%`,
 * becomes `%XX`.
 *
 * @example
 * ```ts
 * headerKeyEscape("example.com/team"); // "example.com%2Fteam"
 * ```
 */
export function headerKeyEscape(key: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(key)) {
    const ch = String.fromCharCode(byte);
    out += byte < 128 && HEADER_KEY_CHAR.test(ch)
      ? ch
      : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * The impersonation headers of a user's `as`, `as-uid`, `as-groups` and
 * `as-user-extra`, in client-go's order (one `Impersonate-Group` per group).
 *
 * @throws {ConfigError} when uid, groups or extra are set without `as`, as kubectl refuses them
 *
 * @example
 * ```ts
 * impersonationHeaders({ name: "u", raw: { as: "jane", "as-groups": ["a", "b"] } });
 * // [["Impersonate-User", "jane"], ["Impersonate-Group", "a"], ["Impersonate-Group", "b"]]
 * ```
 */
export function impersonationHeaders(user: UserEntry | undefined): [string, string][] {
  const raw = user?.raw ?? {};
  const as = str(raw.as);
  const uid = str(raw["as-uid"]);
  const groups = Array.isArray(raw["as-groups"]) ? raw["as-groups"].map(String) : [];
  const extra = typeof raw["as-user-extra"] === "object" && raw["as-user-extra"] !== null
    ? raw["as-user-extra"] as Record<string, unknown>
    : {};
  if (!as) {
    if (uid || groups.length || Object.keys(extra).length) {
      throw new ConfigError(
        `Cannot use user ${user!.name}: as-uid, as-groups or as-user-extra without as; ` +
          "name the user to impersonate with as",
      );
    }
    return [];
  }
  const headers: [string, string][] = [["Impersonate-User", as]];
  if (uid) headers.push(["Impersonate-Uid", uid]);
  for (const g of groups) headers.push(["Impersonate-Group", g]);
  for (const [k, v] of Object.entries(extra)) {
    for (const value of Array.isArray(v) ? v : [v]) {
      headers.push([`Impersonate-Extra-${headerKeyEscape(k)}`, String(value)]);
    }
  }
  return headers;
}

/**
 * A cluster's `proxy-url`, checked as client-go checks it (http, https or
 * socks5), its user information split off for Deno's client.
 *
 * @throws {ConfigError} for another scheme or a URL that does not parse
 */
export function proxyOf(cluster: ClusterEntry): ProxyPlan | undefined {
  const raw = str(cluster.raw["proxy-url"]);
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`Cannot use cluster ${cluster.name}: proxy-url ${raw} is not a URL`);
  }
  const scheme = url.protocol.replace(/:$/, "");
  if (!["http", "https", "socks5"].includes(scheme)) {
    throw new ConfigError(
      `Cannot use cluster ${cluster.name}: proxy-url scheme ${JSON.stringify(scheme)} ` +
        "is not http, https or socks5",
    );
  }
  const basicAuth = url.username || url.password
    ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) }
    : undefined;
  url.username = "";
  url.password = "";
  return { url: url.href.replace(/\/$/, ""), basicAuth };
}

/** Refuses what Deno's HTTP client cannot do, naming the field and the way out. */
function refuseUnsupported(cluster: ClusterEntry, user: UserEntry | undefined): void {
  const https = cluster.server.startsWith("https:");
  // Deno verifies a server's certificate against the URL's host and has no
  // per-client switch to skip verification or to verify another name.
  if (https && cluster.skipTLSVerify) {
    throw new ConfigError(
      `Cannot use cluster ${cluster.name}: insecure-skip-tls-verify is not supported ` +
        "(the dispatcher always verifies the API server); set certificate-authority(-data)",
    );
  }
  const serverName = str(cluster.raw["tls-server-name"]);
  if (https && serverName && serverName !== new URL(cluster.server).hostname) {
    throw new ConfigError(
      `Cannot use cluster ${cluster.name}: tls-server-name ${serverName} is not supported ` +
        "(the server is verified against the host of its URL); use a server URL whose host " +
        "the certificate names",
    );
  }
  const provider = user?.raw["auth-provider"];
  if (provider !== undefined && provider !== null) {
    const name = (provider as { name?: unknown }).name;
    throw new ConfigError(
      `Cannot use user ${user!.name}: auth-provider ${
        JSON.stringify(name ?? "")
      } is not supported; log in through an exec plugin instead (for OIDC, kubelogin: ` +
        "kubectl oidc-login setup)",
    );
  }
}

/** client-go's validation of a user (clientcmd validateAuthInfo) that kubectl runs first. */
function validateUser(user: UserEntry): void {
  const u = user.raw;
  const bad = (detail: string) => new ConfigError(`Cannot use user ${user.name}: ${detail}`);
  if (str(u["client-certificate"]) && str(u["client-certificate-data"])) {
    throw bad("client-certificate and client-certificate-data are both set; keep one");
  }
  if (str(u["client-key"]) && str(u["client-key-data"])) {
    throw bad("client-key and client-key-data are both set; keep one");
  }
  const cert = str(u["client-certificate"]) ?? str(u["client-certificate-data"]);
  if (cert && !str(u["client-key"]) && !str(u["client-key-data"])) {
    throw bad("client-certificate without client-key(-data); add the key");
  }
  const methods = [
    ...(str(u.token) ? ["token"] : []),
    ...(str(u.username) || str(u.password) ? ["basic auth"] : []),
  ];
  if (methods.length > 1) throw bad("token and username/password are both set; keep one");
}

/**
 * The kubeconfig's own token or basic auth. client-go: a `token` is sent,
 * but when `tokenFile` is set too, the file's content wins whenever it can be
 * read (it is re-read, a projected token rotates); without `token`, the file
 * must be readable now.
 */
function staticAuth(user: UserEntry | undefined, io: KubeconfigIo): StaticAuth {
  const u = user?.raw ?? {};
  const token = str(u.token);
  const file = str(u.tokenFile);
  if (token || file) {
    if (!token) readTokenFile(file!, io);
    return { kind: "bearer", token, file };
  }
  if (str(u.username) || str(u.password)) {
    return {
      kind: "basic",
      header: `Basic ${base64Utf8(`${str(u.username) ?? ""}:${str(u.password) ?? ""}`)}`,
    };
  }
  return { kind: "none" };
}

function readTokenFile(file: string, io: KubeconfigIo): string {
  try {
    return io.readTextFile(file).trim();
  } catch (e) {
    throw new ConfigError(`Cannot read token file ${file}: ${readError(e)}`);
  }
}

/**
 * The Authorization header of a {@linkcode StaticAuth}, read now: the token
 * file when it is set and readable, else the token; basic auth as it is.
 *
 * @example
 * ```ts
 * staticAuthorization({ kind: "bearer", token: "t" }, io); // "Bearer t"
 * ```
 */
export function staticAuthorization(auth: StaticAuth, io: KubeconfigIo): string | undefined {
  if (auth.kind === "basic") return auth.header;
  if (auth.kind === "none") return undefined;
  if (auth.file) {
    try {
      const token = io.readTextFile(auth.file).trim();
      if (token) return `Bearer ${token}`;
    } catch (e) {
      // client-go keeps the token it had when the file cannot be read.
      if (!auth.token) {
        throw new ConfigError(`Cannot read token file ${auth.file}: ${readError(e)}`);
      }
    }
  }
  return auth.token ? `Bearer ${auth.token}` : undefined;
}

/**
 * Turns the target's cluster and user into a {@linkcode CredentialPlan}:
 * kubectl's validation first, then client-go's precedence.
 *
 * @throws {ConfigError} naming the field that cannot be honoured or read, and what to do
 */
export function planCredentials(target: Target, io: KubeconfigIo): CredentialPlan {
  const { cluster, user } = target;
  refuseUnsupported(cluster, user);
  if (user) validateUser(user);
  if (str(cluster.caFile) && str(cluster.caData)) {
    throw new ConfigError(
      `Cannot use cluster ${cluster.name}: certificate-authority and ` +
        "certificate-authority-data are both set; keep one",
    );
  }
  const u = user?.raw ?? {};
  let tls: TlsMaterial;
  try {
    tls = {
      ca: dataOrFile(io, "certificate-authority", cluster.caData, cluster.caFile),
      cert: dataOrFile(
        io,
        "client-certificate",
        u["client-certificate-data"],
        u["client-certificate"],
      ),
      key: dataOrFile(io, "client-key", u["client-key-data"], u["client-key"]),
    };
  } catch (e) {
    throw new ConfigError(`Cannot use context ${target.context.name}: ${(e as Error).message}`);
  }
  const exec = u.exec !== undefined && u.exec !== null
    ? execConfigOf(u.exec, user!.name)
    : undefined;
  const headers = impersonationHeaders(user);
  const disableCompression = cluster.raw["disable-compression"] === true;
  // Go's transport asks for gzip unless told not to; so does Deno's fetch.
  if (disableCompression) headers.push(["Accept-Encoding", "identity"]);
  const proxy = proxyOf(cluster);
  const extensions = Array.isArray(cluster.raw.extensions) ? cluster.raw.extensions : [];
  const execExtension = extensions.find((e) =>
    (e as { name?: unknown })?.name === "client.authentication.k8s.io/exec"
  ) as { extension?: unknown } | undefined;
  const execCluster: ExecCluster = {
    server: cluster.server,
    "tls-server-name": str(cluster.raw["tls-server-name"]),
    "insecure-skip-tls-verify": cluster.skipTLSVerify || undefined,
    "certificate-authority-data": tls.ca ? base64Utf8(tls.ca) : undefined,
    "proxy-url": str(cluster.raw["proxy-url"]),
    "disable-compression": disableCompression || undefined,
    config: execExtension?.extension,
  };
  return {
    server: cluster.server,
    tls,
    auth: staticAuth(user, io),
    exec,
    execCluster,
    headers,
    proxy,
  };
}

/** The credentials one request is sent with. */
export interface Identity {
  /** The Authorization header, if any. */
  authorization?: string;
  /** The client certificate, PEM. */
  cert?: string;
  /** Its key, PEM. */
  key?: string;
  /** The exec plugin's credential this was built from, if any. */
  exec?: ExecCredential;
}

/** How long a token file's content is used before it is read again. */
const TOKEN_FILE_TTL_MS = 10_000;

/**
 * The credentials of each request, as client-go layers them: the
 * kubeconfig's own token, basic auth and certificate win over what an exec
 * plugin returns (client-go's exec round tripper leaves an Authorization
 * header that is already set, and a static certificate takes precedence over
 * the plugin's). A token file is re-read every few seconds; an exec
 * credential is kept until near its expiry.
 */
export class CredentialSource {
  #plan: CredentialPlan;
  #io: KubeconfigIo;
  #exec?: ExecPlugin;
  #now: () => number;
  #header?: { value?: string; at: number };

  /**
   * @param exec the user's exec plugin, built from `plan.exec`
   * @param now the clock, for tests
   */
  constructor(plan: CredentialPlan, io: KubeconfigIo, exec?: ExecPlugin, now = Date.now) {
    this.#plan = plan;
    this.#io = io;
    this.#exec = exec;
    this.#now = now;
  }

  /** Whether re-reading can yield other credentials than the ones refused (a file, a plugin). */
  get renewable(): boolean {
    return this.#exec !== undefined ||
      (this.#plan.auth.kind === "bearer" && !!this.#plan.auth.file);
  }

  /**
   * The credentials to send now.
   *
   * @throws {ConfigError} when a token file or the exec plugin fails
   */
  async current(): Promise<Identity> {
    const now = this.#now();
    if (!this.#header || now - this.#header.at >= TOKEN_FILE_TTL_MS) {
      this.#header = { value: staticAuthorization(this.#plan.auth, this.#io), at: now };
    }
    const { tls } = this.#plan;
    const exec = this.#exec && await this.#exec.get();
    const own = tls.cert !== undefined && tls.key !== undefined;
    return {
      authorization: this.#header.value ?? (exec?.token ? `Bearer ${exec.token}` : undefined),
      cert: own ? tls.cert : exec?.cert,
      key: own ? tls.key : exec?.key,
      exec,
    };
  }

  /**
   * Forgets `used` after the API server refused it (401): the token file is
   * read again and the exec plugin runs again on the next {@linkcode current}.
   */
  invalidate(used: Identity): void {
    this.#header = undefined;
    if (used.exec) this.#exec?.invalidate(used.exec);
  }
}
