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
    /// A random (v4) id, from the thread's CSPRNG (no system call per id, unlike
    /// `Uuid::new_v4`).
    pub fn random() -> Self {
        ElicitationId(uuid::Builder::from_random_bytes(rand::random()).into_uuid())
    }
    /// The id as a number (picks its storage shard).
    pub fn as_u128(self) -> u128 {
        self.0.as_u128()
    }
    /// The id of that number (the inverse of [`as_u128`](Self::as_u128)).
    pub fn from_u128(n: u128) -> Self {
        ElicitationId(uuid::Uuid::from_u128(n))
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

impl ElicitationId {
    /// Append the canonical hyphenated form (as [`Display`](fmt::Display)) to `out`.
    pub fn write_to(self, out: &mut Vec<u8>) {
        let mut buf = uuid::Uuid::encode_buffer();
        out.extend_from_slice(self.0.hyphenated().encode_lower(&mut buf).as_bytes());
    }
}

/// On the wire: the canonical hyphenated form (as [`Display`](fmt::Display)), written without
/// the formatting machinery.
impl Serialize for ElicitationId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = uuid::Uuid::encode_buffer();
        s.serialize_str(self.0.hyphenated().encode_lower(&mut buf))
    }
}

/// A tenant name: 1–64 chars of `[A-Za-z0-9_.-]`. Every elicitation belongs to one. (Shared:
/// every authenticated request takes a copy.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant(std::sync::Arc<str>);

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
        Ok(Tenant(name.into()))
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
    Timestamp(ms).to_string()
}

/// Epoch milliseconds that serialize (and display) as RFC 3339 UTC with millisecond precision,
/// `2025-01-31T14:30:00.000Z`: what every time on the wire looks like. Written by hand for the
/// years 0–9999 (every time the service makes), the same bytes as chrono's
/// `to_rfc3339_opts(Millis, true)`, which writes the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The 24 bytes for years 0–9999.
    fn fast(self) -> Option<[u8; 24]> {
        let secs = self.0.div_euclid(1000);
        let millis = self.0.rem_euclid(1000) as u32;
        let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400) as u32);
        // Days to civil date (Howard Hinnant's algorithm, proleptic Gregorian).
        let z = days.checked_add(719_468)?;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097) as u32;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = era * 400 + yoe as i64 + i64::from(month <= 2);
        if !(0..=9999).contains(&year) {
            return None;
        }
        let mut b = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut v: u32| {
            for i in (at..at + width).rev() {
                b[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, 4, year as u32);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, sod / 3600);
        put(14, 2, sod / 60 % 60);
        put(17, 2, sod % 60);
        put(20, 3, millis);
        Some(b)
    }

    /// Append the RFC 3339 form to `out` (as [`Display`](fmt::Display)).
    pub fn write_to(self, out: &mut Vec<u8>) {
        self.with_str(|s| out.extend_from_slice(s.as_bytes()))
    }

    fn with_str<R>(self, f: impl FnOnce(&str) -> R) -> R {
        match self.fast() {
            // ASCII digits and separators only.
            Some(b) => f(std::str::from_utf8(&b).unwrap_or_default()),
            None => f(&chrono::DateTime::from_timestamp_millis(self.0)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_str(|s| f.write_str(s))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.with_str(|t| s.serialize_str(t))
    }
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
    fn timestamps_are_written_as_chrono_writes_them() {
        let chrono_way = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let mut cases: Vec<i64> = vec![
            0,
            -1,
            1,
            999,
            1000,
            -1000,
            -1001,
            951_782_400_000,     // 2000-02-29
            951_868_799_999,     // 2000-02-29T23:59:59.999
            4_107_542_400_000,   // 2100-03-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            253_402_300_800_000, // 10000-01-01: chrono's "+10000-…"
            -62_167_219_200_000, // 0000-01-01
            -62_167_219_200_001, // just before year 0: chrono's "-0001-…"
            i64::MAX,
            i64::MIN,
            8_210_266_876_799_999,  // chrono's last representable millisecond
            -8_334_601_228_800_000, // and its first
        ];
        // Every day boundary of four centuries (leap rules), and random instants besides.
        let day = 86_400_000i64;
        cases.extend((-200_000..200_000).map(|d| d * day + (d.rem_euclid(7) * 3_599_999)));
        use rand::Rng;
        let mut rng = rand::rng();
        cases.extend(
            (0..200_000)
                .map(|_| rng.random_range(-9_000_000_000_000_000..9_000_000_000_000_000i64)),
        );
        cases.extend(
            (0..200_000).map(|_| rng.random_range(-70_000_000_000_000..300_000_000_000_000i64)),
        );
        for ms in cases {
            let ours = Timestamp(ms);
            assert_eq!(ours.to_string(), chrono_way(ms), "{ms}");
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&chrono_way(ms)).unwrap(),
                "{ms}"
            );
        }
    }

    #[test]
    fn ids_serialize_as_displayed() {
        for _ in 0..100 {
            let id = ElicitationId::random();
            assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{id}\""));
        }
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    }
}
