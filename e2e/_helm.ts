/**
 * Helm as the chart suites run it: the helm built from its Go module
 * (tools/build.sh), its state in a temporary directory, never in $HOME.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import type { Cluster } from "./cluster.ts";
import { tempFile } from "./_fixtures.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** The built helm. */
export const HELM = `${ROOT}e2e/.bin/helm`;
/** The chart of this repository. */
export const CHART = `${ROOT}chart`;

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** Runs a command to its end and returns its exit code and output. */
export async function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string; clearEnv?: boolean } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(cmd, { args, stdin: "null", ...opts }).output();
  const text = new TextDecoder();
  return { code: out.code, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
}

let built: Promise<void> | undefined;

/**
 * Builds helm from its Go module once per test process (tools/build.sh skips
 * an up-to-date binary in about a second). Every helm call here awaits it, so
 * no suite relies on another suite, or on .ci/run, to have built helm first:
 * a fresh clone's `deno task test` once failed every chart-values step of
 * bad_input_test.ts, which ran before chart_test.ts built it.
 */
export function ensureHelm(): Promise<void> {
  built ??= run("bash", [`${ROOT}tools/build.sh`, "helm"]).then((r) => {
    if (r.code !== 0) {
      throw new Error(`Cannot build helm: tools/build.sh exited ${r.code}: ${r.stderr}`);
    }
  });
  return built;
}

/** The environment that keeps helm's state in `home`. */
function helmEnv(home: string, kubeconfig?: string): Record<string, string> {
  return {
    HELM_CACHE_HOME: `${home}/cache`,
    HELM_CONFIG_HOME: `${home}/config`,
    HELM_DATA_HOME: `${home}/data`,
    ...(kubeconfig ? { KUBECONFIG: kubeconfig } : {}),
  };
}

/** Runs helm with its state in `home`; returns its output, asserting exit 0. */
export function helmRunner(home: string, kubeconfig?: string) {
  const env = helmEnv(home, kubeconfig);
  return async (args: string[]): Promise<string> => {
    await ensureHelm();
    const r = await run(HELM, args, { env });
    assert.equal(r.code, 0, `helm ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
}

/** Runs helm with its state in `home`; returns how it ended, whatever that was. */
export function helmResult(home: string, kubeconfig?: string) {
  const env = helmEnv(home, kubeconfig);
  return async (args: string[]) => {
    await ensureHelm();
    return await run(HELM, args, { env });
  };
}

/** The objects of a multi-document manifest. */
export function objects(manifest: string): Obj[] {
  return parseAllDocuments(manifest).map((d) => d.toJS()).filter(Boolean);
}

/** The first object of `kind`, asserting there is one. */
export function find(objs: Obj[], kind: string): Obj {
  const o = objs.find((x) => x.kind === kind);
  assert.ok(o, `the manifest has a ${kind}`);
  return o;
}

/** A kubeconfig that authenticates as ServiceAccount `name` of `ns` (the chart's). */
export async function serviceAccountKubeconfig(
  cluster: Cluster,
  ns: string,
  name: string,
  server = cluster.server,
): Promise<string> {
  const r = await cluster.kubectl(["create", "token", name, "-n", ns]);
  assert.equal(r.code, 0, r.stderr);
  const ca = btoa(await Deno.readTextFile(`${cluster.dir}/pki/ca.crt`));
  const path = await tempFile(
    `apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "${server}", certificate-authority-data: ${ca}}}]
users: [{name: sa, user: {token: "${r.stdout.trim()}"}}]
contexts: [{name: sa, context: {cluster: e2e, user: sa}}]
current-context: sa
`,
    ".kubeconfig",
  );
  // Readable by the unprivileged user the read-only step runs as.
  await Deno.chmod(path, 0o644);
  return path;
}
