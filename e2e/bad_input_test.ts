/**
 * Bad input on a real control plane: every case exits 2 (usage or input) or
 * 3 (cluster access), says in one line which input is wrong and how to fix
 * it, and creates no Job (checked on the API server).
 */

import assert from "node:assert/strict";
import { type Cluster, startCluster } from "./cluster.ts";
import { parse, stringify } from "yaml";
import { jobTemplate } from "./_dispatcher.ts";
import { CHART, helmResult } from "./_helm.ts";
import { DispatcherProcess, type Ended, errorLines, runDispatcher } from "./_faults.ts";
import {
  cordonedNodes,
  kubeconfigFor,
  namespace,
  ownerJob,
  serviceAccount,
  SUITE,
  suiteNodes,
  tempFile,
} from "./_fixtures.ts";

const NS = "b-in";
/** A certificate in PEM, to stand for a cluster's CA where no handshake happens. */
const CA = new URL("./testdata/kubelet.crt", import.meta.url).pathname;
const GOOD = jobTemplate("bad", "200ms");
const SELECT = ["-n", NS, "--node-selector", `${SUITE}=bad`];

/** The arguments of a run of the good template, followed by `rest`. */
async function withGood(
  tpl: (text: string) => Promise<string>,
  ...rest: string[]
): Promise<string[]> {
  return ["--job-template", await tpl(GOOD), ...rest];
}

