{{- define "ag.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ag.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "ag.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "ag.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Common labels; call with (dict "root" $ "component" "control-plane"). */}}
{{- define "ag.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{ include "ag.selectorLabels" . }}
{{- end -}}

{{- define "ag.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ag.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "ag.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* True (non-empty) when the control plane runs on PostgreSQL. */}}
{{- define "ag.hasDatabase" -}}
{{- if or .Values.controlPlane.database.url .Values.controlPlane.database.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "ag.controlPlaneHost" -}}
{{- printf "%s-control-plane.%s.svc.%s" (include "ag.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{- define "ag.natsHost" -}}
{{- printf "%s-nats.%s.svc.%s" (include "ag.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/* "true" when clients reach NATS over TLS: certificates provided, or generated for the embedded server. */}}
{{- define "ag.natsTls" -}}
{{- if or .Values.nats.tls.enabled (and .Values.nats.embedded.enabled .Values.nats.embedded.tls) -}}true{{- end -}}
{{- end -}}

{{/* The Secret holding the NATS server certificate's CA (`ca.crt`). */}}
{{- define "ag.natsCaSecret" -}}
{{- if .Values.nats.tls.enabled -}}{{ .Values.nats.tls.caSecret }}{{- else -}}{{ printf "%s-nats-ca" (include "ag.fullname" .) }}{{- end -}}
{{- end -}}

{{/* The Secret holding the embedded server's certificate and key. */}}
{{- define "ag.natsServerSecret" -}}
{{- if .Values.nats.tls.enabled -}}{{ .Values.nats.tls.serverSecret }}{{- else -}}{{ printf "%s-nats-server" (include "ag.fullname" .) }}{{- end -}}
{{- end -}}

{{- define "ag.natsUrl" -}}
{{- if .Values.nats.embedded.enabled -}}
{{- printf "%s://%s:4222" (ternary "tls" "nats" (eq (include "ag.natsTls" .) "true")) (include "ag.natsHost" .) -}}
{{- else -}}
{{- .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* Hosts of the NATS URLs (comma-separated URLs), for NO_PROXY. */}}
{{- define "ag.natsHosts" -}}
{{- $hosts := list -}}
{{- range (splitList "," (include "ag.natsUrl" .)) -}}
{{- $u := urlParse (trim .) -}}
{{- $hosts = append $hosts (index (splitList ":" $u.host) 0) -}}
{{- end -}}
{{- join "," $hosts -}}
{{- end -}}

{{/* The control plane's NATS credentials Secret: the user's, or the one generated with the embedded server. */}}
{{- define "ag.natsAuthSecret" -}}
{{- if .Values.nats.auth.existingSecret -}}
{{- .Values.nats.auth.existingSecret -}}
{{- else if .Values.nats.embedded.enabled -}}
{{- printf "%s-nats-control-plane" (include "ag.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Secret of the sidecars' NATS credentials the chart writes into each governed namespace (embedded NATS). */}}
{{- define "ag.natsClientSecret" -}}
{{- printf "%s-nats-client" (include "ag.fullname" .) -}}
{{- end -}}

{{/*
  The tenant whose NATS credentials the chart writes into a governed namespace (given as
  dict "root" "binding"), empty when it writes none: the namespace's own tenant, else the
  defaults' (an entry `{}` takes its binding from injection.defaults), unless a natsSecret that
  applies there is the user's.
*/}}
{{- define "ag.natsSecretTenant" -}}
{{- $b := default dict .binding -}}
{{- $d := .root.Values.injection.defaults -}}
{{- if and .root.Values.nats.embedded.enabled (not $b.natsSecret) -}}
{{- if $b.tenant }}{{ $b.tenant }}{{ else if not $d.natsSecret }}{{ default "" $d.tenant }}{{ end -}}
{{- end -}}
{{- end -}}

{{/*
  NetworkPolicy peers for the pods (labels `pods`, every pod when empty) of the governed
  namespaces: those labelled for injection, and those listed under injection.namespaces, which
  are governed labelled or not (found by the name label Kubernetes sets on every namespace).
*/}}
{{- define "ag.governedNamespacePeers" -}}
{{- $peers := list (dict "namespaceSelector" (dict "matchLabels" (dict "agent-governance.io/inject" "enabled"))) -}}
{{- with keys .root.Values.injection.namespaces | sortAlpha -}}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchExpressions" (list (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" .)))) -}}
{{- end -}}
{{- if .pods -}}
{{- range $peers }}{{ $_ := set . "podSelector" (dict "matchLabels" $.pods) }}{{ end -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end -}}

{{- define "ag.proxyCaSecret" -}}
{{- default (printf "%s-proxy-ca" (include "ag.fullname" .)) .Values.ca.existingSecret -}}
{{- end -}}

{{/* Tenants of the governed namespaces and the extra ones, sorted and unique. */}}
{{- define "ag.tenants" -}}
{{- $tenants := list -}}
{{- with .Values.injection.defaults.tenant }}{{ $tenants = append $tenants . }}{{ end -}}
{{- range $ns, $b := .Values.injection.namespaces -}}
{{- with $b.tenant }}{{ $tenants = append $tenants . }}{{ end -}}
{{- end -}}
{{- $tenants = concat $tenants .Values.nats.embedded.extraTenants -}}
{{- $tenants | uniq | sortAlpha | join "," -}}
{{- end -}}

{{- define "ag.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "ag.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* SVC_NATS_* settings of the control plane. */}}
{{- define "ag.controlPlaneNatsEnv" -}}
- name: SVC_NATS_URL
  value: {{ include "ag.natsUrl" . | quote }}
{{- with (include "ag.natsAuthSecret" .) }}
- name: SVC_NATS_USER
  valueFrom:
    secretKeyRef: {name: {{ . }}, key: user, optional: true}
- name: SVC_NATS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ . }}, key: password, optional: true}
- name: SVC_NATS_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ . }}, key: token, optional: true}
{{- end }}
{{- if include "ag.natsTls" . }}
- name: SVC_NATS_TLS_CA_FILE
  value: /etc/agent-governance/nats-tls/ca.crt
{{- end }}
{{- end -}}

{{/* Extra SVC_* settings from a map, sorted. */}}
{{- define "ag.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* The injector's template file (control-plane/injector/injection-template.ts), as JSON. */}}
{{- define "ag.injectionTemplate" -}}
{{- $s := .Values.sidecar -}}
{{- $env := list (dict "name" "SVC_NATS_URL" "value" (include "ag.natsUrl" .)) (dict "name" "SVC_LOG_LEVEL" "value" $s.logLevel) (dict "name" "SVC_VERSION" "value" (toString .Chart.AppVersion)) (dict "name" "MALLOC_ARENA_MAX" "value" "2") -}}
{{- range $k, $v := $s.env }}{{ $env = append $env (dict "name" $k "value" (toString $v)) }}{{ end -}}
{{- $sidecar := dict "image" (include "ag.image" .) "imagePullPolicy" .Values.image.pullPolicy "native" $s.native "args" (list "--max-semi-space-size=16" "--heap-growing-percent=100" "--expose-gc" "--disable-sigusr1" "dist/proxy/main.js") "proxyPort" (int $s.proxyPort) "adminPort" (int $s.adminPort) "adminHost" $s.adminHost "env" $env "resources" $s.resources "securityContext" (include "ag.containerSecurityContext" . | fromYaml) "dataSizeLimit" $s.dataSizeLimit -}}
{{- $namespaces := dict -}}
{{- range $ns, $b := .Values.injection.namespaces -}}
{{- $binding := deepCopy (default dict $b) -}}
{{- if include "ag.natsSecretTenant" (dict "root" $ "binding" $b) -}}
{{- $_ := set $binding "natsSecret" (include "ag.natsClientSecret" $) -}}
{{- end -}}
{{- $_ := set $namespaces $ns $binding -}}
{{- end -}}
{{- $noProxy := concat (list (include "ag.controlPlaneHost" .) (printf "%s-control-plane" (include "ag.fullname" .))) (splitList "," (include "ag.natsHosts" .)) $s.noProxy | uniq -}}
{{- $t := dict "sidecar" $sidecar "caSecretName" (include "ag.proxyCaSecret" .) "noProxy" $noProxy "excludedNamespaces" (list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace) "defaults" .Values.injection.defaults "namespaces" $namespaces -}}
{{- if include "ag.natsTls" . }}{{ $_ := set $t "natsTlsSecretName" (include "ag.natsCaSecret" .) }}{{ end -}}
{{- $_ := set $t "metricsTokenSecretName" (printf "%s-sidecar-metrics-token" (include "ag.fullname" .)) -}}
{{- toJson $t -}}
{{- end -}}
