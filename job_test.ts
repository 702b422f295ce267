import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fc from "fast-check";
import type { V1Job } from "@kubernetes/client-node";
import {
  checkTemplateNamespace,
  classifyJob,
  identityHash,
  instantiateJob,
  interpretStatus,
  jobFinished,
  jobName,
  type JobTemplate,
  labelValue,
  MAX_JOB_NAME,
  outcomeAt,
  parseJobTemplate,
  podReplacementRisk,
  type RunIdentity,
  sanitize,
  settledJob,
  slimJob,
  stillRuns,
  templateHash,
  trackingKeys,
  unobservableTtl,
  UsageError,
} from "./job.ts";

// The yaml parser reads $LOG_TOKENS and $LOG_STREAM (its debug switches) on
// every parse, so a test that parses YAML needs read access to those two.
const YAML_ENV: Deno.PermissionOptions = { env: ["LOG_TOKENS", "LOG_STREAM"] };

// Written here rather than imported, so that the tests check job.ts against
// Kubernetes' rules and not against itself.
const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function assertDnsLabel(name: string): void {
  assert.ok(name.length <= 63, `${JSON.stringify(name)} is longer than 63 characters`);
  assert.match(name, DNS_1123_LABEL);
}

function assertLabelValue(value: string): void {
  assert.ok(value.length <= 63, `${JSON.stringify(value)} is longer than 63 characters`);
  assert.match(value, LABEL_VALUE);
}

function sha10(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 10);
}

// ---------------------------------------------------------------------------
// jobName, labelValue, sanitize, identityHash

Deno.test({
  name: "identityHash() is the first 10 hex digits of SHA-256 over prefix/node",
  permissions: "none",
  async fn(t) {
    await t.step("it matches a pinned value", () => {
      // Pinned: Job names computed by one release must be found by the next.
      assert.equal(identityHash("up", "node-1"), "247c7f6815");
      assert.equal(identityHash("upgrade", "node-1.example.com"), "d0661b2755");
      assert.equal(identityHash("", "node-1"), "db740b02bd");
    });
    await t.step("it matches node:crypto computed independently", () => {
      assert.equal(identityHash("up", "node-1"), sha10("up/node-1"));
    });
    await t.step("the separator keeps the prefix and node apart", () => {
      assert.notEqual(identityHash("up-a", "b"), identityHash("up", "a-b"));
      assert.notEqual(identityHash("upa", "b"), identityHash("up", "ab"));
    });
  },
});

Deno.test({
  name: "jobName() names a node's Job as a DNS-1123 label",
  permissions: "none",
  async fn(t) {
    await t.step("it keeps a plain valid name as <prefix>-<node>", () => {
      assert.equal(jobName("upgrade", "node-1"), "upgrade-node-1");
      assert.equal(jobName("up", "10-0-0-1"), "up-10-0-0-1");
    });

    await t.step("it keeps a name of exactly 63 characters", () => {
      const node = "n".repeat(60);
      assert.equal(jobName("up", node), `up-${node}`);
      assert.equal(jobName("up", node).length, MAX_JOB_NAME);
    });

    await t.step("it appends a hash when the name is too long", () => {
      const node = "n".repeat(61);
      const name = jobName("up", node);
      assert.equal(name, `up-${"n".repeat(49)}-${sha10(`up/${node}`)}`);
      assert.equal(name.length, MAX_JOB_NAME);
    });

    await t.step("it lowercases an uppercase node name and adds a hash", () => {
      assert.equal(jobName("up", "Node-1"), `up-node-1-${sha10("up/Node-1")}`);
    });

    await t.step("it replaces dots and adds a hash", () => {
      assert.equal(
        jobName("upgrade", "node-1.example.com"),
        "upgrade-node-1-example-com-d0661b2755",
      );
    });

    await t.step("it replaces underscores and adds a hash", () => {
      assert.equal(jobName("up", "node_1"), `up-node-1-${sha10("up/node_1")}`);
    });

    await t.step("it sanitises an uppercase prefix too", () => {
      assert.equal(jobName("Up", "node-1"), `up-node-1-${sha10("Up/node-1")}`);
    });

    await t.step("it shortens a 253-character node name to a 63-character label", () => {
      const node = `${"a".repeat(60)}.${"b".repeat(60)}.${"c".repeat(60)}.${"d".repeat(70)}`;
      assert.equal(node.length, 253);
      const name = jobName("upgrade", node);
      assertDnsLabel(name);
      assert.equal(name.length, MAX_JOB_NAME);
      assert.ok(name.startsWith("upgrade-aaaa"), name);
      assert.ok(name.endsWith(`-${sha10(`upgrade/${node}`)}`), name);
    });

    await t.step("names that sanitise alike get different names", () => {
      const nodes = ["node-1", "Node-1", "NODE-1", "node.1", "node_1", "node..1", "node-1."];
      const names = nodes.map((n) => jobName("up", n));
      assert.equal(new Set(names).size, nodes.length, names.join(" "));
      for (const name of names) assertDnsLabel(name);
    });

    await t.step("long names that share their first 52 characters get different names", () => {
      const a = jobName("up", `${"x".repeat(80)}-1`);
      const b = jobName("up", `${"x".repeat(80)}-2`);
      assert.notEqual(a, b);
      assert.equal(a.slice(0, 52), b.slice(0, 52));
    });

    await t.step("it never ends with '-' or doubles it where the cut lands on a dash", () => {
      // "up-" plus 48 letters is 51 characters; the 52nd is the dash from ".".
      const node = `${"a".repeat(48)}.${"b".repeat(40)}`;
      const name = jobName("up", node);
      assert.equal(name, `up-${"a".repeat(48)}-${sha10(`up/${node}`)}`);
      assert.ok(!name.includes("--"), name);
      assertDnsLabel(name);
    });

    await t.step("a name of nothing but symbols becomes the bare hash", () => {
      const name = jobName("", "._.");
      assert.equal(name, sha10("/._."));
      assertDnsLabel(name);
    });

    await t.step("it is the same on every call", () => {
      assert.equal(jobName("up", "Node_1.Example.COM"), jobName("up", "Node_1.Example.COM"));
    });
  },
});

