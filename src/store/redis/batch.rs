//! Batched record reads for the Redis store (the status hot path).
//!
//! A record read needs the Redis clock read just before the record's fields (see
//! docs/architecture.md, "Exact expiry"). Under
//! load many reads are in flight at once, and sending each as its own round trip costs the
//! replica and Redis a socket write, a socket read and a wake-up per read (fred also flushes the
//! socket after every command of a pipeline, so a `TIME` + `HMGET` pipeline was two writes).
//! Instead every read is queued to one batching task that keeps at most [`IN_FLIGHT`] calls
//! outstanding; the reads that arrive while those are busy go out together as the next call of
//! `lua/read.lua`: one `TIME`, then one `HMGET` per read, atomically.
//!
//! - **Exactness is kept.** `TIME` runs before every `HMGET` of the call (and nothing runs in
//!   between), so a record read as pending at or past its deadline can no longer be decided.
//! - **Freshness is kept.** A read joins only a call that has not been sent yet, so its `HMGET`
//!   runs after the read was asked for: never an answer older than the request.
//! - **No added delay.** There is no timer: at low load every read finds a free slot and is sent
//!   at once as a call of one.
//! - **Redis Cluster.** A script's keys must share a hash slot, so a batch is split by slot there
//!   (keys of one elicitation share its shard's slot; 16 shards, so a batch is a few calls).
//!
//! **Status cache** (single Redis and Sentinel; [`Cache`]). A poller asks for the same pending
//! record again and again, and nothing in it changes until someone acts. So the batcher reads
//! over its own RESP3 connection with `CLIENT TRACKING` on: Redis remembers the keys that
//! connection read and pushes an invalidation *on that same connection* when one changes
//! (any client's write, a deletion, an expiry). A status read whose record is cached still
//! takes the batch's round trip — a `read.lua` call that reads the clock and the batch's other
//! records, or a bare `TIME` when every read of the batch is cached —, and is answered from the
//! cache only once that reply is in:
//!
//! - **Still fresh and exact.** A write that ran before the call ran queued its invalidation on
//!   the connection before the call's reply, and fred hands pushes on in wire order, before the
//!   reply reaches us; so after the reply, with every invalidation received so far applied, a
//!   cached record is the record as it was when the call's `TIME` ran: the same answer
//!   `read.lua` would have given. (A bare `TIME` is the same barrier at a tenth of the script's
//!   cost to Redis; most batches of a busy poller are all cached.) A decision made through another replica and answered before
//!   the poll was sent is therefore always seen, and `expired` never flips.
//! - **Filling is guarded.** A record read by a call is cached only when no invalidation of its
//!   key arrived since the call was sent (it may be for a write after the read), and only on a
//!   connection whose `CLIENT TRACKING ON` was confirmed before the call was sent.
//! - **Anything unsure empties it.** A reconnect (fred announces it before the new connection
//!   carries anything), a receiver that fell behind, or a dropped channel clears every entry,
//!   and entries come back only after tracking is confirmed on the new connection. An entry is
//!   also never used after [`MAX_AGE`], which bounds what a lost invalidation could cost (fred
//!   drops the keyless one Redis sends after `FLUSHALL`).
//!
//! On a Cluster the batcher does not cache: a slot move would have to be followed per node.
//!
//! **Cheap per read.** A read is its id, not its key: a key is built only for a read the call
//! makes; the cache is keyed by id (invalidations name keys, which are parsed back); a cached
//! row is shared (`Arc`), not copied, with each read it answers; and the clock is read once per
//! batch for the entries' age.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use fred::{
    clients::{Client, Pool},
    error::Error as RedisError,
    interfaces::{ClientLike, EventInterface, TrackingInterface},
    types::{client::Invalidation, config::Server, scripts::Script, Value},
    util::redis_keyslot,
};
use tokio::{
    sync::{broadcast, mpsc, oneshot, Semaphore},
    time::Instant,
};

use super::{codec::redis_now, conn::map_err, keys::Keys};
use crate::{
    error::{Error, Result},
    model::ElicitationId,
};

