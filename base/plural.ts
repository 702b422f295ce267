/**
 * A count and its noun: the one place that makes "1 node" singular, so that
 * no message says "1 nodes".
 *
 * @module
 */

/**
 * A count and its noun, singular for one: `1 node`, `6 nodes`. The plural is
 * the noun with `s`, or `plural` where English says otherwise.
 *
 * @example
 * ```ts
 * counted(1, "node"); // "1 node"
 * counted(2, "Job still runs", "Jobs still run"); // "2 Jobs still run"
 * ```
 */
export function counted(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}
