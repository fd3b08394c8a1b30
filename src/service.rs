//! The business layer every surface (REST, MCP, review page) calls. Adapters parse input and
//! shape output; the rules live here and in the store.

use std::{sync::Arc, time::Duration};

use serde::Serialize;
use serde_json::{value::RawValue, Map, Value};
use tokio::time::Instant;

use crate::{
    config::Config,
    error::{Error, Result},
    limits::Limits,
    model::{
        request::ValidCreate, rfc3339, CreateRequest, Decision, DecisionInput, ElicitationId, Kind,
        Status, Tenant,
    },
    store::{AuditEvent, Idempotency, NewRecord, ReviewView, StatusView, Store},
    token,
    wake::Hub,
};
use std::net::IpAddr;

/// Longest `await` window a caller may ask for.
pub const MAX_WAIT_SECS: u64 = 60;

/// Pause between re-reads while the store is unavailable during a parked `await`.
const STORE_RETRY: Duration = Duration::from_millis(200);

/// Shared state of one replica.
#[derive(Clone)]
pub struct Service {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub limits: Arc<Limits>,
}

/// Answer to a create.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedOut {
    pub elicitation_id: String,
    pub status: Status,
    pub review_url: String,
    pub expires_at: String,
}

/// Answer to status / await.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusOut {
    pub elicitation_id: String,
    pub kind: Kind,
    pub status: Status,
    pub created_at: String,
    pub expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

impl From<&StatusView> for StatusOut {
    fn from(v: &StatusView) -> Self {
        StatusOut {
            elicitation_id: v.id.to_string(),
            kind: v.kind,
            status: v.status,
            created_at: rfc3339(v.created_ms),
            expires_at: rfc3339(v.expires_ms),
            decided_at: v.decided_ms.map(rfc3339),
        }
    }
}

/// Answer to result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultOut {
    pub elicitation_id: String,
    pub kind: Kind,
    pub status: Status,
    pub decision: Decision,
    /// The request's `context`, byte for byte (`null` if absent).
    #[schema(value_type = Option<Object>)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub context: Option<Box<RawValue>>,
    /// Form approvals on submit: the reviewer's values; otherwise `null`.
    #[schema(value_type = Option<Object>)]
    pub form_submission: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub values: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub decided_at: String,
}

/// One audit event on the wire.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEventOut {
    #[serde(rename = "type")]
    pub kind: String,
    pub at: String,
    pub actor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
}

/// Answer to audit.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditOut {
    pub elicitation_id: String,
    pub events: Vec<AuditEventOut>,
}

/// Answer to cancel and decide.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
pub struct StateOut {
    pub status: Status,
}

/// Count a refused operation by its error code (server-side failures are counted by the store).
fn refused<T>(op: &'static str, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        if !matches!(e, Error::Internal(_) | Error::Unavailable(_)) {
            metrics::counter!("elicitd_transitions_refused_total", "op" => op, "code" => e.code())
                .increment(1);
        }
        if matches!(e, Error::NotFound) && matches!(op, "review" | "decide") {
            metrics::counter!("elicitd_review_token_failures_total").increment(1);
        }
    }
    r
}

fn parse_id(id: &str) -> Result<ElicitationId> {
    ElicitationId::parse(id).ok_or(Error::NotFound)
}

fn token_hash(review_token: &str) -> Result<String> {
    if token::looks_like_review_token(review_token) {
        Ok(token::token_hash(review_token))
    } else {
        Err(Error::NotFound)
    }
}

impl Service {
    pub fn new(config: Arc<Config>, store: Arc<dyn Store>, hub: Arc<Hub>) -> Self {
        let limits = Arc::new(Limits::new(
            config.create_rate_per_sec,
            config.review_failures_per_min,
        ));
        Service {
            config,
            store,
            hub,
            limits,
        }
    }

    /// The tenant an API key belongs to.
    pub fn authenticate(&self, key: &str) -> Result<Tenant> {
        // Keys are few; compare all in constant time so timing reveals nothing.
        let mut found = None;
        for (k, t) in &self.config.api_keys {
            if token::ct_eq(k, key) {
                found = Some(t.clone());
            }
        }
        found.ok_or(Error::Unauthorized)
    }

    fn review_url(&self, token: &str) -> String {
        format!("{}/review/{token}", self.config.public_url)
    }

    /// Create an elicitation of `kind`.
    pub async fn create(
        &self,
        tenant: &Tenant,
        kind: Kind,
        req: CreateRequest,
    ) -> Result<CreatedOut> {
        refused("create", self.create_inner(tenant, kind, req).await)
    }

