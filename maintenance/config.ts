/**
 * The configuration the maintenance around each Job needs, declared here so
 * that the drain knows no flag: `cli/` fills these from the command line.
 *
 * @module
 */

import type { Requirement } from "../nodes/label_selector.ts";
import type { MaxUnavailable } from "./budget.ts";
import type { DrainOptions } from "./drain.ts";
import type { EvictOptions } from "./evict.ts";
import type { Window } from "./window.ts";

/** A label selector as given and as parsed. */
export interface PodSelector {
  /** The selector as the user wrote it. */
  text: string;
  /** Its requirements, for matching pods the run holds. */
  requirements: Requirement[];
}

/** What `--drain` does; present only with `--drain`. */
export interface DrainConfig {
  /** Evict pods with emptyDir volumes. @default false */
  deleteEmptyDirData: boolean;
  /** Evict pods that declare no controller. @default false */
  force: boolean;
  /** Only pods this selector matches are evicted. */
  podSelector?: PodSelector;
  /** Seconds each pod gets to terminate; undefined: the pod's own terminationGracePeriodSeconds. */
  gracePeriodSecs?: number;
  /** How long a node's drain may take before the node fails naming what blocked it. @default 600 */
  timeoutSecs: number;
  /** Delete the pods instead of evicting them: PodDisruptionBudgets are bypassed. @default false */
  disableEviction: boolean;
}

/** What each part of a drain takes from {@linkcode DrainConfig}. */
export interface DrainParts {
  /** The rules that sort a node's pods (`planDrain`). */
  pods: DrainOptions;
  /** How each pod is removed (`evictPod`). */
  evict: EvictOptions;
}

/**
 * The drain's flags as its parts take them: the one mapping that both the
 * run's drain and `--dry-run=plan`'s preview read, so that the plan sorts
 * the pods and sends the evictions (grace period, eviction or deletion) the
 * run would. `timeoutSecs` is the run's own deadline and in neither part.
 *
 * @example
 * ```ts
 * drainParts({ deleteEmptyDirData: false, force: true, timeoutSecs: 600, disableEviction: false })
 *   .pods.force; // true
 * ```
 */
export function drainParts(c: DrainConfig): DrainParts {
  return {
    pods: { deleteEmptyDirData: c.deleteEmptyDirData, force: c.force, podSelector: c.podSelector },
    evict: { gracePeriodSecs: c.gracePeriodSecs, disableEviction: c.disableEviction },
  };
}

/**
 * The maintenance around each Job: cordon, drain, availability budget,
 * blocking pods, windows, pause, retry and settling delay. The command line
 * fills it; the engine and {@linkcode Maintenance} carry it out.
 */
export interface MaintenanceConfig {
  /** Cordon each node before its Job and uncordon it (only if this run cordoned it) after success. Implied by `--drain`. */
  cordon: boolean;
  /** Uncordon a node this run cordoned even when its Job failed. @default false */
  uncordonOnFailure: boolean;
  /** Evict the node's pods before its Job. */
  drain?: DrainConfig;
  /** `--max-unavailable`: how many nodes of the selection may be unavailable at once. */
  maxUnavailable?: MaxUnavailable;
  /** A node running a pod that any of these match gets no Job until the pod ends. */
  blockingPodSelectors: PodSelector[];
  /** How long a node may stay blocked before it ends as `blocked`; undefined: as long as the run. */
  blockedTimeoutSecs?: number;
  /** Maintenance windows; empty: any time. */
  windows: Window[];
  /** Dispatch again the nodes whose Job failed in an earlier run. @default false */
  retryFailed: boolean;
  /** Seconds a finished node holds its slot, for the cluster to settle. @default 0 */
  postNodeDelaySecs: number;
  /** While this file exists, no new Job starts (for runs without an owner Job). */
  pauseFile?: string;
}
