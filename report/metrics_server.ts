/**
 * The `--metrics-addr` listener: `/metrics` in Prometheus' text format and
 * `/healthz`, served while the run lives. Plain `Deno.serve`: a scrape is
 * one GET, and the exposition is built at that moment.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import type { RunMetrics } from "./metrics.ts";

/** A listening metrics endpoint. */
export interface MetricsServer {
  /** The address it listens on, as `host:port`. */
  addr: string;
  /** Stops listening. */
  close(): Promise<void>;
}

/** The content type of the text exposition format. */
export const EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * Serves `metrics` on `addr` (`HOST:PORT`; an empty host is every address).
 *
 * @throws {UsageError} when the address cannot be listened on (in use, not local)
 */
export function serveMetrics(addr: string, metrics: RunMetrics): MetricsServer {
  const colon = addr.lastIndexOf(":");
  const host = addr.slice(0, colon).replace(/^\[(.*)\]$/, "$1") || "0.0.0.0";
  const port = Number(addr.slice(colon + 1));
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ hostname: host, port, onListen: () => {} }, (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") {
        return new Response(metrics.exposition(), { headers: { "content-type": EXPOSITION_TYPE } });
      }
      if (path === "/healthz") return new Response("ok\n");
      return new Response("not found: /metrics or /healthz\n", { status: 404 });
    });
  } catch (e) {
    throw new UsageError(`Invalid --metrics-addr ${addr}: cannot listen (${(e as Error).message})`);
  }
  const a = server.addr as Deno.NetAddr;
  return { addr: `${a.hostname}:${a.port}`, close: () => server.shutdown() };
}