    async fn create_inner(
        &self,
        tenant: &Tenant,
        kind: Kind,
        req: CreateRequest,
    ) -> Result<CreatedOut> {
        self.limits.check_create(tenant)?;
        let ValidCreate {
            spec,
            idempotency_key,
        } = req.validate_with(
            kind,
            self.config.min_expires_secs,
            self.config.max_expires_secs,
        )?;
        let spec_json = serde_json::to_string(&spec).map_err(Error::internal)?;
        let id = ElicitationId::random();
        let salt = token::random_b64(16);
        let review_token = token::review_token(&self.config.secret, &salt, &id.to_string());
        let idempotency = idempotency_key.map(|k| Idempotency {
            key_hash: token::sha256_hex(k.as_bytes()),
            fingerprint: token::sha256_hex(spec_json.as_bytes()),
        });
        let created = self
            .store
            .create(NewRecord {
                id,
                tenant: tenant.clone(),
                kind,
                spec_json,
                expires_in_ms: spec.expires_in_seconds as i64 * 1000,
                token_hash: token::token_hash(&review_token),
                token_salt: salt,
                idempotency,
            })
            .await?;
        if !created.replayed {
            metrics::counter!("elicitd_elicitations_created_total", "kind" => kind.as_str())
                .increment(1);
        }
        let review_token = if created.replayed {
            let t = token::review_token(
                &self.config.secret,
                &created.token_salt,
                &created.id.to_string(),
            );
            if !token::ct_eq(&token::token_hash(&t), &created.token_hash) {
                // The first create used another ELICITD_SECRET: its link cannot be rebuilt.
                return Err(Error::internal(
                    "idempotent replay under a different ELICITD_SECRET; set one shared secret",
                ));
            }
            t
        } else {
            review_token
        };
        Ok(CreatedOut {
            elicitation_id: created.id.to_string(),
            status: created.status,
            review_url: self.review_url(&review_token),
            expires_at: rfc3339(created.expires_ms),
        })
    }

    pub async fn status(&self, tenant: &Tenant, id: &str) -> Result<StatusOut> {
        refused("status", self.status_inner(tenant, id).await)
    }

    async fn status_inner(&self, tenant: &Tenant, id: &str) -> Result<StatusOut> {
        let v = self.store.status(tenant, parse_id(id)?).await?;
        Ok(StatusOut::from(&v))
    }

    /// Long-poll: return as soon as the request is not `pending`, at its deadline, at the end of
    /// the window, or at shutdown (whichever first), always with a fresh read.
    pub async fn await_status(
        &self,
        tenant: &Tenant,
        id: &str,
        wait: Option<u64>,
    ) -> Result<StatusOut> {
        refused("await", self.await_inner(tenant, id, wait).await)
    }

