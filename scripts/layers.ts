/**
 * Keeps the house as its plan says: reads every module's relative imports
 * (with the TypeScript compiler's own pre-processor, so comments and strings
 * are never mistaken for imports) and fails on
 * - a circle of imports, anywhere;
 * - an import of `cli/` from anywhere but `main.ts` (each concern declares
 *   its configuration; only the command line knows flags);
 * - an import that points outward: a module may import its own folder and
 *   the layers below it in {@linkcode LAYERS}, never one above;
 * - `testing/` imported by anything but a test or a folder outside the house;
 * - a `.ts` module at the top level beyond the card's ({@linkcode CARD}), or a
 *   folder that is in no layer.
 *
 * Usage: `deno task layers` (from the repository's root).
 *
 * @module
 */
import ts from "typescript";

/** The only modules that may stand at the top level: the design card. */
export const CARD: readonly string[] = ["main.ts", "job.ts", "job_test.ts"];

/**
 * The layers, outermost first: a module may import from its own layer and
 * from any layer after its own. `job.ts` is the bottom: the pure Job helpers
 * every layer uses.
 */
export const LAYERS: readonly string[] = [
  "main.ts",
  "cli",
  "run",
  "report",
  "engine",
  "maintenance",
  "nodes",
  "kube",
  "base",
  "job.ts",
];

/** Folders outside the house: they may use it (all but `cli/`), and the house never imports them. */
export const OUTSIDE: readonly string[] = ["e2e", "bench", "scripts", "tools"];

/** The in-memory API and the loopback server, for tests only. */
export const TESTING = "testing";

/** What is never read: build output, fetched tools, and the chart's templates. */
const SKIPPED_DIRS = new Set([".git", "dist", "node_modules", "e2e/.bin", "e2e/.work", "chart"]);

/** Every module and the project modules it imports, by path from the root. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** One rule broken, in words that say what to do. */
export interface Violation {
  /** Which rule. */
  rule: "circle" | "cli" | "outward" | "testing" | "top-level" | "no-layer";
  /** The sentence printed. */
  message: string;
}

/** The layer a path belongs to: its top folder, or its name at the top level. */
function layerOf(path: string): string {
  const slash = path.indexOf("/");
  return slash < 0 ? path : path.slice(0, slash);
}

const isTest = (path: string) => path.endsWith("_test.ts");

/**
 * The project modules a source text imports, resolved against its own path
 * (`run/plan.ts` importing `../kube/client.ts` gives `kube/client.ts`).
 *
 * @example
 * ```ts
 * importsOf("run/plan.ts", 'import { x } from "../kube/client.ts";'); // ["kube/client.ts"]
 * ```
 */
export function importsOf(path: string, text: string): string[] {
  const found = ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  return found.filter((spec) => spec.startsWith(".")).map((spec) => resolve(dir, spec));
}

function resolve(dir: string, spec: string): string {
  const parts = dir ? dir.split("/") : [];
  for (const part of spec.split("/")) {
    if (part === "..") parts.pop();
    else if (part !== ".") parts.push(part);
  }
  return parts.join("/");
}

/** The circles of a graph: Tarjan's strongly connected components of more than one module, or a module importing itself. */
export function circles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** What is wrong with one import, or undefined when it is in order. */
function importViolation(from: string, to: string): Violation | undefined {
  const [a, b] = [layerOf(from), layerOf(to)];
  if (b === "cli" && a !== "cli" && from !== "main.ts") {
    return {
      rule: "cli",
      message: `${from} imports ${to}: only main.ts may import cli/ (declare the configuration ` +
        "the module needs in its own folder; run/ composes it and cli/ fills it)",
    };
  }
  if (b === TESTING && a !== TESTING && !isTest(from) && !OUTSIDE.includes(a)) {
    return { rule: "testing", message: `${from} imports ${to}: testing/ is for tests only` };
  }
  if (OUTSIDE.includes(a) || a === TESTING) return undefined;
  if (OUTSIDE.includes(b)) {
    return { rule: "outward", message: `${from} imports ${to}: the house never imports ${b}/` };
  }
  const [ra, rb] = [LAYERS.indexOf(a), LAYERS.indexOf(b)];
  if (ra < 0 || rb < 0 || rb >= ra || isTest(from)) return undefined;
  return {
    rule: "outward",
    message: `${from} imports ${to}: ${a} may import ${
      ra + 1 < LAYERS.length ? `only ${LAYERS.slice(ra + 1).join(", ")}` : "nothing of the house"
    } (imports point inward: move what both need below ${b})`,
  };
}

/** Modules at the top beyond the card, and folders that are in no layer. */
function placeViolations(paths: readonly string[]): Violation[] {
  const out: Violation[] = [];
  const strays = new Set<string>();
  for (const p of paths) {
    const layer = layerOf(p);
    if (!p.includes("/")) {
      if (!CARD.includes(p)) {
        out.push({
          rule: "top-level",
          message: `${p} stands at the top level: only ${CARD.join(", ")} do; ` +
            "move it into the folder of its concern",
        });
      }
    } else if (![...LAYERS, ...OUTSIDE, TESTING].includes(layer)) strays.add(layer);
  }
  for (const s of strays) {
    out.push({
      rule: "no-layer",
      message:
        `${s}/ is in no layer: add it to LAYERS in scripts/layers.ts, where its imports point`,
    });
  }
  return out;
}

/**
 * Every rule the graph breaks, circles first.
 *
 * @example
 * ```ts
 * checkLayers(new Map([["run/plan.ts", ["cli/options.ts"]], ["cli/options.ts", []]]))[0].rule; // "cli"
 * ```
 */
export function checkLayers(graph: ImportGraph): Violation[] {
  const out: Violation[] = circles(graph).map((c) => ({
    rule: "circle" as const,
    message: `circle of imports among ${c.join(", ")} (cut one arrow)`,
  }));
  out.push(...placeViolations([...graph.keys()]));
  for (const [from, tos] of graph) {
    for (const to of tos) {
      const v = importViolation(from, to);
      if (v) out.push(v);
    }
  }
  return out;
}

/** Reads every `.ts` file below root into an import graph. */
export function readGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const walk = (dir: string): void => {
    for (const entry of Deno.readDirSync(`${root}/${dir}`)) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory && !SKIPPED_DIRS.has(path)) walk(path);
      else if (entry.isFile && entry.name.endsWith(".ts")) {
        graph.set(path, importsOf(path, Deno.readTextFileSync(`${root}/${path}`)));
      }
    }
  };
  walk("");
  return graph;
}

if (import.meta.main) {
  const graph = readGraph(Deno.cwd());
  const violations = checkLayers(graph);
  for (const v of violations) console.error(`layers: ${v.message}`);
  const imports = [...graph.values()].reduce((n, tos) => n + tos.length, 0);
  const count = (rule: Violation["rule"]) => violations.filter((v) => v.rule === rule).length;
  console.log(
    `layers: ${graph.size} modules, ${imports} imports; ${count("circle")} circles, ` +
      `${count("cli")} imports of cli/ outside main.ts, ` +
      `${violations.length - count("circle") - count("cli")} other violations`,
  );
  if (violations.length) Deno.exit(1);
}
