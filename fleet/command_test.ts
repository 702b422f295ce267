import assert from "node:assert/strict";
import type { RunConfig, RunContext } from "../run/config.ts";
import { ApiError, type Kube } from "../kube/client.ts";
import type { Logger } from "../report/log.ts";
import { SELF_SUBJECT_ACCESS_REVIEWS } from "../run/preflight.ts";
import { FakeConfigMaps } from "../testing/fake_configmaps.ts";
import {
  clusterConfig,
  clusterRunContext,
  connectAll,
  type FleetEnv,
  fleetOrder,
  fleetPath,
  type Member,
  withLease,
  writeFleetReport,
} from "./command.ts";
import { LEASE_SECS, leaseName } from "./lease.ts";
import { parseFleet } from "./spec.ts";

const PATHS: [string, string, string][] = [
  ["~/.kube/eu2.yaml", "FLEET.yaml", "/home/ops/.kube/eu2.yaml"],
  ["/etc/kube/eu2.yaml", "conf/FLEET.yaml", "/etc/kube/eu2.yaml"],
  ["eu2.yaml", "/etc/fleet/FLEET.yaml", "/etc/fleet/eu2.yaml"],
  ["kube/eu2.yaml", "FLEET.yaml", "./kube/eu2.yaml"],
];

for (const [path, source, want] of PATHS) {
  Deno.test(`fleetPath reads ${path} in ${source} as ${want}`, () => {
    assert.equal(fleetPath(path, source, "/home/ops"), want);
  });
}

const SPEC = parseFleet(
  "stages: [{name: s, clusters: [a, b]}]\nclusters: {b: {kubeconfig: b.yaml, namespace: ops}}",
  "/f/FLEET.yaml",
);
const OPTS = { kubeconfig: "/k.yaml", namespace: "jobs", report: "out/r.json" } as RunConfig;

Deno.test("clusterConfig gives each cluster its context, overrides and report", () => {
  const a = clusterConfig(OPTS, SPEC, "a");
  assert.deepEqual([a.context, a.kubeconfig, a.namespace, a.report], [
    "a",
    "/k.yaml",
    "jobs",
    "out/r.a.json",
  ]);
  const b = clusterConfig({ ...OPTS, report: "out/report" }, SPEC, "b");
  assert.deepEqual([b.context, b.kubeconfig, b.namespace, b.report], [
    "b",
    "/f/b.yaml",
    "ops",
    "out/report.b",
  ]);
});

Deno.test("clusterConfig gives a cluster its own Prometheus for the gates", () => {
  const spec = parseFleet(
    "stages: [{name: s, clusters: [a, b]}]\nclusters: {b: {gatePrometheusUrl: 'http://b:9090'}}",
    "f",
  );
  const gate = {
    url: "http://all:9090",
    queries: ["up == 0"],
    intervalSecs: 30,
    onBreach: "pause",
  };
  const opts = { ...OPTS, gate } as RunConfig;
  assert.equal(clusterConfig(opts, spec, "a").gate?.url, "http://all:9090");
  assert.equal(clusterConfig(opts, spec, "b").gate?.url, "http://b:9090");
  assert.deepEqual(clusterConfig(opts, spec, "b").gate?.queries, ["up == 0"]);
  assert.throws(() => clusterConfig(OPTS, spec, "b"), /cluster b: gatePrometheusUrl replaces/);
});

Deno.test("fleetOrder says the stages, their clusters, soaks and approvals in one line", () => {
  const spec = parseFleet(
    `stages:
  - {name: one, clusters: [a], soakSecs: 30}
  - {name: two, clusters: [b, c], approval: true, soakSecs: 9}
`,
    "f",
  );
  assert.equal(
    fleetOrder(spec),
    "stage one: a, then a soak of 30 s; stage two (after approval): b, c",
  );
});

