//! What an agent can ask for. A kind is one module — [`approval`], [`selection`], [`proposal`] —
//! holding everything that differs per kind: its create fields and their validation, its MCP
//! arguments, what the reviewer may answer and its validation, its part of the result, and its
//! review controls (built from [`crate::form`]). This file is the only place that lists the
//! kinds: the [`Kind`] names, the [`KindSpec`] enum, the wire structs that carry every kind's
//! fields ([`CreateRequest`], [`DecisionInput`], [`Answer`]) and the dispatch to the modules.
//!
//! The store, `lua/` and the waiter hub never look inside a kind: they keep the validated
//! [`Spec`] and [`Outcome`] as JSON text. Adding a kind: a module here, a variant in this file,
//! a REST route (`api`) and an MCP tool (`mcp`) — see docs/architecture.md.

pub mod approval;
pub mod proposal;
pub mod selection;

use serde::{Deserialize, Serialize};
use serde_json::{value::RawValue, Map, Value};

use crate::{
    error::{Error, FieldError},
    form::{controls::Control, FormData},
    model::{rules, Decision, Labels},
};

/// What kind of decision is asked for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Approval,
    Selection,
    Proposal,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approval => "approval",
            Kind::Selection => "selection",
            Kind::Proposal => "proposal",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "approval" => Kind::Approval,
            "selection" => Kind::Selection,
            "proposal" => Kind::Proposal,
            _ => return None,
        })
    }
}

/// What every kind module defines (implemented by its spec type; dispatched by [`KindSpec`]).
trait Rules: Sized {
    /// Default button words: submit, decline.
    const LABELS: (&'static str, &'static str);
    /// Page heading when the request has no title, and the line above it.
    const HEADING: &'static str;
    const PAGE_LABEL: &'static str;
    /// The kind's own create fields (wire names); any other kind's field is refused.
    const CREATE_FIELDS: &'static [&'static str];

    /// Validate the kind's create fields (taken out of `req`).
    fn create(
        req: &mut CreateRequest,
        context: Option<&RawValue>,
        errs: &mut Vec<FieldError>,
    ) -> Self;
    /// The decision fields a submit of this request takes (wire names).
    fn decision_fields(&self) -> &'static [&'static str];
    /// Validate a submit's fields (taken out of `input`) into the kind's part of the answer.
    fn decide(&self, input: &mut DecisionInput, errs: &mut Vec<FieldError>) -> Answer;
    /// The review controls, pre-filled from the request or from a refused post.
    fn controls(&self, form: Option<&FormData>) -> Vec<Control>;
    /// Read the kind's fields of a posted review form into `input` (conversion problems go
    /// to `errs`, keyed like validation errors).
    fn read_form(&self, form: &FormData, input: &mut DecisionInput, errs: &mut Vec<FieldError>);
}

/// The validated, kind-specific part of a request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KindSpec {
    Approval(approval::Approval),
    Selection(selection::Selection),
    Proposal(proposal::Proposal),
}

/// Dispatch one [`Rules`] call to the kind's module.
macro_rules! dispatch {
    ($spec:expr, $k:ident => $call:expr) => {
        match $spec {
            KindSpec::Approval($k) => $call,
            KindSpec::Selection($k) => $call,
            KindSpec::Proposal($k) => $call,
        }
    };
}

/// Dispatch a [`Rules`] constant or constructor by [`Kind`].
macro_rules! by_kind {
    ($kind:expr, $t:ident => $e:expr) => {
        match $kind {
            Kind::Approval => {
                type $t = approval::Approval;
                $e
            }
            Kind::Selection => {
                type $t = selection::Selection;
                $e
            }
            Kind::Proposal => {
                type $t = proposal::Proposal;
                $e
            }
        }
    };
}

macro_rules! from_kind {
    ($($variant:ident($t:ty)),*) => {
        $(impl From<$t> for KindSpec {
            fn from(k: $t) -> Self {
                KindSpec::$variant(k)
            }
        })*
    };
}
from_kind!(
    Approval(approval::Approval),
    Selection(selection::Selection),
    Proposal(proposal::Proposal)
);

impl KindSpec {
    pub fn kind(&self) -> Kind {
        match self {
            KindSpec::Approval(_) => Kind::Approval,
            KindSpec::Selection(_) => Kind::Selection,
            KindSpec::Proposal(_) => Kind::Proposal,
        }
    }
}

