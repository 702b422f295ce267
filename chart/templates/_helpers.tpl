{{/* The chart name, at most 63 characters. */}}
{{- define "job-dispatcher.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, also the hook Job's: Job names become pod labels
(job-name), so they must fit the 63-character label-value limit.
*/}}
{{- define "job-dispatcher.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "job-dispatcher.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 }}
{{ include "job-dispatcher.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "job-dispatcher.selectorLabels" -}}
app.kubernetes.io/name: {{ include "job-dispatcher.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "job-dispatcher.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "job-dispatcher.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "job-dispatcher.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The owner mode, checked once. */}}
{{- define "job-dispatcher.ownerMode" -}}
{{- $mode := .Values.owner.mode }}
{{- if not (has $mode (list "jobName" "pod" "none")) }}
{{- fail (printf "owner.mode %q: expected jobName, pod or none" $mode) }}
{{- end }}
{{- $mode }}
{{- end }}

{{/*
The hook Job's name. With an owner, one per release revision: Helm's
before-hook-creation deletes only an object of the new hook's own name, so no
earlier revision's hook Job, the owner of per-node Jobs that may still run, is
deleted (and the garbage collector never takes its Jobs); the dispatcher
deletes earlier ones once their runs are over (run/owner_guard.ts). Without
an owner, the fixed name: Helm deletes the previous hook, which stops its
dispatcher, and the ownerless per-node Jobs run on. At most 63 characters, as
Job names become pod labels (job-name).

A Job of the revision's name that already exists is an earlier install's:
`helm uninstall` keeps hook Jobs and revisions start again at 1, so
before-hook-creation would delete it, and the collector its per-node Jobs,
mid-run. Then the name takes the render's time too (`-r1-1764662400`),
chosen once per render (kept in .Values) so that every use agrees. `helm
template` and client dry runs look nothing up: `-rN`.
*/}}
{{- define "job-dispatcher.hookName" -}}
{{- if eq (include "job-dispatcher.ownerMode" .) "none" }}
{{- include "job-dispatcher.fullname" . }}
{{- else if .Values._hookName }}
{{- .Values._hookName }}
{{- else }}
{{- $name := include "job-dispatcher.hookNameWith" (list . (printf "-r%d" (int .Release.Revision))) }}
{{- if lookup "batch/v1" "Job" .Release.Namespace $name }}
{{- $name = include "job-dispatcher.hookNameWith" (list . (printf "-r%d-%s" (int .Release.Revision) (now | unixEpoch))) }}
{{- end }}
{{- $_ := set .Values "_hookName" $name }}
{{- $name }}
{{- end }}
{{- end }}

{{/*
The template ConfigMap of this revision's hook Job, named after it (a
ConfigMap name may be 253 characters): every revision reads its own.
*/}}
{{- define "job-dispatcher.templateConfigMap" -}}
{{- include "job-dispatcher.hookName" . }}-job-template
{{- end }}

{{/* The full name with a suffix, within 63 characters: (list . SUFFIX). */}}
{{- define "job-dispatcher.hookNameWith" -}}
{{- $suffix := index . 1 }}
{{- include "job-dispatcher.fullname" (index . 0) | trunc (int (sub 63 (len $suffix))) | trimSuffix "-" }}{{ $suffix }}
{{- end }}

{{/*
The ConfigMap's template text, exactly as given: a string byte for byte, an
object (no default merged into it: the default is null) as YAML. Checked here
as the dispatcher checks it first, so a bad template fails the install before
anything exists, not the hook after the release does.
*/}}
{{- define "job-dispatcher.jobTemplate" -}}
{{- $t := .Values.jobTemplate }}
{{- if kindIs "invalid" $t }}{{ $t = .Values.exampleJobTemplate }}{{ end }}
{{- include "job-dispatcher.checkedJob" (dict "t" $t "what" "jobTemplate") }}
{{- end }}

{{/* The verify Job's template text, checked and kept as jobTemplate is; empty without one. */}}
{{- define "job-dispatcher.verifyJobTemplate" -}}
{{- with (.Values.verification | default dict).jobTemplate }}
{{- include "job-dispatcher.checkedJob" (dict "t" . "what" "verification.jobTemplate") }}
{{- end }}
{{- end }}

{{/* One batch/v1 Job given as a string or an object ("t"), checked, as text; "what" names the value. */}}
{{- define "job-dispatcher.checkedJob" -}}
{{- $t := .t }}
{{- $obj := $t }}
{{- $doc := "" }}
{{- $nullFirst := false }}
{{- if kindIs "string" $t }}
{{- /* fromYaml reads only the first document: count them, comments and "..." aside.
A line may end in CRLF (a file saved on Windows): Go's (?m)$ matches only before "\n".
A document that is only a directive (%YAML 1.1) or null (null, ~) is none, as
the dispatcher reads it (job.ts drops null documents); the Job is read from
the one document left, as fromYaml would read a leading null instead. */}}
{{- $docs := 0 }}
{{- range regexSplit `(?m)^---[ \t]*(#[^\r\n]*)?\r?$` $t -1 }}
{{- $body := regexReplaceAll `(?m)^([ \t]*(#[^\r\n]*)?|\.\.\.[ \t]*(#[^\r\n]*)?|%[^\r\n]*)\r?$` . "" | trim }}
{{- if has $body (list "null" "Null" "NULL" "~") }}{{ if not $docs }}{{ $nullFirst = true }}{{ end }}
{{- else if $body }}{{ $docs = add1 $docs }}{{ $doc = . }}{{ end }}
{{- end }}
{{- if gt $docs 1 }}
{{- fail (printf "%s holds %d YAML documents: pass exactly one batch/v1 Job (--set-file %s=FILE)" .what $docs .what) }}
{{- end }}
{{- $obj = fromYaml $doc }}
{{- end }}
{{- if and (kindIs "map" $obj) (hasKey $obj "Error") }}
{{- fail (printf "%s is not valid YAML (%s): pass one batch/v1 Job" .what (get $obj "Error")) }}
{{- end }}
{{- if not (and (kindIs "map" $obj) (eq (get $obj "kind" | toString) "Job") (eq (get $obj "apiVersion" | toString) "batch/v1")) }}
{{- fail (printf "%s must be one batch/v1 Job (apiVersion: batch/v1, kind: Job)" .what) }}
{{- end }}
{{- include "job-dispatcher.checkedPodSpec" (dict "job" $obj "what" .what) }}
{{- /* Byte for byte, but for a null document before the Job: every reader of this text (fromYaml) takes the first. */}}
{{- if $nullFirst }}{{ $doc }}{{ else if kindIs "string" $t }}{{ $t }}{{ else }}{{ toYaml $t }}{{ end }}
{{- end }}

{{/*
The rest of the dispatcher's first check (job.ts parseJobTemplate), in its
order: a pod spec with a container, a Job's restartPolicy, no nodeName (the
dispatcher pins each Job itself). e2e/chart_template_checks_test.ts runs
every refusal of parseJobTemplate through both and fails on one missing here.
*/}}
{{- define "job-dispatcher.checkedPodSpec" -}}
{{- $pod := ((.job.spec | default dict).template | default dict).spec }}
{{- if not (kindIs "map" $pod) }}
{{- fail (printf "%s: spec.template.spec is missing: a Job needs a pod template" .what) }}
{{- end }}
{{- if not (and (kindIs "slice" $pod.containers) $pod.containers) }}
{{- fail (printf "%s: spec.template.spec.containers is empty: a Job needs at least one container" .what) }}
{{- end }}
{{- $restart := $pod.restartPolicy | default "" | toString }}
{{- if not (has $restart (list "Never" "OnFailure")) }}
{{- fail (printf "%s: spec.template.spec.restartPolicy is %q: a Job needs Never or OnFailure" .what $restart) }}
{{- end }}
{{- /* job.ts refuses a truthy nodeName: in JavaScript an empty list or map is one. */}}
{{- if or $pod.nodeName (kindIs "slice" $pod.nodeName) (kindIs "map" $pod.nodeName) }}
{{- fail (printf "%s: spec.template.spec.nodeName is set: remove it, the dispatcher pins each Job to its node" .what) }}
{{- end }}
{{- end }}

{{/*
The per-node Jobs' name prefix, as the dispatcher takes it (run/plan.ts):
namePrefix, else the template's metadata.name. It names the gate's exit latch
ConfigMap and, without an owner, the run status reads.
*/}}
{{- define "job-dispatcher.prefix" -}}
{{- if .Values.namePrefix }}{{ .Values.namePrefix }}{{ else }}
{{- $meta := (include "job-dispatcher.jobTemplate" . | fromYaml).metadata | default dict }}
{{- required "jobTemplate needs a metadata.name (or set namePrefix)" $meta.name }}
{{- end }}
{{- end }}

{{/*
The dispatcher's arguments, one flag per value, as a YAML list (toYaml quotes
selectors such as "tier in (a,b)"). Nodes are never listed unless given.
*/}}
{{- define "job-dispatcher.args" -}}
{{- $v := .Values }}
{{- $sel := $v.selection }}
{{- $mode := include "job-dispatcher.ownerMode" . }}
{{- $a := list "--job-template=/etc/job-dispatcher/job.yaml" (printf "--namespace=%s" .Release.Namespace) }}
{{- with $v.namePrefix }}{{ $a = append $a (printf "--name-prefix=%s" .) }}{{ end }}
{{- with $sel.nodes }}{{ $a = append $a (printf "--nodes=%s" (join "," .)) }}{{ end }}
{{- range $sel.nodeSelectors }}{{ $a = append $a (printf "--node-selector=%s" .) }}{{ end }}
{{- with $sel.nodeFieldSelector }}{{ $a = append $a (printf "--node-field-selector=%s" .) }}{{ end }}
{{- $a = append $a (printf "--node-page-size=%s" (include "job-dispatcher.number" $sel.nodePageSize)) }}
{{- if $sel.ignoreNodeTaints }}{{ $a = append $a "--ignore-node-taints" }}{{ end }}
{{- $a = append $a (printf "--wait-for-nodes-secs=%s" (include "job-dispatcher.number" $sel.waitForNodesSecs)) }}
{{- if $sel.failIfNoNodes }}{{ $a = append $a "--fail-if-no-nodes" }}{{ end }}
{{- $a = append $a (printf "--node-settle-secs=%s" (include "job-dispatcher.number" $sel.nodeSettleSecs)) }}
{{- $a = append $a (printf "--parallelism=%s" (include "job-dispatcher.number" $v.parallelism)) }}
{{- $a = append $a (printf "--poll-interval-secs=%s" (include "job-dispatcher.number" $v.pollIntervalSecs)) }}
{{- $a = append $a (printf "--progress-interval-secs=%s" (include "job-dispatcher.number" $v.progressIntervalSecs)) }}
{{- $a = append $a (printf "--tracking-label-prefix=%s" $v.trackingLabelPrefix) }}
{{- /* Guarded: --reuse-values keeps an older release's values, which lack kubeApi. */}}
{{- with $v.kubeApi }}
{{- with .concurrency }}{{ $a = append $a (printf "--kube-api-concurrency=%s" (include "job-dispatcher.number" .)) }}{{ end }}
{{- if kindIs "invalid" .qps }}{{ else }}{{ $a = append $a (printf "--kube-api-qps=%s" (include "job-dispatcher.number" .qps)) }}{{ end }}
{{- with .burst }}{{ $a = append $a (printf "--kube-api-burst=%s" (include "job-dispatcher.number" .)) }}{{ end }}
{{- end }}
{{- if eq $mode "jobName" }}
{{- $a = append $a (printf "--owner-job-name=%s" (include "job-dispatcher.hookName" .)) }}
{{- else if eq $mode "pod" }}
{{- /* The kubelet expands $(POD_NAME) from the container's env. */}}
{{- $a = append $a "--owner-job-from-pod=$(POD_NAME)" }}
{{- end }}
{{- if $v.owner.yieldToLiveRun }}{{ $a = append $a "--yield-to-live-run" }}{{ end }}
{{- with $v.dryRun }}{{ $a = append $a (printf "--dry-run=%s" .) }}{{ end }}
{{- $a = append $a (printf "--log-format=%s" $v.logFormat) }}
{{- $a = concat $a (include "job-dispatcher.progressiveArgs" . | fromYamlArray) }}
{{- $setFlags := include "job-dispatcher.valueFlags" . | fromYaml }}
{{- range $v.extraArgs }}
{{- $arg := toString . }}
{{- /* Refused at install time: in the hook it would fail every node on a 403 after the release exists. */}}
{{- if and $v.rbac.create (not $v.rbac.drain) (regexMatch "^--(drain|blocking-pod-selector)(=|$)" $arg) }}
{{- fail (printf "extraArgs %s needs rbac.drain=true (pods list, pods/eviction create): add --set rbac.drain=true" $arg) }}
{{- end }}
{{- /* The same for what only a value's RBAC covers: the exit latch's get (read before any Job), pods list. */}}
{{- if and $v.rbac.create (regexMatch "^--gate-prometheus-url(=|$)" $arg) }}
{{- fail (printf "extraArgs %s needs the gate's RBAC (get on the ConfigMap <prefix>-gate-breach): set gates.prometheusUrl, and gates.queries or gates.alerts, instead" $arg) }}
{{- end }}
{{- if and $v.rbac.create (not $v.rbac.drain) (regexMatch "^--verify-pod-selector(=|$)" $arg) }}
{{- fail (printf "extraArgs %s needs pods list in every namespace: set verification.podSelector instead" $arg) }}
{{- end }}
{{- /* Refused too: a repeated flag silently overrides the value (the last one wins). */}}
{{- $flag := regexReplaceAll "[= ].*$" $arg "" }}
{{- with get (include "job-dispatcher.chartFlags" . | fromYaml) $flag }}
{{- fail (printf "extraArgs %s repeats a flag the chart sets: use %s instead" $arg .) }}
{{- end }}
{{- with get $setFlags $flag }}
{{- fail (printf "extraArgs %s repeats a flag the chart sets from %s: set one of them" $arg .) }}
{{- end }}
{{- $a = append $a $arg }}
{{- end }}
{{- toYaml $a }}
{{- end }}

{{/*
The flags the chart sets from its values or the release, each with what sets
it: an extraArgs entry repeating one is refused at install time.
*/}}
{{- define "job-dispatcher.chartFlags" -}}
--job-template: --set-file jobTemplate=FILE
--namespace: helm -n NAMESPACE
-n: helm -n NAMESPACE
--kubeconfig: the chart's ServiceAccount
--context: the chart's ServiceAccount
--name-prefix: --set namePrefix=...
--nodes: --set selection.nodes={...}
--node-field-selector: --set selection.nodeFieldSelector=...
--node-page-size: --set selection.nodePageSize=...
--ignore-node-taints: --set selection.ignoreNodeTaints=true
--wait-for-nodes-secs: --set selection.waitForNodesSecs=...
--fail-if-no-nodes: --set selection.failIfNoNodes=true
--node-settle-secs: --set selection.nodeSettleSecs=...
--parallelism: --set parallelism=...
--poll-interval-secs: --set pollIntervalSecs=...
--progress-interval-secs: --set progressIntervalSecs=...
--tracking-label-prefix: --set trackingLabelPrefix=...
--kube-api-concurrency: --set kubeApi.concurrency=...
--kube-api-qps: --set kubeApi.qps=...
--kube-api-burst: --set kubeApi.burst=...
--owner-job-name: --set owner.mode=jobName
--owner-job-from-pod: --set owner.mode=pod
--yield-to-live-run: --set owner.yieldToLiveRun=true
--dry-run: --set dryRun=client
--log-format: --set logFormat=text
{{- end }}

{{/*
The flags of waves, gates, verification and metrics, as a YAML list: each only
when its value is set, so that a release without them renders as before, and
each refused at install time where the dispatcher would refuse it in the hook
(exit 2 after the release exists).
*/}}
{{- define "job-dispatcher.progressiveArgs" -}}
{{- $v := .Values }}
{{- $a := list }}
{{- $w := $v.waves | default dict }}
{{- $canary := false }}
{{- range $v.extraArgs }}{{ if regexMatch "^--canary(=|$)" (toString .) }}{{ $canary = true }}{{ end }}{{ end }}
{{- with $w.sizes }}
{{- /* A count from a values file is a float64, which join would print as 1e+06. */}}
{{- $sizes := list }}
{{- range . }}{{ $sizes = append $sizes (ternary . (include "job-dispatcher.number" .) (kindIs "string" .)) }}{{ end }}
{{- include "job-dispatcher.checkWaves" $sizes }}
{{- range $v.extraArgs }}
{{- if regexMatch "^--canary(=|$)" (toString .) }}
{{- fail (printf "extraArgs %s and waves.sizes: --canary N is waves N,100%%; set one of them" .) }}
{{- end }}
{{- end }}
{{- $a = append $a (printf "--waves=%s" (join "," $sizes)) }}
{{- end }}
{{- if $w.soakSecs }}
{{- if not (or $w.sizes $canary) }}
{{- fail "waves.soakSecs needs waves.sizes (or --canary in extraArgs): the waves to soak after" }}
{{- end }}
{{- $a = append $a (printf "--wave-soak-secs=%s" (include "job-dispatcher.number" $w.soakSecs)) }}
{{- end }}
{{- $a = concat $a (include "job-dispatcher.gateArgs" . | fromYamlArray) }}
{{- $ver := $v.verification | default dict }}
{{- with $ver.podSelector }}{{ $a = append $a (printf "--verify-pod-selector=%s" .) }}{{ end }}
{{- if not (kindIs "invalid" $ver.jobTemplate) }}
{{- $a = append $a "--verify-job-template=/etc/job-dispatcher/verify-job.yaml" }}
{{- end }}
{{- if or $ver.podSelector (not (kindIs "invalid" $ver.jobTemplate)) }}
{{- $a = append $a (printf "--verify-timeout-secs=%s" (include "job-dispatcher.number" (default 600 $ver.timeoutSecs))) }}
{{- end }}
{{- if ($v.metrics | default dict).enabled }}
{{- $a = append $a (printf "--metrics-addr=:%d" (int $v.metrics.port)) }}
{{- if $v.metrics.lingerSecs }}
{{- $a = append $a (printf "--metrics-linger-secs=%s" (include "job-dispatcher.number" $v.metrics.lingerSecs)) }}
{{- end }}
{{- end }}
{{- toYaml $a }}
{{- end }}

{{/* The gate flags, as a YAML list; none while gates.prometheusUrl is empty. */}}
{{- define "job-dispatcher.gateArgs" -}}
{{- $g := .Values.gates | default dict }}
{{- $tok := $g.bearerTokenSecret | default dict }}
{{- $ca := $g.ca | default dict }}
{{- $a := list }}
{{- if $g.prometheusUrl }}
{{- if not (or $g.queries $g.alerts) }}
{{- fail "gates.prometheusUrl needs gates.queries or gates.alerts: what to watch" }}
{{- end }}
{{- if and (eq $g.onBreach "pause") (eq (include "job-dispatcher.ownerMode" .) "none") }}
{{- fail "gates.onBreach=pause sets the pause on the hook Job, which owner.mode=none does not pass: set owner.mode=jobName or gates.onBreach=exit" }}
{{- end }}
{{- if and $ca.secretName $ca.configMapName }}
{{- fail "gates.ca: give secretName or configMapName, not both" }}
{{- end }}
{{- $a = append $a (printf "--gate-prometheus-url=%s" $g.prometheusUrl) }}
{{- range $g.queries }}{{ $a = append $a (printf "--gate-query=%s" .) }}{{ end }}
{{- with $g.alerts }}{{ $a = append $a (printf "--gate-alerts=%s" .) }}{{ end }}
{{- $a = append $a (printf "--gate-interval-secs=%s" (include "job-dispatcher.number" (default 30 $g.intervalSecs))) }}
{{- $a = append $a (printf "--on-gate-breach=%s" (default "pause" $g.onBreach)) }}
{{- if $tok.name }}{{ $a = append $a "--gate-bearer-token-file=/var/run/secrets/job-dispatcher/gate-token/token" }}{{ end }}
{{- if or $ca.secretName $ca.configMapName }}{{ $a = append $a "--gate-ca-file=/etc/job-dispatcher-gate-ca/ca.crt" }}{{ end }}
{{- else if or $g.queries $g.alerts $tok.name $ca.secretName $ca.configMapName }}
{{- fail "gates.queries, alerts, bearerTokenSecret and ca need gates.prometheusUrl: the Prometheus to ask" }}
{{- end }}
{{- toYaml $a }}
{{- end }}

{{/*
waves.sizes as the dispatcher reads them (engine/waves.ts), where the chart can
tell without the selection: counts strictly growing, percentages (fractions
too: 0.5% of 10,000 nodes is 50) over 0, strictly growing and at most 100.
*/}}
{{- define "job-dispatcher.checkWaves" -}}
{{- $count := 0 }}
{{- $pct := 0.0 }}
{{- range . }}
{{- $s := toString . }}
{{- if regexMatch "^[1-9][0-9]*$" $s }}
{{- if le (int $s) $count }}{{ fail (printf "waves.sizes %s: the wave sizes must grow strictly (a count after %d)" $s $count) }}{{ end }}
{{- $count = int $s }}
{{- else if regexMatch "^[0-9]+(\\.[0-9]+)?%$" $s }}
{{- $p := float64 (trimSuffix "%" $s) }}
{{- if eq $p 0.0 }}{{ fail (printf "waves.sizes %s: a wave of 0%% holds no node" $s) }}{{ end }}
{{- if gt $p 100.0 }}{{ fail (printf "waves.sizes %s: a percentage is at most 100%%" $s) }}{{ end }}
{{- if le $p $pct }}{{ fail (printf "waves.sizes %s: the wave sizes must grow strictly (a percentage after %v%%)" $s $pct) }}{{ end }}
{{- $pct = $p }}
{{- else }}
{{- fail (printf "waves.sizes %s: each size is a count (5) or a percentage (25%%)" $s) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The flags the chart sets from an optional value, only while that value is
set, each with the value: an extraArgs entry repeating one is refused. (An
older release may pass these flags in extraArgs; it keeps working until it
sets the value; but --gate-prometheus-url, and --verify-pod-selector
without rbac.drain, are refused in extraArgs: only their values grant their
RBAC.)
*/}}
{{- define "job-dispatcher.valueFlags" -}}
{{- range (include "job-dispatcher.progressiveArgs" . | fromYamlArray) }}
{{- $flag := regexReplaceAll "=.*$" . "" }}
{{ $flag }}: {{ get (include "job-dispatcher.flagValues" "" | fromYaml) $flag | quote }}
{{- end }}
{{- end }}

{{- define "job-dispatcher.flagValues" -}}
--waves: waves.sizes
--wave-soak-secs: waves.soakSecs
--gate-prometheus-url: gates.prometheusUrl
--gate-query: gates.queries
--gate-alerts: gates.alerts
--gate-interval-secs: gates.intervalSecs
--on-gate-breach: gates.onBreach
--gate-bearer-token-file: gates.bearerTokenSecret
--gate-ca-file: gates.ca
--verify-pod-selector: verification.podSelector
--verify-job-template: verification.jobTemplate
--verify-timeout-secs: verification.timeoutSecs
--metrics-addr: metrics.enabled
--metrics-linger-secs: metrics.lingerSecs
{{- end }}

{{/*
Whether `helm test` has a test: test.enabled, the hook Job kept after it
succeeded (with hook-succeeded, Helm deleted it, and the garbage collector its
per-node Jobs and run record: nothing would be left to read), and an account
for the Pod: test.serviceAccountName, or the chart's own, which it makes only
with serviceAccount.create and rbac.create (the API server refuses a Pod that
names a missing ServiceAccount; one without the viewer's rights would fail on
a 403 however the rollout went).
*/}}
{{- define "job-dispatcher.testEnabled" -}}
{{- $t := .Values.test | default (dict "enabled" true) }}
{{- $account := or $t.serviceAccountName (and .Values.serviceAccount.create .Values.rbac.create) }}
{{- if and $t.enabled $account (not (contains "hook-succeeded" .Values.hook.deletePolicy)) }}true{{ end }}
{{- end }}

{{/* The test Pod's ServiceAccount: test.serviceAccountName, else the chart's, with the viewer's rights and nothing more. */}}
{{- define "job-dispatcher.testServiceAccountName" -}}
{{- with (.Values.test | default dict).serviceAccountName }}{{ . }}{{ else }}
{{- printf "%s-test" (include "job-dispatcher.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
`job-dispatcher status` for this release's last rollout, as a YAML list:
with an owner, the hook Job of this revision (the record and Jobs it owns);
without one, the prefix (its record belongs to the prefix).
*/}}
{{- define "job-dispatcher.testArgs" -}}
{{- $a := list "status" (printf "--namespace=%s" .Release.Namespace) }}
{{- if eq (include "job-dispatcher.ownerMode" .) "none" }}
{{- $a = append $a (printf "--name-prefix=%s" (include "job-dispatcher.prefix" .)) }}
{{- else }}
{{- $a = append $a (printf "--owner-job-name=%s" (include "job-dispatcher.hookName" .)) }}
{{- end }}
{{- $a = append $a (printf "--tracking-label-prefix=%s" .Values.trackingLabelPrefix) }}
{{- /* A run still alive (paused by a gate, or past helm's --timeout) has not worked yet. */}}
{{- $a = append $a "--require-ended" }}
{{- toYaml $a }}
{{- end }}

{{/*
A number as the dispatcher's flags read it (cli/options.ts): plain digits,
with a point where it has a fraction. A values file's numbers reach the
template as float64, which %v prints with an exponent from a million on
(1e+06, 1.2345675e+06) and below 0.0001 (2.5e-05), and which int64 wraps
from 2^63 on: each of those a flag refuses, exit 2 after the release exists.
So the point of %v's shortest digits is moved by its exponent instead.
*/}}
{{- define "job-dispatcher.number" -}}
{{- $s := printf "%v" (float64 .) }}
{{- $m := regexFindAll `^(-?)([0-9]+)(?:\.([0-9]+))?e([-+][0-9]+)$` $s 1 }}
{{- if not $m }}{{ $s }}{{ else }}
{{- $sign := regexReplaceAll `^(-?).*$` $s "${1}" }}
{{- $int := regexReplaceAll `^-?([0-9]+).*$` $s "${1}" }}
{{- $frac := regexReplaceAll `^-?[0-9]+(?:\.([0-9]+))?e.*$` $s "${1}" }}
{{- $digits := printf "%s%s" $int $frac }}
{{- $point := add (len $int) (atoi (trimPrefix "+" (regexReplaceAll `^.*e` $s ""))) }}
{{- if ge (int $point) (len $digits) }}{{ $sign }}{{ $digits }}{{ repeat (int (sub $point (len $digits))) "0" }}
{{- else if le (int $point) 0 }}{{ $sign }}0.{{ repeat (int (sub 0 $point)) "0" }}{{ $digits }}
{{- else }}{{ $sign }}{{ substr 0 (int $point) $digits }}.{{ substr (int $point) (len $digits) $digits }}
{{- end }}
{{- end }}
{{- end }}
