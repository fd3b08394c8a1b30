//! Page models of the review page and the askama templates that render them
//! (`templates/*.html`, HTML auto-escaping on every `{{ }}`). The only `|safe` outputs are the
//! requester's rendered templates, which `crate::template` has already sanitized.
//!
//! [`ReviewPage`] is the decision form of a pending request (per kind), [`Notice`] every other
//! page: the confirmation / decided state, withdrawn, expired, and the error pages (which carry
//! no details). Builders take the stored request and, when re-rendering after a refused post,
//! the submitted form and the per-field errors, so the reviewer's values are kept.

use std::sync::LazyLock;

use std::borrow::Cow;

use askama::Template;

use super::{
    custom::Custom,
    text::{human_time, pretty_json, remaining_text, sentence, visible},
};
use crate::{
    error::FieldError,
    form::{
        controls::{Control, Widget},
        FormData,
    },
    model::{rfc3339, Decision, Status},
    service::out::Review,
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
    /// The requester's `displayTemplate` output (sanitized by `crate::template`), shown instead
    /// of `context`, which then sits in a "raw data" disclosure.
    pub display: Option<String>,
    /// Some of the requester's layout could not be shown (its default view is).
    pub layout_notice: Option<String>,
    /// The requester's scoped stylesheet and the nonce the CSP allows it by.
    pub style: Option<Style>,
    pub expires_at: String,
    pub expires_text: String,
    pub remaining_ms: i64,
    pub remaining_text: String,
    pub action: String,
    pub csrf: String,
    /// A page-level message (e.g. the form was open too long).
    pub notice: Option<String>,
    pub problems: Vec<Problem>,
    /// The kind's controls (see `crate::kinds`), in order.
    pub controls: Vec<Control>,
    pub comment: String,
    pub comment_error: Option<String>,
    pub submit_label: String,
    pub decline_label: String,
    /// Named reviewers: "1 of 2 approvals so far · Voted: Alice".
    pub votes_line: Option<String>,
}

/// A `<style nonce>` block.
pub struct Style {
    pub nonce: String,
    pub css: String,
}

