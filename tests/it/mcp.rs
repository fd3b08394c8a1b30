//! MCP over Streamable HTTP with real clients: rmcp's client (every tool, errors, auth, a wake
//! across replicas, the tools/list snapshot) and the official TypeScript SDK in both the
//! initialize-era and the 2026-07-28 stateless modes.

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use rmcp::{
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
    transport::{
        streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport,
    },
    RoleClient, ServiceExt,
};
use serde_json::{json, Value};

use crate::harness::{Fixture, StoreKind, ACME_KEY, BETA_KEY};

pub(crate) type Client = RunningService<RoleClient, ()>;

pub(crate) async fn connect(base: &str, key: &str) -> Result<Client, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(key),
    );
    ().serve(transport).await.map_err(|e| e.to_string())
}

pub(crate) async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("args must be an object")
    };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed at the protocol level: {e}"))
}

pub(crate) fn structured(r: &CallToolResult) -> &Value {
    assert_eq!(r.is_error, Some(false), "{r:?}");
    r.structured_content.as_ref().expect("structuredContent")
}

pub(crate) fn error_text(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a tool error: {r:?}");
    serde_json::to_value(&r.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

fn token_of(created: &Value) -> String {
    created["reviewUrl"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_over_http_with_a_wake_from_another_replica() {
    let f = Fixture::new(StoreKind::Redis, 2).await;
    let c = connect(&f.apps[0].base, ACME_KEY).await.unwrap();

    let r = call(&c, "elicit_ping", json!({"message": "hello"})).await;
    assert_eq!(structured(&r)["pong"], "hello");
    assert_eq!(
        serde_json::to_value(&r.content).unwrap()[0]["text"],
        "pong: hello"
    );

    // approval (json mode), awaited on replica A, decided over REST on replica B
    let created = structured(
        &call(
            &c,
            "elicit_approval",
            json!({"message": "Ship?", "context": {"v": [1, 2], "ok": true}}),
        )
        .await,
    )
    .clone();
    assert_eq!(created["status"], "pending");
    let id = created["elicitationId"].as_str().unwrap().to_string();
    let st = call(&c, "elicit_status", json!({"elicitationId": id})).await;
    assert_eq!(structured(&st)["status"], "pending");
    assert_eq!(structured(&st)["kind"], "approval");
    let early = error_text(&call(&c, "elicit_result", json!({"elicitationId": id})).await);
    assert!(
        early.starts_with("not_decided") && early.contains("elicit_await"),
        "{early}"
    );
    let waiter = {
        let c2 = connect(&f.apps[0].base, ACME_KEY).await.unwrap();
        let id = id.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let r = call(
                &c2,
                "elicit_await",
                json!({"elicitationId": id, "waitSeconds": 30}),
            )
            .await;
            (r, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let d = f
        .other()
        .decide(
            &token_of(&created),
            json!({"decision": "submitted", "comment": "go"}),
        )
        .await;
    assert_eq!(d.status, 200);
    let (r, took) = waiter.await.unwrap();
    assert_eq!(structured(&r)["status"], "submitted");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let res = call(&c, "elicit_result", json!({"elicitationId": id})).await;
    let res = structured(&res);
    assert_eq!(res["status"], "consumed");
    assert_eq!(res["decision"], "submitted");
    assert_eq!(res["context"], json!({"v": [1, 2], "ok": true}));
    assert_eq!(res["comment"], "go");
    let again = error_text(&call(&c, "elicit_cancel", json!({"elicitationId": id})).await);
    assert!(again.starts_with("already_decided"), "{again}");

    // selection, proposal, form approval
    let sel = structured(&call(&c, "elicit_selection", json!({"message": "Pick", "options": [{"id": "a"}, {"id": "b", "label": "B"}], "maxSelections": 2})).await).clone();
    f.other()
        .decide(
            &token_of(&sel),
            json!({"decision": "submitted", "selectedIds": ["b", "a"]}),
        )
        .await;
    let r = call(
        &c,
        "elicit_result",
        json!({"elicitationId": sel["elicitationId"]}),
    )
    .await;
    assert_eq!(structured(&r)["selectedIds"], json!(["b", "a"]));

    let prop = structured(
        &call(
            &c,
            "elicit_proposal",
            json!({"message": "File?", "proposal": {"title": "Bug", "priority": 2}}),
        )
        .await,
    )
    .clone();
    f.acme()
        .decide(
            &token_of(&prop),
            json!({"decision": "submitted", "values": {"title": "Bug!"}}),
        )
        .await;
    let r = call(
        &c,
        "elicit_result",
        json!({"elicitationId": prop["elicitationId"]}),
    )
    .await;
    assert_eq!(structured(&r)["values"], json!({"title": "Bug!"}));

    let form = structured(&call(&c, "elicit_approval", json!({"message": "Form", "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})).await).clone();
    f.acme()
        .decide(
            &token_of(&form),
            json!({"decision": "submitted", "formSubmission": {"n": 3}}),
        )
        .await;
    let r = call(
        &c,
        "elicit_result",
        json!({"elicitationId": form["elicitationId"]}),
    )
    .await;
    assert_eq!(structured(&r)["formSubmission"], json!({"n": 3}));

    // cancel while pending; then status canceled; result canceled
    let p = structured(&call(&c, "elicit_approval", json!({"message": "m", "context": 1})).await)
        .clone();
    let pid = p["elicitationId"].clone();
    assert_eq!(
        structured(&call(&c, "elicit_cancel", json!({"elicitationId": pid})).await)["status"],
        "canceled"
    );
    assert_eq!(
        structured(
            &call(
                &c,
                "elicit_await",
                json!({"elicitationId": pid, "waitSeconds": 0})
            )
            .await
        )["status"],
        "canceled"
    );
    assert!(
        error_text(&call(&c, "elicit_result", json!({"elicitationId": pid})).await)
            .starts_with("canceled")
    );

    // domain errors are tool errors with a code and a next step
    let nf = error_text(
        &call(
            &c,
            "elicit_status",
            json!({"elicitationId": "00000000-0000-4000-8000-000000000000"}),
        )
        .await,
    );
    assert!(nf.starts_with("not_found"), "{nf}");
    let bad = error_text(&call(&c, "elicit_approval", json!({"message": "m"})).await);
    assert!(
        bad.starts_with("invalid_request") && bad.contains("context"),
        "{bad}"
    );
    let wait = error_text(
        &call(
            &c,
            "elicit_await",
            json!({"elicitationId": pid, "waitSeconds": 61}),
        )
        .await,
    );
    assert!(wait.starts_with("invalid_request"), "{wait}");

    // tenant isolation holds over MCP too
    let beta = connect(&f.apps[1].base, BETA_KEY).await.unwrap();
    assert!(
        error_text(&call(&beta, "elicit_status", json!({"elicitationId": id})).await)
            .starts_with("not_found")
    );

    // malformed arguments and unknown tools are JSON-RPC errors
    for (tool, args) in [
        ("elicit_approval", json!({"title": "no message"})),
        ("elicit_status", json!({"elicitationId": 5})),
        (
            "elicit_status",
            json!({"elicitationId": "x", "extra": true}),
        ),
        ("no_such_tool", json!({})),
    ] {
        let Value::Object(args) = args else {
            unreachable!()
        };
        let r = c
            .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
            .await;
        assert!(r.is_err(), "{tool}: expected a JSON-RPC error, got {r:?}");
    }
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_host_checks() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let base = &f.apps[0].base;
    assert!(connect(base, "wrong-key-0123456789abcdef").await.is_err());
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = http
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "unauthorized"
    );
    // DNS-rebinding protection: an unknown Host is refused even with a valid key.
    let r = http
        .post(format!("{base}/mcp"))
        .bearer_auth(ACME_KEY)
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Stateless: no session id, JSON answers.
    let r = http
        .post(format!("{base}/mcp"))
        .bearer_auth(ACME_KEY)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("mcp-session-id").is_none());
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_stops_when_the_client_disconnects() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let c = f.acme().approval().await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "elicit_await", "arguments": {"elicitationId": c.id, "waitSeconds": 30}}});
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let r = impatient
        .post(format!("{}/mcp", f.apps[0].base))
        .bearer_auth(ACME_KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body)
        .send()
        .await;
    assert!(
        r.is_err(),
        "the call should still be waiting when the client gives up"
    );
    let hub = f.apps[0].service.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    while hub.parked_awaits() != 0 {
        assert!(
            Instant::now() < deadline,
            "await still parked after the client left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/tools_list.json")
}

/// `tools/list` is pinned: schema changes must be deliberate. Regenerate with
/// `UPDATE_SNAPSHOTS=1 cargo test tools_list_matches_the_snapshot`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_matches_the_snapshot() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let c = connect(&f.apps[0].base, ACME_KEY).await.unwrap();
    let mut tools = serde_json::to_value(c.list_all_tools().await.unwrap()).unwrap();
    tools
        .as_array_mut()
        .unwrap()
        .sort_by_key(|t| t["name"].as_str().unwrap().to_string());
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "elicit_approval",
            "elicit_await",
            "elicit_cancel",
            "elicit_ping",
            "elicit_proposal",
            "elicit_result",
            "elicit_selection",
            "elicit_status"
        ]
    );
    for t in tools.as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert_eq!(t["inputSchema"]["type"], "object", "{name}");
        assert!(t["outputSchema"].is_object(), "{name} has no outputSchema");
        assert!(
            t["description"].as_str().unwrap().len() > 40,
            "{name} needs a real description"
        );
        let read_only = t["annotations"]["readOnlyHint"].as_bool();
        match name {
            "elicit_status" | "elicit_await" | "elicit_ping" => {
                assert_eq!(read_only, Some(true), "{name}")
            }
            _ => assert_eq!(read_only, Some(false), "{name}"),
        }
    }
    assert_eq!(
        tools[2]["annotations"]["destructiveHint"], true,
        "cancel is destructive"
    );
    assert_eq!(
        tools[5]["annotations"]["idempotentHint"], true,
        "result is idempotent"
    );
    let pretty = serde_json::to_string_pretty(&tools).unwrap() + "\n";
    let path = snapshot_path();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &pretty).unwrap();
    }
    let pinned = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_SNAPSHOTS=1", path.display()));
    assert!(
        pinned == pretty,
        "tools/list changed; review the diff and run with UPDATE_SNAPSHOTS=1 to accept:\n{pretty}"
    );
}

