//! Observability: logging set-up, the per-request middleware (request id, span, HTTP metrics)
//! and the Prometheus recorder with every metric described.
//!
//! Never logged or labelled: API keys, review tokens (paths are logged and labelled by route
//! template only), request bodies and `context`. Labels are low-cardinality (no ids).

use std::{sync::OnceLock, time::Duration};

use axum::{
    extract::{MatchedPath, Request},
    http::{HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::time::Instant;
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Libraries whose verbose levels print what we never log (MCP messages with review links and
/// `context`, HTTP headers with API keys, Redis commands with records): capped at these levels
/// whatever `RUST_LOG` says. (rmcp also logs every stateless request's set-up at info.)
pub const LOG_CAPS: [&str; 6] = [
    "rmcp=warn",
    "h2=info",
    "hyper=info",
    "hyper_util=info",
    "fred=info",
    "tower=info",
];

/// The log filter: `RUST_LOG` (default `info`), with [`LOG_CAPS`] applied on top.
pub fn log_filter(rust_log: Option<&str>) -> EnvFilter {
    let mut filter = rust_log
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    for cap in LOG_CAPS {
        if let Ok(d) = cap.parse() {
            filter = filter.add_directive(d);
        }
    }
    filter
}

/// Install the global log subscriber (see [`log_filter`]).
pub fn init_logging(format: LogFormat) {
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    // stderr: stdout may carry the MCP stdio protocol.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Latency buckets (seconds) shared by every histogram: 0.5 ms … 60 s.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Buckets of `elicitd_webhook_delivery_lag_seconds` (s): a delivery may be retried for a day.
const LAG_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0,
    3600.0, 7200.0, 18000.0, 43200.0, 86400.0, 172800.0,
];

static PROMETHEUS: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process-wide Prometheus handle; installs the recorder (and describes every metric) on
/// first use. `None` only if another recorder was installed by an embedding program.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    PROMETHEUS
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .ok()?
                // Full matchers win over suffix ones: deliveries retried for hours.
                .set_buckets_for_metric(
                    Matcher::Full("elicitd_webhook_delivery_lag_seconds".into()),
                    LAG_BUCKETS,
                )
                .ok()?
                .set_buckets_for_metric(
                    Matcher::Full("elicitd_notification_delivery_lag_seconds".into()),
                    LAG_BUCKETS,
                )
                .ok()?
                .install_recorder()
                .ok()?;
            describe();
            gauge!("elicitd_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let h = handle.clone();
                rt.spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        h.run_upkeep();
                    }
                });
            }
            Some(handle)
        })
        .as_ref()
}

