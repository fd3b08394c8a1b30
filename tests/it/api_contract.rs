//! The lifecycle contract of SPEC §2–§4, run against both stores.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{
    every_store,
    harness::{Fixture, StoreKind},
};

every_store!(
    approval_json_lifecycle,
    approval_form_validates_and_records_nothing_on_invalid_input,
    selection_multi_and_decline,
    proposal_keeps_only_kept_fields,
    cancel_rules,
    expiry_is_computed_and_final,
    decision_before_deadline_stays_forever,
    idempotent_create,
    tenant_isolation,
    await_returns_at_once_and_wakes,
    wrong_review_tokens_are_not_found,
    labels_rename_buttons_only,
    status_fast_path_answers_as_the_router_does,
);

async fn approval_json_lifecycle(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    // Context key order, spacing and number spelling come back byte for byte.
    let raw = r#"{"message":"Ship release 2.1?","title":"Release","context":{"z":1,"a":[1.50,2e3,{"k":null}],"n":12345678901234567890}}"#;
    let r = api.post_raw("/v1/approvals", raw).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.str("status"), "pending");
    let id = r.str("elicitationId").to_string();
    let url = r.str("reviewUrl").to_string();
    assert!(
        url.starts_with(&format!("{}/review/", f.apps[0].base)),
        "{url}"
    );
    let token = url.rsplit('/').next().unwrap().to_string();
    assert!(
        !url.contains(&id),
        "review token must be unrelated to the id"
    );
    assert!(r.str("expiresAt").ends_with('Z'));

    let s = api.status(&id).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.str("status"), "pending");
    assert_eq!(s.str("kind"), "approval");
    assert_eq!(s.str("elicitationId"), id);
    assert_eq!(s.str("expiresAt"), r.str("expiresAt"));

    let early = api.result(&id).await;
    assert_eq!((early.status, early.code()), (409, "not_decided"));
    assert!(early.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("pending"));

    let d = api
        .decide(
            &token,
            json!({"decision": "submitted", "comment": "ship it"}),
        )
        .await;
    assert_eq!(d.status, 200, "{}", d.body);
    assert_eq!(d.str("status"), "submitted");
    assert_eq!(api.status_of(&id).await, "submitted");

    let again = api.decide(&token, json!({"decision": "declined"})).await;
    assert_eq!((again.status, again.code()), (409, "already_decided"));

    // First result consumes; the raw body carries the context verbatim.
    let resp = api
        .http
        .post(format!("{}/v1/elicitations/{id}/result", api.base))
        .bearer_auth(&api.key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains(r#""context":{"z":1,"a":[1.50,2e3,{"k":null}],"n":12345678901234567890}"#),
        "{text}"
    );
    let first: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(first["status"], "consumed");
    assert_eq!(first["decision"], "submitted");
    assert_eq!(first["formSubmission"], serde_json::Value::Null);
    assert_eq!(first["comment"], "ship it");
    assert!(first.get("selectedIds").is_none());
    assert_eq!(api.status_of(&id).await, "consumed");

    let second = api.result(&id).await;
    assert_eq!(second.status, 200);
    assert_eq!(
        second.body, first,
        "repeat reads return the identical outcome"
    );

    // Nothing leaves consumed.
    assert_eq!(api.cancel(&id).await.code(), "already_decided");
    assert_eq!(
        api.decide(&token, json!({"decision": "submitted"}))
            .await
            .code(),
        "already_decided"
    );
    assert_eq!(api.status_of(&id).await, "consumed");

    let audit = api.audit(&id).await;
    assert_eq!(audit.status, 200);
    let types: Vec<&str> = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["created", "decided", "fetched", "fetched"]);
    let ev = &audit.body["events"];
    assert_eq!(ev[0]["actor"], "agent:acme");
    assert_eq!(ev[1]["actor"], "reviewer");
    assert_eq!(ev[1]["decision"], "submitted");
    assert!(ev[2]["at"].as_str().unwrap().ends_with('Z'));
}

