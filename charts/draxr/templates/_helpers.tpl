{{/* The release's base name: FULLNAME-autoscaler, FULLNAME-scheduler, ... */}}
{{- define "draxr.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "autoscaler"). */}}
{{- define "draxr.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: draxr
{{ include "draxr.selectorLabels" . }}
{{- end -}}

{{- define "draxr.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "draxr-%s" .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end -}}

{{/* REGISTRY/REPOSITORY:TAG of a part; call with (dict "ctx" $ "image" .Values.autoscaler.image). */}}
{{- define "draxr.image" -}}
{{- $tag := .image.tag | default .ctx.Values.image.tag | default .ctx.Chart.AppVersion -}}
{{- if .ctx.Values.image.registry -}}
{{- printf "%s/%s:%s" .ctx.Values.image.registry .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "draxr.autoscaler.name" -}}{{ include "draxr.fullname" . }}-autoscaler{{- end -}}
{{- define "draxr.scheduler.name" -}}{{ include "draxr.fullname" . }}-scheduler{{- end -}}
{{- define "draxr.exampleDriver.name" -}}{{ include "draxr.fullname" . }}-example-driver{{- end -}}

{{- define "draxr.autoscaler.serviceAccountName" -}}
{{- .Values.autoscaler.serviceAccount.name | default (include "draxr.autoscaler.name" .) -}}
{{- end -}}
{{- define "draxr.scheduler.serviceAccountName" -}}
{{- .Values.scheduler.serviceAccount.name | default (include "draxr.scheduler.name" .) -}}
{{- end -}}
{{- define "draxr.exampleDriver.serviceAccountName" -}}
{{- .Values.exampleDriver.serviceAccount.name | default (include "draxr.exampleDriver.name" .) -}}
{{- end -}}

{{/* The scheduler's ConfigMap, read by draxr-scheduler and by the autoscaler's simulations. */}}
{{- define "draxr.schedulerConfig.name" -}}{{ include "draxr.fullname" . }}-scheduler-config{{- end -}}

{{/* The autoscaler's status ConfigMap and lease names: flags and Role agree. */}}
{{- define "draxr.autoscaler.statusConfigMap" -}}
{{- $v := index .Values.autoscaler.extraArgs "status-config-map-name" -}}
{{- if not (kindIs "invalid" $v) -}}{{ $v }}
{{- else if index .Values.autoscaler.extraArgs "dry-run" -}}draxr-autoscaler-dry-run-status
{{- else -}}cluster-autoscaler-status{{- end -}}
{{- end -}}
{{- define "draxr.autoscaler.leaseName" -}}
{{- $v := index .Values.autoscaler.extraArgs "leader-elect-resource-name" -}}
{{- if $v -}}{{ $v }}
{{- else if index .Values.autoscaler.extraArgs "dry-run" -}}draxr-autoscaler-dry-run
{{- else -}}draxr-autoscaler{{- end -}}
{{- end -}}
{{- define "draxr.autoscaler.port" -}}
{{- $addr := index .Values.autoscaler.extraArgs "address" | default ":8085" | toString -}}
{{- regexFind "[0-9]+$" $addr | default "8085" -}}
{{- end -}}
