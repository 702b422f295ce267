/**
 * A Job's success kept on its node before the work that follows it ("latch
 * first, act second"). A run that saw a node's Job succeed writes the mark,
 * then does the node's post-success work (labels, uncordon, verification),
 * then removes the mark. A run killed in between (SIGKILL, OOM, an evicted
 * hook pod) leaves it, and the Job may be gone by the re-run
 * (`ttlSecondsAfterFinished`): the re-run finds the success on the node,
 * counts it and does the post-success work, instead of creating the Job a
 * second time. On the node, not in the run record: the record is written
 * every 10 s at most (a whole ConfigMap of every node), and a node mark is
 * one small PATCH that lands before the work it guards, and is found by any
 * later run of the prefix.
 *
 * The mark is an annotation per Job ({@linkcode keptKey}) whose value is
 * JSON: the Job's name, the owner Job's UID and the template hash the Job
 * was made from. Per Job, not per node: two rollouts that share the
 * tracking prefix (two chart releases) run on the same node at once, and
 * one's mark must neither replace nor remove the other's. It only counts for
 * a run of the same Job name, owner and template, as the Job itself would
 * ({@linkcode classifyJob}); a node replaced under its name carries no
 * annotations of the old one. Reusable for any Job whose success must not
 * be run twice (the smoke-test Job of verification), under its own key.
 *
 * @module
 */

import { isRetryable, type Kube, paths } from "../kube/client.ts";
import { type MapWrite, mapWriteOps, writeMetadataMaps } from "../kube/metadata_patch.ts";
import { errorText } from "../base/errors.ts";
import { createHash } from "node:crypto";

/** The most an annotation key's name (after the `/`) may hold. */
const NAME_MAX = 63;

/**
 * The annotation key of Job `job`'s mark: `<base>.<job>`, where `base` is
 * `<prefix>/succeeded-job` (`TrackingKeys.kept`); a Job name too long for
 * the 63 characters of a key's name is cut and ends in a hash of it, so that
 * two long names never share a key.
 *
 * @example
 * ```ts
 * keptKey("job-dispatcher/succeeded-job", "up-n1"); // "job-dispatcher/succeeded-job.up-n1"
 * ```
 */
export function keptKey(base: string, job: string): string {
  const key = `${base}.${job}`;
  const slash = key.indexOf("/");
  if (key.length - slash - 1 <= NAME_MAX) return key;
  const hash = createHash("sha256").update(job).digest("hex").slice(0, 8);
  return `${key.slice(0, slash + 1 + NAME_MAX - 9)}-${hash}`;
}

/** What a mark says: whose Job succeeded. */
export interface SuccessMark {
  /** The Job's name. */
  job: string;
  /** The owner Job's UID, when the run has one. */
  owner?: string;
  /** The template hash of the Job (`job.ts` `templateHash`). */
  templateHash?: string;
  /**
   * When the Job ended (ISO 8601; its completionTime, else when the run saw
   * it end): a re-run that counts the success from the mark tells its
   * verification this end, as it would a Job's, once the TTL removed the Job.
   */
  at?: string;
}

/** The node a mark goes on, as selected. */
export interface MarkedNode {
  /** The node's name. */
  name: string;
  /** The UID selected for it: the write tests it, so a replaced node is refused. */
  uid: string;
}

/**
 * The JSON Patch that puts `mark` on the node under annotation `key`, or
 * removes it (`null`), guarded by a `test` of the node's UID. It assumes the
 * node has an annotations map (every kubelet's node has); `bare` is the
 * resourceVersion of a read that showed none: the map is then made with the
 * mark, tested against that version. An `add` of the map where one exists
 * replaces it whole (RFC 6902), and whether a node has one is only known
 * as of a read: the run's own cordon record, written after the selection,
 * would go, and the uncordon would find the cordon not ours.
 *
 * @example
 * ```ts
 * successMarkPatch("up/succeeded", { name: "n1", uid: "u1" }, { job: "up-n1" }).length; // 2
 * ```
 */
export function successMarkPatch(
  key: string,
  node: MarkedNode,
  mark: SuccessMark | null,
  bare?: { resourceVersion: string },
): unknown[] {
  const read = bare && { metadata: { resourceVersion: bare.resourceVersion } };
  return [
    { op: "test", path: "/metadata/uid", value: node.uid },
    ...mapWriteOps([markWrite(key, mark)], read),
  ];
}

/** The annotation write of `mark` under `key` (`null`: its removal). */
function markWrite(key: string, mark: SuccessMark | null): MapWrite {
  return { map: "annotations", key, value: mark && JSON.stringify(mark) };
}