/// A validated request as stored with the record (JSON, camelCase; `kind` first).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(flatten)]
    pub kind: KindSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub message: String,
    /// Echoed verbatim (bytes as sent) by `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Box<RawValue>>,
    pub labels: Labels,
    pub expires_in_seconds: u64,
    /// Liquid rendering `context` on the review page (checked at create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_template: Option<String>,
    /// Stylesheet for the templated parts (checked at create; scoped when the page is built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub css: Option<String>,
}

impl Spec {
    pub fn kind(&self) -> Kind {
        self.kind.kind()
    }
    /// The page heading: the title, else the kind's default.
    pub fn heading(&self) -> String {
        self.title
            .clone()
            .unwrap_or_else(|| by_kind!(self.kind(), K => K::HEADING).to_string())
    }
    /// The line above the heading ("Approval request", …).
    pub fn page_label(&self) -> &'static str {
        by_kind!(self.kind(), K => K::PAGE_LABEL)
    }
    /// The review controls (see [`crate::form`]).
    pub fn controls(&self, form: Option<&FormData>) -> Vec<Control> {
        dispatch!(&self.kind, k => k.controls(form))
    }
}

/// Default button words of `kind` (SPEC §3 `labels`).
pub fn default_labels(kind: Kind) -> Labels {
    let (submit, decline) = by_kind!(kind, K => K::LABELS);
    Labels {
        submit: submit.into(),
        decline: decline.into(),
    }
}

/// Create arguments for any kind (camelCase on the wire): the common fields of SPEC §3, then
/// each kind's own (refused by name for the other kinds; unknown fields refused by serde).
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
    /// Where to POST this request's events (Standard Webhooks: decided, canceled, consumed,
    /// expired); default: the tenant's endpoint, if configured. The tenant needs a signing
    /// secret (else 422).
    #[schema(max_length = 2000)]
    pub webhook_url: Option<String>,
    /// Events carry the reviewer's answer (`data.result`), not just the status.
    pub webhook_include_result: Option<bool>,
    /// Who to tell about this request: an email with the review link and a Slack message with
    /// a button, then a short follow-up when it is decided, canceled or expires. A channel
    /// left out uses the tenant's default, if configured.
    pub notify: Option<NotifyInput>,
    /// Named reviewers (1–20, unique ids): each gets a personal review link instead of the one
    /// `reviewUrl`; see `quorum` and `linkDelivery`.
    #[schema(min_items = 1, max_items = 20)]
    pub reviewers: Option<Vec<ReviewerInput>>,
    /// How many distinct reviewers must submit (default 1, at most the number of reviewers);
    /// any reviewer's decline ends the request `declined`. Above 1 only for approvals in json
    /// mode (422 otherwise).
    #[schema(minimum = 1, maximum = 20)]
    pub quorum: Option<i64>,
    /// `answer` (default): the links are in the create answer. `notify`: they are sent only by
    /// email (to each reviewer, or to `notify.email` without reviewers) and never appear in any
    /// answer to the agent.
    pub link_delivery: Option<LinkDelivery>,
    /// A Liquid template that renders `context` on the review page instead of the plain JSON
    /// view (variable `context`; every `{{ }}` output is HTML-escaped; at most 32 768 bytes of
    /// UTF-8, 413 above: a byte limit, so not expressed as `maxLength`). A template that does
    /// not compile is 422 with its line and column (400 with the other problems when other
    /// fields are also invalid). See docs/templates.md.
    #[schema(min_length = 1)]
    pub display_template: Option<String>,
    /// A stylesheet for the templated parts of the page (at most 16 384 bytes, 413 above):
    /// selectors are scoped to them; no `@import` or other at-rules but `@media`/`@supports`, no `url()` except a
    /// non-SVG `data:image/…`, no `position: fixed`.
    #[schema(min_length = 1)]
    pub css: Option<String>,
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
    /// Selection: a Liquid template rendering the cells of one option's table row: only
    /// `<td>`/`<th>` elements (variables `option`, `context`; at most 32 768 bytes, 413
    /// above). Default: one cell with the label (else the id) and the description.
    #[schema(min_length = 1)]
    pub row_template: Option<String>,
    /// Selection: a Liquid template rendering one option's details card, shown on hover, on
    /// keyboard focus and on tap (variables `option`, `context`; at most 32 768 bytes, 413
    /// above).
    #[schema(min_length = 1)]
    pub hover_template: Option<String>,
}

