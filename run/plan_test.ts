import assert from "node:assert/strict";
import {
  checkedTemplate,
  noNodesError,
  nothingToDoLine,
  type SelectedFacts,
  selectedLine,
} from "./plan.ts";
import { parseJobTemplate, templateHash } from "../job.ts";
import type { RunConfig, RunContext } from "./config.ts";
import { parseMaxUnavailable } from "../maintenance/budget.ts";
import { parseWindow } from "../maintenance/window.ts";
import type { Selection } from "../nodes/select.ts";

const BY_LABEL: Selection = { labelSelectors: ["pool=gpu"], pageSize: 500, ignoreTaints: false };
const PLAIN: SelectedFacts["maintenance"] = {
  cordon: false,
  uncordonOnFailure: false,
  windows: [],
};
const DRAIN = { deleteEmptyDirData: false, force: false, timeoutSecs: 600, disableEviction: false };

function facts(over: Partial<SelectedFacts>): SelectedFacts {
  return {
    selected: 3,
    selection: BY_LABEL,
    skippedForTaints: 0,
    done: 0,
    namespace: "ops",
    parallelism: 2,
    maintenance: PLAIN,
    ...over,
  };
}

Deno.test({
  name: "selectedLine() counts in words and fields, and says what the run does to the nodes",
  permissions: "none",
  async fn(t) {
    const cases: [string, Partial<SelectedFacts>, string, Record<string, unknown>][] = [
      [
        "one node is singular",
        { selected: 1, selection: { ...BY_LABEL, nodes: ["n1"] } },
        "selected 1 node (--nodes n1), namespace ops, parallelism 2",
        { selected: 1, skipped: { taint: 0, done: 0 }, cordon: false, drain: false },
      ],
      [
        "skipped nodes, by reason",
        { skippedForTaints: 2, done: 4, owner: "up-7" },
        "selected 3 nodes (--node-selector pool=gpu; 2 skipped for taints; 4 already done), " +
        "namespace ops, parallelism 2, owner job up-7",
        { selected: 3, skipped: { taint: 2, done: 4 }, owner: "up-7" },
      ],
      [
        "cordon only",
        { maintenance: { ...PLAIN, cordon: true } },
        "selected 3 nodes (--node-selector pool=gpu), namespace ops, parallelism 2; " +
        "each node: cordon, Job, uncordon on success",
        { cordon: true, drain: false },
      ],
      [
        "drain, budget and windows",
        {
          maintenance: {
            cordon: true,
            drain: DRAIN,
            uncordonOnFailure: true,
            maxUnavailable: parseMaxUnavailable("10%"),
            windows: [
              parseWindow("Mon-Fri 02:00-04:00 Europe/Berlin"),
              parseWindow("Sat 01:00-05:00"),
            ],
          },
        },
        "selected 3 nodes (--node-selector pool=gpu), namespace ops, parallelism 2; " +
        "each node: cordon, drain, Job, uncordon after it; max-unavailable 10%; " +
        "window Mon-Fri 02:00-04:00 Europe/Berlin or Sat 01:00-05:00",
        {
          cordon: true,
          drain: true,
          maxUnavailable: "10%",
          windows: ["Mon-Fri 02:00-04:00 Europe/Berlin", "Sat 01:00-05:00"],
        },
      ],
    ];
    for (const [name, over, msg, fields] of cases) {
      await t.step(name, () => {
        const [got, f] = selectedLine(facts(over));
        assert.equal(got, msg);
        assert.equal(f.event, "selected");
        for (const [k, v] of Object.entries(fields)) assert.deepEqual(f[k], v, k);
      });
    }
  },
});

