//! Test harness: real `redis-server` processes on free ports, in-process replicas on port 0
//! (each with its own Redis clients and waiter hub, exactly like separate processes), the real
//! binary when a test needs signals, and a small HTTP client.

use std::{
    net::TcpListener as StdListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

pub mod browser;
pub mod prereq;
pub mod receiver;
pub mod smtp;
pub mod topology;

use elicitd::{config::Config, server, service::Service};
use serde_json::{json, Value};
use tokio::{sync::oneshot, task::JoinHandle};

pub const ACME_KEY: &str = "acme-key-0123456789abcdef";
pub const BETA_KEY: &str = "beta-key-0123456789abcdef";

/// Find `redis-server` on `path` (a `PATH`-style list), or explain how to get it.
pub fn find_redis_server(path: &str) -> Result<PathBuf, String> {
    std::env::split_paths(path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "redis-server not found on PATH: these tests start their own Redis. Install it \
             (Debian: apt-get install redis-server) or run .ci/run, which does."
                .to_string()
        })
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Spawn `cmd` from one thread that lives as long as the test process. `PR_SET_PDEATHSIG`
/// fires when the *thread* that forked the child exits, and test threads (and tokio's
/// blocking-pool threads, after 10 s idle) come and go.
fn spawn_for_life(cmd: Command) -> std::io::Result<Child> {
    use std::sync::{mpsc, Mutex, OnceLock};
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        });
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    tx.lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply))
        .map_err(std::io::Error::other)?;
    answer.recv().map_err(std::io::Error::other)?
}

/// A `redis-server` owned by one test (or one shared topology); killed on drop, and with the
/// test process (`PR_SET_PDEATHSIG`, see [`spawn_for_life`]), so a failed or aborted run
/// leaves nothing behind.
pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: std::sync::Mutex<Option<Child>>,
    aof: bool,
    /// More `redis-server` arguments (cluster mode, replication, a config file for Sentinel).
    extra: Vec<String>,
}

impl RedisServer {
    /// Start on a free port without persistence.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Start with AOF (`appendfsync always`) so a SIGKILL + restart keeps every write.
    pub fn start_with(aof: bool) -> Self {
        Self::start_on(free_port(), aof, Vec::new())
    }

    /// Start on `port` with `extra` arguments.
    pub fn start_on(port: u16, aof: bool, extra: Vec<String>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let s = RedisServer {
            port,
            dir,
            child: std::sync::Mutex::new(None),
            aof,
            extra,
        };
        s.spawn();
        s
    }

    fn spawn(&self) {
        use std::os::unix::process::CommandExt;
        let bin = find_redis_server(&std::env::var("PATH").unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(bin);
        // A config file (an absolute path, e.g. a Sentinel's) must come first.
        let (positional, flags): (Vec<&String>, Vec<&String>) =
            self.extra.iter().partition(|a| a.starts_with('/'));
        cmd.args(positional)
            .arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--appendonly", if self.aof { "yes" } else { "no" }])
            .args(["--appendfsync", "always"])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        *self.child.lock().unwrap() = Some(spawn_for_life(cmd).expect("spawn redis-server"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.cli(&["PING"]).as_deref() != Some("PONG") {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Run one command with `redis-cli`; `None` if it failed to connect.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "--no-raw"])
            .args(args)
            .output()
            .ok()?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || s.starts_with("Could not connect") {
            return None;
        }
        let s = s.strip_prefix("(integer) ").unwrap_or(&s);
        Some(s.trim_matches('"').to_string())
    }

    /// One `INFO` field (e.g. `role`, `master_link_status`), if the server answers.
    pub fn info(&self, field: &str) -> Option<String> {
        let info = self.cli(&["INFO"])?;
        info.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{field}:"))
                .map(str::to_string)
        })
    }

