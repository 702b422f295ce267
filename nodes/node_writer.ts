/**
 * Carries out the node lifecycle of `lifecycle.ts` around each Job: the claim
 * before it, and after it succeeded the wait for Ready (and a runtime
 * handler), the labels until they stick, then the lifted taints. Every write
 * tests the node UID selected for the node.
 *
 * @module
 */

import type { V1Node } from "@kubernetes/client-node";
import { ApiError, isRetryable, type Kube, paths } from "../kube/client.ts";
import { SYSTEM_CLOCK } from "../base/clock.ts";
import { writeMetadataMaps } from "../kube/metadata_patch.ts";
import type { TrackingKeys } from "../job.ts";
import {
  goDurationMs,
  isReady,
  type LabelConfig,
  type LabelPlan,
  labelWrites,
  missingFact,
  planAfterSuccess,
  planBeforeJob,
  planHolds,
  type RequiredFacts,
  servesHandler,
  taintPatch,
  type TaintSelector,
  taintsToLift,
} from "./lifecycle.ts";
import { errorText } from "../base/errors.ts";
import type { Log } from "../base/log.ts";

/** Options of {@linkcode NodeWriter}. */
export interface NodeWriterOptions {
  /** The API client. */
  kube: Kube;
  /** The logger. */
  log: Log;
  /** The tracking keys: a cleanup clears the node marks of `report/report.ts`. */
  keys: TrackingKeys;
  /** The labels, when `--node-label-key` is given. */
  labels?: LabelConfig;
  /** How long to wait for Ready after a Job succeeded; 0: do not wait. */
  waitReadyMs: number;
  /** `--require-node-handlers`. */
  handlers: string[];
  /** `--remove-node-taints`. */
  removeTaints: TaintSelector[];
  /** `--require-node-runtime-version`, `--require-node-machine-id`. */
  require: RequiredFacts;
  /** `--kubelet-timeout-warn-secs`, in ms. */
  kubeletTimeoutWarnMs?: number;
  /** Aborts on SIGINT/SIGTERM. */
  signal: AbortSignal;
  /** How often a waiting node is read again. @default 1000 */
  pollMs?: number;
  /** How long a label may take to stick before the node fails. @default 15000 */
  stickMs?: number;
}

/** A node as the writer gets it: the selection's view of it. */
export type SelectedNode = Pick<V1Node, "metadata" | "status">;

/** Reason a node fails when its run was stopped during the post-success work. */
export const STOPPED = "stopped before the node's post-success work ended";

/**
 * Writes the node lifecycle of one run. `before` runs just before a node's Job
 * is created, `after` once it succeeded; each returns why the node fails, or
 * undefined.
 */
export class NodeWriter {
  #o: NodeWriterOptions;
  #warned = new Set<string>();
  #kubelet: Promise<void> = Promise.resolve();

  /** @param opts what to write */
  constructor(opts: NodeWriterOptions) {
    this.#o = opts;
  }

  /** Whether there is any work before a Job. */
  get hasBefore(): boolean {
    const o = this.#o;
    return o.require.machineId || o.require.runtimeVersion ||
      o.kubeletTimeoutWarnMs !== undefined ||
      (o.labels !== undefined && (o.labels.claim || o.labels.remove));
  }

  /** Whether there is any work after a Job succeeded. */
  get hasAfter(): boolean {
    const o = this.#o;
    return o.labels !== undefined && (o.labels.value !== undefined || o.labels.remove);
  }

  #once(kind: string, msg: string): void {
    if (this.#warned.has(kind)) return;
    this.#warned.add(kind);
    this.#o.log.warn(msg);
  }

