import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { type Departure, Informer, type InformerNote } from "./informer.ts";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { Kube, WatchEvent } from "./client.ts";
import { status, withServer } from "../testing/loopback.ts";

/** Real time, a hundred times faster: backoffs and poll intervals in milliseconds. */
const T0 = Date.now();
const FAST: Clock = {
  now: () => T0 + (Date.now() - T0) * 100,
  sleep: (ms, s) => SYSTEM_CLOCK.sleep(ms / 100, s),
};
const PATH = "/apis/batch/v1/namespaces/ns/jobs";

function job(name: string, rv: number): V1Job {
  return { metadata: { name, resourceVersion: String(rv), uid: `uid-${name}` } };
}

function list(items: V1Job[], rv: number): Response {
  return Response.json({ items, metadata: { resourceVersion: String(rv) } });
}

/** A watch answer: the events, one JSON line each, then the end of the stream after `holdMs`. */
function events(evs: { type: string; object: unknown }[], holdMs = 0): Response {
  const body = new ReadableStream<Uint8Array>({
    async start(c) {
      for (const ev of evs) c.enqueue(new TextEncoder().encode(JSON.stringify(ev) + "\n"));
      await new Promise((r) => setTimeout(r, holdMs));
      c.close();
    },
  });
  return new Response(body, { headers: { "Content-Type": "application/json" } });
}

interface Seen {
  upserts: string[];
  deletes: [string, Departure][];
  notes: InformerNote["state"][];
}

function informer(kube: Kube, seen: Seen): Informer<V1Job> {
  return new Informer<V1Job>({
    source: {
      list: (signal) => kube.list<V1Job>(PATH, {}, 500, undefined, signal),
      watch: (rv, signal) => kube.watch<V1Job>(PATH, {}, rv, signal),
    },
    clock: FAST,
    onUpsert: (j) => seen.upserts.push(j.metadata!.name!),
    onDelete: (j, how) => seen.deletes.push([j.metadata!.name!, how]),
    onNote: (n) => seen.notes.push(n.state),
  });
}

