//! Runtime configuration: one `Config`, read from flags and `ELICITD_*` variables (SPEC §7) and
//! validated before anything binds. Tests build it directly with [`Config::for_tests`]-style
//! literals, never from the process environment.

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use clap::{Parser, Subcommand, ValueEnum};

use crate::model::Tenant;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Command line and environment of the `elicitd` binary.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "elicitd",
    version,
    about = "Human decisions for AI agents, over MCP and REST"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Address to bind.
    #[arg(long, env = "ELICITD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// `redis://`, `rediss://` (TLS), `redis-cluster://host:port?node=host:port&…` or
    /// `redis-sentinel://host:port?sentinelServiceName=NAME&node=host:port&…` (TLS:
    /// `rediss-cluster://`, `rediss-sentinel://`; credentials as `user:password@`); unset runs
    /// on the in-memory store (one process only).
    #[arg(long, env = "ELICITD_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// Base of `reviewUrl` (scheme://host[:port][/path]); default `http://<listen>`.
    #[arg(long, env = "ELICITD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Comma-separated `tenant:key` pairs; unset makes one random key and prints it once.
    #[arg(long, env = "ELICITD_API_KEYS", hide_env_values = true)]
    pub api_keys: Option<String>,
    /// Redis key prefix (lets several deployments share one Redis).
    #[arg(long, env = "ELICITD_KEY_PREFIX", default_value = "elicitd")]
    pub key_prefix: String,
    /// Default `await` window in seconds when the caller gives no `waitSeconds` (1–60).
    #[arg(long, env = "ELICITD_AWAIT_WINDOW_SECS", default_value_t = 25)]
    pub await_window_secs: u64,
    /// How long records outlive their deadline, in seconds (min 60).
    #[arg(long, env = "ELICITD_RETENTION_SECS", default_value_t = 604_800)]
    pub retention_secs: u64,
    /// Key for CSRF tokens and review-token derivation, shared by all replicas (≥ 32 chars).
    /// Unset: random at start (single replica only).
    #[arg(long, env = "ELICITD_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// `text` or `json`.
    #[arg(long, env = "ELICITD_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Largest `expiresInSeconds` a request may ask for (10–2592000).
    #[arg(long, env = "ELICITD_MAX_EXPIRES_SECS", default_value_t = 86_400)]
    pub max_expires_secs: u64,
    /// Cap on concurrently parked `await` calls on this replica; past it `rate_limited` (429).
    #[arg(long, env = "ELICITD_MAX_PARKED_AWAITS", default_value_t = 10_000)]
    pub max_parked_awaits: usize,
    /// Largest request body in bytes; larger bodies get `payload_too_large` (413).
    #[arg(long, env = "ELICITD_MAX_BODY_BYTES", default_value_t = 1_048_576)]
    pub max_body_bytes: usize,
    /// Serve `/metrics` on this separate address instead of the main listener.
    #[arg(long, env = "ELICITD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Host names `/mcp` accepts in the `Host` header (comma-separated; a `host:port` entry pins
    /// the port). DNS-rebinding protection: the public URL's host, the listen host, localhost,
    /// 127.0.0.1 and ::1 are always allowed; add the names clients use (Service, Ingress).
    #[arg(long, env = "ELICITD_MCP_ALLOWED_HOSTS")]
    pub mcp_allowed_hosts: Option<String>,
    /// Browser origins allowed to call `/mcp` (comma-separated `scheme://host[:port]`); the
    /// public URL's origin always is. Requests without an `Origin` header (server-side MCP
    /// clients) are not affected; any other `Origin` is refused (403).
    #[arg(long, env = "ELICITD_MCP_ALLOWED_ORIGINS")]
    pub mcp_allowed_origins: Option<String>,
    /// Creates per second per tenant on this replica (burst: twice that); 0 = unlimited.
    #[arg(long, env = "ELICITD_CREATE_RATE_PER_SEC", default_value_t = 500)]
    pub create_rate_per_sec: u32,
    /// Wrong review tokens per minute from one address before it is refused for a minute;
    /// 0 = no brake.
    #[arg(long, env = "ELICITD_REVIEW_FAILURES_PER_MIN", default_value_t = 30)]
    pub review_failures_per_min: u32,
    /// Most simultaneous client connections per replica; more wait in the accept backlog.
    #[arg(long, env = "ELICITD_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// HTTP worker threads, each with its own single-threaded runtime, listening socket
    /// (`SO_REUSEPORT`) and Redis connection; 0 = one per available CPU (the cgroup's quota
    /// counts).
    #[arg(long, env = "ELICITD_HTTP_THREADS", default_value_t = 0)]
    pub http_threads: usize,
    /// Seconds a client may take to send its request headers (slow-loris protection).
    #[arg(long, env = "ELICITD_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds a client may take to send a request body.
    #[arg(long, env = "ELICITD_BODY_TIMEOUT_SECS", default_value_t = 30)]
    pub body_timeout_secs: u64,
    /// Take the client address for per-address limits from the last `X-Forwarded-For` entry
    /// (the one your ingress appends). Only behind a trusted proxy.
    #[arg(long, env = "ELICITD_TRUST_FORWARDED_FOR", default_value_t = false)]
    pub trust_forwarded_for: bool,
    /// Number of multiplexed Redis command connections (1–64).
    #[arg(long, env = "ELICITD_REDIS_POOL_SIZE", default_value_t = 4)]
    pub redis_pool_size: usize,
    /// Status reads each read batcher keeps in its client-side cache (Redis `CLIENT TRACKING`;
    /// single Redis and Sentinel), 0–1000000; 0 = off.
    #[arg(long, env = "ELICITD_STATUS_CACHE_ENTRIES", default_value_t = 8192)]
    pub status_cache_entries: usize,
    /// Write new records in the layout of elicitd 0.1 (a review-index key per link, review
    /// links without the id in front, the audit list from the create on), so that replicas of
    /// 0.1 can open every link and extend every audit trail: for the length of a rolling
    /// upgrade from 0.1, then off. Either way every record is read and written correctly.
    #[arg(
        long,
        env = "ELICITD_LEGACY_RECORDS",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub legacy_records: bool,
    /// Replicas that must confirm every state change (create, decide, cancel, result) before it
    /// is answered (Redis `WAIT`); 0 = answer once the primary has it. Past the timeout the
    /// answer is 503 `unavailable`.
    #[arg(long, env = "ELICITD_REDIS_REPLICA_ACKS", default_value_t = 0)]
    pub redis_replica_acks: u32,
    /// How long to wait for those replica confirmations, in milliseconds (1–10000).
    #[arg(long, env = "ELICITD_REDIS_REPLICA_TIMEOUT_MS", default_value_t = 500)]
    pub redis_replica_timeout_ms: u64,
    /// Default webhook endpoint per tenant: `tenant=https://…;tenant2=https://…`. Requests of
    /// that tenant without a `webhookUrl` send their events there.
    #[arg(long, env = "ELICITD_WEBHOOKS")]
    pub webhooks: Option<String>,
    /// Webhook signing secrets per tenant: `tenant:whsec_<base64>;…`, several per tenant
    /// separated by `,` while rotating (each signs every message). A tenant needs one to use
    /// webhooks at all.
    #[arg(long, env = "ELICITD_WEBHOOK_SECRETS", hide_env_values = true)]
    pub webhook_secrets: Option<String>,
    /// Allow webhook targets on loopback, private, link-local and metadata addresses (tests,
    /// private networks you trust). Off: such targets are refused at connect time.
    #[arg(long, env = "ELICITD_WEBHOOK_ALLOW_PRIVATE", default_value_t = false)]
    pub webhook_allow_private: bool,
    /// Seconds between a delivery's attempts, the first usually 0 (comma-separated; the number
    /// of entries is the number of attempts).
    #[arg(
        long,
        env = "ELICITD_WEBHOOK_RETRY_SCHEDULE_SECS",
        default_value = "0,5,300,1800,7200,18000,36000,36000"
    )]
    pub webhook_retry_schedule_secs: String,
    /// Seconds a receiver has to answer one attempt (a 2xx in time = delivered).
    #[arg(long, env = "ELICITD_WEBHOOK_TIMEOUT_SECS", default_value_t = 15)]
    pub webhook_timeout_secs: u64,
    /// Seconds a replica holds a delivery it is attempting; if it dies, another replica takes
    /// the delivery over after this.
    #[arg(long, env = "ELICITD_WEBHOOK_LEASE_SECS", default_value_t = 60)]
    pub webhook_lease_secs: u64,
    /// Attempts in flight at once per endpoint (host) on one replica.
    #[arg(long, env = "ELICITD_WEBHOOK_CONCURRENCY", default_value_t = 8)]
    pub webhook_concurrency: usize,
    /// SMTP server for email notifications: `smtps://host:465` (TLS),
    /// `smtp://host:587?tls=required` (STARTTLS), `smtp://host:25` (no TLS: a relay on the same
    /// host or network only), with `user:password@` (URL-encoded) if it needs them. Without
    /// it, requests cannot ask for email.
    #[arg(long, env = "ELICITD_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// Sender of notification emails: `elicitd@example.com` or `Approvals <elicitd@example.com>`
    /// (required with ELICITD_SMTP_URL; its domain also names the messages' ids).
    #[arg(long, env = "ELICITD_SMTP_FROM")]
    pub smtp_from: Option<String>,
    /// Default email recipients per tenant: `tenant=a@example.com,b@example.com;tenant2=…`
    /// (for requests without `notify.email`).
    #[arg(long, env = "ELICITD_NOTIFY_EMAIL")]
    pub notify_email: Option<String>,
    /// Default Slack incoming webhook per tenant: `tenant=https://hooks.slack.com/…;…` (for
    /// requests without `notify.slackWebhookUrl`).
    #[arg(long, env = "ELICITD_NOTIFY_SLACK", hide_env_values = true)]
    pub notify_slack: Option<String>,
    /// The only email domains a tenant's requests may send to (`notify.email` and reviewers'
    /// addresses): `tenant=acme.com,acme.org;…`. With links only by notification, this is what
    /// keeps an agent from naming a mailbox it reads.
    #[arg(long, env = "ELICITD_NOTIFY_EMAIL_DOMAINS")]
    pub notify_email_domains: Option<String>,
    /// Tenants whose review links go only by notification, never in an answer to the agent
    /// (as if every request said `linkDelivery: "notify"`): `tenant,tenant2`.
    #[arg(long, env = "ELICITD_LINKS_BY_NOTIFICATION")]
    pub links_by_notification: Option<String>,
    /// Run this replica's delivery worker (webhooks, email, Slack). `false`: this replica only
    /// serves; the deliveries its transitions write are sent by the replicas that run one (at
    /// least one must, or nothing is delivered).
    #[arg(
        long,
        env = "ELICITD_DELIVERY_WORKER",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub delivery_worker: bool,
    /// Display names of tenants, shown as who asks in notifications: `tenant=Acme Billing;…`
    /// (default: the tenant id).
    #[arg(long, env = "ELICITD_TENANT_NAMES")]
    pub tenant_names: Option<String>,
}

