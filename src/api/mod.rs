//! The REST adapter (`/v1`, `/healthz`, `/readyz`, `/openapi.json`): parse, call [`Service`],
//! shape the answer. Every failure — including malformed JSON, unknown routes and oversized
//! bodies — answers with the error body of SPEC §5. Routes and their OpenAPI description come
//! from the same `#[utoipa::path]` annotations.

mod docs;
mod extract;
mod response;

use std::sync::Arc;

use axum::{
    extract::{DefaultBodyLimit, Path, Query, State},
    http::StatusCode,
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use serde::Deserialize;
use utoipa::{IntoParams, OpenApi};
use utoipa_axum::{router::OpenApiRouter, routes};

pub use docs::{ApiDoc, ErrorBody};
pub use extract::{AgentTenant, JsonBody};

use crate::{
    error::Error,
    kinds::{CreateRequest, DecisionInput, Kind},
    service::{
        out::{AuditOut, CreatedOut, DeliveriesOut, DeliveryOut, ResultOut, StateOut, StatusOut},
        Service,
    },
};

type ApiResult<T> = Result<T, Error>;

/// The REST routes with their OpenAPI document.
fn documented() -> (Router<Service>, utoipa::openapi::OpenApi) {
    let (routes, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(create_approval))
        .routes(routes!(create_selection))
        .routes(routes!(create_proposal))
        .routes(routes!(status))
        .routes(routes!(await_status))
        .routes(routes!(result))
        .routes(routes!(cancel))
        .routes(routes!(audit))
        .routes(routes!(deliveries))
        .routes(routes!(replay_delivery))
        .routes(routes!(decide))
        .split_for_parts();
    utoipa::Modify::modify(&docs::ErrorCodes, &mut doc);
    (routes, doc)
}

/// The OpenAPI document served at `/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().1
}

/// All REST routes plus probes and `/openapi.json`, with the body limit applied.
pub fn router(service: Service) -> Router {
    let limit = service.config().max_body_bytes;
    let (routes, doc) = documented();
    let doc = Arc::new(doc);
    routes
        .route(
            "/openapi.json",
            get(move || async move { Json(doc.as_ref().clone()) }),
        )
        .fallback(|| async { response::NotFoundRoute })
        .method_not_allowed_fallback(|| async {
            response::error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request",
                "method not allowed",
            )
        })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(service)
}

/// Liveness: the process answers (independent of Redis).
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = docs::ProbeBody)))]
async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

/// Readiness: the store answers a script call and the subscriber is connected.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses(
    (status = 200, body = docs::ProbeBody), (status = 503, body = ErrorBody)))]
async fn readyz(State(s): State<Service>) -> axum::response::Response {
    match s.ready().await {
        Ok(()) => Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "not ready");
            Error::Unavailable("not ready".into()).into_response()
        }
    }
}

async fn create(
    s: Service,
    t: AgentTenant,
    kind: Kind,
    body: CreateRequest,
) -> ApiResult<impl IntoResponse> {
    let out = s.create(&t.0, kind, body).await?;
    Ok((StatusCode::CREATED, Json(out)))
}