    /// SIGKILL the server (no shutdown save).
    pub fn kill(&self) {
        let child = self.child.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut c) = child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The running server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    /// Freeze (`SIGSTOP`) or thaw (`SIGCONT`) the process: a server that stops answering
    /// without closing its sockets.
    pub fn freeze(&self, frozen: bool) {
        if let Some(c) = &*self.child.lock().unwrap_or_else(|p| p.into_inner()) {
            let sig = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(c.id() as libc::pid_t, sig) };
        }
    }

    /// Start again on the same port and directory (AOF reloads the data; a cluster node keeps
    /// its `nodes.conf`).
    pub fn restart(&self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.freeze(false);
        self.kill();
    }
}

/// The real `elicitd` binary on a free port with `redis` and the acme key, ready to serve.
/// `extra` env vars are added; `logs` captures stdout/stderr (else they are discarded).
pub async fn spawn_binary(redis: &RedisServer, extra: &[(&str, &str)], logs: bool) -> (Child, Api) {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_elicitd"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("ELICITD_LISTEN", format!("127.0.0.1:{port}"))
        .env("ELICITD_REDIS_URL", redis.url())
        .env("ELICITD_API_KEYS", format!("acme:{ACME_KEY}"))
        .env("ELICITD_LOG_FORMAT", "json");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = || if logs { Stdio::piped() } else { Stdio::null() };
    let child = cmd
        .stdout(out())
        .stderr(out())
        .spawn()
        .expect("spawn elicitd");
    let api = Api::new(&format!("http://127.0.0.1:{port}"), ACME_KEY);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{}/readyz", api.base))
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "elicitd did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, api)
}

/// Which store (and Redis topology) an app runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Memory,
    /// One `redis-server` of the test's own.
    Redis,
    /// Three primaries with a replica each ([`topology::RedisCluster`]).
    Cluster,
    /// A primary, two replicas and three Sentinels ([`topology::RedisSentinel`]).
    Sentinel,
}

