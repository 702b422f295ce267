import assert from "node:assert/strict";
import { estimateRollout, formatDuration, median, readDurations } from "./estimate.ts";
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