/// What to run (default: the HTTP server).
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Serve MCP over stdin/stdout for a desktop client, with the HTTP server (review page,
    /// REST) running in the same process so `reviewUrl` works. Logs go to stderr.
    McpStdio {
        /// Tenant the stdio client acts as (default: the only configured tenant).
        #[arg(long, env = "ELICITD_STDIO_TENANT")]
        tenant: Option<String>,
    },
}

/// Validated configuration used by the whole process.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub redis_url: Option<String>,
    /// Without a trailing slash.
    pub public_url: String,
    /// key → tenant.
    pub api_keys: HashMap<String, Tenant>,
    pub key_prefix: String,
    pub await_window: Duration,
    pub retention: Duration,
    pub secret: Vec<u8>,
    pub log_format: LogFormat,
    pub max_expires_secs: u64,
    pub max_parked_awaits: usize,
    pub max_body_bytes: usize,
    pub redis_pool_size: usize,
    pub status_cache_entries: usize,
    /// New records in the 0.1 layout (see the flag).
    pub legacy_records: bool,
    pub redis_replica_acks: u32,
    pub redis_replica_timeout: Duration,
    pub webhooks: WebhookConfig,
    pub notify: NotifyConfig,
    /// Whether this replica runs a delivery worker.
    pub delivery_worker: bool,
    pub metrics_listen: Option<SocketAddr>,
    pub create_rate_per_sec: u32,
    pub review_failures_per_min: u32,
    pub max_connections: usize,
    /// HTTP worker threads (resolved: at least 1).
    pub http_threads: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub trust_forwarded_for: bool,
    /// Hosts `/mcp` accepts (see the flag).
    pub mcp_allowed_hosts: Vec<String>,
    /// Browser origins `/mcp` accepts besides the public URL's (see the flag).
    pub mcp_allowed_origins: Vec<String>,
    /// Set when the key was generated at start (printed once by `main`).
    pub generated_key: Option<String>,
    /// Smallest `expiresInSeconds` accepted (SPEC: 10). Not a flag: tests lower it to exercise
    /// deadlines without waiting ten seconds.
    pub min_expires_secs: u64,
}

