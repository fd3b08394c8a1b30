//! Waking parked `await` calls across replicas (docs/architecture.md, "Waking `await` on any
//! replica"): fan-out, pub/sub loss, Redis restarts, client disconnects, the parked cap and
//! graceful shutdown.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{
    every_redis,
    harness::{spawn_binary, test_config, App, Fixture, RedisServer, StoreKind, ACME_KEY},
};

every_redis!(
    hundreds_of_awaits_on_two_replicas_wake_on_decisions_from_the_other,
    awaits_survive_killed_pubsub_connections
);

/// Wait until `cond` holds (polling), or fail with `what`.
async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Client connections across every data node (replication links excluded).
fn connected_clients(f: &Fixture) -> u64 {
    f.data_nodes()
        .iter()
        .map(|n| {
            let clients: u64 = n
                .info("connected_clients")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let replicas: u64 = n
                .info("connected_slaves")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            clients - replicas.min(clients)
        })
        .sum()
}

async fn hundreds_of_awaits_on_two_replicas_wake_on_decisions_from_the_other(kind: StoreKind) {
    let f = Fixture::own(kind, 2, |_| {}).await;
    let (a, b) = (f.acme(), f.other());
    let n = 150;
    let mut items = Vec::new();
    for _ in 0..n {
        items.push(a.approval().await);
    }
    let clients_before = connected_clients(&f);
    let mut waits = Vec::new();
    for (i, c) in items.iter().enumerate() {
        for api in [&a, &b] {
            let api = api.clone();
            let id = c.id.clone();
            waits.push(tokio::spawn(async move {
                let r = api.wait(&id, 45).await;
                (i, r, Instant::now())
            }));
        }
    }
    let (ha, hb) = (f.apps[0].service.clone(), f.apps[1].service.clone());
    eventually("all awaits parked", Duration::from_secs(20), || {
        ha.parked_awaits() == n
            && hb.parked_awaits() == n
            && ha.live_subscriptions() == n
            && hb.live_subscriptions() == n
    })
    .await;
    // O(1) Redis connections per replica, whatever the number of waiters.
    assert_eq!(
        connected_clients(&f),
        clients_before,
        "parking opened Redis connections"
    );

    let started = Instant::now();
    let mut expected = Vec::new();
    for (i, c) in items.iter().enumerate() {
        // Decide through the replica the first await is NOT parked on half the time.
        let api = if i % 2 == 0 { &b } else { &a };
        let s = match i % 3 {
            0 => api
                .decide(&c.token, json!({"decision": "submitted"}))
                .await
                .str("status")
                .to_string(),
            1 => api
                .decide(&c.token, json!({"decision": "declined"}))
                .await
                .str("status")
                .to_string(),
            _ => api.cancel(&c.id).await.str("status").to_string(),
        };
        expected.push((s, Instant::now()));
    }
    let decided_in = started.elapsed();
    let mut worst = Duration::ZERO;
    for w in waits {
        let (i, r, at) = w.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.str("status"), expected[i].0, "await {i}");
        worst = worst.max(at.saturating_duration_since(expected[i].1));
    }
    assert!(
        worst < Duration::from_secs(5),
        "slowest wake {worst:?} after its decision (decisions took {decided_in:?})"
    );
    eventually("waiters released", Duration::from_secs(5), || {
        ha.parked_awaits() == 0 && hb.parked_awaits() == 0
    })
    .await;
    eventually("unsubscribed", Duration::from_secs(5), || {
        ha.live_subscriptions() == 0 && hb.live_subscriptions() == 0
    })
    .await;
}

