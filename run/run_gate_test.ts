import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import { trackingKeys } from "../job.ts";
import { Logger } from "../report/log.ts";
import { EXIT } from "../report/summary.ts";
import { status, withServer } from "../testing/loopback.ts";
import type { GateConfig } from "../gates/config.ts";
import { HealthGate } from "../gates/gate.ts";
import { FilePause } from "../engine/pause.ts";
import { bindGate, type GateRun, latchExit, openGate, refuseIfEarlierPaused } from "./run_gate.ts";
import type { Recorder } from "../report/report.ts";
import type { RecordGates } from "../report/record.ts";
import type { Plan } from "./plan.ts";
import type { PauseGate } from "../engine/pause.ts";

const PLAN = { namespace: "ops", prefix: "drv", keys: trackingKeys("job-dispatcher") } as Plan;

/**
 * A loopback Prometheus: `answer` for every query, but the selectors'
 * presence query, which finds each selector in data unless `dark`.
 */
async function withPrometheus(
  answer: () => Response,
  fn: (url: string) => Promise<void>,
  dark = false,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    if (!new URL(req.url).searchParams.get("query")?.includes("gate_selector")) return answer();
    const result = dark ? [] : [{ metric: { gate_selector: "0" }, value: [1, "1"] }];
    return Response.json({ status: "success", data: { resultType: "vector", result } });
  });
  try {
    await fn(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}

const empty = () =>
  Response.json({ status: "success", data: { resultType: "vector", result: [] } });
const breached = () =>
  Response.json({
    status: "success",
    data: { resultType: "vector", result: [{ metric: {}, value: [1, "2"] }] },
  });

function config(url: string, onBreach: "pause" | "exit" = "exit"): GateConfig {
  return { url, queries: ["bad > 0"], intervalSecs: 30, onBreach };
}

Deno.test("openGate() refuses with exit 5 while an earlier run's exit latch is set, naming the command that clears it", async () => {
  const lines: string[] = [];
  await withServer(
    (req) =>
      new URL(req.url).pathname === "/api/v1/namespaces/ops/configmaps/drv-gate-breach"
        ? Response.json({ data: { breach: 'query "bad > 0" returned {} 2' } })
        : status(404, "NotFound"),
    async (kube) => {
      const log = new Logger("text", (l) => lines.push(l));
      const got = await openGate({ config: config("http://127.0.0.1:1"), plan: PLAN, kube, log });
      assert.equal(got, EXIT.gate);
    },
  );
  assert.equal(lines.length, 1);
  assert.match(
    lines[0],
    /Refusing to start: a health gate stopped an earlier run \(query "bad > 0" returned \{\} 2\); .*kubectl delete configmap -n ops drv-gate-breach/,
  );
});

Deno.test("openGate() evaluates every query before the first Job: bad PromQL is a UsageError, no answer is exit 3", async () => {
  await withServer(() => status(404, "NotFound"), async (kube) => {
    const lines: string[] = [];
    const log = new Logger("text", (l) => lines.push(l));
    await withPrometheus(
      () =>
        Response.json({ status: "error", errorType: "bad_data", error: "parse error" }, {
          status: 400,
        }),
      async (url) => {
        const e = await openGate({ config: config(url), plan: PLAN, kube, log }).catch((e) => e);
        assert.ok(e instanceof UsageError);
        assert.equal(
          e.message,
          'Invalid --gate-query "bad > 0": Prometheus rejected it: HTTP 400: parse error',
        );
      },
    );
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    const code = await openGate({
      config: config(`http://127.0.0.1:${port}`),
      plan: PLAN,
      kube,
      log,
    });
    assert.equal(code, EXIT.cluster);
    assert.match(
      lines.at(-1)!,
      /Cannot reach Prometheus http:\/\/127\.0\.0\.1:\d+ .*nothing was created/,
    );
  });
});

Deno.test("latchExit() sets the exit latch once the gate stopped the rollout, as a ConfigMap the next run reads", async () => {
  const created: unknown[] = [];
  await withServer(
    (req, _n, body) => {
      if (req.method === "POST") {
        created.push(body);
        return Response.json(body, { status: 201 });
      }
      return status(404, "NotFound");
    },
    async (kube) => {
      const lines: string[] = [];
      const log = new Logger("text", (l) => lines.push(l));
      await withPrometheus(breached, async (url) => {
        const gate = await openGate({ config: config(url), plan: PLAN, kube, log });
        assert.ok(gate instanceof HealthGate);
        try {
          assert.equal(await latchExit(gate, { config: config(url), plan: PLAN, kube, log }), true);
        } finally {
          await gate.stop();
        }
      });
      assert.match(
        lines.at(-1)!,
        /the next run refuses to start until the latch is cleared: kubectl delete configmap -n ops drv-gate-breach/,
      );
    },
  );
  assert.equal(created.length, 1);
  const cm = created[0] as {
    metadata: { name: string; labels: Record<string, string> };
    data: { breach: string };
  };
  assert.equal(cm.metadata.name, "drv-gate-breach");
  assert.equal(cm.metadata.labels["job-dispatcher/owner"], "drv");
  assert.equal(cm.data.breach, 'query "bad > 0" returned {} 2');
});

Deno.test("latchExit() sets nothing for a gate that did not breach", async () => {
  await withServer(() => status(404, "NotFound"), async (kube, hits) => {
    const log = new Logger("text", () => {});
    await withPrometheus(empty, async (url) => {
      const gate = await openGate({ config: config(url), plan: PLAN, kube, log });
      assert.ok(gate instanceof HealthGate);
      try {
        assert.equal(await latchExit(gate, { config: config(url), plan: PLAN, kube, log }), false);
      } finally {
        await gate.stop();
      }
    });
    assert.ok(hits.every((h) => h.method === "GET"), "no write");
  });
});

Deno.test("openGate() refuses a selector that matches no series: a UsageError naming it and --gate-allow-empty", async () => {
  await withServer(() => status(404, "NotFound"), async (kube, hits) => {
    const log = new Logger("text", () => {});
    await withPrometheus(empty, async (url) => {
      const e = await openGate({ config: config(url), plan: PLAN, kube, log }).catch((e) => e);
      assert.ok(e instanceof UsageError, String(e));
      assert.match(
        e.message,
        /^Invalid --gate-query "bad > 0": its selector bad matches no series in Prometheus http:\/\/127\.0\.0\.1:\d+, .*--gate-allow-empty bad$/,
      );
      const allowed = await openGate({
        config: { ...config(url), allowEmpty: ["bad"] },
        plan: PLAN,
        kube,
        log,
      });
      assert.ok(allowed instanceof HealthGate);
      await allowed.stop();
    }, true);
    assert.ok(hits.every((h) => h.method === "GET"), "nothing written");
  });
});

/** What the run record reads of the gates, and how often it was told they changed. */
const recorded = { gates: (): RecordGates | undefined => undefined, changes: 0 };

const RECORDER = {
  ownerWarning: () => {},
  followGates: (source: () => RecordGates | undefined) => {
    recorded.gates = source;
    recorded.changes = 0;
    return () => recorded.changes++;
  },
} as unknown as Recorder;

/** A client that gives up on a failing write within 100 ms, for the tests of writes that keep failing. */
const FAST_RETRY = {
  retry: { requestTimeoutMs: 1000, budgetMs: 100, baseDelayMs: 10, maxDelayMs: 20 },
};

/** The owner Job a pausing run writes its pause to. */
const OWNED = { ...PLAN, owner: { name: "hook", uid: "u1" } } as Plan;

/**
 * The API of the latch tests: a POST (the exit latch) is created and its
 * path kept in `created`; a PATCH (the owner's pause) answers `patch`.
 */
function latchApi(created: string[], patch = () => status(404, "NotFound")) {
  return (req: Request) => {
    if (req.method === "PATCH") return patch();
    if (req.method === "POST") {
      created.push(new URL(req.url).pathname);
      return Response.json({}, { status: 201 });
    }
    return status(404, "NotFound");
  };
}

/**
 * A gate of `config` opened on a Prometheus whose every answer breaches and
 * bound to the run; `fn` sees it, its run and the log's lines; the gate
 * stops after.
 */
async function withBoundGate(
  kube: GateRun["kube"],
  config: (url: string) => GateConfig,
  plan: Plan,
  fn: (gate: HealthGate, g: GateRun, lines: string[]) => void | Promise<void>,
): Promise<void> {
  const lines: string[] = [];
  const log = new Logger("text", (l) => lines.push(l));
  await withPrometheus(breached, async (url) => {
    const g = { config: config(url), plan, kube, log };
    const gate = await openGate(g);
    assert.ok(gate instanceof HealthGate);
    try {
      await bindGate(gate, { ...g, recorder: RECORDER }, {});
      await fn(gate, g, lines);
    } finally {
      await gate.stop();
    }
  });
}

/** Waits (5 s at most) for the gate to give up its latch, and says it did. */
async function untilUnlatched(gate: HealthGate): Promise<void> {
  const end = Date.now() + 5000;
  while (gate.state.kind !== "unlatched" && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(gate.state.kind, "unlatched");
}

Deno.test("bindGate() with exit writes the exit latch the moment the breach is seen, before the run ends", async () => {
  const created: string[] = [];
  await withServer(latchApi(created), async (kube) => {
    await withBoundGate(kube, (url) => config(url), PLAN, (gate, _g, lines) => {
      assert.deepEqual(created, ["/api/v1/namespaces/ops/configmaps"], "latched at once");
      assert.equal(gate.state.kind, "latched");
      // The run record says it (status): the query, the command that lifts it, when checked.
      const g = recorded.gates()!;
      assert.equal(g.state, "latched");
      assert.equal(g.queries, 1);
      assert.match(g.detail ?? "", /^query ".*" returned /);
      assert.equal(g.lift, "kubectl delete configmap -n ops drv-gate-breach");
      assert.ok(g.checkedAt !== undefined && Date.now() - g.checkedAt < 60_000);
      assert.ok(recorded.changes >= 1, "each change of state is written anew");
      assert.match(
        lines.join("\n"),
        /health gate breached: .*latched: the next run refuses to start until it is cleared: kubectl delete configmap -n ops drv-gate-breach/,
      );
    });
  });
});

Deno.test("bindGate(): a pause the API refuses (403) stops the run and leaves the exit latch, naming the command that clears it", async () => {
  const created: string[] = [];
  await withServer(latchApi(created, () => status(403, "Forbidden")), async (kube) => {
    await withBoundGate(kube, (url) => config(url, "pause"), OWNED, (gate, _g, lines) => {
      assert.equal(gate.state.kind, "unlatched");
      assert.match(gate.stopsBy() ?? "", /the run cannot pause itself: Cannot pause the run/);
      assert.deepEqual(created, ["/api/v1/namespaces/ops/configmaps"], "the exit latch instead");
      assert.match(
        lines.join("\n"),
        /Cannot pause the run for the health gate's breach: PATCH of job-dispatcher\/paused on owner Job ops\/hook refused: .*; the run stops \(exit 5\); the exit latch holds the next run until it is cleared: kubectl delete configmap -n ops drv-gate-breach/,
      );
    });
  });
});

Deno.test("bindGate(): a pause that keeps failing (a webhook down: 500) stops the run after three intervals and leaves the exit latch, naming the command that clears it", async () => {
  const created: string[] = [];
  await withServer(
    latchApi(created, () => status(500, "InternalError")),
    async (kube) => {
      const fast = (url: string) => ({ ...config(url, "pause"), intervalSecs: 0.2 });
      await withBoundGate(kube, fast, OWNED, async (gate, _g, lines) => {
        await untilUnlatched(gate);
        assert.deepEqual(created, ["/api/v1/namespaces/ops/configmaps"], "the exit latch instead");
        assert.match(
          lines.join("\n"),
          /Cannot pause the run for the health gate's breach: .*the exit latch holds the next run until it is cleared: kubectl delete configmap -n ops drv-gate-breach/,
        );
      });
    },
    undefined,
    undefined,
    FAST_RETRY,
  );
});

Deno.test("refuseIfEarlierPaused(): an earlier hook Job of the release whose run ended while its gate's pause held (a deadline, an eviction) still holds the next revision's run: exit 5, naming the command that lifts it", async () => {
  const keys = PLAN.keys;
  const job = (
    name: string,
    uid: string,
    at: string,
    annotations: Record<string, string> = {},
  ) => ({
    metadata: {
      name,
      uid,
      creationTimestamp: at,
      labels: { [keys.hook]: "drv" },
      annotations,
    },
    status: { failed: 1, conditions: [{ type: "Failed", status: "True" }] },
  });
  const paused = {
    [keys.paused]: "true",
    [`${keys.paused}-reason`]: 'query "bad > 0" returned {} 2',
  };
  for (
    const [what, earlier, want] of [
      ["paused by its gate", paused, EXIT.gate],
      ["its pause lifted", {}, undefined],
    ] as const
  ) {
    const lines: string[] = [];
    await withServer(
      (req) => {
        const u = new URL(req.url);
        if (u.pathname === "/apis/batch/v1/namespaces/ops/jobs/hook-r2") {
          return Response.json(job("hook-r2", "u2", "2026-01-02T00:00:00Z"));
        }
        if (u.pathname === "/apis/batch/v1/namespaces/ops/jobs") {
          return Response.json({
            metadata: {},
            items: [
              job("hook-r1", "u1", "2026-01-01T00:00:00Z", earlier),
              job("hook-r2", "u2", "2026-01-02T00:00:00Z"),
            ],
          });
        }
        return status(404, "NotFound");
      },
      async (kube) => {
        const log = new Logger("text", (l) => lines.push(l));
        const got = await refuseIfEarlierPaused({
          kube,
          namespace: "ops",
          owner: { name: "hook-r2", uid: "u2" },
          keys,
          log,
        });
        assert.equal(got, want, what);
      },
    );
    if (want) {
      assert.match(
        lines.join("\n"),
        /Refusing to start: .*hook-r1.*query "bad > 0" returned \{\} 2.*kubectl annotate job -n ops hook-r1 job-dispatcher\/paused- job-dispatcher\/paused-reason-/,
      );
    }
  }
});

Deno.test("latchExit(): an exit latch that kept failing (500) while Jobs were in flight is tried once more when the run ends, and set if the API is back", async () => {
  let down = true;
  const created: string[] = [];
  const api = latchApi(created);
  await withServer(
    (req) => (req.method === "POST" && down ? status(500, "InternalError") : api(req)),
    async (kube) => {
      const fast = (url: string) => ({ ...config(url, "exit"), intervalSecs: 0.2 });
      await withBoundGate(kube, fast, PLAN, async (gate, g, lines) => {
        await untilUnlatched(gate);
        down = false; // the Jobs in flight finished; the API is back
        assert.equal(await latchExit(gate, g), true);
        assert.deepEqual(created, ["/api/v1/namespaces/ops/configmaps"], "latched at the end");
        assert.match(lines.at(-1)!, /kubectl delete configmap -n ops drv-gate-breach/);
      });
    },
    undefined,
    undefined,
    FAST_RETRY,
  );
});

Deno.test("bindGate() tells the caller's onStop of a breach with the gate's exit code, whatever its log line is named", async () => {
  await withServer(
    (req) => req.method === "POST" ? Response.json({}, { status: 201 }) : status(404, "NotFound"),
    async (kube) => {
      // A logger that drops every line: the caller must not depend on them.
      const log = new Logger("text", () => {});
      log.warn = () => {};
      await withPrometheus(breached, async (url) => {
        const g = { config: config(url), plan: PLAN, kube, log };
        const gate = await openGate(g);
        assert.ok(gate instanceof HealthGate);
        const stops: [string, number][] = [];
        // Built apart from the call so that it type-checks before the hook exists.
        const run = {
          ...g,
          recorder: RECORDER,
          onStop: (c: string, n: number) => stops.push([c, n]),
        };
        try {
          await bindGate(gate, run, {});
          assert.equal(stops.length, 1, "told once");
          assert.equal(stops[0][1], EXIT.gate);
          assert.match(stops[0][0], /^health gate breached: /);
        } finally {
          await gate.stop();
        }
      });
    },
  );
});

Deno.test("bindGate(): a pause file removed before the run's look at it came round still lifts the gate's pause", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/run.pause`;
  let answer = breached;
  // Looked at once a minute: the removal comes before its next look, as a
  // person's `rm` may come within the second the real one (1 s) leaves.
  const file = new FilePause(path, 60_000);
  await withServer(latchApi([]), (kube) =>
    withPrometheus(() => answer(), async (url) => {
      const log = new Logger("text", () => {});
      const g = { config: config(url, "pause"), plan: PLAN, kube, log };
      const gate = await openGate({ ...g, pauseFilePath: path });
      assert.ok(gate instanceof HealthGate);
      try {
        await bindGate(gate, { ...g, pauseFilePath: path, recorder: RECORDER }, { file });
        assert.equal(gate.state.kind, "latched");
        assert.ok(await Deno.stat(path), "the breach wrote the pause file");
        await Deno.remove(path); // a person lifts it…
        answer = empty; // …the fleet being healthy
        assert.equal(await gate.checkNow(), undefined, "the lift lets starts go on");
      } finally {
        await gate.stop();
        await file.stop();
        await Deno.remove(dir, { recursive: true });
      }
    }));
});

Deno.test("bindGate(): a pause file that cannot be looked at (stat fails, not ENOENT) keeps the gate's latch", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/run.pause`;
  const file = new FilePause(path, 60_000);
  await withServer(latchApi([]), (kube) =>
    withPrometheus(() => breached(), async (url) => {
      const log = new Logger("text", () => {});
      const g = { config: config(url, "pause"), plan: PLAN, kube, log };
      const gate = await openGate({ ...g, pauseFilePath: path });
      assert.ok(gate instanceof HealthGate);
      try {
        await bindGate(gate, { ...g, pauseFilePath: path, recorder: RECORDER }, { file });
        assert.equal(gate.state.kind, "latched");
        // A stat that fails for another reason than absence (EACCES for a
        // non-root run, EIO, NFS's ESTALE; here ELOOP, as root passes every
        // permission): nobody removed the file, so nobody lifted the pause.
        await Deno.remove(path);
        await Deno.symlink(path, path);
        assert.throws(() => Deno.statSync(path), (e) => !(e instanceof Deno.errors.NotFound));
        assert.equal(gate.state.kind, "latched", "a failed look is not a lift");
        assert.deepEqual(gate.breaches.map((b) => b.liftedAt), [undefined]);
      } finally {
        await gate.stop();
        await file.stop();
        await Deno.remove(dir, { recursive: true });
      }
    }));
});

Deno.test("bindGate(): a retried pod of the same owner, its gate's pause still held, never says the gates are ok once the metric recovered", async () => {
  // The first pod latched a breach on its owner (<P>/paused=true, <P>/paused-reason) and was
  // killed; the owner's retried pod finds the pause (its starts wait) and a clean Prometheus.
  const reason = 'query "bad > 0" returned {} 2';
  const held = {
    pausedBy: () => "annotation job-dispatcher/paused=true on Job ops/hook",
    heldFor: () => reason,
    onChange: () => {},
  } as PauseGate;
  await withServer(latchApi([]), async (kube) => {
    await withPrometheus(empty, async (url) => {
      const log = new Logger("text", () => {});
      const g = { config: config(url, "pause"), plan: OWNED, kube, log };
      const gate = await openGate(g);
      assert.ok(gate instanceof HealthGate);
      try {
        await bindGate(gate, { ...g, recorder: RECORDER }, { owner: held });
        assert.equal(gate.state.kind, "fresh", "the metric recovered");
        const said = recorded.gates()!;
        assert.equal(said.state, "latched", JSON.stringify(said));
        assert.equal(said.detail, reason);
        assert.equal(
          said.lift,
          "kubectl annotate job -n ops hook job-dispatcher/paused- job-dispatcher/paused-reason-",
        );
      } finally {
        await gate.stop();
      }
    });
  });
});
