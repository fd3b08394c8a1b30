//! Form controls of the review page: which HTML control shows which field, pre-filled with
//! what. Each kind builds its controls (`crate::kinds`); the review page renders them. The view model is plain data; the askama templates (`templates/control.html`) turn it
//! into escaped markup, so agent text (titles, descriptions, option labels, values) can only
//! ever be text. Ids, names and option values are positional (`f3`, `f3-1`, `value="1"`), never
//! agent text: browsers rewrite line breaks in submitted values, so an option id or enum value
//! could not round-trip, and positions keep hostile strings out of the form data entirely.

use serde_json::Value;

use super::{FormData, Shape};
use crate::model::schema::{Field, FieldKind, TextFormat};

/// Single choices with at most this many options are radios; longer lists are a `<select>`.
const MAX_RADIOS: usize = 6;

/// One labelled control (or group of options) and its message.
#[derive(Debug, Clone)]
pub struct Control {
    /// Element id and form name.
    pub id: String,
    /// The key validation errors use for this control (`email`, `values.title`, …).
    pub key: String,
    pub label: String,
    pub description: Option<String>,
    pub hint: Option<String>,
    pub required: bool,
    pub error: Option<String>,
    pub widget: Widget,
    /// An "Include <label>" box in front of the control (proposal fields can be dropped).
    pub include: Option<Include>,
}

/// The "Include" box of a droppable control: checked when the field is kept.
#[derive(Debug, Clone)]
pub struct Include {
    pub id: String,
    pub included: bool,
    /// Required: cannot be dropped (the box is shown checked and disabled).
    pub locked: bool,
}

#[derive(Debug, Clone)]
pub enum Widget {
    Input(Input),
    TextArea {
        value: String,
        maxlength: Option<u64>,
    },
    Checkbox {
        checked: bool,
    },
    /// Radios (`multiple == false`) or checkboxes in a `<fieldset>`.
    Group {
        multiple: bool,
        max: Option<u64>,
        options: Vec<Choice>,
    },
    Select {
        blank: bool,
        options: Vec<Choice>,
    },
    /// A selection's options as table rows: radios (`multiple == false`) or checkboxes in
    /// the first cell, the option (or the requester's row template) in the next ones.
    Options {
        multiple: bool,
        max: Option<u64>,
        options: Vec<Choice>,
    },
}

/// `<input type=kind>` and the bounds the browser checks before sending.
#[derive(Debug, Clone)]
pub struct Input {
    pub kind: &'static str,
    pub value: String,
    pub min: Option<String>,
    pub max: Option<String>,
    pub step: Option<&'static str>,
    pub minlength: Option<u64>,
    pub maxlength: Option<u64>,
}

/// One option of a group or select.
#[derive(Debug, Clone)]
pub struct Choice {
    pub id: String,
    /// The option's position, which is what the form posts.
    pub value: String,
    pub label: String,
    pub description: Option<String>,
    pub checked: bool,
    /// Options table: the requester's row cells (`<td>`s), already sanitized by
    /// `crate::template`; set by the review page. `None`: one cell with label and description.
    pub cells: Option<String>,
    /// Options table: the requester's details card, already sanitized; set by the review page.
    pub card: Option<String>,
}

impl Control {
    /// Ids of the description, hint and error, for `aria-describedby`.
    pub fn described_by(&self) -> String {
        let mut ids = Vec::new();
        if self.description.is_some() {
            ids.push(format!("{}-desc", self.id));
        }
        if self.hint.is_some() {
            ids.push(format!("{}-hint", self.id));
        }
        if self.error.is_some() {
            ids.push(format!("{}-err", self.id));
        }
        ids.join(" ")
    }

    /// Drop the browser-side bounds: a proposal field the reviewer drops must not block the
    /// form, so only the server checks proposal values.
    pub fn relaxed(mut self) -> Self {
        if let Widget::Input(i) = &mut self.widget {
            (i.min, i.max, i.minlength) = (None, None, None);
        }
        self
    }

    pub fn is_group(&self) -> bool {
        matches!(self.widget, Widget::Group { .. } | Widget::Options { .. })
    }
}

/// The current content of a control: as first rendered, or as submitted.
#[derive(Debug, Clone, Default)]
pub struct Raw {
    pub text: String,
    pub list: Vec<String>,
    pub checked: bool,
    /// Submitted: options are named by position, not by value.
    pub positional: bool,
}

impl Raw {
    /// From a JSON value (a schema default or a proposed value).
    pub fn from_value(v: Option<&Value>) -> Raw {
        match v {
            Some(Value::String(s)) => Raw {
                text: s.clone(),
                ..Raw::default()
            },
            Some(Value::Bool(b)) => Raw {
                text: b.to_string(),
                checked: *b,
                ..Raw::default()
            },
            Some(Value::Array(items)) => {
                let list: Vec<String> = items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                    .collect();
                Raw {
                    text: list.join("\n"),
                    list,
                    ..Raw::default()
                }
            }
            Some(other) => Raw {
                text: other.to_string(),
                ..Raw::default()
            },
            None => Raw::default(),
        }
    }

    /// From the posted form, so a re-rendered page keeps what the reviewer typed.
    pub fn from_form(form: &FormData, name: &str) -> Raw {
        Raw {
            text: super::normalise_newlines(form.get(name).unwrap_or_default()),
            list: form.all(name).map(str::to_string).collect(),
            checked: form.has(name),
            positional: true,
        }
    }
}

