//! Page models of the review page and the askama templates that render them
//! (`templates/*.html`, HTML auto-escaping on every `{{ }}`; nothing is marked `|safe`).
//!
//! [`ReviewPage`] is the decision form of a pending request (per kind), [`Notice`] every other
//! page: the confirmation / decided state, withdrawn, expired, and the error pages (which carry
//! no details). Builders take the stored request and, when re-rendering after a refused post,
//! the submitted form and the per-field errors, so the reviewer's values are kept.

use std::sync::LazyLock;

use askama::Template;
use serde_json::Value;

use super::{
    controls::{build, count_hint, Choice, Control, Raw, Widget},
    form::{proposal_shape, FormData, Shape},
    text::{human_time, pretty_json, remaining_text},
};
use crate::{
    model::{rfc3339, schema::FieldError, Decision, Kind, Spec, Status},
    store::ReviewView,
    token::sha256_hex,
};

pub const CSS: &str = include_str!("../../templates/static/review.css");
pub const JS: &str = include_str!("../../templates/static/review.js");

/// Stylesheet and script URLs, versioned by content so they can be cached for a year. Relative
/// (every page lives at `…/review/<token>`), like the form action, so the page also works
/// behind a proxy that serves it under a path prefix of `ELICITD_PUBLIC_URL`.
pub struct Assets {
    pub css: String,
    pub js: String,
}

pub static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    css: format!("static/review.css?v={}", &sha256_hex(CSS.as_bytes())[..12]),
    js: format!("static/review.js?v={}", &sha256_hex(JS.as_bytes())[..12]),
});

/// The decision form of a pending request.
#[derive(Template)]
#[template(path = "review.html")]
pub struct ReviewPage {
    pub assets: &'static Assets,
    pub kind_label: &'static str,
    pub heading: String,
    pub message: String,
    /// `context`, pretty-printed with its scalars exactly as sent.
    pub context: Option<String>,
    pub expires_at: String,
    pub expires_text: String,
    pub remaining_ms: i64,
    pub remaining_text: String,
    pub action: String,
    pub csrf: String,
    /// A page-level message (e.g. the form was open too long).
    pub notice: Option<String>,
    pub problems: Vec<Problem>,
    pub controls: Vec<Control>,
    pub proposal: Vec<ProposalRow>,
    pub comment: String,
    pub comment_error: Option<String>,
    pub submit_label: String,
    pub decline_label: String,
}

/// One entry of the error summary at the top of a re-rendered form.
#[derive(Debug, Clone)]
pub struct Problem {
    /// Id of the control it belongs to, if any.
    pub anchor: Option<String>,
    pub label: Option<String>,
    pub message: String,
}

/// One proposal field: an "Include <title>" box and the (editable) value.
#[derive(Debug, Clone)]
pub struct ProposalRow {
    pub include_id: String,
    pub included: bool,
    /// Required by the proposal's schema: cannot be dropped.
    pub locked: bool,
    pub title: String,
    pub control: Control,
}

/// A page without a form: decided, withdrawn, expired, or an error.
#[derive(Template)]
#[template(path = "notice.html")]
pub struct Notice {
    pub assets: &'static Assets,
    /// `ok`, `info` or `error` (a CSS class).
    pub tone: &'static str,
    /// The request's heading, when the page is about a real request.
    pub eyebrow: Option<String>,
    pub heading: String,
    pub lines: Vec<String>,
    /// Where "Back to the request" points, if anywhere.
    pub link: Option<String>,
}

impl Notice {
    pub fn error(heading: &str, lines: &[&str], link: Option<String>) -> Notice {
        Notice {
            assets: &ASSETS,
            tone: "error",
            eyebrow: None,
            heading: heading.into(),
            lines: lines.iter().map(|l| l.to_string()).collect(),
            link,
        }
    }
}

fn heading(spec: &Spec) -> String {
    spec.title.clone().unwrap_or_else(|| {
        match spec.kind {
            Kind::Approval => "Approval requested",
            Kind::Selection => "Please choose",
            Kind::Proposal => "Review this proposal",
        }
        .into()
    })
}

/// The page of a request that is no longer pending.
pub fn state_page(view: &ReviewView) -> Notice {
    let mut n = Notice::error("", &[], None);
    n.eyebrow = Some(heading(&view.spec));
    match (view.status, &view.outcome) {
        (Status::Canceled, _) => {
            n.tone = "info";
            n.heading = "Request withdrawn".into();
            n.lines = vec![
                "This request was withdrawn by the requester.".into(),
                "There is nothing left to decide; you can close this page.".into(),
            ];
        }
        (Status::Expired, _) | (_, None) => {
            n.tone = "info";
            n.heading = "Request expired".into();
            n.lines = vec![
                "The deadline passed before anyone decided, so nothing was recorded.".into(),
                "If it still matters, ask the requester to send a new request.".into(),
            ];
        }
        (status, Some(outcome)) => {
            n.tone = "ok";
            n.heading = "Decision recorded".into();
            let word = match outcome.decision {
                Decision::Submitted => &view.spec.labels.submit,
                Decision::Declined => &view.spec.labels.decline,
            };
            n.lines = vec![format!("Your answer: “{word}”.")];
            if let Some(at) = view.decided_ms {
                n.lines.push(format!("Recorded at {}.", human_time(at)));
            }
            n.lines.push(if status == Status::Consumed {
                "The requester has received it. You can close this page.".into()
            } else {
                "You can close this page.".into()
            });
        }
    }
    n
}

