//! Wiring: build the store and service from a `Config`, serve HTTP, shut down gracefully.
//! Per-connection limits (idle connections, total body deadline) are in [`conn`].
//!
//! Shutdown order (SIGTERM/SIGINT or the given future): the listener stops accepting, every
//! parked `await` is released at once with its current status (clients call again and land on
//! another replica), in-flight requests finish (up to 30 s), then `serve` returns.

mod conn;

use std::{
    convert::Infallible,
    future::Future,
    net::{IpAddr, SocketAddr, TcpListener as StdListener},
    sync::Arc,
    time::Duration,
};

use axum::{
    extract::Request,
    http::{header, StatusCode},
    response::IntoResponse,
    routing::get,
    Router,
};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto::Builder as ConnBuilder, graceful::GracefulShutdown},
    service::TowerToHyperService,
};
use tokio::{net::TcpListener, sync::Semaphore};
use tower::ServiceExt;

use crate::{
    api,
    config::Config,
    limits::ClientAddr,
    service::Service,
    store::{
        memory::MemoryStore,
        redis::{RedisSettings, RedisStore},
        Store,
    },
    telemetry,
    wake::Hub,
};

/// Build the service (connects to Redis when configured).
pub async fn build(config: Config) -> Result<Service, Box<dyn std::error::Error + Send + Sync>> {
    let config = Arc::new(config);
    // A tenant's default endpoint that can never be delivered to is a configuration error,
    // found now rather than at the first event.
    for (tenant, url) in &config.notify.slack {
        if let Some(p) = crate::delivery::guard::literal_problem(url, config.webhooks.allow_private)
        {
            return Err(format!(
                "ELICITD_NOTIFY_SLACK: tenant {tenant}: {p} (ELICITD_WEBHOOK_ALLOW_PRIVATE=true \
                 allows it)"
            )
            .into());
        }
    }
    for (tenant, url) in &config.webhooks.endpoints {
        if let Some(p) = crate::delivery::guard::literal_problem(url, config.webhooks.allow_private)
        {
            return Err(format!(
                "ELICITD_WEBHOOKS: tenant {tenant}: {url} {p} (ELICITD_WEBHOOK_ALLOW_PRIVATE=true \
                 allows it)"
            )
            .into());
        }
    }
    telemetry::prometheus();
    let hub = Hub::new(config.max_parked_awaits);
    let store: Arc<dyn Store> = match &config.redis_url {
        Some(url) => {
            RedisStore::connect(
                RedisSettings {
                    url: url.clone(),
                    prefix: config.key_prefix.clone(),
                    pool_size: config.redis_pool_size,
                    retention: config.retention,
                    command_timeout: Duration::from_millis(1500),
                    replica_acks: config.redis_replica_acks,
                    replica_timeout: config.redis_replica_timeout,
                    status_cache: config.status_cache_entries,
                    legacy_records: config.legacy_records,
                },
                hub.clone(),
            )
            .await?
        }
        None => Arc::new(MemoryStore::new(hub.clone(), config.retention)),
    };
    let nudge = Arc::new(crate::delivery::Nudge::default());
    // Unless switched off: any request may ask for a Slack message, and deliveries written by
    // another replica must be delivered even if this one has no webhooks configured.
    if config.delivery_worker {
        crate::delivery::Deliverer::spawn(
            store.clone(),
            config.clone(),
            nudge.clone(),
            hub.shutdown_token().clone(),
        )?;
    }
    Ok(Service::new(config, store, hub, nudge))
}

/// The complete HTTP application of one replica. `/metrics` is included unless the config
/// moves it to its own listener (`ELICITD_METRICS_LISTEN`).
pub fn app(service: Service) -> Router {
    let separate_metrics = service.config().metrics_listen.is_some();
    let mut router = api::router(service.clone())
        .merge(crate::mcp::router(service.clone()))
        .merge(crate::review::router(service));
    if !separate_metrics {
        router = router.merge(metrics_router());
    }
    router.layer(axum::middleware::from_fn(telemetry::http_middleware))
}

/// `GET /metrics` in the Prometheus text format.
pub fn metrics_router() -> Router {
    Router::new().route(
        "/metrics",
        get(|| async {
            match telemetry::prometheus() {
                Some(h) => (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    h.render(),
                )
                    .into_response(),
                None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
            }
        }),
    )
}

/// How long graceful shutdown waits for in-flight requests before giving up.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serve until `shutdown` resolves, then drain as described in the module docs.
///
/// Our own accept loop (hyper-util) instead of `axum::serve`, for what a public service needs:
/// a cap on simultaneous connections (extra ones wait in the kernel backlog), a header read
/// timeout against slow-loris clients, idle connections closed after the same timeout, a total
/// deadline per request body, and the client address for per-address limits.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(service.config().max_connections));
    serve_with(listener, service, slots, shutdown).await
}

