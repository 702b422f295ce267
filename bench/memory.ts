/**
 * `deno task bench:memory`: what holds the dispatcher's memory at fleet
 * scale, without a control plane. It runs the bundle (with the `dispatch`
 * task's permissions and V8 flags) against a stand-in API server
 * (bench/_fake_apiserver.ts: N kwok-shaped nodes, Jobs that finish after
 * `--job-ms`), samples RSS from /proc, and, with `--snapshot`, connects to
 * the dispatcher's inspector, samples `Deno.memoryUsage()` and takes one V8
 * heap snapshot when a fraction of the Jobs has been created, then prints the
 * heap by constructor and the largest retainers (dominator tree).
 *
 * ```sh
 * deno task bench:memory                              # N=10000, P=100: peak RSS, no inspector
 * deno task bench:memory --snapshot --at 0.5          # and a heap snapshot half-way
 * deno task bench:memory --nodes 1000 --snapshot
 * deno task bench:memory --nodes 1000 --job-ms 10000 --cpu-prof /tmp/prof   # and a V8 CPU profile
 * JOB_DISPATCHER_ENTRY=main.ts deno task bench:memory
 * deno task bench:memory --nodes 65000 --arg=--kube-api-qps=0   # the largest GKE cluster
 * deno task bench:memory --nodes 65000 --arg=--kube-api-qps=0 --status   # and status, the timeline
 * ```
 *
 * The inspector and the snapshot themselves cost memory: peak RSS is the
 * figure of a run without `--snapshot`. It never gates on anything.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { dispatcherCommand } from "../e2e/_dispatcher.ts";
import { FakeApiServer } from "./_fake_apiserver.ts";
import { imageEnv, ProcSampler, stageEntry } from "./_measure.ts";
import { StatusProbe, type StatusSample } from "./_status_probe.ts";
import { ensureChromium, openPage } from "../e2e/_chromium.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const MB = 2 ** 20;

/** A minimal Chrome DevTools Protocol client over the inspector's WebSocket. */
class Cdp {
  #ws: WebSocket;
  #id = 0;
  #pending = new Map<number, (r: { result?: unknown; error?: { message: string } }) => void>();
  #listeners = new Map<string, (params: Record<string, unknown>) => void>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (e) => {
      const msg = JSON.parse(e.data);
      if (msg.id !== undefined) {
        this.#pending.get(msg.id)?.(msg);
        this.#pending.delete(msg.id);
      } else this.#listeners.get(msg.method)?.(msg.params);
    };
  }

  static connect(url: string): Promise<Cdp> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.onopen = () => resolve(new Cdp(ws));
      ws.onerror = (e) => reject(new Error(`Cannot connect to the inspector ${url}: ${e}`));
    });
  }

  on(method: string, fn: (params: Record<string, unknown>) => void): void {
    this.#listeners.set(method, fn);
  }

  send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#id;
    return new Promise((resolve, reject) => {
      this.#pending.set(
        id,
        (r) => (r.error ? reject(new Error(r.error.message)) : resolve(r.result as T)),
      );
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  close(): void {
    this.#ws.close();
  }
}

/** A parsed V8 heap snapshot: the flat arrays and their field layout. */
interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[]];
      edge_fields: string[];
      edge_types: [string[]];
    };
    node_count: number;
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** One line of the heap by constructor, or one retainer. */
interface Row {
  what: string;
  count?: number;
  selfBytes: number;
  retainedBytes?: number;
  path?: string;
}

/**
 * The heap by constructor (self sizes) and the largest retainers (retained
 * sizes from the dominator tree, Cooper–Harvey–Kennedy), with the chain of
 * dominators that holds each.
 */
