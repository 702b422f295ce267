/**
 * A loopback HTTP server that plays the API server for tests of the API layer
 * and the informer, with a kubeconfig that points at it.
 *
 * @module
 */

import { Kube } from "./kube.ts";

/** What the server saw of one request. */
export interface Hit {
  /** The request's URL. */
  url: string;
  /** Its headers. */
  headers: Headers;
}

/** Serves `handler` on a loopback port and writes a kubeconfig that points at it. */
export async function withServer(
  handler: (req: Request, n: number) => Response | Promise<Response>,
  fn: (kube: Kube, hits: Hit[]) => Promise<void>,
  user = "{token: secret-token}",
) {
  const hits: Hit[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    (req) => {
      hits.push({ url: req.url, headers: new Headers(req.headers) });
      return handler(req, hits.length);
    },
  );
  const dir = await Deno.makeTempDir();
  const kubeconfig = `${dir}/config`;
  await Deno.writeTextFile(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${server.addr.port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: ${user}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: team}}]
current-context: ctx
`,
  );
  const kube = await Kube.connect({
    kubeconfig,
    retry: { requestTimeoutMs: 2000, budgetMs: 10_000, baseDelayMs: 10, maxDelayMs: 50 },
  });
  try {
    await fn(kube, hits);
  } finally {
    kube.close();
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A Kubernetes Status answer with code `code`. */
export const status = (code: number, reason: string, headers: Record<string, string> = {}) =>
  Response.json({ kind: "Status", code, reason, message: `${reason} message` }, {
    status: code,
    headers,
  });
