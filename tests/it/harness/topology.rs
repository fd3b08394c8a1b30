//! Redis topologies beyond one server, from Debian's `redis-server`: a Cluster of three
//! primaries with one replica each, and a Sentinel group (a primary, two replicas, three
//! Sentinels). Each starts on free loopback ports and waits until it is really usable —
//! `cluster_state:ok` everywhere, replicas in sync (`master_link_status:up`), Sentinels agreeing
//! on the primary — because a failover test with an unsynced replica proves nothing.
//!
//! The contract suite shares one of each per test process ([`shared`]; fixtures isolate
//! themselves by key prefix); tests that kill, freeze or reshard start their own.

use std::{
    process::Command,
    sync::OnceLock,
    time::{Duration, Instant},
};

use super::RedisServer;

/// A free port `p` with `p + 10000` free too (the cluster bus), and `p ≤ 55535`.
pub fn free_cluster_port() -> u16 {
    use std::net::TcpListener;
    loop {
        let p: u16 = 20_000 + (rand_u32() % 30_000) as u16;
        let ok = TcpListener::bind(("127.0.0.1", p)).is_ok()
            && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok();
        if ok {
            return p;
        }
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() as u32
}

/// Poll `cond` every 50 ms until it holds, or panic with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Three primaries and three replicas, slots spread evenly.
pub struct RedisCluster {
    /// Every node; after start, `nodes[0..3]` are the primaries and `nodes[3..6]` replicas
    /// (as `redis-cli --cluster create` assigns them), until a failover changes roles.
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_on(
                    free_cluster_port(),
                    false,
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1500",
                        // A replica may be promoted whatever its last contact with the primary.
                        "--cluster-replica-validity-factor",
                        "0",
                    ]
                    .map(String::from)
                    .to_vec(),
                )
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let c = RedisCluster { nodes };
        c.wait_healthy();
        c
    }

    /// Until every live node says `cluster_state:ok` and every replica is in sync.
    pub fn wait_healthy(&self) {
        wait_until("cluster state ok", Duration::from_secs(30), || {
            self.nodes.iter().all(|n| {
                n.cli(&["CLUSTER", "INFO"])
                    .is_some_and(|i| i.contains("cluster_state:ok"))
            })
        });
        wait_until("replicas in sync", Duration::from_secs(30), || {
            self.nodes.iter().all(|n| match n.info("role").as_deref() {
                Some("slave") => n.info("master_link_status").as_deref() == Some("up"),
                Some("master") => true,
                _ => false,
            })
        });
    }

    /// `redis-cluster://` URL naming every node.
    pub fn url(&self) -> String {
        let mut url = format!("redis-cluster://{}", self.nodes[0].addr());
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("node={}", n.addr()));
        }
        url
    }

    /// For every slot, the index of the node serving it as primary right now (from one
    /// `CLUSTER NODES` of a live node).
    pub fn slot_owners(&self) -> Vec<usize> {
        let nodes = self
            .nodes
            .iter()
            .find_map(|n| n.cli(&["--raw", "CLUSTER", "NODES"]))
            .expect("a live node");
        let mut owners = vec![usize::MAX; 16384];
        for line in nodes
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
        {
            let port = line
                .split_whitespace()
                .nth(1)
                .and_then(|a| a.split('@').next())
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok());
            let Some(i) = self.nodes.iter().position(|n| Some(n.port) == port) else {
                continue;
            };
            for (slot, owner) in owners.iter_mut().enumerate() {
                if owns(line, slot as u16) {
                    *owner = i;
                }
            }
        }
        owners
    }

    /// Index of the node serving `slot` as primary right now.
    pub fn primary_of_slot(&self, slot: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| {
                n.cli(&["--raw", "CLUSTER", "NODES"]).is_some_and(|nodes| {
                    nodes
                        .lines()
                        .any(|l| l.contains("myself") && l.contains("master") && owns(l, slot))
                })
            })
            .expect("a primary for the slot")
    }

    /// The node id of node `i`.
    pub fn node_id(&self, i: usize) -> String {
        self.nodes[i]
            .cli(&["CLUSTER", "MYID"])
            .expect("cluster myid")
    }
}

/// Whether a `CLUSTER NODES` line lists `slot` in its ranges.
fn owns(line: &str, slot: u16) -> bool {
    line.split_whitespace()
        .skip(8)
        .any(|r| match r.split_once('-') {
            Some((a, b)) => {
                a.parse::<u16>().is_ok_and(|a| a <= slot)
                    && b.parse::<u16>().is_ok_and(|b| slot <= b)
            }
            None => r.parse::<u16>().is_ok_and(|s| s == slot),
        })
}

/// A primary, two replicas and three Sentinels watching them as `mymaster`.
pub struct RedisSentinel {
    /// `data[0]` is the first primary; roles change on failover.
    pub data: Vec<RedisServer>,
    pub sentinels: Vec<RedisServer>,
}

/// The service name the Sentinels monitor.
pub const SENTINEL_SERVICE: &str = "mymaster";

