//! The review form, kind-neutral: what the page shows ([`controls`]) and what comes back
//! (`application/x-www-form-urlencoded` → [`FormData`] → typed JSON values). Each kind
//! (`crate::kinds`) builds its controls and reads its fields with these pieces; the review page
//! (`crate::review`) renders and posts them. Nothing here records anything.
//!
//! HTML forms send strings; [`convert`] turns one control's strings into the typed JSON the
//! REST route accepts. Form names are positional, never agent text (`f<i>`, `p<i>`, `k<i>`,
//! `sel`, plus `decision`, `comment`, `csrf`); options are posted by position too. Rules:
//! numbers parse to JSON numbers (integers stay integers), a checkbox is `true` when present and
//! `false` when absent, repeated keys become arrays, an empty optional input in form mode is
//! *absent*, textarea line breaks are normalised to `\n`, a `datetime-local` value is read as
//! UTC. Conversion problems are reported per field with the keys validation uses.

pub mod controls;

use serde_json::{Number, Value};

use crate::model::schema::{ChoiceOption, Field, FieldKind, TextFormat};

/// The decoded pairs of a posted form, repeated keys kept in order.
#[derive(Debug, Clone, Default)]
pub struct FormData(Vec<(String, String)>);

/// A post the page could not have produced.
#[derive(Debug, thiserror::Error)]
pub enum BadForm {
    #[error("the form body is not valid url-encoded data")]
    Encoding(#[from] serde_urlencoded::de::Error),
    #[error("the form did not say which button was pressed")]
    NoDecision,
}

impl FormData {
    pub fn parse(body: &[u8]) -> Result<Self, BadForm> {
        Ok(FormData(serde_urlencoded::from_bytes(body)?))
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// How one control maps to a JSON value.
#[derive(Debug, Clone, Copy)]
pub enum Shape<'a> {
    /// Described by a `requestedSchema` property.
    Schema(&'a Field),
    /// Free text typed by an example value.
    Text {
        multiline: bool,
    },
    Number,
    Bool,
    /// An array of strings, one item per line.
    Lines,
}

/// Browsers send textarea line breaks as CRLF.
pub fn normalise_newlines(s: &str) -> String {
    s.replace("\r\n", "\n")
}

/// `2025-01-31T14:30` (what `<input type=datetime-local>` sends) → `2025-01-31T14:30:00Z`.
/// Values that already carry a zone, or are not of that shape, pass through for validation.
pub fn datetime_local_to_utc(s: &str) -> String {
    let Some((date, time)) = s.split_once(['T', 't']) else {
        return s.to_string();
    };
    let zoned = time.ends_with(['Z', 'z']) || time.contains(['+', '-']);
    if zoned || date.len() != 10 {
        return s.to_string();
    }
    match time.len() {
        5 => format!("{date}T{time}:00Z"),
        n if n >= 8 => format!("{date}T{time}Z"),
        _ => s.to_string(),
    }
}

/// Convert one control named `name`. `Ok(None)` means absent (only when `empty_is_absent`).
pub fn convert(
    shape: Shape<'_>,
    form: &FormData,
    name: &str,
    empty_is_absent: bool,
) -> Result<Option<Value>, String> {
    let text = normalise_newlines(form.get(name).unwrap_or_default());
    let absent = empty_is_absent && text.is_empty();
    match shape {
        Shape::Schema(f) => match &f.kind {
            FieldKind::Text { .. } | FieldKind::Choice { .. } | FieldKind::Number { .. }
                if absent =>
            {
                Ok(None)
            }
            FieldKind::Text {
                format: Some(TextFormat::DateTime),
                ..
            } => Ok(Some(Value::String(datetime_local_to_utc(&text)))),
            FieldKind::Text { .. } => Ok(Some(Value::String(text))),
            FieldKind::Choice { options } => pick(options, &text).map(Some),
            FieldKind::Number { integer, .. } => parse_number(&text, *integer).map(Some),
            FieldKind::Boolean => Ok(Some(Value::Bool(form.has(name)))),
            FieldKind::MultiChoice { options, .. } => {
                let items = form
                    .all(name)
                    .map(|p| pick(options, p))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((!(empty_is_absent && items.is_empty())).then_some(Value::Array(items)))
            }
        },
        Shape::Text { .. } => Ok(Some(Value::String(text))),
        Shape::Number => parse_number(&text, false).map(Some),
        Shape::Bool => Ok(Some(Value::Bool(form.has(name)))),
        Shape::Lines => Ok(Some(Value::Array(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(Value::from)
                .collect(),
        ))),
    }
}

/// What a posted position that names no option reads as.
pub const NOT_AN_OPTION: &str = "is not one of the options";

/// The value of the option at the posted position.
fn pick(options: &[ChoiceOption], posted: &str) -> Result<Value, String> {
    posted
        .parse::<usize>()
        .ok()
        .and_then(|i| options.get(i))
        .map(|o| Value::from(o.value.as_str()))
        .ok_or_else(|| NOT_AN_OPTION.into())
}

/// A typed number: integers stay JSON integers, `3.0` in an integer field is `3`.
fn parse_number(text: &str, integer: bool) -> Result<Value, String> {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Value::from(i));
    }
    if let Ok(u) = t.parse::<u64>() {
        return Ok(Value::from(u));
    }
    let f = t
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .ok_or("must be a number")?;
    if integer {
        if f.fract() != 0.0 {
            return Err("must be a whole number".into());
        }
        if f.abs() < 9.0e15 {
            return Ok(Value::from(f as i64));
        }
    }
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| "must be a number".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers() {
        assert_eq!(parse_number(" 42 ", false).unwrap(), json!(42));
        assert_eq!(parse_number("-1.25", false).unwrap(), json!(-1.25));
        assert_eq!(
            parse_number("18446744073709551615", true).unwrap(),
            json!(18446744073709551615u64)
        );
        assert!(parse_number("NaN", false).is_err());
        assert!(parse_number("", false).is_err());
    }

    #[test]
    fn datetime_local_is_read_as_utc() {
        assert_eq!(
            datetime_local_to_utc("2025-01-31T14:30"),
            "2025-01-31T14:30:00Z"
        );
        assert_eq!(
            datetime_local_to_utc("2025-01-31T14:30:15"),
            "2025-01-31T14:30:15Z"
        );
        assert_eq!(
            datetime_local_to_utc("2025-01-31T14:30:00+02:00"),
            "2025-01-31T14:30:00+02:00"
        );
        assert_eq!(datetime_local_to_utc("junk"), "junk");
        assert_eq!(normalise_newlines("a\r\nb\n"), "a\nb\n");
    }
}