async fn approval_form_validates_and_records_nothing_on_invalid_input(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api
        .create("approval", json!({
            "message": "Book the trip",
            "requestedSchema": {"type": "object", "properties": {
                "email": {"type": "string", "format": "email", "title": "Email"},
                "nights": {"type": "integer", "minimum": 1, "maximum": 14},
                "class": {"type": "string", "enum": ["economy", "business"]},
                "extras": {"type": "array", "items": {"type": "string", "enum": ["wifi", "meal", "lounge"]}, "maxItems": 2},
                "insured": {"type": "boolean", "default": false}
            }, "required": ["email", "nights"]}
        }))
        .await;
    let bad = api
        .decide(&c.token, json!({"decision": "submitted", "formSubmission": {"email": "not-an-email", "nights": 30, "extras": ["wifi", "meal", "lounge"], "bogus": 1}}))
        .await;
    assert_eq!(
        (bad.status, bad.code()),
        (422, "invalid_request"),
        "{}",
        bad.body
    );
    let fields: Vec<&str> = bad.body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    for f in ["email", "nights", "extras", "bogus"] {
        assert!(fields.contains(&f), "{f} missing in {fields:?}");
    }
    let missing = api
        .decide(
            &c.token,
            json!({"decision": "submitted", "formSubmission": {"email": "a@b.co"}}),
        )
        .await;
    assert_eq!(missing.status, 422);
    assert_eq!(
        api.status_of(&c.id).await,
        "pending",
        "invalid input records nothing"
    );
    let audit = api.audit(&c.id).await;
    assert_eq!(audit.body["events"].as_array().unwrap().len(), 1);

    let ok = api
        .decide(&c.token, json!({"decision": "submitted", "formSubmission": {"email": "ann@example.com", "nights": 3, "class": "business", "extras": ["wifi"], "insured": true}}))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let r = api.result(&c.id).await;
    assert_eq!(
        r.body["formSubmission"],
        json!({"email": "ann@example.com", "nights": 3, "class": "business", "extras": ["wifi"], "insured": true})
    );
    assert_eq!(r.body["context"], serde_json::Value::Null);

    // Schema rules are enforced at create time too.
    for schema in [
        json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}),
        json!({"type": "object", "allOf": []}),
    ] {
        let r = api
            .post(
                "/v1/approvals",
                &json!({"message": "m", "requestedSchema": schema}),
            )
            .await;
        assert_eq!((r.status, r.code()), (400, "invalid_request"), "{schema}");
    }
}

async fn selection_multi_and_decline(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let body = json!({"message": "Which regions?", "options": [
        {"id": "eu", "label": "Europe", "description": "Frankfurt", "latencyMs": 20},
        {"id": "us", "label": "US"}, {"id": "ap"}], "minSelections": 1, "maxSelections": 2});
    let a = api.create("selection", body.clone()).await;
    let too_many = api
        .decide(
            &a.token,
            json!({"decision": "submitted", "selectedIds": ["eu", "us", "ap"]}),
        )
        .await;
    assert_eq!(too_many.status, 422);
    let unknown = api
        .decide(
            &a.token,
            json!({"decision": "submitted", "selectedIds": ["mars"]}),
        )
        .await;
    assert_eq!(unknown.status, 422);
    assert_eq!(
        api.decide(
            &a.token,
            json!({"decision": "submitted", "selectedIds": ["eu", "ap"]})
        )
        .await
        .status,
        200
    );
    let r = api.result(&a.id).await;
    assert_eq!(r.body["selectedIds"], json!(["eu", "ap"]));
    assert_eq!(r.body["decision"], "submitted");

    let b = api.create("selection", body).await;
    let d = api
        .decide(
            &b.token,
            json!({"decision": "declined", "comment": "none fit"}),
        )
        .await;
    assert_eq!(d.str("status"), "declined");
    assert_eq!(api.status_of(&b.id).await, "declined");
    let r = api.result(&b.id).await;
    assert_eq!(r.body["decision"], "declined");
    assert!(r.body.get("selectedIds").is_none());
    assert_eq!(r.body["comment"], "none fit");
}

