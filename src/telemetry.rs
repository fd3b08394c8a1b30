//! Logging: human text on a terminal, JSON with `ELICITD_LOG_FORMAT=json`; one span per HTTP
//! request. Paths are logged by route template only (review tokens live in paths and must never
//! reach a log), and no header, body or `context` is ever logged.

use axum::{extract::MatchedPath, http::Request};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Install the global subscriber (`RUST_LOG` overrides the default `info`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

type MakeSpan = fn(&Request<axum::body::Body>) -> tracing::Span;

fn make_span(req: &Request<axum::body::Body>) -> tracing::Span {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    tracing::info_span!("http", method = %req.method(), route = %route)
}

/// Request span + response log line, without URIs or headers.
pub fn http_trace_layer() -> TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    MakeSpan,
    (),
    DefaultOnResponse,
> {
    TraceLayer::new_for_http()
        .make_span_with(make_span as MakeSpan)
        .on_request(())
        .on_response(DefaultOnResponse::new().level(Level::DEBUG))
}
