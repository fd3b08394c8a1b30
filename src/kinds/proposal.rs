//! Proposal: 1–100 proposed fields the reviewer keeps, drops or edits one by one, then submits
//! (or rejects). An optional `requestedSchema` gives fields titles and constraints; a field it
//! marks required cannot be dropped. Without a schema an edit keeps the proposed value's type.
//! On submit it answers `values`: only the kept fields, with their final values.

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Map, Value};

use super::{mcp_common_request, mcp_create_args, Answer, CreateRequest, DecisionInput, Rules};
use crate::{
    error::{Error, FieldError},
    form::{
        controls::{build, Control, Include, Raw},
        convert, FormData, Shape,
    },
    model::{rules::chars, schema::RequestedSchema},
};

/// Most fields a proposal may have.
pub const MAX_FIELDS: usize = 100;
/// Longest field name, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// Longest string value, in characters; longest list and list item.
pub const MAX_STRING_CHARS: usize = 10_000;
pub const MAX_LIST_ITEMS: usize = 100;
pub const MAX_ITEM_CHARS: usize = 1000;

/// The proposal part of a stored request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proposal {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    pub proposal: Map<String, Value>,
}

impl Proposal {
    fn schema(&self) -> Option<RequestedSchema> {
        self.requested_schema
            .as_ref()
            .and_then(|v| RequestedSchema::parse(v, "requestedSchema").ok())
    }
}

/// Proposal values are strings, numbers, booleans or arrays of strings.
pub fn value_shape(v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) if chars(s) <= MAX_STRING_CHARS => Ok(()),
        Value::String(_) => Err(format!(
            "strings must be at most {MAX_STRING_CHARS} characters"
        )),
        Value::Number(_) | Value::Bool(_) => Ok(()),
        Value::Array(items)
            if items.len() <= MAX_LIST_ITEMS
                && items
                    .iter()
                    .all(|i| matches!(i, Value::String(s) if chars(s) <= MAX_ITEM_CHARS)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "must be a string, number, boolean or array of at most {MAX_LIST_ITEMS} strings"
        )),
    }
}

/// The shape of a field's control: its schema property if it has one, else its value's type.
fn shape<'a>(schema: Option<&'a RequestedSchema>, name: &str, value: &Value) -> Shape<'a> {
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