async fn proposal_keeps_only_kept_fields(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api
        .create("proposal", json!({"message": "Review this ticket", "proposal": {
            "title": "Fix login", "priority": 2, "urgent": false, "tags": ["auth", "web"]},
            "requestedSchema": {"type": "object", "properties": {"priority": {"type": "integer", "minimum": 1, "maximum": 5, "title": "Priority"}}}}))
        .await;
    let bad = api
        .decide(
            &c.token,
            json!({"decision": "submitted", "values": {"priority": 9}}),
        )
        .await;
    assert_eq!(bad.status, 422);
    let wrong_type = api
        .decide(
            &c.token,
            json!({"decision": "submitted", "values": {"title": 5}}),
        )
        .await;
    assert_eq!(wrong_type.status, 422);
    let d = api.decide(&c.token, json!({"decision": "submitted", "values": {"title": "Fix SSO login", "priority": 1, "tags": ["auth"]}})).await;
    assert_eq!(d.status, 200, "{}", d.body);
    let r = api.result(&c.id).await;
    assert_eq!(
        r.body["values"],
        json!({"title": "Fix SSO login", "priority": 1, "tags": ["auth"]})
    );

    let rejected = api
        .create("proposal", json!({"message": "m", "proposal": {"a": "b"}}))
        .await;
    assert_eq!(
        api.decide(&rejected.token, json!({"decision": "declined"}))
            .await
            .str("status"),
        "declined"
    );
    assert!(api.result(&rejected.id).await.body.get("values").is_none());
}

async fn cancel_rules(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let r = api.cancel(&c.id).await;
    assert_eq!((r.status, r.str("status")), (200, "canceled"));
    let again = api.cancel(&c.id).await;
    assert_eq!(
        (again.status, again.str("status")),
        (200, "canceled"),
        "repeat cancel answers the same"
    );
    assert_eq!(api.status_of(&c.id).await, "canceled");
    let d = api.decide(&c.token, json!({"decision": "submitted"})).await;
    assert_eq!((d.status, d.code()), (409, "canceled"));
    assert!(d.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("withdrawn by the requester"));
    assert_eq!(api.result(&c.id).await.code(), "canceled");
    let types: Vec<String> = api.audit(&c.id).await.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types, ["created", "canceled"]);

    // Cancel after a decision is refused, and the decision stands.
    let c2 = api.approval().await;
    api.decide(&c2.token, json!({"decision": "declined"})).await;
    let r = api.cancel(&c2.id).await;
    assert_eq!((r.status, r.code()), (409, "already_decided"));
    assert_eq!(api.status_of(&c2.id).await, "declined");
}

async fn expiry_is_computed_and_final(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"message": "quick", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    let c2 = api
        .create(
            "selection",
            json!({"message": "quick", "options": [{"id": "a"}], "expiresInSeconds": 1}),
        )
        .await;
    let c3 = api
        .create(
            "proposal",
            json!({"message": "quick", "proposal": {"a": 1}, "expiresInSeconds": 1}),
        )
        .await;
    assert_eq!(api.status_of(&c.id).await, "pending");
    // A parked await answers `expired` at the deadline, not at the window end.
    let started = Instant::now();
    let w = api.wait(&c.id, 30).await;
    assert_eq!(w.str("status"), "expired");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "await took {:?}",
        started.elapsed()
    );
    for c in [&c, &c2, &c3] {
        assert_eq!(api.status_of(&c.id).await, "expired");
        let d = api.decide(&c.token, json!({"decision": "declined"})).await;
        assert_eq!((d.status, d.code()), (410, "expired"));
        assert_eq!(
            (
                api.result(&c.id).await.status,
                api.result(&c.id).await.code()
            ),
            (410, "expired")
        );
        assert_eq!(api.cancel(&c.id).await.code(), "expired");
        assert_eq!(
            api.status_of(&c.id).await,
            "expired",
            "refusals change nothing"
        );
    }
}

