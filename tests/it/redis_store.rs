//! Redis-specific guarantees: script cache loss, one round trip per status read, key layout and
//! TTLs, and prompt `unavailable` answers while Redis is down.

use std::time::{Duration, Instant};

use serde_json::json;

use elicitd::model::{Status, Tenant};

use crate::harness::{Fixture, RedisServer, StoreKind};

fn commandstats(info: &str) -> Vec<(String, u64)> {
    info.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_fails_no_request() {
    let f = Fixture::new(StoreKind::Redis, 2).await;
    let redis = f.redis.as_ref().unwrap();
    for round in 0..30 {
        if round % 3 == 0 {
            assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]).as_deref(), Some("OK"));
        }
        let api = if round % 2 == 0 { f.acme() } else { f.other() };
        let c = api.approval().await;
        if round % 3 == 1 {
            redis.cli(&["SCRIPT", "FLUSH"]);
        }
        let d = api.decide(&c.token, json!({"decision": "submitted"})).await;
        assert_eq!(d.status, 200, "round {round}: {}", d.body);
        redis.cli(&["SCRIPT", "FLUSH"]);
        assert_eq!(api.result(&c.id).await.status, 200, "round {round}");
        let c2 = api.approval().await;
        redis.cli(&["SCRIPT", "FLUSH"]);
        assert_eq!(api.cancel(&c2.id).await.status, 200, "round {round}");
    }
    redis.cli(&["SCRIPT", "FLUSH"]);
    let r = reqwest::get(format!("{}/readyz", f.apps[0].base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "readyz reloads its script");
}

fn calls(stats: &[(String, u64)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| *c)
        .unwrap_or(0)
}

/// Commands other than the read script and what it runs (and the test's own INFO/CONFIG).
fn other_commands(stats: &[(String, u64)]) -> Vec<&(String, u64)> {
    stats
        .iter()
        .filter(|(name, _)| {
            ![
                "evalsha",
                "time",
                "hmget",
                "info",
                "config|resetstat",
                "ping",
            ]
            .contains(&name.as_str())
        })
        .collect()
}