Deno.test({
  name: "labelValue() stands for a text as a valid label value",
  permissions: "none",
  async fn(t) {
    await t.step("it keeps a valid label value, dots, underscores and capitals included", () => {
      assert.equal(labelValue("node-1.example.com"), "node-1.example.com");
      assert.equal(labelValue("Node_1.Example.COM"), "Node_1.Example.COM");
      assert.equal(labelValue("upgrade"), "upgrade");
    });

    await t.step("it keeps the empty value", () => {
      assert.equal(labelValue(""), "");
    });

    await t.step("it keeps a value of exactly 63 characters", () => {
      const text = "v".repeat(63);
      assert.equal(labelValue(text), text);
    });

    await t.step("it hashes a value of 64 characters", () => {
      const text = "x".repeat(64);
      assert.equal(labelValue(text), `${"x".repeat(52)}-${sha10(`/${text}`)}`);
    });

    await t.step("it hashes a value that starts or ends with a symbol", () => {
      assert.equal(labelValue("-a"), `a-${sha10("/-a")}`);
      assert.equal(labelValue("a."), `a-${sha10("/a.")}`);
    });

    await t.step("it shortens a 253-character node name", () => {
      const node = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`;
      assert.equal(node.length, 253);
      const value = labelValue(node);
      assertLabelValue(value);
      assert.ok(value.endsWith(sha10(`/${node}`)), value);
    });

    await t.step("long texts that share their first 52 characters get different values", () => {
      const a = labelValue(`${"x".repeat(70)}.A`);
      const b = labelValue(`${"x".repeat(70)}.a`);
      assert.notEqual(a, b);
      assertLabelValue(a);
      assertLabelValue(b);
    });
  },
});

Deno.test({
  name: "sanitize() turns text into DNS-1123 label characters",
  permissions: "none",
  async fn(t) {
    const cases: [string, string, string][] = [
      [
        "it lowercases and replaces dots and underscores",
        "Worker_01.Example.COM",
        "worker-01-example-com",
      ],
      ["it collapses a run of symbols into one dash", "a..__--b", "a-b"],
      ["it trims dashes at both ends", "--a--", "a"],
      ["it keeps a valid label as it is", "node-1", "node-1"],
      ["it drops non-ASCII letters", "nodé-1", "nod-1"],
      ["it turns nothing but symbols into the empty string", "._-", ""],
      ["it keeps the empty string", "", ""],
    ];
    for (const [name, input, want] of cases) {
      await t.step(name, () => assert.equal(sanitize(input), want));
    }
  },
});

// ---------------------------------------------------------------------------
// Property tests

const NODE_CHARS = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._"];
const nodeChar = fc.constantFrom(...NODE_CHARS);

/** Random DNS-subdomain-ish node names: real-looking ones and arbitrary mixes, up to 253. */
const nodeName = fc.oneof(
  fc.string({ unit: nodeChar, minLength: 1, maxLength: 253 }),
  fc.string({ unit: nodeChar, minLength: 1, maxLength: 253, size: "max" }),
  fc.domain().filter((d) => d.length <= 253),
  fc.array(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/), {
    minLength: 1,
    maxLength: 6,
  }).map((labels) => labels.join(".")).filter((n) => n.length <= 253),
);

/** Random name prefixes: usually a valid label, sometimes anything a metadata.name could be. */
const prefix = fc.oneof(
  fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$/),
  fc.string({ unit: nodeChar, minLength: 1, maxLength: 80 }),
  fc.constantFrom("upgrade", "up", "job-dispatcher"),
);

Deno.test({
  name: "jobName() always gives a DNS-1123 label of at most 63 characters",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(prefix, nodeName, (p, n) => {
        const name = jobName(p, n);
        assertDnsLabel(name);
        assert.ok(!name.endsWith("-"));
      }),
      { numRuns: 5000 },
    );
  },
});

Deno.test({
  name: "jobName() gives a DNS-1123 label even for arbitrary Unicode input",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), fc.string({ unit: "grapheme" }), (p, n) => {
        assertDnsLabel(jobName(p, n));
      }),
      { numRuns: 2000 },
    );
  },
});

Deno.test({
  name: "jobName() is deterministic",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(prefix, nodeName, (p, n) => {
        assert.equal(jobName(p, n), jobName(`${p}`, `${n}`));
      }),
      { numRuns: 2000 },
    );
  },
});

Deno.test({
  name: "jobName() never gives two nodes of one prefix the same name",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(
        prefix,
        fc.uniqueArray(nodeName, { minLength: 2, maxLength: 100 }),
        (p, nodes) => {
          const names = nodes.map((n) => jobName(p, n));
          assert.equal(new Set(names).size, nodes.length);
        },
      ),
      { numRuns: 300 },
    );
  },
});

Deno.test({
  name:
    "jobName() gives distinct (prefix, node) pairs distinct names unless <prefix>-<node> is the same label",
  permissions: "none",
  fn() {
    const pair = fc.tuple(prefix, nodeName);
    fc.assert(
      fc.property(
        fc.uniqueArray(pair, { minLength: 2, maxLength: 100, selector: ([p, n]) => `${p}/${n}` }),
        (pairs) => {
          const seen = new Map<string, string>();
          for (const [p, n] of pairs) {
            const name = jobName(p, n);
            const plain = `${p}-${n}`;
            const other = seen.get(name);
            // The plain form `<prefix>-<node>` is kept on purpose, so "up-a" + "b" and
            // "up" + "a-b" share a name; every other meeting is a collision.
            if (other !== undefined) assert.equal(plain, other, `collision on ${name}`);
            seen.set(name, plain);
          }
        },
      ),
      { numRuns: 300 },
    );
  },
});

Deno.test({
  name: "labelValue() always gives a valid label value of at most 63 characters",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(fc.oneof(nodeName, fc.string({ unit: "grapheme", maxLength: 300 })), (n) => {
        assertLabelValue(labelValue(n));
      }),
      { numRuns: 5000 },
    );
  },
});

Deno.test({
  name: "labelValue() never gives two node names the same value",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(fc.uniqueArray(nodeName, { minLength: 2, maxLength: 100 }), (nodes) => {
        assert.equal(new Set(nodes.map(labelValue)).size, nodes.length);
      }),
      { numRuns: 300 },
    );
  },
});

Deno.test({
  name: "sanitize() always gives dash-separated runs of [a-z0-9]",
  permissions: "none",
  fn() {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 100 }), (text) => {
        assert.match(sanitize(text), /^([a-z0-9]+(-[a-z0-9]+)*)?$/);
      }),
      { numRuns: 2000 },
    );
  },
});

// ---------------------------------------------------------------------------
// trackingKeys

Deno.test({
  name: "trackingKeys() builds the label and annotation keys under a prefix",
  permissions: "none",
  async fn(t) {
    for (const p of ["job-dispatcher", "example.com", "a", "upgrade.example.com", "0-x"]) {
      await t.step(`it accepts ${p}`, () => {
        assert.deepEqual(trackingKeys(p), {
          owner: `${p}/owner`,
          node: `${p}/node`,
          nodeName: `${p}/node-name`,
          nodeUid: `${p}/node-uid`,
          result: `${p}/result`,
          error: `${p}/error`,
          finishedAt: `${p}/finished-at`,
          progress: `${p}/progress`,
          guard: `${p}/per-node-jobs`,
          hook: `${p}/hook`,
          templateHash: `${p}/template-hash`,
          cordonedBy: `${p}/cordoned-by`,
          paused: `${p}/paused`,
          gatesCleanSince: `${p}/gates-clean-since`,
          record: `${p}/run-record`,
          ownerJob: `${p}/owner-job`,
          kept: `${p}/succeeded-job`,
          verified: `${p}/verified-job`,
          templateConfigMap: `${p}/template-configmap`,
        });
      });
    }
    await t.step("it accepts a prefix of 253 characters", () => {
      const p = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`;
      assert.equal(trackingKeys(p).owner, `${p}/owner`);
    });
  },
});