async fn decision_before_deadline_stays_forever(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"message": "quick", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    let d = api
        .create(
            "approval",
            json!({"message": "quick", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    assert_eq!(
        api.decide(&c.token, json!({"decision": "submitted"}))
            .await
            .status,
        200
    );
    assert_eq!(api.cancel(&d.id).await.status, 200);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(api.status_of(&c.id).await, "submitted");
    assert_eq!(api.wait(&c.id, 5).await.str("status"), "submitted");
    assert_eq!(api.status_of(&d.id).await, "canceled");
    let r = api.result(&c.id).await;
    assert_eq!(r.status, 200);
    assert_eq!(api.status_of(&c.id).await, "consumed");
    assert_eq!(api.result(&c.id).await.body, r.body);
}

async fn idempotent_create(kind: StoreKind) {
    let f = Fixture::new(kind, 2).await;
    let body = json!({"message": "Pay invoice 7?", "context": {"amount": 10}, "idempotencyKey": "invoice-7"});
    let a = f.acme().create("approval", body.clone()).await;
    // Same key through another replica: the same elicitation and the same link.
    let b = f.other().create("approval", body.clone()).await;
    assert_eq!(a.id, b.id);
    assert_eq!(a.token, b.token, "same review link");
    assert_eq!(a.body["expiresAt"], b.body["expiresAt"]);
    // Replaying after a decision returns the first request with its current status.
    f.acme()
        .decide(&a.token, json!({"decision": "submitted"}))
        .await;
    let c = f.acme().create("approval", body.clone()).await;
    assert_eq!(
        (c.id.as_str(), c.body["status"].as_str()),
        (a.id.as_str(), Some("submitted"))
    );
    // Same key, different request: refused.
    let mut changed = body.clone();
    changed["context"]["amount"] = json!(11);
    let r = f.acme().post("/v1/approvals", &changed).await;
    assert_eq!((r.status, r.code()), (400, "invalid_request"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("idempotencyKey"));
    // Another tenant with the same key gets its own.
    let other = f.beta().create("approval", body.clone()).await;
    assert_ne!(other.id, a.id);
    // Without a key every create is new.
    let n1 = f.acme().approval().await;
    let n2 = f.acme().approval().await;
    assert_ne!(n1.id, n2.id);
    // Concurrent creates with one fresh key agree on one id.
    let body = json!({"message": "race", "context": 1, "idempotencyKey": "race-1"});
    let mut tasks = Vec::new();
    for i in 0..8 {
        let api = if i % 2 == 0 { f.acme() } else { f.other() };
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            api.create("approval", body).await.id
        }));
    }
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        ids.insert(t.await.unwrap());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
}

async fn tenant_isolation(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let c = f.acme().approval().await;
    let beta = f.beta();
    for r in [
        beta.status(&c.id).await,
        beta.wait(&c.id, 1).await,
        beta.result(&c.id).await,
        beta.cancel(&c.id).await,
        beta.audit(&c.id).await,
    ] {
        assert_eq!((r.status, r.code()), (404, "not_found"), "{}", r.body);
    }
    assert_eq!(
        f.acme().status_of(&c.id).await,
        "pending",
        "beta's cancel did nothing"
    );
    for bad in ["nope", "00000000-0000-0000-0000-000000000000", "%20"] {
        assert_eq!(f.acme().status(bad).await.code(), "not_found");
    }
    // The reviewer of acme's request decides; beta still sees nothing.
    f.acme()
        .decide(&c.token, json!({"decision": "submitted"}))
        .await;
    assert_eq!(beta.result(&c.id).await.status, 404);
    assert_eq!(f.acme().result(&c.id).await.status, 200);
}

async fn await_returns_at_once_and_wakes(kind: StoreKind) {
    let f = Fixture::new(kind, 2).await;
    let api = f.acme();
    let c = api.approval().await;
    // waitSeconds=0 is a status read.
    let t = Instant::now();
    assert_eq!(api.wait(&c.id, 0).await.str("status"), "pending");
    assert!(t.elapsed() < Duration::from_secs(2));
    // A parked await wakes when the decision lands (through another replica when there is one).
    let waiter = {
        let api = f.other();
        let id = c.id.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let r = api.wait(&id, 30).await;
            (r, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.decide(&c.token, json!({"decision": "declined"})).await;
    let (r, took) = waiter.await.unwrap();
    assert_eq!(r.str("status"), "declined");
    assert!(took < Duration::from_secs(5), "woke after {took:?}");
    // Already decided: returns at once.
    let t = Instant::now();
    assert_eq!(api.wait(&c.id, 30).await.str("status"), "declined");
    assert!(t.elapsed() < Duration::from_secs(2));
    // The window closes with `pending` when nothing happens.
    let c2 = api.approval().await;
    let t = Instant::now();
    assert_eq!(api.wait(&c2.id, 1).await.str("status"), "pending");
    assert!(t.elapsed() >= Duration::from_millis(900));
}

async fn wrong_review_tokens_are_not_found(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let mut forged = c.token.clone().into_bytes();
    forged[0] = if forged[0] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    for t in [forged.as_str(), "short", c.id.as_str()] {
        let r = api.decide(t, json!({"decision": "submitted"})).await;
        assert_eq!((r.status, r.code()), (404, "not_found"), "{t}");
    }
    assert_eq!(api.status_of(&c.id).await, "pending");
}

async fn labels_rename_buttons_only(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.create("approval", json!({"message": "m", "context": 1, "labels": {"submit": "  Ship it ", "decline": "Hold"}})).await;
    let view = f.apps[0].service.review(&c.token, None).await.unwrap();
    assert_eq!(view.spec.labels.submit, "Ship it");
    assert_eq!(view.spec.labels.decline, "Hold");
    api.decide(&c.token, json!({"decision": "submitted"})).await;
    assert_eq!(api.result(&c.id).await.body["decision"], "submitted");
    let r = api
        .post(
            "/v1/approvals",
            &json!({"message": "m", "context": 1, "labels": {"approve": "x"}}),
        )
        .await;
    assert_eq!(r.status, 400);
}

/// `GET /v1/elicitations/{id}` is answered before the router (`api::fast_status`); the same URL
/// with an empty query string goes through the router. Both must give the same answer, byte for
/// byte and header for header, for every kind of outcome.
async fn status_fast_path_answers_as_the_router_does(kind: StoreKind) {
    use crate::harness::ACME_KEY;
    let routed = reqwest::Url::parse("http://h/v1/elicitations/x?").unwrap();
    assert_eq!(routed.query(), Some(""), "an empty query survives");
    let f = Fixture::new(kind, 1).await;
    let (api, beta) = (f.acme(), f.beta());
    let pending = api.approval().await;
    let decided = api.approval().await;
    let d = api
        .decide(&decided.token, json!({"decision": "declined"}))
        .await;
    assert_eq!(d.status, 200);
    let foreign = beta.approval().await;
    let bearer = format!("Bearer {ACME_KEY}");
    let cases: Vec<(&str, &str, Option<&str>, Option<&str>)> = vec![
        ("pending", &pending.id, Some(&bearer), None),
        ("declined", &decided.id, Some(&bearer), None),
        ("another tenant's", &foreign.id, Some(&bearer), None),
        (
            "unknown",
            "0b7e6a3c-58a4-4b7e-9d7e-3f1c2a9b8d10",
            Some(&bearer),
            None,
        ),
        ("malformed", "not-an-id", Some(&bearer), None),
        ("no key", &pending.id, None, None),
        ("wrong scheme", &pending.id, Some("Basic eDp5"), None),
        (
            "wrong key",
            &pending.id,
            Some("Bearer nope-nope-nope-nope"),
            None,
        ),
        (
            "own request id",
            &pending.id,
            Some(&bearer),
            Some("trace-42.a:b"),
        ),
        (
            "bad request id",
            &pending.id,
            Some(&bearer),
            Some("bad id!"),
        ),
    ];
    let http = reqwest::Client::new();
    for (what, id, auth, rid) in cases {
        let mut answers = Vec::new();
        for suffix in ["", "?"] {
            let mut req = http.get(format!("{}/v1/elicitations/{id}{suffix}", f.apps[0].base));
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            if let Some(r) = rid {
                req = req.header("x-request-id", r);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            let mut headers: Vec<(String, String)> = r
                .headers()
                .iter()
                .filter(|(k, _)| k.as_str() != "date")
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
                .collect();
            headers.sort();
            let request_id = r
                .headers()
                .get("x-request-id")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            headers.retain(|(k, _)| k != "x-request-id");
            let body = r.bytes().await.unwrap();
            answers.push((status, headers, body, request_id));
        }
        let (fast, routed) = (&answers[0], &answers[1]);
        assert_eq!(fast.0, routed.0, "{what}: status");
        assert_eq!(fast.1, routed.1, "{what}: headers");
        assert_eq!(fast.2, routed.2, "{what}: body");
        match rid {
            Some(r) if !r.contains(' ') => {
                assert_eq!(fast.3, r, "{what}");
                assert_eq!(routed.3, r, "{what}");
            }
            _ => {
                for a in [&fast.3, &routed.3] {
                    assert!(
                        a.len() == 32 && a.bytes().all(|b| b.is_ascii_hexdigit()),
                        "{what}: {a}"
                    );
                }
            }
        }
        let expect = match what {
            "pending" | "own request id" | "bad request id" | "declined" => 200,
            "no key" | "wrong scheme" | "wrong key" => 401,
            _ => 404,
        };
        assert_eq!(fast.0, expect, "{what}: {:?}", fast.2);
    }
}
