//! The one error type every surface shares, and the one table that says how each error looks
//! on each surface (SPEC §5): code, HTTP status, `Retry-After`, the MCP "what next" hint and the
//! review page's wording. Adapters read [`Error::row`]; none of them keeps its own list.
//!
//! Domain failures (`not_found`, `already_decided`, …) are values; infrastructure failures keep
//! their source for the log and show the client only a generic message. This module imports
//! nothing from the crate, so every layer may use it.

use std::borrow::Cow;

/// One problem with one field; `field` is a dotted path for request errors
/// (e.g. "requestedSchema.properties.age.minimum") or the property name for submissions.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Errors a service call can return. The variant decides its row of [`TABLE`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a field rule (400).
    #[error("{message}")]
    InvalidRequest {
        message: String,
        details: Vec<FieldError>,
    },
    /// Well-formed but not acceptable (422, code `invalid_request`): a reviewer's values that do
    /// not satisfy the request, a display template that does not compile, a webhook for a
    /// tenant without a signing secret.
    #[error("{message}")]
    Unprocessable {
        message: String,
        details: Vec<FieldError>,
    },
    #[error("missing or invalid API key")]
    Unauthorized,
    /// The caller may not do this from where it is (e.g. a browser `Origin` on `/mcp`).
    #[error("{0}")]
    Forbidden(String),
    /// Unknown id, malformed id, another tenant's id or an unknown review token.
    #[error("no such elicitation")]
    NotFound,
    #[error("the elicitation is still pending")]
    NotDecided,
    /// Decided already — or, with named reviewers, this reviewer has already voted.
    #[error("the elicitation has already been decided (or this reviewer has already voted)")]
    AlreadyDecided,
    #[error("the elicitation was withdrawn by the requester")]
    Canceled,
    #[error("the elicitation expired before anyone decided")]
    Expired,
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Slow down; `retry_after_secs` is when trying again makes sense.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after_secs: u32,
    },
    /// The store cannot be reached; the client should retry (503 + Retry-After).
    #[error("storage unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A bug or an unexpected store answer (500, generic body).
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// How one kind of error appears on every surface.
#[derive(Debug)]
pub struct Row {
    /// The stable machine-readable code of SPEC §5.
    pub code: &'static str,
    pub http_status: u16,
    /// `Retry-After` seconds (REST and the review page); `RateLimited` carries its own.
    pub retry_after_secs: Option<u32>,
    /// Appended to MCP tool errors: what the model should do next.
    pub mcp_hint: &'static str,
    /// The review page's heading and line for this error, when the page shows it as an error
    /// page (the decision states `already_decided`, `canceled`, `expired` show the request).
    pub page: Option<(&'static str, &'static str)>,
    /// What the client is told instead of the error's own message (server-side failures,
    /// whose details only go to the log).
    pub generic_message: Option<&'static str>,
}

const fn row(code: &'static str, http_status: u16, mcp_hint: &'static str) -> Row {
    Row {
        code,
        http_status,
        retry_after_secs: None,
        mcp_hint,
        page: None,
        generic_message: None,
    }
}

