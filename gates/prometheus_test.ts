import assert from "node:assert/strict";
import {
  BadQueryError,
  describeSample,
  directGet,
  firing,
  measure,
  PrometheusUnreachable,
  proxyGet,
  viaApiServer,
} from "./prometheus.ts";
import { withServer } from "../testing/loopback.ts";

/** Prometheus's answers, as its HTTP API gives them. */
const vector = (result: unknown[]) =>
  Response.json({ status: "success", data: { resultType: "vector", result } });
const badData = (error: string) =>
  Response.json({ status: "error", errorType: "bad_data", error }, { status: 400 });

/** Serves `handler` on a loopback port as Prometheus would, for `fn`. */
async function prometheus(
  handler: (url: URL, req: Request) => Response,
  fn: (url: string, seen: Headers[]) => Promise<void>,
): Promise<void> {
  const seen: Headers[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    seen.push(new Headers(req.headers));
    return handler(new URL(req.url), req);
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`, seen);
  } finally {
    await server.shutdown();
  }
}

Deno.test("measure() is breached by a non-empty vector and names the query and the sample", async () => {
  await prometheus(
    (u) =>
      u.searchParams.get("query") === "up == 0"
        ? vector([{ metric: { __name__: "up", job: "web" }, value: [1, "0"] }])
        : vector([]),
    async (url) => {
      const { get } = directGet({ url, timeoutMs: 2000 });
      assert.equal(await measure(get, { queries: ["ok_query"] })(), undefined);
      assert.deepEqual(await measure(get, { queries: ["ok_query", "up == 0"] })(), {
        query: "up == 0",
        value: 'up{job="web"} 0',
      });
    },
  );
});

Deno.test("measure() names the query Prometheus rejected as bad_data (400)", async () => {
  await prometheus(
    () => badData('1:5: parse error: unexpected ")"'),
    async (url) => {
      const { get } = directGet({ url, timeoutMs: 2000 });
      const e = await measure(get, { queries: ["sum(up))"] })().catch((e) => e);
      assert.ok(e instanceof BadQueryError);
      assert.equal(e.query, "sum(up))");
      assert.match(e.message, /parse error/);
    },
  );
});

Deno.test("measure() refuses a query that returns a scalar: a gate's query is an alerting rule's expression", async () => {
  await prometheus(
    () => Response.json({ status: "success", data: { resultType: "scalar", result: [1, "1"] } }),
    async (url) => {
      const e = await measure(directGet({ url, timeoutMs: 2000 }).get, { queries: ["1"] })()
        .catch((e) => e);
      assert.ok(e instanceof BadQueryError);
      assert.match(e.message, /returns a scalar, not a vector/);
    },
  );
});

Deno.test("measure() is breached by a firing alert whose name matches, not a pending one", async () => {
  const alerts = [
    { labels: { alertname: "NodeDown" }, state: "pending", value: "1e+00" },
    { labels: { alertname: "DiskFull" }, state: "firing", value: "1e+00" },
  ];
  await prometheus(
    (u) =>
      u.pathname === "/api/v1/alerts"
        ? Response.json({ status: "success", data: { alerts } })
        : vector([]),
    async (url) => {
      const { get } = directGet({ url, timeoutMs: 2000 });
      assert.equal(await measure(get, { queries: [], alerts: "Node.*" })(), undefined);
      const b = await measure(get, { queries: [], alerts: "Disk.*|Node.*" })();
      assert.equal(b?.value, "firing: DiskFull (value 1e+00)");
      assert.match(b?.query ?? "", /ALERTS\{alertstate="firing",alertname=~"Disk\.\*\|Node\.\*"\}/);
    },
  );
});

Deno.test("firing() anchors the regex as PromQL does", () => {
  const a = [{ labels: { alertname: "NodeDownSoon" }, state: "firing" }];
  assert.equal(firing(a, "NodeDown").length, 0);
  assert.equal(firing(a, "NodeDown.*").length, 1);
});

Deno.test("directGet() reads the bearer token file again before every request", async () => {
  const dir = await Deno.makeTempDir();
  const file = `${dir}/token`;
  await Deno.writeTextFile(file, "first\n");
  try {
    await prometheus(() => vector([]), async (url, seen) => {
      const { get } = directGet({ url, bearerTokenFile: file, timeoutMs: 2000 });
      await get("/api/v1/query?query=up");
      await Deno.writeTextFile(file, "rotated");
      await get("/api/v1/query?query=up");
      assert.deepEqual(seen.map((h) => h.get("authorization")), [
        "Bearer first",
        "Bearer rotated",
      ]);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an unreachable Prometheus, or a 503, is PrometheusUnreachable, never a breach", async () => {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const down = directGet({ url: `http://127.0.0.1:${port}`, timeoutMs: 1000 }).get;
  await assert.rejects(measure(down, { queries: ["up"] })(), PrometheusUnreachable);
  await prometheus(() => new Response("overloaded", { status: 503 }), async (url) => {
    const e = await measure(directGet({ url, timeoutMs: 1000 }).get, { queries: ["up"] })()
      .catch((e) => e);
    assert.ok(e instanceof PrometheusUnreachable);
    assert.match(e.message, /HTTP 503: overloaded/);
  });
});

Deno.test("viaApiServer() knows the API server's service proxy URL from a Prometheus URL", () => {
  const api = "https://10.0.0.1:6443";
  assert.equal(viaApiServer(`${api}/api/v1/namespaces/mon/services/prom:9090/proxy`, api), true);
  assert.equal(viaApiServer(`${api}/api/v1/namespaces/mon/services/prom:9090/proxy/`, api), true);
  assert.equal(viaApiServer("https://prom.example:9090", api), false);
  assert.equal(
    viaApiServer("https://other:6443/api/v1/namespaces/mon/services/prom:9090/proxy", api),
    false,
  );
});

Deno.test("proxyGet() asks through the API server with the kubeconfig's credentials", async () => {
  await withServer(
    (req) => {
      const u = new URL(req.url);
      if (u.searchParams.get("query") === "bad(") return badData("parse error");
      return vector([{ metric: { job: "x" }, value: [1, "3"] }]);
    },
    async (kube, hits) => {
      const url = `${kube.server}/api/v1/namespaces/mon/services/prom:9090/proxy`;
      const get = proxyGet(kube, url);
      const b = await measure(get, { queries: ["up > 1"] })();
      assert.deepEqual(b, { query: "up > 1", value: '{job="x"} 3' });
      const u = new URL(hits[0].url);
      assert.equal(u.pathname, "/api/v1/namespaces/mon/services/prom:9090/proxy/api/v1/query");
      assert.equal(u.searchParams.get("query"), "up > 1");
      assert.equal(hits[0].headers.get("authorization"), "Bearer secret-token");
      await assert.rejects(measure(get, { queries: ["bad("] })(), BadQueryError);
    },
  );
});

Deno.test("describeSample() writes a sample as Prometheus shows it", () => {
  assert.equal(describeSample({ metric: {}, value: [0, "1"] }), "{} 1");
  assert.equal(describeSample({ metric: { __name__: "up" }, value: [0, "1"] }), "up 1");
});
