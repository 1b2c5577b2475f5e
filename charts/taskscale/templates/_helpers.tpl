{{/* Names, labels and shared fragments of the taskscale chart. */}}

{{- define "taskscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "taskscale.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskscale.labels" -}}
helm.sh/chart: {{ include "taskscale.chart" . }}
{{ include "taskscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taskscale
{{- end -}}

{{- define "taskscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "taskscale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "taskscale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag or repository@digest; tag defaults to the appVersion. */}}
{{- define "taskscale.image" -}}
{{- $image := index . 0 -}}
{{- $appVersion := index . 1 -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default $appVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Namespace for optional monitoring objects. */}}
{{- define "taskscale.monitoringNamespace" -}}
{{- default .root.Release.Namespace .namespace -}}
{{- end -}}

{{- define "taskscale.examples.redisName" -}}
{{- printf "%s-redis" (include "taskscale.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskscale.examples.workerName" -}}
{{- printf "%s-example-worker" (include "taskscale.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskscale.examples.redisUrl" -}}
{{- if .Values.examples.redisUrl -}}
{{- .Values.examples.redisUrl -}}
{{- else if .Values.examples.redis.enabled -}}
{{- printf "redis://%s.%s.svc:6379/0" (include "taskscale.examples.redisName" .) .Release.Namespace -}}
{{- else -}}
{{- required "examples.redisUrl is required when examples.redis.enabled is false" .Values.examples.redisUrl -}}
{{- end -}}
{{- end -}}

{{/* The security context every container of this chart runs with. */}}
{{- define "taskscale.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Labels of every object of a component other than the controller; call
with (dict "root" . "component" "scheduler"). */}}
{{- define "taskscale.componentLabels" -}}
helm.sh/chart: {{ include "taskscale.chart" .root }}
{{ include "taskscale.componentSelectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: taskscale
{{- end -}}

{{- define "taskscale.componentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "taskscale.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "taskscale.scheduler.name" -}}
{{- printf "%s-scheduler" (include "taskscale.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The scheduler's Redis: "url", "secret" or "" (none known: not deployed). */}}
{{- define "taskscale.scheduler.redisSource" -}}
{{- $r := .Values.scheduler.redis -}}
{{- if $r.existingSecret -}}secret
{{- else if $r.url -}}url
{{- else if and .Values.examples.enabled (or .Values.examples.redis.enabled .Values.examples.redisUrl) -}}examples
{{- end -}}
{{- end -}}

{{- define "taskscale.scheduler.keyNamespace" -}}
{{- if .Values.scheduler.redis.namespace -}}
{{- .Values.scheduler.redis.namespace -}}
{{- else if .Values.examples.enabled -}}
{{- .Values.examples.redisNamespace -}}
{{- else -}}
taskscale
{{- end -}}
{{- end -}}

{{- define "taskscale.dashboard.name" -}}
{{- printf "%s-dashboard" (include "taskscale.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskscale.dashboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dashboard
{{- end -}}

{{- define "taskscale.dashboard.labels" -}}
helm.sh/chart: {{ include "taskscale.chart" . }}
{{ include "taskscale.dashboard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taskscale
{{- end -}}
