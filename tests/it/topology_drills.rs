//! Drills on real Redis topologies: slots moved under parked awaits (Cluster), and a primary
//! killed while its replicas lag (Cluster and Sentinel), with and without
//! `ELICITD_REDIS_REPLICA_ACKS`. What must hold: every await answers the true status within 2 s
//! of its decision; answers are only 2xx or 503 while the topology changes; the same replicas
//! serve again afterwards without a restart; and with replica confirmations on, no decision that
//! was answered 200 is lost.

use std::{
    collections::BTreeMap,
    process::Command,
    time::{Duration, Instant},
};

use fred::util::redis_keyslot;
use serde_json::json;

use crate::harness::{
    topology::{wait_until, RedisCluster, Topology},
    Api, Created, Fixture, StoreKind,
};

/// The hash slot of an elicitation's keys (its shard's hash tag).
fn slot_of(id: &str) -> u16 {
    let id = elicitd::model::ElicitationId::parse(id).expect("an id");
    let record = elicitd::store::redis::keys::Keys::new("any").record(id);
    redis_keyslot(record.as_bytes())
}

/// Create approvals until `n` of them live on `want(slot)`.
async fn approvals_where(api: &Api, n: usize, want: impl Fn(u16) -> bool) -> Vec<Created> {
    let mut out = Vec::new();
    let mut tries = 0;
    while out.len() < n {
        let c = api.approval().await;
        if want(slot_of(&c.id)) {
            out.push(c);
        }
        tries += 1;
        assert!(tries < n * 20, "could not place {n} records");
    }
    out
}

