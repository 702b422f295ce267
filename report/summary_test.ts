import assert from "node:assert/strict";
import type { NodeResult } from "../engine/fanout.ts";
import {
  apiStatsLines,
  EXIT,
  exitCode,
  LOGS_HINTS_MAX,
  logsHints,
  summarise,
  writeReport,
} from "./summary.ts";
import { outcomeCounts } from "./report.ts";
import { Logger } from "./log.ts";
import { trackingKeys } from "../job.ts";
import { jsonReport, junitReport } from "./report.ts";

function results(...outcomes: NodeResult["outcome"][]): NodeResult[] {
  return outcomes.map((outcome, i) => ({ node: `n${i}`, job: `j-n${i}`, outcome }));
}

Deno.test({
  name:
    "exitCode() fails on a failure, a blocked node or a stop, and says window only when all else is well",
  permissions: "none",
  async fn(t) {
    const cases: [string, Parameters<typeof exitCode>[0], number][] = [
      ["nothing ran", { cleanup: [], results: [] }, EXIT.ok],
      ["all succeeded", { cleanup: [], results: results("succeeded", "succeeded") }, EXIT.ok],
      ["unknown is no failure", { cleanup: [], results: results("succeeded", "unknown") }, EXIT.ok],
      ["a failed node", { cleanup: [], results: results("succeeded", "failed") }, EXIT.failed],
      ["a blocked node", { cleanup: [], results: results("blocked") }, EXIT.failed],
      [
        "a failed cleanup node",
        { cleanup: results("failed"), results: results("succeeded") },
        EXIT.failed,
      ],
      ["a blocked cleanup node", { cleanup: results("blocked"), results: [] }, EXIT.ok],
      [
        "a stopped rollout",
        { cleanup: [], results: results("succeeded", "notStarted"), stoppedBy: "canary" },
        EXIT.failed,
      ],
      [
        "the window closed",
        { cleanup: [], results: results("succeeded", "notStarted"), windowClosed: true },
        EXIT.window,
      ],
      [
        "the window closed after a failure",
        { cleanup: [], results: results("failed", "notStarted"), windowClosed: true },
        EXIT.failed,
      ],
      [
        "the window closed after a failed cleanup",
        { cleanup: results("failed"), results: results("notStarted"), windowClosed: true },
        EXIT.failed,
      ],
      [
        "stopped by a health gate",
        {
          cleanup: [],
          results: results("succeeded", "notStarted"),
          stoppedBy: "a health gate was breached",
          gateStopped: true,
        },
        EXIT.gate,
      ],
      [
        "stopped by a health gate after a failure",
        {
          cleanup: [],
          results: results("failed", "notStarted"),
          stoppedBy: "g",
          gateStopped: true,
        },
        EXIT.failed,
      ],
    ];
    for (const [what, ending, want] of cases) {
      await t.step(`${what} → ${want}`, () => assert.equal(exitCode(ending), want));
    }
  },
});

Deno.test({
  name: "outcomeCounts() counts every outcome, zero included, in the order the log shows them",
  permissions: "none",
  fn() {
    const counts = outcomeCounts(results("succeeded", "failed", "succeeded", "inFlight"));
    assert.deepEqual(Object.entries(counts), [
      ["succeeded", 2],
      ["failed", 1],
      ["unknown", 0],
      ["blocked", 0],
      ["inFlight", 1],
      ["notStarted", 0],
    ]);
  },
});

Deno.test({
  name: "writeReport() writes the format asked for, and says false when the file cannot be written",
  permissions: "none",
  async fn(t) {
    const input = {
      startedAt: new Date(0),
      finishedAt: new Date(1_000),
      namespace: "ns",
      prefix: "up",
      results: results("succeeded"),
      uids: new Map([["n0", "u0"]]),
      skipped: [],
    };
    for (const format of ["json", "junit"] as const) {
      await t.step(`${format}: written, and said where`, () => {
        const files = new Map<string, string>();
        const lines: string[] = [];
        const written = writeReport({
          path: "/r",
          format,
          input,
          writeFile: (path, text) => void files.set(path, text),
          log: new Logger("text", (line) => lines.push(line)),
        });
        assert.equal(written, true);
        assert.equal(files.get("/r"), format === "json" ? jsonReport(input) : junitReport(input));
        assert.match(lines.join("\n"), new RegExp(`report: /r \\(${format}\\)`));
      });
    }
    await t.step("a file that cannot be written: an error line, and false", () => {
      const lines: string[] = [];
      const written = writeReport({
        path: "/ro/r",
        format: "json",
        input,
        writeFile: () => {
          throw new Error("read-only file system");
        },
        log: new Logger("text", (line) => lines.push(line)),
      });
      assert.equal(written, false);
      assert.match(lines.join("\n"), /Cannot write report \/ro\/r: read-only file system/);
    });
  },
});

