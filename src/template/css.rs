//! Requester CSS, checked and scoped with Servo's tokenizer (cssparser): an allow-list of style
//! rules, plus `@media`/`@supports` one level deep holding style rules. Every selector is
//! prefixed with `.tpl-scope ` (commas at the top of a selector list get one each; commas
//! inside `:is(…)` and friends do not). Refused, with line and column: any other at-rule
//! (`@import`, `@font-face`, `@keyframes`, …), nested rules, a selector starting with `+`/`~`
//! (it would reach the container's siblings), `url()`/`src()` other than a non-SVG
//! `data:image/`, `image-set()` and similar functions (also in custom
//! properties), `position` other than static/relative/absolute/sticky (so no `fixed`, no
//! `var()`), `-moz-binding`/`behavior`, `direction`/`unicode-bidi`, bad tokens, and any `</` in the output (the HTML
//! tokenizer ends `<style>` at `</style` even inside a CSS string). Values are not otherwise
//! validated; the browser drops what it does not understand, inside the scope.

use cssparser::{
    AtRuleParser, CowRcStr, DeclarationParser, ParseError, ParseErrorKind, Parser, ParserState,
    QualifiedRuleParser, RuleBodyItemParser, RuleBodyParser, SourceLocation, StyleSheetParser,
    ToCss, Token, TokenSerializationType,
};

use super::{TemplateError, MAX_CSS_BYTES};

/// The selector of the element every template's output lives in (`super::SCOPE`).
pub(super) const SCOPE_SELECTOR: &str = ".tpl-scope";

const DENY_FUNCS: &[&str] = &[
    "image-set",
    "-webkit-image-set",
    "element",
    "-moz-element",
    "expression",
    "cross-fade",
    "-webkit-cross-fade",
    "image",
];

type Err = ParseError<TemplateError>;

fn located(loc: SourceLocation, message: impl Into<String>) -> TemplateError {
    TemplateError {
        line: loc.line as usize + 1,
        column: loc.column as usize,
        message: message.into(),
    }
}

fn cerr(p: &Parser<'_>, message: impl Into<String>) -> Err {
    ParseError::custom(located(p.current_source_location(), message))
}

/// A rule-level failure as a [`TemplateError`]: ours keep their own position, cssparser's
/// get the position of the rule or declaration they are in.
fn to_template_error(e: Err, slice: &str, loc: SourceLocation) -> TemplateError {
    match e.kind {
        ParseErrorKind::Custom(t) => t,
        ParseErrorKind::Basic(k) => {
            let mut snippet: String = slice.trim().chars().take(40).collect();
            if snippet.len() < slice.trim().len() {
                snippet.push('…');
            }
            located(loc, format!("cannot parse `{snippet}` ({k})"))
        }
    }
}

fn url_ok(u: &str) -> bool {
    // Inline images only (see `sanitize::img_src_ok` for why not same-origin paths).
    u.strip_prefix("data:")
        .is_some_and(|rest| rest.starts_with("image/") && !rest.starts_with("image/svg"))
}

/// Where [`copy`] is: a selector list (commas become `,.tpl-scope ` and no selector may start
/// with a sibling combinator) or anything else.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Selectors,
    Other,
}