/** One cluster of fake ConfigMaps whose pre-flight allows everything. */
function leaseMember(name: string, api: FakeConfigMaps): Member {
  const kube = {
    serverClockOffsetMs: 0,
    request: (v: string, m: string, p: string, b?: unknown) =>
      p === SELF_SUBJECT_ACCESS_REVIEWS
        ? Promise.resolve({ status: { allowed: true } })
        : api.request(v, m, p, b),
    get: async (p: string) => {
      try {
        return await api.request("get", "GET", p);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) return undefined;
        throw e;
      }
    },
  } as unknown as Kube;
  const log = { info() {}, warn() {}, error() {} } as unknown as Logger;
  return { name, kube, log, key: { namespace: "ops", prefix: "drv", templateHash: "h" } } as Member;
}

Deno.test("a fleet process refused by a live lease exits 3, not 0: a second start in CI fails loudly", async () => {
  const api = new FakeConfigMaps();
  const other = {
    holder: "bob@other pid 7",
    holderId: "bob",
    host: "other-host",
    pid: "7",
    fleet: "f.yaml",
    renewedAt: new Date().toISOString(),
    durationSecs: String(LEASE_SECS),
  };
  await api.request("create", "POST", "/api/v1/namespaces/ops/configmaps", {
    metadata: { name: leaseName("drv"), namespace: "ops" },
    data: other,
  });
  const said: string[] = [];
  const say = (m: string) => void said.push(m);
  const log = { info: say, warn: say, error: say } as unknown as Logger;
  const env = {
    log,
    signal: new AbortController().signal,
    errorCode: () => 3,
  } as unknown as FleetEnv;
  let ran = false;
  const out = await withLease(SPEC, [leaseMember("a", api)], env, () => {
    ran = true;
    return Promise.resolve(0);
  });
  assert.equal(ran, false, "the refused process rolls nothing out");
  assert.deepEqual(out, { yielded: 3 });
  assert.match(
    said.join("\n"),
    /fleet lease fleet-lease\.drv in cluster a is held by bob@other pid 7/,
  );
});

Deno.test("a cluster's run stops when the fleet's lease is lost, as on a signal: its context carries the fleet's signal", () => {
  const processSignal = new AbortController();
  const lost = new AbortController();
  const env = {
    signal: processSignal.signal,
    context: (_k: Kube, _l: Logger, signal = processSignal.signal) => ({ signal }),
  } as unknown as FleetEnv;
  const line = { hold: {}, stopped: () => {}, nothingToDo: () => {} } as unknown as Parameters<
    typeof clusterRunContext
  >[2];
  const fleetSignal = AbortSignal.any([processSignal.signal, lost.signal]);
  const ctx = clusterRunContext(
    env,
    leaseMember("a", new FakeConfigMaps()),
    line,
    () => {},
    fleetSignal,
  );
  // Another process took the lease over (ours expired in an outage): it now
  // runs these clusters, so a run of ours that went on would be a second one.
  lost.abort();
  assert.equal(ctx.signal.aborted, true, "the run goes on after the lease was lost");
});

Deno.test("fleet writes every --report: json=… and html=… from one fleet run, the JSON naming each cluster's JSON", () => {
  const written = new Map<string, string>();
  const io = {
    readFile: () => undefined,
    writeFile: (p: string, t: string) => written.set(p, t),
  } as unknown as RunContext;
  const log = { info() {}, warn() {}, error() {} } as unknown as Logger;
  const reports = [
    { path: "out/f.html", format: "html" as const },
    { path: "out/f.json", format: "json" as const },
  ];
  const opts = { ...OPTS, report: "out/f.html", reportFormat: "html", reports } as RunConfig;
  const ok = writeFleetReport(SPEC, opts, { exitCode: 0 }, new Map(), io, { log } as FleetEnv);
  assert.equal(ok, true);
  assert.deepEqual([...written.keys()].sort(), ["out/f.html", "out/f.json"]);
  const json = JSON.parse(written.get("out/f.json")!);
  assert.equal(json.clusters.a.reportFile, "out/f.a.json");
});