Deno.test({
  name: "trackingKeys() rejects a prefix that is not a lowercase DNS subdomain",
  permissions: "none",
  async fn(t) {
    const cases: [string, string][] = [
      ["empty", ""],
      ["uppercase", "Job-Dispatcher"],
      ["underscore", "job_dispatcher"],
      ["leading dash", "-job"],
      ["trailing dash", "job-"],
      ["empty segment", "a..b"],
      ["trailing dot", "example.com."],
      ["slash", "example.com/upgrade"],
      ["space", "job dispatcher"],
      ["254 characters", `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}`],
    ];
    for (const [what, p] of cases) {
      await t.step(`it rejects a prefix with ${what}`, () => {
        assert.throws(() => trackingKeys(p), (e: unknown) => {
          assert.ok(e instanceof UsageError);
          assert.ok(e.message.startsWith("Invalid --tracking-label-prefix "), e.message);
          assert.ok(e.message.includes(JSON.stringify(p)), e.message);
          assert.match(e.message, /lowercase DNS subdomain/);
          return true;
        });
      });
    }
  },
});

Deno.test({
  name: "trackingKeys() suggests only prefixes it accepts",
  permissions: "none",
  fn() {
    let message = "";
    try {
      trackingKeys("Bad");
    } catch (e) {
      message = (e as Error).message;
    }
    const examples = message.match(/such as (\S+) or (\S+)$/);
    assert.ok(examples, message);
    for (const example of examples.slice(1)) {
      assert.doesNotThrow(() => trackingKeys(example), `the message suggests ${example}`);
    }
  },
});

// ---------------------------------------------------------------------------
// parseJobTemplate

const MINIMAL = `apiVersion: batch/v1
kind: Job
metadata:
  name: upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: upgrade
          image: busybox:1.36
`;

function rejection(text: string, source = "jobs/upgrade.yaml"): string {
  try {
    parseJobTemplate(text, source);
  } catch (e) {
    assert.ok(e instanceof UsageError, `expected a UsageError, got ${e}`);
    return e.message;
  }
  assert.fail("parseJobTemplate() accepted the template");
}

Deno.test({
  name: "parseJobTemplate() rejects a template that cannot make a per-node Job",
  permissions: YAML_ENV,
  async fn(t) {
    const cases: { name: string; text: string; says: RegExp }[] = [
      { name: "empty", text: "", says: /it is empty; it must hold one batch\/v1 Job/ },
      { name: "only a comment", text: "# nothing\n", says: /it is empty/ },
      { name: "only separators", text: "---\n---\n", says: /it is empty/ },
      { name: "not YAML", text: "spec: [\n", says: /not valid YAML: \S/ },
      { name: "a scalar", text: "hello\n", says: /it is not a YAML mapping/ },
      { name: "a sequence", text: "- kind: Job\n", says: /it is not a YAML mapping/ },
      {
        name: "several documents",
        text: `${MINIMAL}---\n${MINIMAL}`,
        says: /it holds 2 documents; it must hold exactly one batch\/v1 Job/,
      },
      {
        name: "the wrong kind",
        text: MINIMAL.replace("kind: Job", "kind: Pod"),
        says: /kind is "Pod"; it must be Job/,
      },
      {
        name: "a list of Jobs",
        text: "apiVersion: v1\nkind: List\nitems: []\n",
        says: /kind is "List"; it must be Job/,
      },
      {
        name: "no kind",
        text: MINIMAL.replace("kind: Job\n", ""),
        says: /kind is null; it must be Job/,
      },
      {
        name: "the wrong apiVersion",
        text: MINIMAL.replace("batch/v1", "batch/v1beta1"),
        says: /apiVersion is "batch\/v1beta1"; it must be batch\/v1/,
      },
      {
        name: "no apiVersion",
        text: MINIMAL.replace("apiVersion: batch/v1\n", ""),
        says: /apiVersion is null; it must be batch\/v1/,
      },
      {
        name: "no pod template",
        text: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: up}\nspec: {}\n",
        says: /spec\.template\.spec is missing/,
      },
      {
        name: "no containers",
        text: "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n" +
          "      restartPolicy: Never\n",
        says: /spec\.template\.spec\.containers is empty; a Job needs at least one container/,
      },
      {
        name: "an empty container list",
        text: MINIMAL.replace(/containers:[\s\S]*$/, "containers: []\n"),
        says: /containers is empty/,
      },
      {
        name: "restartPolicy Always",
        text: MINIMAL.replace("restartPolicy: Never", "restartPolicy: Always"),
        says: /spec\.template\.spec\.restartPolicy is "Always"; a Job needs Never or OnFailure/,
      },
      {
        name: "no restartPolicy",
        text: MINIMAL.replace("      restartPolicy: Never\n", ""),
        says: /spec\.template\.spec\.restartPolicy is null; a Job needs Never or OnFailure/,
      },
      {
        name: "nodeName set",
        text: MINIMAL.replace("restartPolicy: Never", "restartPolicy: Never\n      nodeName: n1"),
        says: /spec\.template\.spec\.nodeName is set; remove it/,
      },
    ];
    for (const c of cases) {
      await t.step(`it rejects ${c.name}, naming the source`, () => {
        const message = rejection(c.text);
        assert.ok(message.startsWith("Invalid job template jobs/upgrade.yaml: "), message);
        assert.match(message, c.says);
        assert.ok(!message.includes("\n"), `one line: ${message}`);
      });
    }
    await t.step("it names stdin when the template came from stdin", () => {
      assert.match(rejection("", "stdin"), /^Invalid job template stdin: it is empty/);
    });
  },
});

Deno.test({
  name: "parseJobTemplate() accepts a minimal Job and OnFailure",
  permissions: YAML_ENV,
  fn() {
    const job = parseJobTemplate(MINIMAL, "job.yaml");
    assert.deepEqual(job, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "upgrade", labels: undefined, annotations: undefined },
      spec: {
        template: {
          spec: {
            restartPolicy: "Never",
            containers: [{ name: "upgrade", image: "busybox:1.36" }],
          },
        },
      },
    });
    const onFailure = parseJobTemplate(
      MINIMAL.replace("restartPolicy: Never", "restartPolicy: OnFailure"),
      "job.yaml",
    );
    assert.equal(onFailure.spec.template.spec?.restartPolicy, "OnFailure");
  },
});

