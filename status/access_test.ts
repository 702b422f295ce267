import assert from "node:assert/strict";
import { withServer } from "../testing/loopback.ts";
import { listAnswer } from "../testing/list_answer.ts";
import { encodeRecord, recordConfigMap, type RunRecord } from "../report/record.ts";
import { trackingKeys } from "../job.ts";
import { runStatus, type StatusConfig } from "./status.ts";
import { viewerNeeds } from "./access.ts";

const keys = trackingKeys("job-dispatcher");

const RECORD: RunRecord = {
  version: 1,
  prefix: "up",
  namespace: "team",
  state: "running",
  startedAt: Date.now() - 5_000,
  updatedAt: Date.now(),
  heartbeatMs: 20_000,
  parallelism: 2,
  summary: "x",
  nodes: [{ node: "n0", phase: "failed" }, { node: "n1", phase: "queued" }],
};

/** A request as RBAC reads it: `verb resource`, a GET of a collection a list (or watch). */
function asPermission(method: string, url: string): string {
  const u = new URL(url);
  const parts = u.pathname.split("/").filter(Boolean);
  const ns = parts.indexOf("namespaces");
  const rest = ns >= 0 ? parts.slice(ns + 2) : parts.slice(parts[0] === "api" ? 2 : 3);
  const verb = method !== "GET"
    ? method
    : u.searchParams.get("watch") === "true"
    ? "watch"
    : rest.length === 1
    ? "list"
    : "get";
  return `${verb} ${rest[0]}`;
}

Deno.test({
  name: "viewerNeeds() is what status reads, in every output and with --watch: nothing it " +
    "never asks (status polls; it opens no watch)",
  async fn() {
    const cm = recordConfigMap(keys, RECORD, await encodeRecord(RECORD));
    (cm.metadata as Record<string, unknown>).ownerReferences = [{
      apiVersion: "batch/v1",
      kind: "Job",
      name: "own",
      uid: "u1",
    }];
    const used = new Set<string>();
    const runs: [StatusConfig["output"], Partial<StatusConfig>][] = [
      ["text", { prefix: "up" }],
      ["wide", { prefix: "up" }],
      ["json", { prefix: "up" }],
      ["text", { ownerJobName: "own" }],
    ];
    for (const [output, found] of runs) {
      await withServer((req) => {
        const path = new URL(req.url).pathname;
        if (path === "/api/v1/namespaces/team/configmaps/run-record.up") return Response.json(cm);
        if (path.endsWith("/jobs/own")) {
          return Response.json({ metadata: { name: "own", uid: "u1" } });
        }
        if (path.endsWith("/configmaps")) return listAnswer(req, [cm]);
        if (path.endsWith("/jobs/up-n0")) return new Response("{}", { status: 404 });
        if (path.endsWith("/jobs") || path.endsWith("/configmaps")) return listAnswer(req, []);
        if (path === "/api/v1/nodes") return listAnswer(req, []);
        return new Response("{}", { status: 404 });
      }, async (kube, hits) => {
        const stop = new AbortController();
        let printed = 0;
        const cfg: StatusConfig = {
          ...found,
          namespace: "team",
          trackingLabelPrefix: "job-dispatcher",
          output,
          watch: true,
          watchIntervalSecs: 0.05,
        };
        // What it read counts, whatever view it made of the answers.
        await runStatus(cfg, {
          kube,
          env: () => undefined,
          readFile: () => undefined,
          terminal: false,
          signal: stop.signal,
          stdout: () => void (++printed >= 1 && setTimeout(() => stop.abort(), 200)),
        }).catch(() => undefined);
        for (const h of hits) used.add(asPermission(h.method, h.url));
      });
    }
    const granted = new Set(viewerNeeds("team").map((n) => `${n.verb} ${n.resource}`));
    assert.deepEqual([...used].filter((p) => !granted.has(p)).sort(), [], "used, not granted");
    assert.deepEqual([...granted].filter((p) => !used.has(p)).sort(), [], "granted, never used");
  },
});
