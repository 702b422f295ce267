import assert from "node:assert/strict";
import {
  type ApiError,
  ConfigError,
  Kube,
  STOP_GRACE_MS,
  type TableRow,
  type UnreachableNote,
} from "./client.ts";
import { status, withServer } from "../testing/loopback.ts";

/** Writes a kubeconfig for a port nobody listens on; returns its folder (file "config"). */
async function unreachableKubeconfig(): Promise<string> {
  const dir = await Deno.makeTempDir();
  // A port just closed, not a well-known one: Deno blocks some (9, discard)
  // before connecting, and the test is about a refused connection.
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await Deno.writeTextFile(
    `${dir}/config`,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`,
  );
  return dir;
}
Deno.test("Kube.request() honours Retry-After on 429 and counts the throttling", async () => {
  await withServer(
    (_req, n) =>
      n === 1
        ? status(429, "TooManyRequests", { headers: { "Retry-After": "1" } })
        : Response.json({ ok: true }),
    async (kube, hits) => {
      const started = Date.now();
      assert.deepEqual(await kube.request("get", "GET", "/api/v1/nodes/a"), { ok: true });
      assert.ok(Date.now() - started >= 1000, "waited the second the server asked for");
      assert.equal(hits.length, 2);
      assert.equal(kube.stats.throttled, 1);
      assert.equal(kube.stats.retries, 1);
      assert.equal(hits[0].headers.get("authorization"), "Bearer secret-token");
    },
  );
});

Deno.test("Kube counts a PodDisruptionBudget's 429 on an eviction apart from throttling", async () => {
  const refusal = () =>
    status(429, "TooManyRequests", {
      message: "Cannot evict pod as it would violate the pod's disruption budget.",
      causes: [{
        reason: "DisruptionBudget",
        message: "The disruption budget web needs 2 healthy pods",
      }],
    });
  await withServer(
    (_req, n) => (n === 1 ? refusal() : status(429, "TooManyRequests")),
    async (kube) => {
      const path = "/api/v1/namespaces/a/pods/p/eviction";
      // `once`: the drain, not the client, retries a budget's refusal.
      await assert.rejects(kube.request("create", "POST", path, {}, true));
      await assert.rejects(kube.request("create", "POST", path, {}, true));
      assert.equal(kube.stats.budgetRefusals, 1, "the budget's refusal");
      assert.equal(kube.stats.throttled, 1, "the 429 without the DisruptionBudget cause");
    },
  );
});

Deno.test("Kube.connect() leaves a user the fast path does not handle to client-node's KubeConfig", async () => {
  // Impersonation (`as`) is one of those; client-node sends the token as before.
  await withServer(
    () => Response.json({ ok: true }),
    async (kube, hits) => {
      assert.equal(kube.contextNamespace, "team");
      await kube.request("get", "GET", "/api/v1/nodes/a");
      assert.equal(hits[0].headers.get("authorization"), "Bearer other-token");
    },
    "{token: other-token, as: someone}",
  );
});

Deno.test("Kube.connect() sends basic auth of a username and password", async () => {
  await withServer(
    () => Response.json({ ok: true }),
    async (kube, hits) => {
      await kube.request("get", "GET", "/api/v1/nodes/a");
      assert.equal(hits[0].headers.get("authorization"), `Basic ${btoa("ann:pw")}`);
    },
    "{username: ann, password: pw}",
  );
});

Deno.test("Kube.request() retries 5xx and gives up on a 4xx that cannot heal", async () => {
  await withServer(
    (req, n) =>
      req.url.endsWith("/flaky") && n < 3
        ? status(503, "ServiceUnavailable")
        : req.url.endsWith("/flaky")
        ? Response.json({})
        : status(403, "Forbidden"),
    async (kube, hits) => {
      await kube.request("get", "GET", "/flaky");
      assert.equal(hits.length, 3);
      await assert.rejects(
        kube.request("create", "POST", "/apis/batch/v1/namespaces/x/jobs", {}),
        (e: ApiError) => e.status === 403 && e.verb === "create" && e.resource === "jobs",
      );
      assert.equal(hits.length, 4, "403 is not retried");
    },
  );
});

Deno.test("Kube.list() follows continue tokens and keeps the first page's resourceVersion", async () => {
  await withServer(
    (req) => {
      const url = new URL(req.url);
      const page = Number(url.searchParams.get("continue") || "0");
      assert.equal(url.searchParams.get("limit"), "2");
      const items = [{ n: page * 2 }, { n: page * 2 + 1 }];
      return Response.json({
        items,
        metadata: {
          resourceVersion: String(100 + page),
          continue: page < 2 ? String(page + 1) : "",
        },
      });
    },
    async (kube, hits) => {
      const { items, resourceVersion } = await kube.list<{ n: number }>("/api/v1/nodes", {}, 2);
      assert.deepEqual(items.map((i) => i.n), [0, 1, 2, 3, 4, 5]);
      assert.equal(resourceVersion, "100");
      assert.equal(hits.length, 3);
    },
  );
});

Deno.test("Kube.list() asks for metadata or table rows as kubectl does, and reads an empty page of either", async (t) => {
  // What the API server sends: a metadata list without items when none
  // match, table pages whose cells follow their own column definitions.
  const pages: Record<string, unknown[]> = {
    "as=PartialObjectMetadataList": [
      {
        kind: "PartialObjectMetadataList",
        metadata: { resourceVersion: "7", continue: "1" },
        items: [{ metadata: { name: "a" } }],
      },
      { kind: "PartialObjectMetadataList", metadata: { resourceVersion: "7" }, items: null },
    ],
    "as=Table": [
      {
        kind: "Table",
        metadata: { resourceVersion: "8", continue: "1" },
        columnDefinitions: [{ name: "Name" }, { name: "Status" }],
        rows: [{ cells: ["j1", "Complete"], object: { metadata: { name: "j1", uid: "u1" } } }],
      },
      {
        kind: "Table",
        metadata: { resourceVersion: "8" },
        columnDefinitions: [{ name: "Status" }, { name: "Name" }],
        rows: [{ cells: ["Failed", "j2"] }],
      },
      {
        kind: "Table",
        metadata: { resourceVersion: "9" },
        columnDefinitions: [{ name: "Name" }],
        rows: null,
      },
    ],
  };
  const accepts: string[] = [];
  const queries: string[] = [];
  const handler = (req: Request) => {
    const url = new URL(req.url);
    const accept = req.headers.get("accept")!;
    accepts.push(accept);
    queries.push(url.searchParams.get("includeObject") ?? "-");
    const form = Object.keys(pages).find((k) => accept.includes(k))!;
    const page = Number(url.searchParams.get("continue") || "0") +
      (url.searchParams.has("empty") ? 2 : 0);
    return Response.json(pages[form][page]);
  };
  await withServer(handler, async (kube) => {
    await t.step("metadata", async () => {
      const got = await kube.list<{ metadata: { name: string } }, string>(
        "/api/v1/nodes",
        {},
        1,
        (i) => i.metadata.name,
        undefined,
        "metadata",
      );
      assert.deepEqual(got.items, ["a"]);
      assert.equal(
        accepts.at(-1),
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
      );
    });
    await t.step("table rows, with their metadata by default and without when asked", async () => {
      const got = await kube.list<TableRow>(
        "/apis/batch/v1/namespaces/x/jobs",
        {},
        1,
        undefined,
        undefined,
        "table",
      );
      assert.deepEqual(got.items, [
        { metadata: { name: "j1", uid: "u1" }, cells: { Name: "j1", Status: "Complete" } },
        { metadata: {}, cells: { Name: "j2", Status: "Failed" } },
      ]);
      assert.equal(accepts.at(-1), "application/json;as=Table;g=meta.k8s.io;v=v1");
      assert.deepEqual(queries.slice(-2), ["Metadata", "Metadata"]);
      const none = await kube.list<TableRow>(
        "/apis/batch/v1/namespaces/x/jobs",
        { includeObject: "None", empty: "1" },
        1,
        undefined,
        undefined,
        "table",
      );
      assert.deepEqual(none.items, []);
      assert.equal(queries.at(-1), "None");
    });
  });
});

Deno.test("Kube.watch() yields events line by line and ends when the server ends the watch", async () => {
  await withServer(
    () => {
      const body = [
        { type: "ADDED", object: { metadata: { name: "a", resourceVersion: "2" } } },
        { type: "BOOKMARK", object: { metadata: { resourceVersion: "3" } } },
      ].map((e) => JSON.stringify(e) + "\n").join("");
      // Split mid-line to prove lines are reassembled across chunks.
      const stream = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(body.slice(0, 30)));
          c.enqueue(new TextEncoder().encode(body.slice(30)));
          c.close();
        },
      });
      return new Response(stream);
    },
    async (kube, hits) => {
      const events = [];
      for await (
        const ev of kube.watch(
          "/apis/batch/v1/namespaces/x/jobs",
          {},
          "1",
          new AbortController().signal,
        )
      ) {
        events.push(ev.type);
      }
      assert.deepEqual(events, ["ADDED", "BOOKMARK"]);
      const q = new URL(hits[0].url).searchParams;
      assert.equal(q.get("watch"), "1");
      assert.equal(q.get("allowWatchBookmarks"), "true");
      assert.equal(q.get("resourceVersion"), "1");
    },
  );
});

Deno.test("Kube.watch() reassembles a character split across chunks and several lines in one", async () => {
  await withServer(
    () => {
      const bytes = new TextEncoder().encode(
        [
          { type: "ADDED", object: { metadata: { name: "nœud-é", resourceVersion: "2" } } },
          { type: "MODIFIED", object: { metadata: { name: "b", resourceVersion: "3" } } },
          { type: "DELETED", object: { metadata: { name: "c", resourceVersion: "4" } } },
        ].map((e) => JSON.stringify(e) + "\n").join(""),
      );
      // Cut inside "œ" (two bytes), then one chunk with the rest: two whole lines and a part.
      const cut = bytes.indexOf(0xc5) + 1;
      const stream = new ReadableStream({
        start(c) {
          c.enqueue(bytes.slice(0, cut));
          c.enqueue(bytes.slice(cut, bytes.length - 5));
          c.enqueue(bytes.slice(bytes.length - 5));
          c.close();
        },
      });
      return new Response(stream);
    },
    async (kube) => {
      const events = [];
      for await (
        const ev of kube.watch<{ metadata: { name: string } }>(
          "/apis/batch/v1/namespaces/x/jobs",
          {},
          "1",
          new AbortController().signal,
        )
      ) {
        events.push(`${ev.type} ${ev.object.metadata.name}`);
      }
      assert.deepEqual(events, ["ADDED nœud-é", "MODIFIED b", "DELETED c"]);
    },
  );
});

Deno.test("Kube.watch() throws, not ends, when the stream stays silent past the server's bound", async () => {
  // One event, then nothing and no end: a frozen API server (SIGSTOP) or a
  // dead path. Ending quietly would read as the server closing the watch.
  await withServer(
    () =>
      new Response(
        new ReadableStream({
          start(c) {
            const ev = { type: "ADDED", object: { metadata: { name: "a", resourceVersion: "2" } } };
            c.enqueue(new TextEncoder().encode(JSON.stringify(ev) + "\n"));
          },
        }),
      ),
    async (kube) => {
      const events: string[] = [];
      // timeoutSeconds 1: silence counts after 1 s plus the 15 s of slack.
      const watch = kube.watch(
        "/apis/batch/v1/namespaces/x/jobs",
        {},
        "1",
        new AbortController().signal,
        1,
      );
      await assert.rejects(
        async () => {
          for await (const ev of watch) events.push(ev.type);
        },
        (e: ApiError) =>
          e.status === 0 && e.reason === "Timeout" && /silent for 16 s/.test(e.message),
      );
      assert.deepEqual(events, ["ADDED"]);
    },
  );
});

Deno.test("Kube.request() reports an unreachable server as status 0 after its retry budget", async () => {
  const dir = await unreachableKubeconfig();
  const kube = await Kube.connect({
    kubeconfig: `${dir}/config`,
    retry: { requestTimeoutMs: 500, budgetMs: 300, baseDelayMs: 10, maxDelayMs: 20 },
  });
  try {
    await assert.rejects(
      kube.request("list", "GET", "/api/v1/nodes"),
      // Deno's own "fetch failed" says nothing; its cause says why.
      (e: ApiError) =>
        e.status === 0 && /unreachable: .*Connection refused/.test(e.message) &&
        !/fetch failed/.test(e.message),
    );
    assert.ok(kube.stats.retries > 0);
  } finally {
    kube.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Kube.connect() names a missing kubeconfig and an unknown context", async () => {
  await assert.rejects(
    Kube.connect({ kubeconfig: "/nonexistent/kubeconfig" }),
    (e: Error) => e instanceof ConfigError && /\/nonexistent\/kubeconfig/.test(e.message),
  );
  const dir = await unreachableKubeconfig();
  await assert.rejects(
    Kube.connect({ kubeconfig: `${dir}/config`, context: "nope" }),
    (e: Error) => e instanceof ConfigError && /"nope"/.test(e.message) && /ctx/.test(e.message),
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("Kube.request() stops retrying as soon as the run is stopped", async () => {
  const dir = await unreachableKubeconfig();
  const stop = new AbortController();
  const kube = await Kube.connect({
    kubeconfig: `${dir}/config`,
    retry: { requestTimeoutMs: 500, budgetMs: 60_000, baseDelayMs: 1000, maxDelayMs: 8000 },
    signal: stop.signal,
  });
  try {
    const started = Date.now();
    setTimeout(() => stop.abort(), 300);
    await assert.rejects(
      kube.request("list", "GET", "/api/v1/nodes"),
      (e: ApiError) => e.status === 0,
    );
    assert.ok(Date.now() - started < 3000, `gave up ${Date.now() - started} ms after the start`);
  } finally {
    kube.close();
    await Deno.remove(dir, { recursive: true });
  }
});

const TOKEN = "{token: secret-token}";

Deno.test("Kube.request() keeps at most --kube-api-concurrency requests in flight, on as many connections", async () => {
  let inFlight = 0;
  let peak = 0;
  await withServer(
    async () => {
      peak = Math.max(peak, ++inFlight);
      await new Promise((r) => setTimeout(r, 10));
      inFlight--;
      return Response.json({ ok: true });
    },
    async (kube, hits) => {
      await Promise.all(
        Array.from({ length: 200 }, (_, i) => kube.request("delete", "DELETE", `/x/${i}`)),
      );
      assert.equal(hits.length, 200);
      assert.equal(peak, 4, "the server saw the bound, and the bound was used");
      const connections = new Set(hits.map((h) => h.port)).size;
      assert.ok(connections <= 4, `${connections} connections for 200 requests: kept alive`);
    },
    TOKEN,
    { concurrency: 4, qps: 0, burst: 1 },
  );
});

Deno.test("Kube.request() waits out a Retry-After without holding its slot", async () => {
  await withServer(
    (req, n) =>
      n === 1 && req.url.endsWith("/slow")
        ? status(429, "TooManyRequests", { headers: { "Retry-After": "1" } })
        : Response.json({ ok: true }),
    async (kube) => {
      const started = Date.now();
      const slow = kube.request("get", "GET", "/slow").then(() => Date.now() - started);
      await new Promise((r) => setTimeout(r, 100));
      const fast = await kube.request("get", "GET", "/fast").then(() => Date.now() - started);
      assert.ok(fast < 900, `the other request went through during the wait (${fast} ms)`);
      assert.ok(await slow >= 1000, "the throttled one waited at least Retry-After");
    },
    TOKEN,
    { concurrency: 1, qps: 0, burst: 1 },
  );
});

Deno.test("Kube.request() sends at most --kube-api-qps a second after a burst", async () => {
  await withServer(
    () => Response.json({ ok: true }),
    async (kube, hits) => {
      const started = Date.now();
      await Promise.all(Array.from({ length: 12 }, (_, i) => kube.request("get", "GET", `/${i}`)));
      const took = Date.now() - started;
      // A burst of 2 at once, then 10 more at 20 a second: 0.5 s.
      assert.ok(took >= 450 && took < 1500, `12 requests took ${took} ms`);
      assert.equal(hits.length, 12);
    },
    TOKEN,
    { concurrency: 16, qps: 20, burst: 2 },
  );
});

/** Resolves how many ms `p` took to settle, whether it resolved or rejected. */
async function settleMs(p: Promise<unknown>): Promise<{ ms: number; error?: ApiError }> {
  const started = Date.now();
  try {
    await p;
    return { ms: Date.now() - started };
  } catch (e) {
    return { ms: Date.now() - started, error: e as ApiError };
  }
}

Deno.test("Kube.list() rejects at once when its signal aborts while the API server is silent", async () => {
  const hold = Promise.withResolvers<void>();
  let sent = 0;
  await withServer(async () => {
    sent++;
    await hold.promise;
    return Response.json({ items: [], metadata: { resourceVersion: "1" } });
  }, async (kube) => {
    try {
      const abort = new AbortController();
      const listed = settleMs(kube.list("/api/v1/nodes", {}, 10, undefined, abort.signal));
      while (sent === 0) await new Promise((r) => setTimeout(r, 5));
      abort.abort();
      const { ms, error } = await listed;
      assert.ok(ms < 200, `rejected ${ms} ms after the abort (the request timeout is 2000 ms)`);
      assert.equal(error?.status, 0);
      assert.equal(error?.reason, "Stopped");
      assert.equal(kube.stats.retries, 0, "an aborted read is not retried");
    } finally {
      hold.resolve();
    }
  });
});

Deno.test("Kube on a stop: a read in flight ends at once, a write in flight once the server stayed silent 3 s", async () => {
  const hold = Promise.withResolvers<void>();
  let sent = 0;
  const stop = new AbortController();
  await withServer(
    async () => {
      sent++;
      await hold.promise;
      return Response.json({});
    },
    async (kube) => {
      try {
        const read = settleMs(kube.request("get", "GET", "/api/v1/nodes/a"));
        const write = settleMs(
          kube.request("create", "POST", "/apis/batch/v1/namespaces/x/jobs", {}),
        );
        while (sent < 2) await new Promise((r) => setTimeout(r, 5));
        stop.abort();
        const r = await read;
        assert.ok(r.ms < 200, `the read ended ${r.ms} ms after the stop`);
        assert.equal(r.error?.reason, "Stopped");
        const w = await write;
        assert.equal(w.error?.status, 0, "cut, not answered");
        assert.ok(
          w.ms >= STOP_GRACE_MS - 50,
          `the write was cut after ${w.ms} ms, before the grace`,
        );
        // Sent after the cut: the server stayed silent, the shutdown does not wait for it again.
        const late = await settleMs(kube.request("patch", "PATCH", "/api/v1/nodes/a", []));
        assert.ok(late.ms < 200, `a request after the cut took ${late.ms} ms`);
      } finally {
        hold.resolve();
      }
    },
    undefined,
    undefined,
    {
      signal: stop.signal,
      retry: { requestTimeoutMs: 20_000, budgetMs: 60_000, baseDelayMs: 10, maxDelayMs: 50 },
    },
  );
});

Deno.test("Kube on a stop: the shutdown's requests go on while the API server answers", async () => {
  const stop = new AbortController();
  stop.abort();
  await withServer(
    async () => {
      await new Promise((r) => setTimeout(r, 400));
      return Response.json({});
    },
    async (kube) => {
      // Twelve sequential answers of 400 ms: 4.8 s in all, past the grace, each answered.
      for (let i = 0; i < 12; i++) await kube.request("patch", "PATCH", "/api/v1/nodes/a", []);
    },
    undefined,
    undefined,
    { signal: stop.signal },
  );
});

Deno.test("Kube says at once which API server does not answer and until when it retries", async () => {
  const dir = await unreachableKubeconfig();
  const notes: { note: UnreachableNote; at: number }[] = [];
  const kube = await Kube.connect({
    kubeconfig: `${dir}/config`,
    retry: { requestTimeoutMs: 500, budgetMs: 60_000, baseDelayMs: 10, maxDelayMs: 100 },
    apiWaitMs: 1500,
    onUnreachable: (note) => notes.push({ note, at: Date.now() }),
  });
  try {
    const started = Date.now();
    const r = await settleMs(kube.request("create", "POST", "/apis/x/v1/things", {}));
    assert.equal(r.error?.status, 0);
    assert.equal(notes.length, 1, "said once");
    assert.ok(notes[0].at - started < 100, `said ${notes[0].at - started} ms after the start`);
    assert.equal(notes[0].note.server, kube.server);
    assert.match(notes[0].note.detail, /Connection refused/);
    assert.doesNotMatch(notes[0].note.detail, /^Cannot|unreachable:/);
    assert.ok(Math.abs(notes[0].note.until - (started + 1500)) < 100, "the deadline is the wait's");
    assert.ok(r.ms >= 1300 && r.ms < 2500, `gave up after ${r.ms} ms, not the 60 s budget`);
    // A later request shares the deadline: the wait is for the first answer, not per request.
    const again = await settleMs(kube.request("get", "GET", "/api/v1/nodes"));
    assert.ok(again.ms < 300, `a later request waited ${again.ms} ms more`);
    assert.equal(notes.length, 1);
  } finally {
    kube.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Kube with a wait of 0 fails the first contact at once, as kubectl does", async () => {
  const dir = await unreachableKubeconfig();
  let said = 0;
  const kube = await Kube.connect({
    kubeconfig: `${dir}/config`,
    apiWaitMs: 0,
    onUnreachable: () => said++,
  });
  try {
    const r = await settleMs(kube.request("get", "GET", "/api/v1/nodes"));
    assert.equal(r.error?.status, 0);
    assert.match(r.error!.message, /unreachable: .*Connection refused/);
    assert.ok(r.ms < 1000, `failed after ${r.ms} ms`);
    assert.equal(kube.stats.retries, 0);
    assert.equal(said, 0, "no retry to announce: the error says it");
  } finally {
    kube.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Kube with a wait of 0 still retries an outage once the API server has answered", async () => {
  await withServer(
    (_req, n) => n === 2 ? status(503, "ServiceUnavailable") : Response.json({}),
    async (kube, hits) => {
      await kube.request("get", "GET", "/api/v1/nodes/a");
      await kube.request("get", "GET", "/api/v1/nodes/a");
      assert.equal(hits.length, 3, "the 503 was retried");
    },
    undefined,
    undefined,
    { apiWaitMs: 0 },
  );
});

const JOBS = "/apis/batch/v1/namespaces/x/jobs";

Deno.test("Kube.request() sends a create answered 504 or 5xx once and marks it uncertain", async (t) => {
  for (const code of [504, 500, 503]) {
    await t.step(`a POST answered ${code}: one hit, uncertain`, async () => {
      await withServer(() => status(code, "Timeout"), async (kube, hits) => {
        await assert.rejects(
          kube.request("create", "POST", JOBS, {}),
          (e: ApiError) => e.status === code && e.uncertain === true,
        );
        assert.equal(hits.length, 1, "the create was not re-sent blind");
      });
    });
  }
  await t.step("a GET answered 504 is still retried", async () => {
    await withServer(
      (_req, n) => n === 1 ? status(504, "Timeout") : Response.json({ ok: true }),
      async (kube, hits) => {
        assert.deepEqual(await kube.request("get", "GET", `${JOBS}/j`), { ok: true });
        assert.equal(hits.length, 2);
      },
    );
  });
  await t.step(
    "a POST answered 429 or 503 with Retry-After is sent again (not applied)",
    async () => {
      await withServer(
        (_req, n) =>
          n === 1
            ? status(429, "TooManyRequests", { headers: { "Retry-After": "0" } })
            : n === 2
            ? status(503, "ServiceUnavailable", { headers: { "Retry-After": "0" } })
            : Response.json({ ok: true }),
        async (kube, hits) => {
          assert.deepEqual(await kube.request("create", "POST", JOBS, {}), { ok: true });
          assert.equal(hits.length, 3);
        },
      );
    },
  );
  await t.step(
    "an Event and a ConfigMap create are still retried on 5xx: a resend doubles no Job",
    async () => {
      // The exit latch and the run record are ConfigMaps by a fixed name (a
      // resend meets 409, taken as done); an Event twice is shown twice, and
      // client-go's recorder re-sends one up to 12 times.
      await withServer(
        (_req, n) => n % 2 === 1 ? status(503, "ServiceUnavailable") : Response.json({ ok: true }),
        async (kube, hits) => {
          await kube.request("create", "POST", "/api/v1/namespaces/default/events", {});
          await kube.request("create", "POST", "/api/v1/namespaces/x/configmaps", {});
          assert.equal(hits.length, 4);
        },
      );
    },
  );
  await t.step("a DELETE, a PATCH and a dry-run create are still retried on 5xx", async () => {
    await withServer(
      (_req, n) => n % 2 === 1 ? status(500, "InternalError") : Response.json({ ok: true }),
      async (kube, hits) => {
        await kube.request("delete", "DELETE", `${JOBS}/j`, {});
        await kube.request("patch", "PATCH", "/api/v1/nodes/a", []);
        await kube.request("create", "POST", `${JOBS}?dryRun=All`, {});
        assert.equal(hits.length, 6);
      },
    );
  });
});

Deno.test("Kube.request() sends a create cut off after it went out once, uncertain; a refused one again", async () => {
  // A raw server that reads the request and closes without an answer.
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  let requests = 0;
  const serving = (async () => {
    for await (const conn of l) {
      await conn.read(new Uint8Array(65536)).catch(() => null);
      requests++;
      conn.close();
    }
  })();
  const dir = await Deno.makeTempDir();
  const config = (p: number) =>
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${p}"}}]
users: [{name: u, user: {}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`;
  await Deno.writeTextFile(`${dir}/config`, config(port));
  const retry = { requestTimeoutMs: 1000, budgetMs: 600, baseDelayMs: 10, maxDelayMs: 20 };
  const kube = await Kube.connect({ kubeconfig: `${dir}/config`, retry });
  const closedDir = await unreachableKubeconfig();
  const refused = await Kube.connect({ kubeconfig: `${closedDir}/config`, retry });
  try {
    await assert.rejects(
      kube.request("create", "POST", JOBS, {}),
      (e: ApiError) => e.status === 0 && e.uncertain === true && !e.unsent,
    );
    assert.equal(requests, 1, "the create was sent once");
    await assert.rejects(
      refused.request("create", "POST", JOBS, {}),
      (e: ApiError) => e.status === 0 && e.unsent === true && !e.uncertain,
    );
    assert.ok(refused.stats.retries > 0, "a connection refused sent nothing: tried again");
  } finally {
    kube.close();
    refused.close();
    l.close();
    await serving.catch(() => {});
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(closedDir, { recursive: true });
  }
});

