//! What an agent sends to create an elicitation, and its validation into a [`Spec`] (SPEC §3).
//!
//! One wire struct serves all three kinds (REST body and MCP arguments alike); fields that do not
//! belong to the kind are refused by name, unknown fields by serde.

use serde::Deserialize;
use serde_json::{value::RawValue, Map, Value};

use super::{
    schema::{FieldError, RequestedSchema},
    Kind, Spec,
};
use crate::error::Error;

/// Largest serialized `context`.
pub const MAX_CONTEXT_BYTES: usize = 64 * 1024;
/// Largest `message`, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4000;
/// Largest `title`, in characters.
pub const MAX_TITLE_CHARS: usize = 120;
pub const MAX_OPTIONS: usize = 500;
pub const MAX_PROPOSAL_FIELDS: usize = 100;
/// Default deadline when `expiresInSeconds` is absent.
pub const DEFAULT_EXPIRES_SECS: u64 = 3600;
pub const MIN_EXPIRES_SECS: u64 = 10;
/// Deepest nesting of arrays/objects accepted in `context`.
pub const MAX_CONTEXT_DEPTH: usize = 64;

/// Nesting depth of a syntactically valid JSON text (strings are skipped correctly).
pub fn json_depth(raw: &str) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in raw.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Create arguments for any kind (camelCase on the wire).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRequest {
    /// Required, 1–4000 characters: what the reviewer is asked and why.
    #[schema(required = true, min_length = 1, max_length = 4000)]
    pub message: Option<String>,
    /// Page heading, 1–120 characters.
    #[schema(min_length = 1, max_length = 120)]
    pub title: Option<String>,
    /// Any JSON up to 64 KiB, echoed verbatim by `result`. Approval json mode: the payload.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Box<RawValue>>,
    /// Deadline in seconds, 10 to the server maximum (default 86400); default 3600.
    #[schema(minimum = 10, maximum = 2592000)]
    pub expires_in_seconds: Option<i64>,
    pub labels: Option<LabelsInput>,
    /// 1–200 characters; the same tenant + key returns the first elicitation.
    #[schema(min_length = 1, max_length = 200)]
    pub idempotency_key: Option<String>,
    /// Approval (form mode) and proposal: the MCP 2025-11-25 elicitation schema subset.
    #[schema(value_type = Option<Object>)]
    pub requested_schema: Option<Value>,
    /// Selection: 1–500 options, each with a unique string `id`, optional `label`/`description`.
    #[schema(value_type = Option<Vec<Object>>, min_items = 1, max_items = 500)]
    pub options: Option<Vec<Value>>,
    /// Selection: default 1.
    #[schema(minimum = 1)]
    pub min_selections: Option<i64>,
    /// Selection: default 1 (single select), at most the number of options.
    #[schema(minimum = 1)]
    pub max_selections: Option<i64>,
    /// Proposal: 1–100 fields, each a string, number, boolean or array of strings.
    #[schema(value_type = Option<Object>)]
    pub proposal: Option<Value>,
}

/// `labels` as sent: only `submit` and `decline`.
/// Button words (1–40 characters each after trimming).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsInput {
    #[schema(min_length = 1, max_length = 40)]
    pub submit: Option<String>,
    #[schema(min_length = 1, max_length = 40)]
    pub decline: Option<String>,
}

/// A validated create: the spec to store plus the idempotency key.
#[derive(Debug)]
pub struct ValidCreate {
    pub spec: Spec,
    pub idempotency_key: Option<String>,
}

