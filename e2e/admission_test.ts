/**
 * The chart's ValidatingAdmissionPolicies on the real control plane, with the
 * dispatcher ServiceAccount's own token (`kubectl create token`): each
 * request the policies exist for is denied with the policy's message and
 * leaves nothing created or changed, while the dispatcher's own rollout (node
 * labels, taint removal, --drain, a verification Job, a cleanup run and a
 * `helm upgrade` with another image) passes them without a false denial.
 *
 * As in chart_test.ts, kwok fakes the hook pod; the dispatcher's real run is
 * the local one, with the chart's token and the hook's rendered arguments.
 *
 * @module
 */

import assert from "node:assert/strict";
import { stringify } from "yaml";
import { type Cluster, startCluster } from "./cluster.ts";
import { dispatcher, jobTemplate } from "./_dispatcher.ts";
import {
  CHART,
  ensureHelm,
  find,
  helmResult,
  helmRunner,
  objects,
  run,
  serviceAccountKubeconfig,
} from "./_helm.ts";
import { tempFile } from "./_fixtures.ts";
import { instantiateJob, parseJobTemplate, trackingKeys } from "../job.ts";
import { parseTaintSelectors } from "../nodes/lifecycle.ts";
import { admissionParams, admissionPolicies } from "../policy/admission.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const K8S = `${ROOT}e2e/.bin/k8s`;
const SUITE = "e2e.job-dispatcher.io/suite";
const NS = "e2e-admission";
const RELEASE = "vap";
const FULLNAME = `${RELEASE}-job-dispatcher`;
const PREFIX = "job-dispatcher";
const DONE = "e2e.example/done";
const TIER = "e2e.example/tier";
const NODES = ["vap-0", "vap-1", "vap-2"];
const DENIED =
  /ValidatingAdmissionPolicy '[^']+' with binding '[^']+' denied request: job-dispatcher admission policy: /;

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** The per-node template: tolerates every taint (the node keeps one it may not lift). */
const template = (image: string) =>
  jobTemplate("node-task", "300ms", "      tolerations: [{operator: Exists}]\n")
    .replace("registry.invalid/work:1", image);
const VERIFY = jobTemplate("smoke", "200ms", "      tolerations: [{operator: Exists}]\n")
  .replace("registry.invalid/work:1", "registry.invalid/smoke:1");
const EXTRA_ARGS = [
  `--node-label-key=${DONE}`,
  "--node-label=true",
  `--extra-node-label=${TIER}=kata`,
  "--remove-node-taints=startup",
  "--drain",
];

function values(image: string): Obj {
  return {
    image: { repository: "registry.invalid/job-dispatcher", tag: "e2e" },
    jobTemplate: template(image),
    verification: { jobTemplate: VERIFY, timeoutSecs: 60 },
    selection: { nodeSelectors: [`${SUITE}=admission`] },
    parallelism: 3,
    logFormat: "text",
    extraArgs: EXTRA_ARGS,
    rbac: { drain: true },
    test: { enabled: false },
  };
}

/** kubectl as the dispatcher's ServiceAccount. */
function asDispatcher(kubeconfig: string) {
  return (args: string[]) => run(K8S, ["kubectl", `--kubeconfig=${kubeconfig}`, ...args]);
}

/** The Job the dispatcher would create for `node`, changed by `change`. */
function jobFor(node: string, image: string, change: (pod: Obj, job: Obj) => void = () => {}) {
  const job = instantiateJob({
    template: parseJobTemplate(template(image), "e2e"),
    node: { name: node, uid: "00000000-0000-0000-0000-000000000000" },
    prefix: "node-task",
    namespace: NS,
    keys: trackingKeys(PREFIX),
  }) as Obj;
  job.metadata.name = `probe-${node}`;
  job.spec.suspend = true;
  change(job.spec.template.spec, job);
  return job;
}

async function nodeObj(cluster: Cluster, name: string): Promise<Obj> {
  const r = await cluster.kubectl(["get", "node", name, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** The hook's args with the mounted templates replaced by local files. */
async function hookArgs(
  helm: (a: string[]) => Promise<string>,
  cluster: Cluster,
): Promise<string[]> {
  const hook = find(objects(await helm(["get", "hooks", RELEASE, "-n", NS])), "Job");
  const cmName = hook.spec.template.spec.volumes.find((v: Obj) => v.name === "job-template")
    .configMap.name;
  const cm = JSON.parse(
    (await cluster.kubectl(["get", "configmap", cmName, "-n", NS, "-o", "json"])).stdout,
  );
  const files: Record<string, string> = {};
  for (const [k, text] of Object.entries(cm.data as Record<string, string>)) {
    files[k] = await tempFile(text);
  }
  return hook.spec.template.spec.containers[0].args.map((a: string) =>
    a.replace(
      /^(--[a-z-]+=)\/etc\/job-dispatcher\/(.+)$/,
      (_m, flag, key) => `${flag}${files[key]}`,
    )
  );
}

Deno.test({
  name: "Admission policies: the ServiceAccount's token is denied all but the task",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    await ensureHelm();
    const home = await Deno.makeTempDir({ prefix: "helm-" });
    const cluster = await startCluster();
    const helm = helmRunner(home, cluster.kubeconfig);
    try {
      await cluster.createNodes([
        ...NODES.map((name) => ({
          name,
          labels: { [SUITE]: "admission" },
          taints: [{ key: "startup", effect: "NoSchedule" as const }, {
            key: "keep",
            effect: "NoSchedule" as const,
          }],
        })),
        // Untainted and unselected: where kwok fakes the hook pod.
        { name: "vap-hook" },
      ]);
      assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
      const valuesFile = await tempFile(stringify(values("registry.invalid/work:1")));
      await helm(["install", RELEASE, CHART, "-n", NS, "-f", valuesFile, "--timeout", "2m"]);
      const kubeconfig = await serviceAccountKubeconfig(cluster, NS, FULLNAME);
      const sa = asDispatcher(kubeconfig);

      await t.step("the chart's params are admissionParams of the same run", async () => {
        const cm = JSON.parse(
          (await cluster.kubectl(["get", "cm", `${FULLNAME}-admission`, "-n", NS, "-o", "json"]))
            .stdout,
        );
        const ours = admissionPolicies(admissionParams({
          namespace: NS,
          serviceAccount: FULLNAME,
          name: FULLNAME,
          trackingPrefix: PREFIX,
          namePrefix: "node-task",
          hook: FULLNAME,
          template: parseJobTemplate(template("registry.invalid/work:1"), "e2e"),
          verifyTemplate: parseJobTemplate(VERIFY, "e2e"),
          nodeLabelKey: DONE,
          extraLabelKeys: [TIER],
          removeTaints: parseTaintSelectors("startup"),
        }));
        const { revision, ...data } = cm.data;
        assert.deepEqual(data, ours.at(-1)!.data);
        // This revision's own parameters, which the next upgrade keeps allowed.
        assert.deepEqual(JSON.parse(revision), ours.at(-1)!.data);
        const kinds = await cluster.kubectl([
          "get",
          "validatingadmissionpolicies,validatingadmissionpolicybindings",
          "-o",
          "name",
        ]);
        assert.match(kinds.stdout, new RegExp(`${FULLNAME}\\.${NS}\\.jobs`));
        assert.match(kinds.stdout, new RegExp(`${FULLNAME}\\.${NS}\\.nodes`));
      });

      await t.step("the Job the dispatcher writes is admitted (both pins)", async () => {
        for (
          const change of [() => {}, (pod: Obj) => {
            delete pod.nodeName;
            pod.affinity = {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: [{
                    matchFields: [{ key: "metadata.name", operator: "In", values: [NODES[0]] }],
                  }],
                },
              },
            };
          }]
        ) {
          const file = await tempFile(
            JSON.stringify(jobFor(NODES[0], "registry.invalid/work:1", change)),
          );
          const r = await sa(["create", "--dry-run=server", "-f", file]);
          assert.equal(r.code, 0, r.stderr);
        }
      });

      await t.step(
        "each forbidden Job is denied with the policy's message, none created",
        async () => {
          const other = "registry.invalid/other:1";
          const cases: [string, Obj, RegExp][] = [
            [
              "no node pin",
              jobFor(NODES[0], "registry.invalid/work:1", (pod) => delete pod.nodeName),
              /must be pinned to the one node/,
            ],
            [
              "pinned to another node than its annotation",
              jobFor(NODES[0], "registry.invalid/work:1", (pod) => pod.nodeName = NODES[1]),
              /must be pinned to the one node/,
            ],
            ["another image", jobFor(NODES[0], other), /every container image must be one of/],
            [
              "another image in an initContainer",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (pod) => pod.initContainers = [{ name: "i", image: other }],
              ),
              /every container image must be one of/,
            ],
            [
              "privileged: true",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (pod) => pod.containers[0].securityContext = { privileged: true },
              ),
              /privileged: true where the release templates ask for none/,
            ],
            [
              "hostPID",
              jobFor(NODES[0], "registry.invalid/work:1", (pod) => pod.hostPID = true),
              /hostPID: true where/,
            ],
            [
              "a hostPath volume",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (pod) => pod.volumes = [{ name: "root", hostPath: { path: "/" } }],
              ),
              /hostPath volume may mount only/,
            ],
            [
              "an added capability",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (pod) =>
                  pod.containers[0].securityContext = { capabilities: { add: ["SYS_ADMIN"] } },
              ),
              /added capabilities may be only/,
            ],
            [
              "another ServiceAccount",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (pod) => pod.serviceAccountName = FULLNAME,
              ),
              /ServiceAccounts \(default\)/,
            ],
            [
              "no owner label",
              jobFor(
                NODES[0],
                "registry.invalid/work:1",
                (_p, job) => delete job.metadata.labels[`${PREFIX}/owner`],
              ),
              /must carry the labels job-dispatcher\/owner \(one of node-task,node-task-verify\)/,
            ],
          ];
          for (const [what, job, says] of cases) {
            const r = await sa(["create", "-f", await tempFile(JSON.stringify(job))]);
            assert.notEqual(r.code, 0, `${what}: admitted`);
            assert.match(r.stderr, DENIED, `${what}: ${r.stderr}`);
            assert.match(r.stderr, says, `${what}: ${r.stderr}`);
          }
          const left = await cluster.kubectl(["get", "jobs", "-n", NS, "-o", "name"]);
          assert.doesNotMatch(left.stdout, /probe-/, "no Job created");
        },
      );

      await t.step(
        "adversarial: the chart refuses node keys under kubernetes.io, which other components read",
        async () => {
          // The policy would let the token set such a key to any value on every
          // node: a control-plane role, a hostname, a load balancer exclusion.
          const template = helmResult(home);
          const cases: [string, string][] = [
            ["--node-label-key=node-role.kubernetes.io/control-plane", "--node-label-key"],
            ["--extra-node-label=kubernetes.io/hostname=x", "--extra-node-label"],
            ["--instance-label-prefix=node.kubernetes.io", "--instance-label-prefix"],
          ];
          for (const [arg, flag] of cases) {
            const v = values("registry.invalid/work:1");
            v.extraArgs = [
              ...EXTRA_ARGS,
              arg,
              ...(flag === "--instance-label-prefix" ? ["--multi-install-suffix=blue"] : []),
            ];
            const r = await template([
              ...["template", RELEASE, CHART, "-n", NS, "-f", await tempFile(stringify(v))],
              ...["--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"],
            ]);
            assert.notEqual(r.code, 0, `${arg}: rendered`);
            assert.match(
              r.stderr,
              new RegExp(`${flag} [^:]*kubernetes\\.io`),
              `${arg}: ${r.stderr}`,
            );
            assert.match(r.stderr, /admissionPolicies\.enabled=false/, r.stderr);
          }
        },
      );

      await t.step(
        "adversarial: no volume of a kind the templates do not mount, no critical priority",
        async () => {
          // A volume the kubelet mounts from outside the pod: a PersistentVolume
          // of the namespace's claims, or (ephemeral: the claim the controller
          // makes, volumeName of its choosing) an Available `local` or hostPath
          // PersistentVolume, a CSI or NFS mount, another image's files.
          const work = "registry.invalid/work:1";
          const withVolume = (v: Obj) =>
            jobFor(NODES[0], work, (pod) => pod.volumes = [{ name: "v", ...v }]);
          const denied: [string, Obj, RegExp][] = [
            ["persistentVolumeClaim", withVolume({ persistentVolumeClaim: { claimName: "data" } })],
            [
              "ephemeral",
              withVolume({
                ephemeral: {
                  volumeClaimTemplate: {
                    spec: {
                      accessModes: ["ReadWriteOnce"],
                      volumeName: "local-pv-of-another-workload",
                      resources: { requests: { storage: "1Gi" } },
                    },
                  },
                },
              }),
            ],
            ["csi", withVolume({ csi: { driver: "secrets-store.csi.k8s.io" } })],
            ["nfs", withVolume({ nfs: { server: "203.0.113.1", path: "/" } })],
          ].map(([what, job]) => [what as string, job as Obj, /volumes may be only of the kinds/]);
          const digest = `${work}@sha256:${"0".repeat(64)}`;
          denied.push(
            ["the image under another digest", jobFor(NODES[0], digest), /container image must be/],
            [
              "privileged in an initContainer only",
              jobFor(NODES[0], work, (pod) =>
                pod.initContainers = [{
                  name: "i",
                  image: work,
                  securityContext: { privileged: true },
                }]),
              /privileged: true where/,
            ],
            [
              "a capability in another spelling",
              jobFor(NODES[0], work, (pod) =>
                pod.containers[0].securityContext = {
                  capabilities: { add: ["sys_admin", "CAP_SYS_ADMIN"] },
                }),
              /added capabilities may be only/,
            ],
          );
          denied.push([
            "priorityClassName system-node-critical",
            jobFor(NODES[0], work, (pod) => pod.priorityClassName = "system-node-critical"),
            /priorityClassName may be only/,
          ]);
          for (const [what, job, says] of denied) {
            const r = await sa([
              "create",
              "--dry-run=server",
              "-f",
              await tempFile(JSON.stringify(job)),
            ]);
            assert.notEqual(r.code, 0, `${what}: admitted`);
            assert.match(r.stderr, DENIED, `${what}: ${r.stderr}`);
            assert.match(r.stderr, says, `${what}: ${r.stderr}`);
          }
          // An ephemeral container on create: the API server's validation or the policy.
          const eph = jobFor(NODES[0], work, (pod) =>
            pod.ephemeralContainers = [{
              name: "e",
              image: work,
              securityContext: { privileged: true },
            }]);
          const e = await sa([
            "create",
            "--dry-run=server",
            "-f",
            await tempFile(JSON.stringify(eph)),
          ]);
          assert.notEqual(e.code, 0, "ephemeralContainers: admitted");
          assert.match(e.stderr, /ephemeral/i, e.stderr);
          // The kinds that hold only what the namespace or the pod already has.
          const inPod = withVolume({ emptyDir: {} });
          inPod.spec.template.spec.volumes.push(
            { name: "c", configMap: { name: "x" } },
            { name: "s", secret: { secretName: "x" } },
            { name: "d", downwardAPI: { items: [] } },
            { name: "p", projected: { sources: [] } },
          );
          const ok = await sa([
            "create",
            "--dry-run=server",
            "-f",
            await tempFile(JSON.stringify(inPod)),
          ]);
          assert.equal(ok.code, 0, ok.stderr);
        },
      );

      await t.step(
        "adversarial: no other way to a pod on a node (RBAC), no unpinning after create",
        async () => {
          // The token's only pod-making right is jobs: RBAC refuses the rest.
          const rbac: string[][] = [
            ["run", "bare", "-n", NS, "--image=registry.invalid/work:1", "--dry-run=server"],
            [
              "create",
              "cronjob",
              "cj",
              "-n",
              NS,
              "--image=registry.invalid/work:1",
              "--schedule=* * * * *",
              "--dry-run=server",
            ],
            [
              "create",
              "deployment",
              "d",
              "-n",
              NS,
              "--image=registry.invalid/work:1",
              "--dry-run=server",
            ],
            ["debug", "node/" + NODES[0], "--image=registry.invalid/work:1", "-n", NS],
          ];
          for (const args of rbac) {
            const r = await sa(args);
            assert.notEqual(r.code, 0, `${args.join(" ")}: admitted`);
            assert.match(
              r.stderr,
              /forbidden: User "system:serviceaccount:[^"]+" cannot create resource/,
              r.stderr,
            );
          }
          // Two terms (ORed) pinning to two nodes: not one node.
          const twoNodes = jobFor(NODES[0], "registry.invalid/work:1", (pod) => {
            delete pod.nodeName;
            pod.affinity = {
              nodeAffinity: {
                requiredDuringSchedulingIgnoredDuringExecution: {
                  nodeSelectorTerms: NODES.slice(0, 2).map((n) => ({
                    matchFields: [{ key: "metadata.name", operator: "In", values: [n] }],
                  })),
                },
              },
            };
          });
          const two = await sa(["create", "-f", await tempFile(JSON.stringify(twoNodes))]);
          assert.match(two.stderr, /must be pinned to the one node/, two.stderr);
          // A suspended Job's scheduling fields are mutable until it starts:
          // the policy refuses any change of its pod template.
          const probe = jobFor(NODES[2], "registry.invalid/work:1");
          const made = await sa(["create", "-f", await tempFile(JSON.stringify(probe))]);
          assert.equal(made.code, 0, made.stderr);
          const patch = await sa([
            ...["patch", "job", probe.metadata.name, "-n", NS, "--type=json", "-p"],
            JSON.stringify([{
              op: "add",
              path: "/spec/template/spec/nodeSelector",
              value: { "kubernetes.io/hostname": NODES[0] },
            }]),
          ]);
          assert.match(patch.stderr, DENIED, patch.stderr);
          assert.match(patch.stderr, /the pod template of a Job may not change/);
          await cluster.kubectl(["delete", "job", probe.metadata.name, "-n", NS]);
        },
      );

      await t.step("the ServiceAccount cannot rewrite its own params ConfigMap", async () => {
        // The run record's Role names run-record.<prefix> for get and update
        // now, so RBAC refuses first; the policy stays for a Role that grants
        // every ConfigMap of the namespace (an older chart, a hand-made Role).
        const got = await cluster.kubectl([
          "get",
          "cm",
          `${FULLNAME}-admission`,
          "-n",
          NS,
          "-o",
          "json",
        ]);
        assert.equal(got.code, 0, got.stderr);
        const cm = JSON.parse(got.stdout);
        cm.data.privileged = "true";
        const r = await sa(["replace", "-f", await tempFile(JSON.stringify(cm))]);
        assert.notEqual(r.code, 0, "replaced");
        assert.match(r.stderr, /forbidden|holds the release's admission parameters/i, r.stderr);
        const after = await cluster.kubectl([
          "get",
          "cm",
          `${FULLNAME}-admission`,
          "-n",
          NS,
          "-o",
          "json",
        ]);
        assert.equal(JSON.parse(after.stdout).data.privileged, "false");
      });

      await t.step("deleting a Job without the owner label is denied; it stays", async () => {
        const foreign = jobFor(NODES[0], "registry.invalid/work:1");
        // No labels on its pods either: the API server copies the pod
        // template's labels to a Job that has none.
        foreign.metadata = { name: "foreign", namespace: NS };
        foreign.spec.template.metadata.labels = { app: "foreign" };
        assert.equal(
          (await cluster.kubectl(["create", "-f", await tempFile(JSON.stringify(foreign))])).code,
          0,
        );
        const r = await sa(["delete", "job", "foreign", "-n", NS]);
        assert.notEqual(r.code, 0, r.stdout);
        assert.match(r.stderr, DENIED);
        assert.match(r.stderr, /only Jobs labelled job-dispatcher\/owner \(one of node-task,/);
        assert.equal((await cluster.kubectl(["get", "job", "foreign", "-n", NS])).code, 0);
        await cluster.kubectl(["delete", "job", "foreign", "-n", NS]);
      });

      await t.step("each forbidden node write is denied, the node unchanged", async () => {
        const node = NODES[0];
        const before = await nodeObj(cluster, node);
        const cases: [string, string[], RegExp][] = [
          ["a label outside the keys", ["label", "node", node, "steer=me"], /only the node labels/],
          [
            "an annotation outside the prefix",
            ["annotate", "node", node, "other.example/x=1"],
            /only node annotations under job-dispatcher\//,
          ],
          ["adding a taint", ["taint", "node", node, "new=1:NoSchedule"], /no taint may be added/],
          [
            "removing a taint not named",
            ["taint", "node", node, "keep:NoSchedule-"],
            /only the taints startup/,
          ],
          [
            "changing spec.providerID",
            ["patch", "node", node, "--type=merge", "-p", '{"spec":{"providerID":"x://y"}}'],
            /only labels, annotations, taints/,
          ],
        ];
        for (const [what, args, says] of cases) {
          const r = await sa(args);
          assert.notEqual(r.code, 0, `${what}: admitted`);
          assert.match(r.stderr, DENIED, `${what}: ${r.stderr}`);
          assert.match(r.stderr, says, `${what}: ${r.stderr}`);
        }
        const after = await nodeObj(cluster, node);
        assert.deepEqual(after.metadata.labels, before.metadata.labels);
        assert.deepEqual(after.metadata.annotations, before.metadata.annotations);
        assert.deepEqual(after.spec, before.spec);
      });

      await t.step(
        "adversarial: every patch type and server-side apply is judged on the node it makes",
        async () => {
          const node = NODES[1];
          const before = await nodeObj(cluster, node);
          const labels = before.metadata.labels;
          const patch = (
            type: string,
            body: unknown,
          ) => ["patch", "node", node, `--type=${type}`, "-p", JSON.stringify(body)];
          const ssa = await tempFile(JSON.stringify({
            apiVersion: "v1",
            kind: "Node",
            metadata: { name: node, labels: { steer: "me" } },
          }));
          const cases: [string, string[], RegExp][] = [
            [
              "JSON patch replacing the labels map (one key more)",
              patch("json", [{
                op: "replace",
                path: "/metadata/labels",
                value: { ...labels, steer: "me" },
              }]),
              /only the node labels/,
            ],
            [
              "JSON patch replacing the labels map by an allowed key alone",
              patch("json", [{ op: "replace", path: "/metadata/labels", value: { [DONE]: "x" } }]),
              /only the node labels/,
            ],
            [
              "strategic merge $patch: replace on labels",
              patch("strategic", { metadata: { labels: { $patch: "replace", [DONE]: "x" } } }),
              /only the node labels/,
            ],
            [
              "a named taint removed and another added in one patch",
              patch("merge", {
                spec: {
                  taints: [{ key: "keep", effect: "NoSchedule" }, {
                    key: "evil",
                    effect: "NoSchedule",
                  }],
                },
              }),
              /no taint may be added/,
            ],
            [
              "server-side apply under another field manager",
              ["apply", "--server-side", "--field-manager=evil", "--force-conflicts", "-f", ssa],
              /only the node labels/,
            ],
          ];
          for (const [what, args, says] of cases) {
            const r = await sa(args);
            assert.notEqual(r.code, 0, `${what}: admitted`);
            assert.match(r.stderr, DENIED, `${what}: ${r.stderr}`);
            assert.match(r.stderr, says, `${what}: ${r.stderr}`);
          }
          // The status subresource: RBAC grants it not, the policy denies it too.
          const status = await sa([
            ...["patch", "node", node, "--subresource=status", "--type=merge", "-p"],
            JSON.stringify({ status: { capacity: { "example.com/x": "1" } } }),
          ]);
          assert.notEqual(status.code, 0, "status: admitted");
          const after = await nodeObj(cluster, node);
          assert.deepEqual(after.metadata.labels, before.metadata.labels);
          assert.deepEqual(after.metadata.annotations, before.metadata.annotations);
          assert.deepEqual(after.spec, before.spec);
          assert.deepEqual(after.status.capacity, before.status.capacity);
        },
      );

      await t.step(
        "a missing params ConfigMap denies (parameterNotFoundAction: Deny)",
        async () => {
          const name = `${FULLNAME}-admission`;
          const got = await cluster.kubectl(["get", "cm", name, "-n", NS, "-o", "json"]);
          assert.equal(got.code, 0, got.stderr);
          const cm = JSON.parse(got.stdout);
          const job = await tempFile(JSON.stringify(jobFor(NODES[0], "registry.invalid/work:1")));
          const create = () => sa(["create", "--dry-run=server", "-f", job]);
          assert.equal((await create()).code, 0, "the template's own Job is admitted");
          assert.equal((await cluster.kubectl(["delete", "cm", name, "-n", NS])).code, 0);
          try {
            let r = await create();
            for (let i = 0; i < 60 && r.code === 0; i++) {
              await new Promise((ok) => setTimeout(ok, 500));
              r = await create();
            }
            assert.notEqual(r.code, 0, "admitted without its params");
            assert.match(r.stderr, /no params found|not found/i, r.stderr);
          } finally {
            for (const k of ["resourceVersion", "uid", "creationTimestamp", "managedFields"]) {
              delete cm.metadata[k];
            }
            const back = await cluster.kubectl([
              "create",
              "-f",
              await tempFile(JSON.stringify(cm)),
            ]);
            assert.equal(back.code, 0, back.stderr);
          }
          let r = await create();
          for (let i = 0; i < 60 && r.code !== 0; i++) {
            await new Promise((ok) => setTimeout(ok, 500));
            r = await create();
          }
          assert.equal(r.code, 0, r.stderr);
        },
      );

      await t.step(
        "the rollout (labels, taint removal, --drain, verification) and a cleanup run pass",
        async () => {
          const args = await hookArgs(helm, cluster);
          const env = { KUBECONFIG: kubeconfig };
          const r = await dispatcher(cluster, args, { env });
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3/);
          assert.doesNotMatch(r.stderr, /denied request/);
          for (const name of NODES) {
            const node = await nodeObj(cluster, name);
            assert.equal(node.metadata.labels[DONE], "true");
            assert.equal(node.metadata.labels[TIER], "kata");
            assert.deepEqual(node.spec.taints.map((x: Obj) => x.key), ["keep"]);
            assert.ok(!node.spec.unschedulable, `${name} uncordoned`);
          }
          const cleanup = args.filter((a) =>
            !a.startsWith("--node-label=") && !a.startsWith("--remove-node-taints=")
          );
          const c = await dispatcher(cluster, [...cleanup, "--remove-node-label"], { env });
          assert.equal(c.code, 0, c.stderr);
          assert.doesNotMatch(c.stderr, /denied request/);
          for (const name of NODES) {
            assert.equal((await nodeObj(cluster, name)).metadata.labels[DONE], undefined);
          }
        },
      );

      await t.step(
        "helm upgrade with another image: params follow, the run passes; the image two revisions back is denied",
        async () => {
          const params = async () =>
            JSON.parse(
              (await cluster.kubectl([
                "get",
                "cm",
                `${FULLNAME}-admission`,
                "-n",
                NS,
                "-o",
                "json",
              ]))
                .stdout,
            ).data;
          const upgrade = async (image: string) =>
            await helm([
              ...["upgrade", RELEASE, CHART, "-n", NS, "--timeout", "2m"],
              ...["-f", await tempFile(stringify(values(image)))],
            ]);
          const admitted = async (image: string) =>
            await sa([
              ...["create", "--dry-run=server", "-f"],
              await tempFile(JSON.stringify(jobFor(NODES[1], image))),
            ]);
          const [v1, v2, v3] = [1, 2, 3].map((n) => `registry.invalid/work:${n}`);
          await upgrade(v2);
          // The previous revision's image stays allowed: its run, or its
          // retried hook pod, may still make Jobs of its own template.
          assert.equal((await params()).images, `registry.invalid/smoke:1,${v1},${v2}`);
          for (const image of [v1, v2]) {
            const ok = await admitted(image);
            assert.equal(ok.code, 0, ok.stderr);
          }
          const r = await dispatcher(cluster, await hookArgs(helm, cluster), {
            env: { KUBECONFIG: kubeconfig },
          });
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stderr, /summary: 3 succeeded, 0 failed of 3/);
          await upgrade(v3);
          assert.equal((await params()).images, `registry.invalid/smoke:1,${v2},${v3}`);
          const old = await admitted(v1);
          assert.notEqual(old.code, 0);
          assert.match(old.stderr, DENIED);
          assert.match(old.stderr, /every container image must be one of/);
        },
      );
    } finally {
      await cluster.stop({ removeDir: true });
    }
  },
});
