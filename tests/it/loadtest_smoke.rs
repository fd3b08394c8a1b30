//! Smoke runs of every `elicitd-loadtest` scenario against two replicas sharing one Redis:
//! about a second each at low concurrency. Correctness only (no errors, requests were made,
//! every waiter woke with the decided status) — never timing: figures live in
//! docs/benchmarks.md.

use std::time::Duration;

use elicitd_loadtest::{run, ClientKind, Options, Report, Scenario};

use crate::harness::{Fixture, StoreKind, ACME_KEY};

fn opts(url: &str, client: ClientKind) -> Options {
    let mut o = Options::new(url, ACME_KEY);
    o.concurrency = 2;
    o.duration = Duration::from_secs(1);
    o.client = client;
    o
}

fn assert_clean(r: &Report) {
    assert_eq!(
        r.errors, 0,
        "{} had errors: {:?}",
        r.scenario, r.errors_by_kind
    );
    assert!(r.requests > 0, "{} made no requests", r.scenario);
    assert!(r.rps > 0.0 && r.max_ms > 0.0, "{}: {r:?}", r.scenario);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_clean_against_two_replicas() {
    let f = Fixture::new(StoreKind::Redis, 2).await;
    let (a, b) = (f.apps[0].base.clone(), f.apps[1].base.clone());

    for client in [ClientKind::Hyper, ClientKind::Reqwest] {
        let o = opts(&a, client);
        let healthz = run(&o, &Scenario::Healthz).await.expect("healthz");
        assert_clean(&healthz);
        assert_eq!(healthz.ops["healthz"].requests, healthz.requests);

        let status = run(&o, &Scenario::Status { seed: 5 })
            .await
            .expect("status");
        assert_clean(&status);
        assert!(status.ops["status"].requests > 0, "{:?}", status.ops);
    }

    // CPU per request of the measured phase: the generator's own, and the processes named
    // (this test process serves the replicas; Redis is its own process).
    let mut o = opts(&a, ClientKind::Hyper);
    let redis_pid = f.redis.as_ref().and_then(|r| r.pid()).expect("redis pid");
    o.cpu = elicitd_loadtest::cpu::CpuProbe::new(vec![
        ("replica".into(), std::process::id()),
        ("redis".into(), redis_pid),
    ]);
    let status = run(&o, &Scenario::Status { seed: 5 })
        .await
        .expect("status");
    assert_clean(&status);
    let cpu = status.cpu_us_per_request.clone().expect("cpu figures");
    assert_eq!(
        cpu.keys().collect::<Vec<_>>(),
        ["generator", "redis", "replica"]
    );
    // Every status read costs Redis and the replica something; a second of reads cannot be free.
    assert!(cpu["redis"] > 0.0 && cpu["replica"] > 0.0, "{cpu:?}");
    assert!(elicitd_loadtest::cpu::parse_pid("redis=x").is_err());
    assert!(elicitd_loadtest::cpu::parse_pid("generator=1").is_err());
    assert_eq!(
        elicitd_loadtest::cpu::parse_pid("redis=42"),
        Ok(("redis".to_string(), 42))
    );

    let o = opts(&a, ClientKind::Hyper);
    let create = run(&o, &Scenario::Create).await.expect("create");
    assert_clean(&create);
    assert_eq!(create.ops["create"].requests, create.requests);

    let waiters = 20;
    let awaited = run(
        &o,
        &Scenario::Await {
            waiters,
            hold: Duration::from_secs(1),
            decide_url: b.clone(),
            decide_rate: 40,
        },
    )
    .await
    .expect("await");
    assert_clean(&awaited);
    let wake = awaited.wake.as_ref().expect("wake figures");
    // 20 decisions at 40 per second: the last is due 19/40 s after the first.
    assert!(
        wake.decide_phase_s >= 0.47,
        "paced decisions took {} s",
        wake.decide_phase_s
    );
    assert_eq!(wake.waiters, waiters as u64);
    assert_eq!(
        wake.woken, waiters as u64,
        "every waiter wakes with submitted"
    );
    assert_eq!(wake.from_sent.requests, waiters as u64);
    assert_eq!(awaited.ops["decide"].requests, waiters as u64);
    assert_eq!(awaited.ops["await"].requests, waiters as u64);

    let mixed = run(&o, &Scenario::Mixed { decide_url: b })
        .await
        .expect("mixed");
    assert_clean(&mixed);
    for op in ["create", "status", "await", "decide", "result"] {
        assert!(
            mixed.ops.get(op).is_some_and(|s| s.requests > 0),
            "mixed made no {op} requests: {:?}",
            mixed.ops
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_counted_by_kind_not_hidden() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let mut o = opts(&f.apps[0].base, ClientKind::Hyper);
    o.api_key = "wrong-key-0123456789abcdef".into();
    // Seeding needs a valid key: the run refuses to start and says why.
    let e = run(&o, &Scenario::Status { seed: 1 }).await.unwrap_err();
    assert!(e.0.contains("http 401"), "{e}");
    // A timed scenario records every 401 as an error of that kind.
    o.duration = Duration::from_millis(300);
    let r = run(&o, &Scenario::Create).await.expect("create");
    assert!(r.errors > 0 && r.errors == r.requests, "{r:?}");
    assert_eq!(r.errors_by_kind.keys().collect::<Vec<_>>(), ["http 401"]);
    // Nothing listening: transport errors.
    o.url = format!("http://127.0.0.1:{}", crate::harness::free_port());
    let r = run(&o, &Scenario::Healthz).await.expect("healthz");
    assert!(r.errors > 0, "{r:?}");
    assert!(r.errors_by_kind.contains_key("transport: connect"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_scenario_receives_one_delivery_per_decision() {
    let f = Fixture::own(StoreKind::Redis, 2, |c| crate::webhooks::hooks(c, &[0, 1])).await;
    let (a, b) = (f.apps[0].base.clone(), f.apps[1].base.clone());
    let o = opts(&a, ClientKind::Hyper);
    let count = 30;
    let on = run(
        &o,
        &Scenario::Webhooks {
            count,
            decide_url: b.clone(),
            receiver: Some("127.0.0.1:0".parse().unwrap()),
        },
    )
    .await
    .expect("webhooks");
    assert_clean(&on);
    assert_eq!(on.ops["create"].requests, count as u64);
    assert_eq!(on.ops["decide"].requests, count as u64);
    assert_eq!(on.ops["delivery"].requests, count as u64, "{:?}", on.ops);
    let extra = on.extra.as_ref().expect("extra figures");
    assert_eq!(extra["webhooks"], true);
    assert!(extra["deliveries_received"].as_u64().unwrap() >= count as u64);

    let off = run(
        &o,
        &Scenario::Webhooks {
            count,
            decide_url: b,
            receiver: None,
        },
    )
    .await
    .expect("webhooks off");
    assert_clean(&off);
    assert!(!off.ops.contains_key("delivery"), "{:?}", off.ops);
    assert_eq!(off.extra.as_ref().unwrap()["webhooks"], false);
}