fn fe(field: &str, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

impl CreateRequest {
    /// Validate for `kind` with the server's deadline bounds (SPEC: 10 to the configured max).
    pub fn validate(self, kind: Kind, max_expires_secs: u64) -> Result<ValidCreate, Error> {
        self.validate_with(kind, MIN_EXPIRES_SECS, max_expires_secs)
    }

    /// [`validate`](Self::validate) with an explicit minimum deadline.
    pub fn validate_with(
        self,
        kind: Kind,
        min_expires_secs: u64,
        max_expires_secs: u64,
    ) -> Result<ValidCreate, Error> {
        let mut errs = Vec::new();
        if let Some(ctx) = &self.context {
            if ctx.get().len() > MAX_CONTEXT_BYTES {
                return Err(Error::PayloadTooLarge(format!(
                    "context is {} bytes serialized; the limit is {MAX_CONTEXT_BYTES}",
                    ctx.get().len()
                )));
            }
            if json_depth(ctx.get()) > MAX_CONTEXT_DEPTH {
                errs.push(fe(
                    "context",
                    format!("nests deeper than {MAX_CONTEXT_DEPTH} levels"),
                ));
            }
        }
        let message = match self.message {
            None => {
                errs.push(fe("message", "is required"));
                String::new()
            }
            Some(m) => {
                if m.trim().is_empty() {
                    errs.push(fe("message", "must not be empty"));
                } else if chars(&m) > MAX_MESSAGE_CHARS {
                    errs.push(fe(
                        "message",
                        format!("must be at most {MAX_MESSAGE_CHARS} characters"),
                    ));
                }
                m
            }
        };
        if let Some(t) = &self.title {
            if t.trim().is_empty() || chars(t) > MAX_TITLE_CHARS {
                errs.push(fe(
                    "title",
                    format!("must be 1–{MAX_TITLE_CHARS} characters"),
                ));
            }
        }
        let expires_in_seconds = match self.expires_in_seconds {
            None => DEFAULT_EXPIRES_SECS.min(max_expires_secs),
            Some(s) if s >= min_expires_secs as i64 && s as u64 <= max_expires_secs => s as u64,
            Some(_) => {
                errs.push(fe(
                    "expiresInSeconds",
                    format!("must be between {min_expires_secs} and {max_expires_secs}"),
                ));
                0
            }
        };
        let mut labels = kind.default_labels();
        if let Some(l) = self.labels {
            for (name, value, slot) in [
                ("labels.submit", l.submit, &mut labels.submit),
                ("labels.decline", l.decline, &mut labels.decline),
            ] {
                if let Some(v) = value {
                    let v = v.trim();
                    if v.is_empty() || chars(v) > 40 {
                        errs.push(fe(name, "must be 1–40 characters after trimming"));
                    } else {
                        *slot = v.to_string();
                    }
                }
            }
        }
        if let Some(k) = &self.idempotency_key {
            if k.is_empty() || chars(k) > 200 {
                errs.push(fe("idempotencyKey", "must be 1–200 characters"));
            }
        }
        let not_for = |errs: &mut Vec<FieldError>, present: bool, field: &str| {
            if present {
                errs.push(fe(
                    field,
                    format!("is not allowed for a {} request", kind.as_str()),
                ));
            }
        };
        let mut spec = Spec {
            kind,
            title: self.title.map(|t| t.trim().to_string()),
            message,
            context: self.context,
            labels,
            requested_schema: None,
            options: None,
            min_selections: None,
            max_selections: None,
            proposal: None,
            expires_in_seconds,
        };
        let schema = match &self.requested_schema {
            Some(v) => match RequestedSchema::parse(v, "requestedSchema") {
                Ok(s) => Some(s),
                Err(e) => {
                    errs.extend(e);
                    None
                }
            },
            None => None,
        };
        match kind {
            Kind::Approval => {
                not_for(&mut errs, self.options.is_some(), "options");
                not_for(&mut errs, self.min_selections.is_some(), "minSelections");
                not_for(&mut errs, self.max_selections.is_some(), "maxSelections");
                not_for(&mut errs, self.proposal.is_some(), "proposal");
                if spec.context.is_none() && self.requested_schema.is_none() {
                    errs.push(fe(
                        "context",
                        "an approval needs a context (json mode) or a requestedSchema (form mode)",
                    ));
                }
                spec.requested_schema = self.requested_schema;
            }
            Kind::Selection => {
                not_for(
                    &mut errs,
                    self.requested_schema.is_some(),
                    "requestedSchema",
                );
                not_for(&mut errs, self.proposal.is_some(), "proposal");
                let options = validate_options(self.options, &mut errs);
                let n = options.len() as i64;
                let min = self.min_selections.unwrap_or(1);
                let max = self.max_selections.unwrap_or(1);
                if min < 1 || (n > 0 && min > n) {
                    errs.push(fe(
                        "minSelections",
                        "must be at least 1 and at most the number of options",
                    ));
                }
                if max < 1 || (n > 0 && max > n) {
                    errs.push(fe(
                        "maxSelections",
                        "must be at least 1 and at most the number of options",
                    ));
                } else if max < min {
                    errs.push(fe("maxSelections", "must not be less than minSelections"));
                }
                spec.options = Some(options);
                spec.min_selections = Some(min.clamp(0, u32::MAX as i64) as u32);
                spec.max_selections = Some(max.clamp(0, u32::MAX as i64) as u32);
            }
            Kind::Proposal => {
                not_for(&mut errs, self.options.is_some(), "options");
                not_for(&mut errs, self.min_selections.is_some(), "minSelections");
                not_for(&mut errs, self.max_selections.is_some(), "maxSelections");
                let proposal = validate_proposal(self.proposal, schema.as_ref(), &mut errs);
                spec.proposal = Some(proposal);
                spec.requested_schema = self.requested_schema;
            }
        }
        if errs.is_empty() {
            Ok(ValidCreate {
                spec,
                idempotency_key: self.idempotency_key,
            })
        } else {
            Err(Error::invalid_fields(errs))
        }
    }
}

fn validate_options(
    options: Option<Vec<Value>>,
    errs: &mut Vec<FieldError>,
) -> Vec<Map<String, Value>> {
    let Some(options) = options else {
        errs.push(fe("options", "is required"));
        return Vec::new();
    };
    if options.is_empty() || options.len() > MAX_OPTIONS {
        errs.push(fe("options", format!("must have 1–{MAX_OPTIONS} entries")));
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(options.len());
    for (i, o) in options.into_iter().enumerate() {
        let path = format!("options[{i}]");
        let Value::Object(map) = o else {
            errs.push(fe(&path, "must be an object with an id"));
            continue;
        };
        match map.get("id") {
            Some(Value::String(id)) if !id.is_empty() && chars(id) <= 200 => {
                if !seen.insert(id.clone()) {
                    errs.push(fe(&format!("{path}.id"), format!("duplicate id {id:?}")));
                }
            }
            _ => errs.push(fe(
                &format!("{path}.id"),
                "must be a string of 1–200 characters",
            )),
        }
        for (key, max) in [("label", 200), ("description", 2000)] {
            match map.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if chars(s) <= max => {}
                _ => errs.push(fe(
                    &format!("{path}.{key}"),
                    format!("must be a string of at most {max} characters"),
                )),
            }
        }
        out.push(map);
    }
    out
}

fn validate_proposal(
    proposal: Option<Value>,
    schema: Option<&RequestedSchema>,
    errs: &mut Vec<FieldError>,
) -> Map<String, Value> {
    let map = match proposal {
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(fe("proposal", "must be an object of fields"));
            return Map::new();
        }
        None => {
            errs.push(fe("proposal", "is required"));
            return Map::new();
        }
    };
    if map.is_empty() || map.len() > MAX_PROPOSAL_FIELDS {
        errs.push(fe(
            "proposal",
            format!("must have 1–{MAX_PROPOSAL_FIELDS} fields"),
        ));
    }
    for (name, value) in &map {
        let path = format!("proposal.{name}");
        if name.is_empty() || chars(name) > 100 || name.chars().any(char::is_control) {
            errs.push(fe(&path, "field names must be 1–100 printable characters"));
        }
        if let Err(m) = proposal_value_shape(value) {
            errs.push(fe(&path, m));
            continue;
        }
        if let Some(field) = schema.and_then(|s| s.field(name)) {
            if let Err(m) = field.validate_value(value) {
                errs.push(fe(&path, format!("does not satisfy requestedSchema: {m}")));
            }
        }
    }
    if let Some(s) = schema {
        for f in s.fields() {
            if !map.contains_key(&f.name) {
                errs.push(fe(
                    &format!("requestedSchema.properties.{}", f.name),
                    "describes a field that is not in the proposal",
                ));
            }
        }
    }
    map
}

