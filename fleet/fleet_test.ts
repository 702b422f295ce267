import assert from "node:assert/strict";
import { type ClusterRunner, type FleetDeps, runFleet } from "./fleet.ts";
import { StopLine } from "./line.ts";
import { Logger } from "../report/log.ts";
import { parseFleet } from "./spec.ts";

/** A fleet of fake clusters on a fake clock: each run takes 10 s and ends as `codes` says. */
function fakeFleet(opts: {
  ended?: Record<string, number>;
  codes?: Record<string, number>;
  approvals?: Record<string, number>;
  pauseFile?: string;
  /** Clusters whose run exits 0 without rolling out (it yielded to a live run): no record of theirs ends. */
  yields?: string[];
  /** Clusters whose run selects no node: it says so and writes no record. */
  noNodes?: string[];
  /** Clusters whose run rolls out but cannot write its closing record (a 403): it says why. */
  recordLost?: string[];
  /** How many reads of each cluster's record after its run fail (an outage). */
  unreadable?: Record<string, number>;
} = {}) {
  let now = 1_000_000;
  const ended = new Map(Object.entries(opts.ended ?? {}));
  const calls: string[] = [];
  const lines: string[] = [];
  const inFlight = new Set<string>();
  let widest = 0;
  const runner: ClusterRunner = {
    endedAt: (c) => Promise.resolve(ended.get(c)),
    settled: (c) => {
      const left = opts.unreadable?.[c] ?? 0;
      if (left > 0) {
        opts.unreadable![c] = left - 1;
        return Promise.reject(new Error(`${c}: 503 Service Unavailable`));
      }
      const at = ended.get(c);
      return Promise.resolve(
        at === undefined ? { not: `${c}'s record is of another template` } : { endedAt: at },
      );
    },
    run: async (c, line) => {
      calls.push(`run ${c} at ${now}`);
      inFlight.add(c);
      widest = Math.max(widest, inFlight.size);
      await Promise.resolve();
      await Promise.resolve();
      now += 10_000;
      inFlight.delete(c);
      const code = opts.codes?.[c] ?? 0;
      if (opts.noNodes?.includes(c)) line.nothingToDo();
      if (opts.recordLost?.includes(c)) line.recordLost("403 Forbidden: denied by policy");
      const rolled = !opts.yields?.includes(c) && !opts.noNodes?.includes(c) &&
        !opts.recordLost?.includes(c);
      if (code === 0 && rolled) ended.set(c, now);
      return code;
    },
    cause: (c, code) => Promise.resolve(`${c} said ${code}`),
    approvedBy: (stage) =>
      Promise.resolve(
        opts.approvals?.[stage] !== undefined && now >= opts.approvals[stage] ? "alice" : undefined,
      ),
  };
  const abort = new AbortController();
  // The pause file, as the fake sees it: written with a reason, removed by a person.
  const files = new Map<string, string>();
  const line = new StopLine({
    pauseFile: opts.pauseFile,
    write: (path, reason) => Promise.resolve(void files.set(path, reason)),
    exists: (path) => files.has(path),
  });
  const deps: FleetDeps = {
    runner,
    log: {
      info: (m) => lines.push(m),
      warn: (m) => lines.push(m),
      error: (m) => lines.push(`error: ${m}`),
    },
    signal: abort.signal,
    now: () => now,
    sleep: (ms) => {
      calls.push(`sleep ${ms}`);
      now += ms;
      return Promise.resolve();
    },
    approvalPollMs: 5_000,
    approveHint: (s) => `fleet approve ${s}`,
    line,
  };
  return { deps, calls, lines, abort, files, widest: () => widest };
}

const THREE = parseFleet(
  `stages:
  - {name: one, clusters: [a], soakSecs: 30}
  - {name: two, clusters: [b, c]}
`,
  "f.yaml",
);

Deno.test("runFleet keeps stage order and soaks from the stage's end before the next", async () => {
  const f = fakeFleet();
  assert.equal(await runFleet(THREE, f.deps), 0);
  assert.deepEqual(f.calls, [
    "run a at 1000000",
    "sleep 30000",
    "run b at 1040000",
    "run c at 1040000",
  ]);
});

