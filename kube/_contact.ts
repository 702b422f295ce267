/**
 * Two bounds of the API client that depend on whether the API server has
 * answered: the wait before its first answer (`--api-wait-secs`), said at
 * once rather than spent in silence, and the shutdown, which waits for an API
 * server only while it answers. Only `client.ts` uses them.
 *
 * @module
 */

/** What the first failed contact with an API server that never answered tells. */
export interface UnreachableNote {
  /** The API server's URL. */
  server: string;
  /** Why it did not answer, e.g. `tcp connect error: Connection refused (os error 111)`. */
  detail: string;
  /** Until when (epoch ms) requests are retried before the run gives up. */
  until: number;
}

/**
 * Whether the API server has answered yet, and how long requests may be
 * retried until it does. kubectl fails at once when nothing answers; a hook
 * may rightly wait out a restarting API server, but says so on its first
 * failure, naming the address and the deadline.
 */
export class Contact {
  #server: string;
  #waitMs: number;
  #onUnreachable?: (note: UnreachableNote) => void;
  #answered = false;
  #first?: number;
  #said = false;
  /** When the API server last answered (epoch ms), 0 before it ever did. */
  lastAnswerAt = 0;

  /**
   * @param waitMs how long requests are retried before the first answer
   * @param onUnreachable told once, on the first failure that will be retried
   */
  constructor(server: string, waitMs: number, onUnreachable?: (note: UnreachableNote) => void) {
    this.#server = server;
    this.#waitMs = waitMs;
    this.#onUnreachable = onUnreachable;
  }

  /** A request begins; returns its start. The first one starts the wait for an answer. */
  began(): number {
    const now = Date.now();
    this.#first ??= now;
    return now;
  }

  /** The API server answered (any status). */
  answered(): void {
    this.#answered = true;
    this.lastAnswerAt = Date.now();
  }

  /**
   * Until when a request begun at `started` may be retried: its own budget
   * once the server has answered; before that, the wait for a first answer,
   * counted from the first request, whatever the budget.
   */
  deadline(started: number, budgetMs: number): number {
    return this.#answered ? started + budgetMs : (this.#first ?? started) + this.#waitMs;
  }

  /**
   * A request failed and will be retried until `until`: on the first failure
   * before any answer, says what does not answer and until when.
   */
  failed(err: { status: number; message: string }, until: number): void {
    if (this.#answered || this.#said || err.status !== 0) return;
    this.#said = true;
    this.#onUnreachable?.({ server: this.#server, detail: detailOf(err.message), until });
  }
}

/**
 * The part of a status-0 error that says why: `tcp connect error: Connection
 * refused (os error 111)` of `Cannot create selfsubjectreviews:
 * https://h:1 unreachable: client error (Connect): tcp connect error: …`.
 *
 * @example
 * ```ts
 * detailOf("Cannot get nodes: https://h:1 unreachable: client error (Connect): tcp connect error: refused");
 * // "tcp connect error: refused"
 * ```
 */
export function detailOf(message: string): string {
  return message
    .replace(/^Cannot \S+ \S+: /, "")
    .replace(/^\S+ unreachable: /, "")
    .replace(/^client error \(Connect\): /, "");
}

/**
 * The shutdown's bound on requests: once the run stops, a request is cut
 * when the API server has been silent for `graceMs` (since the stop, or its
 * last answer if later). While it answers, the shutdown's requests (the
 * summary's records, the owner guard) go on as before; a frozen server holds
 * them `graceMs` at most, all at once and in parallel, not one request
 * timeout after another past the kubelet's grace period.
 */
export class ShutdownCut {
  #cut = new AbortController();
  #timer?: ReturnType<typeof setTimeout>;
  #graceMs: number;
  #lastAnswerAt: () => number;

  /** @param lastAnswerAt when the API server last answered (epoch ms) */
  constructor(stop: AbortSignal | undefined, graceMs: number, lastAnswerAt: () => number) {
    this.#graceMs = graceMs;
    this.#lastAnswerAt = lastAnswerAt;
    if (stop?.aborted) this.#arm(Date.now());
    else stop?.addEventListener("abort", () => this.#arm(Date.now()), { once: true });
  }

  /** Aborted (a TimeoutError) once the stopped run's API server has been silent for the grace. */
  get signal(): AbortSignal {
    return this.#cut.signal;
  }

  #arm(stoppedAt: number): void {
    const check = () => {
      const silentSince = Math.max(stoppedAt, this.#lastAnswerAt());
      const left = silentSince + this.#graceMs - Date.now();
      if (left > 0) {
        this.#timer = setTimeout(check, left);
        return;
      }
      this.#timer = undefined;
      this.#cut.abort(new DOMException("Signal timed out.", "TimeoutError"));
    };
    check();
  }

  /** Clears the timer. */
  close(): void {
    clearTimeout(this.#timer);
  }
}