impl CreateRequest {
    /// The kind-specific fields this request carries (wire names).
    fn kind_fields_present(&self) -> Vec<&'static str> {
        [
            ("requestedSchema", self.requested_schema.is_some()),
            ("options", self.options.is_some()),
            ("minSelections", self.min_selections.is_some()),
            ("maxSelections", self.max_selections.is_some()),
            ("proposal", self.proposal.is_some()),
            ("rowTemplate", self.row_template.is_some()),
            ("hoverTemplate", self.hover_template.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect()
    }

    /// Whether any template or stylesheet is present (compiling one can take milliseconds).
    pub fn has_templates(&self) -> bool {
        self.display_template.is_some()
            || self.css.is_some()
            || self.row_template.is_some()
            || self.hover_template.is_some()
    }
}

/// Check the templates and the stylesheet of a create. An oversized one is 413 at once; an
/// empty one is a field rule (`errs`, 400); one that does not compile is returned (422 unless
/// other fields are also wrong).
fn check_templates(
    req: &CreateRequest,
    errs: &mut Vec<FieldError>,
) -> Result<Vec<FieldError>, Error> {
    use crate::template::{scope_css, Compiled, TemplateError, MAX_CSS_BYTES, MAX_TEMPLATE_BYTES};
    type Check = fn(&str) -> Result<(), TemplateError>;
    let checks: [(&str, Option<&String>, usize, Check); 4] = [
        (
            "displayTemplate",
            req.display_template.as_ref(),
            MAX_TEMPLATE_BYTES,
            |s| Compiled::compile(s).map(drop),
        ),
        (
            "rowTemplate",
            req.row_template.as_ref(),
            MAX_TEMPLATE_BYTES,
            |s| Compiled::compile_row(s).map(drop),
        ),
        (
            "hoverTemplate",
            req.hover_template.as_ref(),
            MAX_TEMPLATE_BYTES,
            |s| Compiled::compile(s).map(drop),
        ),
        ("css", req.css.as_ref(), MAX_CSS_BYTES, |s| {
            // `content: "\\202E"` would put a hidden or direction-changing character on the
            // page that the ⟨U+XXXX⟩ treatment of agent text never sees.
            let scoped = scope_css(s)?;
            match scoped.chars().find(|c| rules::is_hidden(*c)) {
                Some(c) => Err(TemplateError {
                    line: 1,
                    column: 1,
                    message: format!(
                        "U+{:04X} (a hidden or direction-changing character) is not allowed",
                        c as u32
                    ),
                }),
                None => Ok(()),
            }
        }),
    ];
    let mut broken = Vec::new();
    for (field, text, max, check) in checks {
        let Some(text) = text else { continue };
        if text.len() > max {
            return Err(Error::PayloadTooLarge(format!(
                "{field} is {} bytes; the limit is {max}",
                text.len()
            )));
        }
        if text.trim().is_empty() {
            errs.push(FieldError::new(field, "must not be empty"));
        } else if let Err(e) = check(text) {
            broken.push(FieldError::new(field, e.to_string()));
        }
    }
    Ok(broken)
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

/// Notification targets of a create (REST `notify`, the MCP argument of the same name).
#[derive(Debug, Default, Clone, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotifyInput {
    /// Up to 20 addresses; each gets its own email with the review link (needs the server's
    /// SMTP settings: 422 otherwise). `[]`: no email, not even the tenant's default.
    #[schema(max_items = 20)]
    #[schemars(length(max = 20))]
    pub email: Option<Vec<String>>,
    /// A Slack incoming-webhook URL (`https://hooks.slack.com/services/…`): a message with a
    /// button to the review page.
    #[schema(max_length = 2000)]
    #[schemars(length(max = 2000))]
    pub slack_webhook_url: Option<String>,
}

/// One named reviewer of a create.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewerInput {
    /// 1–64 characters: letters, digits, `.`, `_`, `@`, `-` (not first); unique per request.
    #[schema(min_length = 1, max_length = 64)]
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
    /// Shown on the page and in notifications (1–80 characters); default: the id.
    #[schema(min_length = 1, max_length = 80)]
    #[schemars(length(min = 1, max = 80))]
    pub name: Option<String>,
    /// Where this reviewer's personal link is emailed (needs the server's SMTP settings).
    pub email: Option<String>,
}