Deno.test("runFleet runs a stage's clusters at most maxParallelClusters at once", async () => {
  const spec = parseFleet("stages: [{name: s, clusters: [a, b, c], maxParallelClusters: 2}]", "f");
  const f = fakeFleet();
  assert.equal(await runFleet(spec, f.deps), 0);
  assert.equal(f.widest(), 2);
  assert.equal(f.calls.length, 3);
});

Deno.test("runFleet stops the line at the first cluster that exits non-zero, with its code", async () => {
  const f = fakeFleet({ codes: { a: 5 } });
  assert.equal(await runFleet(THREE, f.deps), 5);
  assert.deepEqual(f.calls, ["run a at 1000000"]);
  const stop = f.lines.find((l) => l.startsWith("error: "));
  assert.match(stop!, /stopped the line: cluster a \(stage one\) exited 5: a said 5/);
});

Deno.test("runFleet starts no further cluster of the stage after a stop, in-flight ones end", async () => {
  const spec = parseFleet("stages: [{name: s, clusters: [a, b, c], maxParallelClusters: 1}]", "f");
  const f = fakeFleet({ codes: { b: 1 } });
  assert.equal(await runFleet(spec, f.deps), 1);
  assert.deepEqual(f.calls, ["run a at 1000000", "run b at 1010000"]);
});

Deno.test("runFleet counts what the clusters' records say ended, and soaks from the recorded end", async () => {
  // a ended 5 s before now: 25 s of the 30 s soak are left; b ended too, only c runs.
  const f = fakeFleet({ ended: { a: 995_000, b: 999_000 } });
  assert.equal(await runFleet(THREE, f.deps), 0);
  assert.deepEqual(f.calls, ["sleep 25000", "run c at 1025000"]);
  assert.ok(f.lines.some((l) => /stage one counted/.test(l)));
  assert.ok(f.lines.some((l) => /cluster b \(stage two\) counted/.test(l)));
});

Deno.test("runFleet runs nothing when every cluster is counted, and waits no soak then", async () => {
  const f = fakeFleet({ ended: { a: 990_000, b: 995_000, c: 996_000 } });
  assert.equal(await runFleet(THREE, f.deps), 0);
  assert.deepEqual(f.calls, []);
});

Deno.test("runFleet waits for a stage's approval, said once, after the soak", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a]}, {name: two, clusters: [b], approval: true}]",
    "f",
  );
  const f = fakeFleet({ approvals: { two: 1_030_000 } });
  assert.equal(await runFleet(spec, f.deps), 0);
  assert.deepEqual(f.calls, [
    "run a at 1000000",
    "sleep 5000",
    "sleep 5000",
    "sleep 5000",
    "sleep 5000",
    "run b at 1030000",
  ]);
  assert.equal(f.lines.filter((l) => /two waits for approval/.test(l)).length, 1);
  assert.ok(f.lines.some((l) => l === "fleet: stage two approved by alice"));
});

