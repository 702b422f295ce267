import assert from "node:assert/strict";
import type { V1Job, V1Node } from "@kubernetes/client-node";
import { applyJsonPatch, type PatchOp } from "../testing/json_patch.ts";
import { status, withServer } from "../testing/loopback.ts";
import { isRetryable, type Kube } from "../kube/client.ts";
import { NodeVerifier, type VerifyConfig } from "./verify.ts";

const NODE = { name: "n1", uid: "node-uid" };
const DONE = "2026-12-01T10:00:05Z";
/** When the engine saw the node's Job end (`jobEndedAt`). */
const ENDED = Date.parse(DONE);

function verifier(
  kube: ConstructorParameters<typeof NodeVerifier>[0]["kube"],
  config: VerifyConfig,
  smoke = false,
) {
  return new NodeVerifier({
    kube,
    namespace: "ops",
    keys: {
      nodeUid: "job-dispatcher/node-uid",
      templateHash: "job-dispatcher/template-hash",
      verified: "job-dispatcher/verified-job",
    },
    config,
    smokeJob: smoke
      ? (node) => ({
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: {
          name: `up-verify-${node.name}`,
          annotations: { "job-dispatcher/node-uid": node.uid },
        },
        spec: { template: { spec: { containers: [] } } },
      })
      : undefined,
    signal: new AbortController().signal,
    pollMs: 20,
  });
}

function podList(ready: string, at: string) {
  return Response.json({
    kind: "PodList",
    metadata: {},
    items: [{
      metadata: { name: "validator-x", namespace: "gpu" },
      status: { conditions: [{ type: "Ready", status: ready, lastTransitionTime: at }] },
    }],
  });
}

Deno.test("NodeVerifier fails a node whose validator pod never becomes Ready, naming the pod and the timeout", async () => {
  await withServer((req) => {
    const url = new URL(req.url);
    assert.equal(url.pathname, "/api/v1/pods");
    assert.equal(url.searchParams.get("fieldSelector"), "spec.nodeName=n1");
    assert.equal(url.searchParams.get("labelSelector"), "app=validator");
    return podList("False", DONE);
  }, async (kube) => {
    const why = await verifier(kube, { podSelector: "app=validator", timeoutSecs: 0.3 })
      .verify(NODE, ENDED);
    assert.equal(why, "verification: pod gpu/validator-x not Ready after 0.3 s");
  });
});

Deno.test("NodeVerifier passes once the pod's Ready transition comes after the Job finished", async () => {
  let reads = 0;
  await withServer(() => {
    // Ready since before the Job at first (it proves nothing), then restarted and Ready.
    return ++reads < 3
      ? podList("True", "2026-12-01T09:00:00Z")
      : podList("True", "2026-12-01T10:00:09Z");
  }, async (kube) => {
    const why = await verifier(kube, { podSelector: "app=validator", timeoutSecs: 5 }).verify(
      NODE,
      ENDED,
    );
    assert.equal(why, undefined);
    assert.equal(reads, 3);
  });
});

Deno.test("NodeVerifier says a pod Ready only since before the Job, at the timeout", async () => {
  await withServer(() => {
    return podList("True", "2026-12-01T09:00:00Z");
  }, async (kube) => {
    const why = await verifier(kube, { podSelector: "app=validator", timeoutSecs: 0.2 }).verify(
      NODE,
      ENDED,
    );
    assert.match(
      why!,
      /^verification: pod gpu\/validator-x not Ready after 0.2 s \(Ready only since 2026-12-01T09:00:00.000Z, before its node's Job finished\)$/,
    );
  });
});

Deno.test("NodeVerifier creates the smoke-test Job and fails the node when it fails", async () => {
  let smoke: V1Job | undefined;
  let gets = 0;
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && path === "/apis/batch/v1/namespaces/ops/jobs") {
      smoke = {
        ...(body as V1Job),
        metadata: {
          ...(body as V1Job).metadata,
          creationTimestamp: "2026-12-01T10:00:07Z" as unknown as Date,
        },
      };
      return Response.json(smoke, { status: 201 });
    }
    if (path.endsWith("/jobs/up-verify-n1")) {
      if (!smoke) return status(404, "NotFound");
      gets++;
      const failed = {
        type: "Failed",
        status: "True",
        reason: "BackoffLimitExceeded",
        message: "Job has reached the specified backoff limit",
      };
      return Response.json(gets > 1 ? { ...smoke, status: { conditions: [failed] } } : smoke);
    }
    return status(404, "NotFound");
  }, async (kube, hits) => {
    const why = await verifier(kube, { jobTemplate: "smoke.yaml", timeoutSecs: 5 }, true).verify(
      NODE,
      ENDED,
    );
    assert.equal(
      why,
      "verification: job ops/up-verify-n1 failed: Job has reached the specified backoff limit [BackoffLimitExceeded]",
    );
    assert.equal(hits.filter((h) => h.method === "POST").length, 1, "one smoke-test Job");
  });
});

