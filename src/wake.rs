//! The waiter hub: wakes parked `await` calls when their elicitation changes.
//!
//! Per replica, a map `id → slot` holds one `watch` channel per id that has local waiters; the
//! store bumps it on a transition (memory store) or when the Redis pub/sub feeder sees a message
//! (Redis store). A [`Waiter`] registers *before* its caller reads the status, and its `watch`
//! receiver remembers every bump after registration, so no wake-up can fall between "read" and
//! "wait".
//!
//! Guarantees and limits:
//! - Redis pub/sub is at-most-once. The hub treats messages as hints: every wake ends in a
//!   re-read of the record, and after a subscriber reconnect (or a lagged receiver) the feeder
//!   calls [`Hub::wake_all`] so every waiter re-reads. A lost message costs latency, never a
//!   wrong answer.
//! - Subscriptions are reference counted per id: the first local waiter subscribes (and waits for
//!   the acknowledgement), the last one leaving unsubscribes. Subscribe/unsubscribe of one id are
//!   serialized and reconcile "wanted" against "subscribed", so racing arrivals and departures
//!   always converge.
//! - At most `max_parked` waiters exist at once per replica; past it `rate_limited`.
//! - [`Hub::shutdown`] releases every waiter at once (graceful shutdown).

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    hash::{Hash, Hasher},
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{error::Error, model::ElicitationId};

/// A boxed future, for the object-safe backend trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where subscriptions go (Redis pub/sub). The memory store needs none.
pub trait SubscriptionBackend: Send + Sync + 'static {
    /// Subscribe to an id's channel; resolves once the server acknowledged.
    fn subscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<(), Error>>;
    fn unsubscribe(&self, id: ElicitationId) -> BoxFuture<'_, Result<(), Error>>;
}

const STRIPES: usize = 64;

struct Slot {
    tx: watch::Sender<u64>,
    waiters: usize,
}

/// The per-replica waiter hub (see module docs).
pub struct Hub {
    slots: Mutex<HashMap<ElicitationId, Slot>>,
    subscribed: Mutex<HashSet<ElicitationId>>,
    stripes: Vec<tokio::sync::Mutex<()>>,
    backend: OnceLock<Arc<dyn SubscriptionBackend>>,
    parked: AtomicUsize,
    max_parked: usize,
    shutdown: CancellationToken,
}

impl Hub {
    pub fn new(max_parked: usize) -> Arc<Self> {
        Arc::new(Hub {
            slots: Mutex::new(HashMap::new()),
            subscribed: Mutex::new(HashSet::new()),
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            backend: OnceLock::new(),
            parked: AtomicUsize::new(0),
            max_parked,
            shutdown: CancellationToken::new(),
        })
    }

    /// Install the subscription backend (once, at start).
    pub fn set_backend(&self, backend: Arc<dyn SubscriptionBackend>) {
        let _ = self.backend.set(backend);
    }

    /// Number of waiters parked right now.
    pub fn parked(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
    }

    /// Number of ids with a live subscription.
    pub fn subscriptions(&self) -> usize {
        lock(&self.subscribed).len()
    }

    /// Cancelled when the replica shuts down.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Release every waiter (they re-read and answer) and refuse new waits.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Register a waiter for `id`; returns once its wake-ups are guaranteed to arrive.
    pub async fn register(self: &Arc<Self>, id: ElicitationId) -> Result<Waiter, Error> {
        if self.parked.fetch_add(1, Ordering::AcqRel) >= self.max_parked {
            self.parked.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::rate_limited(
                format!(
                    "this replica already holds {} parked awaits; retry shortly or poll status",
                    self.max_parked
                ),
                1,
            ));
        }
        metrics::gauge!("elicitd_awaits_parked").increment(1.0);
        let rx = {
            let mut slots = lock(&self.slots);
            let slot = slots.entry(id).or_insert_with(|| Slot {
                tx: watch::channel(0).0,
                waiters: 0,
            });
            slot.waiters += 1;
            slot.tx.subscribe()
        };
        let waiter = Waiter {
            hub: Arc::clone(self),
            id,
            rx,
        };
        // On error the waiter drops here, which undoes the registration.
        self.reconcile(id).await?;
        Ok(waiter)
    }

    /// Wake the local waiters of one id (a transition happened).
    pub fn wake(&self, id: ElicitationId) {
        if let Some(slot) = lock(&self.slots).get(&id) {
            slot.tx.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    /// Wake every local waiter (after a reconnect or lost messages).
    pub fn wake_all(&self) {
        for slot in lock(&self.slots).values() {
            slot.tx.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    /// Bring the subscription of `id` in line with whether it has waiters.
    async fn reconcile(&self, id: ElicitationId) -> Result<(), Error> {
        let Some(backend) = self.backend.get() else {
            return Ok(());
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        let _serial = self.stripes[(h.finish() as usize) % STRIPES].lock().await;
        let wanted = lock(&self.slots).contains_key(&id);
        let have = lock(&self.subscribed).contains(&id);
        if wanted && !have {
            backend.subscribe(id).await?;
            lock(&self.subscribed).insert(id);
        } else if !wanted && have {
            backend.unsubscribe(id).await?;
            lock(&self.subscribed).remove(&id);
        }
        Ok(())
    }

    fn leave(self: &Arc<Self>, id: ElicitationId) {
        self.parked.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("elicitd_awaits_parked").decrement(1.0);
        let last = {
            let mut slots = lock(&self.slots);
            match slots.get_mut(&id) {
                Some(slot) if slot.waiters > 1 => {
                    slot.waiters -= 1;
                    false
                }
                Some(_) => {
                    slots.remove(&id);
                    true
                }
                None => false,
            }
        };
        if last && self.backend.get().is_some() {
            let hub = Arc::clone(self);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Err(e) = hub.reconcile(id).await {
                        tracing::debug!(error = %e, "unsubscribe failed; kept until next reconcile");
                    }
                });
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these short locks cannot leave the maps inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One parked await. Dropping it unregisters.
pub struct Waiter {
    hub: Arc<Hub>,
    id: ElicitationId,
    rx: watch::Receiver<u64>,
}

impl Waiter {
    /// Resolves when the id was bumped since the last call (or since registration).
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            // The sender lives as long as any waiter of the id, so this is unreachable; stay
            // parked rather than spin.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.hub.leave(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn wake_reaches_registered_waiter_even_before_it_waits() {
        let hub = Hub::new(10);
        let id = ElicitationId::random();
        let mut w = hub.register(id).await.unwrap();
        hub.wake(id);
        tokio::time::timeout(Duration::from_secs(1), w.changed())
            .await
            .unwrap();
        assert_eq!(hub.parked(), 1);
        drop(w);
        assert_eq!(hub.parked(), 0);
        assert!(lock(&hub.slots).is_empty());
    }

    #[tokio::test]
    async fn cap_is_enforced() {
        let hub = Hub::new(1);
        let _a = hub.register(ElicitationId::random()).await.unwrap();
        let e = hub.register(ElicitationId::random()).await.err().unwrap();
        assert_eq!(e.code(), "rate_limited");
        assert_eq!(hub.parked(), 1);
    }
}