/// Bind `addr` once per HTTP worker thread (`config.http_threads`), every socket with
/// `SO_REUSEPORT` so the kernel spreads new connections over them. Port 0 picks one free port
/// for all of them.
pub fn bind_per_core(addr: SocketAddr, threads: usize) -> std::io::Result<Vec<StdListener>> {
    let first = reuseport_listener(addr)?;
    let addr = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..threads.max(1) {
        all.push(reuseport_listener(addr)?);
    }
    Ok(all)
}

fn reuseport_listener(addr: SocketAddr) -> std::io::Result<StdListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Serve on `listeners` ([`bind_per_core`]), one thread per listener, until `shutdown`
/// resolves (or a worker thread fails), then drain as [`serve`] does.
///
/// Thread per core: each worker thread runs its own single-threaded runtime with its own
/// accept loop and its own Redis connection ([`Service::attach_thread`]), so a request is
/// accepted, served and answered — its Redis round trip included — on one thread, without the
/// cross-thread wake-ups of a work-stealing runtime (docs/benchmarks.md, issue 21). Work that is
/// not a request (deliveries, sweeps, the subscriber) stays on the caller's runtime. The
/// connection cap is shared by all threads.
pub async fn serve_per_core(
    listeners: Vec<StdListener>,
    service: Service,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let slots = Arc::new(Semaphore::new(service.config().max_connections));
    let (ended_tx, mut ended) = tokio::sync::mpsc::unbounded_channel::<std::io::Result<()>>();
    let mut threads = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let (service, stop, slots, ended_tx) = (
            service.clone(),
            stop.clone(),
            slots.clone(),
            ended_tx.clone(),
        );
        let thread = std::thread::Builder::new()
            .name(format!("elicitd-http-{i}"))
            .spawn(move || {
                let run = || -> std::io::Result<()> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(async move {
                        if let Err(e) = service.attach_thread().await {
                            // Only a bad URL fails here, and that failed at start already.
                            tracing::warn!(error = %e, "worker thread uses the shared Redis pool");
                        }
                        let listener = TcpListener::from_std(listener)?;
                        serve_with(listener, service, slots, stop.cancelled_owned()).await
                    })
                };
                let _ = ended_tx.send(run());
            })?;
        threads.push(thread);
    }
    drop(ended_tx);
    let first_end = tokio::select! {
        _ = shutdown => None,
        r = ended.recv() => r,
    };
    stop.cancel();
    let mut result = match first_end {
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    };
    while let Some(r) = ended.recv().await {
        if let (Ok(()), Err(e)) = (&result, r) {
            result = Err(e);
        }
    }
    for t in threads {
        let _ = t.join();
    }
    result
}

/// [`serve`] with a connection cap shared with other accept loops.
async fn serve_with(
    listener: TcpListener,
    service: Service,
    slots: Arc<Semaphore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let config = service.config().clone();
    let app = app(service.clone());
    let mut builder = ConnBuilder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let trust_xff = config.trust_forwarded_for;
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(conn) => conn,
                Err(e) => {
                    // Per-connection failures (reset before accept) and fd exhaustion: log,
                    // breathe, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let (app, service) = (app.clone(), service.clone());
        let activity = conn::Activity::new();
        let act = activity.clone();
        let body_timeout = config.body_timeout;
        let svc = tower::service_fn(move |req: Request<Incoming>| {
            let in_flight = act.begin();
            let ip = trust_xff
                .then(|| forwarded_for(&req))
                .flatten()
                .unwrap_or(peer.ip());
            let (mut parts, body) = req.into_parts();
            parts.extensions.insert(ClientAddr(ip));
            // Status polls skip the router (see `api::fast_status`); their body, if any, is
            // ignored there as by the routed handler.
            let fast = api::is_fast_status(&parts);
            let body = (!fast).then(|| {
                axum::body::Body::new(conn::TimedBody::new(body, body_timeout, act.clone()))
            });
            let (app, act, service) = (app.clone(), act.clone(), service.clone());
            async move {
                let mut resp = match body {
                    None => api::fast_status(&service, parts).await,
                    Some(body) => match app.oneshot(Request::from_parts(parts, body)).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    },
                };
                if act.close_requested() {
                    resp.headers_mut().insert(
                        header::CONNECTION,
                        header::HeaderValue::from_static("close"),
                    );
                }
                drop(in_flight);
                Ok::<_, Infallible>(resp)
            }
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(svc));
        let conn = graceful.watch(conn.into_owned());
        let idle_limit = config.header_timeout;
        tokio::spawn(async move {
            tokio::select! {
                r = conn => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                _ = conn::idle_watch(activity, idle_limit) => {
                    tracing::debug!("closing a connection idle past the header timeout");
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!(
        parked = service.parked_awaits(),
        "shutting down: releasing parked awaits"
    );
    service.shutdown();
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout; exiting anyway");
    }
    Ok(())
}

/// The last `X-Forwarded-For` address (the one the nearest proxy appended).
fn forwarded_for<B>(req: &Request<B>) -> Option<IpAddr> {
    let v = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .next_back()?;
    v.to_str().ok()?.rsplit(',').next()?.trim().parse().ok()
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
