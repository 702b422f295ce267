import assert from "node:assert/strict";
import fc from "fast-check";
import {
  domainRounds,
  estimateRollout,
  formatDuration,
  median,
  readDurations,
  waveConcurrency,
} from "./estimate.ts";
import { NO_DOMAIN } from "../engine/safety.ts";
import { takeNext } from "../engine/admission.ts";
import { UsageError } from "../job.ts";

const at = (s: number) => new Date(Date.UTC(2026, 0, 1) + s * 1000).toISOString();
const node = (name: string, start?: number, end?: number) => ({
  name,
  start: start === undefined ? null : at(start),
  end: end === undefined ? null : at(end),
});
const report = (nodes: unknown[]) =>
  JSON.stringify({ kind: "JobDispatcherReport", version: 1, nodes });

Deno.test({
  name: "median() is the middle value, or the mean of the middle two",
  permissions: "none",
  async fn(t) {
    const cases: [string, number[], number][] = [
      ["one value", [7], 7],
      ["odd count, unsorted", [30, 10, 20], 20],
      ["even count", [3, 1, 10, 2], 2.5],
      ["an outlier moves it little", [60, 60, 60, 3600], 60],
    ];
    for (const [name, values, want] of cases) {
      await t.step(name, () => assert.equal(median(values), want));
    }
  },
});

Deno.test({
  name: "readDurations() takes end - start of every node that has both, failed ones too",
  permissions: "none",
  fn() {
    const d = readDurations(
      report([
        { ...node("a", 0, 60), outcome: "succeeded" },
        { ...node("b", 10, 130), outcome: "failed" },
        { ...node("c", 0, 90), outcome: "succeeded" },
        { ...node("d"), outcome: "skipped" },
        { ...node("e", 5), outcome: "notStarted" },
      ]),
      "r.json",
    );
    assert.deepEqual(d, { from: "r.json", seconds: [60, 120, 90], medianSecs: 90 });
  },
});

