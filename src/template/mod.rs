//! Requester display templates (issue 17): Liquid templates that render a request's `context`
//! (and, for selections, each option) into the review page, plus a stylesheet scoped to them.
//! Requesters are not trusted: every template is checked when the request is created and every
//! render is bounded and sanitized; a render that fails means "show the default view".
//!
//! # The language
//! Liquid (liquid-rust 0.26.11) with these differences:
//! - **Every `{{ … }}` is HTML-escaped** after its filters ran, so filters see the original
//!   values (`{{ context.title | size }}` counts characters, not entities). `escape` and
//!   `escape_once` do nothing (no double escaping); there is no way to output unescaped data.
//!   Markup belongs in the template text, which goes through the sanitizer.
//! - Tags: `assign`, `if`/`elsif`/`else`, `unless`, `case`/`when`, `for` (with `limit`,
//!   `offset`, `reversed`, `else`, `forloop.*`, `break`, `continue`) and `comment`. Not
//!   available: `capture` (its body is already escaped; and it doubles memory), `cycle` (writes
//!   unescaped), `raw`, `include`, `render`, `tablerow`, `increment`, `decrement`, `ifchanged`.
//! - Filters: liquid's standard set except `newline_to_br` (its `<br />` would be escaped; use
//!   CSS `white-space: pre-line`). `date` is our own: it reads RFC 3339, `YYYY-MM-DD` and unix
//!   seconds, and takes a strftime format (`{{ context.due | date: "%d %b %Y" }}`).
//! - A missing variable, key or index is nil (renders as nothing) instead of an error.
//!
//! # Checked at create time ([`Compiled::compile`], [`scope_css`])
//! Size ([`MAX_TEMPLATE_BYTES`], [`MAX_CSS_BYTES`]), syntax, unknown tags and filters, filter
//! argument counts, block structure, nesting (24 blocks, 24 `[`/`(`; the bracket count also
//! covers plain text), all reported as a [`TemplateError`] with line and column.
//!
//! # Rendering
//! Bounded per render by steps ([`RENDER_STEPS`]: loop iterations, tags, filter calls), output
//! ([`RENDER_OUTPUT_BYTES`]), memory (filter results, assigned values and loop copies,
//! [`RENDER_MEMORY`]; each filter result at most 256 KiB counting 16 bytes per item, `uniq` at
//! most 2000 items) and a deadline; `(1..100000000)` ranges are counted lazily. A [`Page`] shares one deadline, step and output allowance among all the renders of
//! a review page (a selection can have 500 options × row + hover). The output is sanitized
//! (ammonia allow-list: formatting, lists, tables, images as `data:`
//! rasters; no scripts, handlers, `style` attributes, forms, links or iframes). Row templates
//! must produce a flat list of `<td>`/`<th>` cells.
//!
//! Rendering is synchronous CPU work: call it from `tokio::task::spawn_blocking` and give up
//! (default view) if that does not answer in time. The budget makes the worker itself stop
//! soon after the deadline: the deadline is checked at every step and output write, and
//! between the 512-byte pieces the sanitizer's HTML parser is fed (its tree builder is
//! quadratic in nesting depth for `<div>`/`<li>`). What cannot be interrupted is bounded by
//! the value caps: one statement (a long `elsif` chain comparing the whole context is the
//! worst case, a few ms) or one piece of HTML.
//!
//! # Embedding (the caller's part)
//! Put each template's output inside an element with class `tpl-scope` ([`SCOPE`]), and the
//! output of [`scope_css`] in `<style nonce="…">`. Page CSS should give `.tpl-scope`
//! `contain: paint; position: relative` and a clipping `overflow` (the page uses `auto`), so
//! that nothing inside can paint outside it.

mod budget;
mod css;
mod engine;
mod filters;
mod lenient;
mod sanitize;
mod tags;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use budget::{Budget, CappedWriter};
use lenient::{Lv, Root};

/// The class of the element every template's output (and the scoped CSS) lives in.
pub const SCOPE: &str = "tpl-scope";

/// Largest `displayTemplate`, `rowTemplate` or `hoverTemplate`, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 32 * 1024;
/// Largest `css`, in bytes.
pub const MAX_CSS_BYTES: usize = 16 * 1024;

/// Steps one render may take (loop iterations, executed tags, filter calls).
pub const RENDER_STEPS: u64 = 100_000;
/// Output one render may write (before sanitizing).
pub const RENDER_OUTPUT_BYTES: usize = 256 * 1024;
/// Filter results and assigned values one render may make, in bytes (about).
pub const RENDER_MEMORY: usize = 8 * 1024 * 1024;
/// Deadline of a single [`Compiled::render_card`] / [`Compiled::render_cells`].
pub const RENDER_TIME: Duration = Duration::from_millis(50);

