/**
 * `--metrics-addr`'s listener around a run, and `--metrics-linger-secs`:
 * after the run, `/metrics` stays up that long, for every scraper.
 *
 * @module
 */

import type { RunConfig, RunContext } from "./config.ts";
import { RunMetrics } from "../report/metrics.ts";
import { serveMetrics } from "../report/metrics_server.ts";

/**
 * Runs `fn` with `--metrics-addr`'s listener up, and after it, for
 * `--metrics-linger-secs`: Prometheus pulls every interval, and a batch
 * job's last state would otherwise be seen only if a scrape happened to fall
 * between the last change and the exit. The whole time, not until the first
 * scrape: each replica of an HA Prometheus pair scrapes on its own. `ends` (the health gate's stop) runs when `fn` ended, before the
 * linger. Before the linger the run's outcome is settled (`ctx.settled`): a
 * SIGTERM then (the pod deleted, its grace period begun) ends the linger,
 * not the run, whose exit code stands.
 *
 * @throws what `fn` throws, and {@linkcode UsageError} when the address cannot be listened on
 */
export async function withMetrics<T>(
  opts: Pick<RunConfig, "metricsAddr" | "metricsLingerSecs">,
  { kube, log, signal, settled }: Pick<RunContext, "kube" | "log" | "signal" | "settled">,
  fn: (metrics?: RunMetrics) => Promise<T>,
  ends?: () => Promise<void>,
): Promise<T> {
  // Listening before the first create: an address in use is bad input, and
  // a scrape sees the whole run.
  const metrics = opts.metricsAddr ? new RunMetrics(() => kube.stats.codes ?? {}) : undefined;
  const server = metrics && serveMetrics(opts.metricsAddr!, metrics);
  if (server) log.info(`metrics on http://${server.addr}/metrics`);
  try {
    return await fn(metrics);
  } finally {
    // The gate ends with the run, not with the linger: measured on, a
    // breach after the rollout would set a pause (the owner's annotation,
    // the pause file a later run then obeys), post an Event and count in
    // job_dispatcher_gate_breaches_total after the report was written.
    await ends?.();
    const secs = opts.metricsLingerSecs;
    if (server && secs > 0 && !signal?.aborted) {
      settled?.();
      log.info(`metrics: serving the final state for ${secs} s (--metrics-linger-secs)`);
      const { scrapes, scrapers } = await server.linger(secs * 1000, signal);
      const read = scrapes === 0
        ? "the final state was not scraped"
        : `the final state was scraped ${scrapes} ${scrapes === 1 ? "time" : "times"} from ` +
          `${scrapers} ${scrapers === 1 ? "address" : "addresses"}`;
      log.info(
        signal?.aborted
          ? `metrics: stopped by a signal; ${read}; closing`
          : `metrics: ${read} in ${secs} s (--metrics-linger-secs); closing`,
      );
    }
    await server?.close();
  }
}