/** Resolves once `ready()` holds, looking after each turn of the event loop. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((r) => setTimeout(r, 0));
}

const TWO_STAGES = parseFleet(
  "stages: [{name: s, clusters: [a, b]}, {name: t, clusters: [c]}]",
  "f",
);

Deno.test("runFleet latches the pause file for the runs in flight when another stops the line; a person lifts it", async () => {
  const f = fakeFleet({ pauseFile: "/run/pause" });
  const seen: (string | undefined)[] = [];
  f.deps.runner.run = async (c, line) => {
    f.calls.push(`run ${c}`);
    if (c === "a") return await Promise.resolve(1);
    await until(() => line.hold.pausedBy() !== undefined);
    seen.push(line.hold.pausedBy(), line.hold.stopsBy?.());
    f.files.delete("/run/pause"); // a person lifts the pause
    seen.push(line.hold.pausedBy());
    return 0;
  };
  assert.equal(await runFleet(TWO_STAGES, f.deps), 1);
  assert.deepEqual(f.calls, ["run a", "run b"], "stage t never starts");
  assert.match(seen[0]!, /fleet: the line is stopped by cluster a \(stage s\): a said 1/);
  assert.deepEqual(seen.slice(1), [undefined, undefined], "held, not stopped; lifted by a person");
  const stop = f.lines.filter((l) => l.startsWith("error: "));
  assert.equal(stop.length, 1);
  assert.match(
    stop[0],
    /cluster a \(stage s\) exited 1: a said 1; .*pause file is latched: no Job starts in b until/,
  );
});

Deno.test("runFleet stops the runs in flight without a pause file, and ends once they ended", async () => {
  const f = fakeFleet();
  let bEnded = false;
  f.deps.runner.run = async (c, line) => {
    f.calls.push(`run ${c}`);
    if (c === "a") return await Promise.resolve(1);
    await until(() => line.hold.stopsBy?.() !== undefined);
    assert.equal(line.hold.pausedBy(), undefined);
    await new Promise((r) => setTimeout(r, 5)); // its Jobs in flight finish
    bEnded = true;
    return 1; // stopped: its own exit is not the fleet's
  };
  assert.equal(await runFleet(TWO_STAGES, f.deps), 1);
  assert.ok(bEnded, "the fleet waits for the run it stopped");
  assert.deepEqual(f.calls, ["run a", "run b"]);
  assert.equal(f.lines.filter((l) => l.startsWith("error: ")).length, 1);
});

Deno.test("runFleet stops the line when a run tells of a breach while it goes on: no further cluster, exit 5", async () => {
  const spec = parseFleet(
    "stages: [{name: s, clusters: [a, b], maxParallelClusters: 1}, {name: t, clusters: [c]}]",
    "f",
  );
  const f = fakeFleet();
  f.deps.runner.run = async (c, line) => {
    f.calls.push(`run ${c}`);
    line.stopped('health gate breached: query "up == 0" returned 1', 5);
    await new Promise((r) => setTimeout(r, 1));
    return 0; // with --on-gate-breach pause its run held until lifted, then ended
  };
  assert.equal(await runFleet(spec, f.deps), 5);
  assert.deepEqual(f.calls, ["run a"]);
  assert.match(
    f.lines.find((l) => l.startsWith("error: "))!,
    /cluster a \(stage s\) stopped: health gate breached: query "up == 0" returned 1; no further cluster starts \(1 left in this stage\)/,
  );
});

Deno.test("runFleet exits with the stopping run's own code once it ended (a breach with exit: 5)", async () => {
  const f = fakeFleet();
  const order: string[] = [];
  f.deps.runner.run = async (c, line) => {
    if (c === "a") {
      await until(() => order.includes("b started"));
      line.stopped("the failure budget of 0 was exceeded (1 failed)", 1);
      await new Promise((r) => setTimeout(r, 5));
      order.push("a ended");
      return 5;
    }
    order.push("b started");
    await until(() => line.hold.stopsBy?.() !== undefined);
    await new Promise((r) => setTimeout(r, 10));
    order.push("b ended");
    return 1;
  };
  assert.equal(await runFleet(TWO_STAGES, f.deps), 5);
  assert.deepEqual(
    order,
    ["b started", "a ended", "b ended"],
    "exit after every run in flight ended",
  );
});

Deno.test("runFleet waits for a cluster whose record cannot be read after its run; its stage waits, the end is the record's", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a, b], soakSecs: 30}, {name: two, clusters: [c]}]",
    "f",
  );
  const f = fakeFleet({ unreadable: { a: 2 } });
  assert.equal(await runFleet(spec, f.deps), 0);
  // The stage ended at 1020000 (each fake run takes 10 s of the clock); a's record
  // is read on the third try, two polls later, and the soak still runs from the
  // recorded end, not from when it was read.
  assert.deepEqual(f.calls, [
    "run a at 1000000",
    "run b at 1000000",
    "sleep 5000",
    "sleep 5000",
    "sleep 20000",
    "run c at 1050000",
  ]);
  const waits = f.lines.filter((l) => /cluster a .*record cannot be read/.test(l));
  assert.equal(waits.length, 1, f.lines.join("\n"));
  assert.match(waits[0], /503 Service Unavailable; it waits, and stage one with it/);
});

Deno.test("runFleet stops the line loudly when a cluster's run exits 0 without rolling out (it yielded)", async () => {
  const f = fakeFleet({ yields: ["a"] });
  assert.equal(await runFleet(THREE, f.deps), 1);
  assert.deepEqual(f.calls, ["run a at 1000000"], "stage two never starts");
  const stop = f.lines.find((l) => l.startsWith("error: "));
  assert.match(
    stop!,
    /stopped the line: cluster a \(stage one\) exited 0 without rolling out: a's record is of another template/,
  );
});

Deno.test("runFleet stops the line naming a lost run record, not a live run, when a run's record write is refused", async () => {
  const f = fakeFleet({ recordLost: ["a"] });
  assert.equal(await runFleet(THREE, f.deps), 1);
  assert.deepEqual(f.calls, ["run a at 1000000"], "stage two never starts");
  const stop = f.lines.find((l) => l.startsWith("error: "))!;
  assert.match(
    stop,
    /cluster a \(stage one\) ended its run: its run record could not be written \(403 Forbidden: denied by policy\): the fleet cannot tell that it ended; fix the record write \(RBAC\/policy\) and run the fleet again/,
  );
  assert.doesNotMatch(stop, /may be live/);
});

Deno.test("runFleet counts a cluster whose run selected no node as ended when it returned", async () => {
  const f = fakeFleet({ noNodes: ["a"] });
  assert.equal(await runFleet(THREE, f.deps), 0);
  assert.deepEqual(f.calls, [
    "run a at 1000000",
    "sleep 30000",
    "run b at 1040000",
    "run c at 1040000",
  ]);
});

Deno.test("runFleet resumed after kill -9 in a soak honours the recorded end: a cluster that selected no node does not restart it", async () => {
  // Stage one ended at 950 s (a's record); the process was killed 50 s into
  // its 60 s soak. z selected no node, so it has no record and runs again.
  const spec = parseFleet(
    `stages:
  - {name: one, clusters: [a, z], soakSecs: 60}
  - {name: two, clusters: [b]}
`,
    "f.yaml",
  );
  const f = fakeFleet({ ended: { a: 950_000 }, noNodes: ["z"] });
  assert.equal(await runFleet(spec, f.deps), 0);
  // z's run (10 s in the fake) ends at 1,010 s, when the soak from a's end is over.
  assert.deepEqual(f.calls, ["run z at 1000000", "run b at 1010000"], f.lines.join("\n"));
});

Deno.test("runFleet starts no cluster once stopped by a signal", async () => {
  const f = fakeFleet();
  f.abort.abort();
  assert.equal(await runFleet(THREE, f.deps), 0);
  assert.deepEqual(f.calls, []);
});

/**
 * The soak's gates on the fake clock: `at(now)` says what they say then.
 * Plain values, so that the test reads on a runner without soak gates.
 */
