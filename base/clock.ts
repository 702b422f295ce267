/**
 * Time, injected: the engine and the informer read the clock and sleep only
 * through {@linkcode Clock}, so the unit tests run them on a virtual clock.
 *
 * @module
 */

/** Time, injected so that tests run on a fake clock. */
export interface Clock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Resolves after `ms`, or early when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * The real clock.
 *
 * @example
 * ```ts
 * await SYSTEM_CLOCK.sleep(10);
 * ```
 */
export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    }),
};
