/**
 * A percentage of a node count, rounded down, computed exactly: the one rule
 * behind `--waves`, `--max-failures` and `--max-unavailable`.
 *
 * @module
 */

/**
 * `percent`% of `total`, rounded down, in integer arithmetic on the decimal
 * the percentage is written as. Down, as a Deployment rounds its
 * `maxUnavailable` (`GetScaledValueFromIntOrPercent(…, roundUp=false)`; a
 * DaemonSet's and a PodDisruptionBudget's round up): a wave, a failure
 * budget or an availability budget never exceeds its percentage. Kubernetes'
 * percentages are whole numbers, where floating point is exact; a fractional
 * one is not: `2.3 * 3000 / 100` is 68.99999999999999 in binary floating
 * point, which rounds down to 68, one node short of 2.3% of 3000 (69).
 *
 * A number is read as the shortest decimal that stands for it (`String(n)`),
 * which is the decimal a person typed whenever it has at most 15 significant
 * digits; `Number()` had already rounded any longer one.
 *
 * @param percent the percentage, as a decimal text (`"2.3"`) or its number
 * @param total the whole, a count of nodes
 * @returns the largest whole number not above `percent * total / 100`
 * @throws {RangeError} when `percent` is not a finite non-negative decimal or
 *   `total` not a non-negative whole number
 * @example
 * ```ts
 * percentOf("2.3", 3000); // 69
 * percentOf(25, 12); // 3
 * ```
 */
export function percentOf(percent: string | number, total: number): number {
  const text = String(percent).trim();
  const m = text.match(/^(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?$/i);
  if (!m || !Number.isSafeInteger(total) || total < 0) {
    throw new RangeError(
      `Cannot take ${text}% of ${total}: expected a non-negative decimal and a whole count`,
    );
  }
  const fraction = m[2] ?? "";
  // The percentage is digits / 10^scale: a whole number, scaled.
  const digits = BigInt(m[1] + fraction);
  const scale = fraction.length - Number(m[3] ?? 0);
  const [num, den] = scale >= 0
    ? [digits * BigInt(total), 100n * 10n ** BigInt(scale)]
    : [digits * BigInt(total) * 10n ** BigInt(-scale), 100n];
  return Number(num / den); // BigInt division of non-negatives rounds down
}
