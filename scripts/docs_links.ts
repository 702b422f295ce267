/**
 * Reads the links and headings of a Markdown page, as GitHub renders them:
 * what `docs_links_test.ts` checks and `readme_map.ts` lists. No I/O.
 *
 * @module
 */

/** One relative link of a page: `[text](path#anchor)`. */
export interface Link {
  /** The target as written, for the error. */
  raw: string;
  /** The file part, relative to the page; empty for a link within the page. */
  path: string;
  /** The heading part, without `#`; empty when there is none. */
  anchor: string;
}

/** The lines of `text` outside fenced code blocks, with their 1-based numbers. */
export function prose(text: string): { line: string; at: number }[] {
  const out: { line: string; at: number }[] = [];
  let fenced = false;
  text.split("\n").forEach((line, i) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) out.push({ line, at: i + 1 });
  });
  return out;
}

/**
 * The relative links of a page, outside code blocks and code spans; links
 * with a scheme (`https:`, `mailto:`) are left out.
 *
 * @example
 * ```ts
 * links("see [x](docs/a.md#b)"); // [{ raw: "docs/a.md#b", path: "docs/a.md", anchor: "b" }]
 * ```
 */
export function links(text: string): Link[] {
  const out: Link[] = [];
  for (const { line } of prose(text)) {
    const bare = line.replace(/`[^`]*`/g, "");
    for (const m of bare.matchAll(/\]\(([^)\s]+)\)/g)) {
      const raw = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(raw)) continue;
      const [path, anchor = ""] = raw.split("#");
      out.push({ raw, path, anchor });
    }
  }
  return out;
}

/**
 * GitHub's anchor of a heading: lower case, punctuation but `-` and `_`
 * dropped, spaces to `-`.
 *
 * @example
 * ```ts
 * slug("The API client's bound"); // "the-api-clients-bound"
 * ```
 */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
}

/** The headings of a page (`#` to `######`, outside code blocks). */
export function headings(text: string): { level: number; text: string; at: number }[] {
  return prose(text).flatMap(({ line, at }) => {
    const m = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    return m ? [{ level: m[1].length, text: m[2], at }] : [];
  });
}

/** The anchors of a page's headings; a repeated heading gets `-1`, `-2`, as on GitHub. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const h of headings(text)) {
    const s = slug(h.text);
    const n = seen.get(s) ?? 0;
    out.add(n ? `${s}-${n}` : s);
    seen.set(s, n + 1);
  }
  return out;
}
