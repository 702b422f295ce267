/**
 * `job-dispatcher status` timed as a user runs it (a fresh process each
 * time, so its start counts) while a benchmark run lives, and once more
 * after its end, when its counts are checked against the run's.
 *
 * @module
 */

import { ProcSampler } from "./_measure.ts";

/** One `status` invocation, measured from outside. */
export interface StatusSample {
  /** When it was spawned, s since the dispatcher's spawn. */
  at: number;
  /** `-o json` or the default text. */
  output: "text" | "json";
  /** Spawn → exit, ms. */
  ms: number;
  exitCode: number;
  /** User + system CPU time of the status process, s. */
  cpuSeconds: number;
  peakRssBytes: number;
  /** Bytes it printed. */
  stdoutBytes: number;
  /** Its first line (text) or its `run.summary` (json). */
  headline: string;
  /** With `-o json`: nodes per phase, all nodes, and whether the run lives. */
  counts?: Record<string, number>;
  total?: number;
  life?: string;
  /** Its stderr, when it said something. */
  stderr?: string;
}

/** Nodes per outcome at the end: the run's (from the Jobs' watcher) and status's. */
export interface StatusCheck {
  expected: { succeeded: number; failed: number; total: number };
  got: { succeeded: number; failed: number; total: number };
  /** The two are equal and status exited 0 or 1 (not an error). */
  agrees: boolean;
}

/** What the probe measured over one run. */
export interface StatusProbeResult {
  /** status's arguments after `status`. */
  args: string[];
  /** Every invocation's interval while the run lived, s. */
  everySecs: number;
  /** While the run lived (text). */
  during: StatusSample[];
  /** After the end: text, then `-o json`. */
  after: StatusSample[];
  check?: StatusCheck;
}

/** Runs `status` every `everyMs` until stopped, then once in each output. */
export class StatusProbe {
  readonly during: StatusSample[] = [];
  #stop = new AbortController();
  #loop?: Promise<void>;

  /**
   * @param command `deno run …` and the entry, as the dispatcher runs
   * @param args what follows `status`: `-n NS --name-prefix P --kubeconfig …`
   */
  constructor(
    readonly command: string[],
    readonly args: string[],
    readonly opts: { cwd: string; t0: number; everyMs: number },
  ) {}

  /** Starts sampling: the first after one interval. */
  start(): void {
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      await new Promise<void>((r) => {
        const timer = setTimeout(r, this.opts.everyMs);
        signal.addEventListener("abort", () => (clearTimeout(timer), r()), { once: true });
      });
      if (signal.aborted) return;
      this.during.push(await this.sample("text"));
    }
  }

  /** Stops sampling; waits for the invocation in flight. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
  }

  /** One invocation of `status`. */
  async sample(output: "text" | "json"): Promise<StatusSample> {
    const spawnAt = Date.now();
    const child = new Deno.Command(Deno.execPath(), {
      args: [...this.command, "status", ...this.args, ...(output === "json" ? ["-o", "json"] : [])],
      cwd: this.opts.cwd,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const sampler = new ProcSampler(child.pid, 50);
    const out = await child.output();
    const ms = Date.now() - spawnAt;
    sampler.stop();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr).trim();
    const sample: StatusSample = {
      at: Math.round((spawnAt - this.opts.t0) / 100) / 10,
      output,
      ms,
      exitCode: out.code,
      cpuSeconds: sampler.cpuSeconds,
      peakRssBytes: sampler.peakRssBytes,
      stdoutBytes: out.stdout.length,
      headline: stdout.split("\n")[0] ?? "",
      stderr: stderr || undefined,
    };
    if (output === "json" && (out.code === 0 || out.code === 1)) {
      const view = JSON.parse(stdout);
      sample.counts = view.counts;
      sample.total = view.total;
      sample.life = view.run?.state;
      sample.headline = view.run?.summary ?? "";
    }
    return sample;
  }

  /**
   * After the run: text, then `-o json`, whose counts are checked against
   * the run's, read the moment `-o json` answered.
   */
  async finish(run: () => StatusCheck["expected"]): Promise<StatusProbeResult> {
    await this.stop();
    const after = [await this.sample("text"), await this.sample("json")];
    const expected = run();
    const json = after[1];
    const got = {
      succeeded: json.counts?.succeeded ?? 0,
      failed: json.counts?.failed ?? 0,
      total: json.total ?? 0,
    };
    const agrees = json.counts !== undefined && got.succeeded === expected.succeeded &&
      got.failed === expected.failed && got.total === expected.total;
    return {
      args: this.args,
      everySecs: this.opts.everyMs / 1000,
      during: this.during,
      after,
      check: { expected, got, agrees },
    };
  }
}
