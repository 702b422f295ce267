/**
 * Helpers of the fault and bad-input suites: a dispatcher process the test
 * can watch and kill at a chosen moment, a seeded random source for
 * replayable trials, and kubeconfigs for other users or through a proxy.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parse, stringify } from "yaml";
import type { Cluster, CommandResult, NodeSpec } from "./cluster.ts";
import { dispatcherCommand, eventually } from "./_dispatcher.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** The node label the suites select their own nodes by. */
export const SUITE = "e2e.job-dispatcher.io/suite";

/**
 * A seeded random source (mulberry32): the same seed gives the same numbers,
 * so a failing trial can be replayed.
 *
 * @example
 * ```ts
 * const random = seeded(7);
 * random(); // a number in [0, 1), the same for seed 7 every time
 * ```
 */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` node specs named `<suite>-000`, … labelled with the suite. */
export function suiteNodes(
  suite: string,
  count: number,
  extra: Partial<NodeSpec> = {},
  first = 0,
): NodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `${suite}-${String(first + i).padStart(3, "0")}`,
    ...extra,
    labels: { [SUITE]: suite, ...extra.labels },
  }));
}

/** Creates a namespace and waits for its default ServiceAccount, which pods need. */
export async function namespace(cluster: Cluster, name: string): Promise<string> {
  const r = await cluster.kubectl(["create", "namespace", name]);
  assert.equal(r.code, 0, r.stderr);
  await eventually(
    async () =>
      (await cluster.kubectl(["get", "serviceaccount", "default", "-n", name])).code === 0,
    30_000,
    `serviceaccount default in ${name}`,
  );
  return name;
}

/** Writes `text` to a new temporary file and returns its path. */
export async function tempFile(text: string, suffix = ".yaml"): Promise<string> {
  const path = await Deno.makeTempFile({ prefix: "e2e-faults-", suffix });
  await Deno.writeTextFile(path, text);
  return path;
}

/** Creates a suspended owner Job (it never runs a pod, as a Helm hook owns a rollout); returns its UID. */
export async function ownerJob(cluster: Cluster, ns: string, name: string): Promise<string> {
  const r = await cluster.kubectl(
    ["apply", "-f", "-"],
    `apiVersion: batch/v1
kind: Job
metadata: {name: ${name}, namespace: ${ns}}
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers: [{name: hook, image: registry.invalid/hook:1}]
`,
  );
  assert.equal(r.code, 0, r.stderr);
  const uid = await cluster.kubectl([
    "get",
    "job",
    name,
    "-n",
    ns,
    "-o",
    "jsonpath={.metadata.uid}",
  ]);
  return uid.stdout.trim();
}

/**
 * Writes a kubeconfig for `cluster`: the admin's certificate by default, or a
 * bearer `token`; `server` replaces the API server's URL (a proxy), and
 * `namespace` becomes the context's namespace.
 */
export async function kubeconfigFor(
  cluster: Cluster,
  opts: { server?: string; token?: string; namespace?: string } = {},
): Promise<string> {
  const kc = parse(await Deno.readTextFile(cluster.kubeconfig));
  if (opts.server) { for (const c of kc.clusters) c.cluster.server = opts.server; }
  if (opts.token !== undefined) {
    kc.users = [{ name: kc.users[0].name, user: { token: opts.token } }];
  }
  if (opts.namespace) { for (const c of kc.contexts) c.context.namespace = opts.namespace; }
  return await tempFile(stringify(kc));
}

/**
 * Creates ServiceAccount `name` in `ns` bound to the README's RBAC rules (or
 * none, with `rbac: false`) and returns a token kubeconfig for it.
 */
export async function serviceAccount(
  cluster: Cluster,
  ns: string,
  name: string,
  opts: { rbac?: boolean; server?: string } = {},
): Promise<{ kubeconfig: string; user: string }> {
  const sa = `apiVersion: v1
kind: ServiceAccount
metadata: {name: ${name}, namespace: ${ns}}
`;
  const rbac = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-faults-${ns}-${name}}
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-faults-${ns}-${name}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-faults-${ns}-${name}}
subjects: [{kind: ServiceAccount, name: ${name}, namespace: ${ns}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: e2e-faults-${name}, namespace: ${ns}}
rules:
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, watch, create, delete]
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: e2e-faults-${name}, namespace: ${ns}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: e2e-faults-${name}}
subjects: [{kind: ServiceAccount, name: ${name}, namespace: ${ns}}]
`;
  const applied = await cluster.kubectl(["apply", "-f", "-"], opts.rbac === false ? sa : sa + rbac);
  assert.equal(applied.code, 0, applied.stderr);
  const user = `system:serviceaccount:${ns}:${name}`;
  if (opts.rbac !== false) {
    // The authorizer's view of new bindings can lag a moment behind the write.
    await eventually(
      async () =>
        (await cluster.kubectl(["auth", "can-i", "create", "jobs", "-n", ns, "--as", user]))
          .stdout.trim() === "yes",
      30_000,
      `RBAC for ${user}`,
    );
  }
  const token = await cluster.kubectl(["create", "token", name, "-n", ns]);
  assert.equal(token.code, 0, token.stderr);
  const kubeconfig = await kubeconfigFor(cluster, {
    token: token.stdout.trim(),
    namespace: ns,
    server: opts.server,
  });
  return { kubeconfig, user };
}