// What `kubectl get job upgrade -o yaml` prints for a finished Job.
const EXPORTED = `apiVersion: batch/v1
kind: Job
metadata:
  annotations:
    batch.kubernetes.io/job-tracking: ""
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"upgrade","namespace":"ops"}}
    team.example.com/contact: platform
  creationTimestamp: "2024-05-01T10:00:00Z"
  generation: 1
  labels:
    app: upgrade
    batch.kubernetes.io/controller-uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
    batch.kubernetes.io/job-name: upgrade
    controller-uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
    job-name: upgrade
  managedFields:
  - apiVersion: batch/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:backoffLimit: {}
    manager: kubectl-client-side-apply
    operation: Update
    time: "2024-05-01T10:00:00Z"
  name: upgrade
  namespace: ops
  ownerReferences:
  - apiVersion: batch/v1
    kind: Job
    name: rollout
    uid: 11111111-2222-3333-4444-555555555555
  resourceVersion: "48213"
  uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
spec:
  backoffLimit: 2
  completionMode: NonIndexed
  completions: 1
  manualSelector: false
  parallelism: 1
  podReplacementPolicy: TerminatingOrFailed
  selector:
    matchLabels:
      batch.kubernetes.io/controller-uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
  suspend: false
  template:
    metadata:
      annotations:
        example.com/scrape: "false"
      creationTimestamp: null
      labels:
        app: upgrade
        batch.kubernetes.io/controller-uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
        batch.kubernetes.io/job-name: upgrade
        controller-uid: 0b7e3c1a-6f0b-4a59-9a38-4f1f2d1c2e3d
        job-name: upgrade
    spec:
      containers:
      - command:
        - sh
        - -c
        - echo upgrading
        env:
        - name: MODE
          value: "yes"
        image: busybox:1.36
        imagePullPolicy: IfNotPresent
        name: upgrade
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
        volumeMounts:
        - mountPath: /host
          name: host
      dnsPolicy: ClusterFirst
      restartPolicy: Never
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
      tolerations:
      - effect: NoSchedule
        key: gpu
        operator: Exists
      volumes:
      - hostPath:
          path: /
          type: ""
        name: host
  ttlSecondsAfterFinished: 600
status:
  completionTime: "2024-05-01T10:00:09Z"
  conditions:
  - lastProbeTime: "2024-05-01T10:00:09Z"
    lastTransitionTime: "2024-05-01T10:00:09Z"
    status: "True"
    type: Complete
  ready: 0
  startTime: "2024-05-01T10:00:00Z"
  succeeded: 1
  terminating: 0
  uncountedTerminatedPods: {}
`;

Deno.test({
  name:
    "parseJobTemplate() strips server fields from kubectl get -o yaml output and keeps the rest",
  permissions: YAML_ENV,
  fn() {
    const job = parseJobTemplate(EXPORTED, "exported.yaml");
    assert.deepEqual(job, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: {
        name: "upgrade",
        namespace: "ops",
        labels: { app: "upgrade" },
        annotations: { "team.example.com/contact": "platform" },
      },
      spec: {
        backoffLimit: 2,
        completionMode: "NonIndexed",
        completions: 1,
        manualSelector: false,
        parallelism: 1,
        podReplacementPolicy: "TerminatingOrFailed",
        suspend: false,
        template: {
          metadata: {
            annotations: { "example.com/scrape": "false" },
            labels: { app: "upgrade" },
          },
          spec: {
            containers: [{
              command: ["sh", "-c", "echo upgrading"],
              env: [{ name: "MODE", value: "yes" }],
              image: "busybox:1.36",
              imagePullPolicy: "IfNotPresent",
              name: "upgrade",
              resources: {},
              terminationMessagePath: "/dev/termination-log",
              terminationMessagePolicy: "File",
              volumeMounts: [{ mountPath: "/host", name: "host" }],
            }],
            dnsPolicy: "ClusterFirst",
            restartPolicy: "Never",
            schedulerName: "default-scheduler",
            securityContext: {},
            terminationGracePeriodSeconds: 30,
            tolerations: [{ effect: "NoSchedule", key: "gpu", operator: "Exists" }],
            volumes: [{ hostPath: { path: "/", type: "" }, name: "host" }],
          },
        },
        ttlSecondsAfterFinished: 600,
      },
    });
  },
});

Deno.test({
  name: "parseJobTemplate() drops a labels map that only held controller labels",
  permissions: YAML_ENV,
  fn() {
    const text = MINIMAL.replace(
      "  name: upgrade\n",
      "  name: upgrade\n  labels:\n    job-name: upgrade\n    controller-uid: x\n",
    );
    assert.equal(parseJobTemplate(text, "job.yaml").metadata?.labels, undefined);
  },
});

Deno.test({
  name: "parseJobTemplate() keeps spec.selector when manualSelector is true",
  permissions: YAML_ENV,
  fn() {
    const text = MINIMAL.replace(
      "spec:\n  template:\n",
      "spec:\n  manualSelector: true\n  selector:\n    matchLabels:\n      app: upgrade\n" +
        "  template:\n    metadata:\n      labels:\n        app: upgrade\n",
    );
    const job = parseJobTemplate(text, "job.yaml");
    assert.equal(job.spec.manualSelector, true);
    assert.deepEqual(job.spec.selector, { matchLabels: { app: "upgrade" } });
    assert.deepEqual(job.spec.template.metadata?.labels, { app: "upgrade" });
  },
});

Deno.test({
  name: "parseJobTemplate() reads a leading-zero file mode as octal, as kubectl does",
  permissions: YAML_ENV,
  fn() {
    // The Kubernetes docs write `defaultMode: 0400` in YAML; kubectl (YAML 1.1)
    // reads it as 256. Read as decimal 400 it would be mode 0620.
    const text = MINIMAL.replace(
      "      restartPolicy: Never\n",
      "      restartPolicy: Never\n      volumes:\n        - name: s\n" +
        "          secret: {secretName: s, defaultMode: 0400}\n",
    );
    const job = parseJobTemplate(text, "job.yaml");
    assert.equal(job.spec.template.spec?.volumes?.[0].secret?.defaultMode, 0o400);
  },
});

// ---------------------------------------------------------------------------
// instantiateJob

const KEYS = trackingKeys("job-dispatcher");

function template(): JobTemplate {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name: "upgrade",
      generateName: "upgrade-",
      labels: { app: "upgrade" },
      annotations: { "team.example.com/contact": "platform" },
    },
    spec: {
      backoffLimit: 1,
      template: {
        metadata: { labels: { app: "upgrade" }, annotations: { "example.com/scrape": "no" } },
        spec: {
          restartPolicy: "Never",
          initContainers: [{ name: "init", image: "busybox" }],
          containers: [
            { name: "main", image: "busybox", env: [{ name: "NODE_MACHINE_ID", value: "mine" }] },
            { name: "side", image: "busybox", env: [{ name: "OTHER", value: "1" }] },
          ],
        },
      },
    },
  };
}

const NODE = {
  name: "node-1.example.com",
  uid: "node-uid-1",
  machineID: "m-123",
  containerRuntimeVersion: "containerd://1.7.2",
};
const OWNER = { name: "rollout", uid: "owner-uid-1" };

function envOf(job: V1Job, container: string): Record<string, string | undefined> {
  const pod = job.spec!.template.spec!;
  const c = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === container)!;
  if (c.env === undefined) return {};
  const names = c.env.map((e) => e.name);
  assert.equal(new Set(names).size, names.length, `duplicate env in ${container}`);
  return Object.fromEntries(c.env.map((e) => [e.name, e.value]));
}

