//! Decoding what Redis returns: record fields by name (never by position), the `TIME` reply,
//! and the replies of our scripts (`{"ok", …}`, `{"no", …}`, `{"err", code}`).

use super::batch::Values;
use crate::{
    error::{Error, Result},
    kinds::Kind,
    model::Status,
};

/// The fields one kind of read asks for, in `HMGET` order.
pub(super) struct Fields(pub &'static [&'static str]);

/// Status reads.
pub(super) const STATUS: Fields = Fields(&[
    "tenant",
    "status",
    "kind",
    "created_ms",
    "expires_ms",
    "decided_ms",
    "tally",
]);
/// Review page reads.
pub(super) const REVIEW: Fields = Fields(&[
    "token_hash",
    "status",
    "spec",
    "created_ms",
    "expires_ms",
    "outcome",
    "decided_ms",
    "panel",
]);
/// Idempotent create replays.
pub(super) const REPLAY: Fields = Fields(&[
    "tenant",
    "status",
    "created_ms",
    "expires_ms",
    "token_hash",
    "token_salt",
    "panel",
]);

/// One record's values for a [`Fields`] list; `None` for a missing field (or record).
pub(super) struct Row {
    names: &'static [&'static str],
    values: Values,
}

impl Row {
    pub(super) fn new(fields: &Fields, values: Values) -> Result<Row> {
        if values.len() != fields.0.len() {
            return Err(Error::internal(
                "record read returned the wrong number of fields",
            ));
        }
        Ok(Row {
            names: fields.0,
            values,
        })
    }

    /// The value of `name` (a field of this row's list; asking for another is a bug).
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        let i = self.names.iter().position(|n| *n == name);
        debug_assert!(i.is_some(), "field {name} was not read");
        i.and_then(|i| self.values[i].as_deref())
    }

    /// The value of `name`, owned: taken when the row is not shared (a read the cache did not
    /// answer), else copied.
    pub(super) fn take(&mut self, name: &str) -> Option<String> {
        let i = self.names.iter().position(|n| *n == name)?;
        match std::sync::Arc::get_mut(&mut self.values) {
            Some(v) => v[i].take(),
            None => self.values[i].clone(),
        }
    }

    pub(super) fn int(&self, name: &str) -> Result<i64> {
        int(self.get(name))
            .map_err(|_| Error::internal(format!("record field {name} is not an integer")))
    }

    pub(super) fn opt_int(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|s| s.parse().ok())
    }

    /// The stored status (never `expired`).
    pub(super) fn status(&self) -> Result<Status> {
        self.get("status")
            .and_then(Status::parse)
            .ok_or_else(|| Error::internal("bad status"))
    }

    pub(super) fn kind(&self) -> Result<Kind> {
        self.get("kind")
            .and_then(Kind::parse)
            .ok_or_else(|| Error::internal("bad kind"))
    }
}

/// An integer string.
pub(super) fn int(s: Option<&str>) -> Result<i64> {
    s.and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::internal("not an integer"))
}

/// Redis `TIME` (`[seconds, microseconds]`) in milliseconds.
pub(super) fn redis_now(seconds: &str, micros: &str) -> Result<i64> {
    let s: i64 = seconds.parse().map_err(|_| Error::internal("bad TIME"))?;
    let us: i64 = micros.parse().map_err(|_| Error::internal("bad TIME"))?;
    Ok(s * 1000 + us / 1000)
}

/// A script's answer.
pub(super) enum Reply {
    /// `{"ok", …}`: the payload.
    Ok(Vec<Option<String>>),
    /// `{"no", …}`: a refusal that carries the record's state (see the script's header).
    No(Vec<Option<String>>),
}

/// Decode a script reply; `{"err", code}` becomes the domain error of that code.
pub(super) fn reply(raw: Vec<Option<String>>) -> Result<Reply> {
    let mut it = raw.into_iter();
    match it.next().flatten().as_deref() {
        Some("ok") => Ok(Reply::Ok(it.collect())),
        Some("no") => Ok(Reply::No(it.collect())),
        Some("err") => Err(match it.next().flatten().as_deref() {
            Some("not_found") => Error::NotFound,
            Some("expired") => Error::Expired,
            Some("canceled") => Error::Canceled,
            Some("already_decided") => Error::AlreadyDecided,
            Some("not_decided") => Error::NotDecided,
            Some("conflict") => Error::internal("elicitation id collision in create"),
            other => Error::internal(format!("unexpected script error {other:?}")),
        }),
        _ => Err(Error::internal("malformed script reply")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_decode_by_name() {
        let s = |v: &str| Some(v.to_string());
        let row = Row::new(
            &STATUS,
            vec![
                s("acme"),
                s("pending"),
                s("approval"),
                s("1"),
                s("2"),
                None,
                s("1/2"),
            ]
            .into(),
        )
        .unwrap();
        assert_eq!(row.get("tenant"), Some("acme"));
        assert_eq!(row.int("expires_ms").unwrap(), 2);
        assert_eq!(row.opt_int("decided_ms"), None);
        assert_eq!(row.get("tally"), Some("1/2"));
        assert_eq!(row.status().unwrap(), Status::Pending);
        assert_eq!(row.kind().unwrap(), Kind::Approval);
        assert!(Row::new(&STATUS, vec![None].into()).is_err());
    }

    #[test]
    fn script_replies() {
        let s = |v: &str| Some(v.to_string());
        assert!(matches!(reply(vec![s("ok"), s("1")]), Ok(Reply::Ok(v)) if v == [s("1")]));
        assert!(matches!(
            reply(vec![s("no"), s("canceled")]),
            Ok(Reply::No(_))
        ));
        for (code, want) in [
            ("not_found", "not_found"),
            ("expired", "expired"),
            ("canceled", "canceled"),
            ("already_decided", "already_decided"),
            ("not_decided", "not_decided"),
            ("conflict", "internal"),
            ("bogus", "internal"),
        ] {
            let e = reply(vec![s("err"), s(code)]).err().unwrap();
            assert_eq!(e.code(), want, "{code}");
        }
        assert_eq!(redis_now("2", "5000").unwrap(), 2005);
    }
}
