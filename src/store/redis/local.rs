//! Per-thread Redis connections, for the thread-per-core HTTP workers (`src/server`).
//!
//! Each HTTP worker thread runs its own single-threaded runtime and, once it has called
//! [`RedisStore::attach_thread`](super::RedisStore::attach_thread), its own Redis client, read
//! batcher and create batcher. A request's commands then go out on a connection whose fred tasks run on the
//! request's own thread: the request task, the batchers and the socket reader/writer take turns
//! on one thread, with no cross-thread wake-up (futex, IPI) per read. Threads without one —
//! the shared runtime's background work (deliveries, expiry sweeps, the subscriber) and
//! in-process test servers — use the shared pool as before. Nothing about the commands or their
//! order changes: only which connection carries them.

use std::{cell::RefCell, sync::Arc};

use fred::clients::Client;

use super::{batch::ReadBatcher, create_batch::CreateBatcher};

/// One worker thread's connection to one store.
pub(super) struct Local {
    pub client: Client,
    pub reads: ReadBatcher,
    pub creates: CreateBatcher,
}

thread_local! {
    /// `(store id, its connection on this thread)`; a process normally has one store, tests
    /// may have several.
    static LOCAL: RefCell<Vec<(u64, Arc<Local>)>> = const { RefCell::new(Vec::new()) };
}

/// This thread's connection to store `id`, if the thread attached one.
pub(super) fn get(id: u64) -> Option<Arc<Local>> {
    LOCAL.with(|l| {
        l.borrow()
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, x)| x.clone())
    })
}

/// Attach `local` to this thread for store `id` (replacing an earlier one).
pub(super) fn set(id: u64, local: Local) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        l.retain(|(s, _)| *s != id);
        l.push((id, Arc::new(local)));
    });
}
