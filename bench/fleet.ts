/**
 * `deno task bench:fleet`: what a fleet rollout costs per node, against a
 * single-cluster run. It starts K stand-in API servers (bench/_fake_apiserver.ts,
 * one per cluster, N kwok-shaped nodes each, Jobs that finish after
 * `--job-ms`), runs `job-dispatcher fleet` over them in one process (one
 * stage of K clusters, all at once), then `job-dispatcher` alone against one
 * server of N nodes; it samples each process's peak RSS and CPU time from
 * /proc and counts the requests the servers answered. Per node, the fleet is
 * to cost no more than 1.2 x the single run's CPU and requests.
 *
 * ```sh
 * deno task bench:fleet                              # K=10, N=1000, P=100, Jobs of 2 s
 * deno task bench:fleet --clusters 3 --nodes 500
 * JOB_DISPATCHER_ENTRY=main.ts deno task bench:fleet
 * ```
 *
 * It never gates on anything: the numbers go to the README by hand.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { dispatcherCommand } from "../e2e/_dispatcher.ts";
import { FakeApiServer } from "./_fake_apiserver.ts";
import { ProcSampler, stageEntry } from "./_measure.ts";

const MB = 2 ** 20;

const JOB = `apiVersion: batch/v1
kind: Job
metadata: {name: fleet}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: registry.invalid/work:1, command: ["/bin/true"]}]
`;

/** One kubeconfig with a context `cN` per server. */
function kubeconfig(servers: FakeApiServer[]): string {
  const names = servers.map((_, i) => `c${i}`);
  return `apiVersion: v1
kind: Config
clusters: [${
    servers.map((s, i) =>
      `{name: ${names[i]}, cluster: {server: "${s.url}", insecure-skip-tls-verify: true}}`
    )
      .join(", ")
  }]
users: [{name: fake, user: {token: fake-token}}]
contexts: [${
    names.map((n) => `{name: ${n}, context: {cluster: ${n}, user: fake, namespace: bench}}`).join(
      ", ",
    )
  }]
current-context: c0
`;
}

/** What one measured process did. */
interface Measured {
  code: number;
  seconds: number;
  peakRssBytes: number;
  cpuSeconds: number;
  requests: number;
  created: number;
  tail: string[];
}

/** Runs the dispatcher with `args` in `dir` against `servers`, measured. */
async function measured(dir: string, args: string[], servers: FakeApiServer[]): Promise<Measured> {
  const [cmd, ...rest] = dispatcherCommand();
  const before = servers.map((s) => Object.values(s.stats.requests).reduce((a, b) => a + b, 0));
  const started = Date.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: [cmd, ...rest, ...args],
    cwd: dir,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const sampler = new ProcSampler(child.pid, 50);
  const tail: string[] = [];
  for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
    tail.push(...chunk.split("\n").filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 8));
  }
  const status = await child.status;
  sampler.stop();
  const requests = servers.reduce(
    (sum, s, i) => sum + Object.values(s.stats.requests).reduce((a, b) => a + b, 0) - before[i],
    0,
  );
  return {
    code: status.code,
    seconds: (Date.now() - started) / 1000,
    peakRssBytes: sampler.peakRssBytes,
    cpuSeconds: sampler.cpuSeconds,
    requests,
    created: servers.reduce((sum, s) => sum + s.stats.created, 0),
    tail,
  };
}

/** One line of a measured run, per node. */
function describe(what: string, m: Measured, nodes: number): string {
  return `${what}: exit ${m.code} in ${m.seconds.toFixed(1)} s, ${m.created} Jobs; peak RSS ${
    (m.peakRssBytes / MB).toFixed(1)
  } MB (${(m.peakRssBytes / nodes / 1024).toFixed(1)} kB/node); CPU ${m.cpuSeconds.toFixed(2)} s (${
    (m.cpuSeconds * 1000 / nodes).toFixed(2)
  } ms/node); ${m.requests} requests (${(m.requests / nodes).toFixed(2)}/node)`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      clusters: { type: "string", default: "10" },
      nodes: { type: "string", default: "1000" },
      parallelism: { type: "string", default: "100" },
      "job-ms": { type: "string", default: "2000" },
    },
  });
  const k = Number(values.clusters);
  const n = Number(values.nodes);
  const jobMs = Number(values["job-ms"]);
  const dir = await Deno.makeTempDir({ prefix: "job-dispatcher-fleet-" });
  await stageEntry(dir, console.error);
  await Deno.writeTextFile(`${dir}/job.yaml`, JOB);
  const run = ["--job-template", "job.yaml", "--parallelism", values.parallelism!];
  const load = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(
    `K=${k} clusters x N=${n} nodes, P=${values.parallelism}, Jobs of ${jobMs} ms; ` +
      `load ${load()} on ${navigator.hardwareConcurrency} CPUs`,
  );

  const fleetServers = Array.from({ length: k }, () => new FakeApiServer({ nodes: n, jobMs }));
  await Deno.writeTextFile(`${dir}/fleet.kubeconfig`, kubeconfig(fleetServers));
  await Deno.writeTextFile(
    `${dir}/FLEET.yaml`,
    `stages: [{name: all, clusters: [${fleetServers.map((_, i) => `c${i}`).join(", ")}]}]\n`,
  );
  const fleet = await measured(
    dir,
    ["fleet", "-f", "FLEET.yaml", ...run, "--kubeconfig", "fleet.kubeconfig"],
    fleetServers,
  );
  await Promise.all(fleetServers.map((s) => s.close()));
  console.log(describe(`fleet of ${k} x ${n}`, fleet, k * n));
  if (fleet.code !== 0) console.log(`log tail:\n${fleet.tail.join("\n")}`);

  const single = new FakeApiServer({ nodes: n, jobMs });
  await Deno.writeTextFile(`${dir}/one.kubeconfig`, kubeconfig([single]));
  const one = await measured(dir, [...run, "--kubeconfig", "one.kubeconfig"], [single]);
  await single.close();
  console.log(describe(`single cluster of ${n}`, one, n));
  if (one.code !== 0) console.log(`log tail:\n${one.tail.join("\n")}`);

  const ratio = (a: number, b: number) => (a / (k * n)) / (b / n);
  console.log(
    `per node, fleet / single: CPU ${ratio(fleet.cpuSeconds, one.cpuSeconds).toFixed(2)} x, ` +
      `requests ${ratio(fleet.requests, one.requests).toFixed(2)} x, peak RSS ${
        ratio(fleet.peakRssBytes, one.peakRssBytes).toFixed(2)
      } x (acceptance: CPU and requests at most 1.2 x); load ${load()}`,
  );
  await Deno.remove(dir, { recursive: true });
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`bench:fleet: ${(e as Error).stack}`);
    Deno.exit(1);
  }
}