async function until(what: string, ok: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const isWatch = (req: Request) => new URL(req.url).searchParams.get("watch") === "1";
const rvOf = (req: Request) => new URL(req.url).searchParams.get("resourceVersion");

/**
 * An API server whose LISTs answer Job a at resourceVersion 10 and whose
 * watches answer `watch(n)`, n counting from 1; `count` says how many of each came.
 */
function listAThenWatch(watch: (n: number) => Response) {
  const count = { lists: 0, watches: 0 };
  const handler = (req: Request): Response => {
    if (!isWatch(req)) {
      count.lists++;
      return list([job("a", 5)], 10);
    }
    return watch(++count.watches);
  };
  return { count, handler };
}

Deno.test("Informer watches from the list's resourceVersion, follows bookmarks and keeps the cache", async () => {
  const watchedFrom: (string | null)[] = [];
  await withServer((req) => {
    if (!isWatch(req)) return list([job("a", 5)], 10);
    watchedFrom.push(rvOf(req));
    if (watchedFrom.length > 1) return events([], 200);
    return events([
      { type: "ADDED", object: job("b", 11) },
      { type: "MODIFIED", object: job("a", 12) },
      { type: "BOOKMARK", object: { metadata: { resourceVersion: "20" } } },
      { type: "DELETED", object: job("b", 21) },
      { type: "BOOKMARK", object: { metadata: { resourceVersion: "25" } } },
    ]);
  }, async (kube) => {
    const seen: Seen = { upserts: [], deletes: [], notes: [] };
    const inf = informer(kube, seen);
    await inf.start();
    assert.ok(inf.synced);
    await until("a second watch", () => watchedFrom.length >= 2);
    await inf.stop();
    assert.deepEqual(watchedFrom.slice(0, 2), ["10", "25"], "from the list, then the bookmark");
    assert.deepEqual(seen.upserts, ["b", "a"]);
    assert.deepEqual(seen.deletes, [["b", "deleted"]]);
    assert.deepEqual([...inf.cache.keys()], ["a"]);
    assert.equal(inf.cache.get("a")!.metadata!.resourceVersion, "12");
    assert.deepEqual(seen.notes, []);
  });
});

Deno.test("Informer re-lists on 410 Gone and reports what vanished meanwhile", async () => {
  let lists = 0;
  const watchedFrom: (string | null)[] = [];
  await withServer((req) => {
    if (!isWatch(req)) {
      lists++;
      return lists === 1 ? list([job("a", 5), job("b", 6)], 10) : list([job("a", 28)], 30);
    }
    watchedFrom.push(rvOf(req));
    if (watchedFrom.length > 1) return events([], 200);
    return events([{
      type: "ERROR",
      object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" },
    }]);
  }, async (kube) => {
    const seen: Seen = { upserts: [], deletes: [], notes: [] };
    const inf = informer(kube, seen);
    await inf.start();
    await until("a watch after the re-list", () => watchedFrom.length >= 2);
    await inf.stop();
    assert.equal(lists, 2);
    assert.deepEqual(watchedFrom.slice(0, 2), ["10", "30"]);
    assert.deepEqual(seen.notes, ["relisted"]);
    assert.deepEqual(seen.deletes, [["b", "vanished"]]);
    assert.deepEqual(seen.upserts, ["a"], "a changed while nobody watched");
  });
});

Deno.test("Informer polls through broken watches and goes back to a watch when one opens", async () => {
  const { count, handler } = listAThenWatch((watches) => {
    // Three failures make it poll; the fourth (a retry while polling) fails too.
    if (watches <= 4) return status(503, "ServiceUnavailable");
    return events(watches === 5 ? [{ type: "ADDED", object: job("c", 11) }] : [], 200);
  });
  await withServer(handler, async (kube) => {
    const seen: Seen = { upserts: [], deletes: [], notes: [] };
    const inf = informer(kube, seen);
    await inf.start();
    await until("the watch back", () => seen.notes.includes("watching"));
    assert.ok(!inf.polling);
    await until("the event of the new watch", () => inf.cache.has("c"));
    await inf.stop();
    assert.deepEqual(seen.notes, ["reconnected", "reconnected", "polling", "watching"]);
    // Polling meant LISTs until the watch opened: 300 ms retry / 50 ms interval.
    assert.ok(count.lists >= 3, `${count.lists} LISTs`);
    assert.ok(inf.healthy);
  });
});

Deno.test("Informer reports an assumed object gone only once a LIST begun after it lacks it", async () => {
  // A Job created while polling, collected before any LIST showed it.
  let lists = 0;
  const began = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  const go = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  await withServer(async (req) => {
    const n = ++lists;
    if (n === 2 || n === 3) {
      began[n - 2].resolve();
      await go[n - 2].promise;
    }
    return isWatch(req) ? status(500, "InternalError") : list([], 10 + n);
  }, async (kube) => {
    const seen: Seen = { upserts: [], deletes: [], notes: [] };
    const inf = new Informer<V1Job>({
      source: {
        list: () => kube.list<V1Job>(PATH, {}, 500),
        watch: (rv, signal) => kube.watch<V1Job>(PATH, {}, rv, signal),
      },
      clock: FAST,
      pollOnly: true,
      onDelete: (j, how) => seen.deletes.push([j.metadata!.name!, how]),
    });
    // A failed assertion must not leave a LIST held open, or the server never stops.
    const releaseAll = () => go.forEach((g) => g.resolve());
    try {
      await inf.start();
      await began[0].promise;
      inf.assume(job("x", 12));
      go[0].resolve();
      await began[1].promise;
      assert.ok(inf.cache.has("x"), "a LIST begun before it was made does not count it gone");
      assert.deepEqual(seen.deletes, []);
      go[1].resolve();
      await until("x reported gone", () => seen.deletes.length > 0);
      await inf.stop();
      assert.deepEqual(seen.deletes, [["x", "vanished"]]);
      assert.ok(!inf.cache.has("x"));
    } finally {
      releaseAll();
      await inf.stop();
    }
  });
});

// A kube-apiserver just restarted denies requests until its RBAC caches sync
// (seen on a loaded machine: watches denied for seconds, "clusterrole … not
// found"). Those 403s after watches worked are the server's, not the role's:
// counting them towards polling cost a LIST every interval, and a LIST would
// be denied as well.
for (const denied of [1, 4]) {
  Deno.test(`Informer reconnects through ${denied} 403(s) after watches worked, without polling`, async () => {
    const { count, handler } = listAThenWatch((watches) => {
      if (watches === 1) return events([], 20);
      if (watches <= 1 + denied) return status(403, "Forbidden");
      return events(watches === 2 + denied ? [{ type: "ADDED", object: job("c", 11) }] : [], 200);
    });
    await withServer(handler, async (kube) => {
      const seen: Seen = { upserts: [], deletes: [], notes: [] };
      const inf = informer(kube, seen);
      await inf.start();
      await until("the event of the watch after the 403s", () => inf.cache.has("c"), 10_000);
      await inf.stop();
      assert.ok(!seen.notes.includes("polling"), `notes ${seen.notes}`);
      assert.ok(!inf.polling);
      assert.equal(count.lists, 1, "only the first LIST");
    });
  });
}

Deno.test("Informer.stop() resolves at once while its LIST hangs on a silent API server", async () => {
  // Polling through an outage: the LIST is sent and the server never answers.
  // Before the fix stop() waited for it (30 s request timeout, then retries).
  const hold = Promise.withResolvers<void>();
  let lists = 0;
  await withServer(async (req) => {
    if (isWatch(req)) return status(500, "InternalError");
    lists++;
    await hold.promise;
    return list([], 10);
  }, async (kube) => {
    const inf = new Informer<V1Job>({
      source: {
        list: (signal) => kube.list<V1Job>(PATH, {}, 500, undefined, signal),
        watch: (rv, signal) => kube.watch<V1Job>(PATH, {}, rv, signal),
      },
      clock: FAST,
      pollOnly: true,
    });
    try {
      await inf.start({ items: [job("a", 5)], resourceVersion: "10" });
      await until("a LIST in flight", () => lists >= 1);
      const started = Date.now();
      const stopped = await Promise.race([
        inf.stop().then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 1500)),
      ]);
      const ms = Date.now() - started;
      assert.ok(stopped, "stop() still waits for the LIST after 1.5 s");
      assert.ok(ms < 200, `stop() took ${ms} ms`);
      assert.ok(inf.cache.has("a"), "the cache stays as it was");
    } finally {
      hold.resolve();
    }
  });
});