Deno.test("NodeVerifier fails a node whose smoke-test Job has not succeeded at the timeout, naming the Job", async () => {
  let smoke: V1Job | undefined;
  await withServer((req, _n, body) => {
    if (req.method === "POST") {
      smoke = body as V1Job;
      return Response.json(smoke, { status: 201 });
    }
    if (!smoke) return status(404, "NotFound");
    return Response.json(smoke);
  }, async (kube) => {
    const why = await verifier(kube, { jobTemplate: "smoke.yaml", timeoutSecs: 0.2 }, true).verify(
      NODE,
      ENDED,
    );
    assert.equal(why, "verification: job ops/up-verify-n1 not succeeded after 0.2 s");
  });
});

Deno.test("NodeVerifier throws an outage instead of failing the node: the engine pauses and retries", async () => {
  await withServer(() => {
    return status(503, "ServiceUnavailable");
  }, async (kube) => {
    await assert.rejects(
      verifier(kube, { podSelector: "app=validator", timeoutSecs: 0.2 }).verify(NODE, ENDED),
      (e) => isRetryable(e),
    );
  });
});

Deno.test("NodeVerifier reads the Job's end from the engine: a pod Ready after it passes once the Job's TTL removed the Job", async () => {
  // The engine saw the Job end at 10:00:05; its ttlSecondsAfterFinished then
  // removed it, and the validator pod turned Ready at 10:00:07, before this
  // verification began (now): that is proof, not "Ready before the Job".
  await withServer((req) => {
    if (new URL(req.url).pathname.includes("/jobs/")) return status(404, "NotFound");
    return podList("True", "2026-12-01T10:00:07Z");
  }, async (kube) => {
    const why = await verifier(kube, { podSelector: "app=validator", timeoutSecs: 0.2 }).verify(
      NODE,
      ENDED,
    );
    assert.equal(why, undefined);
  });
});

Deno.test("NodeVerifier does not run the smoke-test Job twice: a re-run after its TTL removed the Job reads the verdict kept on the node", async () => {
  // The cluster: the node (its annotations as the PATCHes leave them) and
  // the smoke-test Job, which its TTL removes once it succeeded.
  const annotations: Record<string, string> = {};
  let smoke: V1Job | undefined;
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") {
      if (req.method === "PATCH") {
        for (const op of body as { op: string; path: string; value?: string }[]) {
          const key = op.path.replace("/metadata/annotations/", "").replace("~1", "/");
          if (op.op === "add" && op.path.startsWith("/metadata/annotations/")) {
            annotations[key] = op.value!;
          }
        }
      }
      return Response.json({ metadata: { name: "n1", uid: NODE.uid, annotations } });
    }
    if (req.method === "POST") {
      smoke = {
        ...(body as V1Job),
        metadata: {
          ...(body as V1Job).metadata,
          creationTimestamp: "2026-12-01T10:00:07Z" as unknown as Date,
        },
        status: { conditions: [{ type: "Complete", status: "True" }] },
      };
      return Response.json(smoke, { status: 201 });
    }
    if (path.endsWith("/jobs/up-verify-n1") && smoke) return Response.json(smoke);
    return status(404, "NotFound");
  }, async (kube, hits) => {
    const config = { jobTemplate: "smoke.yaml", timeoutSecs: 5 };
    assert.equal(await verifier(kube, config, true).verify(NODE, ENDED), undefined);
    smoke = undefined; // ttlSecondsAfterFinished: the Job is gone; the run was killed
    assert.equal(await verifier(kube, config, true).verify(NODE, ENDED), undefined);
    const posts = hits.filter((h) => h.method === "POST").length;
    assert.equal(posts, 1, "one smoke-test Job for one success of the node's Job");
  });
});