function soakGatesOf(
  now: () => number,
  at: (t: number) => {
    watch: { clean: true; since: number; after?: string } | { clean: false; why: string };
    stop?: { cluster: string; cause: string };
  },
) {
  const asked: string[][] = [];
  let stopped = 0;
  return {
    asked,
    stopped: () => stopped,
    soakGates: (clusters: string[]) => {
      asked.push(clusters);
      return Promise.resolve({
        watch: () => at(now()).watch,
        stopsBy: () => at(now()).stop,
        onChange: () => {},
        stop: () => Promise.resolve(void stopped++),
      });
    },
  };
}

Deno.test("runFleet's soak restarts, whole, from when every gate is clean again after a break inside it", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a], soakSecs: 30}, {name: two, clusters: [b]}]",
    "f",
  );
  const f = fakeFleet();
  const g = soakGatesOf(
    f.deps.now,
    (t) =>
      t < 1_020_000
        ? { watch: { clean: true, since: -Infinity } }
        : t < 1_030_000
        ? { watch: { clean: false, why: 'health gate breached: query "up == 0" returned 1' } }
        : { watch: { clean: true, since: 1_030_000, after: "health gate breached" } },
  );
  Object.assign(f.deps.runner, { soakGates: g.soakGates });
  assert.equal(await runFleet(spec, f.deps), 0);
  // a ended at 1010000; the break at 1020000 restarts the 30 s soak from 1030000.
  assert.equal(f.calls.at(-1), "run b at 1060000", f.calls.join("\n"));
  assert.ok(f.lines.some((l) => /soak after stage one holds: health gate breached/.test(l)));
  assert.ok(
    f.lines.some((l) => /until 1970-01-01T00:17:40Z .*from the gates clean again/.test(l)),
    f.lines.join("\n"),
  );
  assert.deepEqual(g.asked, [["a"]]);
  assert.equal(g.stopped(), 1, "the soak's gates stop measuring with it");
});