/** How a {@linkcode DispatcherProcess} ended. */
export interface Ended extends CommandResult {
  /** Whether the test's time bound killed it. */
  timedOut: boolean;
  /** How long it ran, in ms. */
  ms: number;
}

/**
 * The dispatcher as a subprocess the test can follow line by line and signal
 * at a moment of its choosing, bounded by a timeout so that nothing hangs.
 */
export class DispatcherProcess {
  #child: Deno.ChildProcess;
  #stderr = "";
  #waiters: { test: (stderr: string) => boolean; resolve: () => void }[] = [];
  #timer?: ReturnType<typeof setTimeout>;
  #timedOut = false;
  #started = Date.now();
  /** Resolves when the process exits. */
  readonly ended: Promise<Ended>;

  /**
   * Starts the dispatcher with `args`.
   *
   * @param opts.kubeconfig the kubeconfig (default: the cluster's admin one)
   * @param opts.timeoutMs SIGKILL after this long (default 180 s)
   */
  constructor(
    cluster: Cluster,
    args: string[],
    opts: { kubeconfig?: string; timeoutMs?: number; env?: Record<string, string> } = {},
  ) {
    const child = new Deno.Command(Deno.execPath(), {
      args: [...dispatcherCommand(), ...args],
      cwd: ROOT,
      env: { KUBECONFIG: opts.kubeconfig ?? cluster.kubeconfig, NO_COLOR: "1", ...opts.env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    this.#timer = setTimeout(() => {
      this.#timedOut = true;
      this.kill("SIGKILL");
    }, opts.timeoutMs ?? 180_000);
    const stdout = new Response(child.stdout).text();
    const readErr = (async () => {
      for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
        this.#stderr += chunk;
        this.#waiters = this.#waiters.filter((w) => {
          if (!w.test(this.#stderr)) return true;
          w.resolve();
          return false;
        });
      }
    })();
    this.ended = (async () => {
      const [status] = await Promise.all([child.status, readErr]);
      clearTimeout(this.#timer);
      return {
        code: status.code,
        stdout: await stdout,
        stderr: this.#stderr,
        timedOut: this.#timedOut,
        ms: Date.now() - this.#started,
      };
    })();
  }

  /** What it wrote to stderr so far. */
  get stderr(): string {
    return this.#stderr;
  }

  /**
   * Resolves true once stderr matches `when` (a pattern, or a test of the
   * whole stderr so far), or false if the process ends first.
   */
  async waitFor(when: RegExp | ((stderr: string) => boolean)): Promise<boolean> {
    const test = when instanceof RegExp ? (s: string) => when.test(s) : when;
    if (test(this.#stderr)) return true;
    const matched = new Promise<boolean>((resolve) =>
      this.#waiters.push({ test, resolve: () => resolve(true) })
    );
    return await Promise.race([matched, this.ended.then(() => test(this.#stderr))]);
  }

  /** Sends `signal`; a process that already exited is left alone. */
  kill(signal: Deno.Signal): void {
    try {
      this.#child.kill(signal);
    } catch { /* already exited */ }
  }
}

/** Runs the dispatcher to its end, bounded by `timeoutMs`. */
export function runDispatcher(
  cluster: Cluster,
  args: string[],
  opts: { kubeconfig?: string; timeoutMs?: number; env?: Record<string, string> } = {},
): Promise<Ended> {
  return new DispatcherProcess(cluster, args, opts).ended;
}

/** The error lines of a text log. */
export function errorLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => /^\d\d:\d\d:\d\d error: /.test(l));
}

/** The `failed node <name>: <reason>` lines of a summary, by node. */
export function failedNodes(stderr: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of stderr.matchAll(/failed node (\S+): (.*)/g)) out.set(m[1], m[2]);
  return out;
}

/** The number the dispatcher reports as `the API server throttled N requests (429)`, or 0. */
export function throttledCount(stderr: string): number {
  return Number(stderr.match(/the API server throttled (\d+) requests \(429\)/)?.[1] ?? 0);
}

/** A test of stderr: at least `n` lines match `re` (which must not be global). */
export function atLeast(n: number, re: RegExp): (stderr: string) => boolean {
  return (stderr) => stderr.split("\n").filter((l) => re.test(l)).length >= n;
}