/** The smoke-test Job the API server made of `body`: Complete at once. */
function completeSmoke(body: unknown): V1Job {
  return {
    metadata: { ...(body as V1Job).metadata, creationTimestamp: "2026-12-01T10:00:07Z" },
    status: { conditions: [{ type: "Complete", status: "True" }] },
  } as unknown as V1Job;
}

/** A verifier whose warnings go to `warnings`, polling every 20 ms. */
function warnedVerifier(kube: Kube, warnings: string[]): NodeVerifier {
  return new NodeVerifier({
    kube,
    namespace: "ops",
    keys: { nodeUid: "u", templateHash: "h", verified: "up/verified-job" },
    config: { jobTemplate: "smoke.yaml", timeoutSecs: 5 },
    smokeJob: (node) => ({
      metadata: { name: `up-verify-${node.name}`, annotations: { u: node.uid } },
    }),
    signal: new AbortController().signal,
    pollMs: 20,
    warn: (m) => warnings.push(m),
  });
}

Deno.test("NodeVerifier without nodes get or patch runs the smoke test and says once that it cannot keep its verdict", async () => {
  const warnings: string[] = [];
  let smoke: V1Job | undefined;
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") return status(403, "Forbidden");
    if (req.method === "POST") {
      smoke = completeSmoke(body);
      return Response.json(smoke, { status: 201 });
    }
    return smoke ? Response.json(smoke) : status(404, "NotFound");
  }, async (kube) => {
    const v = warnedVerifier(kube, warnings);
    assert.equal(await v.verify(NODE, ENDED), undefined);
    assert.equal(await v.verify(NODE, ENDED), undefined);
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0],
      /^cannot keep smoke-test verdicts on their nodes \(annotation up\/verified-job: /,
    );
  });
});

Deno.test("NodeVerifier keeps the smoke-test verdict on the API server's clock: a dispatcher 60 s behind the cluster does not run the smoke test again after its TTL", async () => {
  // The API server's clock is 60 s ahead of the dispatcher's: the node's Job
  // ended (completionTime) at server time, which is the dispatcher's future.
  const ended = Math.floor((Date.now() + 60_000) / 1000) * 1000;
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
  const annotations: Record<string, string> = {};
  let smoke: V1Job | undefined;
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") {
      if (req.method === "PATCH") {
        for (const op of body as { op: string; path: string; value?: string }[]) {
          const key = op.path.replace("/metadata/annotations/", "").replace("~1", "/");
          if (op.op === "add" && op.path.startsWith("/metadata/annotations/")) {
            annotations[key] = op.value!;
          }
        }
      }
      return Response.json({ metadata: { name: "n1", uid: NODE.uid, annotations } });
    }
    if (req.method === "POST") {
      smoke = {
        ...(body as V1Job),
        metadata: {
          ...(body as V1Job).metadata,
          creationTimestamp: iso(ended + 2_000) as unknown as Date,
        },
        status: {
          completionTime: iso(ended + 4_000) as unknown as Date,
          conditions: [{ type: "Complete", status: "True" }],
        },
      };
      return Response.json(smoke, { status: 201 });
    }
    if (path.endsWith("/jobs/up-verify-n1") && smoke) return Response.json(smoke);
    return status(404, "NotFound");
  }, async (kube, hits) => {
    const config = { jobTemplate: "smoke.yaml", timeoutSecs: 5 };
    assert.equal(await verifier(kube, config, true).verify(NODE, ended), undefined);
    smoke = undefined; // ttlSecondsAfterFinished: the Job is gone; the run was killed
    assert.equal(await verifier(kube, config, true).verify(NODE, ended), undefined);
    const posts = hits.filter((h) => h.method === "POST").length;
    assert.equal(posts, 1, "one smoke-test Job for one success of the node's Job");
  });
});

