import assert from "node:assert/strict";
import type { JobTemplate } from "../job.ts";
import type { RunConfig } from "../run/config.ts";
import { rbacCommandDocuments, rbacCommandText, type RbacRequest } from "./command.ts";

const ENV = { env: () => undefined, readFile: () => undefined };
const TEMPLATE = { metadata: { name: "upg" }, spec: { template: {} } } as JobTemplate;

/** A request for a run in namespace "ns" with the flags `more` set, as cli/ would fill them. */
function request(more: Record<string, unknown>, m: Record<string, unknown> = {}): RbacRequest {
  const opts = {
    namespace: "ns",
    maintenance: { cordon: false, blockingPodSelectors: [], ...m },
    ...more,
  } as unknown as RunConfig;
  return { opts, template: TEMPLATE, serviceAccount: "sa", viewer: false };
}

/** Every grant of the documents, as `verb resource[ name] @namespace`. */
function grants(docs: Record<string, unknown>[]): string[] {
  const out: string[] = [];
  for (const d of docs) {
    if (d.kind !== "Role" && d.kind !== "ClusterRole") continue;
    const ns = (d.metadata as { namespace?: string }).namespace ?? "*";
    for (
      const r of d.rules as { resources: string[]; resourceNames?: string[]; verbs: string[] }[]
    ) {
      for (const v of r.verbs) {
        out.push(`${v} ${r.resources[0]}${r.resourceNames ? ` ${r.resourceNames[0]}` : ""} @${ns}`);
      }
    }
  }
  return out.sort();
}

Deno.test({
  name: "rbac --required-only grants only what the run stops without, and names what it then " +
    "does without in its header",
  permissions: "none",
  async fn(t) {
    await t.step("default: the optional needs too, no header", () => {
      const r = request({});
      const got = grants(rbacCommandDocuments(r, ENV));
      for (
        const g of [
          "patch nodes @*",
          "create events @default",
          "update configmaps run-record.upg @ns",
        ]
      ) {
        assert.ok(got.includes(g), `${g} in ${got}`);
      }
      assert.match(rbacCommandText(r, ENV), /^apiVersion: v1\n/);
    });
    await t.step(
      "--required-only without a node-writing flag: no patch nodes, no Events, no record",
      () => {
        const r = { ...request({}), requiredOnly: true };
        assert.deepEqual(grants(rbacCommandDocuments(r, ENV)), [
          "create jobs @ns",
          "delete jobs @ns",
          "get jobs @ns",
          "get nodes @*",
          "list jobs @ns",
          "list nodes @*",
        ]);
        const header = rbacCommandText(r, ENV).split("\n").filter((l) => l.startsWith("#"));
        const text = header.join("\n");
        // The pre-flight's own words for each optional need it will warn of.
        for (
          const w of [
            "patch nodes (cluster-scoped; for the node marks)",
            "create events (in namespace ns; for the rollout Events)",
            "create events (in namespace default; for the Events on nodes)",
            "update configmaps run-record.upg (in namespace ns; for the run record)",
            "watch jobs (in namespace ns; for the Jobs' watch (else LIST polling))",
          ]
        ) assert.ok(text.includes(w), `${w} in:\n${text}`);
      },
    );
    await t.step(
      "--required-only with --cordon: patch nodes kept, not named as done without",
      () => {
        const r = { ...request({}, { cordon: true }), requiredOnly: true };
        assert.ok(grants(rbacCommandDocuments(r, ENV)).includes("patch nodes @*"));
        assert.ok(!rbacCommandText(r, ENV).includes("patch nodes ("));
      },
    );
  },
});
