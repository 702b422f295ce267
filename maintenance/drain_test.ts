import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import {
  describeRefusals,
  type DrainOptions,
  drainTimeoutReason,
  type EvictionAnswer,
  interpretEviction,
  MULTIPLE_PDBS,
  PDB_VIOLATION,
  planDrain,
} from "./drain.ts";
import { parseLabelSelector } from "../nodes/label_selector.ts";
import { controllerRef, pod } from "../testing/pods.ts";

const NO_FLAGS: DrainOptions = { deleteEmptyDirData: false, force: false };

Deno.test({
  name: "planDrain() evicts, skips or refuses each pod as kubectl drain would, and says why",
  permissions: "none",
  async fn(t) {
    const now = Date.parse("2026-06-01T12:00:00Z");
    const cases: {
      name: string;
      pod: V1Pod;
      opts?: Partial<DrainOptions>;
      want: "evict" | "skip" | "refuse";
      reason?: string;
    }[] = [
      {
        name: "a ReplicaSet pod is evicted",
        pod: pod("web", { controller: "ReplicaSet" }),
        want: "evict",
      },
      {
        name: "a DaemonSet pod stays",
        pod: pod("agent", { controller: "DaemonSet" }),
        want: "skip",
        reason: "ignoring DaemonSet-managed Pods",
      },
      {
        name: "a finished DaemonSet pod is evicted",
        pod: pod("agent", { controller: "DaemonSet", phase: "Succeeded" }),
        want: "evict",
      },
      {
        name: "a DaemonSet of another API group is not a DaemonSet",
        pod: pod("x", { controller: controllerRef("DaemonSet", "example.com/v1") }),
        want: "evict",
      },
      {
        name: "a mirror pod stays",
        pod: pod("etcd", { meta: { annotations: { "kubernetes.io/config.mirror": "abc" } } }),
        want: "skip",
        reason: "mirror pod of a static pod (managed by the kubelet)",
      },
      {
        name: "emptyDir without --delete-emptydir-data refuses",
        pod: pod("cache", { controller: "ReplicaSet", emptyDir: true }),
        want: "refuse",
        reason:
          "cannot delete Pods with local storage (use --delete-emptydir-data to override): shop/cache",
      },
      {
        name: "emptyDir with --delete-emptydir-data is evicted",
        pod: pod("cache", { controller: "ReplicaSet", emptyDir: true }),
        opts: { deleteEmptyDirData: true },
        want: "evict",
      },
      {
        name: "a finished pod with emptyDir is evicted",
        pod: pod("cache", { controller: "ReplicaSet", emptyDir: true, phase: "Failed" }),
        want: "evict",
      },
      {
        name: "a bare pod without --force refuses",
        pod: pod("bare"),
        want: "refuse",
        reason:
          "cannot delete Pods that declare no controller (use --force to override): shop/bare",
      },
      {
        name: "a bare pod with --force is evicted",
        pod: pod("bare"),
        opts: { force: true },
        want: "evict",
      },
      {
        name: "a finished bare pod is evicted",
        pod: pod("bare", { phase: "Succeeded" }),
        want: "evict",
      },
      {
        name: "an owner that is not the controller does not count",
        pod: pod("x", {
          meta: { ownerReferences: [{ apiVersion: "v1", kind: "X", name: "o", uid: "u" }] },
        }),
        want: "refuse",
        reason: "cannot delete Pods that declare no controller (use --force to override): shop/x",
      },
      {
        name: "emptyDir is judged before the controller, as kubectl orders them",
        pod: pod("bare-cache", { emptyDir: true }),
        want: "refuse",
        reason:
          "cannot delete Pods with local storage (use --delete-emptydir-data to override): shop/bare-cache",
      },
      {
        name: "a pod outside --pod-selector stays, even one that would refuse",
        pod: pod("bare", { meta: { labels: { app: "db" } } }),
        opts: { podSelector: { text: "app=web", requirements: parseLabelSelector("app=web") } },
        want: "skip",
        reason: "not selected by --pod-selector app=web",
      },
      {
        name: "a pod inside --pod-selector is judged by the other rules",
        pod: pod("web", { controller: "ReplicaSet", meta: { labels: { app: "web" } } }),
        opts: { podSelector: { text: "app=web", requirements: parseLabelSelector("app=web") } },
        want: "evict",
      },
      {
        name: "a pod deleted long ago stays with a skip timeout",
        pod: pod("stuck", {
          controller: "ReplicaSet",
          meta: { deletionTimestamp: new Date(now - 120_000) },
        }),
        opts: { skipDeletedAfterSecs: 60, now },
        want: "skip",
        reason: "pod has DeletionTimestamp older than 60 seconds",
      },
      {
        name: "a pod deleted just now is still waited for",
        pod: pod("going", {
          controller: "ReplicaSet",
          meta: { deletionTimestamp: new Date(now - 10_000) },
        }),
        opts: { skipDeletedAfterSecs: 60, now },
        want: "evict",
      },
      {
        name: "without a skip timeout a deleted pod is evicted (waited for)",
        pod: pod("going", {
          controller: "ReplicaSet",
          meta: { deletionTimestamp: new Date(now - 999_000) },
        }),
        want: "evict",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const plan = planDrain([c.pod], { ...NO_FLAGS, ...c.opts });
        const got = plan.evict.length ? "evict" : plan.skipped.length ? "skip" : "refuse";
        assert.equal(got, c.want);
        const reason = plan.skipped[0]?.reason ?? plan.refused[0]?.reason;
        assert.equal(reason, c.reason);
      });
    }
  },
});

