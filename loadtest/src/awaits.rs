//! The `await` scenario: wake latency across replicas with many awaits parked.
//!
//! 1. create `waiters` approvals on `--url` (`concurrency` workers);
//! 2. open one connection per waiter (at most 64 connects in flight) and park
//!    `GET /v1/elicitations/{id}/await?waitSeconds=W` on `--url`, W = hold + 30 s (≤ 60);
//! 3. wait until the replica's `elicitd_awaits_parked` gauge (its `/metrics`) shows them all
//!    (30 s at most; skipped if `/metrics` is not served there), then hold `--hold`;
//! 4. decide every one with `POST {decide-url}/v1/reviews/{token}` `{"decision":"submitted"}`
//!    (`concurrency` workers; `--decide-rate` paces them, all together, to that many per
//!    second), noting when each decision was sent and when it returned;
//! 5. every await must answer 200 `submitted`; its wake latency is the time its answer arrived
//!    minus the time its decision was *sent* (headline; an upper bound that includes the
//!    decision's own processing) and minus the time the decision *returned* (clamped at 0).

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use hyper::Method;
use tokio::{sync::Semaphore, time::Instant};

use crate::{
    http::Target,
    progress::Progress,
    scenarios::{call, seed, Created},
    stats::{Ops, Recorder, Report, WakeStats},
    Error, Options,
};

/// Connects in flight while parking (keeps the listener's accept backlog from overflowing).
const CONNECTS_IN_FLIGHT: usize = 64;
/// How long to wait for the parked gauge to reach the number of waiters.
const PARK_WAIT: Duration = Duration::from_secs(30);

/// What one waiter saw: its await answer and when it arrived.
struct Woke {
    status: Option<String>,
    arrived: Instant,
}

