//! The requester's own layout on the review page: `displayTemplate` (the context), a
//! selection's `rowTemplate` and `hoverTemplate` (per option) and `css`, rendered by
//! [`crate::template`] off the async runtime and within [`TIMEOUT`]. Whatever does not render
//! in time or fails falls back to the default view of that part, and the page says so; a page
//! is never refused because of a template.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::Value;

use super::text::visible;
use crate::{
    kinds::{KindSpec, Spec},
    template::{scope_css, Compiled, Page, RenderError},
};

/// Hidden and direction-changing characters shown as ⟨U+XXXX⟩, as in all agent text.
fn shown(html: String) -> String {
    match visible(&html) {
        std::borrow::Cow::Owned(v) => v,
        std::borrow::Cow::Borrowed(_) => html,
    }
}

/// How long the page waits for all its templates (they render in parallel).
pub const TIMEOUT: Duration = Duration::from_millis(100);
/// What each render task gives its templates: the timeout less a margin for the hand-over.
const RENDER_TIME: Duration = Duration::from_millis(90);

/// What the templates produced; `None` parts show their default view.
#[derive(Debug, Default)]
pub struct Custom {
    /// `displayTemplate` output (sanitized HTML).
    pub display: Option<String>,
    /// Row cells per option (sanitized `<td>`s), all or none.
    pub rows: Option<Vec<String>>,
    /// Details card per option (sanitized HTML), all or none.
    pub cards: Option<Vec<String>>,
    /// The scoped stylesheet, for `<style nonce>`.
    pub css: Option<String>,
    /// The parts that fell back to their default view (`displayTemplate`, …).
    pub fell_back: Vec<&'static str>,
}

impl Custom {
    /// Whether the request has any template or stylesheet at all.
    pub fn wanted(spec: &Spec) -> bool {
        spec.display_template.is_some()
            || spec.css.is_some()
            || matches!(&spec.kind, KindSpec::Selection(s)
                if s.row_template.is_some() || s.hover_template.is_some())
    }
}

/// Why a part fell back (a metric label).
fn reason(e: &RenderError) -> &'static str {
    match e {
        RenderError::Limit(_) => "limit",
        RenderError::Failed(_) => "failed",
        RenderError::NotCells => "not_cells",
    }
}

fn fell_back(
    out: &mut Custom,
    part: &'static str,
    why: &'static str,
    detail: &dyn std::fmt::Display,
) {
    // The detail may quote the requester's data: debug only.
    tracing::debug!(part, reason = why, detail = %detail, "template fell back to the default view");
    metrics::counter!("elicitd_template_fallbacks_total", "part" => part, "reason" => why)
        .increment(1);
    out.fell_back.push(part);
}

/// Render what `spec` asks for. Cheap when it asks for nothing.
pub async fn render(spec: &Spec) -> Custom {
    if !Custom::wanted(spec) {
        return Custom::default();
    }
    let started = Instant::now();
    let context: Arc<Value> = Arc::new(
        spec.context
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null),
    );
    let (row, hover, options) = match &spec.kind {
        KindSpec::Selection(s) => (
            s.row_template.clone(),
            s.hover_template.clone(),
            Arc::new(
                s.options
                    .iter()
                    .cloned()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
            ),
        ),
        _ => (None, None, Arc::new(Vec::new())),
    };
    let (display, css) = (spec.display_template.clone(), spec.css.clone());

    // Task 1: the display template, the rows and the stylesheet; task 2: the cards (the
    // heaviest part of a large selection), in parallel.
    let main = {
        let (context, options) = (context.clone(), options.clone());
        tokio::task::spawn_blocking(move || {
            let mut out = Custom::default();
            let mut page = Page::with_time(&context, RENDER_TIME.saturating_sub(started.elapsed()));
            if let Some(src) = display {
                match Compiled::compile(&src).map_err(|e| RenderError::Failed(e.to_string())) {
                    Ok(t) => match page.card(&t, None) {
                        Ok(html) => out.display = Some(shown(html)),
                        Err(e) => fell_back(&mut out, "displayTemplate", reason(&e), &e),
                    },
                    Err(e) => fell_back(&mut out, "displayTemplate", "failed", &e),
                }
            }
            if let Some(src) = row {
                let rows = Compiled::compile_row(&src)
                    .map_err(|e| RenderError::Failed(e.to_string()))
                    .and_then(|t| page.all_cells(&t, &options));
                match rows {
                    Ok(rows) => out.rows = Some(rows.into_iter().map(shown).collect()),
                    Err(e) => fell_back(&mut out, "rowTemplate", reason(&e), &e),
                }
            }
            if let Some(src) = css {
                match scope_css(&src) {
                    Ok(css) => out.css = Some(css),
                    Err(e) => fell_back(&mut out, "css", "failed", &e),
                }
            }
            out
        })
    };
    let cards = hover.map(|src| {
        tokio::task::spawn_blocking(move || {
            let t = Compiled::compile(&src).map_err(|e| RenderError::Failed(e.to_string()))?;
            let mut page = Page::with_time(&context, RENDER_TIME.saturating_sub(started.elapsed()));
            options
                .iter()
                .map(|o| page.card(&t, Some(o)).map(shown))
                .collect::<Result<Vec<_>, _>>()
        })
    });

    let deadline = tokio::time::Instant::from_std(started + TIMEOUT);
    let mut out = match tokio::time::timeout_at(deadline, main).await {
        Ok(Ok(out)) => out,
        // The task panicked (a bug) or ran out of time: every part it had falls back.
        failed => {
            let (why, detail): (_, &dyn std::fmt::Display) = match &failed {
                Ok(Err(e)) => ("failed", e),
                _ => ("timeout", &"the page's templates took too long"),
            };
            let mut out = Custom::default();
            for (part, present) in [
                ("displayTemplate", spec.display_template.is_some()),
                (
                    "rowTemplate",
                    matches!(&spec.kind, KindSpec::Selection(s) if s.row_template.is_some()),
                ),
                ("css", spec.css.is_some()),
            ] {
                if present {
                    fell_back(&mut out, part, why, detail);
                }
            }
            out
        }
    };
    if let Some(cards) = cards {
        match tokio::time::timeout_at(deadline, cards).await {
            Ok(Ok(Ok(cards))) => out.cards = Some(cards),
            Ok(Ok(Err(e))) => fell_back(&mut out, "hoverTemplate", reason(&e), &e),
            Ok(Err(e)) => fell_back(&mut out, "hoverTemplate", "failed", &e),
            Err(_) => fell_back(
                &mut out,
                "hoverTemplate",
                "timeout",
                &"the page's templates took too long",
            ),
        }
    }
    metrics::histogram!("elicitd_template_render_seconds").record(started.elapsed().as_secs_f64());
    out
}
