//! The Redis store (fleet mode): one Lua script per transition (`lua/`), batched record reads
//! (`read_batch`), and the pub/sub feeder that wakes local waiters.
//!
//! - Scripts are compiled in, called by SHA and reloaded on `NOSCRIPT` (a restart, failover or
//!   `SCRIPT FLUSH` empties the cache), so a flush costs one extra round trip, never a failure.
//! - Record reads (status, review, replay) run `TIME` then `HMGET` atomically in `lua/read.lua`,
//!   batched across concurrent reads, so any decision accepted before the deadline was applied
//!   before that `TIME` — a read can never say `expired` for a request decided in time (DESIGN §3).
//! - The record key is also its shard channel: decide/cancel/consume `SPUBLISH` on it; the
//!   subscriber `SSUBSCRIBE`s per id with waiters (Redis ≥ 7.0; Cluster-ready).
//! - Connection loss maps to `unavailable` (503) at once instead of queueing behind a reconnect.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use fred::{
    clients::{Pool, SubscriberClient},
    error::{Error as RedisError, ErrorKind},
    interfaces::{
        ClientLike, EventInterface, HashesInterface, KeysInterface, ListInterface, PubsubInterface,
    },
    prelude::*,
    types::{
        config::{Config as RedisConfig, ReconnectPolicy, UnresponsiveConfig},
        scripts::Script,
        Expiration, SetOptions,
    },
    util::redis_keyslot,
};

use super::{
    agent_actor, keys::Keys, read_batch::ReadBatcher, AuditEvent, Created, NewRecord, ResultView,
    ReviewView, StatusView, Store, REVIEWER,
};
use tokio::time::Instant;

use crate::{
    error::{Error, Result},
    model::{ElicitationId, Kind, Outcome, Spec, Status, Tenant},
    telemetry::record_store_op,
    token::ct_eq,
    wake::{BoxFuture, Hub, SubscriptionBackend},
};

struct Scripts {
    create: Script,
    decide: Script,
    cancel: Script,
    consume: Script,
    view: Script,
    ready: Script,
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            create: Script::from_lua(include_str!("../../lua/create.lua")),
            decide: Script::from_lua(include_str!("../../lua/decide.lua")),
            cancel: Script::from_lua(include_str!("../../lua/cancel.lua")),
            consume: Script::from_lua(include_str!("../../lua/consume.lua")),
            view: Script::from_lua(include_str!("../../lua/view.lua")),
            ready: Script::from_lua(include_str!("../../lua/ready.lua")),
        }
    }
}

/// Settings the Redis store takes from `Config`.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
    pub prefix: String,
    pub pool_size: usize,
    pub retention: Duration,
    /// Per-command timeout; also bounds how long a call waits on a dead server.
    pub command_timeout: Duration,
}

/// The Redis-backed store.
pub struct RedisStore {
    pool: Pool,
    subscriber: SubscriberClient,
    keys: Keys,
    scripts: Arc<Scripts>,
    retention_ms: i64,
    reads: ReadBatcher,
}

pub(super) fn map_err(e: RedisError) -> Error {
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Cluster => Error::Unavailable(Box::new(e)),
        _ if e.details().starts_with("LOADING")
            || e.details().starts_with("BUSY")
            || e.details().starts_with("TRYAGAIN")
            || e.details().starts_with("CLUSTERDOWN") =>
        {
            Error::Unavailable(Box::new(e))
        }
        _ => Error::Internal(Box::new(e)),
    }
}

fn unavailable(msg: &'static str) -> Error {
    Error::Unavailable(msg.into())
}

/// Decode a script reply `{"ok", …}` / `{"err", code}` into its payload.
fn decode(reply: Vec<Option<String>>) -> Result<Vec<Option<String>>> {
    match reply.first().and_then(|s| s.as_deref()) {
        Some("ok") => Ok(reply.into_iter().skip(1).collect()),
        Some("err") => Err(match reply.get(1).and_then(|s| s.as_deref()) {
            Some("not_found") => Error::NotFound,
            Some("expired") => Error::Expired,
            Some("canceled") => Error::Canceled,
            Some("already_decided") => Error::AlreadyDecided,
            Some("not_decided") => Error::NotDecided,
            other => Error::internal(format!("unexpected script error {other:?}")),
        }),
        _ => Err(Error::internal("malformed script reply")),
    }
}