Deno.test({
  name: "instantiateJob() makes the node's Job from the template",
  permissions: "none",
  async fn(t) {
    const job = instantiateJob({
      template: template(),
      node: NODE,
      prefix: "upgrade",
      namespace: "ops",
      keys: KEYS,
      owner: OWNER,
    });

    await t.step("it names the Job with jobName() in the namespace", () => {
      assert.equal(job.metadata?.name, jobName("upgrade", NODE.name));
      assert.equal(job.metadata?.namespace, "ops");
    });

    await t.step("it drops generateName", () => {
      assert.equal(job.metadata?.generateName, undefined);
    });

    await t.step("it pins the pod to the node with nodeName", () => {
      assert.equal(job.spec?.template.spec?.nodeName, NODE.name);
    });

    await t.step("it puts the tracking labels on the Job beside the template's", () => {
      assert.deepEqual(job.metadata?.labels, {
        app: "upgrade",
        "job-dispatcher/owner": "upgrade",
        "job-dispatcher/node": "node-1.example.com",
      });
    });

    await t.step("it puts the tracking labels on the pod template too", () => {
      assert.deepEqual(job.spec?.template.metadata?.labels, {
        app: "upgrade",
        "job-dispatcher/owner": "upgrade",
        "job-dispatcher/node": "node-1.example.com",
      });
      assert.deepEqual(job.spec?.template.metadata?.annotations, { "example.com/scrape": "no" });
    });

    await t.step(
      "it annotates the full node name, UID and template hash beside the template's",
      () => {
        assert.deepEqual(job.metadata?.annotations, {
          "team.example.com/contact": "platform",
          "job-dispatcher/node-name": NODE.name,
          "job-dispatcher/node-uid": NODE.uid,
          "job-dispatcher/template-hash": templateHash(template()),
        });
      },
    );

    await t.step("it refers to the owner, neither as controller nor blocking deletion", () => {
      assert.deepEqual(job.metadata?.ownerReferences, [{
        apiVersion: "batch/v1",
        kind: "Job",
        name: OWNER.name,
        uid: OWNER.uid,
        controller: false,
        blockOwnerDeletion: false,
      }]);
    });

    await t.step("it keeps the rest of the template", () => {
      assert.equal(job.spec?.backoffLimit, 1);
      assert.equal(job.spec?.template.spec?.restartPolicy, "Never");
      assert.equal(job.kind, "Job");
      assert.equal(job.apiVersion, "batch/v1");
    });

    await t.step("it adds the node's facts as env on every container and initContainer", () => {
      for (const c of ["init", "side"]) {
        assert.equal(envOf(job, c).NODE_MACHINE_ID, "m-123", c);
        assert.equal(envOf(job, c).CONTAINER_RUNTIME_VERSION, "containerd://1.7.2", c);
      }
      assert.equal(envOf(job, "main").CONTAINER_RUNTIME_VERSION, "containerd://1.7.2");
      assert.equal(envOf(job, "side").OTHER, "1");
    });

    await t.step("it never overwrites the template's own env of that name", () => {
      assert.equal(envOf(job, "main").NODE_MACHINE_ID, "mine");
    });

    await t.step("the Job classifies as current for its run", () => {
      assert.equal(
        classifyJob(job, { keys: KEYS, prefix: "upgrade", owner: OWNER }, NODE.uid),
        "current",
      );
    });
  },
});

Deno.test({
  name: "instantiateJob() varies with the options it is given",
  permissions: "none",
  async fn(t) {
    await t.step("it sets no ownerReference without an owner", () => {
      const job = instantiateJob({
        template: template(),
        node: NODE,
        prefix: "upgrade",
        namespace: "ops",
        keys: KEYS,
      });
      assert.equal(job.metadata?.ownerReferences, undefined);
    });

    await t.step("it adds no env when the node reports no facts", () => {
      const job = instantiateJob({
        template: template(),
        node: { name: "n1", uid: "u1" },
        prefix: "upgrade",
        namespace: "ops",
        keys: KEYS,
      });
      const pod = job.spec!.template.spec!;
      assert.equal(pod.initContainers?.[0].env, undefined);
      assert.deepEqual(envOf(job, "main"), { NODE_MACHINE_ID: "mine" });
      assert.deepEqual(envOf(job, "side"), { OTHER: "1" });
    });

    await t.step("it adds only the facts the node reports", () => {
      const job = instantiateJob({
        template: template(),
        node: { name: "n1", uid: "u1", containerRuntimeVersion: "cri-o://1.30.0" },
        prefix: "upgrade",
        namespace: "ops",
        keys: KEYS,
      });
      assert.deepEqual(envOf(job, "init"), { CONTAINER_RUNTIME_VERSION: "cri-o://1.30.0" });
    });

    await t.step("it uses label values that stand for a long node name and prefix", () => {
      const node = `${"a".repeat(70)}.example.com`;
      const prefix = `upgrade-${"p".repeat(60)}`;
      const job = instantiateJob({
        template: template(),
        node: { name: node, uid: "u1" },
        prefix,
        namespace: "ops",
        keys: KEYS,
      });
      assert.equal(job.metadata?.name, jobName(prefix, node));
      assert.equal(job.metadata?.labels?.["job-dispatcher/node"], labelValue(node));
      assert.equal(job.metadata?.labels?.["job-dispatcher/owner"], labelValue(prefix));
      assert.equal(job.metadata?.annotations?.["job-dispatcher/node-name"], node);
      assertLabelValue(job.metadata!.labels!["job-dispatcher/node"]);
      assertLabelValue(job.metadata!.labels!["job-dispatcher/owner"]);
      assert.equal(classifyJob(job, { keys: KEYS, prefix }, "u1"), "current");
    });

    await t.step("it adds pod template labels when the template has no pod metadata", () => {
      const bare = template();
      delete bare.metadata;
      delete bare.spec.template.metadata;
      const job = instantiateJob({
        template: bare,
        node: { name: "n1", uid: "u1" },
        prefix: "up",
        namespace: "ops",
        keys: KEYS,
      });
      assert.equal(job.metadata?.name, "up-n1");
      assert.deepEqual(job.spec?.template.metadata?.labels, {
        "job-dispatcher/owner": "up",
        "job-dispatcher/node": "n1",
      });
    });

    await t.step("it does not mutate the template", () => {
      const tpl = template();
      const before = structuredClone(tpl);
      instantiateJob({
        template: tpl,
        node: NODE,
        prefix: "upgrade",
        namespace: "ops",
        keys: KEYS,
        owner: OWNER,
      });
      assert.deepEqual(tpl, before);
    });

    await t.step("Jobs made from one template share no objects", () => {
      const tpl = template();
      const opts = { template: tpl, prefix: "up", namespace: "ops", keys: KEYS };
      const a = instantiateJob({ ...opts, node: { name: "a", uid: "ua", machineID: "ma" } });
      const b = instantiateJob({ ...opts, node: { name: "b", uid: "ub", machineID: "mb" } });
      assert.equal(envOf(a, "side").NODE_MACHINE_ID, "ma");
      assert.equal(envOf(b, "side").NODE_MACHINE_ID, "mb");
      assert.equal(a.spec?.template.spec?.nodeName, "a");
    });
  },
});

// ---------------------------------------------------------------------------
// interpretStatus

