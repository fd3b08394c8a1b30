//! The storage contract. Two implementations — [`redis::RedisStore`] (fleet mode, Lua scripts)
//! and [`memory::MemoryStore`] (one process) — must behave identically; one contract test suite
//! runs against both. Only the service calls a store.
//!
//! A store never looks inside a request or an answer: it keeps the validated spec and outcome as
//! JSON text (kind-agnostic), plus the few fields it needs to enforce the lifecycle.
//!
//! Invariants every implementation keeps:
//! - one clock per store (Redis `TIME`, or the process clock for memory) decides deadlines;
//! - `expired` is never written: it is `pending` read at or past `expires_ms`;
//! - a transition checks state, writes, appends audit and wakes waiters atomically;
//! - another tenant's id, a malformed id and a wrong review token all read `not_found`.

pub mod memory;
pub mod redis;

use async_trait::async_trait;

use crate::{
    error::Result,
    kinds::Kind,
    model::{Decision, ElicitationId, Status, Tenant},
};

/// Idempotency data of a create: a hash of the caller's key and a fingerprint of the request.
#[derive(Debug, Clone)]
pub struct Idempotency {
    pub key_hash: String,
    pub fingerprint: String,
}

/// Where a record's webhook events go (chosen at create: the request's `webhookUrl`, else the
/// tenant's default endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookTarget {
    pub url: String,
    /// Events carry the reviewer's answer (else the receiver calls `result`).
    pub include_result: bool,
}

/// Who is notified of a record (chosen at create: the request's `notify`, else the tenant's
/// defaults): email recipients and a Slack incoming-webhook URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyTarget {
    pub email: Vec<String>,
    pub slack: Option<String>,
}

impl NotifyTarget {
    pub fn is_empty(&self) -> bool {
        self.email.is_empty() && self.slack.is_none()
    }
}

/// What a notification needs of its record: the validated spec (JSON), the token salt (to
/// rebuild the review link) and the deadline.
#[derive(Debug, Clone)]
pub struct Notice {
    pub spec_json: String,
    pub token_salt: String,
    /// `sha256` of the request's own token: which form its links take.
    pub token_hash: String,
    pub expires_ms: i64,
    /// Named reviewers: each recipient's own link instead of the request's.
    pub panel: Option<Panel>,
    /// The stored status (`pending` also past the deadline: compare `expires_ms`).
    pub status: String,
}

/// The named reviewers of a record, their votes and who decided: JSON in the record (the
/// `panel` field; `lua/decide.lua` reads and writes the same shape). Kind-agnostic: a vote is a
/// decision and an optional comment.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Panel {
    /// Distinct submits needed.
    pub quorum: u32,
    pub reviewers: Vec<PanelReviewer>,
    /// Oldest first; one per reviewer at most.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lua_list"
    )]
    pub votes: Vec<Vote>,
    /// The submitters that completed the quorum (vote order), or the one decliner.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lua_list"
    )]
    pub decided_by: Vec<String>,
}

/// One named reviewer (the token itself is never stored; its hash opens the page).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PanelReviewer {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub token_hash: String,
}

/// One reviewer's vote.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vote {
    pub reviewer: String,
    /// submitted or declined.
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Store clock, epoch milliseconds.
    pub at: i64,
    /// The deciding call's nonce (a retried call finds its own vote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

impl Panel {
    pub fn reviewer_of(&self, token_hash: &str) -> Option<&PanelReviewer> {
        self.reviewers
            .iter()
            .find(|r| crate::token::ct_eq(&r.token_hash, token_hash))
    }
    pub fn vote_of(&self, reviewer: &str) -> Option<&Vote> {
        self.votes.iter().find(|v| v.reviewer == reviewer)
    }
    pub fn submitted(&self) -> u32 {
        self.votes
            .iter()
            .filter(|v| v.decision == "submitted")
            .count() as u32
    }
}

/// Lua's cjson writes an empty list as `{}`: read either as a list.
fn lua_list<'de, D, T>(d: D) -> std::result::Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum ListOrMap<T> {
        List(Vec<T>),
        Map(std::collections::BTreeMap<String, T>),
    }
    Ok(
        match <ListOrMap<T> as serde::Deserialize>::deserialize(d)? {
            ListOrMap::List(v) => v,
            ListOrMap::Map(m) => m.into_values().collect(),
        },
    )
}

/// Everything the store needs to create a record.
#[derive(Debug, Clone)]
pub struct NewRecord {
    pub id: ElicitationId,
    pub tenant: Tenant,
    pub kind: Kind,
    /// The validated request as JSON (`kinds::Spec`).
    pub spec_json: String,
    pub expires_in_ms: i64,
    pub token_hash: String,
    pub token_salt: String,
    pub idempotency: Option<Idempotency>,
    pub webhook: Option<WebhookTarget>,
    pub notify: NotifyTarget,
    /// Named reviewers (JSON [`Panel`]): their token hashes open the page instead of
    /// `token_hash`, which is then indexed nowhere.
    pub panel: Option<Panel>,
}