/// Decide `c`, retrying 503s (the topology may be moving) until `deadline`.
async fn decide_retrying(api: &Api, c: &Created, deadline: Instant) -> Instant {
    loop {
        let r = api.decide(&c.token, json!({"decision": "submitted"})).await;
        match r.status {
            200 => return Instant::now(),
            503 => assert!(
                r.headers.get("retry-after").is_some(),
                "503 without Retry-After"
            ),
            _ => panic!("decide {}: {} {}", c.id, r.status, r.body),
        }
        assert!(Instant::now() < deadline, "{} never decided", c.id);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn the_cluster(f: &Fixture) -> &RedisCluster {
    match &**f.topo.as_ref().expect("a topology") {
        Topology::Cluster(c) => c,
        Topology::Sentinel(_) => panic!("not a cluster"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_reshard_under_300_parked_awaits_loses_no_wake_up() {
    let f = Fixture::own(StoreKind::Cluster, 2, |_| {}).await;
    let cluster = the_cluster(&f);
    let (a, b) = (f.acme(), f.other());
    // 300 requests whose slots all live on one primary: every one of them will move.
    let first = a.approval().await;
    let source = cluster.primary_of_slot(slot_of(&first.id));
    let owners = cluster.slot_owners();
    let items = approvals_where(&a, 300, |s| owners[s as usize] == source).await;
    let target = (0..cluster.nodes.len())
        .find(|&i| i != source && cluster.nodes[i].info("role").as_deref() == Some("master"))
        .expect("another primary");
    // Park an await for each on replica A.
    let mut waits = Vec::new();
    for c in &items {
        let (a, id) = (a.clone(), c.id.clone());
        waits.push(tokio::spawn(async move {
            let r = a.wait(&id, 55).await;
            (r, Instant::now())
        }));
    }
    let svc = f.apps[0].service.clone();
    wait_until_async("300 parked", Duration::from_secs(30), || {
        svc.parked_awaits() == 300 && svc.live_subscriptions() == 300
    })
    .await;

    // Move every slot of the source primary (and its keys) to the target, while they wait.
    let (from, to) = (cluster.node_id(source), cluster.node_id(target));
    let entry = cluster.nodes[target].addr();
    let reshard = tokio::task::spawn_blocking(move || {
        Command::new("redis-cli")
            .args(["--cluster", "reshard", &entry, "--cluster-from", &from])
            .args([
                "--cluster-to",
                &to,
                "--cluster-slots",
                "16384",
                "--cluster-yes",
            ])
            .output()
            .expect("redis-cli --cluster reshard")
    });
    // Decide the first half while slots are moving, the rest after.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut decided_at = BTreeMap::new();
    for c in &items[..150] {
        decided_at.insert(c.id.clone(), decide_retrying(&b, c, deadline).await);
    }
    let out = reshard.await.unwrap();
    assert!(
        out.status.success(),
        "reshard failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !cluster.slot_owners().contains(&source),
        "the source primary still owns slots"
    );
    for c in &items[150..] {
        decided_at.insert(c.id.clone(), decide_retrying(&b, c, deadline).await);
    }
    let mut worst = Duration::ZERO;
    for (c, w) in items.iter().zip(waits) {
        let (r, answered) = w.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.str("status"), "submitted", "await of {}", c.id);
        worst = worst.max(answered.saturating_duration_since(decided_at[&c.id]));
    }
    eprintln!("reshard drill: slowest wake {worst:?} after its decision");
    assert!(
        worst <= Duration::from_secs(2),
        "an await answered {worst:?} after its decision"
    );
}

/// Poll a condition from async code.
async fn wait_until_async(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a failover drill saw.
#[derive(Debug, Default)]
struct Drill {
    /// Decisions answered 200 while the replicas lagged.
    acknowledged: usize,
    /// ... of which the promoted replica no longer has.
    lost: usize,
    /// Answers 503 (never anything else but 200).
    refused: usize,
}

/// The failover drill on `kind` with `acks` replica confirmations: decide a quarter of the
/// requests on one primary, freeze its replicas, fill the replication stream, decide the rest,
/// kill that primary, thaw the replicas, wait for the promotion, then check every decision
/// that was answered 200, and that the same app replicas serve again.
async fn failover_drill(kind: StoreKind, acks: u32) -> Drill {
    let f = Fixture::own(kind, 2, |c| {
        c.redis_replica_acks = acks;
        c.redis_replica_timeout = Duration::from_millis(300);
    })
    .await;
    let (a, b) = (f.acme(), f.other());
    let topo = f.topo.as_ref().expect("topology");
    // Requests on one primary, and that primary's replicas.
    let (items, primary, replicas) = match &**topo {
        Topology::Cluster(c) => {
            let first = a.approval().await;
            let p = c.primary_of_slot(slot_of(&first.id));
            let owners = c.slot_owners();
            let items = approvals_where(&a, 80, |s| owners[s as usize] == p).await;
            let port = c.nodes[p].port.to_string();
            let replicas: Vec<usize> = (0..c.nodes.len())
                .filter(|&i| c.nodes[i].info("master_port").as_deref() == Some(port.as_str()))
                .collect();
            (items, p, replicas)
        }
        Topology::Sentinel(s) => {
            let mut items = Vec::new();
            for _ in 0..80 {
                items.push(a.approval().await);
            }
            let p = s.primary();
            (items, p, (0..s.data.len()).filter(|&i| i != p).collect())
        }
    };
    assert!(!replicas.is_empty(), "the primary has no replica");
    let nodes = topo.data_nodes();
    wait_until("replicas in sync", Duration::from_secs(20), || {
        replicas
            .iter()
            .all(|&r| nodes[r].info("master_link_status").as_deref() == Some("up"))
    });
    let comment = "c".repeat(2000);
    let decide = |c: &Created| {
        let (api, token) = (a.clone(), c.token.clone());
        let body = json!({"decision": "submitted", "comment": comment});
        async move { api.decide(&token, body).await }
    };
    // A quarter decided while the replicas keep up: confirmed either way.
    let (before, during) = items.split_at(items.len() / 4);
    let mut answers = futures::future::join_all(before.iter().map(decide)).await;
    for r in &answers {
        assert_eq!(r.status, 200, "decide with healthy replicas: {}", r.body);
    }
    // The replicas stop reading. 16 MiB written to the primary first fill every socket buffer
    // between them, so what comes after stays in the primary's memory.
    for &r in &replicas {
        nodes[r].freeze(true);
    }
    let filler = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(filler.path(), vec![b'x'; 16 << 20]).unwrap();
    // A key in the slot of the items' shard, so it lands on their primary.
    let shard = elicitd::store::redis::keys::shard_of(
        elicitd::model::ElicitationId::parse(&items[0].id).unwrap(),
    );
    let key = format!("filler:{{s{shard:02}}}");
    let out = Command::new("redis-cli")
        .args(["-p", &nodes[primary].port.to_string(), "-x", "SET", &key])
        .stdin(std::fs::File::open(filler.path()).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The rest, 16 at a time; with confirmations on, these must not be answered 200.
    for chunk in during.chunks(16) {
        answers.extend(futures::future::join_all(chunk.iter().map(decide)).await);
    }
    let mut drill = Drill::default();
    let mut acknowledged = Vec::new();
    for (c, r) in items.iter().zip(&answers) {
        match r.status {
            200 => acknowledged.push(c),
            503 => drill.refused += 1,
            other => panic!("decide while the replicas lag: {other} {}", r.body),
        }
    }
    drill.acknowledged = acknowledged.len();

    // The primary dies; its replicas come back; the topology promotes one.
    nodes[primary].kill();
    for &r in &replicas {
        nodes[r].freeze(false);
    }
    // While it fails over, every answer is 200 or 503 (with Retry-After), never anything else,
    // and no call hangs; then the same replicas serve again.
    let probe = &items[items.len() - 1];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let started = Instant::now();
        let r = b.status(&probe.id).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a status call took {:?}",
            started.elapsed()
        );
        match r.status {
            200 => break,
            503 => assert!(r.headers.get("retry-after").is_some()),
            other => panic!("during failover: {other} {}", r.body),
        }
        assert!(Instant::now() < deadline, "no promotion within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every acknowledged decision is still there.
    for c in &acknowledged {
        let r = b.status(&c.id).await;
        assert_eq!(r.status, 200, "{}", r.body);
        if r.str("status") == "pending" {
            drill.lost += 1;
        }
    }
    // The crashed node comes back (as a replica of the promoted one). Both app replicas, never
    // restarted, then record new decisions and creates (confirmed again when acks are on).
    nodes[primary].restart();
    tokio::task::block_in_place(|| topo.wait_healthy());
    let pending: Vec<&Created> = items
        .iter()
        .filter(|c| !acknowledged.iter().any(|k| k.id == c.id))
        .take(4)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, c) in pending.iter().enumerate() {
        let api = if i % 2 == 0 { &a } else { &b };
        if api.status_of(&c.id).await == "pending" {
            decide_retrying(api, c, deadline).await;
        }
    }
    let fresh = loop {
        let r = a
            .post("/v1/approvals", &json!({"message": "m", "context": 1}))
            .await;
        match r.status {
            201 => break r.str("elicitationId").to_string(),
            503 => assert!(Instant::now() < deadline, "creates still refused"),
            other => panic!("create after failover: {other} {}", r.body),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(b.status_of(&fresh).await, "pending");
    drill
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_primary_killed_with_lagging_replica() {
    let with = failover_drill(StoreKind::Cluster, 1).await;
    let without = failover_drill(StoreKind::Cluster, 0).await;
    eprintln!("cluster failover: REPLICA_ACKS=1 {with:?}; REPLICA_ACKS=0 {without:?}");
    assert_eq!(with.lost, 0, "confirmed decisions lost: {with:?}");
    assert_eq!(
        with.acknowledged, 20,
        "only the decisions before the freeze: {with:?}"
    );
    assert!(
        without.lost > 0,
        "the drill should lose unconfirmed writes: {without:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_primary_killed_with_frozen_replicas() {
    let with = failover_drill(StoreKind::Sentinel, 1).await;
    let without = failover_drill(StoreKind::Sentinel, 0).await;
    eprintln!("sentinel failover: REPLICA_ACKS=1 {with:?}; REPLICA_ACKS=0 {without:?}");
    assert_eq!(with.lost, 0, "confirmed decisions lost: {with:?}");
    assert_eq!(
        with.acknowledged, 20,
        "only the decisions before the freeze: {with:?}"
    );
    assert!(
        without.lost > 0,
        "the drill should lose unconfirmed writes: {without:?}"
    );
}