/** An informer over a scripted source: LISTs answer `lists` in turn, watches `watches`. */
function scripted(
  seen: Seen & { olds: (string | undefined)[]; gone: string[] },
  lists: V1Job[][],
  watches: WatchEvent<V1Job>[][] = [],
  pollOnly = true,
): Informer<V1Job> {
  let l = 0, w = 0;
  return new Informer<V1Job>({
    source: {
      list: () =>
        Promise.resolve({
          items: lists[Math.min(l++, lists.length - 1)],
          resourceVersion: String(10 + l),
        }),
      async *watch(_rv, signal) {
        for (const ev of watches[w++] ?? []) yield ev;
        await SYSTEM_CLOCK.sleep(60_000, signal);
      },
    },
    clock: FAST,
    pollOnly,
    onUpsert: (j, old) => {
      seen.upserts.push(`${j.metadata!.name} ${j.metadata!.uid}`);
      seen.olds.push(old?.metadata?.uid);
    },
    onDelete: (j, how) => {
      seen.deletes.push([j.metadata!.name!, how]);
      seen.gone.push(j.metadata!.uid!);
    },
  });
}

function jobOf(name: string, uid: string, rv: number): V1Job {
  return { metadata: { name, uid, resourceVersion: String(rv) } };
}

Deno.test("Informer reports a Job re-created under its name during a watch gap as a delete and an add", async (t) => {
  await t.step("relist: a new UID is the old Job vanished, then a new one", async () => {
    const seen = { upserts: [], deletes: [], notes: [], olds: [], gone: [] };
    const inf = scripted(seen, [[jobOf("a", "uid-1", 5)], [jobOf("a", "uid-2", 9)]]);
    await inf.start();
    await until("the relist", () => seen.upserts.length > 0);
    await inf.stop();
    assert.deepEqual(seen.deletes, [["a", "vanished"]]);
    assert.deepEqual(seen.gone, ["uid-1"], "the old Job's own state");
    assert.deepEqual(seen.upserts, ["a uid-2"]);
    assert.deepEqual(seen.olds, [undefined], "an add, not an update of the old Job");
    assert.equal(inf.cache.get("a")!.metadata!.uid, "uid-2");
  });
  await t.step("watch: a new UID without a DELETED event is a delete and an add", async () => {
    const seen = { upserts: [], deletes: [], notes: [], olds: [], gone: [] };
    const inf = scripted(
      seen,
      [[jobOf("a", "uid-1", 5)]],
      [[{ type: "MODIFIED", object: jobOf("a", "uid-2", 9) }]],
      false,
    );
    await inf.start();
    await until("the event", () => seen.upserts.length > 0);
    await inf.stop();
    assert.deepEqual(seen.deletes, [["a", "vanished"]]);
    assert.deepEqual(seen.gone, ["uid-1"]);
    assert.deepEqual(seen.upserts, ["a uid-2"]);
    assert.deepEqual(seen.olds, [undefined]);
  });
  await t.step("the same UID with a new resourceVersion stays an update", async () => {
    const seen = { upserts: [], deletes: [], notes: [], olds: [], gone: [] };
    const inf = scripted(seen, [[jobOf("a", "uid-1", 5)], [jobOf("a", "uid-1", 9)]]);
    await inf.start();
    await until("the relist", () => seen.upserts.length > 0);
    await inf.stop();
    assert.deepEqual(seen.deletes, []);
    assert.deepEqual(seen.olds, ["uid-1"]);
  });
});

Deno.test("Informer.forget() drops one cached object until the API server shows it again", async () => {
  let rv = 10;
  const handler = (req: Request): Response => {
    if (!isWatch(req)) return list([job("a", 5), job("b", 6)], rv);
    // The next watch: b changes; then the watch ends.
    return events([{ type: "MODIFIED", object: job("b", ++rv) }]);
  };
  await withServer(handler, async (kube) => {
    const seen: Seen = { upserts: [], deletes: [], notes: [] };
    const inf = informer(kube, seen);
    await inf.start();
    inf.forget("a");
    inf.forget("b");
    inf.forget("missing");
    assert.deepEqual([...inf.cache.keys()], []);
    await until("b's event", () => inf.cache.has("b"));
    await inf.stop();
    assert.deepEqual([...inf.cache.keys()], ["b"], "only what an event showed again is back");
    assert.deepEqual(seen.upserts[0], "b");
    assert.deepEqual(seen.deletes, [], "a forgotten object is not reported gone");
  });
});
