//! The Redis store (fleet mode). Layout:
//! - [`conn`]: building and checking connections, Redis failure → our error;
//! - [`keys`]: key names (every key of one elicitation carries its shard's hash tag `{sNN}`);
//! - [`codec`]: record fields decoded by name, `TIME`, script replies;
//! - [`batch`]: batched record reads (`lua/read.lua`, the status hot path);
//! - [`create_batch`]: batched creates (`lua/create.lua`);
//! - [`subscriber`]: sharded pub/sub for the waiter hub;
//! - this file: the scripts and the [`Store`] implementation.
//!
//! - Scripts are compiled in, called by SHA and reloaded on `NOSCRIPT` (a restart, failover or
//!   `SCRIPT FLUSH` empties the cache), so a flush costs one extra round trip, never a failure.
//! - Record reads (status, review, replay) run `TIME` then `HMGET` atomically, batched across
//!   concurrent reads, so any decision accepted before the deadline was applied before that
//!   `TIME` — a read can never say `expired` for a request decided in time.
//! - The record key is also its shard channel: decide/cancel/consume `SPUBLISH` on it.
//! - Connection loss maps to `unavailable` (503) at once instead of queueing behind a reconnect.

mod batch;
mod codec;
mod conn;
mod create_batch;
pub mod keys;
mod local;
mod subscriber;

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use async_trait::async_trait;
use fred::{
    clients::{Client, Pool},
    error::Error as RedisError,
    interfaces::{ClientInterface, ClientLike, KeysInterface, ListInterface},
    types::{config::Config as RedisConfig, scripts::Script, Expiration, SetOptions},
};
use tokio::time::Instant;

use self::{
    batch::{Cache, Clients, ReadBatcher},
    codec::{Fields, Reply, Row},
    conn::{connected, map_err, unavailable},
    create_batch::{Create, CreateBatcher},
    keys::Keys,
    subscriber::Subscriber,
};
use super::{
    agent_actor, event_ids, AuditEvent, Created, DecideReply, Delivery, NewRecord, Notice, Panel,
    ResultRecord, ReviewRecord, StatusView, Store, MAX_AUDIT_FOR_VIEWS, REVIEWER,
};
use crate::{
    error::{Error, Result},
    model::{Decision, ElicitationId, Status, Tenant},
    telemetry::record_store_op,
    token::ct_eq,
    wake::Hub,
};

/// The scripts (`lua/`), compiled in. Those that make a transition start with `outbox.lua`.
struct Scripts {
    create: Script,
    decide: Script,
    cancel: Script,
    consume: Script,
    view: Script,
    ready: Script,
    due: Script,
    expire: Script,
    claim: Script,
    finish: Script,
    replay: Script,
}

/// A transition script: the outbox function, then the script.
macro_rules! with_outbox {
    ($file:literal) => {
        Script::from_lua(concat!(
            include_str!("../../../lua/outbox.lua"),
            include_str!(concat!("../../../lua/", $file))
        ))
    };
}

/// A script that appends to audit trails: the audit functions (then the outbox's, for a
/// transition), then the script.
macro_rules! with_audit {
    ($file:literal) => {
        Script::from_lua(concat!(
            include_str!("../../../lua/audit.lua"),
            include_str!(concat!("../../../lua/", $file))
        ))
    };
    (outbox, $file:literal) => {
        Script::from_lua(concat!(
            include_str!("../../../lua/audit.lua"),
            include_str!("../../../lua/outbox.lua"),
            include_str!(concat!("../../../lua/", $file))
        ))
    };
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            create: with_outbox!("create.lua"),
            decide: with_audit!(outbox, "decide.lua"),
            cancel: with_audit!(outbox, "cancel.lua"),
            consume: with_audit!(outbox, "consume.lua"),
            view: with_audit!("view.lua"),
            ready: Script::from_lua(include_str!("../../../lua/ready.lua")),
            due: Script::from_lua(include_str!("../../../lua/due.lua")),
            expire: with_outbox!("expire.lua"),
            claim: Script::from_lua(include_str!("../../../lua/claim.lua")),
            finish: with_audit!("finish.lua"),
            replay: Script::from_lua(include_str!("../../../lua/replay.lua")),
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
    /// Replicas that must confirm each state change (`WAIT`); 0 = none.
    pub replica_acks: u32,
    /// How long to wait for them.
    pub replica_timeout: Duration,
    /// Status reads each read batcher may cache (single Redis and Sentinel; 0 = none). See
    /// `batch.rs`, "Status cache".
    pub status_cache: usize,
    /// Write new records in the 0.1 layout: review-index keys and the audit list at create
    /// (`ELICITD_LEGACY_RECORDS`).
    pub legacy_records: bool,
}

/// The Redis-backed store.
pub struct RedisStore {
    /// Reads (and writes, when no replica confirmations are asked for).
    pool: Pool,
    /// Writes followed by `WAIT` (when `replica_acks > 0`), on their own connections so a
    /// slow confirmation never holds up the status reads queued behind it.
    durable: Option<Durable>,
    subscriber: Arc<Subscriber>,
    keys: Keys,
    scripts: Scripts,
    retention_ms: i64,
    reads: ReadBatcher,
    creates: CreateBatcher,
    /// Distinguishes this store's per-thread connections ([`local`]) from another's.
    id: u64,
    /// For building per-thread connections.
    settings: RedisSettings,
}

