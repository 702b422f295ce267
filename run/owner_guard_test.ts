import assert from "node:assert/strict";
import type { V1Job } from "@kubernetes/client-node";
import { trackingKeys } from "../job.ts";
import { withServer } from "../testing/loopback.ts";
import type { Kube } from "../kube/client.ts";
import {
  activeByOwner,
  endOfRun,
  type GuardLog,
  isJobActive,
  isLiveOwner,
  type OwnerGuardOptions,
  releaseDecision,
  releasePatch,
  settlingJobs,
  sweepable,
  tieTemplate,
  waitForEarlierRuns,
} from "./owner_guard.ts";

const KEY = "job-dispatcher/per-node-jobs";
const done = (type: "Complete" | "Failed" | "SuccessCriteriaMet") => ({
  status: { conditions: [{ type, status: "True" }] },
});

Deno.test("releasePatch() removes only our finalizer, at the index it was read", {
  permissions: "none",
}, async (t) => {
  await t.step("among others", () => {
    assert.deepEqual(releasePatch({ metadata: { uid: "u", finalizers: ["x/y", KEY] } }, KEY), [
      { op: "test", path: "/metadata/uid", value: "u" },
      { op: "test", path: "/metadata/finalizers/1", value: KEY },
      { op: "remove", path: "/metadata/finalizers/1" },
    ]);
  });
  await t.step("nothing when it is not there", () => {
    assert.equal(releasePatch({ metadata: { uid: "u", finalizers: ["x/y"] } }, KEY), undefined);
    assert.equal(releasePatch({ metadata: { uid: "u" } }, KEY), undefined);
  });
});

Deno.test("isJobActive() holds until Complete or Failed, when the pods are gone", {
  permissions: "none",
}, async (t) => {
  const cases = [
    { name: "no status", job: {}, want: true },
    {
      name: "SuccessCriteriaMet: pods may still terminate",
      job: done("SuccessCriteriaMet"),
      want: true,
    },
    { name: "Complete", job: done("Complete"), want: false },
    { name: "Failed", job: done("Failed"), want: false },
  ];
  for (const c of cases) await t.step(c.name, () => assert.equal(isJobActive(c.job), c.want));
});

Deno.test("releaseDecision() drops a finalizer only once no per-node Job of that owner is active", {
  permissions: "none",
}, async (t) => {
  const owner = (uid: string, extra: Partial<V1Job> = {}): V1Job => ({
    metadata: { uid, name: `o-${uid}`, ...extra.metadata },
    status: extra.status,
  });
  const jobs: V1Job[] = [
    { metadata: { ownerReferences: [{ kind: "Job", uid: "old", name: "o", apiVersion: "" }] } },
    {
      metadata: { ownerReferences: [{ kind: "Job", uid: "ours", name: "o", apiVersion: "" }] },
      ...done("Complete"),
    },
  ];
  const active = activeByOwner(jobs);
  assert.deepEqual([...active], [["old", 1]]);
  const cases = [
    { name: "ours, all finished", o: owner("ours"), want: true },
    { name: "ours, one still active", o: owner("ours"), active: [["ours", 1]], want: false },
    { name: "an earlier owner with an active Job", o: owner("old", done("Complete")), want: false },
    {
      name: "an earlier owner, finished, none active",
      o: owner("old2", done("Complete")),
      want: true,
    },
    {
      name: "an earlier owner being deleted, none active",
      o: owner("old2", { metadata: { deletionTimestamp: new Date() } }),
      want: true,
    },
    { name: "an earlier owner whose run is live", o: owner("old2"), want: false },
  ];
  for (const c of cases) {
    await t.step(c.name, () => {
      const counts = c.active ? new Map(c.active as [string, number][]) : active;
      assert.equal(releaseDecision(c.o, "ours", counts).release, c.want);
    });
  }
});