/** One bad input. */
interface Case {
  name: string;
  /** The arguments; `tpl` writes a template file and returns its path. */
  args: (tpl: (text: string) => Promise<string>) => Promise<string[]>;
  /** A kubeconfig other than the admin's. */
  kubeconfig?: () => string;
  code: 2 | 3;
  /** What the first error line must say: the input and the fix. */
  message: RegExp;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Per-node Jobs anywhere in the cluster: Jobs with the tracking label. */
async function dispatchedJobs(cluster: Cluster): Promise<string[]> {
  const r = await cluster.kubectl([
    "get",
    "jobs",
    "-A",
    "-l",
    "job-dispatcher/owner",
    "-o",
    "name",
  ]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split("\n").filter(Boolean);
}

/** `s` as a regular expression that matches it literally. */
function esc(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** The suite's nodes that are cordoned. */
function cordoned(cluster: Cluster): Promise<string[]> {
  return cordonedNodes(cluster, "bad");
}

/** Malformed values of the maintenance flags: refused before anything is cordoned. */
function maintenanceCases(): Case[] {
  const cases: [string, string[], RegExp][] = [
    [
      "--pod-selector that is no selector",
      ["--drain", "--pod-selector", "app=web=x"],
      /Invalid --pod-selector "app=web=x": .*\(kubectl label selector syntax/,
    ],
    [
      "--grace-period soon",
      ["--drain", "--grace-period", "soon"],
      /Invalid --grace-period "soon": expected a whole number/,
    ],
    [
      "--drain-timeout-secs 0",
      ["--drain", "--drain-timeout-secs", "0"],
      /Invalid --drain-timeout-secs 0: it must be at least 1/,
    ],
    [
      "--force without --drain",
      ["--cordon", "--force"],
      /Invalid --force: it is a drain option; add --drain/,
    ],
    [
      "--uncordon-on-failure without --cordon",
      ["--uncordon-on-failure"],
      /Invalid --uncordon-on-failure: it needs --cordon or --drain/,
    ],
    [
      "--window with a bad day",
      ["--window", "Mon-Fry 02:00-04:00"],
      /Invalid --window "Mon-Fry 02:00-04:00": unknown day "Fry"/,
    ],
    [
      "--window in an unknown time zone",
      ["--window", "* 02:00-04:00 Mars/Olympus"],
      /Invalid --window .*unknown time zone "Mars\/Olympus"; give an IANA zone/,
    ],
    [
      "--max-unavailable over 100%",
      ["--max-unavailable", "101%"],
      /Invalid --max-unavailable "101%": a percentage is at most 100%/,
    ],
    [
      "--max-unavailable with --nodes",
      ["--max-unavailable", "1", "--nodes", "bad-000"],
      /Invalid --max-unavailable with --nodes: .*--node-selector/,
    ],
    ['--pause-file ""', ["--pause-file", ""], /Invalid --pause-file "": name a file/],
    [
      "--post-node-delay-secs -1",
      ["--post-node-delay-secs", "-1"],
      /Invalid --post-node-delay-secs -1: it must be at least 0/,
    ],
  ];
  return cases.map(([name, flags, message]) => ({
    name,
    args: async (tpl) => [
      "--job-template",
      await tpl(GOOD),
      ...flags,
      // --nodes is a selection of its own.
      ...(flags.includes("--nodes") ? ["-n", NS] : SELECT),
    ],
    code: 2,
    message,
  }));
}

Deno.test({
  name: "bad input: exit 2 or 3, one line naming the input and the fix, nothing created",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const cluster = await startCluster({ nodes: 0 });
    let ok = false;
    const started = Date.now();
    let unreachable: Promise<Ended> | undefined;
    try {
      await cluster.createNodes(suiteNodes("bad", 2));
      await namespace(cluster, NS);
      await namespace(cluster, "b-other");
      await ownerJob(cluster, "b-other", "other-hook");
      const pod = await cluster.kubectl(
        ["apply", "-f", "-"],
        `apiVersion: v1
kind: Pod
metadata: {name: lonely, namespace: ${NS}}
spec:
  nodeName: bad-000
  containers: [{name: c, image: registry.invalid/c:1}]
`,
      );
      assert.equal(pod.code, 0, pod.stderr);
      const noRbac = await serviceAccount(cluster, NS, "nobody", { rbac: false });
      const badToken = await kubeconfigFor(cluster, { token: "not-a-valid-token" });
      const nowhere = await kubeconfigFor(cluster, { server: `https://127.0.0.1:${freePort()}` });
      const notYaml = await tempFile("clusters: [unterminated\n  : :\n");
      const aDirectory = await Deno.makeTempDir({ prefix: "e2e-faults-kubeconfig-" });
      const good = await tempFile(GOOD);
      // Unreachable costs the retry budget of the first call; it runs while
      // the other cases do.
      unreachable = runDispatcher(cluster, ["--job-template", good, ...SELECT], {
        kubeconfig: nowhere,
        timeoutMs: 150_000,
      });

      const excluding = (extra: string) => jobTemplate("bad", "200ms", extra);
      const cases: Case[] = [
        {
          name: "template missing",
          args: () => Promise.resolve(["--job-template", "/nonexistent/job.yaml", ...SELECT]),
          code: 2,
          message: /Cannot read job template \/nonexistent\/job\.yaml: no such file/,
        },
        {
          name: "no --job-template at all",
          args: () => Promise.resolve([...SELECT]),
          code: 2,
          message: /Missing --job-template: name a file, or - for stdin/,
        },
        {
          name: "template empty",
          args: async (tpl) => ["--job-template", await tpl(""), ...SELECT],
          code: 2,
          message: /Invalid job template \S+: it is empty; it must hold one batch\/v1 Job/,
        },
        {
          name: "template not YAML",
          args: async (tpl) => ["--job-template", await tpl("kind: [Job\nspec: {"), ...SELECT],
          code: 2,
          message: /Invalid job template \S+: not valid YAML/,
        },
        {
          name: "template with several documents",
          args: async (tpl) => ["--job-template", await tpl(`${GOOD}---\n${GOOD}`), ...SELECT],
          code: 2,
          message: /Invalid job template \S+: it holds 2 documents; it must hold exactly one/,
        },
        {
          name: "template of the wrong kind",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD.replace("kind: Job", "kind: Deployment")),
            ...SELECT,
          ],
          code: 2,
          message: /Invalid job template \S+: kind is "Deployment"; it must be Job/,
        },
        {
          name: "template of the wrong apiVersion",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD.replace("apiVersion: batch/v1", "apiVersion: batch/v1beta1")),
            ...SELECT,
          ],
          code: 2,
          message: /Invalid job template \S+: apiVersion is "batch\/v1beta1"; it must be batch\/v1/,
        },
        {
          name: "template without containers",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD.replace(/ {6}containers:[^]*$/, "      containers: []\n")),
            ...SELECT,
          ],
          code: 2,
          message: /Invalid job template \S+: spec\.template\.spec\.containers is empty/,
        },
        {
          name: "template with restartPolicy: Always",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD.replace("restartPolicy: Never", "restartPolicy: Always")),
            ...SELECT,
          ],
          code: 2,
          message: /restartPolicy is "Always"; a Job needs Never or OnFailure/,
        },
        {
          name: "template with only generateName",
          args: async (tpl) => [
            "--job-template",
            await tpl(
              GOOD.replace("metadata:\n  name: bad\n", "metadata:\n  generateName: bad-\n"),
            ),
            ...SELECT,
          ],
          code: 2,
          message:
            /it has no metadata\.name \(only generateName.*\); set metadata\.name or --name-prefix/,
        },
        {
          name: "template whose namespace is not the one in use",
          args: async (tpl) => [
            "--job-template",
            await tpl(
              GOOD.replace(
                "metadata:\n  name: bad\n",
                "metadata:\n  name: bad\n  namespace: b-other\n",
              ),
            ),
            ...SELECT,
          ],
          code: 2,
          message:
            /Invalid job template \S+: the namespace from the provided object "b-other" does not match the namespace "b-in"; pass --namespace b-other or remove metadata\.namespace/,
        },
        {
          name: "template that sets nodeName",
          args: async (tpl) => [
            "--job-template",
            await tpl(excluding("      nodeName: bad-000\n")),
            ...SELECT,
          ],
          code: 2,
          message: /spec\.template\.spec\.nodeName is set; remove it/,
        },
        {
          name: "template nodeSelector excluding the target nodes",
          args: async (tpl) => [
            "--job-template",
            await tpl(excluding("      nodeSelector: {disktype: ssd}\n")),
            ...SELECT,
          ],
          code: 2,
          message:
            /Invalid job template \S+: it excludes 2 selected nodes, e\.g\. bad-000 .*relax the template's nodeSelector\/affinity/,
        },
        {
          name: "template affinity excluding the target node",
          args: async (tpl) => [
            "--job-template",
            await tpl(excluding(`      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: kubernetes.io/hostname, operator: NotIn, values: [bad-001]}]
`)),
            ...SELECT,
          ],
          code: 2,
          message:
            /Invalid job template \S+: it excludes 1 selected node, e\.g\. bad-001 .*relax the template's nodeSelector\/affinity/,
        },
        {
          name: "name prefix that sanitises to nothing",
          args: async (
            tpl,
          ) => ["--job-template", await tpl(GOOD), "--name-prefix", "___", ...SELECT],
          code: 2,
          message:
            /Invalid name prefix "___": nothing of it is usable in a Job name; use lowercase/,
        },
        {
          name: "--parallelism 0",
          args: async (tpl) => ["--job-template", await tpl(GOOD), "--parallelism", "0", ...SELECT],
          code: 2,
          message: /Invalid --parallelism 0: it must be at least 1/,
        },
        {
          name: "--parallelism -1",
          args: async (
            tpl,
          ) => ["--job-template", await tpl(GOOD), "--parallelism", "-1", ...SELECT],
          code: 2,
          message: /Invalid --parallelism -1: it must be at least 1/,
        },
        {
          name: "--parallelism abc",
          args: async (
            tpl,
          ) => ["--job-template", await tpl(GOOD), "--parallelism", "abc", ...SELECT],
          code: 2,
          message: /Invalid --parallelism "abc": expected a whole number/,
        },
        {
          name: "unknown flag",
          args: async (tpl) => ["--job-template", await tpl(GOOD), "--paralelism", "3", ...SELECT],
          code: 2,
          message: /Unknown flag --paralelism: did you mean --parallelism\? \(see --help\)$/,
        },
        {
          name: "--dry-run without a value, last",
          args: (tpl) => withGood(tpl, ...SELECT, "--dry-run"),
          code: 2,
          message:
            /Missing value of --dry-run: write --dry-run=client\|server\|plan \(see --help\)$/,
        },
        // The plan's estimate reads a run's JSON report; a template is no report.
        {
          name: "--estimate-from a file that is not a report, with --dry-run=plan",
          args: async (tpl) => {
            const notReport = await tpl(GOOD);
            return withGood(tpl, ...SELECT, "--dry-run=plan", "--estimate-from", notReport);
          },
          code: 2,
          message:
            /Invalid --estimate-from \S+\.yaml: not JSON \(.*\); give the JSON report of an earlier run \(--report PATH\) \(see --help\)$/,
        },
        {
          name: "--estimate-from a JSON file that is not a report, on a real run",
          args: async (tpl) => {
            const other = await tempFile('{"kind":"Job","apiVersion":"batch/v1"}\n', ".json");
            return withGood(tpl, ...SELECT, "--estimate-from", other);
          },
          code: 2,
          message:
            /Invalid --estimate-from \S+\.json: not a job-dispatcher report \(no "kind": "JobDispatcherReport"\)/,
        },
        {
          name: "--estimate-from a file that does not exist",
          args: (tpl) => withGood(tpl, ...SELECT, "--estimate-from", "/nonexistent/r.json"),
          code: 2,
          message:
            /Cannot read --estimate-from \/nonexistent\/r\.json: no such file or not readable/,
        },
        {
          name: "a list with a space after a comma",
          args: (tpl) => withGood(tpl, "-n", NS, "--nodes", "bad-000,", "bad-001"),
          code: 2,
          message: /Invalid argument "bad-001" \(after --nodes bad-000,\): .*write a list as a,b/,
        },
        {
          name: "a switch given a value other than true or false",
          args: (tpl) => withGood(tpl, "--cordon=yes", ...SELECT),
          code: 2,
          message:
            /Invalid --cordon=yes: --cordon is a switch; write --cordon \(or --cordon=false\)/,
        },
        ...maintenanceCases(),
        {
          name: "label selector the API server rejects",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "-n",
            NS,
            "--node-selector",
            "tier in (a,",
          ],
          code: 2,
          message: /Invalid --node-selector "tier in \(a,"/,
        },
        {
          name: "field selector the API server rejects",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "-n",
            NS,
            "--node-field-selector",
            "spec.bogus=1",
          ],
          code: 2,
          message: /Invalid --node-field-selector "spec\.bogus=1": the API server rejected it/,
        },
        {
          name: "--nodes naming a missing node",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "-n",
            NS,
            "--nodes",
            "bad-000,nope-1",
          ],
          code: 2,
          message: /Invalid --nodes: no node named nope-1 \(kubectl get nodes lists them\)/,
        },
        {
          name: "kubeconfig missing",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            ...SELECT,
          ],
          code: 3,
          message: /Cannot load kubeconfig \/nonexistent\/kubeconfig: no such file/,
        },
        {
          name: "kubeconfig unreadable (a directory)",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--kubeconfig",
            aDirectory,
            ...SELECT,
          ],
          code: 3,
          message: new RegExp(`Cannot load kubeconfig ${aDirectory}: \\S`),
        },
        {
          name: "kubeconfig not YAML",
          args: async (
            tpl,
          ) => ["--job-template", await tpl(GOOD), "--kubeconfig", notYaml, ...SELECT],
          code: 3,
          message: new RegExp(`Cannot load kubeconfig ${notYaml}: \\S`),
        },
        {
          name: "kubeconfig that is a Job template (kind, not 'set --kubeconfig')",
          args: async (tpl) => {
            const job = await tpl(GOOD);
            return ["--job-template", job, "--kubeconfig", job, ...SELECT];
          },
          code: 3,
          message:
            /Cannot load kubeconfig \S+: it is a Job \(apiVersion batch\/v1\), not a kubeconfig \(kind: Config, apiVersion: v1\); pass the file kubectl uses/,
        },
        {
          name: "kubeconfig with an unknown context",
          args: async (tpl) => ["--job-template", await tpl(GOOD), "--context", "nope", ...SELECT],
          code: 3,
          message: /Cannot use context "nope": not in .* \(contexts: /,
        },
        {
          name: "bad token (401)",
          args: async (tpl) => ["--job-template", await tpl(GOOD), ...SELECT],
          kubeconfig: () => badToken,
          code: 3,
          message: /unauthorised: the kubeconfig's credentials were refused; refresh them/,
        },
        {
          name: "forbidden (403)",
          args: async (tpl) => ["--job-template", await tpl(GOOD), ...SELECT],
          kubeconfig: () => noRbac.kubeconfig,
          code: 3,
          message: /Cannot list nodes: .*forbidden.*grant the verb "list" on "nodes"/,
        },
        {
          name: "namespace missing",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "-n",
            "b-nope",
            "--node-selector",
            `${SUITE}=bad`,
          ],
          code: 2,
          message:
            /Invalid namespace b-nope: it does not exist \(kubectl create namespace b-nope\)/,
        },
        {
          name: "namespace that cannot exist",
          args: (tpl) => withGood(tpl, "-n", "B-In", "--node-selector", `${SUITE}=bad`),
          code: 2,
          message: /Invalid --namespace "B-In": a namespace is a DNS label/,
        },
        {
          name: "owner Job missing",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--owner-job-name",
            "nope",
            ...SELECT,
          ],
          code: 2,
          message: /Invalid --owner-job-name nope: no such Job in namespace b-in/,
        },
        {
          name: "owner Job in another namespace",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--owner-job-name",
            "other-hook",
            ...SELECT,
          ],
          code: 2,
          message:
            /Invalid --owner-job-name other-hook: no such Job in namespace b-in \(the owner must be in the namespace of the per-node Jobs\)/,
        },
        {
          name: "--owner-job-from-pod of a pod without a Job owner",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--owner-job-from-pod",
            "lonely",
            ...SELECT,
          ],
          code: 2,
          message:
            /Invalid --owner-job-from-pod lonely: the pod is not owned by a Job; use --owner-job-name/,
        },
        {
          name: "--fail-if-no-nodes with a mistyped selector key",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "-n",
            NS,
            "--node-selector",
            `${SUITE.slice(0, -1)}=bad`,
            "--fail-if-no-nodes",
          ],
          code: 2,
          message: new RegExp(
            `No node matches --node-selector ${esc(SUITE.slice(0, -1))}=bad .*; ` +
              `no node has the label key ${esc(SUITE.slice(0, -1))} \\(a typo\\? closest: ` +
              `${esc(SUITE)}\\b.*--fail-if-no-nodes`,
          ),
        },
        {
          name: "--owner-job-from-pod of a missing pod",
          args: async (tpl) => [
            "--job-template",
            await tpl(GOOD),
            "--owner-job-from-pod",
            "ghost",
            ...SELECT,
          ],
          code: 2,
          message: /Invalid --owner-job-from-pod ghost: no such pod in namespace b-in/,
        },
      ];

      for (const c of cases) {
        await t.step(`${c.name}: exit ${c.code}`, async () => {
          const r = await runDispatcher(cluster, await c.args(tempFile), {
            kubeconfig: c.kubeconfig?.(),
            timeoutMs: 60_000,
          });
          assertRefused(r, c.code, c.message);
          assert.deepEqual(await dispatchedJobs(cluster), [], "no Job created");
          assert.deepEqual(await cordoned(cluster), [], "no node cordoned");
        });
      }

      await t.step(
        "a mistyped selector key exits 0 but names the closest keys and --fail-if-no-nodes",
        async () => {
          const typo = `${SUITE.slice(0, -1)}=bad`;
          const r = await runDispatcher(
            cluster,
            await withGood(tempFile, "-n", NS, "--node-selector", typo),
            { timeoutMs: 60_000 },
          );
          assert.equal(r.code, 0, r.stderr);
          assert.match(
            r.stderr,
            new RegExp(
              `warn: nothing to do: .*no node has the label key ${esc(SUITE.slice(0, -1))} ` +
                `\\(a typo\\? closest: ${esc(SUITE)}\\b.*--fail-if-no-nodes`,
            ),
          );
          assert.deepEqual(await dispatchedJobs(cluster), [], "no Job created");
        },
      );

      await t.step("chart values: helm install refuses them, nothing created", async (t) => {
        const home = await Deno.makeTempDir({ prefix: "helm-bad-" });
        const helm = helmResult(home, cluster.kubeconfig);
        const values = await tempFile(stringify({
          jobTemplate: parse(GOOD),
          selection: { nodeSelectors: [`${SUITE}=bad`] },
        }));
        const cases: [string, string[], RegExp][] = [
          ["a mistyped key", ["--set", "paralelism=20"], /additional properties 'paralelism'/],
          ["parallelism 0", ["--set", "parallelism=0"], /\/parallelism': minimum: got 0, want 1/],
          ["an unknown owner mode", ["--set", "owner.mode=jobname"], /\/owner\/mode'/],
          ["a bare word in extraArgs", ["--set", "extraArgs={drain}"], /'drain' does not match/],
          [
            "--drain without its RBAC",
            ["--set", "extraArgs={--drain}"],
            /extraArgs --drain needs rbac\.drain=true .*add --set rbac\.drain=true/,
          ],
          [
            "a flag the chart sets, in extraArgs",
            ["--set", "extraArgs={--namespace=other}"],
            /extraArgs --namespace=other repeats a flag the chart sets: use helm -n NAMESPACE/,
          ],
          [
            "a value's flag, in extraArgs",
            ["--set", "extraArgs={--parallelism=5}"],
            /extraArgs --parallelism=5 repeats a flag the chart sets: use --set parallelism=/,
          ],
          [
            "a tracking prefix that is no DNS subdomain",
            ["--set", "trackingLabelPrefix=Job_Dispatcher"],
            /\/trackingLabelPrefix': 'Job_Dispatcher' does not match/,
          ],
          // The dispatcher's first check, made before the release exists.
          [
            "a job template that is not YAML",
            ["--set-file", `jobTemplate=${await tempFile("kind: Job\nmetadata: {name: a\n")}`],
            /jobTemplate is not valid YAML \(.*\): pass one batch\/v1 Job/,
          ],
          [
            "a job template that is no Job",
            ["--set", "jobTemplate.kind=Pod"],
            /jobTemplate must be one batch\/v1 Job \(apiVersion: batch\/v1, kind: Job\)/,
          ],
          // A pre-* hook runs before its ServiceAccount and ConfigMap exist: its pod never starts.
          ["a pre-install hook", ["--set", "hook.events=pre-install"], /\/hook\/events'/],
          [
            "a mistyped delete policy",
            ["--set", "hook.deletePolicy=hook-succeded"],
            /deletePolicy'/,
          ],
        ];
        for (const [name, set, says] of cases) {
          await t.step(name, async () => {
            const r = await helm(["install", "bad-values", CHART, "-n", NS, "-f", values, ...set]);
            assert.notEqual(r.code, 0, r.stdout);
            assert.match(r.stderr, says);
          });
        }
        const left = await cluster.kubectl([
          "get",
          "secrets,serviceaccounts,configmaps,jobs",
          "-n",
          NS,
          "-l",
          "app.kubernetes.io/instance=bad-values",
          "-o",
          "name",
        ]);
        assert.equal(left.code, 0, left.stderr);
        assert.equal(left.stdout.trim(), "", "no object of the release");
        const releases = await cluster.kubectl(["get", "secrets", "-n", NS, "-l", "owner=helm"]);
        assert.doesNotMatch(releases.stdout, /bad-values/, "no release stored");
      });

      await t.step("server unreachable: exit 3", async () => {
        const r = await unreachable!;
        assertRefused(r, 3, /unreachable.*\(is the API server up and --context right\?\)/);
        console.log(`    unreachable: gave up after ${(r.ms / 1000).toFixed(1)} s`);
      });
      assert.deepEqual(await dispatchedJobs(cluster), [], "no Job created by any case");
      ok = true;
    } finally {
      await unreachable?.catch(() => {});
      if (!ok) console.error(await cluster.logs(30));
      await cluster.stop({ removeDir: ok });
      console.log(`bad input suite: ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  },
});

/** Exit `code`, and exactly one error line, which says `message`. */
function assertRefused(r: Ended, code: number, message: RegExp): void {
  assert.ok(!r.timedOut, `hung:\n${r.stderr}`);
  assert.equal(r.code, code, r.stderr);
  const errors = errorLines(r.stderr);
  assert.equal(errors.length, 1, `exactly one error line:\n${r.stderr}`);
  assert.match(errors[0], message);
  assert.doesNotMatch(r.stderr, /Uncaught|^\s+at /m, "no stack trace");
}

Deno.test({
  name:
    "bad input: an API server that does not answer is named at once with the retry deadline; --api-wait-secs 0 exits 3 at once",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    // No control plane: the point is an address where nothing listens, as a
    // mistyped server or a cluster that is down. The dispatcher is the real
    // binary's code, run as a process; the port is really closed. Any CA
    // does: no TLS handshake ever begins.
    const server = `https://127.0.0.1:${freePort()}`;
    const kubeconfig = await tempFile(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}", certificate-authority: ${CA}}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: ${NS}}}]
current-context: ctx
`);
    const tpl = await tempFile(GOOD);
    const args = ["--job-template", tpl, ...SELECT];
    const escaped = server.replace(/[.:/]/g, "\\$&");
    try {
      await t.step(
        "the first failed contact says the address and until when, within 2 s",
        async () => {
          const started = Date.now();
          const p = new DispatcherProcess({ kubeconfig }, args, { timeoutMs: 60_000 });
          const line = new RegExp(
            `warn: cannot reach the API server ${escaped} \\(.*Connection refused.*\\); ` +
              `retrying until (\\d\\d:\\d\\d:\\d\\d) UTC \\(--api-wait-secs 90; 0 fails at once\\)`,
          );
          const said = await p.waitFor(line);
          const ms = Date.now() - started;
          p.kill("SIGTERM");
          const r = await p.ended;
          console.log(`    said after ${ms} ms (process start included); SIGTERM: exit ${r.code}`);
          assert.ok(said, `no line naming ${server}:\n${r.stderr}`);
          assert.ok(ms < 2000, `said ${ms} ms after the start:\n${r.stderr}`);
          const until = r.stderr.match(line)![1];
          const expected = new Date(started + 90_000).toISOString().slice(11, 19);
          const gap = Math.abs(
            Date.parse(`1970-01-01T${until}Z`) - Date.parse(`1970-01-01T${expected}Z`),
          );
          assert.ok(
            gap <= 3000 || gap >= 86_400_000 - 3000,
            `deadline ${until}, expected ${expected}`,
          );
          assert.equal(r.code, 143, r.stderr);
        },
      );
      await t.step(
        "--api-wait-secs 0: exit 3 in under 5 s, one error line naming the address",
        async () => {
          const r = await runDispatcher({ kubeconfig }, [...args, "--api-wait-secs", "0"], {
            timeoutMs: 60_000,
          });
          console.log(`    --api-wait-secs 0: exit ${r.code} after ${r.ms} ms`);
          assertRefused(
            r,
            3,
            new RegExp(
              `${escaped} unreachable: .*\\(is the API server up and --context right\\?\\)`,
            ),
          );
          assert.ok(r.ms < 5000, `exit after ${r.ms} ms`);
          assert.doesNotMatch(r.stderr, /retrying until/, "no retry to announce");
        },
      );
    } finally {
      await Deno.remove(kubeconfig).catch(() => {});
      await Deno.remove(tpl).catch(() => {});
    }
  },
});