Deno.test({
  name: "readDurations() refuses what is not a report in one line naming the file",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, RegExp][] = [
      ["not JSON", "kind: Job\n", /^Invalid --estimate-from r\.json: not JSON \(/],
      ["another JSON object", '{"kind":"Job"}', /: not a job-dispatcher report \(no "kind"/],
      ["a JSON array", "[]", /: not a job-dispatcher report/],
      ["JSON null", "null", /: not a job-dispatcher report/],
      [
        "another version",
        '{"kind":"JobDispatcherReport","version":2,"nodes":[]}',
        /: report version 2, not 1/,
      ],
      ["no nodes list", '{"kind":"JobDispatcherReport","version":1}', /: it has no "nodes" list/],
      [
        "no node ran",
        report([node("a"), node("b", 3)]),
        /: no node in it has both a start and an end/,
      ],
      ["a node that ended before it started", report([node("a", 60, 0)]), /: node a has no valid/],
      ["a start that is no time", report([{ name: "a", start: "soon", end: at(0) }]), /: node a/],
    ];
    for (const [name, text, want] of cases) {
      await t.step(name, () => {
        assert.throws(() => readDurations(text, "r.json"), (e: Error) => {
          assert.ok(e instanceof UsageError);
          assert.match(e.message, want);
          assert.match(e.message, /give the JSON report of an earlier run \(--report PATH\)$/);
          assert.doesNotMatch(e.message, /\n/);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "estimateRollout() adds each wave's rounds of the concurrency and the soaks between waves",
  permissions: "none",
  async fn(t) {
    const cases: [string, Parameters<typeof estimateRollout>[0], number, number[]][] = [
      ["one wave, one round", { waveSizes: [3], concurrency: 5, nodeSecs: 60 }, 60, [1]],
      ["one wave, rounds rounded up", { waveSizes: [5], concurrency: 2, nodeSecs: 60 }, 180, [3]],
      [
        "a canary, then the rest, soaked once in between",
        { waveSizes: [1, 4], concurrency: 2, nodeSecs: 60, soakSecs: 30 },
        60 + 30 + 120,
        [1, 2],
      ],
      [
        "no soak after the last wave",
        { waveSizes: [1, 1, 1], concurrency: 1, nodeSecs: 10, soakSecs: 100 },
        30 + 200,
        [1, 1, 1],
      ],
      [
        "the post-node delay holds every round's slot",
        { waveSizes: [4], concurrency: 2, nodeSecs: 50, postNodeDelaySecs: 10 },
        120,
        [2],
      ],
      ["a concurrency of 0 counts as 1", { waveSizes: [2], concurrency: 0, nodeSecs: 5 }, 10, [2]],
      ["no node, no time", { waveSizes: [], concurrency: 3, nodeSecs: 5 }, 0, []],
    ];
    for (const [name, input, total, rounds] of cases) {
      await t.step(name, () => {
        const e = estimateRollout(input);
        assert.equal(e.totalSecs, total);
        assert.deepEqual(e.waves.map((w) => w.rounds), rounds);
      });
    }
  },
});

/** A wave's nodes' domains in dispatch order: `"a b a b"`. */
const order = (text: string) => text.split(" ").filter(Boolean);

Deno.test({
  name:
    "estimateRollout() with --max-per-topology runs each wave at most M per domain among its nodes",
  permissions: "none",
  async fn(t) {
    const cases: {
      name: string;
      input: Parameters<typeof estimateRollout>[0];
      concurrency: number[];
      rounds: number[];
      total: number;
    }[] = [
      {
        name: "two zones, 1 per zone: 2 at once, not --parallelism's 4",
        input: {
          waveSizes: [8],
          concurrency: 4,
          waveDomains: [order("a b a b a b a b")],
          maxPerDomain: 1,
          nodeSecs: 60,
        },
        concurrency: [2],
        rounds: [4],
        total: 240,
      },
      {
        name: "three zones, 2 per zone: --parallelism binds first",
        input: {
          waveSizes: [9],
          concurrency: 4,
          waveDomains: [order("a b c a b c a b c")],
          maxPerDomain: 2,
          nodeSecs: 60,
        },
        concurrency: [4],
        rounds: [3],
        total: 180,
      },
      {
        name: "the budget's room binds first",
        input: {
          waveSizes: [6],
          concurrency: 1,
          waveDomains: [order("a b a b a b")],
          maxPerDomain: 2,
          nodeSecs: 60,
        },
        concurrency: [1],
        rounds: [6],
        total: 360,
      },
      {
        name: "a large zone takes its own rounds while the others' slots stay free",
        input: {
          waveSizes: [8],
          concurrency: 3,
          waveDomains: [order("a b c a a a a a")],
          maxPerDomain: 1,
          nodeSecs: 60,
        },
        concurrency: [3],
        rounds: [6],
        total: 360,
      },
      {
        // Round 1 a b c, round 2 d e a, round 3 b a, round 4 b: the first
        // queued node with room goes first, as the engine starts it.
        name:
          "early slots go to small zones as the engine gives them: a round more than the bounds say",
        input: {
          waveSizes: [9],
          concurrency: 3,
          waveDomains: [order("a b c d e a b a b")],
          maxPerDomain: 1,
          nodeSecs: 60,
        },
        concurrency: [3],
        rounds: [4],
        total: 240,
      },
      {
        name: "nodes without the label are one domain: they share its M slots",
        input: {
          waveSizes: [4],
          concurrency: 4,
          waveDomains: [[NO_DOMAIN, NO_DOMAIN, NO_DOMAIN, NO_DOMAIN]],
          maxPerDomain: 1,
          nodeSecs: 60,
        },
        concurrency: [1],
        rounds: [4],
        total: 240,
      },
      {
        name: "per wave: a canary in one zone runs alone, the rest over three zones",
        input: {
          waveSizes: [1, 6],
          concurrency: 5,
          waveDomains: [order("a"), order("a b c a b c")],
          maxPerDomain: 1,
          nodeSecs: 60,
          soakSecs: 30,
        },
        concurrency: [1, 3],
        rounds: [1, 2],
        total: 60 + 30 + 120,
      },
      {
        name: "without the limit the domains do not count",
        input: {
          waveSizes: [8],
          concurrency: 4,
          waveDomains: [order("a a a a a a a a")],
          nodeSecs: 60,
        },
        concurrency: [4],
        rounds: [2],
        total: 120,
      },
      {
        name: "a wave with no node to run takes no round",
        input: {
          waveSizes: [0, 2],
          concurrency: 4,
          waveDomains: [[], order("a a")],
          maxPerDomain: 1,
          nodeSecs: 60,
        },
        concurrency: [4, 1],
        rounds: [0, 2],
        total: 120,
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const e = estimateRollout(c.input);
        assert.deepEqual(e.waves.map((w) => w.concurrency), c.concurrency);
        assert.deepEqual(e.waves.map((w) => w.rounds), c.rounds);
        assert.equal(e.totalSecs, c.total);
      });
    }
  },
});

Deno.test({
  name: "waveConcurrency() is the lesser of the slots and M times the wave's domains",
  permissions: "none",
  async fn(t) {
    const cases: [string, number, number | undefined, number | undefined, number][] = [
      ["no limit", 10, undefined, undefined, 10],
      ["two domains of 2", 10, 2, 2, 4],
      ["slots fewer than the domains allow", 3, 2, 2, 3],
      ["no domain: the slots", 3, 0, 2, 3],
      ["no slot counts as one", 0, 1, 2, 1],
    ];
    for (const [name, slots, domains, max, want] of cases) {
      await t.step(name, () => assert.equal(waveConcurrency(slots, domains, max), want));
    }
  },
});

/**
 * The engine's rounds when every node takes as long: each round, every free
 * slot starts what engine/admission.ts `takeNext` picks, then all of them end.
 */
function engineRounds(domains: readonly string[], slots: number, maxPerDomain: number): number {
  const names = domains.map((_, i) => `n${i}`);
  const domainOf = (n: string) => domains[Number(n.slice(1))];
  const done = new Set<string>();
  let queue = [...names];
  let rounds = 0;
  while (done.size < names.length) {
    const inFlight: string[] = [];
    while (inFlight.length < slots) {
      const picked = takeNext(queue, {
        queued: (n) => !done.has(n) && !inFlight.includes(n),
        domainOf,
        inFlight,
        maxPerDomain,
      });
      queue = picked.queue;
      if (picked.name === undefined) break;
      inFlight.push(picked.name);
    }
    for (const n of inFlight) done.add(n);
    rounds++;
  }
  return rounds;
}

Deno.test({
  name: "domainRounds() takes the rounds the engine's start rule takes, for any order of domains",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("a", "b", "c", "d", NO_DOMAIN), { maxLength: 30 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        (domains, slots, max) =>
          domainRounds(domains, slots, max) === engineRounds(domains, slots, max),
      ),
      { numRuns: 500 },
    );
  },
});

Deno.test({
  // A correctness case at fleet size; how long it takes is the bench's to
  // measure (~250 ms here), never a test's to gate on.
  name: "domainRounds() at 10,000 nodes, one domain each, takes the rounds of the slots",
  permissions: "none",
  fn() {
    const domains = Array.from({ length: 10_000 }, (_, i) => `host-${i}`);
    assert.equal(domainRounds(domains, 1, 1), 10_000);
    assert.equal(domainRounds(domains, 100, 1), 100);
  },
});

Deno.test({
  name:
    "estimateRollout() soaks no wave whose every node was counted from an earlier run, as the engine soaks none (a re-run after a stop)",
  permissions: "none",
  async fn(t) {
    const cases: [string, number[], number[], number][] = [
      ["the canary done already: no soak after it", [0, 4], [0, 0], 2 * 60],
      ["the first two waves done: the third soaks", [0, 0, 2, 2], [0, 0, 30, 0], 60 + 30 + 60],
      ["a wave done between two that run", [2, 0, 2], [30, 0, 0], 60 + 30 + 60],
    ];
    for (const [name, waveSizes, soaks, total] of cases) {
      await t.step(name, () => {
        const e = estimateRollout({ waveSizes, concurrency: 2, nodeSecs: 60, soakSecs: 30 });
        assert.deepEqual(e.waves.map((w) => w.soakSecs), soaks);
        assert.equal(e.totalSecs, total);
      });
    }
  },
});

Deno.test({
  name: "formatDuration() says seconds, minutes or hours",
  permissions: "none",
  async fn(t) {
    const cases: [number, string][] = [[0, "0s"], [59.4, "59s"], [60, "1m00s"], [754, "12m34s"], [
      3900,
      "1h05m",
    ], [90000, "25h00m"]];
    for (const [secs, want] of cases) {
      await t.step(`${secs} s`, () => assert.equal(formatDuration(secs), want));
    }
  },
});
