//! Error → HTTP response (SPEC §5 body), with the log line for server-side failures.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

use crate::error::Error;

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

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = match &self {
            Error::Internal(source) => {
                tracing::error!(error = %source, "internal error");
                "internal error; the details are in the server log".to_string()
            }
            Error::Unavailable(source) => {
                tracing::warn!(error = %source, "storage unavailable");
                "storage is unavailable; retry shortly".to_string()
            }
            other => other.to_string(),
        };
        let mut body = json!({"code": self.code(), "message": message});
        if !self.details().is_empty() {
            body["details"] = json!(self.details());
        }
        let mut resp = (status, Json(json!({ "error": body }))).into_response();
        match self {
            Error::Unavailable(_) => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Error::Unauthorized => {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Error::RateLimited(_) => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        resp
    }
}