/// The official TypeScript SDK (`tests/mcp-node`; the harness runs `npm ci` there when needed)
/// against a real replica, in the initialize-era and the 2026-07-28 stateless modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_typescript_sdk_in_both_protocol_modes() {
    use crate::harness::prereq;
    const TEST: &str = "official_typescript_sdk_in_both_protocol_modes";
    for tool in ["node", "npm"] {
        if prereq::find(&[tool]).is_none() {
            prereq::skip_or_fail(TEST, tool, prereq::NODE_INSTALL);
            return;
        }
    }
    let dir = prereq::mcp_node_dir();
    let provision = dir.clone();
    tokio::task::spawn_blocking(move || prereq::ensure_npm_ci(&provision))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    let f = Fixture::new(StoreKind::Redis, 1).await;
    for mode in ["initialize", "stateless"] {
        let base = f.apps[0].base.clone();
        let dir = dir.clone();
        let out = tokio::task::spawn_blocking(move || {
            Command::new("node")
                .current_dir(&dir)
                .args(["client.mjs", &base, ACME_KEY, mode])
                .output()
        })
        .await
        .unwrap()
        .expect("run node (is Node.js installed?)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "mcp-node {mode} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    }
}

/// `elicitd mcp-stdio`: MCP over stdin/stdout with the HTTP server (review links) alongside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_mode_serves_tools_and_review_links() {
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    let port = crate::harness::free_port();
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_elicitd")).configure(|c| {
        c.arg("mcp-stdio")
            .env_clear()
            .env("ELICITD_LISTEN", format!("127.0.0.1:{port}"))
            .env("ELICITD_API_KEYS", format!("acme:{ACME_KEY}"));
    });
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    let created = structured(
        &call(
            &client,
            "elicit_approval",
            json!({"message": "From the desktop", "context": {"x": 1}}),
        )
        .await,
    )
    .clone();
    let url = created["reviewUrl"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/review/")),
        "{url}"
    );
    let id = created["elicitationId"].as_str().unwrap().to_string();
    // The HTTP side of the same process serves the reviewer and the tenant's REST calls.
    let rest = crate::harness::Api::new(&format!("http://127.0.0.1:{port}"), ACME_KEY);
    assert_eq!(rest.status_of(&id).await, "pending");
    assert_eq!(
        rest.decide(&token_of(&created), json!({"decision": "declined"}))
            .await
            .status,
        200
    );
    let r = call(
        &client,
        "elicit_await",
        json!({"elicitationId": id, "waitSeconds": 5}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "declined");
    client.cancel().await.unwrap();
}

