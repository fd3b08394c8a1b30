//! What a reviewer sends, and its validation against the request into an [`Outcome`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{request::proposal_value_shape, schema::FieldError, Decision, Kind, Spec};
use crate::error::Error;

/// Largest reviewer comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2000;

/// Reviewer decision JSON (SPEC §4).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionInput {
    pub decision: Decision,
    /// Form approvals: values keyed by `requestedSchema` property.
    #[schema(value_type = Option<Object>)]
    pub form_submission: Option<Value>,
    /// Selections: the chosen option ids.
    pub selected_ids: Option<Vec<String>>,
    /// Proposals: the kept fields with their final values.
    #[schema(value_type = Option<Object>)]
    pub values: Option<Value>,
    /// Optional free text, at most 2000 characters.
    #[schema(max_length = 2000)]
    pub comment: Option<String>,
}

/// A validated decision, as stored and returned by `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form_submission: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

fn fe(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

impl DecisionInput {
    /// Check the decision against what was asked. Errors are `InvalidDecision` (422) with
    /// per-field details; nothing is recorded when this fails.
    pub fn validate(self, spec: &Spec) -> Result<Outcome, Error> {
        let mut errs = Vec::new();
        let comment = match self.comment {
            Some(c) if c.chars().count() > MAX_COMMENT_CHARS => {
                errs.push(fe(
                    "comment",
                    format!("must be at most {MAX_COMMENT_CHARS} characters"),
                ));
                None
            }
            Some(c) if c.trim().is_empty() => None,
            other => other,
        };
        let mut out = Outcome {
            decision: self.decision,
            form_submission: None,
            selected_ids: None,
            values: None,
            comment,
        };
        // Comment problems must not hide field problems: the reviewer should see all at once.
        let comment_errors = errs.len();
        let submitted = self.decision == Decision::Submitted;
        let allowed = |field: &str, present: bool, ok: bool, errs: &mut Vec<FieldError>| {
            if present && !ok {
                errs.push(fe(
                    field,
                    if submitted {
                        format!("is not used by a {} request", spec.kind.as_str())
                    } else {
                        "must be omitted when declining".to_string()
                    },
                ));
            }
        };
        let form = spec.is_form();
        allowed(
            "formSubmission",
            self.form_submission.is_some(),
            submitted && form,
            &mut errs,
        );
        allowed(
            "selectedIds",
            self.selected_ids.is_some(),
            submitted && spec.kind == Kind::Selection,
            &mut errs,
        );
        allowed(
            "values",
            self.values.is_some(),
            submitted && spec.kind == Kind::Proposal,
            &mut errs,
        );
        if submitted && errs.len() == comment_errors {
            match spec.kind {
                Kind::Approval if form => match (self.form_submission, spec.schema()) {
                    (Some(sub), Some(schema)) => match schema.validate_values(&sub, true) {
                        Ok(m) => out.form_submission = Some(m),
                        Err(e) => errs.extend(e),
                    },
                    _ => errs.push(fe("formSubmission", "is required to submit this form")),
                },
                Kind::Approval => {}
                Kind::Selection => match self.selected_ids {
                    Some(ids) => match check_selection(spec, &ids) {
                        Ok(()) => out.selected_ids = Some(ids),
                        Err(e) => errs.push(e),
                    },
                    None => errs.push(fe("selectedIds", "is required to submit a selection")),
                },
                Kind::Proposal => match self.values {
                    Some(Value::Object(values)) => match check_proposal(spec, &values) {
                        Ok(()) => out.values = Some(values),
                        Err(e) => errs.extend(e),
                    },
                    Some(_) => errs.push(fe("values", "must be an object of the kept fields")),
                    None => errs.push(fe("values", "is required to submit a proposal")),
                },
            }
        }
        if errs.is_empty() {
            Ok(out)
        } else {
            let message = match errs.as_slice() {
                [one] => format!("{}: {}", one.field, one.message),
                many => format!("{} fields are invalid", many.len()),
            };
            Err(Error::InvalidDecision {
                message,
                details: errs,
            })
        }
    }
}

fn check_selection(spec: &Spec, ids: &[String]) -> Result<(), FieldError> {
    let options = spec.options.as_deref().unwrap_or_default();
    let min = spec.min_selections.unwrap_or(1) as usize;
    let max = spec.max_selections.unwrap_or(1) as usize;
    let mut seen = std::collections::HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(fe("selectedIds", format!("{id:?} is chosen twice")));
        }
        if !options
            .iter()
            .any(|o| o.get("id").and_then(Value::as_str) == Some(id))
        {
            return Err(fe(
                "selectedIds",
                format!("{id:?} is not one of the options"),
            ));
        }
    }
    if ids.len() < min || ids.len() > max {
        return Err(fe(
            "selectedIds",
            if min == max {
                format!("choose exactly {min}")
            } else {
                format!("choose between {min} and {max}")
            },
        ));
    }
    Ok(())
}

