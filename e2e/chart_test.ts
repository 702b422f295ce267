/**
 * The Helm chart and the shipped bundle, end to end: helm (built from its Go
 * module by tools/build.sh) lints and renders the chart, installs it into a
 * namespace that enforces the "restricted" Pod Security Standard on the real
 * control plane, and the dispatcher then runs with the chart's ServiceAccount
 * token and the exact arguments of the rendered hook Job.
 *
 * The hook Job itself runs on a simulated node: kwok fakes its pod (it
 * succeeds after 1 s without running anything), which is what makes
 * `helm install` return, and what proves the API server admitted the hook pod
 * under "restricted". The dispatcher's real run is the local one, with the
 * same identity and arguments; the per-node Jobs it creates are owned by that
 * hook Job, so deleting it must garbage-collect them.
 */

import assert from "node:assert/strict";
import { parse, stringify } from "yaml";
import { type Cluster, startCluster } from "./cluster.ts";
import { dispatcher, dispatchPermissions, eventually, jobsIn, jobTemplate } from "./_dispatcher.ts";
import {
  CHART,
  ensureHelm,
  find,
  helmResult,
  helmRunner,
  objects,
  run,
  serviceAccountKubeconfig as saKubeconfig,
} from "./_helm.ts";
import { tempFile } from "./_fixtures.ts";
import { OUTCOME_LABEL } from "./_nodes.ts";
import { playTestPod, RUN_HERE } from "./_test_pod.ts";
import { EXIT } from "../report/summary.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const SUITE = "e2e.job-dispatcher.io/suite";
const NS = "e2e-chart";
const RELEASE = "rollout";
const FULLNAME = `${RELEASE}-job-dispatcher`;
/** The hook Job of revision 1: one name per revision (chart/templates/_helpers.tpl hookName). */
const HOOK_JOB = `${FULLNAME}-r1`;
const SERVICE_ACCOUNT = FULLNAME;
const FLEET = 5;

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/**
 * The per-node Job template of the suites, made to pass "restricted" too:
 * the per-node Jobs run in the release namespace.
 */
function restrictedJobTemplate(): Obj {
  const job = parse(jobTemplate("node-task", "300ms"));
  job.spec.template.spec.securityContext = {
    runAsNonRoot: true,
    runAsUser: 65532,
    seccompProfile: { type: "RuntimeDefault" },
  };
  for (const c of job.spec.template.spec.containers) {
    c.securityContext = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
  }
  return job;
}

async function writeValues(values: Obj): Promise<string> {
  return await tempFile(stringify(values));
}

/** A privileged hostPID template, with comments, odd spacing and a trailing blank line. */
const PRIVILEGED = `# The host's view: hostPID, privileged, the root filesystem mounted.
apiVersion: batch/v1
kind: Job
metadata:
  name: host-task   # trailing comment
spec:
  backoffLimit: 2
  template:
    spec:
      hostPID: true
      restartPolicy: Never
      containers:
        - name: task
          image: registry.example/host-task:1
          securityContext: { privileged: true }
          command: ["nsenter", "-t", "1", "-m", "--", "sh", "-c", "echo <done> && exit 0"]
          volumeMounts: [{ name: host, mountPath: /host }]
      volumes: [{ name: host, hostPath: { path: / } }]

`;

/** The my-values.yaml example of README.md. */
async function readmeValues(): Promise<string> {
  const readme = await Deno.readTextFile(`${ROOT}README.md`);
  const m = readme.match(/```yaml\n(# my-values\.yaml\n[^]*?)```/);
  assert.ok(m, "README.md has a my-values.yaml example");
  return m[1];
}

/**
 * Creates `count` bare Node objects (no kubelet, no kwok: only their number
 * matters), a few requests at a time: kubectl creates them one by one, which
 * takes half a minute for 5,000 on two cores.
 */
async function createBareNodes(cluster: Cluster, count: number): Promise<void> {
  const pki = `${cluster.dir}/pki`;
  const client = Deno.createHttpClient({
    caCerts: [await Deno.readTextFile(`${pki}/ca.crt`)],
    cert: await Deno.readTextFile(`${pki}/admin.crt`),
    key: await Deno.readTextFile(`${pki}/admin.key`),
  });
  try {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const name = `bare-${next++}`;
        const res = await fetch(`${cluster.server}/api/v1/nodes`, {
          client,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } }),
        });
        const body = await res.text();
        assert.equal(res.status, 201, `create node ${name}: ${body}`);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  } finally {
    client.close();
  }
}

