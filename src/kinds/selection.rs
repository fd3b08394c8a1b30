//! Selection: the reviewer picks `minSelections`–`maxSelections` of 1–500 options (single
//! choice by default); declining reads "None of these". On submit it answers `selectedIds`.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Map, Value};

use super::{mcp_common_request, mcp_create_args, Answer, CreateRequest, DecisionInput, Rules};
use crate::{
    error::{Error, FieldError},
    form::{
        controls::{count_hint, Choice, Control, Widget},
        FormData, NOT_AN_OPTION,
    },
    model::rules::chars,
};

/// Most options a selection may offer.
pub const MAX_OPTIONS: usize = 500;
/// Longest option id, label and description, in characters.
pub const MAX_ID_CHARS: usize = 200;
pub const MAX_LABEL_CHARS: usize = 200;
pub const MAX_DESCRIPTION_CHARS: usize = 2000;

/// The selection part of a stored request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    /// Each with a unique string `id`, optional `label` and `description`; extra keys kept.
    pub options: Vec<Map<String, Value>>,
    pub min_selections: u32,
    pub max_selections: u32,
    /// Liquid for the cells of one option row (checked at create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_template: Option<String>,
    /// Liquid for one option's details card (checked at create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hover_template: Option<String>,
}

impl Selection {
    fn text(o: &Map<String, Value>, key: &str) -> Option<String> {
        o.get(key).and_then(Value::as_str).map(str::to_string)
    }
    fn id(o: &Map<String, Value>) -> Option<&str> {
        o.get("id").and_then(Value::as_str)
    }
}

impl Rules for Selection {
    const LABELS: (&'static str, &'static str) = ("Submit", "None of these");
    const HEADING: &'static str = "Please choose";
    const PAGE_LABEL: &'static str = "Selection request";
    const CREATE_FIELDS: &'static [&'static str] = &[
        "options",
        "minSelections",
        "maxSelections",
        "rowTemplate",
        "hoverTemplate",
    ];

    fn create(
        req: &mut CreateRequest,
        _context: Option<&RawValue>,
        errs: &mut Vec<FieldError>,
    ) -> Self {
        let options = validate_options(req.options.take(), errs);
        let n = options.len() as i64;
        let min = req.min_selections.take().unwrap_or(1);
        let max = req.max_selections.take().unwrap_or(1);
        if min < 1 || (n > 0 && min > n) {
            errs.push(FieldError::new(
                "minSelections",
                "must be at least 1 and at most the number of options",
            ));
        }
        if max < 1 || (n > 0 && max > n) {
            errs.push(FieldError::new(
                "maxSelections",
                "must be at least 1 and at most the number of options",
            ));
        } else if max < min {
            errs.push(FieldError::new(
                "maxSelections",
                "must not be less than minSelections",
            ));
        }
        Selection {
            options,
            min_selections: min.clamp(0, u32::MAX as i64) as u32,
            max_selections: max.clamp(0, u32::MAX as i64) as u32,
            row_template: req.row_template.take(),
            hover_template: req.hover_template.take(),
        }
    }

    fn decision_fields(&self) -> &'static [&'static str] {
        &["selectedIds"]
    }

    fn decide(&self, input: &mut DecisionInput, errs: &mut Vec<FieldError>) -> Answer {
        let mut answer = Answer::default();
        match input.selected_ids.take() {
            Some(ids) => match self.check(&ids) {
                Ok(()) => answer.selected_ids = Some(ids),
                Err(e) => errs.push(e),
            },
            None => errs.push(FieldError::new(
                "selectedIds",
                "is required to submit a selection",
            )),
        }
        answer
    }

    /// The options as a table of radios or checkboxes named `sel`, posted by position.
    fn controls(&self, form: Option<&FormData>) -> Vec<Control> {
        let (min, max) = (self.min_selections, self.max_selections);
        let chosen: Vec<&str> = form.map(|f| f.all("sel").collect()).unwrap_or_default();
        let options = self
            .options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let value = i.to_string();
                Choice {
                    id: format!("sel-{i}"),
                    label: Self::text(o, "label")
                        .or_else(|| Self::text(o, "id"))
                        .unwrap_or_default(),
                    description: Self::text(o, "description"),
                    checked: chosen.contains(&value.as_str()),
                    value,
                    cells: None,
                    card: None,
                }
            })
            .collect();
        let multiple = max > 1;
        vec![Control {
            id: "sel".into(),
            key: "selectedIds".into(),
            label: if multiple {
                "Choose options".into()
            } else {
                "Choose one".into()
            },
            description: None,
            hint: multiple
                .then(|| count_hint(Some(min.into()), Some(max.into())))
                .flatten(),
            required: false,
            error: None,
            widget: Widget::Options {
                multiple,
                max: multiple.then_some(max.into()),
                options,
            },
            include: None,
        }]
    }

    fn read_form(&self, form: &FormData, input: &mut DecisionInput, errs: &mut Vec<FieldError>) {
        let mut ids = Vec::new();
        for posted in form.all("sel") {
            let id = posted
                .parse::<usize>()
                .ok()
                .and_then(|i| self.options.get(i))
                .and_then(Self::id);
            match id {
                Some(id) => ids.push(id.to_string()),
                None => errs.push(FieldError::new("selectedIds", NOT_AN_OPTION)),
            }
        }
        input.selected_ids = Some(ids);
    }
}

