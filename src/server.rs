//! Wiring: build the store and service from a `Config`, serve HTTP, shut down gracefully.
//!
//! Shutdown order (SIGTERM/SIGINT or the given future): the listener stops accepting, every
//! parked `await` is released at once with its current status (clients call again and land on
//! another replica), in-flight requests finish, then `serve` returns.

use std::{future::Future, sync::Arc, time::Duration};

use axum::{
    http::{header, StatusCode},
    response::IntoResponse,
    routing::get,
    Router,
};
use tokio::net::TcpListener;

use crate::{
    api,
    config::Config,
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
                },
                hub.clone(),
            )
            .await?
        }
        None => Arc::new(MemoryStore::new(hub.clone(), config.retention)),
    };
    Ok(Service::new(config, store, hub))
}

/// The complete HTTP application of one replica. `/metrics` is included unless the config
/// moves it to its own listener (`ELICITD_METRICS_LISTEN`).
pub fn app(service: Service) -> Router {
    let separate_metrics = service.config.metrics_listen.is_some();
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

/// Serve until `shutdown` resolves, then drain as described in the module docs.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let hub = service.hub.clone();
    let app = app(service);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!(
                parked = hub.parked(),
                "shutting down: releasing parked awaits"
            );
            hub.shutdown();
        })
        .await
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