Deno.test({
  name: "interpretStatus() reads a Job's conditions",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; job: Pick<V1Job, "status">; want: unknown }[] = [
      { name: "no status is active", job: {}, want: { phase: "active" } },
      {
        name: "no conditions is active",
        job: { status: { active: 1 } },
        want: { phase: "active" },
      },
      {
        name: "Complete is succeeded and final",
        job: { status: { conditions: [{ type: "Complete", status: "True" }] } },
        want: { phase: "succeeded", final: true },
      },
      {
        name: "SuccessCriteriaMet is succeeded, not yet final",
        job: { status: { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] } },
        want: { phase: "succeeded", final: false },
      },
      {
        name: "SuccessCriteriaMet and Complete is final",
        job: {
          status: {
            conditions: [
              { type: "SuccessCriteriaMet", status: "True" },
              { type: "Complete", status: "True" },
            ],
          },
        },
        want: { phase: "succeeded", final: true },
      },
      {
        name: "Failed is failed with its reason and message",
        job: {
          status: {
            conditions: [{
              type: "Failed",
              status: "True",
              reason: "BackoffLimitExceeded",
              message: "Job has reached the specified backoff limit",
            }],
          },
        },
        want: {
          phase: "failed",
          final: true,
          reason: "BackoffLimitExceeded",
          message: "Job has reached the specified backoff limit",
        },
      },
      {
        name: "FailureTarget is failed, not yet final",
        job: {
          status: {
            conditions: [{ type: "FailureTarget", status: "True", reason: "DeadlineExceeded" }],
          },
        },
        want: { phase: "failed", final: false, reason: "DeadlineExceeded", message: undefined },
      },
      {
        name: "Failed without a reason says Failed",
        job: { status: { conditions: [{ type: "Failed", status: "True" }] } },
        want: { phase: "failed", final: true, reason: "Failed", message: undefined },
      },
      {
        name: "a condition with status False is ignored",
        job: {
          status: {
            conditions: [
              { type: "Complete", status: "False" },
              { type: "Failed", status: "False", reason: "X" },
              { type: "Suspended", status: "True" },
            ],
          },
        },
        want: { phase: "active" },
      },
      {
        name: "a condition with status Unknown is ignored",
        job: { status: { conditions: [{ type: "Failed", status: "Unknown" }] } },
        want: { phase: "active" },
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => assert.deepEqual(interpretStatus(c.job), c.want));
    }
  },
});

Deno.test({
  name:
    "outcomeAt() says when a Job's outcome was decided, from the condition interpretStatus reads",
  permissions: "none",
  async fn(t) {
    const T1 = "2026-12-01T10:00:01Z", T2 = "2026-12-01T10:00:02Z", T3 = "2026-12-01T10:00:03Z";
    const cond = (type: string, at: string) => ({
      type,
      status: "True",
      lastTransitionTime: at as unknown as Date,
    });
    const cases: [string, Pick<V1Job, "status">, string | undefined][] = [
      ["active: none", { status: { active: 1 } }, undefined],
      [
        "Complete: its completionTime",
        { status: { completionTime: T3 as unknown as Date, conditions: [cond("Complete", T2)] } },
        T3,
      ],
      ["Complete without a completionTime: the condition's time", {
        status: { conditions: [cond("Complete", T2)] },
      }, T2],
      ["SuccessCriteriaMet: its time", {
        status: { conditions: [cond("SuccessCriteriaMet", T1)] },
      }, T1],
      ["SuccessCriteriaMet then Complete: the completionTime", {
        status: {
          completionTime: T3 as unknown as Date,
          conditions: [cond("SuccessCriteriaMet", T1), cond("Complete", T2)],
        },
      }, T3],
      ["FailureTarget: its time", { status: { conditions: [cond("FailureTarget", T1)] } }, T1],
      ["FailureTarget then Failed: Failed's time", {
        status: { conditions: [cond("FailureTarget", T1), cond("Failed", T2)] },
      }, T2],
      ["a condition without a time: none", {
        status: { conditions: [{ type: "Complete", status: "True" }] },
      }, undefined],
    ];
    for (const [name, job, want] of cases) {
      await t.step(name, () => assert.equal(outcomeAt(job), want && Date.parse(want)));
    }
  },
});

Deno.test({
  name:
    "a Job's conditions, suspend and deletion read in one place: what the engine, status and verification each take of them",
  permissions: "none",
  async fn(t) {
    const on = (...types: string[]) => ({
      conditions: types.map((type) => ({ type, status: "True" })),
    });
    // [name, job, interpretStatus phase, decided-and-final (jobFinished), stillRuns]
    const cases: [string, Pick<V1Job, "metadata" | "spec" | "status">, string, boolean, boolean][] =
      [
        ["running", { status: { active: 1 } }, "active", false, true],
        [
          "SuccessCriteriaMet: decided, pods may still run",
          {
            status: on("SuccessCriteriaMet"),
          },
          "succeeded",
          false,
          true,
        ],
        ["Complete", { status: on("SuccessCriteriaMet", "Complete") }, "succeeded", true, false],
        [
          "FailureTarget: decided, pods may still run",
          {
            status: on("FailureTarget"),
          },
          "failed",
          false,
          true,
        ],
        ["Failed", { status: on("FailureTarget", "Failed") }, "failed", true, false],
        [
          "suspended, no pod left",
          {
            spec: { suspend: true } as V1Job["spec"],
            status: on("Suspended"),
          },
          "active",
          false,
          false,
        ],
        [
          "suspended with a pod still terminating",
          {
            spec: { suspend: true } as V1Job["spec"],
            status: { terminating: 1 },
          },
          "active",
          false,
          true,
        ],
        [
          "suspended after SuccessCriteriaMet: the controller finishes it anyway",
          {
            spec: { suspend: true } as V1Job["spec"],
            status: on("SuccessCriteriaMet"),
          },
          "succeeded",
          false,
          true,
        ],
        [
          "being deleted while it runs",
          {
            metadata: { deletionTimestamp: new Date(0) },
            status: { active: 1 },
          },
          "active",
          false,
          false,
        ],
      ];
    for (const [name, job, phase, finished, runs] of cases) {
      await t.step(name, () => {
        assert.equal(interpretStatus(job).phase, phase);
        assert.equal(jobFinished(job), finished);
        assert.equal(stillRuns(job), runs);
      });
    }
  },
});

/** Folders of test and build tooling, not of the dispatcher: the guard below skips them. */
const NOT_PRODUCT = new Set(["testing", "e2e", "bench", "scripts", "tools", "chart"]);

Deno.test({
  name:
    "no module but job.ts reads a Job's conditions: every folder of the dispatcher (engine/, verify/, fleet/, status/, …) and main.ts ask job.ts",
  permissions: { read: true },
  async fn() {
    const root = new URL("./", import.meta.url);
    const cond = "(Complete|Failed|SuccessCriteriaMet|FailureTarget|Suspended)";
    const reads = new RegExp(
      `\\btype\\s*[!=]==?\\s*"${cond}"|"${cond}"\\s*[!=]==?\\s*\\w+\\.type\\b|` +
        `\\bon\\("${cond}"\\)|\\.includes\\(\\w+\\.type\\)`,
    );
    const found: string[] = [];
    const scan = async (path: string) => {
      if (reads.test(await Deno.readTextFile(new URL(path, root)))) found.push(path);
    };
    const dirs: string[] = [];
    for await (const e of Deno.readDir(root)) {
      if (e.isDirectory && !e.name.startsWith(".") && !NOT_PRODUCT.has(e.name)) dirs.push(e.name);
      else if (e.isFile && e.name === "main.ts") await scan(e.name);
    }
    for (const dir of ["engine", "verify", "fleet", "status", "run"]) assert.ok(dirs.includes(dir));
    for (const dir of dirs) {
      for await (const f of Deno.readDir(new URL(`${dir}/`, root))) {
        if (f.name.endsWith(".ts") && !f.name.endsWith("_test.ts")) await scan(`${dir}/${f.name}`);
      }
    }
    assert.deepEqual(found, []);
  },
});

