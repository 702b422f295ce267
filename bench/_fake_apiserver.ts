/**
 * A stand-in API server for memory probes of the dispatcher at fleet scale,
 * without a control plane: N nodes shaped like kwok's, Jobs that finish D ms
 * after they are created, lists with `limit`/`continue`, and watches that
 * replay from a resourceVersion. Plain HTTP (the kubeconfig sets
 * `insecure-skip-tls-verify`). It is close enough for the dispatcher's
 * decisions, not a conformance server: selectors are ignored (every node
 * matches), patches are acknowledged and not applied.
 *
 * @module
 */

/** A watch event as the API server streams it. */
interface Event {
  rv: number;
  ns: string;
  line: string;
}

/** A kwok-like Node (about 3 kB of JSON): managedFields, conditions, nodeInfo. */
function fakeNode(name: string, rv: number): Record<string, unknown> {
  const time = "2026-11-30T10:00:00Z";
  const cond = (type: string, status: string, reason: string) => ({
    type,
    status,
    reason,
    message: `kubelet ${reason}`,
    lastHeartbeatTime: time,
    lastTransitionTime: time,
  });
  return {
    kind: "Node",
    apiVersion: "v1",
    metadata: {
      name,
      uid: crypto.randomUUID(),
      resourceVersion: String(rv),
      creationTimestamp: time,
      labels: {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/role": "agent",
        "node-role.kubernetes.io/agent": "",
        type: "kwok",
      },
      annotations: {
        "kwok.x-k8s.io/node": "fake",
        "node.alpha.kubernetes.io/ttl": "0",
      },
      managedFields: [
        {
          manager: "kwok",
          operation: "Update",
          apiVersion: "v1",
          time,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:annotations": { ".": {}, "f:kwok.x-k8s.io/node": {} } },
            "f:status": {
              "f:allocatable": { ".": {}, "f:cpu": {}, "f:memory": {}, "f:pods": {} },
              "f:capacity": { ".": {}, "f:cpu": {}, "f:memory": {}, "f:pods": {} },
              "f:conditions": Object.fromEntries(
                ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"]
                  .map((t) => [`k:{"type":"${t}"}`, { ".": {}, "f:status": {}, "f:type": {} }]),
              ),
              "f:nodeInfo": { "f:architecture": {}, "f:kubeletVersion": {} },
            },
          },
          subresource: "status",
        },
      ],
    },
    spec: {},
    status: {
      capacity: { cpu: "32", memory: "256Gi", pods: "110" },
      allocatable: { cpu: "32", memory: "256Gi", pods: "110" },
      conditions: [
        cond("Ready", "True", "KubeletReady"),
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID"),
        cond("NetworkUnavailable", "False", "RouteCreated"),
      ],
      addresses: [{ type: "InternalIP", address: "10.0.0.1" }, { type: "Hostname", address: name }],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: crypto.randomUUID().replaceAll("-", ""),
        systemUUID: crypto.randomUUID(),
        bootID: crypto.randomUUID(),
        kernelVersion: "6.8.0",
        osImage: "Ubuntu 24.04 LTS",
        containerRuntimeVersion: "containerd://1.7.22",
        kubeletVersion: "fake",
        kubeProxyVersion: "fake",
        operatingSystem: "linux",
        architecture: "amd64",
      },
    },
  };
}

/**
 * The Job field selectors `status` sends (`status.successful=1`, `!=1`,
 * `metadata.name=N`, comma-joined), as the API server applies them.
 */
function jobFieldFilter(selector: string | null): (job: Record<string, unknown>) => boolean {
  const terms = (selector ?? "").split(",").filter(Boolean).map((t) => {
    const m = t.match(/^([\w.]+)(!=|==?)(.*)$/);
    if (!m) throw new Error(`stand-in API server: unsupported field selector ${t}`);
    return { path: m[1], negate: m[2] === "!=", value: m[3] };
  });
  const field = (job: Record<string, unknown>, path: string) =>
    path === "metadata.name"
      ? (job.metadata as { name: string }).name
      : path === "status.successful"
      ? String((job.status as { succeeded?: number } | undefined)?.succeeded ?? 0)
      : undefined;
  return (job) => terms.every((t) => (field(job, t.path) === t.value) !== t.negate);
}

