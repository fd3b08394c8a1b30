//! The closed-loop scenarios (`healthz`, `status`, `create`) and the helpers every scenario
//! uses: one checked request, seeding approvals, a timed worker loop.

use std::{future::Future, sync::Arc, time::Duration};

use bytes::Bytes;
use hyper::Method;
use tokio::time::Instant;

use crate::{
    http::{Conn, Reply, Target},
    progress::{Counters, Progress},
    stats::{Ops, Recorder, Report},
    Error, Options,
};

/// One request, checked against the expected status; records latency or the error kind.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn call(
    conn: &mut Conn,
    rec: &mut Recorder,
    counters: &Counters,
    method: Method,
    path: &str,
    body: Option<Bytes>,
    auth: bool,
    expect: u16,
    timeout: Duration,
) -> Option<Reply> {
    let started = Instant::now();
    let r = conn.request(method, path, body, auth, timeout).await;
    let latency = started.elapsed();
    match r {
        Ok(reply) if reply.status == expect => {
            rec.ok(latency);
            counters.count(true);
            Some(reply)
        }
        Ok(reply) => {
            rec.err(format!("http {}", reply.status));
            counters.count(false);
            None
        }
        Err(f) => {
            rec.err(f.kind());
            counters.count(false);
            None
        }
    }
}

/// A small json-mode approval, as an agent would send it. (Written out rather than built as a
/// `serde_json::Value`: the generator shares the machine with what it measures.)
pub(crate) fn approval_body(worker: usize, n: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"title":"Load test","message":"Approve this load-test payload?","context":{{"worker":{worker},"n":{n},"amount":129.9,"currency":"EUR"}},"expiresInSeconds":900}}"#
    ))
}

/// An elicitation created for the scenario.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub id: String,
    /// Last segment of `reviewUrl`.
    pub token: String,
}

/// Parse a 201 create answer.
pub(crate) fn parse_created(reply: &Reply) -> Option<Created> {
    let v = reply.json();
    let id = v["elicitationId"].as_str()?.to_string();
    let token = v["reviewUrl"].as_str()?.rsplit('/').next()?.to_string();
    Some(Created { id, token })
}

/// Create `n` approvals with `opts.concurrency` workers (recorded as op `create`).
pub(crate) async fn seed(
    opts: &Options,
    target: &Target,
    n: usize,
    counters: &Arc<Counters>,
    ops: &mut Ops,
) -> Result<Vec<Created>, Error> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..opts.concurrency.min(n.max(1)) {
        let (target, counters, next, timeout) =
            (target.clone(), counters.clone(), next.clone(), opts.timeout);
        tasks.push(tokio::spawn(async move {
            let mut conn = target.conn();
            let mut rec = Recorder::default();
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let body = approval_body(w, i as u64);
                let reply = call(
                    &mut conn,
                    &mut rec,
                    &counters,
                    Method::POST,
                    "/v1/approvals",
                    Some(body),
                    true,
                    201,
                    timeout,
                )
                .await;
                match reply.as_ref().and_then(parse_created) {
                    Some(c) => out.push((i, c)),
                    None => return (rec, Err(i)),
                }
            }
            (rec, Ok(out))
        }));
    }
    let mut all = Vec::with_capacity(n);
    let mut failed = false;
    for t in tasks {
        let (rec, r) = t
            .await
            .map_err(|e| Error(format!("seeding worker failed: {e}")))?;
        ops.op("create").merge(&rec);
        match r {
            Ok(v) => all.extend(v),
            Err(_) => failed = true,
        }
    }
    if failed {
        let why: Vec<String> = ops
            .op("create")
            .errors
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        return Err(Error(format!(
            "creating elicitations on {} failed ({}); check --url and --api-key",
            target.base(),
            why.join(", ")
        )));
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, c)| c).collect())
}

/// Run `opts.concurrency` workers until `opts.duration` has passed; merge their recorders.
pub(crate) async fn timed<F, Fut>(opts: &Options, worker: F) -> (Ops, Duration)
where
    F: Fn(usize, Instant) -> Fut,
    Fut: Future<Output = Ops> + Send + 'static,
{
    let cpu = opts.cpu.start();
    let started = Instant::now();
    let deadline = started + opts.duration;
    let tasks: Vec<_> = (0..opts.concurrency)
        .map(|w| tokio::spawn(worker(w, deadline)))
        .collect();
    let mut ops = Ops::default();
    for t in tasks {
        match t.await {
            Ok(o) => ops.merge(&o),
            Err(e) => ops.op("worker").err(format!("worker failed: {e}")),
        }
    }
    let elapsed = started.elapsed();
    cpu.finish();
    (ops, elapsed)
}

