/**
 * The recipes of examples/, each as a reader would use it, on one control
 * plane with kwok nodes for each recipe's pool:
 * - every Job template parses (the dispatcher's own check);
 * - every values-*.yaml renders with `helm template`, with the `--set-file`
 *   its header comment gives;
 * - every command of each run.sh passes `--dry-run=plan` and then rolls out
 *   to the end on the kwok nodes, checked by what the recipe promises (labels
 *   set and taints lifted, then removed by the uninstall; the validator pod
 *   check and the real Prometheus gate; the window and the kernel label; the
 *   audit's report naming every node);
 * - a recipe's chart values run for real: `helm install` on kwok fakes the
 *   hook pod (no per-node Job), and `deno task cluster hook` then runs the
 *   hook's own dispatcher arguments (e2e/_hook.ts).
 *
 * The commands run as written, from the repository's root, but for the values
 * that only fit a real cluster ({@linkcode LOCAL}): the window (open now),
 * hour-long soaks and delays (a second), Prometheus's address and a query
 * over this test's exporter, and the report and pause
 * file paths (a scratch directory).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Cluster } from "./cluster.ts";
import { clusterTest, namespace, tempDir } from "./_fixtures.ts";
import { dispatcher, eventually, jobsIn } from "./_dispatcher.ts";
import { CHART, find, helmResult, objects } from "./_helm.ts";
import { startExporter, startPrometheus, untilSamples } from "./_prometheus.ts";
import { OUTCOME_LABEL } from "./_nodes.ts";
import { parseJobTemplate } from "../job.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const EXAMPLES = `${ROOT}examples`;
const RECIPES = ["runtime-installer", "gpu-driver-upgrade", "kernel-patch-reboot", "node-audit"];
const KATA = "katacontainers.io/kata-runtime";
const KATA_TAINT = "katacontainers.io/kata-not-ready";

/**
 * The commands of a run.sh: each `job-dispatcher …` line with its
 * continuations, split into words as sh does for plain and quoted words.
 */
function commandsOf(script: string): string[][] {
  const joined = script.replace(/\\\n/g, " ");
  return joined.split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("job-dispatcher "))
    .map((l) =>
      [...l.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]).slice(1)
    );
}

/** `args` with the value of each flag in `values` replaced (flags given as `--flag value`). */
function localArgs(args: string[], values: Record<string, string>): string[] {
  return args.map((a, i) => (i > 0 && args[i - 1] in values ? values[args[i - 1]] : a));
}

/** The run.sh commands of a recipe. */
async function recipeCommands(recipe: string): Promise<string[][]> {
  return commandsOf(await Deno.readTextFile(`${EXAMPLES}/${recipe}/run.sh`));
}

/** Runs a recipe's command from the repository's root; asserts its exit code. */
async function dispatch(cluster: Cluster, args: string[], code = 0) {
  const r = await dispatcher(cluster, [...args, "--progress-interval-secs", "1"]);
  assert.equal(r.code, code, `job-dispatcher ${args.join(" ")}\n${r.stderr.slice(-3000)}`);
  return r;
}

