/**
 * `deno task cluster hook RELEASE -n NS`: runs a Helm release's hook for real
 * on the local control plane.
 *
 * kwok fakes every pod of its nodes, the chart's hook pod too: it "succeeds"
 * after a second without running the dispatcher, so `helm install` reports
 * deployed, `helm test` reads a rollout that never happened, and no per-node
 * Job exists. This does what the hook pod's kubelet would have done: reads
 * the hook Job Helm stored for the release (`helm get hooks`), fills each of
 * its volumes (ConfigMap and Secret, the template and the gate's token and
 * CA) into a local directory, rewrites the container's arguments from the
 * mount paths to those directories, expands `$(POD_NAME)` to the hook pod
 * kwok ran, and runs this checkout's dispatcher with them as the chart's
 * ServiceAccount (a token from the API server). The per-node Jobs are then
 * owned by the hook Job, as in the cluster.
 *
 * Not real: no container runtime (the dispatcher runs as a process of this
 * machine, so `--metrics-addr` binds a port here).
 *
 * @module
 */

import { parseAllDocuments, stringify } from "yaml";
import { dispatcherCommand } from "./_entry.ts";

const K8S = new URL(".bin/k8s", import.meta.url).pathname;
// The helm of e2e/_helm.ts, which this module cannot import (it reaches e2e/cluster.ts).
const HELM = new URL(".bin/helm", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** Options of {@linkcode runHook}. */
export interface HookOptions {
  /** The cluster directory (its admin kubeconfig and CA). */
  dir: string;
  /** The Helm release. */
  release: string;
  /** The release's namespace. */
  namespace: string;
}

/** What the hook's container would run: its arguments and environment, with local paths. */
export interface LocalHook {
  args: string[];
  env: Record<string, string>;
}

/**
 * The hook container's arguments and environment for a run on this machine:
 * every `--flag=VALUE` whose value is a path under a volume's mount path
 * names the same file under `dirs[mountPath]`; `$(VAR)` is expanded from the
 * container's env as the kubelet does (`$$` an escaped `$`), with the downward API's
 * `metadata.name` as `podName`. Pure.
 *
 * @throws {Error} when the env holds a source this cannot play
 */
export function localHook(job: Obj, dirs: Record<string, string>, podName: string): LocalHook {
  const c = job.spec.template.spec.containers[0];
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") env[e.name] = podName;
    else throw new Error(`Cannot play env ${e.name} of the hook: only values and metadata.name`);
  }
  const mounts = Object.keys(dirs).sort((a, b) => b.length - a.length);
  const args = (c.args as string[]).map((arg) => {
    // The kubelet's expansion: `$$` is an escaped `$` (`$$(VAR)` stays
    // `$(VAR)`), and a `$(VAR)` of no defined VAR stays as written.
    let out = arg.replace(
      /\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
      (m, v) => m === "$$" ? "$" : env[v] ?? m,
    );
    // Only a flag's whole value: a selector that mentions a path is not one.
    const eq = out.indexOf("=");
    const m = mounts.find((m) => out.startsWith(`${m}/`, eq + 1));
    if (out.startsWith("--") && eq > 0 && m) {
      out = `${out.slice(0, eq + 1)}${dirs[m]}${out.slice(eq + 1 + m.length)}`;
    }
    return out;
  });
  return { args, env };
}

/** Runs kubectl with the cluster's admin kubeconfig; returns stdout, throwing on failure. */
async function kubectl(dir: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(K8S, {
    args: ["kubectl", `--kubeconfig=${dir}/kubeconfig`, ...args],
    stdin: "null",
  }).output();
  const text = new TextDecoder();
  if (out.code !== 0) {
    throw new Error(`kubectl ${args.join(" ")} failed: ${text.decode(out.stderr).trim()}`);
  }
  return text.decode(out.stdout);
}

/** The release's hook objects as Helm stored them. */
async function storedHooks(o: HookOptions): Promise<Obj[]> {
  const out = await new Deno.Command(HELM, {
    args: ["get", "hooks", o.release, "-n", o.namespace],
    env: { KUBECONFIG: `${o.dir}/kubeconfig` },
    stdin: "null",
  }).output();
  const text = new TextDecoder();
  if (out.code !== 0) {
    throw new Error(
      `Cannot read the hooks of release ${o.release} in ${o.namespace}: ` +
        `${text.decode(out.stderr).trim()} (is it installed? helm -n ${o.namespace} list)`,
    );
  }
  return parseAllDocuments(text.decode(out.stdout)).map((d) => d.toJS()).filter(Boolean);
}