fn int(s: Option<&String>) -> Result<i64> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::internal("record field is not an integer"))
}

pub(super) fn redis_now(time: &[String]) -> Result<i64> {
    match time {
        [s, us] => {
            let s: i64 = s.parse().map_err(|_| Error::internal("bad TIME"))?;
            let us: i64 = us.parse().map_err(|_| Error::internal("bad TIME"))?;
            Ok(s * 1000 + us / 1000)
        }
        _ => Err(Error::internal("bad TIME reply")),
    }
}

impl RedisStore {
    /// Build clients, connect (waiting up to a few seconds), load scripts and start the
    /// subscriber feeder for `hub`. A Redis that is down at start is not fatal: the replica
    /// serves 503 and `/readyz` fails until it answers.
    pub async fn connect(
        s: RedisSettings,
        hub: Arc<Hub>,
    ) -> std::result::Result<Arc<Self>, RedisError> {
        let mut b = Builder::from_config(RedisConfig::from_url(&s.url)?);
        b.with_config(|c| c.fail_fast = false)
            .with_connection_config(|c| {
                c.connection_timeout = Duration::from_secs(2);
                c.internal_command_timeout = Duration::from_secs(2);
                c.max_command_attempts = 2;
                c.unresponsive = UnresponsiveConfig {
                    max_timeout: Some(Duration::from_secs(5)),
                    interval: Duration::from_secs(1),
                };
            })
            .with_performance_config(|p| {
                p.default_command_timeout = s.command_timeout;
                p.broadcast_channel_capacity = 8192;
            })
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2));
        let pool = b.build_pool(s.pool_size)?;
        let subscriber = b.build_subscriber_client()?;
        pool.connect_pool();
        subscriber.connect();
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = pool.wait_for_connect().await;
            let _ = subscriber.wait_for_connect().await;
        })
        .await;
        let reads = ReadBatcher::spawn(pool.clone());
        let store = Arc::new(RedisStore {
            reads,
            pool,
            subscriber,
            keys: Keys::new(&s.prefix),
            scripts: Arc::new(Scripts::new()),
            retention_ms: s.retention.as_millis() as i64,
        });
        store.spawn_feeder(hub.clone());
        hub.set_backend(store.clone());
        Ok(store)
    }

    /// A connected command client, or `unavailable` at once.
    fn client(&self) -> Result<&Client> {
        let c = self.pool.next_connected();
        if c.is_connected() {
            Ok(c)
        } else {
            Err(unavailable("redis is not connected"))
        }
    }

    async fn eval(
        &self,
        op: &'static str,
        script: &Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<Option<String>>> {
        let started = Instant::now();
        let reply: Result<Vec<Option<String>>> = match self.client() {
            Ok(c) => script
                .evalsha_with_reload(c, keys, args)
                .await
                .map_err(map_err),
            Err(e) => Err(e),
        };
        record_store_op(op, started, &reply);
        decode(reply?)
    }

    /// Forward pub/sub messages to the hub; on reconnect or lag, wake everyone to re-read.
    fn spawn_feeder(&self, hub: Arc<Hub>) {
        let mut messages = self.subscriber.message_rx();
        let mut reconnects = self.subscriber.reconnect_rx();
        let keys = self.keys.clone();
        let sub = self.subscriber.clone();
        let weak = Arc::downgrade(&hub);
        drop(hub);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                tokio::select! {
                    m = messages.recv() => match m {
                        Ok(m) => {
                            let Some(hub) = weak.upgrade() else { return };
                            if let Some(id) = keys.id_of_channel(&m.channel) {
                                hub.wake(id);
                            }
                        }
                        Err(RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "pub/sub receiver lagged; waking all waiters");
                            let Some(hub) = weak.upgrade() else { return };
                            hub.wake_all();
                        }
                        Err(RecvError::Closed) => return,
                    },
                    r = reconnects.recv() => match r {
                        Ok(_) | Err(RecvError::Lagged(_)) => {
                            tracing::info!("pub/sub reconnected; resubscribing and waking all waiters");
                            metrics::counter!("elicitd_pubsub_reconnects_total").increment(1);
                            resubscribe(&sub).await;
                            let Some(hub) = weak.upgrade() else { return };
                            hub.wake_all();
                        }
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
    }

    async fn load_record(
        &self,
        op: &'static str,
        id: ElicitationId,
        fields: &'static [&'static str],
    ) -> Result<(i64, Vec<Option<String>>)> {
        let started = Instant::now();
        // Fail at once (503) while Redis is down rather than queue behind a reconnect.
        let out = match self.client() {
            Ok(_) => self.reads.read(self.keys.record(id), fields).await,
            Err(e) => Err(e),
        };
        record_store_op(op, started, &out);
        out
    }

    async fn create_record(&self, rec: &NewRecord) -> Result<(i64, i64)> {
        let ttl_ms = rec.expires_in_ms + self.retention_ms + 60_000;
        let _: () = self
            .client()?
            .set(
                self.keys.review_index(&rec.token_hash),
                rec.id.to_string(),
                Some(Expiration::PX(ttl_ms)),
                None,
                false,
            )
            .await
            .map_err(map_err)?;
        let out = self
            .eval(
                "create",
                &self.scripts.create,
                vec![self.keys.record(rec.id), self.keys.audit(rec.id)],
                vec![
                    rec.expires_in_ms.to_string(),
                    self.retention_ms.to_string(),
                    rec.kind.as_str().into(),
                    rec.tenant.to_string(),
                    rec.spec_json.clone(),
                    rec.token_hash.clone(),
                    rec.token_salt.clone(),
                    agent_actor(&rec.tenant),
                ],
            )
            .await?;
        Ok((
            int(out.first().and_then(Option::as_ref))?,
            int(out.get(1).and_then(Option::as_ref))?,
        ))
    }

    /// The first request for an idempotency key, if it still exists.
    async fn replay(
        &self,
        tenant: &Tenant,
        idem_key: &str,
        fingerprint: &str,
    ) -> Result<Option<Created>> {
        let v: Option<String> = self.client()?.get(idem_key).await.map_err(map_err)?;
        let Some(v) = v else { return Ok(None) };
        let (id, fp) = v
            .split_once('|')
            .ok_or_else(|| Error::internal("bad idempotency entry"))?;
        let id = ElicitationId::parse(id).ok_or_else(|| Error::internal("bad idempotency id"))?;
        let (now, f) = self
            .load_record(
                "replay",
                id,
                &[
                    "tenant",
                    "status",
                    "created_ms",
                    "expires_ms",
                    "token_hash",
                    "token_salt",
                ],
            )
            .await?;
        if f[0].as_deref() != Some(tenant.as_str()) {
            return Ok(None);
        }
        if fp != fingerprint {
            return Err(Error::invalid(
                "idempotencyKey was already used for a different request",
            ));
        }
        let stored = f[1]
            .as_deref()
            .and_then(Status::parse)
            .ok_or_else(|| Error::internal("bad status"))?;
        let expires_ms = int(f[3].as_ref())?;
        Ok(Some(Created {
            id,
            created_ms: int(f[2].as_ref())?,
            expires_ms,
            token_hash: f[4].clone().unwrap_or_default(),
            token_salt: f[5].clone().unwrap_or_default(),
            status: Status::effective(stored, now, expires_ms),
            replayed: true,
        }))
    }

    async fn delete_record(&self, rec: &NewRecord) {
        if let Ok(c) = self.client() {
            let _: std::result::Result<i64, _> = c
                .del(vec![self.keys.record(rec.id), self.keys.audit(rec.id)])
                .await;
            let _: std::result::Result<i64, _> =
                c.del(self.keys.review_index(&rec.token_hash)).await;
        }
    }
}

