//! The pub/sub side of the Redis store: one subscriber connection per replica that
//! `SSUBSCRIBE`s the record channel of every id with local waiters (on behalf of the waiter
//! hub), and a feeder task that turns messages into wake-ups.
//!
//! Messages are hints (Redis pub/sub is at-most-once): after a reconnect, or when the receiver
//! lagged, the feeder re-subscribes everything and wakes every local waiter to re-read.

use std::sync::Arc;

use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, EventInterface, PubsubInterface},
    util::redis_keyslot,
};

use super::{
    conn::{map_err, unavailable},
    keys::Keys,
};
use crate::{
    error::Result,
    model::ElicitationId,
    wake::{BoxFuture, Hub, SubscriptionBackend},
};

/// The subscriber connection and the key names its channels follow.
pub(super) struct Subscriber {
    client: SubscriberClient,
    keys: Keys,
}

impl Subscriber {
    pub(super) fn new(client: SubscriberClient, keys: Keys) -> Arc<Self> {
        Arc::new(Subscriber { client, keys })
    }

    pub(super) fn is_connected(&self) -> bool {
        self.client.is_connected()
    }

    /// Forward pub/sub messages to `hub`; on reconnect or lag, wake everyone to re-read. The
    /// task holds the hub weakly and ends with it.
    pub(super) fn spawn_feeder(self: &Arc<Self>, hub: &Arc<Hub>) {
        let mut messages = self.client.message_rx();
        let mut reconnects = self.client.reconnect_rx();
        let this = self.clone();
        let weak = Arc::downgrade(hub);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                tokio::select! {
                    m = messages.recv() => match m {
                        Ok(m) => {
                            let Some(hub) = weak.upgrade() else { return };
                            if let Some(id) = this.keys.id_of_channel(&m.channel) {
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
                            this.resubscribe().await;
                            let Some(hub) = weak.upgrade() else { return };
                            hub.wake_all();
                        }
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
    }

    /// Re-issue every tracked shard subscription, one `SSUBSCRIBE` per hash slot. (fred's
    /// `resubscribe_all` starts with a plain `SUBSCRIBE` of the tracked channels, which fails
    /// when there are none and then skips the shard channels.)
    async fn resubscribe(&self) {
        let mut by_slot: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
        for ch in self.client.tracked_shard_channels() {
            let ch = ch.to_string();
            by_slot
                .entry(redis_keyslot(ch.as_bytes()))
                .or_default()
                .push(ch);
        }
        for (_, channels) in by_slot {
            if let Err(e) = self.client.ssubscribe(channels).await {
                tracing::warn!(error = %e, "resubscribe failed; waiters fall back to their timers");
            }
        }
    }
}

impl SubscriptionBackend for Subscriber {
    fn subscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        let ch = self.keys.record(id);
        Box::pin(async move {
            if !self.client.is_connected() {
                return Err(unavailable("redis subscriber is not connected"));
            }
            self.client.ssubscribe(ch).await.map_err(map_err)
        })
    }
    fn unsubscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        let ch = self.keys.record(id);
        Box::pin(async move { self.client.sunsubscribe(ch).await.map_err(map_err) })
    }
}