/// The answer to a create (or the first create, when replayed by idempotency key).
#[derive(Debug, Clone)]
pub struct Created {
    pub id: ElicitationId,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub token_hash: String,
    pub token_salt: String,
    /// The status now (a replay may find the first request already decided).
    pub status: Status,
    pub replayed: bool,
    /// The named reviewers, if any (a replay rebuilds their links).
    pub panel: Option<Panel>,
}

/// One status read.
#[derive(Debug, Clone)]
pub struct StatusView {
    pub id: ElicitationId,
    pub kind: Kind,
    /// Effective status (`expired` computed).
    pub status: Status,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub decided_ms: Option<i64>,
    /// The store clock at the read.
    pub now_ms: i64,
    /// With named reviewers: (submits so far, quorum).
    pub votes: Option<(u32, u32)>,
}

/// What a reviewer's token opens.
#[derive(Debug, Clone)]
pub struct ReviewRecord {
    pub id: ElicitationId,
    pub spec_json: String,
    /// Effective status (`expired` computed).
    pub status: Status,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub now_ms: i64,
    pub outcome_json: Option<String>,
    pub decided_ms: Option<i64>,
    /// With named reviewers: the panel, and which reviewer's token this is.
    pub panel: Option<Panel>,
    pub reviewer: Option<String>,
}

/// The answer to a decision: recorded, or refused with the record's state at that moment
/// (so the review page can show it without reading again).
#[derive(Debug, Clone)]
pub enum DecideReply {
    Recorded {
        status: Status,
        decided_ms: i64,
    },
    /// A named reviewer's submit was recorded; the request stays pending until the quorum.
    Voted {
        submitted: u32,
        needed: u32,
    },
    /// Not pending any more: the effective status (submitted, declined, consumed, canceled
    /// or expired) and, when decided, the outcome and its time.
    Refused {
        status: Status,
        outcome_json: Option<String>,
        decided_ms: Option<i64>,
    },
}

/// What `result` returns.
#[derive(Debug, Clone)]
pub struct ResultRecord {
    pub id: ElicitationId,
    pub spec_json: String,
    pub outcome_json: String,
    pub decided_ms: i64,
    /// With named reviewers: the votes and who decided.
    pub panel: Option<Panel>,
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditEvent {
    /// created, viewed, decided, canceled, fetched, webhook_delivered, webhook_failed,
    /// notification_sent, notification_failed.
    #[serde(rename = "type")]
    pub kind: String,
    /// Epoch milliseconds, store clock.
    pub at: i64,
    /// `agent:<tenant>`, `reviewer` or `elicitd` (delivery outcomes).
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// The delivery a `webhook_*` or `notification_*` entry is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

/// What a delivery carries: a signed webhook event, an email or a Slack message.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    #[default]
    Webhook,
    Email,
    Slack,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Webhook, Channel::Email, Channel::Slack];
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Webhook => "webhook",
            Channel::Email => "email",
            Channel::Slack => "slack",
        }
    }
}

/// Where a delivery stands.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Waiting for its next attempt (or being attempted, under a lease).
    Pending,
    Delivered,
    /// Given up: the schedule ran out, or the receiver answered 410 Gone.
    Failed,
}

/// One attempt at a delivery.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// Epoch milliseconds when the attempt started (this replica's clock).
    pub at: i64,
    /// The receiver's HTTP status, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed without an answer (timeout, refused address, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// One event of one record on one channel and its delivery (for a webhook a Standard Webhooks
/// message: `id` is the `webhook-id`, stable across attempts). Written by the transition that
/// caused it (the transactional outbox); the store keeps it as JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub id: String,
    pub elicitation_id: String,
    /// submitted, declined, canceled, consumed, expired.
    #[serde(rename = "type")]
    pub event: String,
    pub kind: String,
    pub tenant: String,
    /// Absent in deliveries written before notifications existed: webhook.
    #[serde(default)]
    pub channel: Channel,
    /// The webhook or Slack URL (empty for email).
    #[serde(default)]
    pub url: String,
    /// Email: the recipients.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// Email: recipients the SMTP server accepted (not sent to again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<String>,
    /// Email: recipients refused for good (a permanent SMTP error).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    #[serde(default)]
    pub include_result: bool,
    /// When the transition happened (store clock).
    pub event_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_ms: Option<i64>,
    pub state: DeliveryState,
    /// When the next attempt is due (pending only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// The claiming worker's lease token (while an attempt runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replays: Option<u32>,
    /// How many of `attempts` came before the last replay: the retry schedule counts from here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub schedule_from: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The delivery id (`webhook-id`) of a record's event: one per transition, ever.
pub fn event_id(id: ElicitationId, event: &str) -> String {
    let h = crate::token::sha256_hex(format!("{id}:{event}").as_bytes());
    format!("msg_{}", &h[..24])
}

