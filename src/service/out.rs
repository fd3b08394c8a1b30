//! What the service hands to the adapters: the wire answers (REST bodies, MCP structured
//! results; OpenAPI and JSON Schema come from these types) and the review view of the page.
//! No store type crosses this line.

use serde::Serialize;
use serde_json::value::RawValue;

use crate::{
    kinds::{Answer, Kind, Outcome, Spec},
    model::{rfc3339, Decision, ElicitationId, Status, Timestamp},
    store::{AuditEvent, Channel, Delivery, DeliveryState, StatusView},
};

/// Answer to a create.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedOut {
    pub elicitation_id: String,
    pub status: Status,
    /// The review link — absent with named reviewers (each has their own) and when links go
    /// only by notification (`linkDelivery: "notify"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_url: Option<String>,
    pub expires_at: String,
    /// The named reviewers, in the order given, each with a personal link unless links go
    /// only by notification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reviewers: Option<Vec<ReviewerOut>>,
}

/// One named reviewer in a create answer.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewerOut {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_url: Option<String>,
}

/// Votes so far of a request with named reviewers.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
pub struct VotesOut {
    /// Distinct reviewers who submitted.
    pub submitted: u32,
    /// The quorum.
    pub needed: u32,
}

/// One reviewer's vote in a result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VoteOut {
    pub reviewer: String,
    pub decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub at: String,
}

/// Answer to status / await. (Id and times are kept as values and written straight into the
/// JSON: this is the answer to every poll.)
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusOut {
    #[schema(value_type = String)]
    #[schemars(with = "String")]
    pub elicitation_id: ElicitationId,
    pub kind: Kind,
    pub status: Status,
    #[schema(value_type = String)]
    #[schemars(with = "String")]
    pub created_at: Timestamp,
    #[schema(value_type = String)]
    #[schemars(with = "String")]
    pub expires_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    #[schemars(with = "Option<String>")]
    pub decided_at: Option<Timestamp>,
    /// With named reviewers: submits so far and the quorum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub votes: Option<VotesOut>,
}

impl StatusOut {
    /// This answer as JSON: the same bytes as `serde_json::to_vec` (tested for every kind,
    /// status and optional field), written directly — it answers every status poll.
    pub fn to_json(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(224);
        b.extend_from_slice(b"{\"elicitationId\":\"");
        self.elicitation_id.write_to(&mut b);
        b.extend_from_slice(b"\",\"kind\":\"");
        b.extend_from_slice(self.kind.as_str().as_bytes());
        b.extend_from_slice(b"\",\"status\":\"");
        b.extend_from_slice(self.status.as_str().as_bytes());
        b.extend_from_slice(b"\",\"createdAt\":\"");
        self.created_at.write_to(&mut b);
        b.extend_from_slice(b"\",\"expiresAt\":\"");
        self.expires_at.write_to(&mut b);
        if let Some(d) = self.decided_at {
            b.extend_from_slice(b"\",\"decidedAt\":\"");
            d.write_to(&mut b);
        }
        b.push(b'"');
        if let Some(v) = self.votes {
            b.extend_from_slice(b",\"votes\":{\"submitted\":");
            b.extend_from_slice(itoa::Buffer::new().format(v.submitted).as_bytes());
            b.extend_from_slice(b",\"needed\":");
            b.extend_from_slice(itoa::Buffer::new().format(v.needed).as_bytes());
            b.push(b'}');
        }
        b.push(b'}');
        b
    }
}

impl From<&StatusView> for StatusOut {
    fn from(v: &StatusView) -> Self {
        StatusOut {
            elicitation_id: v.id,
            kind: v.kind,
            status: v.status,
            created_at: Timestamp(v.created_ms),
            expires_at: Timestamp(v.expires_ms),
            decided_at: v.decided_ms.map(Timestamp),
            votes: v
                .votes
                .map(|(submitted, needed)| VotesOut { submitted, needed }),
        }
    }
}

/// Answer to result.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultOut {
    pub elicitation_id: String,
    pub kind: Kind,
    pub status: Status,
    pub decision: Decision,
    /// The request's `context`, byte for byte (`null` if absent).
    #[schema(value_type = Option<Object>)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub context: Option<Box<RawValue>>,
    /// The kind's part of the answer: `formSubmission` (always present; `null` unless a form
    /// approval was submitted), `selectedIds`, `values`.
    #[serde(flatten)]
    pub answer: Answer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub decided_at: String,
    /// With named reviewers: who decided (the submitters that reached the quorum, or the one
    /// who declined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Vec<String>>,
    /// With named reviewers: every vote, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub votes: Option<Vec<VoteOut>>,
}

/// One audit event on the wire.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEventOut {
    /// created, viewed, voted, decided, canceled, fetched, webhook_delivered, webhook_failed,
    /// notification_sent, notification_failed.
    #[serde(rename = "type")]
    pub kind: String,
    pub at: String,
    /// `agent:<tenant>`, `reviewer`, `reviewer:<id>` (named reviewers) or `elicitd`.
    pub actor: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// The delivery a `webhook_*` / `notification_*` entry is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

