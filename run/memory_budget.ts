/**
 * Whether this process's memory limit holds a selection this large: the
 * chart's hook pod has `limits.memory: 256Mi`, and a hook OOM-killed at a
 * large fleet is retried, adopts the Jobs and is killed again, so the
 * rollout never ends. The limit is read from the cgroup (what the kubelet
 * enforces), the need from the peak RSS measured at 10,000 and 65,000 nodes
 * (`deno task bench:memory`, bench/experiments/memory-65000.md).
 *
 * @module
 */

/** Peak RSS as a line in the selection's size: `baseMb` + `kbPerNode` a node. */
export interface MemoryFit {
  /** Peak RSS with no node (MB). */
  baseMb: number;
  /** Peak RSS per selected node (kB). */
  kbPerNode: number;
}

/**
 * The fit of a process with glibc's default arenas (a binary run outside the
 * image): the line through the highest peaks measured at 10,000 and 65,000
 * nodes (121 and 233 MB, s26-mem; the medians 116 and 217) meets zero nodes at
 * 100 MB, 2.04 kB a node (rounded up).
 */
export const DEFAULT_ARENAS: MemoryFit = { baseMb: 100, kbPerNode: 2.1 };

/**
 * The fit of the image, which runs with one malloc arena (`ENV
 * MALLOC_ARENA_MAX=1` in the Containerfile): the line through the highest
 * peaks measured with it at 10,000 and 65,000 nodes (109.3 and 230.9 MB;
 * bench/experiments/wakes-and-arenas.md) meets zero nodes at 87 MB, 2.26 kB a
 * node (rounded up). The 230.9 ran on a loaded machine, and it stays in: a
 * hook pod asks for 50m of CPU, so a busy node is its case; quiet runs peak
 * lower (188-194 MB), the worst case is what an OOM loop follows.
 */
export const ONE_ARENA: MemoryFit = { baseMb: 87, kbPerNode: 2.3 };

/** The fit for a process whose `MALLOC_ARENA_MAX` is `arenaMax` (undefined: not set). */
export function fitFor(arenaMax: string | undefined): MemoryFit {
  // Per-thread arenas hold freed memory apart from the main heap (~30 MB at
  // 65,000 nodes): only one arena earns the lower line.
  return arenaMax?.trim() === "1" ? ONE_ARENA : DEFAULT_ARENAS;
}

/**
 * The fit for this process, from its environment: a variable it may not read
 * (an `--allow-env` narrowed to docs/security.md's list throws NotCapable)
 * gives the default line, the larger one, rather than ending the run.
 */
export function fitFromEnv(env: (name: string) => string | undefined): MemoryFit {
  try {
    return fitFor(env("MALLOC_ARENA_MAX"));
  } catch {
    return DEFAULT_ARENAS;
  }
}

/** The share of the limit the estimate may take: RSS is sampled, the kernel kills at the byte. */
const HEADROOM = 0.9;

/** The cgroup's memory limit in bytes (v2, then v1), or undefined when there is none. */
export function cgroupMemoryLimit(
  readFile: (path: string) => string | undefined,
): number | undefined {
  const v2 = readFile("/sys/fs/cgroup/memory.max")?.trim();
  const v1 = readFile("/sys/fs/cgroup/memory/memory.limit_in_bytes")?.trim();
  const bytes = Number(v2 && v2 !== "max" ? v2 : v1);
  // cgroup v1 says "no limit" with a number near 2^63.
  return Number.isFinite(bytes) && bytes > 0 && bytes < 2 ** 50 ? bytes : undefined;
}

/** The peak RSS (MB) a run of `nodes` nodes is expected to reach. */
export function expectedPeakMb(nodes: number, fit = DEFAULT_ARENAS): number {
  return Math.ceil(fit.baseMb + (nodes * fit.kbPerNode) / 1024);
}

/** The most nodes a memory limit of `limitBytes` was sized for. */
export function nodesSizedFor(limitBytes: number, fit = DEFAULT_ARENAS): number {
  const mb = (limitBytes / 2 ** 20) * HEADROOM;
  return Math.max(0, Math.floor(((mb - fit.baseMb) * 1024) / fit.kbPerNode));
}

/**
 * The warning the run says in its first lines when `nodes` exceed what the
 * limit was sized for, or undefined when they fit (or there is no limit).
 *
 * @example
 * ```ts
 * memoryWarning(100_000, 256 * 2 ** 20); // "the selection has 100000 nodes, more than …"
 * memoryWarning(1_000, 256 * 2 ** 20); // undefined
 * ```
 */
export function memoryWarning(
  nodes: number,
  limitBytes: number | undefined,
  fit = DEFAULT_ARENAS,
): string | undefined {
  if (limitBytes === undefined || nodes <= nodesSizedFor(limitBytes, fit)) return undefined;
  const need = Math.ceil(expectedPeakMb(nodes, fit) / HEADROOM / 16) * 16;
  return `the selection has ${nodes} nodes, more than the ${nodesSizedFor(limitBytes, fit)} ` +
    `this pod's memory limit (${Math.round(limitBytes / 2 ** 20)} MiB) holds at ` +
    `${fit.baseMb} MB + ${fit.kbPerNode} kB per node: an OOM kill would restart the run over ` +
    `and over; raise the limit to ${need}Mi (chart: resources.limits.memory) or split ` +
    `the selection`;
}