fn describe() {
    describe_gauge!(
        "elicitd_build_info",
        "Build information; the value is always 1."
    );
    describe_counter!(
        "elicitd_http_requests_total",
        "HTTP requests by route template, method and status class."
    );
    describe_histogram!(
        "elicitd_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP request latency by route template, method and status class (parked awaits included)."
    );
    describe_counter!(
        "elicitd_elicitations_created_total",
        "Elicitations created, by kind (idempotent replays excluded)."
    );
    describe_counter!(
        "elicitd_decisions_total",
        "Transitions out of pending, by outcome (submitted, declined, canceled)."
    );
    describe_counter!(
        "elicitd_transitions_refused_total",
        "Refused operations, by operation and error code."
    );
    describe_gauge!(
        "elicitd_awaits_parked",
        "await calls currently parked on this replica."
    );
    describe_histogram!(
        "elicitd_await_wake_seconds",
        Unit::Seconds,
        "From a decision (store clock) to a parked await answering it."
    );
    describe_counter!(
        "elicitd_pubsub_reconnects_total",
        "Reconnects of the Redis pub/sub connection."
    );
    describe_counter!(
        "elicitd_status_cache_total",
        "Status reads by how the status cache served them: hit (answered from the cache after the round trip), miss (read from Redis), stale (cached but changed, read again)."
    );
    describe_counter!(
        "elicitd_redis_client_restarts_total",
        "Redis clients restarted after their command routing stopped on an error."
    );
    describe_counter!(
        "elicitd_pubsub_rehomed_total",
        "Shard subscriptions moved to a new owner after a Cluster slot moved."
    );
    describe_counter!(
        "elicitd_replica_wait_failures_total",
        "State changes answered 503 because replicas did not confirm them in time, by operation."
    );
    describe_counter!(
        "elicitd_redis_errors_total",
        "Redis command failures, by operation and class (unavailable, internal)."
    );
    describe_histogram!(
        "elicitd_redis_command_duration_seconds",
        Unit::Seconds,
        "Redis round-trip time by store operation."
    );
    describe_counter!(
        "elicitd_review_token_failures_total",
        "Review requests with an unknown or malformed token."
    );
    describe_counter!(
        "elicitd_webhook_deliveries_total",
        "Webhook delivery attempts by outcome (delivered, retry, failed, gone)."
    );
    describe_histogram!(
        "elicitd_webhook_attempt_seconds",
        Unit::Seconds,
        "Duration of one webhook delivery attempt, request sent to answer or error."
    );
    describe_histogram!(
        "elicitd_webhook_delivery_lag_seconds",
        Unit::Seconds,
        "From a transition (store clock) to its webhook event being delivered, retries included."
    );
    describe_gauge!(
        "elicitd_webhook_queue_depth",
        "Deliveries (webhooks and notifications) waiting in the queue (due, scheduled for retry \
         or leased), fleet-wide."
    );
    describe_counter!(
        "elicitd_notifications_total",
        "Notification attempts by channel (email, slack) and outcome (delivered, retry, failed, \
         gone)."
    );
    describe_histogram!(
        "elicitd_notification_delivery_lag_seconds",
        Unit::Seconds,
        "Time from an event to its notification being delivered, by channel (retries included)."
    );
    describe_counter!(
        "elicitd_template_fallbacks_total",
        "Review pages that showed the default view of a requester template part (part, reason)."
    );
    describe_histogram!(
        "elicitd_template_render_seconds",
        Unit::Seconds,
        "Time to render the requester templates of one review page (pages with templates only)."
    );
    describe_gauge!(
        "elicitd_webhook_oldest_due_seconds",
        Unit::Seconds,
        "How long the earliest due delivery (webhook or notification) has been waiting (0 when none is overdue)."
    );
}

/// Record one store operation's latency (and failure class). The histogram of each operation
/// is looked up in the registry once per thread.
pub fn record_store_op<T>(
    op: &'static str,
    started: Instant,
    result: &Result<T, crate::error::Error>,
) {
    thread_local! {
        static HISTOGRAMS: std::cell::RefCell<Vec<(&'static str, metrics::Histogram)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let elapsed = started.elapsed().as_secs_f64();
    HISTOGRAMS.with(|h| {
        let mut h = h.borrow_mut();
        // A handful of operations: a scan beats hashing.
        match h.iter().find(|(o, _)| std::ptr::eq(*o, op) || *o == op) {
            Some((_, hist)) => hist.record(elapsed),
            None => {
                let hist = histogram!("elicitd_redis_command_duration_seconds", "op" => op);
                hist.record(elapsed);
                h.push((op, hist));
            }
        }
    });
    if let Err(e) = result {
        let class = match e {
            crate::error::Error::Unavailable(_) => "unavailable",
            crate::error::Error::Internal(_) => "internal",
            _ => return,
        };
        counter!("elicitd_redis_errors_total", "op" => op, "class" => class).increment(1);
    }
}

static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A caller's `X-Request-Id` is kept when it is 1–128 chars of `[A-Za-z0-9._:-]`.
fn valid_request_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b)))
    .then(|| s.to_string())
}

/// Per request: request id (kept or generated, echoed in the response), one span, metrics.
pub async fn http_middleware(mut req: Request, next: Next) -> Response {
    let route = match req.extensions().get::<MatchedPath>() {
        Some(p) => route_name(p.as_str()),
        None => route_name("unmatched"),
    };
    let method = req.method().clone();
    let seen = Observed::begin(&method, req.headers_mut(), route);
    let resp = next.run(req).instrument(seen.span.clone()).await;
    seen.end(resp)
}

/// One request's telemetry: what [`http_middleware`] does around every route, also used by
/// the status fast path (`api::fast_status`), which answers before the router.
pub struct Observed {
    started: Instant,
    request_id: HeaderValue,
    route: std::sync::Arc<str>,
    method: &'static str,
    /// The request's span; run the handler in it.
    pub span: tracing::Span,
}