/// Where review links go.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LinkDelivery {
    /// In the create answer.
    #[default]
    Answer,
    /// Only by email; never in an answer to the agent.
    Notify,
}

/// The validated reviewers of a create.
#[derive(Debug, Clone)]
pub struct PanelInput {
    pub reviewers: Vec<ReviewerInput>,
    pub quorum: u32,
}

/// Deadline bounds of this server (SPEC: 10 to the configured max; tests lower the minimum).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub min_expires_secs: u64,
    pub max_expires_secs: u64,
}

/// A validated create: the spec to store plus the idempotency key and the webhook choice.
#[derive(Debug)]
pub struct ValidCreate {
    pub spec: Spec,
    pub idempotency_key: Option<String>,
    pub webhook_url: Option<String>,
    pub webhook_include_result: bool,
    /// Validated notification targets as sent (tenant defaults are applied by the service).
    pub notify: Option<NotifyInput>,
    /// Named reviewers and the quorum, if any.
    pub panel: Option<PanelInput>,
    pub link_delivery: Option<LinkDelivery>,
}

/// Validate a create for `kind`: every problem is reported at once (400 with per-field
/// details), except an oversized `context`, template or `css` (413); templates that do not
/// compile are 422 when they are the only problem.
pub fn validate_create(
    kind: Kind,
    mut req: CreateRequest,
    bounds: Bounds,
) -> Result<ValidCreate, Error> {
    let mut errs = Vec::new();
    rules::check_context(req.context.as_deref(), &mut errs)?;
    let message = rules::check_message(req.message.take(), &mut errs);
    let title = rules::check_title(req.title.take(), &mut errs);
    let expires_in_seconds = rules::check_expires(
        req.expires_in_seconds,
        bounds.min_expires_secs,
        bounds.max_expires_secs,
        &mut errs,
    );
    let (submit, decline) = req
        .labels
        .take()
        .map_or((None, None), |l| (l.submit, l.decline));
    let labels = rules::check_labels(submit, decline, default_labels(kind), &mut errs);
    rules::check_idempotency_key(req.idempotency_key.as_deref(), &mut errs);
    if let Some(p) = req
        .webhook_url
        .as_deref()
        .and_then(rules::webhook_url_problem)
    {
        errs.push(FieldError::new("webhookUrl", p));
    }
    if let Some(n) = &req.notify {
        rules::check_notify(
            n.email.as_deref(),
            n.slack_webhook_url.as_deref(),
            &mut errs,
        );
        if req.reviewers.is_some() && n.email.is_some() {
            errs.push(FieldError::new(
                "notify.email",
                "is not allowed with reviewers: each reviewer's own email is used",
            ));
        }
    }
    let panel: Option<Vec<rules::ReviewerFields>> = req.reviewers.as_ref().map(|l| {
        l.iter()
            .map(|r| (r.id.as_str(), r.name.as_deref(), r.email.as_deref()))
            .collect()
    });
    let quorum = rules::check_panel(panel.as_deref(), req.quorum, &mut errs);
    // Quorum above 1 is defined for json-mode approvals only (the votes are yes/no).
    let multi_vote_ok = kind == Kind::Approval && req.requested_schema.is_none();
    let mut unsupported = Vec::new();
    if quorum > 1 && !multi_vote_ok {
        unsupported.push(FieldError::new(
            "quorum",
            "above 1 is only supported for approvals in json mode (no requestedSchema)",
        ));
    }
    let broken_templates = check_templates(&req, &mut errs)?;
    let accepted = by_kind!(kind, K => K::CREATE_FIELDS);
    for field in req.kind_fields_present() {
        if !accepted.contains(&field) {
            errs.push(FieldError::new(
                field,
                format!("is not allowed for a {} request", kind.as_str()),
            ));
        }
    }
    let context = req.context.take();
    let kind_spec = by_kind!(kind, K => K::create(&mut req, context.as_deref(), &mut errs).into());
    if !errs.is_empty() {
        errs.extend(broken_templates);
        errs.extend(unsupported);
        return Err(Error::invalid_fields(errs));
    }
    if !broken_templates.is_empty() || !unsupported.is_empty() {
        return Err(Error::unprocessable(
            broken_templates.into_iter().chain(unsupported).collect(),
        ));
    }
    Ok(ValidCreate {
        spec: Spec {
            kind: kind_spec,
            title,
            message,
            context,
            labels,
            expires_in_seconds,
            display_template: req.display_template,
            css: req.css,
        },
        idempotency_key: req.idempotency_key,
        webhook_url: req.webhook_url,
        webhook_include_result: req.webhook_include_result.unwrap_or(false),
        notify: req.notify,
        panel: req
            .reviewers
            .map(|reviewers| PanelInput { reviewers, quorum }),
        link_delivery: req.link_delivery,
    })
}

