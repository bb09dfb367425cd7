{{/* A flag, only when its value is set: empty keeps the binary's default. */}}
{{- define "renumber.flag" -}}
{{- $v := index . 1 -}}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
- --{{ index . 0 }}={{ $v }}
{{- end -}}
{{- end -}}

{{/* --metrics-audience from a metricsAudience value: null keeps the
binary's default (renumber-metrics); "" is a value (the API server's own
audience), so renumber.flag, which skips it, does not serve. */}}
{{- define "renumber.audienceFlag" -}}
{{- if not (kindIs "invalid" .) }}
- --metrics-audience={{ . }}
{{- end -}}
{{- end -}}

{{/* The shipped manifests, with the namespace the release is installed in,
Cilium's (where the writer reads the Cilium DaemonSet: kube-system in the
files) as writer.ciliumNamespace says, and the chart's labels on every object. */}}
{{- define "renumber.file" -}}
{{- $text := .root.Files.Get .file | replace "namespace: renumber-system" (printf "namespace: %s" (include "renumber.namespace" .root)) | replace ":renumber-system:" (printf ":%s:" (include "renumber.namespace" .root)) | replace "namespace: kube-system" (printf "namespace: %s" .root.Values.writer.ciliumNamespace) -}}
{{- $text = include "renumber.rename" (dict "root" .root "text" $text) -}}
{{- /* The admin's closed list of the keys their webhook adds: the first
variable of the writer's policies that hold it, a CEL list literal (JSON's
strings are CEL's), quoted for YAML. */ -}}
{{- $keys := dig "webhookKeys" list (.root.Values.admissionPolicies | default dict) -}}
{{- $text = replace "- name: webhookKeys\n      expression: \"[]\"" (printf "- name: webhookKeys\n      expression: %s" ($keys | toJson | toJson)) $text -}}
{{- $labels := include "renumber.labels" .root | fromYaml -}}
{{- $root := .root }}
{{- range regexSplit "(?m)^---[ \t]*$" $text -1 }}
{{- $o := fromYaml . }}
{{- $keep := true }}
{{- if eq ($o.kind | default "") "ServiceAccount" }}
{{- range $c := list "agent" "writer" "shadow" }}
{{- $sa := (index $root.Values $c).serviceAccount | default dict }}
{{- if eq $o.metadata.name (include "renumber.saName" (dict "root" $root "c" $c)) }}
{{- if eq (toString $sa.create) "false" }}{{ $keep = false }}{{ end }}
{{- with $sa.annotations }}{{ $_ := set $o.metadata "annotations" (merge (dict) . ($o.metadata.annotations | default dict)) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $o.kind $keep }}
{{- $_ := set $o.metadata "labels" (merge (dict) ($o.metadata.labels | default dict) $labels) }}
---
{{ toYaml $o }}
{{- end }}
{{- end }}
{{- end -}}

{{/* An image: by digest when one is given, else by tag (the chart's
appVersion when empty: a packaged release pulls the images it pushed). */}}
{{- define "renumber.image" -}}
{{- $repo := .image.repository -}}
{{- with dig "imageRegistry" "" (.root.Values.global | default dict) -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repo = join "/" (rest $parts) -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- end -}}
{{ $repo }}{{ with .image.digest }}@{{ . }}{{ else }}:{{ .image.tag | default .root.Chart.AppVersion }}{{ end }}
{{- end -}}