/** Writes each volume of the pod to a new directory; returns mount path -> directory. */
async function fillVolumes(
  o: HookOptions,
  hooks: Obj[],
  pod: Obj,
): Promise<Record<string, string>> {
  const dirs: Record<string, string> = {};
  const volumes = new Map((pod.spec.volumes ?? []).map((v: Obj) => [v.name, v]));
  for (const m of pod.spec.containers[0].volumeMounts ?? []) {
    const v = volumes.get(m.name) as Obj;
    const dir = await Deno.makeTempDir({ prefix: `hook-${m.name}-` });
    let data: Record<string, string>;
    if (v.configMap) {
      const stored = hooks.find((h) =>
        h.kind === "ConfigMap" && h.metadata.name === v.configMap.name
      );
      data = stored?.data ??
        JSON.parse(
          await kubectl(o.dir, ["get", "cm", v.configMap.name, "-n", o.namespace, "-o", "json"]),
        )
          .data;
    } else if (v.secret) {
      const s = JSON.parse(
        await kubectl(o.dir, [
          "get",
          "secret",
          v.secret.secretName,
          "-n",
          o.namespace,
          "-o",
          "json",
        ]),
      );
      data = Object.fromEntries(
        Object.entries(s.data ?? {}).map(([k, b]) => [k, atob(b as string)]),
      );
    } else throw new Error(`Cannot play volume ${m.name} of the hook: only configMap and secret`);
    const items: { key: string; path: string }[] = (v.configMap ?? v.secret).items ??
      Object.keys(data).map((key) => ({ key, path: key }));
    for (const { key, path } of items) await Deno.writeTextFile(`${dir}/${path}`, data[key]);
    dirs[m.mountPath] = dir;
  }
  return dirs;
}

/**
 * The hook's command line as printed, each argument quoted for sh: a
 * `--window=Sat,Sun 01:00-05:00 Europe/Berlin` copied from it stays one word.
 */
export function hookCommandLine(args: string[]): string {
  const quote = (a: string) =>
    /^[A-Za-z0-9_@%+=:,.\/-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`;
  return `job-dispatcher ${args.map(quote).join(" ")}`;
}

/** A kubeconfig of the cluster that authenticates as the ServiceAccount `sa`. */
async function serviceAccountConfig(o: HookOptions, sa: string): Promise<string> {
  const token = (await kubectl(o.dir, ["create", "token", sa, "-n", o.namespace])).trim();
  const admin = parseAllDocuments(await Deno.readTextFile(`${o.dir}/kubeconfig`))[0].toJS();
  admin.users = [{ name: "sa", user: { token } }];
  admin.contexts = [{ name: "sa", context: { cluster: admin.clusters[0].name, user: "sa" } }];
  admin["current-context"] = "sa";
  const path = await Deno.makeTempFile({ prefix: "hook-sa-", suffix: ".kubeconfig" });
  await Deno.writeTextFile(path, stringify(admin), { mode: 0o600 });
  return path;
}

/**
 * Runs the release's hook Job's dispatcher here, as its ServiceAccount, with
 * its own output on this terminal.
 *
 * @returns the dispatcher's exit code
 * @throws {Error} when the release, its hook Job or its pod cannot be read
 */
export async function runHook(o: HookOptions): Promise<number> {
  const hooks = await storedHooks(o);
  const job = hooks.find((h) => h.kind === "Job");
  if (!job) throw new Error(`Release ${o.release} has no hook Job: is it this chart's?`);
  const pod = job.spec.template;
  const pods = JSON.parse(
    await kubectl(o.dir, [
      ...["get", "pods", "-n", o.namespace, "-l", `job-name=${job.metadata.name}`, "-o", "json"],
    ]),
  );
  // kwok's fake pod of the hook Job: its name is what $(POD_NAME) gave the real one.
  const podName = pods.items[0]?.metadata?.name ?? `${job.metadata.name}-local`;
  const { args, env } = localHook(job, await fillVolumes(o, hooks, pod), podName);
  const kubeconfig = await serviceAccountConfig(o, pod.spec.serviceAccountName);
  console.error(`hook ${job.metadata.name}: ${hookCommandLine(args)}`);
  const child = new Deno.Command(Deno.execPath(), {
    args: [...dispatcherCommand(), ...args],
    cwd: ROOT,
    env: { ...env, KUBECONFIG: kubeconfig },
    stdin: "null",
  }).spawn();
  return (await child.status).code;
}
