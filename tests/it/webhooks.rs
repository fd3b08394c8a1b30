//! Webhooks: one signed Standard Webhooks event per transition, written with the transition
//! (the outbox) and delivered by the fleet — verified with the official `standardwebhooks`
//! Python package; a killed replica's delivery taken over; retries per schedule; `410 Gone`;
//! `Retry-After`; `expired` emitted once by racing replicas; non-public targets refused.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::{json, Value};

use crate::harness::{
    receiver::{Receiver, Reply},
    spawn_binary, test_config, App, Fixture, RedisServer, StoreKind, ACME_KEY, BETA_KEY,
};

/// A Standard Webhooks secret (32 bytes, base64).
const SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Webhooks on for tenant acme (not beta), loopback allowed, a fast retry schedule.
pub(crate) fn hooks(c: &mut elicitd::config::Config, schedule: &[u64]) {
    let mut cli = <elicitd::config::Cli as clap::Parser>::parse_from(["elicitd"]);
    cli.webhook_secrets = Some(format!("acme:{SECRET}"));
    cli.webhook_allow_private = true;
    cli.webhook_retry_schedule_secs = schedule
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    cli.webhook_timeout_secs = 2;
    cli.webhook_lease_secs = 3;
    cli.api_keys = Some(format!("acme:{ACME_KEY}"));
    c.webhooks = elicitd::config::Config::from_cli(cli).unwrap().webhooks;
}

crate::every_store!(every_transition_sends_one_signed_event);

async fn every_transition_sends_one_signed_event(kind: StoreKind) {
    let receiver = Receiver::start(vec![]).await;
    let f = Fixture::own(kind, 2, |c| hooks(c, &[0, 1, 1])).await;
    let (a, b) = (f.acme(), f.other());
    let url = receiver.url();
    let create = |extra: Value| {
        let mut body = json!({"message": "Pay?", "context": {"amount": 2.50}, "webhookUrl": url});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let a = a.clone();
        async move { a.create("approval", body).await }
    };
    let submitted = create(json!({"webhookIncludeResult": true})).await;
    let declined = create(json!({})).await;
    let canceled = create(json!({})).await;
    let expiring = create(json!({"expiresInSeconds": 1})).await;
    // Decisions through the other replica, the result read through the first.
    assert_eq!(
        b.decide(
            &submitted.token,
            json!({"decision": "submitted", "comment": "ok"})
        )
        .await
        .status,
        200
    );
    assert_eq!(
        b.decide(&declined.token, json!({"decision": "declined"}))
            .await
            .status,
        200
    );
    assert_eq!(a.cancel(&canceled.id).await.status, 200);
    assert_eq!(a.result(&submitted.id).await.status, 200);
    // Repeats make no new event.
    assert_eq!(a.cancel(&canceled.id).await.status, 200);
    assert_eq!(a.result(&submitted.id).await.status, 200);
    receiver.wait_for(5, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let got = receiver.got();
    assert_eq!(got.len(), 5, "exactly one event per transition");
    let mut by_type: HashMap<String, (String, Value)> = HashMap::new();
    for m in &got {
        let body = m.json();
        let t = body["type"].as_str().unwrap().to_string();
        assert!(
            by_type
                .insert(t.clone(), (m.id().to_string(), body))
                .is_none(),
            "two {t} events"
        );
    }
    let expect = [
        ("elicitation.submitted", &submitted.id),
        ("elicitation.declined", &declined.id),
        ("elicitation.canceled", &canceled.id),
        ("elicitation.consumed", &submitted.id),
        ("elicitation.expired", &expiring.id),
    ];
    for (t, id) in expect {
        let (msg_id, body) = &by_type[t];
        assert_eq!(body["data"]["elicitationId"], *id, "{t}");
        assert_eq!(body["data"]["kind"], "approval");
        assert_eq!(body["data"]["status"], t.trim_start_matches("elicitation."));
        assert!(msg_id.starts_with("msg_"), "{msg_id}");
    }
    // No reviewer payload by default; the opted-in request carries its result.
    assert!(by_type["elicitation.declined"].1["data"]
        .get("result")
        .is_none());
    let result = &by_type["elicitation.submitted"].1["data"]["result"];
    assert_eq!(result["decision"], "submitted");
    assert_eq!(result["comment"], "ok");
    assert_eq!(result["context"]["amount"], 2.5);
    assert!(by_type["elicitation.submitted"].1["data"]["decidedAt"].is_string());
    // Signatures verify with the official library (not our code).
    receiver_verifies(&got);
    // Visible per request, and audited.
    let d = a
        .deliveries_until(&submitted.id, Duration::from_secs(5), |d| {
            d.len() == 2 && d.iter().all(|x| x["state"] == "delivered")
        })
        .await;
    assert_eq!(d[0]["attempts"][0]["status"], 200);
    let audit = a.audit(&submitted.id).await;
    assert!(audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "webhook_delivered"));
}

