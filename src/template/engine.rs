//! Compiling a requester template: pre-checks with liquid's own lexer (size, nesting, block
//! structure, filter names and arities, all with line and column), then the rewrite that
//! makes escaping the default (` | __autoescape` at the end of every `{{ … }}`), then liquid's
//! parse of the rewritten source, whose error positions are mapped back to the source.

use std::collections::HashMap;
use std::sync::LazyLock;

use pest::Parser as _;

use super::filters::{self, Arity, AUTOESCAPE};
use super::{tags, TemplateError, MAX_TEMPLATE_BYTES};

/// Deepest nesting of blocks, and of `[`/`(` (liquid parses and renders both recursively; 24
/// of each together stay far inside a 2 MiB thread stack).
pub(super) const MAX_NESTING: usize = 24;

mod lexer {
    #[derive(pest_derive::Parser)]
    #[grammar = "src/template/liquid_lexer.pest"]
    pub struct Lexer;
}
use lexer::{Lexer, Rule};

/// The parser and what the lexer pass checks against.
struct Engine {
    parser: liquid::Parser,
    arities: HashMap<String, Arity>,
    tag_names: Vec<String>,
}

static ENGINE: LazyLock<Engine> = LazyLock::new(|| {
    let mut b = tags::register(liquid::ParserBuilder::new());
    let mut arities = HashMap::new();
    for (f, arity) in filters::all() {
        arities.insert(f.reflection().name().to_owned(), arity);
        b = b.filter(f);
    }
    let parser = b
        .filter(filters::autoescape())
        .build()
        .expect("the template parser builds");
    let mut tag_names: Vec<String> = ["assign", "break", "continue"]
        .iter()
        .chain(tags::BLOCKS)
        .map(|s| s.to_string())
        .collect();
    tag_names.sort();
    Engine {
        parser,
        arities,
        tag_names,
    }
});

/// Byte offset → 1-based line and column (in characters).
pub(super) fn line_col(src: &str, byte: usize) -> (usize, usize) {
    let before = &src[..byte.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

/// 1-based line and column (in characters) → byte offset.
fn byte_of(src: &str, line: usize, col: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match src[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return src.len(),
        }
    }
    src[start..]
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(src.len(), |(i, _)| start + i)
}

fn error_at(src: &str, byte: usize, message: impl Into<String>) -> TemplateError {
    let (line, column) = line_col(src, byte);
    TemplateError {
        line,
        column,
        message: message.into(),
    }
}

/// Tags that only appear inside a block (liquid checks where).
const INNER_TAGS: &[&str] = &["else", "elsif", "when"];

/// What [`lex_check`] found.
struct Lexed {
    /// Byte offsets where ` | __autoescape` goes (the end of each `{{ … }}`'s filter chain).
    inserts: Vec<usize>,
    /// Where the checks stopped at text liquid cannot read (liquid's parse reports it).
    stopped_at: Option<usize>,
}

/// Checks on liquid's own tokens, each failure with its position.
fn lex_check(src: &str, engine: &Engine) -> Result<Lexed, TemplateError> {
    if src.len() > MAX_TEMPLATE_BYTES {
        return Err(error_at(
            src,
            0,
            format!("the template is larger than {MAX_TEMPLATE_BYTES} bytes"),
        ));
    }
    // `[`/`(` nesting, over the whole text: liquid parses brackets recursively, and the lexer
    // below would too. Counting everywhere (also in text and strings) never undercounts.
    let mut depth = 0usize;
    for (i, c) in src.char_indices() {
        match c {
            '[' | '(' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(error_at(
                        src,
                        i,
                        format!("`[` and `(` nest more than {MAX_NESTING} deep"),
                    ));
                }
            }
            ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let file = Lexer::parse(Rule::LaxLiquidFile, src)
        .map_err(|e| error_at(src, 0, format!("cannot read the template: {e}")))?
        .next()
        .ok_or_else(|| error_at(src, 0, "cannot read the template"))?;
    let mut inserts = Vec::new();
    let mut open: Vec<(&str, usize)> = Vec::new(); // block name, byte offset of its tag
    for el in file.into_inner() {
        match el.as_rule() {
            Rule::Expression => {
                if let Some(inner) = el.clone().into_inner().next() {
                    inserts.push(inner.as_span().end());
                }
            }
            Rule::Tag => {
                let name = el
                    .clone()
                    .into_inner()
                    .next()
                    .and_then(|inner| inner.into_inner().next())
                    .map(|p| (p.as_str(), p.as_span().start()));
                if let Some((name, at)) = name {
                    let closes = name
                        .strip_prefix("end")
                        .filter(|b| tags::BLOCKS.contains(b));
                    if tags::BLOCKS.contains(&name) {
                        if open.len() >= MAX_NESTING {
                            return Err(error_at(
                                src,
                                at,
                                format!("blocks nest more than {MAX_NESTING} deep"),
                            ));
                        }
                        open.push((name, at));
                    } else if let Some(block) = closes {
                        match open.pop() {
                            Some((o, _)) if o == block => {}
                            Some((o, oat)) => {
                                let (l, c) = line_col(src, oat);
                                return Err(error_at(src, at, format!("`{name}` does not close `{o}` (opened at line {l}, column {c})")));
                            }
                            None => {
                                return Err(error_at(src, at, format!("`{name}` closes nothing")))
                            }
                        }
                    } else if !INNER_TAGS.contains(&name)
                        && !engine.tag_names.iter().any(|t| t == name)
                        && !open.iter().any(|(o, _)| *o == "comment")
                    {
                        // (inside a comment liquid ignores unknown tags; so do we)
                        return Err(error_at(
                            src,
                            at,
                            format!(
                                "unknown tag `{name}` (tags: {})",
                                engine.tag_names.join(", ")
                            ),
                        ));
                    }
                }
            }
            Rule::InvalidLiquid if !open.iter().any(|(o, _)| *o == "comment") => {
                // a `{{`/`{%` liquid cannot read: its parse fails here with a precise message
                let stopped_at = Some(el.as_span().start());
                return Ok(Lexed {
                    inserts,
                    stopped_at,
                });
            }
            _ => continue,
        }
        if open.iter().any(|(o, _)| *o == "comment") {
            continue; // liquid does not look at what a comment holds (beyond block structure)
        }
        for p in el.into_inner().flatten() {
            if p.as_rule() == Rule::Filter {
                check_filter(src, engine, p)?;
            }
        }
    }
    if let Some((name, at)) = open.pop() {
        return Err(error_at(
            src,
            at,
            format!("`{name}` is not closed (`end{name}` expected)"),
        ));
    }
    Ok(Lexed {
        inserts,
        stopped_at: None,
    })
}

/// A filter exists and gets a number of arguments it takes.
fn check_filter(
    src: &str,
    engine: &Engine,
    p: pest::iterators::Pair<'_, Rule>,
) -> Result<(), TemplateError> {
    let mut parts = p.into_inner();
    let Some(name) = parts.next() else {
        return Ok(());
    };
    let at = name.as_span().start();
    let Some(arity) = engine.arities.get(name.as_str()) else {
        return Err(error_at(
            src,
            at,
            format!("unknown filter `{}`", name.as_str()),
        ));
    };
    let mut positional = 0;
    for arg in parts {
        match arg.as_rule() {
            Rule::KeywordFilterArgument => {
                let kw = arg.into_inner().next().map(|k| k.as_str()).unwrap_or("");
                if !arity.keywords.contains(&kw) {
                    return Err(error_at(
                        src,
                        at,
                        format!("filter `{}` has no argument `{kw}`", name.as_str()),
                    ));
                }
            }
            _ => positional += 1,
        }
    }
    if positional < arity.min || positional > arity.max {
        let takes = match (arity.min, arity.max) {
            (0, 0) => "no arguments".to_string(),
            (a, b) if a == b => format!("{a} argument{}", if a == 1 { "" } else { "s" }),
            (a, b) => format!("{a} to {b} arguments"),
        };
        return Err(error_at(
            src,
            at,
            format!("filter `{}` takes {takes}, not {positional}", name.as_str()),
        ));
    }
    Ok(())
}

/// Turn liquid's multi-line parse error into one line (its position is taken separately).
fn liquid_message(msg: &str, engine: &Engine) -> String {
    if let Some(requested) = msg
        .lines()
        .find_map(|l| l.trim().strip_prefix("requested="))
    {
        return format!(
            "unknown tag `{requested}` (tags: {})",
            engine.tag_names.join(", ")
        );
    }
    let reason = msg
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("= "))
        .or_else(|| {
            msg.lines()
                .next()
                .map(|l| l.trim_start_matches("liquid:").trim())
        })
        .unwrap_or("syntax error");
    let reason = reason.trim().trim_end_matches('.');
    match reason.strip_prefix("expected ") {
        Some(what) => format!("syntax error: expected {what}"),
        None => reason.to_string(),
    }
}

