import assert from "node:assert/strict";
import { UsageError } from "../job.ts";
import {
  GATE_FLAGS,
  HELP,
  MAINTENANCE_FLAGS,
  type Options,
  parseGateOptions,
  parseMaintenanceOptions,
  parseOptions,
  requestedLogFormat,
} from "./options.ts";
import { buildPreview } from "../preview/plan_view.ts";

const T = ["--job-template", "job.yaml"];

/** The message of the UsageError that `parse` (parseOptions) throws for `argv`. */
function rejection(argv: string[], parse: (argv: string[]) => unknown = parseOptions): string {
  try {
    parse(argv);
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected a UsageError, got ${e}`);
    assert.ok(!e.message.includes("\n"), `one line: ${e.message}`);
    return e.message;
  }
  assert.fail(`${parse.name}() accepted ${JSON.stringify(argv)}`);
}

const DEFAULTS: Options = {
  jobTemplate: "job.yaml",
  namePrefix: undefined,
  namespace: undefined,
  nodes: undefined,
  nodeSelectors: [],
  nodeFieldSelector: undefined,
  nodePageSize: 500,
  ignoreNodeTaints: false,
  failIfNoNodes: false,
  waitForNodesSecs: 0,
  nodeSettleSecs: 15,
  parallelism: 100,
  pollIntervalSecs: 5,
  pollOnly: false,
  progressIntervalSecs: 10,
  kubeApiConcurrency: 16,
  kubeApiQps: 50,
  kubeApiBurst: 300,
  apiWaitSecs: 90,
  ownerJobName: undefined,
  ownerJobFromPod: undefined,
  trackingLabelPrefix: "job-dispatcher",
  yieldToLiveRun: false,
  kubeconfig: undefined,
  context: undefined,
  dryRun: undefined,
  output: "text",
  estimateFrom: undefined,
  logFormat: "text",
  report: undefined,
  reportFormat: "json",
  reports: undefined,
  metricsAddr: undefined,
  metricsLingerSecs: 0,
  nodeRecords: "all",
  maxFailures: undefined,
  waves: undefined,
  waveSoakSecs: 0,
  verify: undefined,
  maxPerTopology: undefined,
  nodeTimeoutSecs: undefined,
  deleteTimedOut: false,
  pin: "nodeName",
  order: "name",
  seed: 0,
  stallWarnSecs: 120,
  nodeLabels: undefined,
  waitNodeReadySecs: 300,
  requireNodeHandlers: [],
  removeNodeTaints: [],
  kubeletTimeoutWarnSecs: undefined,
  skipSatisfiedNodes: false,
  cleanupJobTemplate: undefined,
  requireNodeRuntimeVersion: false,
  requireNodeMachineId: false,
  // Its defaults are spelled out in the parseMaintenanceOptions() test.
  maintenance: parseMaintenanceOptions([]),
  gate: undefined,
  help: false,
  version: false,
};

Deno.test({
  name: "parseOptions() fills in the defaults",
  permissions: "none",
  fn() {
    assert.deepEqual(parseOptions(T), DEFAULTS);
  },
});

Deno.test({
  name: "parseOptions() parses every flag",
  permissions: "none",
  async fn(t) {
    await t.step("with --node-selector and an owner by name", () => {
      const opts = parseOptions([
        "--job-template=-",
        "--name-prefix",
        "upgrade",
        "--namespace",
        "ops",
        "--node-selector",
        "role=worker",
        "--node-field-selector",
        "spec.unschedulable=false",
        "--node-page-size",
        "50",
        "--ignore-node-taints",
        "--wait-for-nodes-secs",
        "120",
        "--node-settle-secs",
        "2.5",
        "--parallelism",
        "7",
        "--poll-interval-secs",
        "0.5",
        "--poll-only",
        "--progress-interval-secs",
        "30",
        "--kube-api-concurrency",
        "4",
        "--kube-api-qps",
        "2.5",
        "--kube-api-burst",
        "5",
        "--api-wait-secs",
        "0",
        "--owner-job-name",
        "rollout",
        "--tracking-label-prefix",
        "example.com",
        "--yield-to-live-run",
        "--kubeconfig",
        "/tmp/kubeconfig",
        "--context",
        "kind-kind",
        "--dry-run=server",
        "--log-format",
        "json",
        "--report",
        "/tmp/report.xml",
        "--report-format",
        "junit",
        "--max-failures",
        "10%",
        "--canary",
        "3",
        "--max-per-topology",
        "topology.kubernetes.io/zone=2",
        "--node-timeout-secs",
        "600",
        "--delete-timed-out",
        "--pin",
        "affinity",
        "--order",
        "random",
        "--seed",
        "42",
      ]);
      assert.deepEqual(opts, {
        ...DEFAULTS,
        jobTemplate: "-",
        namePrefix: "upgrade",
        namespace: "ops",
        nodes: undefined,
        nodeSelectors: ["role=worker"],
        nodeFieldSelector: "spec.unschedulable=false",
        nodePageSize: 50,
        ignoreNodeTaints: true,
        waitForNodesSecs: 120,
        nodeSettleSecs: 2.5,
        parallelism: 7,
        pollIntervalSecs: 0.5,
        pollOnly: true,
        progressIntervalSecs: 30,
        kubeApiConcurrency: 4,
        kubeApiQps: 2.5,
        kubeApiBurst: 5,
        apiWaitSecs: 0,
        ownerJobName: "rollout",
        ownerJobFromPod: undefined,
        trackingLabelPrefix: "example.com",
        yieldToLiveRun: true,
        kubeconfig: "/tmp/kubeconfig",
        context: "kind-kind",
        dryRun: "server",
        logFormat: "json",
        report: "/tmp/report.xml",
        reportFormat: "junit",
        reports: [{ path: "/tmp/report.xml", format: "junit" }],
        metricsAddr: undefined,
        metricsLingerSecs: 0,
        maxFailures: "10%",
        waves: { sizes: [{ count: 3 }, { percent: 100 }], canary: true },
        maxPerTopology: { key: "topology.kubernetes.io/zone", max: 2 },
        nodeTimeoutSecs: 600,
        deleteTimedOut: true,
        pin: "affinity",
        order: "random",
        seed: 42,
        stallWarnSecs: 120,
        help: false,
        version: false,
      });
    });

    await t.step("with --nodes and an owner from a pod", () => {
      const opts = parseOptions([
        ...T,
        "--nodes",
        "node-1, node-2,,node-3",
        "--owner-job-from-pod",
        "dispatcher-abcde",
      ]);
      assert.deepEqual(opts.nodes, ["node-1", "node-2", "node-3"]);
      assert.equal(opts.ownerJobFromPod, "dispatcher-abcde");
      assert.equal(opts.ownerJobName, undefined);
    });

    await t.step("with -n as the short form of --namespace", () => {
      assert.equal(parseOptions([...T, "-n", "kube-system"]).namespace, "kube-system");
    });

    await t.step("with --node-selector repeated, in order", () => {
      const opts = parseOptions([
        ...T,
        "--node-selector",
        "role=worker",
        "--node-selector=zone in (a,b)",
        "--node-selector",
        "!gpu",
      ]);
      assert.deepEqual(opts.nodeSelectors, ["role=worker", "zone in (a,b)", "!gpu"]);
    });

    await t.step("with --dry-run=client", () => {
      assert.equal(parseOptions([...T, "--dry-run=client"]).dryRun, "client");
    });

    await t.step("with --dry-run server as two arguments", () => {
      assert.equal(parseOptions([...T, "--dry-run", "server"]).dryRun, "server");
    });

    await t.step("with a switch written =true or =false, as kubectl accepts", () => {
      assert.equal(parseOptions([...T, "--ignore-node-taints=true"]).ignoreNodeTaints, true);
      assert.equal(parseOptions([...T, "--ignore-node-taints=false"]).ignoreNodeTaints, false);
      assert.equal(parseOptions([...T, "--poll-only=true"]).pollOnly, true);
    });

    await t.step("with an empty --context, which is none, as kubectl reads it", () => {
      assert.equal(parseOptions([...T, "--context", ""]).context, undefined);
      assert.equal(parseOptions([...T, "--context=prod"]).context, "prod");
    });

    await t.step("with --log-format text", () => {
      assert.equal(parseOptions([...T, "--log-format", "text"]).logFormat, "text");
    });

    await t.step("with zero waits, which are allowed", () => {
      const opts = parseOptions([...T, "--wait-for-nodes-secs", "0", "--node-settle-secs", "0"]);
      assert.equal(opts.waitForNodesSecs, 0);
      assert.equal(opts.nodeSettleSecs, 0);
    });

    await t.step("with --parallelism 1, the least allowed", () => {
      assert.equal(parseOptions([...T, "--parallelism", "1"]).parallelism, 1);
    });
  },
});

Deno.test({
  name: "parseOptions() rejects a bad number, naming the flag",
  permissions: "none",
  async fn(t) {
    const cases: { argv: string[]; flag: string; says?: RegExp }[] = [
      { argv: ["--parallelism", "0"], flag: "parallelism", says: /at least 1/ },
      { argv: ["--parallelism=-1"], flag: "parallelism", says: /at least 1/ },
      { argv: ["--parallelism", "-1"], flag: "parallelism", says: /-1: it must be at least 1/ },
      {
        argv: ["--parallelism", "abc"],
        flag: "parallelism",
        says: /"abc": expected a whole number/,
      },
      { argv: ["--parallelism", "1.5"], flag: "parallelism", says: /"1\.5"/ },
      { argv: ["--parallelism", ""], flag: "parallelism", says: /expected a whole number/ },
      { argv: ["--parallelism", "Infinity"], flag: "parallelism", says: /expected a whole number/ },
      { argv: ["--parallelism", "NaN"], flag: "parallelism", says: /expected a whole number/ },
      { argv: ["--node-page-size", "0"], flag: "node-page-size", says: /at least 1/ },
      { argv: ["--node-page-size", "2.5"], flag: "node-page-size" },
      { argv: ["--wait-for-nodes-secs=-1"], flag: "wait-for-nodes-secs", says: /at least 0/ },
      { argv: ["--node-settle-secs", "soon"], flag: "node-settle-secs" },
      { argv: ["--poll-interval-secs", "0"], flag: "poll-interval-secs", says: /at least 0\.1/ },
      { argv: ["--progress-interval-secs", "0.01"], flag: "progress-interval-secs" },
      { argv: ["--kube-api-concurrency", "0"], flag: "kube-api-concurrency", says: /at least 1/ },
      {
        argv: ["--kube-api-concurrency", "2.5"],
        flag: "kube-api-concurrency",
        says: /expected a whole number/,
      },
      { argv: ["--kube-api-qps=-1"], flag: "kube-api-qps", says: /at least 0/ },
      {
        argv: ["--kube-api-qps", "fast"],
        flag: "kube-api-qps",
        says: /"fast": expected a number$/,
      },
      { argv: ["--kube-api-burst", "0"], flag: "kube-api-burst", says: /at least 1/ },
      { argv: ["--kube-api-burst", "1e3"], flag: "kube-api-burst", says: /whole number/ },
      { argv: ["--api-wait-secs=-1"], flag: "api-wait-secs", says: /at least 0/ },
      {
        argv: ["--api-wait-secs", "soon"],
        flag: "api-wait-secs",
        says: /"soon": expected a number of seconds$/,
      },
    ];
    for (const c of cases) {
      await t.step(`it rejects ${c.argv.join(" ")}`, () => {
        const message = rejection([...T, ...c.argv]);
        assert.ok(message.includes(`--${c.flag}`), message);
        if (c.says) assert.match(message, c.says);
      });
    }
  },
});

Deno.test({
  name: "parseOptions() rejects misuse with a short reason",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; argv: string[]; says: RegExp }[] = [
      {
        name: "an unknown flag",
        argv: [...T, "--parallel", "3"],
        says: /^Unknown flag --parallel: did you mean --parallelism\?$/,
      },
      {
        name: "an unknown short flag",
        argv: [...T, "-x"],
        says: /^Unknown flag -x: it is not a flag of job-dispatcher$/,
      },
      {
        name: "a positional argument",
        argv: [...T, "job2.yaml"],
        says: /^Invalid argument "job2\.yaml" \(after --job-template job\.yaml\): .*flags only/,
      },
      {
        name: "a list with a space in it",
        argv: [...T, "--nodes", "a,", "b"],
        says: /^Invalid argument "b" \(after --nodes a,\): .*write a list as a,b$/,
      },
      {
        name: "a value for a switch other than true or false",
        argv: [...T, "--ignore-node-taints=yes"],
        says:
          /^Invalid --ignore-node-taints=yes: --ignore-node-taints is a switch; write --ignore-node-taints \(or --ignore-node-taints=false\)$/,
      },
      {
        name: "a missing value",
        argv: [...T, "--namespace"],
        says: /^Missing value of --namespace: write --namespace NS$/,
      },
      {
        name: "a missing --api-wait-secs, spelled as --help spells it",
        argv: [...T, "--api-wait-secs"],
        says: /^Missing value of --api-wait-secs: write --api-wait-secs S$/,
      },
      {
        name: "a mistyped --api-wait-secs",
        argv: [...T, "--api-wait", "0"],
        says: /^Unknown flag --api-wait: did you mean --api-wait-secs\?$/,
      },
      {
        name: "a missing value of the short form",
        argv: [...T, "-n"],
        says: /^Missing value of --namespace: write --namespace NS$/,
      },
      { name: "a missing --job-template", argv: [], says: /^Missing --job-template/ },
      {
        name: "an empty --job-template",
        argv: ["--job-template", ""],
        says: /^Missing --job-template/,
      },
      {
        name: "--nodes with --node-selector",
        argv: [...T, "--nodes", "a", "--node-selector", "role=worker"],
        says: /--nodes .*--node-selector/,
      },
      {
        name: "--nodes with --node-field-selector",
        argv: [...T, "--nodes", "a", "--node-field-selector", "spec.unschedulable=false"],
        says: /--node-field-selector/,
      },
      {
        name: "an empty --nodes",
        argv: [...T, "--nodes", ""],
        says: /^Invalid --nodes: it names no node/,
      },
      { name: "a --nodes of commas", argv: [...T, "--nodes", " , ,"], says: /^Invalid --nodes/ },
      {
        name: "an empty --node-selector",
        argv: [...T, "--node-selector", "role=worker", "--node-selector", " "],
        says: /^Invalid --node-selector/,
      },
      {
        name: "both owner flags",
        argv: [...T, "--owner-job-name", "a", "--owner-job-from-pod", "b"],
        says: /--owner-job-name or --owner-job-from-pod, not both/,
      },
      {
        name: "--yield-to-live-run without an owner",
        argv: [...T, "--yield-to-live-run"],
        says: /^Invalid --yield-to-live-run: it needs an owner/,
      },
      {
        name: "a bad --dry-run",
        argv: [...T, "--dry-run=none"],
        says: /^Invalid --dry-run "none": expected client or server or plan$/,
      },
      {
        name: "--dry-run without a value",
        argv: [...T, "--dry-run"],
        says: /^Missing value of --dry-run: write --dry-run=client\|server\|plan$/,
      },
      {
        name: "a --namespace that cannot exist",
        argv: [...T, "-n", "Ops"],
        says:
          /^Invalid --namespace "Ops": a namespace is a DNS label \(lowercase a-z, 0-9 and "-", at most 63 characters\), e\.g\. ops$/,
      },
      {
        name: "an empty --namespace",
        argv: [...T, "--namespace="],
        says: /^Invalid --namespace ""/,
      },
      {
        name: "--report-format without --report",
        argv: [...T, "--report-format", "junit"],
        says: /^Invalid --report-format: it needs --report PATH, the file to write$/,
      },
      {
        name: "a bad --log-format",
        argv: [...T, "--log-format", "yaml"],
        says: /^Invalid --log-format "yaml": expected text or json$/,
      },
    ];
    for (const c of cases) {
      await t.step(`it rejects ${c.name}`, () => assert.match(rejection(c.argv), c.says));
    }
  },
});

Deno.test({
  name: "parseOptions() accepts --yield-to-live-run with either owner flag",
  permissions: "none",
  fn() {
    const byName = parseOptions([...T, "--yield-to-live-run", "--owner-job-name", "r"]);
    assert.equal(byName.yieldToLiveRun, true);
    const byPod = parseOptions([...T, "--yield-to-live-run", "--owner-job-from-pod", "p"]);
    assert.equal(byPod.yieldToLiveRun, true);
  },
});

Deno.test({
  name: "parseOptions() needs no --job-template for --help or --version",
  permissions: "none",
  async fn(t) {
    await t.step("--help", () => assert.equal(parseOptions(["--help"]).help, true));
    await t.step("-h", () => assert.equal(parseOptions(["-h"]).help, true));
    await t.step("--version", () => assert.equal(parseOptions(["--version"]).version, true));
    await t.step("--help beside a conflicting selection", () => {
      assert.equal(parseOptions(["--help", "--nodes", "a", "--node-selector", "x"]).help, true);
    });
  },
});

// Every flag the tool declares, with a value it accepts (none for a boolean).
/** What a gate flag needs beside it to be accepted: the URL, and a breach that needs no owner. */
const GATED = ["--gate-prometheus-url", "http://p:9090", "--on-gate-breach", "exit"];

const FLAGS: Record<string, string[]> = {
  "--job-template": ["job.yaml"],
  "--name-prefix": ["up"],
  "--namespace": ["ops"],
  "--nodes": ["a,b"],
  "--node-selector": ["role=worker"],
  "--node-field-selector": ["spec.unschedulable=false"],
  "--node-page-size": ["10"],
  "--ignore-node-taints": [],
  "--wait-for-nodes-secs": ["5"],
  "--fail-if-no-nodes": [],
  "--node-settle-secs": ["5"],
  "--parallelism": ["5"],
  "--poll-interval-secs": ["5"],
  "--poll-only": [],
  "--progress-interval-secs": ["5"],
  "--kube-api-concurrency": ["4"],
  "--kube-api-qps": ["0.5"],
  "--kube-api-burst": ["1"],
  "--api-wait-secs": ["0"],
  "--owner-job-name": ["rollout"],
  "--owner-job-from-pod": ["pod-1"],
  "--tracking-label-prefix": ["example.com"],
  "--yield-to-live-run": [],
  "--kubeconfig": ["/tmp/kubeconfig"],
  "--context": ["ctx"],
  "--dry-run": ["client"],
  "--output": ["json", "--dry-run=plan"],
  "--estimate-from": ["/tmp/r.json"],
  "--log-format": ["json"],
  "--report": ["/tmp/r.json"],
  "--report-format": ["junit", "--report", "/tmp/r.xml"],
  "--metrics-addr": ["127.0.0.1:9090"],
  "--metrics-linger-secs": ["30", "--metrics-addr", ":9090"],
  "--node-records": ["failures"],
  "--max-failures": ["2"],
  "--canary": ["1"],
  "--waves": ["1,25%"],
  "--wave-soak-secs": ["60", "--waves", "1,25%"],
  "--verify-pod-selector": ["app=validator"],
  "--verify-job-template": ["smoke.yaml"],
  "--verify-timeout-secs": ["60", "--verify-pod-selector", "app=validator"],
  "--max-per-topology": ["topology.kubernetes.io/zone=1"],
  "--node-timeout-secs": ["60"],
  "--delete-timed-out": [],
  "--pin": ["affinity"],
  "--order": ["zone-interleaved"],
  "--seed": ["7"],
  "--stall-warn-secs": ["30"],
  // The lifecycle flags, each with the flags it needs after its own value.
  "--node-label-key": ["k"],
  "--node-label": ["true", "--node-label-key", "k"],
  "--wait-node-ready-secs": ["0"],
  "--require-node-handlers": ["kata"],
  "--extra-node-label": ["a=b", "--node-label-key", "k", "--node-label", "true"],
  "--claim-node-pending": ["--node-label-key", "k", "--node-label", "true"],
  "--node-label-pending-value": ["no", "--node-label-key", "k", "--node-label", "true"],
  "--remove-node-label": ["--node-label-key", "k"],
  "--instance-label-prefix": [
    "p.example.com",
    "--multi-install-suffix",
    "a",
    "--node-label-key",
    "k",
    "--node-label",
    "true",
  ],
  "--multi-install-suffix": [
    "a",
    "--instance-label-prefix",
    "p",
    "--node-label-key",
    "k",
    "--node-label",
    "true",
  ],
  "--remove-node-taints": ["startup:NoSchedule", "--node-label-key", "k", "--node-label", "true"],
  "--kubelet-timeout-warn-secs": ["600"],
  "--skip-satisfied-nodes": ["--node-label-key", "k", "--node-label", "true"],
  "--cleanup-job-template": ["cleanup.yaml", "--node-label-key", "k"],
  "--require-node-runtime-version": [],
  "--require-node-machine-id": [],
  "--cordon": [],
  "--uncordon-on-failure": ["--cordon"],
  "--drain": [],
  "--delete-emptydir-data": ["--drain"],
  "--force": ["--drain"],
  "--pod-selector": ["app=web", "--drain"],
  "--grace-period": ["30", "--drain"],
  "--drain-timeout-secs": ["10", "--drain"],
  "--disable-eviction": ["--drain"],
  "--retry-failed": [],
  "--post-node-delay-secs": ["30"],
  "--max-unavailable": ["10%"],
  "--pause-file": ["/tmp/pause"],
  "--blocking-pod-selector": ["app=db"],
  "--blocked-timeout-secs": ["60", "--blocking-pod-selector", "app=db"],
  "--window": ["Mon-Fri 02:00-04:00 Europe/Berlin"],
  "--gate-prometheus-url": ["http://p:9090", "--gate-query", "up == 0", "--on-gate-breach=exit"],
  "--gate-query": ["up == 0", ...GATED],
  "--gate-alerts": ["Node.*", ...GATED],
  "--gate-interval-secs": ["5", "--gate-query", "up", ...GATED],
  "--gate-bearer-token-file": ["/t", "--gate-query", "up", ...GATED],
  "--gate-ca-file": ["/ca.pem", "--gate-query", "up", ...GATED],
  "--gate-allow-empty": ["up", "--gate-query", "up", ...GATED],
  "--on-gate-breach": [
    "pause",
    "--gate-query",
    "up",
    "--gate-prometheus-url",
    "http://p",
    "--pause-file",
    "/p",
  ],
  "--help": [],
  "--version": [],
};

Deno.test({
  name: "--metrics-addr takes HOST:PORT and refuses anything else in one line",
  permissions: "none",
  fn() {
    for (const ok of ["127.0.0.1:9090", ":9090", "[::1]:9090", "0.0.0.0:65535"]) {
      assert.equal(parseOptions([...T, "--metrics-addr", ok]).metricsAddr, ok);
    }
    for (const bad of ["9090", "host:0", "host:70000", "a b:1"]) {
      assert.throws(
        () => parseOptions([...T, "--metrics-addr", bad]),
        /^UsageError: Invalid --metrics-addr .*: write HOST:PORT/,
      );
    }
  },
});

Deno.test({
  name: "--metrics-linger-secs takes seconds and needs --metrics-addr",
  permissions: "none",
  fn() {
    const o = parseOptions([...T, "--metrics-addr", ":9090", "--metrics-linger-secs", "45"]);
    assert.equal(o.metricsLingerSecs, 45);
    assert.throws(
      () => parseOptions([...T, "--metrics-linger-secs", "45"]),
      /^UsageError: Invalid --metrics-linger-secs: it needs --metrics-addr/,
    );
    assert.throws(
      () => parseOptions([...T, "--metrics-addr", ":9090", "--metrics-linger-secs", "-1"]),
      /^UsageError: Invalid --metrics-linger-secs/,
    );
  },
});

Deno.test({
  name: "HELP documents exactly the flags the tool declares",
  permissions: "none",
  fn() {
    const documented = new Set(HELP.match(/(?<![\w-])--[a-z][a-z-]*[a-z]/g));
    // kubectl's own flag, in the kubectl command the manual quotes for a pause.
    documented.delete("--overwrite");
    assert.deepEqual([...documented].sort(), Object.keys(FLAGS).sort());
    assert.match(HELP, /-n, --namespace/);
    assert.match(HELP, /-h, --help/);
  },
});

Deno.test({
  name: "parseOptions() accepts every flag HELP documents",
  permissions: "none",
  async fn(t) {
    for (const [flag, value] of Object.entries(FLAGS)) {
      await t.step(flag, () => {
        const base = flag === "--job-template" ? [] : T;
        const owner = flag === "--yield-to-live-run"
          ? ["--owner-job-name", "r"]
          : flag === "--delete-timed-out"
          ? ["--node-timeout-secs", "60"]
          : [];
        assert.doesNotThrow(() => parseOptions([...base, ...owner, flag, ...value]));
      });
    }
  },
});

Deno.test({
  name: "HELP lists every exit code",
  permissions: "none",
  fn() {
    const section = HELP.slice(HELP.indexOf("EXIT CODES"));
    assert.ok(section.length > "EXIT CODES".length, "HELP has an EXIT CODES section");
    for (const code of [0, 1, 2, 3, 4, 5, 130, 143]) {
      assert.match(section, new RegExp(`(^|\\s)${code}\\b`), `exit code ${code}`);
    }
  },
});

Deno.test({
  name: "HELP names every Event reason the run records on a Node",
  permissions: "none",
  async fn(t) {
    // report/report.ts's Node Events: an operator reading kubectl describe node looks them up here.
    for (const reason of ["JobSucceeded", "JobFailed", "NodeFailed", "JobPending"]) {
      await t.step(reason, () => assert.ok(HELP.includes(reason), `${reason} in --help`));
    }
  },
});

Deno.test({
  name: "parseOptions() reads the node lifecycle flags together",
  permissions: "none",
  async fn(t) {
    await t.step("an install with every flag", () => {
      const opts = parseOptions([
        ...T,
        "--node-label-key=kata.example.com/installed",
        "--node-label=true",
        "--wait-node-ready-secs=0",
        "--require-node-handlers=kata, kata-qemu",
        "--extra-node-label=tier=kata",
        "--extra-node-label=kata.example.com/version=3.1",
        "--claim-node-pending",
        "--node-label-pending-value=installing",
        "--instance-label-prefix=kata.example.com",
        "--multi-install-suffix=blue",
        "--remove-node-taints=kata.example.com/not-ready:NoSchedule,startup",
        "--kubelet-timeout-warn-secs=600",
        "--skip-satisfied-nodes",
        "--cleanup-job-template=cleanup.yaml",
        "--require-node-runtime-version",
        "--require-node-machine-id",
      ]);
      assert.deepEqual(opts.nodeLabels, {
        key: "kata.example.com/installed",
        value: "true",
        pendingValue: "installing",
        extra: [["tier", "kata"], ["kata.example.com/version", "3.1"]],
        claim: true,
        remove: false,
        mark: "kata.example.com/blue",
        instancePrefix: "kata.example.com",
      });
      assert.equal(opts.waitNodeReadySecs, 0);
      assert.deepEqual(opts.requireNodeHandlers, ["kata", "kata-qemu"]);
      assert.deepEqual(opts.removeNodeTaints, [
        { key: "kata.example.com/not-ready", effect: "NoSchedule" },
        { key: "startup" },
      ]);
      assert.equal(opts.kubeletTimeoutWarnSecs, 600);
      assert.equal(opts.skipSatisfiedNodes, true);
      assert.equal(opts.cleanupJobTemplate, "cleanup.yaml");
      assert.equal(opts.requireNodeRuntimeVersion, true);
      assert.equal(opts.requireNodeMachineId, true);
    });
    await t.step("a cleanup run", () => {
      const opts = parseOptions([...T, "--node-label-key=k", "--remove-node-label"]);
      assert.equal(opts.nodeLabels?.remove, true);
      assert.equal(opts.nodeLabels?.value, undefined);
      assert.equal(opts.nodeLabels?.pendingValue, "false");
    });
    const cases: { argv: string[]; says: RegExp }[] = [
      { argv: ["--node-label=true"], says: /--node-label: it needs --node-label-key/ },
      { argv: ["--remove-node-label"], says: /--remove-node-label: it needs --node-label-key/ },
      { argv: ["--claim-node-pending"], says: /--claim-node-pending: it needs --node-label-key/ },
      { argv: ["--node-label-key=a/b/c"], says: /Invalid --node-label-key "a\/b\/c"/ },
      { argv: ["--node-label-key=k", "--node-label=-x"], says: /Invalid --node-label "-x"/ },
      {
        argv: ["--node-label-key=k", "--claim-node-pending"],
        says: /--claim-node-pending: it needs --node-label VALUE/,
      },
      {
        argv: ["--node-label-key=k", "--node-label=true", "--remove-node-label"],
        says: /drop --node-label/,
      },
      {
        argv: ["--node-label-key=k", "--node-label=false"],
        says: /pending-value false: it equals --node-label/,
      },
      {
        argv: ["--node-label-key=k", "--node-label=true", "--extra-node-label=k=v"],
        says: /--extra-node-label k=v: k is the --node-label-key itself/,
      },
      {
        argv: [
          "--node-label-key=k",
          "--node-label=true",
          "--extra-node-label=a=1",
          "--extra-node-label=a=2",
        ],
        says: /a is given twice/,
      },
      {
        argv: ["--node-label-key=k", "--node-label=true", "--extra-node-label=a"],
        says: /--extra-node-label a: expected key=value/,
      },
      {
        argv: ["--node-label-key=k", "--node-label=true", "--instance-label-prefix=p"],
        says: /go together/,
      },
      {
        argv: [
          "--node-label-key=k",
          "--node-label=true",
          "--instance-label-prefix=Bad_Prefix",
          "--multi-install-suffix=a",
        ],
        says: /Invalid instance mark/,
      },
      { argv: ["--remove-node-taints=a:Sometimes"], says: /effect must be one of/ },
      { argv: ["--remove-node-taints=a"], says: /--remove-node-taints: it needs --node-label/ },
      {
        argv: ["--node-label-key=k", "--remove-node-label", "--skip-satisfied-nodes"],
        says: /--skip-satisfied-nodes: it needs --node-label/,
      },
      { argv: ["--require-node-handlers=,"], says: /names no handler/ },
      { argv: ["--wait-node-ready-secs=-1"], says: /at least 0/ },
      { argv: ["--kubelet-timeout-warn-secs=0"], says: /at least 1/ },
    ];
    for (const c of cases) {
      await t.step(`it rejects ${c.argv.join(" ")}`, () => {
        assert.match(rejection([...T, ...c.argv]), c.says);
      });
    }
  },
});

Deno.test({
  name: "parseMaintenanceOptions() parses the maintenance flags, with their defaults",
  permissions: "none",
  async fn(t) {
    await t.step("none given: nothing is cordoned, drained or waited for", () => {
      assert.deepEqual(parseMaintenanceOptions([]), {
        cordon: false,
        uncordonOnFailure: false,
        drain: undefined,
        maxUnavailable: undefined,
        blockingPodSelectors: [],
        blockedTimeoutSecs: undefined,
        windows: [],
        retryFailed: false,
        postNodeDelaySecs: 0,
        pauseFile: undefined,
      });
    });
    await t.step("--drain implies --cordon and has kubectl's defaults", () => {
      const o = parseMaintenanceOptions(["--drain"]);
      assert.equal(o.cordon, true);
      assert.deepEqual(o.drain, {
        deleteEmptyDirData: false,
        force: false,
        podSelector: undefined,
        gracePeriodSecs: undefined,
        timeoutSecs: 600,
        disableEviction: false,
      });
    });
    await t.step("every flag", () => {
      const o = parseMaintenanceOptions([
        "--drain",
        "--uncordon-on-failure",
        "--delete-emptydir-data",
        "--force",
        "--pod-selector",
        "app=web",
        "--grace-period",
        "30",
        "--drain-timeout-secs",
        "10",
        "--disable-eviction",
        "--max-unavailable",
        "25%",
        "--blocking-pod-selector",
        "app=batch",
        "--blocking-pod-selector=team in (ml)",
        "--blocked-timeout-secs",
        "900",
        "--window",
        "Mon-Fri 02:00-04:00 Europe/Berlin",
        "--window",
        "Sat,Sun 00:00-24:00",
        "--retry-failed",
        "--post-node-delay-secs",
        "2.5",
        "--pause-file",
        "/run/pause",
      ]);
      assert.deepEqual(o.drain, {
        deleteEmptyDirData: true,
        force: true,
        podSelector: {
          text: "app=web",
          requirements: [{ key: "app", operator: "=", values: ["web"] }],
        },
        gracePeriodSecs: 30,
        timeoutSecs: 10,
        disableEviction: true,
      });
      assert.equal(o.uncordonOnFailure, true);
      assert.deepEqual(o.maxUnavailable, { kind: "percent", percent: 25, text: "25%" });
      assert.deepEqual(o.blockingPodSelectors.map((s) => s.text), ["app=batch", "team in (ml)"]);
      assert.equal(o.blockedTimeoutSecs, 900);
      assert.deepEqual(o.windows.map((w) => [w.zone, w.startMin, w.endMin, w.days.size]), [
        ["Europe/Berlin", 120, 240, 5],
        ["UTC", 0, 1440, 2],
      ]);
      assert.equal(o.retryFailed, true);
      assert.equal(o.postNodeDelaySecs, 2.5);
      assert.equal(o.pauseFile, "/run/pause");
    });
    await t.step("--grace-period -1 is kubectl's 'the pod's own', as leaving it out", () => {
      assert.equal(
        parseMaintenanceOptions(["--drain", "--grace-period", "-1"]).drain?.gracePeriodSecs,
        undefined,
      );
      assert.equal(
        parseMaintenanceOptions(["--drain", "--grace-period", "0"]).drain?.gracePeriodSecs,
        0,
      );
    });
  },
});

Deno.test({
  name:
    "parseMaintenanceOptions() refuses every malformed value in one line naming the flag and the fix",
  permissions: "none",
  async fn(t) {
    const cases: [string[], RegExp][] = [
      [
        ["--window", "Mon-Fry 02:00-04:00"],
        /^Invalid --window "Mon-Fry 02:00-04:00": unknown day "Fry"/,
      ],
      [["--window", "Mon 2-4"], /^Invalid --window "Mon 2-4": bad time "2"/],
      [
        ["--window", "02:00-04:00"],
        /^Invalid --window "02:00-04:00": expected DAYS HH:MM-HH:MM \[ZONE\]/,
      ],
      [
        ["--window", "* 02:00-04:00 Mars/Olympus"],
        /unknown time zone "Mars\/Olympus"; give an IANA zone/,
      ],
      [
        ["--max-unavailable", "101%"],
        /^Invalid --max-unavailable "101%": a percentage is at most 100%/,
      ],
      [
        ["--max-unavailable", "0"],
        /^Invalid --max-unavailable "0": 0 would never let a node start/,
      ],
      [["--max-unavailable", "two"], /^Invalid --max-unavailable "two": expected a whole number/],
      [
        ["--drain", "--pod-selector", "app=web=x"],
        /^Invalid --pod-selector "app=web=x": found '='.*\(kubectl label selector syntax/,
      ],
      [["--drain", "--pod-selector", ""], /^Invalid --pod-selector "": it would match every pod/],
      [
        ["--blocking-pod-selector", "app in web"],
        /^Invalid --blocking-pod-selector "app in web": found 'web', expected: '\('/,
      ],
      [
        ["--blocking-pod-selector", "a/b/c"],
        /^Invalid --blocking-pod-selector "a\/b\/c": invalid label key/,
      ],
      [
        ["--blocking-pod-selector", " "],
        /^Invalid --blocking-pod-selector "": it would match every pod/,
      ],
      [
        ["--drain", "--grace-period", "soon"],
        /^Invalid --grace-period "soon": expected a whole number/,
      ],
      [["--drain", "--grace-period", "-2"], /^Invalid --grace-period -2: it must be at least -1/],
      [
        ["--drain", "--drain-timeout-secs", "0"],
        /^Invalid --drain-timeout-secs 0: it must be at least 1/,
      ],
      [
        ["--blocking-pod-selector", "a=b", "--blocked-timeout-secs", "0"],
        /^Invalid --blocked-timeout-secs 0/,
      ],
      [
        ["--post-node-delay-secs", "-1"],
        /^Invalid --post-node-delay-secs -1: it must be at least 0/,
      ],
      [["--force"], /^Invalid --force: it is a drain option; add --drain/],
      [
        ["--cordon", "--delete-emptydir-data"],
        /^Invalid --delete-emptydir-data: it is a drain option; add --drain/,
      ],
      [["--disable-eviction"], /^Invalid --disable-eviction: it is a drain option/],
      [["--uncordon-on-failure"], /^Invalid --uncordon-on-failure: it needs --cordon or --drain/],
      [
        ["--blocked-timeout-secs", "60"],
        /^Invalid --blocked-timeout-secs: it needs --blocking-pod-selector/,
      ],
      [["--pause-file", ""], /^Invalid --pause-file "": name a file/],
      [["--drain=yes"], /--drain/],
    ];
    for (const [argv, want] of cases) {
      await t.step(
        argv.join(" "),
        () => assert.match(rejection(argv, parseMaintenanceOptions), want),
      );
    }
  },
});

Deno.test({
  name: "parseOptions() accepts the maintenance flags, and --help offers each",
  permissions: "none",
  async fn(t) {
    for (const flag of Object.keys(MAINTENANCE_FLAGS)) {
      await t.step(`--${flag} is in --help`, () => {
        assert.ok(HELP.includes(`--${flag} `), "--help offers it");
      });
    }
    await t.step("--drain --force --grace-period 5 reach the options", () => {
      const o = parseOptions([...T, "--drain", "--force", "--grace-period", "5"]).maintenance;
      assert.equal(o.cordon, true);
      assert.equal(o.drain?.force, true);
      assert.equal(o.drain?.gracePeriodSecs, 5);
    });
    await t.step("--force without --drain is refused in one line", () => {
      assert.match(
        rejection([...T, "--force"]),
        /^Invalid --force: it is a drain option; add --drain$/,
      );
    });
  },
});

Deno.test({
  name: "requestedLogFormat() reads --log-format before the flags are validated",
  permissions: "none",
  async fn(t) {
    const cases: [string[], "text" | "json"][] = [
      [[], "text"],
      [["--log-format", "json", "--parallelism", "0"], "json"],
      [["--log-format=json", "--paralelism"], "json"],
      [["--log-format=json", "--log-format", "text"], "text"],
      [["--log-format", "text", "--log-format=json"], "json"],
      [["--log-format", "yaml"], "text"],
      [["--log-format"], "text"],
    ];
    for (const [argv, want] of cases) {
      await t.step(`${argv.join(" ") || "(none)"} → ${want}`, () => {
        assert.equal(requestedLogFormat(argv), want);
      });
    }
  },
});

Deno.test({
  name: "parseOptions() reads the health gate flags, with their defaults, and --help offers each",
  permissions: "none",
  async fn(t) {
    const url = ["--gate-prometheus-url", "http://prom:9090/"];
    for (const flag of Object.keys(GATE_FLAGS)) {
      await t.step(`--${flag} is in --help`, () => assert.ok(HELP.includes(`--${flag} `)));
    }
    await t.step("defaults: interval 30 s, pause on breach", () => {
      assert.deepEqual(parseGateOptions([...url, "--gate-query", "up == 0"]), {
        url: "http://prom:9090",
        queries: ["up == 0"],
        alerts: undefined,
        allowEmpty: [],
        intervalSecs: 30,
        bearerTokenFile: undefined,
        caFile: undefined,
        onBreach: "pause",
      });
    });
    await t.step("every flag", () => {
      const o = parseOptions([
        ...T,
        ...url,
        "--gate-query=a > 0",
        "--gate-query",
        "b > 0",
        "--gate-alerts",
        "Node.*",
        "--gate-interval-secs",
        "2.5",
        "--gate-bearer-token-file",
        "/t",
        "--gate-ca-file",
        "/ca.pem",
        "--on-gate-breach",
        "exit",
        "--gate-allow-empty",
        "b",
        "--gate-allow-empty=a > 0",
      ]).gate;
      assert.deepEqual(o, {
        url: "http://prom:9090",
        queries: ["a > 0", "b > 0"],
        alerts: "Node.*",
        allowEmpty: ["b", "a > 0"],
        intervalSecs: 2.5,
        bearerTokenFile: "/t",
        caFile: "/ca.pem",
        onBreach: "exit",
      });
    });
    await t.step(
      "--gate-allow-empty names a query, a selector of one, or the alerts pattern; nothing else",
      () => {
        const q = [
          ...url,
          "--gate-query",
          'sum(rate(x_total{a="b"}[5m])) > 0',
          "--gate-alerts",
          "N.*",
        ];
        for (const ok of ['sum(rate(x_total{a="b"}[5m])) > 0', 'x_total{a="b"}[5m]', "N.*"]) {
          assert.deepEqual(parseGateOptions([...q, "--gate-allow-empty", ok])?.allowEmpty, [ok]);
        }
        assert.throws(
          () => parseGateOptions([...q, "--gate-allow-empty", "x_totl"]),
          /^UsageError: Invalid --gate-allow-empty "x_totl": it is no --gate-query, none of their selectors \(.*"x_total\{a=\\"b\\"\}\[5m\]".*\) and not --gate-alerts/,
        );
      },
    );
    await t.step("pause with an owner or a pause file", () => {
      const q = [...T, ...url, "--gate-alerts", "X"];
      assert.ok(parseOptions([...q, "--owner-job-name", "hook"]).gate);
      assert.ok(parseOptions([...q, "--pause-file", "/tmp/p"]).gate);
    });
  },
});

Deno.test({
  name: "parseOptions() reads --waves, --wave-soak-secs and the verify flags",
  permissions: "none",
  fn() {
    const opts = parseOptions([
      "--job-template=j.yaml",
      "--waves=1,5%,25%",
      "--wave-soak-secs=300",
      "--verify-pod-selector=app=validator",
      "--verify-job-template=smoke.yaml",
      "--verify-timeout-secs=120",
    ]);
    assert.deepEqual(opts.waves, {
      sizes: [{ count: 1 }, { percent: 5 }, { percent: 25 }, { percent: 100 }],
    });
    assert.equal(opts.waveSoakSecs, 300);
    assert.deepEqual(opts.verify, {
      podSelector: "app=validator",
      jobTemplate: "smoke.yaml",
      timeoutSecs: 120,
    });
    assert.equal(
      parseOptions(["--job-template=j.yaml", "--verify-pod-selector=a=b"]).verify
        ?.timeoutSecs,
      600,
    );
  },
});

Deno.test({
  name: "parseOptions() refuses bad gate flags in one line, before anything is created",
  permissions: "none",
  async fn(t) {
    const url = ["--gate-prometheus-url", "http://prom:9090", "--owner-job-name", "hook"];
    const cases: [string, string[], RegExp][] = [
      [
        "a gate flag without --gate-prometheus-url",
        ["--gate-query", "up == 0"],
        /^Invalid --gate-query: it needs --gate-prometheus-url URL, the Prometheus to ask$/,
      ],
      [
        "--on-gate-breach without --gate-prometheus-url",
        ["--on-gate-breach", "exit"],
        /^Invalid --on-gate-breach: it needs --gate-prometheus-url/,
      ],
      [
        "a URL with nothing to watch",
        ["--gate-prometheus-url", "http://p:9090", "--owner-job-name", "h"],
        /^Invalid --gate-prometheus-url: it needs --gate-query EXPR or --gate-alerts REGEX/,
      ],
      [
        "a URL that is no http(s) URL",
        ["--gate-prometheus-url", "prom:9090", "--gate-query", "up"],
        /^Invalid --gate-prometheus-url "prom:9090": expected an http:\/\/ or https:\/\/ URL$/,
      ],
      ["an empty query", [...url, "--gate-query", " "], /^Invalid --gate-query "": give a PromQL/],
      [
        "an interval that is no number",
        [...url, "--gate-query", "up", "--gate-interval-secs", "soon"],
        /^Invalid --gate-interval-secs "soon": expected a number of seconds$/,
      ],
      [
        "an interval below 1 s",
        [...url, "--gate-query", "up", "--gate-interval-secs", "0"],
        /^Invalid --gate-interval-secs 0: it must be at least 1$/,
      ],
      [
        "an alert regex that is none",
        [...url, "--gate-alerts", "Node(("],
        /^Invalid --gate-alerts "Node\(\(": not a regular expression/,
      ],
      [
        "a breach action that is neither",
        [...url, "--gate-query", "up", "--on-gate-breach", "stop"],
        /^Invalid --on-gate-breach "stop": expected pause or exit$/,
      ],
      [
        "pause without an owner or pause file",
        ["--gate-prometheus-url", "http://p:9090", "--gate-query", "up"],
        /^Invalid --gate-prometheus-url: a breach pauses the run on its owner Job or --pause-file; .*--on-gate-breach exit$/,
      ],
    ];
    for (const [what, argv, want] of cases) {
      await t.step(what, () => assert.match(rejection([...T, ...argv]), want));
    }
    await t.step("exit needs no owner", () => {
      const o = parseOptions([
        ...T,
        "--gate-prometheus-url",
        "http://p:9090",
        "--gate-query",
        "up",
        "--on-gate-breach",
        "exit",
      ]);
      assert.equal(o.gate?.onBreach, "exit");
    });
  },
});

Deno.test({
  name: "parseOptions() refuses bad waves and verify flags in one line naming the flag",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[], RegExp][] = [
      ["waves not growing", ["--waves", "5,3"], /^Invalid --waves "5,3": 3 does not grow after 5/],
      ["a wave of 0", ["--waves", "0"], /^Invalid --waves "0": a wave of 0 holds no node/],
      ["over 100%", ["--waves", "1,150%"], /^Invalid --waves "1,150%": 150% is over 100%/],
      ["a non-number", ["--waves", "one"], /^Invalid --waves "one": "one" is neither/],
      [
        "--canary with --waves",
        ["--canary", "1", "--waves", "1"],
        /^Invalid --canary with --waves/,
      ],
      [
        "a soak without waves",
        ["--wave-soak-secs", "5"],
        /^Invalid --wave-soak-secs: it needs --waves/,
      ],
      [
        "--verify-timeout-secs without a verify flag",
        ["--verify-timeout-secs", "5"],
        /^Invalid --verify-timeout-secs: it needs --verify-pod-selector or --verify-job-template/,
      ],
      [
        "a bad --verify-pod-selector",
        ["--verify-pod-selector", "a in (b"],
        /^Invalid --verify-pod-selector "a in \(b"/,
      ],
      [
        "a bad --verify-timeout-secs",
        ["--verify-timeout-secs", "x", "--verify-pod-selector", "a"],
        /^Invalid --verify-timeout-secs "x"/,
      ],
    ];
    for (const [name, args, want] of cases) {
      await t.step(name, () => {
        assert.throws(() => parseOptions(["--job-template=j.yaml", ...args]), (e: Error) => {
          assert.ok(e instanceof UsageError, String(e));
          assert.match(e.message, want);
          assert.doesNotMatch(e.message, /\n/);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name:
    "parseOptions() reads the plan flags: --dry-run=plan, -o text|json only with it, --estimate-from",
  permissions: "none",
  async fn(t) {
    await t.step("--dry-run=plan prints text by default", () => {
      const o = parseOptions([...T, "--dry-run=plan"]);
      assert.equal(o.dryRun, "plan");
      assert.equal(o.output, "text");
    });
    await t.step("-o json and --output=json", () => {
      assert.equal(parseOptions([...T, "--dry-run=plan", "-o", "json"]).output, "json");
      assert.equal(parseOptions([...T, "--dry-run=plan", "--output=json"]).output, "json");
    });
    await t.step("--estimate-from names the report, with or without the plan", () => {
      assert.equal(parseOptions([...T, "--estimate-from", "r.json"]).estimateFrom, "r.json");
      assert.equal(
        parseOptions([...T, "--dry-run=plan", "--estimate-from=r.json"]).estimateFrom,
        "r.json",
      );
    });
    const refused: [string, string[], RegExp][] = [
      ["-o without --dry-run=plan", ["-o", "json"], /^Invalid --output json: it prints the plan/],
      ["-o with --dry-run=client", ["--dry-run=client", "-o", "json"], /^Invalid --output json/],
      [
        "-o yaml",
        ["--dry-run=plan", "-o", "yaml"],
        /^Invalid --output "yaml": expected text or json$/,
      ],
      [
        "an empty --estimate-from",
        ["--estimate-from="],
        /^Invalid --estimate-from "": name a file$/,
      ],
      [
        "--dry-run=apply",
        ["--dry-run=apply"],
        /^Invalid --dry-run "apply": expected client or server or plan$/,
      ],
    ];
    for (const [name, args, want] of refused) {
      await t.step(name, () => {
        assert.throws(() => parseOptions([...T, ...args]), (e: Error) => {
          assert.ok(e instanceof UsageError, String(e));
          assert.match(e.message, want);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name:
    "--help and docs/watching.md name every field of a node and of the estimate in the plan's JSON (-o json), --max-per-topology's too",
  permissions: { read: true },
  async fn(t) {
    const zone = "topology.kubernetes.io/zone";
    const view = buildPreview({
      namespace: "ops",
      prefix: "up",
      selection: "--node-selector pool=gpu",
      parallelism: 2,
      targets: [{ node: "n1", job: "up-n1", wave: 1, domain: "a", action: "start" }],
      skipped: [],
      cleanup: [],
      soakSecs: 0,
      postNodeDelaySecs: 0,
      durations: { from: "r.json", seconds: [60], medianSecs: 60 },
      maxPerTopology: { key: zone, max: 1 },
    });
    const fields = [
      ...Object.keys(view.waves[0].nodes[0]),
      "drain",
      ...Object.keys(view.estimate!),
    ];
    const help = HELP.slice(HELP.indexOf("-o, --output"), HELP.indexOf("--estimate-from REPORT"));
    const page = await Deno.readTextFile(new URL("../docs/watching.md", import.meta.url));
    const at = page.indexOf("`-o json` prints one object");
    assert.notEqual(at, -1, "docs/watching.md has the -o json paragraph");
    const json = page.slice(at);
    const paragraph = json.slice(0, json.indexOf("\n\n"));
    for (const field of new Set(fields)) {
      await t.step(field, () => {
        const named = new RegExp(`\\b${field}\\b`);
        assert.match(help, named, `--help's -o names ${field}`);
        assert.match(paragraph, named, `docs/watching.md's -o json paragraph names ${field}`);
      });
    }
  },
});