/// One entry of the error summary at the top of a re-rendered form.
#[derive(Debug, Clone)]
pub struct Problem {
    /// Id of the control it belongs to, if any.
    pub anchor: Option<String>,
    pub label: Option<String>,
    pub message: String,
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

/// "1 of 2 approvals so far · Voted: Alice, Bob" for a request with named reviewers.
pub fn votes_line(view: &Review) -> Option<String> {
    let p = view.panel.as_ref()?;
    let names: Vec<String> = p
        .votes
        .iter()
        .map(|v| {
            let r = p.reviewers.iter().find(|r| r.id == v.reviewer);
            let name = r.and_then(|r| r.name.as_deref()).unwrap_or(&v.reviewer);
            let name = visible(name).into_owned();
            if v.decision == "declined" {
                format!("{name} (declined)")
            } else {
                name
            }
        })
        .collect();
    let approvals = if p.quorum == 1 {
        "approval"
    } else {
        "approvals"
    };
    let mut line = format!("{} of {} {approvals} so far", p.submitted(), p.quorum);
    if !names.is_empty() {
        line.push_str(&format!(" · Voted: {}", names.join(", ")));
    }
    Some(line)
}

/// The page of a pending request whose reviewer (this link's) has voted already.
pub fn voted_page(view: &Review) -> Notice {
    let mut n = Notice::error("", &[], None);
    n.tone = "ok";
    n.eyebrow = Some(visible(&view.spec.heading()).into_owned());
    n.heading = "You have voted".into();
    let vote = view
        .panel
        .as_ref()
        .zip(view.reviewer.as_ref())
        .and_then(|(p, r)| p.vote_of(r));
    if let Some(v) = vote {
        let word = if v.decision == "declined" {
            &view.spec.labels.decline
        } else {
            &view.spec.labels.submit
        };
        n.lines.push(format!(
            "Your answer: “{}”, recorded at {}.",
            visible(word),
            human_time(v.at)
        ));
    }
    if let Some(line) = votes_line(view) {
        n.lines.push(format!("{line}."));
    }
    n.lines
        .push("The request stays open for the other reviewers. You can close this page.".into());
    n
}

/// The page of a request that is no longer pending.
pub fn state_page(view: &Review) -> Notice {
    let mut n = Notice::error("", &[], None);
    n.eyebrow = Some(visible(&view.spec.heading()).into_owned());
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
            n.lines = vec![format!("Your answer: “{}”.", visible(word))];
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

/// The decision form of a pending request, with what the requester's templates produced
/// (`custom`) and the nonce its stylesheet goes by.
pub fn review_page(
    view: &Review,
    token: &str,
    csrf: String,
    re: Resubmit<'_>,
    custom: Custom,
    nonce: &str,
) -> ReviewPage {
    let spec = &view.spec;
    let mut controls = spec.controls(re.form);
    controls.iter_mut().for_each(reveal);
    let Custom {
        display,
        mut rows,
        mut cards,
        css,
        fell_back,
    } = custom;
    for c in &mut controls {
        if let Widget::Options { options, .. } = &mut c.widget {
            for (o, cells) in options.iter_mut().zip(rows.take().unwrap_or_default()) {
                o.cells = Some(cells);
            }
            for (o, card) in options.iter_mut().zip(cards.take().unwrap_or_default()) {
                o.card = Some(card);
            }
        }
    }
    let layout_notice = (!fell_back.is_empty()).then(|| {
        "Part of the requester's layout could not be shown, so the standard view is shown \
         instead."
            .to_string()
    });
    let mut problems = Vec::new();
    let mut comment_error = None;
    for e in re.errors {
        let message = sentence(&e.message);
        let (anchor, label) = match controls.iter_mut().find(|c| c.key == e.field) {
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
        votes_line: votes_line(view),
        assets: &ASSETS,
        kind_label: spec.page_label(),
        heading: visible(&spec.heading()).into_owned(),
        message: visible(&spec.message).into_owned(),
        context: spec
            .context
            .as_ref()
            .map(|c| visible(&pretty_json(c.get())).into_owned()),
        display,
        layout_notice,
        style: css.map(|css| Style {
            nonce: nonce.to_string(),
            css,
        }),
        expires_at: rfc3339(view.expires_ms),
        expires_text: human_time(view.expires_ms),
        remaining_ms,
        remaining_text: remaining_text(remaining_ms),
        action: token.to_string(),
        csrf,
        notice: re.notice,
        problems,
        controls,
        comment: re
            .form
            .and_then(|f| f.get("comment"))
            .map(crate::form::normalise_newlines)
            .unwrap_or_default(),
        comment_error,
        submit_label: visible(&spec.labels.submit).into_owned(),
        decline_label: visible(&spec.labels.decline).into_owned(),
    }
}

/// Make the hidden characters of a control's agent text visible: labels, descriptions and
/// option texts in place; values (which the reviewer edits and posts back unchanged) keep
/// theirs, and the control says so in a line showing the value with them revealed.
fn reveal(c: &mut Control) {
    let fix = |s: &mut String| {
        if let Cow::Owned(v) = visible(s) {
            *s = v;
        }
    };
    fix(&mut c.label);
    if let Some(d) = c.description.as_mut() {
        fix(d);
    }
    let value = match &mut c.widget {
        Widget::Input(i) => Some(i.value.clone()),
        Widget::TextArea { value, .. } => Some(value.clone()),
        Widget::Group { options, .. }
        | Widget::Select { options, .. }
        | Widget::Options { options, .. } => {
            for o in options {
                fix(&mut o.label);
                if let Some(d) = o.description.as_mut() {
                    fix(d);
                }
            }
            None
        }
        Widget::Checkbox { .. } => None,
    };
    if let Some(Cow::Owned(shown)) = value.as_deref().map(visible) {
        let warning = format!("Contains hidden or direction-changing characters: {shown}");
        c.hint = Some(match c.hint.take() {
            Some(h) => format!("{h} {warning}"),
            None => warning,
        });
    }
}
