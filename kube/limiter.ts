/**
 * The client-side bound on API requests: at most `concurrency` in flight and
 * a token bucket of `qps` tokens a second holding up to `burst`, as
 * client-go's `flowcontrol.NewTokenBucketRateLimiter` does for every
 * request of a client. Waiters are served first come, first served, so a
 * storm of deletions cannot starve the create that frees a slot.
 *
 * Pure apart from its clock, which tests replace with a fake one.
 *
 * @module
 */

/**
 * The shortest wait for tokens while the bucket is empty: the tokens of that
 * time then go out together. Each wake of the process costs CPU of its own
 * (Deno's event loop, caches cold after the idle gap: ~0.3 ms on a loaded
 * 2-core machine), and one wake per token at 50 qps tripled a rate-limited
 * run's CPU per node (4.4 -> 1.5 ms on the stand-in server with the limit
 * off; 3.0 with this). Never longer than the bucket takes to fill, so that
 * the rate and the burst are unchanged; a queued request
 * waits at most this much longer than a token at a time would make it wait.
 */
export const MIN_WAKE_MS = 100;

/** Time as the limiter sees it. */
export interface Clock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Calls `fn` once after `ms`; returns a way to cancel it. */
  after(ms: number, fn: () => void): () => void;
}

/** The real clock. */
export const SYSTEM_CLOCK: Clock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/** How many requests may run and how fast they may start. */
export interface LimiterOptions {
  /** Most requests in flight at once. @default 16 */
  concurrency: number;
  /** Tokens added per second; 0 turns the rate limit off. @default 50 */
  qps: number;
  /** Most tokens the bucket holds, i.e. requests that may start at once after a pause. @default 300 */
  burst: number;
  /** The clock; tests pass a fake one. */
  clock?: Clock;
}

/** What a request gets once it may start: call `release` when it is done. */
export type Release = () => void;

/** A snapshot of the limiter, for tests and progress lines. */
export interface LimiterState {
  /** Requests holding a slot. */
  inFlight: number;
  /** Requests waiting for a slot or a token. */
  waiting: number;
  /** Tokens in the bucket (fractional), as of the last update. */
  tokens: number;
}

interface Waiter {
  slot: boolean;
  resolve: (release: Release) => void;
}

/**
 * A FIFO concurrency bound with a token bucket in front of it.
 *
 * @example
 * ```ts
 * const limiter = new Limiter({ concurrency: 16, qps: 50, burst: 300 });
 * const release = await limiter.acquire();
 * try {
 *   // send the request and read its answer
 * } finally {
 *   release();
 * }
 * ```
 */
export class Limiter {
  readonly #concurrency: number;
  #qps: number;
  readonly #burst: number;
  readonly #clock: Clock;
  #tokens: number;
  #last: number;
  #inFlight = 0;
  #queue: Waiter[] = [];
  #timer?: () => void;

  /** @throws {RangeError} when a bound is not a positive number */
  constructor(opts: LimiterOptions) {
    if (!(opts.concurrency >= 1) || !(opts.burst >= 1) || !(opts.qps >= 0)) {
      throw new RangeError(
        `Cannot build a request limiter: concurrency ${opts.concurrency} and burst ${opts.burst} ` +
          `must be at least 1, qps ${opts.qps} at least 0`,
      );
    }
    this.#concurrency = Math.floor(opts.concurrency);
    this.#qps = opts.qps;
    this.#burst = opts.burst;
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
    // A fresh client may send a whole burst at once, as client-go's bucket does.
    this.#tokens = opts.burst;
    this.#last = this.#clock.now();
  }

  /** Where the limiter stands now. */
  get state(): LimiterState {
    this.#refill();
    return { inFlight: this.#inFlight, waiting: this.#queue.length, tokens: this.#tokens };
  }

  /**
   * Waits for a token and a slot, in arrival order.
   *
   * @returns a function to call exactly once when the request is done; it frees the slot
   */
  acquire(): Promise<Release> {
    return this.#enqueue(true);
  }

  /**
   * Waits for a token only: for watches, which stay open for minutes and so
   * must not hold one of the few request slots, but whose (re)opening is a
   * request like any other.
   */
  async admit(): Promise<void> {
    await this.#enqueue(false);
  }

  /**
   * Turns the rate limit off for good, keeping the concurrency bound: for a
   * stopping run, whose queued requests must drain before the kubelet's
   * grace period ends rather than at `qps` a second.
   */
  lift(): void {
    this.#qps = 0;
    this.#timer?.();
    this.#timer = undefined;
    this.#pump();
  }

  #enqueue(slot: boolean): Promise<Release> {
    return new Promise((resolve) => {
      this.#queue.push({ slot, resolve });
      this.#pump();
    });
  }

  #refill(): void {
    const now = this.#clock.now();
    if (this.#qps > 0) {
      this.#tokens = Math.min(this.#burst, this.#tokens + (now - this.#last) * this.#qps / 1000);
    }
    this.#last = now;
  }

  #pump(): void {
    this.#refill();
    while (this.#queue.length) {
      const head = this.#queue[0];
      // First come, first served: a waiter behind a blocked head waits too,
      // even if it needs no slot, so nobody is overtaken.
      if (head.slot && this.#inFlight >= this.#concurrency) return;
      if (this.#qps > 0 && this.#tokens < 1) {
        // No longer than the bucket takes to fill: tokens past the burst
        // are lost, and a wait past that (--kube-api-burst 1 at 50 qps)
        // would lower the rate to a bucketful per wake.
        const full = Math.floor((this.#burst - this.#tokens) * 1000 / this.#qps);
        const next = Math.ceil((1 - this.#tokens) * 1000 / this.#qps);
        this.#wake(Math.max(next, Math.min(MIN_WAKE_MS, full)));
        return;
      }
      this.#queue.shift();
      if (this.#qps > 0) this.#tokens -= 1;
      if (!head.slot) {
        head.resolve(() => {});
        continue;
      }
      this.#inFlight++;
      let released = false;
      head.resolve(() => {
        if (released) return;
        released = true;
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /** One timer at a time, for the head of the queue's next token. */
  #wake(ms: number): void {
    if (this.#timer) return;
    this.#timer = this.#clock.after(ms, () => {
      this.#timer = undefined;
      this.#pump();
    });
  }
}
