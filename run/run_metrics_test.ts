import assert from "node:assert/strict";
import { withMetrics } from "./run_metrics.ts";
import { Logger } from "../report/log.ts";
import { HealthGate } from "../gates/gate.ts";
import type { Kube } from "../kube/client.ts";

const kube = { stats: {} } as unknown as Kube;

Deno.test({
  name:
    "withMetrics() settles the run's outcome before it lingers, and a run stopped by a signal closes /metrics at once",
  async fn() {
    const lines: string[] = [];
    const log = new Logger("text", (l) => lines.push(l));
    let settled = 0;
    const ctx = { kube, log, signal: new AbortController().signal, settled: () => settled++ };
    const opts = { metricsAddr: "127.0.0.1:0", metricsLingerSecs: 1 };
    const code = await withMetrics(opts, ctx, async (m) => {
      const addr = lines.find((l) =>
        l.includes("metrics on http://")
      )!.match(/http:\/\/(\S+)\//)![1];
      m!.progress({ succeeded: 1, failed: 0, inFlight: 0, queued: 0, total: 1, elapsedMs: 1 });
      // Prometheus scrapes after the end, as it would within its interval.
      setTimeout(() => fetch(`http://${addr}/metrics`).then((r) => r.body?.cancel()), 100);
      return await Promise.resolve(1);
    });
    assert.equal(code, 1);
    assert.equal(settled, 1, "settled once, before the linger");
    assert.ok(
      lines.some((l) =>
        l.includes("metrics: the final state was scraped 1 time from 1 address in 1 s")
      ),
      lines.join("\n"),
    );

    const stopped = new AbortController();
    stopped.abort(); // SIGTERM before any scrape: the run was stopped, nothing to wait for
    const started = Date.now();
    await withMetrics(opts, { ...ctx, signal: stopped.signal }, () => Promise.resolve(143));
    assert.ok(Date.now() - started < 5_000, "no linger after a stopped run");
    assert.equal(settled, 1, "a stopped run is not settled by the linger");

    await withMetrics({ ...opts, metricsLingerSecs: 0 }, ctx, () => Promise.resolve(0));
    assert.equal(settled, 1, "0: no linger, nothing to settle");
  },
});

Deno.test({
  name:
    "withMetrics() ends the health gate with the run: a breach during the linger is told nowhere and latches no pause",
  async fn() {
    let broken = false, latched = 0, told = 0;
    const gate = new HealthGate({
      config: { url: "http://prom", queries: ["broken > 0"], intervalSecs: 0.1, onBreach: "pause" },
      measure: () =>
        Promise.resolve({
          breach: broken ? { query: "broken > 0", value: "broken 1" } : undefined,
          dark: [],
          warnings: [],
        }),
    });
    await gate.start();
    await gate.bind({
      onBreach: () => told++,
      latch: () => Promise.resolve(void latched++),
      pauseSeen: () => latched > 0,
    });
    const lines: string[] = [];
    const log = new Logger("text", (l) => lines.push(l));
    try {
      await withMetrics(
        { metricsAddr: "127.0.0.1:0", metricsLingerSecs: 1 },
        { kube, log, signal: new AbortController().signal },
        () => {
          // The fleet breaks after the rollout ended, while /metrics lingers.
          setTimeout(() => (broken = true), 10);
          return Promise.resolve(0);
        },
        () => gate.stop(),
      );
    } finally {
      await gate.stop();
    }
    assert.equal(told, 0, "no breach told after the run");
    assert.equal(latched, 0, "no pause set after the run");
    assert.deepEqual(gate.breaches, [], "no breach in the history");
  },
});
