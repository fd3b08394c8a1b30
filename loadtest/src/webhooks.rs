//! The `webhooks` scenario: decisions in, webhook deliveries out, end to end.
//!
//! 1. start a receiver on `--receiver` (an HTTP/1 server in this process) that notes when each
//!    event for each elicitation arrived (`data.elicitationId` of the body) and answers 200;
//! 2. create `count` approvals on `--url` with `webhookUrl` pointing at it (or none, with
//!    `--no-webhook`, to measure the same run without webhooks);
//! 3. decide every one through `--decide-url`, noting when each decision was sent;
//! 4. wait (60 s at most) for one `elicitation.submitted` delivery per approval; the headline
//!    latency is its arrival minus the time its decision was sent.
//!
//! The report's `create` and `decide` ops give the request rates with webhooks on (compare a
//! `--no-webhook` run for the cost).

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpListener, time::Instant};

use crate::{
    http::Target,
    progress::Progress,
    scenarios::{call, Created},
    stats::{Ops, Recorder, Report},
    Error, Options,
};

/// How long to wait for the deliveries after the last decision.
const COLLECT: Duration = Duration::from_secs(60);

type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// Serve `POST /hook` on `listener`, noting the first arrival per elicitation id.
async fn receive(listener: TcpListener, arrivals: Arrivals, received: Arc<AtomicUsize>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let (arrivals, received) = (arrivals.clone(), received.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let (arrivals, received) = (arrivals.clone(), received.clone());
                async move {
                    let body = req.into_body().collect().await.map(|b| b.to_bytes());
                    let at = Instant::now();
                    if let Ok(body) = body {
                        let v: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        if v["type"] == "elicitation.submitted" {
                            if let Some(id) = v["data"]["elicitationId"].as_str() {
                                arrivals.lock().unwrap().entry(id.to_string()).or_insert(at);
                            }
                        }
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

pub(crate) async fn run(
    opts: &Options,
    target: &Target,
    decide: &Target,
    count: usize,
    receiver: Option<SocketAddr>,
) -> Result<Report, Error> {
    if count == 0 {
        return Err(Error("--count must be at least 1".into()));
    }
    let arrivals: Arrivals = Arc::default();
    let received = Arc::new(AtomicUsize::new(0));
    let hook_url = match receiver {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| Error(format!("cannot listen on {addr}: {e}")))?;
            let addr = listener.local_addr().map_err(|e| Error(e.to_string()))?;
            tokio::spawn(receive(listener, arrivals.clone(), received.clone()));
            Some(format!("http://{addr}/hook"))
        }
        None => None,
    };
    let mut progress = Progress::start("webhooks", opts.progress, None);
    let counters = progress.counters.clone();
    let started = Instant::now();
    let mut ops = Ops::default();

    // Create, `concurrency` workers.
    progress.counters.phase("creating");
    let next = Arc::new(AtomicUsize::new(0));
    let mut creators = Vec::new();
    for _ in 0..opts.concurrency.min(count) {
        let (target, counters, next, hook_url, timeout) = (
            target.clone(),
            counters.clone(),
            next.clone(),
            hook_url.clone(),
            opts.timeout,
        );
        creators.push(tokio::spawn(async move {
            let mut conn = target.conn();
            let mut rec = Recorder::default();
            let mut out = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < count {
                let mut body = serde_json::json!({"message": "Ship it?", "context": {"n": 1}});
                if let Some(url) = &hook_url {
                    body["webhookUrl"] = url.clone().into();
                }
                let reply = call(
                    &mut conn,
                    &mut rec,
                    &counters,
                    Method::POST,
                    "/v1/approvals",
                    Some(Bytes::from(body.to_string())),
                    true,
                    201,
                    timeout,
                )
                .await;
                if let Some(c) = reply.as_ref().and_then(crate::scenarios::parse_created) {
                    out.push(c);
                }
            }
            (rec, out)
        }));
    }
    let mut created: Vec<Created> = Vec::with_capacity(count);
    let create_started = Instant::now();
    for c in creators {
        let (rec, out) = c
            .await
            .map_err(|e| Error(format!("create worker failed: {e}")))?;
        ops.op("create").merge(&rec);
        created.extend(out);
    }
    let create_phase = create_started.elapsed();

    // Decide, `concurrency` workers through the other replica.
    progress.counters.phase("deciding");
    let created = Arc::new(created);
    let next = Arc::new(AtomicUsize::new(0));
    let mut deciders = Vec::new();
    let decide_started = Instant::now();
    for _ in 0..opts.concurrency.min(created.len().max(1)) {
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
            let mut sent_at = Vec::new();
            let body = Bytes::from_static(br#"{"decision":"submitted"}"#);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = created.get(i) else { break };
                let sent = Instant::now();
                let ok = call(
                    &mut conn,
                    &mut rec,
                    &counters,
                    Method::POST,
                    &format!("/v1/reviews/{}", c.token),
                    Some(body.clone()),
                    false,
                    200,
                    timeout,
                )
                .await
                .is_some();
                if ok {
                    sent_at.push((c.id.clone(), sent));
                }
            }
            (rec, sent_at)
        }));
    }
    let mut sent_at = HashMap::new();
    let mut decided = Recorder::default();
    for d in deciders {
        let (rec, sent) = d
            .await
            .map_err(|e| Error(format!("decide worker failed: {e}")))?;
        decided.merge(&rec);
        sent_at.extend(sent);
    }
    ops.op("decide").merge(&decided);
    let decide_phase = decide_started.elapsed();

    // Collect the deliveries.
    let mut delivery = Recorder::default();
    if hook_url.is_some() {
        progress.counters.phase("collecting");
        let deadline = Instant::now() + COLLECT;
        while arrivals.lock().unwrap().len() < sent_at.len() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let arrivals = arrivals.lock().unwrap().clone();
        for (id, sent) in &sent_at {
            match arrivals.get(id) {
                Some(at) if at >= sent => delivery.ok(*at - *sent),
                Some(_) => delivery.ok(Duration::ZERO),
                None => ops
                    .op("delivery")
                    .check_failed("no delivery within 60 s".to_string()),
            }
        }
        ops.op("delivery").merge(&delivery);
    }
    progress.finish();
    let headline = if hook_url.is_some() {
        (
            "delivery latency (webhook arrived − decision sent)",
            &delivery,
        )
    } else {
        ("decide request latency (no webhooks)", &decided)
    };
    let mut report = Report::build(
        "webhooks",
        &opts.url,
        opts.client,
        opts.concurrency,
        headline,
        &ops,
        started.elapsed(),
    );
    report.extra = Some(serde_json::json!({
        "count": count,
        "webhooks": hook_url.is_some(),
        "create_per_s": created.len() as f64 / create_phase.as_secs_f64().max(1e-9),
        "decide_per_s": sent_at.len() as f64 / decide_phase.as_secs_f64().max(1e-9),
        "deliveries_received": received.load(Ordering::Relaxed),
    }));
    Ok(report)
}
