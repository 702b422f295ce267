/**
 * **base/** owns what every folder may use: the clock, error text and the
 * logger's two-method face. It imports nothing of the house.
 *
 * Error helpers every folder uses; they live at the bottom of the house so
 * that the engine and the client need not import the logger above them.
 *
 * @module
 */

/**
 * The message of anything thrown, for a log line: an Error's message, else
 * the value as text.
 *
 * @example
 * ```ts
 * errorText(new Error("connection refused")); // "connection refused"
 * errorText(42); // "42"
 * ```
 */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
