//! Domain types every layer shares: ids, tenants, statuses, the reviewer's verdict, button
//! labels, times, and the field rules common to every kind (`rules`). What each kind asks and
//! answers lives in [`crate::kinds`]; the `requestedSchema` subset in [`schema`].
//! Everything is parsed and validated at the edge; the rest of the crate passes these types,
//! never raw strings.

pub mod rules;
pub mod schema;

use std::fmt;

use serde::{Deserialize, Serialize};

/// An elicitation id: a random v4 UUID. Anything that does not parse is simply `not_found`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElicitationId(uuid::Uuid);

impl ElicitationId {
    pub fn random() -> Self {
        ElicitationId(uuid::Uuid::new_v4())
    }
    /// The id as a number (picks its storage shard).
    pub fn as_u128(self) -> u128 {
        self.0.as_u128()
    }
    /// Parse the canonical hyphenated form; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        if s.len() != 36 {
            return None;
        }
        uuid::Uuid::try_parse(s).ok().map(ElicitationId)
    }
}

impl fmt::Display for ElicitationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// A tenant name: 1–64 chars of `[A-Za-z0-9_.-]`. Every elicitation belongs to one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant(String);

impl Tenant {
    pub fn new(name: &str) -> Result<Self, String> {
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(format!(
                "tenant name {name:?} must be 1–64 chars of [A-Za-z0-9_.-]"
            ));
        }
        Ok(Tenant(name.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lifecycle status: `pending` (undecided), `submitted` / `declined` (decided; read it with
/// result), `consumed` (result already read), `canceled` (withdrawn by the requester),
/// `expired` (deadline passed undecided; computed at read time, never stored).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pending,
    Submitted,
    Declined,
    Canceled,
    Consumed,
    Expired,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Submitted => "submitted",
            Status::Declined => "declined",
            Status::Canceled => "canceled",
            Status::Consumed => "consumed",
            Status::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Status::Pending,
            "submitted" => Status::Submitted,
            "declined" => Status::Declined,
            "canceled" => Status::Canceled,
            "consumed" => Status::Consumed,
            "expired" => Status::Expired,
            _ => return None,
        })
    }
    /// The status a reader sees: a stored `pending` past its deadline reads `expired`.
    pub fn effective(stored: Status, now_ms: i64, expires_ms: i64) -> Status {
        if stored == Status::Pending && now_ms >= expires_ms {
            Status::Expired
        } else {
            stored
        }
    }
}

/// The reviewer's verdict.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Submitted,
    Declined,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Submitted => "submitted",
            Decision::Declined => "declined",
        }
    }
    pub fn status(self) -> Status {
        match self {
            Decision::Submitted => Status::Submitted,
            Decision::Declined => Status::Declined,
        }
    }
}

/// Button words: rename the buttons only, never what is recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labels {
    pub submit: String,
    pub decline: String,
}

/// Format epoch milliseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// `2025-01-31 14:30 UTC`: a time as shown to people (the page, emails, Slack), the same for
/// every reader wherever they are.
pub fn human_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// Milliseconds since the epoch by this process's clock (memory store only; the Redis store
/// uses Redis `TIME`).
pub fn local_now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_canonical_uuids() {
        let id = ElicitationId::random();
        assert_eq!(ElicitationId::parse(&id.to_string()), Some(id));
        assert_eq!(ElicitationId::parse("nope"), None);
        assert_eq!(
            ElicitationId::parse("550e8400e29b41d4a716446655440000"),
            None
        );
    }

    #[test]
    fn expiry_is_computed() {
        assert_eq!(Status::effective(Status::Pending, 10, 10), Status::Expired);
        assert_eq!(Status::effective(Status::Pending, 9, 10), Status::Pending);
        assert_eq!(
            Status::effective(Status::Submitted, 99, 10),
            Status::Submitted
        );
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}
