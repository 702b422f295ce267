/**
 * The `--metrics-addr` listener: `/metrics` in Prometheus' text format and
 * `/healthz`, served while the run lives. Plain `Deno.serve`: a scrape is
 * one GET, and the exposition is built at that moment.
 *
 * A run is a batch job that ends: Prometheus pulls every scrape interval,
 * so the last scrape before the listener closes may precede the run's final
 * state. {@linkcode MetricsServer.linger} keeps `/metrics` up after the end
 * until one scrape has read the final state (`--metrics-linger-secs`, at
 * most), so the pull model needs no Pushgateway for the end of a run.
 *
 * @module
 */

import { UsageError } from "../job.ts";
import type { RunMetrics } from "./metrics.ts";

/** A listening metrics endpoint. */
export interface MetricsServer {
  /** The address it listens on, as `host:port`. */
  addr: string;
  /**
   * The run's state is final: keeps serving until `/metrics` was scraped
   * once from now on (its exposition is the final state), at most `ms` or
   * until `signal` aborts. Resolves with whether that scrape came.
   */
  linger(ms: number, signal?: AbortSignal): Promise<boolean>;
  /** Stops listening; a scrape being answered is answered first. */
  close(): Promise<void>;
}

/** The content type of the text exposition format. */
export const EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * Listens on `host` (empty: every address: `::`, which on Linux takes IPv4
 * too, as Go's `net.Listen(":PORT")` does, so that a scrape of an IPv6 pod IP
 * reaches it; `0.0.0.0` where the host has no IPv6).
 */
function listen(host: string, port: number, handler: Deno.ServeHandler): Deno.HttpServer {
  const serve = (hostname: string) => Deno.serve({ hostname, port, onListen: () => {} }, handler);
  if (host) return serve(host);
  try {
    return serve("::");
  } catch (e) {
    // No IPv6 on this host (EAFNOSUPPORT, EADDRNOTAVAIL); a port in use is in use on both.
    if (e instanceof Deno.errors.AddrInUse) throw e;
    return serve("0.0.0.0");
  }
}

/**
 * Serves `metrics` on `addr` (`HOST:PORT`; an empty host is every address,
 * IPv4 and IPv6).
 *
 * @throws {UsageError} when the address cannot be listened on (in use, not local)
 */
export function serveMetrics(addr: string, metrics: RunMetrics): MetricsServer {
  const colon = addr.lastIndexOf(":");
  const host = addr.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  const port = Number(addr.slice(colon + 1));
  /** Told when a scrape read the final state, once `linger` began. */
  let scrapedFinal: (() => void) | undefined;
  let server: Deno.HttpServer;
  try {
    server = listen(host, port, (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") {
        const body = metrics.exposition();
        scrapedFinal?.();
        return new Response(body, { headers: { "content-type": EXPOSITION_TYPE } });
      }
      if (path === "/healthz") return new Response("ok\n");
      return new Response("not found: /metrics or /healthz\n", { status: 404 });
    });
  } catch (e) {
    throw new UsageError(`Invalid --metrics-addr ${addr}: cannot listen (${(e as Error).message})`);
  }
  const a = server.addr as Deno.NetAddr;
  const shown = a.hostname.includes(":") ? `[${a.hostname}]` : a.hostname;
  return {
    addr: `${shown}:${a.port}`,
    linger: (ms, signal) => {
      if (ms <= 0 || signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const done = (scraped: boolean) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", stop);
          scrapedFinal = undefined;
          resolve(scraped);
        };
        const stop = () => done(false);
        const timer = setTimeout(stop, ms);
        signal?.addEventListener("abort", stop);
        scrapedFinal = () => done(true);
      });
    },
    close: () => server.shutdown(),
  };
}
