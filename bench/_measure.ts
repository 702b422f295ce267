/**
 * What the benchmark measures from outside the dispatcher: a process's peak
 * RSS and CPU time from /proc, the first TCP connection it opens (through a
 * pass-through proxy), the audit log's new lines, and every Job's creation
 * and completion as an independent watcher receives them.
 *
 * @module
 */

import type { Cluster } from "../e2e/cluster.ts";
import type { AuditEvent, JobTimes } from "./_analysis.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** Runs a command to its end and returns its output; throws with its stderr when it fails. */
export async function run(cmd: string, args: string[], cwd = ROOT): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdin: "null" }).output();
  const text = new TextDecoder();
  if (out.code !== 0) {
    throw new Error(`Cannot run ${cmd} ${args.join(" ")}: ${text.decode(out.stderr).trim()}`);
  }
  return text.decode(out.stdout) + text.decode(out.stderr);
}

/**
 * Points `$JOB_DISPATCHER_ENTRY` at what the probe runs: a copy of the bundle
 * in `dir` (built with `deno task bundle` unless the variable names one), so
 * that no deno.json sits beside it and a re-bundle cannot change it; or the
 * source file the variable names. Returns the entry.
 */
export async function stageEntry(dir: string, say: (text: string) => void): Promise<string> {
  let entry = Deno.env.get("JOB_DISPATCHER_ENTRY");
  if (!entry || entry.endsWith(".js")) {
    if (!entry) {
      say((await run(Deno.execPath(), ["task", "bundle"])).trim());
      entry = `${ROOT}dist/job-dispatcher.js`;
    }
    await Deno.copyFile(entry, `${dir}/job-dispatcher.js`);
    entry = `${dir}/job-dispatcher.js`;
  } else if (!entry.startsWith("/")) entry = `${ROOT}${entry}`;
  Deno.env.set("JOB_DISPATCHER_ENTRY", entry);
  return entry;
}

const CLOCK_TICKS = 100; // getconf CLK_TCK on Linux x86-64

/** Peak RSS and CPU time of one process, sampled from /proc. */
export class ProcSampler {
  /** Peak resident set (VmHWM), in bytes. */
  peakRssBytes = 0;
  /** User + system CPU time, in seconds, at the last sample. */
  cpuSeconds = 0;
  /** Samples taken. */
  samples = 0;
  /** At the sample with the most resident memory: anonymous (heaps) and file-backed (the deno binary's pages) bytes. */
  atPeak = { rssBytes: 0, anonBytes: 0, fileBytes: 0 };
  #timer: ReturnType<typeof setInterval>;

  /** Samples `pid` every `everyMs` until {@linkcode ProcSampler.stop}. */
  constructor(readonly pid: number, everyMs = 100) {
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), everyMs);
  }

  #sample(): void {
    try {
      const status = Deno.readTextFileSync(`/proc/${this.pid}/status`);
      const kb = (field: string) =>
        Number(status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0) * 1024;
      const hwm = kb("VmHWM");
      const rss = kb("VmRSS");
      if (rss > this.atPeak.rssBytes) {
        this.atPeak = { rssBytes: rss, anonBytes: kb("RssAnon"), fileBytes: kb("RssFile") };
      }
      const stat = Deno.readTextFileSync(`/proc/${this.pid}/stat`);
      // Fields after the parenthesised name; utime and stime are fields 14 and 15.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cpu = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
      this.peakRssBytes = Math.max(this.peakRssBytes, hwm);
      this.cpuSeconds = Math.max(this.cpuSeconds, cpu);
      this.samples++;
    } catch {
      // The process exited (or is a zombie without status); keep the last sample.
    }
  }

  /** Stops sampling. */
  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * A pass-through TCP proxy to the API server that notes when its first
 * connection arrives. TLS is untouched (the API server's certificate names
 * 127.0.0.1), so the client still verifies the server.
 */
export class FirstConnectProxy {
  /** The port it listens on. */
  readonly port: number;
  /** When the first connection was accepted (epoch ms). */
  firstConnectAt?: number;
  /** Connections accepted. */
  connections = 0;
  #listener: Deno.Listener;
  #target: { hostname: string; port: number };
  #conns = new Set<Deno.Conn>();
  #accepting: Promise<void>;

