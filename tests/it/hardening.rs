//! Hardening, round two: one regression test per finding of the adversarial pass — idle and
//! trickling connections, the review routes' token-first order, text that lies to the
//! reviewer, MCP limits, stored-size caps, log hygiene, context that cannot be read back, the
//! wrong-token brake, content types, the `fetched` audit cap, `/mcp` Origin and parse errors.

use std::{
    io::Read,
    time::{Duration, Instant},
};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    harness::{spawn_binary, test_config, App, RedisServer, ACME_KEY},
    review_page::get_page,
};

async fn app_with(f: impl FnOnce(&mut elicitd::config::Config)) -> App {
    let mut c = test_config(None, "hard");
    f(&mut c);
    App::start(c).await
}

fn addr(app: &App) -> String {
    app.base.trim_start_matches("http://").to_string()
}

/// Read until the server closes the connection; `None` if it is still open after `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    tokio::time::timeout(within, s.read_to_end(&mut buf))
        .await
        .ok()
        .map(|_| buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cannot_hold_every_slot() {
    let app = app_with(|c| {
        c.max_connections = 20;
        c.header_timeout = Duration::from_secs(2);
    })
    .await;
    // Twenty sockets that never send a complete request: silent, one byte, an HTTP/2 preface.
    let mut idle = Vec::new();
    for i in 0..20 {
        let mut s = TcpStream::connect(addr(&app)).await.unwrap();
        match i % 3 {
            0 => {}
            1 => s.write_all(b"G").await.unwrap(),
            _ => s
                .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                .await
                .unwrap(),
        }
        idle.push(s);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .expect("healthz answers while idle sockets hold every slot");
    assert_eq!(r.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "healthz took {:?} (header timeout 2 s)",
        started.elapsed()
    );
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(3)).await.is_some(),
            "idle socket {i} still open"
        );
    }
    // Keep-alive: after one request, an idle connection is closed too.
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let got = closed_within(&mut s, Duration::from_secs(4))
        .await
        .expect("a keep-alive connection idle past the header timeout is closed");
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_body_is_cut_at_its_total_deadline() {
    let app = app_with(|c| c.body_timeout = Duration::from_secs(3)).await;
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    let head = format!(
        "POST /v1/approvals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    // One byte every second: a per-chunk timer would never fire.
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if wr.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(8), rd.read_to_end(&mut buf))
        .await
        .expect("the connection is answered and closed")
        .unwrap();
    trickle.abort();
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(text.contains("did not arrive within 3 s"), "{text}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_posts_check_the_token_before_reading_a_body() {
    let app = app_with(|c| c.body_timeout = Duration::from_secs(20)).await;
    let bogus = "A".repeat(43);
    for path in [format!("/v1/reviews/{bogus}"), format!("/review/{bogus}")] {
        let mut s = TcpStream::connect(addr(&app)).await.unwrap();
        // A body is announced and never sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 100\r\n\r\n"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut resp = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut resp))
            .await
            .expect("an unknown token is answered without waiting for the body")
            .unwrap();
        let text = String::from_utf8_lossy(&resp[..n]);
        assert!(text.starts_with("HTTP/1.1 404"), "{path}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_characters_are_shown_to_the_reviewer() {
    let app = app_with(|_| {}).await;
    let api = app.api(ACME_KEY);
    let rlo = '\u{202E}';
    let c = api
        .post_raw(
            "/v1/approvals",
            json!({
                "title": format!("Pay {rlo}0009 EUR"),
                "message": format!("Check the amount\u{200B}{rlo}!"),
                "context": {format!("amount_eur{rlo}"): 9000, "note": format!("x{rlo}y")},
            })
            .to_string(),
        )
        .await;
    assert_eq!(c.status, 201, "{}", c.body);
    let token = c.str("reviewUrl").rsplit('/').next().unwrap().to_string();
    let page = get_page(&api, &token).await;
    assert!(!page.html.contains(rlo), "a raw U+202E reached the page");
    assert!(!page.html.contains('\u{200B}'));
    for shown in [
        "Pay ⟨U+202E⟩0009 EUR",
        "Check the amount⟨U+200B⟩⟨U+202E⟩!",
        "amount_eur⟨U+202E⟩",
        "x⟨U+202E⟩y",
    ] {
        assert!(page.html.contains(shown), "{shown} not on the page");
    }
    // Options and proposal values too (values keep their text and carry a warning line).
    let sel = api
        .create(
            "selection",
            json!({"message": "m", "options": [{"id": "a", "label": format!("Refund{rlo}"), "description": format!("d{rlo}")}]}),
        )
        .await;
    let page = get_page(&api, &sel.token).await;
    assert!(page.html.contains("Refund⟨U+202E⟩") && page.html.contains("d⟨U+202E⟩"));
    let prop = api
        .create(
            "proposal",
            json!({"message": "m", "proposal": {format!("amount{rlo}"): format!("{rlo}0009")}}),
        )
        .await;
    let page = get_page(&api, &prop.token).await;
    assert!(page.html.contains("amount⟨U+202E⟩"), "field title");
    assert!(
        page.html
            .contains("Contains hidden or direction-changing characters: ⟨U+202E⟩0009"),
        "{}",
        page.html
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_may_not_say_the_other_buttons_words() {
    let app = app_with(|_| {}).await;
    let api = app.api(ACME_KEY);
    for (labels, field) in [
        (json!({"submit": "Decline"}), "labels.submit"),
        (json!({"submit": "no thanks"}), "labels.submit"),
        (json!({"submit": " D E C L I N E "}), "labels.submit"),
        (json!({"decline": "Approve"}), "labels.decline"),
        (json!({"decline": "Yes, go ahead"}), "labels.decline"),
        (json!({"submit": "Pay\u{202E}"}), "labels.submit"),
    ] {
        let r = api
            .post(
                "/v1/approvals",
                &json!({"message": "m", "context": 1, "labels": labels}),
            )
            .await;
        assert_eq!(r.status, 400, "{labels}: {}", r.body);
        assert_eq!(r.body["error"]["details"][0]["field"], field, "{}", r.body);
    }
    for labels in [
        json!({"submit": "Ship it", "decline": "Not now"}),
        json!({"submit": "Pay 9000 EUR", "decline": "Keep the money"}),
    ] {
        let r = api
            .post(
                "/v1/approvals",
                &json!({"message": "m", "context": 1, "labels": labels}),
            )
            .await;
        assert_eq!(r.status, 201, "{labels}: {}", r.body);
    }
}

/// A JSON-RPC `tools/call` of `tool` with `args`, sent as raw HTTP.
async fn mcp_raw(base: &str, body: String, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut rb = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(ACME_KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    rb.send().await.unwrap()
}

fn tool_call(tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_body_limit_and_a_stored_size_cap_for_every_surface() {
    let app = app_with(|c| c.max_body_bytes = 600 * 1024).await;
    let api = app.api(ACME_KEY);
    // /mcp takes no more than ELICITD_MAX_BODY_BYTES (rmcp alone allows 4 MiB).
    let huge = tool_call(
        "elicit_approval",
        json!({"message": "m", "context": {"pad": "x".repeat(700 * 1024)}}),
    );
    let r = mcp_raw(&app.base, huge, &[]).await;
    assert_eq!(r.status(), 413);
    // Options with big extra keys fit the body but not the stored-size cap: 413 on both.
    let options: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("o{i}"), "blob": "y".repeat(8 * 1024)}))
        .collect();
    let r = api
        .post(
            "/v1/selections",
            &json!({"message": "m", "options": options}),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (413, "payload_too_large"),
        "{}",
        r.body
    );
    let r = mcp_raw(
        &app.base,
        tool_call(
            "elicit_selection",
            json!({"message": "m", "options": options}),
        ),
        &[],
    )
    .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("payload_too_large:"), "{text}");
    // Within the cap all is well.
    let small: Vec<Value> = (0..40)
        .map(|i| json!({"id": format!("o{i}"), "blob": "y".repeat(1024)}))
        .collect();
    let r = api
        .post("/v1/selections", &json!({"message": "m", "options": small}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_or_payload_reaches_the_log_at_debug_level() {
    let redis = RedisServer::start();
    let secret = "log-test-secret-0123456789-abcdefghij";
    let (mut child, api) = spawn_binary(
        &redis,
        &[("RUST_LOG", "debug"), ("ELICITD_SECRET", secret)],
        true,
    )
    .await;
    let marker = "CONTEXT-MARKER-7c1d";
    let comment = "COMMENT-MARKER-93fa";
    // REST create, review page, decision, result.
    let c = api
        .create(
            "approval",
            json!({"message": "MESSAGE-MARKER-1b2c", "context": {"m": marker}}),
        )
        .await;
    get_page(&api, &c.token).await;
    api.decide(
        &c.token,
        json!({"decision": "submitted", "comment": comment}),
    )
    .await;
    api.result(&c.id).await;
    // The same over MCP.
    let r = mcp_raw(
        &api.base,
        tool_call(
            "elicit_approval",
            json!({"message": "m", "context": {"m": marker}}),
        ),
        &[],
    )
    .await;
    let created: Value = r.json().await.unwrap();
    let mcp_url = created["result"]["structuredContent"]["reviewUrl"]
        .as_str()
        .unwrap()
        .to_string();
    let mcp_id = created["result"]["structuredContent"]["elicitationId"]
        .as_str()
        .unwrap()
        .to_string();
    let mcp_token = mcp_url.rsplit('/').next().unwrap().to_string();
    api.decide(
        &mcp_token,
        json!({"decision": "declined", "comment": comment}),
    )
    .await;
    mcp_raw(
        &api.base,
        tool_call("elicit_result", json!({"elicitationId": mcp_id})),
        &[],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = child.kill();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let _ = child.wait();
    assert!(
        log.matches("\"level\":\"DEBUG\"").count() >= 5,
        "a debug log was written:\n{log}"
    );
    for (what, needle) in [
        ("API key", ACME_KEY),
        ("secret", secret),
        ("review token", c.token.as_str()),
        ("MCP review token", mcp_token.as_str()),
        ("context", marker),
        ("message", "MESSAGE-MARKER-1b2c"),
        ("comment", comment),
    ] {
        assert!(!log.contains(needle), "the {what} is in the debug log");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_that_clients_cannot_read_back_is_refused_at_create() {
    let app = app_with(|_| {}).await;
    let api = app.api(ACME_KEY);
    let long = "9".repeat(60_000);
    for ctx in ["1e999999", r#""\ud800""#, long.as_str()] {
        let r = api
            .post_raw(
                "/v1/approvals",
                format!(r#"{{"message": "m", "context": {ctx}}}"#),
            )
            .await;
        assert_eq!(r.status, 400, "{}", &ctx[..ctx.len().min(12)]);
        assert_eq!(r.body["error"]["details"][0]["field"], "context");
    }
    // So an MCP result (whose structured content is parsed JSON) can never fail after the
    // request was marked consumed: every stored context reads back.
    let ok = api
        .post_raw(
            "/v1/approvals",
            r#"{"message": "m", "context": {"big": 1e300, "e": "\u00e9"}}"#,
        )
        .await;
    assert_eq!(ok.status, 201, "{}", ok.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_braked_address_still_opens_valid_links() {
    let app = app_with(|c| c.review_failures_per_min = 3).await;
    let api = app.api(ACME_KEY);
    let c = api.approval().await;
    let page = |token: String| {
        let base = app.base.clone();
        async move {
            reqwest::get(format!("{base}/review/{token}"))
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    // Someone behind the same address tries wrong links until the brake engages.
    let mut statuses = Vec::new();
    for i in 0..12 {
        statuses.push(page(format!("{:A>43}", i)).await);
    }
    assert!(statuses.contains(&429), "the brake engaged: {statuses:?}");
    // A reviewer behind that address opens a real link: it works.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(page(c.token.clone()).await, 200);
    // Scanning on is throttled: most of a burst of wrong links is refused.
    let mut burst = Vec::new();
    for i in 0..10 {
        burst.push(page(format!("{:B>43}", i)).await);
    }
    assert!(
        burst.iter().filter(|s| **s == 429).count() >= 5,
        "{burst:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_json_content_types_reach_json_routes() {
    let app = app_with(|_| {}).await;
    let api = app.api(ACME_KEY);
    for ct in ["text/plain; x=+json", "text/json", "application/jsonx"] {
        let r = api
            .send_with_content_type("/v1/approvals", ct, r#"{"message":"m","context":1}"#)
            .await;
        assert_eq!(r.status, 400, "{ct}: {}", r.body);
    }
    let r = api
        .send_with_content_type(
            "/v1/approvals",
            "application/vnd.acme+json; charset=utf-8",
            r#"{"message":"m","context":1}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetched_audit_events_are_capped_and_counted() {
    let redis = RedisServer::start();
    for url in [None, Some(redis.url())] {
        let app = App::start(test_config(url, "fetches")).await;
        let api = app.api(ACME_KEY);
        let c = api.approval().await;
        api.decide(&c.token, json!({"decision": "submitted"})).await;
        for _ in 0..230 {
            assert_eq!(api.result(&c.id).await.status, 200);
        }
        let a = api.audit(&c.id).await;
        let events = a.body["events"].as_array().unwrap();
        assert_eq!(events.len(), 200, "capped");
        assert_eq!(a.body["fetches"], 230, "counted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_refuses_foreign_origins_and_answers_parse_errors() {
    let app = app_with(|_| {}).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let r = mcp_raw(
        &app.base,
        list.clone(),
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(r.status(), 403);
    let r = mcp_raw(&app.base, list.clone(), &[("origin", "null")]).await;
    assert_eq!(r.status(), 403);
    // The service's own origin, or no Origin (a server-side client), is fine.
    let r = mcp_raw(&app.base, list.clone(), &[("origin", app.base.as_str())]).await;
    assert_eq!(r.status(), 200);
    let r = mcp_raw(&app.base, list, &[]).await;
    assert_eq!(r.status(), 200);
    // Malformed JSON: the JSON-RPC parse error, not an HTTP media-type error.
    let r = mcp_raw(&app.base, "{not json".into(), &[]).await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
}
