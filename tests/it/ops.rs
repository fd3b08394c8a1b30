//! Operations surface: metrics move with traffic, request ids, the OpenAPI document matches the
//! served routes, and secrets never reach the logs.

use std::{
    collections::BTreeSet,
    io::Read,
    process::Command,
    time::{Duration, Instant},
};

use serde_json::json;

use crate::harness::{spawn_binary, Api, Fixture, RedisServer, StoreKind, ACME_KEY};

/// Sum of all samples of `name` whose label set contains every `labels` pair.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            if metric != name {
                return None;
            }
            labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
                .then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

async fn scrape(base: &str) -> String {
    let r = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    r.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_traffic() {
    let f = Fixture::new(StoreKind::Redis, 2).await;
    let base = &f.apps[0].base;
    let before = scrape(base).await;
    let api = f.acme();
    let a = api.approval().await;
    let s = api
        .create(
            "selection",
            json!({"message": "m", "options": [{"id": "x"}]}),
        )
        .await;
    let c = api.approval().await;
    api.status(&a.id).await;
    api.result(&a.id).await; // not_decided
    let waiter = {
        let api = api.clone();
        let id = a.id.clone();
        tokio::spawn(async move { api.wait(&id, 20).await })
    };
    let hub = f.apps[0].service.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while hub.parked_awaits() == 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let parked = scrape(base).await;
    assert!(
        sample(&parked, "elicitd_awaits_parked", &[]) >= 1.0,
        "parked gauge did not move"
    );
    f.other()
        .decide(&a.token, json!({"decision": "submitted"}))
        .await;
    assert_eq!(waiter.await.unwrap().str("status"), "submitted");
    api.decide(&s.token, json!({"decision": "declined"})).await;
    api.cancel(&c.id).await;
    api.decide("x".repeat(43).as_str(), json!({"decision": "declined"}))
        .await;
    let after = scrape(base).await;

    let delta = |name: &str, labels: &[(&str, &str)]| {
        sample(&after, name, labels) - sample(&before, name, labels)
    };
    assert!(
        delta(
            "elicitd_elicitations_created_total",
            &[("kind", "approval")]
        ) >= 2.0
    );
    assert!(
        delta(
            "elicitd_elicitations_created_total",
            &[("kind", "selection")]
        ) >= 1.0
    );
    assert!(delta("elicitd_decisions_total", &[("outcome", "declined")]) >= 1.0);
    assert!(delta("elicitd_decisions_total", &[("outcome", "canceled")]) >= 1.0);
    assert!(
        delta(
            "elicitd_transitions_refused_total",
            &[("op", "result"), ("code", "not_decided")]
        ) >= 1.0
    );
    assert!(delta("elicitd_review_token_failures_total", &[]) >= 1.0);
    assert!(delta("elicitd_await_wake_seconds_count", &[]) >= 1.0);
    assert!(
        delta(
            "elicitd_http_requests_total",
            &[
                ("route", "/v1/elicitations/{id}"),
                ("method", "GET"),
                ("status", "2xx")
            ]
        ) >= 1.0
    );
    assert!(
        delta(
            "elicitd_http_request_duration_seconds_bucket",
            &[("route", "/v1/approvals"), ("le", "+Inf")]
        ) >= 2.0
    );
    assert!(
        delta(
            "elicitd_redis_command_duration_seconds_count",
            &[("op", "status")]
        ) >= 1.0
    );
    assert_eq!(
        sample(
            &after,
            "elicitd_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );

    // Every elicitd series is described, histograms have real buckets, and no label carries an id
    // or a token.
    let names: BTreeSet<&str> = after
        .lines()
        .filter(|l| l.starts_with("elicitd_"))
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .map(|n| {
            n.trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count")
        })
        .collect();
    for n in &names {
        assert!(after.contains(&format!("# HELP {n} ")), "no HELP for {n}");
    }
    assert!(after.contains("# TYPE elicitd_http_request_duration_seconds histogram"));
    for secret in [a.id.as_str(), a.token.as_str(), ACME_KEY] {
        assert!(!after.contains(secret), "metrics leak {secret}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_kept_or_generated() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let http = reqwest::Client::new();
    let url = format!("{}/healthz", f.apps[0].base);
    let r = http
        .get(&url)
        .header("x-request-id", "trace-42.a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "trace-42.a");
    let r = http
        .get(&url)
        .header("x-request-id", "bad id with spaces")
        .send()
        .await
        .unwrap();
    let generated = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_ne!(generated, "bad id with spaces");
    assert_eq!(generated.len(), 32);
    let r2 = http.get(&url).send().await.unwrap();
    assert_ne!(r2.headers()["x-request-id"].to_str().unwrap(), generated);
}

/// The routes this server documents; changing them is deliberate (update this list).
const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("post", "/v1/approvals"),
    ("post", "/v1/selections"),
    ("post", "/v1/proposals"),
    ("get", "/v1/elicitations/{id}"),
    ("get", "/v1/elicitations/{id}/await"),
    ("post", "/v1/elicitations/{id}/result"),
    ("post", "/v1/elicitations/{id}/cancel"),
    ("get", "/v1/elicitations/{id}/audit"),
    ("get", "/v1/elicitations/{id}/deliveries"),
    (
        "post",
        "/v1/elicitations/{id}/deliveries/{deliveryId}/replay",
    ),
    ("post", "/v1/reviews/{token}"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_matches_the_served_routes() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let base = &f.apps[0].base;
    let doc: serde_json::Value = reqwest::get(format!("{base}/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            documented.insert((method.clone(), path.clone()));
            // Every documented error answer uses the SPEC §5 body.
            for (code, resp) in op["responses"].as_object().unwrap() {
                if code.starts_with('4') || code.starts_with('5') {
                    let schema = &resp["content"]["application/json"]["schema"]["$ref"];
                    assert_eq!(
                        schema, "#/components/schemas/ErrorBody",
                        "{method} {path} {code}"
                    );
                }
            }
        }
    }
    let expected: BTreeSet<_> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, expected);
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    // The error codes come from the one error table.
    let codes = &doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["enum"];
    let mut want: Vec<&str> = elicitd::error::TABLE.iter().map(|r| r.code).collect();
    want.dedup();
    assert_eq!(codes, &serde_json::json!(want));
    assert!(want.contains(&"forbidden") && want.len() == 12, "{want:?}");

    // Every documented route is served (a real handler answers, not the router's fallback).
    let api = Api::new(base, ACME_KEY);
    let c = api.approval().await;
    for (method, path) in ROUTES {
        let url = format!(
            "{base}{}",
            path.replace("{id}", &c.id)
                .replace("{token}", &c.token)
                .replace("{deliveryId}", "msg_nope")
        );
        let req = match *method {
            "get" => api.http.get(&url),
            _ => api.http.post(&url).json(&json!({})),
        };
        let r = req.bearer_auth(ACME_KEY).send().await.unwrap();
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert!(
            status != 405 && !body.contains("no such route"),
            "{method} {path}: {status} {body}"
        );
    }
    // And something undocumented is not.
    assert_eq!(api.get("/v1/undocumented").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_logs() {
    let redis = RedisServer::start();
    let (mut child, api) = spawn_binary(&redis, &[("RUST_LOG", "debug")], true).await;
    let c = api
        .create(
            "approval",
            json!({"message": "Wire the money?", "context": {"iban": "DE-SECRET-IBAN-4711"}}),
        )
        .await;
    api.status(&c.id).await;
    api.decide(
        &c.token,
        json!({"decision": "submitted", "comment": "COMMENT-SECRET-99"}),
    )
    .await;
    api.result(&c.id).await;
    Api::new(&api.base, "wrong-key-0123456789abcdef")
        .status(&c.id)
        .await;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let mut logs = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(
        logs.contains("elicitd listening"),
        "logs were captured: {logs}"
    );
    assert!(
        logs.contains("request_id"),
        "requests are logged with their id"
    );
    for secret in [
        c.token.as_str(),
        ACME_KEY,
        "wrong-key-0123456789abcdef",
        "DE-SECRET-IBAN-4711",
        "COMMENT-SECRET-99",
    ] {
        assert!(!logs.contains(secret), "log leaks {secret}");
    }
    for line in logs.lines().filter(|l| l.starts_with('{')) {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}
