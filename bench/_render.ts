/**
 * Turns benchmark results into `bench/results.md` and a hand-written SVG of
 * Jobs in flight over time. No I/O.
 *
 * @module
 */

import type { AuditSummary, Counts, Mode, RecordWrites, Scenario } from "./_analysis.ts";
import type { StatusProbeResult } from "./_status_probe.ts";

/** The machine and software a result was measured on. */
export interface Machine {
  nproc: number;
  memoryGiB: number;
  cpu: string;
  /** Load average (1 min) when the scenario started: other work on the machine. */
  load: string;
  deno: string;
  kubernetes: string;
  kwok: string;
  commit: string;
  /** Bytes of dist/job-dispatcher.js, or undefined when the runs used main.ts. */
  bundleBytes?: number;
  /** What ran: the bundle or main.ts. */
  entry: string;
}

/** The bench cluster's settings that differ from the e2e suite's. */
export interface ClusterSettings {
  nodeLeaseDurationSeconds: number;
  controllerQps?: number;
}

/** One dispatcher run, as measured. */
export interface RunResult {
  mode: Mode;
  namespace: string;
  /** The dispatcher's arguments. */
  args: string[];
  exitCode: number;
  timedOut: boolean;
  /** Spawn → exit, s. */
  wallSeconds: number;
  idealSeconds: number;
  /** First Job seen created → last seen finished, s. */
  dispatchSeconds: number;
  /** Mean Jobs in flight / P between those two moments. */
  utilisation: number;
  jobsCreated: number;
  jobsFinished: number;
  refill: { count: number; p50: number; p99: number; max: number };
  /** Creation → completion of a Job as the watcher saw it, ms. */
  jobLifetime: { p50: number; p99: number };
  audit: AuditSummary;
  /** kube-apiserver's apiserver_request_total growth over the run, every client. */
  apiserver: Counts;
  peakRssBytes: number;
  /** At the sample with the most resident memory: anonymous (heaps) and file-backed bytes. */
  rssAtPeak?: { rssBytes: number; anonBytes: number; fileBytes: number };
  cpuSeconds: number;
  /** Spawn → the proxy accepted the first connection, ms. */
  firstConnectMs: number;
  /** Spawn → the API server received the first request (audit), ms. */
  firstRequestMs: number;
  /** Jobs in flight: [s since spawn, count], thinned. */
  series: [number, number][];
  /** The last lines of the dispatcher's log. */
  logTail: string;
  /** `job-dispatcher status` timed while the run lived and after; its requests (audit). */
  status?: StatusProbeResult & { requests: Counts };
  /** The dispatcher's writes of its run record (audit). */
  recordWrites?: RecordWrites;
}

/** Startup of the bundle, warm: spawn → first request, for several runs. */
export interface StartupResult {
  runs: { firstConnectMs: number; firstRequestMs: number; exitCode: number }[];
  args: string[];
}

/** Everything one scenario's run of the benchmark wrote. */
export interface ScenarioResult {
  scenario: Scenario;
  /** When it ran (ISO). */
  date: string;
  /** The command that made it. */
  command: string;
  machine: Machine;
  cluster: ClusterSettings;
  runs: RunResult[];
  /** The warm-start probe on this scenario's cluster, when it ran. */
  startup?: StartupResult;
}

const f = (x: number, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : "–");
const ms = (x: number) => (Number.isFinite(x) ? `${Math.round(x)}` : "–");
const mb = (bytes: number) => f(bytes / 2 ** 20, 1);

/** The dispatcher's requests beyond its node LIST pages, per node; and without Events and node marks. */
export function perNode(run: RunResult, n: number): { all: number; bare: number } {
  const r = run.audit.requests;
  const beyond = run.audit.total - run.audit.nodeListPages;
  const recording = (r["create events"] ?? 0) + (r["patch nodes"] ?? 0);
  return { all: beyond / n, bare: (beyond - recording) / n };
}

/**
 * The makespan a dispatcher with no overhead of its own would reach on this
 * control plane: ⌈N/P⌉ Jobs in a row per slot, each taking the median Job
 * lifetime (creation → finished as the watcher saw it), which holds the
 * Job controller's and kwok's own latency on top of D.
 */
export function lifetimeIdeal(s: Scenario, r: RunResult): number {
  return Math.ceil(s.n / s.p) * r.jobLifetime.p50 / 1000;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
}

function name(s: Scenario): string {
  return `N=${s.n}, P=${s.p}, D=${s.d} s`;
}

function countsLine(c: Counts, top = 12): string {
  return Object.entries(c)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
}

