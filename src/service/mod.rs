//! The business layer, and the only door to it: every surface (REST, MCP, review page) calls
//! these methods; none of them sees the store, the waiter hub or the limiters. Adapters parse
//! input and shape output (types in [`out`]); the rules live here, in `kinds` and in the store.

pub mod out;

use std::{net::IpAddr, sync::Arc, time::Duration};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::out::{
    AuditOut, CreatedOut, Decided, DeliveriesOut, DeliveryOut, ResultOut, Review, ReviewerOut,
    StateOut, StatusOut, VoteOut,
};
use crate::{
    config::Config,
    error::{Error, FieldError, Result},
    kinds::{
        self, Bounds, CreateRequest, DecisionInput, Kind, LinkDelivery, NotifyInput, Outcome,
        PanelInput, Spec, ValidCreate,
    },
    limits::Limits,
    model::{rfc3339, rules, Decision, ElicitationId, Status, Tenant},
    store::{
        DecideReply, Idempotency, NewRecord, NotifyTarget, Panel, PanelReviewer, ReviewRecord,
        Store, WebhookTarget,
    },
    token,
    wake::Hub,
};

/// Longest `await` window a caller may ask for.
pub const MAX_WAIT_SECS: u64 = 60;

/// Pause between re-reads while the store is unavailable during a parked `await`.
const STORE_RETRY: Duration = Duration::from_millis(200);

/// Shared state of one replica: one `Arc`, so the clone every request makes (axum hands each
/// handler its own copy of the state) is one reference count, not one per part.
#[derive(Clone)]
pub struct Service(Arc<Parts>);

/// What a [`Service`] holds.
pub struct Parts {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    limits: Arc<Limits>,
    /// Tells this replica's delivery worker that a transition wrote a webhook event.
    nudge: Arc<crate::delivery::Nudge>,
}