/** The node's labels and taint keys. */
async function nodeView(cluster: Cluster, node: string) {
  const r = await cluster.kubectl(["get", "node", node, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  const n = JSON.parse(r.stdout);
  return {
    labels: n.metadata.labels as Record<string, string>,
    taints: (n.spec.taints ?? []).map((t: { key: string }) => t.key) as string[],
    cordoned: n.spec.unschedulable === true,
  };
}

/** Every node's labels and annotations, by node. */
async function nodeMarks(cluster: Cluster): Promise<Record<string, unknown>> {
  const r = await cluster.kubectl(["get", "nodes", "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return Object.fromEntries(
    JSON.parse(r.stdout).items.map((
      n: { metadata: { name: string; labels: unknown; annotations: unknown } },
    ) => [n.metadata.name, [n.metadata.labels, n.metadata.annotations]]),
  );
}

/** Every node of the suite. */
const ALL = () => [...POOLS.kata, ...POOLS.gpu, ...POOLS.worker];

/** The nodes of each recipe's pool. */
const POOLS = {
  kata: ["kata-000", "kata-001", "kata-002"],
  gpu: ["gpu-000", "gpu-001", "gpu-002", "gpu-003"],
  worker: ["worker-000", "worker-001", "worker-002"],
};

async function createPools(cluster: Cluster) {
  await cluster.createNodes([
    ...POOLS.kata.map((name) => ({
      name,
      labels: { "node.example.com/pool": "kata" },
      taints: [{ key: KATA_TAINT, effect: "NoSchedule" as const }],
      // What containerd reports once the installer added the handler.
      runtimeHandlers: ["runc", "kata-qemu"],
    })),
    ...POOLS.gpu.map((name) => ({ name, labels: { "nvidia.com/gpu.present": "true" } })),
    ...POOLS.worker.map((name) => ({ name, labels: { "node-role.kubernetes.io/worker": "" } })),
  ]);
}

clusterTest("examples: every recipe parses, plans and rolls out", async (t, cluster) => {
  await createPools(cluster);
  for (const ns of ["kata-system", "gpu-operator", "node-maintenance", "node-audit"]) {
    await namespace(cluster, ns);
  }
  const scratch = await tempDir("examples-");

  await t.step("every template parses and every values file renders", async () => {
    for (const recipe of RECIPES) await templatesAndValues(recipe);
  });

  await t.step("runtime installer: labels, lifts the taint; the uninstall undoes it", async () => {
    const [install, uninstall] = await recipeCommands("runtime-installer");
    await dispatch(cluster, [...install, "--dry-run=plan"]);
    await dispatch(cluster, install);
    for (const node of POOLS.kata) {
      const v = await nodeView(cluster, node);
      assert.equal(v.labels[KATA], "true", node);
      assert.ok(!v.taints.includes(KATA_TAINT), `${node} keeps the start-up taint`);
    }
    // A re-run finds every node done: no Job.
    const again = await dispatch(cluster, install);
    assert.match(again.stderr, /nothing to do: all 3 selected nodes are already done/);
    await dispatch(cluster, [...uninstall, "--dry-run=plan"]);
    await dispatch(cluster, uninstall);
    for (const node of POOLS.kata) {
      assert.equal((await nodeView(cluster, node)).labels[KATA], undefined, node);
    }
  });

  await t.step("GPU driver upgrade: waves, drain, validator pods, a Prometheus gate", async () => {
    await gpuUpgrade(cluster, scratch);
  });

  await t.step("kernel patch: in the window, 2 at most unavailable, labelled", async () => {
    const [patch] = await recipeCommands("kernel-patch-reboot");
    const args = localArgs(patch, {
      // Open now: the whole day.
      "--window": "* 00:00-24:00 UTC",
      "--post-node-delay-secs": "1",
    });
    const plan = await dispatch(cluster, [...args, "--dry-run=plan"]);
    assert.match(plan.stdout + plan.stderr, /window/i);
    // Outside the window, nothing starts and the run says so: exit 4.
    const closed = await dispatch(cluster, localArgs(patch, { "--window": closedWindow() }), 4);
    assert.match(closed.stderr, /window/);
    assert.deepEqual(await jobsIn(cluster, "node-maintenance"), [], "no Job outside the window");
    const agents = await cluster.kubectl(["apply", "-f", "-"], nodeAgentDaemonSet());
    assert.equal(agents.code, 0, agents.stderr);
    const reboots = fakeReboots(cluster, "node-maintenance");
    let r;
    try {
      r = await dispatch(cluster, args);
    } finally {
      await reboots.stop();
    }
    assert.deepEqual(reboots.early(), [], "labelled or uncordoned before the node rebooted");
    assert.deepEqual(reboots.rebooted(), POOLS.worker, "every node rebooted");
    assert.match(r.stderr, /cordon, drain, Job, .*max-unavailable 2/);
    for (const node of POOLS.worker) {
      const v = await nodeView(cluster, node);
      assert.equal(v.labels["node.example.com/kernel"], "6.8.0-90", node);
      assert.equal(v.cordoned, false, `${node} left cordoned`);
    }
  });

  await t.step("node audit: every node reported, nothing written on the nodes", async () => {
    const [audit] = await recipeCommands("node-audit");
    const report = `${scratch}/audit.html`;
    const args = localArgs(audit, { "--report": report });
    const before = await nodeMarks(cluster);
    await dispatch(cluster, [...args, "--dry-run=plan"]);
    await dispatch(cluster, args);
    const html = await Deno.readTextFile(report);
    for (const node of ALL()) assert.ok(html.includes(node), `the report names ${node}`);
    assert.deepEqual(await nodeMarks(cluster), before, "the audit wrote nothing on the nodes");
  });

  await t.step("the chart on kwok: hook faked, `cluster hook` runs it for real", async () => {
    await chartForReal(cluster);
  });
}, { nodes: 0 });

/**
 * Flags of a run.sh command the chart's hook cannot take or sets itself:
 * the namespace (helm -n), the template (--set-file), a bastion's files.
 * A value here must be said in the values file's comments.
 */
const BASTION_ONLY = new Set([
  "-n",
  "--job-template",
  "--report",
  "--report-format",
  "--pause-file",
  "--cleanup-job-template",
]);

/** Defaults the chart spells out that the dispatcher has too (cli/options.ts). */
const CLI_DEFAULTS: Record<string, string> = { "--gate-interval-secs": "30" };

/** `--flag value` / `--flag=value` / `--flag` words as flag -> value ("" for a switch). */
function flagMap(words: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    if (!w.startsWith("-")) continue;
    const eq = w.indexOf("=");
    if (eq > 0) out.set(w.slice(0, eq), w.slice(eq + 1));
    else if (words[i + 1] !== undefined && !words[i + 1].startsWith("-")) out.set(w, words[++i]);
    else out.set(w, "");
  }
  return out;
}

/** The dispatcher's arguments of the chart's hook Job, rendered with `helm template`. */
async function hookArgs(args: string[]): Promise<Map<string, string>> {
  const home = await Deno.makeTempDir({ prefix: "helm-examples-" });
  const r = await helmResult(home)(["template", "x", CHART, "-n", "ns", ...args]);
  assert.equal(r.code, 0, r.stderr);
  const hook = objects(r.stdout).find((o) =>
    o.kind === "Job" && o.spec.template.spec.containers[0].args?.includes("--log-format=json")
  );
  assert.ok(hook, "the hook Job");
  return flagMap(hook.spec.template.spec.containers[0].args);
}

Deno.test("examples: each values file runs the first command of its run.sh", async () => {
  const wrong: string[] = [];
  const check = (ok: boolean, what: string) => ok || wrong.push(what);
  for (const recipe of RECIPES) {
    const values = `${EXAMPLES}/${recipe}/values-${recipe}.yaml`;
    const header = await Deno.readTextFile(values);
    const setFiles = [...header.matchAll(/--set-file (\S+)=(\S+)/g)]
      .flatMap((m) => ["--set-file", `${m[1]}=${ROOT}${m[2]}`]);
    const chart = await hookArgs(["-f", values, ...setFiles]);
    const defaults = await hookArgs(setFiles);
    const [command] = await recipeCommands(recipe);
    const shell = flagMap(command);
    for (const [flag, value] of shell) {
      if (BASTION_ONLY.has(flag)) continue;
      check(
        chart.get(flag) === value,
        `${recipe}: run.sh has ${flag} ${value}, the values file ${flag}=${chart.get(flag)}`,
      );
    }
    for (const [flag, value] of chart) {
      if (defaults.get(flag) === value || flag === "--owner-job-name") continue;
      // The chart writes the dispatcher's own default where the bastion leaves it out.
      if (CLI_DEFAULTS[flag] === value && !shell.has(flag)) continue;
      check(
        shell.get(flag) === value,
        `${recipe}: the values file sets ${flag}=${value}, run.sh ${shell.get(flag) ?? "does not"}`,
      );
    }
    for (const flag of shell.keys()) {
      if (BASTION_ONLY.has(flag) && !["-n", "--job-template"].includes(flag)) {
        check(
          header.includes(flag),
          `${recipe}: the values file does not say what replaces ${flag}`,
        );
      }
    }
  }
  assert.deepEqual(wrong, [], "run.sh and the values file disagree");
});

Deno.test("examples: the sshd audit fails a node whose drop-in allows password logins", async () => {
  // Ubuntu's cloud images: sshd_config includes sshd_config.d/*.conf first,
  // and 50-cloud-init.conf there may say yes; sshd takes the first value.
  const { parse } = await import("yaml");
  const job = parse(await Deno.readTextFile(`${EXAMPLES}/node-audit/audit.yaml`));
  const [sh, c, script] = job.spec.template.spec.containers[0].command as string[];
  const dir = await tempDir("sshd-");
  await Deno.mkdir(`${dir}/sshd_config.d`);
  await Deno.writeTextFile(
    `${dir}/sshd_config`,
    "Include /etc/ssh/sshd_config.d/*.conf\n#PasswordAuthentication yes\n",
  );
  const audit = async () =>
    (await new Deno.Command(sh, { args: [c, script.replaceAll("/host/etc/ssh", dir)] }).output())
      .code;
  assert.equal(await audit(), 0, "no password logins: the node passes");
  await Deno.writeTextFile(
    `${dir}/sshd_config.d/50-cloud-init.conf`,
    "PasswordAuthentication yes\n",
  );
  assert.notEqual(await audit(), 0, "a drop-in allows password logins: the node fails");
});

/** A window of today's UTC hours that is closed now. */
function closedWindow(): string {
  const h = new Date().getUTCHours();
  const at = (x: number) => `${String(x % 24).padStart(2, "0")}:00`;
  return `* ${at(h + 2)}-${at(h + 3)} UTC`;
}

/** A recipe's templates parse; its values file renders with its own --set-file. */
async function templatesAndValues(recipe: string) {
  for (const args of await recipeCommands(recipe)) {
    args.forEach((a, i) => {
      if (!/^--(job|cleanup-job|verify-job)-template$/.test(args[i - 1] ?? "")) return;
      parseJobTemplate(Deno.readTextFileSync(`${ROOT}${a}`), a);
    });
  }
  const values = `${EXAMPLES}/${recipe}/values-${recipe}.yaml`;
  const header = await Deno.readTextFile(values);
  const setFiles = [...header.matchAll(/--set-file (\S+)=(\S+)/g)]
    .flatMap((m) => ["--set-file", `${m[1]}=${ROOT}${m[2]}`]);
  assert.ok(setFiles.length, `${values} says which --set-file to pass`);
  const home = await Deno.makeTempDir({ prefix: "helm-examples-" });
  const r = await helmResult(home)([
    "template",
    recipe,
    CHART,
    "-n",
    "ns",
    "-f",
    values,
    ...setFiles,
  ]);
  assert.equal(r.code, 0, `helm template ${values}: ${r.stderr}`);
  const hook = find(objects(r.stdout), "Job");
  assert.ok(hook.spec.template.spec.containers[0].args.length > 5, recipe);
}

/**
 * The GPU recipe with a validator DaemonSet (its pods stay Ready: outcome
 * "serve") and a stand-in for the GPU operator: a node's validator pod
 * restarts once the node's driver Job is complete, as the real one does after
 * the driver reloads. Prometheus: the real one, scraping this test's
 * exporter: its gauge (unready pods) is 1 when the run starts, then 0.
 */
async function gpuUpgrade(cluster: Cluster, scratch: string) {
  const ns = "gpu-operator";
  const ds = await cluster.kubectl(["apply", "-f", "-"], validatorDaemonSet(ns));
  assert.equal(ds.code, 0, ds.stderr);
  await eventually(
    async () => (await validatorsReady(cluster, ns)) === POOLS.gpu.length,
    60_000,
    "validators Ready",
  );
  const exporter = startExporter("gpu_unready_pods");
  // The recipe's --gate-alerts must name a rule Prometheus has: it fires with the gauge.
  const rules = `groups:
  - name: gpu
    rules:
      - alert: GPUValidatorUnready
        expr: gpu_unready_pods > 0
`;
  const prom = await startPrometheus({ targets: [exporter.target], rules });
  const operator = fakeGpuOperator(cluster, ns);
  try {
    await untilSamples(prom, "gpu_unready_pods", (n) => n === 1);
    const [upgrade] = await recipeCommands("gpu-driver-upgrade");
    const report = `${scratch}/gpu.json`;
    const pause = `${scratch}/gpu.pause`;
    const args = localArgs(upgrade, {
      "--wave-soak-secs": "1",
      "--gate-prometheus-url": prom.url,
      "--gate-query": "gpu_unready_pods > 0",
      "--report": report,
      "--pause-file": pause,
    });
    // Two seconds, Prometheus scraping every one: a measurement is out half
    // the time, so the lift below lands on one often (gates/gate.ts asks again).
    args.push("--gate-interval-secs", "2");
    await dispatch(cluster, [...args, "--dry-run=plan"]);
    // Pods unready before the first Job: the gate pauses the run (the pause
    // file), no node is touched; healthy again and the pause lifted, it goes on.
    exporter.set(1);
    await untilSamples(prom, "gpu_unready_pods > 0", (n) => n === 1);
    const running = dispatch(cluster, args);
    await eventually(() => exists(pause), 60_000, "the breach pauses the run");
    assert.deepEqual(await jobsIn(cluster, ns), [], "no Job while pods are unready");
    exporter.set(0);
    await untilSamples(prom, "gpu_unready_pods > 0", (n) => n === 0);
    await untilSamples(prom, 'ALERTS{alertstate="firing"}', (n) => n === 0);
    await Deno.remove(pause);
    const r = await running;
    assert.match(r.stderr, /wave/i);
    const json = JSON.parse(await Deno.readTextFile(report));
    assert.equal(JSON.stringify(json).includes("gpu-003"), true, "the report names every node");
    for (const node of POOLS.gpu) assert.equal((await nodeView(cluster, node)).cordoned, false);
    assert.deepEqual(operator.restarted(), POOLS.gpu, "every node's validator restarted");
  } finally {
    await operator.stop();
    await prom.stop();
    await exporter.stop();
  }
}

/**
 * The kernel Job's reboot as a node does it: a few seconds after the Job is
 * complete (systemd-run --on-active), the node goes NotReady, comes back,
 * and its pods restart. What the dispatcher did to the node before that
 * moment is recorded: a label or an uncordon then is on the old kernel.
 */
function fakeReboots(cluster: Cluster, ns: string) {
  const rebooted = new Set<string>();
  const early: string[] = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      for (const j of await jobsIn(cluster, ns)) {
        if (!j.complete || rebooted.has(j.node) || !j.name.startsWith("kernel-")) continue;
        rebooted.add(j.node);
        await new Promise((r) => setTimeout(r, 3000));
        const v = await nodeView(cluster, j.node);
        if (v.labels["node.example.com/kernel"] || !v.cordoned) early.push(j.node);
        await cluster.setNodeReady(j.node, false);
        await cluster.setNodeReady(j.node, true);
        await cluster.kubectl([
          ...["delete", "pod", "-n", "kube-system", "-l", "k8s-app=kube-proxy"],
          ...["--field-selector", `spec.nodeName=${j.node}`, "--wait=false"],
        ]);
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return {
    rebooted: () => [...rebooted].sort(),
    early: () => early.sort(),
    stop: async () => {
      stop = true;
      await loop;
    },
  };
}

/** A node agent on every worker (kube-proxy's labels): its pod restarts with its node. */
function nodeAgentDaemonSet(): string {
  return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kube-proxy, namespace: kube-system}
spec:
  selector: {matchLabels: {k8s-app: kube-proxy}}
  template:
    metadata:
      labels: {k8s-app: kube-proxy}
      annotations: {${OUTCOME_LABEL}: serve}
    spec:
      nodeSelector: {node-role.kubernetes.io/worker: ""}
      containers: [{name: kube-proxy, image: registry.invalid/kube-proxy:1}]
`;
}

/** Whether a file exists. */
async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/**
 * A stand-in for the GPU operator: once a node's driver Job is complete, the
 * node's validator pod restarts (deleted; its DaemonSet makes a new one, which
 * kwok makes Ready), as the real validator does after the driver reloads.
 */
function fakeGpuOperator(cluster: Cluster, ns: string) {
  const restarted = new Set<string>();
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      for (const j of await jobsIn(cluster, ns)) {
        if (!j.complete || restarted.has(j.node) || !j.name.startsWith("gpu-driver")) continue;
        restarted.add(j.node);
        await cluster.kubectl([
          ...["delete", "pod", "-n", ns, "-l", "app=nvidia-operator-validator"],
          ...["--field-selector", `spec.nodeName=${j.node}`, "--wait=false"],
        ]);
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  return {
    restarted: () => [...restarted].sort(),
    stop: async () => {
      stop = true;
      await loop;
    },
  };
}

/** The GPU operator's validator DaemonSet, on the GPU nodes, its pods kept Running by kwok. */
function validatorDaemonSet(ns: string): string {
  return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-operator-validator, namespace: ${ns}}
spec:
  selector: {matchLabels: {app: nvidia-operator-validator}}
  template:
    metadata:
      labels: {app: nvidia-operator-validator}
      annotations: {${OUTCOME_LABEL}: serve}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      containers: [{name: validator, image: registry.invalid/validator:1}]
`;
}

/** How many validator pods are Ready. */
async function validatorsReady(cluster: Cluster, ns: string): Promise<number> {
  const r = await cluster.kubectl([
    "get",
    "pods",
    "-n",
    ns,
    "-l",
    "app=nvidia-operator-validator",
    "-o",
    "json",
  ]);
  if (r.code !== 0) return 0;
  return JSON.parse(r.stdout).items.filter((
    p: { status?: { conditions?: { type: string; status: string }[] } },
  ) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")).length;
}

/**
 * The runtime installer's chart values, installed on kwok: Helm says
 * deployed and no per-node Job exists (kwok "ran" the hook pod); `deno task
 * cluster hook` then runs the hook's own arguments, as its ServiceAccount,
 * and the rollout happens, owned by the hook Job.
 */
async function chartForReal(cluster: Cluster) {
  const ns = await namespace(cluster, "kata-chart");
  const home = await Deno.makeTempDir({ prefix: "helm-examples-" });
  const helm = helmResult(home, cluster.kubeconfig);
  const values = `${EXAMPLES}/runtime-installer/values-runtime-installer.yaml`;
  const installed = await helm([
    ...["install", "kata", CHART, "-n", ns, "-f", values, "--wait", "--timeout", "2m"],
    ...["--set-file", `jobTemplate=${EXAMPLES}/runtime-installer/install.yaml`],
    ...["--set", "image.repository=registry.invalid/job-dispatcher"],
  ]);
  assert.equal(installed.code, 0, installed.stderr);
  assert.match(installed.stdout, /STATUS: deployed/);
  const hookJob = "kata-job-dispatcher-r1";
  const perNode = async () => (await jobsIn(cluster, ns)).filter((j) => j.name !== hookJob);
  assert.deepEqual(await perNode(), [], "kwok faked the hook: no per-node Job");

  const r = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      `${ROOT}e2e/cluster.ts`,
      "hook",
      "kata",
      "-n",
      ns,
      "--dir",
      cluster.dir,
    ],
    env: {
      HELM_CACHE_HOME: `${home}/cache`,
      HELM_CONFIG_HOME: `${home}/config`,
      HELM_DATA_HOME: `${home}/data`,
      NO_COLOR: "1",
    },
    stdin: "null",
  }).output();
  const said = new TextDecoder().decode(r.stderr);
  assert.equal(r.code, 0, `deno task cluster hook kata -n ${ns}: ${said}`);
  assert.match(said, /summary: 3 succeeded, 0 failed of 3/);
  const jobs = await perNode();
  assert.equal(jobs.length, POOLS.kata.length);
  const hook = JSON.parse(
    (await cluster.kubectl(["get", "job", hookJob, "-n", ns, "-o", "json"])).stdout,
  );
  assert.ok(
    jobs.every((j) => j.owners.length === 1 && j.owners[0] === hook.metadata.uid),
    "owned by the hook Job",
  );
  for (const node of POOLS.kata) {
    assert.equal((await nodeView(cluster, node)).labels[KATA], "true", node);
  }
}
