/**
 * The transport floor: the fewest CPU seconds a Deno process can spend on
 * the API traffic one dispatcher run makes, with none of its logic. It
 * makes the same requests (one paginated node LIST, a Job LIST, a watch on
 * nodes and one on the run's Jobs, and per node: the Job, an Event, a node
 * label PATCH) over the same transport (`fetch`, HTTP/1.1, TLS, bearer
 * token) and decodes the same watch events, but keeps no state beyond
 * which Jobs finished, writes no record, logs nothing, limits no rate.
 *
 * Run it where `deno task bench` runs the dispatcher (same cluster, same
 * arguments, same V8 flags): bundle it and name the bundle in
 * `JOB_DISPATCHER_ENTRY`. `status` and `--dry-run` calls (the bench's
 * probes) exit at once. Not shipped; a measuring tool only.
 *
 * ```sh
 * deno bundle bench/_floor.ts -o /tmp/floor.js
 * JOB_DISPATCHER_ENTRY=/tmp/floor.js BENCH_PROFILE=full BENCH_N=1000 BENCH_P=100 \
 *   BENCH_D=10 BENCH_MODES=watch deno task bench
 * ```
 *
 * @module
 */

import { parse } from "yaml";

interface Kubeconfig {
  clusters: { cluster: { server: string; "certificate-authority-data"?: string } }[];
  users: { user: { token?: string } }[];
}

const args = Deno.args;
if (args[0] === "status") {
  console.log("{}");
  Deno.exit(0);
}
if (args.some((a) => a.startsWith("--dry-run"))) Deno.exit(0);
const flag = (name: string) => args[args.indexOf(name) + 1];
const namespace = flag("--namespace");
const parallelism = Number(flag("--parallelism"));
const template = Deno.readTextFileSync(flag("--job-template"));
const duration = /duration: "([0-9]+s)"/.exec(template)![1];
const kc = parse(Deno.readTextFileSync(flag("--kubeconfig"))) as Kubeconfig;
const server = kc.clusters[0].cluster.server;
const ca = kc.clusters[0].cluster["certificate-authority-data"];
const client = Deno.createHttpClient({
  caCerts: ca ? [atob(ca)] : undefined,
  http1: true,
  http2: false,
} as Deno.CreateHttpClientOptions);
const headers = {
  authorization: `Bearer ${kc.users[0].user.token}`,
  accept: "application/json",
  "content-type": "application/json",
};
const LABEL = "floor.job-dispatcher.io/owner";
// Watch events and Jobs as JSON.parse leaves them: the floor reads three fields.
// deno-lint-ignore no-explicit-any
type Json = any;

async function call(method: string, path: string, body?: unknown, type?: string) {
  const res = await fetch(server + path, {
    method,
    client,
    headers: type ? { ...headers, "content-type": type } : headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${out.message}`);
  return out;
}

async function listNodes(): Promise<{ names: string[]; rv: string }> {
  const names: string[] = [];
  let cont = "";
  let rv = "";
  do {
    const page = await call("GET", `/api/v1/nodes?limit=500${cont ? `&continue=${cont}` : ""}`);
    for (const n of page.items) names.push(n.metadata.name);
    cont = page.metadata.continue ?? "";
    rv = page.metadata.resourceVersion;
  } while (cont);
  return { names, rv };
}

async function watch(path: string, rv: string, onEvent: (e: Json) => void, stop: AbortSignal) {
  while (!stop.aborted) {
    const sep = path.includes("?") ? "&" : "?";
    const url = `${path}${sep}watch=1&allowWatchBookmarks=true&timeoutSeconds=30` +
      `&resourceVersion=${rv}`;
    const res = await fetch(server + url, { client, headers, signal: stop }).catch(() => null);
    if (!res?.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      while (true) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (!line.trim()) continue;
          const e = JSON.parse(line);
          rv = e.object?.metadata?.resourceVersion ?? rv;
          if (e.type !== "BOOKMARK") onEvent(e);
        }
      }
    } catch {
      if (stop.aborted) return;
    }
  }
}

function jobOf(node: string) {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: `bench-${node}`, labels: { [LABEL]: "bench" } },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: {
          annotations: {
            "e2e.job-dispatcher.io/duration": duration,
            "e2e.job-dispatcher.io/outcome": "succeed",
          },
        },
        spec: {
          restartPolicy: "Never",
          nodeName: node,
          containers: [{ name: "work", image: "registry.invalid/work:1", command: ["/bin/true"] }],
        },
      },
    },
  };
}

const { names, rv: nodesRv } = await listNodes();
const jobsPath = `/apis/batch/v1/namespaces/${namespace}/jobs`;
const jobsList = await call("GET", `${jobsPath}?labelSelector=${LABEL}`);
const stop = new AbortController();
const queue = [...names];
const finished = new Set<string>();
let inFlight = 0;
let written = 0;
let allDone: () => void;
const done = new Promise<void>((r) => (allDone = r));

function fill() {
  while (inFlight < parallelism && queue.length) {
    const node = queue.shift()!;
    inFlight++;
    call("POST", jobsPath, jobOf(node)).catch((e) => console.error(e.message));
  }
}

async function onFinished(job: Json) {
  // The slot is refilled at once, as the dispatcher does; the writes follow.
  inFlight--;
  fill();
  const node = job.spec.template.spec.nodeName;
  const at = new Date().toISOString();
  await Promise.all([
    // Node Events go to "default", as report/report.ts writes them.
    call("POST", `/api/v1/namespaces/default/events`, {
      metadata: { generateName: `${job.metadata.name}.` },
      involvedObject: { kind: "Node", name: node, apiVersion: "v1" },
      reason: "Succeeded",
      message: `Job ${job.metadata.name} succeeded`,
      type: "Normal",
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
      source: { component: "floor" },
    }),
    call("PATCH", `/api/v1/nodes/${node}`, {
      metadata: { labels: { "floor.job-dispatcher.io/state": "done" } },
    }, "application/merge-patch+json"),
  ]).catch((e) => console.error(e.message));
  if (++written === names.length) allDone();
}

const watches = [
  watch("/api/v1/nodes", nodesRv, () => {}, stop.signal),
  watch(`${jobsPath}?labelSelector=${LABEL}`, jobsList.metadata.resourceVersion, (e) => {
    const job = e.object;
    const over = job.status?.conditions?.some((c: Json) =>
      (c.type === "Complete" || c.type === "Failed") && c.status === "True"
    );
    if (!over || finished.has(job.metadata.name)) return;
    finished.add(job.metadata.name);
    onFinished(job).catch((err) => console.error(err.message));
  }, stop.signal),
];
fill();
await done;
stop.abort();
await Promise.allSettled(watches);
console.error(`floor: ${finished.size} Jobs finished`);
Deno.exit(0);