/** A Job's Status column, as `kubectl get jobs` shows it. */
function jobStatusCell(o: unknown): string {
  const conds = (o as { status?: { conditions?: { type: string; status: string }[] } }).status
    ?.conditions ?? [];
  const done = conds.find((c) =>
    (c.type === "Complete" || c.type === "Failed") && c.status === "True"
  );
  return done?.type ?? "Running";
}

/** What the fake server has seen and done. */
export interface FakeStats {
  /** Requests, by `METHOD path-kind`. */
  requests: Record<string, number>;
  /** Jobs created (not dry runs). */
  created: number;
  /** Jobs that finished. */
  finished: number;
}

/** A fake API server on a loopback port. */
export class FakeApiServer {
  /** Counts. */
  readonly stats: FakeStats = { requests: {}, created: 0, finished: 0 };
  #server: Deno.HttpServer<Deno.NetAddr>;
  #rv = 1;
  #nodes = new Map<string, Record<string, unknown>>();
  #nodeNames: string[] = [];
  #jobs = new Map<string, Record<string, unknown>>();
  #configMaps = new Map<string, Record<string, unknown>>();
  #events: Event[] = [];
  #watchers = new Set<{ ns: string; push: (line: string) => void }>();
  #timers = new Set<ReturnType<typeof setTimeout>>();
  #onCreate?: (created: number) => void;

