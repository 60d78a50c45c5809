{{/* Names and labels shared by every template. */}}

{{- define "sparkpoint.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sparkpoint.operatorName" -}}
{{- printf "%s-operator" (include "sparkpoint.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sparkpoint.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sparkpoint.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces where jobs run: the watched ones, or the release namespace when cluster-wide. */}}
{{- define "sparkpoint.jobNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- toJson .Values.watchNamespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{- define "sparkpoint.labels" -}}
app.kubernetes.io/name: sparkpoint
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Selector of the operator pods (a contract: app.kubernetes.io/name=sparkpoint, component=operator). */}}
{{- define "sparkpoint.operatorSelector" -}}
app.kubernetes.io/name: sparkpoint
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* Selector of the job (runtime) pods the operator creates (operator/builders.py). */}}
{{- define "sparkpoint.runtimeSelector" -}}
app.kubernetes.io/name: sparkpoint
app.kubernetes.io/component: runtime
{{- end -}}

{{- define "sparkpoint.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Selector of the History Server pods (historyserver.yaml; `kubectl sparkpoint history` finds its Service by component). */}}
{{- define "sparkpoint.historySelector" -}}
app.kubernetes.io/name: sparkpoint
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: history-server
{{- end -}}