/// Webhook settings (see the flags).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Default endpoint per tenant.
    pub endpoints: HashMap<Tenant, String>,
    /// Signing secrets per tenant (decoded `whsec_` values), newest first.
    pub secrets: HashMap<Tenant, Vec<Vec<u8>>>,
    pub allow_private: bool,
    /// Wait before each attempt (the first usually 0).
    pub schedule: Vec<Duration>,
    pub timeout: Duration,
    pub lease: Duration,
    pub concurrency: usize,
}

impl WebhookConfig {
    fn from_cli(cli: &Cli) -> Result<Self, ConfigError> {
        use base64::{engine::general_purpose::STANDARD, Engine};
        let mut secrets: HashMap<Tenant, Vec<Vec<u8>>> = HashMap::new();
        for entry in list(cli.webhook_secrets.as_deref(), ';') {
            let (tenant, values) = entry
                .split_once(':')
                .ok_or_else(|| bad("ELICITD_WEBHOOK_SECRETS entries must be tenant:whsec_…"))?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            for v in list(Some(values), ',') {
                let key = v
                    .strip_prefix("whsec_")
                    .and_then(|b| STANDARD.decode(b).ok())
                    .filter(|k| (24..=64).contains(&k.len()))
                    .ok_or_else(|| {
                        bad(format!(
                            "ELICITD_WEBHOOK_SECRETS: the secret of tenant {tenant} must be \
                             whsec_ followed by 24–64 bytes in base64"
                        ))
                    })?;
                secrets.entry(tenant.clone()).or_default().push(key);
            }
        }
        let mut endpoints = HashMap::new();
        for entry in list(cli.webhooks.as_deref(), ';') {
            let (tenant, url) = entry
                .split_once('=')
                .ok_or_else(|| bad("ELICITD_WEBHOOKS entries must be tenant=https://…"))?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            let url = url.trim();
            crate::model::rules::webhook_url_problem(url).map_or(Ok(()), |p| {
                Err(bad(format!("ELICITD_WEBHOOKS: {tenant}: {p}")))
            })?;
            if !secrets.contains_key(&tenant) {
                return Err(bad(format!(
                    "ELICITD_WEBHOOKS: tenant {tenant} has no signing secret in ELICITD_WEBHOOK_SECRETS"
                )));
            }
            endpoints.insert(tenant, url.to_string());
        }
        let schedule = list(Some(&cli.webhook_retry_schedule_secs), ',')
            .map(|s| s.parse::<u64>().map(Duration::from_secs))
            .collect::<Result<Vec<_>, _>>()
            .ok()
            .filter(|v| (1..=20).contains(&v.len()))
            .ok_or_else(|| {
                bad("ELICITD_WEBHOOK_RETRY_SCHEDULE_SECS must be 1–20 comma-separated seconds")
            })?;
        if !(1..=300).contains(&cli.webhook_timeout_secs) {
            return Err(bad("ELICITD_WEBHOOK_TIMEOUT_SECS must be 1–300"));
        }
        if !(1..=3600).contains(&cli.webhook_lease_secs)
            || cli.webhook_lease_secs <= cli.webhook_timeout_secs
        {
            return Err(bad(
                "ELICITD_WEBHOOK_LEASE_SECS must be 1–3600 and longer than the webhook timeout",
            ));
        }
        if !(1..=1000).contains(&cli.webhook_concurrency) {
            return Err(bad("ELICITD_WEBHOOK_CONCURRENCY must be 1–1000"));
        }
        Ok(WebhookConfig {
            endpoints,
            secrets,
            allow_private: cli.webhook_allow_private,
            schedule,
            timeout: Duration::from_secs(cli.webhook_timeout_secs),
            lease: Duration::from_secs(cli.webhook_lease_secs),
            concurrency: cli.webhook_concurrency,
        })
    }
}

