//! In-process store: the same contract as Redis for one process (the default without
//! `ELICITD_REDIS_URL`). One mutex guards all records, so every transition — with its webhook
//! event, the outbox — is atomic; the process clock is the only clock. A sweeper drops records
//! (and their deliveries) at `expires + retention`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use async_trait::async_trait;

use super::{
    agent_actor, event_ids, AuditEvent, Channel, Created, DecideReply, Delivery, DeliveryState,
    NewRecord, Notice, NotifyTarget, Panel, ResultRecord, ReviewRecord, StatusView, Store,
    WebhookTarget, REVIEWER,
};
use crate::{
    error::{Error, Result},
    kinds::Kind,
    model::{local_now_ms, Decision, ElicitationId, Status, Tenant},
    token::ct_eq,
    wake::Hub,
};

struct Record {
    tenant: Tenant,
    kind: Kind,
    spec_json: String,
    status: Status,
    created_ms: i64,
    expires_ms: i64,
    token_hash: String,
    token_salt: String,
    outcome_json: Option<String>,
    decided_ms: Option<i64>,
    audit: Vec<AuditEvent>,
    fetches: u64,
    webhook: Option<WebhookTarget>,
    notify: NotifyTarget,
    panel: Option<Panel>,
    /// Delivery ids, oldest first.
    deliveries: Vec<String>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<ElicitationId, Record>,
    by_token: HashMap<String, ElicitationId>,
    /// (tenant, key hash) → (id, fingerprint)
    idem: HashMap<(Tenant, String), (ElicitationId, String)>,
    /// Every delivery by id (the queue is their `next_at`).
    deliveries: HashMap<String, Delivery>,
}

impl Inner {
    /// The outbox: write the events of a transition of `id`, one per channel that has a target
    /// and takes the event (see `lua/outbox.lua`).
    fn event(&mut self, id: ElicitationId, event: &str, now: i64) {
        let Some(r) = self.records.get_mut(&id) else {
            return;
        };
        let notice = matches!(
            event,
            "created" | "submitted" | "declined" | "canceled" | "expired"
        );
        let ids = event_ids(id, event);
        for (channel, did) in Channel::ALL.into_iter().zip(ids) {
            let (url, to, include_result) = match channel {
                Channel::Webhook => match &r.webhook {
                    Some(w) if event != "created" => (w.url.clone(), Vec::new(), w.include_result),
                    _ => continue,
                },
                Channel::Email if notice && !r.notify.email.is_empty() => {
                    (String::new(), r.notify.email.clone(), false)
                }
                Channel::Slack if notice => match &r.notify.slack {
                    Some(url) => (url.clone(), Vec::new(), false),
                    None => continue,
                },
                _ => continue,
            };
            if self.deliveries.contains_key(&did) {
                continue;
            }
            r.deliveries.push(did.clone());
            self.deliveries.insert(
                did.clone(),
                Delivery {
                    id: did,
                    elicitation_id: id.to_string(),
                    event: event.to_string(),
                    kind: r.kind.as_str().to_string(),
                    tenant: r.tenant.to_string(),
                    channel,
                    url,
                    to,
                    sent: Vec::new(),
                    refused: Vec::new(),
                    include_result,
                    event_ms: now,
                    decided_ms: r.decided_ms,
                    state: DeliveryState::Pending,
                    next_at: Some(now),
                    attempts: Vec::new(),
                    lease: None,
                    replays: None,
                    schedule_from: 0,
                },
            );
        }
    }
}

/// Whether `token_hash` opens `r`: the request's token, or (with named reviewers, whose tokens
/// replace it) a reviewer's, named in the answer.
fn opens(r: &Record, token_hash: &str) -> Result<Option<String>> {
    match &r.panel {
        Some(p) => p
            .reviewer_of(token_hash)
            .map(|rv| Some(rv.id.clone()))
            .ok_or(Error::NotFound),
        None if ct_eq(&r.token_hash, token_hash) => Ok(None),
        None => Err(Error::NotFound),
    }
}