  /** Starts proxying to `server`, an `https://host:port` URL. */
  constructor(server: string) {
    const url = new URL(server);
    this.#target = { hostname: url.hostname, port: Number(url.port || 443) };
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  /** The URL clients use instead of the API server's. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  async #accept(): Promise<void> {
    for await (const client of this.#listener) {
      this.firstConnectAt ??= Date.now();
      this.connections++;
      this.#link(client);
    }
  }

  async #link(client: Deno.Conn): Promise<void> {
    this.#conns.add(client);
    let server: Deno.Conn | undefined;
    try {
      server = await Deno.connect(this.#target);
      this.#conns.add(server);
      await Promise.all([
        client.readable.pipeTo(server.writable),
        server.readable.pipeTo(client.writable),
      ]);
    } catch {
      // A side closed; the other goes too.
    } finally {
      for (const c of [client, server]) {
        if (!c) continue;
        this.#conns.delete(c);
        try {
          c.close();
        } catch {
          // already closed by pipeTo
        }
      }
    }
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    this.#listener.close();
    for (const c of this.#conns) {
      try {
        c.close();
      } catch {
        // already closed
      }
    }
    await this.#accepting.catch(() => {});
  }
}

/**
 * The environment the image gives the dispatcher: the Containerfile's `ENV
 * NAME=value` lines (e.g. `MALLOC_ARENA_MAX`), so that a benchmark measures
 * the process as the chart's hook runs it, from the one place that sets it.
 */
export function imageEnv(containerfile = `${ROOT}Containerfile`): Record<string, string> {
  let env: Record<string, string> = {};
  for (const line of Deno.readTextFileSync(containerfile).split("\n")) {
    // Each FROM starts a stage; only the last one's environment is the image's.
    if (/^FROM\s/i.test(line)) env = {};
    const m = /^ENV\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$/.exec(line);
    if (m) env[m[1]] = m[2];
  }
  return env;
}
/** The size of a file now, so that a later read takes only what came after. */
export function fileSize(path: string): number {
  try {
    return Deno.statSync(path).size;
  } catch {
    return 0;
  }
}

/** The audit events written to `path` after byte `offset`. */
export async function readAudit(path: string, offset: number): Promise<AuditEvent[]> {
  const file = await Deno.open(path, { read: true });
  try {
    await file.seek(offset, Deno.SeekMode.Start);
    const text = await new Response(file.readable).text();
    return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l) as AuditEvent);
  } catch (e) {
    file.close();
    throw e;
  }
}

interface JobView {
  metadata: { name: string; uid: string; resourceVersion: string };
  status?: { conditions?: { type: string; status: string }[] };
}

const FINISHED = ["Complete", "SuccessCriteriaMet", "Failed", "FailureTarget"];

/**
 * Watches the Jobs of one namespace as admin, independently of the
 * dispatcher, and notes when each was first seen and first seen finished
 * (the same conditions the dispatcher reads), at the moment the event arrived.
 */
export class JobTimeline {
  /** By Job UID. */
  readonly jobs = new Map<string, JobTimes>();
  #stop = new AbortController();
  #client: Deno.HttpClient;
  #done: Promise<void>;
  #reader?: ReadableStreamDefaultReader<string>;

  private constructor(cluster: Cluster, namespace: string, ready: () => void) {
    const pki = `${cluster.dir}/pki`;
    this.#client = Deno.createHttpClient({
      caCerts: [Deno.readTextFileSync(`${pki}/ca.crt`)],
      cert: Deno.readTextFileSync(`${pki}/admin.crt`),
      key: Deno.readTextFileSync(`${pki}/admin.key`),
    });
    this.#done = this.#run(`${cluster.server}/apis/batch/v1/namespaces/${namespace}/jobs`, ready);
  }

  /** Starts watching; resolves once the watch is open. */
  static async start(cluster: Cluster, namespace: string): Promise<JobTimeline> {
    let ready = () => {};
    const started = new Promise<void>((r) => (ready = r));
    const timeline = new JobTimeline(cluster, namespace, ready);
    await started;
    return timeline;
  }

  #see(job: JobView, now: number): void {
    let t = this.jobs.get(job.metadata.uid);
    if (!t) this.jobs.set(job.metadata.uid, t = { createdAt: now });
    const done = (job.status?.conditions ?? []).find((c) =>
      c.status === "True" && FINISHED.includes(c.type)
    );
    if (done && t.finishedAt === undefined) {
      t.finishedAt = now;
      if (done.type === "Failed" || done.type === "FailureTarget") t.failed = true;
    }
  }

  async #run(url: string, ready: () => void): Promise<void> {
    const signal = this.#stop.signal;
    let rv = "";
    while (!signal.aborted) {
      try {
        if (!rv) {
          const res = await fetch(url, { client: this.#client, signal });
          const list = await res.json();
          const now = Date.now();
          for (const job of list.items as JobView[]) this.#see(job, now);
          rv = list.metadata.resourceVersion;
        }
        const res = await fetch(
          `${url}?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=300`,
          { client: this.#client, signal },
        );
        ready();
        let buf = "";
        const reader = this.#reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
        while (true) {
          const { value: chunk, done } = await reader.read();
          if (done) break;
          const now = Date.now();
          buf += chunk;
          let nl;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const ev = JSON.parse(buf.slice(0, nl));
            buf = buf.slice(nl + 1);
            if (ev.type === "ERROR") {
              rv = "";
              break;
            }
            rv = ev.object.metadata.resourceVersion;
            if (ev.type === "ADDED" || ev.type === "MODIFIED") this.#see(ev.object, now);
          }
        }
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    this.#stop.abort();
    // An aborted fetch does not always end a body being read through a
    // TextDecoderStream, so the reader is cancelled too, and the wait bounded.
    this.#reader?.cancel().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#done, new Promise((r) => (timer = setTimeout(r, 5000)))]);
    clearTimeout(timer);
    this.#client.close();
  }
}