/// Re-serialise the tokens of `p` into `out` (cssparser's own `ToCss`, with `/**/` put back
/// where two tokens would otherwise merge), vetting each one.
fn copy(p: &mut Parser<'_>, out: &mut String, mode: Mode) -> Result<(), Err> {
    let mut prev: Option<TokenSerializationType> = None;
    let mut selector_start = mode == Mode::Selectors;
    loop {
        let tok = match p.next_including_whitespace() {
            Ok(t) => t.clone(),
            Err(_) if selector_start => return Err(cerr(p, "empty selector")),
            Err(_) => return Ok(()),
        };
        if selector_start && matches!(tok, Token::WhiteSpace(_)) {
            continue;
        }
        if selector_start && !matches!(tok, Token::Comma) {
            if matches!(tok, Token::Delim('+' | '~' | '|')) {
                return Err(cerr(p, "a selector may not start with `+`, `~` or `|`"));
            }
            selector_start = false;
        }
        let ty = tok.serialization_type();
        if prev.is_some_and(|pt| pt.needs_separator_when_before(ty)) {
            out.push_str("/**/");
        }
        prev = Some(ty);
        match &tok {
            Token::BadUrl(_)
            | Token::BadString(_)
            | Token::CloseParenthesis
            | Token::CloseSquareBracket
            | Token::CloseCurlyBracket
            | Token::CDO
            | Token::CDC => return Err(cerr(p, "invalid or unbalanced token")),
            Token::UnquotedUrl(u) if !url_ok(u) => {
                return Err(cerr(
                    p,
                    format!("url({u}) is not allowed (only data:image/ URLs, not SVG)"),
                ))
            }
            Token::Function(f) if DENY_FUNCS.iter().any(|d| f.eq_ignore_ascii_case(d)) => {
                return Err(cerr(p, format!("{f}() is not allowed")))
            }
            Token::Function(f)
                if f.eq_ignore_ascii_case("url") || f.eq_ignore_ascii_case("src") =>
            {
                let u = p.parse_nested_block(|n| {
                    n.expect_string().map(|s| s.to_string()).map_err(Into::into)
                })?;
                if !url_ok(&u) {
                    return Err(cerr(
                        p,
                        format!("url({u:?}) is not allowed (only data:image/ URLs, not SVG)"),
                    ));
                }
                out.push_str("url(");
                cssparser::serialize_string(&u, out).map_err(|_| cerr(p, "cannot write url"))?;
                out.push(')');
                prev = Some(Token::CloseParenthesis.serialization_type());
                continue;
            }
            Token::Comma if mode == Mode::Selectors => {
                if selector_start {
                    return Err(cerr(p, "empty selector"));
                }
                out.push(',');
                out.push_str(SCOPE_SELECTOR);
                out.push(' ');
                selector_start = true;
                prev = Some(Token::WhiteSpace(" ").serialization_type());
                continue;
            }
            Token::WhiteSpace(_) => out.push(' '),
            t => t.to_css(out).map_err(|_| cerr(p, "cannot write token"))?,
        }
        let close = match tok {
            Token::Function(_) | Token::ParenthesisBlock => ")",
            Token::SquareBracketBlock => "]",
            Token::CurlyBracketBlock => "}",
            _ => continue,
        };
        p.parse_nested_block(|n| copy(n, out, Mode::Other))?;
        out.push_str(close);
        prev = Some(Token::CloseParenthesis.serialization_type());
    }
}

/// Top level and `@media`/`@supports` bodies: style rules (and, at the top, those at-rules).
struct Rules<'o> {
    out: &'o mut String,
    depth: usize,
}

impl<'i> QualifiedRuleParser<'i> for Rules<'_> {
    type Prelude = ();
    type QualifiedRule = ();
    type Error = TemplateError;
    fn parse_prelude(&mut self, input: &mut Parser<'i>) -> Result<(), Err> {
        let mut sel = String::new();
        copy(input, &mut sel, Mode::Selectors)?;
        let sel = sel.trim();
        if sel.contains('&') {
            return Err(cerr(input, "nesting selectors (`&`) are not allowed"));
        }
        self.out.push_str(SCOPE_SELECTOR);
        self.out.push(' ');
        self.out.push_str(sel);
        Ok(())
    }
    fn parse_block(&mut self, _: (), _: &ParserState, input: &mut Parser<'i>) -> Result<(), Err> {
        self.out.push('{');
        let mut decls = Decls {
            out: &mut *self.out,
        };
        for item in RuleBodyParser::new(input, &mut decls) {
            if let Err((e, slice, loc)) = item {
                return Err(ParseError::custom(to_template_error(e, slice, loc)));
            }
        }
        self.out.push('}');
        Ok(())
    }
}

