//! Connections to Redis: building the command pool and the subscriber from the URL, and the
//! one mapping from a Redis failure to our error (`unavailable` for anything a retry can fix).

use std::time::Duration;

use fred::{
    clients::{Pool, SubscriberClient},
    error::{Error as RedisError, ErrorKind},
    prelude::*,
    types::config::{Config as RedisConfig, ReconnectPolicy, UnresponsiveConfig},
};

use super::RedisSettings;
use crate::error::Error;

/// Redis error codes (and fred's own retry-exhaustion messages) that mean "not now": a node
/// loading, busy, out of memory under `noeviction`, failing over, a slot moving, a demoted
/// primary, a connection replaced mid-command or a reply channel dropped. A retry can succeed
/// (or the operator must add capacity), so they are `unavailable` (503), never `internal`.
const TRANSIENT: [&str; 15] = [
    "LOADING",
    "OOM",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "READONLY",
    "NOREPLICAS",
    "UNBLOCKED",
    "Too many failed write attempts",
    "Max redirections exceeded",
    "Max attempts exceeded",
    "Missing expected connection",
    "Failed to route command",
    // A command whose reply channel was dropped by fred (its connection or routing task
    // ended under it): like a timeout, it may or may not have run.
    "channel closed",
];

/// A Redis failure as our error: connection trouble, timeouts, cluster moves and the
/// [`TRANSIENT`] codes are `unavailable` (503, retry); the rest internal. (A script's error
/// carries the code of the command that failed inside it, hence "contains".)
pub(super) fn map_err(e: RedisError) -> Error {
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Cluster => Error::Unavailable(Box::new(e)),
        _ if TRANSIENT.iter().any(|c| e.details().contains(c)) => Error::Unavailable(Box::new(e)),
        _ => Error::Internal(Box::new(e)),
    }
}

/// Warn at start when the server would lose decisions: keys evicted under memory pressure
/// (`maxmemory-policy` other than `noeviction`) or no persistence at all. Servers that forbid
/// `CONFIG` (managed Redis) are skipped quietly. In a Cluster one node is asked.
pub(super) async fn warn_about_server_settings(pool: &Pool) {
    use fred::interfaces::ConfigInterface;
    let Ok(c) = connected(pool) else { return };
    let get = |name: &'static str| async move {
        c.config_get::<Vec<String>, _>(name)
            .await
            .ok()
            .and_then(|v| v.get(1).cloned())
    };
    if let Some(policy) = get("maxmemory-policy").await {
        if policy != "noeviction" {
            tracing::warn!(
                %policy,
                "Redis maxmemory-policy is not noeviction: under memory pressure Redis may evict \
                 pending requests and decisions; set maxmemory-policy noeviction"
            );
        }
    }
    if let (Some(aof), Some(save)) = (get("appendonly").await, get("save").await) {
        if aof == "no" && save.trim().is_empty() {
            tracing::warn!(
                "Redis persistence is off (appendonly no, no save points): a Redis restart \
                 loses every request and decision; enable appendonly yes"
            );
        }
    }
}

/// `unavailable` with a fixed reason.
pub(super) fn unavailable(msg: &'static str) -> Error {
    Error::Unavailable(msg.into())
}

/// The client settings every connection of ours shares.
fn builder(s: &RedisSettings) -> Result<Builder, RedisError> {
    let mut b = Builder::from_config(RedisConfig::from_url(&s.url)?);
    b.with_config(|c| c.fail_fast = false)
        .with_connection_config(|c| {
            c.connection_timeout = Duration::from_secs(2);
            c.internal_command_timeout = Duration::from_secs(2);
            // An `ASK` redirect spends one attempt on `ASKING` and one on the command again, so
            // 2 failed every command that met a migrating slot; 4 lets MOVED + ASK through.
            c.max_command_attempts = 4;
            c.unresponsive = UnresponsiveConfig {
                max_timeout: Some(Duration::from_secs(5)),
                interval: Duration::from_secs(1),
            };
        })
        .with_performance_config(|p| {
            p.default_command_timeout = s.command_timeout;
            // Every event channel of a client (errors, reconnects, messages, invalidations, …)
            // is a broadcast channel of this many slots, allocated and written up front: 8192
            // slots cost ~1 MB of resident memory per channel. Command clients see no messages.
            p.broadcast_channel_capacity = 32;
        })
        .set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2));
    Ok(b)
}

/// Connect `client` and keep it connected for the life of the process.
///
/// fred 10.1 ends a client's routing task for good when a Cluster redirect runs out of command
/// attempts (`MOVED`, then `ASK` with none left: "Max attempts reached." out of
/// `send_asking_with_policy`): every connection is closed, yet the client still reports itself
/// connected, and each later command waits out its timeout. Whenever the task ends with such an
/// error, start it again; the commands queued meanwhile are served by the new one. A deliberate
/// `quit` ends the task without an error, and ends this watch.
pub(super) fn connect_supervised<C>(client: &C)
where
    C: ClientLike + Clone + Send + Sync + 'static,
{
    let client = client.clone();
    let mut task = client.connect();
    tokio::spawn(async move {
        loop {
            match task.await {
                Ok(Err(e)) if !e.is_canceled() => {
                    tracing::warn!(error = %e, "redis client stopped routing commands; restarting it");
                    metrics::counter!("elicitd_redis_client_restarts_total").increment(1);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    task = client.connect();
                }
                _ => return,
            }
        }
    });
}

/// Build (not yet connect) the command pool and the subscriber for `s`.
pub(super) fn build(s: &RedisSettings) -> Result<(Pool, SubscriberClient), RedisError> {
    let mut b = builder(s)?;
    let pool = b.build_pool(s.pool_size)?;
    // The subscriber's messages arrive in bursts (a decision per message); a receiver that
    // falls behind re-subscribes and wakes everyone, so it gets room.
    b.with_performance_config(|p| p.broadcast_channel_capacity = 8192);
    Ok((pool, b.build_subscriber_client()?))
}

/// Build (not yet connect) one command client for `s` (a worker thread's own).
pub(super) fn build_client(s: &RedisSettings) -> Result<Client, RedisError> {
    builder(s)?.build()
}

/// Build (not yet connect) a read batcher's own client: RESP3, so that `CLIENT TRACKING`
/// invalidations arrive on the connection they are about (see `batch.rs`, "Status cache").
pub(super) fn build_reader(s: &RedisSettings) -> Result<Client, RedisError> {
    let mut b = builder(s)?;
    b.with_config(|c| c.version = fred::types::RespVersion::RESP3);
    // Invalidations come one per changed key; a receiver that falls behind empties the cache
    // (correct, only slower).
    b.with_performance_config(|p| p.broadcast_channel_capacity = 1024);
    b.build()
}

/// A connected command client of `pool`, or `unavailable` at once (never queue behind a
/// reconnect).
pub(super) fn connected(pool: &Pool) -> Result<&Client, Error> {
    let c = pool.next_connected();
    if c.is_connected() {
        Ok(c)
    } else {
        Err(unavailable("redis is not connected"))
    }
}