/// Reviewer decision JSON (SPEC §4): the verdict, the comment, and each kind's own fields.
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

impl DecisionInput {
    /// A decision with no kind fields yet (the review form fills them in).
    pub fn new(decision: Decision, comment: Option<String>) -> Self {
        DecisionInput {
            decision,
            form_submission: None,
            selected_ids: None,
            values: None,
            comment,
        }
    }

    fn kind_fields_present(&self) -> Vec<&'static str> {
        [
            ("formSubmission", self.form_submission.is_some()),
            ("selectedIds", self.selected_ids.is_some()),
            ("values", self.values.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect()
    }

    /// Check the decision against what was asked. Errors are `Unprocessable` (422) with
    /// per-field details; nothing is recorded when this fails.
    pub fn validate(mut self, spec: &Spec) -> Result<Outcome, Error> {
        let mut errs = Vec::new();
        let comment = rules::check_comment(self.comment.take(), &mut errs);
        // Comment problems must not hide field problems: the reviewer should see all at once.
        let comment_errors = errs.len();
        let submitted = self.decision == Decision::Submitted;
        let takes = dispatch!(&spec.kind, k => k.decision_fields());
        for field in self.kind_fields_present() {
            if !(submitted && takes.contains(&field)) {
                errs.push(FieldError::new(
                    field,
                    if submitted {
                        format!("is not used by a {} request", spec.kind().as_str())
                    } else {
                        "must be omitted when declining".to_string()
                    },
                ));
            }
        }
        let mut answer = Answer::default();
        if submitted && errs.len() == comment_errors {
            answer = dispatch!(&spec.kind, k => k.decide(&mut self, &mut errs));
        }
        if errs.is_empty() {
            Ok(Outcome {
                decision: self.decision,
                answer,
                comment,
            })
        } else {
            Err(Error::invalid_decision(errs))
        }
    }

    /// Build the reviewer's decision from a posted review form: the button, the comment and
    /// the kind's fields. Declining ignores every value but the comment.
    pub fn from_form(spec: &Spec, form: &FormData) -> Result<FromForm, crate::form::BadForm> {
        let decision = match form.get("decision") {
            Some("submitted") => Decision::Submitted,
            Some("declined") => Decision::Declined,
            _ => return Err(crate::form::BadForm::NoDecision),
        };
        let comment = form
            .get("comment")
            .map(crate::form::normalise_newlines)
            .filter(|c| !c.trim().is_empty());
        let mut input = DecisionInput::new(decision, comment);
        let mut errors = Vec::new();
        if decision == Decision::Submitted {
            dispatch!(&spec.kind, k => k.read_form(form, &mut input, &mut errors));
        }
        Ok(FromForm { input, errors })
    }
}

/// What a posted form produced: the decision to validate, and the fields that could not even
/// be converted (left out of `input`).
#[derive(Debug)]
pub struct FromForm {
    pub input: DecisionInput,
    pub errors: Vec<FieldError>,
}

/// Each kind's part of a reviewer's answer, as stored and returned by `result`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Form approvals on submit: the reviewer's values; otherwise `null`.
    #[schema(value_type = Option<Object>)]
    pub form_submission: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub values: Option<Map<String, Value>>,
}

/// A validated decision, as stored and returned by `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub decision: Decision,
    #[serde(flatten)]
    pub answer: Answer,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// The common create arguments of every MCP create tool, followed by the kind's own fields.