Deno.test("NodeVerifier says nothing of RBAC when the verdict's PATCH fails its UID test (a node replaced under its name), and still warns of a refusal after", async () => {
  const warnings: string[] = [];
  let smoke: V1Job | undefined;
  let patches = 0;
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") {
      // The first PATCH: the node was replaced between the read and the
      // write, as the read after its 422 shows (another UID).
      if (req.method !== "PATCH") {
        return Response.json({ metadata: { name: "n1", uid: patches === 1 ? "new" : NODE.uid } });
      }
      return ++patches === 1 ? status(422, "Invalid") : status(403, "Forbidden");
    }
    if (req.method === "POST") {
      smoke = completeSmoke(body);
      return Response.json(smoke, { status: 201 });
    }
    return smoke ? Response.json(smoke) : status(404, "NotFound");
  }, async (kube) => {
    const v = warnedVerifier(kube, warnings);
    assert.equal(await v.verify(NODE, ENDED), undefined);
    assert.deepEqual(warnings, [], "a replaced node is no refusal of the verdicts");
    smoke = undefined;
    assert.equal(await v.verify(NODE, ENDED), undefined);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /Forbidden|403/);
  });
});

Deno.test("NodeVerifier never creates the smoke-test Job a second time when its TTL removed it before a poll saw its outcome", async () => {
  // ttlSecondsAfterFinished shorter than the poll: the Job ran, succeeded and
  // was deleted between two GETs; each GET after the create finds nothing.
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") {
      return Response.json({ metadata: { name: "n1", uid: NODE.uid } });
    }
    if (req.method === "POST") return Response.json(body, { status: 201 });
    return status(404, "NotFound");
  }, async (kube, hits) => {
    const why = await verifier(kube, { jobTemplate: "smoke.yaml", timeoutSecs: 0.5 }, true)
      .verify(NODE, ENDED);
    const posts = hits.filter((h) => h.method === "POST").length;
    assert.equal(posts, 1, "one smoke-test Job: a second would run the smoke test again");
    assert.match(why ?? "", /up-verify-n1 was removed before its outcome was seen/);
  });
});

Deno.test("NodeVerifier keeps each smoke-test Job's verdict under its own key: two rollouts sharing the prefix on a node never replace each other's", async () => {
  let node: V1Node = {
    metadata: { name: "n1", uid: NODE.uid, resourceVersion: "1", annotations: {} },
  };
  const jobs = new Map<string, V1Job>();
  const posts: string[] = [];
  await withServer((req, _n, body) => {
    const path = new URL(req.url).pathname;
    if (path === "/api/v1/nodes/n1") {
      if (req.method === "PATCH") node = applyJsonPatch(node, body as PatchOp[]);
      return Response.json(node);
    }
    if (req.method === "POST") {
      const job = body as V1Job;
      posts.push(job.metadata!.name!);
      const made = {
        ...job,
        metadata: { ...job.metadata, creationTimestamp: "2026-12-01T10:00:07Z" as unknown as Date },
        status: { conditions: [{ type: "Complete", status: "True" }] },
      };
      jobs.set(job.metadata!.name!, made);
      return Response.json(made, { status: 201 });
    }
    const job = jobs.get(path.split("/").at(-1)!);
    return job ? Response.json(job) : status(404, "NotFound");
  }, async (kube) => {
    const rollout = (prefix: string) =>
      new NodeVerifier({
        kube,
        namespace: "ops",
        keys: {
          nodeUid: "p/node-uid",
          templateHash: "p/template-hash",
          verified: "p/verified-job",
        },
        config: { jobTemplate: "smoke.yaml", timeoutSecs: 5 },
        smokeJob: (n) => ({
          apiVersion: "batch/v1",
          kind: "Job",
          metadata: { name: `${prefix}-verify-${n.name}`, annotations: { "p/node-uid": n.uid } },
          spec: { template: { spec: { containers: [] } } },
        }),
        signal: new AbortController().signal,
        pollMs: 20,
      });
    assert.equal(await rollout("a").verify(NODE, ENDED), undefined);
    assert.equal(await rollout("b").verify(NODE, ENDED), undefined);
    jobs.clear(); // ttlSecondsAfterFinished: both smoke-test Jobs are gone
    assert.equal(await rollout("a").verify(NODE, ENDED), undefined);
    assert.deepEqual(posts, ["a-verify-n1", "b-verify-n1"], "rollout a's re-run reads its verdict");
  });
});