Deno.test("a cluster unreachable at start is one error line naming it and why (issue 26 item 5), exit 3", async () => {
  const stderr: string[] = [];
  const logger = (tag: string) =>
    ({
      info: (m: string) => void stderr.push(`${tag}${m}`),
      warn: (m: string) => void stderr.push(`${tag}warn: ${m}`),
      error: (m: string) => void stderr.push(`${tag}error: ${m}`),
    }) as unknown as Logger;
  const kube = (server: string) =>
    ({
      server,
      contextNamespace: undefined,
      close() {},
      request: () =>
        server.includes("gone")
          ? Promise.reject(
            new Error(`error sending request for url (${server}): connection refused`),
          )
          : Promise.resolve({ status: { userInfo: { username: "ci" } } }),
    }) as unknown as Kube;
  const env = {
    connect: (cfg: RunConfig) => Promise.resolve(kube(`https://${cfg.context}:6443`)),
    context: (k: Kube) => ({ kube: k, env: () => undefined, readFile: () => undefined }),
    // As main.ts does: the cause on the log it is given, and its exit code.
    errorCode: (e: unknown, log: Logger) => {
      log.error((e as Error).message);
      return 3;
    },
    logFor: (c: string) => logger(`[${c}] `),
    log: logger(""),
  } as unknown as FleetEnv;
  const template = { metadata: { name: "drv" } } as Parameters<typeof connectAll>[2];
  const out = await connectAll(["a", "gone"], OPTS, template, SPEC, env);
  assert.equal(out.code, 3);
  const errors = stderr.filter((l) => l.includes("error: "));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(
    errors[0],
    /fleet: cluster gone cannot be reached at start: .*connection refused.*; nothing was created in any cluster/,
  );
});

Deno.test("the fleet's pre-flight asks, before any cluster runs, for the run record by name and each approval stage's approval by name", async () => {
  // A Role that grants what each run asks (the record being optional to a
  // single run) but not the record or the approvals: the fleet counts a
  // cluster by its record and waits on the approvals, so it would roll out the
  // first stage and then stop (lost record) or fail (403 on the approval).
  const spec = parseFleet(
    "stages: [{name: canary, clusters: [a]}, {name: prod, clusters: [a2], approval: true}]",
    "/f/FLEET.yaml",
  );
  const asked: string[] = [];
  const member = (name: string, denied: string) => {
    const m = leaseMember(name, new FakeConfigMaps());
    const request = m.kube.request.bind(m.kube);
    m.kube = {
      ...m.kube,
      request: (v: string, meth: string, p: string, b?: unknown) => {
        if (p !== SELF_SUBJECT_ACCESS_REVIEWS) return request(v, meth, p, b);
        const a = (b as { spec: { resourceAttributes: Record<string, string> } }).spec
          .resourceAttributes;
        const need = `${a.verb} ${a.resource} ${a.name ?? "-"}`;
        asked.push(`${name}: ${need}`);
        return Promise.resolve({ status: { allowed: need !== denied } });
      },
    } as unknown as Kube;
    return m;
  };
  for (
    const [name, denied] of [["a", "update configmaps run-record.drv"], [
      "a2",
      "get configmaps fleet-approval.drv.prod",
    ]]
  ) {
    const env = {
      log: member(name, "").log,
      signal: new AbortController().signal,
      errorCode: () => 4,
    } as unknown as FleetEnv;
    let ran = false;
    const out = await withLease(spec, [member(name, denied)], env, () => {
      ran = true;
      return Promise.resolve(0);
    });
    assert.equal(ran, false, `${name}: the fleet ran lacking ${denied}`);
    assert.deepEqual(out, { yielded: 4 });
  }
  assert.ok(asked.includes("a: get configmaps run-record.drv"), asked.join("\n"));
  assert.ok(
    !asked.some((n) => n.startsWith("a: get configmaps fleet-approval")),
    "a is in no approval stage",
  );
});
