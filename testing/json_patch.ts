/**
 * JSON Patch (RFC 6902) as the API server applies it, for the unit tests'
 * fake API servers: `add` of a member that exists REPLACES it (a map
 * included, with every key in it), an `add` into a missing parent and a
 * failed `test` throw (the API server's 422), and a `remove` of a missing
 * member throws.
 *
 * @module
 */

/** One operation of a JSON Patch. */
export interface PatchOp {
  /** `test`, `add`, `replace` or `remove`. */
  op: string;
  /** The RFC 6901 pointer. */
  path: string;
  /** The value of a `test`, `add` or `replace`. */
  value?: unknown;
}

/**
 * Applies `ops` to a copy of `doc`, all or nothing.
 *
 * @throws {Error} naming the failed operation, as the API server's 422
 */
export function applyJsonPatch<T>(doc: T, ops: PatchOp[]): T {
  const copy = structuredClone(doc) as Record<string, unknown>;
  for (const { op, path, value } of ops) {
    const keys = path.split("/").slice(1).map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~"));
    const last = keys.pop()!;
    let parent = copy;
    for (const k of keys) {
      if (typeof parent[k] !== "object" || parent[k] === null) throw new Error(`missing ${path}`);
      parent = parent[k] as Record<string, unknown>;
    }
    if (op === "test") {
      if (JSON.stringify(parent[last]) !== JSON.stringify(value)) throw new Error(`test ${path}`);
    } else if (op === "add") parent[last] = structuredClone(value);
    else if (op === "replace" || op === "remove") {
      if (!(last in parent)) throw new Error(`missing ${path}`);
      if (op === "remove") delete parent[last];
      else parent[last] = structuredClone(value);
    } else throw new Error(`unknown op ${op}`);
  }
  return copy as T;
}
