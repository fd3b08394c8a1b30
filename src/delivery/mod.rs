//! Webhooks and notifications: every replica is a worker of one fleet-wide, durable queue.
//!
//! The queue is filled by the transitions themselves (the transactional outbox: a create,
//! decide, cancel, first result read or deadline writes its events in the same atomic step, see
//! `lua/outbox.lua`), so an event exists exactly when its transition does. This module empties
//! it: it claims due deliveries under a lease (a worker that dies loses its lease and another
//! replica delivers), sends each on its channel — a signed Standard Webhooks message ([`sign`]),
//! an email per recipient over SMTP ([`email`]), a Slack message ([`slack`]) — HTTP targets only
//! when they pass the address guard ([`guard`]), and records each attempt: delivered on success,
//! given up on a permanent refusal (`410 Gone`; Slack 400/403/404/410; an SMTP 5xx) or when the
//! retry schedule runs out, otherwise retried (honouring `Retry-After` on 429/503). Delivery is
//! at-least-once; ids are stable across attempts (`webhook-id`, the email `Message-ID`) so
//! receivers can drop duplicates.
//!
//! A replica looks at the queue when one of its own transitions wrote an event (a nudge: the
//! event is attempted within milliseconds) and every [`POLL`] otherwise (deliveries written by
//! another replica that died, retries, deadlines).

pub mod email;
pub mod guard;
pub mod notice;
pub mod sign;
pub mod slack;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::{
    config::Config,
    kinds::{Answer, Kind, Outcome, Spec},
    model::{local_now_ms, rfc3339, Decision, ElicitationId, Tenant},
    store::{Attempt, AuditEvent, Channel, Delivery, DeliveryState, Store},
};

/// How often a replica looks at the queue without a nudge (the bound on how late a retry or
/// an `expired` event can be, besides the schedule itself).
pub const POLL: Duration = Duration::from_millis(500);
/// Attempts in flight per replica at most (more wait in the queue).
const MAX_IN_FLIGHT: usize = 128;
/// Lease time kept in hand beyond the attempt's timeout for recording the outcome (at most
/// half of what the lease has beyond the timeout).
const LEASE_MARGIN: Duration = Duration::from_secs(2);
/// Deliveries claimed per shard per look.
const CLAIM_BATCH: usize = 32;
/// Why an invitation was dropped (it was still queued — a mail server down, say — when the
/// request closed: a "decision needed" message then would only mislead).
const NOT_SENT_CLOSED: &str = "not sent: the request was no longer open";

/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How a replica's transitions reach its delivery worker: the shards that got a new (or
/// replayed) delivery, and a wake-up. A nudged look claims from those shards only, so a
/// transition costs one queue read, not a sweep of every shard.
#[derive(Default)]
pub struct Nudge {
    dirty: AtomicU64,
    notify: Notify,
}

impl Nudge {
    /// `shard` has something due now.
    pub fn shard(&self, shard: u16) {
        self.dirty.fetch_or(1u64 << (shard % 64), Ordering::AcqRel);
        self.notify.notify_one();
    }

    fn take(&self) -> u64 {
        self.dirty.swap(0, Ordering::AcqRel)
    }
}

/// The delivery worker of one replica.
pub struct Deliverer {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    http: reqwest::Client,
    /// The SMTP sender, when configured.
    mailer: Option<email::Mailer>,
    nudge: Arc<Nudge>,
    in_flight: AtomicUsize,
    per_host: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A Standard Webhooks message body.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    event: String,
    timestamp: String,
    data: Data<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Data<'a> {
    elicitation_id: &'a str,
    kind: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<ResultData>,
}

/// The reviewer's answer, for endpoints that asked for it (`webhookIncludeResult`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultData {
    decision: Decision,
    context: Option<Box<RawValue>>,
    #[serde(flatten)]
    answer: Answer,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
}

/// How one attempt ended.
enum Ending {
    Delivered,
    /// Stop trying (410 Gone).
    Gone,
    /// Try again, not before this many milliseconds from now (the receiver said so).
    Retry(Option<u64>),
}