async fn awaits_survive_killed_pubsub_connections(kind: StoreKind) {
    let f = Fixture::own(kind, 2, |_| {}).await;
    let (a, b) = (f.acme(), f.other());
    let items = [a.approval().await, a.approval().await, a.approval().await];
    let mut waits = Vec::new();
    for c in &items {
        let a = a.clone();
        let id = c.id.clone();
        waits.push(tokio::spawn(async move { a.wait(&id, 45).await }));
    }
    let hub = f.apps[0].service.clone();
    eventually("parked", Duration::from_secs(10), || {
        hub.parked_awaits() == 3
    })
    .await;
    let killed: u64 = f
        .data_nodes()
        .iter()
        .filter_map(|n| n.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]))
        .filter_map(|k| k.parse::<u64>().ok())
        .sum();
    assert_ne!(killed, 0, "no pubsub client was killed");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let t = Instant::now();
    for c in &items {
        b.decide(&c.token, json!({"decision": "submitted"})).await;
    }
    for w in waits {
        assert_eq!(w.await.unwrap().str("status"), "submitted");
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "woke {:?} after the decisions",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaits_survive_a_redis_crash_and_restart_with_aof() {
    let redis = RedisServer::start_with(true);
    let prefix = "crash";
    let a = App::start(test_config(Some(redis.url()), prefix)).await;
    let b = App::start(test_config(Some(redis.url()), prefix)).await;
    let (api_a, api_b) = (a.api(ACME_KEY), b.api(ACME_KEY));
    let c1 = api_a.approval().await;
    let c2 = api_a.approval().await;
    let mut waits = Vec::new();
    for (api, c) in [(&api_a, &c1), (&api_b, &c1), (&api_a, &c2)] {
        let api = api.clone();
        let id = c.id.clone();
        waits.push(tokio::spawn(async move { api.wait(&id, 50).await }));
    }
    eventually("parked", Duration::from_secs(10), || {
        a.service.parked_awaits() == 2 && b.service.parked_awaits() == 1
    })
    .await;

    redis.kill();
    // While Redis is down calls fail fast with 503 instead of hanging.
    let t = Instant::now();
    let r = api_b.status(&c1.id).await;
    assert_eq!((r.status, r.code()), (503, "unavailable"));
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.restart();

    // Decide as soon as the store answers again (AOF kept the records).
    let deadline = Instant::now() + Duration::from_secs(15);
    let decided_at = loop {
        let r = api_b
            .decide(&c1.token, json!({"decision": "submitted"}))
            .await;
        if r.status == 200 {
            break Instant::now();
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(Instant::now() < deadline, "Redis did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Replica A reconnects on its own back-off; until then it answers 503 (Retry-After).
    loop {
        let r = api_a.cancel(&c2.id).await;
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(Instant::now() < deadline, "replica A did not reconnect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut statuses = Vec::new();
    for w in waits {
        let r = w.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        statuses.push(r.str("status").to_string());
    }
    assert_eq!(statuses, ["submitted", "submitted", "canceled"]);
    assert!(
        decided_at.elapsed() < Duration::from_secs(8),
        "awaits answered {:?} after the decision",
        decided_at.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_awaits_are_capped_and_released_when_the_client_leaves() {
    for kind in [StoreKind::Memory, StoreKind::Redis] {
        let redis = (kind == StoreKind::Redis).then(RedisServer::start);
        let mut config = test_config(redis.as_ref().map(|r| r.url()), "cap");
        config.max_parked_awaits = 3;
        let app = App::start(config).await;
        let api = app.api(ACME_KEY);
        let c = api.approval().await;
        let mut waits = Vec::new();
        for _ in 0..3 {
            let api = api.clone();
            let id = c.id.clone();
            waits.push(tokio::spawn(async move { api.wait(&id, 30).await }));
        }
        let hub = app.service.clone();
        eventually("parked", Duration::from_secs(10), || {
            hub.parked_awaits() == 3
        })
        .await;
        let r = api.wait(&c.id, 30).await;
        assert_eq!((r.status, r.code()), (429, "rate_limited"), "{kind:?}");
        assert!(r.headers.get("retry-after").is_some());
        // Status still works past the cap.
        assert_eq!(api.status_of(&c.id).await, "pending");
        api.decide(&c.token, json!({"decision": "declined"})).await;
        for w in waits {
            assert_eq!(w.await.unwrap().str("status"), "declined");
        }
        // A client that gives up frees its slot.
        let c2 = api.approval().await;
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let r = impatient
            .get(format!(
                "{}/v1/elicitations/{}/await?waitSeconds=30",
                app.base, c2.id
            ))
            .bearer_auth(ACME_KEY)
            .send()
            .await;
        assert!(r.is_err(), "the client should have timed out");
        eventually(
            "waiter released after disconnect",
            Duration::from_secs(5),
            || hub.parked_awaits() == 0,
        )
        .await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_parked_awaits_and_exits_cleanly() {
    let redis = RedisServer::start();
    let (mut child, api) = spawn_binary(&redis, &[], false).await;
    let mut waits = Vec::new();
    for _ in 0..20 {
        let c = api.approval().await;
        let api = api.clone();
        waits.push(tokio::spawn(async move { api.wait(&c.id, 60).await }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    for w in waits {
        let r = w.await.unwrap();
        assert_eq!((r.status, r.str("status")), (200, "pending"), "{}", r.body);
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "parked awaits answered after {:?}",
        t.elapsed()
    );
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "elicitd did not exit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}");
}

/// The binary serves on `ELICITD_HTTP_THREADS` worker threads (thread per core), each with its
/// own listening socket and its own Redis connections (commands, and the status cache's
/// tracked reader): Redis sees two more clients per thread,
/// new connections are spread over the threads by the kernel, and whichever thread a
/// connection lands on, its reads are fresh and its parked awaits wake on a decision made
/// through another replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_threads_each_hold_a_redis_connection_and_all_serve_and_wake() {
    let redis = RedisServer::start();
    let clients = || -> u64 {
        redis
            .info("connected_clients")
            .and_then(|v| v.trim().parse().ok())
            .expect("connected_clients")
    };
    let (mut one, _) = spawn_binary(&redis, &[("ELICITD_HTTP_THREADS", "1")], false).await;
    let with_one = clients();
    let _ = one.kill();
    let _ = one.wait();
    eventually(
        "the one-thread replica's connections to close",
        Duration::from_secs(10),
        || clients() < with_one,
    )
    .await;
    let without = clients();
    let (mut a, api_a) = spawn_binary(&redis, &[("ELICITD_HTTP_THREADS", "3")], false).await;
    // (Ready as soon as one thread serves; the others may still be connecting.)
    eventually(
        "3 worker threads to hold 4 more Redis connections than 1",
        Duration::from_secs(10),
        || clients() - without == with_one - without + 4,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        clients() - without,
        with_one - without + 4,
        "no more than that"
    );
    let (mut b, api_b) = spawn_binary(&redis, &[("ELICITD_HTTP_THREADS", "1")], false).await;

    // 30 agents, each on a connection of its own to A (so the kernel spreads them over A's
    // three listeners), park an await; every one is decided through B.
    let mut waits = Vec::new();
    let mut tokens = Vec::new();
    for _ in 0..30 {
        let own = crate::harness::Api::new(&api_a.base, ACME_KEY);
        let c = own.approval().await;
        assert_eq!(own.status_of(&c.id).await, "pending");
        tokens.push(c.token.clone());
        waits.push(tokio::spawn(async move { own.wait(&c.id, 30).await }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for t in &tokens {
        let r = api_b.decide(t, json!({"decision": "submitted"})).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for w in waits {
        let r = w.await.unwrap();
        assert_eq!(
            (r.status, r.str("status")),
            (200, "submitted"),
            "{}",
            r.body
        );
    }
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
}
