import assert from "node:assert/strict";
import type { DispatchEvent } from "../engine/fanout.ts";
import { describeEvent, describeProgress, Logger } from "./log.ts";

Deno.test({
  name: "describeEvent() tells each kind of event in one line",
  permissions: "none",
  async fn(t) {
    const cases: [string, DispatchEvent, string][] = [
      [
        "api paused",
        { kind: "api", state: "paused", detail: "Cannot create jobs: webhook down" },
        "API outage: Cannot create jobs: webhook down; starts paused, no node fails for it: " +
        "nodes wait in the queue until the API answers",
      ],
      [
        "api resumed",
        { kind: "api", state: "resumed", detail: "the API answers again after 130 s" },
        "starts resume: the API answers again after 130 s",
      ],
      [
        "waiting",
        { kind: "waiting", node: "n1", job: "up-n1", why: "stale Job up-n1 still runs" },
        "node n1: waiting: stale Job up-n1 still runs",
      ],
      ["created", { kind: "created", node: "n1", job: "up-n1" }, "created job up-n1 for node n1"],
      ["adopted", { kind: "adopted", node: "n1", job: "up-n1" }, "adopted job up-n1 for node n1"],
      [
        "replaced",
        { kind: "replaced", node: "n1", job: "up-n1" },
        "replaced job up-n1 for node n1",
      ],
      [
        "succeeded",
        { kind: "succeeded", node: "n1", job: "up-n1" },
        "node n1: job up-n1 succeeded",
      ],
      [
        "succeeded earlier",
        { kind: "succeeded", node: "n1", job: "up-n1", counted: true },
        "node n1: job up-n1 succeeded (earlier, counted)",
      ],
      [
        "failed",
        { kind: "failed", node: "n1", job: "up-n1", reason: "BackoffLimitExceeded" },
        "node n1: job up-n1 failed: BackoffLimitExceeded",
      ],
      [
        "failed earlier",
        { kind: "failed", node: "n1", job: "up-n1", reason: "DeadlineExceeded", counted: true },
        "node n1: job up-n1 failed (earlier, counted): DeadlineExceeded",
      ],
      [
        "failed in its drain, before any Job",
        {
          kind: "failed",
          node: "n1",
          job: "up-n1",
          reason: "drain did not finish within 9 s",
          noJob: true,
        },
        "node n1: failed before its Job was created: drain did not finish within 9 s",
      ],
      [
        "deleting",
        { kind: "deleting", job: "up-n1", why: "it belongs to an earlier owner" },
        "deleting job up-n1: it belongs to an earlier owner",
      ],
      [
        "watch",
        { kind: "watch", state: "polling", detail: "3 watch failures in a row" },
        "watch polling: 3 watch failures in a row",
      ],
    ];
    for (const [name, event, want] of cases) {
      await t.step(`it tells ${name}`, () => {
        const line = describeEvent(event);
        assert.equal(line, want);
        assert.ok(!line.includes("\n"));
      });
    }
  },
});

Deno.test({
  name: "describeProgress() tells the counts in one line",
  permissions: "none",
  fn() {
    assert.equal(
      describeProgress({
        succeeded: 120,
        failed: 3,
        inFlight: 100,
        queued: 4777,
        total: 5000,
        elapsedMs: 0,
      }),
      "120/5000 succeeded, 3 failed, 100 in flight, 4777 queued",
    );
    assert.equal(
      describeProgress({ succeeded: 0, failed: 0, inFlight: 0, queued: 0, total: 0, elapsedMs: 0 }),
      "0/0 succeeded, 0 failed, 0 in flight, 0 queued",
    );
    // Nodes being drained hold slots but have no Job yet: said apart.
    assert.equal(
      describeProgress({
        succeeded: 0,
        failed: 0,
        inFlight: 3,
        draining: 2,
        queued: 1,
        total: 4,
        elapsedMs: 0,
      }),
      "0/4 succeeded, 0 failed, 1 in flight, 2 draining, 1 queued",
    );
    // During an outage: what is going on, never a rate or an ETA.
    assert.equal(
      describeProgress({
        succeeded: 8,
        failed: 0,
        unknown: 1,
        inFlight: 37,
        queued: 10,
        total: 56,
        elapsedMs: 300_000,
        outage: { word: "unreachable", forMs: 130_000, paused: true, detail: "x" },
      }),
      "API unreachable for 2m10s: paused, 37 in flight; " +
        "8/56 succeeded, 0 failed, 1 unknown, 37 in flight, 10 queued",
    );
    // Paused by the user, a blocked node, the availability budget: all said.
    assert.equal(
      describeProgress({
        succeeded: 2,
        failed: 0,
        blocked: 1,
        inFlight: 1,
        queued: 6,
        total: 10,
        elapsedMs: 0,
        budget: "unavailable 2/2 (1 in work, 1 NotReady)",
        paused: "annotation job-dispatcher/paused=true on Job ops/hook",
      }),
      "paused by annotation job-dispatcher/paused=true on Job ops/hook " +
        "(kubectl annotate job hook -n ops job-dispatcher/paused- resumes): " +
        "2/10 succeeded, 0 failed, 1 blocked, 1 in flight, 6 queued; " +
        "unavailable 2/2 (1 in work, 1 NotReady)",
    );
    // Paused by a file, with nodes done: no rate, no ETA (it would only grow
    // while nothing starts), but how to resume.
    assert.equal(
      describeProgress({
        succeeded: 2,
        failed: 0,
        inFlight: 0,
        queued: 4,
        total: 6,
        elapsedMs: 15_000,
        paused: "file /tmp/pause",
      }),
      "paused by file /tmp/pause (rm /tmp/pause resumes): " +
        "2/6 succeeded, 0 failed, 0 in flight, 4 queued",
    );
  },
});