/// The in-memory store.
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    hub: Arc<Hub>,
    retention_ms: i64,
}

impl MemoryStore {
    pub fn new(hub: Arc<Hub>, retention: Duration) -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let retention_ms = retention.as_millis() as i64;
        spawn_sweeper(Arc::downgrade(&inner), retention_ms);
        MemoryStore {
            inner,
            hub,
            retention_ms,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn spawn_sweeper(inner: Weak<Mutex<Inner>>, retention_ms: i64) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(30)).await;
                let Some(inner) = inner.upgrade() else { return };
                let now = local_now_ms();
                let mut g = inner.lock().unwrap_or_else(|p| p.into_inner());
                g.records.retain(|_, r| r.expires_ms + retention_ms > now);
                let Inner {
                    records,
                    by_token,
                    idem,
                    deliveries,
                } = &mut *g;
                by_token.retain(|_, id| records.contains_key(id));
                idem.retain(|_, (id, _)| records.contains_key(id));
                deliveries.retain(|_, d| {
                    ElicitationId::parse(&d.elicitation_id)
                        .is_some_and(|id| records.contains_key(&id))
                });
            }
        });
    }
}

fn live<'a>(
    inner: &'a mut Inner,
    id: &ElicitationId,
    retention_ms: i64,
    now: i64,
) -> Option<&'a mut Record> {
    // Records past their retention read as gone even before the sweeper runs.
    inner
        .records
        .get_mut(id)
        .filter(|r| r.expires_ms + retention_ms > now)
}

fn owned<'a>(
    inner: &'a mut Inner,
    tenant: &Tenant,
    id: &ElicitationId,
    retention_ms: i64,
    now: i64,
) -> Result<&'a mut Record> {
    live(inner, id, retention_ms, now)
        .filter(|r| &r.tenant == tenant)
        .ok_or(Error::NotFound)
}

#[async_trait]
impl Store for MemoryStore {
    async fn create(&self, rec: NewRecord) -> Result<Created> {
        let now = local_now_ms();
        let mut g = self.lock();
        if let Some(idem) = &rec.idempotency {
            let k = (rec.tenant.clone(), idem.key_hash.clone());
            if let Some((id, fp)) = g.idem.get(&k).cloned() {
                if let Some(r) = live(&mut g, &id, self.retention_ms, now) {
                    if fp != idem.fingerprint {
                        return Err(Error::invalid(
                            "idempotencyKey was already used for a different request",
                        ));
                    }
                    return Ok(Created {
                        id,
                        created_ms: r.created_ms,
                        expires_ms: r.expires_ms,
                        token_hash: r.token_hash.clone(),
                        token_salt: r.token_salt.clone(),
                        status: Status::effective(r.status, now, r.expires_ms),
                        replayed: true,
                        panel: r.panel.clone(),
                    });
                }
            }
            g.idem.insert(k, (rec.id, idem.fingerprint.clone()));
        }
        let expires_ms = now + rec.expires_in_ms;
        // Named reviewers: their tokens open the page, the request's own token nothing.
        match &rec.panel {
            Some(p) => {
                for r in &p.reviewers {
                    g.by_token.insert(r.token_hash.clone(), rec.id);
                }
            }
            None => {
                g.by_token.insert(rec.token_hash.clone(), rec.id);
            }
        }
        g.records.insert(
            rec.id,
            Record {
                audit: vec![AuditEvent {
                    kind: "created".into(),
                    at: now,
                    actor: agent_actor(&rec.tenant),
                    decision: None,
                    delivery: None,
                }],
                webhook: rec.webhook,
                notify: rec.notify,
                panel: rec.panel.clone(),
                deliveries: Vec::new(),
                tenant: rec.tenant,
                kind: rec.kind,
                spec_json: rec.spec_json,
                status: Status::Pending,
                created_ms: now,
                expires_ms,
                token_hash: rec.token_hash.clone(),
                token_salt: rec.token_salt.clone(),
                outcome_json: None,
                decided_ms: None,
                fetches: 0,
            },
        );
        g.event(rec.id, "created", now);
        Ok(Created {
            id: rec.id,
            created_ms: now,
            expires_ms,
            token_hash: rec.token_hash,
            token_salt: rec.token_salt,
            status: Status::Pending,
            replayed: false,
            panel: rec.panel,
        })
    }