/**
 * The mark under `key` in `annotations` when it is the success of `expected`
 * (same Job name, same owner or none, same template hash), else undefined: a
 * mark of another owner or template is an earlier run's, whose Job this run
 * would replace.
 *
 * @example
 * ```ts
 * keptSuccess({ "up/succeeded": '{"job":"up-n1"}' }, "up/succeeded", { job: "up-n1" }); // { job: "up-n1" }
 * ```
 */
export function keptSuccess(
  annotations: Record<string, string> | undefined,
  key: string,
  expected: SuccessMark,
): SuccessMark | undefined {
  const text = annotations?.[key];
  if (!text) return undefined;
  let mark: SuccessMark;
  try {
    mark = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof mark !== "object" || mark === null || mark.job !== expected.job) return undefined;
  if ((mark.owner ?? "") !== (expected.owner ?? "")) return undefined;
  if ((mark.templateHash ?? "") !== (expected.templateHash ?? "")) return undefined;
  return mark;
}

/**
 * Writes (or with `null` removes) the mark on the node, by
 * `writeMetadataMaps`: a missing annotations map is made from a fresh read,
 * never from the selection's view. An outage or refusal is thrown for the
 * caller to judge.
 *
 * @returns false when the node is gone or was replaced under its name: nothing written
 * @throws {ApiError} as the API server answered
 */
export function writeSuccessMark(
  kube: Pick<Kube, "request" | "get">,
  key: string,
  node: MarkedNode,
  mark: SuccessMark | null,
): Promise<boolean> {
  return writeMetadataMaps(kube, paths.node(node.name), node.uid, [markWrite(key, mark)]);
}

/** Options of {@linkcode SuccessKeeper}. */
export interface SuccessKeeperOptions {
  /** The API client. */
  kube: Pick<Kube, "request" | "get">;
  /** The base of the marks' keys (`TrackingKeys.kept`, or one of its own; {@linkcode keptKey}). */
  key: string;
  /** The node of a name, as selected; undefined: not a node of the run, nothing is written. */
  node(name: string): MarkedNode | undefined;
  /** Says once that marks cannot be written. */
  warn(message: string): void;
}

/**
 * Keeps successes on their nodes for one run: {@linkcode keep} before the
 * work a success is owed, {@linkcode release} once it is done. An outage is
 * thrown by `keep`, for the caller to pause and try again: the work waits
 * for its mark. A refusal (no `nodes patch`, a webhook's denial) is said
 * once and the work goes on without the mark, as every node record does
 * (the README's RBAC): the mark only matters to a run killed midway. With
 * a template's `ttlSecondsAfterFinished` it is all that holds the success
 * once the Job is gone, and the pre-flight (`run/preflight.ts`) refuses to
 * start without `nodes patch`.
 */
export class SuccessKeeper {
  #o: SuccessKeeperOptions;
  #refused = false;
  #unreleased = false;
  /** The key of the mark this run wrote on each node. */
  #written = new Map<string, string>();

  /** @param opts where and how to write */
  constructor(opts: SuccessKeeperOptions) {
    this.#o = opts;
  }

  /**
   * Writes the mark on node `name`, before the work it guards.
   *
   * @throws an outage error (`isRetryable`): the caller pauses and tries again
   */
  async keep(name: string, mark: SuccessMark): Promise<void> {
    const node = this.#o.node(name);
    if (!node || this.#refused) return;
    try {
      // A node gone or replaced under its name: its work says so.
      const key = keptKey(this.#o.key, mark.job);
      if (await writeSuccessMark(this.#o.kube, key, node, mark)) this.#written.set(name, key);
    } catch (e) {
      if (isRetryable(e)) throw e;
      this.#refused = true;
      this.#o.warn(
        `cannot keep successes on their nodes (annotation ${this.#o.key}: ${errorText(e)}); ` +
          "the rollout goes on, but a run stopped during a node's post-success work leaves " +
          "nothing that stops a re-run from running its Job again once the Job's TTL removed it",
      );
    }
  }

  /** Removes the mark this run wrote on node `name`, once its work is done; never throws. */
  async release(name: string): Promise<void> {
    const node = this.#o.node(name);
    const key = this.#written.get(name);
    if (!node || !key) return;
    try {
      await writeSuccessMark(this.#o.kube, key, node, null);
      this.#written.delete(name);
    } catch (e) {
      // Left: a re-run counts the success and does the work again, as it
      // would for the Job while it exists.
      if (this.#unreleased) return;
      this.#unreleased = true;
      this.#o.warn(
        `cannot remove annotation ${key} from node ${name} (${errorText(e)}); ` +
          "a re-run counts that node's success and does its post-success work again",
      );
    }
  }
}