function analyse(
  s: Snapshot,
  top = 20,
): { total: number; byClass: Row[]; byOwner: Row[]; retainers: Row[] } {
  const { meta } = s.snapshot;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const nTypes = meta.node_types[0];
  const eTypes = meta.edge_types[0];
  const [iType, iName, iSelf, iEdges] = ["type", "name", "self_size", "edge_count"].map((f) =>
    meta.node_fields.indexOf(f)
  );
  const [jType, jTo] = ["type", "to_node"].map((f) => meta.edge_fields.indexOf(f));
  const weak = eTypes.indexOf("weak");
  const n = s.nodes.length / nf;
  const self = new Float64Array(n);
  const firstEdge = new Uint32Array(n + 1);
  for (let i = 0, e = 0; i < n; i++) {
    self[i] = s.nodes[i * nf + iSelf];
    firstEdge[i] = e;
    e += s.nodes[i * nf + iEdges];
    firstEdge[i + 1] = e;
  }
  const label_ = (i: number) => {
    const type = nTypes[s.nodes[i * nf + iType]];
    const name = s.strings[s.nodes[i * nf + iName]];
    if (type === "object" || type === "native") return name.split(" ")[0] || `(${type})`;
    if (type === "string" || type === "concatenated string" || type === "sliced string") {
      return "(string)";
    }
    if (type === "closure") return `(closure ${name || "anonymous"})`;
    if (type === "array") return `(array ${name})`;
    return `(${type}${name && type !== "code" ? ` ${name.slice(0, 40)}` : ""})`;
  };
  const succ = (i: number, fn: (j: number) => void) => {
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e++) {
      if (s.edges[e * ef + jType] === weak) continue;
      fn(s.edges[e * ef + jTo] / nf);
    }
  };
  // Dominators by Lengauer–Tarjan (the simple version, with path
  // compression), in DFS preorder numbers: V8 heaps have long chains on which
  // the iterative algorithm needs hundreds of passes.
  const dfn = new Int32Array(n).fill(-1);
  const vertex: number[] = [];
  const parent: number[] = [];
  const stack: [number, number][] = [[0, firstEdge[0]]];
  dfn[0] = 0;
  vertex.push(0);
  parent.push(0);
  while (stack.length) {
    const top = stack[stack.length - 1];
    const v = top[0];
    if (top[1] >= firstEdge[v + 1]) {
      stack.pop();
      continue;
    }
    const e = top[1]++;
    if (s.edges[e * ef + jType] === weak) continue;
    const w = s.edges[e * ef + jTo] / nf;
    if (dfn[w] !== -1) continue;
    dfn[w] = vertex.length;
    vertex.push(w);
    parent.push(dfn[v]);
    stack.push([w, firstEdge[w]]);
  }
  const m = vertex.length;
  const preds: number[][] = Array.from({ length: m }, () => []);
  for (let d = 0; d < m; d++) succ(vertex[d], (w) => dfn[w] >= 0 && preds[dfn[w]].push(d));
  const semi = Int32Array.from({ length: m }, (_, i) => i);
  const label = Int32Array.from({ length: m }, (_, i) => i);
  const ancestor = new Int32Array(m).fill(-1);
  const idom = new Int32Array(m);
  const bucket: number[][] = Array.from({ length: m }, () => []);
  const evaluate = (v: number) => {
    if (ancestor[v] === -1) return v;
    const path: number[] = [];
    for (let u = v; ancestor[ancestor[u]] !== -1; u = ancestor[u]) path.push(u);
    for (let i = path.length - 1; i >= 0; i--) {
      const x = path[i];
      const a = ancestor[x];
      if (semi[label[a]] < semi[label[x]]) label[x] = label[a];
      ancestor[x] = ancestor[a];
    }
    return label[v];
  };
  for (let w = m - 1; w > 0; w--) {
    for (const v of preds[w]) {
      const u = evaluate(v);
      if (semi[u] < semi[w]) semi[w] = semi[u];
    }
    bucket[semi[w]].push(w);
    const p = parent[w];
    ancestor[w] = p;
    for (const v of bucket[p]) {
      const u = evaluate(v);
      idom[v] = semi[u] < semi[v] ? u : p;
    }
    bucket[p] = [];
  }
  for (let w = 1; w < m; w++) if (idom[w] !== semi[w]) idom[w] = idom[idom[w]];
  const retained = Float64Array.from(vertex, (v) => self[v]);
  for (let d = m - 1; d > 0; d--) retained[idom[d]] += retained[d];
  const total = retained[0];
  const classes = new Map<string, { count: number; self: number }>();
  for (const v of vertex) {
    const c = classes.get(label_(v)) ?? { count: 0, self: 0 };
    c.count++;
    c.self += self[v];
    classes.set(label_(v), c);
  }
  const byClass = [...classes].map(([what, c]) => ({ what, count: c.count, selfBytes: c.self }))
    .sort((a, b) => b.selfBytes - a.selfBytes).slice(0, top);
  // Synthetic roots ((GC roots), (Handle scope), …) retain everything below them.
  const synthetic = nTypes.indexOf("synthetic");
  // Held directly by a GC root (or the root): who owns the heap, grouped by constructor.
  const owners = new Map<string, { count: number; retained: number }>();
  const isRoot = (d: number) => d === 0 || s.nodes[vertex[d] * nf + iType] === synthetic;
  for (let d = 1; d < m; d++) {
    if (isRoot(d) || !isRoot(idom[d])) continue;
    const o = owners.get(label_(vertex[d])) ?? { count: 0, retained: 0 };
    o.count++;
    o.retained += retained[d];
    owners.set(label_(vertex[d]), o);
  }
  const byOwner = [...owners].map(([what, o]) => ({
    what,
    count: o.count,
    selfBytes: 0,
    retainedBytes: o.retained,
  })).sort((a, b) => b.retainedBytes - a.retainedBytes).slice(0, top);
  const candidates = [...Array(m).keys()]
    .filter((d) => d !== 0 && s.nodes[vertex[d] * nf + iType] !== synthetic)
    .sort((a, b) => retained[b] - retained[a]);
  const id = meta.node_fields.indexOf("id");
  const retainers: Row[] = [];
  for (const d of candidates.slice(0, top)) {
    const chain: string[] = [];
    for (let x = idom[d], k = 0; x > 0 && k < 4; x = idom[x], k++) chain.push(label_(vertex[x]));
    retainers.push({
      what: `${label_(vertex[d])} @${s.nodes[vertex[d] * nf + id]}`,
      selfBytes: self[vertex[d]],
      retainedBytes: retained[d],
      path: chain.join(" ← "),
    });
  }
  return { total, byClass, byOwner, retainers };
}