function summaryRow(s: ScenarioResult, r: RunResult): string {
  const per = perNode(r, s.scenario.n);
  return `| ${s.scenario.n} | ${s.scenario.p} | ${s.scenario.d} | ${r.mode} | ${
    f(r.wallSeconds)
  } | ${r.idealSeconds} | ${f(r.wallSeconds / r.idealSeconds, 3)} | ${f(per.all, 2)} | ${
    f(per.bare, 2)
  } | ${ms(r.refill.p50)} / ${ms(r.refill.p99)} | ${mb(r.peakRssBytes)} | ${f(r.cpuSeconds, 2)} | ${
    ms(r.audit.listNodesMs)
  } | ${ms(r.firstRequestMs)} |${r.exitCode !== 0 || r.timedOut ? " ⚠" : ""}`;
}

function scenarioTable(s: ScenarioResult): string {
  const runs = s.runs;
  const row = (label: string, cell: (r: RunResult) => string) =>
    `| ${label} | ${runs.map(cell).join(" | ")} |`;
  const lines = [
    `| | ${runs.map((r) => r.mode).join(" | ")} |`,
    `|---|${runs.map(() => "---:").join("|")}|`,
    row("exit code", (r) => `${r.exitCode}${r.timedOut ? " (timed out)" : ""}`),
    row("makespan (spawn → exit), s", (r) => f(r.wallSeconds)),
    row("ideal ⌈N/P⌉·D, s", (r) => `${r.idealSeconds}`),
    row("makespan / ideal", (r) => f(r.wallSeconds / r.idealSeconds, 3)),
    row("first Job created → last finished, s", (r) => f(r.dispatchSeconds)),
    row(
      "⌈N/P⌉ × measured Job lifetime p50, s",
      (r) => f(lifetimeIdeal(s.scenario, r)),
    ),
    row("makespan / that", (r) => f(r.wallSeconds / lifetimeIdeal(s.scenario, r), 3)),
    row("slot utilisation (mean in flight / P)", (r) => f(r.utilisation, 3)),
    row("Job lifetime p50 / p99, ms", (r) => `${ms(r.jobLifetime.p50)} / ${ms(r.jobLifetime.p99)}`),
    row(
      "slot refill p50 / p99 / max, ms",
      (r) => `${ms(r.refill.p50)} / ${ms(r.refill.p99)} / ${ms(r.refill.max)}`,
    ),
    row("Jobs created / finished (watcher)", (r) => `${r.jobsCreated} / ${r.jobsFinished}`),
    row("dispatcher requests (audit), total", (r) => `${r.audit.total}`),
    row("… node LIST pages", (r) => `${r.audit.nodeListPages}`),
    row("… per node beyond node LIST pages", (r) => f(perNode(r, s.scenario.n).all, 3)),
    row(
      "… per node, also without Events and node marks",
      (r) => f(perNode(r, s.scenario.n).bare, 3),
    ),
    row("… answered 429", (r) => `${r.audit.throttled}`),
    row(
      "all clients' requests (apiserver_request_total Δ)",
      (r) => `${Object.values(r.apiserver).reduce((a, b) => a + b, 0)}`,
    ),
    row("peak RSS (VmHWM), MB", (r) => mb(r.peakRssBytes)),
    row(
      "… at the largest sample: anonymous / file-backed, MB",
      (r) => r.rssAtPeak ? `${mb(r.rssAtPeak.anonBytes)} / ${mb(r.rssAtPeak.fileBytes)}` : "–",
    ),
    row("CPU (utime + stime), s", (r) => f(r.cpuSeconds, 2)),
    row("list all nodes, ms", (r) => ms(r.audit.listNodesMs)),
    row("spawn → first connection, ms", (r) => ms(r.firstConnectMs)),
    row("spawn → first request received, ms", (r) => ms(r.firstRequestMs)),
    row("`status` while the run lives: median / max, ms (runs)", (r) => statusDuring(r)),
    row(
      "`status` after the end: text / `-o json`, ms",
      (r) => r.status ? r.status.after.map((x) => ms(x.ms)).join(" / ") : "–",
    ),
    row("`status -o json` counts at the end = the run's", (r) => statusAgrees(r)),
    row(
      "run record writes (audit, answered)",
      (r) => r.recordWrites ? `${r.recordWrites.writes}` : "–",
    ),
    row("… min / median gap, s", (r) => {
      const w = r.recordWrites;
      return w ? `${f(w.minGapMs / 1000, 2)} / ${f(w.medianGapMs / 1000, 2)}` : "–";
    }),
    row("… most in any 10 s / mean per 10 s", (r) => {
      const w = r.recordWrites;
      return w ? `${w.maxPer10s} / ${f(w.meanPer10s, 2)}` : "–";
    }),
    row("… the closing write left out: most in 10 s / min gap, s", (r) => {
      const w = r.recordWrites;
      return w?.maxPer10sBeforeLast !== undefined
        ? `${w.maxPer10sBeforeLast} / ${f(w.minGapBeforeLastMs / 1000, 2)}`
        : "–";
    }),
  ];
  const detail = runs.map((r) =>
    `- ${r.mode}: dispatcher's requests by verb and resource (audit): ${
      countsLine(r.audit.requests, 20)
    }\n  - all clients (apiserver_request_total Δ, top 12): ${countsLine(r.apiserver)}` +
    statusDetail(r)
  );
  const startup = s.startup
    ? `\nWarm start of the ${s.machine.entry} (\`${
      s.startup.args.join(" ")
    }\`, ${s.startup.runs.length} runs after one warm-up): spawn → first connection ${
      s.startup.runs.map((r) => ms(r.firstConnectMs)).join(", ")
    } ms (median ${ms(median(s.startup.runs.map((r) => r.firstConnectMs)))}); ` +
      `spawn → first request received ${
        s.startup.runs.map((r) => ms(r.firstRequestMs)).join(", ")
      } ms (median ${ms(median(s.startup.runs.map((r) => r.firstRequestMs)))}).\n`
    : "";
  const m = s.machine;
  return `### ${name(s.scenario)}

Measured ${s.date} on ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, load ${m.load} at start; ` +
    `deno ${m.deno}, Kubernetes ${m.kubernetes}, kwok ${m.kwok}, commit ${m.commit}, ` +
    `${m.entry}${
      m.bundleBytes ? ` (${m.bundleBytes} bytes)` : ""
    }; kwok node Lease ${s.cluster.nodeLeaseDurationSeconds} s, controller QPS ${
      s.cluster.controllerQps ?? "default"
    }.
Command: \`${s.command}\`

${lines.join("\n")}

${detail.join("\n")}
${startup}`;
}

