/**
 * The logger as the folders below `report/` see it: two methods, so that a
 * node writer or a drain can say what it does without knowing how lines are
 * formatted. `report/log.ts`'s `Logger` is the one implementation.
 *
 * @module
 */

/** Where a module below the logger writes its lines. */
export interface Log {
  /** An ordinary line, with fields for the JSON log. */
  info(msg: string, fields?: Record<string, unknown>): void;
  /** A line the user should look at; the run goes on. */
  warn(msg: string, fields?: Record<string, unknown>): void;
}