  /** Checks the facts the Job needs, then claims (or demotes) the node. */
  async before(node: SelectedNode): Promise<string | undefined> {
    const name = node.metadata!.name!;
    const missing = missingFact(node as V1Node, this.#o.require);
    if (missing) return missing;
    if (this.#o.kubeletTimeoutWarnMs !== undefined) this.#checkKubelet(name);
    const cfg = this.#o.labels;
    if (!cfg || (!cfg.claim && !cfg.remove)) return undefined;
    const uid = node.metadata!.uid!;
    try {
      const fresh = await this.#read(name, uid);
      if (typeof fresh === "string") return fresh;
      const plan = planBeforeJob(cfg, fresh.metadata?.labels ?? {});
      if (plan.size) {
        await this.#patchLabels(name, uid, fresh, plan);
        this.#o.log.info(`${cfg.remove ? "demoted" : "claimed"} node ${name}: ${describe(plan)}`);
      }
    } catch (e) {
      // An outage is not the node's fault: the engine puts the node back in
      // the queue and pauses starts until the API answers.
      if (isRetryable(e)) throw e;
      return `cannot ${cfg.remove ? "demote" : "claim"} node ${name} before its Job: ${
        errorText(e)
      }`;
    }
    return undefined;
  }

  /**
   * The post-success work: waits until the node is Ready and serves a
   * required handler, runs `verify` (node verification), writes the labels
   * until they stick, then lifts the taints; never lifts a taint before the
   * label is on the node, nor labels a node that failed its verification.
   *
   * @param verify checks the node once Ready; a string fails it, unlabelled
   */
  async after(
    node: SelectedNode,
    verify?: () => Promise<string | undefined>,
  ): Promise<string | undefined> {
    const cfg = this.#o.labels!;
    const name = node.metadata!.name!;
    const uid = node.metadata!.uid!;
    try {
      // Without a wait, no read comes between the Job and the write: the
      // write's UID test alone tells a replaced node.
      const needsRead = this.#o.waitReadyMs > 0 || this.#o.handlers.length > 0 || cfg.remove ||
        cfg.mark !== undefined;
      let current: SelectedNode = node;
      if (needsRead) {
        const ready = await this.#waitUntilReady(name, uid);
        if (typeof ready === "string") return ready;
        current = ready;
      }
      const failed = await verify?.();
      if (failed) return failed;
      const plan = planAfterSuccess(cfg, current.metadata?.labels ?? {});
      const clearsMarks = cfg.remove && plan.get(cfg.key) === null;
      let latest: SelectedNode = current;
      if (plan.size || clearsMarks) {
        const stuck = await this.#labelUntilStuck(name, uid, current, plan, clearsMarks);
        if (typeof stuck === "string") return stuck;
        latest = stuck;
        if (plan.size) {
          this.#o.log.info(
            `${cfg.remove ? "unlabelled" : "labelled"} node ${name}: ${describe(plan)}`,
          );
        }
      }
      if (this.#o.removeTaints.length && !cfg.remove) {
        return await this.#liftTaints(name, uid, latest);
      }
      return undefined;
    } catch (e) {
      if (this.#o.signal.aborted) return STOPPED;
      // An outage is not the node's fault: the engine queues the node again.
      if (isRetryable(e)) throw e;
      return `cannot ${cfg.remove ? "unlabel" : "label"} node ${name}: ${errorText(e)}`;
    }
  }

  /** Waits a moment for the kubelet checks still under way: they only warn. */
  async settle(timeoutMs = 5000): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#kubelet, new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Reads the node; a string says it is gone or replaced. */
  async #read(name: string, uid: string): Promise<V1Node | string> {
    const node = await this.#o.kube.get<V1Node>(paths.node(name));
    if (!node) return "the node was deleted";
    if (node.metadata?.uid !== uid) {
      return `the node was replaced under the same name (UID ${uid} is now ${node.metadata?.uid})`;
    }
    return node;
  }

  async #waitUntilReady(name: string, uid: string): Promise<V1Node | string> {
    const waitMs = this.#o.waitReadyMs;
    const handlers = this.#o.handlers;
    const deadline = Date.now() + waitMs;
    while (true) {
      const node = await this.#read(name, uid);
      if (typeof node === "string") return `${node}; not labelled`;
      const ready = waitMs === 0 || isReady(node);
      const served = servesHandler(node, handlers);
      if (ready && served) return node;
      if (Date.now() >= deadline) {
        if (!ready) {
          return `the node did not become Ready within ${
            waitMs / 1000
          } s after its Job succeeded; not labelled`;
        }
        const reported = (node.status?.runtimeHandlers ?? []).map((h) => h.name).join(", ");
        return `the node serves none of the runtime handlers ${handlers.join(", ")} ` +
          `(it reports ${reported})${waitMs ? ` within ${waitMs / 1000} s` : ""}; not labelled`;
      }
      if (!(await this.#sleep(Math.min(this.#o.pollMs ?? 1000, deadline - Date.now())))) {
        return STOPPED;
      }
    }
  }

  /**
   * Writes the labels, then reads them back after a moment and writes them
   * again if they were dropped (a kubelet re-registering its node may), until
   * they hold or the bounded time runs out.
   */
  async #labelUntilStuck(
    name: string,
    uid: string,
    node: SelectedNode,
    plan: LabelPlan,
    clearsMarks: boolean,
  ): Promise<V1Node | string> {
    const deadline = Date.now() + (this.#o.stickMs ?? 15_000);
    let current = node;
    for (let attempt = 0;; attempt++) {
      await this.#patchLabels(name, uid, current, plan, clearsMarks);
      if (!(await this.#sleep(this.#o.pollMs ?? 1000))) return STOPPED;
      const read = await this.#read(name, uid);
      if (typeof read === "string") return `${read}; not labelled`;
      if (planHolds(plan, read.metadata?.labels ?? {})) return read;
      if (Date.now() >= deadline) {
        return `the labels ${describe(plan)} did not stay on the node within ${
          (this.#o.stickMs ?? 15_000) / 1000
        } s (written ${attempt + 1} times)`;
      }
      this.#o.log.warn(`node ${name} lost its labels (${describe(plan)}); writing them again`);
      current = read;
    }
  }

  async #patchLabels(
    name: string,
    uid: string,
    _node: SelectedNode,
    plan: LabelPlan,
    clearsMarks = false,
  ): Promise<void> {
    const writes = labelWrites(plan);
    if (clearsMarks) {
      // A cleaned node keeps no outcome of the Jobs it no longer has.
      const k = this.#o.keys;
      writes.push(
        { map: "labels", key: k.result, value: null },
        { map: "annotations", key: k.error, value: null },
        { map: "annotations", key: k.finishedAt, value: null },
      );
    }
    if (await writeMetadataMaps(this.#o.kube, paths.node(name), uid, writes)) return;
    const fresh = await this.#read(name, uid);
    throw new Error(
      `${typeof fresh === "string" ? fresh : `node ${name} changed`}: the write was refused`,
    );
  }

  async #liftTaints(name: string, uid: string, node: SelectedNode): Promise<string | undefined> {
    let current = node as V1Node;
    for (let attempt = 0; attempt < 5; attempt++) {
      const read = current.spec?.taints ?? [];
      const { keep, lifted } = taintsToLift(read, this.#o.removeTaints);
      if (!lifted.length) return undefined;
      try {
        await this.#o.kube.request(
          "patch",
          "PATCH",
          paths.node(name),
          taintPatch(uid, read, keep),
        );
        const what = lifted.map((t) => `${t.key}:${t.effect}`).join(", ");
        this.#o.log.info(`lifted taint ${what} from node ${name}`);
        return undefined;
      } catch (e) {
        // 422: the taints changed since the read (or the node was replaced,
        // which the read tells): read again and retry.
        if (!(e instanceof ApiError && e.status === 422)) throw e;
        const fresh = await this.#read(name, uid);
        if (typeof fresh === "string") return `${fresh}; taints not lifted`;
        current = fresh;
      }
    }
    return `cannot lift taints from node ${name}: they kept changing`;
  }

  /**
   * Reads the kubelet's configuration through the API server's node proxy, one
   * node at a time, off to the side of the rollout: it only warns. The first
   * refusal (no `nodes/proxy` permission, a kubelet the API server cannot
   * reach) is said once and ends the checks, so a fleet never pays a retry
   * budget per node for a warning.
   */
  #checkKubelet(name: string): void {
    const limitMs = this.#o.kubeletTimeoutWarnMs!;
    this.#kubelet = this.#kubelet.then(async () => {
      if (this.#warned.has("kubelet") || this.#o.signal.aborted) return;
      try {
        const config = await this.#o.kube.request<
          { kubeletconfig?: { runtimeRequestTimeout?: string } }
        >("get", "GET", `${paths.node(name)}/proxy/configz`, undefined, true);
        // The kubelet's default when its configuration does not set it.
        const text = config.kubeletconfig?.runtimeRequestTimeout ?? "2m0s";
        const ms = goDurationMs(text);
        if (ms !== undefined && ms < limitMs) {
          this.#o.log.warn(
            `node ${name}: the kubelet's runtimeRequestTimeout is ${text}, below ` +
              `--kubelet-timeout-warn-secs ${limitMs / 1000}: a slow runtime call may time out`,
            { event: "kubeletTimeout", node: name, runtimeRequestTimeout: text },
          );
        }
      } catch (e) {
        this.#once(
          "kubelet",
          `cannot read the kubelet configuration through nodes/proxy (${
            (e as Error).message
          }); runtimeRequestTimeout is not checked`,
        );
      }
    });
  }

  /** Sleeps `ms`; false when the run was stopped meanwhile. */
  async #sleep(ms: number): Promise<boolean> {
    await SYSTEM_CLOCK.sleep(Math.max(0, ms), this.#o.signal);
    return !this.#o.signal.aborted;
  }
}

/** `k=v, k2 removed` */
function describe(plan: LabelPlan): string {
  return [...plan].map(([k, v]) => v === null ? `${k} removed` : `${k}=${v}`).join(", ");
}
