//! Turning a posted review form (`application/x-www-form-urlencoded`) into a [`DecisionInput`].
//!
//! HTML forms send strings; this module converts them per field kind so the business layer sees
//! the same typed JSON the REST route accepts. Form names are positional, never agent text:
//! `f<i>` is the i-th `requestedSchema` property (form mode), `p<i>` / `k<i>` the value and the
//! "Include" box of the i-th proposal field, `sel` the chosen options (repeated), plus
//! `decision`, `comment` and `csrf`. Options (selection options, enum values) are posted by
//! position too. The order is the stored request's order, which the page used when it rendered
//! the form.
//!
//! Rules: numbers parse to JSON numbers (integers stay integers), a checkbox is `true` when
//! present and `false` when absent, repeated keys become arrays, an empty optional input in form
//! mode is *absent*, textarea line breaks are normalised to `\n`, a `datetime-local` value is
//! read as UTC. Declining ignores every value but the comment. Conversion problems are reported
//! per field with the same keys validation uses (`<property>`, `values.<field>`), so the page
//! can show them next to the right control. Nothing here records anything.

use serde_json::{Map, Number, Value};

use super::text::{datetime_local_to_utc, normalise_newlines};
use crate::model::{
    schema::{ChoiceOption, Field, FieldError, FieldKind, RequestedSchema, TextFormat},
    Decision, DecisionInput, Kind, Spec,
};

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
    /// Proposal fields without a schema property, typed by the proposed value.
    Text {
        multiline: bool,
    },
    Number,
    Bool,
    /// An array of strings, one item per line.
    Lines,
}

/// The shape of a proposal field: its schema property if it has one, else its value's type.
pub fn proposal_shape<'a>(
    schema: Option<&'a RequestedSchema>,
    name: &str,
    value: &Value,
) -> Shape<'a> {
    if let Some(f) = schema.and_then(|s| s.field(name)) {
        return Shape::Schema(f);
    }
    match value {
        Value::Number(_) => Shape::Number,
        Value::Bool(_) => Shape::Bool,
        Value::Array(_) => Shape::Lines,
        Value::String(s) => Shape::Text {
            multiline: s.contains('\n') || s.chars().count() > 80,
        },
        Value::Null | Value::Object(_) => Shape::Text { multiline: true },
    }
}

/// What the conversion produced: the decision to validate, and the fields that could not even
/// be converted (they are left out of `input`).
#[derive(Debug)]
pub struct Parsed {
    pub input: DecisionInput,
    pub errors: Vec<FieldError>,
}

/// Build the reviewer's decision from the posted form.
pub fn to_decision(spec: &Spec, form: &FormData) -> Result<Parsed, BadForm> {
    let decision = match form.get("decision") {
        Some("submitted") => Decision::Submitted,
        Some("declined") => Decision::Declined,
        _ => return Err(BadForm::NoDecision),
    };
    let comment = form
        .get("comment")
        .map(normalise_newlines)
        .filter(|c| !c.trim().is_empty());
    let mut input = DecisionInput {
        decision,
        form_submission: None,
        selected_ids: None,
        values: None,
        comment,
    };
    let mut errors = Vec::new();
    if decision == Decision::Declined {
        return Ok(Parsed { input, errors });
    }
    let schema = spec.schema();
    let mut put = |map: &mut Map<String, Value>, key: &str, name: &str, r| match r {
        Ok(Some(v)) => {
            map.insert(name.to_string(), v);
        }
        Ok(None) => {}
        Err(message) => errors.push(FieldError {
            field: key.to_string(),
            message,
        }),
    };
    match spec.kind {
        Kind::Approval => {
            if let Some(schema) = schema.as_ref().filter(|_| spec.is_form()) {
                let mut map = Map::new();
                for (i, f) in schema.fields().iter().enumerate() {
                    let r = parse_value(Shape::Schema(f), form, &format!("f{i}"), true);
                    put(&mut map, &f.name, &f.name, r);
                }
                input.form_submission = Some(Value::Object(map));
            }
        }
        Kind::Selection => {
            let options = spec.options.as_deref().unwrap_or_default();
            let mut ids = Vec::new();
            for posted in form.all("sel") {
                let id = posted
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| options.get(i))
                    .and_then(|o| o.get("id"))
                    .and_then(Value::as_str);
                match id {
                    Some(id) => ids.push(id.to_string()),
                    None => errors.push(FieldError {
                        field: "selectedIds".into(),
                        message: NOT_AN_OPTION.into(),
                    }),
                }
            }
            input.selected_ids = Some(ids);
        }
        Kind::Proposal => {
            let mut map = Map::new();
            let proposal = spec.proposal.as_ref().into_iter().flatten();
            for (i, (name, proposed)) in proposal.enumerate() {
                if !form.has(&format!("k{i}")) {
                    continue;
                }
                let shape = proposal_shape(schema.as_ref(), name, proposed);
                let r = parse_value(shape, form, &format!("p{i}"), false);
                put(&mut map, &format!("values.{name}"), name, r);
            }
            input.values = Some(Value::Object(map));
        }
    }
    Ok(Parsed { input, errors })
}