/// Calls outstanding at most. Two keep Redis busy while the next batch gathers; more would
/// only make batches smaller (measured: docs/benchmarks.md).
pub(super) const IN_FLIGHT: usize = 2;
/// Reads taken into one call at most.
const MAX_BATCH: usize = 256;
/// Reads queued (not yet sent) at most; further callers wait for room.
const QUEUE: usize = 8192;
/// A cache entry is never used once it is this old (see the module docs).
const MAX_AGE: Duration = Duration::from_secs(1);
/// Invalidations remembered for the fill guard; a call older than the oldest forgotten one
/// fills nothing.
const RECENT: usize = 1024;

/// Field counts as `read.lua` arguments (no record read asks for more than 15 fields).
const COUNTS: [&str; 16] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
];

/// One record's values, in the order of the fields asked for (`None`: no such field or record).
/// Shared: the status cache hands the same row to every read it answers.
pub(super) type Values = Arc<[Option<String>]>;

/// `(Redis TIME in ms, the requested fields in order)`.
pub(super) type Read = Result<(i64, Values)>;

/// Cache entries by id: ids are random (server-chosen), so their own bits are the hash.
type IdMap<V> = HashMap<ElicitationId, V, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // `ElicitationId` hashes its 16 bytes in one call (uuid's `Hash`); fold them.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(b);
        }
    }
}

struct Job {
    id: ElicitationId,
    fields: &'static [&'static str],
    /// A status read, which the cache may answer.
    cacheable: bool,
    reply: oneshot::Sender<Read>,
}

/// Handle to the batching task; dropping every handle stops it once its queue is drained.
pub(super) struct ReadBatcher {
    tx: mpsc::Sender<Job>,
    ctx: Arc<Ctx>,
}

/// Where a batcher's calls go: round-robin over the shared pool, one client (a worker
/// thread's own connection, see [`super::local`]), or its own tracked connection and cache.
pub(super) enum Clients {
    Pool(Pool),
    One(Client),
    Cached(Arc<Cache>),
}

impl Clients {
    pub(super) fn pick(&self) -> &Client {
        match self {
            Clients::Pool(p) => p.next_connected(),
            Clients::One(c) => c,
            Clients::Cached(c) => &c.client,
        }
    }
}

struct Ctx {
    clients: Clients,
    script: Script,
    clustered: bool,
    keys: Keys,
}

impl ReadBatcher {
    /// Start the batching task on the current runtime, sending its calls to `clients`.
    pub(super) fn spawn(clients: Clients, keys: Keys) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let ctx = Arc::new(Ctx {
            clustered: clients.pick().is_clustered(),
            clients,
            script: Script::from_lua(include_str!("../../../lua/read.lua")),
            keys,
        });
        tokio::spawn(run(ctx.clone(), rx, Arc::new(Semaphore::new(IN_FLIGHT))));
        ReadBatcher { tx, ctx }
    }

    /// Whether the connection the reads go out on is up (reads fail at once when it is not).
    pub(super) fn is_connected(&self) -> bool {
        self.ctx.clients.pick().is_connected()
    }

    /// Wait (unbounded: the caller bounds it) until the connection the reads use is up.
    pub(super) async fn wait_for_connect(&self) {
        let _ = match &self.ctx.clients {
            Clients::Pool(p) => p.wait_for_connect().await,
            c => c.pick().wait_for_connect().await,
        };
    }

    /// Read `fields` of record `id`, with the Redis clock read just before them. A `cacheable`
    /// read (a status read) may be answered from the cache, as exactly (see the module docs).
    pub(super) async fn read(
        &self,
        id: ElicitationId,
        fields: &'static [&'static str],
        cacheable: bool,
    ) -> Read {
        debug_assert!(fields.len() < COUNTS.len());
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job {
                id,
                fields,
                cacheable,
                reply,
            })
            .await
            .map_err(|_| Error::Unavailable("the read batcher has stopped".into()))?;
        rx.await
            .map_err(|_| Error::Unavailable("the read was dropped".into()))?
    }
}

