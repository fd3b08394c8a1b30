//! Approval: json mode (the reviewer approves or declines `context` as is) or form mode (the
//! reviewer fills the `requestedSchema` form; `context`, if any, is shown read-only above it).
//! At least one of the two is required. On submit, form mode answers `formSubmission`.

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Map, Value};

use super::{mcp_common_request, mcp_create_args, Answer, CreateRequest, DecisionInput, Rules};
use crate::{
    error::{Error, FieldError},
    form::{
        controls::{build, Control, Raw},
        convert, FormData, Shape,
    },
    model::schema::RequestedSchema,
};

/// The approval part of a stored request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// Form mode: the validated `requestedSchema` as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
}

impl Approval {
    /// The parsed form schema (form mode). It was validated at create time.
    pub fn schema(&self) -> Option<RequestedSchema> {
        self.requested_schema
            .as_ref()
            .and_then(|v| RequestedSchema::parse(v, "requestedSchema").ok())
    }
    pub fn is_form(&self) -> bool {
        self.requested_schema.is_some()
    }
}

impl Rules for Approval {
    const LABELS: (&'static str, &'static str) = ("Approve", "Decline");
    const HEADING: &'static str = "Approval requested";
    const PAGE_LABEL: &'static str = "Approval request";
    const CREATE_FIELDS: &'static [&'static str] = &["requestedSchema"];

    fn create(
        req: &mut CreateRequest,
        context: Option<&RawValue>,
        errs: &mut Vec<FieldError>,
    ) -> Self {
        let requested_schema = req.requested_schema.take();
        if let Some(v) = &requested_schema {
            if let Err(e) = RequestedSchema::parse(v, "requestedSchema") {
                errs.extend(e);
            }
        }
        if context.is_none() && requested_schema.is_none() {
            errs.push(FieldError::new(
                "context",
                "an approval needs a context (json mode) or a requestedSchema (form mode)",
            ));
        }
        Approval { requested_schema }
    }

    fn decision_fields(&self) -> &'static [&'static str] {
        if self.is_form() {
            &["formSubmission"]
        } else {
            &[]
        }
    }

    fn decide(&self, input: &mut DecisionInput, errs: &mut Vec<FieldError>) -> Answer {
        let mut answer = Answer::default();
        if let Some(schema) = self.schema() {
            match input.form_submission.take() {
                Some(sub) => match schema.validate_values(&sub, true) {
                    Ok(m) => answer.form_submission = Some(m),
                    Err(e) => errs.extend(e),
                },
                None => errs.push(FieldError::new(
                    "formSubmission",
                    "is required to submit this form",
                )),
            }
        }
        answer
    }

    fn controls(&self, form: Option<&FormData>) -> Vec<Control> {
        let schema = self.schema();
        let mut controls = Vec::new();
        for (i, f) in schema.iter().flat_map(|s| s.fields()).enumerate() {
            let id = format!("f{i}");
            let raw = match form {
                Some(form) => Raw::from_form(form, &id),
                None => Raw::from_value(f.default.as_ref()),
            };
            let mut c = build(Shape::Schema(f), id, f.name.clone(), f.label().into(), raw);
            c.required = f.required;
            controls.push(c);
        }
        controls
    }

    fn read_form(&self, form: &FormData, input: &mut DecisionInput, errs: &mut Vec<FieldError>) {
        let Some(schema) = self.schema() else { return };
        let mut map = Map::new();
        for (i, f) in schema.fields().iter().enumerate() {
            match convert(Shape::Schema(f), form, &format!("f{i}"), true) {
                Ok(Some(v)) => {
                    map.insert(f.name.clone(), v);
                }
                Ok(None) => {}
                Err(message) => errs.push(FieldError::new(&f.name, message)),
            }
        }
        input.form_submission = Some(Value::Object(map));
    }
}

mcp_create_args!(
    /// Arguments of `elicit_approval`.
    ApprovalArgs {
        /// Form mode: a flat JSON Schema object (MCP elicitation subset: string with
        /// minLength/maxLength/format email|uri|date|date-time, number/integer with
        /// minimum/maximum, boolean, enum or oneOf {const,title}, array of enum for
        /// multi-select; title, description, default, required). Omit for json mode, where the
        /// reviewer approves `context` as is.
        pub requested_schema: Option<Map<String, Value>>,
    }
);