Deno.test("runFleet stops in the soak at a breach no pause holds: exit 5 naming the cluster, next stage untouched", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a], soakSecs: 30}, {name: two, clusters: [b]}]",
    "f",
  );
  const f = fakeFleet();
  const g = soakGatesOf(f.deps.now, (t) => ({
    watch: t < 1_020_000 ? { clean: true, since: -Infinity } : { clean: false, why: "breached" },
    stop: t < 1_020_000
      ? undefined
      : { cluster: "a", cause: 'a health gate was breached: query "up == 0" returned 1' },
  }));
  Object.assign(f.deps.runner, { soakGates: g.soakGates });
  assert.equal(await runFleet(spec, f.deps), 5);
  assert.deepEqual(f.calls.filter((c) => c.startsWith("run")), ["run a at 1000000"]);
  assert.match(
    f.lines.find((l) => l.startsWith("error: "))!,
    /stopped the line: cluster a in the soak after stage one: a health gate was breached/,
  );
  assert.deepEqual(f.deps.line.stopped, {
    cluster: "a",
    stage: "one",
    cause: 'a health gate was breached: query "up == 0" returned 1',
    code: 5,
  });
});

Deno.test("runFleet's soak watches the gates of every stage so far, and passes at once when they are clean", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a]}, {name: two, clusters: [b]}, {name: three, clusters: [c]}]",
    "f",
  );
  const f = fakeFleet();
  const g = soakGatesOf(f.deps.now, () => ({ watch: { clean: true, since: -Infinity } }));
  Object.assign(f.deps.runner, { soakGates: g.soakGates });
  assert.equal(await runFleet(spec, f.deps), 0);
  assert.deepEqual(g.asked, [["a"], ["a", "b"]]);
  assert.deepEqual(f.calls, ["run a at 1000000", "run b at 1010000", "run c at 1020000"]);
});

Deno.test("runFleet says its soak on the CLI's Logger (its methods keep their `this`)", async () => {
  const spec = parseFleet(
    "stages: [{name: one, clusters: [a], soakSecs: 30}, {name: two, clusters: [b]}]",
    "f",
  );
  const f = fakeFleet();
  const said: string[] = [];
  f.deps.log = new Logger("text", (line) => said.push(line));
  const g = soakGatesOf(
    f.deps.now,
    (t) =>
      t < 1_020_000
        ? { watch: { clean: false, why: "Prometheus unreachable" } }
        : { watch: { clean: true, since: 1_020_000, after: "Prometheus unreachable" } },
  );
  Object.assign(f.deps.runner, { soakGates: g.soakGates });
  assert.equal(await runFleet(spec, f.deps), 0);
  assert.ok(
    said.some((l) => /warn: fleet: the soak after stage one holds/.test(l)),
    said.join("\n"),
  );
  assert.ok(said.some((l) => /fleet: soaking after stage one until/.test(l)), said.join("\n"));
});

Deno.test("runFleet with owner Jobs latches the pause on each run in flight's owner, not on one it ended", async () => {
  const f = fakeFleet();
  const owners = new Map<string, string>();
  f.deps.line = new StopLine({
    write: () => Promise.reject(new Error("no pause file")),
    exists: () => false,
    owner: (c, reason) => Promise.resolve(void owners.set(c, reason)),
  });
  f.deps.runner.run = async (c, line) => {
    f.calls.push(`run ${c}`);
    if (c === "a") return await Promise.resolve(1);
    await until(() => owners.has(c)); // its owner Job latched: its own owner gate holds it now
    assert.equal(line.hold.pausedBy(), undefined);
    assert.equal(line.hold.stopsBy?.(), undefined);
    return 0;
  };
  assert.equal(await runFleet(TWO_STAGES, f.deps), 1);
  assert.deepEqual(f.calls, ["run a", "run b"], "stage t never starts");
  assert.deepEqual([...owners.keys()], ["b"]);
  assert.match(owners.get("b")!, /the line is stopped by cluster a \(stage s\): a said 1/);
  const stop = f.lines.filter((l) => l.startsWith("error: "));
  assert.match(stop[0], /the pause is latched on each owner Job: no Job starts in b until/);
});

Deno.test("runFleet of one stage says it ended as 1 stage, not 1 stages", async () => {
  const f = fakeFleet();
  assert.equal(
    await runFleet(parseFleet("stages: [{name: one, clusters: [a]}]", "f.yaml"), f.deps),
    0,
  );
  assert.ok(f.lines.includes("fleet: every stage ended (1 stage)"), f.lines.join("\n"));
});
