import assert from "node:assert/strict";
import fc from "fast-check";
import {
  ApiError,
  DEFAULT_RETRY,
  fetchFailure,
  isRetryable,
  resourceOf,
  retryDelayMs,
  type RetryPolicy,
  untrusted,
} from "./client.ts";

function apiError(status: number, retryAfterMs?: number): ApiError {
  return new ApiError(
    { status, reason: "Reason", verb: "create", resource: "jobs", message: "the server said no" },
    retryAfterMs,
  );
}

Deno.test({
  name: "isRetryable() retries only what waiting can heal",
  permissions: "none",
  async fn(t) {
    const cases: [number, string, boolean][] = [
      [0, "unreachable", true],
      [429, "throttled", true],
      [500, "internal error", true],
      [502, "bad gateway", true],
      [503, "unavailable", true],
      [504, "gateway timeout", true],
      [400, "bad request", false],
      [401, "unauthorised", false],
      [403, "forbidden", false],
      [404, "not found", false],
      [409, "conflict", false],
      [410, "gone", false],
      [422, "invalid", false],
    ];
    for (const [status, what, want] of cases) {
      await t.step(`it ${want ? "retries" : "does not retry"} ${status} (${what})`, () => {
        assert.equal(isRetryable(apiError(status)), want);
      });
    }
    const others: [string, unknown][] = [
      ["an Error", new Error("boom")],
      ["a TypeError from fetch", new TypeError("error sending request")],
      ["an object that looks like a 503", { status: 503, name: "ApiError" }],
      ["a string", "503"],
      ["undefined", undefined],
    ];
    for (const [what, err] of others) {
      await t.step(`it does not retry ${what}`, () => assert.equal(isRetryable(err), false));
    }
  },
});

const POLICY: RetryPolicy = { ...DEFAULT_RETRY, baseDelayMs: 250, maxDelayMs: 8000 };

Deno.test({
  name: "retryDelayMs() waits at least Retry-After, jittered by up to 1 s or 25 %",
  permissions: "none",
  async fn(t) {
    const cases = [
      { name: "the server's wait with no jitter drawn", after: 3000, random: 0, want: 3000 },
      { name: "plus up to a second for a short wait", after: 3000, random: 0.5, want: 3500 },
      { name: "plus up to a quarter for a long wait", after: 20_000, random: 0.5, want: 22_500 },
      { name: "above maxDelayMs", after: 20_000, random: 0, want: 20_000 },
      { name: "a zero wait still spreads over a second", after: 0, random: 0.25, want: 250 },
    ];
    for (const { name, after, random, want } of cases) {
      await t.step(name, () => {
        for (const attempt of [1, 2, 10]) {
          assert.equal(retryDelayMs(attempt, apiError(429, after), POLICY, random), want);
        }
      });
    }
  },
});

Deno.test({
  name: "retryDelayMs() backs off exponentially up to maxDelayMs",
  permissions: "none",
  async fn(t) {
    const err = apiError(503);
    await t.step("the lowest delay doubles per attempt from baseDelayMs / 2", () => {
      const lows = [1, 2, 3, 4, 5, 6].map((a) => retryDelayMs(a, err, POLICY, 0));
      assert.deepEqual(lows, [125, 250, 500, 1000, 2000, 4000]);
    });
    await t.step("the highest delay doubles per attempt from baseDelayMs", () => {
      const highs = [1, 2, 3, 4, 5, 6].map((a) => retryDelayMs(a, err, POLICY, 0.9999999));
      assert.deepEqual(highs, [250, 500, 1000, 2000, 4000, 8000]);
    });
    await t.step("it stops growing at maxDelayMs", () => {
      for (const attempt of [7, 8, 20, 100, 5000]) {
        assert.equal(retryDelayMs(attempt, err, POLICY, 0), 4000, `attempt ${attempt}`);
        assert.equal(retryDelayMs(attempt, err, POLICY, 0.9999999), 8000, `attempt ${attempt}`);
      }
    });
  },
});

Deno.test({
  name: "retryDelayMs() jitters within [cap / 2, cap]",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 2000 }),
        fc.integer({ min: 1, max: 120_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, baseDelayMs, maxDelayMs, random) => {
          const policy = { ...DEFAULT_RETRY, baseDelayMs, maxDelayMs };
          const cap = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
          const delay = retryDelayMs(attempt, apiError(500), policy, random);
          assert.ok(Number.isInteger(delay), `${delay} is a whole number of milliseconds`);
          assert.ok(delay >= cap / 2 && delay <= cap, `${delay} is outside [${cap / 2}, ${cap}]`);
        },
      ),
      { numRuns: 5000 },
    );
  },
});

