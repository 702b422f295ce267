import assert from "node:assert/strict";
import { parseJobTemplate } from "../job.ts";
import { parseTaintSelectors } from "../nodes/lifecycle.ts";
import {
  type AdmissionInput,
  admissionParams,
  admissionPolicies,
  paramsData,
} from "./admission.ts";

const job = (name: string, pod: string) =>
  parseJobTemplate(
    `apiVersion: batch/v1
kind: Job
metadata: {name: ${name}}
spec:
  template:
    spec:
      restartPolicy: Never
${pod}`,
    name,
  );

const PLAIN = job("task", "      containers: [{name: a, image: reg/a:1}]\n");
const HOST = job(
  "host",
  `      hostPID: true
      serviceAccountName: agent
      priorityClassName: node-agent
      initContainers: [{name: i, image: reg/i:1, securityContext: {capabilities: {add: [NET_ADMIN]}}}]
      containers: [{name: a, image: reg/a:1, securityContext: {privileged: true}}]
      volumes: [{name: root, hostPath: {path: /}}, {name: e, emptyDir: {}}]
`,
);

const base: AdmissionInput = {
  namespace: "ops",
  serviceAccount: "jd",
  trackingPrefix: "job-dispatcher",
  namePrefix: "task",
  template: PLAIN,
};

Deno.test("admissionParams: each privilege is allowed exactly when a template asks for it", () => {
  const cases: [string, AdmissionInput, Record<string, string>][] = [
    ["a plain template allows none", base, {
      images: "reg/a:1",
      serviceAccounts: "default",
      privileged: "false",
      hostPID: "false",
      hostNetwork: "false",
      hostIPC: "false",
      hostPaths: "",
      capabilities: "",
      volumeTypes: "",
      priorityClasses: "",
    }],
    ["a host template allows its own, and no more", { ...base, template: HOST }, {
      images: "reg/a:1,reg/i:1",
      serviceAccounts: "agent",
      privileged: "true",
      hostPID: "true",
      hostNetwork: "false",
      hostIPC: "false",
      hostPaths: "/",
      capabilities: "NET_ADMIN",
      volumeTypes: "emptyDir,hostPath",
      priorityClasses: "node-agent",
    }],
    ["a verification template adds its own to the release's", {
      ...base,
      verifyTemplate: HOST,
    }, {
      images: "reg/a:1,reg/i:1",
      serviceAccounts: "agent,default",
      privileged: "true",
      hostPID: "true",
      hostNetwork: "false",
      hostIPC: "false",
      hostPaths: "/",
      capabilities: "NET_ADMIN",
      volumeTypes: "emptyDir,hostPath",
      priorityClasses: "node-agent",
    }],
  ];
  for (const [what, input, want] of cases) {
    const data = paramsData(admissionParams(input));
    const got = Object.fromEntries(Object.keys(want).map((k) => [k, data[k]]));
    assert.deepEqual(got, want, what);
  }
});

Deno.test("admissionParams: the owners, node keys and taints the flags make the dispatcher write", () => {
  const p = admissionParams({
    ...base,
    hook: "rel-job-dispatcher",
    verifyTemplate: PLAIN,
    cleanupTemplate: job("undo", "      containers: [{name: a, image: reg/u:1}]\n"),
    nodeLabelKey: "kata/installed",
    extraLabelKeys: ["tier"],
    instance: { prefix: "kata.example", suffix: "blue" },
    removeTaints: parseTaintSelectors("kata/not-ready:NoSchedule,startup"),
  });
  assert.deepEqual(p.username, "system:serviceaccount:ops:jd");
  assert.deepEqual(p.owners, ["task", "task-verify", "undo"]);
  assert.deepEqual(p.labelKeys, ["kata.example/blue", "kata/installed", "tier"]);
  assert.deepEqual(p.labelPrefixes, ["job-dispatcher/", "kata.example/"]);
  assert.deepEqual(p.removeTaints, ["kata/not-ready:NoSchedule", "startup"]);
  assert.deepEqual(p.hook, "rel-job-dispatcher");
});

Deno.test("admissionPolicies: fail closed, only the ServiceAccount, params from the release's ConfigMap", () => {
  const objs = admissionPolicies(admissionParams(base));
  assert.deepEqual(objs.map((o) => `${o.kind}/${o.metadata.name}`), [
    "ValidatingAdmissionPolicy/jd.ops.jobs",
    "ValidatingAdmissionPolicyBinding/jd.ops.jobs",
    "ValidatingAdmissionPolicy/jd.ops.nodes",
    "ValidatingAdmissionPolicyBinding/jd.ops.nodes",
    "ValidatingAdmissionPolicy/jd.ops.params",
    "ValidatingAdmissionPolicyBinding/jd.ops.params",
    "ConfigMap/jd-admission",
  ]);
  for (const p of objs.filter((o) => o.kind === "ValidatingAdmissionPolicy")) {
    assert.deepEqual(p.spec.failurePolicy, "Fail");
    if (p.metadata.name.endsWith(".params")) continue;
    assert.deepEqual(
      p.spec.matchConditions[0].expression,
      "request.userInfo.username == 'system:serviceaccount:ops:jd'",
    );
    assert.deepEqual(p.spec.paramKind, { apiVersion: "v1", kind: "ConfigMap" });
  }
  for (const b of objs.filter((o) => o.kind === "ValidatingAdmissionPolicyBinding").slice(0, 2)) {
    assert.deepEqual(b.spec.paramRef, {
      name: "jd-admission",
      namespace: "ops",
      parameterNotFoundAction: "Deny",
    });
    assert.deepEqual(b.spec.validationActions, ["Deny"]);
  }
});

Deno.test("admissionParams: refuses node keys under kubernetes.io and k8s.io, which Kubernetes components read", () => {
  const cases: [string, Partial<AdmissionInput>, RegExp][] = [
    [
      "--node-label-key",
      { nodeLabelKey: "node-role.kubernetes.io/control-plane" },
      /--node-label-key node-role\.kubernetes\.io\/control-plane/,
    ],
    [
      "--extra-node-label",
      { extraLabelKeys: ["kubernetes.io/hostname"] },
      /--extra-node-label kubernetes\.io\/hostname/,
    ],
    [
      "--tracking-label-prefix",
      { trackingPrefix: "node.kubernetes.io" },
      /--tracking-label-prefix node\.kubernetes\.io/,
    ],
    [
      "--instance-label-prefix",
      { instance: { prefix: "k8s.io", suffix: "blue" } },
      /--instance-label-prefix k8s\.io/,
    ],
  ];
  for (const [what, change, says] of cases) {
    assert.throws(() => admissionParams({ ...base, ...change }), says, what);
  }
  // A domain that merely ends in the same letters is the user's own.
  assert.deepEqual(
    admissionParams({ ...base, nodeLabelKey: "notkubernetes.io/done" }).labelKeys,
    ["notkubernetes.io/done"],
  );
});
