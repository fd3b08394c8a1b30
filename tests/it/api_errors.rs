//! Bad input, auth and limits: every client mistake is a clean 4xx with the SPEC §5 body.

use serde_json::json;

use crate::{
    every_store,
    harness::{Api, Fixture, StoreKind},
};

every_store!(
    auth_is_required,
    malformed_bodies_are_clean_4xx,
    field_and_body_limits
);

async fn auth_is_required(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let c = f.acme().approval().await;
    for key in ["", "wrong-key-0123456789abcdef"] {
        let api = Api::new(&f.apps[0].base, key);
        for r in [
            api.status(&c.id).await,
            api.post("/v1/approvals", &json!({"message": "m", "context": 1}))
                .await,
        ] {
            assert_eq!((r.status, r.code()), (401, "unauthorized"), "{}", r.body);
            assert_eq!(r.headers.get("www-authenticate").unwrap(), "Bearer");
        }
    }
    // A non-bearer scheme is refused too.
    let r = reqwest::Client::new()
        .get(format!("{}/v1/elicitations/{}", f.apps[0].base, c.id))
        .header(
            "authorization",
            format!("Basic {}", crate::harness::ACME_KEY),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Probes need no key.
    let r = reqwest::get(format!("{}/healthz", f.apps[0].base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = reqwest::get(format!("{}/readyz", f.apps[0].base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

async fn malformed_bodies_are_clean_4xx(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    let cases: Vec<(&str, String)> = vec![
        ("not json", "{oops".into()),
        ("empty", String::new()),
        ("array", "[]".into()),
        ("wrong type", r#"{"message": 5, "context": 1}"#.into()),
        (
            "unknown field",
            r#"{"message": "m", "context": 1, "extra": true}"#.into(),
        ),
        (
            "negative expiry",
            r#"{"message": "m", "context": 1, "expiresInSeconds": -5}"#.into(),
        ),
        (
            "float expiry",
            r#"{"message": "m", "context": 1, "expiresInSeconds": 1.5}"#.into(),
        ),
        (
            "deep nesting",
            format!(r#"{{"message": "m", "context": {deep}}}"#),
        ),
        (
            "options on approval",
            r#"{"message": "m", "context": 1, "options": [{"id": "a"}]}"#.into(),
        ),
    ];
    for (what, body) in cases {
        let r = api.post_raw("/v1/approvals", body).await;
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_request"),
            "{what}: {}",
            r.body
        );
        assert!(
            r.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}"
        );
    }
    let r = api
        .send_with_content_type(
            "/v1/approvals",
            "text/plain",
            r#"{"message": "m", "context": 1}"#,
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "invalid_request"));
    // The review token is checked before the body is read: an unknown one is 404 whatever the
    // body; a real one with a bad body is 400.
    let r = api
        .post("/v1/reviews/abc", &json!({"decision": "maybe"}))
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let c = api.approval().await;
    let r = api.decide(&c.token, json!({"decision": "maybe"})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = api.get("/v1/elicitations/x/await?waitSeconds=61").await;
    assert_eq!(
        r.status, 404,
        "unknown id wins over a bad window: {}",
        r.body
    );
    let c = api.approval().await;
    for q in [
        "waitSeconds=61",
        "waitSeconds=-1",
        "waitSeconds=abc",
        "other=1",
    ] {
        let r = api
            .get(&format!("/v1/elicitations/{}/await?{q}", c.id))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_request"),
            "{q}: {}",
            r.body
        );
    }
    let r = api.get("/v1/nothing-here").await;
    assert_eq!((r.status, r.code()), (404, "not_found"));
    let r = api.get("/v1/approvals").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.code(), "invalid_request");
}

async fn field_and_body_limits(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    // A body announced over the limit is refused before it is read. (Sent for real, the
    // client may still be writing when the server answers and closes: a reset, not a 413,
    // on a loaded machine. So only the head goes out.)
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = api.base.trim_start_matches("http://").to_string();
        let mut s = tokio::net::TcpStream::connect(&host).await.unwrap();
        let head = format!(
            "POST /v1/approvals HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            crate::harness::ACME_KEY,
            2 * 1024 * 1024
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut resp = vec![0u8; 4096];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut resp))
            .await
            .expect("refused without waiting for the body")
            .unwrap();
        let text = String::from_utf8_lossy(&resp[..n]);
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("payload_too_large"), "{text}");
    }
    let big_ctx = "y".repeat(64 * 1024);
    let r = api
        .post(
            "/v1/approvals",
            &json!({"message": "m", "context": big_ctx}),
        )
        .await;
    assert_eq!((r.status, r.code()), (413, "payload_too_large"));
    let ok_ctx = "y".repeat(64 * 1024 - 2);
    assert_eq!(
        api.post("/v1/approvals", &json!({"message": "m", "context": ok_ctx}))
            .await
            .status,
        201
    );

    let r = api
        .post("/v1/approvals", &json!({"message": "m".repeat(4001), "title": "t".repeat(121), "context": 1,
            "expiresInSeconds": 86401, "labels": {"submit": "s".repeat(41)}, "idempotencyKey": "k".repeat(201)}))
        .await;
    assert_eq!(r.status, 400);
    let fields: Vec<&str> = r.body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "message",
            "title",
            "expiresInSeconds",
            "labels.submit",
            "idempotencyKey"
        ]
    );
    // Boundaries are inclusive.
    let r = api
        .post("/v1/approvals", &json!({"message": "m".repeat(4000), "title": "t".repeat(120), "context": 1,
            "expiresInSeconds": 86400, "labels": {"submit": "s".repeat(40)}, "idempotencyKey": "k".repeat(200)}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let many: Vec<_> = (0..501).map(|i| json!({"id": format!("o{i}")})).collect();
    let r = api
        .post("/v1/selections", &json!({"message": "m", "options": many}))
        .await;
    assert_eq!(r.status, 400);
    let fields: serde_json::Map<_, _> = (0..101).map(|i| (format!("f{i}"), json!(i))).collect();
    let r = api
        .post(
            "/v1/proposals",
            &json!({"message": "m", "proposal": fields}),
        )
        .await;
    assert_eq!(r.status, 400);
    let c = api.approval().await;
    let r = api
        .decide(
            &c.token,
            json!({"decision": "submitted", "comment": "c".repeat(2001)}),
        )
        .await;
    assert_eq!(r.status, 422);
    // The replica keeps serving.
    assert_eq!(api.status_of(&c.id).await, "pending");
}

impl Api {
    pub async fn send_with_content_type(
        &self,
        path: &str,
        ct: &str,
        body: &str,
    ) -> crate::harness::Resp {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("content-type", ct)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let body = r.json().await.unwrap_or_default();
        crate::harness::Resp {
            status,
            body,
            headers,
        }
    }
}