function statusDuring(r: RunResult): string {
  const during = r.status?.during.map((x) => x.ms) ?? [];
  return during.length
    ? `${ms(median(during))} / ${ms(Math.max(...during))} (${during.length})`
    : "–";
}

function statusAgrees(r: RunResult): string {
  const c = r.status?.check;
  if (!c) return "–";
  const got = `${c.got.succeeded} succeeded, ${c.got.failed} failed of ${c.got.total}`;
  return c.agrees ? `yes (${got})` : `**no**: ${got}, the run ${JSON.stringify(c.expected)}`;
}

function statusDetail(r: RunResult): string {
  if (!r.status) return "";
  const all = [...r.status.during, ...r.status.after];
  const w = r.recordWrites;
  return `\n  - \`job-dispatcher status ${r.status.args.join(" ")}\` (a viewer ServiceAccount, ` +
    `a fresh process every ${r.status.everySecs} s): at ${
      all.map((x) =>
        `${f(x.at, 0)} s ${ms(x.ms)} ms (CPU ${f(x.cpuSeconds, 2)} s${
          x.output === "json" ? ", json" : ""
        }${x.exitCode > 1 ? `, exit ${x.exitCode}` : ""})`
      ).join("; ")
    }; its requests (audit, all runs): ${countsLine(r.status.requests, 8)}` +
    (w
      ? `\n  - run record writes: ${countsLine(w.attempts)}; at ${
        w.at.map((t) => f(t, 1)).join(", ")
      } s`
      : "");
}