    async fn status(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = owned(&mut g, tenant, &id, self.retention_ms, now)?;
        Ok(StatusView {
            id,
            kind: r.kind,
            status: Status::effective(r.status, now, r.expires_ms),
            created_ms: r.created_ms,
            expires_ms: r.expires_ms,
            decided_ms: r.decided_ms,
            now_ms: now,
            votes: r.panel.as_ref().map(|p| (p.submitted(), p.quorum)),
        })
    }

    async fn review(&self, id: Option<ElicitationId>, token_hash: &str) -> Result<ReviewRecord> {
        let now = local_now_ms();
        let mut g = self.lock();
        // (`opens` below checks that the hash opens the record, whichever way it was found.)
        let id = match id {
            Some(id) => id,
            None => *g.by_token.get(token_hash).ok_or(Error::NotFound)?,
        };
        let r = live(&mut g, &id, self.retention_ms, now).ok_or(Error::NotFound)?;
        let reviewer = opens(r, token_hash)?;
        Ok(ReviewRecord {
            panel: r.panel.clone(),
            reviewer,
            id,
            spec_json: r.spec_json.clone(),
            status: Status::effective(r.status, now, r.expires_ms),
            created_ms: r.created_ms,
            expires_ms: r.expires_ms,
            now_ms: now,
            outcome_json: r.outcome_json.clone(),
            decided_ms: r.decided_ms,
        })
    }

