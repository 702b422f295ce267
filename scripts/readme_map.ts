/**
 * Where each section of an earlier README went: lists every heading of the
 * README at a commit (default ad881e3, the last one-file README) with the
 * page and heading that now hold its lines, and how many of its lines were
 * found there. A section whose lines are not all found somewhere is named
 * with the lines that are missing, and the script exits 1: nothing of the
 * old README may be lost in the split into docs/ (issue 28).
 *
 * Usage: `deno run --allow-read --allow-run=git scripts/readme_map.ts [COMMIT] [--missing]`
 *
 * @module
 */
import { headings } from "./docs_links.ts";

/** One section of the old README: its heading and the lines of its body. */
export interface Section {
  /** The heading's text, with its `#`s. */
  heading: string;
  /** Its line in the old README. */
  at: number;
  /** The body's lines, normalised, that are worth finding (not blank, not a table rule). */
  lines: string[];
}

/** Where a section went. */
export interface Destination {
  /** The section. */
  section: Section;
  /** The page and heading holding most of its lines (`docs/x.md § Heading`), or "" if none. */
  where: string;
  /** Other pages and headings holding some of its lines. */
  also: string[];
  /** Its lines found in some page. */
  found: number;
  /** Its lines found nowhere. */
  missing: string[];
}

/**
 * Whitespace collapsed, so that a table re-padded by `deno fmt` still
 * matches, and link targets dropped, since a moved section's links point to
 * its new neighbours (`(#rbac)` became `(security.md#rbac)`).
 *
 * @example
 * ```ts
 * normal("  see [RBAC](#rbac)  now"); // "see [RBAC]() now"
 * ```
 */
export function normal(line: string): string {
  return line.trim().replace(/\s+/g, " ").replace(/\]\([^)]*\)/g, "]()");
}

/** A line that says nothing by itself: blank, a table rule, a fence. */
function trivial(line: string): boolean {
  return line === "" || /^\|?[\s|:-]+\|?$/.test(line) || /^```/.test(line);
}

/**
 * The sections of a README, split at its headings (outside code blocks); the
 * text before the first heading belongs to none.
 *
 * @example
 * ```ts
 * sections("# A\none\n## B\ntwo").map((s) => s.heading); // ["# A", "## B"]
 * ```
 */
export function sections(text: string): Section[] {
  const heads = headings(text);
  const all = text.split("\n");
  return heads.map((h, i) => {
    const end = i + 1 < heads.length ? heads[i + 1].at - 1 : all.length;
    const lines = all.slice(h.at, end).map(normal).filter((l) => !trivial(l));
    return { heading: `${"#".repeat(h.level)} ${h.text}`, at: h.at, lines };
  });
}

/**
 * Every line of the given pages, normalised, with the page and the heading
 * above it (`docs/x.md § Heading`).
 */
export function index(pages: Record<string, string>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, text] of Object.entries(pages)) {
    const heads = headings(text);
    const under = (at: number) => heads.filter((h) => h.at <= at).at(-1)?.text;
    text.split("\n").forEach((raw, i) => {
      const line = normal(raw);
      if (trivial(line)) return;
      // A code block's lines count too: an example moves with its section.
      const head = under(i + 1);
      const where = head ? `${name} § ${head}` : name;
      out.set(line, [...(out.get(line) ?? []), where]);
    });
  }
  return out;
}

/** Where each section's lines are now: the place holding most of them, and the rest. */
export function destinations(
  old: Section[],
  now: Map<string, string[]>,
  heads: string[] = [],
): Destination[] {
  return old.map((section) => {
    // A heading with no body of its own (its subsections hold the text) went
    // where a heading of the same words is now.
    const bare = section.heading.replace(/^#+ /, "");
    const same = heads.find((h) => h.endsWith(` § ${bare}`));
    if (!section.lines.length && same) {
      return { section, where: same, also: [], found: 0, missing: [] };
    }
    const votes = new Map<string, number>();
    const missing: string[] = [];
    for (const line of section.lines) {
      const places = now.get(line);
      if (!places) missing.push(line);
      else for (const p of new Set(places)) votes.set(p, (votes.get(p) ?? 0) + 1);
    }
    const ranked = [...votes].sort((a, b) => b[1] - a[1]).map(([p]) => p);
    return {
      section,
      where: ranked[0] ?? "",
      also: ranked.slice(1, 3),
      found: section.lines.length - missing.length,
      missing,
    };
  });
}

async function git(...args: string[]): Promise<string> {
  const out = await new Deno.Command("git", { args, stdout: "piped", stderr: "inherit" }).output();
  if (!out.success) throw new Error(`Cannot run git ${args.join(" ")}: exit ${out.code}`);
  return new TextDecoder().decode(out.stdout);
}

async function main(args: string[]): Promise<number> {
  const commit = args.find((a) => !a.startsWith("--")) ?? "ad881e3";
  const root = new URL("..", import.meta.url).pathname;
  const pages: Record<string, string> = {
    "README.md": await Deno.readTextFile(`${root}README.md`),
  };
  for (const e of [...Deno.readDirSync(`${root}docs`)].sort((a, b) => a.name < b.name ? -1 : 1)) {
    if (e.name.endsWith(".md")) {
      pages[`docs/${e.name}`] = await Deno.readTextFile(`${root}docs/${e.name}`);
    }
  }
  const old = sections(await git("-C", root, "show", `${commit}:README.md`));
  const heads = Object.entries(pages).flatMap(([name, text]) =>
    headings(text).map((h) => `${name} § ${h.text}`)
  );
  const map = destinations(old, index(pages), heads);
  for (const d of map) {
    const count = `${d.found}/${d.section.lines.length} lines`;
    const also = d.also.length ? `; also ${d.also.join(", ")}` : "";
    console.log(
      `${d.section.at}\t${d.section.heading}\t→ ${d.where || "(nowhere)"} (${count}${also})`,
    );
    if (args.includes("--missing")) { for (const m of d.missing) console.log(`\t  missing: ${m}`); }
  }
  const lost = map.filter((d) => d.missing.length);
  const total = map.reduce((n, d) => n + d.section.lines.length, 0);
  const found = map.reduce((n, d) => n + d.found, 0);
  console.log(`${map.length} headings of ${commit}:README.md; ${found}/${total} lines found`);
  return lost.length ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