  /**
   * Serves `nodes` nodes; each Job finishes `jobMs` after its creation.
   *
   * @param onCreate called after each Job creation with the count so far
   */
  constructor(opts: { nodes: number; jobMs: number; onCreate?: (created: number) => void }) {
    for (let i = 0; i < opts.nodes; i++) {
      const name = `node-${String(i).padStart(5, "0")}`;
      this.#nodes.set(name, fakeNode(name, this.#rv++));
      this.#nodeNames.push(name);
    }
    this.#onCreate = opts.onCreate;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req, opts.jobMs),
    );
  }

  /**
   * The run record's ConfigMap (`run-record.*`) as the API server would store
   * it: its JSON size in bytes (the 1 MiB limit applies to it) and the base64
   * length of `binaryData.nodes`; undefined before the first write.
   */
  recordSize(): { bytes: number; nodesBase64: number } | undefined {
    for (const [key, cm] of this.#configMaps) {
      if (!key.split("/")[1]?.startsWith("run-record.")) continue;
      const nodes = (cm.binaryData as Record<string, string> | undefined)?.nodes ?? "";
      return {
        bytes: new TextEncoder().encode(JSON.stringify(cm)).length,
        nodesBase64: nodes.length,
      };
    }
    return undefined;
  }

  /** The stored ConfigMap `ns/name`, for probes that read the record back. */
  configMap(key: string): Record<string, unknown> | undefined {
    return this.#configMaps.get(key);
  }

  /** The server's URL. */
  get url(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  /** Stops serving. */
  async close(): Promise<void> {
    for (const t of this.#timers) clearTimeout(t);
    await this.#server.shutdown();
  }

  #count(method: string, kind: string): void {
    const key = `${method} ${kind}`;
    this.stats.requests[key] = (this.stats.requests[key] ?? 0) + 1;
  }

  #emit(ns: string, type: string, object: unknown): void {
    const line = JSON.stringify({ type, object }) + "\n";
    this.#events.push({ rv: this.#rv, ns, line });
    for (const w of this.#watchers) if (w.ns === ns) w.push(line);
  }

  #watch(ns: string, since: number, timeoutSeconds: number): Response {
    let watcher: { ns: string; push: (line: string) => void } | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const enc = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      start: (c) => {
        for (const e of this.#events) {
          if (e.ns === ns && e.rv > since) c.enqueue(enc.encode(e.line));
        }
        watcher = { ns, push: (line) => c.enqueue(enc.encode(line)) };
        this.#watchers.add(watcher);
        timer = setTimeout(() => {
          this.#watchers.delete(watcher!);
          c.close();
        }, timeoutSeconds * 1000);
      },
      cancel: () => {
        clearTimeout(timer);
        this.#watchers.delete(watcher!);
      },
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  }

  #list(items: unknown[], url: URL, kind: string, accept = ""): Response {
    const limit = Number(url.searchParams.get("limit") || items.length || 1);
    const from = Number(url.searchParams.get("continue") || 0);
    const page = items.slice(from, from + limit) as { metadata: unknown }[];
    const next = from + limit < items.length ? String(from + limit) : undefined;
    const metadata = { resourceVersion: String(this.#rv), continue: next };
    // `status` asks for Tables (`kubectl get`'s columns) and metadata-only
    // lists of the Jobs: a Job's Table has Name and Status as the API server's.
    if (accept.includes("as=Table")) {
      const withObject = url.searchParams.get("includeObject") !== "None";
      return Response.json({
        kind: "Table",
        apiVersion: "meta.k8s.io/v1",
        metadata,
        columnDefinitions: [{ name: "Name" }, { name: "Status" }],
        rows: page.map((o) => ({
          cells: [(o.metadata as { name: string }).name, jobStatusCell(o)],
          object: withObject ? { metadata: o.metadata } : undefined,
        })),
      });
    }
    if (accept.includes("as=PartialObjectMetadataList")) {
      return Response.json({
        kind: "PartialObjectMetadataList",
        apiVersion: "meta.k8s.io/v1",
        metadata,
        items: page.map((o) => ({ metadata: o.metadata })),
      });
    }
    return Response.json({
      kind,
      apiVersion: kind === "JobList" ? "batch/v1" : "v1",
      metadata,
      items: page,
    });
  }

  /**
   * ConfigMaps by `ns/name` (the run record): a create stores (409 when it
   * exists), an update replaces (404 when absent, as the record's writer
   * expects before its first create), a get reads.
   */
  async #configMap(req: Request, key: string): Promise<Response> {
    const status = (code: number, reason: string) =>
      Response.json({ kind: "Status", code, reason }, { status: code });
    if (req.method === "POST") {
      const cm = await req.json();
      const full = `${key}${cm.metadata.name}`;
      if (this.#configMaps.has(full)) return status(409, "AlreadyExists");
      cm.metadata.resourceVersion = String(++this.#rv);
      this.#configMaps.set(full, cm);
      return Response.json(cm, { status: 201 });
    }
    if (req.method === "PUT") {
      const cm = await req.json();
      if (!this.#configMaps.has(key)) return status(404, "NotFound");
      cm.metadata.resourceVersion = String(++this.#rv);
      this.#configMaps.set(key, cm);
      return Response.json(cm);
    }
    const cm = this.#configMaps.get(key);
    return cm ? Response.json(cm) : status(404, "NotFound");
  }

  async #handle(req: Request, jobMs: number): Promise<Response> {
    const url = new URL(req.url);
    const parts = url.pathname.split("/").filter(Boolean);
    const notFound = () =>
      Response.json({ kind: "Status", code: 404, reason: "NotFound", message: "not found" }, {
        status: 404,
      });
    const watch = url.searchParams.get("watch") === "1" || url.searchParams.get("watch") === "true";
    const timeout = Number(url.searchParams.get("timeoutSeconds") || 30);
    const since = Number(url.searchParams.get("resourceVersion") || 0);
    // /api/v1/nodes[/name[/sub...]]
    if (parts[0] === "api" && parts[2] === "nodes") {
      const name = parts[3];
      this.#count(req.method, name ? (parts[4] ? `node/${parts[4]}` : "node") : "nodes");
      if (!name) {
        if (watch) return this.#watch("", since, timeout);
        const selector = url.searchParams.get("fieldSelector") ?? "";
        const field = selector.match(/metadata\.name=([^,]+)/)?.[1];
        // No node here is cordoned: `status` asks for those by this selector.
        const names = selector.includes("spec.unschedulable=true")
          ? []
          : field
          ? this.#nodeNames.filter((n) => n === field)
          : this.#nodeNames;
        return this.#list(
          names.map((n) => this.#nodes.get(n)),
          url,
          "NodeList",
          req.headers.get("accept") ?? "",
        );
      }
      const node = this.#nodes.get(name);
      if (!node || parts[4]) return notFound();
      if (req.method === "PATCH") await req.arrayBuffer().catch(() => {});
      return Response.json(node);
    }
    // /api/v1/namespaces/ns[/events|pods...]
    if (parts[0] === "api" && parts[2] === "namespaces") {
      const [ns, kind] = [parts[3], parts[4]];
      this.#count(req.method, kind ?? "namespace");
      if (!kind) return Response.json({ kind: "Namespace", metadata: { name: ns } });
      if (kind === "events" && req.method === "POST") {
        await req.arrayBuffer().catch(() => {});
        return Response.json({ kind: "Event" }, { status: 201 });
      }
      if (kind === "pods" && !parts[5]) return this.#list([], url, "PodList");
      if (kind === "configmaps") return await this.#configMap(req, `${ns}/${parts[5] ?? ""}`);
      return notFound();
    }
    // /apis/batch/v1/namespaces/ns/jobs[/name]
    if (parts[0] === "apis" && parts[1] === "batch" && parts[5] === "jobs") {
      const [ns, name] = [parts[4], parts[6]];
      const dry = url.searchParams.has("dryRun");
      this.#count(req.method, `${name ? "job" : "jobs"}${dry ? " (dry run)" : ""}`);
      if (!name && req.method === "GET") {
        if (watch) return this.#watch(ns, since, timeout);
        const field = jobFieldFilter(url.searchParams.get("fieldSelector"));
        return this.#list(
          [...this.#jobs.values()].filter((j) =>
            (j.metadata as { namespace: string }).namespace === ns && field(j)
          ),
          url,
          "JobList",
          req.headers.get("accept") ?? "",
        );
      }
      if (!name && req.method === "POST") {
        const job = await req.json();
        job.metadata = { ...job.metadata, namespace: ns, uid: crypto.randomUUID() };
        const key = `${ns}/${job.metadata.name}`;
        if (dry) return Response.json(job, { status: 201 });
        if (this.#jobs.has(key)) {
          return Response.json({ kind: "Status", code: 409, reason: "AlreadyExists" }, {
            status: 409,
          });
        }
        job.metadata.resourceVersion = String(++this.#rv);
        job.metadata.creationTimestamp = new Date().toISOString();
        job.status = { active: 1, startTime: job.metadata.creationTimestamp };
        this.#jobs.set(key, job);
        this.#emit(ns, "ADDED", job);
        this.stats.created++;
        this.#onCreate?.(this.stats.created);
        const timer = setTimeout(() => {
          this.#timers.delete(timer);
          const now = new Date().toISOString();
          const done = {
            ...job,
            metadata: { ...job.metadata, resourceVersion: String(++this.#rv) },
            status: {
              succeeded: 1,
              startTime: job.status.startTime,
              completionTime: now,
              conditions: [
                { type: "SuccessCriteriaMet", status: "True", lastTransitionTime: now },
                { type: "Complete", status: "True", lastTransitionTime: now },
              ],
            },
          };
          this.#jobs.set(key, done);
          this.#emit(ns, "MODIFIED", done);
          this.stats.finished++;
        }, jobMs);
        this.#timers.add(timer);
        return Response.json(job, { status: 201 });
      }
      const job = this.#jobs.get(`${ns}/${name}`);
      if (!job) return notFound();
      if (req.method === "DELETE") {
        this.#jobs.delete(`${ns}/${name}`);
        this.#emit(ns, "DELETED", job);
      }
      if (req.method === "PATCH") await req.arrayBuffer().catch(() => {});
      return Response.json(job);
    }
    this.#count(req.method, "other");
    return notFound();
  }
}