Deno.test({
  name: "summarise() counts, names each failure, and says how to finish an interrupted run",
  permissions: "none",
  async fn(t) {
    const run = { keys: trackingKeys("job-dispatcher"), prefix: "up" };
    const cases: [string, NodeResult[], string[]][] = [
      ["one node, said in the singular", results("succeeded"), [
        /^summary: 1 succeeded, 0 failed of 1 node in \d+\.\d s$/.source,
      ]],
      ["a failure: named, with the logs command", [
        ...results("succeeded"),
        { node: "n1", job: "j-n1", outcome: "failed", reason: "exited 3", startedAt: 1 },
      ], [
        /^summary: 1 succeeded, 1 failed of 2 nodes in /.source,
        /^warn: failed node n1: job j-n1: exited 3$/.source,
        /^logs: kubectl logs -n ns -l job-dispatcher\/owner=up,job-dispatcher\/node=n1 --all-containers --prefix$/
          .source,
      ]],
      // No Job was created: there are no logs to read, the budget is what to look at.
      ["a drain a budget held: no job, the budget named, no logs command", [{
        node: "n1",
        job: "j-n1",
        outcome: "failed",
        reason: "drain did not finish within 9 s; blocked by PodDisruptionBudget shop/web-pdb (…)",
      }], [
        /^summary: 0 succeeded, 1 failed of 1 node in /.source,
        /^warn: failed node n1: no job \(failed before it\): drain did not finish within 9 s; .*; see kubectl get pdb -n shop web-pdb$/
          .source,
      ]],
      ["a drain refused: the reason names the flag, no logs command", [{
        node: "n1",
        job: "j-n1",
        outcome: "failed",
        reason: "drain refused: cannot delete Pods that declare no controller " +
          "(use --force to override): shop/p",
      }], [
        /^summary: 0 succeeded, 1 failed of 1 node in /.source,
        /^warn: failed node n1: no job \(failed before it\): drain refused: .*--force.*: shop\/p$/
          .source,
      ]],
      ["interrupted: how to finish", results("succeeded", "inFlight", "inFlight", "notStarted"), [
        /^summary: 1 succeeded, 0 failed, 2 still running, 1 not started of 4 nodes in /.source,
        /^warn: 2 Jobs still run: a re-run of the same command adopts them and starts the 1 node not started$/
          .source,
      ]],
      ["interrupted with one Job left", results("inFlight"), [
        /^summary: 0 succeeded, 0 failed, 1 still running of 1 node in /.source,
        /^warn: 1 Job still runs: a re-run of the same command adopts it$/.source,
      ]],
    ];
    for (const [name, rs, want] of cases) {
      await t.step(name, () => {
        const lines: string[] = [];
        summarise(rs, new Logger("text", (l) => lines.push(l.slice(9))), "ns", run, Date.now());
        assert.equal(lines.length, want.length, lines.join("\n"));
        want.forEach((re, i) => assert.match(lines[i], new RegExp(re)));
      });
    }
  },
});

Deno.test({
  name: "apiStatsLines() counts a budget's refusal of an eviction apart from throttling",
  permissions: "none",
  async fn(t) {
    const cases: [string, number, number, string[]][] = [
      ["nothing", 0, 0, []],
      ["one throttled", 1, 0, ["the API server throttled 1 request (429)"]],
      ["nine throttled", 9, 0, ["the API server throttled 9 requests (429)"]],
      ["refusals only", 0, 1, [
        "PodDisruptionBudgets refused 1 eviction (429, cause DisruptionBudget; retried by " +
        "the drain), not API throttling",
      ]],
      ["both", 2, 5, [
        "the API server throttled 2 requests (429)",
        "PodDisruptionBudgets refused 5 evictions (429, cause DisruptionBudget; retried by " +
        "the drain), not API throttling",
      ]],
    ];
    for (const [name, throttled, budgetRefusals, want] of cases) {
      await t.step(name, () => {
        const lines = apiStatsLines({ throttled, budgetRefusals });
        assert.deepEqual(lines.map(([msg]) => msg), want);
        assert.deepEqual(
          lines.map(([, f]) => f.count),
          [throttled, budgetRefusals].filter(Boolean),
        );
      });
    }
  },
});

Deno.test({
  name: "the logs: hint points at each failed node's pods, bounded for many failures",
  permissions: "none",
  async fn(t) {
    const run = { keys: trackingKeys("job-dispatcher"), prefix: "up" };
    const failed = (n: number, first = 0): NodeResult[] =>
      Array.from({ length: n }, (_, i) => ({
        node: `n${first + i}`,
        job: `up-n${first + i}`,
        outcome: "failed",
        reason: "exited 3",
        startedAt: 1,
      }));
    const line = (node: string) =>
      `logs: kubectl logs -n ops -l job-dispatcher/owner=up,job-dispatcher/node=${node} ` +
      "--all-containers --prefix";
    await t.step("two failed Jobs: a line each, never the whole run's pods", () => {
      assert.deepEqual(logsHints(failed(2), "ops", run), [line("n0"), line("n1")]);
    });
    await t.step("a node that failed before its Job has no logs to read", () => {
      const before: NodeResult = { node: "x", job: "up-x", outcome: "failed", reason: "drain" };
      assert.deepEqual(logsHints([before, ...failed(1)], "ops", run), [line("n0")]);
    });
    await t.step(`${LOGS_HINTS_MAX + 7} failed: the first ${LOGS_HINTS_MAX}, then a count`, () => {
      const lines = logsHints(failed(LOGS_HINTS_MAX + 7), "ops", run);
      assert.equal(lines.length, LOGS_HINTS_MAX + 1);
      assert.deepEqual(
        lines.slice(0, LOGS_HINTS_MAX),
        failed(LOGS_HINTS_MAX).map((r) => line(r.node)),
      );
      assert.equal(
        lines[LOGS_HINTS_MAX],
        "logs: 7 more failed nodes: the same with job-dispatcher/node=NODE for each failed node above",
      );
    });
    await t.step("a node name too long for a label value: its label value", () => {
      const long = "n".repeat(70);
      const [hint] = logsHints([{ ...failed(1)[0], node: long }], "ops", run);
      assert.doesNotMatch(hint, new RegExp(long));
      assert.match(hint, /job-dispatcher\/node=n+-?[0-9a-z]* /);
    });
  },
});