Deno.test({
  name:
    "nothingToDoLine() says kubectl's No resources found with the selection and its kubectl form",
  permissions: "none",
  async fn(t) {
    const cases: [string, number, Selection, string][] = [
      [
        "one label selector",
        0,
        BY_LABEL,
        "nothing to do: No resources found: no node matches --node-selector pool=gpu " +
        "(kubectl get nodes -l pool=gpu); nothing created, exit 0",
      ],
      [
        "united selectors and a field selector, quoted for a shell",
        0,
        {
          ...BY_LABEL,
          labelSelectors: ["pool in (a,b)", "!spot"],
          fieldSelector: "spec.unschedulable=false",
        },
        "nothing to do: No resources found: no node matches --node-selector pool in (a,b) or " +
        "--node-selector !spot and --node-field-selector spec.unschedulable=false " +
        "(kubectl get nodes -l 'pool in (a,b)' --field-selector spec.unschedulable=false; " +
        "kubectl get nodes -l '!spot' --field-selector spec.unschedulable=false); " +
        "nothing created, exit 0",
      ],
      [
        "all done",
        1,
        BY_LABEL,
        "nothing to do: the 1 selected node is already done; exit 0",
      ],
    ];
    for (const [name, done, selection, want] of cases) {
      await t.step(name, () => {
        const [msg, fields] = nothingToDoLine(done, selection);
        assert.equal(msg, want);
        assert.equal(fields.selected, 0);
        assert.deepEqual(fields.skipped, { taint: 0, done });
      });
    }
    await t.step("a key no node carries: a typo, the closest keys, and --fail-if-no-nodes", () => {
      const missing = [{ key: "pol", closest: ["pool"] }];
      const [msg, fields] = nothingToDoLine(
        0,
        { ...BY_LABEL, labelSelectors: ["pol=gpu"] },
        missing,
      );
      assert.equal(
        msg,
        "nothing to do: No resources found: no node matches --node-selector pol=gpu " +
          "(kubectl get nodes -l pol=gpu); no node has the label key pol (a typo? closest: pool); " +
          "nothing created, exit 0; pass --fail-if-no-nodes to make an empty selection fail (exit 2)",
      );
      assert.deepEqual(fields.missingKeys, missing);
    });
    await t.step("--fail-if-no-nodes: the error names the selection and the typo", () => {
      assert.equal(
        noNodesError({ ...BY_LABEL, labelSelectors: ["pol=gpu"] }, [{
          key: "pol",
          closest: ["pool"],
        }]),
        "No node matches --node-selector pol=gpu (kubectl get nodes -l pol=gpu); no node has the " +
          "label key pol (a typo? closest: pool); nothing created (--fail-if-no-nodes)",
      );
    });
  },
});

/** A template as `kubectl get job -o yaml` prints an owner made by this tool. */
const COPIED_FROM_OWNER = `apiVersion: batch/v1
kind: Job
metadata:
  name: node-task
  namespace: ops
  uid: 0b1c
  resourceVersion: "42"
  finalizers: [job-dispatcher/per-node-jobs, example.com/keep]
  labels:
    job-dispatcher/per-node-jobs: "true"
    job-dispatcher/hook: rollout-job-dispatcher
    team: a
  annotations:
    job-dispatcher/progress: "3/5 succeeded"
    note: kept
spec:
  template:
    metadata:
      labels: { job-dispatcher/owner: node-task, app: task }
    spec:
      restartPolicy: Never
      containers: [{ name: c, image: busybox }]
`;

/** The plan's context, recording its warnings. */
function warnings(): { ctx: RunContext; lines: string[] } {
  const lines: string[] = [];
  const log = { warn: (m: string) => lines.push(m), info: () => {} };
  return { ctx: { log } as unknown as RunContext, lines };
}

