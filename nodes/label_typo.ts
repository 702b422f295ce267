/**
 * Mistyped label selectors: when a selection matches no node, which of its
 * label keys no node carries at all, and the existing keys closest to each
 * (by edit distance), so that `--node-selector pol=gpu` is told "a typo?
 * closest: pool" rather than a calm "nothing to do".
 *
 * @module
 */

import type { V1ObjectMeta } from "@kubernetes/client-node";
import { type Kube, paths } from "../kube/client.ts";

/** A selector key no node carries, and the existing keys closest to it. */
export interface MissingKey {
  /** The key as the selector wrote it. */
  key: string;
  /** The nearest existing keys, nearest first; empty when none is near. */
  closest: string[];
}

/** How many closest keys are named: enough to show the intended one, short enough for one line. */
const CLOSEST = 3;

/**
 * The label keys of one label selector (`a=b,c in (d,e),!f,g` → a, c, f, g):
 * its requirements are separated by commas outside parentheses, and each
 * starts with its key, after a `!` for "has no such label".
 *
 * @example
 * ```ts
 * selectorKeys("pool in (a,b),!spot"); // ["pool", "spot"]
 * ```
 */
export function selectorKeys(selector: string): string[] {
  return requirements(selector).map((r) => r.key);
}

/** One requirement of a label selector: its key, and whether a node without the key satisfies it. */
interface Requirement {
  key: string;
  /** `!key`, `key!=v`, `key notin (…)`: true of a node without the label. */
  negated: boolean;
}

/** The requirements of a label selector, split at commas outside parentheses. */
function requirements(selector: string): Requirement[] {
  const out: Requirement[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i <= selector.length; i++) {
    const c = selector[i];
    if (c === "(") depth++;
    else if (c === ")") depth--;
    else if ((c === "," && depth === 0) || i === selector.length) {
      const text = selector.slice(start, i);
      const m = text.match(/^\s*(!?)\s*([A-Za-z0-9][\w.\/-]*)\s*(!=|notin\b)?/);
      if (m) out.push({ key: m[2], negated: Boolean(m[1] || m[3]) });
      start = i + 1;
    }
  }
  return out;
}

/**
 * Levenshtein distance: insertions, deletions and substitutions, each 1.
 *
 * @example
 * ```ts
 * editDistance("pol", "pool"); // 1
 * ```
 */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + cost);
    }
    row = next;
  }
  return row[b.length];
}

/**
 * The keys of the selectors' requirements that need a label (not `!key`,
 * `key!=v`, `key notin (…)`) that no node carries, each with the existing keys
 * nearest to it: within a third of the key's length (at least 2 edits), the
 * reach of a typo rather than another word, nearest first, then by name.
 *
 * @param selectors the label selectors as given
 * @param existing every label key the nodes carry
 * @example
 * ```ts
 * missingKeys(["pol=gpu"], new Set(["pool", "role", "zone"]));
 * // [{ key: "pol", closest: ["pool", "role"] }]
 * ```
 */
export function missingKeys(
  selectors: readonly string[],
  existing: ReadonlySet<string>,
): MissingKey[] {
  // Only a requirement that needs the label can be why nothing matched: a
  // node without the key satisfies !key, key!=v and key notin (…).
  const required = selectors.flatMap(requirements).filter((r) => !r.negated).map((r) => r.key);
  const keys = [...new Set(required)].filter((k) => !existing.has(k));
  return keys.map((key) => {
    const reach = Math.max(2, Math.floor(key.length / 3));
    const closest = [...existing]
      .map((k) => [k, editDistance(key, k)] as const)
      .filter(([, d]) => d <= reach)
      .sort(([a, da], [b, db]) => da - db || a.localeCompare(b))
      .slice(0, CLOSEST)
      .map(([k]) => k);
    return { key, closest };
  });
}

/**
 * Says, in words, the selector keys no node carries and the nearest ones:
 * `no node has the label key pol (a typo? closest: pool, role)`.
 *
 * @returns undefined when every key is carried by some node
 */
export function describeMissingKeys(missing: readonly MissingKey[]): string | undefined {
  if (!missing.length) return undefined;
  return missing.map(({ key, closest }) =>
    `no node has the label key ${key} (a typo? ${
      closest.length ? `closest: ${closest.join(", ")}` : "no key is close"
    })`
  ).join("; ");
}

/**
 * Lists the label keys of every node (their metadata only: a fraction of the
 * nodes' size) and names the selector keys none carries. Asked only when the
 * selection matched nothing, so a healthy run never pays for it; a LIST that
 * fails gives no hint rather than failing the run.
 */
export async function findMissingKeys(
  kube: Kube,
  selectors: readonly string[],
  pageSize: number,
): Promise<MissingKey[]> {
  if (!selectors.length) return [];
  try {
    const list = await kube.list<{ metadata?: V1ObjectMeta }, string[]>(
      paths.nodes(),
      {},
      pageSize,
      (n) => Object.keys(n.metadata?.labels ?? {}),
      undefined,
      "metadata",
    );
    return missingKeys(selectors, new Set(list.items.flat()));
  } catch {
    return [];
  }
}
