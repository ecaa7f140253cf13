{{/*
Names and labels shared by the templates.
*/}}

{{/* The chart's name: nameOverride, else the chart name (NVIDIA's helper). */}}
{{- define "gpu-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name, as NVIDIA's helper makes it: fullnameOverride; else the release
name when it already contains the name (nameOverride or the chart name); else
"<release>-<name>". Names users and NVIDIA's docs address (the Deployment and Service
`gpu-operator`) do not depend on it. */}}
{{- define "gpu-operator.fullname" -}}
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

{{/* Restores the CRD's types in .Values, in place, for the paths of gpu-operator.valueTypes
(generated): booleans given as "true"/"false", integers given as digit strings, and numbers given
for values NVIDIA's templates quote (versions, maxUnavailable). Idempotent; every template that
reads .Values includes it first, whatever order Helm renders them in. */}}
{{- define "gpu-operator.normalise" -}}
{{- $root := . -}}
{{- $types := include "gpu-operator.valueTypes" . | fromYaml -}}
{{- range $kind, $paths := $types -}}
{{- range $path := $paths -}}
{{- $keys := splitList "." $path -}}
{{- $parent := $root.Values -}}
{{- range $key := initial $keys -}}
{{- if kindIs "map" $parent -}}
{{- $parent = index $parent $key -}}
{{- end -}}
{{- end -}}
{{- $last := last $keys -}}
{{- if and (kindIs "map" $parent) (hasKey $parent $last) -}}
{{- $value := index $parent $last -}}
{{- if and (eq $kind "booleans") (kindIs "string" $value) -}}
{{- $_ := set $parent $last (eq $value "true") -}}
{{- else if and (eq $kind "integers") (kindIs "string" $value) -}}
{{- $_ := set $parent $last (atoi $value) -}}
{{- else if and (eq $kind "strings") (or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value)) -}}
{{- $_ := set $parent $last (toString $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpu-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object the chart renders. */}}
{{- define "gpu-operator.labels" -}}
helm.sh/chart: {{ include "gpu-operator.chart" . }}
app.kubernetes.io/name: {{ include "gpu-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of the operator's pods (NVIDIA's `app` label included). */}}
{{- define "gpu-operator.selectorLabels" -}}
{{ include "gpu-operator.componentLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The operator's own labels besides gpu-operator.labels (which has the instance label): for
metadata that carries both, so no key appears twice. */}}
{{- define "gpu-operator.componentLabels" -}}
app: gpu-operator
app.kubernetes.io/component: gpu-operator
{{- end -}}

{{/* An image reference from a values section: repository/image:version, the version defaulting
to the chart's appVersion; a sha256 digest is joined with "@". */}}
{{- define "gpu-operator.image" -}}
{{- $section := index . 0 -}}
{{- $appVersion := index . 1 -}}
{{- $version := $section.version | default $appVersion | toString -}}
{{- $separator := ternary "@" ":" (hasPrefix "sha256:" $version) -}}
{{- if $section.repository -}}
{{- printf "%s/%s%s%s" $section.repository $section.image $separator $version -}}
{{- else -}}
{{- printf "%s%s%s" $section.image $separator $version -}}
{{- end -}}
{{- end -}}

{{/* "true" when the values name NVIDIA's own operator image: operator.repository nvcr.io/nvidia
and operator.image gpu-operator (or unset), whatever the tag, as every values file written for
NVIDIA's chart does. To a user switching charts they mean "the operator", so they stand for this
operator's image (gpu-operator.operatorImage); the install notes say so. */}}
{{- define "gpu-operator.nvidiaOperatorCoordinates" -}}
{{- $operator := .Values.operator -}}
{{- if and (eq (toString ($operator.repository | default "")) "nvcr.io/nvidia") (eq (toString ($operator.image | default "gpu-operator")) "gpu-operator") -}}
true
{{- end -}}
{{- end -}}

{{/* The operator's image (its Deployment, the discovery agent, the hook Jobs): from operator.*,
or this operator's image at the chart's appVersion where the values name NVIDIA's operator
(gpu-operator.nvidiaOperatorCoordinates). The repository is values.yaml's default (Helm gives
templates no access to the chart's own values.yaml; a test renders both and compares). */}}
{{- define "gpu-operator.operatorImage" -}}
{{- if include "gpu-operator.nvidiaOperatorCoordinates" . -}}
{{- include "gpu-operator.image" (list (dict "repository" "ghcr.io/gpu-operator-rs" "image" "gpu-operator") .Chart.AppVersion) -}}
{{- else -}}
{{- include "gpu-operator.image" (list .Values.operator .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* A ClusterPolicy section from a values dict: empty strings, lists and maps are left out (the
CRD's defaults apply); booleans and numbers are always kept. */}}
{{- define "gpu-operator.section" -}}
{{- $out := dict -}}
{{- range $key, $value := . -}}
{{- if or (kindIs "bool" $value) (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value) (not (empty $value)) -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The operator's ClusterRole/ClusterRoleBinding name. */}}
{{- define "gpu-operator.clusterRoleName" -}}
{{- include "gpu-operator.fullname" . -}}
{{- end -}}

{{/* The securityContext of the operator's containers and hook Jobs. */}}
{{- define "gpu-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The names of the ClusterRoles and ClusterRoleBindings the operator writes for its operands
(NVIDIA's names). */}}
{{- define "gpu-operator.operandClusterRoles" -}}
- "nvidia-driver"
- "nvidia-device-plugin"
- "nvidia-device-plugin-mps-control-daemon"
- "nvidia-gpu-feature-discovery"
- "nvidia-mig-manager"
- "nvidia-operator-validator"
- "nvidia-node-status-exporter"
- "nvidia-dcgm-exporter-read-pods"
- "nvidia-dcgm-exporter-dra-read-pods"
- "nvidia-vgpu-manager"
- "nvidia-sandbox-validator"
- "nvidia-vfio-manager"
- "nvidia-vgpu-device-manager"
- "nvidia-sandbox-device-plugin"
- "nvidia-kata-sandbox-device-plugin"
- "nvidia-cc-manager"
- "nvidia-dra-driver-kubeletplugin"
- "nvidia-dra-driver-controller"
- "compute-domain-daemon"
{{- end -}}

{{/* The operator's image fallbacks (the *_IMAGE variables it reads), from the values of every
component that has an image; components without a version (vgpuManager by default) get none. */}}
{{- define "gpu-operator.imageEnv" -}}
{{- $v := .Values -}}
{{- $env := list
  (list "DRIVER_IMAGE" $v.driver)
  (list "DRIVER_MANAGER_IMAGE" $v.driver.manager)
  (list "CONTAINER_TOOLKIT_IMAGE" $v.toolkit)
  (list "DEVICE_PLUGIN_IMAGE" $v.devicePlugin)
  (list "DCGM_IMAGE" $v.dcgm)
  (list "DCGM_EXPORTER_IMAGE" $v.dcgmExporter)
  (list "GFD_IMAGE" $v.gfd)
  (list "VALIDATOR_IMAGE" (merge (deepCopy $v.validator) (dict "version" .Chart.AppVersion)))
  (list "MIG_MANAGER_IMAGE" $v.migManager)
  (list "GDS_IMAGE" $v.gds)
  (list "GDRCOPY_IMAGE" $v.gdrcopy)
  (list "VFIO_MANAGER_IMAGE" $v.vfioManager)
  (list "SANDBOX_DEVICE_PLUGIN_IMAGE" $v.sandboxDevicePlugin)
  (list "VGPU_MANAGER_IMAGE" $v.vgpuManager)
  (list "VGPU_DEVICE_MANAGER_IMAGE" $v.vgpuDeviceManager)
  (list "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE" $v.kataSandboxDevicePlugin)
  (list "CC_MANAGER_IMAGE" $v.ccManager)
  (list "DRA_DRIVER_IMAGE" $v.draDriver)
-}}
{{- range $env }}
{{- $section := index . 1 }}
{{- if and $section.repository $section.image $section.version }}
- name: {{ index . 0 }}
  value: {{ include "gpu-operator.image" (list $section "") | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A hook Job running the operator binary with `args` under ServiceAccount `account`:
(list $ name account hookEvents args). */}}
{{- define "gpu-operator.hookJob" -}}
{{- $ := index . 0 -}}
{{- $name := index . 1 -}}
{{- $events := index . 2 -}}
{{- $args := index . 3 -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "gpu-operator.labels" $ | nindent 4 }}
  annotations:
    helm.sh/hook: {{ $events }}
    helm.sh/hook-weight: "1"
    helm.sh/hook-delete-policy: hook-succeeded,before-hook-creation
spec:
  backoffLimit: 3
  ttlSecondsAfterFinished: 600
  template:
    metadata:
      name: {{ $name }}
      labels:
        app.kubernetes.io/component: {{ $name }}
        app.kubernetes.io/instance: {{ $.Release.Name }}
    spec:
      serviceAccountName: {{ $name }}
      restartPolicy: OnFailure
      {{- with $.Values.operator.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $.Values.operator.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      {{- with $.Values.operator.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $.Values.operator.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: {{ $name }}
          image: {{ include "gpu-operator.operatorImage" $ | quote }}
          imagePullPolicy: {{ $.Values.operator.imagePullPolicy }}
          args: {{ toJson $args }}
          securityContext:
            {{- include "gpu-operator.containerSecurityContext" $ | nindent 12 }}
{{- end -}}

{{/* The ServiceAccount, ClusterRole and ClusterRoleBinding of a hook Job, created before it
(weight 0) and deleted after it succeeds: (list $ name hookEvents rules). */}}
{{- define "gpu-operator.hookRbac" -}}
{{- $ := index . 0 -}}
{{- $name := index . 1 -}}
{{- $events := index . 2 -}}
{{- $rules := index . 3 -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "gpu-operator.labels" $ | nindent 4 }}
  annotations:
    helm.sh/hook: {{ $events }}
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: hook-succeeded,before-hook-creation
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "gpu-operator.labels" $ | nindent 4 }}
  annotations:
    helm.sh/hook: {{ $events }}
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: hook-succeeded,before-hook-creation
rules:
  {{- $rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "gpu-operator.labels" $ | nindent 4 }}
  annotations:
    helm.sh/hook: {{ $events }}
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: hook-succeeded,before-hook-creation
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $.Release.Namespace }}
{{- end -}}