impl Observed {
    /// Take (or make, and insert into `headers`) the request id and open the span of `route`.
    pub fn begin(
        method: &axum::http::Method,
        headers: &mut axum::http::HeaderMap,
        route: std::sync::Arc<str>,
    ) -> Observed {
        let started = Instant::now();
        let request_id = match headers
            .get(&REQUEST_ID)
            .filter(|v| valid_request_id(v).is_some())
        {
            Some(v) => v.clone(),
            None => {
                let v = new_request_id();
                headers.insert(REQUEST_ID.clone(), v.clone());
                v
            }
        };
        let method = method_label(method);
        let span = tracing::info_span!(
            "http",
            method,
            route = &*route,
            request_id = request_id.to_str().unwrap_or_default()
        );
        Observed {
            started,
            request_id,
            route,
            method,
            span,
        }
    }

    /// Count the answer, log it at debug, echo the request id.
    pub fn end(self, mut resp: Response) -> Response {
        let status = resp.status().as_u16();
        let class = match status {
            100..=199 => 0,
            200..=299 => 1,
            300..=399 => 2,
            400..=499 => 3,
            _ => 4,
        };
        let elapsed = self.started.elapsed();
        let (requests, duration) = http_metrics(&self.route, self.method, class);
        requests.increment(1);
        duration.record(elapsed.as_secs_f64());
        self.span.in_scope(|| {
            tracing::debug!(status, latency_ms = elapsed.as_millis() as u64, "request")
        });
        resp.headers_mut()
            .insert(REQUEST_ID.clone(), self.request_id);
        resp
    }
}

/// A fresh request id: 32 hex digits, a random per-process prefix and a counter (unique, and
/// no system call or allocation beyond the header per request).
fn new_request_id() -> HeaderValue {
    use std::sync::atomic::{AtomicU64, Ordering};
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 32];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in prefix
        .to_be_bytes()
        .iter()
        .chain(n.to_be_bytes().iter())
        .enumerate()
    {
        buf[2 * i] = HEX[(b >> 4) as usize];
        buf[2 * i + 1] = HEX[(b & 15) as usize];
    }
    HeaderValue::from_bytes(&buf).expect("hex digits are a valid header value")
}

/// The metric label of a method: the standard ones by name, anything else `other` (a client
/// may send any token as a method; labels must stay few).
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Routes are a fixed set (matched paths): one shared name each (a metric label, e.g.
/// `/v1/elicitations/{id}`).
pub fn route_name(route: &str) -> std::sync::Arc<str> {
    thread_local! {
        static ROUTES: std::cell::RefCell<std::collections::HashMap<String, std::sync::Arc<str>>> =
            Default::default();
    }
    ROUTES.with(|r| {
        let mut r = r.borrow_mut();
        if let Some(a) = r.get(route) {
            return a.clone();
        }
        let a: std::sync::Arc<str> = route.into();
        r.insert(route.to_string(), a.clone());
        a
    })
}

/// The request counter and duration histogram of (route, method, status class), looked up in
/// the registry once per thread and then reused (a registry lookup with labels per request
/// cost more than the rest of a `/healthz`).
fn http_metrics(
    route: &std::sync::Arc<str>,
    method: &'static str,
    class: usize,
) -> (metrics::Counter, metrics::Histogram) {
    type Key = (std::sync::Arc<str>, &'static str, usize);
    thread_local! {
        static HANDLES: std::cell::RefCell<
            std::collections::HashMap<Key, (metrics::Counter, metrics::Histogram)>,
        > = Default::default();
    }
    const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
    HANDLES.with(|h| {
        let mut h = h.borrow_mut();
        let key = (route.clone(), method, class);
        if let Some(v) = h.get(&key) {
            return v.clone();
        }
        let labels = [
            ("route", route.to_string()),
            ("method", method.to_string()),
            ("status", CLASSES[class].to_string()),
        ];
        let v = (
            counter!("elicitd_http_requests_total", &labels),
            histogram!("elicitd_http_request_duration_seconds", &labels),
        );
        h.insert(key, v.clone());
        v
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_sanitised() {
        assert_eq!(
            valid_request_id(&HeaderValue::from_static("abc-123")).as_deref(),
            Some("abc-123")
        );
        assert!(valid_request_id(&HeaderValue::from_static("has space")).is_none());
        assert!(valid_request_id(&HeaderValue::from_str(&"a".repeat(129)).unwrap()).is_none());
    }
}
