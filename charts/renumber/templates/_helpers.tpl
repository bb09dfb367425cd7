{{/* A flag, only when its value is set: empty keeps the binary's default. */}}
{{- define "renumber.flag" -}}
{{- $v := index . 1 -}}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
- --{{ index . 0 }}={{ $v }}
{{- end -}}
{{- end -}}

{{/* The shipped manifests, with the namespace the release is installed in. */}}
{{- define "renumber.file" -}}
{{ .root.Files.Get .file | replace "namespace: renumber-system" (printf "namespace: %s" .root.Release.Namespace) | replace ":renumber-system:" (printf ":%s:" .root.Release.Namespace) }}
{{- end -}}

{{- define "renumber.image" -}}
{{ .repository }}:{{ .tag }}
{{- end -}}