/// Default deadline of a [`Page`] (for all its renders together).
pub const PAGE_TIME: Duration = Duration::from_millis(80);
/// Steps all the renders of a [`Page`] may take together.
pub const PAGE_STEPS: u64 = 2_000_000;
/// Output all the renders of a [`Page`] may write together (before sanitizing).
pub const PAGE_OUTPUT_BYTES: usize = 4 * 1024 * 1024;

/// A template or stylesheet that cannot be accepted, with the position of the problem
/// (1-based; the column counts characters, UTF-16 code units for CSS).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct TemplateError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Why a render produced nothing; the caller shows the default view instead (and may log it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A budget ran out: "time", "step", "output", "memory" or "value size".
    #[error("the template went over its {0} limit")]
    Limit(&'static str),
    /// The template failed (a filter error, a wrong type, …).
    #[error("the template failed: {0}")]
    Failed(String),
    /// A row template produced something other than a flat list of `<td>`/`<th>` cells.
    #[error("the row template did not produce a flat list of <td>/<th> cells")]
    NotCells,
}

/// A checked template, ready to render. Cheap to clone; `Send + Sync`.
///
/// Compiling is cheap for realistic templates (well under 1 ms for a 1–2 KiB template in
/// release) and bounded for the largest (10–30 ms for 32 KiB of expressions): compile when a
/// request is created (to refuse bad templates) and again for each page render, or keep the
/// `Compiled` if the same request is shown often.
#[derive(Clone)]
pub struct Compiled(Arc<liquid::Template>);

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Compiled")
    }
}

impl Compiled {
    /// Check and compile a `displayTemplate` or `hoverTemplate`.
    pub fn compile(source: &str) -> Result<Compiled, TemplateError> {
        engine::compile(source).map(|t| Compiled(Arc::new(t)))
    }

    /// Check and compile a `rowTemplate`: as [`Compiled::compile`], and its text must contain
    /// a `<td` or `<th` (render it with [`Compiled::render_cells`] / [`Page::cells`]).
    pub fn compile_row(source: &str) -> Result<Compiled, TemplateError> {
        let compiled = Compiled::compile(source)?;
        let lower = source.to_ascii_lowercase();
        if !lower.contains("<td") && !lower.contains("<th") {
            return Err(TemplateError {
                line: 1,
                column: 1,
                message: "a row template renders the cells of a row: <td>…</td> or <th>…</th>"
                    .into(),
            });
        }
        Ok(compiled)
    }

    /// Render with `vars` (an object whose keys are the top-level variables, e.g.
    /// `{"context": …}`) under its own budget ([`RENDER_TIME`]); sanitized HTML.
    pub fn render_card(&self, vars: &serde_json::Value) -> Result<String, RenderError> {
        let mut allowance = Allowance::new(RENDER_TIME, RENDER_STEPS, RENDER_OUTPUT_BYTES);
        let vars = Lv::from_json(vars);
        let html = self.render_raw(&root_of(&vars), &mut allowance)?;
        sanitize::card(&html, allowance.deadline)
    }

    /// As [`Compiled::render_card`], for a row template: the sanitized `<td>`/`<th>` cells.
    pub fn render_cells(&self, vars: &serde_json::Value) -> Result<String, RenderError> {
        let mut allowance = Allowance::new(RENDER_TIME, RENDER_STEPS, RENDER_OUTPUT_BYTES);
        let vars = Lv::from_json(vars);
        let html = self.render_raw(&root_of(&vars), &mut allowance)?;
        sanitize::cells(&html, allowance.deadline)
    }

    /// Render under `allowance` (and the per-render caps), drawing on it.
    fn render_raw(&self, root: &Root<'_>, a: &mut Allowance) -> Result<String, RenderError> {
        if Instant::now() >= a.deadline {
            return Err(RenderError::Limit("time"));
        }
        if a.steps == 0 {
            return Err(RenderError::Limit("step"));
        }
        let steps = a.steps.min(RENDER_STEPS);
        let budget = Budget {
            deadline: a.deadline,
            steps,
            alloc: RENDER_MEMORY,
            tripped: None,
        };
        let mut w = CappedWriter {
            buf: Vec::new(),
            cap: a.output.min(RENDER_OUTPUT_BYTES),
        };
        let (result, left) = budget::run(budget, || self.0.render_to(&mut w, root));
        a.steps -= steps - left.steps;
        a.output = a.output.saturating_sub(w.buf.len());
        match result {
            Ok(Ok(())) => String::from_utf8(w.buf)
                .map_err(|_| RenderError::Failed("output is not UTF-8".into())),
            Ok(Err(e)) => Err(match left.tripped {
                Some(limit) => RenderError::Limit(limit),
                None => RenderError::Failed(first_line(&e.to_string())),
            }),
            Err(()) => Err(RenderError::Failed("the template panicked".into())),
        }
    }
}