async fn run(ctx: Arc<Ctx>, mut rx: mpsc::Receiver<Job>, in_flight: Arc<Semaphore>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    loop {
        // Take a slot first: while every slot is busy, reads accumulate in the queue.
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        if rx.recv_many(&mut jobs, MAX_BATCH).await == 0 {
            return; // every handle dropped and the queue is empty
        }
        let batch = std::mem::replace(&mut jobs, Vec::with_capacity(MAX_BATCH));
        let ctx = ctx.clone();
        tokio::spawn(async move {
            match &ctx.clients {
                Clients::Cached(cache) => send_cached(&ctx, cache, batch).await,
                _ if ctx.clustered => {
                    let client = ctx.clients.pick().clone();
                    let mut groups: Vec<(u16, Vec<Job>)> = Vec::new();
                    for job in batch {
                        let slot = redis_keyslot(ctx.keys.record(job.id).as_bytes());
                        match groups.iter_mut().find(|g| g.0 == slot) {
                            Some(g) => g.1.push(job),
                            None => groups.push((slot, vec![job])),
                        }
                    }
                    let mut sends = tokio::task::JoinSet::new();
                    for (_, g) in groups {
                        let (ctx, client) = (ctx.clone(), client.clone());
                        sends.spawn(async move { send(&ctx, &client, g).await });
                    }
                    while sends.join_next().await.is_some() {}
                }
                _ => {
                    let client = ctx.clients.pick().clone();
                    send(&ctx, &client, batch).await;
                }
            }
            drop(permit);
        });
    }
}

/// One `read.lua` call for `jobs` (all in one hash slot under Cluster): the Redis clock and
/// each job's fields, in order. No jobs: a bare `TIME` (the cache's barrier).
async fn call(
    ctx: &Ctx,
    client: &Client,
    jobs: &[Job],
) -> std::result::Result<(Result<i64>, Vec<Result<Values>>), RedisError> {
    if jobs.is_empty() {
        static TIME: std::sync::LazyLock<fred::types::CustomCommand> =
            std::sync::LazyLock::new(|| {
                fred::types::CustomCommand::new_static(
                    "TIME",
                    fred::types::ClusterHash::FirstKey,
                    false,
                )
            });
        let t: Vec<String> = client.custom(TIME.clone(), Vec::<Value>::new()).await?;
        let now = match t.as_slice() {
            [s, us] => redis_now(s, us),
            _ => Err(Error::internal("bad TIME reply")),
        };
        return Ok((now, Vec::new()));
    }
    let keys: Vec<String> = jobs.iter().map(|j| ctx.keys.record(j.id)).collect();
    // Static strings: no copy per field per read.
    let mut args: Vec<Value> = Vec::with_capacity(jobs.iter().map(|j| j.fields.len() + 1).sum());
    for job in jobs {
        args.push(Value::from_static_str(COUNTS[job.fields.len()]));
        args.extend(job.fields.iter().map(|f| Value::from_static_str(f)));
    }
    let values: Vec<Value> = ctx.script.evalsha_with_reload(client, keys, args).await?;
    let mut values = values.into_iter();
    let now = match (values.next(), values.next()) {
        (Some(s), Some(us)) => redis_now(
            &s.as_string().unwrap_or_default(),
            &us.as_string().unwrap_or_default(),
        ),
        _ => Err(Error::internal("bad TIME in read reply")),
    };
    let rows = jobs
        .iter()
        .map(|_| match values.next() {
            Some(v) => v
                .convert::<Vec<Option<String>>>()
                .map(Values::from)
                .map_err(map_err),
            None => Err(Error::internal("short read reply")),
        })
        .collect();
    Ok((now, rows))
}

/// Send one `read.lua` call for `jobs` and answer each.
async fn send(ctx: &Ctx, client: &Client, jobs: Vec<Job>) {
    match call(ctx, client, &jobs).await {
        Ok((now, rows)) => {
            for (job, row) in jobs.into_iter().zip(rows) {
                let _ = job.reply.send(answer(&now, row));
            }
        }
        Err(e) => {
            for job in jobs {
                let _ = job.reply.send(Err(map_err(e.clone())));
            }
        }
    }
}

fn answer(now: &Result<i64>, row: Result<Values>) -> Read {
    match now {
        Ok(now) => row.map(|r| (*now, r)),
        Err(_) => Err(Error::internal("bad TIME in read reply")),
    }
}