Deno.test("settlingJobs() counts Jobs whose outcome is decided but whose pods are not gone", {
  permissions: "none",
}, () => {
  const jobs = [
    {},
    done("SuccessCriteriaMet"),
    { status: { conditions: [{ type: "FailureTarget", status: "True" }] } },
    done("Complete"),
    done("Failed"),
    {
      status: {
        conditions: [
          { type: "SuccessCriteriaMet", status: "True" },
          ...done("Complete").status.conditions,
        ],
      },
    },
  ];
  assert.equal(settlingJobs(jobs), 2);
});

Deno.test("isLiveOwner() holds while a dispatcher runs or will run in the owner Job", {
  permissions: "none",
}, async (t) => {
  const deleted = { deletionTimestamp: new Date() };
  const cases = [
    { name: "not finished: running, or between pod retries", job: {}, want: true },
    { name: "Complete", job: done("Complete"), want: false },
    { name: "Failed: deadline or backoffLimit", job: done("Failed"), want: false },
    {
      name: "being deleted with its pod",
      job: { metadata: deleted, status: { active: 1 } },
      want: true,
    },
    {
      // The GC marks the dispatcher's pod deleted first: `active` drops to 0
      // while the pod still runs its SIGTERM grace period and may create Jobs.
      name: "being deleted, its pod terminating (active excludes it): still live",
      job: { metadata: deleted, status: { active: 0, terminating: 1 } },
      want: true,
    },
    {
      name: "being deleted without a pod: never runs again",
      job: { metadata: deleted },
      want: false,
    },
  ];
  for (const c of cases) await t.step(c.name, () => assert.equal(isLiveOwner(c.job), c.want));
});

Deno.test("sweepable() never takes this run's owner, a live one, or one with an active Job", {
  permissions: "none",
}, async (t) => {
  const active = new Map([["busy", 2]]);
  const owner = (uid: string, extra: Partial<V1Job> = {}): V1Job => ({
    metadata: { uid, ...extra.metadata },
    status: extra.status ?? done("Complete").status,
  });
  const cases = [
    { name: "finished, no active per-node Job", o: owner("old"), want: true },
    { name: "this run's owner", o: owner("ours"), want: false },
    { name: "finished, but a per-node Job active", o: owner("busy"), want: false },
    { name: "live", o: owner("old", { status: { active: 1, ready: 1 } }), want: false },
    {
      name: "not finished, but no dispatcher ever ran in it (ImagePullBackOff)",
      o: owner("old", { status: { active: 1 } }),
      want: true,
    },
    {
      name: "already being deleted",
      o: owner("old", { metadata: { deletionTimestamp: new Date() } }),
      want: false,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, () => assert.equal(sweepable(c.o, "ours", active, KEYS.progress), c.want));
  }
});

const KEYS = trackingKeys("job-dispatcher");
const GROUP = "rollout-job-dispatcher";
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));

/** An owner Job of the chart's group, created at second `s`. */
function hook(name: string, s: number, extra: Partial<V1Job> = {}): V1Job {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      creationTimestamp: at(s),
      labels: { [KEYS.hook]: GROUP },
      annotations: { "helm.sh/hook": "post-upgrade" },
      ...extra.metadata,
    },
    status: extra.status ?? done("Complete").status,
  };
}

/** The metadata of hook Job `name` (created at second `s`) once a run began in it. */
function begun(name: string, s: number): V1Job["metadata"] {
  return {
    name,
    uid: `uid-${name}`,
    creationTimestamp: at(s),
    labels: { [KEYS.hook]: GROUP },
    annotations: { "helm.sh/hook": "post-upgrade", [KEYS.progress]: "began" },
  };
}

/** A per-node Job owned by `owner`. */
function perNode(owner: string, active: boolean): V1Job {
  return {
    metadata: {
      name: `task-${owner}`,
      ownerReferences: [{ kind: "Job", uid: `uid-${owner}`, name: owner, apiVersion: "batch/v1" }],
    },
    ...(active ? {} : done("Complete")),
  };
}