/// The top-level variables of a JSON object.
fn root_of(vars: &Lv) -> Root<'_> {
    match vars {
        Lv::Obj(entries, _) => Root(entries.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        _ => Root(Vec::new()),
    }
}

fn first_line(msg: &str) -> String {
    let line = msg.lines().next().unwrap_or(msg);
    line.strip_prefix("liquid:")
        .unwrap_or(line)
        .trim()
        .to_string()
}

/// What is left for the renders sharing it.
#[derive(Debug)]
struct Allowance {
    deadline: Instant,
    steps: u64,
    output: usize,
}

impl Allowance {
    fn new(time: Duration, steps: u64, output: usize) -> Allowance {
        Allowance {
            deadline: Instant::now() + time,
            steps,
            output,
        }
    }
}

/// All the template renders of one review page, sharing one deadline, step and output
/// allowance (each render also has the per-render caps). The `context` is converted once.
/// Once the allowance is spent every further render fails at once. The deadline runs from
/// [`Page::new`]; time spent compiling before it is not counted (use [`Page::with_time`] with
/// what is left of the caller's own timeout).
///
/// ```ignore
/// // inside spawn_blocking, after compiling the templates
/// let mut page = Page::with_time(&context, Duration::from_millis(90).saturating_sub(started.elapsed()));
/// let cells = page.all_cells(&row, &options)?;            // all rows, or the default table
/// let cards: Vec<_> = options.iter().map(|o| page.card(&hover, Some(o)).ok()).collect();
/// ```
#[derive(Debug)]
pub struct Page {
    context: Lv,
    allowance: Allowance,
}

impl Page {
    /// A page whose renders must all finish within [`PAGE_TIME`] from now.
    pub fn new(context: &serde_json::Value) -> Page {
        Page::with_time(context, PAGE_TIME)
    }

    /// A page whose renders must all finish within `time` from now.
    pub fn with_time(context: &serde_json::Value, time: Duration) -> Page {
        let allowance = Allowance::new(time, PAGE_STEPS, PAGE_OUTPUT_BYTES);
        Page {
            context: Lv::from_json(context),
            allowance,
        }
    }

    /// Render a card (`displayTemplate` with `option` None, `hoverTemplate` with the option):
    /// sanitized HTML.
    pub fn card(
        &mut self,
        t: &Compiled,
        option: Option<&serde_json::Value>,
    ) -> Result<String, RenderError> {
        let option = option.map(Lv::from_json);
        let root = page_root(&self.context, option.as_ref());
        let html = t.render_raw(&root, &mut self.allowance)?;
        sanitize::card(&html, self.allowance.deadline)
    }

    /// Render one option's row cells: sanitized `<td>`/`<th>` elements only.
    pub fn cells(
        &mut self,
        t: &Compiled,
        option: &serde_json::Value,
    ) -> Result<String, RenderError> {
        let option = Lv::from_json(option);
        let root = page_root(&self.context, Some(&option));
        let html = t.render_raw(&root, &mut self.allowance)?;
        sanitize::cells(&html, self.allowance.deadline)
    }

    /// Render the row cells of every option, stopping at the first failure (a table whose
    /// rows do not all come from the template should fall back to the default table).
    pub fn all_cells(
        &mut self,
        t: &Compiled,
        options: &[serde_json::Value],
    ) -> Result<Vec<String>, RenderError> {
        options.iter().map(|o| self.cells(t, o)).collect()
    }
}

/// `context` and, for option templates, `option`.
fn page_root<'a>(context: &'a Lv, option: Option<&'a Lv>) -> Root<'a> {
    let mut vars = vec![("context", context)];
    if let Some(o) = option {
        vars.push(("option", o));
    }
    Root(vars)
}

/// Check a requester stylesheet and scope it to `.tpl-scope` (see `css.rs` for the rules):
/// the result is safe to put in `<style nonce="…">` as it is.
pub fn scope_css(source: &str) -> Result<String, TemplateError> {
    css::scope_css(source)
}
