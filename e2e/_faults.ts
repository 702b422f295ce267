/**
 * Helpers of the fault and bad-input suites: a dispatcher process the test
 * can watch and kill at a chosen moment, and readers of what it printed.
 *
 * @module
 */

import type { Cluster, CommandResult } from "./cluster.ts";
import { dispatcherCommand } from "./_dispatcher.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** How a {@linkcode DispatcherProcess} ended. */
export interface Ended extends CommandResult {
  /** Whether the test's time bound killed it. */
  timedOut: boolean;
  /** How long it ran, in ms. */
  ms: number;
}

/**
 * The dispatcher as a subprocess the test can follow line by line and signal
 * at a moment of its choosing, bounded by a timeout so that nothing hangs.
 */
export class DispatcherProcess {
  #child: Deno.ChildProcess;
  #stderr = "";
  #waiters: { test: (stderr: string) => boolean; resolve: () => void }[] = [];
  #timer?: ReturnType<typeof setTimeout>;
  #timedOut = false;
  #started = Date.now();
  /** Resolves when the process exits. */
  readonly ended: Promise<Ended>;

  /**
   * Starts the dispatcher with `args`.
   *
   * @param opts.kubeconfig the kubeconfig (default: the cluster's admin one)
   * @param opts.timeoutMs SIGKILL after this long (default 180 s)
   */
  constructor(
    // Only its kubeconfig: a run against an address with no cluster needs none.
    cluster: Pick<Cluster, "kubeconfig">,
    args: string[],
    opts: { kubeconfig?: string; timeoutMs?: number; env?: Record<string, string> } = {},
  ) {
    const child = new Deno.Command(Deno.execPath(), {
      args: [...dispatcherCommand(), ...args],
      cwd: ROOT,
      env: { KUBECONFIG: opts.kubeconfig ?? cluster.kubeconfig, NO_COLOR: "1", ...opts.env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.kill("SIGKILL");
    }, opts.timeoutMs ?? 180_000);
    const stdout = new Response(child.stdout).text();
    const readErr = (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        this.#stderr += chunk;
        this.#waiters = this.#waiters.filter((w) => {
          if (!w.test(this.#stderr)) return true;
          w.resolve();
          return false;
        });
      }
    })();
    this.ended = (async () => {
      const [status] = await Promise.all([child.status, readErr]);
      clearTimeout(this.#timer);
      return {
        code: status.code,
        stdout: await stdout,
        stderr: this.#stderr,
        timedOut: this.#timedOut,
        ms: Date.now() - this.#started,
      };
    })();
  }

  /** What it wrote to stderr so far. */
  get stderr(): string {
    return this.#stderr;
  }

  /**
   * Resolves true once stderr matches `when` (a pattern, or a test of the
   * whole stderr so far), or false if the process ends first.
   */
  async waitFor(when: RegExp | ((stderr: string) => boolean)): Promise<boolean> {
    const test = when instanceof RegExp ? (s: string) => when.test(s) : when;
    if (test(this.#stderr)) return true;
    const matched = new Promise<boolean>((resolve) =>
      this.#waiters.push({ test, resolve: () => resolve(true) })
    );
    return await Promise.race([matched, this.ended.then(() => test(this.#stderr))]);
  }

  /** Sends `signal`; a process that already exited is left alone. */
  kill(signal: Deno.Signal): void {
    try {
      this.#child.kill(signal);
    } catch { /* already exited */ }
  }
}

/** Runs the dispatcher to its end, bounded by `timeoutMs`. */
export function runDispatcher(
  cluster: Pick<Cluster, "kubeconfig">,
  args: string[],
  opts: { kubeconfig?: string; timeoutMs?: number; env?: Record<string, string> } = {},
): Promise<Ended> {
  return new DispatcherProcess(cluster, args, opts).ended;
}

/** The error lines of a text log. */
export function errorLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => /^\d\d:\d\d:\d\d error: /.test(l));
}

/** The `failed node <name>: <reason>` lines of a summary, by node. */
export function failedNodes(stderr: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of stderr.matchAll(/failed node (\S+): (.*)/g)) out.set(m[1], m[2]);
  return out;
}

/** The number the dispatcher reports as `the API server throttled N requests (429)`, or 0. */
export function throttledCount(stderr: string): number {
  return Number(stderr.match(/the API server throttled (\d+) requests \(429\)/)?.[1] ?? 0);
}

/** A test of stderr: at least `n` lines match `re` (which must not be global). */
export function atLeast(n: number, re: RegExp): (stderr: string) => boolean {
  return (stderr) => stderr.split("\n").filter((l) => re.test(l)).length >= n;
}
