/**
 * A real Prometheus for the health gate suites: built from its Go module
 * (tools/prometheus, by tools/build.sh), started on a free loopback port with
 * a configuration the test writes (scrape targets every second, rule files),
 * and an exporter of the test's own whose gauge the test flips.
 *
 * @module
 */

import { delay, freePorts, isAlive, killGroups, spawnDetached, tail } from "./_procs.ts";
import { run } from "./_helm.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** The built Prometheus. */
export const PROMETHEUS = `${ROOT}e2e/.bin/prometheus`;

let built: Promise<void> | undefined;

/**
 * Builds Prometheus from its Go module once per test process (tools/build.sh
 * skips an up-to-date binary in about a second), so that no suite relies on
 * another suite, or on .ci/run, to have built it first.
 */
export function ensurePrometheus(): Promise<void> {
  built ??= run("bash", [`${ROOT}tools/build.sh`, "prometheus"]).then((r) => {
    if (r.code !== 0) {
      throw new Error(`Cannot build prometheus: tools/build.sh exited ${r.code}: ${r.stderr}`);
    }
  });
  return built;
}

/** What Prometheus is started with. */
export interface PrometheusOptions {
  /** `host:port` targets scraped every `scrapeIntervalSecs`, as job `e2e`. */
  targets: string[];
  /** The text of one rule file (groups of alerting rules), if any. */
  rules?: string;
  /** Scrape and rule evaluation interval. @default 1 */
  scrapeIntervalSecs?: number;
}

/** A Prometheus under way. */
export interface RunningPrometheus {
  /** Its base URL, `http://127.0.0.1:PORT`. */
  url: string;
  /** Kills it (SIGKILL), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port and storage, and waits until it is ready. */
  restart(): Promise<void>;
  /** Stops it and removes its folder. */
  stop(): Promise<void>;
  /** The end of its log. */
  log(lines?: number): Promise<string>;
}

/** Starts Prometheus and waits for `/-/ready`. */
export async function startPrometheus(o: PrometheusOptions): Promise<RunningPrometheus> {
  await ensurePrometheus();
  const dir = await Deno.makeTempDir({ prefix: "e2e-prometheus-" });
  const interval = `${o.scrapeIntervalSecs ?? 1}s`;
  await Deno.writeTextFile(`${dir}/rules.yml`, o.rules ?? "groups: []\n");
  await Deno.writeTextFile(
    `${dir}/prometheus.yml`,
    `global: {scrape_interval: ${interval}, evaluation_interval: ${interval}, scrape_timeout: ${interval}}
rule_files: [${dir}/rules.yml]
scrape_configs:
  - job_name: e2e
    static_configs: [{targets: ${JSON.stringify(o.targets)}}]
`,
  );
  const [port] = freePorts(1);
  const url = `http://127.0.0.1:${port}`;
  const spec = {
    name: "prometheus",
    cmd: PROMETHEUS,
    args: [
      `--config.file=${dir}/prometheus.yml`,
      `--storage.tsdb.path=${dir}/data`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    log: `${dir}/prometheus.log`,
  };
  let pid = 0;
  const start = async () => {
    const p = spawnDetached(spec);
    pid = p.pid;
    await ready(url, () => p.exited(), spec.log);
  };
  const kill = async () => {
    await killGroups([pid], (p) => isAlive(p, PROMETHEUS), 0);
  };
  await start();
  return {
    url,
    kill,
    restart: start,
    async stop() {
      await killGroups([pid], (p) => isAlive(p, PROMETHEUS));
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
    log: (lines = 30) => tail(spec.log, lines),
  };
}

/** Waits until Prometheus says it is ready (its TSDB open, its config loaded). */
async function ready(url: string, exited: () => boolean, log: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (exited()) throw new Error(`prometheus exited:\n${await tail(log, 30)}`);
    try {
      const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) });
      await res.body?.cancel();
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    await delay(200);
  }
  throw new Error(`prometheus at ${url} not ready within 120 s:\n${await tail(log, 30)}`);
}

/** An exporter of the test's own: one gauge in Prometheus's text format. */
export interface Exporter {
  /** `127.0.0.1:PORT`, a scrape target. */
  target: string;
  /** Sets the gauge. */
  set(value: number): void;
  /**
   * Takes the exporter down (every scrape answered 503, as a crashed
   * exporter behind its Service) or brings it back: a failed scrape makes
   * Prometheus mark the target's series stale, so they match nothing.
   */
  down(down: boolean): void;
  /** Stops serving. */
  stop(): Promise<void>;
}

/**
 * Serves `/metrics` with the gauge `name` (0 at first) on a free loopback port.
 */
export function startExporter(name = "e2e_broken"): Exporter {
  let value = 0;
  let isDown = false;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      isDown ? new Response("down\n", { status: 503 }) : new Response(
        `# HELP ${name} Set by the test.\n# TYPE ${name} gauge\n${name} ${value}\n`,
        {
          headers: { "Content-Type": "text/plain; version=0.0.4" },
        },
      ),
  );
  return {
    target: `127.0.0.1:${server.addr.port}`,
    set: (v) => (value = v),
    down: (d) => (isDown = d),
    stop: () => server.shutdown(),
  };
}

/** Waits until Prometheus's instant query `expr` returns `want` samples (scrapes are every second). */
export async function untilSamples(
  prom: RunningPrometheus,
  expr: string,
  want: (n: number) => boolean,
  ms = 30_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const res = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = await res.json();
    if (want(body.data?.result?.length ?? -1)) return;
    await delay(250);
  }
  throw new Error(`query ${expr} never returned the samples wanted within ${ms} ms`);
}
