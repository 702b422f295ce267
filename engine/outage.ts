/**
 * When the API server is down, throttled or silent: whether starts are
 * paused, since when, and why. An outage is never a node's failure: a start
 * that meets one goes back to the queue, starts pause, and one probe start at
 * a time finds out when the API answers again.
 *
 * @module
 */

import { isRetryable } from "../kube/client.ts";
import { errorText } from "../base/errors.ts";

/** How the API failed, for the progress line: `API unreachable for 2m10s`. */
export type OutageWord = "unreachable" | "failing" | "throttling";

/** What the progress line says of an outage. */
export interface OutageView {
  /** How the API fails. */
  word: OutageWord;
  /** How long it has failed, in ms. */
  forMs: number;
  /** Whether starts are paused. */
  paused: boolean;
  /** The last error, or why the API is taken for silent. */
  detail: string;
}

/** A change the engine reports. */
export type OutageChange =
  | { state: "paused"; detail: string }
  | { state: "resumed"; detail: string };

/** How long after a failed probe the next start is tried while paused. */
export const PROBE_INTERVAL_MS = 5_000;

/**
 * How long every list, watch and request may stay without an answer before
 * the API counts as silent. A healthy API server ends each watch after its
 * `timeoutSeconds` (30 s), so a run hears from it at least that often.
 */
export const SILENT_MS = 40_000;

/**
 * Whether an error means the API, not the node, is in trouble: unreachable,
 * timed out, 5xx or 429, after the client's own retries.
 */
export function isOutage(e: unknown): boolean {
  return isRetryable(e);
}

function wordOf(e: unknown): OutageWord {
  const status = (e as { status?: number }).status ?? 0;
  return status === 429 ? "throttling" : status >= 500 ? "failing" : "unreachable";
}

/** Tracks one outage at a time; the engine asks it whether starts may go on. */
export class Outage {
  #since?: number;
  #word: OutageWord = "unreachable";
  #detail = "";
  #silence = false;
  #nextProbeAt = 0;
  #lastOkAt: number;

  /** @param now the clock time the run began */
  constructor(now: number) {
    this.#lastOkAt = now;
  }

  /** Whether starts are paused. */
  get paused(): boolean {
    return this.#since !== undefined;
  }

  /** When a request last succeeded (clock time). */
  get lastOkAt(): number {
    return this.#lastOkAt;
  }

  /** Whether a paused run may send its one probe start now. */
  mayProbe(now: number): boolean {
    return now >= this.#nextProbeAt;
  }

  /**
   * A request that began at `began` failed with `e`, an outage error.
   *
   * @returns the change to report when it begins an outage
   */
  fail(e: unknown, began: number, now: number): OutageChange | undefined {
    this.#nextProbeAt = now + PROBE_INTERVAL_MS;
    const detail = errorText(e);
    this.#word = wordOf(e);
    this.#detail = detail;
    this.#silence = false;
    if (this.#since !== undefined) return undefined;
    this.#since = Math.min(began, now);
    return { state: "paused", detail };
  }

  /** A request succeeded: the outage, if any, is over. */
  ok(now: number): OutageChange | undefined {
    this.#lastOkAt = now;
    return this.#end(now);
  }

  #end(now: number): OutageChange | undefined {
    if (this.#since === undefined) return undefined;
    const secs = Math.round((now - this.#since) / 1000);
    this.#since = undefined;
    this.#silence = false;
    return { state: "resumed", detail: `the API answers again after ${secs} s` };
  }

  /**
   * Judges silence from when the watch or a list last answered: silent past
   * `silentMs` begins an outage; an answer after a silence ends it.
   *
   * @param error the watch's last error, if it has one
   */
  observe(heardAt: number, now: number, silentMs: number, error: string): OutageChange | undefined {
    const last = Math.max(heardAt, this.#lastOkAt);
    if (this.#since !== undefined) {
      return this.#silence && heardAt > this.#since ? this.#end(now) : undefined;
    }
    if (now - last <= silentMs) return undefined;
    this.#since = last;
    this.#silence = true;
    this.#word = "unreachable";
    this.#detail = error ||
      `no answer to any watch, list or request for ${Math.round((now - last) / 1000)} s`;
    return { state: "paused", detail: this.#detail };
  }

  /** The outage as the progress line says it; undefined when there is none. */
  view(now: number): OutageView | undefined {
    if (this.#since === undefined) return undefined;
    return { word: this.#word, forMs: now - this.#since, paused: true, detail: this.#detail };
  }
}
