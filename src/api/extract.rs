//! Request extractors: bearer-key auth → tenant, and JSON bodies with SPEC §5 errors.

use axum::{
    body::{Body, Bytes},
    extract::{FromRequest, FromRequestParts, Request},
    http::{header, request::Parts, HeaderMap},
};
use serde::de::DeserializeOwned;

use crate::{
    error::{BodyTimedOut, Error},
    model::Tenant,
    service::Service,
};

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
        let (parts, body) = req.into_parts();
        read_json(&parts.headers, body, s.config().max_body_bytes)
            .await
            .map(JsonBody)
    }
}

/// Whether a `Content-Type` value names JSON: `application/json` or `application/<x>+json`,
/// parameters (`; charset=…`) ignored, case-insensitive. (Substring checks would let
/// `text/plain; x=+json` through.)
pub fn is_json_content_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", "json")) => true,
        Some(("application", sub)) => {
            sub.ends_with("+json") && sub.len() > 5 && !sub.contains(char::is_whitespace)
        }
        _ => false,
    }
}

/// Read and parse a JSON body: `Content-Type` must be JSON (or absent), the body at most
/// `limit` bytes (413), complete within the body deadline (400), and valid JSON for `T` (400).
pub async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<T, Error> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        if !is_json_content_type(ct.to_str().unwrap_or_default()) {
            return Err(Error::invalid("Content-Type must be application/json"));
        }
    }
    // Announced too large: refused before a byte of it is read (no upload to wait for).
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(Error::PayloadTooLarge(format!(
            "request body is larger than {limit} bytes"
        )));
    }
    let bytes: Bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        let source: &(dyn std::error::Error + 'static) = &e;
        if BodyTimedOut::is_in(source) {
            Error::invalid(e.to_string())
        } else if is_length_limit(source) {
            Error::PayloadTooLarge(format!("request body is larger than {limit} bytes"))
        } else {
            Error::invalid(format!("could not read the body: {e}"))
        }
    })?;
    if bytes.is_empty() {
        return Err(Error::invalid("a JSON body is required"));
    }
    serde_json::from_slice(&bytes).map_err(|e| Error::invalid(format!("invalid JSON body: {e}")))
}

/// Whether `e` comes from `http_body_util::Limited` (the body size limit).
fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.to_string().contains("length limit exceeded") {
            return true;
        }
        cur = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_media_types_are_json() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
            " application/json ;x=y",
        ] {
            assert!(is_json_content_type(ok), "{ok}");
        }
        for bad in [
            "text/plain; x=+json",
            "text/json",
            "application/jsonx",
            "application/+json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=+json",
            "",
        ] {
            assert!(!is_json_content_type(bad), "{bad}");
        }
    }
}
