/**
 * Runs the dispatcher as users run it (a subprocess with the permissions the
 * compiled binary gets) and watches Jobs independently of it, from the API
 * server's side, for the end-to-end suites.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster, CommandResult } from "./cluster.ts";

const ROOT = new URL("../", import.meta.url).pathname;

// In a module of their own, which imports nothing of the suites: `deno task
// cluster hook` (e2e/_hook.ts) runs the dispatcher too.
export { dispatcherCommand, dispatchPermissions } from "./_entry.ts";
import { dispatcherCommand } from "./_entry.ts";

/** Options of {@linkcode dispatcher}. */
export interface DispatchRun {
  /** Text on stdin. */
  stdin?: string;
  /** Extra environment; KUBECONFIG is the cluster's admin kubeconfig unless set. */
  env?: Record<string, string>;
  /** Send this signal once stderr matches `when`. */
  signal?: { name: Deno.Signal; when: RegExp };
}

/** Runs the dispatcher against `cluster` and returns its exit code and output. */
export async function dispatcher(
  cluster: Cluster,
  args: string[],
  opts: DispatchRun = {},
): Promise<CommandResult> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...dispatcherCommand(), ...args],
    cwd: ROOT,
    env: { KUBECONFIG: cluster.kubeconfig, NO_COLOR: "1", ...opts.env },
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  let stderr = "";
  let signalled = false;
  const readErr = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      stderr += chunk;
      if (opts.signal && !signalled && opts.signal.when.test(stderr)) {
        signalled = true;
        child.kill(opts.signal.name);
      }
    }
  })();
  const stdout = new Response(child.stdout).text();
  const [status] = await Promise.all([child.status, readErr]);
  return { code: status.code, stdout: await stdout, stderr };
}

/** A Job as the watcher sees it. */
interface JobView {
  metadata: {
    name: string;
    uid: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  status?: { conditions?: { type: string; status: string }[] };
}

function finished(job: JobView): boolean {
  return (job.status?.conditions ?? []).some((c) =>
    c.status === "True" &&
    ["Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"].includes(c.type)
  );
}

/** An HTTP client with the cluster's admin credentials, for the tests' own watches. */
export function adminClient(cluster: Cluster): Deno.HttpClient {
  const pki = `${cluster.dir}/pki`;
  return Deno.createHttpClient({
    caCerts: [Deno.readTextFileSync(`${pki}/ca.crt`)],
    cert: Deno.readTextFileSync(`${pki}/admin.crt`),
    key: Deno.readTextFileSync(`${pki}/admin.key`),
  });
}

/** The events of a watch response, one JSON object per line. */
export async function* watchEvents<T>(
  res: Response,
): AsyncGenerator<{ type: string; object: T }> {
  let buf = "";
  for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      yield JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  }
}

/** A watch the test follows until it calls `stop`. */
export interface FollowedWatch {
  /** Stops watching; throws what ended the watch early (a gap in its versions). */
  stop(): Promise<void>;
}

/**
 * Follows the watch at `url` (a `?watch=1` URL) from resourceVersion `rv`,
 * handing `see` every event in order. A dropped connection resumes from the
 * last version seen; an ERROR event (the version expired: the API server
 * would skip versions) ends the watch, which `stop` then throws as
 * `<what> watch ended`, since a gap would hide what these watches are for.
 */
