/**
 * Keeps the house as its plan says: reads every module's relative imports
 * (with the TypeScript compiler's own pre-processor, so comments and strings
 * are never mistaken for imports) and fails on
 * - a circle of imports, anywhere;
 * - an import of `cli/` from anywhere but `main.ts` (each concern declares
 *   its configuration; only the command line knows flags);
 * - an import that points outward: a module may import its own folder and
 *   the layers below it in {@linkcode LAYERS}, never one above;
 * - `testing/` imported by anything but a test;
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
  "rbac",
  "fleet",
  "status",
  "run",
  "preview",
  "report",
  "engine",
  "gates",
  "maintenance",
  "verify",
  "policy",
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
const SKIPPED_DIRS = new Set([
  ".git",
  "dist",
  "node_modules",
  "e2e/.bin",
  "e2e/.work",
  "chart/templates",
]);

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

const isTest = (path: string) => /_test\.[cm]?[jt]sx?$/.test(path);

/** The endings of the modules read: every kind Deno loads as code. */
const MODULE = /\.(ts|mts|cts|tsx|js|mjs|cjs|jsx)$/;

/** Where an import leads that is no module of the repository's own. */
export const OUTSIDE_THE_REPOSITORY = "<outside the repository>";
/** Where an absolute import (`/…`, `file:`) leads: the house imports by relative path only. */
export const ABSOLUTE = "<absolute path>";

/** A deno.json `imports` map, for the entries that name the repository's own files. */
export type ImportMap = Readonly<Record<string, string>>;

/** Specifiers in the type pragmas Deno reads from comments: `@ts-types` and `@deno-types`. */
function typePragmas(text: string): string[] {
  // Deno reads them from a line comment of their own, right above an import.
  const pragma = /^\s*\/\/\s*@(?:ts|deno)-types\s*=\s*["']([^"']+)["']/gm;
  return [...text.matchAll(pragma)].map((m) => m[1]);
}

/**
 * The project modules a source text imports, resolved against its own path
 * as Deno resolves them (`run/plan.ts` importing `../kube/client.ts` gives
 * `kube/client.ts`): URL rules, so `..//x`, `%63li`, `?query` and `#hash`
 * lead where Deno goes; deno.json's import map; `/// <reference path>` and
 * `@ts-types` pragmas. Bare specifiers (npm packages, `node:`) are not ours.
 *
 * @example
 * ```ts
 * importsOf("run/plan.ts", 'import { x } from "../kube/client.ts";'); // ["kube/client.ts"]
 * ```
 */
export function importsOf(path: string, text: string, importMap: ImportMap = {}): string[] {
  const info = ts.preProcessFile(text, true, true);
  const found = [
    ...info.importedFiles.map((f) => f.fileName),
    ...info.referencedFiles.map((f) => f.fileName),
    ...typePragmas(text),
  ];
  return found.map((spec) => resolve(path, mapped(spec, importMap))).filter((p) => p !== undefined);
}

/** A specifier through the import map: the longest matching key wins, as in Deno. */
function mapped(spec: string, importMap: ImportMap): string {
  const key =
    Object.keys(importMap).filter((k) => k.endsWith("/") ? spec.startsWith(k) : spec === k)
      .sort((a, b) => b.length - a.length)[0];
  if (key === undefined) return spec;
  const target = importMap[key];
  if (!/^\.\.?\//.test(target)) return spec; // an npm: or jsr: package, not ours
  // Map targets are relative to deno.json at the root: make them rooted.
  return "/" + target.replace(/^\.\//, "") + spec.slice(key.length) + "\0mapped";
}

const BASE = "file:///repository/";

function resolve(from: string, spec: string): string | undefined {
  if (spec.endsWith("\0mapped")) spec = new URL(spec.slice(1, -"\0mapped".length), BASE).href;
  else if (spec.startsWith("/") || spec.startsWith("file:")) return ABSOLUTE;
  else if (!spec.startsWith(".")) return undefined;
  const url = new URL(spec, BASE + from);
  // Deno loads file:///repository//cli/x.ts from /repository/cli/x.ts.
  const pathname = decodeURIComponent(url.pathname).replace(/\/{2,}/g, "/");
  const root = new URL(BASE).pathname;
  return pathname.startsWith(root) ? pathname.slice(root.length) : OUTSIDE_THE_REPOSITORY;
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
  if (to === ABSOLUTE || to === OUTSIDE_THE_REPOSITORY) {
    return {
      rule: "outward",
      message: `${from} has an import that leads to ${to}: import the house by relative path`,
    };
  }
  if (b === "cli" && a !== "cli" && from !== "main.ts") {
    return {
      rule: "cli",
      message: `${from} imports ${to}: only main.ts may import cli/ (declare the configuration ` +
        "the module needs in its own folder; run/ composes it and cli/ fills it)",
    };
  }
  if (b === TESTING && a !== TESTING && !isTest(from)) {
    return { rule: "testing", message: `${from} imports ${to}: testing/ is for tests only` };
  }
  if (OUTSIDE.includes(a)) return undefined;
  if (OUTSIDE.includes(b)) {
    return { rule: "outward", message: `${from} imports ${to}: the house never imports ${b}/` };
  }
  // testing/ stands beside the house for its tests, and tests may reach up
  // (a maintenance test uses the engine's outage rules): only the modules
  // that ship keep to the order.
  if (a === TESTING) return undefined;
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
      if (!CARD.includes(p) && MODULE.test(p)) {
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

/** Reads every module below root (every ending Deno loads as code) into an import graph. */
export function readGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const config = JSON.parse(Deno.readTextFileSync(`${root}/deno.json`));
  const importMap: ImportMap = config.imports ?? {};
  const walk = (dir: string): void => {
    for (const entry of Deno.readDirSync(`${root}/${dir}`)) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory && !SKIPPED_DIRS.has(path)) walk(path);
      else if (entry.isFile && MODULE.test(entry.name)) {
        graph.set(path, importsOf(path, Deno.readTextFileSync(`${root}/${path}`), importMap));
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