/// A batch over the tracked connection: the records not cached (or not cacheable) are read by
/// the call, the cached ones are answered after its reply (see the module docs).
async fn send_cached(ctx: &Ctx, cache: &Arc<Cache>, jobs: Vec<Job>) {
    let (ticket, hits, misses) = cache.begin(jobs);
    match call(ctx, &cache.client, &misses).await {
        Ok((now, rows)) => {
            let again = cache.finish(&ticket, &now, hits, misses.into_iter().zip(rows));
            if !again.is_empty() {
                // Changed since they were cached: read them (rare).
                send(ctx, &cache.client, again).await;
            }
        }
        Err(e) => {
            for job in hits.into_iter().chain(misses) {
                let _ = job.reply.send(Err(map_err(e.clone())));
            }
        }
    }
}

/// The status cache of one batcher: its tracked RESP3 connection and the records read on it.
pub(super) struct Cache {
    client: Client,
    capacity: usize,
    keys: Keys,
    state: Mutex<State>,
}

struct State {
    invalidations: broadcast::Receiver<Invalidation>,
    reconnects: broadcast::Receiver<Server>,
    /// Bumped whenever the entries can no longer be trusted; a call sent in an older epoch
    /// neither fills the cache nor is answered from it.
    epoch: u64,
    /// The epoch in which `CLIENT TRACKING ON` was confirmed, if any.
    tracked: Option<u64>,
    /// A `CLIENT TRACKING ON` is under way.
    enabling: bool,
    /// The receivers were closed: never cache again.
    dead: bool,
    /// Invalidated records seen so far, and the most recent of them (for the fill guard).
    seq: u64,
    recent: VecDeque<(u64, ElicitationId)>,
    /// Invalidations numbered at or below this may be missing from `recent`.
    floor: u64,
    entries: IdMap<Entry>,
}

struct Entry {
    values: Values,
    at: Instant,
}

/// What a call knew when it was sent.
struct Ticket {
    epoch: u64,
    seq: u64,
    tracked: bool,
}

