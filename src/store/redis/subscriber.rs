//! The pub/sub side of the Redis store: one subscriber client per replica that `SSUBSCRIBE`s
//! the record channel of every id with local waiters (on behalf of the waiter hub), a feeder
//! task that turns messages into wake-ups, and — on a Cluster — a keeper that follows channels
//! when their slot moves.
//!
//! Messages are hints (Redis pub/sub is at-most-once), so every way a subscription can silently
//! stop delivering ends in a re-subscribe *and* a wake-up of the affected waiters, which re-read:
//! - a reconnect (or a lagged receiver): re-subscribe everything, wake everyone;
//! - a slot moved to another primary (reshard, failover): Redis pushes `sunsubscribe` for its
//!   shard channels, which fred 10.1 drops without telling anyone. The keeper refreshes the
//!   cluster's slot map every [`KEEPER_PERIOD`] (and at once when fred reports a topology
//!   change), re-subscribes each channel whose slot has a new owner, and wakes its waiters. A
//!   decision published in between is therefore seen within about one period, not one await
//!   window.
//! - a re-subscribe that landed on the old owner: a slot's new owner is announced to the
//!   primaries one after the other (`redis-cli --cluster reshard` sends `CLUSTER SETSLOT … NODE`
//!   to each in turn), so the slot map may already name the new owner while it still answers
//!   `MOVED` back to the old one, where the `SSUBSCRIBE` ends up and is dropped a moment later.
//!   So every moved channel is re-subscribed once more a period after its move ("settling"),
//!   when every primary agrees, and its waiters are woken again.
//!
//! fred quirks avoided here: one channel per `SSUBSCRIBE` (fred matches only the first
//! confirmation of a multi-channel call, so later replies on that connection go astray), and no
//! `resubscribe_all` (it sends an empty `SUBSCRIBE` first, whose error aborts the rest).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, ClusterInterface, EventInterface, PubsubInterface},
    types::config::Server,
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

/// How often the Cluster keeper refreshes the slot map (the bound on a missed wake-up after a
/// slot moves).
pub(super) const KEEPER_PERIOD: Duration = Duration::from_millis(500);
/// Channels re-subscribed at once after a slot move.
const REHOME_CONCURRENCY: usize = 64;

/// Where one id's channel lives: its slot, and the primary it was subscribed on.
struct Home {
    slot: u16,
    server: Option<Server>,
}

