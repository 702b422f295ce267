import assert from "node:assert/strict";
import type { RunConfig } from "./config.ts";
import {
  checkPermissions,
  type NamespaceSources,
  PermissionError,
  permissionNeeds,
  resolveNamespace,
  SELF_SUBJECT_ACCESS_REVIEWS,
} from "./preflight.ts";
import { status, withServer } from "../testing/loopback.ts";

Deno.test({
  name:
    "resolveNamespace() takes the most deliberate of flag, explicit context, env, service account, context",
  permissions: "none",
  async fn(t) {
    type Given = {
      flag?: string;
      explicit?: boolean;
      context?: string;
      env?: string;
      sa?: string;
    };
    const cases: [string, Given, string][] = [
      ["nothing", {}, "default"],
      ["the context", { context: "ctx" }, "ctx"],
      ["the service account over the context", { context: "ctx", sa: "sa\n" }, "sa"],
      ["$POD_NAMESPACE over the service account", { sa: "sa", env: "pod" }, "pod"],
      [
        "an explicit context over $POD_NAMESPACE",
        { explicit: true, context: "ctx", env: "pod" },
        "ctx",
      ],
      ["$POD_NAMESPACE over an implicit context", { context: "ctx", env: "pod" }, "pod"],
      [
        "the flag over all",
        { flag: "f", explicit: true, context: "ctx", env: "pod", sa: "sa" },
        "f",
      ],
    ];
    for (const [what, g, want] of cases) {
      await t.step(`${what} → ${want}`, () => {
        const opts = { namespace: g.flag, context: g.explicit ? "c" : undefined } as RunConfig;
        const sources: NamespaceSources = {
          kube: { contextNamespace: g.context },
          env: (name) => name === "POD_NAMESPACE" ? g.env : undefined,
          readFile: () => g.sa,
        };
        assert.equal(resolveNamespace(opts, sources), want);
      });
    }
  },
});

/** A RunConfig with only what permissionNeeds() reads. */
function withFlags(m: Partial<RunConfig["maintenance"]>, nodeLabels?: RunConfig["nodeLabels"]) {
  return {
    maintenance: { cordon: false, blockingPodSelectors: [], ...m },
    nodeLabels,
  } as unknown as RunConfig;
}

/** A gated RunConfig: `--on-gate-breach onBreach`, with the owner `owner` if given. */
function gated(onBreach: "pause" | "exit", owner?: string): RunConfig {
  return {
    ...withFlags({}),
    ownerJobName: owner,
    gate: { url: "http://p", queries: ["up == 0"], intervalSecs: 30, onBreach },
  } as unknown as RunConfig;
}

const DRAIN = {
  deleteEmptyDirData: false,
  force: false,
  timeoutSecs: 600,
  disableEviction: false,
};

Deno.test({
  name: "permissionNeeds() asks for what each flag needs to work, each permission once",
  permissions: "none",
  async fn(t) {
    const label = { key: "k", pendingValue: "false", extra: [], claim: false, remove: false };
    const cases: [string, RunConfig, string[]][] = [
      ["no flag", withFlags({}), []],
      ["--cordon", withFlags({ cordon: true }), ["patch nodes: --cordon"]],
      ["--drain", withFlags({ cordon: true, drain: DRAIN }), [
        "list pods: --drain",
        "create pods/eviction: --drain",
        "patch nodes: --drain",
      ]],
      [
        "--drain --disable-eviction",
        withFlags({ cordon: true, drain: { ...DRAIN, disableEviction: true } }),
        ["list pods: --drain", "delete pods: --disable-eviction", "patch nodes: --drain"],
      ],
      [
        "--blocking-pod-selector with --drain: list pods once",
        withFlags({
          cordon: true,
          drain: DRAIN,
          blockingPodSelectors: [{ text: "app=db", requirements: [] }],
        }),
        [
          "list pods: --drain --blocking-pod-selector",
          "create pods/eviction: --drain",
          "patch nodes: --drain",
        ],
      ],
      ["--node-label", withFlags({}, { ...label, value: "true" }), [
        "patch nodes: --node-label-key",
      ]],
      ["--remove-node-label", withFlags({}, { ...label, remove: true }), [
        "patch nodes: --node-label-key",
      ]],
      [
        "gates with pause and an owner: the latch's configmaps and the owner's patch, in the namespace",
        gated("pause", "hook"),
        [
          "get configmaps@ns/drv-gate-breach: --gate-prometheus-url",
          "create configmaps@ns: --on-gate-breach pause",
          "patch jobs@ns: --on-gate-breach pause",
        ],
      ],
      [
        "gates with pause and a pause file: no patch of the owner",
        gated("pause"),
        [
          "get configmaps@ns/drv-gate-breach: --gate-prometheus-url",
          "create configmaps@ns: --on-gate-breach pause",
        ],
      ],
      [
        "gates with exit: the exit latch read and written",
        gated("exit", "hook"),
        [
          "get configmaps@ns/drv-gate-breach: --gate-prometheus-url",
          "create configmaps@ns: --on-gate-breach exit",
        ],
      ],
    ];
    for (const [name, opts, want] of cases) {
      await t.step(name, () => {
        const got = permissionNeeds(opts, { namespace: "ns", prefix: "drv" }).map((n) =>
          `${n.verb} ${n.resource}${n.subresource ? `/${n.subresource}` : ""}${
            n.namespace ? `@${n.namespace}` : ""
          }${n.name ? `/${n.name}` : ""}: ${n.flags.join(" ")}`
        );
        assert.deepEqual(got, want);
      });
    }
  },
});