/// Count a refused operation by its error code (server-side failures are counted by the store).
fn refused<T>(op: &'static str, r: Result<T>) -> Result<T> {
    if let Err(e) = &r {
        if !e.is_server_side() {
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

/// The record a review token names (tokens of the current form) and its hash; `not_found`
/// for anything that is not a review token.
fn token_hash(review_token: &str) -> Result<(Option<ElicitationId>, String)> {
    let id = match token::shape(review_token) {
        token::Shape::Current(id) => Some(id),
        token::Shape::Legacy => None,
        token::Shape::Invalid => return Err(Error::NotFound),
    };
    Ok((id, token::token_hash(review_token)))
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| Error::internal(format!("stored {what}: {e}")))
}

/// The error a decision gets on a request that is no longer pending.
fn refusal_error(status: Status) -> Error {
    match status {
        Status::Expired => Error::Expired,
        Status::Canceled => Error::Canceled,
        _ => Error::AlreadyDecided,
    }
}

impl std::ops::Deref for Service {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl Service {
    /// The service over `store`; `nudge` reaches this replica's webhook delivery worker.
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        hub: Arc<Hub>,
        nudge: Arc<crate::delivery::Nudge>,
    ) -> Self {
        let limits = Arc::new(Limits::new(
            config.create_rate_per_sec,
            config.review_failures_per_min,
        ));
        Service(Arc::new(Parts {
            config,
            store,
            hub,
            limits,
            nudge,
        }))
    }

    /// The configuration this replica runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Give the calling thread its own store connection (an HTTP worker thread, see
    /// `server::serve_per_core`).
    pub async fn attach_thread(&self) -> Result<()> {
        self.store.attach_thread().await
    }

    /// Ready to serve: the store answers (and, on Redis, the subscriber is connected).
    pub async fn ready(&self) -> Result<()> {
        self.store.ready().await
    }

    /// Cancelled when the replica shuts down.
    pub fn shutdown_token(&self) -> &CancellationToken {
        self.hub.shutdown_token()
    }

    /// Release every parked `await` (they answer with their current status) and refuse new
    /// waits: the first step of a graceful shutdown.
    pub fn shutdown(&self) {
        self.hub.shutdown();
    }

    /// `await` calls parked on this replica right now.
    pub fn parked_awaits(&self) -> usize {
        self.hub.parked()
    }

    /// Ids with a live pub/sub subscription on this replica.
    pub fn live_subscriptions(&self) -> usize {
        self.hub.subscriptions()
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

    /// The tenant of an `Authorization: Bearer <api key>` header value.
    pub fn authenticate_bearer(&self, authorization: Option<&str>) -> Result<Tenant> {
        let (scheme, key) = authorization
            .and_then(|v| v.trim().split_once(' '))
            .ok_or(Error::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Error::Unauthorized);
        }
        self.authenticate(key.trim())
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
        let bounds = Bounds {
            min_expires_secs: self.config.min_expires_secs,
            max_expires_secs: self.config.max_expires_secs,
        };
        let ValidCreate {
            spec,
            idempotency_key,
            webhook_url,
            webhook_include_result,
            notify,
            panel: panel_input,
            link_delivery,
        } = if req.has_templates() {
            // Compiling a large template takes milliseconds: not on a runtime worker.
            tokio::task::spawn_blocking(move || kinds::validate_create(kind, req, bounds))
                .await
                .map_err(Error::internal)??
        } else {
            kinds::validate_create(kind, req, bounds)?
        };
        let webhook = self.webhook_target(tenant, webhook_url, webhook_include_result)?;
        let links_by_notification = link_delivery == Some(LinkDelivery::Notify)
            || self.config.notify.links_by_notification.contains(tenant);
        let notify =
            self.notify_target(tenant, notify, panel_input.as_ref(), links_by_notification)?;
        let spec_json = serde_json::to_string(&spec).map_err(Error::internal)?;
        if spec_json.len() > rules::MAX_RECORD_BYTES {
            return Err(Error::PayloadTooLarge(format!(
                "the request is {} bytes stored; the limit is {} (context, options with their \
                 extra keys, schema, templates and text together)",
                spec_json.len(),
                rules::MAX_RECORD_BYTES
            )));
        }
        let id = ElicitationId::random();
        let salt = token::random_b64(16);
        let form = if self.config.legacy_records {
            token::Form::Legacy
        } else {
            token::Form::Current
        };
        let review_token = token::review_token(&self.config.secret, &salt, id, None, form);
        let panel = panel_input.as_ref().map(|p| Panel {
            quorum: p.quorum,
            reviewers: p
                .reviewers
                .iter()
                .map(|r| PanelReviewer {
                    id: r.id.clone(),
                    name: r.name.as_ref().map(|n| n.trim().to_string()),
                    email: r.email.clone(),
                    token_hash: token::token_hash(&token::review_token(
                        &self.config.secret,
                        &salt,
                        id,
                        Some(&r.id),
                        form,
                    )),
                })
                .collect(),
            votes: Vec::new(),
            decided_by: Vec::new(),
        });
        // The fingerprint covers where the events and the links go too: the same key with
        // another webhook target, other recipients or other reviewers is another request.
        let idempotency = idempotency_key.map(|k| Idempotency {
            key_hash: token::sha256_hex(k.as_bytes()),
            fingerprint: token::sha256_hex(
                {
                    let mut f = spec_json.clone();
                    if let Some(w) = &webhook {
                        f.push_str(&format!("\nwebhook {} {}", w.include_result, w.url));
                    }
                    if !notify.is_empty() {
                        f.push_str(&format!("\nnotify {:?} {:?}", notify.email, notify.slack));
                    }
                    if let Some(p) = &panel_input {
                        let who: Vec<_> = p
                            .reviewers
                            .iter()
                            .map(|r| (&r.id, &r.name, &r.email))
                            .collect();
                        f.push_str(&format!("\nreviewers {} {who:?}", p.quorum));
                    }
                    f.push_str(&format!("\nlinks {links_by_notification}"));
                    f
                }
                .as_bytes(),
            ),
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
                webhook,
                notify: notify.clone(),
                panel,
            })
            .await?;
        if !created.replayed && !notify.is_empty() {
            // The `created` notifications were written with the record: send them now.
            self.nudge.shard(self.store.shard_of(created.id));
        }
        if !created.replayed {
            metrics::counter!("elicitd_elicitations_created_total", "kind" => kind.as_str())
                .increment(1);
        }
        let secret = &self.config.secret;
        let review_token = if created.replayed {
            // The first create's link, in the form its record was made with.
            let t = token::rebuild(
                secret,
                &created.token_salt,
                created.id,
                None,
                &created.token_hash,
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
        let reviewers = created.panel.as_ref().map(|p| {
            p.reviewers
                .iter()
                .map(|r| ReviewerOut {
                    id: r.id.clone(),
                    review_url: (!links_by_notification).then(|| {
                        self.review_url(&token::rebuild(
                            secret,
                            &created.token_salt,
                            created.id,
                            Some(&r.id),
                            &r.token_hash,
                        ))
                    }),
                })
                .collect()
        });
        Ok(CreatedOut {
            elicitation_id: created.id.to_string(),
            status: created.status,
            // Named reviewers replace the one link; links by notification are never answered.
            review_url: (created.panel.is_none() && !links_by_notification)
                .then(|| self.review_url(&review_token)),
            expires_at: rfc3339(created.expires_ms),
            reviewers,
        })
    }

    /// Where this request's events go: its `webhookUrl` (the tenant needs a signing secret:
    /// 422 otherwise, and a literal non-public address is 422 unless allowed), else the
    /// tenant's default endpoint, else nowhere.
    fn webhook_target(
        &self,
        tenant: &Tenant,
        url: Option<String>,
        include_result: bool,
    ) -> Result<Option<WebhookTarget>> {
        let hooks = &self.config.webhooks;
        let url = match url {
            Some(url) => {
                let problem = if !hooks.secrets.contains_key(tenant) {
                    Some(
                        "this tenant has no webhook signing secret (ELICITD_WEBHOOK_SECRETS)"
                            .to_string(),
                    )
                } else {
                    crate::delivery::guard::literal_problem(&url, hooks.allow_private)
                };
                if let Some(p) = problem {
                    return Err(Error::unprocessable(vec![crate::error::FieldError::new(
                        "webhookUrl",
                        p,
                    )]));
                }
                url
            }
            None => match hooks.endpoints.get(tenant) {
                Some(default) => default.clone(),
                None => return Ok(None),
            },
        };
        Ok(Some(WebhookTarget {
            url,
            include_result,
        }))
    }

    /// Who hears of this request: `notify` as sent, each channel left out taking the tenant's
    /// default. Email needs SMTP settings (422 otherwise); a Slack URL on a literal non-public
    /// address is 422 unless allowed, like a webhook's.
    fn notify_target(
        &self,
        tenant: &Tenant,
        notify: Option<NotifyInput>,
        panel: Option<&PanelInput>,
        links_by_notification: bool,
    ) -> Result<NotifyTarget> {
        let cfg = &self.config.notify;
        let notify = notify.unwrap_or_default();
        let unprocessable =
            |field: String, msg: &str| Error::unprocessable(vec![FieldError::new(field, msg)]);
        let email = match (panel, notify.email) {
            // Named reviewers: each gets their own link at their own address, and no one else
            // gets one (a default recipient would get a link that decides for a reviewer).
            (Some(p), _) => {
                let mut to = Vec::new();
                for (i, r) in p.reviewers.iter().enumerate() {
                    match &r.email {
                        Some(_) if cfg.smtp_url.is_none() => {
                            return Err(unprocessable(
                                format!("reviewers[{i}].email"),
                                "this server sends no email (ELICITD_SMTP_URL is not set)",
                            ))
                        }
                        Some(e) => to.push(e.clone()),
                        None if links_by_notification => {
                            return Err(unprocessable(
                                format!("reviewers[{i}].email"),
                                "is required: review links go only by email for this request",
                            ))
                        }
                        None => {}
                    }
                }
                to
            }
            (None, Some(list)) => list,
            (None, None) => cfg.email.get(tenant).cloned().unwrap_or_default(),
        };
        // The operator's list of domains the tenant may mail, if any.
        if let Some(domains) = cfg.email_domains.get(tenant) {
            let outside = match panel {
                Some(p) => p
                    .reviewers
                    .iter()
                    .position(|r| {
                        r.email
                            .as_deref()
                            .is_some_and(|e| !rules::email_in(e, domains))
                    })
                    .map(|i| format!("reviewers[{i}].email")),
                None => email
                    .iter()
                    .position(|e| !rules::email_in(e, domains))
                    .map(|i| format!("notify.email[{i}]")),
            };
            if let Some(field) = outside {
                return Err(unprocessable(
                    field,
                    &format!(
                        "is not at a domain this tenant may send to ({})",
                        domains.join(", ")
                    ),
                ));
            }
        }
        if panel.is_none() && !email.is_empty() && cfg.smtp_url.is_none() {
            return Err(unprocessable(
                "notify.email".into(),
                "this server sends no email (ELICITD_SMTP_URL is not set)",
            ));
        }
        if panel.is_none() && links_by_notification && email.is_empty() {
            return Err(unprocessable(
                "linkDelivery".into(),
                "review links go only by email for this request: give notify.email (or \
                 reviewers with email)",
            ));
        }
        // A Slack message goes to a channel: when the links may go only to the people they are
        // for, a request without named reviewers (whose message would carry the link) gets none.
        let no_slack = links_by_notification && panel.is_none();
        if no_slack && notify.slack_webhook_url.is_some() {
            return Err(unprocessable(
                "notify.slackWebhookUrl".into(),
                "cannot be used when review links go only by email: the Slack message would \
                 carry the link",
            ));
        }
        let slack = match notify.slack_webhook_url {
            _ if no_slack => None,
            Some(url) => {
                if let Some(p) = crate::delivery::guard::literal_problem(
                    &url,
                    self.config.webhooks.allow_private,
                ) {
                    return Err(Error::unprocessable(vec![FieldError::new(
                        "notify.slackWebhookUrl",
                        p,
                    )]));
                }
                Some(url)
            }
            None => cfg.slack.get(tenant).cloned(),
        };
        Ok(NotifyTarget { email, slack })
    }

    /// A record's deliveries (webhooks and notifications), with their attempts.
    pub async fn deliveries(&self, tenant: &Tenant, id: &str) -> Result<DeliveriesOut> {
        refused(
            "deliveries",
            async {
                let id = parse_id(id)?;
                let list = self.store.deliveries(tenant, id).await?;
                Ok(DeliveriesOut {
                    elicitation_id: id.to_string(),
                    deliveries: list.into_iter().map(DeliveryOut::from).collect(),
                })
            }
            .await,
        )
    }

    /// Deliver a failed delivery again (`not_decided` if it has not failed).
    pub async fn replay_delivery(
        &self,
        tenant: &Tenant,
        id: &str,
        delivery_id: &str,
    ) -> Result<DeliveryOut> {
        refused(
            "replay_delivery",
            async {
                let id = parse_id(id)?;
                let d = self.store.replay_delivery(tenant, id, delivery_id).await?;
                self.nudge.shard(self.store.shard_of(id));
                Ok(DeliveryOut::from(d))
            }
            .await,
        )
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
        let shutdown = self.hub.shutdown_token();
        let first = self.store.status(tenant, id).await?;
        if first.status != Status::Pending || wait.is_zero() || shutdown.is_cancelled() {
            return Ok(StatusOut::from(&first));
        }
        let mut waiter = self.hub.register(id).await?;
        let mut woken = false;
        loop {
            // Read after registering: a change from here on is seen by `waiter`. After a
            // wake-up the record has just changed: read it, not the status cache.
            let read = if woken {
                self.store.status_changed(tenant, id).await
            } else {
                self.store.status(tenant, id).await
            };
            let v = match read {
                Ok(v) => v,
                // The store blinked (Redis restart, failover): keep the caller parked and retry
                // until the window closes; only then report it.
                Err(Error::Unavailable(e))
                    if Instant::now() + STORE_RETRY < window_end && !shutdown.is_cancelled() =>
                {
                    tracing::debug!(error = %e, "await re-read failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(STORE_RETRY) => {}
                        _ = waiter.changed() => {}
                        _ = shutdown.cancelled() => {}
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
            if now >= window_end || shutdown.is_cancelled() {
                return Ok(StatusOut::from(&v));
            }
            // Deadline measured on the store clock, slept on ours; the re-read decides.
            let to_deadline = Duration::from_millis((v.expires_ms - v.now_ms).max(0) as u64 + 1);
            let nap = to_deadline.min(window_end - now);
            woken = false;
            tokio::select! {
                _ = waiter.changed() => woken = true,
                _ = tokio::time::sleep(nap) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    pub async fn result(&self, tenant: &Tenant, id: &str) -> Result<ResultOut> {
        refused("result", self.result_inner(tenant, id).await)
    }

    async fn result_inner(&self, tenant: &Tenant, id: &str) -> Result<ResultOut> {
        let r = self.store.consume(tenant, parse_id(id)?).await?;
        self.nudge.shard(self.store.shard_of(r.id));
        let spec: Spec = decode("spec", &r.spec_json)?;
        let outcome: Outcome = decode("outcome", &r.outcome_json)?;
        Ok(ResultOut {
            elicitation_id: r.id.to_string(),
            kind: spec.kind(),
            status: Status::Consumed,
            decision: outcome.decision,
            context: spec.context,
            answer: outcome.answer,
            comment: outcome.comment,
            decided_at: rfc3339(r.decided_ms),
            decided_by: r.panel.as_ref().map(|p| p.decided_by.clone()),
            votes: r.panel.map(|p| {
                p.votes
                    .into_iter()
                    .map(|v| VoteOut {
                        reviewer: v.reviewer,
                        decision: if v.decision == "declined" {
                            Decision::Declined
                        } else {
                            Decision::Submitted
                        },
                        comment: v.comment,
                        at: rfc3339(v.at),
                    })
                    .collect()
            }),
        })
    }

    pub async fn cancel(&self, tenant: &Tenant, id: &str) -> Result<StateOut> {
        refused("cancel", self.cancel_inner(tenant, id).await)
    }

    async fn cancel_inner(&self, tenant: &Tenant, id: &str) -> Result<StateOut> {
        let id = parse_id(id)?;
        if self.store.cancel(tenant, id).await? {
            metrics::counter!("elicitd_decisions_total", "outcome" => "canceled").increment(1);
            self.nudge.shard(self.store.shard_of(id));
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
        let (events, fetches) = self.store.audit(tenant, id).await?;
        Ok(AuditOut {
            elicitation_id: id.to_string(),
            events: events.into_iter().map(Into::into).collect(),
            fetches,
        })
    }

    /// Open a review token (for the review page). Never changes state.
    /// `client` is the caller's address, for the wrong-token brake (see `limits`).
    pub async fn review(&self, review_token: &str, client: Option<IpAddr>) -> Result<Review> {
        self.limits.check_review(client)?;
        let r = refused(
            "review",
            async {
                let (id, hash) = token_hash(review_token)?;
                let rec = self.store.review(id, &hash).await?;
                review_of(rec, hash)
            }
            .await,
        );
        if matches!(r, Err(Error::NotFound)) {
            self.limits.review_failed(client);
        }
        r
    }

    /// Record that the review page of `review` was shown.
    pub async fn record_view(&self, review: &Review) -> Result<()> {
        let actor = match &review.reviewer {
            Some(r) => format!("reviewer:{r}"),
            None => crate::store::REVIEWER.to_string(),
        };
        self.store
            .record_view(review.id, &review.token_hash, &actor)
            .await
    }

    /// Open `review_token` and decide on it ([`review`](Self::review) then
    /// [`decide_reviewed`](Self::decide_reviewed)).
    pub async fn decide(
        &self,
        review_token: &str,
        input: DecisionInput,
        client: Option<IpAddr>,
    ) -> Result<StateOut> {
        let review = self.review(review_token, client).await?;
        self.decide_reviewed(&review, input).await
    }

    /// A reviewer decides through the JSON route, on a request opened with
    /// [`review`](Self::review). Validation errors are 422 and record nothing; a request that
    /// is no longer pending is `already_decided`, `canceled` or `expired`.
    pub async fn decide_reviewed(&self, review: &Review, input: DecisionInput) -> Result<StateOut> {
        match self.decide_review(review, input).await? {
            Decided::Recorded(status) => Ok(StateOut { status }),
            Decided::Refused(now) => Err(refusal_error(now.status)),
        }
    }

    /// A reviewer decides on a request opened with [`review`](Self::review) (no second read).
    /// Validation errors are 422 and record nothing; a request that is no longer pending comes
    /// back as [`Decided::Refused`] with its state now.
    pub async fn decide_review(&self, review: &Review, input: DecisionInput) -> Result<Decided> {
        refused("decide", self.decide_inner(review, input).await)
    }

    async fn decide_inner(&self, review: &Review, input: DecisionInput) -> Result<Decided> {
        if review.status != Status::Pending {
            count_refusal(review.status);
            return Ok(Decided::Refused(Box::new(review.clone())));
        }
        if let (Some(p), Some(who)) = (&review.panel, &review.reviewer) {
            if p.vote_of(who).is_some() {
                return Err(Error::AlreadyDecided);
            }
        }
        let outcome = input.validate(&review.spec)?;
        let json = serde_json::to_string(&outcome).map_err(Error::internal)?;
        match self
            .store
            .decide(review.id, &review.token_hash, outcome.decision, &json)
            .await?
        {
            DecideReply::Recorded { status, .. } => {
                metrics::counter!("elicitd_decisions_total", "outcome" => status.as_str())
                    .increment(1);
                self.nudge.shard(self.store.shard_of(review.id));
                Ok(Decided::Recorded(status))
            }
            // A named reviewer's vote; the request stays pending until the quorum.
            DecideReply::Voted { .. } => {
                metrics::counter!("elicitd_decisions_total", "outcome" => "voted").increment(1);
                Ok(Decided::Recorded(Status::Pending))
            }
            DecideReply::Refused {
                status,
                outcome_json,
                decided_ms,
            } => {
                count_refusal(status);
                Ok(Decided::Refused(Box::new(Review {
                    status,
                    outcome: outcome_json
                        .as_deref()
                        .map(|o| decode("outcome", o))
                        .transpose()?,
                    decided_ms,
                    ..review.clone()
                })))
            }
        }
    }
}

/// Count a decision refused because the request is no longer pending.
fn count_refusal(status: Status) {
    metrics::counter!("elicitd_transitions_refused_total", "op" => "decide",
        "code" => refusal_error(status).code())
    .increment(1);
}

fn review_of(rec: ReviewRecord, token_hash: String) -> Result<Review> {
    Ok(Review {
        id: rec.id,
        spec: decode("spec", &rec.spec_json)?,
        status: rec.status,
        created_ms: rec.created_ms,
        expires_ms: rec.expires_ms,
        now_ms: rec.now_ms,
        outcome: rec
            .outcome_json
            .as_deref()
            .map(|o| decode("outcome", o))
            .transpose()?,
        decided_ms: rec.decided_ms,
        panel: rec.panel,
        reviewer: rec.reviewer,
        token_hash,
    })
}