/// (MCP arguments are typed strictly: a wrong type is a JSON-RPC error, not a tool result.)
macro_rules! mcp_create_args {
    ($(#[$doc:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// What the reviewer is asked and why (1–4000 characters). Be specific: the human
            /// sees only this, the title and the context.
            #[schemars(length(min = 1, max = $crate::model::rules::MAX_MESSAGE_CHARS))]
            pub message: String,
            /// Short page heading (1–120 characters).
            #[schemars(length(min = 1, max = $crate::model::rules::MAX_TITLE_CHARS))]
            pub title: Option<String>,
            /// Any JSON (≤ 64 KiB) shown to the reviewer and returned verbatim by elicit_result.
            pub context: Option<serde_json::Value>,
            /// Deadline in seconds (10–86400, default 3600). Undecided requests then read `expired`.
            #[schemars(range(min = 10, max = 86400))]
            pub expires_in_seconds: Option<i64>,
            /// Rename the buttons (the recorded decision is unchanged).
            pub labels: Option<$crate::kinds::LabelsArg>,
            /// Retry-safe key (1–200 characters): repeating a create with the same key returns
            /// the first elicitation instead of a new one.
            #[schemars(length(min = 1, max = $crate::model::rules::MAX_IDEMPOTENCY_KEY_CHARS))]
            pub idempotency_key: Option<String>,
            /// Where to POST this request's events when it is decided, canceled, read or
            /// expires (Standard Webhooks, signed); default: the tenant's endpoint, if any.
            #[schemars(length(max = $crate::model::rules::MAX_URL_CHARS))]
            pub webhook_url: Option<String>,
            /// Events carry the reviewer's answer, not just the status.
            pub webhook_include_result: Option<bool>,
            /// Tell the reviewer: `{"email": ["a@example.com"], "slackWebhookUrl": "https://hooks.slack.com/…"}`
            /// sends an email with the review link and a Slack message with a button (and a
            /// follow-up when it is decided, canceled or expires). Without it, the tenant's
            /// defaults apply, if configured; then you need not pass `reviewUrl` on yourself.
            pub notify: Option<$crate::kinds::NotifyInput>,
            /// Named reviewers `[{"id": "alice", "name": "Alice", "email": "alice@example.com"}]`
            /// (1–20): each gets a personal link (listed in the answer as `reviewers`, or sent
            /// only by email with `linkDelivery: "notify"`), and the result says who decided.
            pub reviewers: Option<Vec<$crate::kinds::ReviewerInput>>,
            /// With reviewers: how many must approve (default 1; above 1 only for approvals in
            /// json mode). Any decline ends the request.
            #[schemars(range(min = 1, max = 20))]
            pub quorum: Option<i64>,
            /// `notify`: review links go only by email, never to you (an agent cannot approve
            /// its own request); default `answer`.
            pub link_delivery: Option<$crate::kinds::LinkDelivery>,
            /// Optional Liquid template (≤ 32 KiB) that shows `context` to the reviewer instead
            /// of pretty-printed JSON, e.g. a table of line items:
            /// `<table>{% for i in context.items %}<tr><td>{{ i.name }}</td><td>{{ i.price }}</td></tr>{% endfor %}</table>`.
            /// Variable: `context`. Standard Liquid tags and filters; every `{{ }}` output is
            /// HTML-escaped; allowed HTML: text formatting, lists, tables, `data:` images (no
            /// links, forms, scripts, style attributes). A syntax error is refused with its
            /// line and column. The reviewer can still open the raw JSON.
            #[schemars(length(min = 1))]
            pub display_template: Option<String>,
            /// Optional CSS (≤ 16 KiB) for the templated parts; selectors are scoped to them. No
            /// `@import`, no `url()` except `data:image/…`, no `position: fixed`.
            #[schemars(length(min = 1))]
            pub css: Option<String>,
            $($extra)*
        }
    };
}
pub(crate) use mcp_create_args;

/// Button words.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsArg {
    /// Word on the submit/approve button (1–40 characters).
    #[schemars(length(min = 1, max = rules::MAX_LABEL_CHARS))]
    pub submit: Option<String>,
    /// Word on the decline button (1–40 characters).
    #[schemars(length(min = 1, max = rules::MAX_LABEL_CHARS))]
    pub decline: Option<String>,
}

