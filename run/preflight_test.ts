import assert from "node:assert/strict";
import type { RunConfig } from "./config.ts";
import { type NamespaceSources, resolveNamespace } from "./preflight.ts";

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