// ---------------------------------------------------------------------------
// classifyJob

const RUN: RunIdentity = { keys: KEYS, prefix: "upgrade", owner: OWNER };

function existing(meta: V1Job["metadata"] = {}): V1Job {
  return {
    metadata: {
      name: "upgrade-n1",
      labels: { "job-dispatcher/owner": "upgrade", "job-dispatcher/node": "n1" },
      annotations: { "job-dispatcher/node-uid": "node-uid-1" },
      ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "rollout", uid: OWNER.uid }],
      ...meta,
    },
  };
}

Deno.test({
  name: "unobservableTtl() refuses a TTL shorter than two poll intervals, only when polling",
  permissions: "none",
  async fn(t) {
    const withTtl = (ttl?: number) => {
      const tpl = template();
      tpl.spec.ttlSecondsAfterFinished = ttl;
      return tpl;
    };
    const cases: { name: string; ttl?: number; poll?: number; refused: boolean }[] = [
      { name: "ttl 0 with a watch is fine", ttl: 0, refused: false },
      { name: "no ttl when polling is fine", poll: 5, refused: false },
      { name: "ttl 0 when polling is refused", ttl: 0, poll: 5, refused: true },
      { name: "ttl 9 with a 5 s poll is refused", ttl: 9, poll: 5, refused: true },
      { name: "ttl 10 with a 5 s poll is fine", ttl: 10, poll: 5, refused: false },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const why = unobservableTtl(withTtl(c.ttl), c.poll);
        assert.equal(why !== undefined, c.refused, why ?? "accepted");
        if (why) assert.match(why, new RegExp(`at least ${2 * c.poll!}`));
      });
    }
  },
});

Deno.test({
  name: "instantiateJob() makes a replacement pod wait until the first pod is gone, " +
    "unless the template chose",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; set?: string; failurePolicy?: boolean; want: string }[] = [
      { name: "unset: Failed, not the API's TerminatingOrFailed", want: "Failed" },
      { name: "unset with a podFailurePolicy: Failed", failurePolicy: true, want: "Failed" },
      { name: "Failed kept", set: "Failed", want: "Failed" },
      {
        name: "TerminatingOrFailed kept as written",
        set: "TerminatingOrFailed",
        want: "TerminatingOrFailed",
      },
    ];
    for (const c of cases) {
      await t.step(c.name, () => {
        const tpl = template();
        if (c.set) tpl.spec.podReplacementPolicy = c.set;
        if (c.failurePolicy) {
          tpl.spec.podFailurePolicy = {
            rules: [{ action: "FailJob", onExitCodes: { operator: "In", values: [42] } }],
          };
        }
        const job = instantiateJob({
          template: tpl,
          node: NODE,
          prefix: "upgrade",
          namespace: "ops",
          keys: KEYS,
        });
        assert.equal(job.spec?.podReplacementPolicy, c.want);
        // The default is not the template's: Jobs made before it stay current.
        assert.equal(job.metadata?.annotations?.[KEYS.templateHash], templateHash(tpl));
      });
    }
  },
});

Deno.test({
  name: "podReplacementRisk() warns of TerminatingOrFailed only",
  permissions: "none",
  async fn(t) {
    for (const set of [undefined, "Failed", "TerminatingOrFailed"]) {
      await t.step(`${set ?? "unset"}`, () => {
        const tpl = template();
        if (set) tpl.spec.podReplacementPolicy = set;
        const why = podReplacementRisk(tpl);
        assert.equal(why !== undefined, set === "TerminatingOrFailed", why ?? "no warning");
        if (why) {
          assert.match(why, /podReplacementPolicy: TerminatingOrFailed/);
          assert.match(why, /same node while the first is still terminating/);
          assert.match(why, /set it to Failed/);
        }
      });
    }
  },
});

Deno.test({
  name:
    "slimJob() keeps metadata, status and the (init) containers' images, not the rest of the spec or managedFields",
  permissions: "none",
  fn() {
    const job = instantiateJob({
      template: template(),
      node: NODE,
      prefix: "upgrade",
      namespace: "ops",
      keys: KEYS,
    });
    job.metadata!.managedFields = [{ manager: "kubectl" }];
    job.status = { conditions: [{ type: "Complete", status: "True" }] };
    const slim = slimJob(job);
    assert.deepEqual(slim.spec, {
      template: {
        spec: {
          containers: job.spec!.template.spec!.containers.map(({ name, image }) => ({
            name,
            image,
          })),
          // Kept too: the replaced Job's reason names a changed init container image.
          initContainers: job.spec!.template.spec!.initContainers!.map(({ name, image }) => ({
            name,
            image,
          })),
        },
      },
    });
    assert.equal(slim.metadata?.managedFields, undefined);
    assert.deepEqual(slim.metadata?.labels, job.metadata?.labels);
    assert.deepEqual(slim.status, job.status);
  },
});

Deno.test({
  name: "settledJob() keeps only the name, UID and resourceVersion an informer compares",
  permissions: "none",
  fn() {
    const job = instantiateJob({
      template: template(),
      node: NODE,
      prefix: "upgrade",
      namespace: "ops",
      keys: KEYS,
    });
    job.metadata = { ...job.metadata, uid: "u-1", resourceVersion: "42" };
    job.status = { succeeded: 1, conditions: [{ type: "Complete", status: "True" }] };
    const table: [V1Job, V1Job][] = [
      [job, { metadata: { name: job.metadata.name, uid: "u-1", resourceVersion: "42" } }],
      [slimJob(job), { metadata: { name: job.metadata.name, uid: "u-1", resourceVersion: "42" } }],
      [{}, { metadata: { name: undefined, uid: undefined, resourceVersion: undefined } }],
    ];
    for (const [given, want] of table) assert.deepEqual(settledJob(given), want);
  },
});

Deno.test({
  name: "templateHash() changes with the template and the pinning, not with key order",
  permissions: "none",
  async fn(t) {
    const TEMPLATE = template();
    const base = templateHash(TEMPLATE);
    await t.step("the same template hashes the same", () => {
      assert.equal(templateHash(structuredClone(TEMPLATE)), base);
    });
    await t.step("key order does not matter", () => {
      const { apiVersion, kind, metadata, spec } = TEMPLATE;
      assert.equal(templateHash({ spec, metadata, kind, apiVersion } as JobTemplate), base);
    });
    await t.step("another image is another hash", () => {
      const other = structuredClone(TEMPLATE);
      other.spec.template.spec!.containers[0].image = "other:2";
      assert.notEqual(templateHash(other), base);
    });
    await t.step("another pinning is another hash", () => {
      assert.notEqual(templateHash(TEMPLATE, "affinity"), base);
    });
  },
});

