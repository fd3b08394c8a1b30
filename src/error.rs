//! The one error type every surface shares, and the code table of SPEC §5.
//!
//! Domain failures (`not_found`, `already_decided`, …) are values the adapters turn into a REST
//! body or an MCP tool error; infrastructure failures keep their source for the log and show the
//! client only a generic message.

use crate::model::schema::FieldError;

/// Errors a service call can return. The variant decides the wire code and HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or breaks a field rule (400).
    #[error("{message}")]
    InvalidRequest {
        message: String,
        details: Vec<FieldError>,
    },
    /// The reviewer's values do not satisfy the request (422, code `invalid_request`).
    #[error("{message}")]
    InvalidDecision {
        message: String,
        details: Vec<FieldError>,
    },
    #[error("missing or invalid API key")]
    Unauthorized,
    /// Unknown id, malformed id, another tenant's id or an unknown review token.
    #[error("no such elicitation")]
    NotFound,
    #[error("the elicitation is still pending")]
    NotDecided,
    #[error("the elicitation has already been decided")]
    AlreadyDecided,
    #[error("the elicitation was withdrawn by the requester")]
    Canceled,
    #[error("the elicitation expired before anyone decided")]
    Expired,
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    RateLimited(String),
    /// The store cannot be reached; the client should retry (503 + Retry-After).
    #[error("storage unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A bug or an unexpected store answer (500, generic body).
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The stable machine-readable code of SPEC §5.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidRequest { .. } | Error::InvalidDecision { .. } => "invalid_request",
            Error::Unauthorized => "unauthorized",
            Error::NotFound => "not_found",
            Error::NotDecided => "not_decided",
            Error::AlreadyDecided => "already_decided",
            Error::Canceled => "canceled",
            Error::Expired => "expired",
            Error::PayloadTooLarge(_) => "payload_too_large",
            Error::RateLimited(_) => "rate_limited",
            Error::Unavailable(_) => "unavailable",
            Error::Internal(_) => "internal",
        }
    }

    /// The HTTP status of SPEC §5.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::InvalidRequest { .. } => 400,
            Error::InvalidDecision { .. } => 422,
            Error::Unauthorized => 401,
            Error::NotFound => 404,
            Error::NotDecided | Error::AlreadyDecided | Error::Canceled => 409,
            Error::Expired => 410,
            Error::PayloadTooLarge(_) => 413,
            Error::RateLimited(_) => 429,
            Error::Unavailable(_) => 503,
            Error::Internal(_) => 500,
        }
    }

    /// Build an `invalid_request` with one message and no field details.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidRequest {
            message: message.into(),
            details: Vec::new(),
        }
    }

    /// Build an `invalid_request` from per-field problems.
    pub fn invalid_fields(details: Vec<FieldError>) -> Self {
        let message = match details.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            many => format!("{} fields are invalid", many.len()),
        };
        Error::InvalidRequest { message, details }
    }

    pub fn internal(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Internal(e.into())
    }

    /// Per-field details, if any.
    pub fn details(&self) -> &[FieldError] {
        match self {
            Error::InvalidRequest { details, .. } | Error::InvalidDecision { details, .. } => {
                details
            }
            _ => &[],
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