Deno.test({
  name: "Helm chart: lint, O(1) release, restricted install, hook args, GC; read-only bundle",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await ensureHelm();
    const home = await Deno.makeTempDir({ prefix: "helm-" });
    const offline = helmRunner(home);
    const values = await writeValues({
      image: { repository: "registry.invalid/job-dispatcher", tag: "e2e" },
      jobTemplate: restrictedJobTemplate(),
      selection: { nodeSelectors: [`${SUITE}=chart`] },
      parallelism: 2,
      logFormat: "text",
      progressIntervalSecs: 1,
      // helm test's Pod runs its command here, not faked by kwok (e2e/_test_pod.ts).
      test: { podAnnotations: RUN_HERE },
    });

    await t.step("helm show readme is the chart's manual", async () => {
      const readme = await offline(["show", "readme", CHART]);
      for (const says of [/--timeout/, /NOTES\.txt/, /helm uninstall/, /extraArgs/]) {
        assert.match(readme, says);
      }
    });

    await t.step("helm lint and helm template are clean; RBAC follows the owner mode", async () => {
      const lint = await offline(["lint", "--strict", CHART, "-f", values]);
      assert.match(lint, /0 chart\(s\) failed/);
      /** The chart's objects with the values and `set` (helm --set). */
      const rendered = async (...set: string[]) =>
        objects(
          await offline([
            "template",
            RELEASE,
            CHART,
            "-n",
            NS,
            "-f",
            values,
            ...set.flatMap((v) => ["--set", v]),
          ]),
        );
      const byName = await rendered();
      const roles = byName.filter((o) => o.kind === "Role");
      const role = roles.find((r) => r.metadata.namespace === NS)!;
      assert.deepEqual(role.rules, [
        {
          apiGroups: ["batch"],
          resources: ["jobs"],
          verbs: ["get", "list", "watch", "create", "delete", "patch"],
        },
        // get pods only with owner.mode=pod (--owner-job-from-pod), below
        { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
        { apiGroups: [""], resources: ["events"], verbs: ["create"] },
        // Only this revision's template: its hook Job becomes its owner, so
        // the collector deletes it with the Job (run/owner_guard.ts).
        {
          apiGroups: [""],
          resources: ["configmaps"],
          resourceNames: [`${HOOK_JOB}-job-template`],
          verbs: ["patch"],
        },
      ]);
      const nodeEvents = roles.find((r) => r.metadata.namespace === "default")!;
      assert.deepEqual(nodeEvents.rules, [
        { apiGroups: [""], resources: ["events"], verbs: ["create"] },
      ]);
      const nodesRule = {
        apiGroups: [""],
        resources: ["nodes"],
        verbs: ["get", "list", "watch", "patch"],
      };
      assert.deepEqual(find(byName, "ClusterRole").rules, [nodesRule]);
      const drain = await rendered("rbac.drain=true");
      assert.deepEqual(find(drain, "ClusterRole").rules, [
        nodesRule,
        { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
        { apiGroups: [""], resources: ["pods/eviction"], verbs: ["create"] },
        { apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: ["get"] },
      ]);
      const hook = find(byName, "Job");
      assert.equal(
        hook.metadata.annotations["helm.sh/hook"],
        "post-install,post-upgrade",
      );
      assert.ok(
        hook.spec.template.spec.containers[0].args.includes(`--owner-job-name=${HOOK_JOB}`),
      );
      assert.equal(
        hook.metadata.annotations["job-dispatcher/template-configmap"],
        `${HOOK_JOB}-job-template`,
      );
      assert.equal(find(byName, "ConfigMap").metadata.name, `${HOOK_JOB}-job-template`);

      const pod = await rendered("owner.mode=pod");
      assert.deepEqual(find(pod, "Role").rules[1], {
        apiGroups: [""],
        resources: ["pods"],
        verbs: ["get", "list"],
      });
      const c = find(pod, "Job").spec.template.spec.containers[0];
      assert.ok(c.args.includes("--owner-job-from-pod=$(POD_NAME)"));
      assert.equal(c.env[0].valueFrom.fieldRef.fieldPath, "metadata.name");
    });

    await t.step(
      "the hook Job is named per revision (at most 63 characters), labelled, no finalizer; hook-failed refused",
      async () => {
        // Release names reach 53 characters; the suffix is kept, the name cut.
        for (const release of [RELEASE, "r".repeat(53)]) {
          const out = await offline(["template", release, CHART, "-f", values]);
          const hook = find(objects(out), "Job");
          assert.match(hook.metadata.name, /-r1$/);
          assert.ok(hook.metadata.name.length <= 63, hook.metadata.name);
          assert.equal(hook.metadata.finalizers, undefined);
          assert.ok(hook.metadata.labels["job-dispatcher/hook"].length <= 63);
          assert.ok(
            hook.spec.template.spec.containers[0].args.includes(
              `--owner-job-name=${hook.metadata.name}`,
            ),
          );
        }
        const none = find(
          objects(
            await offline(["template", RELEASE, CHART, "-f", values, "--set", "owner.mode=none"]),
          ),
          "Job",
        );
        assert.equal(none.metadata.name, FULLNAME, "without an owner: the fixed name");
        // No owner to tie it to: Helm's before-hook-creation replaces the one fixed name.
        assert.equal(none.metadata.annotations["job-dispatcher/template-configmap"], undefined);
        // `helm template` with `value` set: the chart's own refusals.
        const templateWith = (value: string) =>
          helmResult(home)(["template", RELEASE, CHART, "-f", values, "--set", value]);
        const refused = await templateWith("hook.deletePolicy=before-hook-creation\\,hook-failed");
        assert.notEqual(refused.code, 0);
        assert.match(refused.stderr, /hook\/deletePolicy/);
        // helm rollback re-creates the stored hook of the revision rolled
        // back to and deletes one of its name first (before-hook-creation):
        // a hook Job whose run still goes on, and with it its per-node Jobs.
        const rollback = await templateWith(
          "hook.events=post-install\\,post-upgrade\\,post-rollback",
        );
        assert.notEqual(rollback.code, 0, "post-rollback is refused");
        assert.match(rollback.stderr, /hook\.events: post-rollback is refused.*helm upgrade/);
      },
    );

    /** The ConfigMap's job.yaml, rendered with `args`. */
    const renderedTemplate = async (...args: string[]) =>
      find(
        objects(
          await offline([
            "template",
            RELEASE,
            CHART,
            "--show-only",
            "templates/configmap.yaml",
            ...args,
          ]),
        ),
        "ConfigMap",
      ).data["job.yaml"];

    await t.step("the chart renders a user's jobTemplate byte for byte", async (t) => {
      await t.step("a privileged hostPID template, --set-file", async () => {
        const file = await tempFile(PRIVILEGED);
        assert.equal(await renderedTemplate("--set-file", `jobTemplate=${file}`), PRIVILEGED);
      });
      await t.step("the README's my-values.yaml example", async () => {
        const text = await readmeValues();
        const want = parse(text).jobTemplate;
        assert.equal(typeof want, "string", "the README passes the template as a string");
        assert.equal(await renderedTemplate("-f", await tempFile(text)), want);
      });
      await t.step("an object: exactly its keys, none of the chart's example", async () => {
        const job = parse(jobTemplate("mine", "1s"));
        const out = await renderedTemplate("-f", await writeValues({ jobTemplate: job }));
        assert.deepEqual(parse(out), job);
      });
    });

    await t.step(
      "waves, gates, verification and metrics values render their flags, mounts and RBAC",
      async () => {
        const verify = `# a smoke test, kept as written\napiVersion: batch/v1\nkind: Job\n` +
          `metadata: {name: smoke}\nspec: {template: {spec: {restartPolicy: Never, ` +
          `containers: [{name: s, image: registry.example/smoke:1}]}}}\n`;
        const full = await writeValues({
          jobTemplate: restrictedJobTemplate(),
          waves: { sizes: [1, "5%", "25%"], soakSecs: 60 },
          gates: {
            prometheusUrl: "https://prometheus.monitoring:9090",
            queries: ["sum(kube_deployment_status_replicas_unavailable) > 0"],
            alerts: "KubeNode.*",
            intervalSecs: 15,
            onBreach: "exit",
            bearerTokenSecret: { name: "prom-token", key: "bearer" },
            ca: { configMapName: "prom-ca" },
          },
          verification: { podSelector: "app=validator", jobTemplate: verify, timeoutSecs: 300 },
          metrics: { enabled: true, port: 9464 },
        });
        const objs = objects(await offline(["template", RELEASE, CHART, "-n", NS, "-f", full]));
        const hook = find(objs, "Job");
        const pod = hook.spec.template;
        const c = pod.spec.containers[0];
        const token = "/var/run/secrets/job-dispatcher/gate-token";
        assert.deepEqual(c.args.slice(c.args.indexOf("--log-format=json") + 1), [
          "--waves=1,5%,25%",
          "--wave-soak-secs=60",
          "--gate-prometheus-url=https://prometheus.monitoring:9090",
          "--gate-query=sum(kube_deployment_status_replicas_unavailable) > 0",
          "--gate-alerts=KubeNode.*",
          "--gate-interval-secs=15",
          "--on-gate-breach=exit",
          `--gate-bearer-token-file=${token}/token`,
          "--gate-ca-file=/etc/job-dispatcher-gate-ca/ca.crt",
          "--verify-pod-selector=app=validator",
          "--verify-job-template=/etc/job-dispatcher/verify-job.yaml",
          "--verify-timeout-secs=300",
          "--metrics-addr=:9464",
          // The default linger, above Prometheus's default 1 m scrape interval.
          "--metrics-linger-secs=90",
        ]);
        // Exit 5 (stopped by a gate) fails the hook at once, as 1 to 4 do.
        assert.deepEqual(hook.spec.podFailurePolicy.rules[1].onExitCodes.values, [1, 2, 3, 4, 5]);
        assert.equal(pod.metadata.annotations["prometheus.io/scrape"], "true");
        assert.equal(pod.metadata.annotations["prometheus.io/port"], "9464");
        assert.equal(pod.metadata.annotations["prometheus.io/path"], "/metrics");
        assert.deepEqual(c.ports, [{ name: "metrics", containerPort: 9464, protocol: "TCP" }]);
        assert.deepEqual(
          c.volumeMounts.map((m: Obj) => [m.name, m.mountPath, m.readOnly]),
          [
            ["job-template", "/etc/job-dispatcher", true],
            ["gate-token", token, true],
            ["gate-ca", "/etc/job-dispatcher-gate-ca", true],
          ],
        );
        // The token as a Secret volume (never subPath): a rotated Secret reaches the file.
        const volumes = Object.fromEntries(pod.spec.volumes.map((v: Obj) => [v.name, v]));
        assert.deepEqual(volumes["gate-token"].secret, {
          secretName: "prom-token",
          items: [{ key: "bearer", path: "token" }],
        });
        assert.deepEqual(volumes["gate-ca"].configMap, {
          name: "prom-ca",
          items: [{ key: "ca.crt", path: "ca.crt" }],
        });
        const cm = find(objs, "ConfigMap");
        assert.equal(cm.data["verify-job.yaml"], verify, "the verify template, byte for byte");
        // RBAC: the exit latch by name, pods in every namespace for the verify selector.
        const role = objs.find((o) => o.kind === "Role" && o.metadata.name === FULLNAME)!;
        assert.deepEqual(role.rules.at(-1), {
          apiGroups: [""],
          resources: ["configmaps"],
          resourceNames: ["node-task-gate-breach"],
          verbs: ["get"],
        });
        assert.deepEqual(find(objs, "ClusterRole").rules[1], {
          apiGroups: [""],
          resources: ["pods"],
          verbs: ["list"],
        });
        // A secret CA, the other way.
        const secretCa = find(
          objects(
            await offline([
              ...["template", RELEASE, CHART, "-f", full],
              ...["--set", "gates.ca.configMapName=,gates.ca.secretName=prom-ca-secret"],
            ]),
          ),
          "Job",
        );
        assert.deepEqual(
          secretCa.spec.template.spec.volumes.find((v: Obj) => v.name === "gate-ca").secret,
          { secretName: "prom-ca-secret", items: [{ key: "ca.crt", path: "ca.crt" }] },
        );
      },
    );

    await t.step(
      "bad waves, gates, verification and metrics values fail helm template, naming them",
      async () => {
        const gate = "gates.prometheusUrl=http://prometheus:9090,gates.queries={up}";
        const cases: [string[], RegExp][] = [
          [
            ["--set", "gates.onBreach=stop"],
            /\/gates\/onBreach'?: value must be one of 'pause', 'exit'/,
          ],
          [["--set", "gates.prometheusUrl=prometheus:9090"], /\/gates\/prometheusUrl/],
          [
            ["--set", "gates.queries={up}"],
            /gates\.queries, alerts, bearerTokenSecret and ca need gates\.prometheusUrl/,
          ],
          [
            ["--set", "gates.prometheusUrl=http://p:9090"],
            /gates\.prometheusUrl needs gates\.queries or gates\.alerts/,
          ],
          [
            ["--set", `${gate},owner.mode=none`],
            /gates\.onBreach=pause sets the pause on the hook Job, which owner\.mode=none/,
          ],
          [
            ["--set", `${gate},gates.ca.secretName=a,gates.ca.configMapName=b`],
            /gates\.ca: give secretName or configMapName, not both/,
          ],
          [["--set", "waves.sizes={5,3}"], /waves\.sizes 3: the wave sizes must grow strictly/],
          [["--set", "waves.sizes={10%,5%}"], /waves\.sizes 5%: the wave sizes must grow strictly/],
          [["--set", "waves.sizes={150%}"], /\/waves\/sizes\/0/],
          [["--set", "waves.soakSecs=30"], /waves\.soakSecs needs waves\.sizes/],
          [["--set", "metrics.port=0"], /\/metrics\/port/],
          [
            ["--set", "verification.jobTemplate=not a job"],
            /verification\.jobTemplate is not valid YAML|verification\.jobTemplate must be one batch\/v1 Job/,
          ],
          [
            ["--set", "metrics.enabled=true,extraArgs={--metrics-addr=:1}"],
            /extraArgs --metrics-addr=:1 repeats a flag the chart sets from metrics\.enabled/,
          ],
        ];
        for (const [set, says] of cases) {
          const r = await helmResult(home)(["template", RELEASE, CHART, "-f", values, ...set]);
          assert.notEqual(r.code, 0, `${set.join(" ")}: ${r.stdout.slice(0, 200)}`);
          assert.match(r.stderr, says, set.join(" "));
        }
        // An existing release passing these flags in extraArgs keeps working.
        const old = await offline([
          ...["template", RELEASE, CHART, "-f", values],
          ...["--set", "extraArgs={--waves=1\\,100%,--metrics-addr=:9090}"],
        ]);
        assert.ok(
          find(objects(old), "Job").spec.template.spec.containers[0].args.includes(
            "--metrics-addr=:9090",
          ),
        );
      },
    );

    await t.step("a two-document jobTemplate fails helm template, naming it", async () => {
      const two = await tempFile(
        `${PRIVILEGED}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n`,
      );
      const r = await helmResult(home)([
        "template",
        RELEASE,
        CHART,
        "--set-file",
        `jobTemplate=${two}`,
      ]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /jobTemplate holds 2 YAML documents: pass exactly one batch\/v1 Job/);
      // A leading ---, comments and a final "..." are one document still.
      const one = `---\n${PRIVILEGED}---\n# nothing\n...\n`;
      assert.equal(await renderedTemplate("--set-file", `jobTemplate=${await tempFile(one)}`), one);
    });

    const cluster = await startCluster();
    let ok = false;
    try {
      const kubectl = async (args: string[], stdin?: string) => {
        const r = await cluster.kubectl(args, stdin);
        assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
        return r.stdout;
      };
      const helm = helmRunner(home, cluster.kubeconfig);
      /** The stored release (Secret data: base64 of base64 of gzipped JSON) and its size. */
      const storedRelease = async (revision: number) => {
        const secret = JSON.parse(
          await kubectl([
            "get",
            "secret",
            `sh.helm.release.v1.${RELEASE}.v${revision}`,
            "-n",
            NS,
            "-o",
            "json",
          ]),
        );
        const gz = Uint8Array.from(atob(atob(secret.data.release)), (c) => c.charCodeAt(0));
        const json = await new Response(
          new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip")),
        ).text();
        return { bytes: secret.data.release.length as number, release: JSON.parse(json) as Obj };
      };
      const nodes = Array.from({ length: FLEET }, (_, i) => ({
        name: `chart-${i}`,
        labels: { [SUITE]: "chart" },
      }));
      await cluster.createNodes(nodes);
      await kubectl(["create", "namespace", NS]);
      await kubectl([
        "label",
        "namespace",
        NS,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
      ]);
      let hookUid = "";
      let kubeconfig = "";
      let hookArgs: string[] = [];
      let template = "";

      await t.step(
        "helm install into a restricted namespace: the hook pod is admitted",
        async () => {
          // The namespace really enforces "restricted": a bare pod is refused.
          const bare = await cluster.kubectl([
            "run",
            "bare",
            "-n",
            NS,
            "--image=registry.invalid/bare:1",
            "--dry-run=server",
          ]);
          assert.notEqual(bare.code, 0);
          assert.match(bare.stderr, /violates PodSecurity "restricted/);

          const release = [RELEASE, CHART, "-n", NS, "-f", values];
          const installed = await helm(["install", ...release, "--timeout", "2m"]);
          // NOTES.txt: no finalizer anywhere; the hook Jobs are listed by their label.
          assert.doesNotMatch(installed, /finalizer/);
          assert.match(
            installed,
            new RegExp(`get jobs -n ${NS} -l job-dispatcher/hook=${FULLNAME}`),
          );
          assert.match(installed, /If Helm says the hook Job failed, .*exit code says why/);
          assert.match(installed, new RegExp(`helm test ${RELEASE} -n ${NS} --logs`));
          assert.match(
            installed,
            new RegExp(
              `helm uninstall keeps this hook Job[^]*delete job,configmap -n ${NS} -l job-dispatcher/hook=${FULLNAME}`,
            ),
          );
          assert.match(installed, new RegExp(`annotate job ${HOOK_JOB} -n ${NS} \\S+/paused=true`));
          const hook = JSON.parse(await kubectl(["get", "job", HOOK_JOB, "-n", NS, "-o", "json"]));
          hookUid = hook.metadata.uid;
          assert.equal(hook.status.succeeded, 1, "the (simulated) hook pod ran to completion");
          const pods = JSON.parse(
            await kubectl(["get", "pods", "-n", NS, "-l", `job-name=${HOOK_JOB}`, "-o", "json"]),
          );
          assert.equal(pods.items.length, 1, "the API server admitted the hook pod");
        },
      );

      await t.step(
        "helm install refuses a two-document jobTemplate (and hook-failed): nothing of the release left",
        async () => {
          const two = await tempFile(
            `${PRIVILEGED}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n`,
          );
          const install = helmResult(home, cluster.kubeconfig);
          const cases: [string[], RegExp][] = [
            [
              ["--set-file", `jobTemplate=${two}`],
              /jobTemplate holds 2 YAML documents: pass exactly one batch\/v1 Job/,
            ],
            [["--set", "hook.deletePolicy=hook-failed"], /\/hook\/deletePolicy'/],
          ];
          for (const [set, says] of cases) {
            const r = await install(["install", "two-docs", CHART, "-n", NS, "-f", values, ...set]);
            assert.notEqual(r.code, 0, r.stdout);
            assert.match(r.stderr, says);
          }
          const left = await kubectl([
            "get",
            "secrets,serviceaccounts,configmaps,jobs,roles,rolebindings",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/instance=two-docs",
            "-o",
            "name",
          ]);
          assert.equal(left.trim(), "", "no object of the release");
          const releases = await kubectl(["get", "secrets", "-n", NS, "-l", "owner=helm"]);
          assert.doesNotMatch(releases, /two-docs/, "no release stored");
        },
      );

      await t.step(
        "the dispatcher with the chart's token and the hook's args rolls out",
        async () => {
          // The exact arguments Helm rendered and stored in the release.
          const hook = find(objects(await helm(["get", "hooks", RELEASE, "-n", NS])), "Job");
          hookArgs = hook.spec.template.spec.containers[0].args;
          // The ConfigMap the hook pod mounts: this revision's own.
          const volume = hook.spec.template.spec.volumes.find((v: Obj) =>
            v.name === "job-template"
          );
          assert.equal(volume.configMap.name, `${HOOK_JOB}-job-template`);
          const cm = JSON.parse(
            await kubectl(["get", "configmap", volume.configMap.name, "-n", NS, "-o", "json"]),
          );
          // The one difference from the pod: the ConfigMap is a file here, not a mount.
          template = await tempFile(cm.data["job.yaml"]);
          await Deno.chmod(template, 0o644);
          const mount = "--job-template=/etc/job-dispatcher/job.yaml";
          assert.ok(hookArgs.includes(mount), hookArgs.join(" "));
          const args = hookArgs.map((a) => a === mount ? `--job-template=${template}` : a);
          kubeconfig = await saKubeconfig(cluster, NS, SERVICE_ACCOUNT);

          const r = await dispatcher(cluster, args, { env: { KUBECONFIG: kubeconfig } });
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, new RegExp(`summary: ${FLEET} succeeded, 0 failed of ${FLEET}`));
          const jobs = (await jobsIn(cluster, NS)).filter((j) => j.name !== HOOK_JOB);
          assert.equal(jobs.length, FLEET);
          assert.ok(jobs.every((j) => j.owners.length === 1 && j.owners[0] === hookUid));
        },
      );

      /** `helm test` of `release`, with its Pod's command run as its kubelet would (e2e/_test_pod.ts). */
      const helmTest = async (release: string, ns: string) => {
        const played = playTestPod(cluster, ns, `${release}-job-dispatcher-test`);
        try {
          const [helmSays, pod] = await Promise.all([
            helmResult(home, cluster.kubeconfig)([
              ...["test", release, "-n", ns, "--logs", "--timeout", "3m"],
            ]),
            played.done,
          ]);
          return { ...helmSays, pod };
        } finally {
          await played.close();
        }
      };

      await t.step(
        "helm test after a clean rollout passes: status as the read-only test ServiceAccount",
        async () => {
          const test = find(objects(await helm(["get", "hooks", RELEASE, "-n", NS])), "Pod");
          assert.equal(test.metadata.annotations["helm.sh/hook"], "test");
          assert.equal(test.spec.serviceAccountName, `${FULLNAME}-test`);
          assert.deepEqual(test.spec.containers[0].args, [
            "status",
            `--namespace=${NS}`,
            `--owner-job-name=${HOOK_JOB}`,
            "--tracking-label-prefix=job-dispatcher",
            "--require-ended",
          ]);
          // Read-only: the viewer's rights, nothing the dispatcher's Role adds.
          const as = `--as=system:serviceaccount:${NS}:${FULLNAME}-test`;
          for (
            const [verb, what, allowed] of [
              ["list", "jobs", "yes"],
              ["get", "configmaps", "yes"],
              ["list", "nodes", "yes"],
              ["create", "jobs", "no"],
              ["patch", "nodes", "no"],
              ["update", "configmaps", "no"],
            ]
          ) {
            const r = await cluster.kubectl(["auth", "can-i", verb, what, "-n", NS, as]);
            assert.equal(r.stdout.trim(), allowed, `${verb} ${what}: ${r.stderr}`);
          }
          const r = await helmTest(RELEASE, NS);
          assert.equal(r.pod.code, 0, r.pod.log);
          assert.equal(r.code, 0, `helm test: ${r.stdout}${r.stderr}`);
          assert.match(r.stdout, /Phase:\s+Succeeded/);
          // --logs: the status view, fetched through the API server from the kubelet.
          assert.match(r.stdout, new RegExp(`${FLEET} nodes: ${FLEET} succeeded`));
        },
      );

      await t.step(
        "helm test after a rollout with one failed node fails, naming that node and why",
        async () => {
          const ns = `${NS}-failed`;
          await kubectl(["create", "namespace", ns]);
          // A taint keeps the scheduler's hook and test pods off the failing
          // node; --nodes (selection.nodes) checks no taint.
          const failing = [
            { name: "chart-failed-0" },
            {
              name: "chart-failed-1",
              labels: { [OUTCOME_LABEL]: "fail" },
              taints: [{ key: "e2e.job-dispatcher.io/fails", effect: "NoSchedule" as const }],
            },
            { name: "chart-failed-2" },
          ];
          await cluster.createNodes(failing);
          try {
            const release = "failed";
            const v = await writeValues({
              ...parse(await Deno.readTextFile(values)),
              selection: { nodes: failing.map((n) => n.name) },
            });
            await helm(["install", release, CHART, "-n", ns, "-f", v, "--timeout", "2m"]);
            const hook = find(objects(await helm(["get", "hooks", release, "-n", ns])), "Job");
            const args = hook.spec.template.spec.containers[0].args.map((a: string) =>
              a.startsWith("--job-template=") ? `--job-template=${template}` : a
            );
            const sa = await saKubeconfig(cluster, ns, `${release}-job-dispatcher`);
            const rollout = await dispatcher(cluster, args, { env: { KUBECONFIG: sa } });
            assert.equal(rollout.code, 1, rollout.stderr);
            assert.match(rollout.stderr, /summary: 2 succeeded, 1 failed of 3/);

            const r = await helmTest(release, ns);
            console.log(`helm test ${release}:\n${r.stdout}${r.stderr}`);
            assert.equal(r.pod.code, 1, r.pod.log);
            assert.notEqual(r.code, 0, `helm test passed: ${r.stdout}`);
            assert.match(r.stdout + r.stderr, /Phase:\s+Failed/);
            // The reason reaches helm test --logs: the node, and what its Job said.
            assert.match(
              r.stdout,
              /FAILED\n.*\nchart-failed-1 .*simulated failure on chart-failed-1/,
            );
            const pod = JSON.parse(
              await kubectl([
                "get",
                "pod",
                `${release}-job-dispatcher-test`,
                "-n",
                ns,
                "-o",
                "json",
              ]),
            );
            assert.match(
              pod.status.containerStatuses[0].state.terminated.message,
              /chart-failed-1/,
              "kubectl describe pod names the node too (FallbackToLogsOnError)",
            );
          } finally {
            // The release-size step counts the nodes: these go again.
            for (const n of failing) await cluster.deleteNode(n.name);
          }
        },
      );

      await t.step(
        "the bundle runs with HOME unset in a read-only directory, as UID 65532",
        async () => {
          const bundle = await run("deno", ["task", "bundle"], { cwd: ROOT });
          assert.equal(bundle.code, 0, bundle.stderr);
          const cwd = await Deno.makeTempDir({ prefix: "ro-" });
          await Deno.chmod(cwd, 0o555);
          // The checkout may sit in a folder only root can enter (a CI clone
          // under mktemp -d): give the image's user a readable copy.
          const bin = await Deno.makeTempDir({ prefix: "bundle-" });
          await Deno.copyFile(`${ROOT}dist/job-dispatcher.js`, `${bin}/job-dispatcher.js`);
          await Deno.chmod(`${bin}/job-dispatcher.js`, 0o644);
          await Deno.chmod(bin, 0o755);
          // Root ignores file modes; run as the image's user so the mode binds.
          const asUser = Deno.uid() === 0
            ? ["setpriv", "--reuid=65532", "--regid=65532", "--clear-groups"]
            : [];
          const args = hookArgs.map((a) =>
            a.startsWith("--job-template=") ? `--job-template=${template}` : a
          );
          // Another name prefix than the release's: its admission params
          // (docs/admission-policies.md) must allow the Jobs' owner label "ro".
          await kubectl([
            ...["patch", "configmap", `${FULLNAME}-admission`, "-n", NS, "--type=merge", "-p"],
            JSON.stringify({ data: { owners: "node-task,ro" } }),
          ]);
          const r = await run(
            asUser[0] ?? Deno.execPath(),
            [
              ...asUser.slice(1),
              ...(asUser.length ? [Deno.execPath()] : []),
              "run",
              "--quiet",
              ...dispatchPermissions(),
              `${bin}/job-dispatcher.js`,
              ...args,
              "--name-prefix=ro",
              `--nodes=${nodes[0].name},${nodes[1].name}`,
            ].filter((a) => !a.startsWith("--node-selector=")),
            {
              cwd,
              // No HOME; the deno CLI (not the compiled binary) insists on a
              // cache directory, so it gets one it cannot create.
              env: {
                PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
                KUBECONFIG: kubeconfig,
                DENO_DIR: `${cwd}/deno-dir`,
                NO_COLOR: "1",
              },
              clearEnv: true,
            },
          );
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /summary: 2 succeeded, 0 failed of 2/);
          assert.deepEqual([...Deno.readDirSync(cwd)], [], "nothing was written");
        },
      );

      await t.step(
        "owner.mode=none, logFormat=json: NOTES promise no finalizer and no pause, and pipe logs through jq",
        async () => {
          const release = ["notes-none", CHART, "-n", NS, "-f", values];
          const notes = await helm([
            ...["install", ...release, "--set", "owner.mode=none", "--set", "logFormat=json"],
            "--dry-run=server",
          ]);
          assert.match(
            notes,
            /job\/notes-none-job-dispatcher \| jq -r/,
            "JSON logs piped through jq",
          );
          assert.match(notes, /owner\.mode=none: the per-node Jobs have no owner/);
          // NOTES only: --dry-run prints the manifest too, whose admission
          // policies name metadata.finalizers in their CEL.
          assert.doesNotMatch(notes.slice(notes.indexOf("NOTES:")), /finalizers|paused=true/);
        },
      );

      await t.step("deleting the hook Job garbage-collects every per-node Job", async () => {
        await kubectl(["delete", "job", HOOK_JOB, "-n", NS, "--cascade=background"]);
        await eventually(
          async () => (await jobsIn(cluster, NS)).length === 0,
          60_000,
          "the per-node Jobs to be garbage-collected",
        );
      });

      await t.step(`the release is the same size for ${FLEET} and 5,000 nodes`, async () => {
        const manifest = async () =>
          (await helm(["get", "manifest", RELEASE, "-n", NS])) +
          (await helm(["get", "hooks", RELEASE, "-n", NS]));
        const small = await manifest();
        const v1 = await storedRelease(1);
        const started = performance.now();
        await createBareNodes(cluster, 5000 - FLEET);
        const count = (await kubectl(["get", "nodes", "-o", "name"])).trim().split("\n").length;
        assert.equal(count, 5000);
        const createdMs = performance.now() - started;
        // With its hook, as a real upgrade: kwok fakes the new hook pod again.
        await helm(["upgrade", RELEASE, CHART, "-n", NS, "--reuse-values", "--timeout", "2m"]);
        // The hook's name carries the revision, and nothing else changes.
        const large = (await manifest()).replaceAll(`${FULLNAME}-r2`, HOOK_JOB);
        const v2 = await storedRelease(2);
        console.log(
          `chart: rendered manifest ${small.length} bytes at ${FLEET} nodes, ${large.length} at ` +
            `${count}; release Secret ${v1.bytes} / ${v2.bytes} bytes ` +
            `(5,000 nodes created in ${(createdMs / 1000).toFixed(1)} s)`,
        );
        assert.equal(large, small, "the chart renders nothing per node");
        // What the release stores beside the manifest is the same too, but for
        // timestamps, the status text and chart.values (--reuse-values folds
        // the user's values into it), none of which depends on the fleet.
        // Helm's timestamps (…time, hooks' last_run.started_at/completed_at) print
        // with a varying number of fraction digits: leave them out.
        const timeless = (v: unknown) =>
          JSON.stringify(v, (k, x) => /(time|_at)$/i.test(k) || k === "last_run" ? undefined : x)
            .length;
        for (const key of ["config", "manifest", "hooks"]) {
          assert.equal(timeless(v2.release[key]), timeless(v1.release[key]), `release.${key}`);
        }
        assert.equal(
          timeless(v2.release.chart.templates),
          timeless(v1.release.chart.templates),
          "release.chart.templates",
        );
        assert.ok(Math.abs(v2.bytes - v1.bytes) / v1.bytes < 0.05, `${v1.bytes} vs ${v2.bytes}`);
      });
      ok = true;
    } finally {
      await cluster.stop({ removeDir: ok });
      if (!ok) console.error(`cluster logs kept in ${cluster.dir}/logs`);
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "Helm chart: a two-document jobTemplate with CRLF line endings fails helm template",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    // A template saved on Windows: Go's (?m)$ matches before "\n" only, so a
    // "---\r" separator was no separator, the chart let two documents pass,
    // and the hook exited 2 after the release existed.
    const crlf = (s: string) => s.replace(/\r?\n/g, "\r\n");
    const home = await Deno.makeTempDir({ prefix: "helm-" });
    try {
      const template = async (text: string) =>
        await helmResult(home)([
          "template",
          RELEASE,
          CHART,
          "--show-only",
          "templates/configmap.yaml",
          "--set-file",
          `jobTemplate=${await tempFile(text)}`,
        ]);
      const two = await template(
        crlf(`${PRIVILEGED}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n`),
      );
      assert.notEqual(two.code, 0, two.stdout);
      assert.match(
        two.stderr,
        /jobTemplate holds 2 YAML documents: pass exactly one batch\/v1 Job/,
      );
      // A leading ---, comments and a final "..." with CRLF are one document still.
      const one = await template(crlf(`---\n${PRIVILEGED}---\n# nothing\n...\n`));
      assert.equal(one.code, 0, one.stderr);
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
});

/** Runs `fn` with a helm home of its own (offline: helm template only), removed after. */
async function withHelmHome(fn: (home: string) => Promise<void>): Promise<void> {
  await ensureHelm();
  const home = await Deno.makeTempDir({ prefix: "helm-" });
  try {
    await fn(home);
  } finally {
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name: "Helm chart: helm test's Pod has its ServiceAccount and asks whether the rollout ended",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const rendered = async (...set: string[]) =>
        objects(
          await helmRunner(home)([
            ...["template", RELEASE, CHART, "-n", NS],
            ...set.flatMap((v) => ["--set", v]),
          ]),
        );
      const testPod = (objs: Obj[]) =>
        objs.find((o) => o.kind === "Pod" && o.metadata.annotations?.["helm.sh/hook"] === "test");
      // A run still in flight (paused by a gate, or past helm's --timeout) has
      // not worked yet: status alone exits 0 for it, helm test must not.
      const pod = testPod(await rendered())!;
      assert.ok(
        pod.spec.containers[0].args.includes("--require-ended"),
        pod.spec.containers[0].args,
      );
      // The Pod's ServiceAccount exists, and is bound, in every render that has the Pod:
      // the API server refuses a Pod naming a missing ServiceAccount, and one without
      // the viewer's rights fails on a 403 however the rollout went.
      for (
        const set of [
          [],
          ["serviceAccount.create=false", "serviceAccount.name=mine"],
          ["rbac.create=false"],
          [
            "serviceAccount.create=false",
            "serviceAccount.name=mine",
            "test.serviceAccountName=viewer",
          ],
          ["rbac.create=false", "test.serviceAccountName=viewer"],
        ]
      ) {
        const objs = await rendered(...set);
        const p = testPod(objs);
        if (!p) continue;
        const sa = p.spec.serviceAccountName;
        const given = set.includes("test.serviceAccountName=viewer");
        if (given) {
          assert.equal(sa, "viewer", set.join(","));
          // Someone else's account: the chart neither creates nor binds it.
          assert.ok(
            !objs.some((o) => o.kind !== "Pod" && o.metadata.name.endsWith(`${FULLNAME}-test`)),
            set.join(","),
          );
          continue;
        }
        assert.ok(
          objs.some((o) => o.kind === "ServiceAccount" && o.metadata.name === sa),
          `${set.join(",")}: the test Pod's ServiceAccount ${sa} is created`,
        );
        for (const kind of ["RoleBinding", "ClusterRoleBinding"]) {
          assert.ok(
            objs.some((o) => o.kind === kind && o.subjects?.some((s: Obj) => s.name === sa)),
            `${set.join(",")}: ${sa} has a ${kind}`,
          );
        }
      }
      // Without the chart's accounts or RBAC and no test.serviceAccountName: no test Pod.
      assert.equal(
        testPod(await rendered("serviceAccount.create=false", "serviceAccount.name=mine")),
        undefined,
      );
      assert.equal(testPod(await rendered("rbac.create=false")), undefined);
      assert.ok(testPod(await rendered("rbac.create=false", "test.serviceAccountName=viewer")));
    }),
});

Deno.test({
  name:
    "Helm chart: waves.sizes takes what --waves takes (fractional percentages), and refuses it with --canary",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const template = (...set: string[]) =>
        helmResult(home)([
          ...["template", RELEASE, CHART, "--show-only", "templates/hook-job.yaml"],
          ...set.flatMap((v) => ["--set", v]),
        ]);
      // A 10,000-node fleet's first waves: 0.5% is 50 nodes (engine/waves.ts reads it).
      const fine = await template("waves.sizes={1,0.5%,2.5%,100%}");
      assert.equal(fine.code, 0, fine.stderr);
      assert.ok(
        find(objects(fine.stdout), "Job").spec.template.spec.containers[0].args.includes(
          "--waves=1,0.5%,2.5%,100%",
        ),
      );
      const cases: [string, RegExp][] = [
        ["waves.sizes={2.5%,2.5%}", /waves\.sizes 2\.5%: the wave sizes must grow strictly/],
        ["waves.sizes={0.0%}", /waves\.sizes 0\.0%: a wave of 0% holds no node/],
        ["waves.sizes={100.5%}", /\/waves\/sizes\/0/],
        // The dispatcher refuses both (exit 2 in the hook, after the release exists).
        [
          "waves.sizes={1},extraArgs={--canary=2}",
          /extraArgs --canary=2 and waves\.sizes: --canary N is waves N,100%; set one of them/,
        ],
      ];
      for (const [set, says] of cases) {
        const r = await template(set);
        assert.notEqual(r.code, 0, `${set}: ${r.stdout.slice(0, 200)}`);
        assert.match(r.stderr, says, set);
      }
    }),
});

