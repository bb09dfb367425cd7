{{/* The writer's flags shared by the writer and its shadow. */}}
{{- define "renumber.writerArgs" -}}
{{- $w := .Values.writer -}}
- --metrics-addr=:{{ $w.metricsPort }}
- --metrics-auth={{ $w.metricsAuth }}
{{- if eq $w.metricsAuth "kubernetes" }}
{{ include "renumber.metricsCAFlag" . }}
{{- include "renumber.audienceFlag" $w.metricsAudience }}
{{- end }}
{{- $full := include "renumber.fullname" . }}
{{- if ne $full "renumber" }}
- --lease-name={{ $full }}-writer
{{- end }}
{{- include "renumber.flag" (list "debounce" $w.debounce) }}
{{- include "renumber.flag" (list "node-not-ready-grace" $w.nodeNotReadyGrace) }}
{{- include "renumber.flag" (list "node-startup-wait" $w.nodeStartupWait) }}
{{- include "renumber.flag" (list "dhcpv6-confirm-within" $w.dhcpv6ConfirmWithin) }}
{{- include "renumber.flag" (list "staleness-check" $w.stalenessCheck) }}
{{- include "renumber.flag" (list "budget-object-burst" $w.budget.objectBurst) }}
{{- include "renumber.flag" (list "budget-object-per-minute" $w.budget.objectPerMinute) }}
{{- include "renumber.flag" (list "budget-total-burst" $w.budget.totalBurst) }}
{{- include "renumber.flag" (list "budget-total-per-minute" $w.budget.totalPerMinute) }}
{{- include "renumber.flag" (list "budget-decision-burst" $w.budget.decisionBurst) }}
{{- include "renumber.flag" (list "budget-decisions-per-minute" $w.budget.decisionsPerMinute) }}
{{- include "renumber.flag" (list "budget-event-burst" $w.budget.eventBurst) }}
{{- include "renumber.flag" (list "budget-events-per-minute" $w.budget.eventsPerMinute) }}
{{- with $w.externalDNSTargetKeys }}
- --external-dns-target-annotation-keys={{ join "," . }}
{{- end }}
{{- include "renumber.flag" (list "l2-nudge" $w.l2Nudge) }}
{{- if ne $w.ciliumNamespace "kube-system" }}
- --cilium-namespace={{ $w.ciliumNamespace }}
{{- end }}
{{- include "renumber.flag" (list "kube-vip-configmap" .Values.kubeVIP.configMap) }}
{{- include "renumber.flag" (list "log-level" $w.logLevel) }}
{{- include "renumber.flag" (list "log-format" $w.logFormat) }}
{{- with $w.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The rest of the writer's container, shared by the writer and its shadow. */}}
{{- define "renumber.writerContainer" -}}
{{- $w := .root.Values.writer -}}
env:
  - name: POD_NAME
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
  {{- if .pod }}
  - name: POD_NAMESPACE
    valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
  {{- end }}
  - name: GOMEMLIMIT
    value: {{ $w.goMemLimit }}
  - name: GOGC
    value: {{ $w.goGC | quote }}
  {{- with $w.extraEnv }}{{ toYaml . | nindent 2 }}{{ end }}
ports:
  - {name: metrics, containerPort: {{ $w.metricsPort }}}
{{- $ours := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) }}
securityContext: {{- include "renumber.securityContext" (dict "ours" $ours "c" $w) | nindent 2 }}
resources: {{- toYaml $w.resources | nindent 2 }}
{{- $scheme := ternary ", scheme: HTTPS" "" (eq $w.metricsAuth "kubernetes") }}
readinessProbe:
  httpGet: {path: /readyz, port: metrics{{ $scheme }}}
  periodSeconds: 10
livenessProbe:
  httpGet: {path: /healthz, port: metrics{{ $scheme }}}
  periodSeconds: 30
  {{- if .pod }}
  failureThreshold: 4
  {{- end }}
{{- if eq $w.metricsAuth "kubernetes" }}
{{ include "renumber.metricsCAMount" .root }}
{{- end }}
{{- end -}}
