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
}

/// The answer to a decision: recorded, or refused with the record's state at that moment
/// (so the review page can show it without reading again).
#[derive(Debug, Clone)]
pub enum DecideReply {
    Recorded {
        status: Status,
        decided_ms: i64,
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
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditEvent {
    /// created, viewed, decided, canceled, fetched.
    #[serde(rename = "type")]
    pub kind: String,
    /// Epoch milliseconds, store clock.
    pub at: i64,
    /// `agent:<tenant>` or `reviewer`.
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// The storage contract (see module docs).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Create a record, or return the first one for the same tenant + idempotency key.
    async fn create(&self, rec: NewRecord) -> Result<Created>;
    /// Read the status (never changes state).
    async fn status(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView>;
    /// Open a record by review-token hash (never changes state).
    async fn review(&self, token_hash: &str) -> Result<ReviewRecord>;
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
    /// Append a `viewed` event (the review page was rendered).
    async fn record_view(&self, id: ElicitationId, token_hash: &str) -> Result<()>;
    /// Ready to serve (Redis: a script call answers and the subscriber is connected).
    async fn ready(&self) -> Result<()>;
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
