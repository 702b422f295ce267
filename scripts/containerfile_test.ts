import assert from "node:assert/strict";
import { readGraph } from "./layers.ts";

/** The sources of the Containerfile's COPY lines of the build stage (not `--from`). */
function copiedSources(containerfile: string): string[] {
  return containerfile.split("\n")
    .filter((l) => /^COPY\s/.test(l) && !l.includes("--from="))
    .flatMap((l) => l.trim().split(/\s+/).slice(1, -1));
}

/** Whether a COPY source (`*.ts`, `kube/`, `deno.json`) brings `path` into the image. */
function covers(source: string, path: string): boolean {
  if (source.endsWith("/")) return path.startsWith(source);
  if (source.startsWith("*")) return !path.includes("/") && path.endsWith(source.slice(1));
  return source === path;
}

Deno.test({
  name: "the Containerfile copies every module main.ts imports (the image builds from them)",
  permissions: { read: true, env: true },
  fn: () => {
    const graph = readGraph(Deno.cwd());
    const needed = new Set<string>();
    const visit = (m: string) => {
      if (needed.has(m)) return;
      needed.add(m);
      for (const next of graph.get(m) ?? []) visit(next);
    };
    visit("main.ts");
    const sources = copiedSources(Deno.readTextFileSync("Containerfile"));
    const missing = [...needed].filter((m) => !sources.some((s) => covers(s, m)));
    assert.deepEqual(missing, [], `add a COPY line for: ${missing.join(", ")}`);
    assert.ok(needed.size > 40, `main.ts's graph has ${needed.size} modules`);
  },
});