pub(crate) async fn run(
    opts: &Options,
    target: &Target,
    decide: &Target,
    waiters: usize,
    hold: Duration,
    decide_rate: u32,
) -> Result<Report, Error> {
    if waiters == 0 {
        return Err(Error("--waiters must be at least 1".into()));
    }
    let window = hold.as_secs() + 30;
    if window > 60 {
        return Err(Error(
            "--hold must be at most 30s (the await window is ≤ 60 s)".into(),
        ));
    }
    let mut progress = Progress::start("await", opts.progress, None);
    let counters = progress.counters.clone();
    let started = Instant::now();
    progress.counters.phase("creating");
    let mut ops = Ops::default();
    let created = seed(opts, target, waiters, &counters, &mut ops).await?;

    // Park one await per elicitation, each on its own connection.
    progress.counters.phase("parking");
    let connects = Arc::new(Semaphore::new(CONNECTS_IN_FLIGHT));
    let timeout = Duration::from_secs(window) + opts.timeout;
    let mut tasks = Vec::with_capacity(created.len());
    for c in &created {
        let (target, counters, connects) = (target.clone(), counters.clone(), connects.clone());
        let path = format!("/v1/elicitations/{}/await?waitSeconds={window}", c.id);
        tasks.push(tokio::spawn(async move {
            let mut rec = Recorder::default();
            let mut conn = target.conn();
            {
                let _permit = connects.acquire().await;
                if let Err(f) = conn.connect().await {
                    rec.err(f.kind());
                    counters.count(false);
                    return (
                        rec,
                        Woke {
                            status: None,
                            arrived: Instant::now(),
                        },
                    );
                }
            }
            let reply = call(
                &mut conn,
                &mut rec,
                &counters,
                Method::GET,
                &path,
                None,
                true,
                200,
                timeout,
            )
            .await;
            let arrived = Instant::now();
            let status = reply.map(|r| r.json()["status"].as_str().unwrap_or("?").to_string());
            (rec, Woke { status, arrived })
        }));
    }
    let parked_seen = wait_parked(target, waiters).await;
    progress.counters.phase("holding");
    tokio::time::sleep(hold).await;

    // Decide all through the other replica.
    progress.counters.phase("deciding");
    let decide_started = Instant::now();
    let created = Arc::new(created);
    let next = Arc::new(AtomicUsize::new(0));
    let mut deciders = Vec::new();
    for _ in 0..opts.concurrency.min(created.len()) {
        let (decide, counters, created, next, timeout) = (
            decide.clone(),
            counters.clone(),
            created.clone(),
            next.clone(),
            opts.timeout,
        );
        deciders.push(tokio::spawn(async move {
            let mut conn = decide.conn();
            let mut rec = Recorder::default();
            let mut times = Vec::new();
            let body = Bytes::from_static(br#"{"decision":"submitted"}"#);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(Created { token, .. }) = created.get(i) else {
                    break;
                };
                if decide_rate > 0 {
                    // Decision i is due i / rate after the phase began.
                    let due =
                        decide_started + Duration::from_secs_f64(i as f64 / f64::from(decide_rate));
                    tokio::time::sleep_until(due).await;
                }
                let sent = Instant::now();
                let path = format!("/v1/reviews/{token}");
                let ok = call(
                    &mut conn,
                    &mut rec,
                    &counters,
                    Method::POST,
                    &path,
                    Some(body.clone()),
                    false,
                    200,
                    timeout,
                )
                .await
                .is_some();
                times.push((i, sent, Instant::now(), ok));
            }
            (rec, times)
        }));
    }
    let mut decided = vec![None; created.len()];
    for d in deciders {
        let (rec, times) = d
            .await
            .map_err(|e| Error(format!("decide worker failed: {e}")))?;
        ops.op("decide").merge(&rec);
        for (i, sent, returned, ok) in times {
            decided[i] = ok.then_some((sent, returned));
        }
    }
    let decide_phase = decide_started.elapsed();

    // Collect the wake-ups.
    progress.counters.phase("collecting");
    let mut from_sent = Recorder::default();
    let mut from_returned = Recorder::default();
    let (mut woken, mut early) = (0u64, 0u64);
    for (i, t) in tasks.into_iter().enumerate() {
        let (rec, woke) = t
            .await
            .map_err(|e| Error(format!("await worker failed: {e}")))?;
        ops.op("await").merge(&rec);
        let (Some(status), Some((sent, returned))) = (woke.status, decided[i]) else {
            continue; // the failed request is already counted
        };
        if status != "submitted" || woke.arrived < sent {
            ops.op("await")
                .check_failed(format!("await: woke with {status}"));
            continue;
        }
        woken += 1;
        from_sent.ok(woke.arrived - sent);
        if woke.arrived < returned {
            early += 1;
            from_returned.ok(Duration::ZERO);
        } else {
            from_returned.ok(woke.arrived - returned);
        }
    }
    progress.finish();
    let mut report = Report::build(
        "await",
        &opts.url,
        opts.client,
        opts.concurrency,
        ("wake latency (await answer − decision sent)", &from_sent),
        &ops,
        started.elapsed(),
    );
    report.wake = Some(WakeStats {
        waiters: waiters as u64,
        woken,
        parked_seen,
        hold_s: hold.as_secs_f64(),
        decide_phase_s: decide_phase.as_secs_f64(),
        from_sent: from_sent.stats(),
        from_returned: from_returned.stats(),
        woke_before_decide_returned: early,
    });
    Ok(report)
}

/// Poll the replica's `/metrics` until `elicitd_awaits_parked` ≥ `n` (or 30 s); the highest
/// value seen, or `None` when `/metrics` is not served there.
async fn wait_parked(target: &Target, n: usize) -> Option<u64> {
    let deadline = Instant::now() + PARK_WAIT;
    let mut conn = target.conn();
    let mut best = None;
    loop {
        let reply = conn
            .request(Method::GET, "/metrics", None, false, Duration::from_secs(5))
            .await;
        let parked = match reply {
            Ok(r) if r.status == 200 => parked_gauge(&String::from_utf8_lossy(&r.body)),
            _ => None,
        };
        let Some(p) = parked else {
            // No metrics here: give the connections a moment and go on.
            tokio::time::sleep(Duration::from_secs(1)).await;
            return best;
        };
        best = best.max(Some(p));
        if p >= n as u64 || Instant::now() >= deadline {
            return best;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `elicitd_awaits_parked <value>` from a Prometheus text exposition.
fn parked_gauge(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("elicitd_awaits_parked "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v.max(0.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parked_gauge() {
        let text = "# TYPE elicitd_awaits_parked gauge\nelicitd_awaits_parked 1234\nother 1\n";
        assert_eq!(parked_gauge(text), Some(1234));
        assert_eq!(parked_gauge("nothing"), None);
    }
}
