{{/* The labels every object carries: the one manifests/ uses (which selectors match), and
Helm's (metadata only, never in a selector: selectors cannot change on upgrade). */}}
{{- define "interlock.labels" -}}
app.kubernetes.io/name: interlock
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "interlock.selector" -}}
app.kubernetes.io/name: interlock
{{- end -}}

{{/* The port of a HOST:PORT address ("0.0.0.0:8080", "[::]:8080"). */}}
{{- define "interlock.port" -}}
{{- splitList ":" . | last -}}
{{- end -}}

{{- define "interlock.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "interlock.publishService" -}}
{{- if .Values.publishService.service -}}
{{- .Values.publishService.service -}}
{{- else -}}
{{- printf "%s/interlock-edge" .Values.namespace.name -}}
{{- end -}}
{{- end -}}