impl Rules for Proposal {
    const LABELS: (&'static str, &'static str) = ("Submit", "Reject");
    const HEADING: &'static str = "Review this proposal";
    const PAGE_LABEL: &'static str = "Proposal to review";
    const CREATE_FIELDS: &'static [&'static str] = &["proposal", "requestedSchema"];

    fn create(
        req: &mut CreateRequest,
        _context: Option<&RawValue>,
        errs: &mut Vec<FieldError>,
    ) -> Self {
        let requested_schema = req.requested_schema.take();
        let schema = match &requested_schema {
            Some(v) => match RequestedSchema::parse(v, "requestedSchema") {
                Ok(s) => Some(s),
                Err(e) => {
                    errs.extend(e);
                    None
                }
            },
            None => None,
        };
        let proposal = validate_proposal(req.proposal.take(), schema.as_ref(), errs);
        Proposal {
            requested_schema,
            proposal,
        }
    }

    fn decision_fields(&self) -> &'static [&'static str] {
        &["values"]
    }

    fn decide(&self, input: &mut DecisionInput, errs: &mut Vec<FieldError>) -> Answer {
        let mut answer = Answer::default();
        match input.values.take() {
            Some(Value::Object(values)) => match self.check(&values) {
                Ok(()) => answer.values = Some(values),
                Err(e) => errs.extend(e),
            },
            Some(_) => errs.push(FieldError::new(
                "values",
                "must be an object of the kept fields",
            )),
            None => errs.push(FieldError::new(
                "values",
                "is required to submit a proposal",
            )),
        }
        answer
    }

    /// Every field pre-filled and editable behind an "Include <title>" box (checked).
    fn controls(&self, form: Option<&FormData>) -> Vec<Control> {
        let schema = self.schema();
        let mut controls = Vec::new();
        for (i, (name, value)) in self.proposal.iter().enumerate() {
            let field = schema.as_ref().and_then(|s| s.field(name));
            let title = field.map_or(name.as_str(), |f| f.label()).to_string();
            let (id, include_id) = (format!("p{i}"), format!("k{i}"));
            let raw = match form {
                Some(form) => Raw::from_form(form, &id),
                None => Raw::from_value(Some(value)),
            };
            let shape = shape(schema.as_ref(), name, value);
            let mut c = build(shape, id, format!("values.{name}"), title, raw).relaxed();
            c.include = Some(Include {
                included: form.is_none_or(|f| f.has(&include_id)),
                locked: field.is_some_and(|f| f.required),
                id: include_id,
            });
            controls.push(c);
        }
        controls
    }

    fn read_form(&self, form: &FormData, input: &mut DecisionInput, errs: &mut Vec<FieldError>) {
        let schema = self.schema();
        let mut map = Map::new();
        for (i, (name, proposed)) in self.proposal.iter().enumerate() {
            if !form.has(&format!("k{i}")) {
                continue;
            }
            let shape = shape(schema.as_ref(), name, proposed);
            match convert(shape, form, &format!("p{i}"), false) {
                Ok(Some(v)) => {
                    map.insert(name.clone(), v);
                }
                Ok(None) => {}
                Err(message) => errs.push(FieldError::new(format!("values.{name}"), message)),
            }
        }
        input.values = Some(Value::Object(map));
    }
}

impl Proposal {
    fn check(&self, values: &Map<String, Value>) -> Result<(), Vec<FieldError>> {
        let schema = self.schema();
        let mut errs = Vec::new();
        for (name, value) in values {
            let path = format!("values.{name}");
            let Some(proposed) = self.proposal.get(name) else {
                errs.push(FieldError::new(&path, "is not a field of the proposal"));
                continue;
            };
            if let Err(m) = value_shape(value) {
                errs.push(FieldError::new(&path, m));
                continue;
            }
            match schema.as_ref().and_then(|s| s.field(name)) {
                Some(field) => {
                    if let Err(m) = field.validate_value(value) {
                        errs.push(FieldError::new(&path, m));
                    }
                }
                None => {
                    // Without a schema, an edit keeps the proposed value's type.
                    let same = matches!(
                        (proposed, value),
                        (Value::String(_), Value::String(_))
                            | (Value::Number(_), Value::Number(_))
                            | (Value::Bool(_), Value::Bool(_))
                            | (Value::Array(_), Value::Array(_))
                    );
                    if !same {
                        errs.push(FieldError::new(
                            &path,
                            "must keep the type of the proposed value",
                        ));
                    }
                }
            }
        }
        if let Some(schema) = &schema {
            for f in schema.fields().iter().filter(|f| f.required) {
                if !values.contains_key(&f.name) {
                    errs.push(FieldError::new(
                        format!("values.{}", f.name),
                        "is required and cannot be dropped",
                    ));
                }
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

fn validate_proposal(
    proposal: Option<Value>,
    schema: Option<&RequestedSchema>,
    errs: &mut Vec<FieldError>,
) -> Map<String, Value> {
    let map = match proposal {
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new("proposal", "must be an object of fields"));
            return Map::new();
        }
        None => {
            errs.push(FieldError::new("proposal", "is required"));
            return Map::new();
        }
    };
    if map.is_empty() || map.len() > MAX_FIELDS {
        errs.push(FieldError::new(
            "proposal",
            format!("must have 1–{MAX_FIELDS} fields"),
        ));
    }
    for (name, value) in &map {
        let path = format!("proposal.{name}");
        if name.is_empty() || chars(name) > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            errs.push(FieldError::new(
                &path,
                format!("field names must be 1–{MAX_NAME_CHARS} printable characters"),
            ));
        }
        if let Err(m) = value_shape(value) {
            errs.push(FieldError::new(&path, m));
            continue;
        }
        if let Some(field) = schema.and_then(|s| s.field(name)) {
            if let Err(m) = field.validate_value(value) {
                errs.push(FieldError::new(
                    &path,
                    format!("does not satisfy requestedSchema: {m}"),
                ));
            }
        }
    }
    if let Some(s) = schema {
        for f in s.fields() {
            if !map.contains_key(&f.name) {
                errs.push(FieldError::new(
                    format!("requestedSchema.properties.{}", f.name),
                    "describes a field that is not in the proposal",
                ));
            }
        }
    }
    map
}

mcp_create_args!(
    /// Arguments of `elicit_proposal`.
    ProposalArgs {
        /// 1–100 fields, each a string, number, boolean or array of strings. The reviewer keeps
        /// or drops each field and may edit its value.
        pub proposal: Map<String, Value>,
        /// Optional schema (same subset as elicit_approval) giving fields titles and constraints.
        pub requested_schema: Option<Map<String, Value>>,
    }
);

impl ProposalArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let proposal = Some(Value::Object(self.proposal.clone()));
        let requested_schema = self.requested_schema.clone().map(Value::Object);
        Ok(CreateRequest {
            proposal,
            requested_schema,
            ..mcp_common_request!(self)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::valid, Kind, KindSpec, Spec};
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> Spec {
        valid(Kind::Proposal, v).unwrap().spec
    }
    fn input(v: Value) -> DecisionInput {
        serde_json::from_value(v).unwrap()
    }
    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData::parse(serde_urlencoded::to_string(pairs).unwrap().as_bytes()).unwrap()
    }