impl From<AuditEvent> for AuditEventOut {
    fn from(e: AuditEvent) -> Self {
        AuditEventOut {
            kind: e.kind,
            at: rfc3339(e.at),
            actor: e.actor,
            decision: e.decision,
            delivery: e.delivery,
        }
    }
}

/// One attempt at a webhook delivery.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptOut {
    pub at: String,
    /// The receiver's HTTP status, if it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// One event of a request on one channel (a webhook, an email, a Slack message) and its
/// delivery.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryOut {
    /// The delivery id; for a webhook the `webhook-id` (stable across attempts).
    pub id: String,
    /// webhook, email or slack.
    pub channel: Channel,
    /// `elicitation.created` (notifications only: the message with the review link),
    /// `.submitted`, `.declined`, `.canceled`, `.consumed` (webhooks only) or `.expired`.
    #[serde(rename = "type")]
    pub event: String,
    /// Webhook: the endpoint. Slack: only the scheme and host (the URL is a credential).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Email: the recipients.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    /// Email: recipients the mail server refused for good (the delivery is `failed`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// pending, delivered or failed.
    pub state: DeliveryState,
    pub created_at: String,
    pub attempts: Vec<AttemptOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
}

impl From<Delivery> for DeliveryOut {
    fn from(d: Delivery) -> Self {
        DeliveryOut {
            event: format!("elicitation.{}", d.event),
            channel: d.channel,
            url: match d.channel {
                Channel::Webhook => Some(d.url),
                Channel::Slack => Some(
                    d.url
                        .parse::<http::Uri>()
                        .ok()
                        .and_then(|u| Some(format!("{}://{}/…", u.scheme_str()?, u.authority()?)))
                        .unwrap_or_else(|| "…".into()),
                ),
                Channel::Email => None,
            },
            to: d.to,
            refused: d.refused,
            state: d.state,
            created_at: rfc3339(d.event_ms),
            next_attempt_at: (d.state == DeliveryState::Pending)
                .then_some(d.next_at)
                .flatten()
                .map(rfc3339),
            attempts: d
                .attempts
                .into_iter()
                .map(|a| AttemptOut {
                    at: rfc3339(a.at),
                    status: a.status,
                    error: a.error,
                    duration_ms: a.duration_ms,
                })
                .collect(),
            id: d.id,
        }
    }
}

/// Answer to deliveries.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveriesOut {
    pub elicitation_id: String,
    pub deliveries: Vec<DeliveryOut>,
}

/// Answer to audit.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditOut {
    pub elicitation_id: String,
    pub events: Vec<AuditEventOut>,
    /// How many times the result was read. `fetched` events stop being listed once the trail
    /// holds 200 entries; this count keeps going.
    pub fetches: u64,
}

/// Answer to cancel and decide.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema, schemars::JsonSchema)]
pub struct StateOut {
    pub status: Status,
}

/// What a review token opens: the request as the reviewer sees it. Obtained from
/// [`Service::review`](super::Service::review) and handed back to decide, so a page post reads
/// the record once.
#[derive(Debug, Clone)]
pub struct Review {
    pub id: ElicitationId,
    pub spec: Spec,
    /// Effective status (`expired` computed).
    pub status: Status,
    pub created_ms: i64,
    pub expires_ms: i64,
    /// The store clock at the read.
    pub now_ms: i64,
    pub outcome: Option<Outcome>,
    pub decided_ms: Option<i64>,
    /// sha256 of the review token (what the store checks again when deciding).
    /// Named reviewers and their votes, and whose token opened this (with reviewers).
    pub panel: Option<crate::store::Panel>,
    pub reviewer: Option<String>,
    pub(super) token_hash: String,
}

/// What deciding through the page did.
#[derive(Debug)]
pub enum Decided {
    /// Recorded, with the new status.
    Recorded(Status),
    /// The request was no longer pending; here is its state now.
    Refused(Box<Review>),
}

#[cfg(test)]
mod status_json_tests {
    use super::*;

    #[test]
    fn status_json_is_what_serde_writes() {
        let kinds = [Kind::Approval, Kind::Selection, Kind::Proposal];
        let statuses = [
            Status::Pending,
            Status::Submitted,
            Status::Declined,
            Status::Canceled,
            Status::Consumed,
            Status::Expired,
        ];
        let times = [0, 1_733_100_000_123, 253_402_300_800_000, -1];
        let votes = [
            None,
            Some(VotesOut {
                submitted: 0,
                needed: 1,
            }),
            Some(VotesOut {
                submitted: 4_000_000_000,
                needed: 17,
            }),
        ];
        let mut n = 0;
        for kind in kinds {
            for status in statuses {
                for (i, t) in times.iter().enumerate() {
                    for decided in [None, Some(times[(i + 1) % times.len()])] {
                        for v in votes {
                            let out = StatusOut {
                                elicitation_id: ElicitationId::random(),
                                kind,
                                status,
                                created_at: Timestamp(*t),
                                expires_at: Timestamp(t.wrapping_add(86_400_000)),
                                decided_at: decided.map(Timestamp),
                                votes: v,
                            };
                            assert_eq!(
                                String::from_utf8(out.to_json()).unwrap(),
                                serde_json::to_string(&out).unwrap()
                            );
                            n += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(n, 3 * 6 * 4 * 2 * 3);
    }
}