Deno.test("Kube.serverNow() is the API server's clock by its latest Date header, moved on locally", async () => {
  const ahead = 3_600_000; // the server's clock is an hour ahead of this one
  await withServer(
    () => Response.json({}, { headers: { date: new Date(Date.now() + ahead).toUTCString() } }),
    async (kube) => {
      assert.equal(kube.serverNow(), undefined, "no answer yet");
      await kube.request("get", "GET", "/api/v1/namespaces/a/configmaps/x");
      const skew = kube.serverNow()! - Date.now();
      // An HTTP date is to the second; the midpoint is taken.
      assert.ok(Math.abs(skew - ahead) <= 1_000, `${skew} ms ahead, not ${ahead}`);
    },
  );
});

Deno.test("Kube.serverClockOffsetMs is a lower bound of the API server's clock minus this one's, from its Date headers", async () => {
  await withServer(
    () =>
      Response.json({ ok: true }, {
        headers: { Date: new Date(Date.now() - 30_000).toUTCString() },
      }),
    async (kube) => {
      assert.equal(kube.serverClockOffsetMs, undefined, "unknown before an answer");
      await kube.request("get", "GET", "/api/v1/nodes/a");
      await kube.request("get", "GET", "/api/v1/nodes/b");
      const offset = kube.serverClockOffsetMs!;
      // The header is in whole seconds, truncated: at most a second and the
      // answer's way under the truth, never over it.
      assert.ok(offset <= -29_000 && offset > -31_500, `offset ${offset}`);
    },
  );
});
