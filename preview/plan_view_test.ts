import assert from "node:assert/strict";
import {
  buildPreview,
  concurrencyOf,
  groupByWave,
  type PlannedNode,
  type PreviewInput,
  previewText,
} from "./plan_view.ts";

const nodes = (waves: (number | undefined)[]): PlannedNode[] =>
  waves.map((wave, i) => ({ node: `n${i + 1}`, job: `up-n${i + 1}`, wave }));

const INPUT: PreviewInput = {
  namespace: "ops",
  prefix: "up",
  selection: "--node-selector pool=gpu",
  parallelism: 2,
  targets: nodes([1, 2, 2, 2, 2]),
  canary: true,
  skipped: [{ node: "n9", reason: "taint gpu=broken:NoSchedule is not tolerated by the template" }],
  cleanup: [],
  soakSecs: 30,
  postNodeDelaySecs: 0,
};

Deno.test({
  name:
    "groupByWave() groups the nodes in dispatch order by wave, named as the run's log names them",
  permissions: "none",
  async fn(t) {
    const cases: [string, (number | undefined)[], boolean, [string, string[]][]][] = [
      ["no waves: one group, all", [undefined, undefined], false, [["all", ["n1", "n2"]]]],
      ["a canary and the rest", [1, 2, 2], true, [["the canary", ["n1"]], [
        "wave 2 of 2",
        ["n2", "n3"],
      ]]],
      ["--waves", [1, 2, 2, 3], false, [["wave 1 of 3", ["n1"]], ["wave 2 of 3", ["n2", "n3"]], [
        "wave 3 of 3",
        ["n4"],
      ]]],
      ["one wave only", [1, 1], false, [["wave 1 of 1", ["n1", "n2"]]]],
      ["no nodes", [], true, []],
    ];
    for (const [name, waves, canary, want] of cases) {
      await t.step(name, () => {
        const groups = groupByWave(nodes(waves), canary);
        assert.deepEqual(groups.map((g) => [g.label, g.nodes.map((n) => n.node)]), want);
        // The order runs on across the waves: it is the dispatch order.
        assert.deepEqual(
          groups.flatMap((g) => g.nodes.map((n) => n.order)),
          waves.map((_, i) => i + 1),
        );
      });
    }
  },
});

Deno.test({
  name: "concurrencyOf() is --parallelism, or the budget's room now, at least 1",
  permissions: "none",
  async fn(t) {
    const budget = (max: number, unavailable: number) => ({
      spec: String(max),
      max,
      of: 10,
      unavailable: { count: unavailable, notReady: [], cordoned: [], inWork: [] },
    });
    const cases: [string, number, ReturnType<typeof budget> | undefined, number][] = [
      ["no budget", 5, undefined, 5],
      ["the budget is smaller", 5, budget(2, 0), 2],
      ["a node down takes room", 5, budget(3, 1), 2],
      ["parallelism is smaller", 1, budget(3, 0), 1],
      ["the budget is spent now", 5, budget(1, 2), 1],
    ];
    for (const [name, parallelism, b, want] of cases) {
      await t.step(name, () => assert.equal(concurrencyOf(parallelism, b), want));
    }
  },
});

