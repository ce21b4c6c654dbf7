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

{{/* The scheduler's profile name (pods' spec.schedulerName it serves),
after the checks that keep it from being a second default-scheduler. The
autoscaler simulates this profile, so with the scheduler off it is
default-scheduler: the pods kube-scheduler places. */}}
{{- define "draxr.scheduler.profileName" -}}
{{- $s := .Values.scheduler -}}
{{- if not $s.enabled -}}
{{- if $s.replaceKubeScheduler -}}
{{- fail "scheduler.replaceKubeScheduler: true with scheduler.enabled: false would leave the cluster without a scheduler once kube-scheduler is stopped; set scheduler.enabled: true" -}}
{{- end -}}
default-scheduler
{{- else if $s.replaceKubeScheduler -}}
{{- if and $s.schedulerName (ne $s.schedulerName "default-scheduler") -}}
{{- fail (printf "scheduler.replaceKubeScheduler: true takes over kube-scheduler's pods (default-scheduler), not %q; leave scheduler.schedulerName empty" $s.schedulerName) -}}
{{- end -}}
default-scheduler
{{- else if eq $s.schedulerName "default-scheduler" -}}
{{- fail "scheduler.schedulerName: default-scheduler is kube-scheduler's name, and two active schedulers would place the same pods; to replace kube-scheduler set scheduler.replaceKubeScheduler: true and stop kube-scheduler (docs/chart.md), or keep a name of its own (empty: draxr-scheduler)" -}}
{{- else -}}
{{- $s.schedulerName | default "draxr-scheduler" -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's leader lease: kube-scheduler's own under the cut-over,
so that exactly one of the two is active; else one of its own. */}}
{{- define "draxr.scheduler.leaseNamespace" -}}
{{- if .Values.scheduler.replaceKubeScheduler -}}kube-system{{- else -}}{{ .Release.Namespace }}{{- end -}}
{{- end -}}
{{- define "draxr.scheduler.leaseName" -}}
{{- if .Values.scheduler.replaceKubeScheduler -}}kube-scheduler{{- else -}}{{ include "draxr.scheduler.name" . }}{{- end -}}
{{- end -}}