/// Build the control for `shape`, with the browser-side bounds of its schema property (the
/// caller sets `required`).
pub fn build(shape: Shape<'_>, id: String, key: String, label: String, raw: Raw) -> Control {
    let mut c = Control {
        id,
        key,
        label,
        description: None,
        hint: None,
        required: false,
        error: None,
        widget: Widget::Checkbox { checked: false },
        include: None,
    };
    c.widget = match shape {
        Shape::Schema(f) => return schema_control(c, f, raw),
        Shape::Text { multiline: true } => textarea(raw.text, None),
        Shape::Text { multiline: false } => Widget::Input(input("text", raw.text)),
        Shape::Number => Widget::Input(Input {
            step: Some("any"),
            ..input("number", raw.text)
        }),
        Shape::Bool => Widget::Checkbox {
            checked: raw.checked,
        },
        Shape::Lines => {
            c.hint = Some("One item per line.".into());
            textarea(raw.text, None)
        }
    };
    c
}

fn schema_control(mut c: Control, f: &Field, raw: Raw) -> Control {
    c.description = f.description.clone();
    c.widget = match &f.kind {
        FieldKind::Text {
            min_length,
            max_length,
            format,
        } => {
            c.hint = length_hint(*min_length, *max_length);
            let kind = match format {
                Some(TextFormat::Email) => "email",
                Some(TextFormat::Uri) => "url",
                Some(TextFormat::Date) => "date",
                Some(TextFormat::DateTime) => {
                    c.hint = Some("Date and time in UTC.".into());
                    return with_widget(c, datetime_input(&raw.text));
                }
                None if raw.text.contains('\n') || max_length.is_some_and(|m| m > 200) => {
                    return with_widget(c, textarea(raw.text, *max_length));
                }
                None => "text",
            };
            Widget::Input(Input {
                minlength: *min_length,
                maxlength: *max_length,
                ..input(kind, raw.text)
            })
        }
        FieldKind::Number {
            integer,
            minimum,
            maximum,
        } => {
            c.hint = number_hint(*integer, *minimum, *maximum);
            Widget::Input(Input {
                min: minimum.map(|m| m.to_string()),
                max: maximum.map(|m| m.to_string()),
                step: Some(if *integer { "1" } else { "any" }),
                ..input("number", raw.text)
            })
        }
        FieldKind::Boolean => Widget::Checkbox {
            checked: raw.checked,
        },
        FieldKind::Choice { options } => {
            let choices = choices(&c.id, options, |i, v| match raw.positional {
                true => raw.text == i.to_string(),
                false => raw.text == v,
            });
            if options.len() <= MAX_RADIOS {
                Widget::Group {
                    multiple: false,
                    max: None,
                    options: choices,
                }
            } else {
                Widget::Select {
                    blank: true,
                    options: choices,
                }
            }
        }
        FieldKind::MultiChoice {
            options,
            min_items,
            max_items,
        } => {
            c.hint = count_hint(*min_items, *max_items);
            Widget::Group {
                multiple: true,
                max: *max_items,
                options: choices(&c.id, options, |i, v| {
                    let want = if raw.positional {
                        i.to_string()
                    } else {
                        v.into()
                    };
                    raw.list.contains(&want)
                }),
            }
        }
    };
    c
}

fn with_widget(mut c: Control, w: Widget) -> Control {
    c.widget = w;
    c
}

fn input(kind: &'static str, value: String) -> Input {
    Input {
        kind,
        value,
        min: None,
        max: None,
        step: None,
        minlength: None,
        maxlength: None,
    }
}

fn textarea(value: String, maxlength: Option<u64>) -> Widget {
    Widget::TextArea { value, maxlength }
}

/// `datetime-local` takes `YYYY-MM-DDTHH:MM[:SS]` without a zone: show RFC 3339 values in UTC.
fn datetime_input(text: &str) -> Widget {
    let value = chrono::DateTime::parse_from_rfc3339(text)
        .map(|d| {
            d.with_timezone(&chrono::Utc)
                .format("%Y-%m-%dT%H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| text.to_string());
    Widget::Input(Input {
        step: Some("1"),
        ..input("datetime-local", value)
    })
}

fn choices(
    id: &str,
    options: &[crate::model::schema::ChoiceOption],
    checked: impl Fn(usize, &str) -> bool,
) -> Vec<Choice> {
    options
        .iter()
        .enumerate()
        .map(|(i, o)| Choice {
            id: format!("{id}-{i}"),
            value: i.to_string(),
            label: o.title.clone().unwrap_or_else(|| o.value.clone()),
            description: None,
            checked: checked(i, &o.value),
            cells: None,
            card: None,
        })
        .collect()
}

fn length_hint(min: Option<u64>, max: Option<u64>) -> Option<String> {
    match (min, max) {
        (Some(a), Some(b)) => Some(format!("{a} to {b} characters.")),
        (Some(a), None) => Some(format!("At least {a} characters.")),
        (None, Some(b)) => Some(format!("Up to {b} characters.")),
        (None, None) => None,
    }
}

fn number_hint(integer: bool, min: Option<f64>, max: Option<f64>) -> Option<String> {
    let what = if integer {
        "A whole number"
    } else {
        "A number"
    };
    Some(match (min, max) {
        (Some(a), Some(b)) => format!("{what} from {a} to {b}."),
        (Some(a), None) => format!("{what}, at least {a}."),
        (None, Some(b)) => format!("{what}, at most {b}."),
        (None, None) if integer => format!("{what}."),
        (None, None) => return None,
    })
}

/// "Choose …" for a multiple choice with optional bounds.
pub fn count_hint(min: Option<u64>, max: Option<u64>) -> Option<String> {
    match (min.filter(|m| *m > 0), max) {
        (Some(a), Some(b)) if a == b => Some(format!("Choose exactly {a}.")),
        (Some(a), Some(b)) => Some(format!("Choose {a} to {b}.")),
        (Some(a), None) => Some(format!("Choose at least {a}.")),
        (None, Some(b)) => Some(format!("Choose up to {b}.")),
        (None, None) => None,
    }
}