/// `context` is the agent's JSON text end to end on MCP too: created over MCP or REST, read
/// over MCP (`elicit_result`'s text) or REST, the bytes are the ones sent — number spellings,
/// key order, unicode escapes and whitespace included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_is_returned_byte_for_byte_over_mcp_and_rest() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let base = &f.apps[0].base;
    let http = reqwest::Client::new();
    let context = r#"{"z": 2.50, "a": 1e2, "\u00e9t\u00e9": "caf\u00e9 \ud83d\ude00", "n": [1.0, -0, 12345678901234567890123]}"#;
    let mcp_raw = |body: String| {
        http.post(format!("{base}/mcp"))
            .bearer_auth(ACME_KEY)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // Created over MCP, with the arguments written by hand (no client re-serializes them).
    let create = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"elicit_approval","arguments":{{"message":"Check","context":{context}}}}}}}"#
    );
    let r: Value = mcp_raw(create).await.unwrap().json().await.unwrap();
    let created = &r["result"]["structuredContent"];
    let from_mcp = created["elicitationId"]
        .as_str()
        .expect("created")
        .to_string();
    // Created over REST with the same text.
    let from_rest = api
        .post_raw(
            "/v1/approvals",
            format!(r#"{{"message": "Check", "context": {context}}}"#),
        )
        .await;
    assert_eq!(from_rest.status, 201, "{}", from_rest.body);
    let from_rest_id = from_rest.str("elicitationId").to_string();
    for (id, token) in [
        (&from_mcp, token_of(created)),
        (
            &from_rest_id,
            from_rest
                .str("reviewUrl")
                .rsplit('/')
                .next()
                .unwrap()
                .to_string(),
        ),
    ] {
        let d = api.decide(&token, json!({"decision": "submitted"})).await;
        assert_eq!(d.status, 200, "{}", d.body);
        // MCP result: the text block is our JSON, with context as sent.
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"elicit_result","arguments":{{"elicitationId":"{id}"}}}}}}"#
        );
        let r: Value = mcp_raw(call).await.unwrap().json().await.unwrap();
        let text = r["result"]["content"][0]["text"].as_str().expect("text");
        assert!(
            text.contains(&format!(r#""context":{context},"#)),
            "MCP result of {id}: {text}"
        );
        // REST result (a repeat read returns the same outcome).
        let rest = http
            .post(format!("{base}/v1/elicitations/{id}/result"))
            .bearer_auth(ACME_KEY)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            rest.contains(&format!(r#""context":{context},"#)),
            "REST result of {id}: {rest}"
        );
    }
}
