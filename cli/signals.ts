/**
 * The CLI process's signals: SIGINT and SIGTERM stop a run, and decide its
 * exit code, until the run's outcome is settled.
 *
 * @module
 */

import type { Logger } from "../report/log.ts";
import { EXIT } from "../run/run.ts";

/**
 * SIGINT and SIGTERM while the CLI runs: the first one stops new Jobs (the
 * created ones run on; a re-run adopts them) and decides the exit code.
 * Once the run's outcome is settled ({@linkcode StopSignals.settle}: only
 * `--metrics-linger-secs` is left), a signal ends the linger and the run's
 * exit code stands: Kubernetes sends SIGTERM to a pod being deleted, and a
 * rollout that had ended is not a rollout stopped.
 */
export class StopSignals {
  /** Aborted by the first signal. */
  readonly controller: AbortController = new AbortController();
  /** The exit code the signal asks for (130 or 143), once one stopped the run. */
  exitCode: number = EXIT.ok;
  /** The logger in use: replaced once the options say which format. */
  log: Logger;
  #stopped = false;
  #settled = false;
  #handlers = {
    SIGINT: () => this.#received("SIGINT"),
    SIGTERM: () => this.#received("SIGTERM"),
  };

  /** @param log where the signal is said */
  constructor(log: Logger) {
    this.log = log;
    Deno.addSignalListener("SIGINT", this.#handlers.SIGINT);
    Deno.addSignalListener("SIGTERM", this.#handlers.SIGTERM);
  }

  /** Whether a signal stopped the run (before its outcome was settled). */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** The run's outcome is settled: a signal from now on only ends the metrics' linger. */
  settle(): void {
    this.#settled = true;
  }

  /** The process's exit code for a run that returned `code`. */
  exitFor(code: number): number {
    return this.stopped ? this.exitCode : code;
  }

  #received(sig: "SIGINT" | "SIGTERM"): void {
    if (this.controller.signal.aborted) return;
    if (this.#settled) {
      this.log.warn(`${sig}: the run has ended; closing /metrics, the exit code stays the run's`);
    } else {
      this.#stopped = true;
      this.exitCode = sig === "SIGINT" ? EXIT.sigint : EXIT.sigterm;
      this.log.warn(`${sig}: creating no more Jobs; created ones run on, a re-run adopts them`);
    }
    this.controller.abort();
  }

  /** Stops listening. */
  close(): void {
    Deno.removeSignalListener("SIGINT", this.#handlers.SIGINT);
    Deno.removeSignalListener("SIGTERM", this.#handlers.SIGTERM);
  }
}