/// Convert one control. `Ok(None)` means absent (only when `empty_is_absent`).
fn parse_value(
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

const NOT_AN_OPTION: &str = "is not one of the options";

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
    use crate::model::CreateRequest;
    use serde_json::json;

    fn spec(kind: Kind, v: Value) -> Spec {
        serde_json::from_value::<CreateRequest>(v)
            .unwrap()
            .validate(kind, 86400)
            .unwrap()
            .spec
    }

    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData::parse(serde_urlencoded::to_string(pairs).unwrap().as_bytes()).unwrap()
    }

    #[test]
    fn form_mode_converts_per_kind() {
        let s = spec(
            Kind::Approval,
            json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
                "ok": {"type": "boolean"}, "off": {"type": "boolean"},
                "c": {"type": "string", "enum": ["a", "b"]},
                "m": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
                "at": {"type": "string", "format": "date-time"},
                "empty": {"type": "string"}, "none": {"type": "array", "items": {"enum": ["a"]}}}}}),
        );
        let f = form(&[
            ("decision", "submitted"),
            ("f0", "Bo"),
            ("f1", "3.0"),
            ("f2", "2.5"),
            ("f3", "true"),
            ("f5", "1"),
            ("f6", "0"),
            ("f6", "2"),
            ("f7", "2025-01-31T14:30"),
            ("f8", ""),
            ("comment", "line1\r\nline2"),
        ]);
        let p = to_decision(&s, &f).unwrap();
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            p.input.form_submission.unwrap(),
            json!({"name": "Bo", "n": 3, "x": 2.5, "ok": true, "off": false, "c": "b",
                   "m": ["a", "c"], "at": "2025-01-31T14:30:00Z"})
        );
        assert_eq!(p.input.comment.as_deref(), Some("line1\nline2"));
        let bad = to_decision(&s, &form(&[("decision", "submitted"), ("f1", "x")])).unwrap();
        assert_eq!(bad.errors[0].field, "n");
        let half = to_decision(&s, &form(&[("decision", "submitted"), ("f1", "1.5")])).unwrap();
        assert_eq!(half.errors[0].message, "must be a whole number");
    }

    #[test]
    fn proposals_keep_types_and_only_included_fields() {
        let s = spec(
            Kind::Proposal,
            json!({"message": "m", "proposal": {"t": "x", "n": 2, "b": true, "l": ["a"], "f": 1.5}}),
        );
        let f = form(&[
            ("decision", "submitted"),
            ("k0", "1"),
            ("p0", "a\r\nb"),
            ("k1", "1"),
            ("p1", "7"),
            ("k2", "1"),
            ("p3", "x\r\n\r\n y \r\n"),
            ("k3", "1"),
        ]);
        let p = to_decision(&s, &f).unwrap();
        assert!(p.errors.is_empty());
        assert_eq!(
            p.input.values.unwrap(),
            json!({"t": "a\nb", "n": 7, "b": false, "l": ["x", "y"]})
        );
        let bad = to_decision(&s, &form(&[("decision", "submitted"), ("k1", "1")])).unwrap();
        assert_eq!(bad.errors[0].field, "values.n");
    }

    #[test]
    fn declining_ignores_values_and_a_missing_button_is_refused() {
        let s = spec(
            Kind::Selection,
            json!({"message": "m", "options": [{"id": "a"}]}),
        );
        let p = to_decision(&s, &form(&[("decision", "declined"), ("sel", "0")])).unwrap();
        assert!(p.input.selected_ids.is_none());
        let p = to_decision(&s, &form(&[("decision", "submitted"), ("sel", "0")])).unwrap();
        assert_eq!(p.input.selected_ids.unwrap(), ["a"]);
        for forged in ["1", "a", "-1", ""] {
            let p = to_decision(&s, &form(&[("decision", "submitted"), ("sel", forged)])).unwrap();
            assert_eq!(p.errors[0].field, "selectedIds", "{forged:?}");
        }
        assert!(matches!(
            to_decision(&s, &form(&[("sel", "0")])),
            Err(BadForm::NoDecision)
        ));
    }

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
}