    async fn await_inner(&self, tenant: &Tenant, id: &str, wait: Option<u64>) -> Result<StatusOut> {
        let id = parse_id(id)?;
        let wait = match wait {
            Some(s) if s > MAX_WAIT_SECS => {
                return Err(Error::invalid(format!(
                    "waitSeconds must be 0–{MAX_WAIT_SECS}"
                )))
            }
            Some(s) => Duration::from_secs(s),
            None => self.config.await_window,
        };
        let window_end = Instant::now() + wait;
        let first = self.store.status(tenant, id).await?;
        if first.status != Status::Pending
            || wait.is_zero()
            || self.hub.shutdown_token().is_cancelled()
        {
            return Ok(StatusOut::from(&first));
        }
        let mut waiter = self.hub.register(id).await?;
        loop {
            // Read after registering: a change from here on is seen by `waiter`.
            let v = match self.store.status(tenant, id).await {
                Ok(v) => v,
                // The store blinked (Redis restart, failover): keep the caller parked and retry
                // until the window closes; only then report it.
                Err(Error::Unavailable(e))
                    if Instant::now() + STORE_RETRY < window_end
                        && !self.hub.shutdown_token().is_cancelled() =>
                {
                    tracing::debug!(error = %e, "await re-read failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(STORE_RETRY) => {}
                        _ = waiter.changed() => {}
                        _ = self.hub.shutdown_token().cancelled() => {}
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if v.status != Status::Pending {
                if let Some(decided) = v.decided_ms {
                    let lag = (v.now_ms - decided).max(0) as f64 / 1000.0;
                    metrics::histogram!("elicitd_await_wake_seconds").record(lag);
                }
                return Ok(StatusOut::from(&v));
            }
            if now >= window_end || self.hub.shutdown_token().is_cancelled() {
                return Ok(StatusOut::from(&v));
            }
            // Deadline measured on the store clock, slept on ours; the re-read decides.
            let to_deadline = Duration::from_millis((v.expires_ms - v.now_ms).max(0) as u64 + 1);
            let nap = to_deadline.min(window_end - now);
            tokio::select! {
                _ = waiter.changed() => {}
                _ = tokio::time::sleep(nap) => {}
                _ = self.hub.shutdown_token().cancelled() => {}
            }
        }
    }

    pub async fn result(&self, tenant: &Tenant, id: &str) -> Result<ResultOut> {
        refused("result", self.result_inner(tenant, id).await)
    }

    async fn result_inner(&self, tenant: &Tenant, id: &str) -> Result<ResultOut> {
        let r = self.store.consume(tenant, parse_id(id)?).await?;
        let form = r.spec.is_form();
        Ok(ResultOut {
            elicitation_id: r.id.to_string(),
            kind: r.spec.kind,
            status: Status::Consumed,
            decision: r.outcome.decision,
            context: r.spec.context,
            form_submission: if form {
                r.outcome.form_submission
            } else {
                None
            },
            selected_ids: r.outcome.selected_ids,
            values: r.outcome.values,
            comment: r.outcome.comment,
            decided_at: rfc3339(r.decided_ms),
        })
    }

    pub async fn cancel(&self, tenant: &Tenant, id: &str) -> Result<StateOut> {
        refused("cancel", self.cancel_inner(tenant, id).await)
    }

    async fn cancel_inner(&self, tenant: &Tenant, id: &str) -> Result<StateOut> {
        if self.store.cancel(tenant, parse_id(id)?).await? {
            metrics::counter!("elicitd_decisions_total", "outcome" => "canceled").increment(1);
        }
        Ok(StateOut {
            status: Status::Canceled,
        })
    }

    pub async fn audit(&self, tenant: &Tenant, id: &str) -> Result<AuditOut> {
        refused("audit", self.audit_inner(tenant, id).await)
    }

    async fn audit_inner(&self, tenant: &Tenant, id: &str) -> Result<AuditOut> {
        let id = parse_id(id)?;
        let events = self.store.audit(tenant, id).await?;
        Ok(AuditOut {
            elicitation_id: id.to_string(),
            events: events.into_iter().map(audit_out).collect(),
        })
    }

    /// Open a review token (for the review page). Never changes state.
    /// `client` is the caller's address, for the wrong-token brake (see `limits`).
    pub async fn review(&self, review_token: &str, client: Option<IpAddr>) -> Result<ReviewView> {
        self.limits.check_review(client)?;
        let r = refused(
            "review",
            async { self.store.review(&token_hash(review_token)?).await }.await,
        );
        if matches!(r, Err(Error::NotFound)) {
            self.limits.review_failed(client);
        }
        r
    }

    /// Record that the review page was shown.
    pub async fn record_view(&self, review_token: &str, id: ElicitationId) -> Result<()> {
        self.store.record_view(id, &token_hash(review_token)?).await
    }

    /// A reviewer decides. Validation errors are 422 and record nothing.
    pub async fn decide(
        &self,
        review_token: &str,
        input: DecisionInput,
        client: Option<IpAddr>,
    ) -> Result<StateOut> {
        self.limits.check_review(client)?;
        let r = refused("decide", self.decide_inner(review_token, input).await);
        if matches!(r, Err(Error::NotFound)) {
            self.limits.review_failed(client);
        }
        r
    }

    async fn decide_inner(&self, review_token: &str, input: DecisionInput) -> Result<StateOut> {
        let hash = token_hash(review_token)?;
        let view = self.store.review(&hash).await?;
        match view.status {
            Status::Pending => {}
            Status::Expired => return Err(Error::Expired),
            Status::Canceled => return Err(Error::Canceled),
            _ => return Err(Error::AlreadyDecided),
        }
        let outcome = input.validate(&view.spec)?;
        let (status, _) = self.store.decide(view.id, &hash, &outcome).await?;
        metrics::counter!("elicitd_decisions_total", "outcome" => status.as_str()).increment(1);
        Ok(StateOut { status })
    }
}

fn audit_out(e: AuditEvent) -> AuditEventOut {
    AuditEventOut {
        kind: e.kind,
        at: rfc3339(e.at),
        actor: e.actor,
        decision: e.decision,
    }
}