    #[test]
    fn create_rules() {
        let ok = spec(
            json!({"message": "m", "proposal": {"name": "x", "n": 2, "tags": ["a"]},
            "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}}),
        );
        let KindSpec::Proposal(p) = &ok.kind else {
            panic!("{ok:?}")
        };
        assert_eq!(p.proposal.len(), 3);
        for bad in [
            json!({"message": "m", "proposal": {}}),
            json!({"message": "m", "proposal": {"a": {"nested": 1}}}),
            json!({"message": "m", "proposal": {"n": 9}, "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}}),
            json!({"message": "m", "proposal": {"n": 1}, "requestedSchema": {"type": "object", "properties": {"m": {"type": "integer"}}}}),
        ] {
            assert!(valid(Kind::Proposal, bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn subset_and_types() {
        let s = spec(
            json!({"message": "m", "proposal": {"a": "x", "b": 2, "c": true},
            "requestedSchema": {"type": "object", "properties": {"b": {"type": "integer", "maximum": 5}, "a": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"]}}),
        );
        let ok = input(json!({"decision": "submitted", "values": {"a": "y", "b": 4}}))
            .validate(&s)
            .unwrap();
        assert_eq!(ok.answer.values.unwrap().len(), 2);
        for bad in [
            json!({"b": 4}),
            json!({"a": "y", "b": 6}),
            json!({"a": "y", "z": 1}),
            json!({"a": 1}),
        ] {
            assert!(input(json!({"decision": "submitted", "values": bad}))
                .validate(&s)
                .is_err());
        }
    }

    #[test]
    fn the_form_keeps_types_and_only_included_fields() {
        let s = spec(
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
        let p = DecisionInput::from_form(&s, &f).unwrap();
        assert!(p.errors.is_empty());
        assert_eq!(
            p.input.values.unwrap(),
            json!({"t": "a\nb", "n": 7, "b": false, "l": ["x", "y"]})
        );
        let bad =
            DecisionInput::from_form(&s, &form(&[("decision", "submitted"), ("k1", "1")])).unwrap();
        assert_eq!(bad.errors[0].field, "values.n");
    }
}