function printAnalysis(a: ReturnType<typeof analyse>): void {
  console.log(`\nreachable from the roots: ${mb(a.total)} MB; by constructor (self size, count):`);
  for (const r of a.byClass) {
    console.log(`  ${mb(r.selfBytes).padStart(7)} MB  ${String(r.count).padStart(8)}  ${r.what}`);
  }
  console.log("\nheld directly by a GC root, by constructor (retained size, count):");
  for (const r of a.byOwner) {
    console.log(
      `  ${mb(r.retainedBytes!).padStart(7)} MB  ${String(r.count).padStart(8)}  ${r.what}`,
    );
  }
  console.log("\nlargest retainers (retained size; held by ← …):");
  for (const r of a.retainers) {
    console.log(`  ${mb(r.retainedBytes!).padStart(7)} MB  ${r.what}  ← ${r.path}`);
  }
}

/**
 * After the run, against the stand-in server still up: `status` of the
 * finished run as a user runs it (a fresh process; text, then -o json), and
 * the run's HTML timeline: its size, and what headless Chromium makes of it.
 */
async function statusAndTimeline(dir: string, n: number): Promise<string> {
  const probe = new StatusProbe(
    dispatcherCommand(),
    ["-n", "mem", "--name-prefix", "mem", "--kubeconfig", "kubeconfig"],
    { cwd: dir, t0: Date.now(), everyMs: 1e9 },
  );
  const line = (s: StatusSample) =>
    `status${s.output === "json" ? " -o json" : ""}: exit ${s.exitCode} in ${
      (s.ms / 1000).toFixed(1)
    } s (CPU ${s.cpuSeconds.toFixed(2)} s, peak RSS ${mb(s.peakRssBytes)} MB), ` +
    `${(s.stdoutBytes / 1024).toFixed(1)} kB out${
      s.total !== undefined ? `, ${s.total} nodes` : ""
    }` +
    `${s.stderr ? `; stderr: ${s.stderr.split("\n")[0]}` : ""}`;
  const out = [line(await probe.sample("text"))];
  out.push(
    line(await probe.sample("json").catch((e) => ({ ...JSON.parse("{}"), stderr: String(e) }))),
  );
  const html = `${dir}/timeline.html`;
  const size = await Deno.stat(html).then((s) => s.size, () => undefined);
  if (size === undefined) return [...out, "timeline: not written"].join("\n");
  const bin = await ensureChromium();
  let page = "Chromium not available";
  if (bin) {
    const opened = Date.now();
    const p = await openPage(
      bin,
      html,
      "({ rows: document.body.dataset.rows, drawn: document.body.dataset.drawn })",
    );
    page = `Chromium opened it in ${((Date.now() - opened) / 1000).toFixed(1)} s: ` +
      `${JSON.stringify(p.value)}, ${p.errors.length} errors${
        p.errors.length ? ` (${p.errors[0]})` : ""
      }, ${p.requests.length} requests`;
  }
  out.push(`timeline: ${mb(size)} MB for ${n} nodes; ${page}`);
  return out.join("\n");
}

