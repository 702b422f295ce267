/**
 * The command lines of the e2e control plane's components and its admin
 * kubeconfig. No I/O: cluster.ts starts what this describes.
 *
 * @module
 */

import type { ProcSpec } from "./_procs.ts";
import { FAKE_NODE_ANNOTATION } from "./_nodes.ts";

/** A component's name. */
export type Component =
  | "etcd"
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kube-scheduler"
  | "outcomes"
  | "kwok";

/** Components in start order; stopped roughly in reverse. */
export const COMPONENTS: readonly Component[] = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "outcomes",
  "kwok",
];

/**
 * Controllers kube-controller-manager runs: what Jobs and their cleanup need,
 * and what drains need: workloads whose pods are evicted and come back on
 * other nodes, and PodDisruptionBudgets whose status the eviction API reads.
 */
export const CONTROLLERS = [
  "job-controller",
  "garbage-collector-controller",
  "namespace-controller",
  "serviceaccount-controller",
  "serviceaccount-token-controller",
  // Publishes kube-root-ca.crt, which every pod's projected token volume names.
  "root-ca-certificate-publisher-controller",
  "ttl-after-finished-controller",
  // Deletes pods whose node was deleted, as in a real cluster.
  "pod-garbage-collector-controller",
  // Evictable workload pods that reschedule: Deployments make ReplicaSets
  // make pods.
  "deployment-controller",
  "replicaset-controller",
  // Computes each PodDisruptionBudget's status (currentHealthy,
  // desiredHealthy, disruptionsAllowed); without it every eviction of a
  // covered pod is refused as "still being processed".
  "disruption-controller",
  // The pods a drain must leave alone.
  "daemonset-controller",
];

/** Where a cluster's files are and which ports it uses. */
export interface Layout {
  /** Absolute cluster directory. */
  dir: string;
  /** Absolute e2e/ directory, ending in `/`, holding .bin/ and stages/. */
  e2eDir: string;
  etcdPort: number;
  etcdPeerPort: number;
  apiPort: number;
  /** Settings a benchmark changes; tests leave it out. */
  tuning?: Tuning;
}

/** Component settings for benchmarks at fleet scale; each is off (the default) unless set. */
export interface Tuning {
  /** kube-apiserver's audit policy file and the log it writes (--audit-policy-file, --audit-log-path). */
  audit?: { policyFile: string; logFile: string };
  /**
   * kwok's node Lease duration; kwok renews every Lease each quarter of it, as
   * kubelets do, so 10,000 nodes at the default cost 1,000 writes a second. @default 40
   */
  nodeLeaseDurationSeconds?: number;
  /** Client QPS of kube-controller-manager and kube-scheduler (burst: twice). @default theirs, 20 */
  controllerQps?: number;
}

/**
 * An audit policy that records, at Metadata level (who, verb, resource, URI,
 * status, timestamps; no bodies) and only once each request completed, the
 * requests of the given users and groups, or of everyone when both are empty.
 */
export function auditPolicy(who: { users?: string[]; userGroups?: string[] } = {}): string {
  const users = who.users ?? [];
  const groups = who.userGroups ?? [];
  const rule = ["  - level: Metadata"];
  if (users.length) rule.push(`    users: ${JSON.stringify(users)}`);
  if (groups.length) rule.push(`    userGroups: ${JSON.stringify(groups)}`);
  return [
    "apiVersion: audit.k8s.io/v1",
    "kind: Policy",
    // One line per request: watches would otherwise log when they start, too.
    'omitStages: ["RequestReceived", "ResponseStarted"]',
    "rules:",
    ...rule,
    ...(users.length || groups.length ? ["  - level: None"] : []),
    "",
  ].join("\n");
}