Deno.test({
  name:
    "Helm chart: the hook Job fails at once on every dispatcher verdict, retries only a disruption",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const hook = find(
        objects(
          await helmRunner(home)([
            ...["template", RELEASE, CHART, "--show-only", "templates/hook-job.yaml"],
          ]),
        ),
        "Job",
      );
      // Each exit code of report/summary.ts but success and a signal is a verdict a
      // retry cannot change: 4 (the window closed, or none is open) exits 4 again at
      // once outside the window, 5 meets the latch it left.
      const verdicts = Object.values(EXIT).filter((c) =>
        c !== EXIT.ok && c !== EXIT.sigint && c !== EXIT.sigterm
      );
      const [disruption, fail] = hook.spec.podFailurePolicy.rules;
      assert.deepEqual(disruption, {
        action: "Ignore",
        onPodConditions: [{ type: "DisruptionTarget" }],
      });
      assert.equal(fail.action, "FailJob");
      assert.deepEqual(fail.onExitCodes.values, verdicts);
    }),
});

Deno.test({
  name:
    "Helm chart: extraArgs refuses a gate or verification flag whose RBAC only its value grants",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const template = (set: string) =>
        helmResult(home)(["template", RELEASE, CHART, "--set", set]);
      // In the hook, each would meet a 403 after the release exists: the exit
      // latch's get (read before any Job), or pods list for verification.
      const cases: [string, RegExp][] = [
        [
          "extraArgs={--gate-prometheus-url=http://p:9090,--gate-query=up}",
          /extraArgs --gate-prometheus-url=http:\/\/p:9090 needs the gate's RBAC .*: set gates\.prometheusUrl/,
        ],
        [
          "extraArgs={--verify-pod-selector=app=validator}",
          /extraArgs --verify-pod-selector=app=validator needs pods list in every namespace: set verification\.podSelector/,
        ],
      ];
      for (const [set, says] of cases) {
        const r = await template(set);
        assert.notEqual(r.code, 0, `${set}: ${r.stdout.slice(0, 200)}`);
        assert.match(r.stderr, says, set);
      }
      // rbac.drain grants pods list cluster-wide: the verify selector is covered then.
      const drained = await template(
        "rbac.drain=true,extraArgs={--drain,--verify-pod-selector=app=validator}",
      );
      assert.equal(drained.code, 0, drained.stderr);
    }),
});

