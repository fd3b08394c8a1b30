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
    // No delivery worker: its queue polls would be counted too. No status cache: this test
    // counts the record reads themselves (the cache has its own tests below).
    let f = Fixture::own(StoreKind::Redis, 1, |c| {
        c.delivery_worker = false;
        c.status_cache_entries = 0;
    })
    .await;
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

/// The status cache (`CLIENT TRACKING`): repeat polls of a pending request still take their
/// round trip (the clock, and the barrier that brings the invalidations) but do not read the
/// record again; whatever changes it — a decision or a cancel through another replica, a vote,
/// the deadline — is seen by the very next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cache_serves_repeat_polls_and_never_a_stale_answer() {
    status_cache_repeat_polls(StoreKind::Redis).await;
}

/// The same through Sentinel (the cache's other topology): the primary it found carries the
/// tracked connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cache_serves_repeat_polls_and_never_a_stale_answer_on_sentinel() {
    status_cache_repeat_polls(StoreKind::Sentinel).await;
}

/// The primary among a fixture's data nodes.
fn primary(f: &Fixture) -> &RedisServer {
    f.data_nodes()
        .into_iter()
        .find(|n| n.info("role").as_deref() == Some("master"))
        .expect("a primary")
}

async fn status_cache_repeat_polls(kind: StoreKind) {
    let f = Fixture::own(kind, 2, |c| c.delivery_worker = false).await;
    let redis = primary(&f);
    let (a, b) = (f.acme(), f.other());
    let stats = || commandstats(&redis.cli(&["INFO", "commandstats"]).unwrap());

    // Repeat polls: one round trip each — a bare `TIME`, the barrier that brings the
    // invalidations — and (within the cache's age limit) no script call and no record read.
    let c = b.approval().await;
    assert_eq!(a.status_of(&c.id).await, "pending");
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(a.status_of(&c.id).await, "pending");
    }
    let st = stats();
    assert_eq!(calls(&st, "time"), 20, "one clock read per poll: {st:?}");
    // One refill per second of age at most, each a `read.lua` call reading the record (whose
    // `TIME` is one of the 20).
    let refills = started.elapsed().as_secs() + 1;
    assert!(calls(&st, "evalsha") <= refills, "{st:?}");
    assert_eq!(calls(&st, "hmget"), calls(&st, "evalsha"), "{st:?}");

    // Read your writes across replicas: every change made through B (or A) is in every poll of
    // A sent after the change was answered, although A had the request cached as pending and
    // eight pollers keep A's batches busy meanwhile.
    for round in 0..40 {
        let c = b.approval().await;
        assert_eq!(a.status_of(&c.id).await, "pending", "round {round}");
        // Each poller polls until it has a poll sent after the change answered (the change's
        // instant is published once its answer is in), so no round depends on timing.
        let changed_at = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
        let pollers: Vec<_> = (0..8)
            .map(|_| {
                let (a, id, changed_at) = (a.clone(), c.id.clone(), changed_at.clone());
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    loop {
                        let sent = Instant::now();
                        let s = a.status_of(&id).await;
                        seen.push((sent, s));
                        if changed_at.lock().unwrap().is_some_and(|c| sent > c) {
                            return seen;
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let want = match round % 3 {
            0 => {
                let r = b.decide(&c.token, json!({"decision": "submitted"})).await;
                assert_eq!(r.status, 200, "{}", r.body);
                "submitted"
            }
            1 => {
                assert_eq!(b.cancel(&c.id).await.status, 200);
                "canceled"
            }
            _ => {
                assert_eq!(a.cancel(&c.id).await.status, 200);
                "canceled"
            }
        };
        let changed = Instant::now();
        *changed_at.lock().unwrap() = Some(changed);
        let mut after = 0;
        for p in pollers {
            let seen = tokio::time::timeout(Duration::from_secs(20), p)
                .await
                .unwrap_or_else(|_| panic!("round {round}: a poller never got an answer"))
                .unwrap();
            for (sent, s) in seen {
                if sent > changed {
                    after += 1;
                    assert_eq!(s, want, "round {round}: a poll sent after the change");
                } else {
                    assert!(s == "pending" || s == want, "round {round}: {s}");
                }
            }
        }
        assert_eq!(
            after, 8,
            "round {round}: one poll after the change per poller"
        );
        assert_eq!(a.status_of(&c.id).await, want, "round {round}");
        if want == "submitted" {
            assert_eq!(a.result(&c.id).await.status, 200);
            assert_eq!(a.status_of(&c.id).await, "consumed", "round {round}");
        }
    }

    // The deadline: a cached pending request turns expired on the store clock, and stays so.
    let short = a
        .create(
            "approval",
            json!({"message": "m", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    let mut seen_expired = false;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let s = a.status_of(&short.id).await;
        match s.as_str() {
            "pending" => assert!(!seen_expired, "pending after expired"),
            "expired" => seen_expired = true,
            other => panic!("{other}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen_expired);
    let late = b
        .decide(&short.token, json!({"decision": "submitted"}))
        .await;
    assert_eq!(late.status, 410, "{}", late.body);

    // A record changed behind our back (a write by another client) is not served from the cache.
    let c = b.approval().await;
    assert_eq!(a.status_of(&c.id).await, "pending");
    assert_eq!(a.status_of(&c.id).await, "pending");
    let key = record_key(redis, &c.id);
    assert_eq!(
        redis.cli(&["HSET", &key, "status", "canceled"]).as_deref(),
        Some("0")
    );
    assert_eq!(a.status_of(&c.id).await, "canceled");
    // Deleted: not found at once.
    redis.cli(&["DEL", &key]);
    assert_eq!(a.status(&c.id).await.status, 404);
}

/// The invalidation that matters most arrives *with* the poll's reply: a write that ran after
/// the poll found the record in the cache but before the poll's call ran. Redis is held busy by
/// a script while a write and then the poll queue up behind it, in that order; when it wakes,
/// the write's invalidation reaches the replica just ahead of the poll's reply, and the answer
/// must include the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cache_applies_an_invalidation_that_arrives_with_the_reply() {
    status_cache_invalidation_with_the_reply(StoreKind::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cache_applies_an_invalidation_that_arrives_with_the_reply_on_sentinel() {
    status_cache_invalidation_with_the_reply(StoreKind::Sentinel).await;
}

async fn status_cache_invalidation_with_the_reply(kind: StoreKind) {
    use std::io::Write;
    let f = Fixture::own(kind, 1, |c| c.delivery_worker = false).await;
    let redis = primary(&f);
    let a = f.acme();
    let resp = |args: &[&str]| {
        let mut out = format!("*{}\r\n", args.len());
        for x in args {
            out += &format!("${}\r\n{x}\r\n", x.len());
        }
        out
    };
    for round in 0..5 {
        let c = a.approval().await;
        assert_eq!(a.status_of(&c.id).await, "pending");
        assert_eq!(a.status_of(&c.id).await, "pending");
        let key = record_key(redis, &c.id);
        let mut busy = std::net::TcpStream::connect(redis.addr()).unwrap();
        let mut writer = std::net::TcpStream::connect(redis.addr()).unwrap();
        // 400 ms of a script that only reads the clock.
        let spin = "local s = redis.call('TIME') repeat local n = redis.call('TIME') \
                    until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 400000 return 1";
        busy.write_all(resp(&["EVAL", spin, "0"]).as_bytes())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        writer
            .write_all(resp(&["HSET", &key, "status", "canceled"]).as_bytes())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(a.status_of(&c.id).await, "canceled", "round {round}");
    }
}

/// The key of a record, found by its id (the prefix and shard are the store's business).
fn record_key(redis: &RedisServer, id: &str) -> String {
    let keys = redis.cli(&["KEYS", &format!("*:e:*:{id}")]).unwrap();
    // redis-cli's listing: `1) "key"`.
    let line = keys.lines().next().expect("the record's key");
    let key = line
        .split_once(") ")
        .map_or(line, |(_, k)| k)
        .trim()
        .trim_matches('"');
    assert!(key.ends_with(id), "no key for {id}: {keys}");
    key.to_string()
}

/// Invalidations sent while the cache's connection was down are lost with it: after a
/// reconnect the cache starts empty, so a decision made in the meantime is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cache_is_emptied_by_a_reconnect() {
    let f = Fixture::own(StoreKind::Redis, 2, |c| c.delivery_worker = false).await;
    let redis = f.redis.as_ref().unwrap();
    let (a, b) = (f.acme(), f.other());
    for round in 0..8 {
        let c = b.approval().await;
        assert_eq!(a.status_of(&c.id).await, "pending");
        assert_eq!(a.status_of(&c.id).await, "pending");
        // Every command connection goes (both replicas'); B reconnects to decide.
        redis.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = b.decide(&c.token, json!({"decision": "declined"})).await;
            if r.status == 200 {
                break;
            }
            assert_eq!(r.status, 503, "round {round}: {}", r.body);
            assert!(Instant::now() < deadline, "round {round}: never decided");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = a.status(&c.id).await;
            if r.status == 200 {
                assert_eq!(r.str("status"), "declined", "round {round}");
                break;
            }
            assert_eq!(r.status, 503, "round {round}: {}", r.body);
            assert!(Instant::now() < deadline, "round {round}: A never answered");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A create writes its record (and, with an idempotency key, the claim): no review index and no
/// audit list, whose `created` entry is the record itself. The list is made by the trail's next
/// entry (a page view here), with the record's expiry. Legacy records (0.1's layout) also get
/// the index and the list at once. Every key expires after the deadline plus the retention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_share_a_hash_tag_and_expire_after_retention() {
    for legacy in [false, true] {
        let f = Fixture::own(StoreKind::Redis, 1, |c| c.legacy_records = legacy).await;
        let redis = f.redis.as_ref().unwrap();
        let api = f.acme();
        let c = api
            .create(
                "approval",
                json!({"message": "m", "context": 1, "expiresInSeconds": 100, "idempotencyKey": "k"}),
            )
            .await;
        let all_keys = || {
            let keys = redis
                .cli(&["--raw", "KEYS", &format!("{}:*", f.prefix)])
                .unwrap();
            let mut keys: Vec<String> = keys.lines().map(str::to_string).collect();
            keys.sort();
            keys
        };
        let k = elicitd::store::redis::keys::Keys::new(&f.prefix);
        let id = elicitd::model::ElicitationId::parse(&c.id).unwrap();
        let (record, audit) = (k.record(id), k.audit(id));
        let keys = all_keys();
        assert!(keys.contains(&record), "{keys:?}");
        if legacy {
            assert_eq!(
                keys.len(),
                4,
                "record, audit, review index, claim: {keys:?}"
            );
            assert!(keys.contains(&audit));
            assert_eq!(c.token.len(), 43, "legacy links: the MAC alone");
            assert!(keys.contains(&k.review_index(&elicitd::token::token_hash(&c.token))));
        } else {
            assert_eq!(keys.len(), 2, "record and claim: {keys:?}");
            assert_eq!(c.token.len(), 65, "links start with the id");
        }
        // A page view extends the trail: now there is a list, with the record's expiry.
        assert_eq!(
            crate::review_page::get_page(&api, &c.token).await.status,
            200
        );
        let keys = all_keys();
        assert!(keys.contains(&audit), "legacy {legacy}: {keys:?}");
        let retention_ms = f.apps[0].service.config().retention.as_millis() as i64;
        for key in &keys {
            let pttl: i64 = redis.cli(&["PTTL", key]).unwrap().parse().unwrap();
            let expected = 100_000 + retention_ms;
            assert!(
                (pttl - expected).abs() < 70_000,
                "{key}: pttl {pttl} vs {expected}"
            );
        }
        let trail = api.get(&format!("/v1/elicitations/{}/audit", c.id)).await;
        assert_eq!(trail.status, 200, "{}", trail.body);
        let types: Vec<&str> = trail.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["created", "viewed"], "legacy {legacy}");
        // The token is stored only as a hash.
        let fields = redis.cli(&["--raw", "HGETALL", &record]).unwrap();
        assert!(!fields.contains(&c.token), "raw review token stored");
        assert_eq!(
            redis.cli(&["HGET", &record, "status"]).as_deref(),
            Some("pending")
        );
    }
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

/// A review page post reads the request once: one read script (the token names its record: no
/// index lookup), then the decide script. When the request was decided meanwhile, the page shows that
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
    assert_eq!(calls(&s, "get"), 0, "no token index: {s:?}");
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
    assert_eq!((calls(&s, "get"), calls(&s, "evalsha")), (0, 1), "{s:?}");

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
        include_str!("../../lua/audit.lua"),
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

/// Creates that arrive together share `create.lua` calls, and each is answered on its own: a
/// create whose command fails (its record key already holds a value of another type) fails
/// alone while the others of its call are written; a create sent again (fred's re-send after
/// a lost reply) answers as recorded; another record under the same id is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_share_calls_and_fail_alone() {
    use elicitd::{
        kinds::Kind,
        model::ElicitationId,
        store::{
            redis::{keys::Keys, RedisSettings, RedisStore},
            NewRecord, NotifyTarget, Store,
        },
        wake::Hub,
    };
    let redis = RedisServer::start();
    let store = RedisStore::connect(
        RedisSettings {
            url: redis.url(),
            prefix: "batch".into(),
            pool_size: 2,
            retention: Duration::from_secs(60),
            command_timeout: Duration::from_millis(1500),
            replica_acks: 0,
            replica_timeout: Duration::from_secs(1),
            status_cache: 0,
            legacy_records: false,
        },
        Hub::new(100),
    )
    .await
    .expect("connect");
    let keys = Keys::new("batch");
    let tenant = Tenant::new("acme").unwrap();
    let rec = |id: ElicitationId, token_hash: &str| NewRecord {
        id,
        tenant: tenant.clone(),
        kind: Kind::Approval,
        spec_json: r#"{"message":"m"}"#.into(),
        expires_in_ms: 60_000,
        token_hash: token_hash.into(),
        token_salt: "salt".into(),
        idempotency: None,
        webhook: None,
        notify: NotifyTarget::default(),
        panel: None,
    };
    // Load the script first, so the counts below show no NOSCRIPT reload.
    store
        .create(rec(ElicitationId::random(), "warm"))
        .await
        .expect("warm-up create");

    let bad = ElicitationId::random();
    redis.cli(&["SET", &keys.record(bad), "not a hash"]);
    let ids: Vec<ElicitationId> = (0..200)
        .map(|i| {
            if i == 100 {
                bad
            } else {
                ElicitationId::random()
            }
        })
        .collect();
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let answers = futures::future::join_all(
        ids.iter()
            .map(|id| store.create(rec(*id, &format!("hash-{id}")))),
    )
    .await;
    let st = commandstats(&redis.cli(&["INFO", "commandstats"]).unwrap());
    let scripts = calls(&st, "evalsha");
    assert!(
        (1..=40).contains(&scripts),
        "200 creates took {scripts} calls: {st:?}"
    );
    assert_eq!(
        calls(&st, "time"),
        scripts,
        "one clock read per call: {st:?}"
    );
    for (id, answer) in ids.iter().zip(&answers) {
        if *id == bad {
            match answer {
                Err(elicitd::error::Error::Internal(e)) => {
                    assert!(e.to_string().contains("WRONGTYPE"), "{e}")
                }
                other => panic!("the poisoned create must fail alone: {other:?}"),
            }
            continue;
        }
        let created = answer.as_ref().unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(created.id, *id);
        assert_eq!(created.expires_ms - created.created_ms, 60_000);
        let view = store.status(&tenant, *id).await.expect("readable");
        assert_eq!(view.status, Status::Pending);
        assert_eq!(view.created_ms, created.created_ms);
        // One key: the record, with its expiry (no audit list, no review index).
        let ttl: i64 = redis
            .cli(&["PTTL", &keys.record(*id)])
            .unwrap()
            .parse()
            .unwrap();
        assert!(ttl > 60_000, "{id}: {ttl}");
        for absent in [keys.audit(*id), keys.review_index(&format!("hash-{id}"))] {
            assert_eq!(
                redis.cli(&["EXISTS", &absent]).as_deref(),
                Some("0"),
                "{absent}"
            );
        }
    }
    assert_eq!(
        redis.cli(&["TYPE", &keys.record(bad)]).as_deref(),
        Some("string"),
        "the poisoned key is left alone"
    );

    // Sent again with the same token hash: the first answer, nothing rewritten.
    let id = ids[0];
    let first = answers[0].as_ref().unwrap();
    redis.cli(&["HSET", &keys.record(id), "status", "submitted"]);
    let again = store
        .create(rec(id, &format!("hash-{id}")))
        .await
        .expect("a re-sent create answers as recorded");
    assert_eq!(
        (again.created_ms, again.expires_ms),
        (first.created_ms, first.expires_ms)
    );
    assert_eq!(
        store.status(&tenant, id).await.unwrap().status,
        Status::Submitted,
        "nothing was rewritten"
    );
    // Another record under the id: refused, nothing written.
    match store.create(rec(id, "another token")).await {
        Err(elicitd::error::Error::Internal(e)) => {
            assert!(e.to_string().contains("collision"), "{e}")
        }
        other => panic!("an id collision is refused: {other:?}"),
    }
}