/// Notification settings (see the flags). Deliveries share the webhook schedule, timeout,
/// lease, concurrency and address guard.
#[derive(Clone)]
pub struct NotifyConfig {
    /// The SMTP URL (validated by lettre at startup); `None`: no email.
    pub smtp_url: Option<String>,
    pub smtp_from: Option<lettre::message::Mailbox>,
    pub email: HashMap<Tenant, Vec<String>>,
    pub slack: HashMap<Tenant, String>,
    pub names: HashMap<Tenant, String>,
    /// Tenants whose review links go only by notification.
    pub links_by_notification: std::collections::HashSet<Tenant>,
    /// Per tenant, the only domains (lowercase) its email recipients may be at.
    pub email_domains: HashMap<Tenant, Vec<String>>,
}

impl std::fmt::Debug for NotifyConfig {
    // The SMTP URL and the Slack URLs carry credentials: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyConfig")
            .field("smtp", &self.smtp_url.is_some())
            .field("smtp_from", &self.smtp_from)
            .field("email", &self.email)
            .field("slack_tenants", &self.slack.keys().collect::<Vec<_>>())
            .field("names", &self.names)
            .field("links_by_notification", &self.links_by_notification)
            .field("email_domains", &self.email_domains)
            .finish()
    }
}

impl NotifyConfig {
    fn from_cli(cli: &Cli) -> Result<Self, ConfigError> {
        let smtp_from = match cli.smtp_from.as_deref().map(str::trim) {
            Some(f) if !f.is_empty() => Some(
                f.parse::<lettre::message::Mailbox>()
                    .map_err(|e| bad(format!("ELICITD_SMTP_FROM is not an address: {e}")))?,
            ),
            _ => None,
        };
        let smtp_url = match cli.smtp_url.as_deref().map(str::trim) {
            Some(u) if !u.is_empty() => {
                // Not echoed: the URL may carry a password.
                lettre::AsyncSmtpTransport::<lettre::Tokio1Executor>::from_url(u).map_err(
                    |_| {
                        bad("ELICITD_SMTP_URL must be smtp://[user:password@]host[:port][?tls=required] \
                             or smtps://…")
                    },
                )?;
                if smtp_from.is_none() {
                    return Err(bad("ELICITD_SMTP_URL needs ELICITD_SMTP_FROM (the sender)"));
                }
                Some(u.to_string())
            }
            _ => None,
        };
        let mut email = HashMap::new();
        for entry in list(cli.notify_email.as_deref(), ';') {
            let (tenant, addrs) = entry.split_once('=').ok_or_else(|| {
                bad("ELICITD_NOTIFY_EMAIL entries must be tenant=a@example.com,…")
            })?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            let addrs: Vec<String> = list(Some(addrs), ',').map(str::to_string).collect();
            let mut errs = Vec::new();
            crate::model::rules::check_notify(Some(&addrs), None, &mut errs);
            if let Some(e) = errs.first() {
                return Err(bad(format!(
                    "ELICITD_NOTIFY_EMAIL: {tenant}: {} {}",
                    e.field.replace("notify.email", "address"),
                    e.message
                )));
            }
            if smtp_url.is_none() {
                return Err(bad("ELICITD_NOTIFY_EMAIL needs ELICITD_SMTP_URL"));
            }
            email.insert(tenant, addrs);
        }
        let mut slack = HashMap::new();
        for entry in list(cli.notify_slack.as_deref(), ';') {
            let (tenant, url) = entry
                .split_once('=')
                .ok_or_else(|| bad("ELICITD_NOTIFY_SLACK entries must be tenant=https://…"))?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            let url = url.trim();
            if let Some(p) = crate::model::rules::webhook_url_problem(url) {
                return Err(bad(format!("ELICITD_NOTIFY_SLACK: {tenant}: {p}")));
            }
            slack.insert(tenant, url.to_string());
        }
        let mut names = HashMap::new();
        for entry in list(cli.tenant_names.as_deref(), ';') {
            let (tenant, name) = entry
                .split_once('=')
                .ok_or_else(|| bad("ELICITD_TENANT_NAMES entries must be tenant=Display Name"))?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            let name = name.trim();
            if name.is_empty()
                || name.chars().count() > 80
                || name
                    .chars()
                    .any(|c| c.is_control() || crate::model::rules::is_hidden(c))
            {
                return Err(bad(format!(
                    "ELICITD_TENANT_NAMES: the name of {tenant} must be 1–80 visible characters"
                )));
            }
            names.insert(tenant, name.to_string());
        }
        let links_by_notification = list(cli.links_by_notification.as_deref(), ',')
            .map(|t| Tenant::new(t).map_err(|e| bad(format!("ELICITD_LINKS_BY_NOTIFICATION: {e}"))))
            .collect::<Result<std::collections::HashSet<_>, _>>()?;
        if !links_by_notification.is_empty() && smtp_url.is_none() {
            return Err(bad(
                "ELICITD_LINKS_BY_NOTIFICATION needs ELICITD_SMTP_URL (the links go by email)",
            ));
        }
        let mut email_domains = HashMap::new();
        for entry in list(cli.notify_email_domains.as_deref(), ';') {
            let (tenant, domains) = entry.split_once('=').ok_or_else(|| {
                bad("ELICITD_NOTIFY_EMAIL_DOMAINS entries must be tenant=example.com,…")
            })?;
            let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
            let domains: Vec<String> = list(Some(domains), ',')
                .map(str::to_ascii_lowercase)
                .collect();
            if domains.is_empty()
                || domains
                    .iter()
                    .any(|d| crate::model::rules::email_problem(&format!("x@{d}")).is_some())
            {
                return Err(bad(format!(
                    "ELICITD_NOTIFY_EMAIL_DOMAINS: {tenant}: list domains like example.com"
                )));
            }
            email_domains.insert(tenant, domains);
        }
        for (tenant, addrs) in &email {
            if let Some(d) = email_domains.get(tenant) {
                if let Some(a) = addrs.iter().find(|a| !crate::model::rules::email_in(a, d)) {
                    return Err(bad(format!(
                        "ELICITD_NOTIFY_EMAIL: {tenant}: {a} is outside ELICITD_NOTIFY_EMAIL_DOMAINS"
                    )));
                }
            }
        }
        Ok(NotifyConfig {
            email_domains,
            smtp_url,
            smtp_from,
            email,
            slack,
            names,
            links_by_notification,
        })
    }