/// Script calls, and that each ran one `TIME` and `reads` `HMGET`s in all.
fn read_calls(stats: &[(String, u64)], reads: u64) -> u64 {
    assert!(other_commands(stats).is_empty(), "{stats:?}");
    assert_eq!(calls(stats, "time"), calls(stats, "evalsha"), "{stats:?}");
    assert_eq!(calls(stats, "hmget"), reads, "{stats:?}");
    calls(stats, "evalsha")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reads_are_one_batched_script_call() {
    // No delivery worker: its queue polls would be counted too.
    let f = Fixture::own(StoreKind::Redis, 1, |c| c.delivery_worker = false).await;
    let redis = f.redis.as_ref().unwrap();
    let (api, beta) = (f.acme(), f.beta());
    let pending = api.approval().await;
    let decided = api.approval().await;
    let d = api
        .decide(&decided.token, json!({"decision": "submitted"}))
        .await;
    assert_eq!(d.status, 200, "{}", d.body);
    let canceled = api.approval().await;
    assert_eq!(api.cancel(&canceled.id).await.status, 200);
    let foreign = beta.approval().await;
    let expiring = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    let unknown = "0b7e6a3c-58a4-4b7e-9d7e-3f1c2a9b8d10".to_string();
    tokio::time::sleep(Duration::from_millis(1300)).await;
    api.status(&pending.id).await; // warm any lazy connection set-up
    let stats = || commandstats(&redis.cli(&["INFO", "commandstats"]).unwrap());

    // One at a time: one script call per read, and nothing else.
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let n = 20;
    for _ in 0..n {
        assert_eq!(api.status_of(&pending.id).await, "pending");
    }
    assert_eq!(read_calls(&stats(), n), n);

    // 200 at once over HTTP, mixing states, tenants and unknown ids: every answer is its own.
    let cases: Vec<(String, Option<&str>)> = vec![
        (pending.id.clone(), Some("pending")),
        (decided.id.clone(), Some("submitted")),
        (canceled.id.clone(), Some("canceled")),
        (expiring.id.clone(), Some("expired")),
        (foreign.id.clone(), None), // beta's: not found for acme
        (unknown.clone(), None),
    ];
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let answers = futures::future::join_all((0..200).map(|i| {
        let (id, want) = cases[i % cases.len()].clone();
        let api = api.clone();
        async move { (api.status(&id).await, id, want) }
    }))
    .await;
    for (r, id, want) in answers {
        match want {
            Some(s) => {
                assert_eq!(r.status, 200, "{id}: {}", r.body);
                assert_eq!(r.str("status"), s, "{id}");
                assert_eq!(r.str("elicitationId"), id);
            }
            None => {
                assert_eq!(r.status, 404, "{id}: {}", r.body);
                assert_eq!(r.code(), "not_found");
            }
        }
    }
    assert!(read_calls(&stats(), 200) <= 200);

    // Reads asked for together share calls: 300 reads queued at once take a handful.
    let service = &f.apps[0].service;
    let acme = &Tenant::new("acme").unwrap();
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let read_all = |n: usize, id: String, want: Status| async move {
        let views = futures::future::join_all((0..n).map(|_| service.status(acme, &id))).await;
        for v in views {
            assert_eq!(v.map(|v| v.status).ok(), Some(want), "{id}");
        }
    };
    read_all(300, pending.id.clone(), Status::Pending).await;
    let batched = read_calls(&stats(), 300);
    assert!(
        (1..=30).contains(&batched),
        "300 reads took {batched} calls"
    );

    // The script cache can vanish (restart, failover, flush): the next batch reloads it.
    redis.cli(&["SCRIPT", "FLUSH"]);
    read_all(50, decided.id.clone(), Status::Submitted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_share_a_hash_tag_and_expire_after_retention() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let redis = f.redis.as_ref().unwrap();
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "expiresInSeconds": 100, "idempotencyKey": "k"}),
        )
        .await;
    let keys = redis
        .cli(&["--raw", "KEYS", &format!("{}:*", f.prefix)])
        .unwrap();
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    let k = elicitd::store::redis::keys::Keys::new(&f.prefix);
    let record = k.record(elicitd::model::ElicitationId::parse(&c.id).unwrap());
    assert!(keys.contains(&record.as_str()));
    assert!(keys.contains(&format!("{record}:audit").as_str()));
    let retention_ms = f.apps[0].service.config().retention.as_millis() as i64;
    for key in &keys {
        let pttl: i64 = redis.cli(&["PTTL", key]).unwrap().parse().unwrap();
        let expected = 100_000 + retention_ms;
        assert!(
            (pttl - expected).abs() < 70_000,
            "{key}: pttl {pttl} vs {expected}"
        );
    }
    // The token is stored only as a hash.
    let all = redis.cli(&["--raw", "HGETALL", &record]).unwrap();
    assert!(!all.contains(&c.token), "raw review token stored");
    assert_eq!(
        redis.cli(&["HGET", &record, "status"]).as_deref(),
        Some("pending")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_503_promptly_and_recovers() {
    let mut f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    f.redis.as_mut().unwrap().kill();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..3 {
        let t = Instant::now();
        let r = api.status(&c.id).await;
        assert_eq!((r.status, r.code()), (503, "unavailable"), "{}", r.body);
        assert_eq!(r.headers.get("retry-after").unwrap(), "1");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "took {:?}",
            t.elapsed()
        );
        let r = api
            .post("/v1/approvals", &json!({"message": "m", "context": 1}))
            .await;
        assert_eq!(r.status, 503);
    }
    let ready = reqwest::get(format!("{}/readyz", f.apps[0].base))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let health = reqwest::get(format!("{}/healthz", f.apps[0].base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "liveness does not depend on Redis");
    f.redis.as_mut().unwrap().restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = api
            .post("/v1/approvals", &json!({"message": "m", "context": 1}))
            .await;
        if r.status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "did not recover: {}", r.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Ready again once the subscriber is back too.
    while reqwest::get(format!("{}/readyz", f.apps[0].base))
        .await
        .unwrap()
        .status()
        != 200
    {
        assert!(Instant::now() < deadline, "readyz did not recover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A review page post reads the request once: the token index `GET` and one read script,
/// then the decide script. When the request was decided meanwhile, the page shows that
/// state without reading again — whether the read already saw it, or the decide script lost the
/// race and answered with the state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_post_reads_the_request_once() {
    use crate::review_page::{get_page, post_form};
    use elicitd::{kinds::DecisionInput, model::Decision, service::out::Decided};
    // No delivery worker: its queue polls would be counted too.
    let f = Fixture::own(StoreKind::Redis, 1, |c| c.delivery_worker = false).await;
    let redis = f.redis.as_ref().unwrap();
    let api = f.acme();
    let stats = || commandstats(&redis.cli(&["INFO", "commandstats"]).unwrap());
    let headers = [("sec-fetch-site", "same-origin"), ("origin", "null")];
    // Load the scripts once, so the counts below show no NOSCRIPT reload.
    let warm = api.approval().await;
    api.decide(&warm.token, json!({"decision": "submitted"}))
        .await;

    // The normal post: one lookup, one decide.
    let c = api.approval().await;
    let csrf = get_page(&api, &c.token).await.csrf();
    let pairs = [("csrf", csrf.as_str()), ("decision", "submitted")];
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let page = post_form(&api, &c.token, &pairs, &headers).await;
    assert_eq!(page.status, 303, "{}", page.html);
    let s = stats();
    // Commands run inside scripts count too: read.lua runs one HMGET, decide.lua two (the
    // record, then its webhook target in the outbox step).
    assert_eq!(calls(&s, "get"), 1, "one token lookup: {s:?}");
    assert_eq!(calls(&s, "evalsha"), 2, "read.lua + decide.lua: {s:?}");
    assert_eq!(calls(&s, "hmget"), 3, "{s:?}");

    // Decided before the post was read: the state page, from that one read.
    let c = api.approval().await;
    let csrf = get_page(&api, &c.token).await.csrf();
    let pairs = [("csrf", csrf.as_str()), ("decision", "submitted")];
    api.decide(&c.token, json!({"decision": "declined"})).await;
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let page = post_form(&api, &c.token, &pairs, &headers).await;
    assert_eq!(page.status, 409, "{}", page.html);
    assert!(
        page.html.contains("Your answer: “Decline”"),
        "{}",
        page.html
    );
    let s = stats();
    assert_eq!((calls(&s, "get"), calls(&s, "evalsha")), (1, 1), "{s:?}");

    // Decided between the read and the decide: the refusal carries the state.
    let service = &f.apps[0].service;
    let c = api.approval().await;
    let review = service.review(&c.token, None).await.unwrap();
    api.decide(
        &c.token,
        json!({"decision": "declined", "comment": "first"}),
    )
    .await;
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let input = DecisionInput::new(Decision::Submitted, None);
    match service.decide_review(&review, input).await.unwrap() {
        Decided::Refused(now) => {
            assert_eq!(now.status, Status::Declined);
            let outcome = now.outcome.expect("the winner's outcome");
            assert_eq!(outcome.comment.as_deref(), Some("first"));
            assert!(now.decided_ms.is_some());
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let s = stats();
    assert_eq!(
        (calls(&s, "get"), calls(&s, "evalsha")),
        (0, 1),
        "only decide.lua ran: {s:?}"
    );
}

/// fred re-sends a command whose reply was lost (reconnect, failover). A decide that already
/// ran must then answer as recorded — not tell the reviewer someone else decided. decide.lua
/// keeps the attempt's nonce for that; another attempt is refused as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_sent_decide_answers_recorded_not_already_decided() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let redis = f.redis.as_ref().unwrap();
    let api = f.acme();
    let c = api.approval().await;
    let id = elicitd::model::ElicitationId::parse(&c.id).unwrap();
    let k = elicitd::store::redis::keys::Keys::new(&f.prefix);
    let shard = elicitd::store::redis::keys::shard_of(id);
    let did = elicitd::store::event_id(id, "submitted");
    let record = k.record(id);
    let hash = redis
        .cli(&["--raw", "HGET", &record, "token_hash"])
        .expect("token hash");
    let script = concat!(
        include_str!("../../lua/outbox.lua"),
        include_str!("../../lua/decide.lua")
    );
    let run = |nonce: &str| {
        redis
            .cli(&[
                "--raw",
                "EVAL",
                script,
                "6",
                &record,
                &k.audit(id),
                &k.due(shard),
                &k.deadlines(shard),
                &k.deliveries(id),
                &k.delivery(shard, &did),
                &hash,
                "submitted",
                r#"{"decision":"submitted"}"#,
                "reviewer",
                nonce,
                &c.id,
                &did,
            ])
            .expect("eval")
    };
    let first = run("attempt-1");
    assert!(first.starts_with("ok\nsubmitted\n"), "{first}");
    // The same attempt again (a re-send): recorded, with the same time; nothing written twice.
    let again = run("attempt-1");
    assert_eq!(again, first, "a re-send is answered as recorded");
    // Another attempt: refused with the state.
    let other = run("attempt-2");
    assert!(other.starts_with("no\nsubmitted\n"), "{other}");
    let audit = api.audit(&c.id).await;
    let decided = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "decided")
        .count();
    assert_eq!(decided, 1);
}

/// A Redis that may evict keys or keeps nothing on disk loses decisions: the replica says so
/// at start, in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_warns_about_eviction_and_missing_persistence() {
    use std::io::Read;
    let redis = RedisServer::start();
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let (mut child, _api) = crate::harness::spawn_binary(&redis, &[], true).await;
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
    assert!(log.contains("maxmemory-policy is not noeviction"), "{log}");
    assert!(log.contains("\"policy\":\"allkeys-lru\""), "{log}");
    assert!(log.contains("persistence is off"), "{log}");
    // A server configured for durability gets no warning.
    let durable = RedisServer::start_with(true);
    let (mut child, _api) = crate::harness::spawn_binary(&durable, &[], true).await;
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
        !log.contains("maxmemory-policy") && !log.contains("persistence is off"),
        "{log}"
    );
}
