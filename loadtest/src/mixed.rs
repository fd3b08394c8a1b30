//! The `mixed` scenario: what an agent platform does. Each of `concurrency` agents loops:
//!
//! 1. create an approval, a selection or a proposal (in turn) on `--url`;
//! 2. poll its status three times;
//! 3. one request in ten: cancel it and poll once more (expects `canceled`); otherwise a reviewer
//!    decides it through `--decide-url` after 5–50 ms (one in four declines) while the agent
//!    parks `await` on `--url` (must answer the decided status), then reads `result`.
//!
//! Per iteration: 1 create, 3–4 status, 1 await + 1 decide + 1 result (or 1 cancel). The
//! headline percentiles cover every request except `await` (its latency is the reviewer's
//! delay); `await` has its own row.

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::json;
use tokio::time::Instant;

use crate::{
    http::{Conn, Target},
    progress::{Counters, Progress},
    scenarios::{call, parse_created, timed},
    stats::{Ops, Recorder, Report},
    Error, Options,
};

const WAIT_SECONDS: u64 = 10;

/// A tiny xorshift so each agent's reviewer delays differ without a `rand` dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Body of the create for iteration `n`, its path, and the reviewer's submit body.
fn request(n: u64, agent: usize) -> (&'static str, serde_json::Value, serde_json::Value) {
    let message = format!("Agent {agent} asks: may I proceed with step {n}?");
    match n % 3 {
        0 => (
            "/v1/approvals",
            json!({"message": message, "context": {"step": n, "amount": 42.5}, "expiresInSeconds": 900}),
            json!({"decision": "submitted", "comment": "ok"}),
        ),
        1 => (
            "/v1/selections",
            json!({"message": message, "expiresInSeconds": 900, "options": [
                {"id": "eu", "label": "Europe"}, {"id": "us", "label": "United States"}, {"id": "ap"}]}),
            json!({"decision": "submitted", "selectedIds": ["us"]}),
        ),
        _ => (
            "/v1/proposals",
            json!({"message": message, "expiresInSeconds": 900,
                   "proposal": {"title": "Login fails on Safari", "priority": 2, "labels": ["auth", "web"]}}),
            json!({"decision": "submitted", "values": {"title": "Login fails on Safari 17", "priority": 1}}),
        ),
    }
}

/// `GET` the status at `path` and count a check failure unless it is `want`.
async fn poll_status(
    conn: &mut Conn,
    ops: &mut Ops,
    counters: &Counters,
    path: &str,
    want: &str,
    timeout: Duration,
) {
    let rec = ops.op("status");
    if let Some(r) = call(
        conn,
        rec,
        counters,
        Method::GET,
        path,
        None,
        true,
        200,
        timeout,
    )
    .await
    {
        expect_status(rec, counters, &r.json(), want);
    }
}

fn expect_status(rec: &mut Recorder, counters: &Counters, got: &serde_json::Value, want: &str) {
    let status = got["status"].as_str().unwrap_or("?");
    if status != want {
        rec.check_failed(format!("status: {status}, expected {want}"));
        counters.check_failed();
    }
}

pub(crate) async fn run(opts: &Options, target: &Target, decide: &Target) -> Result<Report, Error> {
    let mut progress = Progress::start("mixed", opts.progress, Some(opts.duration));
    progress.counters.phase("running");
    let (ops, elapsed) = timed(opts, |agent, deadline| {
        let (target, decide, counters, timeout) = (
            target.clone(),
            decide.clone(),
            progress.counters.clone(),
            opts.timeout,
        );
        async move {
            let mut ops = Ops::default();
            let mut conn = target.conn();
            let mut reviewer = Some(decide.conn());
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((agent as u64 + 1) * 0x1000_0001));
            let mut n = 0u64;
            while Instant::now() < deadline {
                let Some(r) = reviewer.take() else { break };
                reviewer = iteration(
                    &mut conn, r, &mut ops, &counters, &mut rng, agent, n, timeout,
                )
                .await;
                n += 1;
            }
            ops
        }
    })
    .await;
    progress.finish();
    let mut headline = Recorder::default();
    for (name, r) in &ops.0 {
        if *name != "await" {
            headline.merge(r);
        }
    }
    Ok(Report::build(
        "mixed",
        &opts.url,
        opts.client,
        opts.concurrency,
        ("request latency (await excluded)", &headline),
        &ops,
        elapsed,
    ))
}

/// One agent iteration; gives the reviewer connection back (`None` if its task failed).
#[allow(clippy::too_many_arguments)]
async fn iteration(
    conn: &mut Conn,
    mut reviewer: Conn,
    ops: &mut Ops,
    counters: &std::sync::Arc<Counters>,
    rng: &mut Rng,
    agent: usize,
    n: u64,
    timeout: Duration,
) -> Option<Conn> {
    let (path, body, submit) = request(n, agent);
    let body = Bytes::from(body.to_string());
    let Some(created) = call(
        conn,
        ops.op("create"),
        counters,
        Method::POST,
        path,
        Some(body),
        true,
        201,
        timeout,
    )
    .await
    .as_ref()
    .and_then(parse_created) else {
        return Some(reviewer);
    };
    let status_path = format!("/v1/elicitations/{}", created.id);
    for _ in 0..3 {
        poll_status(conn, ops, counters, &status_path, "pending", timeout).await;
    }
    if n % 10 == 9 {
        let cancel = format!("{status_path}/cancel");
        call(
            conn,
            ops.op("cancel"),
            counters,
            Method::POST,
            &cancel,
            None,
            true,
            200,
            timeout,
        )
        .await;
        poll_status(conn, ops, counters, &status_path, "canceled", timeout).await;
        return Some(reviewer);
    }
    let (decision, want) = if n % 4 == 3 {
        (json!({"decision": "declined"}), "declined")
    } else {
        (submit, "submitted")
    };
    let delay = Duration::from_millis(5 + rng.next() % 46);
    let review_path = format!("/v1/reviews/{}", created.token);
    let reviewer_counters = counters.clone();
    let decided = tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut rec = Recorder::default();
        call(
            &mut reviewer,
            &mut rec,
            &reviewer_counters,
            Method::POST,
            &review_path,
            Some(Bytes::from(decision.to_string())),
            false,
            200,
            timeout,
        )
        .await;
        (reviewer, rec)
    });
    let await_path = format!("{status_path}/await?waitSeconds={WAIT_SECONDS}");
    let woke = call(
        conn,
        ops.op("await"),
        counters,
        Method::GET,
        &await_path,
        None,
        true,
        200,
        timeout + Duration::from_secs(WAIT_SECONDS),
    )
    .await;
    if let Some(r) = woke {
        expect_status(ops.op("await"), counters, &r.json(), want);
    }
    let reviewer = match decided.await {
        Ok((reviewer, rec)) => {
            ops.op("decide").merge(&rec);
            Some(reviewer)
        }
        Err(e) => {
            ops.op("decide").err(format!("reviewer task failed: {e}"));
            None
        }
    };
    let result_path = format!("{status_path}/result");
    if let Some(r) = call(
        conn,
        ops.op("result"),
        counters,
        Method::POST,
        &result_path,
        None,
        true,
        200,
        timeout,
    )
    .await
    {
        let v = r.json();
        expect_status(ops.op("result"), counters, &v, "consumed");
        if v["decision"].as_str() != Some(want) {
            ops.op("result").check_failed("result: wrong decision");
            counters.check_failed();
        }
    }
    reviewer
}