/// The Redis a fixture runs on: its own, or the process-wide shared one of its kind.
pub enum Held {
    Own(topology::Topology),
    Shared(&'static topology::Topology),
}

impl std::ops::Deref for Held {
    type Target = topology::Topology;
    fn deref(&self) -> &topology::Topology {
        match self {
            Held::Own(t) => t,
            Held::Shared(t) => t,
        }
    }
}

/// A test configuration: two tenants, fast deadlines allowed.
pub fn test_config(redis_url: Option<String>, prefix: &str) -> Config {
    let mut c = Config::with_keys(&[("acme", ACME_KEY), ("beta", BETA_KEY)]);
    c.redis_url = redis_url;
    c.key_prefix = prefix.to_string();
    c.min_expires_secs = 1;
    // Tests (and the load-test smoke runs) create in bursts; tests/it/limits.rs sets its own.
    c.create_rate_per_sec = 0;
    c
}

/// One in-process replica.
pub struct App {
    pub base: String,
    pub service: Service,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl App {
    pub async fn start(mut config: Config) -> App {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        config.listen = addr;
        config.public_url = format!("http://{addr}");
        let service = server::build(config).await.expect("build service");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server::serve(listener, service.clone(), async move {
            let _ = rx.await;
        }));
        App {
            base: format!("http://{addr}"),
            service,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub fn api(&self, key: &str) -> Api {
        Api::new(&self.base, key)
    }

    /// Graceful stop; waits for the server to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Replicas on one store (and the Redis they share, if any).
pub struct Fixture {
    pub apps: Vec<App>,
    /// The standalone server of a `StoreKind::Redis` fixture.
    pub redis: Option<RedisServer>,
    /// The Cluster or Sentinel group of such a fixture.
    pub topo: Option<Held>,
    pub prefix: String,
}

impl Fixture {
    /// `n` replicas on `kind`. Memory fixtures have exactly one replica (one process). Cluster
    /// and Sentinel fixtures share one topology per test process (isolated by key prefix).
    pub async fn new(kind: StoreKind, n: usize) -> Fixture {
        Self::build(kind, n, false, |_| {}).await
    }

    /// Like [`new`](Self::new), but on a topology of the fixture's own (tests that count
    /// connections, kill or freeze nodes, or move slots), with `configure` applied to every
    /// replica's config.
    pub async fn own(kind: StoreKind, n: usize, configure: impl Fn(&mut Config)) -> Fixture {
        Self::build(kind, n, true, configure).await
    }

    /// Like [`new`](Self::new) (shared Cluster and Sentinel topologies), with `configure`
    /// applied to each replica's config in turn.
    pub async fn with(kind: StoreKind, n: usize, configure: impl Fn(&mut Config)) -> Fixture {
        Self::build(kind, n, false, configure).await
    }

    async fn build(
        kind: StoreKind,
        n: usize,
        own: bool,
        configure: impl Fn(&mut Config),
    ) -> Fixture {
        let prefix = format!("t{}", rand_suffix());
        let (redis, topo) = match kind {
            StoreKind::Memory => (None, None),
            StoreKind::Redis => (Some(RedisServer::start()), None),
            StoreKind::Cluster | StoreKind::Sentinel => {
                let cluster = kind == StoreKind::Cluster;
                let held = if own {
                    let t = tokio::task::spawn_blocking(move || topology::Topology::start(cluster))
                        .await
                        .expect("start topology");
                    Held::Own(t)
                } else {
                    Held::Shared(
                        tokio::task::spawn_blocking(move || topology::shared(cluster))
                            .await
                            .expect("shared topology"),
                    )
                };
                (None, Some(held))
            }
        };
        let url = redis
            .as_ref()
            .map(RedisServer::url)
            .or_else(|| topo.as_ref().map(|t| t.url()));
        let n = if kind == StoreKind::Memory { 1 } else { n };
        let mut apps = Vec::new();
        for _ in 0..n {
            let mut config = test_config(url.clone(), &prefix);
            configure(&mut config);
            apps.push(App::start(config).await);
        }
        Fixture {
            apps,
            redis,
            topo,
            prefix,
        }
    }

    /// Every Redis data node (not Sentinels) of this fixture.
    pub fn data_nodes(&self) -> Vec<&RedisServer> {
        match (&self.redis, &self.topo) {
            (Some(r), _) => vec![r],
            (None, Some(t)) => t.data_nodes(),
            (None, None) => Vec::new(),
        }
    }

    pub fn acme(&self) -> Api {
        self.apps[0].api(ACME_KEY)
    }
    pub fn beta(&self) -> Api {
        self.apps[0].api(BETA_KEY)
    }
    /// The last replica (another process' worth of clients when there are two).
    pub fn other(&self) -> Api {
        self.apps[self.apps.len() - 1].api(ACME_KEY)
    }
}

fn rand_suffix() -> String {
    uuid_like()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{}{}{}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A JSON response: status and body.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Resp {
    /// The SPEC §5 error code, if the body is an error.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn str(&self, field: &str) -> &str {
        self.body[field]
            .as_str()
            .unwrap_or_else(|| panic!("no string {field} in {}", self.body))
    }
}

/// HTTP client for one replica and one API key.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub key: String,
}

/// An elicitation created in a test.
#[derive(Debug, Clone)]
pub struct Created {
    pub id: String,
    pub token: String,
    pub body: Value,
}

impl Api {
    pub fn new(base: &str, key: &str) -> Api {
        Api {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(90))
                .build()
                .expect("client"),
            base: base.to_string(),
            key: key.to_string(),
        }
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> Resp {
        let r = rb.send().await.expect("request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp {
            status,
            body,
            headers,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(
            self.http
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.key),
        )
        .await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .json(body),
        )
        .await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Resp {
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .header("content-type", "application/json")
                .body(body),
        )
        .await
    }

    pub async fn post_empty(&self, path: &str) -> Resp {
        self.send(
            self.http
                .post(format!("{}{path}", self.base))
                .bearer_auth(&self.key),
        )
        .await
    }

    /// Create and assert 201.
    pub async fn create(&self, kind: &str, body: Value) -> Created {
        let r = self.post(&format!("/v1/{kind}s"), &body).await;
        assert_eq!(r.status, 201, "create {kind}: {}", r.body);
        let review_url = r.str("reviewUrl").to_string();
        Created {
            id: r.str("elicitationId").to_string(),
            token: review_url
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_string(),
            body: r.body.clone(),
        }
    }

    pub async fn approval(&self) -> Created {
        self.create(
            "approval",
            json!({"message": "Deploy v2?", "context": {"version": 2}}),
        )
        .await
    }

    pub async fn status(&self, id: &str) -> Resp {
        self.get(&format!("/v1/elicitations/{id}")).await
    }
    pub async fn wait(&self, id: &str, secs: u64) -> Resp {
        self.get(&format!("/v1/elicitations/{id}/await?waitSeconds={secs}"))
            .await
    }
    pub async fn result(&self, id: &str) -> Resp {
        self.post_empty(&format!("/v1/elicitations/{id}/result"))
            .await
    }
    pub async fn cancel(&self, id: &str) -> Resp {
        self.post_empty(&format!("/v1/elicitations/{id}/cancel"))
            .await
    }
    pub async fn audit(&self, id: &str) -> Resp {
        self.get(&format!("/v1/elicitations/{id}/audit")).await
    }
    /// The deliveries (webhooks, notifications) of `id`, oldest first.
    pub async fn deliveries(&self, id: &str) -> Vec<Value> {
        let r = self.get(&format!("/v1/elicitations/{id}/deliveries")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["deliveries"].as_array().unwrap().clone()
    }
    /// Poll the deliveries of `id` until `done` holds (panics after `timeout`).
    pub async fn deliveries_until(
        &self,
        id: &str,
        timeout: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let d = self.deliveries(id).await;
            if done(&d) {
                return d;
            }
            assert!(Instant::now() < deadline, "deliveries of {id}: {d:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    /// Reviewer decision over the JSON route (no API key involved).
    pub async fn decide(&self, token: &str, body: Value) -> Resp {
        self.send(
            self.http
                .post(format!("{}/v1/reviews/{token}", self.base))
                .json(&body),
        )
        .await
    }

    /// Status string of an elicitation.
    pub async fn status_of(&self, id: &str) -> String {
        let r = self.status(id).await;
        assert_eq!(r.status, 200, "status: {}", r.body);
        r.str("status").to_string()
    }
}

/// Instantiate async test fns `fn(StoreKind)` once per store and Redis topology: memory,
/// standalone Redis, Redis Cluster, Redis Sentinel — one suite, every topology.
#[macro_export]
macro_rules! every_store {
    ($($name:ident),* $(,)?) => {
        $crate::on_stores!(on_memory, Memory, $($name),*);
        $crate::every_redis!($($name),*);
    };
}

/// Instantiate async test fns `fn(StoreKind)` once per Redis topology.
#[macro_export]
macro_rules! every_redis {
    ($($name:ident),* $(,)?) => {
        $crate::on_stores!(on_redis, Redis, $($name),*);
        $crate::on_stores!(on_cluster, Cluster, $($name),*);
        $crate::on_stores!(on_sentinel, Sentinel, $($name),*);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! on_stores {
    ($module:ident, $kind:ident, $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name($crate::harness::StoreKind::$kind).await }
            )*
        }
    };
}

#[test]
fn missing_redis_server_fails_with_a_clear_message() {
    let err = find_redis_server("/nonexistent-dir").unwrap_err();
    assert!(err.contains("redis-server not found"), "{err}");
    assert!(err.contains("apt-get install redis-server"), "{err}");
    // And with the real PATH it is found (CI installs it).
    assert!(find_redis_server(&std::env::var("PATH").unwrap_or_default()).is_ok());
}