/** Serves the Jobs of namespace team: GET by name, LIST by label (existence or key=value). */
function serveJobs(jobs: () => V1Job[]) {
  return (req: Request) => {
    const url = new URL(req.url);
    if (req.method !== "GET") return Response.json({});
    const name = url.pathname.match(/\/jobs\/([^/]+)$/)?.[1];
    if (name) {
      const job = jobs().find((j) => j.metadata?.name === name);
      return job
        ? Response.json(job)
        : Response.json({ kind: "Status", code: 404 }, { status: 404 });
    }
    const [key, value] = (url.searchParams.get("labelSelector") ?? "").split("=");
    const items = jobs().filter((j) => {
      const labels = j.metadata?.labels ?? {};
      if (key === KEYS.owner) return j.metadata?.ownerReferences !== undefined;
      return value === undefined ? key in labels : labels[key] === value;
    });
    return Response.json({ metadata: {}, items });
  };
}

Deno.test(
  "endOfRun() deletes finished earlier hook Jobs with no active per-node Job, drops the old finalizer, adds none",
  async () => {
    const legacy = hook(GROUP, 1, {
      metadata: {
        name: GROUP,
        uid: `uid-${GROUP}`,
        creationTimestamp: at(1),
        annotations: { "helm.sh/hook": "post-upgrade" },
        labels: { [KEYS.guard]: "true" },
        finalizers: [KEYS.guard],
      },
    });
    const jobs = [
      legacy,
      hook("r1", 2),
      hook("r2", 3),
      hook("r3", 4, { status: {} }),
      hook("r9", 9, { status: {} }), // a later revision: not ours to judge
      perNode(GROUP, false),
      perNode("r1", false),
      perNode("r2", true),
    ];
    const lines: string[] = [];
    const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
    await withServer(serveJobs(() => jobs), async (kube, hits) => {
      await endOfRun({
        kube,
        namespace: "team",
        owner: { name: "r3", uid: "uid-r3" },
        keys: KEYS,
        log,
        settleMs: 0,
      });
      const said = lines.join("\n");
      const deletes = hits.filter((h) => h.method === "DELETE");
      assert.deepEqual(deletes.map((h) => new URL(h.url).pathname.split("/").pop()).sort(), [
        "r1",
        GROUP,
      ], said);
      for (const d of deletes) {
        const body = d.body as { propagationPolicy: string; preconditions: { uid: string } };
        assert.equal(body.propagationPolicy, "Background");
        assert.ok(body.preconditions.uid.startsWith("uid-"));
      }
      const patches = hits.filter((h) => h.method === "PATCH");
      assert.equal(patches.length, 1, said);
      assert.ok(patches[0].url.endsWith(`/jobs/${GROUP}`));
      const ops = patches[0].body as { op: string }[];
      assert.ok(ops.every((o) => o.op !== "add"), "no PATCH adds a finalizer");
      assert.match(said, /removed finalizer job-dispatcher\/per-node-jobs of an earlier version/);
    });
  },
);

/** The guard's options for the run of hook Job r2. */
function asR2(
  kube: Kube,
  log: GuardLog,
  extra: Partial<OwnerGuardOptions>,
): OwnerGuardOptions {
  return {
    kube,
    namespace: "team",
    owner: { name: "r2", uid: "uid-r2" },
    keys: KEYS,
    log,
    ...extra,
  };
}