Deno.test({
  name: "classifyJob() tells our Jobs from others' and stale from current",
  permissions: "none",
  async fn(t) {
    const cases: { name: string; job: V1Job; run?: RunIdentity; nodeUid?: string; want: string }[] =
      [
        { name: "a Job without metadata is notOurs", job: {}, want: "notOurs" },
        {
          name: "a Job without the owner label is notOurs",
          job: existing({ labels: { app: "upgrade" } }),
          want: "notOurs",
        },
        {
          name: "a Job whose owner label has another value is notOurs",
          job: existing({ labels: { "job-dispatcher/owner": "other" } }),
          want: "notOurs",
        },
        {
          name: "a Job with the owner label under another prefix is notOurs",
          job: existing({ labels: { "other.example.com/owner": "upgrade" } }),
          want: "notOurs",
        },
        {
          name: "an unlabelled Job being deleted is notOurs, not stale",
          job: existing({ labels: {}, deletionTimestamp: new Date() }),
          want: "notOurs",
        },
        {
          name: "a Job of another owner uid is stale",
          job: existing({
            ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "rollout", uid: "old" }],
          }),
          want: "stale",
        },
        {
          name: "a Job with no owner when the run has one is stale",
          job: existing({ ownerReferences: undefined }),
          want: "stale",
        },
        {
          name: "a Job being deleted is stale",
          job: existing({ deletionTimestamp: new Date("2024-05-01T10:00:00Z") }),
          want: "stale",
        },
        {
          name: "a Job being deleted is stale even without an owner",
          job: existing({ deletionTimestamp: new Date("2024-05-01T10:00:00Z") }),
          run: { keys: KEYS, prefix: "upgrade" },
          want: "stale",
        },
        {
          name: "a Job made for another node UID is stale",
          job: existing(),
          nodeUid: "node-uid-2",
          want: "stale",
        },
        { name: "a Job of this owner and node is current", job: existing(), want: "current" },
        {
          name: "a Job of this owner and node UID is current",
          job: existing(),
          nodeUid: "node-uid-1",
          want: "current",
        },
        {
          name: "a Job among several owners, ours included, is current",
          job: existing({
            ownerReferences: [
              { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "x" },
              { apiVersion: "batch/v1", kind: "Job", name: "rollout", uid: OWNER.uid },
            ],
          }),
          want: "current",
        },
        {
          name: "a Job without the node-uid annotation is current",
          job: existing({ annotations: {} }),
          nodeUid: "node-uid-2",
          want: "current",
        },
        {
          name: "a Job of another template hash is stale, without an owner too",
          job: existing({
            annotations: { "job-dispatcher/template-hash": "0123456789abcdef" },
            ownerReferences: undefined,
          }),
          run: { keys: KEYS, prefix: "upgrade", templateHash: "fedcba9876543210" },
          want: "stale",
        },
        {
          name: "a Job of the run's template hash is current",
          job: existing({ annotations: { "job-dispatcher/template-hash": "0123456789abcdef" } }),
          run: { ...RUN, templateHash: "0123456789abcdef" },
          want: "current",
        },
        {
          name: "a Job without a template hash (made before it existed) is current",
          job: existing({ annotations: {} }),
          run: { ...RUN, templateHash: "0123456789abcdef" },
          want: "current",
        },
        {
          name: "a Job is current without an owner, whoever owned it",
          job: existing({
            ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "old", uid: "old" }],
          }),
          run: { keys: KEYS, prefix: "upgrade" },
          nodeUid: "node-uid-1",
          want: "current",
        },
      ];
    for (const c of cases) {
      await t.step(c.name, () => {
        assert.equal(classifyJob(c.job, c.run ?? RUN, c.nodeUid), c.want);
      });
    }
  },
});

Deno.test({
  name: "checkTemplateNamespace() refuses a template namespace other than the one in use",
  permissions: "none",
  async fn(t) {
    const cases: [string, string | undefined, string, RegExp | undefined][] = [
      ["no namespace in the template", undefined, "ops", undefined],
      ["the same namespace", "ops", "ops", undefined],
      [
        "another namespace",
        "dev",
        "ops",
        /^UsageError: Invalid job template job\.yaml: the namespace from the provided object "dev" does not match the namespace "ops"; pass --namespace dev or remove metadata\.namespace from the template$/,
      ],
    ];
    for (const [name, own, inUse, want] of cases) {
      await t.step(name, () => {
        const template = { metadata: { name: "up", namespace: own } } as JobTemplate;
        if (want) assert.throws(() => checkTemplateNamespace(template, inUse, "job.yaml"), want);
        else checkTemplateNamespace(template, inUse, "job.yaml");
      });
    }
  },
});

Deno.test("stillRuns() tells a stale Job that may be working from one safe to delete", async (t) => {
  const cases: [string, V1Job, boolean][] = [
    ["no status yet: its pod may start any moment", {}, true],
    ["a pod running", { status: { active: 1 } }, true],
    ["complete", { status: { conditions: [{ type: "Complete", status: "True" }] } }, false],
    ["failed", { status: { conditions: [{ type: "Failed", status: "True" }] } }, false],
    [
      "success criteria met, its pod's finalizer not yet removed (no Complete yet)",
      { status: { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] } },
      true,
    ],
    [
      "failure target, its pods still terminating (no Failed yet)",
      { status: { terminating: 1, conditions: [{ type: "FailureTarget", status: "True" }] } },
      true,
    ],
    [
      "complete after success criteria met",
      {
        status: {
          conditions: [
            { type: "SuccessCriteriaMet", status: "True" },
            { type: "Complete", status: "True" },
          ],
        },
      },
      false,
    ],
    [
      "being deleted",
      { metadata: { deletionTimestamp: new Date() }, status: { active: 1 } },
      false,
    ],
    ["suspended, no pod left", { spec: { suspend: true } as V1Job["spec"], status: {} }, false],
    [
      "suspended, its pod still terminating",
      { spec: { suspend: true } as V1Job["spec"], status: { terminating: 1 } },
      true,
    ],
    [
      // The Job controller ignores suspend once an outcome is decided
      // (syncJob: finishedCondition != nil skips manageJob) and still sets
      // Complete once the pod's finalizer is removed: deleting it now loses it.
      "suspended with success criteria met, its pod's finalizer not yet removed",
      {
        spec: { suspend: true } as V1Job["spec"],
        status: { conditions: [{ type: "SuccessCriteriaMet", status: "True" }] },
      },
      true,
    ],
    [
      "suspended with a failure target, no pod left terminating (Failed yet to come)",
      {
        spec: { suspend: true } as V1Job["spec"],
        status: { conditions: [{ type: "FailureTarget", status: "True" }] },
      },
      true,
    ],
  ];
  for (const [name, job, runs] of cases) {
    await t.step(name, () => assert.equal(stillRuns(job), runs));
  }
});