impl Deliverer {
    /// Start the worker; it stops with `shutdown`.
    pub fn spawn(
        store: Arc<dyn Store>,
        config: Arc<Config>,
        nudge: Arc<Nudge>,
        shutdown: CancellationToken,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let hooks = &config.webhooks;
        let mut http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(hooks.timeout)
            .connect_timeout(hooks.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!(
                "elicitd/",
                env!("CARGO_PKG_VERSION"),
                " (webhooks)"
            ));
        if let Some(r) = guard::resolver(hooks.allow_private) {
            http = http.dns_resolver(r);
        }
        let mailer = match (&config.notify.smtp_url, &config.notify.smtp_from) {
            (Some(url), Some(from)) => Some(email::Mailer::new(url, from.clone(), hooks.timeout)?),
            _ => None,
        };
        let this = Arc::new(Deliverer {
            store,
            http: http.build()?,
            mailer,
            config,
            nudge,
            in_flight: AtomicUsize::new(0),
            per_host: Mutex::new(HashMap::new()),
        });
        tokio::spawn(this.run(shutdown));
        Ok(())
    }

    async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        // The queue gauges exist from the start, then refresh every 10 s.
        self.queue_stats().await;
        let mut last_stats = tokio::time::Instant::now();
        let mut next_poll = tokio::time::Instant::now() + POLL;
        loop {
            tokio::select! {
                _ = self.nudge.notify.notified() => {}
                _ = tokio::time::sleep_until(next_poll) => {}
                _ = shutdown.cancelled() => return,
            }
            if tokio::time::Instant::now() >= next_poll {
                // The regular look: every shard, deadlines included.
                self.nudge.take();
                self.look(None).await;
                next_poll = tokio::time::Instant::now() + POLL;
            } else {
                let dirty = self.nudge.take();
                self.look(Some(dirty)).await;
            }
            if last_stats.elapsed() >= Duration::from_secs(10) {
                last_stats = tokio::time::Instant::now();
                self.queue_stats().await;
            }
        }
    }

    /// One look: emit due `expired` events, claim due deliveries, attempt them — on every shard,
    /// or (a nudge) only on the shards in the `only` bit set, without the deadline sweep.
    async fn look(self: &Arc<Self>, only: Option<u64>) {
        for shard in 0..self.store.shards() {
            if only.is_some_and(|bits| bits & (1u64 << (shard % 64)) == 0) {
                continue;
            }
            if only.is_none() {
                if let Err(e) = self.store.sweep_deadlines(shard).await {
                    tracing::debug!(error = %e, "deadline sweep failed; retrying next look");
                }
            }
            let room = MAX_IN_FLIGHT.saturating_sub(self.in_flight.load(Ordering::Acquire));
            if room == 0 {
                return;
            }
            let claimed = match self
                .store
                .claim_deliveries(shard, self.config.webhooks.lease, room.min(CLAIM_BATCH))
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "claiming deliveries failed; retrying next look");
                    continue;
                }
            };
            for d in claimed {
                self.in_flight.fetch_add(1, Ordering::AcqRel);
                let this = self.clone();
                tokio::spawn(async move {
                    this.attempt(d).await;
                    this.in_flight.fetch_sub(1, Ordering::AcqRel);
                });
            }
        }
    }

    async fn queue_stats(&self) {
        if let Ok((depth, oldest)) = self.store.queue_stats().await {
            metrics::gauge!("elicitd_webhook_queue_depth").set(depth as f64);
            let age = oldest.map_or(0, |t| (local_now_ms() - t).max(0));
            metrics::gauge!("elicitd_webhook_oldest_due_seconds").set(age as f64 / 1000.0);
        }
    }

    /// The per-host permits of `d`'s target (all email shares the SMTP server's).
    fn host_limit(&self, d: &Delivery) -> Arc<Semaphore> {
        let host = match d.channel {
            Channel::Email => "smtp".to_string(),
            _ => d
                .url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.authority().map(|a| a.to_string()))
                .unwrap_or_default(),
        };
        let mut m = self.per_host.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() > 10_000 {
            m.retain(|_, s| Arc::strong_count(s) > 1);
        }
        m.entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.webhooks.concurrency)))
            .clone()
    }

    /// Attempt `d` once and store the result.
    async fn attempt(&self, mut d: Delivery) {
        let claimed = tokio::time::Instant::now();
        let hooks = &self.config.webhooks;
        let limit = self.host_limit(&d);
        let Ok(_permit) = limit.acquire().await else {
            return;
        };
        // Waiting for the host's turn used up the lease: too little of it is left for a whole
        // attempt, and another replica may claim the delivery at any moment. Leave it to the
        // next claim rather than risk sending it twice.
        let margin = LEASE_MARGIN.min(hooks.lease.saturating_sub(hooks.timeout) / 2);
        if claimed.elapsed() + hooks.timeout + margin > hooks.lease {
            tracing::debug!(delivery = %d.id, "lease too short after waiting for the host; left for the next claim");
            return;
        }
        let started = tokio::time::Instant::now();
        let at = local_now_ms();
        let (outcome, status, error) = match d.channel {
            Channel::Webhook => self.send(&d).await,
            Channel::Slack => self.send_slack(&d).await,
            Channel::Email => self.send_email(&mut d, claimed, margin).await,
        };
        let duration = started.elapsed();
        if d.channel == Channel::Webhook {
            metrics::histogram!("elicitd_webhook_attempt_seconds").record(duration.as_secs_f64());
        }
        d.attempts.push(Attempt {
            at,
            status,
            error,
            duration_ms: duration.as_millis() as u64,
        });
        // Attempts on the current schedule (a replay starts it over).
        let made = d.attempts.len().saturating_sub(d.schedule_from);
        let now = local_now_ms();
        let (state, next_at, label) = match outcome {
            Ending::Delivered => (DeliveryState::Delivered, None, "delivered"),
            Ending::Gone => (DeliveryState::Failed, None, "gone"),
            Ending::Retry(_) if made >= hooks.schedule.len() => {
                (DeliveryState::Failed, None, "failed")
            }
            Ending::Retry(asked) => {
                let wait = hooks.schedule[made].as_millis() as u64;
                let wait = asked.map_or(wait, |a| a.max(wait));
                (DeliveryState::Pending, Some(now + wait as i64), "retry")
            }
        };
        let lag = (now - d.event_ms).max(0) as f64 / 1000.0;
        if d.channel == Channel::Webhook {
            metrics::counter!("elicitd_webhook_deliveries_total", "outcome" => label).increment(1);
            if state == DeliveryState::Delivered {
                metrics::histogram!("elicitd_webhook_delivery_lag_seconds").record(lag);
            }
        } else {
            metrics::counter!(
                "elicitd_notifications_total",
                "channel" => d.channel.as_str(),
                "outcome" => label
            )
            .increment(1);
            if state == DeliveryState::Delivered {
                metrics::histogram!(
                    "elicitd_notification_delivery_lag_seconds",
                    "channel" => d.channel.as_str()
                )
                .record(lag);
            }
        }
        let audit = (state != DeliveryState::Pending).then(|| AuditEvent {
            kind: match (d.channel, state) {
                (Channel::Webhook, DeliveryState::Delivered) => "webhook_delivered",
                (Channel::Webhook, _) => "webhook_failed",
                (_, DeliveryState::Delivered) => "notification_sent",
                _ => "notification_failed",
            }
            .into(),
            at: now,
            actor: "elicitd".into(),
            decision: None,
            delivery: Some(d.id.clone()),
        });
        d.state = state;
        match self.store.finish_delivery(&d, next_at, audit).await {
            Ok(true) => {}
            Ok(false) => tracing::debug!(delivery = %d.id, "lease lost; another replica took over"),
            Err(e) => {
                tracing::warn!(error = %e, delivery = %d.id, "could not record a delivery attempt; it will be retried after its lease")
            }
        }
    }

    /// The content of a notification, from its record (`Err` with the reason when the record
    /// is gone or unreadable: retried, then failed).
    async fn content(&self, d: &Delivery) -> Result<notice::Content, String> {
        let id = ElicitationId::parse(&d.elicitation_id).ok_or("malformed id")?;
        let read = tokio::time::timeout(self.config.webhooks.timeout, self.store.notice_of(id));
        match read
            .await
            .map_err(|_| "reading the request timed out".to_string())?
        {
            Ok(Some(n)) => notice::Content::new(&self.config, d, &n),
            Ok(None) => Err("the request is gone".into()),
            Err(e) => Err(format!("reading the request: {e}")),
        }
    }

    /// Post a Slack message once.
    async fn send_slack(&self, d: &Delivery) -> (Ending, Option<u16>, Option<String>) {
        if let Some(p) = guard::literal_problem(&d.url, self.config.webhooks.allow_private) {
            return (Ending::Retry(None), None, Some(format!("refused: {p}")));
        }
        let n = match self.content(d).await {
            Ok(n) => n,
            Err(e) => return (Ending::Retry(None), None, Some(e)),
        };
        if n.is_invitation() && n.closed {
            return (Ending::Delivered, None, Some(NOT_SENT_CLOSED.into()));
        }
        let sent = self
            .http
            .post(&d.url)
            .json(&slack::payload(&n))
            .send()
            .await;
        match sent {
            Ok(r) => {
                let status = r.status().as_u16();
                let outcome = match status {
                    200..=299 => Ending::Delivered,
                    // Slack's answers for a revoked or wrong URL, an archived channel, a
                    // malformed message: trying again will not help.
                    400 | 403 | 404 | 410 => Ending::Gone,
                    429 | 503 => Ending::Retry(retry_after(&r)),
                    _ => Ending::Retry(None),
                };
                let error = (!r.status().is_success()).then(|| {
                    // Slack explains in the body (`invalid_token`, `channel_is_archived`, …).
                    r.headers()
                        .get("x-slack-error")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                });
                let error = match error.flatten() {
                    Some(e) => Some(e),
                    None if status >= 300 => {
                        // The start of the body only: the target is the agent's choice.
                        let mut r = r;
                        let mut head = Vec::new();
                        while head.len() < 1024 {
                            match r.chunk().await {
                                Ok(Some(c)) => head.extend_from_slice(&c),
                                _ => break,
                            }
                        }
                        let t: String = String::from_utf8_lossy(&head).chars().take(200).collect();
                        (!t.trim().is_empty()).then_some(t)
                    }
                    None => None,
                };
                (outcome, Some(status), error)
            }
            Err(e) => (Ending::Retry(None), None, Some(describe(&e))),
        }
    }

    /// Email every recipient of `d` not yet accepted or refused, one message each; record who
    /// was accepted (`sent`) and who was refused for good (`refused`) on `d`. Recipients are
    /// mailed one after the other while the lease (taken at `claimed`) has room for a whole
    /// send; the rest wait for the next attempt, so no other replica can mail them meanwhile.
    async fn send_email(
        &self,
        d: &mut Delivery,
        claimed: tokio::time::Instant,
        margin: Duration,
    ) -> (Ending, Option<u16>, Option<String>) {
        let hooks = &self.config.webhooks;
        let Some(mailer) = &self.mailer else {
            return (
                Ending::Retry(None),
                None,
                Some("this replica has no SMTP settings (ELICITD_SMTP_URL)".into()),
            );
        };
        let n = match self.content(d).await {
            Ok(n) => n,
            Err(e) => return (Ending::Retry(None), None, Some(e)),
        };
        if n.is_invitation() && n.closed {
            return (Ending::Delivered, None, Some(NOT_SENT_CLOSED.into()));
        }
        let todo: Vec<String> =
            d.to.iter()
                .filter(|a| !d.sent.contains(a) && !d.refused.contains(a))
                .cloned()
                .collect();
        let mut errors = Vec::new();
        for to in todo {
            let (n, _) = n.for_recipient(&to);
            if n.is_invitation() && n.link.is_none() {
                // A request with named reviewers mails only them, each their own link.
                errors.push(format!("{to}: no personal link for this address"));
                d.refused.push(to);
                continue;
            }
            if claimed.elapsed() + hooks.timeout + margin > hooks.lease {
                errors.push("the rest next attempt (lease time used up)".to_string());
                break;
            }
            // lettre's own timeout covers the connect only: a server that stalls later (greeting,
            // AUTH, DATA) must not hold the lease, the permit and the in-flight slot for ever.
            let sent = match mailer.compose(&n, &to) {
                Ok(msg) => tokio::time::timeout(hooks.timeout, mailer.send(msg))
                    .await
                    .unwrap_or_else(|_| email::Sent::Transient("timed out".into())),
                Err(e) => email::Sent::Refused(format!("composing: {e}")),
            };
            match sent {
                email::Sent::Accepted => d.sent.push(to),
                email::Sent::Refused(e) => {
                    errors.push(format!("{to}: {e}"));
                    d.refused.push(to);
                }
                email::Sent::Transient(e) => errors.push(format!("{to}: {e}")),
            }
        }
        let pending =
            d.to.iter()
                .any(|a| !d.sent.contains(a) && !d.refused.contains(a));
        let outcome = match () {
            _ if pending => Ending::Retry(None),
            _ if d.refused.is_empty() => Ending::Delivered,
            _ => Ending::Gone,
        };
        let error = (!errors.is_empty()).then(|| {
            let mut e = errors.join("; ");
            if e.chars().count() > 1000 {
                e = notice::cut(&e, 1000);
            }
            e
        });
        (outcome, None, error)
    }

    /// Send `d` once: the outcome, the receiver's status, the error without one.
    async fn send(&self, d: &Delivery) -> (Ending, Option<u16>, Option<String>) {
        let Some(secrets) = Tenant::new(&d.tenant)
            .ok()
            .and_then(|t| self.config.webhooks.secrets.get(&t).cloned())
        else {
            return (
                Ending::Retry(None),
                None,
                Some("no signing secret for this tenant".into()),
            );
        };
        if let Some(p) = guard::literal_problem(&d.url, self.config.webhooks.allow_private) {
            return (Ending::Retry(None), None, Some(format!("refused: {p}")));
        }
        let body = match self.body(d).await {
            Ok(b) => b,
            Err(e) => return (Ending::Retry(None), None, Some(e)),
        };
        let timestamp = local_now_ms() / 1000;
        let signature = sign::signature(&secrets, &d.id, timestamp, &body);
        let sent = self
            .http
            .post(&d.url)
            .header("content-type", "application/json")
            .header("webhook-id", &d.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) => {
                let status = r.status().as_u16();
                let outcome = match status {
                    200..=299 => Ending::Delivered,
                    410 => Ending::Gone,
                    429 | 503 => Ending::Retry(retry_after(&r)),
                    _ => Ending::Retry(None),
                };
                (outcome, Some(status), None)
            }
            Err(e) => (Ending::Retry(None), None, Some(describe(&e))),
        }
    }

    /// The message body (the same for every attempt).
    async fn body(&self, d: &Delivery) -> Result<String, String> {
        let result = if d.include_result {
            let id = ElicitationId::parse(&d.elicitation_id).ok_or("malformed id")?;
            match self.store.outcome_of(id).await {
                Ok(Some((spec, outcome))) => {
                    let spec: Spec = serde_json::from_str(&spec).map_err(|e| e.to_string())?;
                    let o: Outcome = serde_json::from_str(&outcome).map_err(|e| e.to_string())?;
                    Some(ResultData {
                        decision: o.decision,
                        context: spec.context,
                        answer: o.answer,
                        comment: o.comment,
                    })
                }
                Ok(None) => None,
                Err(e) => return Err(format!("reading the result: {e}")),
            }
        } else {
            None
        };
        let kind = Kind::parse(&d.kind).map_or("unknown", Kind::as_str);
        let body = Body {
            event: format!("elicitation.{}", d.event),
            timestamp: rfc3339(d.event_ms),
            data: Data {
                elicitation_id: &d.elicitation_id,
                kind,
                status: &d.event,
                decided_at: d.decided_ms.map(rfc3339),
                result,
            },
        };
        serde_json::to_string(&body).map_err(|e| e.to_string())
    }
}

/// `Retry-After` in milliseconds (seconds form; HTTP dates are treated as absent).
fn retry_after(r: &reqwest::Response) -> Option<u64> {
    let secs: u64 = r
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER).as_millis() as u64)
}

/// A request error as one line (its source chain: "refused: … resolves only to …").
fn describe(e: &reqwest::Error) -> String {
    let mut s = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        let text = err.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = err.source();
    }
    s
}
