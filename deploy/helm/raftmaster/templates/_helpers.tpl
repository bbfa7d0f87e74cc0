{{/* The chart's name, at most 63 characters. */}}
{{- define "raftmaster.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name: the release name when it contains the chart's
name, else RELEASE-raftmaster. It names the StatefulSet and the headless
Service, so pods are FULLNAME-0, FULLNAME-1, ... It leaves room for the
-api suffix and a pod ordinal within 63 characters.
*/}}
{{- define "raftmaster.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "raftmaster.selectorLabels" -}}
app.kubernetes.io/name: {{ include "raftmaster.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "raftmaster.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "raftmaster.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The fully qualified domain of the headless Service, with the pod's namespace as $(POD_NAMESPACE). */}}
{{- define "raftmaster.peerDomain" -}}
{{ include "raftmaster.fullname" . }}.$(POD_NAMESPACE).svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/* The founding members' API addresses: pods 0 .. bootstrapExpect-1. */}}
{{- define "raftmaster.founders" -}}
{{- $fullname := include "raftmaster.fullname" . -}}
{{- $domain := include "raftmaster.peerDomain" . -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.bootstrapExpect) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s:%d" $fullname $i $domain (int $.Values.ports.http)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}

{{/* http or https, as the API serves. */}}
{{- define "raftmaster.scheme" -}}
{{- if .Values.tls.existingSecret }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* Refuse values that cannot work. */}}
{{- define "raftmaster.validate" -}}
{{- if lt (int .Values.bootstrapExpect) 1 -}}
{{- fail "bootstrapExpect must be at least 1: the number of founding members" -}}
{{- end -}}
{{- if lt (int .Values.replicas) (int .Values.bootstrapExpect) -}}
{{- fail (printf "replicas (%d) must be at least bootstrapExpect (%d): pods 0..%d are the founding members" (int .Values.replicas) (int .Values.bootstrapExpect) (sub (int .Values.bootstrapExpect) 1)) -}}
{{- end -}}
{{- if and .Values.dataset.existingClaim .Values.dataset.hostPath -}}
{{- fail "dataset: set existingClaim or hostPath, not both" -}}
{{- end -}}
{{- if not (has .Values.podAntiAffinity (list "soft" "hard" "")) -}}
{{- fail (printf "podAntiAffinity %q: want soft, hard or \"\"" .Values.podAntiAffinity) -}}
{{- end -}}
{{- end -}}


{{/* Whether Raft runs over a cluster key: neither TLS certificates nor insecure. */}}
{{- define "raftmaster.useClusterKey" -}}
{{- if and (not .Values.tls.existingSecret) (not .Values.insecure) }}true{{ end -}}
{{- end -}}

{{/* The Secret that holds the cluster key: the operator's, or the chart's. */}}
{{- define "raftmaster.clusterKeySecret" -}}
{{- .Values.clusterKey.existingSecret | default (printf "%s-cluster-key" (include "raftmaster.fullname" .)) -}}
{{- end -}}
