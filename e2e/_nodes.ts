/**
 * Fake Node objects for kwok, and the parsing of node flags. No I/O.
 *
 * @module
 */

/** The node label that decides how pods on the node end; see e2e/stages/pod.yaml. */
export const OUTCOME_LABEL = "e2e.job-dispatcher.io/outcome";
/** The pod annotation that sets how long a simulated container runs, e.g. `250ms`. */
export const DURATION_ANNOTATION = "e2e.job-dispatcher.io/duration";
/** The annotation that hands a node to kwok (`--manage-nodes-with-annotation-selector`). */
export const FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node";
/**
 * The annotation that keeps kwok's node-initialize stage off a node (see
 * e2e/stages/node.yaml), so that a Ready=False condition written by a test
 * holds until the annotation is removed.
 */
export const NOT_READY_ANNOTATION = "e2e.job-dispatcher.io/not-ready";
/**
 * The annotation that makes node-initialize report an empty
 * `status.nodeInfo.containerRuntimeVersion` instead of kwok's own version.
 */
export const NO_RUNTIME_VERSION_ANNOTATION = "e2e.job-dispatcher.io/no-runtime-version";
/** The containerRuntimeVersion fake nodes report unless told otherwise. */
export const RUNTIME_VERSION = "containerd://2.1.0";

/** How pods on a fake node end. */
export type Outcome = "succeed" | "fail" | "stall";

/** A node taint. */
export interface Taint {
  /** Taint key. */
  key: string;
  /** Taint value; absent for `key:Effect`. */
  value?: string;
  /** What the taint does to pods that do not tolerate it. */
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

/** A fake node to create. */
export interface NodeSpec {
  /** Node name, e.g. `node-000`. */
  name: string;
  /** Extra labels; `kubernetes.io/hostname` and friends are always set. */
  labels?: Record<string, string>;
  /** Extra annotations. */
  annotations?: Record<string, string>;
  /** Taints. */
  taints?: Taint[];
  /** status.nodeInfo.machineID; `""` reports none. @default a random 32-hex-digit id */
  machineID?: string;
  /**
   * status.nodeInfo.containerRuntimeVersion; `""` reports none (kwok would
   * fill in its own version, so the node also gets
   * {@linkcode NO_RUNTIME_VERSION_ANNOTATION}). @default {@linkcode RUNTIME_VERSION}
   */
  containerRuntimeVersion?: string;
  /** status.runtimeHandlers, by name; kwok leaves them as written. @default none */
  runtimeHandlers?: string[];
}

const EFFECTS = new Set(["NoSchedule", "PreferNoSchedule", "NoExecute"]);

/**
 * Parses a taint written as kubectl does, `key=value:Effect` or `key:Effect`.
 *
 * @throws {SyntaxError} if the text has no effect or an unknown one
 */
export function parseTaint(text: string): Taint {
  const colon = text.lastIndexOf(":");
  const effect = colon < 0 ? "" : text.slice(colon + 1);
  if (!EFFECTS.has(effect)) {
    throw new SyntaxError(
      `Cannot parse taint "${text}": expected key=value:Effect with Effect one of ${
        [...EFFECTS].join(", ")
      }`,
    );
  }
  const [key, value] = splitPair(text.slice(0, colon));
  if (key === "") throw new SyntaxError(`Cannot parse taint "${text}": empty key`);
  return { key, ...(value === undefined ? {} : { value }), effect: effect as Taint["effect"] };
}

/**
 * Parses a label written as `key=value`.
 *
 * @throws {SyntaxError} if there is no `=` or the key is empty
 */
export function parseLabel(text: string): [string, string] {
  const [key, value] = splitPair(text);
  if (key === "" || value === undefined) {
    throw new SyntaxError(`Cannot parse label "${text}": expected key=value`);
  }
  return [key, value];
}

function splitPair(text: string): [string, string | undefined] {
  const eq = text.indexOf("=");
  return eq < 0 ? [text, undefined] : [text.slice(0, eq), text.slice(eq + 1)];
}

/** Returns the names `node-000`, `node-001`, … for `count` nodes. */
export function nodeNames(count: number, first = 0): string[] {
  return Array.from({ length: count }, (_, i) => `node-${String(first + i).padStart(3, "0")}`);
}

/**
 * Builds the Node object for `spec`, status included: the API server keeps a
 * Node's status on create, and kwok's node-initialize stage keeps the
 * nodeInfo and capacity it finds, so what is set here is what clients see.
 */
export function nodeObject(spec: NodeSpec): Record<string, unknown> {
  const resources = { cpu: "8", memory: "32Gi", pods: "110", "ephemeral-storage": "100Gi" };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: spec.name,
      labels: {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "kwok",
        ...spec.labels,
      },
      annotations: {
        "node.alpha.kubernetes.io/ttl": "0",
        ...spec.annotations,
        ...(spec.containerRuntimeVersion === "" ? { [NO_RUNTIME_VERSION_ANNOTATION]: "true" } : {}),
        [FAKE_NODE_ANNOTATION]: "fake",
      },
    },
    spec: { taints: spec.taints ?? [] },
    status: {
      capacity: resources,
      allocatable: resources,
      nodeInfo: {
        architecture: "amd64",
        bootID: crypto.randomUUID(),
        containerRuntimeVersion: spec.containerRuntimeVersion ?? RUNTIME_VERSION,
        kernelVersion: "6.8.0-kwok",
        kubeletVersion: "v1.36.3",
        kubeProxyVersion: "",
        machineID: spec.machineID ?? crypto.randomUUID().replaceAll("-", ""),
        operatingSystem: "linux",
        osImage: "kwok fake node",
        systemUUID: crypto.randomUUID(),
      },
      ...(spec.runtimeHandlers ? { runtimeHandlers: runtimeHandlers(spec.runtimeHandlers) } : {}),
    },
  };
}

/**
 * Returns `status.runtimeHandlers` naming `names`, as a kubelet reports them.
 *
 * @example
 * ```ts
 * runtimeHandlers(["kata"]); // [{ name: "kata", features: {…} }]
 * ```
 */
export function runtimeHandlers(names: string[]): Record<string, unknown>[] {
  return names.map((name) => ({
    name,
    features: { recursiveReadOnlyMounts: true, userNamespaces: false },
  }));
}