{{/* A Pod's securityContext: ours (non-root, RuntimeDefault seccomp), with
the keys of .c.podSecurityContext over it. */}}
{{- define "renumber.podSecurityContext" -}}
{{- $ours := dict "runAsNonRoot" true "runAsUser" 65532 "runAsGroup" 65532 "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $ours (deepCopy (.c.podSecurityContext | default dict))) -}}
{{- end -}}

{{/* A container's securityContext: .ours, with the keys of .c.securityContext
over it. */}}
{{- define "renumber.securityContext" -}}
{{- toYaml (mergeOverwrite (deepCopy .ours) (deepCopy (.c.securityContext | default dict))) -}}
{{- end -}}

{{/* A pod template's metadata: our labels, then the component's podLabels
and podAnnotations (.c: the component's values). */}}
{{- define "renumber.podMeta" -}}
labels:
  app.kubernetes.io/name: {{ .name }}
  app.kubernetes.io/instance: {{ .root.Release.Name }}
  app.kubernetes.io/part-of: renumber
  {{- with .c.podLabels }}{{ toYaml . | nindent 2 }}{{ end }}
{{- with .c.podAnnotations }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod-spec knobs every component takes: image pull secrets (chart-wide
and global.imagePullSecrets, names or {name: ...}), topology spread
constraints. */}}
{{- define "renumber.podExtras" -}}
{{- $secrets := list -}}
{{- range concat (.root.Values.imagePullSecrets | default list) (dig "imagePullSecrets" list (.root.Values.global | default dict)) -}}
{{- $s := kindIs "string" . | ternary (dict "name" .) . -}}
{{- if not (has $s $secrets) }}{{ $secrets = append $secrets $s }}{{ end -}}
{{- end -}}
{{- with $secrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The labels on every object the chart renders: Helm's standard ones,
then commonLabels. */}}
{{- define "renumber.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: renumber
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The release's name prefix for every object: the release name when it
says renumber (or nameOverride; the default release "renumber" gives the
names of manifests/), else "<release>-renumber" ("<release>-<nameOverride>");
fullnameOverride replaces it. */}}
{{- define "renumber.fullname" -}}
{{- $name := .Values.nameOverride | default "renumber" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* .text with every object name, ServiceAccount reference and policy
identity "renumber-..." renamed to the release's prefix (renumber.fullname);
label values (the components' app.kubernetes.io/name) keep their names. */}}
{{- define "renumber.rename" -}}
{{- $full := include "renumber.fullname" .root -}}
{{- $t := .text -}}
{{- if ne $full "renumber" -}}
{{- $t = regexReplaceAll "(?m)^(\\s*(?:- )?(?:name|policyName|serviceAccountName|kubernetes\\.io/service-account\\.name): )renumber-" $t (printf "${1}%s-" $full) -}}
{{- $t = regexReplaceAll "(system:serviceaccount:[^:'\\s]+:)renumber-" $t (printf "${1}%s-" $full) -}}
{{- $t = regexReplaceAll "\"renumber-(agent|writer|shadow|reader)\"" $t (printf "\"%s-${1}\"" $full) -}}
{{- $t = regexReplaceAll "':renumber-(agent|writer)'" $t (printf "':%s-${1}'" $full) -}}
{{- end -}}
{{- /* A ServiceAccount named by the user (<component>.serviceAccount.name):
the Pods run as it, the bindings name it, the admission policies match it. */ -}}
{{- range $c := list "agent" "writer" "shadow" -}}
{{- with (index $.root.Values $c).serviceAccount -}}
{{- with .name -}}
{{- $from := printf "%s-%s" $full $c -}}
{{- $t = regexReplaceAll (printf "(?m)^(\\s*serviceAccountName: )%s$" $from) $t (printf "${1}%s" .) -}}
{{- $t = replace (printf "':%s'" $from) (printf "':%s'" .) $t -}}
{{- $t = regexReplaceAll (printf "(?m)(- kind: ServiceAccount\\n\\s+name: )%s$" $from) $t (printf "${1}%s" .) -}}
{{- $t = regexReplaceAll (printf "(?m)(kind: ServiceAccount\\nmetadata:\\n\\s+name: )%s$" $from) $t (printf "${1}%s" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{ $t }}
{{- end -}}

{{/* The ServiceAccount component .c runs as: <component>.serviceAccount.name,
or the release's <fullname>-<component>. */}}
{{- define "renumber.saName" -}}
{{- $sa := (index .root.Values .c).serviceAccount | default dict -}}
{{- $sa.name | default (printf "%s-%s" (include "renumber.fullname" .root) .c) -}}
{{- end -}}

{{/* The install's metrics CA (metrics-ca.yaml): its Secret's name, the flag
that makes a process's certificate from it, and its volume and mount. The
Secret is optional in the Pod: without it a process serves self-signed, and
a verifying scraper reports it down. */}}
{{- define "renumber.metricsCAName" -}}
{{ include "renumber.fullname" . }}-metrics-ca
{{- end -}}
{{- define "renumber.metricsCAFlag" -}}
- --metrics-ca=/etc/renumber/metrics-ca
{{- end -}}
{{- define "renumber.metricsCAMount" -}}
volumeMounts:
  - {name: metrics-ca, mountPath: /etc/renumber/metrics-ca, readOnly: true}
{{- end -}}
{{- define "renumber.metricsCAVolume" -}}
volumes:
  - name: metrics-ca
    secret: {secretName: {{ include "renumber.metricsCAName" . }}, optional: true}
{{- end -}}

{{/* The namespace every namespaced object goes to: namespaceOverride (an
umbrella chart installing renumber beside others), else the release's. */}}
{{- define "renumber.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}
