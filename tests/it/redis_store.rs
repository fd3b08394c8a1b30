//! Redis-specific guarantees: script cache loss, one round trip per status read, key layout and
//! TTLs, and prompt `unavailable` answers while Redis is down.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Fixture, StoreKind};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_read_is_one_round_trip_of_time_and_hmget() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let redis = f.redis.as_ref().unwrap();
    let api = f.acme();
    let c = api.approval().await;
    api.status(&c.id).await; // warm any lazy connection set-up
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let n = 50;
    for _ in 0..n {
        assert_eq!(api.status_of(&c.id).await, "pending");
    }
    let stats = commandstats(&redis.cli(&["INFO", "commandstats"]).unwrap());
    let calls = |name: &str| {
        stats
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .unwrap_or(0)
    };
    assert_eq!(calls("time"), n, "{stats:?}");
    assert_eq!(calls("hmget"), n, "{stats:?}");
    let others: Vec<_> = stats
        .iter()
        .filter(|(name, _)| {
            !["time", "hmget", "info", "config|resetstat", "ping"].contains(&name.as_str())
        })
        .collect();
    assert!(others.is_empty(), "status used other commands: {others:?}");
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
    let record = format!("{}:e:{{{}}}", f.prefix, c.id);
    assert!(keys.contains(&record.as_str()));
    assert!(keys.contains(&format!("{record}:audit").as_str()));
    let retention_ms = f.apps[0].service.config.retention.as_millis() as i64;
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