/// Ask for an approval (json mode: approve `context` as is; form mode: fill `requestedSchema`).
#[utoipa::path(post, path = "/v1/approvals", tag = "elicitations", request_body = CreateRequest,
    security(("bearer" = [])), responses(
    (status = 201, body = CreatedOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
    (status = 413, body = ErrorBody),
    (status = 422, body = ErrorBody, description = "A template or css that does not compile (line and column in the details), or a webhookUrl this tenant cannot use"),
    (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn create_approval(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Approval, b).await
}

/// Ask the reviewer to pick from `options`.
#[utoipa::path(post, path = "/v1/selections", tag = "elicitations", request_body = CreateRequest,
    security(("bearer" = [])), responses(
    (status = 201, body = CreatedOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
    (status = 413, body = ErrorBody),
    (status = 422, body = ErrorBody, description = "A template or css that does not compile (line and column in the details), or a webhookUrl this tenant cannot use"),
    (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn create_selection(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Selection, b).await
}

/// Propose fields the reviewer keeps, drops or edits.
#[utoipa::path(post, path = "/v1/proposals", tag = "elicitations", request_body = CreateRequest,
    security(("bearer" = [])), responses(
    (status = 201, body = CreatedOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
    (status = 413, body = ErrorBody),
    (status = 422, body = ErrorBody, description = "A template or css that does not compile (line and column in the details), or a webhookUrl this tenant cannot use"),
    (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn create_proposal(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Proposal, b).await
}

/// Read the status without waiting (never changes state).
#[utoipa::path(get, path = "/v1/elicitations/{id}", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId")), security(("bearer" = [])), responses(
    (status = 200, body = StatusOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 503, body = ErrorBody)))]
async fn status(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(response::status_response(&s.status(&t.0, &id).await?))
}

/// The status route's path prefix, and its name as the router reports it (metric label).
const STATUS_PREFIX: &str = "/v1/elicitations/";
const STATUS_ROUTE: &str = "/v1/elicitations/{id}";

/// Whether [`fast_status`] answers this request: `GET /v1/elicitations/{id}` with no query and
/// an id the router would pass on unchanged (no `/`, no percent-escapes). Anything else goes
/// through the router, which answers the same way.
pub fn is_fast_status(parts: &axum::http::request::Parts) -> bool {
    parts.method == axum::http::Method::GET
        && parts.uri.query().is_none()
        && parts
            .uri
            .path()
            .strip_prefix(STATUS_PREFIX)
            .is_some_and(|id| !id.is_empty() && !id.contains(['/', '%']))
}

/// `GET /v1/elicitations/{id}` answered before the router: the status poll is the hottest
/// request there is, and routing, the middleware stack and the extractors around one store read
/// were a measurable share of it. The same steps as [`status`] under the router, in the same
/// order — request id and span, the bearer key, the store read, the JSON or error answer, the
/// metrics — and the same answer, byte for byte (`tests/it/api_contract.rs`,
/// `status_fast_path_answers_as_the_router_does`).
pub async fn fast_status(
    s: &Service,
    mut parts: axum::http::request::Parts,
) -> axum::response::Response {
    use tracing::Instrument;
    let seen = crate::telemetry::Observed::begin(
        &parts.method,
        &mut parts.headers,
        crate::telemetry::route_name(STATUS_ROUTE),
    );
    let answer = async {
        // (`is_fast_status` checked the shape; anything else reads as an unknown id.)
        let id = parts
            .uri
            .path()
            .strip_prefix(STATUS_PREFIX)
            .unwrap_or_default();
        let key = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let tenant = match s.authenticate_bearer(key) {
            Ok(t) => t,
            Err(e) => return e.into_response(),
        };
        match s.status(&tenant, id).await {
            Ok(v) => response::status_response(&v),
            Err(e) => e.into_response(),
        }
    }
    .instrument(seen.span.clone())
    .await;
    seen.end(answer)
}

/// Query of `GET …/await`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query, rename_all = "camelCase")]
struct AwaitQuery {
    /// Seconds to wait, 0–60 (default: the server's window, 25).
    #[param(minimum = 0, maximum = 60)]
    wait_seconds: Option<u64>,
}

/// Long-poll: returns as soon as the request leaves `pending` (on any replica), at its
/// deadline (`expired`), or when the window closes (`pending`: call again).
#[utoipa::path(get, path = "/v1/elicitations/{id}/await", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId"), AwaitQuery), security(("bearer" = [])), responses(
    (status = 200, body = StatusOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
    (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
async fn await_status(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
    q: Result<Query<AwaitQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<impl IntoResponse> {
    let Query(q) = q.map_err(|e| Error::invalid(format!("bad query: {}", e.body_text())))?;
    Ok(response::status_response(
        &s.await_status(&t.0, &id, q.wait_seconds).await?,
    ))
}

/// Read the outcome: moves submitted/declined → consumed; repeat reads return the same.
#[utoipa::path(post, path = "/v1/elicitations/{id}/result", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId")), security(("bearer" = [])), responses(
    (status = 200, body = ResultOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody, description = "not_decided or canceled"), (status = 410, body = ErrorBody),
    (status = 503, body = ErrorBody)))]
async fn result(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.result(&t.0, &id).await?))
}

/// Withdraw a pending request (repeating it answers `canceled` again).
#[utoipa::path(post, path = "/v1/elicitations/{id}/cancel", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId")), security(("bearer" = [])), responses(
    (status = 200, body = StateOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody, description = "already_decided"), (status = 410, body = ErrorBody),
    (status = 503, body = ErrorBody)))]
async fn cancel(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.cancel(&t.0, &id).await?))
}

/// The audit trail: created, viewed, voted (named reviewers), decided, canceled, fetched,
/// webhook_delivered / webhook_failed, notification_sent / notification_failed.
#[utoipa::path(get, path = "/v1/elicitations/{id}/audit", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId")), security(("bearer" = [])), responses(
    (status = 200, body = AuditOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 503, body = ErrorBody)))]
async fn audit(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.audit(&t.0, &id).await?))
}

/// The request's webhook deliveries: one per event, with every attempt and the next one.
#[utoipa::path(get, path = "/v1/elicitations/{id}/deliveries", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId")), security(("bearer" = [])), responses(
    (status = 200, body = DeliveriesOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 503, body = ErrorBody)))]
async fn deliveries(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.deliveries(&t.0, &id).await?))
}

/// Deliver a failed delivery again: now, then on the whole retry schedule.
#[utoipa::path(post, path = "/v1/elicitations/{id}/deliveries/{deliveryId}/replay", tag = "elicitations",
    params(("id" = String, Path, description = "elicitationId"), ("deliveryId" = String, Path, description = "the delivery's id (webhook-id)")),
    security(("bearer" = [])), responses(
    (status = 202, body = DeliveryOut), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody, description = "not_decided: the delivery has not failed"),
    (status = 503, body = ErrorBody)))]
async fn replay_delivery(
    State(s): State<Service>,
    t: AgentTenant,
    Path((id, delivery_id)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let d = s.replay_delivery(&t.0, &id, &delivery_id).await?;
    Ok((StatusCode::ACCEPTED, Json(d)))
}

/// Reviewer decision (the review token is the capability; no API key).
#[utoipa::path(post, path = "/v1/reviews/{token}", tag = "reviews", request_body = DecisionInput,
    params(("token" = String, Path, description = "the last segment of reviewUrl")), responses(
    (status = 200, body = StateOut), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
    (status = 409, body = ErrorBody, description = "already_decided or canceled"), (status = 410, body = ErrorBody),
    (status = 413, body = ErrorBody), (status = 422, body = ErrorBody, description = "per-field details"),
    (status = 429, body = ErrorBody, description = "too many wrong review tokens from this address"),
    (status = 503, body = ErrorBody)))]
async fn decide(
    State(s): State<Service>,
    Path(token): Path<String>,
    client: Option<axum::Extension<crate::limits::ClientAddr>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> ApiResult<impl IntoResponse> {
    let client = client.map(|axum::Extension(c)| c.0);
    // The token first: an unknown link costs no body read (and no time waiting for one).
    let review = s.review(&token, client).await?;
    let input: DecisionInput =
        extract::read_json(&headers, body, s.config().max_body_bytes).await?;
    Ok(Json(s.decide_reviewed(&review, input).await?))
}
