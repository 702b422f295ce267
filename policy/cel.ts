/**
 * The CEL of the admission policies (policy/admission.ts): variables and
 * validations, each validation one rule with a message that names the rule
 * and the release parameter it checked against.
 *
 * Every rule is written `request.operation != 'X' || …` because one policy
 * judges every operation of its resource, and `object` is null on DELETE,
 * `oldObject` null on CREATE. Variables are evaluated lazily, so a variable
 * over `object` is never read on a DELETE.
 *
 * @module
 */

const PFX = "job-dispatcher admission policy";

/** A list parameter: the ConfigMap's comma-separated string, without empty items. */
const list = (key: string) => `params.data.?${key}.orValue('').split(',').filter(s, s != '')`;

/** Variables of the Jobs policy. */
export const JOB_VARIABLES = [
  { name: "prefix", expression: "params.data.?prefix.orValue('')" },
  { name: "owners", expression: list("owners") },
  { name: "images", expression: list("images") },
  { name: "serviceAccounts", expression: list("serviceAccounts") },
  { name: "hostPaths", expression: list("hostPaths") },
  { name: "capabilities", expression: list("capabilities") },
  { name: "volumeTypes", expression: list("volumeTypes") },
  { name: "priorityClasses", expression: list("priorityClasses") },
  { name: "labels", expression: "object.metadata.?labels.orValue({})" },
  { name: "oldLabels", expression: "oldObject.metadata.?labels.orValue({})" },
  { name: "annotations", expression: "object.metadata.?annotations.orValue({})" },
  {
    name: "node",
    expression: "(variables.prefix + '/node-name') in variables.annotations" +
      " ? variables.annotations[variables.prefix + '/node-name'] : ''",
  },
  { name: "pod", expression: "object.spec.template.spec" },
  {
    name: "containers",
    expression: "variables.pod.containers + variables.pod.?initContainers.orValue([])",
  },
  {
    name: "required",
    expression:
      "variables.pod.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution" +
      ".?nodeSelectorTerms.orValue([])",
  },
];

/**
 * The kinds of volume that bring into the pod what is outside it: the node
 * (hostPath has its own rule), a PersistentVolume (a claim of the namespace,
 * or an ephemeral one whose template names any Available volume: a `local`
 * PersistentVolume is a host directory), a remote or CSI mount, another
 * image's files. configMap, secret, emptyDir, downwardAPI and projected hold
 * only what the namespace or the pod has already. A pod's volume is a typed
 * object, not a map, so CEL cannot list its keys: each kind is named.
 */
export const OUTSIDE_VOLUMES = [
  "persistentVolumeClaim",
  "ephemeral",
  "csi",
  "image",
  "nfs",
  "iscsi",
  "fc",
  "rbd",
  "cephfs",
  "glusterfs",
  "flexVolume",
  "gitRepo",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "azureDisk",
  "azureFile",
  "cinder",
  "vsphereVolume",
  "portworxVolume",
  "photonPersistentDisk",
  "quobyte",
  "scaleIO",
  "storageos",
  "flocker",
];

const onCreate = (rule: string) => `request.operation != 'CREATE' || (${rule})`;
const allowedBy = (flag: string, rule: string) =>
  `params.data.?${flag}.orValue('') == 'true' || (${rule})`;
const say = (text: string) => `'${PFX}: ' + ${text}`;