/// Proposal values are strings, numbers, booleans or arrays of strings.
pub fn proposal_value_shape(v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) if chars(s) <= 10_000 => Ok(()),
        Value::String(_) => Err("strings must be at most 10000 characters".into()),
        Value::Number(_) | Value::Bool(_) => Ok(()),
        Value::Array(items)
            if items.len() <= 100
                && items
                    .iter()
                    .all(|i| matches!(i, Value::String(s) if chars(s) <= 1000)) =>
        {
            Ok(())
        }
        _ => Err("must be a string, number, boolean or array of at most 100 strings".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: Value) -> CreateRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn approval_needs_context_or_schema() {
        let e = req(json!({"message": "ok?"}))
            .validate(Kind::Approval, 86400)
            .unwrap_err();
        assert_eq!(e.details()[0].field, "context");
        let ok = serde_json::from_str::<CreateRequest>(
            r#"{"message": "ok?", "context": {"b": 1, "a": 2.50}}"#,
        )
        .unwrap()
        .validate(Kind::Approval, 86400)
        .unwrap();
        assert_eq!(ok.spec.context.unwrap().get(), r#"{"b": 1, "a": 2.50}"#);
        assert_eq!(ok.spec.labels.submit, "Approve");
        assert_eq!(ok.spec.expires_in_seconds, 3600);
    }

    #[test]
    fn field_limits() {
        let long = "x".repeat(4001);
        let e = req(
            json!({"message": long, "context": 1, "expiresInSeconds": 5, "title": "",
            "labels": {"submit": "   "}, "idempotencyKey": ""}),
        )
        .validate(Kind::Approval, 86400)
        .unwrap_err();
        let fields: Vec<_> = e.details().iter().map(|d| d.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "message",
                "title",
                "expiresInSeconds",
                "labels.submit",
                "idempotencyKey"
            ]
        );
        let big = "y".repeat(MAX_CONTEXT_BYTES);
        let e = req(json!({"message": "m", "context": big}))
            .validate(Kind::Approval, 86400)
            .unwrap_err();
        assert_eq!(e.code(), "payload_too_large");
        assert!(
            serde_json::from_value::<CreateRequest>(json!({"message": "m", "bogus": 1})).is_err()
        );
        assert!(
            serde_json::from_value::<CreateRequest>(json!({"labels": {"other": "x"}})).is_err()
        );
    }

    #[test]
    fn depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a": [1, {"b": "[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[", [[]]]"#), 3);
    }

    #[test]
    fn selection_rules() {
        let ok = req(json!({"message": "pick", "options": [{"id": "a", "x": 1}, {"id": "b"}], "maxSelections": 2}))
            .validate(Kind::Selection, 86400)
            .unwrap();
        assert_eq!(ok.spec.labels.decline, "None of these");
        assert_eq!(ok.spec.options.unwrap()[0]["x"], 1);
        for bad in [
            json!({"message": "m", "options": []}),
            json!({"message": "m", "options": [{"id": "a"}, {"id": "a"}]}),
            json!({"message": "m", "options": [{"id": "a"}], "maxSelections": 2}),
            json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}], "minSelections": 2, "maxSelections": 1}),
            json!({"message": "m", "options": ["a"]}),
            json!({"message": "m", "options": [{"id": "a"}], "context": 1, "proposal": {"a": 1}}),
        ] {
            assert!(
                req(bad.clone()).validate(Kind::Selection, 86400).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn proposal_rules() {
        let ok = req(json!({"message": "m", "proposal": {"name": "x", "n": 2, "tags": ["a"]},
            "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}}))
            .validate(Kind::Proposal, 86400)
            .unwrap();
        assert_eq!(ok.spec.proposal.unwrap().len(), 3);
        for bad in [
            json!({"message": "m", "proposal": {}}),
            json!({"message": "m", "proposal": {"a": {"nested": 1}}}),
            json!({"message": "m", "proposal": {"n": 9}, "requestedSchema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}}}),
            json!({"message": "m", "proposal": {"n": 1}, "requestedSchema": {"type": "object", "properties": {"m": {"type": "integer"}}}}),
        ] {
            assert!(
                req(bad.clone()).validate(Kind::Proposal, 86400).is_err(),
                "{bad}"
            );
        }
    }
}
