//! One client connection's lifecycle limits, on top of hyper:
//! - **Idle connections are closed.** A connection with no request in flight must deliver a
//!   complete request head within the header timeout — counted from accept, and again from the
//!   end of every response (HTTP/1 keep-alive, HTTP/2 alike). hyper's own header timeout starts
//!   only once an HTTP/1 request has begun, and the HTTP/1-or-2 detection waits for bytes
//!   without any limit, so a socket that sends nothing (or one byte, or an HTTP/2 preface)
//!   would otherwise hold a connection slot for ever. [`Activity`] counts requests in flight;
//!   [`idle_watch`] ends the connection when it has been idle too long.
//! - **Bodies have a total deadline.** [`TimedBody`] fails the body once the body timeout has
//!   passed since the request head arrived, however the bytes trickle in (a per-chunk timer
//!   restarts on every byte). The failure answers 400 and the response carries
//!   `Connection: close`.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::error::BodyTimedOut;

/// What one connection is doing (shared by its requests and its watchdog).
pub(super) struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the connection last became idle.
    idle_since_ms: AtomicU64,
    /// A request body ran past its deadline: close after this response.
    close: AtomicBool,
}

impl Activity {
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            close: AtomicBool::new(false),
        })
    }

    /// A request head arrived; the guard marks its end (response produced, or dropped).
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    pub(super) fn close_requested(&self) -> bool {
        self.close.load(Ordering::Acquire)
    }

    pub(super) fn request_close(&self) {
        self.close.store(true, Ordering::Release);
    }
}

/// One request in flight; dropping it marks the connection idle when it was the last.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        let now = a.start.elapsed().as_millis() as u64;
        a.idle_since_ms.store(now, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Resolves once the connection has had no request in flight for `limit` (then the caller
/// drops the connection). While requests are in flight it only re-checks every `limit`.
pub(super) async fn idle_watch(activity: Arc<Activity>, limit: Duration) {
    loop {
        let deadline = if activity.in_flight.load(Ordering::Acquire) > 0 {
            Instant::now() + limit
        } else {
            let since = activity.idle_since_ms.load(Ordering::Acquire);
            let at = activity.start + Duration::from_millis(since) + limit;
            if Instant::now() >= at && activity.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            at
        };
        tokio::time::sleep_until(deadline).await;
    }
}

pin_project_lite::pin_project! {
    /// A request body that fails once its total deadline passes.
    pub(super) struct TimedBody<B> {
        #[pin]
        inner: B,
        #[pin]
        deadline: Sleep,
        limit: Duration,
        activity: Arc<Activity>,
    }
}

impl<B> TimedBody<B> {
    pub(super) fn new(inner: B, limit: Duration, activity: Arc<Activity>) -> Self {
        TimedBody {
            inner,
            deadline: tokio::time::sleep(limit),
            limit,
            activity,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.poll(cx).is_ready() {
            this.activity.request_close();
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.limit.as_secs())))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_connections_time_out_but_busy_ones_do_not() {
        let a = Activity::new();
        let limit = Duration::from_secs(10);
        // Busy for 25 s: not idle.
        let guard = a.begin();
        let watch = tokio::spawn(idle_watch(a.clone(), limit));
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert!(!watch.is_finished());
        drop(guard);
        // Idle from now: closed 10 s later, not before.
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(!watch.is_finished());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(watch.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickling_body_fails_at_its_total_deadline() {
        use http_body_util::BodyExt;
        let a = Activity::new();
        let (mut tx, body) = http_body_util::channel::Channel::<Bytes>::new(1);
        let sender = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if tx.send_data(Bytes::from_static(b"x")).await.is_err() {
                    return;
                }
            }
        });
        let timed = TimedBody::new(body, Duration::from_millis(3500), a.clone());
        let err = timed.collect().await.expect_err("the deadline fires");
        assert!(err.to_string().contains("did not arrive"), "{err}");
        assert!(a.close_requested());
        sender.abort();
    }
}
