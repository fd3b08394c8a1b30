//! Request extractors: bearer-key auth → tenant, and JSON bodies with SPEC §5 errors.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{header, request::Parts},
};
use serde::de::DeserializeOwned;

use crate::{error::Error, model::Tenant, service::Service};

/// The tenant of the request's `Authorization: Bearer <key>`.
pub struct AgentTenant(pub Tenant);

impl FromRequestParts<Service> for AgentTenant {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, s: &Service) -> Result<Self, Error> {
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        s.authenticate_bearer(value).map(AgentTenant)
    }
}

/// A JSON body: size-limited (413), parse errors as `invalid_request` (400) with serde's message.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Service> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(req: Request, s: &Service) -> Result<Self, Error> {
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
            if !(ct.starts_with("application/json") || ct.contains("+json")) {
                return Err(Error::invalid("Content-Type must be application/json"));
            }
        }
        let bytes = Bytes::from_request(req, s).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge(format!(
                    "request body is larger than {} bytes",
                    s.config().max_body_bytes
                ))
            } else {
                Error::invalid(format!("could not read the body: {}", e.body_text()))
            }
        })?;
        if bytes.is_empty() {
            return Err(Error::invalid("a JSON body is required"));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| Error::invalid(format!("invalid JSON body: {e}")))
    }
}
