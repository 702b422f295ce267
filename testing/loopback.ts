/**
 * A loopback HTTP server with a kubeconfig pointing at it, for unit tests of
 * the API layer and of the modules that send requests through it.
 *
 * @module
 */

import { type ConnectOptions, Kube } from "../kube/client.ts";
import type { LimiterOptions } from "../kube/limiter.ts";

/** What the server saw of one request. */
export interface Hit {
  /** The request URL. */
  url: string;
  /** The request method. */
  method: string;
  /** The request headers. */
  headers: Headers;
  /** The request body, parsed as JSON; undefined without one. */
  body?: unknown;
  /** The client's port: one per TCP connection. */
  port: number;
}

/**
 * Serves `handler` on a loopback port, connects a {@linkcode Kube} to it with
 * a short retry policy, runs `fn`, then shuts everything down.
 *
 * @param user the kubeconfig's user entry, as YAML
 * @param limits the client's concurrency bound and rate limit
 * @param connect more options of {@linkcode Kube.connect} (a stop signal, the wait for a first answer)
 */
export async function withServer(
  handler: (req: Request, n: number, body: unknown) => Response | Promise<Response>,
  fn: (kube: Kube, hits: Hit[]) => Promise<void>,
  user = "{token: secret-token}",
  limits?: LimiterOptions,
  connect: Partial<ConnectOptions> = {},
): Promise<void> {
  const hits: Hit[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req, info) => {
      const text = await req.text();
      const body = text ? JSON.parse(text) : undefined;
      hits.push({
        url: req.url,
        method: req.method,
        headers: new Headers(req.headers),
        body,
        port: info.remoteAddr.port,
      });
      return handler(req, hits.length, body);
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
    limits,
    ...connect,
  });
  try {
    await fn(kube, hits);
  } finally {
    kube.close();
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A Status answer, as the API server sends errors. */
export function status(
  code: number,
  reason: string,
  opts: { headers?: Record<string, string>; message?: string; causes?: unknown[] } = {},
): Response {
  const body: Record<string, unknown> = {
    kind: "Status",
    code,
    reason,
    message: opts.message ?? `${reason} message`,
  };
  if (opts.causes) body.details = { causes: opts.causes };
  return Response.json(body, { status: code, headers: opts.headers ?? {} });
}