function logger(format: "text" | "json"): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: new Logger(format, (line) => lines.push(line)), lines };
}

const CLOCK = /^\d{2}:\d{2}:\d{2} /;

Deno.test({
  name: "Logger writes text lines with the time and the level",
  permissions: "none",
  async fn(t) {
    await t.step("info has no level tag", () => {
      const { log, lines } = logger("text");
      log.info("listing nodes", { selector: "role=worker" });
      assert.equal(lines.length, 1);
      assert.match(lines[0], CLOCK);
      assert.equal(lines[0].slice(9), "listing nodes");
    });

    await t.step("warn and error are tagged", () => {
      const { log, lines } = logger("text");
      log.warn("skipping node n1");
      log.error("cannot list jobs");
      assert.equal(lines[0].slice(9), "warn: skipping node n1");
      assert.equal(lines[1].slice(9), "error: cannot list jobs");
    });

    await t.step("an event is told by describeEvent()", () => {
      const { log, lines } = logger("text");
      const e: DispatchEvent = { kind: "created", node: "n1", job: "up-n1" };
      log.event(e);
      assert.equal(lines[0].slice(9), describeEvent(e));
    });

    await t.step("a failed node is a warning", () => {
      const { log, lines } = logger("text");
      log.event({ kind: "failed", node: "n1", job: "up-n1", reason: "BackoffLimitExceeded" });
      assert.equal(lines[0].slice(9), "warn: node n1: job up-n1 failed: BackoffLimitExceeded");
    });

    await t.step("a notice of good news (a lifted pause) is info, not a warning", () => {
      const { log, lines } = logger("text");
      log.event(
        {
          kind: "notice",
          message: "resumed: the pause was lifted",
          level: "info",
        } as DispatchEvent,
      );
      assert.equal(lines[0].slice(9), "resumed: the pause was lifted");
    });

    await t.step("progress is told by describeProgress()", () => {
      const { log, lines } = logger("text");
      const p = { succeeded: 1, failed: 0, inFlight: 2, queued: 3, total: 6, elapsedMs: 0 };
      log.progress(p);
      assert.equal(lines[0].slice(9), describeProgress(p));
    });

    await t.step("text is the default format", () => {
      const lines: string[] = [];
      new Logger(undefined, (line) => lines.push(line)).info("hello");
      assert.match(lines[0], CLOCK);
      assert.equal(lines[0].slice(9), "hello");
    });
  },
});

Deno.test({
  name: "Logger writes JSON lines with level, msg, time and the fields",
  permissions: "none",
  async fn(t) {
    await t.step("every line parses as one JSON object", () => {
      const { log, lines } = logger("json");
      log.info("one");
      log.warn("two", { node: "n1" });
      log.error("three", { status: 403 });
      assert.equal(lines.length, 3);
      for (const line of lines) {
        assert.ok(!line.includes("\n"));
        const record = JSON.parse(line);
        assert.equal(typeof record, "object");
        assert.ok(!Number.isNaN(Date.parse(record.time)), `time ${record.time}`);
      }
    });

    await t.step("info, warn and error carry their level, message and fields", () => {
      const { log, lines } = logger("json");
      log.info("one");
      log.warn("two", { node: "n1" });
      log.error("three", { status: 403 });
      const [a, b, c] = lines.map((l) => {
        const { time: _, ...rest } = JSON.parse(l);
        return rest;
      });
      assert.deepEqual(a, { level: "info", msg: "one" });
      assert.deepEqual(b, { level: "warn", msg: "two", node: "n1" });
      assert.deepEqual(c, { level: "error", msg: "three", status: 403 });
    });

    await t.step("an event carries its kind as event and its fields", () => {
      const { log, lines } = logger("json");
      const e: DispatchEvent = {
        kind: "failed",
        node: "n1",
        job: "up-n1",
        reason: "BackoffLimitExceeded",
      };
      log.event(e);
      const { time: _, ...record } = JSON.parse(lines[0]);
      assert.deepEqual(record, {
        level: "warn",
        msg: describeEvent(e),
        event: "failed",
        kind: "failed",
        node: "n1",
        job: "up-n1",
        reason: "BackoffLimitExceeded",
      });
    });

    await t.step("progress carries event progress and the counts", () => {
      const { log, lines } = logger("json");
      const p = { succeeded: 1, failed: 0, inFlight: 2, queued: 3, total: 6, elapsedMs: 0 };
      log.progress(p);
      const { time: _, ...record } = JSON.parse(lines[0]);
      assert.deepEqual(record, {
        level: "info",
        msg: describeProgress(p),
        event: "progress",
        ...p,
      });
    });

    await t.step("a message with quotes and newlines stays one line", () => {
      const { log, lines } = logger("json");
      log.info('a "quoted"\nmessage');
      assert.equal(lines.length, 1);
      assert.equal(JSON.parse(lines[0]).msg, 'a "quoted"\nmessage');
    });
  },
});

