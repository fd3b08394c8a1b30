//! The HTML allow-list every rendered template goes through (ammonia): formatting, lists,
//! tables and images; `class`, `title`, `lang` and a few per-tag attributes (no `dir`: like
//! hidden bidi characters, it could reorder what the reviewer reads). No
//! scripts, event handlers, `style` attributes, forms, links, iframes, SVG or MathML.
//! `<img src>` must be a base64 `data:` PNG/JPEG/GIF/WebP. Autoescaping is for
//! correctness; this is the XSS boundary.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::sync::LazyLock;
use std::time::Instant;

use super::RenderError;

const FORMATTING: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "s",
    "del",
    "ins",
    "small",
    "sub",
    "sup",
    "mark",
    "code",
    "kbd",
    "pre",
    "br",
    "p",
    "span",
    "div",
    "blockquote",
    "hr",
    "abbr",
    "time",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "img",
];
const TABLE: &[&str] = &[
    "table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "td", "th",
];
/// Largest `data:` image kept.
const MAX_DATA_IMAGE: usize = 256 * 1024;
/// The HTML parser gets its input in pieces this large, the deadline checked before each.
/// (Its tree builder is quadratic in nesting depth for some tags: 4000 nested `<div>` take
/// about 100 ms, 8000 about 400 ms; one piece holds at most ~100 tags.)
const PIECE: usize = 512;

/// `<img src>`: a base64 `data:` PNG/JPEG/GIF/WebP, at most `MAX_DATA_IMAGE` bytes.
fn img_src_ok(v: &str) -> bool {
    // Only inline rasters: requesters have no images on this origin, and a relative path
    // would resolve to `/review/<path>`, a review-token lookup that counts against the
    // reviewer's own wrong-token brake.
    let Some(rest) = v.strip_prefix("data:") else {
        return false;
    };
    let raster = ["image/png;", "image/jpeg;", "image/gif;", "image/webp;"]
        .iter()
        .any(|t| rest.starts_with(t));
    raster && rest.contains(";base64,") && v.len() <= MAX_DATA_IMAGE
}

fn relative_src(u: &str) -> Option<Cow<'_, str>> {
    img_src_ok(u).then_some(Cow::Borrowed(u))
}

fn builder(tags: HashSet<&'static str>) -> ammonia::Builder<'static> {
    let mut b = ammonia::Builder::empty();
    let tag_attrs: HashMap<&str, HashSet<&str>> = HashMap::from([
        ("img", HashSet::from(["src", "alt", "width", "height"])),
        ("td", HashSet::from(["colspan", "rowspan"])),
        ("th", HashSet::from(["colspan", "rowspan", "scope"])),
        ("col", HashSet::from(["span"])),
        ("colgroup", HashSet::from(["span"])),
        ("ol", HashSet::from(["start", "reversed"])),
        ("time", HashSet::from(["datetime"])),
    ]);
    b.tags(tags)
        // dropped with their contents
        .clean_content_tags(HashSet::from(["script", "style", "template", "noscript"]))
        .generic_attributes(HashSet::from(["class", "title", "lang"]))
        .tag_attributes(tag_attrs)
        // the only URL attribute left is img@src
        .url_schemes(HashSet::from(["data"]))
        .url_relative(ammonia::UrlRelative::Custom(Box::new(relative_src)))
        .attribute_filter(|el, attr, val| {
            if el == "img" && attr == "src" && !img_src_ok(val) {
                None
            } else {
                Some(val.into())
            }
        })
        .link_rel(None)
        .strip_comments(true);
    b
}

/// Cards (display and hover templates): formatting and whole tables.
static CARD: LazyLock<ammonia::Builder<'static>> =
    LazyLock::new(|| builder(FORMATTING.iter().chain(TABLE).copied().collect()));

/// Row cells: formatting plus `td`/`th`, but *not* `table`/`tbody`/`tr`, so that the scaffold
/// [`cells`] wraps around them is unwrapped again.
static CELLS: LazyLock<ammonia::Builder<'static>> =
    LazyLock::new(|| builder(FORMATTING.iter().chain(&["td", "th"]).copied().collect()));

/// Feeds the parser [`PIECE`] bytes at a time and fails once the deadline has passed.
struct Paced<'a> {
    rest: &'a [u8],
    deadline: Instant,
}

impl Read for Paced<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if Instant::now() >= self.deadline {
            return Err(io::Error::other("sanitizer deadline"));
        }
        let n = buf.len().min(self.rest.len()).min(PIECE);
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}

fn clean(
    b: &ammonia::Builder<'static>,
    html: &str,
    deadline: Instant,
) -> Result<String, RenderError> {
    let paced = Paced {
        rest: html.as_bytes(),
        deadline,
    };
    b.clean_from_reader(paced)
        .map(|doc| doc.to_string())
        .map_err(|_| RenderError::Limit("time"))
}

/// Sanitize a card.
pub(super) fn card(html: &str, deadline: Instant) -> Result<String, RenderError> {
    clean(&CARD, html, deadline)
}

/// Sanitize the cells of one row: [`RenderError::NotCells`] unless the result is a flat list
/// of at least one `td`/`th` (stray text or tags between cells, or a cell inside a cell, would
/// be re-parented by the browser once inserted into our own `<tr>`). The HTML fragment parser
/// drops a bare `<td>` outside a table, hence the scaffold.
pub(super) fn cells(html: &str, deadline: Instant) -> Result<String, RenderError> {
    let wrapped = format!("<table><tbody><tr>{html}</tr></tbody></table>");
    let out = clean(&CELLS, &wrapped, deadline)?;
    if flat_cells(&out) {
        Ok(out)
    } else {
        Err(RenderError::NotCells)
    }
}

/// Structural check on ammonia's *serialised* output (lower-case tag names, attribute values
/// always double-quoted with `"` escaped, `<` in text escaped): at the top level only `td`/`th`
/// elements and whitespace, no cell inside a cell, at least one cell.
fn flat_cells(s: &str) -> bool {
    const VOID: &[&str] = &["br", "hr", "img", "col"];
    let b = s.as_bytes();
    let (mut i, mut depth, mut cells) = (0usize, 0usize, 0usize);
    while i < b.len() {
        if b[i] != b'<' {
            if depth == 0 && !b[i].is_ascii_whitespace() {
                return false;
            }
            i += 1;
            continue;
        }
        let close = b.get(i + 1) == Some(&b'/');
        let start = i + 1 + usize::from(close);
        let mut j = start;
        while j < b.len() && b[j].is_ascii_alphanumeric() {
            j += 1;
        }
        let name = &s[start..j];
        let mut quoted = false;
        while j < b.len() && (quoted || b[j] != b'>') {
            quoted ^= b[j] == b'"';
            j += 1;
        }
        i = j + 1;
        let cell = name == "td" || name == "th";
        if close {
            depth = depth.saturating_sub(1);
        } else if VOID.contains(&name) {
            if depth == 0 {
                return false;
            }
        } else {
            if cell != (depth == 0) {
                return false;
            }
            cells += usize::from(cell);
            depth += 1;
        }
    }
    depth == 0 && cells > 0
}