Deno.test("waitForEarlierRuns() waits while an earlier revision's run is live, never for a dead one", async (t) => {
  const cases = [
    {
      name: "live for two reads, then Complete",
      liveReads: 2,
      status: { active: 1, ready: 1 },
      waited: true,
    },
    {
      name: "Failed (deadline, backoffLimit): no wait",
      liveReads: 0,
      status: done("Failed").status,
      waited: false,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      let reads = 0;
      const earlier = () =>
        hook("r1", 1, { status: reads++ < c.liveReads * 2 ? c.status : done("Complete").status });
      const lines: string[] = [];
      const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
      await withServer(
        // r2 runs its second pod (the first began, then was evicted): it
        // resumes, r3 or not.
        serveJobs(() => [
          hook("r2", 2, { status: { active: 1 }, metadata: begun("r2", 2) }),
          hook("r3", 3, { status: {} }),
          earlier(),
        ]),
        async (kube) => {
          assert.equal(await waitForEarlierRuns(asR2(kube, log, { pollMs: 10 })), true);
          assert.equal(
            lines.some((l) => /waiting for the run of earlier hook job r1 to end/.test(l)),
            c.waited,
          );
          assert.ok(!lines.some((l) => /r3/.test(l)), "a later revision is never waited for");
        },
      );
    });
  }
  await t.step("a stop (SIGTERM) ends the wait", async () => {
    const log = { info: () => {}, warn: () => {} };
    await withServer(
      serveJobs(
        () => [hook("r1", 1, { status: { active: 1, ready: 1 } }), hook("r2", 2, { status: {} })],
      ),
      async (kube) => {
        const stop = new AbortController();
        setTimeout(() => stop.abort(), 50);
        const opts = asR2(kube, log, { pollMs: 10_000, signal: stop.signal });
        assert.equal(await waitForEarlierRuns(opts), false);
      },
    );
  });
});

Deno.test("waitForEarlierRuns() is never blocked by an earlier hook Job in which no dispatcher ran", async (t) => {
  const lines: string[] = [];
  const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
  await t.step("an earlier hook's pod in ImagePullBackOff (not ready): no wait", async () => {
    await withServer(
      serveJobs(() => [hook("r1", 1, { status: { active: 1 } }), hook("r2", 2, { status: {} })]),
      async (kube) => {
        // Before: waited until the stop, as every later helm upgrade would.
        const stop = AbortSignal.timeout(1000);
        const opts = asR2(kube, log, { pollMs: 10, signal: stop });
        assert.equal(await waitForEarlierRuns(opts), true, lines.join("\n"));
      },
    );
  });
  await t.step("its pod starting after all, after r2 was made: it creates nothing", async () => {
    lines.length = 0;
    await withServer(
      serveJobs(() => [hook("r1", 1, { status: { active: 1, ready: 1 } }), hook("r2", 2, {})]),
      async (kube) => {
        const opts = {
          ...asR2(kube, log, { pollMs: 10 }),
          owner: { name: "r1", uid: "uid-r1" },
        };
        assert.equal(await waitForEarlierRuns(opts), false);
        assert.match(lines.join("\n"), /superseded by later hook job r2: creating nothing/);
      },
    );
  });
});

Deno.test("waitForEarlierRuns() waits out an API outage longer than the retry budget", async () => {
  // An earlier rollout may take hours: an outage meanwhile must pause the
  // wait, not end the hook with exit 3 (podFailurePolicy: FailJob), which
  // would leave this revision's rollout undone until another helm upgrade.
  const lines: string[] = [];
  const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
  const serve = serveJobs(() => [hook("r1", 1), hook("r2", 2, { status: {} })]);
  let hits = 0;
  await withServer(
    (req) =>
      ++hits <= 6 ? Response.json({ kind: "Status", code: 503 }, { status: 503 }) : serve(req),
    async (kube) => {
      const stop = AbortSignal.timeout(5000);
      const ok = await waitForEarlierRuns(asR2(kube, log, { pollMs: 10, signal: stop }));
      assert.equal(ok, true, lines.join("\n"));
      assert.match(lines.join("\n"), /API server .*retrying/);
    },
    undefined,
    undefined,
    { retry: { requestTimeoutMs: 1000, budgetMs: 30, baseDelayMs: 5, maxDelayMs: 10 } },
  );
});

Deno.test("waitForEarlierRuns() marks its owner begun before the rollout, so a retry pod resumes", async () => {
  const log = { info: () => {}, warn: () => {} };
  await withServer(
    serveJobs(() => [hook("r1", 1), hook("r2", 2, { status: {} })]),
    async (kube, hits) => {
      assert.equal(await waitForEarlierRuns(asR2(kube, log, { pollMs: 10 })), true);
      const patch = hits.find((h) => h.method === "PATCH");
      assert.ok(patch?.url.endsWith("/jobs/r2"), "the owner is patched");
      const ops = patch!.body as { op: string; path: string; value: unknown }[];
      assert.deepEqual(ops[0], { op: "test", path: "/metadata/uid", value: "uid-r2" });
      assert.equal(ops[1].path, "/metadata/annotations/job-dispatcher~1progress");
    },
  );
});