    async fn decide(
        &self,
        id: ElicitationId,
        token_hash: &str,
        decision: Decision,
        outcome_json: &str,
    ) -> Result<DecideReply> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = live(&mut g, &id, self.retention_ms, now).ok_or(Error::NotFound)?;
        let reviewer = opens(r, token_hash)?;
        let status = Status::effective(r.status, now, r.expires_ms);
        if status != Status::Pending {
            return Ok(DecideReply::Refused {
                status,
                outcome_json: r.outcome_json.clone(),
                decided_ms: r.decided_ms,
            });
        }
        let actor = match (&mut r.panel, &reviewer) {
            (Some(panel), Some(who)) => {
                // A vote (see lua/decide.lua): once per reviewer; a decline or the vote that
                // completes the quorum decides.
                if panel.vote_of(who).is_some() {
                    return Err(Error::AlreadyDecided);
                }
                let comment = serde_json::from_str::<serde_json::Value>(outcome_json)
                    .ok()
                    .and_then(|v| v["comment"].as_str().map(str::to_string));
                panel.votes.push(super::Vote {
                    reviewer: who.clone(),
                    decision: decision.as_str().into(),
                    comment,
                    at: now,
                    nonce: None,
                });
                let actor = format!("reviewer:{who}");
                r.audit.push(AuditEvent {
                    kind: "voted".into(),
                    at: now,
                    actor: actor.clone(),
                    decision: Some(decision.as_str().into()),
                    delivery: None,
                });
                let (submitted, needed) = (panel.submitted(), panel.quorum);
                if decision == Decision::Declined {
                    panel.decided_by = vec![who.clone()];
                } else if submitted >= needed {
                    panel.decided_by = panel
                        .votes
                        .iter()
                        .filter(|v| v.decision == "submitted")
                        .map(|v| v.reviewer.clone())
                        .collect();
                } else {
                    return Ok(DecideReply::Voted { submitted, needed });
                }
                actor
            }
            _ => REVIEWER.to_string(),
        };
        let status = decision.status();
        r.status = status;
        r.outcome_json = Some(outcome_json.to_string());
        r.decided_ms = Some(now);
        r.audit.push(AuditEvent {
            kind: "decided".into(),
            at: now,
            actor,
            decision: Some(decision.as_str().into()),
            delivery: None,
        });
        g.event(id, decision.as_str(), now);
        drop(g);
        self.hub.wake(id);
        Ok(DecideReply::Recorded {
            status,
            decided_ms: now,
        })
    }

    async fn cancel(&self, tenant: &Tenant, id: ElicitationId) -> Result<bool> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = owned(&mut g, tenant, &id, self.retention_ms, now)?;
        match Status::effective(r.status, now, r.expires_ms) {
            Status::Pending => {}
            Status::Canceled => return Ok(false),
            Status::Expired => return Err(Error::Expired),
            _ => return Err(Error::AlreadyDecided),
        }
        r.status = Status::Canceled;
        r.audit.push(AuditEvent {
            kind: "canceled".into(),
            at: now,
            actor: agent_actor(tenant),
            decision: None,
            delivery: None,
        });
        g.event(id, "canceled", now);
        drop(g);
        self.hub.wake(id);
        Ok(true)
    }

    async fn consume(&self, tenant: &Tenant, id: ElicitationId) -> Result<ResultRecord> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = owned(&mut g, tenant, &id, self.retention_ms, now)?;
        let first = match Status::effective(r.status, now, r.expires_ms) {
            Status::Submitted | Status::Declined => true,
            Status::Consumed => false,
            Status::Pending => return Err(Error::NotDecided),
            Status::Canceled => return Err(Error::Canceled),
            Status::Expired => return Err(Error::Expired),
        };
        let (Some(outcome_json), Some(decided_ms)) = (r.outcome_json.clone(), r.decided_ms) else {
            return Err(Error::internal("decided record without outcome"));
        };
        r.status = Status::Consumed;
        r.fetches += 1;
        if r.audit.len() < super::MAX_AUDIT_FOR_VIEWS {
            r.audit.push(AuditEvent {
                kind: "fetched".into(),
                at: now,
                actor: agent_actor(tenant),
                decision: None,
                delivery: None,
            });
        }
        let spec_json = r.spec_json.clone();
        let panel = r.panel.clone();
        if first {
            g.event(id, "consumed", now);
        }
        drop(g);
        if first {
            self.hub.wake(id);
        }
        Ok(ResultRecord {
            id,
            spec_json,
            panel,
            outcome_json,
            decided_ms,
        })
    }

    async fn audit(&self, tenant: &Tenant, id: ElicitationId) -> Result<(Vec<AuditEvent>, u64)> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = owned(&mut g, tenant, &id, self.retention_ms, now)?;
        Ok((r.audit.clone(), r.fetches))
    }

    async fn record_view(&self, id: ElicitationId, token_hash: &str, actor: &str) -> Result<()> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = live(&mut g, &id, self.retention_ms, now).ok_or(Error::NotFound)?;
        opens(r, token_hash)?;
        if r.audit.len() >= super::MAX_AUDIT_FOR_VIEWS {
            return Ok(());
        }
        r.audit.push(AuditEvent {
            kind: "viewed".into(),
            at: now,
            actor: actor.into(),
            decision: None,
            delivery: None,
        });
        Ok(())
    }

    async fn ready(&self) -> Result<()> {
        Ok(())
    }

    fn shards(&self) -> u16 {
        1
    }

    fn shard_of(&self, _id: ElicitationId) -> u16 {
        0
    }

    async fn sweep_deadlines(&self, _shard: u16) -> Result<usize> {
        let now = local_now_ms();
        let mut g = self.lock();
        let due: Vec<ElicitationId> = g
            .records
            .iter()
            .filter(|(id, r)| {
                (r.webhook.is_some() || !r.notify.is_empty())
                    && r.status == Status::Pending
                    && now >= r.expires_ms
                    && !r
                        .deliveries
                        .iter()
                        .any(|d| event_ids(**id, "expired").contains(d))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            g.event(*id, "expired", now);
        }
        Ok(due.len())
    }

    async fn claim_deliveries(
        &self,
        _shard: u16,
        lease: Duration,
        max: usize,
    ) -> Result<Vec<Delivery>> {
        let now = local_now_ms();
        let token = crate::token::random_b64(12);
        let mut g = self.lock();
        let mut due: Vec<&mut Delivery> = g
            .deliveries
            .values_mut()
            .filter(|d| d.state == DeliveryState::Pending && d.next_at.is_some_and(|t| t <= now))
            .collect();
        due.sort_by_key(|d| d.next_at);
        Ok(due
            .into_iter()
            .take(max)
            .map(|d| {
                d.lease = Some(token.clone());
                // Leased: due again when the lease runs out (the worker died).
                let out = d.clone();
                d.next_at = Some(now + lease.as_millis() as i64);
                out
            })
            .collect())
    }

    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        next_at: Option<i64>,
        audit: Option<AuditEvent>,
    ) -> Result<bool> {
        let mut g = self.lock();
        let Some(current) = g.deliveries.get_mut(&delivery.id) else {
            return Ok(false);
        };
        if current.lease != delivery.lease {
            return Ok(false);
        }
        *current = Delivery {
            next_at,
            ..delivery.clone()
        };
        if let (Some(a), Some(id)) = (audit, ElicitationId::parse(&delivery.elicitation_id)) {
            if let Some(r) = g.records.get_mut(&id) {
                r.audit.push(a);
            }
        }
        Ok(true)
    }

    async fn deliveries(&self, tenant: &Tenant, id: ElicitationId) -> Result<Vec<Delivery>> {
        let now = local_now_ms();
        let mut g = self.lock();
        let ids = owned(&mut g, tenant, &id, self.retention_ms, now)?
            .deliveries
            .clone();
        Ok(ids
            .iter()
            .filter_map(|d| g.deliveries.get(d).cloned())
            .collect())
    }

    async fn replay_delivery(
        &self,
        tenant: &Tenant,
        id: ElicitationId,
        delivery_id: &str,
    ) -> Result<Delivery> {
        let now = local_now_ms();
        let mut g = self.lock();
        let mine = owned(&mut g, tenant, &id, self.retention_ms, now)?
            .deliveries
            .iter()
            .any(|d| d == delivery_id);
        let d = g
            .deliveries
            .get_mut(delivery_id)
            .filter(|_| mine)
            .ok_or(Error::NotFound)?;
        if d.state != DeliveryState::Failed {
            return Err(Error::NotDecided);
        }
        d.state = DeliveryState::Pending;
        d.next_at = Some(now);
        d.lease = None;
        d.replays = Some(d.replays.unwrap_or(0) + 1);
        d.schedule_from = d.attempts.len();
        d.refused.clear();
        Ok(d.clone())
    }

    async fn queue_stats(&self) -> Result<(u64, Option<i64>)> {
        let g = self.lock();
        let pending = g
            .deliveries
            .values()
            .filter(|d| d.state == DeliveryState::Pending);
        let (n, oldest) = pending.fold((0u64, None::<i64>), |(n, o), d| {
            (
                n + 1,
                match (o, d.next_at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            )
        });
        Ok((n, oldest))
    }

    async fn notice_of(&self, id: ElicitationId) -> Result<Option<Notice>> {
        let g = self.lock();
        Ok(g.records.get(&id).map(|r| Notice {
            spec_json: r.spec_json.clone(),
            token_salt: r.token_salt.clone(),
            token_hash: r.token_hash.clone(),
            expires_ms: r.expires_ms,
            panel: r.panel.clone(),
            status: r.status.as_str().to_string(),
        }))
    }

    async fn outcome_of(&self, id: ElicitationId) -> Result<Option<(String, String)>> {
        let g = self.lock();
        Ok(g.records
            .get(&id)
            .and_then(|r| r.outcome_json.clone().map(|o| (r.spec_json.clone(), o))))
    }
}