/// The delivery ids of a record's event on each channel ([`Channel::ALL`] order): the webhook's
/// is [`event_id`], the notifications' `email_…` and `slack_…`.
pub fn event_ids(id: ElicitationId, event: &str) -> [String; 3] {
    let note = |c: &str| {
        let h = crate::token::sha256_hex(format!("{id}:{event}:{c}").as_bytes());
        format!("{c}_{}", &h[..24])
    };
    [event_id(id, event), note("email"), note("slack")]
}

/// The storage contract (see module docs).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Create a record, or return the first one for the same tenant + idempotency key.
    async fn create(&self, rec: NewRecord) -> Result<Created>;
    /// Read the status (never changes state).
    async fn status(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView>;
    /// [`status`](Self::status) when the record is known to have just changed (a parked
    /// `await` was woken): the same answer, but a store with a cache reads the record itself
    /// rather than waiting for the cache to learn of the change.
    async fn status_changed(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView> {
        self.status(tenant, id).await
    }
    /// Open a record by review-token hash (never changes state): the record `id` when the
    /// token names it (only if the hash opens it), else the one the review index points at
    /// (tokens of the first form).
    async fn review(&self, id: Option<ElicitationId>, token_hash: &str) -> Result<ReviewRecord>;
    /// Record a reviewer decision, `pending` → submitted/declined, or say why not.
    async fn decide(
        &self,
        id: ElicitationId,
        token_hash: &str,
        decision: Decision,
        outcome_json: &str,
    ) -> Result<DecideReply>;
    /// Withdraw: `pending` → canceled. Repeat cancels succeed too; the flag says whether this
    /// call made the change.
    async fn cancel(&self, tenant: &Tenant, id: ElicitationId) -> Result<bool>;
    /// Read the outcome: submitted/declined → consumed; audited on every call.
    async fn consume(&self, tenant: &Tenant, id: ElicitationId) -> Result<ResultRecord>;
    /// The audit trail, oldest first, and how many times the result was read (fetches beyond
    /// the audit cap are counted, not listed).
    async fn audit(&self, tenant: &Tenant, id: ElicitationId) -> Result<(Vec<AuditEvent>, u64)>;
    /// Append a `viewed` event by `actor` (the review page was rendered).
    async fn record_view(&self, id: ElicitationId, token_hash: &str, actor: &str) -> Result<()>;
    /// Ready to serve (Redis: a script call answers and the subscriber is connected).
    async fn ready(&self) -> Result<()>;
    /// Give the calling thread its own connection, for a thread-per-core HTTP worker (Redis:
    /// its commands then never hand off to another thread). Stores without connections have
    /// nothing to do.
    async fn attach_thread(&self) -> Result<()> {
        Ok(())
    }

    // --- webhook deliveries (the outbox written by the transitions) ---

    /// How many delivery shards a worker polls (Redis: one per hash tag; memory: 1).
    fn shards(&self) -> u16;
    /// The delivery shard of a record's events.
    fn shard_of(&self, id: ElicitationId) -> u16;
    /// Emit the `expired` event of every record in `shard` whose deadline passed undecided
    /// (once across the fleet); the number emitted.
    async fn sweep_deadlines(&self, shard: u16) -> Result<usize>;
    /// Claim up to `max` due deliveries of `shard` for `lease` (see `lua/claim.lua`).
    async fn claim_deliveries(
        &self,
        shard: u16,
        lease: std::time::Duration,
        max: usize,
    ) -> Result<Vec<Delivery>>;
    /// Store a delivery after an attempt: due again at `next_at`, or done (`None`); `audit`
    /// goes to the record's trail. `false` when the lease was lost (nothing written).
    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        next_at: Option<i64>,
        audit: Option<AuditEvent>,
    ) -> Result<bool>;
    /// A record's deliveries, oldest first.
    async fn deliveries(&self, tenant: &Tenant, id: ElicitationId) -> Result<Vec<Delivery>>;
    /// Deliver a failed delivery again: `not_decided` unless it failed.
    async fn replay_delivery(
        &self,
        tenant: &Tenant,
        id: ElicitationId,
        delivery_id: &str,
    ) -> Result<Delivery>;
    /// The spec and outcome of a record (for events that include the result), if it is still
    /// there and decided.
    async fn outcome_of(&self, id: ElicitationId) -> Result<Option<(String, String)>>;
    /// What a notification of the record needs, if it is still there.
    async fn notice_of(&self, id: ElicitationId) -> Result<Option<Notice>>;
    /// Deliveries waiting (due or leased) across all shards, and the earliest due time.
    async fn queue_stats(&self) -> Result<(u64, Option<i64>)>;
}

/// The actor string of an agent.
pub fn agent_actor(tenant: &Tenant) -> String {
    format!("agent:{tenant}")
}

/// `viewed` and `fetched` events are appended only while the audit trail is shorter than this
/// (a link holder reloading the page, or an agent reading a result in a loop, must not grow a
/// record without bound). Passed to `lua/view.lua` and `lua/consume.lua`.
pub const MAX_AUDIT_FOR_VIEWS: usize = 200;

/// The actor string of a reviewer.
pub const REVIEWER: &str = "reviewer";