Deno.test({
  name:
    "planDrain() gathers warnings and describeRefusals() groups refusals as kubectl prints them",
  permissions: "none",
  async fn(t) {
    await t.step("warnings name the pods they concern", () => {
      const plan = planDrain(
        [pod("a"), pod("b", { emptyDir: true, controller: "ReplicaSet" }), pod("c")],
        { deleteEmptyDirData: true, force: true },
      );
      assert.deepEqual(plan.evict.map((p) => p.metadata!.name), ["a", "b", "c"]);
      assert.deepEqual(plan.warnings, [
        "deleting Pods that declare no controller: shop/a, shop/c",
        "deleting Pods with local storage: shop/b",
      ]);
    });
    await t.step("refusals are grouped by rule", () => {
      const plan = planDrain(
        [pod("a"), pod("b", { emptyDir: true, controller: "ReplicaSet" }), pod("c")],
        NO_FLAGS,
      );
      assert.equal(plan.evict.length, 0);
      assert.equal(
        describeRefusals(plan.refused),
        "cannot delete Pods that declare no controller (use --force to override): shop/a, shop/c; " +
          "cannot delete Pods with local storage (use --delete-emptydir-data to override): shop/b",
      );
    });
  },
});

Deno.test({
  name: "interpretEviction() tells a PDB block from an outage, a gone pod and a refusal",
  permissions: "none",
  async fn(t) {
    const p = pod("web-1");
    const cases: { name: string; answer: EvictionAnswer; want: unknown }[] = [
      { name: "201 evicted", answer: { status: 201 }, want: { kind: "evicted" } },
      {
        name: "404 gone",
        answer: { status: 404, message: 'pods "web-1" not found' },
        want: { kind: "gone" },
      },
      {
        name: "409 on the UID precondition: replaced, so ours is gone",
        answer: {
          status: 409,
          message: "Precondition failed: UID in precondition: a, UID in object meta: b",
        },
        want: { kind: "gone" },
      },
      {
        name: "429 with the DisruptionBudget cause names the budget",
        answer: {
          status: 429,
          message: PDB_VIOLATION,
          causes: [{
            reason: "DisruptionBudget",
            message: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
          }],
        },
        want: {
          kind: "blocked",
          budget: "shop/web-pdb",
          detail: "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
          message: "blocked by PodDisruptionBudget shop/web-pdb: " +
            "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
        },
      },
      {
        name: "429 of a budget still being processed",
        answer: {
          status: 429,
          message: PDB_VIOLATION,
          causes: [{
            reason: "DisruptionBudget",
            message: "The disruption budget web-pdb is still being processed by the server.",
          }],
        },
        want: {
          kind: "blocked",
          budget: "shop/web-pdb",
          detail: "The disruption budget web-pdb is still being processed by the server.",
          message: "blocked by PodDisruptionBudget shop/web-pdb: " +
            "The disruption budget web-pdb is still being processed by the server.",
        },
      },
      {
        name: "429 with the PDB message but no cause",
        answer: { status: 429, message: PDB_VIOLATION },
        want: {
          kind: "blocked",
          budget: undefined,
          detail: PDB_VIOLATION,
          message: `blocked by PodDisruptionBudget (unnamed): ${PDB_VIOLATION}`,
        },
      },
      {
        name: "429 without a budget is throttling: retried after its Retry-After",
        answer: { status: 429, message: "Too many requests", retryAfterMs: 1000 },
        want: {
          kind: "retry",
          message: "cannot evict shop/web-1: throttled by the API server (429): Too many requests",
          afterMs: 1000,
        },
      },
      {
        name: "500 with several budgets refuses",
        answer: { status: 500, message: MULTIPLE_PDBS },
        want: {
          kind: "refused",
          message: "cannot evict shop/web-1: more than one PodDisruptionBudget covers it, " +
            "which the Eviction API refuses; make one budget select it",
        },
      },
      {
        name: "another 500 is retried",
        answer: { status: 500, message: "etcdserver: request timed out" },
        want: {
          kind: "retry",
          message: "cannot evict shop/web-1: answered 500: etcdserver: request timed out",
        },
      },
      {
        name: "unreachable is retried",
        answer: { status: 0, message: "connection refused" },
        want: {
          kind: "retry",
          message: "cannot evict shop/web-1: answered nothing: connection refused",
        },
      },
      {
        name: "a terminating namespace is waited for",
        answer: { status: 403, message: "forbidden", causes: [{ reason: "NamespaceTerminating" }] },
        want: { kind: "retry", message: "namespace of shop/web-1 is terminating: forbidden" },
      },
      {
        name: "403 Forbidden by RBAC refuses",
        answer: { status: 403, message: 'pods "web-1" is forbidden: cannot create pods/eviction' },
        want: {
          kind: "refused",
          message:
            'cannot evict shop/web-1: pods "web-1" is forbidden: cannot create pods/eviction',
        },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.deepEqual(interpretEviction(p, c.answer), c.want));
    }
    await t.step("a terminating namespace with the pod already deleting counts as evicted", () => {
      const going = pod("web-2", { meta: { deletionTimestamp: new Date() } });
      const answer = { status: 403, message: "x", causes: [{ reason: "NamespaceTerminating" }] };
      assert.deepEqual(interpretEviction(going, answer), { kind: "evicted" });
    });
  },
});

