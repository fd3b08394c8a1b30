//! The REST adapter (`/v1`, `/healthz`, `/readyz`): parse, call [`Service`], shape the answer.
//! Every failure — including malformed JSON, unknown routes and oversized bodies — answers with
//! the error body of SPEC §5.

mod extract;
mod response;

use axum::{
    extract::{DefaultBodyLimit, Path, Query, State},
    http::StatusCode,
    response::IntoResponse,
    routing::{get, post},
    Json, Router,
};
use serde::Deserialize;

pub use extract::{AgentTenant, JsonBody};

use crate::{
    error::Error,
    model::{CreateRequest, DecisionInput, Kind},
    service::Service,
};

type ApiResult<T> = Result<T, Error>;

/// All REST routes plus probes, with the body limit applied.
pub fn router(service: Service) -> Router {
    let limit = service.config.max_body_bytes;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/approvals", post(create_approval))
        .route("/v1/selections", post(create_selection))
        .route("/v1/proposals", post(create_proposal))
        .route("/v1/elicitations/{id}", get(status))
        .route("/v1/elicitations/{id}/await", get(await_status))
        .route("/v1/elicitations/{id}/result", post(result))
        .route("/v1/elicitations/{id}/cancel", post(cancel))
        .route("/v1/elicitations/{id}/audit", get(audit))
        .route("/v1/reviews/{token}", post(decide))
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

async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({"status": "ok"}))
}

async fn readyz(State(s): State<Service>) -> axum::response::Response {
    match s.store.ready().await {
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

async fn create_approval(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Approval, b).await
}

async fn create_selection(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Selection, b).await
}

async fn create_proposal(
    State(s): State<Service>,
    t: AgentTenant,
    JsonBody(b): JsonBody<CreateRequest>,
) -> ApiResult<impl IntoResponse> {
    create(s, t, Kind::Proposal, b).await
}

async fn status(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.status(&t.0, &id).await?))
}

/// Query of `GET …/await`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AwaitQuery {
    wait_seconds: Option<u64>,
}

async fn await_status(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
    q: Result<Query<AwaitQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<impl IntoResponse> {
    let Query(q) = q.map_err(|e| Error::invalid(format!("bad query: {}", e.body_text())))?;
    Ok(Json(s.await_status(&t.0, &id, q.wait_seconds).await?))
}

async fn result(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.result(&t.0, &id).await?))
}

async fn cancel(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.cancel(&t.0, &id).await?))
}

async fn audit(
    State(s): State<Service>,
    t: AgentTenant,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.audit(&t.0, &id).await?))
}

async fn decide(
    State(s): State<Service>,
    Path(token): Path<String>,
    JsonBody(input): JsonBody<DecisionInput>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(s.decide(&token, input).await?))
}
