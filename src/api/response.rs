//! Router-level failures (unknown route, wrong method) in the SPEC §5 error body. Service
//! errors become responses through `Error`'s own `IntoResponse` (in `crate::error`).

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use crate::service::out::StatusOut;

/// A status or await answer (200, JSON), as `Json(out)` would answer it, with the body written by
/// [`StatusOut::to_json`].
pub fn status_response(out: &StatusOut) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        out.to_json(),
    )
        .into_response()
}

/// A SPEC §5 error body with an explicit status (for router-level failures).
pub fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

/// An error whose status is forced to 404 (unknown routes).
pub struct NotFoundRoute;

impl IntoResponse for NotFoundRoute {
    fn into_response(self) -> Response {
        error_response(StatusCode::NOT_FOUND, "not_found", "no such route")
    }
}
