import assert from "node:assert/strict";
import { nothingToDoLine, type SelectedFacts, selectedLine } from "./plan.ts";
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
  },
});