    /// How notifications name a tenant.
    pub fn name_of<'a>(&'a self, tenant: &'a str) -> &'a str {
        Tenant::new(tenant)
            .ok()
            .and_then(|t| self.names.get(&t))
            .map_or(tenant, String::as_str)
    }
}

/// Non-empty trimmed entries of a `sep`-separated list.
fn list(v: Option<&str>, sep: char) -> impl Iterator<Item = &str> {
    v.unwrap_or_default()
        .split(sep)
        .map(str::trim)
        .filter(|e| !e.is_empty())
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

fn bad(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

impl Config {
    /// Validate the command line into a `Config`.
    pub fn from_cli(cli: Cli) -> Result<Self, ConfigError> {
        let webhooks = WebhookConfig::from_cli(&cli)?;
        let notify = NotifyConfig::from_cli(&cli)?;
        let public_url = match cli.public_url {
            Some(u) => u,
            None => format!("http://{}", cli.listen),
        };
        let public_url = public_url.trim_end_matches('/').to_string();
        if !(public_url.starts_with("http://") || public_url.starts_with("https://"))
            || public_url.len() <= "https://".len()
        {
            return Err(bad("ELICITD_PUBLIC_URL must be an http:// or https:// URL"));
        }
        let (api_keys, generated_key) = match cli.api_keys.as_deref().map(str::trim) {
            Some(list) if !list.is_empty() => (parse_api_keys(list)?, None),
            _ => {
                let key = format!("ek_{}", crate::token::random_b64(32));
                let mut m = HashMap::new();
                m.insert(key.clone(), Tenant::new("default").map_err(bad)?);
                (m, Some(key))
            }
        };
        if cli.key_prefix.is_empty()
            || cli.key_prefix.len() > 64
            || !cli
                .key_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(bad(
                "ELICITD_KEY_PREFIX must be 1–64 chars of [A-Za-z0-9-_.:]",
            ));
        }
        if !(1..=60).contains(&cli.await_window_secs) {
            return Err(bad("ELICITD_AWAIT_WINDOW_SECS must be 1–60"));
        }
        if cli.retention_secs < 60 {
            return Err(bad("ELICITD_RETENTION_SECS must be at least 60"));
        }
        if !(10..=2_592_000).contains(&cli.max_expires_secs) {
            return Err(bad("ELICITD_MAX_EXPIRES_SECS must be 10–2592000"));
        }
        if cli.max_parked_awaits == 0 {
            return Err(bad("ELICITD_MAX_PARKED_AWAITS must be at least 1"));
        }
        if cli.max_body_bytes < 80 * 1024 {
            return Err(bad(
                "ELICITD_MAX_BODY_BYTES must be at least 81920 (a 64 KiB context must fit)",
            ));
        }
        if cli.http_threads > 1024 {
            return Err(bad("ELICITD_HTTP_THREADS must be at most 1024"));
        }
        if cli.max_connections == 0 {
            return Err(bad("ELICITD_MAX_CONNECTIONS must be at least 1"));
        }
        if !(1..=300).contains(&cli.header_timeout_secs)
            || !(1..=300).contains(&cli.body_timeout_secs)
        {
            return Err(bad(
                "ELICITD_HEADER_TIMEOUT_SECS and ELICITD_BODY_TIMEOUT_SECS must be 1–300",
            ));
        }
        if !(1..=64).contains(&cli.redis_pool_size) {
            return Err(bad("ELICITD_REDIS_POOL_SIZE must be 1–64"));
        }
        if cli.status_cache_entries > 1_000_000 {
            return Err(bad("ELICITD_STATUS_CACHE_ENTRIES must be 0–1000000"));
        }
        if let Some(url) = &cli.redis_url {
            check_redis_url(url)?;
        }
        if cli.redis_replica_acks > 16 {
            return Err(bad("ELICITD_REDIS_REPLICA_ACKS must be 0–16"));
        }
        if !(1..=10_000).contains(&cli.redis_replica_timeout_ms) {
            return Err(bad("ELICITD_REDIS_REPLICA_TIMEOUT_MS must be 1–10000"));
        }
        let secret = match cli.secret {
            Some(s) if s.len() >= 32 => s.into_bytes(),
            Some(_) => return Err(bad("ELICITD_SECRET must be at least 32 characters")),
            None => crate::token::random_bytes(32),
        };
        let mcp_allowed_hosts =
            allowed_hosts(cli.mcp_allowed_hosts.as_deref(), &public_url, cli.listen);
        let mcp_allowed_origins = allowed_origins(cli.mcp_allowed_origins.as_deref());
        Ok(Config {
            listen: cli.listen,
            redis_url: cli.redis_url,
            public_url,
            api_keys,
            key_prefix: cli.key_prefix,
            await_window: Duration::from_secs(cli.await_window_secs),
            retention: Duration::from_secs(cli.retention_secs),
            secret,
            log_format: cli.log_format,
            max_expires_secs: cli.max_expires_secs,
            max_parked_awaits: cli.max_parked_awaits,
            max_body_bytes: cli.max_body_bytes,
            redis_pool_size: cli.redis_pool_size,
            status_cache_entries: cli.status_cache_entries,
            legacy_records: cli.legacy_records,
            redis_replica_acks: cli.redis_replica_acks,
            redis_replica_timeout: Duration::from_millis(cli.redis_replica_timeout_ms),
            webhooks,
            notify,
            delivery_worker: cli.delivery_worker,
            metrics_listen: cli.metrics_listen,
            create_rate_per_sec: cli.create_rate_per_sec,
            review_failures_per_min: cli.review_failures_per_min,
            max_connections: cli.max_connections,
            http_threads: match cli.http_threads {
                0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                n => n,
            },
            header_timeout: Duration::from_secs(cli.header_timeout_secs),
            body_timeout: Duration::from_secs(cli.body_timeout_secs),
            trust_forwarded_for: cli.trust_forwarded_for,
            mcp_allowed_hosts,
            mcp_allowed_origins,
            generated_key,
            min_expires_secs: crate::model::rules::MIN_EXPIRES_SECS,
        })
    }

    /// A config with defaults, for tests and embedding: no Redis, the given keys.
    pub fn with_keys(keys: &[(&str, &str)]) -> Self {
        let mut cli = Cli::parse_from(["elicitd"]);
        cli.api_keys = Some(
            keys.iter()
                .map(|(t, k)| format!("{t}:{k}"))
                .collect::<Vec<_>>()
                .join(","),
        );
        cli.secret = Some("test-secret-test-secret-test-secret!".into());
        // Defaults are valid by construction (covered by a unit test).
        Config::from_cli(cli).expect("default config is valid")
    }
}

/// `scheme://host[:port]` of an absolute http(s) URL, lower-cased, default port dropped.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    // Drop credentials (never expected, but they are not part of an origin).
    let host = authority.rsplit('@').next()?.to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    let host = host.strip_suffix(default_port).unwrap_or(&host);
    Some(format!("{scheme}://{host}"))
}

