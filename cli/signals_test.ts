import assert from "node:assert/strict";
import { StopSignals } from "./signals.ts";
import { Logger } from "../report/log.ts";
import { EXIT } from "../run/run.ts";
import { withMetrics } from "../run/run_metrics.ts";
import type { Kube } from "../kube/client.ts";

/** A run of exit code `code` with `--metrics-linger-secs 30`, signalled with `sig` while it lingers. */
async function signalledWhileLingering(code: number, sig: Deno.Signal) {
  const lines: string[] = [];
  const stop = new StopSignals(new Logger("text", (l) => lines.push(l)));
  try {
    const started = Date.now();
    const ran = await withMetrics(
      { metricsAddr: "127.0.0.1:0", metricsLingerSecs: 30 },
      {
        kube: { stats: {} } as unknown as Kube,
        log: stop.log,
        signal: stop.controller.signal,
        settled: () => stop.settle(),
      },
      () => {
        // Nobody scrapes: the pod is deleted during the linger.
        setTimeout(() => Deno.kill(Deno.pid, sig), 100);
        return Promise.resolve(code);
      },
    );
    return { exit: stop.exitFor(ran), lines, ms: Date.now() - started };
  } finally {
    stop.close();
  }
}

Deno.test({
  name:
    "a SIGTERM during --metrics-linger-secs ends the linger at once and the exit code stays the run's",
  async fn() {
    for (const code of [EXIT.ok, EXIT.failed, EXIT.gate]) {
      const { exit, lines, ms } = await signalledWhileLingering(code, "SIGTERM");
      assert.equal(exit, code, `the run's exit ${code}, not 143`);
      assert.ok(ms < 10_000, `the linger ended with the signal (${ms} ms)`);
      assert.ok(
        lines.some((l) => l.includes("SIGTERM: the run has ended; closing /metrics")),
        lines.join("\n"),
      );
      assert.ok(!lines.some((l) => l.includes("creating no more Jobs")), "no run was stopped");
      assert.ok(
        lines.some((l) => l.includes("stopped by a signal; the final state was not scraped")),
      );
    }
  },
});

Deno.test({
  name: "a SIGTERM before the run's outcome is settled still stops the run with exit 143",
  async fn() {
    const lines: string[] = [];
    const stop = new StopSignals(new Logger("text", (l) => lines.push(l)));
    try {
      Deno.kill(Deno.pid, "SIGTERM");
      while (!stop.controller.signal.aborted) await new Promise((r) => setTimeout(r, 10));
      stop.settle();
      assert.equal(stop.exitFor(EXIT.failed), EXIT.sigterm);
      assert.ok(lines.some((l) => l.includes("SIGTERM: creating no more Jobs")));
    } finally {
      stop.close();
    }
  },
});