/** The target figures and whether the results meet them. */
function targets(results: ScenarioResult[]): string {
  const find = (n: number, p: number, d: number, mode: Mode) =>
    results.find((s) => s.scenario.n === n && s.scenario.p === p && s.scenario.d === d)
      ?.runs.find((r) => r.mode === mode);
  const watch = results.flatMap((s) =>
    s.runs.filter((r) => r.mode === "watch").map((r) => ({ s, r }))
  );
  const verdict = (ok: boolean | undefined) =>
    ok === undefined ? "not measured" : ok ? "holds" : "**does not hold**";
  const rows: string[] = [];
  const t1 = find(1000, 100, 10, "watch");
  rows.push(
    `| makespan ≤ 1.02 × ideal (N=1000, P=100, D=10 s, watch) | ${
      t1 ? f(t1.wallSeconds / t1.idealSeconds, 3) : "–"
    } | ${verdict(t1 && t1.wallSeconds / t1.idealSeconds <= 1.02)} |`,
  );
  const per = watch.map(({ s, r }) => perNode(r, s.scenario.n));
  const worstAll = Math.max(...per.map((p) => p.all));
  const worstBare = Math.max(...per.map((p) => p.bare));
  rows.push(
    `| ≤ 1.5 requests per node beyond node LIST pages (watch, worst run), defaults | ${
      f(worstAll, 2)
    } | ${verdict(per.length ? worstAll <= 1.5 : undefined)} |`,
    `| … the same without the per-node Event and node mark | ${f(worstBare, 2)} | ${
      verdict(per.length ? worstBare <= 1.5 : undefined)
    } |`,
  );
  const p99 = Math.max(...watch.map(({ r }) => r.refill.p99).filter(Number.isFinite));
  rows.push(
    `| refill latency p99 ≤ 250 ms (watch, worst run) | ${ms(p99)} | ${
      verdict(Number.isFinite(p99) ? p99 <= 250 : undefined)
    } |`,
  );
  const big = results.filter((s) => s.scenario.n === 10000).flatMap((s) => s.runs);
  const rss = Math.max(...big.map((r) => r.peakRssBytes));
  rows.push(
    `| peak RSS ≤ 80 MB at N=10000 (bundle) | ${big.length ? mb(rss) : "–"} | ${
      verdict(big.length ? rss <= 80 * 2 ** 20 : undefined)
    } |`,
  );
  const starts = results.flatMap((s) => s.startup?.runs ?? []);
  const start = median(starts.map((r) => r.firstRequestMs));
  rows.push(
    `| start → first API request ≤ 200 ms (bundle, warm; median of the probes) | ${ms(start)} | ${
      verdict(starts.length ? start <= 200 : undefined)
    } |`,
  );
  const statusMs = big.flatMap((r) => [...(r.status?.during ?? []), ...(r.status?.after ?? [])])
    .map((x) => x.ms);
  const slowest = Math.max(...statusMs);
  rows.push(
    `| \`status\` of the N=10000 run answers in < 5 s (slowest, during and after) | ${
      statusMs.length ? ms(slowest) + " ms" : "–"
    } | ${verdict(statusMs.length ? slowest < 5000 : undefined)} |`,
  );
  const writes = results.flatMap((s) => s.runs).flatMap((r) =>
    r.recordWrites ? [r.recordWrites] : []
  );
  const most = Math.max(...writes.map((w) => w.maxPer10s));
  const paced = Math.max(...writes.map((w) => w.maxPer10sBeforeLast ?? w.maxPer10s));
  rows.push(
    `| run record: at most one write per 10 s (most in any 10 s, every run; without the closing write) | ${
      writes.length ? `${most} (${paced})` : "–"
    } | ${
      most > 1 && paced <= 1
        ? "holds but for the closing write, sent at once by design"
        : verdict(writes.length ? most <= 1 : undefined)
    } |`,
  );
  const done = big.filter((r) => r.exitCode === 0 && !r.timedOut);
  rows.push(
    `| a 10,000-node rollout completes on this machine | ${
      big.length ? `${done.length} of ${big.length} runs` : "–"
    } | ${verdict(big.length ? done.length === big.length : undefined)} |`,
  );
  return `| target | measured | verdict |\n|---|---:|---|\n${rows.join("\n")}`;
}