Deno.test({
  name:
    "Helm chart: a number of seconds from a values file reaches its flag as digits, not Go's 1e+06",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      // A values file's numbers are float64 to Helm, and %v prints 1000000 as
      // 1e+06, which the dispatcher's flags refuse (exit 2 in the hook).
      const values = await writeValues({
        selection: { waitForNodesSecs: 1000000 },
        waves: { sizes: [1], soakSecs: 1000000 },
        gates: { prometheusUrl: "http://p:9090", queries: ["up == 0"], intervalSecs: 2.5 },
        verification: { podSelector: "app=v", timeoutSecs: 3600000 },
      });
      const hook = find(
        objects(
          await helmRunner(home)([
            ...["template", RELEASE, CHART, "-f", values],
            ...["--show-only", "templates/hook-job.yaml"],
          ]),
        ),
        "Job",
      );
      const args: string[] = hook.spec.template.spec.containers[0].args;
      for (
        const want of [
          "--wait-for-nodes-secs=1000000",
          "--wave-soak-secs=1000000",
          "--gate-interval-secs=2.5",
          "--verify-timeout-secs=3600000",
        ]
      ) {
        assert.ok(args.includes(want), `${want} in ${args.join(" ")}`);
      }
    }),
});

Deno.test({
  name:
    "Helm chart: selection.failIfNoNodes passes --fail-if-no-nodes (a mistyped selector fails the hook); extraArgs repeating it is refused",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const render = async (values: Obj) =>
        await helmResult(home)([
          ...["template", RELEASE, CHART, "-f", await writeValues(values)],
          ...["--show-only", "templates/hook-job.yaml"],
        ]);
      const args = async (values: Obj): Promise<string[]> => {
        const r = await render(values);
        assert.equal(r.code, 0, r.stderr);
        return find(objects(r.stdout), "Job").spec.template.spec.containers[0].args;
      };
      assert.ok(!(await args({})).includes("--fail-if-no-nodes"), "off by default");
      assert.ok(
        (await args({ selection: { failIfNoNodes: true } })).includes("--fail-if-no-nodes"),
      );
      const twice = await render({ extraArgs: ["--fail-if-no-nodes"] });
      assert.notEqual(twice.code, 0);
      assert.match(twice.stderr, /selection\.failIfNoNodes/);
    }),
});

