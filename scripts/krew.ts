/**
 * The krew release artefacts: packs each binary that `scripts/compile.sh`
 * built (`dist/job-dispatcher-<target>`) as
 * `dist/kubectl-job_dispatcher-<target>.tar.gz` (the binary renamed
 * `kubectl-job_dispatcher`, and LICENSE: krew installs archives only), and
 * writes `dist/job-dispatcher.yaml`, the plugin manifest
 * (`scripts/krew/job-dispatcher.yaml`) with the version of deno.json and each
 * archive's SHA-256 filled in. The release uploads the archives and the
 * manifest; the manifest is what a krew index (or `kubectl krew install
 * --manifest=job-dispatcher.yaml`) reads.
 *
 * Usage: `deno task compile && deno task krew`.
 *
 * @module
 */

/** The plugin's name: `kubectl job-dispatcher`. */
export const PLUGIN = "job-dispatcher";

/**
 * The executable kubectl runs for {@linkcode PLUGIN}: kubectl finds plugins
 * as `kubectl-<name>` on PATH and reads `_` in that file name as `-` (a `-`
 * would split it into the subcommands `job dispatcher`).
 */
export const PLUGIN_BIN = `kubectl-${PLUGIN.replaceAll("-", "_")}`;

/** krew's `os`/`arch` selector labels (Go's GOOS/GOARCH) of each `deno compile --target`. */
export const KREW_PLATFORMS: Readonly<Record<string, { os: string; arch: string }>> = {
  "x86_64-unknown-linux-gnu": { os: "linux", arch: "amd64" },
  "aarch64-unknown-linux-gnu": { os: "linux", arch: "arm64" },
  "x86_64-apple-darwin": { os: "darwin", arch: "amd64" },
  "aarch64-apple-darwin": { os: "darwin", arch: "arm64" },
};

/**
 * The release targets of `scripts/compile.sh`: its `TARGETS=(…)` line.
 *
 * @example
 * ```ts
 * compileTargets("TARGETS=(x86_64-unknown-linux-gnu aarch64-apple-darwin)");
 * // ["x86_64-unknown-linux-gnu", "aarch64-apple-darwin"]
 * ```
 * @throws {SyntaxError} when the script has no such line
 */
export function compileTargets(script: string): string[] {
  const m = script.match(/^TARGETS=\(([^)]*)\)/m);
  if (!m) throw new SyntaxError("Cannot read scripts/compile.sh: no TARGETS=(...) line");
  return m[1].trim().split(/\s+/);
}

/** The archive of one target, as the manifest's `uri` names it. */
export function archiveName(target: string): string {
  return `${PLUGIN_BIN}-${target}.tar.gz`;
}

/**
 * Fills the manifest template: `{{version}}`, and `{{sha256 <target>}}` from
 * `sums`.
 *
 * @throws {RangeError} when a target of the template has no sum, or a sum is no SHA-256
 */
export function fillManifest(
  template: string,
  version: string,
  sums: Readonly<Record<string, string>>,
): string {
  return template.replaceAll("{{version}}", version).replace(
    /\{\{sha256 ([^}]+)\}\}/g,
    (_, target: string) => {
      const sum = sums[target];
      if (!sum || !/^[0-9a-f]{64}$/.test(sum)) {
        throw new RangeError(
          `Cannot fill the krew manifest: no SHA-256 of ${archiveName(target)} ` +
            `(build it: deno task compile ${target} && deno task krew)`,
        );
      }
      return sum;
    },
  );
}

/** The lowercase hex SHA-256 of `bytes`. */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Packs `dist/job-dispatcher-<target>` and LICENSE into its archive; returns the archive's SHA-256. */
async function pack(target: string): Promise<string> {
  const binary = `dist/job-dispatcher-${target}`;
  try {
    await Deno.stat(binary);
  } catch {
    throw new Error(
      `Cannot pack ${archiveName(target)}: no ${binary} (deno task compile ${target})`,
    );
  }
  const dir = await Deno.makeTempDir({ prefix: "krew-" });
  try {
    await Deno.copyFile(binary, `${dir}/${PLUGIN_BIN}`);
    await Deno.chmod(`${dir}/${PLUGIN_BIN}`, 0o755);
    await Deno.copyFile("LICENSE", `${dir}/LICENSE`);
    // Fixed owner and time: the same binary packs to the same sum.
    const tar = await new Deno.Command("tar", {
      args: [
        ...["--owner=0", "--group=0", "--numeric-owner", "--mtime=@0"],
        ...["-czf", `dist/${archiveName(target)}`, "-C", dir, PLUGIN_BIN, "LICENSE"],
      ],
    }).output();
    if (!tar.success) {
      throw new Error(
        `Cannot pack ${archiveName(target)}: ${new TextDecoder().decode(tar.stderr)}`,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  return await sha256Hex(await Deno.readFile(`dist/${archiveName(target)}`));
}

async function main(): Promise<void> {
  const targets = compileTargets(await Deno.readTextFile("scripts/compile.sh"));
  const sums: Record<string, string> = {};
  for (const target of targets) {
    sums[target] = await pack(target);
    console.log(`packed dist/${archiveName(target)}: sha256 ${sums[target]}`);
  }
  const version = JSON.parse(await Deno.readTextFile("deno.json")).version;
  const template = await Deno.readTextFile(`scripts/krew/${PLUGIN}.yaml`);
  await Deno.writeTextFile(`dist/${PLUGIN}.yaml`, fillManifest(template, version, sums));
  console.log(`wrote dist/${PLUGIN}.yaml (v${version}, ${targets.length} platforms)`);
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`error: ${(e as Error).message}`);
    Deno.exit(1);
  }
}
