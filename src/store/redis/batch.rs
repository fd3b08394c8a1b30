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

use std::sync::Arc;

use fred::{
    clients::{Client, Pool},
    error::Error as RedisError,
    interfaces::ClientLike,
    types::{scripts::Script, Value},
    util::redis_keyslot,
};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{codec::redis_now, conn::map_err};
use crate::error::{Error, Result};

/// Calls outstanding at most. Two keep Redis busy while the next batch gathers; more would
/// only make batches smaller (measured: docs/benchmarks.md).
pub(super) const IN_FLIGHT: usize = 2;
/// Reads taken into one call at most.
const MAX_BATCH: usize = 256;
/// Reads queued (not yet sent) at most; further callers wait for room.
const QUEUE: usize = 8192;

/// Field counts as `read.lua` arguments (no record read asks for more than 15 fields).
const COUNTS: [&str; 16] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
];

/// `(Redis TIME in ms, the requested fields in order)`.
pub(super) type Read = Result<(i64, Vec<Option<String>>)>;

struct Job {
    key: String,
    slot: u16,
    fields: &'static [&'static str],
    reply: oneshot::Sender<Read>,
}

/// Handle to the batching task; dropping every handle stops it once its queue is drained.
pub(super) struct ReadBatcher {
    tx: mpsc::Sender<Job>,
}

/// Where a batcher's calls go: round-robin over the shared pool, or one client (a worker
/// thread's own connection, see [`super::local`]).
pub(super) enum Clients {
    Pool(Pool),
    One(Client),
}

impl Clients {
    fn pick(&self) -> &Client {
        match self {
            Clients::Pool(p) => p.next_connected(),
            Clients::One(c) => c,
        }
    }
}

struct Ctx {
    clients: Clients,
    script: Script,
    clustered: bool,
}

impl ReadBatcher {
    /// Start the batching task on the current runtime, sending its calls to `clients`.
    pub(super) fn spawn(clients: Clients) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let ctx = Arc::new(Ctx {
            clustered: clients.pick().is_clustered(),
            clients,
            script: Script::from_lua(include_str!("../../../lua/read.lua")),
        });
        tokio::spawn(run(ctx, rx, Arc::new(Semaphore::new(IN_FLIGHT))));
        ReadBatcher { tx }
    }

    /// Read `fields` of hash `key`, with the Redis clock read just before them.
    pub(super) async fn read(&self, key: String, fields: &'static [&'static str]) -> Read {
        debug_assert!(fields.len() < COUNTS.len());
        let (reply, rx) = oneshot::channel();
        let slot = redis_keyslot(key.as_bytes());
        self.tx
            .send(Job {
                key,
                slot,
                fields,
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
            let client = ctx.clients.pick().clone();
            if ctx.clustered {
                let mut groups: Vec<Vec<Job>> = Vec::new();
                for job in batch {
                    match groups.iter_mut().find(|g| g[0].slot == job.slot) {
                        Some(g) => g.push(job),
                        None => groups.push(vec![job]),
                    }
                }
                let mut sends = tokio::task::JoinSet::new();
                for g in groups {
                    let (ctx, client) = (ctx.clone(), client.clone());
                    sends.spawn(async move { send(&ctx, &client, g).await });
                }
                while sends.join_next().await.is_some() {}
            } else {
                send(&ctx, &client, batch).await;
            }
            drop(permit);
        });
    }
}

/// Send one `read.lua` call for `jobs` (all in one hash slot under Cluster) and answer each.
async fn send(ctx: &Ctx, client: &Client, jobs: Vec<Job>) {
    let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
    // Static strings: no copy per field per read.
    let mut args: Vec<Value> = Vec::with_capacity(jobs.iter().map(|j| j.fields.len() + 1).sum());
    for job in &jobs {
        args.push(Value::from_static_str(COUNTS[job.fields.len()]));
        args.extend(job.fields.iter().map(|f| Value::from_static_str(f)));
    }
    let reply: std::result::Result<Vec<Value>, RedisError> =
        ctx.script.evalsha_with_reload(client, keys, args).await;
    match reply {
        Ok(values) => {
            let mut values = values.into_iter();
            let now = match (values.next(), values.next()) {
                (Some(s), Some(us)) => redis_now(
                    &s.as_string().unwrap_or_default(),
                    &us.as_string().unwrap_or_default(),
                ),
                _ => Err(Error::internal("bad TIME in read reply")),
            };
            for job in jobs {
                let answer = match (&now, values.next()) {
                    (Ok(now), Some(v)) => v
                        .convert::<Vec<Option<String>>>()
                        .map(|f| (*now, f))
                        .map_err(map_err),
                    (Ok(_), None) => Err(Error::internal("short read reply")),
                    (Err(_), _) => Err(Error::internal("bad TIME in read reply")),
                };
                let _ = job.reply.send(answer);
            }
        }
        Err(e) => {
            for job in jobs {
                let _ = job.reply.send(Err(map_err(e.clone())));
            }
        }
    }
}
