{{/*
Expand the name of the chart.
*/}}
{{- define "elicitd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name.
We truncate at 63 chars because some Kubernetes name fields are limited to this (by the DNS naming spec).
If release name contains chart name it will be used as a full name.
*/}}
{{- define "elicitd.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "elicitd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels (every object of the release).
*/}}
{{- define "elicitd.labels" -}}
helm.sh/chart: {{ include "elicitd.chart" . }}
{{ include "elicitd.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels shared by every component of the release.
*/}}
{{- define "elicitd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "elicitd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of the elicitd server pods. The component label keeps them apart from the
embedded Redis pods, which share name and instance.
*/}}
{{- define "elicitd.server.selectorLabels" -}}
{{ include "elicitd.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "elicitd.server.labels" -}}
{{ include "elicitd.labels" . }}
app.kubernetes.io/component: server
{{- end }}

{{/*
Create the name of the service account to use.
*/}}
{{- define "elicitd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "elicitd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The server image reference: repository@digest when a digest is given, else repository:tag
(tag defaults to the chart's appVersion).
*/}}
{{- define "elicitd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
Name of the Secret holding ELICITD_REDIS_URL / ELICITD_API_KEYS / ELICITD_SECRET (and
REDIS_PASSWORD with the embedded Redis): the user's existingSecret, else the one this chart creates.
*/}}
{{- define "elicitd.secretName" -}}
{{- default (include "elicitd.fullname" .) .Values.existingSecret }}
{{- end }}

{{/*
Fully qualified DNS name of the elicitd Service.
*/}}
{{- define "elicitd.serviceFQDN" -}}
{{- printf "%s.%s.svc.%s" (include "elicitd.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/*
Embedded Redis: object names, labels and the in-cluster address.
*/}}
{{- define "elicitd.redis.fullname" -}}
{{- printf "%s-redis" (include "elicitd.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "elicitd.redis.selectorLabels" -}}
{{ include "elicitd.selectorLabels" . }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "elicitd.redis.labels" -}}
{{ include "elicitd.labels" . }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "elicitd.redis.hostPort" -}}
{{- printf "%s.%s.svc.%s:6379" (include "elicitd.redis.fullname" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/*
Where the Redis URL comes from, after checking the values make sense. One of:
  embedded        the chart's own Redis StatefulSet (URL built from REDIS_PASSWORD in the Secret)
  inMemory        no Redis at all: single-process demo
  existingSecret  ELICITD_REDIS_URL from the user's Secret
  url             ELICITD_REDIS_URL from redis.url, stored in the chart's Secret
Rendering fails with an explanation for anything else.
*/}}
{{- define "elicitd.redisMode" -}}
{{- $r := .Values.redis }}
{{- if and $r.embedded.enabled $r.url }}
{{- fail "redis.url and redis.embedded.enabled are both set: choose one (redis.url for an external Redis, redis.embedded.enabled for the chart's own)." }}
{{- end }}
{{- if and $r.inMemory (or $r.url $r.embedded.enabled) }}
{{- fail "redis.inMemory cannot be combined with redis.url or redis.embedded.enabled: the in-memory store replaces Redis entirely." }}
{{- end }}
{{- if and .Values.existingSecret $r.url }}
{{- fail "redis.url is ignored when existingSecret is set: put ELICITD_REDIS_URL into that Secret instead, and unset redis.url." }}
{{- end }}
{{- if $r.embedded.enabled }}
{{- print "embedded" }}
{{- else if $r.inMemory }}
{{- if or (ne (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- fail "redis.inMemory keeps all state inside one process, so it only works with replicaCount: 1 and autoscaling.enabled: false. For more replicas set redis.url, existingSecret or redis.embedded.enabled." }}
{{- end }}
{{- print "inMemory" }}
{{- else if .Values.existingSecret }}
{{- print "existingSecret" }}
{{- else if $r.url }}
{{- print "url" }}
{{- else }}
{{- fail "\n\nelicitd needs a shared Redis: replicas keep no state of their own, and the in-memory store is single-process only. Set one of:\n  --set redis.url=redis://my-redis:6379        (external Redis; rediss:// for TLS, redis-cluster:// and redis-sentinel:// too)\n  --set existingSecret=my-secret               (a Secret holding ELICITD_REDIS_URL, ELICITD_API_KEYS, ELICITD_SECRET)\n  --set redis.embedded.enabled=true            (a single-node Redis StatefulSet from this chart)\nFor a throw-away single-replica demo: --set replicaCount=1 --set redis.inMemory=true" }}
{{- end }}
{{- end }}

{{/*
Checks across values that the JSON schema cannot express. Included by the Deployment, so every
render runs them.
*/}}
{{- define "elicitd.validate" -}}
{{- $mode := include "elicitd.redisMode" . }}
{{- if and (eq $mode "embedded") (gt (int .Values.config.redisReplicaAcks) 0) }}
{{- fail (printf "config.redisReplicaAcks is %d, but the embedded Redis is a single node without replicas: every create, decision and cancel would answer 503. Keep it 0 with redis.embedded.enabled, or use a Redis with replicas (Sentinel or Cluster) via redis.url." (int .Values.config.redisReplicaAcks)) }}
{{- end }}
{{- if and .Values.existingSecret (or .Values.apiKeys .Values.secret) }}
{{- fail "apiKeys and secret are ignored when existingSecret is set: put ELICITD_API_KEYS and ELICITD_SECRET into that Secret instead, and unset them here." }}
{{- end }}
{{- if and .Values.existingSecret (or .Values.webhooks.endpoints .Values.webhooks.secrets) }}
{{- fail "webhooks.endpoints and webhooks.secrets are ignored when existingSecret is set: put ELICITD_WEBHOOKS and ELICITD_WEBHOOK_SECRETS into that Secret instead, and unset them here." }}
{{- end }}
{{- range $tenant, $url := .Values.webhooks.endpoints }}
{{- if not (hasKey $.Values.webhooks.secrets $tenant) }}
{{- fail (printf "webhooks.endpoints has tenant %q but webhooks.secrets has no signing secret for it: the server refuses to start (exit code 2). Add webhooks.secrets.%s: [whsec_...]." $tenant $tenant) }}
{{- end }}
{{- end }}
{{- if and (eq $mode "inMemory") (eq (toString .Values.config.deliveryWorker) "false") }}
{{- fail "config.deliveryWorker is false with redis.inMemory: the in-memory store is not shared, so no other deployment can run the delivery worker and no webhook or notification would ever be sent. Keep config.deliveryWorker true." }}
{{- end }}
{{- $n := .Values.notifications }}
{{- if and .Values.existingSecret (or $n.smtp.url $n.slack) }}
{{- fail "notifications.smtp.url and notifications.slack are ignored when existingSecret is set: put ELICITD_SMTP_URL and ELICITD_NOTIFY_SLACK into that Secret instead, and unset them here." }}
{{- end }}
{{- if and $n.smtp.url (not $n.smtp.from) }}
{{- fail "notifications.smtp.url is set but notifications.smtp.from is empty: the server refuses to start without a sender (exit code 2). Set notifications.smtp.from, e.g. \"Approvals <approvals@example.com>\"." }}
{{- end }}
{{- if and $n.email (not $n.smtp.url) (not .Values.existingSecret) }}
{{- fail (printf "notifications.email sets default recipients (tenants %s) but notifications.smtp.url is empty: the server refuses to start without an SMTP server (exit code 2). Set notifications.smtp.url and notifications.smtp.from, or unset notifications.email." (keys $n.email | sortAlpha | join ", ")) }}
{{- end }}
{{- if and $n.linksByNotification (not $n.smtp.url) (not .Values.existingSecret) }}
{{- fail (printf "notifications.linksByNotification lists tenants (%s) whose review links go only by email, but notifications.smtp.url is empty: no link could ever be sent, and the server refuses to start without an SMTP server (exit code 2). Set notifications.smtp.url and notifications.smtp.from, or unset notifications.linksByNotification." (join ", " $n.linksByNotification)) }}
{{- end }}
{{- /* The server refuses a lease that does not outlast one attempt: a live attempt would lose its delivery to another replica. */}}
{{- if le (int .Values.config.webhookLeaseSecs) (int .Values.config.webhookTimeoutSecs) }}
{{- fail (printf "config.webhookLeaseSecs (%d) must be longer than config.webhookTimeoutSecs (%d): a replica holds a delivery for the lease while it waits up to the timeout for the receiver, and the server refuses to start otherwise." (int .Values.config.webhookLeaseSecs) (int .Values.config.webhookTimeoutSecs)) }}
{{- end }}
{{- /* On SIGTERM parked awaits are answered at once and in-flight requests drain for up to 30 s,
so the grace period needs preStop + a few seconds; preStop + 30 s + a few is the useful maximum. */}}
{{- $grace := int .Values.shutdown.terminationGracePeriodSeconds }}
{{- $floor := add .Values.shutdown.preStopSleepSeconds 5 }}
{{- if lt $grace (int $floor) }}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%d) must exceed shutdown.preStopSleepSeconds by a few seconds (at least preStopSleepSeconds + 5 = %d), or the kubelet kills pods before they drain in-flight requests; preStopSleepSeconds + 30 (the server's drain cap) + a few seconds never cuts a drain off." $grace (int $floor)) }}
{{- end }}
{{- with .Values.metrics.separatePort }}
{{- if or (eq (int .) (int $.Values.service.targetPort)) (eq (int .) (int $.Values.service.port)) }}
{{- fail (printf "metrics.separatePort (%d) must differ from service.targetPort and service.port: it is a second listener and a second Service port. Leave it null to serve /metrics on the main port." (int .)) }}
{{- end }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.hosts) }}
{{- fail "ingress.enabled is true but ingress.hosts is empty: list at least one host." }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas." }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (ne (toString .Values.podDisruptionBudget.minAvailable) "") (ne (toString .Values.podDisruptionBudget.maxUnavailable) "") }}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to \"\")." }}
{{- end }}
{{- end }}

{{/*
Base of every reviewUrl (ELICITD_PUBLIC_URL): config.publicUrl, else https://<first ingress host>
when the ingress is enabled, else empty (the variable is then not set and the server uses its
default, http://<listen>, which reviewers outside the cluster cannot open).
*/}}
{{- define "elicitd.publicUrl" -}}
{{- if .Values.config.publicUrl }}
{{- .Values.config.publicUrl | trimSuffix "/" }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- printf "https://%s" (first .Values.ingress.hosts).host }}
{{- end }}
{{- end }}

{{/*
Host header allow-list of the MCP endpoint (ELICITD_MCP_ALLOWED_HOSTS), comma-separated: the
Service under every in-cluster name, loopback, every ingress host, the host of the public URL and
config.mcpAllowedHosts.
*/}}
{{- define "elicitd.mcpAllowedHosts" -}}
{{- $svc := include "elicitd.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (include "elicitd.serviceFQDN" .) "localhost" "127.0.0.1" }}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- $hosts = append $hosts .host }}
{{- end }}
{{- end }}
{{- with include "elicitd.publicUrl" . }}
{{- $hosts = append $hosts (regexReplaceAll ":[0-9]+$" (urlParse .).host "") }}
{{- end }}
{{- $hosts = concat $hosts .Values.config.mcpAllowedHosts }}
{{- $hosts | uniq | join "," }}
{{- end }}

{{/*
Effective ELICITD_TRUST_FORWARDED_FOR ("true"/"false"): config.trustForwardedFor when set, else
ingress.enabled. Behind an ingress the pods only see the ingress' address, so without the
X-Forwarded-For entry it appends every reviewer would share one address for the per-address
review brake.
*/}}
{{- define "elicitd.trustForwardedFor" -}}
{{- $v := .Values.config.trustForwardedFor }}
{{- if kindIs "invalid" $v }}
{{- $v = .Values.ingress.enabled }}
{{- end }}
{{- ternary "true" "false" (eq (toString $v) "true") }}
{{- end }}

{{/*
Webhook settings rendered for the server. ELICITD_WEBHOOKS: `tenant=url;...` (tenants sorted);
ELICITD_WEBHOOK_SECRETS: `tenant:whsec_a,whsec_b;...`; both empty when not set.
ELICITD_WEBHOOK_RETRY_SCHEDULE_SECS: the schedule as a string (an integer is one attempt).
*/}}
{{- define "elicitd.webhookEndpoints" -}}
{{- $out := list }}
{{- range $tenant, $url := .Values.webhooks.endpoints }}
{{- $out = append $out (printf "%s=%s" $tenant $url) }}
{{- end }}
{{- join ";" $out }}
{{- end }}

{{- define "elicitd.webhookSecrets" -}}
{{- $out := list }}
{{- range $tenant, $keys := .Values.webhooks.secrets }}
{{- $out = append $out (printf "%s:%s" $tenant (join "," $keys)) }}
{{- end }}
{{- join ";" $out }}
{{- end }}

{{/*
Notification settings rendered for the server (tenants sorted; each empty when not set).
ELICITD_NOTIFY_EMAIL: `tenant=a@x,b@y;...`; ELICITD_NOTIFY_SLACK: `tenant=url;...`;
ELICITD_TENANT_NAMES: `tenant=Name;...`.
*/}}
{{- define "elicitd.notifyEmail" -}}
{{- $out := list }}
{{- range $tenant, $addrs := .Values.notifications.email }}
{{- $out = append $out (printf "%s=%s" $tenant (join "," $addrs)) }}
{{- end }}
{{- join ";" $out }}
{{- end }}

{{- define "elicitd.notifySlack" -}}
{{- $out := list }}
{{- range $tenant, $url := .Values.notifications.slack }}
{{- $out = append $out (printf "%s=%s" $tenant $url) }}
{{- end }}
{{- join ";" $out }}
{{- end }}

{{- define "elicitd.tenantNames" -}}
{{- $out := list }}
{{- range $tenant, $name := .Values.notifications.tenantNames }}
{{- $out = append $out (printf "%s=%s" $tenant $name) }}
{{- end }}
{{- join ";" $out }}
{{- end }}

{{- define "elicitd.webhookRetrySchedule" -}}
{{- $v := .Values.config.webhookRetryScheduleSecs }}
{{- if kindIs "string" $v }}
{{- $v | nospace }}
{{- else }}
{{- $v | int64 | toString }}
{{- end }}
{{- end }}