/// The subscriber client and what it is subscribed to.
pub(super) struct Subscriber {
    client: SubscriberClient,
    keys: Keys,
    /// Every subscribed id → its channel's hash slot and the primary it was subscribed on
    /// (`None` outside a Cluster, or while unknown).
    homes: Mutex<HashMap<ElicitationId, Home>>,
    /// Ids re-subscribed after a slot move, and when: each is re-subscribed once more after
    /// [`KEEPER_PERIOD`] (see the module docs).
    settling: Mutex<Vec<(ElicitationId, Instant)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Subscriber {
    pub(super) fn new(client: SubscriberClient, keys: Keys) -> Arc<Self> {
        Arc::new(Subscriber {
            client,
            keys,
            homes: Mutex::new(HashMap::new()),
            settling: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn is_connected(&self) -> bool {
        self.client.is_connected()
    }

    /// The primary that serves `slot`, by the client's cached slot map.
    fn owner(&self, slot: u16) -> Option<Server> {
        if !self.client.is_clustered() {
            return None;
        }
        self.client
            .cached_cluster_state()
            .and_then(|s| s.get_server(slot).cloned())
    }

    /// `SSUBSCRIBE` one id's channel and remember where. The owner is read before the call: if
    /// the slot map changes meanwhile, the next keeper round sees a move and re-subscribes.
    async fn subscribe_one(&self, id: ElicitationId) -> Result<()> {
        let ch = self.keys.record(id);
        let slot = redis_keyslot(ch.as_bytes());
        let server = self.owner(slot);
        self.client.ssubscribe(ch.as_str()).await.map_err(map_err)?;
        lock(&self.homes).insert(id, Home { slot, server });
        Ok(())
    }

    /// The keeper's re-subscribe: like [`Self::subscribe_one`], but an id whose last waiter left
    /// meanwhile is not tracked again. `Ok(false)` when it is no longer tracked.
    async fn resubscribe(&self, id: ElicitationId) -> Result<bool> {
        if !lock(&self.homes).contains_key(&id) {
            return Ok(false);
        }
        let ch = self.keys.record(id);
        let server = self.owner(redis_keyslot(ch.as_bytes()));
        if let Err(e) = self.client.ssubscribe(ch.as_str()).await {
            // Forget the home so the next round tries again.
            if let Some(h) = lock(&self.homes).get_mut(&id) {
                h.server = None;
            }
            return Err(map_err(e));
        }
        match lock(&self.homes).get_mut(&id) {
            Some(h) => h.server = server,
            None => return Ok(false),
        }
        Ok(true)
    }

    /// Start the feeder and, on a Cluster, the keeper. Both hold the hub weakly and end with it.
    pub(super) fn spawn_tasks(self: &Arc<Self>, hub: &Arc<Hub>) {
        self.spawn_feeder(hub);
        if self.client.is_clustered() {
            self.spawn_keeper(hub);
        }
    }

    /// Forward pub/sub messages to `hub`; on reconnect or lag, re-subscribe and wake everyone.
    fn spawn_feeder(self: &Arc<Self>, hub: &Arc<Hub>) {
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
                            this.resubscribe_all().await;
                            let Some(hub) = weak.upgrade() else { return };
                            hub.wake_all();
                        }
                        Err(RecvError::Closed) => return,
                    },
                }
            }
        });
    }

    /// Re-issue every subscription, one channel per call.
    async fn resubscribe_all(&self) {
        let ids: Vec<ElicitationId> = lock(&self.homes).keys().copied().collect();
        for id in ids {
            if let Err(e) = self.subscribe_one(id).await {
                tracing::warn!(error = %e, "resubscribe failed; waiters fall back to their timers");
            }
        }
    }

    /// Cluster only: follow channels whose slot moved (see the module docs).
    fn spawn_keeper(self: &Arc<Self>, hub: &Arc<Hub>) {
        let mut changes = self.client.cluster_change_rx();
        let this = self.clone();
        let weak = Arc::downgrade(hub);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(KEEPER_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        if this.homes_is_empty() {
                            lock(&this.settling).clear();
                            continue;
                        }
                        // CLUSTER SLOTS on fred's side channel; a change also lands in `changes`.
                        if let Err(e) = this.client.sync_cluster().await {
                            tracing::debug!(error = %e, "cluster slot map refresh failed");
                        }
                    }
                    c = changes.recv() => {
                        if matches!(c, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                            return;
                        }
                    }
                }
                let Some(hub) = weak.upgrade() else { return };
                this.settle(&hub).await;
                this.rehome(&hub).await;
            }
        });
    }

    fn homes_is_empty(&self) -> bool {
        lock(&self.homes).is_empty()
    }

    /// Re-subscribe every channel whose slot's owner changed, then wake its waiters (a
    /// decision may have been published on the new owner before we listened there).
    async fn rehome(&self, hub: &Hub) {
        // One copy of the slot map per round (fred clones it per call), and each id's slot
        // from when it was subscribed: a round over 10 000 ids holds the lock well under a
        // millisecond (it was several, once per id a key built and the map cloned).
        let Some(state) = self.client.cached_cluster_state() else {
            return;
        };
        let moved: Vec<ElicitationId> = lock(&self.homes)
            .iter()
            .filter(|(_, home)| {
                state
                    .get_server(home.slot)
                    .is_some_and(|now| home.server.as_ref() != Some(now))
            })
            .map(|(id, _)| *id)
            .collect();
        if moved.is_empty() {
            return;
        }
        tracing::info!(
            channels = moved.len(),
            "cluster slots moved; resubscribing on the new owners"
        );
        metrics::counter!("elicitd_pubsub_rehomed_total").increment(moved.len() as u64);
        // Many at a time (one round trip each, single-channel calls as everywhere else): a
        // reshard moves hundreds of channels at once, and one after the other the last would
        // hear of its decision only seconds later.
        use futures_util::StreamExt;
        futures_util::stream::iter(moved)
            .for_each_concurrent(REHOME_CONCURRENCY, |id| async move {
                match self.resubscribe(id).await {
                    Ok(true) => lock(&self.settling).push((id, Instant::now())),
                    Ok(false) => return, // its last waiter left meanwhile
                    Err(e) => tracing::warn!(
                        error = %e,
                        "resubscribe on the new owner failed; retrying next round"
                    ),
                }
                hub.wake(id);
            })
            .await;
    }

    /// Re-subscribe, once more, the channels moved at least one period ago, and wake their
    /// waiters (see the module docs): by now every primary agrees on the slot's owner.
    async fn settle(&self, hub: &Hub) {
        let due: Vec<ElicitationId> = {
            let mut settling = lock(&self.settling);
            let now = Instant::now();
            let mut due = Vec::new();
            settling.retain(|&(id, at)| {
                let ripe = now.duration_since(at) >= KEEPER_PERIOD;
                if ripe {
                    due.push(id);
                }
                !ripe
            });
            due
        };
        if due.is_empty() {
            return;
        }
        use futures_util::StreamExt;
        futures_util::stream::iter(due)
            .for_each_concurrent(REHOME_CONCURRENCY, |id| async move {
                match self.resubscribe(id).await {
                    Ok(false) => return,
                    Ok(true) => {}
                    Err(e) => tracing::warn!(
                        error = %e,
                        "resubscribe after a slot move failed; retrying next round"
                    ),
                }
                hub.wake(id);
            })
            .await;
    }
}

impl SubscriptionBackend for Subscriber {
    fn subscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if !self.client.is_connected() {
                return Err(unavailable("redis subscriber is not connected"));
            }
            self.subscribe_one(id).await
        })
    }
    fn unsubscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<()>> {
        let ch = self.keys.record(id);
        Box::pin(async move {
            lock(&self.homes).remove(&id);
            self.client.sunsubscribe(ch).await.map_err(map_err)
        })
    }
}