Deno.test({
  name: "drainTimeoutReason() names each blocking budget once and the pods still on the node",
  permissions: "none",
  async fn(t) {
    const blocked = (name: string, budget: string) => ({
      pod: pod(name),
      verdict: interpretEviction(pod(name), {
        status: 429,
        message: PDB_VIOLATION,
        causes: [{
          reason: "DisruptionBudget",
          message: `The disruption budget ${budget} needs 2 healthy pods and has 2 currently`,
        }],
      }),
    });
    const cases: [string, Parameters<typeof drainTimeoutReason>[0], string][] = [
      [
        "nothing known",
        { timeoutSecs: 600, blocked: [], remaining: [] },
        "drain did not finish within 600 s",
      ],
      [
        "two pods of one budget, one of another, and a pod still terminating",
        {
          timeoutSecs: 10,
          blocked: [
            blocked("web-1", "web-pdb"),
            blocked("web-2", "web-pdb"),
            blocked("db-0", "db-pdb"),
          ],
          remaining: [
            pod("web-1"),
            pod("web-2"),
            pod("db-0"),
            pod("old", { meta: { deletionTimestamp: new Date() } }),
          ],
        },
        "drain did not finish within 10 s; " +
        "blocked by PodDisruptionBudget shop/web-pdb (The disruption budget web-pdb needs 2 healthy pods and has 2 currently); " +
        "blocked by PodDisruptionBudget shop/db-pdb (The disruption budget db-pdb needs 2 healthy pods and has 2 currently); " +
        "pods still on the node: shop/web-1, shop/web-2, shop/db-0, shop/old (terminating)",
      ],
    ];
    for (const [name, input, want] of cases) {
      await t.step(name, () => assert.equal(drainTimeoutReason(input), want));
    }
  },
});
