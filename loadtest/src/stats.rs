//! Latency and error bookkeeping: one [`Recorder`] per worker (no locks on the hot path),
//! merged into a [`Report`] at the end; the report prints as JSON or as a readable summary
//! with a latency histogram.
//!
//! Latencies are recorded in microseconds in an HdrHistogram (3 significant digits, 1 µs to
//! 10 min), so percentiles are exact to 0.1 %. Errors are counted by kind: `http <status>`,
//! `transport: connect|timeout|io`, or a scenario-specific check (`await: woke with pending`).

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use hdrhistogram::Histogram;
use serde::Serialize;

const MAX_US: u64 = 600_000_000;

fn new_histogram() -> Histogram<u64> {
    // Constant, valid bounds: `new_with_bounds` only fails for low < 1, high < 2 × low or
    // more than 5 significant digits.
    match Histogram::new_with_bounds(1, MAX_US, 3) {
        Ok(h) => h,
        Err(e) => unreachable!("constant histogram bounds: {e}"),
    }
}

/// Successes (with latency) and errors (by kind) of one kind of request.
#[derive(Clone)]
pub struct Recorder {
    pub hist: Histogram<u64>,
    pub errors: BTreeMap<String, u64>,
    /// Errors that were answers failing a check (already counted as requests by `hist`).
    checks: u64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            hist: new_histogram(),
            errors: BTreeMap::new(),
            checks: 0,
        }
    }
}

impl Recorder {
    /// A successful request and its latency.
    pub fn ok(&mut self, latency: Duration) {
        let us = (latency.as_micros() as u64).clamp(1, MAX_US);
        let _ = self.hist.record(us);
    }

    /// A failed request (its latency is not recorded).
    pub fn err(&mut self, kind: impl Into<String>) {
        *self.errors.entry(kind.into()).or_default() += 1;
    }

    /// An answer that arrived (and was recorded by [`Recorder::ok`]) but was wrong.
    pub fn check_failed(&mut self, kind: impl Into<String>) {
        self.err(kind);
        self.checks += 1;
    }

    pub fn merge(&mut self, other: &Recorder) {
        let _ = self.hist.add(&other.hist);
        self.checks += other.checks;
        for (k, n) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += n;
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn requests(&self) -> u64 {
        self.hist.len() + self.error_count() - self.checks
    }

    /// Percentile summary in milliseconds.
    pub fn stats(&self) -> OpStats {
        let ms = |us: u64| us as f64 / 1000.0;
        let empty = self.hist.is_empty();
        let q = |p: f64| {
            if empty {
                0.0
            } else {
                ms(self.hist.value_at_quantile(p))
            }
        };
        OpStats {
            requests: self.requests(),
            errors: self.error_count(),
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p99_ms: q(0.99),
            p999_ms: q(0.999),
            max_ms: if empty { 0.0 } else { ms(self.hist.max()) },
            mean_ms: if empty {
                0.0
            } else {
                self.hist.mean() / 1000.0
            },
        }
    }
}

/// Per-operation recorders of one worker, keyed by operation name.
#[derive(Clone, Default)]
pub struct Ops(pub BTreeMap<&'static str, Recorder>);

impl Ops {
    pub fn op(&mut self, name: &'static str) -> &mut Recorder {
        self.0.entry(name).or_default()
    }

    pub fn merge(&mut self, other: &Ops) {
        for (k, r) in &other.0 {
            self.op(k).merge(r);
        }
    }

    /// All operations in one recorder.
    pub fn total(&self) -> Recorder {
        let mut t = Recorder::default();
        for r in self.0.values() {
            t.merge(r);
        }
        t
    }
}

/// Percentiles of one operation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpStats {
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// Wake-up figures of the `await` scenario.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WakeStats {
    /// Awaits started.
    pub waiters: u64,
    /// Awaits that answered with the decided status after their decision.
    pub woken: u64,
    /// Highest `elicitd_awaits_parked` seen on the await replica before the decisions
    /// (`null` if its `/metrics` was not readable).
    pub parked_seen: Option<u64>,
    pub hold_s: f64,
    /// Time to send all decisions.
    pub decide_phase_s: f64,
    /// await answer arrived − its decision request was sent (the headline figure).
    pub from_sent: OpStats,
    /// await answer arrived − its decision request's answer arrived (0 when the await came first).
    pub from_returned: OpStats,
    /// How many awaits answered before their own decision request did.
    pub woke_before_decide_returned: u64,
}

/// The result of one scenario run (`--json` prints exactly this).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub url: String,
    pub client: crate::http::ClientKind,
    pub concurrency: usize,
    /// Length of the measured phase (seeding excluded), seconds.
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// requests / duration_s.
    pub rps: f64,
    /// What p50…max measure: `request latency` or `wake latency (from decision sent)`.
    pub latency: String,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Per operation (create, status, await, decide, result, cancel, …).
    pub ops: BTreeMap<String, OpStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake: Option<WakeStats>,
    /// CPU µs per request of the measured phase: `generator` (this tool) and every process
    /// named with `--cpu label=pid` (healthz, status and create only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<BTreeMap<String, f64>>,
    /// Scenario-specific figures (`webhooks`: phase rates, deliveries received).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
    /// Buckets for the text histogram: (upper bound ms, count).
    #[serde(skip)]
    pub buckets: Vec<(f64, u64)>,
}

/// Upper bounds (ms) of the text histogram's rows.
const ROWS_MS: &[f64] = &[
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
    10000.0, 30000.0, 60000.0, 600000.0,
];

