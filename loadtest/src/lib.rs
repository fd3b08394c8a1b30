//! `elicitd-loadtest`: a load generator for elicitd's REST API, usable as a binary (see
//! `main.rs`) and as a library (the integration tests run every scenario for a second).
//!
//! Scenarios ([`Scenario`]):
//! - `healthz` — `GET /healthz` in a loop: the replica's HTTP ceiling, same client settings;
//! - `status` — seed some approvals, then `GET /v1/elicitations/{id}` in a loop;
//! - `create` — `POST /v1/approvals` in a loop;
//! - `await` — create N, park one `await` each on `--url`, hold, decide all through
//!   `--decide-url`, measure wake latency (await answer arrived − decision sent);
//! - `mixed` — agents that create, poll status, await, get decided by a reviewer on
//!   `--decide-url`, read the result (and sometimes cancel instead);
//! - `webhooks` — create N approvals whose `webhookUrl` points at a receiver in this process,
//!   decide them through `--decide-url`, measure delivery latency (webhook arrived − decision
//!   sent); `--no-webhook` runs the same without webhooks, for the cost.
//!
//! Every worker owns one connection (kept alive) and sends its requests one after another, so
//! `concurrency` is both the number of connections and of requests in flight. Workers record
//! into their own histograms; nothing is shared on the hot path but two atomic counters for
//! the progress line.
//!
//! Layout: `http.rs` (hyper / reqwest connections), `stats.rs` (histograms, report),
//! `progress.rs` (stderr progress line), `scenarios.rs` (healthz, status, create),
//! `awaits.rs`, `mixed.rs`, `webhooks.rs`.

mod awaits;
pub mod cpu;
pub mod http;
mod mixed;
mod progress;
mod scenarios;
pub mod stats;
mod webhooks;

use std::time::Duration;

pub use http::ClientKind;
pub use stats::{OpStats, Report, WakeStats};

/// Settings shared by every scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// Base URL of the replica under test, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// API key sent as `Authorization: Bearer <key>`.
    pub api_key: String,
    /// Workers (= connections = requests in flight).
    pub concurrency: usize,
    /// Length of the measured phase (`await`: ignored; see `hold`).
    pub duration: Duration,
    pub client: ClientKind,
    /// Print a progress line on stderr.
    pub progress: bool,
    /// Per-request timeout (long-polls get their window plus this).
    pub timeout: Duration,
    /// CPU metering of the measured phase (healthz, status, create).
    pub cpu: cpu::CpuProbe,
}

impl Options {
    /// Defaults for `url` and `api_key`: 32 workers, 10 s, hyper, no progress, 30 s timeout.
    pub fn new(url: &str, api_key: &str) -> Options {
        Options {
            url: url.into(),
            api_key: api_key.into(),
            concurrency: 32,
            duration: Duration::from_secs(10),
            client: ClientKind::Hyper,
            progress: false,
            timeout: Duration::from_secs(30),
            cpu: cpu::CpuProbe::default(),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub enum Scenario {
    /// `GET /healthz` in a loop.
    Healthz,
    /// Seed `seed` approvals, then poll their status in a loop.
    Status { seed: usize },
    /// Create approvals in a loop.
    Create,
    /// Park `waiters` awaits on `url`, hold them `hold`, decide all through `decide_url`
    /// (`decide_rate` per second; 0 = as fast as the deciders go).
    Await {
        waiters: usize,
        hold: Duration,
        decide_url: String,
        decide_rate: u32,
    },
    /// The agent-platform mix; reviewers decide through `decide_url`.
    Mixed { decide_url: String },
    /// Create `count` approvals with a `webhookUrl` on a receiver listening on `receiver`
    /// (`None`: no webhooks), decide all through `decide_url`, time the deliveries.
    Webhooks {
        count: usize,
        decide_url: String,
        receiver: Option<std::net::SocketAddr>,
    },
}

impl Scenario {
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Healthz => "healthz",
            Scenario::Status { .. } => "status",
            Scenario::Create => "create",
            Scenario::Await { .. } => "await",
            Scenario::Mixed { .. } => "mixed",
            Scenario::Webhooks { .. } => "webhooks",
        }
    }
}

/// A run that could not happen (bad URL, seeding failed, …). Request failures during the
/// measured phase are not this: they are counted in the [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Run one scenario and report.
pub async fn run(opts: &Options, scenario: &Scenario) -> Result<Report, Error> {
    if opts.concurrency == 0 {
        return Err(Error("--concurrency must be at least 1".into()));
    }
    let target = http::Target::new(&opts.url, &opts.api_key, opts.client).map_err(Error)?;
    let mut report = run_on(opts, scenario, target).await?;
    report.cpu_us_per_request = opts.cpu.per_request(report.requests);
    Ok(report)
}

async fn run_on(
    opts: &Options,
    scenario: &Scenario,
    target: http::Target,
) -> Result<Report, Error> {
    match scenario {
        Scenario::Healthz => scenarios::healthz(opts, &target).await,
        Scenario::Status { seed } => scenarios::status(opts, &target, *seed).await,
        Scenario::Create => scenarios::create(opts, &target).await,
        Scenario::Await {
            waiters,
            hold,
            decide_url,
            decide_rate,
        } => {
            let decide =
                http::Target::new(decide_url, &opts.api_key, opts.client).map_err(Error)?;
            awaits::run(opts, &target, &decide, *waiters, *hold, *decide_rate).await
        }
        Scenario::Mixed { decide_url } => {
            let decide =
                http::Target::new(decide_url, &opts.api_key, opts.client).map_err(Error)?;
            mixed::run(opts, &target, &decide).await
        }
        Scenario::Webhooks {
            count,
            decide_url,
            receiver,
        } => {
            let decide =
                http::Target::new(decide_url, &opts.api_key, opts.client).map_err(Error)?;
            webhooks::run(opts, &target, &decide, *count, *receiver).await
        }
    }
}

/// Parse `500ms`, `5s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'));
    let (num, unit) = s.split_at(split.unwrap_or(s.len()));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (try 500ms, 5s, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (ms, s, m, h)")),
    };
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("duration out of range: {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