Deno.test({
  name:
    "Helm chart: a number the dispatcher refuses fails helm template naming the value; one it takes reaches its flag as plain digits",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withHelmHome(async (home) => {
      const gates = { prometheusUrl: "http://p:9090", queries: ["up == 0"] };
      const render = async (values: Obj) =>
        await helmResult(home)([
          ...["template", RELEASE, CHART, "-f", await writeValues(values)],
          ...["--show-only", "templates/hook-job.yaml"],
        ]);
      // cli/options.ts: --gate-interval-secs and --verify-timeout-secs are at
      // least 1; each would exit 2 in the hook, after the release exists.
      const refused: [Obj, RegExp][] = [
        [{ gates: { ...gates, intervalSecs: 0.5 } }, /gates\/intervalSecs/],
        [{ verification: { podSelector: "app=v", timeoutSecs: 0.5 } }, /verification\/timeoutSecs/],
      ];
      for (const [values, says] of refused) {
        const r = await render(values);
        assert.notEqual(r.code, 0, `${JSON.stringify(values)}: ${r.stdout.slice(0, 200)}`);
        assert.match(r.stderr, says, JSON.stringify(values));
      }
      // Go's %v prints these with an exponent (1e-07, 1.23456785e+07), and an
      // int of 1e20 wraps to a negative number: each flag refuses those.
      const r = await render({
        selection: { waitForNodesSecs: 0.0000001, nodeSettleSecs: 12345678.5 },
        parallelism: 1e20,
        kubeApi: { qps: 0.000025 },
        waves: { sizes: [1000000], soakSecs: 1e21 },
      });
      assert.equal(r.code, 0, r.stderr);
      const args: string[] = find(objects(r.stdout), "Job").spec.template.spec.containers[0].args;
      for (
        const want of [
          "--wait-for-nodes-secs=0.0000001",
          "--node-settle-secs=12345678.5",
          "--parallelism=100000000000000000000",
          "--kube-api-qps=0.000025",
          "--waves=1000000",
          "--wave-soak-secs=1000000000000000000000",
        ]
      ) {
        assert.ok(args.includes(want), `${want} in ${args.join(" ")}`);
      }
    }),
});