/// The error table (SPEC §5). Order matches [`Error`].
pub static TABLE: [Row; 13] = [
    row(
        "invalid_request",
        400,
        "fix the arguments and call again",
    ),
    row("invalid_request", 422, "fix the values and send them again"),
    row("unauthorized", 401, "check the API key"),
    row(
        "forbidden",
        403,
        "call from a server-side client (no browser Origin) or an allowed origin",
    ),
    Row {
        page: Some((
            "Link not valid",
            "This review link is not valid. Check that you opened the whole link you were sent.",
        )),
        ..row(
            "not_found",
            404,
            "check the elicitationId (it may also have passed its retention and been deleted)",
        )
    },
    row(
        "not_decided",
        409,
        "call elicit_await to wait for the reviewer, then elicit_result",
    ),
    row("already_decided", 409, "call elicit_result to read the decision"),
    row(
        "canceled",
        409,
        "this request was canceled; create a new one if you still need a decision",
    ),
    row(
        "expired",
        410,
        "nobody decided before the deadline; create a new request (maybe with a longer expiresInSeconds)",
    ),
    row(
        "payload_too_large",
        413,
        "send less data (context is limited to 64 KiB, each template to 32 KiB, css to 16 KiB)",
    ),
    Row {
        retry_after_secs: Some(1),
        page: Some((
            "Too many attempts",
            "Too many invalid review links were opened from your address. Please wait a minute and try again.",
        )),
        ..row(
            "rate_limited",
            429,
            "wait a second, then retry or poll elicit_status",
        )
    },
    Row {
        retry_after_secs: Some(1),
        page: Some((
            "Temporarily unavailable",
            "The service cannot be reached right now. Please try again in a moment.",
        )),
        generic_message: Some("storage is unavailable; retry shortly"),
        ..row(
            "unavailable",
            503,
            "storage is temporarily unavailable; retry in a moment",
        )
    },
    Row {
        page: Some((
            "Something went wrong",
            "Your decision could not be handled. Please try again later.",
        )),
        generic_message: Some("internal error; the details are in the server log"),
        ..row("internal", 500, "")
    },
];

impl Error {
    /// This error's row of [`TABLE`].
    pub fn row(&self) -> &'static Row {
        &TABLE[match self {
            Error::InvalidRequest { .. } => 0,
            Error::Unprocessable { .. } => 1,
            Error::Unauthorized => 2,
            Error::Forbidden(_) => 3,
            Error::NotFound => 4,
            Error::NotDecided => 5,
            Error::AlreadyDecided => 6,
            Error::Canceled => 7,
            Error::Expired => 8,
            Error::PayloadTooLarge(_) => 9,
            Error::RateLimited { .. } => 10,
            Error::Unavailable(_) => 11,
            Error::Internal(_) => 12,
        }]
    }

    /// The stable machine-readable code of SPEC §5.
    pub fn code(&self) -> &'static str {
        self.row().code
    }

    /// The HTTP status of SPEC §5.
    pub fn http_status(&self) -> u16 {
        self.row().http_status
    }

    /// `Retry-After` in seconds, when the client should retry.
    pub fn retry_after_secs(&self) -> Option<u32> {
        match self {
            Error::RateLimited {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => self.row().retry_after_secs,
        }
    }

    /// What the client is told: the error's own message, or a generic one for server-side
    /// failures (whose source goes to the log, see [`Error::log`]).
    pub fn public_message(&self) -> Cow<'static, str> {
        match self.row().generic_message {
            Some(generic) => generic.into(),
            None => self.to_string().into(),
        }
    }

    /// Log a server-side failure with its source (client mistakes are not logged).
    pub fn log(&self, surface: &'static str) {
        match self {
            Error::Internal(source) => tracing::error!(error = %source, surface, "internal error"),
            Error::Unavailable(source) => {
                tracing::warn!(error = %source, surface, "storage unavailable")
            }
            _ => {}
        }
    }

    /// Build an `invalid_request` with one message and no field details.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidRequest {
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// Build an `invalid_request` (400) from per-field problems.
    pub fn invalid_fields(details: Vec<FieldError>) -> Self {
        Error::InvalidRequest {
            message: summary(&details),
            details,
        }
    }

    /// Build an `invalid_request` (422) from per-field problems with a reviewer's values.
    pub fn invalid_decision(details: Vec<FieldError>) -> Self {
        Error::unprocessable(details)
    }

    /// Build an `invalid_request` (422) from per-field problems with well-formed input.
    pub fn unprocessable(details: Vec<FieldError>) -> Self {
        Error::Unprocessable {
            message: summary(&details),
            details,
        }
    }

    /// A `rate_limited` error with its `Retry-After`.
    pub fn rate_limited(message: impl Into<String>, retry_after_secs: u32) -> Self {
        Error::RateLimited {
            message: message.into(),
            retry_after_secs,
        }
    }

    pub fn internal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Internal(e.into())
    }

    pub fn unavailable(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Unavailable(e.into())
    }

    /// Per-field details, if any.
    pub fn details(&self) -> &[FieldError] {
        match self {
            Error::InvalidRequest { details, .. } | Error::Unprocessable { details, .. } => details,
            _ => &[],
        }
    }

    /// A server-side failure (counted as such in metrics; never the client's fault).
    pub fn is_server_side(&self) -> bool {
        matches!(self, Error::Internal(_) | Error::Unavailable(_))
    }
}