impl Cache {
    /// A cache over `client`, which must speak RESP3 and must not be connected yet (its first
    /// connection is announced like a reconnect, and that starts tracking). `keys` names the
    /// records (invalidations name keys).
    pub(super) fn new(client: Client, capacity: usize, keys: Keys) -> Arc<Cache> {
        let state = State {
            invalidations: client.invalidation_rx(),
            reconnects: client.reconnect_rx(),
            epoch: 0,
            tracked: None,
            enabling: false,
            dead: false,
            seq: 0,
            recent: VecDeque::new(),
            floor: 0,
            entries: IdMap::default(),
        };
        Arc::new(Cache {
            client,
            capacity: capacity.max(1),
            keys,
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Apply every invalidation and reconnect received so far; start tracking when the current
    /// connection does not have it yet.
    fn sync(self: &Arc<Self>, st: &mut State) {
        use broadcast::error::TryRecvError;
        loop {
            match st.reconnects.try_recv() {
                Ok(_) | Err(TryRecvError::Lagged(_)) => {
                    st.reset();
                    st.tracked = None;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => {
                    st.dead = true;
                    break;
                }
            }
        }
        loop {
            match st.invalidations.try_recv() {
                Ok(inv) => {
                    for key in &inv.keys {
                        // Only record keys are read (and so tracked) on this connection.
                        let Some(id) = key.as_str().and_then(|k| self.keys.id_of_channel(k)) else {
                            continue;
                        };
                        st.entries.remove(&id);
                        st.seq += 1;
                        let seq = st.seq;
                        st.recent.push_back((seq, id));
                        if st.recent.len() > RECENT {
                            if let Some((s, _)) = st.recent.pop_front() {
                                st.floor = s;
                            }
                        }
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Lagged(_)) => st.reset(),
                Err(TryRecvError::Closed) => {
                    st.dead = true;
                    break;
                }
            }
        }
        if st.dead {
            st.reset();
            st.tracked = None;
            return;
        }
        if st.tracked != Some(st.epoch) && !st.enabling && self.client.is_connected() {
            st.enabling = true;
            tokio::spawn(enable(self.clone(), st.epoch));
        }
    }

    /// Split a batch into the reads the cache will answer after the call and those the call
    /// must make.
    fn begin(self: &Arc<Self>, jobs: Vec<Job>) -> (Ticket, Vec<Job>, Vec<Job>) {
        let mut st = self.lock();
        self.sync(&mut st);
        let ticket = Ticket {
            epoch: st.epoch,
            seq: st.seq,
            tracked: st.tracked == Some(st.epoch),
        };
        let (mut hits, mut misses) = (Vec::with_capacity(jobs.len()), Vec::new());
        let now = Instant::now();
        for job in jobs {
            let fresh = ticket.tracked
                && job.cacheable
                && st
                    .entries
                    .get(&job.id)
                    .is_some_and(|e| now.saturating_duration_since(e.at) < MAX_AGE);
            if fresh {
                hits.push(job);
            } else {
                misses.push(job);
            }
        }
        drop(st);
        if !hits.is_empty() {
            metrics::counter!("elicitd_status_cache_total", "result" => "hit")
                .increment(hits.len() as u64);
        }
        (ticket, hits, misses)
    }

    /// After the call's reply: fill the cache from the reads it made where that is safe, answer
    /// them, and answer the cached ones still valid. Returns the cached reads whose record
    /// changed meanwhile, to be read again.
    fn finish(
        self: &Arc<Self>,
        ticket: &Ticket,
        now: &Result<i64>,
        hits: Vec<Job>,
        read: impl Iterator<Item = (Job, Result<Values>)>,
    ) -> Vec<Job> {
        let mut st = self.lock();
        let at = Instant::now();
        // Every push written before the reply has been received by now (wire order).
        self.sync(&mut st);
        let same = ticket.tracked && st.epoch == ticket.epoch && !st.dead;
        let guard_ok = same && ticket.seq >= st.floor;
        let mut missed = 0u64;
        for (job, row) in read {
            if job.cacheable {
                missed += 1;
                if let (true, Ok(_), Ok(values)) = (guard_ok, now, &row) {
                    let changed = st
                        .recent
                        .iter()
                        .rev()
                        .take_while(|(s, _)| *s > ticket.seq)
                        .any(|(_, k)| *k == job.id);
                    if !changed {
                        if st.entries.len() >= self.capacity && !st.entries.contains_key(&job.id) {
                            st.evict(self.capacity, at);
                        }
                        st.entries.insert(
                            job.id,
                            Entry {
                                values: values.clone(),
                                at,
                            },
                        );
                    }
                }
            }
            let _ = job.reply.send(answer(now, row));
        }
        let mut again = Vec::new();
        for job in hits {
            let cached = match (same, now) {
                (true, Ok(now)) => st.entries.get(&job.id).map(|e| (*now, e.values.clone())),
                _ => None,
            };
            match cached {
                Some(v) => {
                    let _ = job.reply.send(Ok(v));
                }
                None => again.push(job),
            }
        }
        drop(st);
        if missed > 0 {
            metrics::counter!("elicitd_status_cache_total", "result" => "miss").increment(missed);
        }
        if !again.is_empty() {
            metrics::counter!("elicitd_status_cache_total", "result" => "stale")
                .increment(again.len() as u64);
        }
        again
    }
}

impl State {
    /// Forget every entry and make every call in flight unable to fill or answer.
    fn reset(&mut self) {
        self.entries.clear();
        self.epoch += 1;
        self.recent.clear();
        self.floor = self.seq;
    }

    /// Make room: drop the entries past their age, or all of them.
    fn evict(&mut self, capacity: usize, now: Instant) {
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.at) < MAX_AGE);
        if self.entries.len() >= capacity {
            self.entries.clear();
        }
    }
}

/// Turn tracking on for the connection of `epoch`; the cache fills only once it is confirmed.
async fn enable(cache: Arc<Cache>, epoch: u64) {
    let r = cache
        .client
        .start_tracking(Vec::<String>::new(), false, false, false, false)
        .await;
    if let Err(e) = &r {
        tracing::warn!(error = %e, "could not turn on Redis client tracking; status reads are not cached meanwhile");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut st = cache.lock();
    // A reconnect announced before this reply is seen first (then `epoch` is stale).
    cache.sync(&mut st);
    st.enabling = false;
    if r.is_ok() && st.epoch == epoch {
        st.tracked = Some(epoch);
    }
}