#[async_trait]
impl Store for RedisStore {
    async fn create(&self, rec: NewRecord) -> Result<Created> {
        let idem_key = rec.idempotency.as_ref().map(|i| {
            (
                self.keys.idempotency(&rec.tenant, &i.key_hash),
                i.fingerprint.clone(),
            )
        });
        if let Some((key, fp)) = &idem_key {
            if let Some(first) = self.replay(&rec.tenant, key, fp).await? {
                return Ok(first);
            }
        }
        // Order: review index, record, then the idempotency claim. A crash in between leaves at
        // worst an orphan that expires by TTL; a claimed key always points at a full record.
        let (created_ms, expires_ms) = self.create_record(&rec).await?;
        if let Some((key, fp)) = &idem_key {
            let ttl_ms = rec.expires_in_ms + self.retention_ms;
            let claimed: Option<String> = self
                .client()?
                .set(
                    key.clone(),
                    format!("{}|{fp}", rec.id),
                    Some(Expiration::PX(ttl_ms)),
                    Some(SetOptions::NX),
                    false,
                )
                .await
                .map_err(map_err)?;
            if claimed.is_none() {
                // Another create with the same key won the race: withdraw ours, return theirs.
                self.delete_record(&rec).await;
                return self
                    .replay(&rec.tenant, key, fp)
                    .await?
                    .ok_or_else(|| Error::internal("idempotency winner vanished"));
            }
        }
        Ok(Created {
            id: rec.id,
            created_ms,
            expires_ms,
            token_hash: rec.token_hash,
            token_salt: rec.token_salt,
            status: Status::Pending,
            replayed: false,
        })
    }