/// What a re-render carries over from a refused post.
#[derive(Default)]
pub struct Resubmit<'a> {
    pub form: Option<&'a FormData>,
    pub errors: &'a [FieldError],
    pub notice: Option<String>,
}

/// The decision form of a pending request.
pub fn review_page(view: &ReviewView, token: &str, csrf: String, re: Resubmit<'_>) -> ReviewPage {
    let spec = &view.spec;
    let schema = spec.schema();
    let raw = |name: &str, initial: Option<&Value>| match re.form {
        Some(f) => Raw::from_form(f, name),
        None => Raw::from_value(initial),
    };
    let mut controls = Vec::new();
    let mut proposal = Vec::new();
    match spec.kind {
        Kind::Approval => {
            for (i, f) in schema.iter().flat_map(|s| s.fields()).enumerate() {
                let id = format!("f{i}");
                let r = raw(&id, f.default.as_ref());
                let mut c = build(Shape::Schema(f), id, f.name.clone(), f.label().into(), r);
                c.required = f.required;
                controls.push(c);
            }
        }
        Kind::Selection => controls.push(selection(spec, re.form)),
        Kind::Proposal => {
            for (i, (name, value)) in spec.proposal.iter().flatten().enumerate() {
                let field = schema.as_ref().and_then(|s| s.field(name));
                let title = field.map_or(name.as_str(), |f| f.label()).to_string();
                let id = format!("p{i}");
                let shape = proposal_shape(schema.as_ref(), name, value);
                let r = raw(&id, Some(value));
                let key = format!("values.{name}");
                let include_id = format!("k{i}");
                proposal.push(ProposalRow {
                    included: re.form.is_none_or(|f| f.has(&include_id)),
                    include_id,
                    locked: field.is_some_and(|f| f.required),
                    control: build(shape, id, key, title.clone(), r).relaxed(),
                    title,
                });
            }
        }
    }
    let mut problems = Vec::new();
    let mut comment_error = None;
    for e in re.errors {
        let message = sentence(&e.message);
        let target = controls
            .iter_mut()
            .chain(proposal.iter_mut().map(|r| &mut r.control))
            .find(|c| c.key == e.field);
        let (anchor, label) = match target {
            Some(c) => {
                c.error.get_or_insert_with(|| message.clone());
                (Some(c.id.clone()), Some(c.label.clone()))
            }
            None if e.field == "comment" => {
                comment_error = Some(message.clone());
                (Some("comment".into()), Some("Comment".into()))
            }
            None => (None, None),
        };
        problems.push(Problem {
            anchor,
            label,
            message,
        });
    }
    let remaining_ms = (view.expires_ms - view.now_ms).max(0);
    ReviewPage {
        assets: &ASSETS,
        kind_label: match spec.kind {
            Kind::Approval => "Approval request",
            Kind::Selection => "Selection request",
            Kind::Proposal => "Proposal to review",
        },
        heading: heading(spec),
        message: spec.message.clone(),
        context: spec.context.as_ref().map(|c| pretty_json(c.get())),
        expires_at: rfc3339(view.expires_ms),
        expires_text: human_time(view.expires_ms),
        remaining_ms,
        remaining_text: remaining_text(remaining_ms),
        action: token.to_string(),
        csrf,
        notice: re.notice,
        problems,
        controls,
        proposal,
        comment: re
            .form
            .and_then(|f| f.get("comment"))
            .map(super::text::normalise_newlines)
            .unwrap_or_default(),
        comment_error,
        submit_label: spec.labels.submit.clone(),
        decline_label: spec.labels.decline.clone(),
    }
}

/// The options of a selection as one group of radios or checkboxes named `sel`.
fn selection(spec: &Spec, form: Option<&FormData>) -> Control {
    let (min, max) = (
        spec.min_selections.unwrap_or(1),
        spec.max_selections.unwrap_or(1),
    );
    let chosen: Vec<&str> = form.map(|f| f.all("sel").collect()).unwrap_or_default();
    let text = |o: &serde_json::Map<String, Value>, k: &str| {
        o.get(k).and_then(Value::as_str).map(str::to_string)
    };
    let options = spec
        .options
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, o)| {
            let value = i.to_string();
            Choice {
                id: format!("sel-{i}"),
                label: text(o, "label")
                    .or_else(|| text(o, "id"))
                    .unwrap_or_default(),
                description: text(o, "description"),
                checked: chosen.contains(&value.as_str()),
                value,
            }
        })
        .collect();
    let multiple = max > 1;
    Control {
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
        widget: Widget::Group {
            multiple,
            max: multiple.then_some(max.into()),
            options,
        },
    }
}

/// A validation message as a sentence next to a field.
fn sentence(message: &str) -> String {
    let m = message.trim_end_matches('.');
    let s = if m == "required" {
        "This field is required".to_string()
    } else if let Some(rest) = m.strip_prefix("is ") {
        format!("This field is {rest}")
    } else {
        let mut c = m.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    };
    format!("{s}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_sentences() {
        assert_eq!(sentence("required"), "This field is required.");
        assert_eq!(
            sentence("is required and cannot be dropped"),
            "This field is required and cannot be dropped."
        );
        assert_eq!(sentence("choose at most 2"), "Choose at most 2.");
    }
}