fn receiver_verifies(got: &[crate::harness::receiver::Received]) {
    Receiver::verify_with_standardwebhooks(SECRET, got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_delivery_is_taken_over() {
    let redis = RedisServer::start();
    // The first attempt is held until replica A is dead; the next is answered.
    let receiver = Receiver::start(vec![Reply::Hold(Duration::from_secs(30))]).await;
    let env = [
        ("ELICITD_WEBHOOK_SECRETS", format!("acme:{SECRET}")),
        ("ELICITD_WEBHOOK_ALLOW_PRIVATE", "true".into()),
        ("ELICITD_WEBHOOK_TIMEOUT_SECS", "4".into()),
        ("ELICITD_WEBHOOK_LEASE_SECS", "6".into()),
        (
            "ELICITD_SECRET",
            "shared-secret-shared-secret-shared".into(),
        ),
    ];
    let env_a: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (mut a, api_a) = spawn_binary(&redis, &env_a, false).await;
    let c = api_a
        .create(
            "approval",
            json!({"message": "m", "context": 1, "webhookUrl": receiver.url()}),
        )
        .await;
    api_a
        .decide(&c.token, json!({"decision": "submitted"}))
        .await;
    let first = receiver.wait_for(1, Duration::from_secs(10)).await;
    // A dies mid-delivery (its attempt is in flight, its lease held).
    let _ = a.kill();
    let _ = a.wait();
    // B comes up; once A's lease runs out it delivers the same message.
    let mut env_b = env_a.clone();
    env_b.retain(|(k, _)| *k != "ELICITD_WEBHOOK_LEASE_SECS");
    let (mut b, api_b) = spawn_binary(&redis, &env_b, false).await;
    let got = receiver.wait_for(2, Duration::from_secs(40)).await;
    assert_eq!(got[1].id(), first[0].id(), "the same webhook-id");
    assert_eq!(got[1].json()["type"], "elicitation.submitted");
    let d = api_b
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            d.first().is_some_and(|x| x["state"] == "delivered")
        })
        .await;
    assert_eq!(d.len(), 1);
    receiver_verifies(&got);
    let _ = b.kill();
    let _ = b.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_gets_it_on_a_later_attempt() {
    // Reserve a port, then leave it closed: connections are refused until the receiver starts.
    let port = crate::harness::free_port();
    let app = App::start({
        let mut c = test_config(None, "down");
        hooks(&mut c, &[0, 1, 2, 30]);
        c
    })
    .await;
    let api = app.api(ACME_KEY);
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "webhookUrl": format!("http://127.0.0.1:{port}/hook")}),
        )
        .await;
    let decided = Instant::now();
    api.decide(&c.token, json!({"decision": "declined"})).await;
    // Two attempts fail (t≈0 s and ≈1 s); the receiver is up before the third (≈3 s).
    api.deliveries_until(&c.id, Duration::from_secs(5), |d| {
        d.first()
            .is_some_and(|x| x["attempts"].as_array().unwrap().len() == 2)
    })
    .await;
    let receiver = Receiver::start_on(port, vec![]).await;
    let got = receiver.wait_for(1, Duration::from_secs(10)).await;
    let waited = got[0].at - decided;
    assert!(
        waited >= Duration::from_millis(2900) && waited < Duration::from_secs(6),
        "third attempt after {waited:?}"
    );
    let d = api
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            d[0]["state"] == "delivered"
        })
        .await;
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert!(attempts[0]["error"].as_str().unwrap().contains("connect"));
    assert_eq!(attempts[2]["status"], 200);
    receiver_verifies(&got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_stops_retry_after_is_honoured_and_failed_deliveries_replay() {
    let receiver = Receiver::start(vec![Reply::RetryAfter(503, 2), Reply::Status(410)]).await;
    let app = App::start({
        let mut c = test_config(None, "gone");
        hooks(&mut c, &[0, 0, 0, 0, 0]);
        c
    })
    .await;
    let api = app.api(ACME_KEY);
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "webhookUrl": receiver.url()}),
        )
        .await;
    api.cancel(&c.id).await;
    // 503 + Retry-After: 2 → the next attempt waits 2 s (the schedule says 0); then 410 stops.
    let got = receiver.wait_for(2, Duration::from_secs(10)).await;
    let gap = got[1].at - got[0].at;
    assert!(gap >= Duration::from_millis(1900), "retried after {gap:?}");
    let d = api
        .deliveries_until(&c.id, Duration::from_secs(5), |d| d[0]["state"] == "failed")
        .await;
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 2);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.got().len(), 2, "410 stops the retries");
    let audit = api.audit(&c.id).await;
    assert!(audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "webhook_failed"));
    // Only a failed delivery can be replayed; replaying it delivers it (the receiver says 200
    // now) under the same webhook-id.
    let did = d[0]["id"].as_str().unwrap().to_string();
    let r = api
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{did}/replay",
            c.id
        ))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    let got = receiver.wait_for(3, Duration::from_secs(5)).await;
    assert_eq!(got[2].id(), did);
    api.deliveries_until(&c.id, Duration::from_secs(5), |d| {
        d[0]["state"] == "delivered"
    })
    .await;
    let again = api
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{did}/replay",
            c.id
        ))
        .await;
    assert_eq!((again.status, again.code()), (409, "not_decided"));
    // Another tenant sees nothing.
    let beta = app.api(BETA_KEY);
    assert_eq!(
        beta.get(&format!("/v1/elicitations/{}/deliveries", c.id))
            .await
            .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_is_announced_once_by_racing_replicas() {
    let receiver = Receiver::start(vec![]).await;
    let f = Fixture::own(StoreKind::Redis, 2, |c| hooks(c, &[0, 1])).await;
    let (a, b) = (f.acme(), f.other());
    let mut ids = Vec::new();
    for i in 0..6 {
        let api = if i % 2 == 0 { &a } else { &b };
        let c = api
            .create(
                "approval",
                json!({"message": "m", "context": i, "expiresInSeconds": 1, "webhookUrl": receiver.url()}),
            )
            .await;
        ids.push((
            c.id.clone(),
            c.body["expiresAt"].as_str().unwrap().to_string(),
        ));
    }
    let got = receiver.wait_for(6, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got_all = receiver.got();
    assert_eq!(
        got_all.len(),
        6,
        "one expired event each, whichever replica sent it"
    );
    for (id, expires_at) in &ids {
        let m = got
            .iter()
            .find(|m| m.json()["data"]["elicitationId"] == *id)
            .unwrap_or_else(|| panic!("no event for {id}"));
        assert_eq!(m.json()["type"], "elicitation.expired");
        // At most 2 s after the deadline (both clocks here are this machine's).
        let deadline = chrono::DateTime::parse_from_rfc3339(expires_at).unwrap();
        let sent =
            chrono::DateTime::parse_from_rfc3339(m.json()["timestamp"].as_str().unwrap()).unwrap();
        let late = (sent - deadline).num_milliseconds();
        assert!(
            (0..=2000).contains(&late),
            "{id}: emitted {late} ms after its deadline"
        );
    }
    receiver_verifies(&got_all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_public_targets_and_tenants_without_a_secret_are_refused() {
    let receiver = Receiver::start(vec![]).await;
    let app = App::start({
        let mut c = test_config(None, "ssrf");
        hooks(&mut c, &[0, 1, 1]);
        c.webhooks.allow_private = false;
        c
    })
    .await;
    let api = app.api(ACME_KEY);
    // An address literal is refused at create.
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "http://10.0.0.7/x",
    ] {
        let r = api
            .post(
                "/v1/approvals",
                &json!({"message": "m", "context": 1, "webhookUrl": url}),
            )
            .await;
        assert_eq!(r.status, 422, "{url}: {}", r.body);
        assert_eq!(r.body["error"]["details"][0]["field"], "webhookUrl");
    }
    // A name that resolves to loopback is refused when connecting: the receiver never hears.
    let sneaky = receiver.url().replace("127.0.0.1", "localhost");
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "webhookUrl": sneaky}),
        )
        .await;
    api.cancel(&c.id).await;
    let d = api
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            d.first()
                .is_some_and(|x| !x["attempts"].as_array().unwrap().is_empty())
        })
        .await;
    let error = d[0]["attempts"][0]["error"].as_str().unwrap();
    assert!(error.contains("non-public"), "{error}");
    assert!(receiver.got().is_empty());
    // A tenant without a signing secret cannot ask for webhooks.
    let beta = app.api(BETA_KEY);
    let r = beta
        .post(
            "/v1/approvals",
            &json!({"message": "m", "context": 1, "webhookUrl": "https://hooks.example.com/x"}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("signing secret"));
}