    async fn status(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView> {
        let (now, f) = self
            .load_record(
                "status",
                id,
                &[
                    "tenant",
                    "status",
                    "kind",
                    "created_ms",
                    "expires_ms",
                    "decided_ms",
                ],
            )
            .await?;
        if f[0].as_deref() != Some(tenant.as_str()) {
            return Err(Error::NotFound);
        }
        let stored = f[1]
            .as_deref()
            .and_then(Status::parse)
            .ok_or_else(|| Error::internal("bad status"))?;
        let expires_ms = int(f[4].as_ref())?;
        Ok(StatusView {
            id,
            kind: f[2]
                .as_deref()
                .and_then(Kind::parse)
                .ok_or_else(|| Error::internal("bad kind"))?,
            status: Status::effective(stored, now, expires_ms),
            created_ms: int(f[3].as_ref())?,
            expires_ms,
            decided_ms: f[5].as_ref().and_then(|s| s.parse().ok()),
            now_ms: now,
        })
    }

    async fn review(&self, token_hash: &str) -> Result<ReviewView> {
        let id: Option<String> = self
            .client()?
            .get(self.keys.review_index(token_hash))
            .await
            .map_err(map_err)?;
        let id = id
            .as_deref()
            .and_then(ElicitationId::parse)
            .ok_or(Error::NotFound)?;
        let (now, f) = self
            .load_record(
                "review",
                id,
                &[
                    "token_hash",
                    "status",
                    "spec",
                    "created_ms",
                    "expires_ms",
                    "outcome",
                    "decided_ms",
                ],
            )
            .await?;
        if !f[0].as_deref().is_some_and(|h| ct_eq(h, token_hash)) {
            return Err(Error::NotFound);
        }
        let stored = f[1]
            .as_deref()
            .and_then(Status::parse)
            .ok_or_else(|| Error::internal("bad status"))?;
        let spec: Spec =
            serde_json::from_str(f[2].as_deref().unwrap_or_default()).map_err(Error::internal)?;
        let expires_ms = int(f[4].as_ref())?;
        let outcome = match f[5].as_deref() {
            Some(o) => Some(serde_json::from_str::<Outcome>(o).map_err(Error::internal)?),
            None => None,
        };
        Ok(ReviewView {
            id,
            spec,
            status: Status::effective(stored, now, expires_ms),
            created_ms: int(f[3].as_ref())?,
            expires_ms,
            now_ms: now,
            outcome,
            decided_ms: f[6].as_ref().and_then(|s| s.parse().ok()),
        })
    }

    async fn decide(
        &self,
        id: ElicitationId,
        token_hash: &str,
        outcome: &Outcome,
    ) -> Result<(Status, i64)> {
        let json = serde_json::to_string(outcome).map_err(Error::internal)?;
        let out = self
            .eval(
                "decide",
                &self.scripts.decide,
                vec![self.keys.record(id), self.keys.audit(id)],
                vec![
                    token_hash.to_string(),
                    outcome.decision.as_str().into(),
                    json,
                    REVIEWER.into(),
                ],
            )
            .await?;
        let status = out
            .first()
            .and_then(|s| s.as_deref())
            .and_then(Status::parse)
            .ok_or_else(|| Error::internal("bad decide reply"))?;
        Ok((status, int(out.get(1).and_then(Option::as_ref))?))
    }

    async fn cancel(&self, tenant: &Tenant, id: ElicitationId) -> Result<bool> {
        let out = self
            .eval(
                "cancel",
                &self.scripts.cancel,
                vec![self.keys.record(id), self.keys.audit(id)],
                vec![tenant.to_string(), agent_actor(tenant)],
            )
            .await?;
        Ok(out.get(1).and_then(|s| s.as_deref()) == Some("1"))
    }

    async fn consume(&self, tenant: &Tenant, id: ElicitationId) -> Result<ResultView> {
        let out = self
            .eval(
                "consume",
                &self.scripts.consume,
                vec![self.keys.record(id), self.keys.audit(id)],
                vec![tenant.to_string(), agent_actor(tenant)],
            )
            .await?;
        let outcome: Outcome =
            serde_json::from_str(out.first().and_then(|s| s.as_deref()).unwrap_or_default())
                .map_err(Error::internal)?;
        let spec: Spec =
            serde_json::from_str(out.get(2).and_then(|s| s.as_deref()).unwrap_or_default())
                .map_err(Error::internal)?;
        Ok(ResultView {
            id,
            spec,
            outcome,
            decided_ms: int(out.get(1).and_then(Option::as_ref))?,
        })
    }

    async fn audit(&self, tenant: &Tenant, id: ElicitationId) -> Result<Vec<AuditEvent>> {
        let client = self.client()?;
        let p = client.pipeline();
        let _: () = p
            .hget(self.keys.record(id), "tenant")
            .await
            .map_err(map_err)?;
        let _: () = p
            .lrange(self.keys.audit(id), 0, -1)
            .await
            .map_err(map_err)?;
        let (owner, events): (Option<String>, Vec<String>) = p.all().await.map_err(map_err)?;
        if owner.as_deref() != Some(tenant.as_str()) {
            return Err(Error::NotFound);
        }
        events
            .iter()
            .map(|e| serde_json::from_str(e).map_err(Error::internal))
            .collect()
    }

    async fn record_view(&self, id: ElicitationId, token_hash: &str) -> Result<()> {
        self.eval(
            "view",
            &self.scripts.view,
            vec![self.keys.record(id), self.keys.audit(id)],
            vec![token_hash.to_string(), REVIEWER.into()],
        )
        .await?;
        Ok(())
    }

    async fn ready(&self) -> Result<()> {
        if !self.subscriber.is_connected() {
            return Err(unavailable("redis subscriber is not connected"));
        }
        let v: String = self
            .scripts
            .ready
            .evalsha_with_reload(self.client()?, Vec::<String>::new(), Vec::<String>::new())
            .await
            .map_err(map_err)?;
        if v == "ok" {
            Ok(())
        } else {
            Err(Error::internal("ready script answered wrongly"))
        }
    }
}

/// Re-issue every tracked shard subscription, one `SSUBSCRIBE` per hash slot. (fred's
/// `resubscribe_all` starts with a plain `SUBSCRIBE` of the tracked channels, which fails when
/// there are none and then skips the shard channels.)
async fn resubscribe(sub: &SubscriberClient) {
    let mut by_slot: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    for ch in sub.tracked_shard_channels() {
        let ch = ch.to_string();
        by_slot
            .entry(redis_keyslot(ch.as_bytes()))
            .or_default()
            .push(ch);
    }
    for (_, channels) in by_slot {
        if let Err(e) = sub.ssubscribe(channels).await {
            tracing::warn!(error = %e, "resubscribe failed; waiters fall back to their timers");
        }
    }
}

impl SubscriptionBackend for RedisStore {
    fn subscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        let ch = self.keys.record(id);
        Box::pin(async move {
            if !self.subscriber.is_connected() {
                return Err(unavailable("redis subscriber is not connected"));
            }
            self.subscriber.ssubscribe(ch).await.map_err(map_err)
        })
    }
    fn unsubscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        let ch = self.keys.record(id);
        Box::pin(async move { self.subscriber.sunsubscribe(ch).await.map_err(map_err) })
    }
}
