/**
 * The top functions by self time of a V8 `.cpuprofile` (what `deno run
 * --cpu-prof` writes; `deno task bench:memory --cpu-prof DIR`):
 *
 * ```sh
 * deno run --allow-read bench/_cpu_top.ts DIR/*.cpuprofile [--top 5]
 * ```
 *
 * @module
 */

/** One function of the profile, with its self time summed over every node of it. */
export interface HotFunction {
  /** `name file:line`. */
  what: string;
  /** Self time, ms. */
  selfMs: number;
  /** Of the profile's sampled time, %. */
  percent: number;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** The profile's functions by self time, heaviest first (idle and GC included, as V8 names them). */
export function topBySelfTime(
  profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] },
  top = 5,
): HotFunction[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const f = byId.get(id)!.callFrame;
    const file = f.url.split("/").pop() || "(native)";
    const key = `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
    const us = profile.timeDeltas[i] ?? 0;
    self.set(key, (self.get(key) ?? 0) + us);
    total += us;
  });
  return [...self].sort((a, b) => b[1] - a[1]).slice(0, top).map(([what, us]) => ({
    what,
    selfMs: Math.round(us / 1000),
    percent: Math.round((us / total) * 1000) / 10,
  }));
}

if (import.meta.main) {
  const files = Deno.args.filter((a) => !a.startsWith("--") && !/^\d+$/.test(a));
  const i = Deno.args.indexOf("--top");
  const top = i >= 0 ? Number(Deno.args[i + 1]) : 5;
  for (const file of files) {
    console.log(file);
    const rows = topBySelfTime(JSON.parse(await Deno.readTextFile(file)), top);
    for (const r of rows) {
      console.log(
        `  ${String(r.selfMs).padStart(7)} ms ${String(r.percent).padStart(5)} %  ${r.what}`,
      );
    }
  }
}