fn summary(details: &[FieldError]) -> String {
    match details {
        [one] => format!("{}: {}", one.field, one.message),
        many => format!("{} fields are invalid", many.len()),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A request body that did not arrive within its total deadline (`ELICITD_BODY_TIMEOUT_SECS`);
/// the server fails the body with it, the adapters answer 400 and the connection is closed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0} s")]
pub struct BodyTimedOut(pub u64);

impl BodyTimedOut {
    /// Whether `e` (or an error it wraps) is a body timeout.
    pub fn is_in(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut cur = Some(e);
        while let Some(err) = cur {
            if err.is::<BodyTimedOut>() {
                return true;
            }
            cur = err.source();
        }
        false
    }
}

/// The HTTP form of an error (REST routes, and `/mcp` before the MCP layer): the status, the
/// SPEC §5 body `{"error": {code, message, details?}}` (a generic message for server-side
/// failures, which are logged here), `Retry-After` and, on 401, `WWW-Authenticate`.
impl axum::response::IntoResponse for Error {
    fn into_response(self) -> axum::response::Response {
        use axum::http::{header, HeaderValue, StatusCode};
        use serde_json::json;
        self.log("rest");
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut body = json!({"code": self.code(), "message": self.public_message()});
        if !self.details().is_empty() {
            body["details"] = json!(self.details());
        }
        let mut resp = (status, axum::Json(json!({ "error": body }))).into_response();
        if let Some(secs) = self.retry_after_secs() {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each variant, in `TABLE` order.
    fn all() -> Vec<Error> {
        vec![
            Error::invalid("x"),
            Error::invalid_decision(vec![]),
            Error::Unauthorized,
            Error::Forbidden("x".into()),
            Error::NotFound,
            Error::NotDecided,
            Error::AlreadyDecided,
            Error::Canceled,
            Error::Expired,
            Error::PayloadTooLarge("x".into()),
            Error::rate_limited("x", 60),
            Error::unavailable("x"),
            Error::internal("x"),
        ]
    }

    #[test]
    fn every_variant_has_its_own_row_with_the_spec_status() {
        let errors = all();
        assert_eq!(errors.len(), TABLE.len());
        for (i, e) in errors.iter().enumerate() {
            assert!(std::ptr::eq(e.row(), &TABLE[i]), "{e:?}");
        }
        let statuses: Vec<u16> = errors.iter().map(Error::http_status).collect();
        assert_eq!(
            statuses,
            [400, 422, 401, 403, 404, 409, 409, 409, 410, 413, 429, 503, 500]
        );
    }

    #[test]
    fn retry_after_and_generic_messages() {
        assert_eq!(Error::rate_limited("x", 60).retry_after_secs(), Some(60));
        assert_eq!(Error::unavailable("boom").retry_after_secs(), Some(1));
        assert_eq!(Error::NotFound.retry_after_secs(), None);
        assert!(!Error::internal("secret detail")
            .public_message()
            .contains("secret"));
        assert_eq!(Error::NotFound.public_message(), "no such elicitation");
    }

    #[test]
    fn field_summaries() {
        let one = Error::invalid_fields(vec![FieldError::new("a", "is bad")]);
        assert_eq!(one.to_string(), "a: is bad");
        let two =
            Error::invalid_decision(vec![FieldError::new("a", "x"), FieldError::new("b", "y")]);
        assert_eq!(two.to_string(), "2 fields are invalid");
        assert_eq!(two.http_status(), 422);
    }
}
