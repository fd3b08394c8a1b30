//! Limits answer their documented 4xx and the replica keeps serving everyone else: create rate,
//! the wrong-review-token brake, slow headers and bodies, the connection cap, the view cap.

use std::time::Duration;

use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::harness::{test_config, Api, App, RedisServer, ACME_KEY, BETA_KEY};

async fn app_with(f: impl FnOnce(&mut elicitd::config::Config)) -> App {
    let mut c = test_config(None, "limits");
    f(&mut c);
    App::start(c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_rate_is_limited_per_tenant() {
    let app = app_with(|c| c.create_rate_per_sec = 2).await;
    let (acme, beta) = (app.api(ACME_KEY), app.api(BETA_KEY));
    let body = json!({"message": "m", "context": 1});
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(acme.post("/v1/approvals", &body).await);
    }
    let limited: Vec<_> = statuses.iter().filter(|r| r.status == 429).collect();
    assert!(
        !limited.is_empty(),
        "no 429 in {:?}",
        statuses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(limited[0].code(), "rate_limited");
    assert!(limited[0].headers.get("retry-after").is_some());
    assert_eq!(statuses[0].status, 201, "the burst is allowed");
    // Another tenant, and other operations, are unaffected.
    let b = beta.approval().await;
    assert_eq!(beta.status_of(&b.id).await, "pending");
    let created = statuses.iter().find(|r| r.status == 201).unwrap();
    assert_eq!(
        acme.status_of(created.str("elicitationId")).await,
        "pending"
    );
    // The bucket refills.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(acme.post("/v1/approvals", &body).await.status, 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_review_tokens_brake_the_address() {
    let app = app_with(|c| {
        c.review_failures_per_min = 3;
        c.trust_forwarded_for = true;
    })
    .await;
    let api = app.api(ACME_KEY);
    let good = api.approval().await;
    let http = reqwest::Client::new();
    let decide = |token: String, ip: &'static str| {
        let http = http.clone();
        let base = app.base.clone();
        async move {
            http.post(format!("{base}/v1/reviews/{token}"))
                .header("x-forwarded-for", format!("203.0.113.9, {ip}"))
                .json(&json!({"decision": "submitted"}))
                .send()
                .await
                .unwrap()
        }
    };
    // Three wrong tokens a minute are allowed; past that the address is braked: a few lookups
    // a second still run, the rest are refused.
    let mut statuses = Vec::new();
    for i in 0..12 {
        let r = decide("A".repeat(41) + &format!("{i:02}"), "198.51.100.7").await;
        statuses.push(r.status().as_u16());
    }
    assert_eq!(&statuses[..4], [404, 404, 404, 404], "{statuses:?}");
    assert!(
        statuses[4..].iter().filter(|s| **s == 429).count() >= 4,
        "{statuses:?}"
    );
    assert!(statuses.iter().all(|s| *s == 404 || *s == 429));
    let retry_after = decide("A".repeat(43), "198.51.100.7").await;
    assert_eq!(retry_after.status(), 429);
    assert!(retry_after.headers().get("retry-after").is_some());
    // A valid link from the braked address still works (throttled, not locked out), on the
    // JSON route and on the page.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let page = http
        .get(format!("{}/review/{}", app.base, good.token))
        .header("x-forwarded-for", "198.51.100.7")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        decide(good.token.clone(), "198.51.100.7").await.status(),
        200
    );
    // Everyone else is served.
    let other = api.approval().await;
    assert_eq!(
        decide(other.token.clone(), "198.51.100.8").await.status(),
        200
    );
    let m = reqwest::get(format!("{}/metrics", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("elicitd_review_token_failures_total"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_bodies_are_cut_off() {
    let app = app_with(|c| {
        c.header_timeout = Duration::from_secs(1);
        c.body_timeout = Duration::from_secs(1);
    })
    .await;
    let addr = app.base.trim_start_matches("http://").to_string();
    // Slow-loris: headers never finish; the server closes the connection.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server kept a slow-header connection open"
    );
    // A body that stalls is refused with a clean 4xx.
    let mut stall = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/approvals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME_KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"message\""
    );
    stall.write_all(head.as_bytes()).await.unwrap();
    let mut resp = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stall.read(&mut resp))
        .await
        .expect("no answer to a stalled body")
        .unwrap();
    let text = String::from_utf8_lossy(&resp[..n]);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("invalid_request"), "{text}");
    // Meanwhile the replica serves others.
    assert_eq!(app.api(ACME_KEY).approval().await.body["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_slot() {
    let app = app_with(|c| c.max_connections = 2).await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let a = TcpStream::connect(&addr).await.unwrap();
    let b = TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    assert!(
        quick
            .get(format!("{}/healthz", app.base))
            .send()
            .await
            .is_err(),
        "a third connection was served"
    );
    drop((a, b));
    let ok = reqwest::Client::new()
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_views_cannot_grow_the_audit_without_bound() {
    for redis in [None, Some(RedisServer::start())] {
        let app = App::start(test_config(redis.as_ref().map(|r| r.url()), "views")).await;
        let api = app.api(ACME_KEY);
        let c = api.approval().await;
        let http = reqwest::Client::new();
        for _ in 0..230 {
            let r = http
                .get(format!("{}/review/{}", app.base, c.token))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
        let events = api.audit(&c.id).await.body["events"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(events, 200, "redis: {}", redis.is_some());
        // The decision is still recorded past the cap; fetches are counted, not listed.
        api.decide(&c.token, json!({"decision": "submitted"})).await;
        api.result(&c.id).await;
        let audit = api.audit(&c.id).await;
        let events = audit.body["events"].as_array().unwrap();
        assert_eq!(events.len(), 201);
        assert_eq!(events[200]["type"], "decided");
        assert_eq!(audit.body["fetches"], 1);
        let _ = Api::new(&app.base, ACME_KEY);
    }
}
