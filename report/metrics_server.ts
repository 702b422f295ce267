/**
 * The `--metrics-addr` listener: `/metrics` in Prometheus' text format and
 * `/healthz`, served while the run lives. Plain `Deno.serve`: a scrape is
 * one GET, and the exposition is built at that moment.
 *
 * A run is a batch job that ends: Prometheus pulls every scrape interval,
 * so the last scrape before the listener closes may precede the run's final
 * state. {@linkcode MetricsServer.linger} keeps `/metrics` up after the end
 * for `--metrics-linger-secs`, its whole time, so the pull model needs no
 * Pushgateway for the end of a run. Not until the first scrape: Prometheus
 * is run as an HA pair of identical replicas that each scrape every target
 * on their own schedule, and a linger that ended at replica A's scrape
 * would leave replica B's data without the end (Thanos or a query
 * deduplicating the pair may then answer from B).
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
   * The run's state is final: keeps serving for `ms`, or until `signal`
   * aborts. Resolves with the scrapes of `/metrics` in that time (each
   * exposition is the final state).
   */
  linger(ms: number, signal?: AbortSignal): Promise<FinalScrapes>;
  /** Stops listening; a scrape being answered is answered first. */
  close(): Promise<void>;
}

/** The scrapes of `/metrics` during a linger. */
export interface FinalScrapes {
  /** How many. */
  scrapes: number;
  /** From how many addresses: the replicas of an HA Prometheus pair are two. */
  scrapers: number;
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
  /** Told of each scrape and its address once `linger` began: the final state read. */
  let scrapedFinal: ((from: string) => void) | undefined;
  let server: Deno.HttpServer;
  try {
    server = listen(host, port, (req, info) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") {
        const body = metrics.exposition();
        const from = info.remoteAddr as Deno.NetAddr;
        scrapedFinal?.(from.hostname);
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
      let scrapes = 0;
      const scrapers = new Set<string>();
      const seen = () => ({ scrapes, scrapers: scrapers.size });
      if (ms <= 0 || signal?.aborted) return Promise.resolve(seen());
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          scrapedFinal = undefined;
          resolve(seen());
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done);
        scrapedFinal = (from) => {
          scrapes++;
          scrapers.add(from);
        };
      });
    },
    close: () => server.shutdown(),
  };
}