impl ApprovalArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let requested_schema = self.requested_schema.clone().map(Value::Object);
        Ok(CreateRequest {
            requested_schema,
            ..mcp_common_request!(self)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::valid, Kind, Spec};
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> Spec {
        valid(Kind::Approval, v).unwrap().spec
    }
    fn input(v: Value) -> DecisionInput {
        serde_json::from_value(v).unwrap()
    }
    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData::parse(serde_urlencoded::to_string(pairs).unwrap().as_bytes()).unwrap()
    }

    #[test]
    fn needs_context_or_schema() {
        let e = valid(Kind::Approval, json!({"message": "ok?"})).unwrap_err();
        assert_eq!(e.details()[0].field, "context");
        let ok = serde_json::from_str::<CreateRequest>(
            r#"{"message": "ok?", "context": {"b": 1, "a": 2.50}}"#,
        )
        .unwrap();
        let ok = super::super::validate_create(
            Kind::Approval,
            ok,
            super::super::Bounds {
                min_expires_secs: 10,
                max_expires_secs: 86400,
            },
        )
        .unwrap();
        assert_eq!(ok.spec.context.unwrap().get(), r#"{"b": 1, "a": 2.50}"#);
        assert_eq!(ok.spec.labels.submit, "Approve");
        assert_eq!(ok.spec.expires_in_seconds, 3600);
        let e = valid(
            Kind::Approval,
            json!({"message": "m", "context": 1, "options": [{"id": "a"}]}),
        )
        .unwrap_err();
        assert_eq!(e.details()[0].field, "options");
    }

    #[test]
    fn json_mode_takes_no_values() {
        let s = spec(json!({"message": "m", "context": 1}));
        assert!(input(json!({"decision": "submitted"})).validate(&s).is_ok());
        assert!(input(json!({"decision": "declined", "comment": "no"}))
            .validate(&s)
            .is_ok());
        let e = input(json!({"decision": "submitted", "values": {}}))
            .validate(&s)
            .unwrap_err();
        assert_eq!(e.http_status(), 422);
        let e = input(json!({"decision": "submitted", "formSubmission": {}}))
            .validate(&s)
            .unwrap_err();
        assert_eq!(e.details()[0].message, "is not used by a approval request");
    }

    #[test]
    fn form_validates_against_schema() {
        let s = spec(json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]}}));
        assert!(
            input(json!({"decision": "submitted", "formSubmission": {"email": "a@b.co"}}))
                .validate(&s)
                .is_ok()
        );
        let e = input(json!({"decision": "submitted", "formSubmission": {"email": "nope"}}))
            .validate(&s)
            .unwrap_err();
        assert_eq!(e.details()[0].field, "email");
        assert!(input(json!({"decision": "submitted"}))
            .validate(&s)
            .is_err());
        let long = "c".repeat(2001);
        assert!(input(json!({"decision": "declined", "comment": long}))
            .validate(&s)
            .is_err());
        let both = input(json!({"decision": "submitted", "comment": long, "formSubmission": {}}))
            .validate(&s)
            .unwrap_err();
        let fields: Vec<&str> = both.details().iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            ["comment", "email"],
            "a long comment does not hide field errors"
        );
    }

    #[test]
    fn form_mode_converts_every_field_kind() {
        let s = spec(
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
        let p = DecisionInput::from_form(&s, &f).unwrap();
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            p.input.form_submission.unwrap(),
            json!({"name": "Bo", "n": 3, "x": 2.5, "ok": true, "off": false, "c": "b",
                   "m": ["a", "c"], "at": "2025-01-31T14:30:00Z"})
        );
        assert_eq!(p.input.comment.as_deref(), Some("line1\nline2"));
        let bad =
            DecisionInput::from_form(&s, &form(&[("decision", "submitted"), ("f1", "x")])).unwrap();
        assert_eq!(bad.errors[0].field, "n");
        let half = DecisionInput::from_form(&s, &form(&[("decision", "submitted"), ("f1", "1.5")]))
            .unwrap();
        assert_eq!(half.errors[0].message, "must be a whole number");
    }
}