export function followWatch<T extends { metadata: { resourceVersion: string } }>(
  cluster: Cluster,
  url: string,
  rv: string,
  what: string,
  see: (type: string, object: T) => void,
): FollowedWatch {
  const client = adminClient(cluster);
  const stopped = new AbortController();
  const done = (async () => {
    while (!stopped.signal.aborted) {
      try {
        const res = await fetch(`${url}&resourceVersion=${rv}`, {
          client,
          signal: stopped.signal,
        });
        for await (const ev of watchEvents<T>(res)) {
          if (ev.type === "ERROR") throw new Error(`${what} watch ended: ${JSON.stringify(ev)}`);
          rv = ev.object.metadata.resourceVersion;
          see(ev.type, ev.object);
        }
      } catch (error) {
        if (stopped.signal.aborted) return;
        if (String(error).includes(`${what} watch ended`)) throw error;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  })();
  return {
    async stop() {
      stopped.abort();
      try {
        await done;
      } finally {
        client.close();
      }
    },
  };
}

/**
 * Watches the Jobs of a namespace from the API server, independently of the
 * dispatcher, and records the most that were active at once, in all and per
 * node, and every Job ever created.
 */
export class JobWatcher {
  /** Most Jobs active (created, not finished, not deleted) at once. */
  maxActive = 0;
  /** Most Jobs active at once for any one node. */
  maxActivePerNode = 0;
  /** Most Jobs active at once in any one domain, by the `domainOf` given at start. */
  maxActivePerDomain = 0;
  #domainOf: (node: string) => string;
  /** Every Job UID seen, with its node. */
  seen = new Map<string, string>();
  /**
   * When this watcher first saw each per-node Job (`added`) and first saw it
   * finished (`finished`), in ms since the epoch, by UID: the watch's own
   * clock, finer than the API server's whole-second timestamps.
   */
  times = new Map<string, { node: string; added: number; finished?: number }>();
  /**
   * Per-node Jobs deleted before `Complete` or `Failed` (the conditions set
   * once their pods are gone): Jobs killed mid-run, each as its name and the
   * conditions it had, `node-task-a [SuccessCriteriaMet]`.
   */
  deletedUnfinished: string[] = [];
  #active = new Map<string, string>();
  #stop = new AbortController();
  #done: Promise<void>;
  #client: Deno.HttpClient;

  /**
   * Starts watching. Resolves once the watch is established.
   *
   * @param nodeAnnotation the annotation with the node's name
   */
  static async start(
    cluster: Cluster,
    namespace: string,
    domainOf: (node: string) => string = () => "",
    nodeAnnotation = "job-dispatcher/node-name",
  ) {
    const w = new JobWatcher(cluster, namespace, nodeAnnotation, domainOf);
    await w.#ready;
    return w;
  }

  #ready: Promise<void>;

  private constructor(
    cluster: Cluster,
    namespace: string,
    nodeAnnotation: string,
    domainOf: (node: string) => string,
  ) {
    this.#domainOf = domainOf;
    const client = adminClient(cluster);
    this.#client = client;
    let ready = () => {};
    this.#ready = new Promise((r) => (ready = r));
    const url = `${cluster.server}/apis/batch/v1/namespaces/${namespace}/jobs`;
    this.#done = (async () => {
      let rv = "";
      while (!this.#stop.signal.aborted) {
        try {
          if (!rv) {
            const list = await (await fetch(url, { client, signal: this.#stop.signal })).json();
            for (const job of list.items as JobView[]) this.#apply("ADDED", job, nodeAnnotation);
            rv = list.metadata.resourceVersion;
            ready();
          }
          const res = await fetch(`${url}?watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`, {
            client,
            signal: this.#stop.signal,
          });
          for await (const ev of watchEvents<JobView>(res)) {
            if (ev.type === "ERROR") {
              rv = "";
              break;
            }
            rv = ev.object.metadata.resourceVersion ?? rv;
            if (ev.type !== "BOOKMARK") this.#apply(ev.type, ev.object, nodeAnnotation);
          }
        } catch {
          if (this.#stop.signal.aborted) return;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    })();
  }

  #apply(type: string, job: JobView, nodeAnnotation: string): void {
    const node = job.metadata.annotations?.[nodeAnnotation];
    // Jobs without the annotation (an owner Job, say) are not per-node Jobs.
    if (node === undefined) return;
    this.seen.set(job.metadata.uid, node);
    const times = this.times.get(job.metadata.uid) ?? { node, added: Date.now() };
    if (times.finished === undefined && finished(job)) times.finished = Date.now();
    this.times.set(job.metadata.uid, times);
    const terminal = (job.status?.conditions ?? []).some((c) =>
      c.status === "True" && (c.type === "Complete" || c.type === "Failed")
    );
    if (type === "DELETED" && !terminal) {
      const had = (job.status?.conditions ?? []).filter((c) => c.status === "True");
      this.deletedUnfinished.push(`${job.metadata.name} [${had.map((c) => c.type).join(", ")}]`);
    }
    if (type === "DELETED" || finished(job)) this.#active.delete(job.metadata.uid);
    else this.#active.set(job.metadata.uid, node);
    this.maxActive = Math.max(this.maxActive, this.#active.size);
    const perNode = new Map<string, number>();
    for (const n of this.#active.values()) perNode.set(n, (perNode.get(n) ?? 0) + 1);
    this.maxActivePerNode = Math.max(this.maxActivePerNode, ...perNode.values(), 0);
    const perDomain = new Map<string, number>();
    for (const n of this.#active.values()) {
      const d = this.#domainOf(n);
      perDomain.set(d, (perDomain.get(d) ?? 0) + 1);
    }
    this.maxActivePerDomain = Math.max(this.maxActivePerDomain, ...perDomain.values(), 0);
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
    this.#client.close();
  }
}

/**
 * The per-node Job template the suites use; pods run for `duration` on the
 * simulated node. `extra` is added to the pod spec; `cpu` requests that much
 * CPU (more than a simulated node has leaves the pod unschedulable).
 */
export function jobTemplate(name = "e2e", duration = "1s", extra = "", cpu?: string): string {
  return `apiVersion: batch/v1
kind: Job
metadata:
  name: ${name}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        e2e.job-dispatcher.io/duration: "${duration}"
    spec:
      restartPolicy: Never
${extra}      containers:
        - name: work
          image: registry.invalid/work:1
          command: ["/bin/true"]
${cpu ? `          resources: {requests: {cpu: "${cpu}"}}\n` : ""}`;
}

/** Lists Jobs of a namespace with kubectl, as name → {node, conditions, owners}. */
export async function jobsIn(cluster: Cluster, namespace: string): Promise<
  {
    name: string;
    node: string;
    complete: boolean;
    failed: boolean;
    owners: string[];
    uid: string;
    /** `metadata.creationTimestamp`: whole seconds, stamped by the API server. */
    created: string;
  }[]
> {
  const { stdout, code, stderr } = await cluster.kubectl([
    "get",
    "jobs",
    "-n",
    namespace,
    "-o",
    "json",
  ]);
  if (code !== 0) throw new Error(`kubectl get jobs failed: ${stderr}`);
  return (JSON.parse(stdout)
    .items as (JobView & { metadata: { ownerReferences?: { uid: string }[] } })[]).map((j) => ({
      name: j.metadata.name,
      uid: j.metadata.uid,
      created: (j.metadata as { creationTimestamp?: string }).creationTimestamp ?? "",
      node: j.metadata.annotations?.["job-dispatcher/node-name"] ?? "",
      complete: (j.status?.conditions ?? []).some((c) =>
        c.type === "Complete" && c.status === "True"
      ),
      failed: (j.status?.conditions ?? []).some((c) => c.type === "Failed" && c.status === "True"),
      owners: (j.metadata.ownerReferences ?? []).map((r) => r.uid),
    }));
}

/** Polls `check` until it returns true or `ms` pass. */
export async function eventually(
  check: () => Promise<boolean>,
  ms: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/** The Jobs of `prefix` in `ns`, waiting until every one is Complete. */
export async function completeJobs(
  cluster: Cluster,
  ns: string,
  prefix: string,
  count: number,
): Promise<Awaited<ReturnType<typeof jobsIn>>> {
  const mine = async () =>
    (await jobsIn(cluster, ns)).filter((j) => j.name.startsWith(`${prefix}-`));
  // The dispatcher moves on at SuccessCriteriaMet; Complete follows once the pod is gone.
  await eventually(
    async () => {
      const jobs = await mine();
      return jobs.length === count && jobs.every((j) => j.complete);
    },
    30_000,
    `${count} Complete Jobs of ${prefix} in ${ns}`,
  );
  const jobs = await mine();
  assert.equal(new Set(jobs.map((j) => j.node)).size, count, "one Job per node");
  return jobs;
}
