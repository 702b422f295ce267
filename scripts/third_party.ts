/**
 * Describes the npm packages the shipped program is built from: the graph
 * reachable from `main.ts` (not the test-only packages of deno.lock), read
 * from `deno info --json main.ts`, with each package's licence taken from its
 * package.json in the Deno npm cache ($DENO_DIR), which the bundle step fills.
 *
 * ```sh
 * deno run --allow-run=deno --allow-read scripts/third_party.ts notices  > THIRD_PARTY_NOTICES
 * deno run --allow-run=deno --allow-read scripts/third_party.ts cyclonedx > sbom.cdx.json
 * ```
 *
 * @module
 */

/** One npm package of the runtime graph. */
export interface NpmPackage {
  /** Package name, e.g. `@kubernetes/client-node`. */
  name: string;
  /** Exact version, e.g. `2.0.1`. */
  version: string;
  /** SPDX licence expression from package.json, or "UNKNOWN". */
  license: string;
  /** Homepage or repository URL, when package.json names one. */
  url?: string;
  /** sha512 integrity from deno.lock, when recorded. */
  integrity?: string;
  /** Licence and notice files of the package, by file name. */
  licenseTexts: Record<string, string>;
}

/** What `deno info --json` says of the npm graph. */
interface DenoInfo {
  modules: { kind?: string; npmPackage?: string }[];
  npmPackages: Record<string, { name: string; version: string; dependencies?: string[] }>;
}

const ROOT = new URL("../", import.meta.url).pathname;
const LICENSE_FILE = /^(licen[cs]e|copying|notice)(\.(md|txt|markdown))?$/i;

/**
 * Lists the packages reachable from the npm imports of `info`'s module graph.
 * Type-only packages (`@types/…`) are left out: nothing of them is bundled.
 *
 * @returns the lock keys of the reachable packages, sorted
 */
export function reachable(info: DenoInfo): string[] {
  const seen = new Set<string>();
  const stack = info.modules.filter((m) => m.kind === "npm" && m.npmPackage).map((m) =>
    m.npmPackage!
  );
  while (stack.length) {
    const id = stack.pop()!;
    if (seen.has(id) || !info.npmPackages[id]) continue;
    seen.add(id);
    stack.push(...(info.npmPackages[id].dependencies ?? []));
  }
  return [...seen].filter((id) => !info.npmPackages[id].name.startsWith("@types/")).sort();
}

function licenseOf(pkg: Record<string, unknown>): string {
  const l = pkg.license ?? pkg.licenses;
  if (typeof l === "string") return l;
  if (Array.isArray(l)) {
    return l.map((x) => typeof x === "string" ? x : (x as { type?: string }).type).join(" OR ");
  }
  if (l && typeof l === "object") return (l as { type?: string }).type ?? "UNKNOWN";
  return "UNKNOWN";
}

function urlOf(pkg: Record<string, unknown>): string | undefined {
  if (typeof pkg.homepage === "string") return pkg.homepage;
  const repo = pkg.repository;
  if (typeof repo === "string") return repo;
  if (repo && typeof repo === "object") return (repo as { url?: string }).url;
  return undefined;
}

/**
 * Reads the runtime graph of `main.ts` and each package's licence.
 *
 * @throws {Error} if a package is missing from the npm cache (run `deno task bundle` first)
 */