Deno.test({
  name:
    "buildPreview() is one object: waves with their nodes, skipped, budget, window, estimate, counts",
  permissions: "none",
  fn() {
    const refusal = {
      pod: "shop/web-1",
      budget: "shop/web-pdb",
      message: "cannot evict pod shop/web-1: blocked by PodDisruptionBudget shop/web-pdb: …",
    };
    const v = buildPreview({
      ...INPUT,
      targets: INPUT.targets.map((t, i) =>
        i === 0
          ? {
            ...t,
            drain: {
              evict: ["shop/web-1"],
              stays: [{ pod: "kube-system/agent-x", reason: "ignoring DaemonSet-managed Pods" }],
              warnings: [],
              refusedNow: [refusal],
              notJudged: [],
            },
          }
          : t
      ),
      budget: {
        spec: "20%",
        max: 1,
        of: 6,
        unavailable: { count: 0, notReady: [], cordoned: [], inWork: [] },
      },
      window: {
        specs: ["Mon 02:00-04:00"],
        openNow: false,
        nextOpening: Date.UTC(2026, 5, 8, 2),
        nextOpeningText: "Mon 02:00 UTC, in 6d19h",
      },
      durations: { from: "r.json", seconds: [50, 60, 70], medianSecs: 60 },
    });
    assert.equal(v.kind, "JobDispatcherPlan");
    assert.deepEqual(v.counts, {
      nodes: 5,
      waves: 2,
      skipped: 1,
      cleanup: 0,
      refusedNow: 1,
      blockedForGood: 0,
      actions: { start: 5 },
      toRun: 5,
    });
    assert.deepEqual(v.waves.map((w) => [w.wave, w.label, w.size]), [
      [1, "the canary", 1],
      [2, "wave 2 of 2", 4],
    ]);
    assert.deepEqual(v.waves[0].nodes[0].drain?.refusedNow, [refusal]);
    assert.deepEqual(v.waves[1].nodes[0], { node: "n2", job: "up-n2", wave: 2, order: 2 });
    assert.equal(v.budget?.mayStartNow, 1);
    assert.deepEqual(v.window, {
      windows: ["Mon 02:00-04:00"],
      openNow: false,
      closesAt: null,
      nextOpening: "2026-06-08T02:00:00.000Z",
      nextOpeningText: "Mon 02:00 UTC, in 6d19h",
    });
    // The budget allows 1 at once: 1 round for the canary, 30 s soak, 4 rounds for the rest.
    assert.deepEqual(v.estimate, {
      from: "r.json",
      sampledNodes: 3,
      nodeMedianSeconds: 60,
      concurrency: 1,
      maxPerTopology: null,
      drainWaits: null,
      seconds: 60 + 30 + 4 * 60,
      text: "5m30s",
    });
    // What -o json prints round-trips: no Map, no undefined left to lose.
    assert.deepEqual(JSON.parse(JSON.stringify(v)).counts, v.counts);
  },
});

