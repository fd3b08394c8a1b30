//! Batched creates for the Redis store.
//!
//! fred writes (and flushes) every script call on its own: a create was one socket write on
//! the replica, one read and one script call on Redis, each with its fixed cost — the
//! `EVALSHA` itself, the Lua call, the argument tables. Creates that arrive while earlier ones
//! are in flight go out together instead, as one call of `lua/create.lua`, which runs each
//! exactly as if it were alone and answers each on its own, in order. The scheme is the read
//! batcher's ([`super::batch`]): at most [`IN_FLIGHT`] calls outstanding, no timer (at low load
//! a create is sent at once, as a call of one), nothing waits for company.
//!
//! - **Each create stands alone.** It runs under `pcall`: a command of one create that fails
//!   (out of memory, say) fails that create only; the others are written and answered.
//! - **Retries stay harmless.** fred re-sends a call whose reply was lost; each create in it
//!   then finds its record with its own token hash and answers as recorded, writing nothing.
//! - **Clock.** A call reads `TIME` once: the creates of one batch share their `created_ms`.
//! - **Redis Cluster.** A script's keys must share a hash slot: a batch is split by the slot
//!   of each create's record (its review-index keys are written before, on their own).
//! - **Bounded.** At most [`MAX_CREATES`] creates and about [`MAX_BYTES`] of arguments a call.
//!
//! Creates whose writes replicas must confirm (`WAIT`, `ELICITD_REDIS_REPLICA_ACKS`) do not
//! come here: the `WAIT` must follow them on their own connection, so they call
//! [`call`] directly with a batch of one.

use std::sync::Arc;

use fred::{
    clients::Client,
    error::{Error as RedisError, ErrorKind},
    interfaces::ClientLike,
    types::{scripts::Script, Value},
    util::redis_keyslot,
};
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{
    batch::Clients,
    codec::{self, Reply},
    conn::map_err,
};
use crate::error::{Error, Result};

/// Calls outstanding at most (as for reads).
const IN_FLIGHT: usize = 2;
/// Creates in one call at most.
const MAX_CREATES: usize = 64;
/// Argument bytes in one call at most (a create larger than this goes alone).
const MAX_BYTES: usize = 1 << 20;
/// Creates queued (not yet sent) at most; further callers wait for room.
const QUEUE: usize = 4096;

/// One create: `create.lua`'s keys and arguments for it (see the script's header).
pub(super) struct Create {
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

struct Job {
    create: Create,
    reply: oneshot::Sender<Result<Reply>>,
}

impl Job {
    fn bytes(&self) -> usize {
        let c = &self.create;
        c.keys.iter().chain(&c.args).map(|s| s.len() + 8).sum()
    }
}

/// Handle to the batching task; dropping every handle stops it once its queue is drained.
pub(super) struct CreateBatcher {
    tx: mpsc::Sender<Job>,
}

struct Ctx {
    clients: Clients,
    script: Script,
    clustered: bool,
}

impl CreateBatcher {
    /// Start the batching task on the current runtime, sending its calls to `clients`.
    pub(super) fn spawn(clients: Clients, script: Script) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let ctx = Arc::new(Ctx {
            clustered: clients.pick().is_clustered(),
            clients,
            script,
        });
        tokio::spawn(run(ctx, rx, Arc::new(Semaphore::new(IN_FLIGHT))));
        CreateBatcher { tx }
    }

    /// Run `create` in the next call, and answer as `create.lua` answered it.
    pub(super) async fn create(&self, create: Create) -> Result<Reply> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { create, reply })
            .await
            .map_err(|_| Error::Unavailable("the create batcher has stopped".into()))?;
        rx.await
            .map_err(|_| Error::Unavailable("the create was dropped".into()))?
    }
}

async fn run(ctx: Arc<Ctx>, mut rx: mpsc::Receiver<Job>, in_flight: Arc<Semaphore>) {
    let mut carry: Option<Job> = None;
    loop {
        // Take a slot first: while every slot is busy, creates accumulate in the queue.
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let first = match carry.take() {
            Some(j) => j,
            None => match rx.recv().await {
                Some(j) => j,
                None => return, // every handle dropped and the queue is empty
            },
        };
        let mut bytes = first.bytes();
        let mut batch = vec![first];
        while batch.len() < MAX_CREATES {
            let Ok(job) = rx.try_recv() else { break };
            let b = job.bytes();
            if bytes + b > MAX_BYTES {
                carry = Some(job);
                break;
            }
            bytes += b;
            batch.push(job);
        }
        let ctx = ctx.clone();
        tokio::spawn(async move {
            if ctx.clustered {
                let mut groups: Vec<(u16, Vec<Job>)> = Vec::new();
                for job in batch {
                    let slot = redis_keyslot(job.create.keys[0].as_bytes());
                    match groups.iter_mut().find(|g| g.0 == slot) {
                        Some(g) => g.1.push(job),
                        None => groups.push((slot, vec![job])),
                    }
                }
                let client = ctx.clients.pick().clone();
                let mut sends = tokio::task::JoinSet::new();
                for (_, g) in groups {
                    let (ctx, client) = (ctx.clone(), client.clone());
                    sends.spawn(async move { answer(&ctx.script, &client, g).await });
                }
                while sends.join_next().await.is_some() {}
            } else {
                let client = ctx.clients.pick().clone();
                answer(&ctx.script, &client, batch).await;
            }
            drop(permit);
        });
    }
}

/// One call for `jobs`, each answered.
async fn answer(script: &Script, client: &Client, jobs: Vec<Job>) {
    let (creates, replies): (Vec<Create>, Vec<_>) =
        jobs.into_iter().map(|j| (j.create, j.reply)).unzip();
    match call(script, client, creates).await {
        Ok(answers) => {
            for (reply, a) in replies.into_iter().zip(answers) {
                let _ = reply.send(a);
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(map_err(e.clone())));
            }
        }
    }
}

/// One `create.lua` call for `creates` (all in one hash slot under Cluster) on `client`: one
/// answer per create, in order; `Err` when the call as a whole failed.
pub(super) async fn call(
    script: &Script,
    client: &Client,
    creates: Vec<Create>,
) -> std::result::Result<Vec<Result<Reply>>, RedisError> {
    let n = creates.len();
    let mut keys: Vec<String> = Vec::with_capacity(creates.iter().map(|c| c.keys.len()).sum());
    let mut args: Vec<String> =
        Vec::with_capacity(1 + creates.iter().map(|c| c.args.len() + 2).sum::<usize>());
    args.push(n.to_string());
    for c in creates {
        args.push(c.keys.len().to_string());
        args.push(c.args.len().to_string());
        keys.extend(c.keys);
        args.extend(c.args);
    }
    let out: Vec<Value> = script.evalsha_with_reload(client, keys, args).await?;
    if out.len() != n {
        return Err(RedisError::new(
            ErrorKind::Protocol,
            "create answered the wrong number of replies",
        ));
    }
    Ok(out.into_iter().map(one).collect())
}

/// One create's reply: `{"fail", message}` is the error of the command that failed.
fn one(v: Value) -> Result<Reply> {
    let row: Vec<Option<String>> = v.convert().map_err(map_err)?;
    if row.first().and_then(|s| s.as_deref()) == Some("fail") {
        let msg = row.get(1).cloned().flatten().unwrap_or_default();
        return Err(map_err(RedisError::new(ErrorKind::Unknown, msg)));
    }
    codec::reply(row)
}