fn check_proposal(spec: &Spec, values: &Map<String, Value>) -> Result<(), Vec<FieldError>> {
    let proposal = spec.proposal.as_ref().cloned().unwrap_or_default();
    let schema = spec.schema();
    let mut errs = Vec::new();
    for (name, value) in values {
        let path = format!("values.{name}");
        if !proposal.contains_key(name) {
            errs.push(fe(&path, "is not a field of the proposal"));
            continue;
        }
        if let Err(m) = proposal_value_shape(value) {
            errs.push(fe(&path, m));
            continue;
        }
        match schema.as_ref().and_then(|s| s.field(name)) {
            Some(field) => {
                if let Err(m) = field.validate_value(value) {
                    errs.push(fe(&path, m));
                }
            }
            None => {
                // Without a schema, an edit keeps the proposed value's type.
                let same = matches!(
                    (&proposal[name], value),
                    (Value::String(_), Value::String(_))
                        | (Value::Number(_), Value::Number(_))
                        | (Value::Bool(_), Value::Bool(_))
                        | (Value::Array(_), Value::Array(_))
                );
                if !same {
                    errs.push(fe(&path, "must keep the type of the proposed value"));
                }
            }
        }
    }
    if let Some(schema) = &schema {
        for f in schema.fields().iter().filter(|f| f.required) {
            if !values.contains_key(&f.name) {
                errs.push(fe(
                    &format!("values.{}", f.name),
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
    fn input(v: Value) -> DecisionInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn json_approval_takes_no_values() {
        let s = spec(Kind::Approval, json!({"message": "m", "context": 1}));
        assert!(input(json!({"decision": "submitted"})).validate(&s).is_ok());
        assert!(input(json!({"decision": "declined", "comment": "no"}))
            .validate(&s)
            .is_ok());
        let e = input(json!({"decision": "submitted", "values": {}}))
            .validate(&s)
            .unwrap_err();
        assert_eq!(e.http_status(), 422);
    }

    #[test]
    fn selection_counts() {
        let s = spec(
            Kind::Selection,
            json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "minSelections": 1, "maxSelections": 2}),
        );
        assert!(
            input(json!({"decision": "submitted", "selectedIds": ["a", "c"]}))
                .validate(&s)
                .is_ok()
        );
        for bad in [
            json!([]),
            json!(["a", "b", "c"]),
            json!(["a", "a"]),
            json!(["z"]),
        ] {
            assert!(input(json!({"decision": "submitted", "selectedIds": bad}))
                .validate(&s)
                .is_err());
        }
        assert!(input(json!({"decision": "submitted"}))
            .validate(&s)
            .is_err());
        assert!(input(json!({"decision": "declined", "selectedIds": ["a"]}))
            .validate(&s)
            .is_err());
    }

    #[test]
    fn proposal_subset_and_types() {
        let s = spec(
            Kind::Proposal,
            json!({"message": "m", "proposal": {"a": "x", "b": 2, "c": true},
            "requestedSchema": {"type": "object", "properties": {"b": {"type": "integer", "maximum": 5}, "a": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"]}}),
        );
        let ok = input(json!({"decision": "submitted", "values": {"a": "y", "b": 4}}))
            .validate(&s)
            .unwrap();
        assert_eq!(ok.values.unwrap().len(), 2);
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
    fn form_validates_against_schema() {
        let s = spec(
            Kind::Approval,
            json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]}}),
        );
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
}
