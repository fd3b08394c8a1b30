//! A webhook receiver for the tests: a real HTTP server on a free port that records every
//! request (headers, body, arrival time) and answers as told — a status, a status with
//! `Retry-After`, or holding the request open for a while first.

use std::{
    collections::{HashMap, VecDeque},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use serde_json::{json, Value};

/// How the receiver answers one request (then the next one in the plan; 200 when none left).
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    RetryAfter(u16, u64),
    /// Hold the request this long, then answer 200 (if the caller is still there).
    Hold(Duration),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: String,
    pub at: Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    pub fn id(&self) -> &str {
        self.headers.get("webhook-id").map_or("", String::as_str)
    }
}

#[derive(Clone, Default)]
struct Shared {
    got: Arc<Mutex<Vec<Received>>>,
    plan: Arc<Mutex<VecDeque<Reply>>>,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

async fn receive(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let headers = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    s.got.lock().unwrap().push(Received {
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
        at: Instant::now(),
    });
    let reply = s.plan.lock().unwrap().pop_front();
    match reply {
        None => StatusCode::OK.into_response(),
        Some(Reply::Status(c)) => StatusCode::from_u16(c).unwrap().into_response(),
        Some(Reply::RetryAfter(c, secs)) => (
            StatusCode::from_u16(c).unwrap(),
            [("retry-after", secs.to_string())],
        )
            .into_response(),
        Some(Reply::Hold(d)) => {
            tokio::time::sleep(d).await;
            StatusCode::OK.into_response()
        }
    }
}

impl Receiver {
    /// Listen on `port` (0: any free one), answering per `plan`.
    pub async fn start_on(port: u16, plan: Vec<Reply>) -> Receiver {
        let shared = Shared::default();
        shared.plan.lock().unwrap().extend(plan);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/hook", post(receive))
            // Any other path too (a Slack incoming-webhook URL has its own).
            .fallback(post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, shared, task }
    }

    pub async fn start(plan: Vec<Reply>) -> Receiver {
        Self::start_on(0, plan).await
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn got(&self) -> Vec<Received> {
        self.shared.got.lock().unwrap().clone()
    }

    /// Wait until `n` requests arrived (or fail after `timeout`).
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver got {} of {n} requests: {:?}",
                got.len(),
                got.iter().map(|r| r.body.clone()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Verify `messages` with the official Standard Webhooks library (Python); panics on any
    /// failure. Returns `false` (after reporting a skip) when Python is missing outside CI.
    pub fn verify_with_standardwebhooks(secret: &str, messages: &[Received]) -> bool {
        use super::prereq;
        if prereq::find(&["python3"]).is_none() {
            prereq::skip_or_fail(
                "standardwebhooks verification",
                "python3",
                prereq::PYTHON_INSTALL,
            );
            return false;
        }
        let deps = prereq::ensure_python_deps().unwrap_or_else(|e| panic!("{e}"));
        let file = tempfile::NamedTempFile::new().unwrap();
        let list: Vec<Value> = messages
            .iter()
            .map(|m| json!({"headers": m.headers, "body": m.body}))
            .collect();
        std::fs::write(file.path(), serde_json::to_string(&list).unwrap()).unwrap();
        let out = std::process::Command::new("python3")
            .arg(prereq::py_dir().join("verify_webhooks.py"))
            .arg(secret)
            .arg(file.path())
            .env("PYTHONPATH", deps)
            .output()
            .expect("run python3");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "standardwebhooks rejected a message:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.lines().count(), messages.len(), "{stdout}");
        true
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
