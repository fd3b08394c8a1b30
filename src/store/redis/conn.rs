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

/// A Redis failure as our error: connection trouble, timeouts, cluster moves and
/// `LOADING`/`BUSY`/`TRYAGAIN`/`CLUSTERDOWN` are `unavailable` (503, retry); the rest internal.
pub(super) fn map_err(e: RedisError) -> Error {
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Backpressure
        | ErrorKind::Routing
        | ErrorKind::Cluster => Error::Unavailable(Box::new(e)),
        _ if ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN"]
            .iter()
            .any(|p| e.details().starts_with(p)) =>
        {
            Error::Unavailable(Box::new(e))
        }
        _ => Error::Internal(Box::new(e)),
    }
}

/// `unavailable` with a fixed reason.
pub(super) fn unavailable(msg: &'static str) -> Error {
    Error::Unavailable(msg.into())
}

/// Build (not yet connect) the command pool and the subscriber for `s`.
pub(super) fn build(s: &RedisSettings) -> Result<(Pool, SubscriberClient), RedisError> {
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
    Ok((b.build_pool(s.pool_size)?, b.build_subscriber_client()?))
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