crate::on_stores!(
    on_memory_replay,
    Memory,
    a_replay_gets_the_whole_schedule_again
);
crate::on_stores!(
    on_redis_replay,
    Redis,
    a_replay_gets_the_whole_schedule_again
);

/// A replayed delivery is attempted on the whole retry schedule again, not once; its earlier
/// attempts stay in its history. Also: the lag histogram reaches days.
async fn a_replay_gets_the_whole_schedule_again(kind: StoreKind) {
    let receiver = Receiver::start(vec![
        Reply::Status(500),
        Reply::Status(500),
        Reply::Status(500),
    ])
    .await;
    let f = Fixture::own(kind, 1, |c| hooks(c, &[0, 0])).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "webhookUrl": receiver.url()}),
        )
        .await;
    api.cancel(&c.id).await;
    let d = api
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            d[0]["state"] == "failed"
        })
        .await;
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 2);
    let did = d[0]["id"].as_str().unwrap().to_string();
    let r = api
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{did}/replay",
            c.id
        ))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    // 500 once more, then 200 on the schedule's second attempt.
    let d = api
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            d[0]["state"] == "delivered"
        })
        .await;
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 4, "{d:?}");
    assert_eq!(receiver.got().len(), 4);
    assert!(receiver.got().iter().all(|m| m.id() == did));
    let m = reqwest::get(format!("{}/metrics", f.apps[0].base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("elicitd_webhook_delivery_lag_seconds_bucket{le=\"86400\"}"),
        "{m}"
    );
}