Deno.test("--drain without list pods is refused before anything is touched, naming the verb and the README's rule", async () => {
  await withServer(
    (_req, _n, body) => {
      const attrs = (body as { spec: { resourceAttributes: Record<string, string> } }).spec
        .resourceAttributes;
      const allowed = !(attrs.verb === "list" && attrs.resource === "pods");
      return Response.json({ kind: "SelfSubjectAccessReview", status: { allowed } }, {
        status: 201,
      });
    },
    async (kube, hits) => {
      const needs = permissionNeeds(withFlags({ cordon: true, drain: DRAIN }));
      const err = await checkPermissions(kube, needs).then(() => undefined, (e) => e);
      assert.ok(err instanceof PermissionError, String(err));
      assert.equal(
        err.message,
        "Missing permission: cannot list pods (all namespaces; for --drain); grant it with " +
          "the README's RBAC section: ClusterRole job-dispatcher-drain (chart: rbac.drain=true)",
      );
      assert.equal(err.message.includes("\n"), false, "one line");
      assert.equal(hits.length, 3, "one review per need");
      assert.ok(hits.every((h) => new URL(h.url).pathname === SELF_SUBJECT_ACCESS_REVIEWS));
      assert.ok(hits.every((h) => h.method === "POST"));
      assert.deepEqual(
        hits.map((h) => (h.body as { spec: unknown }).spec),
        [
          { resourceAttributes: { verb: "list", group: "", resource: "pods" } },
          {
            resourceAttributes: {
              verb: "create",
              group: "",
              resource: "pods",
              subresource: "eviction",
            },
          },
          { resourceAttributes: { verb: "patch", group: "", resource: "nodes" } },
        ],
      );
    },
  );
});

Deno.test("checkPermissions() passes when all is allowed, and when the server cannot review", async (t) => {
  const needs = permissionNeeds(withFlags({ cordon: true, drain: DRAIN }));
  await t.step("all allowed", async () => {
    await withServer(
      () => Response.json({ status: { allowed: true } }, { status: 201 }),
      async (kube) => await checkPermissions(kube, needs),
    );
  });
  for (const code of [403, 404]) {
    await t.step(`the review answers ${code}: not asked further`, async () => {
      await withServer(
        () => status(code, code === 403 ? "Forbidden" : "NotFound"),
        async (kube) => await checkPermissions(kube, needs),
      );
    });
  }
});

Deno.test({
  name: "permissionNeeds() asks for `patch nodes` when the template's ttlSecondsAfterFinished " +
    "meets post-success work: the success mark is all that stops a re-run from running a " +
    "Job its TTL removed a second time",
  permissions: "none",
  async fn(t) {
    const label = { key: "k", pendingValue: "false", extra: [], claim: false, remove: false };
    const ttl = (secs?: number) => ({
      namespace: "ns",
      prefix: "drv",
      targets: [{ job: () => ({ spec: { ttlSecondsAfterFinished: secs, template: {} } }) }],
    });
    const verified = (pods: boolean) =>
      ({
        ...withFlags({}),
        verify: pods ? { podSelector: "app=x", timeoutSecs: 60 } : { timeoutSecs: 60 },
      }) as unknown as RunConfig;
    const mark = (flags: string) => `ttlSecondsAfterFinished with ${flags} (the success mark)`;
    const cases: [string, RunConfig, ReturnType<typeof ttl>, string[]][] = [
      ["--verify-* and a TTL", verified(false), ttl(600), [`patch nodes: ${mark("--verify-*")}`]],
      ["--verify-pod-selector and a TTL", verified(true), ttl(0), [
        "list pods: --verify-pod-selector",
        `patch nodes: ${mark("--verify-*")}`,
      ]],
      ["--cordon and a TTL: once", withFlags({ cordon: true }), ttl(60), [
        `patch nodes: --cordon ${mark("--cordon")}`,
      ]],
      ["--verify-* without a TTL: no mark needed", verified(false), ttl(undefined), []],
      ["a TTL without post-success work", withFlags({}, { ...label }), ttl(60), []],
    ];
    for (const [name, opts, run, want] of cases) {
      await t.step(name, () => {
        const got = permissionNeeds(opts, run).map((n) =>
          `${n.verb} ${n.resource}${n.subresource ? `/${n.subresource}` : ""}: ${n.flags.join(" ")}`
        );
        assert.deepEqual(got, want);
      });
    }
  },
});

Deno.test("checkPermissions() says grant them for several permissions and cluster-scoped for nodes", async () => {
  await withServer(
    () =>
      Response.json({ kind: "SelfSubjectAccessReview", status: { allowed: false } }, {
        status: 201,
      }),
    async (kube) => {
      const needs = permissionNeeds(withFlags({ cordon: true, drain: DRAIN }));
      const err = await checkPermissions(kube, needs).then(() => undefined, (e) => e);
      assert.ok(err instanceof PermissionError, String(err));
      assert.match(err.message, /patch nodes \(cluster-scoped; for --drain\)/);
      assert.match(err.message, /list pods \(all namespaces; for --drain\)/);
      assert.match(err.message, /; grant them with the README's RBAC section: /);
      assert.doesNotMatch(err.message, /grant it\b/);
    },
  );
});