impl<'i> AtRuleParser<'i> for Rules<'_> {
    type Prelude = ();
    type AtRule = ();
    type Error = TemplateError;
    fn parse_prelude(&mut self, name: CowRcStr<'i>, input: &mut Parser<'i>) -> Result<(), Err> {
        let name = name.to_ascii_lowercase();
        if !(name == "media" || name == "supports") {
            return Err(cerr(
                input,
                format!("@{name} is not allowed (only @media and @supports)"),
            ));
        }
        if self.depth > 0 {
            return Err(cerr(input, format!("@{name} may not be nested")));
        }
        self.out.push('@');
        self.out.push_str(&name);
        let mut prelude = String::new();
        copy(input, &mut prelude, Mode::Other)?;
        self.out.push_str(prelude.trim_end());
        Ok(())
    }
    fn rule_without_block(&mut self, _: (), _: &ParserState) -> Result<(), ()> {
        Err(())
    }
    fn parse_block(&mut self, _: (), _: &ParserState, input: &mut Parser<'i>) -> Result<(), Err> {
        self.out.push('{');
        let mut inner = Rules {
            out: &mut *self.out,
            depth: self.depth + 1,
        };
        for item in RuleBodyParser::new(input, &mut inner) {
            if let Err((e, slice, loc)) = item {
                return Err(ParseError::custom(to_template_error(e, slice, loc)));
            }
        }
        self.out.push('}');
        Ok(())
    }
}

impl<'i> DeclarationParser<'i> for Rules<'_> {
    type Declaration = ();
    type Error = TemplateError;
}

impl<'i> RuleBodyItemParser<'i, (), TemplateError> for Rules<'_> {
    fn parse_declarations(&self) -> bool {
        false
    }
    fn parse_qualified(&self) -> bool {
        true
    }
}

/// The body of a style rule: declarations only (no nested rules, no at-rules).
struct Decls<'o> {
    out: &'o mut String,
}

impl<'i> DeclarationParser<'i> for Decls<'_> {
    type Declaration = ();
    type Error = TemplateError;
    fn parse_value(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i>,
        _: &ParserState,
    ) -> Result<(), Err> {
        let name = name.to_ascii_lowercase();
        // `direction` / `unicode-bidi` could reorder what the reviewer reads, like the
        // hidden bidi characters the page shows as ⟨U+XXXX⟩.
        if name.contains("binding")
            || name == "behavior"
            || name == "direction"
            || name == "unicode-bidi"
        {
            return Err(cerr(input, format!("property {name} is not allowed")));
        }
        let mut v = String::new();
        copy(input, &mut v, Mode::Other)?;
        let v = v.trim();
        if name == "position" {
            let lower = v.to_ascii_lowercase();
            let keyword = lower
                .strip_suffix("!important")
                .unwrap_or(&lower)
                .trim_end();
            if !matches!(
                keyword,
                "static" | "relative" | "absolute" | "sticky" | "-webkit-sticky"
            ) {
                return Err(cerr(input, format!("position: {v} is not allowed")));
            }
        }
        cssparser::serialize_identifier(&name, self.out)
            .map_err(|_| cerr(input, "cannot write property"))?;
        self.out.push(':');
        self.out.push_str(v);
        self.out.push(';');
        Ok(())
    }
}

impl<'i> AtRuleParser<'i> for Decls<'_> {
    type Prelude = ();
    type AtRule = ();
    type Error = TemplateError;
}

impl<'i> QualifiedRuleParser<'i> for Decls<'_> {
    type Prelude = ();
    type QualifiedRule = ();
    type Error = TemplateError;
}

impl<'i> RuleBodyItemParser<'i, (), TemplateError> for Decls<'_> {
    fn parse_declarations(&self) -> bool {
        true
    }
    fn parse_qualified(&self) -> bool {
        false
    }
}

/// Check a requester stylesheet and scope it to [`SCOPE_SELECTOR`]; see the module docs.
pub(super) fn scope_css(src: &str) -> Result<String, TemplateError> {
    if src.len() > MAX_CSS_BYTES {
        return Err(TemplateError {
            line: 1,
            column: 1,
            message: format!("the stylesheet is larger than {MAX_CSS_BYTES} bytes"),
        });
    }
    let mut out = String::with_capacity(src.len() + src.len() / 2);
    let mut parser = Parser::new(src);
    let mut rules = Rules {
        out: &mut out,
        depth: 0,
    };
    for r in StyleSheetParser::new(&mut parser, &mut rules) {
        if let Err((e, slice, loc)) = r {
            return Err(to_template_error(e, slice, loc));
        }
    }
    if out.contains("</") {
        return Err(TemplateError {
            line: 1,
            column: 1,
            message: "the stylesheet may not contain \"</\" (it would end the <style> element)"
                .into(),
        });
    }
    Ok(out)
}