{{/* A PodDisruptionBudget as CA's chart renders it; call with (dict "ctx" $
"component" "scheduler" "name" NAME "pdb" .Values.scheduler.podDisruptionBudget). */}}
{{- define "draxr.pdb" -}}
{{- $pdb := .pdb -}}
{{- if $pdb }}
{{- $min := not (kindIs "invalid" $pdb.minAvailable) }}
{{- $max := not (kindIs "invalid" $pdb.maxUnavailable) }}
{{- if and $min $max }}
{{- fail (printf "%s.podDisruptionBudget: set minAvailable or maxUnavailable, not both (maxUnavailable is 1 by default: set it to null)" .component) }}
{{- end }}
{{- if or $min $max }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "draxr.labels" (dict "ctx" .ctx "component" .component) | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- include "draxr.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
  {{- if $min }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The autoscaler's cloud provider: autoscaler.cloudProvider, or CA's
top-level cloudProvider, else clusterapi (draxr's provider for real
clusters; local is for tests and demos). */}}
{{- /* "true" when the autoscaler serves ProvisioningRequests
(extraArgs enable-provisioning-requests, as in CA's chart). */}}
{{- define "draxr.autoscaler.provisioningRequests" -}}
{{- $args := .Values.autoscaler.extraArgs -}}
{{- if hasKey $args "enable-provisioning-requests" -}}
{{- $v := index $args "enable-provisioning-requests" -}}
{{- if or (kindIs "invalid" $v) (eq (toString $v) "true") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- /* "true" when the autoscaler serves CapacityBuffers (extraArgs
capacity-buffer-controller-enabled or -pod-injection-enabled). */}}
{{- define "draxr.autoscaler.capacityBuffers" -}}
{{- $args := .Values.autoscaler.extraArgs -}}
{{- range $k := list "capacity-buffer-controller-enabled" "capacity-buffer-pod-injection-enabled" -}}
{{- if hasKey $args $k -}}
{{- $v := index $args $k -}}
{{- if or (kindIs "invalid" $v) (eq (toString $v) "true") -}}true{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "draxr.autoscaler.provider" -}}
{{- $mine := .Values.autoscaler.cloudProvider -}}
{{- $ca := .Values.cloudProvider -}}
{{- if and $mine $ca (ne $mine $ca) -}}
{{- fail (printf "cloudProvider %q (the Cluster Autoscaler chart's name) and autoscaler.cloudProvider %q disagree; set one" $ca $mine) -}}
{{- end -}}
{{- $p := $mine | default $ca | default "clusterapi" -}}
{{- if not (has $p (list "local" "kwok" "clusterapi" "externalgrpc")) -}}
{{- fail (printf "autoscaler.cloudProvider: %q is not a provider draxr has (local, kwok, clusterapi, externalgrpc)" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* CA's clusterAPIMode (WORKLOAD-MANAGEMENT: how each cluster is
reached), checked; incluster-incluster for the local provider. */}}
{{- define "draxr.autoscaler.clusterAPIMode" -}}
{{- $mode := .Values.clusterAPIMode | default "incluster-incluster" -}}
{{- $modes := list "incluster-incluster" "incluster-kubeconfig" "kubeconfig-incluster" "kubeconfig-kubeconfig" "single-kubeconfig" -}}
{{- if not (has $mode $modes) -}}
{{- fail (printf "clusterAPIMode: %q is not one of the Cluster Autoscaler chart's modes (%s)" $mode (join ", " $modes)) -}}
{{- end -}}
{{- if and (ne $mode "incluster-incluster") (ne (include "draxr.autoscaler.provider" .) "clusterapi") -}}
{{- fail (printf "clusterAPIMode: %s needs cloudProvider clusterapi" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* Which clusters the in-cluster identity (the chart's ServiceAccount)
reaches, and so which RBAC the chart grants there: "workload" (nodes,
pods, devices, status, lease) and/or "management" (Cluster API objects). */}}
{{- define "draxr.autoscaler.inCluster" -}}
{{- $mode := include "draxr.autoscaler.clusterAPIMode" . -}}
{{- $out := list -}}
{{- if hasPrefix "incluster-" $mode -}}{{- $out = append $out "workload" -}}{{- end -}}
{{- if hasSuffix "-incluster" $mode -}}{{- $out = append $out "management" -}}{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* --node-group-auto-discovery specs: autoscaler.clusterAPI.autoDiscovery,
then one from CA's autoDiscovery values (clusterName, namespace, labels). */}}
{{- define "draxr.autoscaler.autoDiscovery" -}}
{{- $specs := list -}}
{{- range .Values.autoscaler.clusterAPI.autoDiscovery -}}{{- $specs = append $specs . -}}{{- end -}}
{{- $ca := .Values.autoDiscovery | default dict -}}
{{- $parts := list -}}
{{- with $ca.clusterName -}}{{- $parts = append $parts (printf "clusterName=%s" .) -}}{{- end -}}
{{- with $ca.namespace -}}{{- $parts = append $parts (printf "namespace=%s" .) -}}{{- end -}}
{{- range $ca.labels -}}
{{- range $k, $v := . -}}{{- $parts = append $parts (printf "%s=%s" $k (toString $v)) -}}{{- end -}}
{{- end -}}
{{- if $parts -}}
{{- if ne (include "draxr.autoscaler.provider" .) "clusterapi" -}}
{{- fail "autoDiscovery (the Cluster Autoscaler chart's values) finds Cluster API node groups: it needs cloudProvider clusterapi" -}}
{{- end -}}
{{- $specs = append $specs (printf "clusterapi:%s" (join "," $parts)) -}}
{{- end -}}
{{- toJson $specs -}}
{{- end -}}

{{/* Namespaces whose ConfigMaps the clusterapi provider may read (template
ResourceSlices named by draxr.dev/template-resource-slices-configmap):
autoscaler.clusterAPI.configMapNamespaces, else the auto-discovery specs'
namespace= values. */}}
{{- define "draxr.autoscaler.configMapNamespaces" -}}
{{- $ns := .Values.autoscaler.clusterAPI.configMapNamespaces | default list -}}
{{- if not $ns -}}
{{- range include "draxr.autoscaler.autoDiscovery" . | fromJsonArray -}}
{{- with regexFind "namespace=[^,]+" . -}}{{- $ns = append $ns (trimPrefix "namespace=" .) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson ($ns | uniq) -}}
{{- end -}}