impl Report {
    /// Build from the recorder whose latencies are the headline, the per-op recorders, and
    /// the measured duration.
    pub fn build(
        scenario: &str,
        url: &str,
        client: crate::http::ClientKind,
        concurrency: usize,
        headline: (&str, &Recorder),
        ops: &Ops,
        elapsed: Duration,
    ) -> Report {
        let total = ops.total();
        let (latency, h) = headline;
        let s = h.stats();
        let secs = elapsed.as_secs_f64().max(1e-9);
        let mut buckets = Vec::new();
        let mut lo = 0u64;
        for &hi_ms in ROWS_MS {
            let hi = (hi_ms * 1000.0) as u64;
            let n = if h.hist.is_empty() {
                0
            } else {
                h.hist.count_between(lo + 1, hi)
            };
            buckets.push((hi_ms, n));
            lo = hi;
        }
        Report {
            scenario: scenario.into(),
            url: url.into(),
            client,
            concurrency,
            duration_s: secs,
            requests: total.requests(),
            errors: total.error_count(),
            errors_by_kind: total.errors.clone(),
            rps: total.requests() as f64 / secs,
            latency: latency.into(),
            p50_ms: s.p50_ms,
            p90_ms: s.p90_ms,
            p99_ms: s.p99_ms,
            p999_ms: s.p999_ms,
            max_ms: s.max_ms,
            mean_ms: s.mean_ms,
            ops: ops
                .0
                .iter()
                .map(|(k, r)| (k.to_string(), r.stats()))
                .collect(),
            wake: None,
            cpu_us_per_request: None,
            extra: None,
            buckets,
        }
    }

    /// The readable summary (no `--json`).
    pub fn summary(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario {}  url {}  client {}  concurrency {}",
            self.scenario, self.url, self.client, self.concurrency
        );
        let _ = writeln!(
            o,
            "{} requests in {:.2} s = {:.0} req/s, {} errors",
            self.requests, self.duration_s, self.rps, self.errors
        );
        for (k, n) in &self.errors_by_kind {
            let _ = writeln!(o, "  error {k}: {n}");
        }
        let _ = writeln!(
            o,
            "{}: p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms  mean {:.3} ms",
            self.latency, self.p50_ms, self.p90_ms, self.p99_ms, self.p999_ms, self.max_ms, self.mean_ms
        );
        if let Some(w) = &self.wake {
            let _ = writeln!(
                o,
                "await: {} waiters, {} woken with the decided status, parked seen {}, held {:.1} s, decisions sent in {:.2} s",
                w.waiters,
                w.woken,
                w.parked_seen.map_or("?".to_string(), |n| n.to_string()),
                w.hold_s,
                w.decide_phase_s
            );
            let _ = writeln!(
                o,
                "wake from decision returned: p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms ({} awaits answered before their decision did)",
                w.from_returned.p50_ms, w.from_returned.p99_ms, w.from_returned.max_ms, w.woke_before_decide_returned
            );
        }
        if let Some(c) = &self.cpu_us_per_request {
            let parts: Vec<String> = c.iter().map(|(l, us)| format!("{l} {us:.1}")).collect();
            let _ = writeln!(o, "CPU µs per request: {}", parts.join("  "));
        }
        if let Some(x) = &self.extra {
            let _ = writeln!(o, "{x}");
        }
        let _ = writeln!(o, "\nper operation:");
        let _ = writeln!(
            o,
            "  {:<8} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9}",
            "op", "requests", "errors", "p50 ms", "p99 ms", "max ms", "mean ms"
        );
        for (k, s) in &self.ops {
            let _ = writeln!(
                o,
                "  {:<8} {:>9} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                k, s.requests, s.errors, s.p50_ms, s.p99_ms, s.max_ms, s.mean_ms
            );
        }
        let _ = writeln!(o, "\n{} histogram:", self.latency);
        let total: u64 = self.buckets.iter().map(|b| b.1).sum();
        let peak = self.buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1);
        let first = self.buckets.iter().position(|b| b.1 > 0).unwrap_or(0);
        let last = self.buckets.iter().rposition(|b| b.1 > 0).unwrap_or(0);
        for (hi, n) in self.buckets.iter().take(last + 1).skip(first) {
            let bar = "#".repeat(((*n as f64 / peak as f64) * 50.0).ceil() as usize);
            let pct = if total == 0 {
                0.0
            } else {
                *n as f64 * 100.0 / total as f64
            };
            let _ = writeln!(o, "  ≤ {hi:>8} ms {n:>9} {pct:>5.1}% {bar}");
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_counts_and_merges() {
        let mut a = Recorder::default();
        a.ok(Duration::from_micros(500));
        a.ok(Duration::from_millis(3));
        a.err("http 500");
        let mut b = Recorder::default();
        b.err("http 500");
        b.err("transport: io");
        b.ok(Duration::from_millis(1));
        b.check_failed("status: pending");
        a.merge(&b);
        let s = a.stats();
        assert_eq!((s.requests, s.errors), (6, 4));
        assert!((s.max_ms - 3.0).abs() < 0.01, "{s:?}");
        assert_eq!(a.errors["http 500"], 2);
    }

    #[test]
    fn report_summary_has_a_histogram() {
        let mut ops = Ops::default();
        for us in [150, 900, 900, 4000] {
            ops.op("status").ok(Duration::from_micros(us));
        }
        let total = ops.total();
        let r = Report::build(
            "status",
            "http://x",
            crate::http::ClientKind::Hyper,
            2,
            ("request latency", &total),
            &ops,
            Duration::from_secs(2),
        );
        assert_eq!((r.requests, r.errors), (4, 0));
        assert!((r.rps - 2.0).abs() < 1e-9);
        let text = r.summary();
        assert!(
            text.contains("≤        1 ms         2  50.0% ####"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        for k in ["rps", "p50_ms", "p99_ms", "max_ms", "errors", "requests"] {
            assert!(json.get(k).is_some(), "{k} missing in {json}");
        }
    }
}