Deno.test({
  name: "checkedTemplate() strips this tool's own keys before hashing, naming what it dropped",
  // The yaml package reads LOG_TOKENS and LOG_STREAM.
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const opts = { trackingLabelPrefix: "job-dispatcher" } as RunConfig;
    const { ctx, lines } = warnings();
    const parsed = parseJobTemplate(COPIED_FROM_OWNER, "job.yaml");
    const t = checkedTemplate(opts, ctx, parsed, "job.yaml");
    assert.deepEqual(t.metadata?.labels, { team: "a" });
    assert.deepEqual(t.metadata?.annotations, { note: "kept" });
    assert.deepEqual(t.metadata?.finalizers, ["example.com/keep"]);
    assert.deepEqual(t.spec.template.metadata?.labels, { app: "task" });
    const warned = lines.find((l) => /dropped this tool's own keys/.test(l));
    assert.ok(warned, lines.join("\n"));
    for (
      const k of [
        "finalizer job-dispatcher/per-node-jobs",
        "label job-dispatcher/per-node-jobs",
        "annotation job-dispatcher/progress",
        "label job-dispatcher/hook",
        "pod template label job-dispatcher/owner",
      ]
    ) assert.ok(warned.includes(k), `${k}: ${warned}`);
    // The hash is the one of the template written without them.
    const clean = parseJobTemplate(
      `apiVersion: batch/v1
kind: Job
metadata:
  name: node-task
  namespace: ops
  finalizers: [example.com/keep]
  labels: { team: a }
  annotations: { note: kept }
spec:
  template:
    metadata:
      labels: { app: task }
    spec:
      restartPolicy: Never
      containers: [{ name: c, image: busybox }]
`,
      "clean.yaml",
    );
    const cleanT = checkedTemplate(opts, warnings().ctx, clean, "clean.yaml");
    assert.equal(templateHash(t), templateHash(cleanT));
    // A template of another prefix is left alone, and no warning is given.
    const other = warnings();
    checkedTemplate(
      { trackingLabelPrefix: "other.example.com" } as RunConfig,
      other.ctx,
      parsed,
      "x",
    );
    assert.ok(!other.lines.some((l) => /dropped/.test(l)));
  },
});

Deno.test({
  name: "checkedTemplate() warns at plan time when the template has no spec.backoffLimit",
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const opts = { trackingLabelPrefix: "job-dispatcher" } as RunConfig;
    const without = warnings();
    checkedTemplate(opts, without.ctx, parseJobTemplate(COPIED_FROM_OWNER, "job.yaml"), "job.yaml");
    assert.ok(
      without.lines.some((l) =>
        /job template job\.yaml has no spec\.backoffLimit: .*default of 6 .*about 10 minutes/.test(
          l,
        )
      ),
      without.lines.join("\n"),
    );
    const set = warnings();
    const zero = COPIED_FROM_OWNER.replace(
      "spec:\n  template:",
      "spec:\n  backoffLimit: 0\n  template:",
    );
    checkedTemplate(opts, set.ctx, parseJobTemplate(zero, "job.yaml"), "job.yaml");
    assert.ok(!set.lines.some((l) => /backoffLimit/.test(l)), set.lines.join("\n"));
  },
});

Deno.test({
  name: "checkedTemplate() warns of a template that lets a replacement pod start on the node " +
    "while the first still terminates",
  permissions: { env: ["LOG_TOKENS", "LOG_STREAM"] },
  fn() {
    const opts = { trackingLabelPrefix: "job-dispatcher" } as RunConfig;
    const text = (policy: string) =>
      `apiVersion: batch/v1
kind: Job
metadata: { name: node-task }
spec:
  backoffLimit: 0
  ${policy}
  template:
    spec:
      restartPolicy: Never
      containers: [{ name: c, image: busybox }]
`;
    const risky = warnings();
    const parsed = parseJobTemplate(text("podReplacementPolicy: TerminatingOrFailed"), "job.yaml");
    checkedTemplate(opts, risky.ctx, parsed, "job.yaml");
    assert.equal(risky.lines.length, 1, risky.lines.join("\n"));
    assert.match(risky.lines[0], /^job template job\.yaml: spec\.podReplacementPolicy: /);
    assert.match(risky.lines[0], /same node while the first is still terminating/);
    for (const policy of ["podReplacementPolicy: Failed", ""]) {
      const quiet = warnings();
      checkedTemplate(opts, quiet.ctx, parseJobTemplate(text(policy), "job.yaml"), "job.yaml");
      assert.deepEqual(quiet.lines, [], policy);
    }
  },
});