/// Builds request `i` of worker `w`: method, path, body, expected status.
type RequestFn = dyn Fn(usize, u64) -> (Method, String, Option<Bytes>, u16) + Send + Sync;

/// A closed loop of one request shape: `GET path(i)` or `POST` with `body(i)`.
async fn hammer(
    opts: &Options,
    target: &Target,
    name: &'static str,
    progress: &Progress,
    request: Arc<RequestFn>,
) -> (Ops, Duration) {
    progress.counters.phase("running");
    timed(opts, |w, deadline| {
        let (target, counters, request, timeout) = (
            target.clone(),
            progress.counters.clone(),
            request.clone(),
            opts.timeout,
        );
        async move {
            let mut conn = target.conn();
            let mut ops = Ops::default();
            let rec = ops.op(name);
            let mut i = 0u64;
            while Instant::now() < deadline {
                let (method, path, body, expect) = request(w, i);
                call(
                    &mut conn, rec, &counters, method, &path, body, true, expect, timeout,
                )
                .await;
                i += 1;
            }
            ops
        }
    })
    .await
}

fn report(opts: &Options, scenario: &str, ops: &Ops, elapsed: Duration) -> Report {
    let total = ops.total();
    Report::build(
        scenario,
        &opts.url,
        opts.client,
        opts.concurrency,
        ("request latency", &total),
        ops,
        elapsed,
    )
}

/// `GET /healthz` in a loop (the same client and headers as `status`).
pub(crate) async fn healthz(opts: &Options, target: &Target) -> Result<Report, Error> {
    let mut progress = Progress::start("healthz", opts.progress, Some(opts.duration));
    let (ops, elapsed) = hammer(
        opts,
        target,
        "healthz",
        &progress,
        Arc::new(|_, _| (Method::GET, "/healthz".to_string(), None, 200)),
    )
    .await;
    progress.finish();
    Ok(report(opts, "healthz", &ops, elapsed))
}

/// Seed `seed` approvals, then `GET /v1/elicitations/{id}` over them round-robin.
pub(crate) async fn status(opts: &Options, target: &Target, seed: usize) -> Result<Report, Error> {
    let mut progress = Progress::start("status", opts.progress, Some(opts.duration));
    progress.counters.phase("seeding");
    let mut seeding = Ops::default();
    let created = self::seed(opts, target, seed.max(1), &progress.counters, &mut seeding).await?;
    let paths: Arc<Vec<String>> = Arc::new(
        created
            .iter()
            .map(|c| format!("/v1/elicitations/{}", c.id))
            .collect(),
    );
    let c = opts.concurrency;
    let (ops, elapsed) = hammer(
        opts,
        target,
        "status",
        &progress,
        Arc::new(move |w, i| {
            let p = &paths[(w + i as usize * c) % paths.len()];
            (Method::GET, p.clone(), None, 200)
        }),
    )
    .await;
    progress.finish();
    Ok(report(opts, "status", &ops, elapsed))
}

/// `POST /v1/approvals` in a loop.
pub(crate) async fn create(opts: &Options, target: &Target) -> Result<Report, Error> {
    let mut progress = Progress::start("create", opts.progress, Some(opts.duration));
    let (ops, elapsed) = hammer(
        opts,
        target,
        "create",
        &progress,
        Arc::new(|w, i| {
            (
                Method::POST,
                "/v1/approvals".to_string(),
                Some(approval_body(w, i)),
                201,
            )
        }),
    )
    .await;
    progress.finish();
    Ok(report(opts, "create", &ops, elapsed))
}

#[cfg(test)]
mod tests {
    #[test]
    fn approval_body_is_the_json_it_says() {
        let v: serde_json::Value = serde_json::from_slice(&super::approval_body(3, 42)).unwrap();
        assert_eq!(v["message"], "Approve this load-test payload?");
        assert_eq!(v["context"]["worker"], 3);
        assert_eq!(v["context"]["n"], 42);
        assert_eq!(v["expiresInSeconds"], 900);
    }
}