/// liquid's pest errors carry " --> L:C" in their text.
fn liquid_error_pos(msg: &str) -> Option<(usize, usize)> {
    let rest = &msg[msg.find("--> ")? + 4..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(rest.len());
    let (l, c) = rest[..end].split_once(':')?;
    Some((l.parse().ok()?, c.parse().ok()?))
}

const INSERT: &str = " | __autoescape";

/// Compile `src` into a liquid template with escaping by default.
pub(super) fn compile(src: &str) -> Result<liquid::Template, TemplateError> {
    debug_assert_eq!(INSERT, format!(" | {AUTOESCAPE}"));
    let engine = &*ENGINE;
    let Lexed {
        inserts,
        stopped_at,
    } = lex_check(src, engine)?;
    let mut out = String::with_capacity(src.len() + inserts.len() * INSERT.len());
    let mut last = 0;
    for &at in &inserts {
        out.push_str(&src[last..at]);
        out.push_str(INSERT);
        last = at;
    }
    out.push_str(&src[last..]);
    let parsed =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.parser.parse(&out)));
    match parsed {
        // fail closed: a template whose checks did not run to the end is never used
        Ok(Ok(_)) if stopped_at.is_some() => {
            Err(error_at(src, stopped_at.unwrap_or(0), "syntax error"))
        }
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => {
            let msg = e.to_string();
            // map the position in the rewritten text back to the source
            let byte = liquid_error_pos(&msg).map_or(0, |(l, c)| {
                let r = byte_of(&out, l, c);
                let mut o = r;
                for (k, &at) in inserts.iter().enumerate() {
                    let start = at + k * INSERT.len();
                    if r >= start + INSERT.len() {
                        o = r - (k + 1) * INSERT.len();
                    } else if r >= start {
                        o = at;
                        break;
                    } else {
                        break;
                    }
                }
                o
            });
            Err(error_at(src, byte, liquid_message(&msg, engine)))
        }
        Err(_) => Err(error_at(src, 0, "the template cannot be parsed")),
    }
}

/// Names of the tags and filters requesters may use (for documentation and tests).
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn vocabulary() -> (Vec<String>, Vec<String>) {
    let engine = &*ENGINE;
    let mut filters: Vec<String> = engine.arities.keys().cloned().collect();
    filters.sort();
    (engine.tag_names.clone(), filters)
}
