/**
 * An HTTP-level fault proxy of the fault suite's own, on 127.0.0.1: unlike
 * the TCP proxy of `_proxy.ts` it terminates TLS, so it sees each request and
 * can lose the answer of one. It serves the API server's own certificate
 * (the cluster's `pki/apiserver.crt`, which names 127.0.0.1 and is signed by
 * the cluster's CA), so a kubeconfig of the cluster trusts it unchanged, and
 * forwards every request with its bearer token (client certificates cannot
 * pass a TLS-terminating proxy: use a ServiceAccount's token kubeconfig).
 *
 * The fault it makes is the one a client cannot tell from a lost create: a
 * Job POST is forwarded, the API server stores the Job and answers, and the
 * proxy throws that answer away and says 504 (as an API server that timed out
 * says "may still be processing"), or cuts the answer off mid-body.
 *
 * @module
 */

import type { Cluster } from "./cluster.ts";

/** How the answer of a Job create is lost. */
export type LostAnswer = "504" | "cut";

/** What the proxy did, for the suite's report. */
export interface HttpProxyStats {
  /** Requests forwarded. */
  forwarded: number;
  /** Job creates forwarded whose answer was then lost, by Job name. */
  lost: string[];
  /** Job creates forwarded (dry runs aside), by Job name: a create sent again counts twice. */
  creates: Map<string, number>;
}

/** Headers that belong to one hop, not to the request: never forwarded. */
const HOP = new Set(["host", "connection", "keep-alive", "transfer-encoding", "content-length"]);

/**
 * A TLS-terminating HTTP proxy to a cluster's API server that loses the
 * answer of the first create of each Job name.
 *
 * @example
 * ```ts
 * const proxy = await HttpFaultProxy.start(cluster, "504");
 * const { kubeconfig } = await serviceAccount(cluster, ns, "dispatcher", { server: proxy.url });
 * // ... the dispatcher's first POST of each Job is stored, its answer is a 504
 * await proxy.close();
 * ```
 */
export class HttpFaultProxy {
  /** What the proxy did. */
  readonly stats: HttpProxyStats = { forwarded: 0, lost: [], creates: new Map() };
  /** Whether to lose answers now; off, every request passes. */
  losing = true;
  #server: Deno.HttpServer<Deno.NetAddr>;
  #upstream: Deno.HttpClient;
  #target: string;
  #mode: LostAnswer;
  #seen = new Set<string>();

  private constructor(cluster: Cluster, mode: LostAnswer, cert: string, key: string, ca: string) {
    this.#target = cluster.server;
    this.#mode = mode;
    this.#upstream = Deno.createHttpClient({ caCerts: [ca] });
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, cert, key, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  /** Starts a proxy to `cluster`'s API server that loses create answers as `mode` says. */
  static async start(cluster: Cluster, mode: LostAnswer): Promise<HttpFaultProxy> {
    const pki = `${cluster.dir}/pki`;
    const [cert, key, ca] = await Promise.all(
      ["apiserver.crt", "apiserver.key", "ca.crt"].map((f) => Deno.readTextFile(`${pki}/${f}`)),
    );
    return new HttpFaultProxy(cluster, mode, cert, key, ca);
  }

  /** The URL to give clients instead of the API server's. */
  get url(): string {
    return `https://127.0.0.1:${this.#server.addr.port}`;
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const body = req.body ? new Uint8Array(await req.arrayBuffer()) : undefined;
    const headers = [...req.headers].filter(([k]) => !HOP.has(k.toLowerCase()));
    this.stats.forwarded++;
    const res = await fetch(this.#target + url.pathname + url.search, {
      method: req.method,
      headers,
      body,
      client: this.#upstream,
      redirect: "manual",
    });
    const created = body && jobCreated(req.method, url, body);
    if (created) this.stats.creates.set(created, (this.stats.creates.get(created) ?? 0) + 1);
    const name = this.losing && created;
    if (name && res.ok && !this.#seen.has(name)) {
      this.#seen.add(name);
      // The Job is stored: read the whole answer, then lose it.
      await res.arrayBuffer();
      this.stats.lost.push(name);
      return this.#mode === "504" ? timedOut() : cutOff();
    }
    const out = [...res.headers].filter(([k]) => !HOP.has(k.toLowerCase()));
    // Streamed as it comes: watches stay open for minutes.
    return new Response(res.body, { status: res.status, headers: out });
  }

  /** Stops serving. */
  async close(): Promise<void> {
    await this.#server.shutdown();
    this.#upstream.close();
  }
}

/** The name of the Job a request creates (not a dry run), or undefined. */
function jobCreated(method: string, url: URL, body: Uint8Array): string | undefined {
  if (method !== "POST" || url.searchParams.has("dryRun")) return undefined;
  if (!/^\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/.test(url.pathname)) return undefined;
  try {
    return JSON.parse(new TextDecoder().decode(body)).metadata?.name;
  } catch {
    return undefined;
  }
}

/** A 504 Status, as kube-apiserver answers a request that ran past its timeout. */
function timedOut(): Response {
  return Response.json({
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    message: "The POST operation against Job.batch could not be completed at this time, " +
      "please try again.",
    reason: "Timeout",
    code: 504,
  }, { status: 504 });
}

/**
 * A 201 whose body breaks off before it is whole (it promises more bytes
 * than it sends): the client reads no answer, as when a connection is lost.
 */
function cutOff(): Response {
  const part = new TextEncoder().encode('{"kind":"Job","apiVersion":"batch/v1","meta');
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      controller.enqueue(part);
      controller.close();
    },
  });
  return new Response(body, {
    status: 201,
    headers: { "content-type": "application/json", "content-length": String(part.length * 10) },
  });
}