Deno.test({
  name: "previewText() shows the nodes by wave, the budgets that refuse now and the skipped nodes",
  permissions: "none",
  fn() {
    const text = previewText(buildPreview({
      ...INPUT,
      targets: [
        {
          node: "n1",
          job: "up-n1",
          wave: 1,
          drain: {
            evict: ["shop/web-1"],
            stays: [],
            warnings: [],
            refusedNow: [{ pod: "shop/web-1", budget: "shop/web-pdb", message: "refused" }],
            notJudged: [],
          },
        },
        {
          node: "n2",
          job: "up-n2",
          wave: 2,
          drain: {
            evict: [],
            stays: [],
            warnings: [],
            refusedNow: [],
            notJudged: [],
            refused: "drain refused: cannot delete Pods that declare no controller (use --force " +
              "to override): shop/bare",
          },
        },
      ],
    }));
    const lines = text.split("\n");
    assert.match(
      lines[0],
      /^Plan: 2 nodes in 2 waves, namespace ops, prefix up, parallelism 2;/,
    );
    assert.match(text, /^WAVE +# +NODE +JOB +EVICT +REFUSED NOW BY +ACTION$/m);
    assert.match(text, /^the canary +1 +n1 +up-n1 +1 +shop\/web-pdb +start$/m);
    assert.match(text, /^wave 2 of 2 +2 +n2 +up-n2 +0 +drain refused +start$/m);
    assert.match(text, /^ {4}refused now: refused$/m);
    assert.match(
      text,
      /^ {2}n2: drain refused: .*shop\/bare \(the node would fail before its Job\)$/m,
    );
    assert.match(text, /^n9 +taint gpu=broken:NoSchedule is not tolerated by the template$/m);
  },
});

Deno.test({
  name: "previewText() says delete, not evict, for a drain with --disable-eviction",
  permissions: "none",
  fn() {
    const drain = { stays: [], warnings: [], refusedNow: [], notJudged: [] };
    const text = previewText(buildPreview({
      ...INPUT,
      targets: [
        { node: "n1", job: "up-n1", drain: { ...drain, evict: ["shop/web-1"], deletes: true } },
        { node: "n2", job: "up-n2", drain: { ...drain, evict: [], deletes: true } },
        { node: "n3", job: "up-n3", drain: { ...drain, evict: ["shop/web-3"] } },
      ],
    }));
    assert.match(text, /^ {2}n1: delete shop\/web-1 \(--disable-eviction: no budget consulted\)$/m);
    assert.match(text, /^ {2}n2: delete nothing$/m);
    assert.match(text, /^ {2}n3: evict shop\/web-3$/m);
  },
});

Deno.test({
  name:
    "buildPreview() counts a node whose Job ended as a re-run does: no round of the estimate, not drained, said in the ACTION column",
  permissions: "none",
  fn() {
    const v = buildPreview({
      namespace: "ops",
      prefix: "up",
      selection: "--nodes a,b,c",
      parallelism: 1,
      targets: [
        { node: "a", job: "up-a", action: "succeeded" },
        { node: "b", job: "up-b", action: "failed" },
        { node: "c", job: "up-c", action: "adopt" },
        { node: "d", job: "up-d" },
      ],
      skipped: [],
      cleanup: [],
      soakSecs: 0,
      postNodeDelaySecs: 0,
      durations: { from: "r.json", seconds: [60], medianSecs: 60 },
    });
    assert.deepEqual(v.counts.actions, { succeeded: 1, failed: 1, adopt: 1, start: 1 });
    assert.equal(v.counts.toRun, 2);
    assert.equal(v.estimate?.seconds, 120, "two rounds: the adopted Job and the new one");
    const text = previewText(v);
    assert.match(
      text,
      /^Jobs there now: 1 start, 1 adopt \(its Job runs\), 1 count \(its Job succeeded\), 1 count \(its Job failed; --retry-failed runs it again\)$/m,
    );
    assert.match(text, /^all +1 +a +up-a +count \(its Job succeeded\)$/m);
    assert.match(text, /^all +4 +d +up-d +start$/m);
  },
});

Deno.test({
  name:
    "buildPreview() with --max-per-topology estimates each wave at most M per domain of its nodes that run, and says the limit",
  permissions: "none",
  fn() {
    const zone = "topology.kubernetes.io/zone";
    const planned = (node: string, wave: number, domain: string, action?: "succeeded") => ({
      node,
      job: `up-${node}`,
      wave,
      domain,
      ...(action && { action }),
    });
    const v = buildPreview({
      ...INPUT,
      parallelism: 4,
      targets: [
        planned("n1", 1, "a"),
        ...["a", "b", "a", "b", "a"].map((d, i) => planned(`n${i + 2}`, 2, d)),
        // Counted at once: zone c gives the wave no slot.
        planned("n7", 2, "c", "succeeded"),
      ],
      durations: { from: "r.json", seconds: [60], medianSecs: 60 },
      maxPerTopology: { key: zone, max: 1 },
    });
    // The canary: 1 round alone; then zones a (3 nodes) and b (2): 2 at once, 3 rounds for a.
    assert.deepEqual(v.estimate, {
      from: "r.json",
      sampledNodes: 1,
      nodeMedianSeconds: 60,
      concurrency: 2,
      maxPerTopology: { key: zone, max: 1 },
      drainWaits: null,
      seconds: 60 + 30 + 3 * 60,
      text: "4m30s",
    });
    assert.match(
      previewText(v),
      /^Estimate: 4m30s \(per-node median 1m00s of 1 node in r\.json; 2 at once, at most 1 per topology\.kubernetes\.io\/zone\)$/m,
    );
  },
});

Deno.test({
  name:
    "previewText() says a budget that blocks for good, counts it, and the estimate waits the drain timeout where an eviction is refused",
  permissions: "none",
  fn() {
    const refused = (forGood?: string) => ({
      evict: ["shop/web-1"],
      stays: [],
      warnings: [],
      refusedNow: [{ pod: "shop/web-1", budget: "shop/web-pdb", message: "refused", forGood }],
      notJudged: [],
    });
    const input = {
      ...INPUT,
      canary: false,
      soakSecs: 0,
      targets: [
        {
          node: "n1",
          job: "up-n1",
          drain: refused("maxUnavailable 0: it never allows an eviction"),
        },
        { node: "n2", job: "up-n2", drain: refused() },
        { node: "n3", job: "up-n3" },
      ],
      durations: { from: "r.json", seconds: [60], medianSecs: 60 },
      drainTimeoutSecs: 600,
    } as PreviewInput;
    const view = buildPreview(input);
    assert.equal((view.counts as { blockedForGood?: number }).blockedForGood, 1);
    const text = previewText(view);
    assert.match(
      text,
      /^ {4}blocked for good: refused; maxUnavailable 0: it never allows an eviction$/m,
    );
    assert.match(text, /^ {4}refused now: refused$/m);
    // Two rounds of 60 s at parallelism 2, and the two refused nodes wait out
    // the drain timeout in one round: 600 s more.
    assert.equal(view.estimate!.seconds, 2 * 60 + 600);
    assert.match(text, /2 nodes refused now wait up to the drain timeout \(600 s\)/);
  },
});