Deno.test({
  name: "describeProgress() adds the rate and the ETA once nodes have finished",
  permissions: "none",
  fn() {
    assert.equal(
      describeProgress({
        succeeded: 90,
        failed: 10,
        inFlight: 20,
        queued: 880,
        total: 1000,
        elapsedMs: 50_000,
      }),
      "90/1000 succeeded, 10 failed, 20 in flight, 880 queued, 2.00 nodes/s, ETA 8m",
    );
  },
});

Deno.test({
  name: "Logger names at most 20 successes of an earlier run in text, every one in JSON",
  permissions: "none",
  fn() {
    for (const [format, want] of [["text", 20], ["json", 30]] as const) {
      const lines: string[] = [];
      const log = new Logger(format, (l) => lines.push(l));
      for (let i = 0; i < 30; i++) {
        log.event({ kind: "succeeded", node: `n${i}`, job: `up-n${i}`, counted: true });
      }
      log.event({ kind: "succeeded", node: "fresh", job: "up-fresh" });
      assert.equal(lines.length, want + 1, format);
      if (format === "text") {
        assert.match(lines[19], /further earlier successes are counted silently/);
      }
    }
  },
});

Deno.test({
  name: "Logger.progress() leaves the time paused out of the rate and the ETA",
  permissions: "none",
  fn() {
    const { log, lines } = logger("text");
    const at = { failed: 0, inFlight: 0, total: 100 };
    log.progress({ ...at, succeeded: 10, queued: 90, elapsedMs: 10_000 });
    log.progress({ ...at, succeeded: 10, queued: 90, elapsedMs: 10_000, paused: "file /tmp/p" });
    log.progress({ ...at, succeeded: 10, queued: 90, elapsedMs: 3_610_000 });
    // An hour paused: counted, the rate would be 20/3620 nodes/s and the ETA 4h01m.
    log.progress({ ...at, succeeded: 20, queued: 80, elapsedMs: 3_620_000 });
    const last = lines.at(-1)!.replace(CLOCK, "");
    assert.equal(last, "20/100 succeeded, 0 failed, 0 in flight, 80 queued, 1.00 nodes/s, ETA 1m");
  },
});

Deno.test({
  name: "describeProgress() begins with the open wave, its soak and the hold after it",
  permissions: "none",
  async fn(t) {
    const p = { succeeded: 1, failed: 0, inFlight: 0, queued: 11, total: 12, elapsedMs: 0 };
    const counts = "1/12 succeeded, 0 failed, 0 in flight, 11 queued";
    const cases: [string, Parameters<typeof describeProgress>[0]["wave"], string][] = [
      ["running", { wave: 2, waves: 3, stage: "running" }, `wave 2/3: ${counts}`],
      [
        "soaking",
        { wave: 1, waves: 3, stage: "soaking", soakLeftMs: 40_000 },
        `wave 1/3 soaking (40s left): ${counts}`,
      ],
      [
        "held by the hold after the wave",
        { wave: 1, waves: 3, stage: "holding" },
        `wave 1/3 soaked, held before the next wave: ${counts}`,
      ],
      [
        "a gate break inside the soak",
        { wave: 1, waves: 3, stage: "holding", soakInterrupted: true },
        `wave 1/3 soak interrupted (a health gate break, a pause), restarts once it is over: ${counts}`,
      ],
    ];
    for (const [name, wave, want] of cases) {
      await t.step(name, () => assert.equal(describeProgress({ ...p, wave }), want));
    }
  },
});
