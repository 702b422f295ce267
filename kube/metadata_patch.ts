/**
 * The one way to set or remove keys under an object's labels or
 * annotations with a JSON Patch, without ever replacing the map.
 *
 * An `add` of `/metadata/annotations` where the map exists REPLACES it with
 * every key in it (RFC 6902 4.1), and whether an object has the map is only
 * known as of a read: a node selected without annotations may carry the
 * run's own cordon record by the time its outcome is marked, and a 422
 * ("no map") may be followed by another writer's map before the retry. So
 * the ops assume the map exists (every kubelet's node, every Helm hook Job
 * has one); only a read that shows none makes it, and that patch tests the
 * resourceVersion it read, so a map made meanwhile fails the test instead of
 * being replaced.
 *
 * Not a merge patch: every write here tests the object's UID (a node or
 * owner replaced under its name is refused), a `test` JSON Patch has and a
 * merge patch has not.
 *
 * @module
 */

import { ApiError, type Kube } from "./client.ts";

/** Escapes a map key for a JSON Patch path (RFC 6901). */
export function pointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** A metadata map. */
export type MetadataMap = "labels" | "annotations";

/** One key to set (a string) or remove (`null`) under a metadata map. */
export interface MapWrite {
  /** The map. */
  map: MetadataMap;
  /** The key. */
  key: string;
  /** The value; `null` removes the key (no error when it is missing). */
  value: string | null;
}

/** What {@linkcode mapWriteOps} needs of a read: its version and which maps it has. */
export interface ReadMeta {
  metadata?: {
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

/**
 * The JSON Patch ops that carry out `writes`. Without `read` they assume
 * every map written into exists (a 422 when one does not). With `read`, a
 * map it lacks is made with the keys set, after a `test` of its
 * resourceVersion: made since, it fails the test rather than be replaced.
 *
 * @example
 * ```ts
 * mapWriteOps([{ map: "labels", key: "a/b", value: "1" }]);
 * // [{ op: "add", path: "/metadata/labels/a~1b", value: "1" }]
 * ```
 */
export function mapWriteOps(writes: MapWrite[], read?: ReadMeta): unknown[] {
  const ops: unknown[] = [];
  const made = new Map<MetadataMap, Record<string, string>>();
  for (const w of writes) {
    if (read && !read.metadata?.[w.map]) {
      // Missing: a removal is moot, a value goes into the made map.
      if (w.value !== null) made.set(w.map, { ...made.get(w.map), [w.key]: w.value });
      continue;
    }
    const path = `/metadata/${w.map}/${pointer(w.key)}`;
    // add-then-remove: a remove of a missing key fails the whole patch.
    ops.push({ op: "add", path, value: w.value ?? "" });
    if (w.value === null) ops.push({ op: "remove", path });
  }
  if (!made.size) return ops;
  const version = read?.metadata?.resourceVersion ?? "";
  return [
    { op: "test", path: "/metadata/resourceVersion", value: version },
    ...[...made].map(([map, value]) => ({ op: "add", path: `/metadata/${map}`, value })),
    ...ops,
  ];
}

/** How many times a map is made before the write gives up on an object that keeps changing. */
const ATTEMPTS = 3;

/**
 * Writes `writes` on the object at `path` whose UID is `uid`: one PATCH
 * that assumes its maps, and on a 422 a read and, when a map is missing,
 * a PATCH that makes it, tested against that read (read again if it moved).
 *
 * @returns false when the object is gone or was replaced under its name: nothing written
 * @throws {ApiError} as the API server answered (a 422 with every map present: another refusal)
 */
export async function writeMetadataMaps(
  kube: Pick<Kube, "request" | "get">,
  path: string,
  uid: string,
  writes: MapWrite[],
): Promise<boolean> {
  const test = { op: "test", path: "/metadata/uid", value: uid };
  for (let attempt = 0;; attempt++) {
    let read: ReadMeta & { metadata?: { uid?: string } } | undefined;
    try {
      if (attempt > 0) {
        read = await kube.get(path);
        if (read?.metadata?.uid !== uid) return false;
      }
      await kube.request("patch", "PATCH", path, [test, ...mapWriteOps(writes, read)]);
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return false;
      if (!(e instanceof ApiError && e.status === 422) || attempt >= ATTEMPTS) throw e;
      // Refused for another reason than a missing map (a value too large).
      const maps = read?.metadata;
      if (maps && writes.every((w) => maps[w.map])) throw e;
    }
  }
}