/** The rules on the Jobs the ServiceAccount creates, updates and deletes. */
export const JOB_VALIDATIONS = [
  {
    // The node is the one the dispatcher names in <P>/node-name, so that the
    // labels, the annotation and the pin cannot disagree.
    expression: onCreate(
      "variables.node != '' && (variables.pod.?nodeName.orValue('') == variables.node || " +
        "(variables.pod.?nodeName.orValue('') == '' && variables.required.size() > 0 && " +
        "variables.required.all(t, t.?matchFields.orValue([]).exists(f, " +
        "f.key == 'metadata.name' && f.operator == 'In' && f.values == [variables.node]))))",
    ),
    messageExpression: say(
      "'a Job must be pinned to the one node of its annotation ' + variables.prefix + " +
        "'/node-name, by spec.template.spec.nodeName or a required node affinity on metadata.name'",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate(
      "(variables.prefix + '/owner') in variables.labels && " +
        "variables.labels[variables.prefix + '/owner'] in variables.owners && " +
        "(variables.prefix + '/node') in variables.labels",
    ),
    messageExpression: say(
      "'a Job must carry the labels ' + variables.prefix + '/owner (one of ' + params.data.owners + " +
        "') and ' + variables.prefix + '/node'",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate("variables.containers.all(c, c.image in variables.images)"),
    messageExpression: say(
      "'every container image must be one of the release templates\\' (' + params.data.images + '); got ' + " +
        "variables.containers.map(c, c.image).join(',')",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate(
      "!has(variables.pod.ephemeralContainers) && " +
        "variables.pod.?serviceAccountName.orValue(variables.pod.?serviceAccount.orValue('default'))" +
        " in variables.serviceAccounts",
    ),
    messageExpression: say(
      "'a Job may run only as the templates\\' ServiceAccounts (' + params.data.serviceAccounts + ')" +
        ", without ephemeral containers'",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate(allowedBy(
      "privileged",
      "variables.containers.all(c, !c.?securityContext.?privileged.orValue(false))",
    )),
    messageExpression: say("'privileged: true where the release templates ask for none'"),
    reason: "Forbidden",
  },
  ...["hostPID", "hostNetwork", "hostIPC"].map((f) => ({
    expression: onCreate(allowedBy(f, `!variables.pod.?${f}.orValue(false)`)),
    messageExpression: say(`'${f}: true where the release templates ask for none'`),
    reason: "Forbidden",
  })),
  {
    expression: onCreate(
      "variables.pod.?volumes.orValue([]).all(v, !has(v.hostPath) || v.hostPath.path in variables.hostPaths)",
    ),
    messageExpression: say(
      "'a hostPath volume may mount only the templates\\' paths (' + params.data.hostPaths + ')'",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate(
      "variables.pod.?volumes.orValue([]).all(v, " +
        OUTSIDE_VOLUMES.map((k) => `(!has(v.${k}) || '${k}' in variables.volumeTypes)`)
          .join(" && ") +
        ")",
    ),
    messageExpression: say(
      "'volumes may be only of the kinds the release templates mount (configMap, secret, " +
        "emptyDir, downwardAPI, projected, ' + params.data.?volumeTypes.orValue('') + ')'",
    ),
    reason: "Forbidden",
  },
  {
    // system-node-critical makes the kubelet evict the node's other pods to
    // admit it; any higher class preempts them.
    expression: onCreate(
      "variables.pod.?priorityClassName.orValue('') == '' || " +
        "variables.pod.priorityClassName in variables.priorityClasses",
    ),
    messageExpression: say(
      "'priorityClassName may be only the release templates\\' (' + " +
        "params.data.?priorityClasses.orValue('') + ')'",
    ),
    reason: "Forbidden",
  },
  {
    expression: onCreate(
      "variables.containers.all(c, c.?securityContext.?capabilities.?add.orValue([])" +
        ".all(a, a in variables.capabilities))",
    ),
    messageExpression: say(
      "'added capabilities may be only the templates\\' (' + params.data.capabilities + ')'",
    ),
    reason: "Forbidden",
  },
  {
    // A suspended Job's scheduling fields (affinity, nodeSelector,
    // tolerations) may change before it starts: an update would unpin it.
    expression: "request.operation != 'UPDATE' || object.spec.template == oldObject.spec.template",
    messageExpression: say("'the pod template of a Job may not change'"),
    reason: "Forbidden",
  },
  {
    expression: "request.operation != 'DELETE' || " +
      "((variables.prefix + '/owner') in variables.oldLabels && " +
      "variables.oldLabels[variables.prefix + '/owner'] in variables.owners) || " +
      "(params.data.?hook.orValue('') != '' && (variables.prefix + '/hook') in variables.oldLabels && " +
      "variables.oldLabels[variables.prefix + '/hook'] == params.data.hook)",
    messageExpression: say(
      "'only Jobs labelled ' + variables.prefix + '/owner (one of ' + params.data.owners + " +
        "', or its hook Jobs) may be deleted'",
    ),
    reason: "Forbidden",
  },
];

/** Variables of the Nodes policy. */
export const NODE_VARIABLES = [
  { name: "prefix", expression: "params.data.?prefix.orValue('')" },
  { name: "labelKeys", expression: list("labelKeys") },
  { name: "labelPrefixes", expression: list("labelPrefixes") },
  { name: "removeTaints", expression: list("removeTaints") },
  { name: "labels", expression: "object.metadata.?labels.orValue({})" },
  { name: "oldLabels", expression: "oldObject.metadata.?labels.orValue({})" },
  { name: "annotations", expression: "object.metadata.?annotations.orValue({})" },
  { name: "oldAnnotations", expression: "oldObject.metadata.?annotations.orValue({})" },
  { name: "taints", expression: "object.spec.?taints.orValue([])" },
  { name: "oldTaints", expression: "oldObject.spec.?taints.orValue([])" },
];

const labelOk = (k: string) =>
  `(${k} in variables.labelKeys || variables.labelPrefixes.exists(p, ${k}.startsWith(p)))`;
const annotationOk = (k: string) => `${k}.startsWith(variables.prefix + '/')`;
/** Every key of `a` that is the same in `b`, or allowed. */
const sameOr = (a: string, b: string, ok: (k: string) => string) =>
  `variables.${a}.all(k, (k in variables.${b} && variables.${b}[k] == variables.${a}[k]) || ${
    ok("k")
  })`;

/** The rules on the Nodes the ServiceAccount writes. */
export const NODE_VALIDATIONS = [
  {
    expression: "request.operation == 'UPDATE' && request.?subResource.orValue('') == ''",
    messageExpression: say("'a node may only be patched (not created, deleted, nor its status)'"),
    reason: "Forbidden",
  },
  {
    expression: `${sameOr("labels", "oldLabels", labelOk)} && ${
      sameOr("oldLabels", "labels", labelOk)
    }`,
    messageExpression: say(
      "'only the node labels ' + params.data.labelKeys + ' and those under ' + " +
        "params.data.labelPrefixes + ' may change'",
    ),
    reason: "Forbidden",
  },
  {
    expression: `${sameOr("annotations", "oldAnnotations", annotationOk)} && ${
      sameOr("oldAnnotations", "annotations", annotationOk)
    }`,
    messageExpression: say("'only node annotations under ' + variables.prefix + '/ may change'"),
    reason: "Forbidden",
  },
  {
    expression: "variables.taints.all(t, variables.oldTaints.exists(o, o == t))",
    messageExpression: say("'no taint may be added or changed'"),
    reason: "Forbidden",
  },
  {
    expression: "variables.oldTaints.all(o, variables.taints.exists(t, t == o) || " +
      "variables.removeTaints.exists(s, s == o.key || s == o.key + ':' + o.effect))",
    messageExpression: say(
      "'only the taints ' + params.data.removeTaints + ' (--remove-node-taints) may be removed'",
    ),
    reason: "Forbidden",
  },
  {
    // spec.unschedulable is the cordon; every other field is the kubelet's,
    // the cloud provider's or the node IPAM's.
    expression: "object.spec.?podCIDR == oldObject.spec.?podCIDR && " +
      "object.spec.?podCIDRs == oldObject.spec.?podCIDRs && " +
      "object.spec.?providerID == oldObject.spec.?providerID && " +
      "object.spec.?externalID == oldObject.spec.?externalID && " +
      "object.spec.?configSource == oldObject.spec.?configSource && " +
      "object.metadata.?ownerReferences == oldObject.metadata.?ownerReferences && " +
      "object.metadata.?finalizers == oldObject.metadata.?finalizers && " +
      "object.status == oldObject.status",
    messageExpression: say(
      "'of a node only labels, annotations, taints (removal) and spec.unschedulable may change'",
    ),
    reason: "Forbidden",
  },
];
