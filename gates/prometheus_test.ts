import assert from "node:assert/strict";
import {
  answerOf,
  BadQueryError,
  describeSample,
  directGet,
  firing,
  measure,
  noDataOf,
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
      assert.equal((await measure(get, { queries: ["ok_query"] })()).breach, undefined);
      assert.deepEqual((await measure(get, { queries: ["ok_query", "up == 0"] })()).breach, {
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
      assert.equal((await measure(get, { queries: [], alerts: "Node.*" })()).breach, undefined);
      const b = (await measure(get, { queries: [], alerts: "Disk.*|Node.*" })()).breach;
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
      const b = (await measure(get, { queries: ["up > 1"] })()).breach;
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

/** A Prometheus whose selectors' presence query answers `present` (indices), every other query `other`. */
function withPresence(present: number[], other: () => Response) {
  return (u: URL) =>
    u.searchParams.get("query")?.includes("gate_selector")
      ? vector(present.map((i) => ({ metric: { gate_selector: String(i) }, value: [1, "1"] })))
      : other();
}

Deno.test({
  name: "measure() and answerOf() classify every answer: clean, no data, rejected, outage",
  async fn(t) {
    const q = { queries: ["a > 0", "b > 0"] };
    const cases: [
      string,
      (u: URL) => Response,
      RegExp | "clean" | typeof BadQueryError | typeof PrometheusUnreachable,
    ][] = [
      [
        "every selector matches and the vectors are empty: clean",
        withPresence([0, 1], () => vector([])),
        "clean",
      ],
      [
        "an empty vector over a selector that matches nothing: no data, the selector named",
        withPresence([0], () => vector([])),
        /^selector b of query "b > 0" matches no series$/,
      ],
      [
        "an answer with warnings (partial, Thanos/Mimir): no data",
        withPresence(
          [0, 1],
          () =>
            Response.json({
              status: "success",
              warnings: ["store gw-1 unreachable"],
              data: { resultType: "vector", result: [] },
            }),
        ),
        /^a partial answer \(warnings: store gw-1 unreachable\)$/,
      ],
      [
        "PromQL's own annotations are no partial answer: clean",
        withPresence([0, 1], () =>
          Response.json({
            status: "success",
            warnings: ['PromQL warning: bucket label "le" is missing or has a malformed value'],
            data: { resultType: "vector", result: [] },
          })),
        "clean",
      ],
      ["400 bad_data: rejected", () => badData("parse error"), BadQueryError],
      [
        "422 execution: rejected, not an outage",
        () =>
          Response.json({
            status: "error",
            errorType: "execution",
            error: "many-to-many matching not allowed",
          }, { status: 422 }),
        BadQueryError,
      ],
      ["500: an outage", () => new Response("boom", { status: 500 }), PrometheusUnreachable],
      [
        "503 timeout: an outage",
        () =>
          Response.json({ status: "error", errorType: "timeout", error: "query timed out" }, {
            status: 503,
          }),
        PrometheusUnreachable,
      ],
    ];
    for (const [what, handler, want] of cases) {
      await t.step(what, async () => {
        await prometheus(handler, async (url) => {
          const got = await measure(directGet({ url, timeoutMs: 2000 }).get, q)().catch((e) => e);
          if (want === BadQueryError || want === PrometheusUnreachable) {
            assert.ok(got instanceof want, String(got));
          } else if (want === "clean") {
            assert.equal(noDataOf(got), undefined);
            assert.equal(got.breach, undefined);
          } else assert.match(noDataOf(got) ?? "", want as RegExp);
        });
      });
    }
    await t.step("a request that times out: an outage", async () => {
      await prometheus(() => new Response(new ReadableStream()), async (url) => {
        const got = await measure(directGet({ url, timeoutMs: 200 }).get, q)().catch((e) => e);
        assert.ok(got instanceof PrometheusUnreachable, String(got));
      });
    });
    await t.step("a 422 keeps Prometheus's words and status", () => {
      const e = (() => {
        try {
          answerOf("query", { status: 422, body: { status: "error", error: "too many samples" } });
        } catch (e) {
          return e;
        }
      })();
      assert.ok(e instanceof BadQueryError);
      assert.equal(e.status, 422);
      assert.match(e.message, /HTTP 422: too many samples/);
    });
  },
});

Deno.test("measure() checks no selector meant to be empty: absent(), ALERTS, --gate-allow-empty", async () => {
  const asked: string[] = [];
  await prometheus((u) => {
    asked.push(u.searchParams.get("query") ?? "");
    return withPresence([], () => vector([]))(u);
  }, async (url) => {
    const m = await measure(directGet({ url, timeoutMs: 2000 }).get, {
      queries: ["absent(x)", 'ALERTS{alertname="A"}', "y > 0", "z > 0 or w"],
      allowEmpty: ["y > 0", "w"],
    })();
    assert.deepEqual(m.dark, [{ query: "z > 0 or w", selector: "z" }]);
    assert.equal(asked.filter((q) => q.includes("gate_selector")).length, 1, "one presence query");
  });
});

Deno.test("measure({ first }) finds a --gate-alerts pattern that names no alerting rule", async () => {
  const rules = { groups: [{ rules: [{ name: "NodeDown", type: "alerting" }] }] };
  await prometheus(
    (u) =>
      u.pathname === "/api/v1/rules"
        ? Response.json({ status: "success", data: rules })
        : Response.json({ status: "success", data: { alerts: [] } }),
    async (url) => {
      const { get } = directGet({ url, timeoutMs: 2000 });
      assert.deepEqual(
        (await measure(get, { queries: [], alerts: "Node.*" })({ first: true })).dark,
        [],
      );
      const m = await measure(get, { queries: [], alerts: "Nod" })({ first: true });
      assert.match(noDataOf(m) ?? "", /--gate-alerts "Nod" names no alerting rule/);
    },
  );
});

Deno.test("measure({ first }) finds an ALERTS selector of a --gate-query whose alertname names no alerting rule: a typo would never fire", async () => {
  const rules = { groups: [{ rules: [{ name: "NodeDown", type: "alerting" }] }] };
  await prometheus(
    (u) =>
      u.pathname === "/api/v1/rules"
        ? Response.json({ status: "success", data: rules })
        : withPresence([], () => vector([]))(u),
    async (url) => {
      const { get } = directGet({ url, timeoutMs: 2000 });
      const ok = [
        'ALERTS{alertname="NodeDown", alertstate="firing"}',
        'ALERTS{alertname=~"Node.*"}',
        'ALERTS{severity="page"}',
      ];
      assert.deepEqual((await measure(get, { queries: ok })({ first: true })).dark, []);
      const q = 'ALERTS{alertname="NodeDwn", alertstate="firing"}';
      const m = await measure(get, { queries: [q] })({ first: true });
      assert.match(noDataOf(m) ?? "", /alertname "NodeDwn" .*names no alerting rule/);
      assert.deepEqual(
        (await measure(get, { queries: [q], allowEmpty: [q] })({ first: true })).dark,
        [],
        "--gate-allow-empty exempts it",
      );
    },
  );
});

Deno.test("answerOf(): a 401, 403 or 404 is an outage whose words say it does not heal by waiting alone, and what to fix", async (t) => {
  const cases: [number, RegExp][] = [
    [401, /HTTP 401: .*heals only once the token is fixed.*--gate-bearer-token-file/],
    [403, /HTTP 403: .*heals only once the token is fixed.*services\/proxy get/],
    [404, /HTTP 404: .*heals only once .*--gate-prometheus-url/],
  ];
  for (const [status, want] of cases) {
    await t.step(String(status), () => {
      assert.throws(() => answerOf("query", { status, body: "no" }), (e: unknown) => {
        assert.ok(e instanceof PrometheusUnreachable);
        assert.match(e.message, want);
        return true;
      });
    });
  }
});