impl RedisSentinel {
    pub fn start() -> RedisSentinel {
        let primary = RedisServer::start_on(super::free_port(), false, Vec::new());
        let mut data = vec![primary];
        for _ in 0..2 {
            let replicaof = vec![
                "--replicaof".to_string(),
                "127.0.0.1".to_string(),
                data[0].port.to_string(),
            ];
            data.push(RedisServer::start_on(super::free_port(), false, replicaof));
        }
        wait_until("replicas in sync", Duration::from_secs(30), || {
            data[1..]
                .iter()
                .all(|r| r.info("master_link_status").as_deref() == Some("up"))
        });
        let sentinels = (0..3)
            .map(|_| {
                let dir = tempfile::tempdir().expect("dir");
                let conf = dir.path().join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {} 2\n\
                         sentinel down-after-milliseconds {SENTINEL_SERVICE} 1000\n\
                         sentinel failover-timeout {SENTINEL_SERVICE} 4000\n\
                         sentinel parallel-syncs {SENTINEL_SERVICE} 2\n",
                        data[0].port
                    ),
                )
                .expect("write sentinel.conf");
                // The config file must outlive the process (Sentinel rewrites it): keep the
                // directory around for the life of the test process.
                let conf = conf.display().to_string();
                std::mem::forget(dir);
                RedisServer::start_on(
                    super::free_port(),
                    false,
                    vec![conf, "--sentinel".to_string()],
                )
            })
            .collect();
        let s = RedisSentinel { data, sentinels };
        s.wait_healthy();
        s
    }

    /// Until every Sentinel names the same live primary and knows both replicas and the other
    /// Sentinels, and the replicas are in sync with it.
    pub fn wait_healthy(&self) {
        wait_until("sentinels agree", Duration::from_secs(40), || {
            let Some(p) = self.primary_port() else {
                return false;
            };
            self.sentinels.iter().all(|s| {
                s.cli(&["SENTINEL", "MASTER", SENTINEL_SERVICE])
                    .is_some_and(|m| m.contains(&p.to_string()) && !m.contains("o_down"))
                    && s.cli(&["SENTINEL", "REPLICAS", SENTINEL_SERVICE])
                        .is_some_and(|r| r.matches("ip").count() >= 2)
                    && s.cli(&["SENTINEL", "SENTINELS", SENTINEL_SERVICE])
                        .is_some_and(|r| r.matches("ip").count() >= 2)
            }) && self.data.iter().all(|d| match d.info("role").as_deref() {
                Some("slave") => d.info("master_link_status").as_deref() == Some("up"),
                Some("master") => d.port == p,
                _ => true, // a killed node
            })
        });
    }

    /// The primary's port, as the first answering Sentinel says.
    pub fn primary_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| {
            let out = s.cli(&[
                "--raw",
                "SENTINEL",
                "GET-MASTER-ADDR-BY-NAME",
                SENTINEL_SERVICE,
            ])?;
            out.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// Index in `data` of the current primary.
    pub fn primary(&self) -> usize {
        let p = self.primary_port().expect("a primary");
        self.data.iter().position(|d| d.port == p).expect("known")
    }

    /// `redis-sentinel://` URL naming every Sentinel.
    pub fn url(&self) -> String {
        let mut url = format!(
            "redis-sentinel://{}?sentinelServiceName={SENTINEL_SERVICE}",
            self.sentinels[0].addr()
        );
        for s in &self.sentinels[1..] {
            url.push_str(&format!("&node={}", s.addr()));
        }
        url
    }
}

/// A Cluster or a Sentinel group.
pub enum Topology {
    Cluster(RedisCluster),
    Sentinel(RedisSentinel),
}

impl Topology {
    pub fn start(cluster: bool) -> Topology {
        if cluster {
            Topology::Cluster(RedisCluster::start())
        } else {
            Topology::Sentinel(RedisSentinel::start())
        }
    }

    /// The `ELICITD_REDIS_URL` for it.
    pub fn url(&self) -> String {
        match self {
            Topology::Cluster(c) => c.url(),
            Topology::Sentinel(s) => s.url(),
        }
    }

    /// Until the topology is whole again (see each kind's `wait_healthy`).
    pub fn wait_healthy(&self) {
        match self {
            Topology::Cluster(c) => c.wait_healthy(),
            Topology::Sentinel(s) => s.wait_healthy(),
        }
    }

    /// Every data node (primaries and replicas, not Sentinels).
    pub fn data_nodes(&self) -> Vec<&RedisServer> {
        match self {
            Topology::Cluster(c) => c.nodes.iter().collect(),
            Topology::Sentinel(s) => s.data.iter().collect(),
        }
    }
}

/// The topology shared by this test process's contract tests, started once, on a thread that
/// never exits (the servers die with the process, see `RedisServer`).
pub fn shared(cluster: bool) -> &'static Topology {
    static CLUSTER: OnceLock<&'static Topology> = OnceLock::new();
    static SENTINEL: OnceLock<&'static Topology> = OnceLock::new();
    let cell = if cluster { &CLUSTER } else { &SENTINEL };
    cell.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let t: &'static Topology = Box::leak(Box::new(Topology::start(cluster)));
            let _ = tx.send(t);
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("topology started")
    })
}

#[test]
fn cluster_slot_ranges_are_read() {
    let line = "abc 127.0.0.1:1@2 myself,master - 0 0 1 connected 0-5460 6000 7000-7001";
    assert!(owns(line, 0) && owns(line, 5460) && owns(line, 6000) && owns(line, 7001));
    assert!(!owns(line, 5461) && !owns(line, 6999));
}