/// The common part of an MCP create, as a [`CreateRequest`] (the kind adds its fields).
/// `context` is re-serialized here; the MCP adapter swaps in the raw text when it has it.
macro_rules! mcp_common_request {
    ($a:expr) => {
        $crate::kinds::CreateRequest {
            message: Some($a.message),
            title: $a.title,
            context: $a
                .context
                .map(|v| serde_json::value::to_raw_value(&v))
                .transpose()
                .map_err($crate::error::Error::internal)?,
            expires_in_seconds: $a.expires_in_seconds,
            labels: $a.labels.map(|l| $crate::kinds::LabelsInput {
                submit: l.submit,
                decline: l.decline,
            }),
            idempotency_key: $a.idempotency_key,
            webhook_url: $a.webhook_url,
            webhook_include_result: $a.webhook_include_result,
            notify: $a.notify,
            reviewers: $a.reviewers,
            quorum: $a.quorum,
            link_delivery: $a.link_delivery,
            display_template: $a.display_template,
            css: $a.css,
            ..Default::default()
        }
    };
}
pub(crate) use mcp_common_request;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn req(v: Value) -> CreateRequest {
        serde_json::from_value(v).unwrap()
    }

    pub(super) fn valid(kind: Kind, v: Value) -> Result<ValidCreate, Error> {
        validate_create(
            kind,
            req(v),
            Bounds {
                min_expires_secs: 10,
                max_expires_secs: 86400,
            },
        )
    }

    #[test]
    fn common_field_limits() {
        let long = "x".repeat(4001);
        let e = valid(
            Kind::Approval,
            json!({"message": long, "context": 1, "expiresInSeconds": 5, "title": "",
            "labels": {"submit": "   "}, "idempotencyKey": ""}),
        )
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
        let big = "y".repeat(rules::MAX_CONTEXT_BYTES);
        let e = valid(Kind::Approval, json!({"message": "m", "context": big})).unwrap_err();
        assert_eq!(e.code(), "payload_too_large");
        assert!(
            serde_json::from_value::<CreateRequest>(json!({"message": "m", "bogus": 1})).is_err()
        );
        assert!(
            serde_json::from_value::<CreateRequest>(json!({"labels": {"other": "x"}})).is_err()
        );
    }

    #[test]
    fn templates_are_checked_at_create() {
        // Compiles: accepted and stored.
        let ok = valid(
            Kind::Selection,
            json!({"message": "m", "options": [{"id": "a"}], "displayTemplate": "<p>{{ context.x }}</p>",
                "rowTemplate": "<td>{{ option.id | upcase }}</td>", "hoverTemplate": "<b>{{ option.id }}</b>",
                "css": "td { color: red }"}),
        )
        .unwrap();
        assert_eq!(
            ok.spec.display_template.as_deref(),
            Some("<p>{{ context.x }}</p>")
        );
        let KindSpec::Selection(sel) = &ok.spec.kind else {
            panic!()
        };
        assert!(sel.row_template.is_some() && sel.hover_template.is_some());
        // A syntax error alone: 422 with the field, line and column.
        let e = valid(
            Kind::Approval,
            json!({"message": "m", "context": {}, "displayTemplate": "<p>\n{{ context.x | nosuchfilter }}</p>"}),
        )
        .unwrap_err();
        assert_eq!((e.http_status(), e.code()), (422, "invalid_request"));
        assert_eq!(e.details()[0].field, "displayTemplate");
        assert!(
            e.details()[0].message.starts_with("line 2, column "),
            "{:?}",
            e.details()
        );
        assert!(e.details()[0].message.contains("nosuchfilter"));
        for (field, text) in [
            ("displayTemplate", "{% for x in context %}"),
            ("displayTemplate", "{% include 'x' %}"),
            ("css", "@import url(https://evil.example/x.css);"),
            ("css", "td::before { content: \"\\202E x\" }"),
            ("css", "td::before { content: \"\u{200B}\" }"),
        ] {
            let e = valid(
                Kind::Approval,
                json!({"message": "m", "context": {}, field: text}),
            )
            .unwrap_err();
            assert_eq!(e.http_status(), 422, "{text}: {e}");
            assert_eq!(e.details()[0].field, field);
        }
        // With other field problems: one 400 listing them all.
        let e = valid(
            Kind::Approval,
            json!({"message": "", "context": {}, "displayTemplate": "{{ x | nosuchfilter }}"}),
        )
        .unwrap_err();
        assert_eq!(e.http_status(), 400);
        let fields: Vec<_> = e.details().iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["message", "displayTemplate"]);
        // Too large: 413 (like context); exactly the limit is fine.
        let max = crate::template::MAX_TEMPLATE_BYTES;
        let at_limit = format!("<p>{}</p>", "x".repeat(max - 7));
        assert!(valid(
            Kind::Approval,
            json!({"message": "m", "context": {}, "displayTemplate": at_limit})
        )
        .is_ok());
        let over = format!("<p>{}</p>", "x".repeat(max - 6));
        let e = valid(
            Kind::Approval,
            json!({"message": "m", "context": {}, "displayTemplate": over}),
        )
        .unwrap_err();
        assert_eq!(e.code(), "payload_too_large");
        // Empty, and the selection-only templates on another kind: field rules (400).
        let e = valid(
            Kind::Proposal,
            json!({"message": "m", "proposal": {"a": "b"}, "css": " ", "rowTemplate": "<td>x</td>"}),
        )
        .unwrap_err();
        assert_eq!(e.http_status(), 400);
        let fields: Vec<_> = e.details().iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, ["css", "rowTemplate"]);
        // A row template must produce cells.
        let e = valid(
            Kind::Selection,
            json!({"message": "m", "options": [{"id": "a"}], "rowTemplate": "<p>{{ option.id }}</p>"}),
        )
        .unwrap_err();
        assert_eq!(e.http_status(), 422);
        assert_eq!(e.details()[0].field, "rowTemplate");
    }

    #[test]
    fn other_kinds_fields_are_refused_by_name() {
        let e = valid(
            Kind::Selection,
            json!({"message": "m", "options": [{"id": "a"}], "proposal": {"a": 1}}),
        )
        .unwrap_err();
        assert_eq!(e.details()[0].field, "proposal");
        assert_eq!(
            e.details()[0].message,
            "is not allowed for a selection request"
        );
    }

    #[test]
    fn spec_round_trips_with_raw_context_and_kind_first() {
        let ok = serde_json::from_str::<CreateRequest>(
            r#"{"message": "m", "context": {"b": 1, "a": 2.50, "e": "\u00e9"}, "options": [{"id": "x"}]}"#,
        )
        .unwrap();
        let spec = validate_create(
            Kind::Selection,
            ok,
            Bounds {
                min_expires_secs: 10,
                max_expires_secs: 86400,
            },
        )
        .unwrap()
        .spec;
        let json = serde_json::to_string(&spec).unwrap();
        assert!(
            json.starts_with(r#"{"kind":"selection","options":[{"id":"x"}]"#),
            "{json}"
        );
        let back: Spec = serde_json::from_str(&json).unwrap();
        assert_eq!(back.kind(), Kind::Selection);
        assert_eq!(
            back.context.unwrap().get(),
            r#"{"b": 1, "a": 2.50, "e": "\u00e9"}"#
        );
    }

    /// utoipa takes only literals in its attributes: check they agree with the constants.
    #[test]
    fn openapi_limits_match_the_rules() {
        let doc = |s: utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>| {
            serde_json::to_value(s).unwrap()
        };
        let create = doc(<CreateRequest as utoipa::PartialSchema>::schema());
        let p = &create["properties"];
        assert_eq!(p["message"]["maxLength"], rules::MAX_MESSAGE_CHARS);
        assert_eq!(p["title"]["maxLength"], rules::MAX_TITLE_CHARS);
        assert_eq!(
            p["idempotencyKey"]["maxLength"],
            rules::MAX_IDEMPOTENCY_KEY_CHARS
        );
        assert_eq!(p["options"]["maxItems"], selection::MAX_OPTIONS);
        let labels = doc(<LabelsInput as utoipa::PartialSchema>::schema());
        assert_eq!(
            labels["properties"]["submit"]["maxLength"],
            rules::MAX_LABEL_CHARS
        );
        assert_eq!(
            labels["properties"]["decline"]["maxLength"],
            rules::MAX_LABEL_CHARS
        );
        let decision = doc(<DecisionInput as utoipa::PartialSchema>::schema());
        assert_eq!(
            decision["properties"]["comment"]["maxLength"],
            rules::MAX_COMMENT_CHARS
        );
    }

    #[test]
    fn outcome_storage_round_trips() {
        let o = Outcome {
            decision: Decision::Submitted,
            answer: Answer {
                selected_ids: Some(vec!["a".into()]),
                ..Answer::default()
            },
            comment: Some("ok".into()),
        };
        let s = serde_json::to_string(&o).unwrap();
        assert_eq!(
            s,
            r#"{"decision":"submitted","formSubmission":null,"selectedIds":["a"],"comment":"ok"}"#
        );
        assert_eq!(serde_json::from_str::<Outcome>(&s).unwrap(), o);
        // Outcomes stored before formSubmission was always written still read.
        let old: Outcome = serde_json::from_str(r#"{"decision":"declined"}"#).unwrap();
        assert_eq!(old.answer, Answer::default());
    }
}