function mb(bytes: number): string {
  return (bytes / MB).toFixed(1);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      nodes: { type: "string", default: "10000" },
      parallelism: { type: "string", default: "100" },
      "job-ms": { type: "string", default: "200" },
      snapshot: { type: "boolean", default: false },
      at: { type: "string", default: "0.5" },
      top: { type: "string", default: "20" },
      save: { type: "string" },
      analyse: { type: "string" },
      "cpu-prof": { type: "string" },
      // The chart's metrics endpoint: on by default here, as in every
      // always-on feature's figure (issue 29); `--no-metrics` to leave it out.
      "no-metrics": { type: "boolean", default: false },
      // More dispatcher flags, e.g. `--arg=--kube-api-qps=0`: at 65,000 nodes
      // the default 50 requests a second alone takes over an hour.
      arg: { type: "string", multiple: true, default: [] },
      // The run writes its HTML timeline (`--report-format html`); after its
      // end, `status` (text, then -o json) is timed against the stand-in
      // server and the timeline opened in headless Chromium. Not a gate.
      status: { type: "boolean", default: false },
      // More V8 flags beside the dispatch task's, e.g. `--v8=--trace-gc`
      // (comma-joined into its one --v8-flags).
      v8: { type: "string", multiple: true, default: [] },
      // Keeps the dispatcher's whole stderr (its log, V8's traces) in a file.
      log: { type: "string" },
    },
  });
  if (values.analyse) {
    const a = analyse(JSON.parse(await Deno.readTextFile(values.analyse)), Number(values.top));
    printAnalysis(a);
    return;
  }
  const n = Number(values.nodes);
  const dir = await Deno.makeTempDir({ prefix: "job-dispatcher-memory-" });
  const entry = await stageEntry(dir, console.error);

  let snapshotTaken: Promise<void> | undefined;
  let cdp: Cdp | undefined;
  let analysis: ReturnType<typeof analyse> | undefined;
  // Analysed after the run: the stand-in API server shares this process's event loop.
  let snapshotText: string | undefined;
  let heapAtSnapshot: Record<string, number> | undefined;
  const takeSnapshot = async () => {
    const chunks: string[] = [];
    cdp!.on("HeapProfiler.addHeapSnapshotChunk", (p) => chunks.push(p.chunk as string));
    heapAtSnapshot = JSON.parse(
      (await cdp!.send<{ result: { value: string } }>("Runtime.evaluate", {
        expression: "JSON.stringify(Deno.memoryUsage())",
      })).result.value,
    );
    const started = Date.now();
    await cdp!.send("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
    const text = chunks.join("");
    console.error(
      `heap snapshot: ${mb(text.length)} MB of JSON in ${
        ((Date.now() - started) / 1000).toFixed(1)
      } s`,
    );
    snapshotText = text;
  };
  const server = new FakeApiServer({
    nodes: n,
    jobMs: Number(values["job-ms"]),
    onCreate: (created) => {
      if (cdp && !snapshotTaken && created >= n * Number(values.at)) snapshotTaken = takeSnapshot();
    },
  });
  await Deno.writeTextFile(
    `${dir}/kubeconfig`,
    `apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "${server.url}", insecure-skip-tls-verify: true}}]
users: [{name: fake, user: {token: fake-token}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: mem}}]
current-context: fake
`,
  );
  await Deno.writeTextFile(
    `${dir}/job.yaml`,
    `apiVersion: batch/v1
kind: Job
metadata: {name: mem}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: registry.invalid/work:1, command: ["/bin/true"]}]
`,
  );
  const [cmd, ...rest] = dispatcherCommand().map((w) =>
    w.startsWith("--v8-flags=") && values.v8!.length ? [w, ...values.v8!].join(",") : w
  );
  const port = 9300 + Math.floor(Math.random() * 500);
  const inspect = values.snapshot ? [`--inspect=127.0.0.1:${port}`] : [];
  // Deno writes the profile (a .cpuprofile for Chrome DevTools) when the process exits.
  if (values["cpu-prof"]) inspect.push("--cpu-prof", `--cpu-prof-dir=${values["cpu-prof"]}`);
  const args = [
    cmd,
    ...inspect,
    ...rest,
    "--job-template",
    "job.yaml",
    "--parallelism",
    values.parallelism!,
    "--kubeconfig",
    "kubeconfig",
    ...(values["no-metrics"] ? [] : ["--metrics-addr", `127.0.0.1:${port + 500}`]),
    ...values.arg!,
    ...(values.status ? ["--report", "timeline.html", "--report-format", "html"] : []),
  ];
  const load = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  const loadBefore = load();
  const spawnAt = Date.now();
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd: dir,
    env: { ...imageEnv(), NO_COLOR: "1" },
    stdin: "null",
    // V8's traces (--v8=--trace-gc) go to stdout.
    stdout: values.log ? "piped" : "null",
    stderr: "piped",
  }).spawn();
  const stdoutSaved = values.log
    ? child.stdout.pipeTo((await Deno.create(`${values.log}.stdout`)).writable)
    : undefined;
  const sampler = new ProcSampler(child.pid, 50);
  const usage: {
    at: number;
    heapUsed: number;
    heapTotal: number;
    rss: number;
    external: number;
  }[] = [];
  let sampling: ReturnType<typeof setInterval> | undefined;
  const tail: string[] = [];
  const log = values.log
    ? await Deno.open(values.log, { write: true, create: true, truncate: true })
    : undefined;
  const attach = async () => {
    // `--quiet` hides the inspector's address; its /json/list names the WebSocket.
    for (let i = 0; i < 100 && !cdp; i++) {
      try {
        const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
        cdp = await Cdp.connect(list[0].webSocketDebuggerUrl);
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    sampling = setInterval(async () => {
      // A process started with --inspect waits at its end for the debugger to
      // leave: leave once every Job has finished and the snapshot is in.
      if (server.stats.finished >= n && (!snapshotTaken || snapshotText)) {
        clearInterval(sampling);
        cdp?.close();
        return;
      }
      try {
        const r = await cdp!.send<{ result: { value: string } }>("Runtime.evaluate", {
          expression: "JSON.stringify(Deno.memoryUsage())",
        });
        usage.push({ at: Date.now() - spawnAt, ...JSON.parse(r.result.value) });
      } catch {
        // the process is exiting
      }
    }, 250);
  };
  const attached = values.snapshot ? attach() : undefined;
  for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
    await log?.write(new TextEncoder().encode(chunk));
    tail.push(...chunk.split("\n").filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 8));
  }
  await attached;
  log?.close();
  await stdoutSaved;
  const status = await child.status;
  sampler.stop();
  clearInterval(sampling);
  await snapshotTaken?.catch((e) => console.error(`snapshot failed: ${e.message}`));
  cdp?.close();
  const finished = values.status ? await statusAndTimeline(dir, n) : undefined;
  await server.close();
  await Deno.remove(dir, { recursive: true });
  if (snapshotText) {
    if (values.save) await Deno.writeTextFile(values.save, snapshotText);
    analysis = analyse(JSON.parse(snapshotText), Number(values.top));
  }

  console.log(
    `N=${n}, P=${values.parallelism}, Jobs of ${
      values["job-ms"]
    } ms against the fake API server; ` +
      `${entry.includes("job-dispatcher-memory-") ? "bundle" : entry.replace(ROOT, "")}` +
      `${values.snapshot ? ", with inspector" : ""}`,
  );
  console.log(
    `exit ${status.code} in ${((Date.now() - spawnAt) / 1000).toFixed(1)} s; ` +
      `${server.stats.created} created, ${server.stats.finished} finished; ` +
      `load ${loadBefore} → ${load()} on ${navigator.hardwareConcurrency} CPUs`,
  );
  console.log(
    `peak RSS (VmHWM) ${mb(sampler.peakRssBytes)} MB; at the largest sample anonymous ` +
      `${mb(sampler.atPeak.anonBytes)} / file-backed ${mb(sampler.atPeak.fileBytes)} MB; ` +
      `CPU ${sampler.cpuSeconds.toFixed(2)} s`,
  );
  const record = server.recordSize();
  console.log(
    `CPU ${(sampler.cpuSeconds * 1000 / n).toFixed(2)} ms per node; record ConfigMap ${
      record
        ? `${(record.bytes / 1024).toFixed(1)} kB (binaryData.nodes ${
          (record.nodesBase64 / 1024).toFixed(1)
        } kB base64)`
        : "not written"
    }${values["no-metrics"] ? "; without --metrics-addr" : "; with --metrics-addr"}`,
  );
  console.log(
    `RESULT n=${n} peakMB=${mb(sampler.peakRssBytes)} cpuS=${sampler.cpuSeconds.toFixed(2)} ` +
      `cpuMsPerNode=${(sampler.cpuSeconds * 1000 / n).toFixed(2)} recordKB=${
        record ? (record.bytes / 1024).toFixed(1) : "-"
      } exit=${status.code}`,
  );
  if (finished) console.log(finished);
  if (status.code !== 0) console.log(`log tail:\n${tail.join("\n")}`);
  if (usage.length) {
    const step = Math.max(1, Math.floor(usage.length / 12));
    console.log("Deno.memoryUsage() over the run (s: heapUsed / heapTotal / external / rss, MB):");
    for (let i = 0; i < usage.length; i += step) {
      const u = usage[i];
      console.log(
        `  ${(u.at / 1000).toFixed(1).padStart(6)}: ${mb(u.heapUsed)} / ${mb(u.heapTotal)} / ` +
          `${mb(u.external)} / ${mb(u.rss)}`,
      );
    }
    const max = (k: "heapUsed" | "rss" | "external") => Math.max(...usage.map((u) => u[k]));
    console.log(
      `Deno.memoryUsage() every 250 ms (${usage.length} samples): max heapUsed ${
        mb(max("heapUsed"))
      } MB, ` +
        `max external ${mb(max("external"))} MB, max rss ${mb(max("rss"))} MB`,
    );
  }
  if (analysis && heapAtSnapshot) {
    console.log(
      `\nheap snapshot at ${values.at} of the Jobs created: heapUsed ${
        mb(heapAtSnapshot.heapUsed)
      } MB, ` +
        `heapTotal ${mb(heapAtSnapshot.heapTotal)} MB, external ${
          mb(heapAtSnapshot.external)
        } MB, ` +
        `rss ${mb(heapAtSnapshot.rss)} MB; reachable ${mb(analysis.total)} MB`,
    );
    printAnalysis(analysis);
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`bench:memory: ${(e as Error).stack}`);
    Deno.exit(1);
  }
}