Deno.test({
  name: "resourceOf() names the resource of a request path as RBAC does",
  permissions: "none",
  async fn(t) {
    const cases: [string, string][] = [
      ["/api/v1/nodes", "nodes"],
      ["/api/v1/nodes/node-1", "nodes"],
      ["/api/v1/nodes?labelSelector=a%3Db&limit=500", "nodes"],
      ["/apis/batch/v1/namespaces/ops/jobs", "jobs"],
      ["/apis/batch/v1/namespaces/ops/jobs/up-n1?dryRun=All", "jobs"],
      ["/api/v1/namespaces/default/events", "events"],
      ["/api/v1/namespaces/ops/pods/p1/log", "pods/log"],
      ["/api/v1/namespaces/ops", "namespaces"],
      ["/apis/batch/v1/namespaces/ops/jobs/up-n1/status", "jobs/status"],
    ];
    for (const [path, want] of cases) {
      await t.step(`${path} → ${want}`, () => assert.equal(resourceOf(path), want));
    }
  },
});

Deno.test({
  name: "fetchFailure() says why a request failed: Deno's cause, without the URL",
  permissions: "none",
  async fn(t) {
    const failed = (cause?: string) =>
      new TypeError("fetch failed", cause === undefined ? undefined : { cause: new Error(cause) });
    const cases: [string, unknown, string][] = [
      [
        "a proxy's certificate of another CA",
        failed(
          "error sending request for url (https://127.0.0.1:6443/api/v1/nodes): " +
            "client error (Connect): invalid peer certificate: UnknownIssuer",
        ),
        "client error (Connect): invalid peer certificate: UnknownIssuer",
      ],
      [
        "a refused connection",
        failed(
          "error sending request for url (http://127.0.0.1:9/api): client error (Connect): " +
            "tcp connect error: Connection refused (os error 111)",
        ),
        "client error (Connect): tcp connect error: Connection refused (os error 111)",
      ],
      ["no cause", failed(), "fetch failed"],
      ["an empty cause", failed(""), "fetch failed"],
      ["not an Error", "boom", "boom"],
    ];
    for (const [name, e, want] of cases) {
      await t.step(name, () => assert.equal(fetchFailure(e), want));
    }
  },
});

Deno.test({
  name: "untrusted() tells a refused certificate from other network failures",
  permissions: "none",
  async fn(t) {
    const failed = (cause: string) => new TypeError("fetch failed", { cause: new Error(cause) });
    const cases: [string, unknown, boolean][] = [
      [
        "another CA",
        failed("client error (Connect): invalid peer certificate: UnknownIssuer"),
        true,
      ],
      ["expired", failed("client error (Connect): invalid peer certificate: Expired"), true],
      ["refused", failed("client error (Connect): tcp connect error: Connection refused"), false],
      ["no cause", new TypeError("fetch failed"), false],
    ];
    for (const [name, e, want] of cases) {
      await t.step(name, () => assert.equal(untrusted(e), want));
    }
  },
});

Deno.test({
  name:
    "a kubeconfig from a pipe (--kubeconfig <(…)) serves every context of a fleet: read once, not again as empty",
  async fn() {
    const dir = await Deno.makeTempDir();
    const kc = `${dir}/kc.yaml`;
    await Deno.writeTextFile(
      kc,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]",
        "users: [{name: u, user: {token: t}}]",
        "contexts:",
        "- {name: one, context: {cluster: c, user: u}}",
        "- {name: two, context: {cluster: c, user: u}}",
        "",
      ].join("\n"),
    );
    // What a fleet does: one connect per cluster, all with the same --kubeconfig.
    const script = `${dir}/connect.ts`;
    await Deno.writeTextFile(
      script,
      `import { Kube } from ${JSON.stringify(new URL("./client.ts", import.meta.url).href)};\n` +
        `for (const context of ["one", "two"]) {\n` +
        `  (await Kube.connect({ kubeconfig: Deno.args[0], context, apiWaitMs: 0 })).close();\n` +
        `}\nconsole.log("both");\n`,
    );
    const out = await new Deno.Command("bash", {
      args: [
        "-c",
        `"${Deno.execPath()}" run --allow-all --config "$2" "$0" <(cat "$1")`,
        script,
        kc,
        new URL("../deno.json", import.meta.url).pathname,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    await Deno.remove(dir, { recursive: true });
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(said.trim().split("\n").at(-1), "both", said);
  },
});
