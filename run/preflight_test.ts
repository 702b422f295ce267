import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import type { RunConfig } from "./config.ts";
import {
  accessNeeds,
  checkPermissions,
  describeApiError,
  type NamespaceSources,
  optionalNeedsLine,
  PermissionError,
  permissionNeeds,
  resolveNamespace,
  SELF_SUBJECT_ACCESS_REVIEWS,
} from "./preflight.ts";
import { status, withServer } from "../testing/loopback.ts";
import { ApiError } from "../kube/client.ts";

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
      async (kube) => {
        await checkPermissions(kube, needs);
      },
    );
  });
  for (const code of [403, 404]) {
    await t.step(`the review answers ${code}: not asked further, and said`, async () => {
      await withServer(
        () => status(code, code === 403 ? "Forbidden" : "NotFound"),
        async (kube) => {
          const said: string[] = [];
          await checkPermissions(kube, needs, (line) => said.push(line));
          // Unchecked is "I don't know", never "all granted": kubectl auth
          // can-i says the error too.
          assert.equal(said.length, 1, said.join("\n"));
          assert.match(said[0], /^Pre-flight: cannot ask the API server .*not checked/);
          assert.match(said[0], /job-dispatcher rbac/);
        },
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

/** `verb resource[/sub] [name] @ns` with `?` for an optional need: one need as a table reads it. */
function needKey(n: ReturnType<typeof accessNeeds>[number]): string {
  const what = `${n.verb} ${n.group ? `${n.group}/` : ""}${n.resource}` +
    `${n.subresource ? `/${n.subresource}` : ""}${n.name ? ` ${n.name}` : ""}`;
  return `${what} @${n.namespace ?? "*"}${n.optional ? " ?" : ""}`;
}

const BASE = [
  "get nodes @*",
  "list nodes @*",
  "watch nodes @* ?",
  "patch nodes @* ?",
  "get batch/jobs @ns",
  "list batch/jobs @ns",
  "create batch/jobs @ns",
  "delete batch/jobs @ns",
  "watch batch/jobs @ns ?",
  "list pods @ns ?",
  "create events @ns ?",
  "create events @default ?",
  // The run record by its name (RBAC cannot name the object of a create).
  "get configmaps run-record.drv @ns ?",
  "create configmaps @ns ?",
  "update configmaps run-record.drv @ns ?",
];

Deno.test({
  name: "accessNeeds() lists every permission a run uses; only recording ones are optional",
  permissions: "none",
  async fn(t) {
    const run = { namespace: "ns", prefix: "drv" };
    const cases: [string, RunConfig, string[]][] = [
      ["no flags: the base", withFlags({}), BASE],
      [
        "--drain: cluster-wide pods, evictions, and node patch required",
        withFlags({ cordon: true, drain: DRAIN }),
        [
          ...BASE.map((k) => k === "patch nodes @* ?" ? "patch nodes @*" : k),
          "list pods @*",
          "create pods/eviction @*",
          // The plan reads a refusing budget to say "blocked for good"; without
          // it the plan says "refused now" (preview/drain_preview.ts judged()).
          "get policy/poddisruptionbudgets @* ?",
        ],
      ],
      [
        "--drain --disable-eviction: no budget is consulted, none read",
        withFlags({ cordon: true, drain: { ...DRAIN, disableEviction: true } }),
        [
          ...BASE.map((k) => k === "patch nodes @* ?" ? "patch nodes @*" : k),
          "list pods @*",
          "delete pods @*",
        ],
      ],
      [
        "--owner-job-from-pod: get pods required, the owner's annotation optional",
        { ...withFlags({}), ownerJobFromPod: "p" } as RunConfig,
        [...BASE, "patch batch/jobs @ns ?", "get pods @ns"],
      ],
      [
        "--kubelet-timeout-warn-secs: nodes/proxy, optional",
        { ...withFlags({}), kubeletTimeoutWarnSecs: 30 } as RunConfig,
        [...BASE.slice(0, 4), "get nodes/proxy @* ?", ...BASE.slice(4)],
      ],
      [
        "the gates: the latch by name, create configmaps required",
        gated("pause", "owner"),
        [
          ...BASE.map((k) => k === "create configmaps @ns ?" ? "create configmaps @ns" : k),
          "patch batch/jobs @ns",
          "get configmaps drv-gate-breach @ns",
        ],
      ],
    ];
    for (const [what, opts, want] of cases) {
      await t.step(what, () => {
        assert.deepEqual(accessNeeds(opts, run).map(needKey).sort(), [...want].sort());
      });
    }
  },
});

Deno.test("checkPermissions() returns the optional needs the user lacks, for one warning line", async () => {
  await withServer(
    (_req, _n, body) => {
      const attrs = (body as { spec: { resourceAttributes: Record<string, string> } }).spec
        .resourceAttributes;
      const allowed = !(attrs.verb === "watch" || attrs.resource === "events");
      return Response.json({ status: { allowed } }, { status: 201 });
    },
    async (kube) => {
      const lacking = await checkPermissions(
        kube,
        accessNeeds(withFlags({}), { namespace: "ns", prefix: "p" }),
      );
      assert.deepEqual(lacking.map(needKey), [
        "watch nodes @* ?",
        "watch batch/jobs @ns ?",
        "create events @ns ?",
        "create events @default ?",
      ]);
      assert.equal(
        optionalNeedsLine(lacking),
        "Pre-flight: no permission to watch nodes (cluster-scoped; for the re-read before " +
          "each create (else a LIST)), watch jobs (in namespace ns; for the Jobs' watch (else " +
          "LIST polling)), create events (in namespace ns; for the rollout Events), create " +
          "events (in namespace default; for the Events on nodes); the rollout goes on " +
          "without it (job-dispatcher rbac prints the rules for these flags)",
      );
    },
  );
});

Deno.test({
  name: "accessNeeds() names only what requires a need in its flags; what merely uses it is apart",
  permissions: "none",
  fn() {
    const patch = accessNeeds(gated("pause", "owner"), { namespace: "ns", prefix: "p" })
      .find((n) => n.verb === "patch" && n.resource === "jobs")!;
    assert.deepEqual(patch.flags, ["--on-gate-breach pause"]);
    assert.deepEqual(patch.uses, ["the owner's progress annotation"]);
    assert.equal(patch.optional, undefined);
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

Deno.test({
  name: "accessNeeds() asks for `get services/proxy` when the gate reads Prometheus through " +
    "the API server's service proxy: without it every query is a 403 after the pre-flight passed",
  permissions: "none",
  async fn(t) {
    const proxy = "https://k:6443/api/v1/namespaces/mon/services/prom:9090/proxy";
    const at = (url: string) => ({ ...gated("exit"), gate: { ...gated("exit").gate!, url } });
    const cases: [string, RunConfig, string | undefined, string[]][] = [
      ["through this API server", at(proxy), "https://k:6443", [
        "get services/proxy prom:9090 @mon",
      ]],
      ["a trailing slash", at(`${proxy}/`), "https://k:6443", [
        "get services/proxy prom:9090 @mon",
      ]],
      ["rbac, which reads no kubeconfig: by the path", at(proxy), undefined, [
        "get services/proxy prom:9090 @mon",
      ]],
      [
        "another server's proxy (kubectl proxy): its own credentials",
        at(proxy),
        "https://o:6443",
        [],
      ],
      ["straight to Prometheus", at("http://prom.mon:9090"), "https://k:6443", []],
    ];
    for (const [what, opts, server, want] of cases) {
      await t.step(what, () => {
        const got = accessNeeds(opts, { namespace: "ns", prefix: "p", server })
          .filter((n) => n.resource === "services").map(needKey);
        assert.deepEqual(got, want);
      });
    }
  },
});

Deno.test({
  name: "accessNeeds() requires `patch jobs` for a gate with waves and an owner: the soak's " +
    "clean-since lives on the owner, and without it a killed run's re-run opens the next wave unsoaked",
  permissions: "none",
  fn() {
    const waves = {
      ...gated("exit", "owner"),
      waves: { steps: [1, "100%"] },
    } as unknown as RunConfig;
    const patch = accessNeeds(waves, { namespace: "ns", prefix: "p" })
      .find((n) => n.verb === "patch" && n.resource === "jobs")!;
    assert.equal(patch.optional, undefined);
    assert.deepEqual(patch.flags, ["--waves with a gate (the soak's clean-since on the owner)"]);
    const unwaved = accessNeeds(gated("exit", "owner"), { namespace: "ns", prefix: "p" })
      .find((n) => n.verb === "patch" && n.resource === "jobs")!;
    assert.equal(unwaved.optional, true);
  },
});

Deno.test({
  name: "permissionNeeds() requires `patch nodes` for --cleanup-job-template: the cleanup run " +
    "demotes and unlabels each node, whatever the main run's label flags",
  permissions: "none",
  fn() {
    const key = { key: "k", pendingValue: "false", extra: [], claim: false, remove: false };
    const opts = { ...withFlags({}, key), cleanupJobTemplate: "c.yaml" } as RunConfig;
    const got = permissionNeeds(opts, { namespace: "ns", prefix: "p" }).map((n) =>
      `${n.verb} ${n.resource}: ${n.flags.join(" ")}${n.optional ? " ?" : ""}`
    );
    assert.deepEqual(got, ["patch nodes: --cleanup-job-template"]);
    // With a TTL on the cleanup template, its unlabel is post-success work too.
    const ttl = { job: () => ({ spec: { ttlSecondsAfterFinished: 60, template: {} } }) as V1Job };
    const marked = permissionNeeds(opts, { namespace: "ns", prefix: "p", cleanupTargets: [ttl] })
      .flatMap((n) => n.flags);
    assert.ok(
      marked.some((f) => /--cleanup-job-template \(the success mark\)/.test(f)),
      marked.join(),
    );
  },
});

Deno.test({
  name: "describeApiError() sends a 403 to the command that prints the rules, not to a README " +
    "section that moved (the nodes' 403 comes before the pre-flight can name its rule)",
  permissions: "none",
  fn() {
    const e = new ApiError({
      status: 403,
      reason: "Forbidden",
      verb: "list",
      resource: "nodes",
      message: 'nodes is forbidden: User "u" cannot list resource "nodes"',
    });
    const line = describeApiError(e);
    assert.match(line, /grant the verb "list" on "nodes" to this user/);
    assert.match(line, /job-dispatcher rbac \[the run's flags\] prints every rule/);
    assert.match(line, /--viewer/);
    assert.doesNotMatch(line, /\n/);
  },
});

Deno.test(
  "checkPermissions() asks for the run record by its name: a Role naming only run-record.<prefix> lacks nothing",
  async () => {
    // An authorizer that grants configmaps get/update only on the record by
    // name (as a rule with resourceNames does) and create on any.
    const named = new Set(["get", "update"]);
    await withServer(
      (_req, _n, body) => {
        const a = (body as { spec: { resourceAttributes: Record<string, string> } }).spec
          .resourceAttributes;
        const allowed = a.resource !== "configmaps" ||
          (named.has(a.verb) ? a.name === "run-record.p" : a.verb === "create" && !a.name);
        return Response.json({ status: { allowed } }, { status: 201 });
      },
      async (kube) => {
        const lacking = await checkPermissions(
          kube,
          accessNeeds(withFlags({}), { namespace: "ns", prefix: "p" }),
        );
        assert.deepEqual(lacking.map(needKey), []);
      },
    );
  },
);