Deno.test("tieTemplate() makes the hook Job the owner of its revision's template ConfigMap, so the collector deletes it with the Job", async (t) => {
  // The chart names it on the hook Job; one ConfigMap per revision, kept
  // forever, grows etcd by a template per `helm upgrade`.
  const TEMPLATE = "job-dispatcher/template-configmap";
  const named = (name: string, s: number, meta: V1Job["metadata"] = {}) =>
    hook(name, s, {
      status: {},
      metadata: {
        ...hook(name, s).metadata,
        ...meta,
        annotations: {
          "helm.sh/hook": "post-upgrade",
          ...meta.annotations,
          [TEMPLATE]: `${name}-job-template`,
        },
      },
    });
  const cases = [
    {
      name: "its first pod, the chart naming the ConfigMap",
      jobs: [named("r2", 2)],
      patched: true,
    },
    {
      name: "a retry pod of a begun owner: its first pod did (the Role may name a later one now)",
      jobs: [named("r2", 2, begun("r2", 2))],
      patched: false,
    },
    {
      name: "no ConfigMap named (an older chart): none patched",
      jobs: [hook("r2", 2, { status: {} })],
      patched: false,
    },
    {
      name: "another Job under the owner's name (a different UID): none patched",
      jobs: [named("r2", 2, { uid: "uid-other" })],
      patched: false,
    },
  ];
  for (const c of cases) {
    await t.step(c.name, async () => {
      const lines: string[] = [];
      const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
      await withServer(serveJobs(() => c.jobs), async (kube, hits) => {
        await tieTemplate(asR2(kube, log, {}));
        const patches = hits.filter((h) => h.method === "PATCH");
        assert.deepEqual(lines, []);
        if (!c.patched) return assert.deepEqual(patches, []);
        assert.equal(patches.length, 1);
        assert.equal(
          new URL(patches[0].url).pathname,
          "/api/v1/namespaces/team/configmaps/r2-job-template",
        );
        assert.deepEqual(patches[0].body, [
          { op: "test", path: "/metadata/labels/job-dispatcher~1hook", value: GROUP },
          {
            op: "add",
            path: "/metadata/ownerReferences",
            value: [{ apiVersion: "batch/v1", kind: "Job", name: "r2", uid: "uid-r2" }],
          },
        ]);
      });
    });
  }
  await t.step(
    "the owner unread: nothing patched, nothing said (an owner outside the chart names none)",
    async () => {
      const lines: string[] = [];
      const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
      await withServer(
        () => Response.json({ kind: "Status", code: 403, message: "forbidden" }, { status: 403 }),
        async (kube, hits) => {
          await tieTemplate(asR2(kube, log, {}));
          assert.deepEqual(hits.filter((h) => h.method === "PATCH"), []);
          assert.deepEqual(lines, []);
        },
      );
    },
  );
  await t.step(
    "refused (no RBAC): said, with the command that deletes it; never throws",
    async () => {
      const lines: string[] = [];
      const log = { info: (m: string) => lines.push(m), warn: (m: string) => lines.push(m) };
      const serve = serveJobs(() => [named("r2", 2)]);
      await withServer(
        (req) =>
          req.method === "PATCH"
            ? Response.json({ kind: "Status", code: 403, message: "forbidden" }, { status: 403 })
            : serve(req),
        async (kube) => {
          await tieTemplate(asR2(kube, log, {}));
          assert.match(
            lines.join("\n"),
            /Cannot make hook job r2 the owner of its template ConfigMap r2-job-template.*kubectl delete configmap r2-job-template -n team/,
          );
        },
      );
    },
  );
});