impl RedisStore {
    /// Build clients, connect (waiting up to a few seconds), and start the subscriber feeder for
    /// `hub`. A Redis that is down at start is not fatal: the replica serves 503 and `/readyz`
    /// fails until it answers.
    pub async fn connect(
        s: RedisSettings,
        hub: Arc<Hub>,
    ) -> std::result::Result<Arc<Self>, RedisError> {
        let (pool, sub) = conn::build(&s)?;
        let writers = match s.replica_acks {
            0 => None,
            _ => Some(conn::build(&s)?.0),
        };
        for c in pool
            .clients()
            .iter()
            .chain(writers.iter().flat_map(|w| w.clients()))
        {
            conn::connect_supervised(c);
        }
        conn::connect_supervised(&sub);
        let reads = reads_for(&s, Clients::Pool(pool.clone()))?;
        let creates = CreateBatcher::spawn(Clients::Pool(pool.clone()), Scripts::new().create);
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = pool.wait_for_connect().await;
            let _ = sub.wait_for_connect().await;
            if let Some(w) = &writers {
                let _ = w.wait_for_connect().await;
            }
            reads.wait_for_connect().await;
        })
        .await;
        conn::warn_about_server_settings(&pool).await;
        let keys = Keys::new(&s.prefix);
        let subscriber = Subscriber::new(sub, keys.clone());
        subscriber.spawn_tasks(&hub);
        hub.set_backend(subscriber.clone());
        static IDS: AtomicU64 = AtomicU64::new(1);
        Ok(Arc::new(RedisStore {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            settings: s.clone(),
            reads,
            creates,
            durable: writers.map(|pool| Durable {
                pool,
                acks: s.replica_acks,
                timeout: s.replica_timeout,
            }),
            pool,
            subscriber,
            keys,
            scripts: Scripts::new(),
            retention_ms: s.retention.as_millis() as i64,
        }))
    }

    /// Give the calling thread its own connection (see [`local`]): commands made on this
    /// thread from now on use it instead of the shared pool. For the HTTP worker threads,
    /// each a single-threaded runtime; waits up to a few seconds for the connection (a Redis
    /// that is down is not fatal, as at start).
    async fn connect_thread(&self) -> std::result::Result<(), RedisError> {
        let client = conn::build_client(&self.settings)?;
        conn::connect_supervised(&client);
        let reads = reads_for(&self.settings, Clients::One(client.clone()))?;
        let creates = CreateBatcher::spawn(Clients::One(client.clone()), Scripts::new().create);
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = client.wait_for_connect().await;
            reads.wait_for_connect().await;
        })
        .await;
        local::set(
            self.id,
            local::Local {
                reads,
                creates,
                client,
            },
        );
        Ok(())
    }

    /// A connected client for a command: this thread's own when it has one, else one of the
    /// shared pool; `unavailable` at once when it is not connected.
    fn client(&self) -> Result<Client> {
        match local::get(self.id) {
            Some(l) if l.client.is_connected() => Ok(l.client.clone()),
            Some(_) => Err(unavailable("redis is not connected")),
            None => connected(&self.pool).cloned(),
        }
    }

    /// The client for a state change: a writer when replicas must confirm it.
    fn writer(&self) -> Result<Client> {
        match &self.durable {
            Some(d) => connected(&d.pool).cloned(),
            None => self.client(),
        }
    }

    /// Run a transition script; when replicas must confirm, `WAIT` for them on the same
    /// connection before answering (only after a script that changed something).
    async fn eval(
        &self,
        op: &'static str,
        script: &Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Reply> {
        let client = &self.writer()?;
        let before = client.connection_ids();
        let slot_key = keys.first().cloned().unwrap_or_default();
        let reply = eval_on(op, client, script, keys, args).await?;
        // A page view is not a state change: it is never held up by the replicas.
        if let (Some(d), Reply::Ok(_), false) = (&self.durable, &reply, op == "view") {
            d.confirm(op, client, &before, &[&slot_key]).await?;
        }
        Ok(reply)
    }

    /// [`eval`](Self::eval) of a script that never refuses with `no`.
    async fn eval_ok(
        &self,
        op: &'static str,
        script: &Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Vec<Option<String>>> {
        match self.eval(op, script, keys, args).await? {
            Reply::Ok(v) => Ok(v),
            Reply::No(_) => Err(Error::internal(format!("{op} answered with a refusal"))),
        }
    }

    /// Read `fields` of a record with the store clock (one batched round trip).
    async fn load(
        &self,
        op: &'static str,
        id: ElicitationId,
        fields: Fields,
        cached: bool,
    ) -> Result<(i64, Row)> {
        let started = Instant::now();
        // Fail at once (503) while Redis is down rather than queue behind a reconnect.
        let local = local::get(self.id);
        let reads = local.as_ref().map_or(&self.reads, |l| &l.reads);
        let out = if reads.is_connected() {
            reads.read(id, fields.0, cached).await
        } else {
            Err(unavailable("redis is not connected"))
        };
        record_store_op(op, started, &out);
        let (now, values) = out?;
        Ok((now, Row::new(&fields, values)?))
    }

    /// A status read; `cached`: the status cache may answer it.
    async fn status_view(
        &self,
        tenant: &Tenant,
        id: ElicitationId,
        cached: bool,
    ) -> Result<StatusView> {
        let (now, row) = self.load("status", id, codec::STATUS, cached).await?;
        if row.get("tenant") != Some(tenant.as_str()) {
            return Err(Error::NotFound);
        }
        let expires_ms = row.int("expires_ms")?;
        Ok(StatusView {
            id,
            kind: row.kind()?,
            status: Status::effective(row.status()?, now, expires_ms),
            created_ms: row.int("created_ms")?,
            expires_ms,
            decided_ms: row.opt_int("decided_ms"),
            now_ms: now,
            votes: row.get("tally").and_then(|t| {
                let (k, m) = t.split_once('/')?;
                Some((k.parse().ok()?, m.parse().ok()?))
            }),
        })
    }

    /// KEYS of a transition script: record, audit, and the outbox keys of its `event` (queue,
    /// deadline index, delivery list, then one delivery per channel).
    fn transition_keys(&self, id: ElicitationId, event: &str) -> Vec<String> {
        let shard = keys::shard_of(id);
        let mut keys = vec![
            self.keys.record(id),
            self.keys.audit(id),
            self.keys.due(shard),
            self.keys.deadlines(shard),
            self.keys.deliveries(id),
        ];
        keys.extend(
            event_ids(id, event)
                .iter()
                .map(|d| self.keys.delivery(shard, d)),
        );
        keys
    }

    /// Members of a shard's sorted set that are due (Redis clock), earliest first.
    async fn due_members(&self, key: String, max: usize) -> Result<Vec<String>> {
        let out: Vec<String> = self
            .scripts
            .due
            .evalsha_with_reload(&self.client()?, vec![key], vec![max.to_string()])
            .await
            .map_err(map_err)?;
        Ok(out.into_iter().skip(1).collect())
    }

    /// The index and the record: the index (on a Cluster) and, when replicas must confirm,
    /// the record on `client` (the caller confirms them); else the record through this
    /// thread's create batcher (see [`create_batch`]).
    async fn create_record(&self, client: &Client, rec: &NewRecord) -> Result<(i64, i64)> {
        let ttl_ms = rec.expires_in_ms + self.retention_ms + 60_000;
        // Legacy records only (their links are found through it): the review index. One round
        // trip where the topology allows: on a single Redis the index is written by create.lua
        // itself; on a Cluster its keys live in other slots than the record's, so it is
        // written first, on its own.
        let legacy = self.settings.legacy_records;
        let inline_index = !client.is_clustered();
        for hash in index_hashes(rec).filter(|_| legacy && !inline_index) {
            let _: () = client
                .set(
                    self.keys.review_index(hash),
                    rec.id.to_string(),
                    Some(Expiration::PX(ttl_ms)),
                    None,
                    false,
                )
                .await
                .map_err(map_err)?;
        }
        let shard = keys::shard_of(rec.id);
        let id = rec.id.to_string();
        let index: Vec<&str> = if legacy && inline_index {
            index_hashes(rec).collect()
        } else {
            Vec::new()
        };
        let webhook_url = rec.webhook.as_ref().map(|w| w.url.as_str());
        let slack = rec.notify.slack.as_deref().filter(|s| !s.is_empty());
        let targets = webhook_url.is_some_and(|u| !u.is_empty())
            || !rec.notify.email.is_empty()
            || slack.is_some();
        let mut k = Vec::with_capacity(2 + index.len() + if targets { 6 } else { 0 });
        k.push(self.keys.record(rec.id));
        k.push(self.keys.audit(rec.id));
        k.extend(index.iter().map(|h| self.keys.review_index(h)));
        let mut a: Vec<String> = Vec::with_capacity(24);
        a.extend([
            rec.expires_in_ms.to_string(),
            self.retention_ms.to_string(),
            rec.kind.as_str().into(),
            rec.tenant.to_string(),
            rec.spec_json.clone(),
            rec.token_hash.clone(),
            rec.token_salt.clone(),
            agent_actor(&rec.tenant),
            id,
            index.len().to_string(),
            match (targets, legacy) {
                (true, true) => "ta",
                (true, false) => "t",
                (false, true) => "a",
                (false, false) => "",
            }
            .into(),
            ttl_ms.to_string(),
        ]);
        if targets {
            // The outbox keys and the `created` delivery ids, only when something is delivered.
            let dids = event_ids(rec.id, "created");
            k.extend([
                self.keys.deadlines(shard),
                self.keys.due(shard),
                self.keys.deliveries(rec.id),
            ]);
            k.extend(dids.iter().map(|d| self.keys.delivery(shard, d)));
            a.extend(dids);
        }
        // The record's optional fields, as name/value pairs.
        if let Some(w) = rec.webhook.as_ref().filter(|w| !w.url.is_empty()) {
            a.extend([
                "webhook_url".into(),
                w.url.clone(),
                "webhook_result".into(),
                if w.include_result { "1" } else { "0" }.into(),
            ]);
        }
        if !rec.notify.email.is_empty() {
            a.push("notify_email".into());
            a.push(serde_json::to_string(&rec.notify.email).map_err(Error::internal)?);
        }
        if let Some(slack) = slack {
            a.push("notify_slack".into());
            a.push(slack.to_string());
        }
        if let Some(p) = &rec.panel {
            a.push("panel".into());
            a.push(serde_json::to_string(p).map_err(Error::internal)?);
            a.push("tally".into());
            a.push(format!("0/{}", p.quorum));
        }
        let create = Create { keys: k, args: a };
        let started = Instant::now();
        let reply = if self.durable.is_some() {
            // Its `WAIT` must follow it on `client`: alone, not batched.
            match create_batch::call(&self.scripts.create, client, vec![create]).await {
                Ok(mut r) => r.pop().unwrap_or_else(|| Err(Error::internal("no reply"))),
                Err(e) => Err(map_err(e)),
            }
        } else {
            match local::get(self.id) {
                Some(l) => l.creates.create(create).await,
                None => self.creates.create(create).await,
            }
        };
        record_store_op("create", started, &reply);
        let out = match reply? {
            Reply::Ok(v) => v,
            Reply::No(_) => return Err(Error::internal("create answered with a refusal")),
        };
        Ok((
            codec::int(out.first().and_then(|s| s.as_deref()))?,
            codec::int(out.get(1).and_then(|s| s.as_deref()))?,
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
        let (now, mut row) = self.load("replay", id, codec::REPLAY, false).await?;
        if row.get("tenant") != Some(tenant.as_str()) {
            return Ok(None);
        }
        if fp != fingerprint {
            return Err(Error::invalid(
                "idempotencyKey was already used for a different request",
            ));
        }
        if let Some(d) = &self.durable {
            // The first create may have been answered 503 before its replicas confirmed it.
            // A write of ours to the same record, confirmed, proves everything before it on
            // that primary (replication is ordered) — so a replay never reports unconfirmed data.
            let client = &self.writer()?;
            let before = client.connection_ids();
            let record = self.keys.record(id);
            let _: i64 = fred::interfaces::HashesInterface::hincrby(client, &record, "replays", 1)
                .await
                .map_err(map_err)?;
            d.confirm("replay", client, &before, &[&record]).await?;
        }
        let expires_ms = row.int("expires_ms")?;
        Ok(Some(Created {
            id,
            created_ms: row.int("created_ms")?,
            expires_ms,
            status: Status::effective(row.status()?, now, expires_ms),
            token_hash: row.take("token_hash").unwrap_or_default(),
            token_salt: row.take("token_salt").unwrap_or_default(),
            replayed: true,
            panel: panel_of(row.take("panel"))?,
        }))
    }

    async fn delete_record(&self, rec: &NewRecord) {
        if let Ok(c) = &self.writer() {
            // With its `created` notifications (all keys in the record's shard).
            let shard = keys::shard_of(rec.id);
            let dids = event_ids(rec.id, "created");
            let mut doomed = vec![
                self.keys.record(rec.id),
                self.keys.audit(rec.id),
                self.keys.deliveries(rec.id),
            ];
            doomed.extend(dids.iter().map(|d| self.keys.delivery(shard, d)));
            let _: std::result::Result<i64, _> = c.del(doomed).await;
            let _: std::result::Result<i64, _> =
                fred::interfaces::SortedSetsInterface::zrem(c, self.keys.due(shard), dids.to_vec())
                    .await;
            let _: std::result::Result<i64, _> = fred::interfaces::SortedSetsInterface::zrem(
                c,
                self.keys.deadlines(shard),
                rec.id.to_string(),
            )
            .await;
            for hash in index_hashes(rec) {
                let _: std::result::Result<i64, _> = c.del(self.keys.review_index(hash)).await;
            }
        }
    }
}

/// A read batcher for `s`: with its own tracked connection and status cache where the topology
/// allows (see `batch.rs`), else sending its calls to `fallback`.
fn reads_for(s: &RedisSettings, fallback: Clients) -> std::result::Result<ReadBatcher, RedisError> {
    let clustered = RedisConfig::from_url(&s.url)?.server.is_clustered();
    let keys = Keys::new(&s.prefix);
    if clustered || s.status_cache == 0 {
        return Ok(ReadBatcher::spawn(fallback, keys));
    }
    let reader = conn::build_reader(s)?;
    let cache = Cache::new(reader.clone(), s.status_cache, keys.clone());
    conn::connect_supervised(&reader);
    Ok(ReadBatcher::spawn(Clients::Cached(cache), keys))
}

/// The token hashes that open a new record's page: its reviewers' (named reviewers), else its
/// own.
fn index_hashes(rec: &NewRecord) -> impl Iterator<Item = &str> {
    let panel = rec
        .panel
        .as_ref()
        .map(|p| p.reviewers.as_slice())
        .unwrap_or_default();
    let own = panel.is_empty().then_some(rec.token_hash.as_str());
    own.into_iter()
        .chain(panel.iter().map(|r| r.token_hash.as_str()))
}

/// A record's `panel` field.
fn panel_of(json: Option<String>) -> Result<Option<Panel>> {
    json.map(|j| serde_json::from_str(&j).map_err(Error::internal))
        .transpose()
}

/// Run `script` on `client` (reloading it on `NOSCRIPT`) and decode its reply.
async fn eval_on(
    op: &'static str,
    client: &Client,
    script: &Script,
    keys: Vec<String>,
    args: Vec<String>,
) -> Result<Reply> {
    let started = Instant::now();
    let reply: Result<Vec<Option<String>>> = script
        .evalsha_with_reload(client, keys, args)
        .await
        .map_err(map_err);
    record_store_op(op, started, &reply);
    codec::reply(reply?)
}

/// Replica confirmation of writes (`ELICITD_REDIS_REPLICA_ACKS`).
struct Durable {
    pool: Pool,
    acks: u32,
    timeout: Duration,
}

impl Durable {
    /// `WAIT` until `acks` replicas have every write this connection made, on each node that
    /// holds one of `keys`. `before` is the connection ids read before the writes: a
    /// reconnect in between means the writes' fate is unknown, so that is `unavailable` too.
    async fn confirm(
        &self,
        op: &'static str,
        client: &Client,
        before: &std::collections::HashMap<fred::types::config::Server, i64>,
        keys: &[&str],
    ) -> Result<()> {
        use fred::{
            interfaces::{ClusterInterface, ServerInterface},
            types::config::{Options, Server},
            util::redis_keyslot,
        };
        let started = Instant::now();
        // Where to WAIT: each node holding a written key (Cluster), or the one connection.
        let mut nodes: Vec<Option<Server>> = Vec::new();
        if client.is_clustered() {
            let state = client.cached_cluster_state();
            for k in keys {
                let slot = redis_keyslot(k.as_bytes());
                let node = state
                    .as_ref()
                    .and_then(|s| s.get_server(slot))
                    .cloned()
                    .ok_or_else(|| conn::unavailable("no cluster node for a written slot"))?;
                if !nodes.contains(&Some(node.clone())) {
                    nodes.push(Some(node));
                }
            }
        } else {
            nodes.push(None);
        }
        let timeout_ms = self.timeout.as_millis() as i64;
        let result: Result<()> = async {
            for cluster_node in nodes {
                let opts = Options {
                    cluster_node,
                    max_attempts: Some(1),
                    timeout: Some(self.timeout + Duration::from_secs(1)),
                    ..Default::default()
                };
                let acked: i64 = client
                    .with_options(&opts)
                    .wait(self.acks as i64, timeout_ms)
                    .await
                    .map_err(map_err)?;
                if acked < self.acks as i64 {
                    return Err(conn::unavailable(
                        "the replicas did not confirm the write in time",
                    ));
                }
            }
            if &client.connection_ids() != before {
                return Err(conn::unavailable(
                    "the connection was replaced before the replicas confirmed the write",
                ));
            }
            Ok(())
        }
        .await;
        record_store_op("replica_wait", started, &result);
        if result.is_err() {
            metrics::counter!("elicitd_replica_wait_failures_total", "op" => op).increment(1);
        }
        result
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
            // (Boxed, here and below: the rarely taken branches would otherwise make every
            // create's future, moved on each call, several times larger.)
            if let Some(first) = Box::pin(self.replay(&rec.tenant, key, fp)).await? {
                return Ok(first);
            }
        }
        // Order: review index, record, then the idempotency claim. A crash in between leaves at
        // worst an orphan that expires by TTL; a claimed key always points at a full record.
        // All on one connection, so one WAIT per node confirms them all.
        let client = &self.writer()?;
        let before = client.connection_ids();
        let (created_ms, expires_ms) = Box::pin(self.create_record(client, &rec)).await?;
        if let Some((key, fp)) = &idem_key {
            let ttl_ms = rec.expires_in_ms + self.retention_ms;
            let claimed: Option<String> = client
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
                Box::pin(self.delete_record(&rec)).await;
                return Box::pin(self.replay(&rec.tenant, key, fp))
                    .await?
                    .ok_or_else(|| Error::internal("idempotency winner vanished"));
            }
        }
        if let Some(d) = &self.durable {
            let record = self.keys.record(rec.id);
            // Legacy records: their review-index keys too (their own slots on a Cluster).
            let index: Vec<String> = index_hashes(&rec)
                .filter(|_| self.settings.legacy_records)
                .map(|h| self.keys.review_index(h))
                .collect();
            let mut written = vec![record.as_str()];
            written.extend(index.iter().map(String::as_str));
            if let Some((key, _)) = &idem_key {
                written.push(key);
            }
            Box::pin(d.confirm("create", client, &before, &written)).await?;
        }
        Ok(Created {
            id: rec.id,
            created_ms,
            expires_ms,
            token_hash: rec.token_hash,
            token_salt: rec.token_salt,
            status: Status::Pending,
            replayed: false,
            panel: rec.panel,
        })
    }

    async fn status(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView> {
        self.status_view(tenant, id, true).await
    }

    async fn status_changed(&self, tenant: &Tenant, id: ElicitationId) -> Result<StatusView> {
        self.status_view(tenant, id, false).await
    }

    async fn review(&self, id: Option<ElicitationId>, token_hash: &str) -> Result<ReviewRecord> {
        let id = match id {
            Some(id) => id,
            // A token of the first form: the review index knows its record.
            None => {
                let id: Option<String> = self
                    .client()?
                    .get(self.keys.review_index(token_hash))
                    .await
                    .map_err(map_err)?;
                id.as_deref()
                    .and_then(ElicitationId::parse)
                    .ok_or(Error::NotFound)?
            }
        };
        let (now, mut row) = self.load("review", id, codec::REVIEW, false).await?;
        // The token must be the record's own — or, with named reviewers, one of theirs (which
        // replace the request's own).
        let panel = panel_of(row.take("panel"))?;
        let reviewer = match &panel {
            Some(p) => Some(p.reviewer_of(token_hash).ok_or(Error::NotFound)?.id.clone()),
            None if row.get("token_hash").is_some_and(|h| ct_eq(h, token_hash)) => None,
            None => return Err(Error::NotFound),
        };
        let expires_ms = row.int("expires_ms")?;
        Ok(ReviewRecord {
            panel,
            reviewer,
            id,
            status: Status::effective(row.status()?, now, expires_ms),
            created_ms: row.int("created_ms")?,
            expires_ms,
            now_ms: now,
            decided_ms: row.opt_int("decided_ms"),
            spec_json: row
                .take("spec")
                .ok_or_else(|| Error::internal("record without spec"))?,
            outcome_json: row.take("outcome"),
        })
    }

    async fn decide(
        &self,
        id: ElicitationId,
        token_hash: &str,
        decision: Decision,
        outcome_json: &str,
    ) -> Result<DecideReply> {
        let reply = self
            .eval(
                "decide",
                &self.scripts.decide,
                self.transition_keys(id, decision.as_str()),
                vec![
                    token_hash.to_string(),
                    decision.as_str().into(),
                    outcome_json.to_string(),
                    REVIEWER.into(),
                    crate::token::random_b64(12),
                    id.to_string(),
                ]
                .into_iter()
                .chain(event_ids(id, decision.as_str()))
                .collect(),
            )
            .await?;
        let status = |v: &[Option<String>]| {
            v.first()
                .and_then(|s| s.as_deref())
                .and_then(Status::parse)
                .ok_or_else(|| Error::internal("bad decide reply"))
        };
        let int_at =
            |v: &[Option<String>], i: usize| codec::int(v.get(i).and_then(|s| s.as_deref()));
        Ok(match reply {
            // A named reviewer's vote that leaves the request pending.
            Reply::Ok(v) if status(&v)? == Status::Pending => DecideReply::Voted {
                submitted: int_at(&v, 1)? as u32,
                needed: int_at(&v, 2)? as u32,
            },
            Reply::Ok(v) => DecideReply::Recorded {
                status: status(&v)?,
                decided_ms: int_at(&v, 1)?,
            },
            Reply::No(mut v) => DecideReply::Refused {
                status: status(&v)?,
                decided_ms: v
                    .get(2)
                    .and_then(|s| s.as_deref())
                    .and_then(|s| s.parse().ok()),
                outcome_json: v.get_mut(1).and_then(Option::take),
            },
        })
    }

    async fn cancel(&self, tenant: &Tenant, id: ElicitationId) -> Result<bool> {
        let out = self
            .eval_ok(
                "cancel",
                &self.scripts.cancel,
                self.transition_keys(id, "canceled"),
                [tenant.to_string(), agent_actor(tenant), id.to_string()]
                    .into_iter()
                    .chain(event_ids(id, "canceled"))
                    .collect(),
            )
            .await?;
        Ok(out.get(1).and_then(|s| s.as_deref()) == Some("1"))
    }

    async fn consume(&self, tenant: &Tenant, id: ElicitationId) -> Result<ResultRecord> {
        let mut out = self
            .eval_ok(
                "consume",
                &self.scripts.consume,
                self.transition_keys(id, "consumed"),
                [
                    tenant.to_string(),
                    agent_actor(tenant),
                    MAX_AUDIT_FOR_VIEWS.to_string(),
                    id.to_string(),
                ]
                .into_iter()
                .chain(event_ids(id, "consumed"))
                .collect(),
            )
            .await?
            .into_iter();
        let (outcome, decided, spec) = (out.next(), out.next(), out.next());
        Ok(ResultRecord {
            id,
            panel: panel_of(out.next().flatten())?,
            outcome_json: outcome
                .flatten()
                .ok_or_else(|| Error::internal("decided record without outcome"))?,
            decided_ms: codec::int(decided.flatten().as_deref())?,
            spec_json: spec
                .flatten()
                .ok_or_else(|| Error::internal("record without spec"))?,
        })
    }

    async fn audit(&self, tenant: &Tenant, id: ElicitationId) -> Result<(Vec<AuditEvent>, u64)> {
        let client = &self.client()?;
        let p = client.pipeline();
        let _: () = fred::interfaces::HashesInterface::hmget(
            &p,
            self.keys.record(id),
            vec!["tenant", "fetches", "created_ms"],
        )
        .await
        .map_err(map_err)?;
        let _: () = p
            .lrange(self.keys.audit(id), 0, -1)
            .await
            .map_err(map_err)?;
        let (fields, events): (Vec<Option<String>>, Vec<String>) =
            p.all().await.map_err(map_err)?;
        if fields.first().and_then(|t| t.as_deref()) != Some(tenant.as_str()) {
            return Err(Error::NotFound);
        }
        let fetches = fields
            .get(1)
            .and_then(|f| f.as_deref())
            .and_then(|f| f.parse().ok())
            .unwrap_or(0);
        let mut events = events
            .iter()
            .map(|e| serde_json::from_str(e).map_err(Error::internal))
            .collect::<Result<Vec<AuditEvent>>>()?;
        // The trail starts with `created`: the record itself, unless a legacy record's list
        // holds it (lua/audit.lua).
        if events.first().is_none_or(|e| e.kind != "created") {
            let created_ms = codec::int(fields.get(2).and_then(|f| f.as_deref()))?;
            events.insert(
                0,
                AuditEvent {
                    kind: "created".into(),
                    at: created_ms,
                    actor: agent_actor(tenant),
                    decision: None,
                    delivery: None,
                },
            );
        }
        Ok((events, fetches))
    }

    async fn record_view(&self, id: ElicitationId, token_hash: &str, actor: &str) -> Result<()> {
        self.eval_ok(
            "view",
            &self.scripts.view,
            vec![self.keys.record(id), self.keys.audit(id)],
            vec![
                token_hash.to_string(),
                actor.into(),
                MAX_AUDIT_FOR_VIEWS.to_string(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn attach_thread(&self) -> Result<()> {
        self.connect_thread().await.map_err(map_err)
    }

    async fn ready(&self) -> Result<()> {
        if !self.subscriber.is_connected() {
            return Err(unavailable("redis subscriber is not connected"));
        }
        let v: String = self
            .scripts
            .ready
            .evalsha_with_reload(&self.client()?, Vec::<String>::new(), Vec::<String>::new())
            .await
            .map_err(map_err)?;
        if v == "ok" {
            Ok(())
        } else {
            Err(Error::internal("ready script answered wrongly"))
        }
    }

    fn shards(&self) -> u16 {
        keys::SHARDS
    }

    fn shard_of(&self, id: ElicitationId) -> u16 {
        keys::shard_of(id)
    }

    async fn sweep_deadlines(&self, shard: u16) -> Result<usize> {
        let ids = self.due_members(self.keys.deadlines(shard), 64).await?;
        let ids: Vec<ElicitationId> = ids.iter().filter_map(|i| ElicitationId::parse(i)).collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let mut keys = vec![self.keys.deadlines(shard), self.keys.due(shard)];
        let mut args = Vec::new();
        for id in &ids {
            keys.push(self.keys.record(*id));
            keys.push(self.keys.deliveries(*id));
            args.push(id.to_string());
            for did in event_ids(*id, "expired") {
                keys.push(self.keys.delivery(shard, &did));
                args.push(did);
            }
        }
        let n: i64 = self
            .scripts
            .expire
            .evalsha_with_reload(&self.writer()?, keys, args)
            .await
            .map_err(map_err)?;
        Ok(n as usize)
    }

    async fn claim_deliveries(
        &self,
        shard: u16,
        lease: Duration,
        max: usize,
    ) -> Result<Vec<Delivery>> {
        let dids = self.due_members(self.keys.due(shard), max).await?;
        if dids.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys = vec![self.keys.due(shard)];
        keys.extend(dids.iter().map(|d| self.keys.delivery(shard, d)));
        let mut args = vec![lease.as_millis().to_string(), crate::token::random_b64(12)];
        args.extend(dids);
        let claimed: Vec<String> = self
            .scripts
            .claim
            .evalsha_with_reload(&self.writer()?, keys, args)
            .await
            .map_err(map_err)?;
        claimed
            .iter()
            .map(|j| serde_json::from_str(j).map_err(Error::internal))
            .collect()
    }

    async fn finish_delivery(
        &self,
        delivery: &Delivery,
        next_at: Option<i64>,
        audit: Option<AuditEvent>,
    ) -> Result<bool> {
        let id = ElicitationId::parse(&delivery.elicitation_id)
            .ok_or_else(|| Error::internal("delivery of a malformed id"))?;
        let shard = keys::shard_of(id);
        let stored = Delivery {
            next_at,
            ..delivery.clone()
        };
        let audit = match audit {
            Some(a) => serde_json::to_string(&a).map_err(Error::internal)?,
            None => String::new(),
        };
        let out: String = self
            .scripts
            .finish
            .evalsha_with_reload(
                &self.writer()?,
                vec![
                    self.keys.due(shard),
                    self.keys.delivery(shard, &delivery.id),
                    self.keys.audit(id),
                    self.keys.record(id),
                ],
                vec![
                    delivery.lease.clone().unwrap_or_default(),
                    serde_json::to_string(&stored).map_err(Error::internal)?,
                    next_at.map(|t| t.to_string()).unwrap_or_default(),
                    audit,
                    delivery.id.clone(),
                ],
            )
            .await
            .map_err(map_err)?;
        Ok(out == "ok")
    }

    async fn deliveries(&self, tenant: &Tenant, id: ElicitationId) -> Result<Vec<Delivery>> {
        let client = &self.client()?;
        let owner: Option<String> =
            fred::interfaces::HashesInterface::hget(client, self.keys.record(id), "tenant")
                .await
                .map_err(map_err)?;
        if owner.as_deref() != Some(tenant.as_str()) {
            return Err(Error::NotFound);
        }
        let dids: Vec<String> = client
            .lrange(self.keys.deliveries(id), 0, -1)
            .await
            .map_err(map_err)?;
        if dids.is_empty() {
            return Ok(Vec::new());
        }
        let shard = keys::shard_of(id);
        let keys: Vec<String> = dids.iter().map(|d| self.keys.delivery(shard, d)).collect();
        let jsons: Vec<Option<String>> = client.mget(keys).await.map_err(map_err)?;
        jsons
            .into_iter()
            .flatten()
            .map(|j| serde_json::from_str(&j).map_err(Error::internal))
            .collect()
    }

    async fn replay_delivery(
        &self,
        tenant: &Tenant,
        id: ElicitationId,
        delivery_id: &str,
    ) -> Result<Delivery> {
        let shard = keys::shard_of(id);
        let reply = self
            .eval(
                "replay_delivery",
                &self.scripts.replay,
                vec![
                    self.keys.due(shard),
                    self.keys.delivery(shard, delivery_id),
                    self.keys.record(id),
                ],
                vec![tenant.to_string(), delivery_id.to_string(), id.to_string()],
            )
            .await?;
        match reply {
            Reply::Ok(v) => serde_json::from_str(
                v.first()
                    .and_then(|j| j.as_deref())
                    .ok_or_else(|| Error::internal("replay without a delivery"))?,
            )
            .map_err(Error::internal),
            Reply::No(_) => Err(Error::internal("replay answered with a refusal")),
        }
    }

    async fn queue_stats(&self) -> Result<(u64, Option<i64>)> {
        use fred::interfaces::SortedSetsInterface;
        let client = &self.client()?;
        let (mut depth, mut oldest) = (0u64, None::<i64>);
        for shard in 0..keys::SHARDS {
            let key = self.keys.due(shard);
            let n: u64 = client.zcard(&key).await.map_err(map_err)?;
            depth += n;
            if n > 0 {
                let first: Vec<(String, f64)> = client
                    .zrange(&key, 0, 0, None, false, None, true)
                    .await
                    .map_err(map_err)?;
                if let Some((_, score)) = first.first() {
                    let t = *score as i64;
                    oldest = Some(oldest.map_or(t, |o| o.min(t)));
                }
            }
        }
        Ok((depth, oldest))
    }

    async fn notice_of(&self, id: ElicitationId) -> Result<Option<Notice>> {
        let f: Vec<Option<String>> = fred::interfaces::HashesInterface::hmget(
            &self.client()?,
            self.keys.record(id),
            vec![
                "spec",
                "token_salt",
                "expires_ms",
                "panel",
                "status",
                "token_hash",
            ],
        )
        .await
        .map_err(map_err)?;
        let mut f = f.into_iter();
        Ok(
            match (f.next().flatten(), f.next().flatten(), f.next().flatten()) {
                (Some(spec_json), Some(token_salt), Some(exp)) => Some(Notice {
                    spec_json,
                    token_salt,
                    expires_ms: codec::int(Some(exp.as_str()))?,
                    panel: panel_of(f.next().flatten())?,
                    status: f.next().flatten().unwrap_or_default(),
                    token_hash: f.next().flatten().unwrap_or_default(),
                }),
                _ => None,
            },
        )
    }

    async fn outcome_of(&self, id: ElicitationId) -> Result<Option<(String, String)>> {
        let f: Vec<Option<String>> = fred::interfaces::HashesInterface::hmget(
            &self.client()?,
            self.keys.record(id),
            vec!["spec", "outcome"],
        )
        .await
        .map_err(map_err)?;
        let mut f = f.into_iter();
        Ok(match (f.next().flatten(), f.next().flatten()) {
            (Some(spec), Some(outcome)) => Some((spec, outcome)),
            _ => None,
        })
    }
}
