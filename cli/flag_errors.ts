/**
 * What a user typed wrong on the command line, said as kubectl users expect:
 * one line that names the flag and the fix. `node:util`'s parseArgs refuses
 * the input; this module turns its words into ours, and accepts the
 * `--switch=true|false` form that pflag (kubectl, helm) accepts.
 *
 * @module
 */

/** A flag as parseArgs declares it; only its type matters here. */
export interface FlagSpec {
  /** `boolean` for a switch, `string` for a flag with a value. */
  type: "boolean" | "string";
  /** The one-letter form, if any. */
  short?: string;
}

/**
 * Rewrites `--switch=true` as `--switch` and drops `--switch=false`, as pflag
 * does for every boolean flag (`kubectl drain --ignore-daemonsets=true`);
 * any other value is left for parseArgs to refuse.
 *
 * @example
 * ```ts
 * switchValues(["--cordon=true", "--drain=false"], { cordon: { type: "boolean" }, drain: { type: "boolean" } });
 * // ["--cordon"]
 * ```
 */
export function switchValues(argv: string[], flags: Record<string, FlagSpec>): string[] {
  const out: string[] = [];
  for (const [i, arg] of argv.entries()) {
    // After "--" everything is a positional argument, left as it is.
    if (arg === "--") return [...out, ...argv.slice(i)];
    const m = arg.match(/^--([a-z0-9-]+)=(true|false)$/);
    if (m && flags[m[1]]?.type === "boolean") {
      if (m[2] === "true") out.push(`--${m[1]}`);
      continue;
    }
    out.push(arg);
  }
  return out;
}

/**
 * How a flag's value is written in the manual (`--parallelism N`,
 * `--dry-run=client|server`), or undefined when the manual does not say.
 */
function usageOf(flag: string, help: string): string | undefined {
  // Only where the manual defines the flag, at the start of its line: the
  // prose mentions flags too ("with --parallelism the smaller bound wins").
  // Two flags may share a definition line: "--instance-label-prefix P --multi-install-suffix S".
  const m = help.match(
    new RegExp(`^ {2}(?:-\\w, )?(?:--[a-z-]+ \\S+ )?(--${flag})([ =])(\\S+)`, "m"),
  );
  return m ? `${m[1]}${m[2]}${m[3]}` : undefined;
}

/** Levenshtein distance, for "did you mean". */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

/**
 * The known flag closest to a mistyped one: within a third of its length in
 * edits (cobra suggests at distance 2; long flag names deserve a little
 * more), or the only flag it is a prefix of.
 */
export function closestFlag(typed: string, names: readonly string[]): string | undefined {
  const prefixed = names.filter((n) => n.startsWith(typed));
  if (prefixed.length === 1) return prefixed[0];
  let best: string | undefined;
  let bestD = Math.max(2, Math.floor(typed.length / 3)) + 1;
  for (const n of names) {
    const d = distance(typed, n);
    if (d < bestD) [best, bestD] = [n, d];
  }
  return best;
}

/** What {@linkcode describeFlagError} needs to know. */
export interface FlagErrorContext {
  /** The arguments as given. */
  argv: readonly string[];
  /** Every flag, by long name. */
  flags: Record<string, FlagSpec>;
  /** The manual, where each flag's value is spelled. */
  help: string;
}

/**
 * One line for a parseArgs refusal, naming the input and the fix.
 *
 * @param message parseArgs' error message
 * @returns the line, or parseArgs' own first line when it is not one of ours
 * @example
 * ```ts
 * describeFlagError("Unknown option '--paralelism'", {
 *   argv: ["--paralelism", "3"],
 *   flags: { parallelism: { type: "string" } },
 *   help: "--parallelism N",
 * });
 * // "Unknown flag --paralelism: did you mean --parallelism?"
 * ```
 */
export function describeFlagError(message: string, ctx: FlagErrorContext): string {
  const unknown = message.match(/^Unknown option '(-{1,2})([^']*)'/);
  if (unknown) {
    const [, dashes, name] = unknown;
    const near = dashes === "--" ? closestFlag(name, Object.keys(ctx.flags)) : undefined;
    return `Unknown flag ${dashes}${name}` +
      (near ? `: did you mean --${near}?` : ": it is not a flag of job-dispatcher");
  }
  const missing = message.match(/^Option '(?:-\w, )?--([a-z0-9-]+) <value>' argument missing/);
  if (missing) {
    const usage = usageOf(missing[1], ctx.help);
    return `Missing value of --${missing[1]}` + (usage ? `: write ${usage}` : ": give it one");
  }
  const valued = message.match(/^Option '(?:-\w, )?--([a-z0-9-]+)' does not take an argument/);
  if (valued) {
    const flag = valued[1];
    const given = ctx.argv.find((a) => a.startsWith(`--${flag}=`)) ?? `--${flag}=…`;
    return `Invalid ${given}: --${flag} is a switch; write --${flag} (or --${flag}=false)`;
  }
  const positional = message.match(/^Unexpected argument '([^']*)'/);
  if (positional) {
    const at = ctx.argv.indexOf(positional[1]);
    const before = at > 0 ? ` (after ${ctx.argv.slice(Math.max(0, at - 2), at).join(" ")})` : "";
    return `Invalid argument ${JSON.stringify(positional[1])}${before}: ` +
      "job-dispatcher takes flags only; quote a value that has spaces, and write a list as a,b";
  }
  return message.replace(/\. To specify a positional argument.*$/s, "").split("\n")[0];
}
