//! In-process store: the same contract as Redis for one process (the default without
//! `ELICITD_REDIS_URL`). One mutex guards all records, so every transition is atomic; the
//! process clock is the only clock. A sweeper drops records at `expires + retention`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use async_trait::async_trait;

use super::{
    agent_actor, AuditEvent, Created, DecideReply, NewRecord, ResultRecord, ReviewRecord,
    StatusView, Store, REVIEWER,
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
}

#[derive(Default)]
struct Inner {
    records: HashMap<ElicitationId, Record>,
    by_token: HashMap<String, ElicitationId>,
    /// (tenant, key hash) → (id, fingerprint)
    idem: HashMap<(Tenant, String), (ElicitationId, String)>,
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
                } = &mut *g;
                by_token.retain(|_, id| records.contains_key(id));
                idem.retain(|_, (id, _)| records.contains_key(id));
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
                    });
                }
            }
            g.idem.insert(k, (rec.id, idem.fingerprint.clone()));
        }
        let expires_ms = now + rec.expires_in_ms;
        g.by_token.insert(rec.token_hash.clone(), rec.id);
        g.records.insert(
            rec.id,
            Record {
                audit: vec![AuditEvent {
                    kind: "created".into(),
                    at: now,
                    actor: agent_actor(&rec.tenant),
                    decision: None,
                }],
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
        Ok(Created {
            id: rec.id,
            created_ms: now,
            expires_ms,
            token_hash: rec.token_hash,
            token_salt: rec.token_salt,
            status: Status::Pending,
            replayed: false,
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
        })
    }

    async fn review(&self, token_hash: &str) -> Result<ReviewRecord> {
        let now = local_now_ms();
        let mut g = self.lock();
        let id = *g.by_token.get(token_hash).ok_or(Error::NotFound)?;
        let r = live(&mut g, &id, self.retention_ms, now).ok_or(Error::NotFound)?;
        if !ct_eq(&r.token_hash, token_hash) {
            return Err(Error::NotFound);
        }
        Ok(ReviewRecord {
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
        let r = live(&mut g, &id, self.retention_ms, now)
            .filter(|r| ct_eq(&r.token_hash, token_hash))
            .ok_or(Error::NotFound)?;
        let status = Status::effective(r.status, now, r.expires_ms);
        if status != Status::Pending {
            return Ok(DecideReply::Refused {
                status,
                outcome_json: r.outcome_json.clone(),
                decided_ms: r.decided_ms,
            });
        }
        let status = decision.status();
        r.status = status;
        r.outcome_json = Some(outcome_json.to_string());
        r.decided_ms = Some(now);
        r.audit.push(AuditEvent {
            kind: "decided".into(),
            at: now,
            actor: REVIEWER.into(),
            decision: Some(decision.as_str().into()),
        });
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
        });
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
            });
        }
        let spec_json = r.spec_json.clone();
        drop(g);
        if first {
            self.hub.wake(id);
        }
        Ok(ResultRecord {
            id,
            spec_json,
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

    async fn record_view(&self, id: ElicitationId, token_hash: &str) -> Result<()> {
        let now = local_now_ms();
        let mut g = self.lock();
        let r = live(&mut g, &id, self.retention_ms, now)
            .filter(|r| ct_eq(&r.token_hash, token_hash))
            .ok_or(Error::NotFound)?;
        if r.audit.len() >= super::MAX_AUDIT_FOR_VIEWS {
            return Ok(());
        }
        r.audit.push(AuditEvent {
            kind: "viewed".into(),
            at: now,
            actor: REVIEWER.into(),
            decision: None,
        });
        Ok(())
    }

    async fn ready(&self) -> Result<()> {
        Ok(())
    }
}
