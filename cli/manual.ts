/**
 * The manuals (`--help`, `status --help`, ...) read back as data: their
 * sections, the flags each section defines and the values a flag takes.
 * `help TOPIC`, the flag reference (docs/flags.md) and the shell completion
 * all come from here, so none of them can say what `--help` does not.
 *
 * @module
 */

/** One section of a manual: its heading line and everything up to the next heading. */
export interface Section {
  /** The heading's capitalised words, e.g. "HEALTH GATES" ("" for the text before the first). */
  name: string;
  /** The topic `help TOPIC` knows it by: the name in lower case, spaces as "-". */
  topic: string;
  /** The section as the manual prints it, heading included, without trailing blank lines. */
  text: string;
}

/** One flag as a manual defines it, at the start of its line. */
export interface FlagEntry {
  /** The long name without dashes, e.g. "dry-run". */
  name: string;
  /** The one-letter form without its dash, when the manual gives one. */
  short?: string;
  /** The value as the manual writes it ("N", "client|server|plan"); undefined for a switch. */
  value?: string;
  /** The flag as the manual writes it: "-o, --output text|json", "--dry-run=client|server|plan". */
  written: string;
}

// A heading starts at column 0 with two or more capitals ("EXIT CODES",
// "NODE VERIFICATION (after ..."), or names a file ("FLEET.yaml").
const HEADING = /^([A-Z][A-Z]+(?: [A-Z][A-Z]+)*(?:\.[a-z]+)?)(?=[\s(]|$)/;

/**
 * Splits a manual into its sections, in order.
 *
 * @example
 * ```ts
 * manualSections("tool: x\n\nFLAGS\n  --a  A.\n").map((s) => s.topic); // ["", "flags"]
 * ```
 */
export function manualSections(help: string): Section[] {
  const out: Section[] = [];
  let current = { name: "", lines: [] as string[] };
  const close = () => {
    const text = current.lines.join("\n").replace(/\s+$/, "");
    if (text) out.push({ name: current.name, topic: topicOf(current.name), text });
  };
  for (const line of help.split("\n")) {
    const m = line.match(HEADING);
    if (m) {
      close();
      current = { name: m[1], lines: [] };
    }
    current.lines.push(line);
  }
  close();
  return out;
}

function topicOf(name: string): string {
  return name.toLowerCase().replaceAll(" ", "-");
}

/**
 * The flags a manual's text defines: each line that starts (after two
 * spaces) with a flag, and the further flags on the same head
 * ("--instance-label-prefix P --multi-install-suffix S").
 *
 * @example
 * ```ts
 * flagEntries("  -o, --output text|json   How.\n  --drain     Evict.");
 * // [{ name: "output", short: "o", value: "text|json", written: "-o, --output text|json" },
 * //  { name: "drain", short: undefined, value: undefined, written: "--drain" }]
 * ```
 */
export function flagEntries(text: string): FlagEntry[] {
  const out: FlagEntry[] = [];
  for (const line of text.split("\n")) {
    if (!/^ {2}-/.test(line)) continue;
    const head = definition(line);
    for (const entry of head ?? []) {
      if (!out.some((e) => e.name === entry.name)) out.push(entry);
    }
  }
  return out;
}

/** The description column of the manuals: text from here on describes, it defines nothing. */
const DESCRIPTION_COLUMN = 28;

// How a manual writes a value: PATH, N|P%, a,b,..., k=v, key[:effect],...
const PLACEHOLDER = /^([A-Z][A-Z0-9:_.%=]*|\S*[|,=[]\S*)$/;

/**
 * The flags a line defines, or undefined when the line is prose that
 * starts with a flag ("  --pause-file the fleet latches it").
 */
function definition(line: string): FlagEntry[] | undefined {
  const out: FlagEntry[] = [];
  const words = [...line.matchAll(/\S+/g)];
  let short: string | undefined;
  for (let i = 0; i < words.length; i++) {
    const [w] = words[i];
    const s = w.match(/^-([a-zA-Z]),$/);
    const f = w.match(/^--([a-z][a-z-]*[a-z])(?:=(\S+))?$/);
    if (s) short = s[1];
    else if (f) {
      const next = words[i + 1];
      const gap = next ? next.index - (words[i].index + w.length) : 0;
      const takes = !f[2] && next && gap === 1 && PLACEHOLDER.test(next[0]);
      const value = f[2] ?? (takes ? next[0] : undefined);
      if (takes) i++;
      const written = `${short ? `-${short}, ` : ""}${w}${takes ? ` ${value}` : ""}`;
      out.push({ name: f[1], short, value, written });
      short = undefined;
    } else {
      // A word after a flag starts its description when it stands in the
      // description column or after a gap; else the line is prose.
      const before = line.slice(0, words[i].index);
      const described = words[i].index >= DESCRIPTION_COLUMN || before.endsWith("  ");
      return out.length && described ? out : undefined;
    }
  }
  return out;
}

/**
 * The values a flag takes when the manual lists them (`text|json`), else
 * undefined (a free value: a number, a path, a selector).
 *
 * @example
 * ```ts
 * enumerated("client|server|plan"); // ["client", "server", "plan"]
 * enumerated("N|P%"); // undefined
 * ```
 */
export function enumerated(value: string | undefined): string[] | undefined {
  if (!value?.includes("|")) return undefined;
  const words = value.split("|");
  // "N|P%" and "wide|json" differ: literal values are lower-case words.
  return words.every((w) => /^[a-z][a-zA-Z-]*$/.test(w)) ? words : undefined;
}
