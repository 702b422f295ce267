import assert from "node:assert/strict";
import { DURATION_BUCKETS, RunMetrics } from "./metrics.ts";
import { EXPOSITION_TYPE, serveMetrics } from "./metrics_server.ts";
import type { Progress } from "../engine/fanout.ts";

function fed(): RunMetrics {
  let now = 0;
  const m = new RunMetrics(() => ({ "200": 7, "201": 3, "<error>": 1 }), () => now);
  m.event({ kind: "created", node: "a", job: "j-a" });
  m.event({ kind: "created", node: "b", job: "j-b" });
  m.event({ kind: "adopted", node: "c", job: "j-c" });
  now = 4_000;
  m.event({ kind: "succeeded", node: "a", job: "j-a" });
  now = 45_000;
  m.event({ kind: "failed", node: "b", job: "j-b", reason: "exit 1" });
  // Counted from an earlier run: no duration of this run's.
  m.event({ kind: "succeeded", node: "d", job: "j-d", counted: true });
  const p: Progress = {
    succeeded: 1,
    failed: 1,
    inFlight: 2,
    draining: 1,
    queued: 5,
    total: 9,
    elapsedMs: 45_000,
    paused: "file /tmp/p",
  };
  m.progress(p);
  return m;
}

/** The samples of a family, by their name and labels. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1).replace("+Inf", "Infinity")));
  }
  return out;
}

Deno.test({
  name:
    "the metrics exposition follows the text format: HELP and TYPE once before each family's samples",
  permissions: "none",
  fn() {
    const text = fed().exposition();
    assert.ok(text.endsWith("\n"), "ends with a newline");
    const lines = text.trimEnd().split("\n");
    const seen = new Set<string>();
    let current = "";
    for (let i = 0; i < lines.length; i++) {
      const help = lines[i].match(/^# HELP (\S+) \S/);
      if (help) {
        assert.ok(!seen.has(help[1]), `one HELP for ${help[1]}`);
        seen.add(help[1]);
        assert.match(lines[i + 1], new RegExp(`^# TYPE ${help[1]} (counter|gauge|histogram)$`));
        current = help[1];
        i++;
        continue;
      }
      const name = lines[i].match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? \S+$/);
      assert.ok(name, `a sample line: ${lines[i]}`);
      assert.ok(
        name[1] === current || name[1].startsWith(`${current}_`),
        `${name[1]} under ${current}`,
      );
    }
    assert.deepEqual([...seen], [
      "job_dispatcher_nodes",
      "job_dispatcher_jobs_created_total",
      "job_dispatcher_node_duration_seconds",
      "job_dispatcher_paused",
      "job_dispatcher_gate_breaches_total",
      "job_dispatcher_api_requests_total",
    ]);
  },
});

Deno.test({
  name: "the metrics say the nodes per phase, Jobs created, paused, breaches and answers by code",
  permissions: "none",
  fn() {
    const s = samples(fed().exposition());
    assert.equal(s.get('job_dispatcher_nodes{phase="succeeded"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="running"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="draining"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="queued"}'), 5);
    assert.equal(s.get("job_dispatcher_jobs_created_total"), 2);
    assert.equal(s.get("job_dispatcher_paused"), 1);
    assert.equal(s.get("job_dispatcher_gate_breaches_total"), 0);
    assert.equal(s.get('job_dispatcher_api_requests_total{code="201"}'), 3);
    assert.equal(s.get('job_dispatcher_api_requests_total{code="<error>"}'), 1);
  },
});

Deno.test({
  name: "the node duration histogram is cumulative, ends in +Inf equal to _count, and has _sum",
  permissions: "none",
  fn() {
    const s = samples(fed().exposition());
    const n = "job_dispatcher_node_duration_seconds";
    const buckets = [...DURATION_BUCKETS.map(String), "+Inf"].map((le) =>
      s.get(`${n}_bucket{le="${le}"}`)!
    );
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i] >= buckets[i - 1], "cumulative");
    // 4 s and 45 s: one in le=5 and above, both from le=60.
    assert.equal(s.get(`${n}_bucket{le="1"}`), 0);
    assert.equal(s.get(`${n}_bucket{le="5"}`), 1);
    assert.equal(s.get(`${n}_bucket{le="30"}`), 1);
    assert.equal(s.get(`${n}_bucket{le="60"}`), 2);
    assert.equal(buckets.at(-1), 2);
    assert.equal(s.get(`${n}_count`), 2);
    assert.equal(s.get(`${n}_sum`), 49);
  },
});

Deno.test({
  name:
    "--metrics-addr serves /metrics in the text format and /healthz; an address in use is bad input",
  async fn() {
    const server = serveMetrics("127.0.0.1:0", fed());
    try {
      const res = await fetch(`http://${server.addr}/metrics`);
      assert.equal(res.headers.get("content-type"), EXPOSITION_TYPE);
      assert.match(await res.text(), /^job_dispatcher_paused 1$/m);
      const health = await fetch(`http://${server.addr}/healthz`);
      assert.equal(await health.text(), "ok\n");
      const other = await fetch(`http://${server.addr}/`);
      assert.equal(other.status, 404);
      await other.body?.cancel();
      assert.throws(
        () => serveMetrics(server.addr, fed()),
        /Invalid --metrics-addr .*cannot listen/,
      );
    } finally {
      await server.close();
    }
  },
});

Deno.test({
  name:
    "job_dispatcher_nodes is read from the engine's live states at scrape time, not the last report",
  permissions: "none",
  fn() {
    const m = new RunMetrics();
    const phases: string[] = ["queued", "queued", "running"];
    m.progress({
      succeeded: 0,
      failed: 0,
      inFlight: 1,
      queued: 2,
      total: 3,
      elapsedMs: 0,
      states: () =>
        phases.map((phase, i) => ({
          node: `n${i}`,
          job: `j${i}`,
          state: { phase: phase as "queued", since: 0 },
        })),
    });
    phases[2] = "succeeded";
    phases[1] = "finishing";
    const s = samples(m.exposition());
    assert.equal(s.get('job_dispatcher_nodes{phase="succeeded"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="running"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="queued"}'), 1);
    assert.equal(s.get('job_dispatcher_nodes{phase="failed"}'), 0);
  },
});

Deno.test({
  name:
    "MetricsServer.linger() counts the scrapes of /metrics after the run and their addresses; a signal ends it at once",
  async fn() {
    const m = new RunMetrics();
    m.progress({ succeeded: 2, failed: 0, inFlight: 1, queued: 0, total: 3, elapsedMs: 0 });
    const server = serveMetrics("127.0.0.1:0", m);
    try {
      const early = await fetch(`http://${server.addr}/metrics`);
      await early.body?.cancel(); // before the end: does not count
      m.progress({ succeeded: 3, failed: 0, inFlight: 0, queued: 0, total: 3, elapsedMs: 1 });
      const lingering = server.linger(600);
      const health = await fetch(`http://${server.addr}/healthz`);
      await health.body?.cancel(); // no scrape
      for (let i = 0; i < 2; i++) {
        const last = await fetch(`http://${server.addr}/metrics`);
        assert.match(await last.text(), /^job_dispatcher_nodes\{phase="succeeded"\} 3$/m);
      }
      assert.deepEqual(await lingering, { scrapes: 2, scrapers: 1 });

      const started = Date.now();
      assert.deepEqual(await server.linger(200), { scrapes: 0, scrapers: 0 }, "nobody scraped");
      assert.ok(Date.now() - started >= 190);
      const abort = new AbortController();
      const cut = server.linger(10_000, abort.signal);
      abort.abort();
      assert.deepEqual(await cut, { scrapes: 0, scrapers: 0 }, "a signal ends it at once");
      assert.deepEqual(await server.linger(0), { scrapes: 0, scrapers: 0 }, "0: no linger");
    } finally {
      await server.close();
    }
  },
});

Deno.test({
  name:
    "MetricsServer.linger() serves its whole time after a scrape, so the second Prometheus of an HA pair scrapes the final state too",
  async fn() {
    const m = new RunMetrics();
    m.progress({ succeeded: 3, failed: 0, inFlight: 0, queued: 0, total: 3, elapsedMs: 1 });
    const server = serveMetrics("127.0.0.1:0", m);
    try {
      const started = Date.now();
      let settled = false;
      const lingering = server.linger(1_500).then(() => (settled = true));
      const first = await fetch(`http://${server.addr}/metrics`); // replica A
      assert.match(await first.text(), /^job_dispatcher_nodes\{phase="succeeded"\} 3$/m);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(settled, false, "one scrape does not end the linger");
      const second = await fetch(`http://${server.addr}/metrics`); // replica B
      assert.match(await second.text(), /^job_dispatcher_nodes\{phase="succeeded"\} 3$/m);
      await lingering;
      assert.ok(Date.now() - started >= 1_450, `lingered ${Date.now() - started} ms of 1500`);
    } finally {
      await server.close();
    }
  },
});

Deno.test({
  name:
    "job_dispatcher_nodes counts the cleanup phase's nodes after it ended, as the report's summary does",
  permissions: "none",
  fn() {
    const m = new RunMetrics();
    const live = (phases: string[]) => () =>
      phases.map((phase, i) => ({
        node: `n${i}`,
        job: `j${i}`,
        state: { phase: phase as "queued", since: 0 },
      }));
    const p = { failed: 0, inFlight: 0, total: 2, elapsedMs: 0 };
    // The cleanup phase: two nodes, both cleaned up.
    m.progress({ ...p, succeeded: 2, queued: 0, states: live(["succeeded", "succeeded"]) });
    m.endPhase();
    // The main phase: one of its two nodes done so far.
    m.progress({ ...p, succeeded: 1, queued: 1, states: live(["succeeded", "queued"]) });
    const s = samples(m.exposition());
    assert.equal(s.get('job_dispatcher_nodes{phase="succeeded"}'), 3, "2 cleaned up + 1");
    assert.equal(s.get('job_dispatcher_nodes{phase="queued"}'), 1);
    m.endPhase();
    assert.equal(samples(m.exposition()).get('job_dispatcher_nodes{phase="succeeded"}'), 3);
  },
});

Deno.test({
  name:
    "--metrics-addr :PORT listens on every address of both families, as Go's net.Listen does (a pod IP may be IPv6)",
  async fn() {
    const server = serveMetrics(":0", fed());
    try {
      const port = server.addr.slice(server.addr.lastIndexOf(":") + 1);
      const v4 = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(await v4.text(), "ok\n");
      // An IPv6 single-stack cluster scrapes the pod's IPv6 address. Asserted
      // where this machine has an IPv6 loopback (the fallback keeps IPv4 without it).
      let v6Loopback = true;
      try {
        Deno.listen({ hostname: "::1", port: 0 }).close();
      } catch {
        v6Loopback = false;
      }
      if (v6Loopback) {
        const v6 = await fetch(`http://[::1]:${port}/healthz`);
        assert.equal(await v6.text(), "ok\n");
        assert.equal(server.addr, `[::]:${port}`, "said as a URL host");
      }
    } finally {
      await server.close();
    }
  },
});
