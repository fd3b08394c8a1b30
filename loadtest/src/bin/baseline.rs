//! The baseline of issue 21: what a user would write instead of elicitd's status read — one
//! axum handler doing one `HMGET` per poll on elicitd's own record keys, with no auth, no
//! metrics, no request ids and no expiry check. `loadtest/bench-baseline.sh` runs it side by
//! side with elicitd. Env: `REDIS_URL`, `LISTEN` (default 127.0.0.1:8090), `KEY_PREFIX`.
use axum::{extract::Path, extract::State, http::StatusCode, routing::get, Json, Router};
use fred::prelude::*;
use serde_json::{json, Value};

type S = (Pool, String);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pool = Builder::from_config(Config::from_url(&url)?).build_pool(4)?;
    pool.init().await?;
    let prefix = std::env::var("KEY_PREFIX").unwrap_or_else(|_| "elicitd".into());
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/elicitations/{id}", get(status))
        .with_state((pool, prefix));
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8090".into());
    axum::serve(tokio::net::TcpListener::bind(listen).await?, app).await?;
    Ok(())
}

async fn status(
    State((pool, prefix)): State<S>,
    Path(id): Path<String>,
) -> Result<Json<Value>, StatusCode> {
    let shard = uuid::Uuid::parse_str(&id)
        .map_err(|_| StatusCode::NOT_FOUND)?
        .as_u128()
        % 16;
    let key = format!("{prefix}:e:{{s{shard:02}}}:{id}");
    let f: Vec<Option<String>> = pool
        .hmget(
            key,
            vec!["status", "kind", "created_ms", "expires_ms", "decided_ms"],
        )
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    let status = f[0].clone().ok_or(StatusCode::NOT_FOUND)?;
    Ok(Json(
        json!({"elicitationId": id, "status": status, "kind": f[1],
        "createdMs": f[2], "expiresMs": f[3], "decidedMs": f[4]}),
    ))
}
