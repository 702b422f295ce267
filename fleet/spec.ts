/**
 * **fleet/** owns one rollout across many clusters (kubeconfig contexts):
 * the stages of FLEET.yaml, one after another, each cluster's rollout being
 * the run `run/` carries out, in that cluster, with its own record. `run/`
 * and `engine/` know nothing of fleets.
 *
 * This module reads FLEET.yaml and refuses, as one line naming it, anything
 * it does not understand: a rollout across production clusters is no place
 * for a key silently ignored.
 *
 * @module
 */

import { parse } from "yaml";
import { isDnsLabel, UsageError } from "../job.ts";

/** One stage: clusters rolled out together, then a soak and, if asked, an approval. */
export interface Stage {
  /** Its name (a DNS label: it names the approval's ConfigMap). */
  name: string;
  /** Its clusters, as kubeconfig context names. */
  clusters: string[];
  /** Seconds after every cluster of the stage ended before the next stage starts. @default 0 */
  soakSecs: number;
  /** Most clusters of the stage rolled out at once. @default all of them */
  maxParallelClusters: number;
  /** The stage starts only once `fleet approve STAGE` recorded an approval in its clusters. */
  approval: boolean;
}

/** What FLEET.yaml may say of one cluster, beyond its context. */
export interface ClusterOverrides {
  /** Its kubeconfig file; default: the one `--kubeconfig` names, or the usual one. */
  kubeconfig?: string;
  /** Its Jobs' namespace; default: `--namespace`, or the context's. */
  namespace?: string;
  /** Its Prometheus for the gates; default: `--gate-prometheus-url`. */
  gatePrometheusUrl?: string;
}

/** A parsed FLEET.yaml. */
export interface FleetSpec {
  /** The file, for messages. */
  source: string;
  /** The stages, in order. */
  stages: Stage[];
  /** Per-context overrides. */
  clusters: Record<string, ClusterOverrides>;
}

const STAGE_KEYS = ["name", "clusters", "soakSecs", "maxParallelClusters", "approval"];
const CLUSTER_KEYS = ["kubeconfig", "namespace", "gatePrometheusUrl"];

type Obj = Record<string, unknown>;

const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Refuses a key of `obj` that is not in `known`. */
function onlyKeys(obj: Obj, known: string[], where: string, bad: (m: string) => never): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) {
      bad(`${where} has unknown key ${JSON.stringify(key)} (known: ${known.join(", ")})`);
    }
  }
}

function nonNegative(v: unknown, where: string, bad: (m: string) => never, min = 0): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v < min) {
    bad(`${where} must be a number of at least ${min}, not ${JSON.stringify(v)}`);
  }
  return v as number;
}

function readStage(raw: unknown, i: number, bad: (m: string) => never): Stage {
  if (!isObject(raw)) bad(`stage ${i + 1} must be a mapping with name and clusters`);
  const s = raw as Obj;
  const name = s.name;
  onlyKeys(s, STAGE_KEYS, typeof name === "string" ? `stage ${name}` : `stage ${i + 1}`, bad);
  if (typeof name !== "string" || !isDnsLabel(name)) {
    bad(
      `stage ${i + 1} needs a name of lower-case letters, digits and "-" (got ${
        JSON.stringify(name)
      })`,
    );
  }
  const where = `stage ${name}`;
  const clusters = s.clusters;
  if (!Array.isArray(clusters) || clusters.length === 0) {
    bad(`${where} is empty: list its kubeconfig contexts under clusters`);
  }
  for (const c of clusters as unknown[]) {
    if (typeof c !== "string" || c === "") bad(`${where} has a cluster that is not a context name`);
  }
  const approval = s.approval ?? false;
  if (typeof approval !== "boolean") bad(`${where}: approval must be true or false`);
  const all = (clusters as string[]).length;
  return {
    name: name as string,
    clusters: clusters as string[],
    soakSecs: s.soakSecs === undefined ? 0 : nonNegative(s.soakSecs, `${where}: soakSecs`, bad),
    maxParallelClusters: s.maxParallelClusters === undefined
      ? all
      : Math.floor(nonNegative(s.maxParallelClusters, `${where}: maxParallelClusters`, bad, 1)),
    approval: approval as boolean,
  };
}

function readClusters(raw: unknown, bad: (m: string) => never): Record<string, ClusterOverrides> {
  if (raw === undefined || raw === null) return {};
  if (!isObject(raw)) bad("clusters must be a mapping of context name to its overrides");
  const out: Record<string, ClusterOverrides> = {};
  for (const [name, value] of Object.entries(raw as Obj)) {
    if (!isObject(value)) {
      bad(`cluster ${name} must be a mapping (keys: ${CLUSTER_KEYS.join(", ")})`);
    }
    onlyKeys(value as Obj, CLUSTER_KEYS, `cluster ${name}`, bad);
    const o: ClusterOverrides = {};
    for (const key of CLUSTER_KEYS as (keyof ClusterOverrides)[]) {
      const v = (value as Obj)[key];
      if (v === undefined) continue;
      if (typeof v !== "string" || v === "") bad(`cluster ${name}: ${key} must be a string`);
      o[key] = v as string;
    }
    out[name] = o;
  }
  return out;
}

/**
 * Reads FLEET.yaml: stages in order, each a non-empty list of contexts, no
 * context in two stages, no unknown key, per-cluster overrides only of
 * clusters some stage names.
 *
 * @example
 * ```ts
 * parseFleet("stages: [{name: canary, clusters: [dev]}]", "f.yaml").stages[0].clusters; // ["dev"]
 * ```
 *
 * @throws {UsageError} naming the file and what in it is wrong
 */
export function parseFleet(text: string, source: string): FleetSpec {
  const bad = (m: string): never => {
    throw new UsageError(`Invalid fleet file ${source}: ${m}`);
  };
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    bad(`not YAML (${(e as Error).message.split("\n")[0]})`);
  }
  if (!isObject(doc)) bad("it must be a mapping with stages");
  const d = doc as Obj;
  onlyKeys(d, ["stages", "clusters"], "the file", bad);
  if (!Array.isArray(d.stages) || d.stages.length === 0) bad("it names no stages");
  const stages = (d.stages as unknown[]).map((s, i) => readStage(s, i, bad));
  const seen = new Map<string, string>();
  const names = new Set<string>();
  for (const s of stages) {
    if (names.has(s.name)) bad(`stage ${s.name} is named twice`);
    names.add(s.name);
    for (const c of s.clusters) {
      const other = seen.get(c);
      if (other !== undefined) {
        bad(`cluster ${c} is in two stages (${other}, ${s.name}): each is rolled out once`);
      }
      seen.set(c, s.name);
    }
  }
  const clusters = readClusters(d.clusters, bad);
  for (const name of Object.keys(clusters)) {
    if (!seen.has(name)) bad(`cluster ${name} has overrides but is in no stage`);
  }
  return { source, stages, clusters };
}

/** Every cluster of the fleet, in stage order. */
export function fleetClusters(spec: FleetSpec): string[] {
  return spec.stages.flatMap((s) => s.clusters);
}