/** Renders `bench/results.md` from every scenario's results. */
export function resultsMarkdown(
  results: ScenarioResult[],
  svgName: string,
  probes?: string,
): string {
  const sorted = [...results].sort((a, b) =>
    a.scenario.n - b.scenario.n || a.scenario.p - b.scenario.p || a.scenario.d - b.scenario.d
  );
  const summary = sorted.flatMap((s) => s.runs.map((r) => summaryRow(s, r)));
  return `# Benchmark results

Made by \`deno task bench\` (bench/bench.ts); each scenario's section names the
exact command, the machine and the versions. Every run selects all N kwok
nodes of a real control plane (e2e/cluster.ts), creates one Job per node
with pods that run D seconds, and is measured from outside the dispatcher:
its requests from kube-apiserver's audit log (its own ServiceAccount),
everyone's from \`apiserver_request_total\`, Jobs from an independent watch,
RSS and CPU from /proc. Watch mode is the default; poll mode is
\`--poll-only --poll-interval-secs 5\`. Benchmark figures, never test gates.

## Targets

${targets(sorted)}

## Summary

| N | P | D s | mode | makespan s | ideal s | ratio | req/node | req/node w/o Events, marks | refill p50 / p99 ms | peak RSS MB | CPU s | list nodes ms | start → 1st request ms |
|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${summary.join("\n")}

Jobs in flight over time, N=1000: [${svgName}](${svgName})

## Scenarios

${sorted.map(scenarioTable).join("\n")}${
    probes ? `\n## Probes without a control plane\n\n${probes.trim()}\n` : ""
  }`;
}

const COLORS: Record<Mode, string> = { watch: "#1f77b4", poll: "#d62728" };

/**
 * An SVG with one panel per scenario: Jobs in flight against seconds since
 * the dispatcher started, one line per mode.
 */
export function inflightSvg(results: ScenarioResult[]): string {
  const width = 760, panelH = 220, left = 56, right = 16, top = 34, bottom = 40;
  const panels = results.map((s, i) => {
    const y0 = i * (panelH + top + bottom);
    const ideal = s.runs[0]?.idealSeconds ?? 0;
    const maxX = Math.max(...s.runs.map((r) => r.series.at(-1)?.[0] ?? 0), ideal, 1);
    const maxY = Math.max(s.scenario.p, ...s.runs.flatMap((r) => r.series.map((p) => p[1])));
    const w = width - left - right;
    const x = (t: number) => left + (t / maxX) * w;
    const y = (c: number) => y0 + top + panelH - (c / maxY) * panelH;
    const xTicks = niceTicks(maxX).map((t) =>
      `<line x1="${x(t)}" y1="${y(0)}" x2="${x(t)}" y2="${y(0) + 4}" stroke="#333"/>` +
      `<text x="${x(t)}" y="${y(0) + 16}" text-anchor="middle">${t}</text>`
    );
    const yTicks = niceTicks(maxY).map((c) =>
      `<line x1="${left - 4}" y1="${y(c)}" x2="${width - right}" y2="${y(c)}" stroke="#eee"/>` +
      `<text x="${left - 7}" y="${y(c) + 4}" text-anchor="end">${c}</text>`
    );
    const lines = s.runs.map((r) => {
      const pts: string[] = [];
      let prev = 0;
      for (const [t, c] of r.series) {
        pts.push(
          `${x(t).toFixed(1)},${y(prev).toFixed(1)}`,
          `${x(t).toFixed(1)},${y(c).toFixed(1)}`,
        );
        prev = c;
      }
      return `<polyline fill="none" stroke="${COLORS[r.mode]}" stroke-width="1.2" points="${
        pts.join(" ")
      }"/>`;
    });
    const legend = s.runs.map((r, k) =>
      `<rect x="${width - right - 250 + k * 125}" y="${y0 + 10}" width="12" height="3" fill="${
        COLORS[r.mode]
      }"/><text x="${width - right - 234 + k * 125}" y="${y0 + 15}">${r.mode} (${
        f(r.wallSeconds)
      } s)</text>`
    );
    return `<g>
<text x="${left}" y="${y0 + 16}" font-weight="bold">${name(s.scenario)}: Jobs in flight (ideal ${
      s.runs[0]?.idealSeconds ?? "?"
    } s)</text>
${yTicks.join("\n")}
<line x1="${left}" y1="${y(0)}" x2="${width - right}" y2="${y(0)}" stroke="#333"/>
<line x1="${left}" y1="${y(maxY)}" x2="${left}" y2="${y(0)}" stroke="#333"/>
${xTicks.join("\n")}
<text x="${left + w / 2}" y="${
      y(0) + 32
    }" text-anchor="middle">seconds since the dispatcher started</text>
<polyline fill="none" stroke="#888" stroke-dasharray="4 3" points="${x(0)},${y(s.scenario.p)} ${
      x(ideal)
    },${y(s.scenario.p)} ${x(ideal)},${y(0)}"/>
<text x="${x(ideal) + 3}" y="${y(s.scenario.p) - 4}" fill="#666">ideal</text>
${lines.join("\n")}
${legend.join("\n")}
</g>`;
  });
  const height = Math.max(1, results.length) * (panelH + top + bottom);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
${panels.join("\n")}
</svg>
`;
}

function niceTicks(max: number): number[] {
  const raw = max / 6;
  const mag = 10 ** Math.floor(Math.log10(raw || 1));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = 0; t <= max + 1e-9; t += step) out.push(Math.round(t * 1000) / 1000);
  return out;
}

/** Keeps at most `max` points of a step series, always its changes of direction at the ends. */
export function thin(series: [number, number][], max = 1500): [number, number][] {
  if (series.length <= max) return series;
  const every = Math.ceil(series.length / max);
  return series.filter((_, i) => i % every === 0 || i === series.length - 1);
}