/** Returns how to start each component of the cluster described by `layout`. */
export function componentSpecs(layout: Layout): Record<Component, ProcSpec> {
  const { dir, e2eDir, tuning = {} } = layout;
  const qps = tuning.controllerQps === undefined
    ? []
    : [`--kube-api-qps=${tuning.controllerQps}`, `--kube-api-burst=${2 * tuning.controllerQps}`];
  const k8s = `${e2eDir}.bin/k8s`;
  const pki = `${dir}/pki`;
  const etcd = `http://127.0.0.1:${layout.etcdPort}`;
  const peer = `http://127.0.0.1:${layout.etcdPeerPort}`;
  const kubeconfig = `--kubeconfig=${dir}/kubeconfig`;
  const spec = (name: Component, cmd: string, args: string[]): ProcSpec => ({
    name,
    cmd,
    args,
    log: `${dir}/logs/${name}.log`,
  });
  return {
    // etcd speaks plain HTTP on loopback only; fsync is off because a test
    // cluster's data is disposable and fsync dominates its write latency.
    etcd: spec("etcd", k8s, [
      "etcd",
      "--name=e2e",
      `--data-dir=${dir}/etcd`,
      `--listen-client-urls=${etcd}`,
      `--advertise-client-urls=${etcd}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=e2e=${peer}`,
      "--unsafe-no-fsync",
    ]),
    "kube-apiserver": spec("kube-apiserver", k8s, [
      "kube-apiserver",
      `--etcd-servers=${etcd}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      `--secure-port=${layout.apiPort}`,
      `--tls-cert-file=${pki}/apiserver.crt`,
      `--tls-private-key-file=${pki}/apiserver.key`,
      `--client-ca-file=${pki}/ca.crt`,
      "--authorization-mode=Node,RBAC",
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-account-key-file=${pki}/sa.pub`,
      `--service-account-signing-key-file=${pki}/sa.key`,
      "--service-cluster-ip-range=10.0.0.0/24",
      // Endpoints of the kubernetes Service may not be loopback addresses.
      "--endpoint-reconciler-type=none",
      // This plugin taints every new node not-ready until the node lifecycle
      // controller, which we do not run, clears it; tests set taints themselves.
      "--disable-admission-plugins=TaintNodesByCondition",
      "--profiling=false",
      // As kubeadm and every managed cluster: node agents and installers (the
      // recipes of examples/) are privileged pods; the default refuses them.
      // The default (false) would also refuse such pods before admission, hiding what
      // the admission policies (e2e/admission_test.ts) decide about them.
      "--allow-privileged=true",
      // Without this, SIGTERM waits 60 s for open watches before exiting.
      "--shutdown-watch-termination-grace-period=2s",
      ...(tuning.audit
        ? [
          `--audit-policy-file=${tuning.audit.policyFile}`,
          `--audit-log-path=${tuning.audit.logFile}`,
          "--audit-log-format=json",
          // No rotation: a benchmark reads the whole log of its run.
          "--audit-log-maxsize=0",
        ]
        : []),
    ]),
    "kube-controller-manager": spec("kube-controller-manager", k8s, [
      "kube-controller-manager",
      kubeconfig,
      `--controllers=${CONTROLLERS.join(",")}`,
      `--root-ca-file=${pki}/ca.crt`,
      `--service-account-private-key-file=${pki}/sa.key`,
      // Each controller acts as its own ServiceAccount, under its RBAC role.
      "--use-service-account-credentials",
      "--leader-elect=false",
      "--secure-port=0",
      ...qps,
    ]),
    "kube-scheduler": spec("kube-scheduler", k8s, [
      "kube-scheduler",
      kubeconfig,
      "--leader-elect=false",
      "--secure-port=0",
      ...qps,
    ]),
    outcomes: spec("outcomes", k8s, ["outcomes", kubeconfig]),
    kwok: spec("kwok", `${e2eDir}.bin/kwok`, [
      kubeconfig,
      // kwok runs only the stages it is given, node stages included.
      `--config=${e2eDir}stages/node.yaml`,
      `--config=${e2eDir}stages/pod.yaml`,
      "--manage-all-nodes=false",
      `--manage-nodes-with-annotation-selector=${FAKE_NODE_ANNOTATION}=fake`,
      // Pod IPs; kwok's default pool overlaps the service range 10.0.0.0/24.
      "--cidr=10.244.0.1/16",
      // Heartbeats through Leases, as kubelets do.
      `--node-lease-duration-seconds=${tuning.nodeLeaseDurationSeconds ?? 40}`,
    ]),
  };
}

/** PEM files, as text, that the admin kubeconfig embeds. */
export interface AdminCredentials {
  ca: string;
  cert: string;
  key: string;
}

/**
 * Returns an admin kubeconfig for `server`, with the certificates embedded so
 * that the file can be copied or mounted anywhere.
 */
export function kubeconfigObject(server: string, creds: AdminCredentials): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{
      name: "e2e",
      cluster: { server, "certificate-authority-data": btoa(creds.ca) },
    }],
    users: [{
      name: "e2e-admin",
      user: { "client-certificate-data": btoa(creds.cert), "client-key-data": btoa(creds.key) },
    }],
    contexts: [{ name: "e2e", context: { cluster: "e2e", user: "e2e-admin" } }],
    "current-context": "e2e",
  };
}