export async function runtimePackages(): Promise<NpmPackage[]> {
  const run = async (args: string[]) => {
    const out = await new Deno.Command("deno", { args, cwd: ROOT, stderr: "inherit" }).output();
    if (!out.success) throw new Error(`Cannot run deno ${args.join(" ")}: exit ${out.code}`);
    return JSON.parse(new TextDecoder().decode(out.stdout));
  };
  const { npmCache } = await run(["info", "--json"]);
  const info: DenoInfo = await run(["info", "--json", "main.ts"]);
  const lock = JSON.parse(await Deno.readTextFile(`${ROOT}deno.lock`));
  const packages: NpmPackage[] = [];
  for (const id of reachable(info)) {
    const { name, version } = info.npmPackages[id];
    const dir = `${npmCache}/registry.npmjs.org/${name}/${version}`;
    let pkg: Record<string, unknown>;
    try {
      pkg = JSON.parse(await Deno.readTextFile(`${dir}/package.json`));
    } catch (e) {
      throw new Error(
        `Cannot read ${dir}/package.json: ${(e as Error).message}; run deno task bundle first`,
      );
    }
    const licenseTexts: Record<string, string> = {};
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isFile && LICENSE_FILE.test(entry.name)) {
        licenseTexts[entry.name] = await Deno.readTextFile(`${dir}/${entry.name}`);
      }
    }
    packages.push({
      name,
      version,
      license: licenseOf(pkg),
      url: urlOf(pkg),
      integrity: lock.npm?.[id]?.integrity,
      licenseTexts,
    });
  }
  return packages;
}

/** Formats THIRD_PARTY_NOTICES: a table of packages, then each licence text. */
export function notices(packages: NpmPackage[], product = "job-dispatcher"): string {
  const width = Math.max(...packages.map((p) => `${p.name}@${p.version}`.length));
  const lines = [
    `${product} bundles the following npm packages (the runtime graph of main.ts,`,
    "pinned in deno.lock). Each is listed with its licence, then the licence and",
    "notice files it ships.",
    "",
    ...packages.map((p) => `${`${p.name}@${p.version}`.padEnd(width)}  ${p.license}`),
  ];
  for (const p of packages) {
    lines.push("", "=".repeat(78), `${p.name}@${p.version} (${p.license})`);
    if (p.url) lines.push(p.url);
    const files = Object.entries(p.licenseTexts).sort(([a], [b]) => a.localeCompare(b));
    if (!files.length) lines.push("", "(the package ships no licence file)");
    for (const [file, text] of files) lines.push("", `--- ${file}`, "", text.trimEnd());
  }
  return lines.join("\n") + "\n";
}

function purl(p: NpmPackage): string {
  const name = p.name.startsWith("@") ? `%40${p.name.slice(1)}` : p.name;
  return `pkg:npm/${name}@${p.version}`;
}

/** Formats a CycloneDX 1.5 JSON SBOM of the runtime graph. */
export function cyclonedx(
  packages: NpmPackage[],
  meta: { version: string; timestamp?: string },
): unknown {
  const hash = (integrity?: string) => {
    const m = integrity?.match(/^sha512-(.+)$/);
    if (!m) return undefined;
    const bytes = Uint8Array.from(atob(m[1]), (c) => c.charCodeAt(0));
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
    return [{ alg: "SHA-512", content: hex }];
  };
  return {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    version: 1,
    metadata: {
      ...(meta.timestamp ? { timestamp: meta.timestamp } : {}),
      component: {
        type: "application",
        name: "job-dispatcher",
        version: meta.version,
        licenses: [{ license: { id: "Apache-2.0" } }],
      },
    },
    components: packages.map((p) => ({
      type: "library",
      "bom-ref": purl(p),
      name: p.name,
      version: p.version,
      purl: purl(p),
      licenses: /^[A-Za-z0-9.+-]+$/.test(p.license)
        ? [{ license: { id: p.license } }]
        : [{ expression: p.license }],
      ...(hash(p.integrity) ? { hashes: hash(p.integrity) } : {}),
      ...(p.url ? { externalReferences: [{ type: "website", url: p.url }] } : {}),
    })),
  };
}

if (import.meta.main) {
  const format = Deno.args[0];
  if (format !== "notices" && format !== "cyclonedx") {
    console.error("Usage: third_party.ts notices|cyclonedx");
    Deno.exit(2);
  }
  const packages = await runtimePackages();
  if (format === "notices") {
    console.log(notices(packages).trimEnd());
  } else {
    const { version } = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
    const bom = cyclonedx(packages, { version, timestamp: new Date().toISOString() });
    console.log(JSON.stringify(bom, null, 2));
  }
}