impl Selection {
    fn check(&self, ids: &[String]) -> Result<(), FieldError> {
        let (min, max) = (self.min_selections as usize, self.max_selections as usize);
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id) {
                return Err(FieldError::new(
                    "selectedIds",
                    format!("{id:?} is chosen twice"),
                ));
            }
            if !self.options.iter().any(|o| Self::id(o) == Some(id)) {
                return Err(FieldError::new(
                    "selectedIds",
                    format!("{id:?} is not one of the options"),
                ));
            }
        }
        if ids.len() < min || ids.len() > max {
            return Err(FieldError::new(
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
}

fn validate_options(
    options: Option<Vec<Value>>,
    errs: &mut Vec<FieldError>,
) -> Vec<Map<String, Value>> {
    let Some(options) = options else {
        errs.push(FieldError::new("options", "is required"));
        return Vec::new();
    };
    if options.is_empty() || options.len() > MAX_OPTIONS {
        errs.push(FieldError::new(
            "options",
            format!("must have 1–{MAX_OPTIONS} entries"),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(options.len());
    for (i, o) in options.into_iter().enumerate() {
        let path = format!("options[{i}]");
        let Value::Object(map) = o else {
            errs.push(FieldError::new(&path, "must be an object with an id"));
            continue;
        };
        match map.get("id") {
            Some(Value::String(id)) if !id.is_empty() && chars(id) <= MAX_ID_CHARS => {
                if !seen.insert(id.clone()) {
                    errs.push(FieldError::new(
                        format!("{path}.id"),
                        format!("duplicate id {id:?}"),
                    ));
                }
            }
            _ => errs.push(FieldError::new(
                format!("{path}.id"),
                format!("must be a string of 1–{MAX_ID_CHARS} characters"),
            )),
        }
        for (key, max) in [
            ("label", MAX_LABEL_CHARS),
            ("description", MAX_DESCRIPTION_CHARS),
        ] {
            match map.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if chars(s) <= max => {}
                _ => errs.push(FieldError::new(
                    format!("{path}.{key}"),
                    format!("must be a string of at most {max} characters"),
                )),
            }
        }
        out.push(map);
    }
    out
}

mcp_create_args!(
    /// Arguments of `elicit_selection`.
    SelectionArgs {
        /// 1–500 options, each an object with a unique string `id` (1–200 characters) and
        /// optional `label` and `description`; extra keys are kept.
        #[schemars(length(min = 1, max = MAX_OPTIONS))]
        pub options: Vec<Map<String, Value>>,
        /// Fewest options to choose (default 1).
        #[schemars(range(min = 1))]
        pub min_selections: Option<i64>,
        /// Most options to choose (default 1 = single choice; at most the number of options).
        #[schemars(range(min = 1))]
        pub max_selections: Option<i64>,
        /// Optional Liquid template (≤ 32 KiB) for the cells of one option's table row, e.g.
        /// `<td>{{ option.label }}</td><td>{{ option.price | prepend: "€" }}</td>`. Variables:
        /// `option` (the option object with its extra keys) and `context`. Must output only
        /// `<td>`/`<th>` cells. Default: one cell with the label (else the id).
        #[schemars(length(min = 1))]
        pub row_template: Option<String>,
        /// Optional Liquid template (≤ 32 KiB) for one option's details card, shown when the
        /// reviewer hovers, focuses or taps the option (a "Details" disclosure without
        /// JavaScript). Variables: `option`, `context`.
        #[schemars(length(min = 1))]
        pub hover_template: Option<String>,
    }
);

impl SelectionArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let options = self.options.iter().cloned().map(Value::Object).collect();
        let (min_selections, max_selections) = (self.min_selections, self.max_selections);
        let (row_template, hover_template) =
            (self.row_template.clone(), self.hover_template.clone());
        Ok(CreateRequest {
            options: Some(options),
            min_selections,
            max_selections,
            row_template,
            hover_template,
            ..mcp_common_request!(self)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::valid, Kind, Spec};
    use super::*;
    use crate::form::BadForm;
    use serde_json::json;

    fn spec(v: Value) -> Spec {
        valid(Kind::Selection, v).unwrap().spec
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
            json!({"message": "pick", "options": [{"id": "a", "x": 1}, {"id": "b"}], "maxSelections": 2}),
        );
        assert_eq!(ok.labels.decline, "None of these");
        let super::super::KindSpec::Selection(sel) = &ok.kind else {
            panic!("{ok:?}")
        };
        assert_eq!(sel.options[0]["x"], 1);
        for bad in [
            json!({"message": "m", "options": []}),
            json!({"message": "m", "options": [{"id": "a"}, {"id": "a"}]}),
            json!({"message": "m", "options": [{"id": "a"}], "maxSelections": 2}),
            json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}], "minSelections": 2, "maxSelections": 1}),
            json!({"message": "m", "options": ["a"]}),
            json!({"message": "m", "options": [{"id": "a"}], "context": 1, "proposal": {"a": 1}}),
        ] {
            assert!(valid(Kind::Selection, bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn selection_counts() {
        let s = spec(
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
    fn the_form_posts_positions_and_declining_ignores_them() {
        let s = spec(json!({"message": "m", "options": [{"id": "a"}]}));
        let p =
            DecisionInput::from_form(&s, &form(&[("decision", "declined"), ("sel", "0")])).unwrap();
        assert!(p.input.selected_ids.is_none());
        let p = DecisionInput::from_form(&s, &form(&[("decision", "submitted"), ("sel", "0")]))
            .unwrap();
        assert_eq!(p.input.selected_ids.unwrap(), ["a"]);
        for forged in ["1", "a", "-1", ""] {
            let p =
                DecisionInput::from_form(&s, &form(&[("decision", "submitted"), ("sel", forged)]))
                    .unwrap();
            assert_eq!(p.errors[0].field, "selectedIds", "{forged:?}");
        }
        assert!(matches!(
            DecisionInput::from_form(&s, &form(&[("sel", "0")])),
            Err(BadForm::NoDecision)
        ));
    }
}
