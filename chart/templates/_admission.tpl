{{/*
Whether to render the admission policies (admission-policies.yaml): the
value admissionPolicies.enabled, and an API server that serves
ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1 (GA in 1.30).
`helm template` without --api-versions or --kube-version >= 1.30 renders none.
*/}}
{{- define "job-dispatcher.admissionEnabled" -}}
{{- if and .Values.admissionPolicies.enabled (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") }}true{{ end }}
{{- end }}

{{/*
The params ConfigMap's data, as policy/admission.ts admissionParams computes
it from the same run: what the templates (jobTemplate and
verification.jobTemplate) ask, and the node keys the extraArgs flags make the
dispatcher write. Lists are comma-separated (CEL has no YAML parser).
"revision" keeps this revision's own parameters (JSON, unread by CEL), so
that the next upgrade can keep them allowed for one more revision.
*/}}
{{- define "job-dispatcher.admissionData" -}}
{{- $tpls := list (include "job-dispatcher.jobTemplate" . | fromYaml) }}
{{- with include "job-dispatcher.verifyJobTemplate" . }}{{ $tpls = append $tpls (fromYaml .) }}{{ end }}
{{- $images := list }}{{ $sas := list }}{{ $paths := list }}{{ $caps := list }}{{ $vols := list }}{{ $prios := list }}
{{- $host := dict "privileged" false "hostPID" false "hostNetwork" false "hostIPC" false }}
{{- range $tpls }}
{{- $pod := (((.spec | default dict).template | default dict).spec | default dict) }}
{{- $sas = append $sas ($pod.serviceAccountName | default $pod.serviceAccount | default "default") }}
{{- range list "hostPID" "hostNetwork" "hostIPC" }}{{ if get $pod . }}{{ $_ := set $host . true }}{{ end }}{{ end }}
{{- range concat ($pod.initContainers | default list) ($pod.containers | default list) }}
{{- $images = append $images (toString .image) }}
{{- $sc := .securityContext | default dict }}
{{- if $sc.privileged }}{{ $_ := set $host "privileged" true }}{{ end }}
{{- range (($sc.capabilities | default dict).add | default list) }}{{ $caps = append $caps (toString .) }}{{ end }}
{{- end }}
{{- range ($pod.volumes | default list) }}{{ with .hostPath }}{{ $paths = append $paths (toString .path) }}{{ end }}{{ range $k, $_ := . }}{{ if ne $k "name" }}{{ $vols = append $vols $k }}{{ end }}{{ end }}{{ end }}
{{- with $pod.priorityClassName }}{{ $prios = append $prios (toString .) }}{{ end }}
{{- end }}
{{- $flags := include "job-dispatcher.extraFlags" . | fromYaml }}
{{- $prefix := .Values.trackingLabelPrefix }}
{{- $keys := list }}{{ $prefixes := list (printf "%s/" $prefix) }}
{{- range ($flags.nodeLabelKey | default list) }}{{ $keys = append $keys . }}{{ end }}
{{- range ($flags.extraNodeLabel | default list) }}{{ $keys = append $keys (splitList "=" . | first) }}{{ end }}
{{- with ($flags.instanceLabelPrefix | default list) }}
{{- $ip := last . }}
{{- $prefixes = append $prefixes (printf "%s/" $ip) }}
{{- with ($flags.multiInstallSuffix | default list) }}{{ $keys = append $keys (printf "%s/%s" $ip (last .)) }}{{ end }}
{{- end }}
{{- /* Keys under kubernetes.io and k8s.io are read by Kubernetes components:
the policy would let the token set them on every node (policy/admission.ts
refuseReserved says the same). A prefix is judged as the domain of its keys. */}}
{{- $check := list (list "--tracking-label-prefix" $prefix (printf "%s/" $prefix)) }}
{{- range ($flags.nodeLabelKey | default list) }}{{ $check = append $check (list "--node-label-key" . .) }}{{ end }}
{{- range ($flags.extraNodeLabel | default list) }}{{ $k := splitList "=" . | first }}{{ $check = append $check (list "--extra-node-label" $k $k) }}{{ end }}
{{- with ($flags.instanceLabelPrefix | default list) }}{{ $check = append $check (list "--instance-label-prefix" (last .) (printf "%s/" (last .))) }}{{ end }}
{{- range $check }}
{{- $key := index . 2 | toString }}
{{- if contains "/" $key }}
{{- $d := splitList "/" $key | first }}
{{- if or (eq $d "kubernetes.io") (eq $d "k8s.io") (hasSuffix ".kubernetes.io" $d) (hasSuffix ".k8s.io" $d) }}
{{- fail (printf "Cannot admit %s %s: keys under kubernetes.io and k8s.io are read by Kubernetes components (scheduler, load balancers, NodeRestriction), and the policy would let the ServiceAccount's token set it to any value on every node; choose a key under your own domain, or leave the policies out (admissionPolicies.enabled=false, rbac --admission-policies=false)" (index . 0) (index . 1)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $taints := list }}
{{- range ($flags.removeNodeTaints | default list) }}{{ range splitList "," . }}{{ with trim . }}{{ $taints = append $taints . }}{{ end }}{{ end }}{{ end }}
{{- $owner := include "job-dispatcher.prefix" . }}
{{- $cur := dict "prefix" $prefix "hook" "" }}
{{- if ne (include "job-dispatcher.ownerMode" .) "none" }}{{ $_ := set $cur "hook" (include "job-dispatcher.fullname" .) }}{{ end }}
{{- $_ := set $cur "owners" (ternary (list $owner (printf "%s-verify" $owner)) (list $owner) (eq (len $tpls) 2) | sortAlpha | join ",") }}
{{- $_ := set $cur "images" ($images | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "serviceAccounts" ($sas | uniq | sortAlpha | join ",") }}
{{- range $k, $v := $host }}{{ $_ := set $cur $k (toString $v) }}{{ end }}
{{- $_ := set $cur "hostPaths" ($paths | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "capabilities" ($caps | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "volumeTypes" ($vols | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "priorityClasses" ($prios | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "labelKeys" ($keys | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "labelPrefixes" ($prefixes | uniq | sortAlpha | join ",") }}
{{- $_ := set $cur "removeTaints" ($taints | uniq | sortAlpha | join ",") }}
{{- /* The previous revision's own parameters stay allowed until the next
upgrade: its run may still be going (a new run waits for it) or its hook pod
retried (an eviction), and it makes Jobs of its own template. */}}
{{- $prev := dict }}
{{- with lookup "v1" "ConfigMap" .Release.Namespace (printf "%s-admission" (include "job-dispatcher.fullname" .)) }}
{{- with (.data | default dict).revision }}{{ $prev = fromJson . }}{{ end }}
{{- end }}
{{- $out := dict "revision" (toJson $cur) }}
{{- range $k, $v := $cur }}
{{- $p := get $prev $k | default "" | toString }}
{{- if has $k (list "privileged" "hostPID" "hostNetwork" "hostIPC") }}
{{- $_ := set $out $k (ternary "true" "false" (or (eq $v "true") (eq $p "true"))) }}
{{- else if has $k (list "prefix" "hook") }}
{{- $_ := set $out $k $v }}
{{- else }}
{{- $_ := set $out $k (concat (splitList "," $v) (splitList "," $p) | compact | uniq | sortAlpha | join ",") }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The node flags of extraArgs the policies need, as YAML lists by flag
(nodeLabelKey, extraNodeLabel, instanceLabelPrefix, multiInstallSuffix,
removeNodeTaints), each given as --flag=value (values.schema.json wants every
item to start with -).
*/}}
{{- define "job-dispatcher.extraFlags" -}}
{{- $args := .Values.extraArgs | default list }}
{{- $names := dict "--node-label-key" "nodeLabelKey" "--extra-node-label" "extraNodeLabel" "--instance-label-prefix" "instanceLabelPrefix" "--multi-install-suffix" "multiInstallSuffix" "--remove-node-taints" "removeNodeTaints" }}
{{- $out := dict }}
{{- range $a := $args }}
{{- $kv := splitn "=" 2 (toString $a) }}
{{- with get $names $kv._0 }}
{{- $_ := set $out . (append (get $out . | default list) ($kv._1 | default "")) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}