Deno.test({
  name: "parseOptions() takes several --report, each FORMAT=PATH or a PATH in --report-format",
  permissions: "none",
  async fn(t) {
    const cases: [string, string[], { path: string; format: string }[]][] = [
      ["one PATH: json by default", ["--report", "r.json"], [{ path: "r.json", format: "json" }]],
      [
        "one PATH in --report-format",
        ["--report", "r.xml", "--report-format", "junit"],
        [{ path: "r.xml", format: "junit" }],
      ],
      [
        "json and html from one run",
        ["--report", "json=a.json", "--report", "html=b.html"],
        [{ path: "a.json", format: "json" }, { path: "b.html", format: "html" }],
      ],
      [
        "a PATH beside a FORMAT=PATH takes --report-format",
        ["--report", "r.xml", "--report", "html=r.html", "--report-format", "junit"],
        [{ path: "r.xml", format: "junit" }, { path: "r.html", format: "html" }],
      ],
      [
        "an = that is no format is part of the path",
        ["--report", "out/a=b.json"],
        [{ path: "out/a=b.json", format: "json" }],
      ],
    ];
    for (const [name, argv, want] of cases) {
      await t.step(name, () => {
        const o = parseOptions([...T, ...argv]);
        assert.deepEqual((o as { reports?: unknown }).reports, want);
        assert.equal(o.report, want[0].path, "the first report stays --report's");
        assert.equal(o.reportFormat, want[0].format);
      });
    }
    const refused: [string, string[], RegExp][] = [
      [
        "a format it does not know",
        ["--report", "xml=a.xml"],
        /^UsageError: Invalid --report xml=a\.xml: xml is no report format: write json=, junit= or html= before the path, or \.\/xml=a\.xml for a file of that name$/,
      ],
      [
        "a format in capitals",
        ["--report", "HTML=a.html"],
        /^UsageError: Invalid --report HTML=a\.html: HTML is no report format/,
      ],
      [
        "a format with no path",
        ["--report", "json="],
        /^UsageError: Invalid --report json=: it names no path after json=/,
      ],
      [
        "no format before =",
        ["--report", "=a.json"],
        /^UsageError: Invalid --report =a\.json: no format before =: write json=, junit= or html= before the path/,
      ],
      ["one path written twice as ./a and a", [
        "--report",
        "json=a.out",
        "--report",
        "html=./a.out",
      ], /^UsageError: Invalid --report html=\.\/a\.out: \.\/a\.out is already a --report/],
    ];
    for (const [name, argv, says] of refused) {
      await t.step(`refused: ${name}`, () => {
        assert.throws(() => parseOptions([...T, ...argv]), says);
      });
    }
    await t.step("the same path twice is refused", () => {
      assert.throws(
        () => parseOptions([...T, "--report", "json=r.out", "--report", "html=r.out"]),
        /^UsageError: Invalid --report html=r\.out: r\.out is already a --report; give each report its own path$/,
      );
    });
  },
});