/// The idempotency fingerprint covers the webhook target: the same key with another target is
/// another request (400), the same key and target is the first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_covers_the_webhook_target() {
    let f = Fixture::own(StoreKind::Memory, 1, |c| hooks(c, &[0])).await;
    let api = f.acme();
    let body = |url: &str, include: bool| {
        json!({"message": "m", "context": 1, "idempotencyKey": "k-1",
            "webhookUrl": url, "webhookIncludeResult": include})
    };
    let first = api
        .post("/v1/approvals", &body("https://hooks.example.com/a", false))
        .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let same = api
        .post("/v1/approvals", &body("https://hooks.example.com/a", false))
        .await;
    assert_eq!(same.str("elicitationId"), first.str("elicitationId"));
    for other in [
        body("https://hooks.example.com/b", false),
        body("https://hooks.example.com/a", true),
    ] {
        let r = api.post("/v1/approvals", &other).await;
        assert_eq!(r.status, 400, "{other}: {}", r.body);
    }
}

/// A tenant's default endpoint on a non-public address is a startup error (unless allowed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_default_endpoint_is_refused_at_startup() {
    let mut c = test_config(None, "startup");
    hooks(&mut c, &[0]);
    c.webhooks.allow_private = false;
    c.webhooks.endpoints.insert(
        elicitd::model::Tenant::new("acme").unwrap(),
        "http://10.1.2.3/hook".into(),
    );
    let e = elicitd::server::build(c.clone())
        .await
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("non-public address (10.1.2.3)"),
        "{e}"
    );
    c.webhooks.allow_private = true;
    let s = elicitd::server::build(c).await.expect("allowed");
    s.shutdown();
}