fn allowed_origins(extra: Option<&str>) -> Vec<String> {
    let mut origins: Vec<String> = Vec::new();
    origins.extend(
        extra
            .unwrap_or_default()
            .split(',')
            .filter_map(|o| origin_of(o.trim())),
    );
    origins.sort();
    origins.dedup();
    origins
}

fn allowed_hosts(extra: Option<&str>, public_url: &str, listen: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let authority = public_url
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(public_url);
    let authority = authority.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    hosts.push(host.to_string());
    if !listen.ip().is_unspecified() {
        hosts.push(listen.ip().to_string());
    }
    for h in extra
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
    {
        hosts.push(h.to_string());
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The schemes `ELICITD_REDIS_URL` accepts (fred's URL grammar for each).
const REDIS_SCHEMES: [&str; 6] = [
    "redis",
    "rediss",
    "redis-cluster",
    "rediss-cluster",
    "redis-sentinel",
    "rediss-sentinel",
];

/// A Redis URL fred can use, of one of [`REDIS_SCHEMES`] (the message never repeats the URL:
/// it may hold a password).
fn check_redis_url(url: &str) -> Result<(), ConfigError> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or_default();
    if !REDIS_SCHEMES.contains(&scheme) {
        return Err(bad(format!(
            "ELICITD_REDIS_URL must start with one of {}",
            REDIS_SCHEMES.map(|s| format!("{s}://")).join(", ")
        )));
    }
    fred::types::config::Config::from_url(url)
        .map(|_| ())
        .map_err(|e| bad(format!("ELICITD_REDIS_URL is not usable: {}", e.details())))
}

fn parse_api_keys(list: &str) -> Result<HashMap<String, Tenant>, ConfigError> {
    let mut out = HashMap::new();
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (tenant, key) = pair
            .split_once(':')
            .ok_or_else(|| bad("ELICITD_API_KEYS entries must be tenant:key"))?;
        let tenant = Tenant::new(tenant.trim()).map_err(bad)?;
        let key = key.trim();
        if key.len() < 16 {
            return Err(bad(format!(
                "API key for tenant {tenant} is shorter than 16 characters"
            )));
        }
        if out.insert(key.to_string(), tenant).is_some() {
            return Err(bad("ELICITD_API_KEYS lists the same key twice"));
        }
    }
    if out.is_empty() {
        return Err(bad("ELICITD_API_KEYS has no entries"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let mut v = vec!["elicitd"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).unwrap()
    }

    #[test]
    fn defaults_generate_a_key_and_public_url() {
        let c = Config::from_cli(cli(&[])).unwrap();
        assert_eq!(c.public_url, "http://127.0.0.1:8080");
        let key = c.generated_key.clone().unwrap();
        assert!(key.len() > 40);
        assert_eq!(c.api_keys.get(&key).unwrap().as_str(), "default");
        assert_eq!(c.await_window, Duration::from_secs(25));
    }

    #[test]
    fn parses_keys_and_rejects_bad_values() {
        let c = Config::from_cli(cli(&[
            "--api-keys",
            "acme:0123456789abcdef, beta:fedcba9876543210",
        ]))
        .unwrap();
        assert_eq!(c.api_keys.len(), 2);
        assert!(c.generated_key.is_none());
        for args in [
            &["--api-keys", "nokey"][..],
            &["--api-keys", "a:short"],
            &["--await-window-secs", "0"],
            &["--secret", "short"],
            &["--redis-url", "http://x"],
            &["--redis-url", "valkey://x"],
            &["--redis-url", "redis-sentinel://127.0.0.1:26379"],
            &["--redis-replica-acks", "17"],
            &["--redis-replica-timeout-ms", "0"],
            &["--public-url", "ftp://x"],
            &["--key-prefix", "has space"],
            &["--http-threads", "1025"],
        ] {
            assert!(Config::from_cli(cli(args)).is_err(), "{args:?} accepted");
        }
        // Worker threads: 0 means one per available CPU, never none.
        let auto = Config::from_cli(cli(&["--http-threads", "0"])).unwrap();
        assert_eq!(
            auto.http_threads,
            std::thread::available_parallelism().unwrap().get()
        );
        let three = Config::from_cli(cli(&["--http-threads", "3"])).unwrap();
        assert_eq!(three.http_threads, 3);
    }

    #[test]
    fn every_redis_url_form_is_accepted() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://:pw@127.0.0.1:6379/2",
            "rediss://user:pw@redis.example:6380",
            "redis-cluster://127.0.0.1:7000?node=127.0.0.1:7001&node=127.0.0.1:7002",
            "rediss-cluster://:pw@10.0.0.1:7000",
            "redis-sentinel://127.0.0.1:26379?sentinelServiceName=mymaster&node=127.0.0.1:26380",
            "rediss-sentinel://u:p@s1:26379/0?sentinelServiceName=m&sentinelPassword=x",
        ] {
            assert!(
                Config::from_cli(cli(&["--redis-url", url])).is_ok(),
                "{url} refused"
            );
        }
        let e = Config::from_cli(cli(&["--redis-url", "redis-sentinel://:secret@h:1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sentinel") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn with_keys_is_valid() {
        let c = Config::with_keys(&[("t", "0123456789abcdef0")]);
        assert_eq!(c.api_keys.len(), 1);
    }
}
