//! The field rules every kind shares (SPEC §3 common fields) and the limits behind them. Each
//! check appends to a list of [`FieldError`]s so a caller sees every problem at once.

use serde_json::value::RawValue;

use super::Labels;
use crate::error::{Error, FieldError};

/// Largest serialized `context`.
pub const MAX_CONTEXT_BYTES: usize = 64 * 1024;
/// Deepest nesting of arrays/objects accepted in `context`.
pub const MAX_CONTEXT_DEPTH: usize = 64;
/// Largest `message`, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4000;
/// Largest `title`, in characters.
pub const MAX_TITLE_CHARS: usize = 120;
/// Largest button label, in characters (after trimming).
pub const MAX_LABEL_CHARS: usize = 40;
/// Largest `idempotencyKey`, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Largest reviewer comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2000;
/// Default deadline when `expiresInSeconds` is absent.
pub const DEFAULT_EXPIRES_SECS: u64 = 3600;
/// Smallest `expiresInSeconds` (SPEC §3).
pub const MIN_EXPIRES_SECS: u64 = 10;

/// Largest stored request (the validated spec as JSON: message, context, options with their
/// extra keys, schema, …). One tenant must not be able to fill the shared Redis with a few
/// requests; past this a create is 413.
pub const MAX_RECORD_BYTES: usize = 256 * 1024;

/// Agent text as the reviewer must see it: every invisible or direction-changing character
/// (see [`is_hidden`]) replaced by a visible `⟨U+XXXX⟩`, so `"amount_eur\u{202E}": 9000`
/// cannot show as `"amount_eur,0009 :"` and nothing can hide in plain sight. Used by the
/// review page and the notifications alike.
pub fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_hidden) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_hidden(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Characters that change how text around them is shown without being visible themselves:
/// bidirectional controls (which can reorder `9000` into `0009` on screen), zero-width and
/// other invisible characters, and C0/C1 controls other than tab and line breaks. The review
/// page shows each one as `⟨U+XXXX⟩`; button labels may not contain them.
pub fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{00AD}' | '\u{034F}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{E0000}'..='\u{E007F}')
        || (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// Words a submit button may not say (they mean "no"), matched as whole words,
/// case-insensitively, and against the label with all whitespace removed.
pub const DECLINE_WORDS: &[&str] = &[
    "decline",
    "declined",
    "reject",
    "deny",
    "refuse",
    "no",
    "cancel",
    "disapprove",
    "abort",
];
/// Words a decline button may not say (they mean "yes").
pub const APPROVE_WORDS: &[&str] = &[
    "approve", "approved", "accept", "confirm", "yes", "allow", "agree", "submit", "ok",
];

/// The first word of `words` that `label` uses, if any (see [`DECLINE_WORDS`]).
pub fn uses_word(label: &str, words: &[&'static str]) -> Option<&'static str> {
    let lower = label.to_lowercase();
    let squeezed: String = lower.chars().filter(|c| !c.is_whitespace()).collect();
    let tokens: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    words
        .iter()
        .find(|w| tokens.contains(w) || squeezed == **w)
        .copied()
}

/// Longest webhook URL.
pub const MAX_URL_CHARS: usize = 2000;

/// What is wrong with a webhook URL, if anything: it must be an absolute `http`/`https` URL
/// with a host, without credentials or a fragment, at most [`MAX_URL_CHARS`]. (Where it points
/// is checked when connecting: see `delivery::guard`.)
pub fn webhook_url_problem(url: &str) -> Option<String> {
    if url.len() > MAX_URL_CHARS {
        return Some(format!("must be at most {MAX_URL_CHARS} characters"));
    }
    let Ok(uri) = url.parse::<http::Uri>() else {
        return Some("must be an absolute http or https URL".into());
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Some("must be an absolute http or https URL".into());
    }
    match uri.authority() {
        None => Some("must name a host".into()),
        Some(a) if a.as_str().contains('@') => Some("must not carry credentials".into()),
        Some(a) if a.host().is_empty() => Some("must name a host".into()),
        Some(_) if url.contains('#') => Some("must not have a fragment".into()),
        Some(_) if url.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Some("must not contain spaces or control characters".into())
        }
        Some(_) => None,
    }
}

/// Most email recipients of one request.
pub const MAX_NOTIFY_EMAILS: usize = 20;

/// Why `addr` is not an email address we send to (an `addr-spec`, ASCII, ≤ 254 characters),
/// if it is not.
pub fn email_problem(addr: &str) -> Option<String> {
    if addr.len() > 254 {
        return Some("must be at most 254 characters".into());
    }
    if !addr.is_ascii() || addr.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("must be a plain ASCII address like name@example.com".into());
    }
    match addr.parse::<lettre::Address>() {
        Ok(a) if a.domain().contains('.') || a.domain() == "localhost" => None,
        Ok(_) => Some("must have a domain with a dot (name@example.com)".into()),
        Err(_) => Some("is not an email address (name@example.com)".into()),
    }
}

/// Whether `addr` (a valid address) is at one of `domains` (lowercase).
pub fn email_in(addr: &str, domains: &[String]) -> bool {
    addr.rsplit_once('@')
        .is_some_and(|(_, d)| domains.iter().any(|x| x.eq_ignore_ascii_case(d)))
}

/// Most named reviewers of one request.
pub const MAX_REVIEWERS: usize = 20;

/// One reviewer as sent: id, name, email.
pub type ReviewerFields<'a> = (&'a str, Option<&'a str>, Option<&'a str>);

/// Reviewers as `(id, name, email)` (1–20, ids `[A-Za-z0-9][A-Za-z0-9._@-]{0,63}`, unique;
/// names 1–80 visible characters; valid emails) and the quorum (1..=reviewers, default 1;
/// only with reviewers). Returns the quorum to use.
pub fn check_panel(
    reviewers: Option<&[ReviewerFields<'_>]>,
    quorum: Option<i64>,
    errs: &mut Vec<FieldError>,
) -> u32 {
    let Some(list) = reviewers else {
        if quorum.is_some() {
            errs.push(FieldError::new("quorum", "needs reviewers"));
        }
        return 1;
    };
    if list.is_empty() || list.len() > MAX_REVIEWERS {
        errs.push(FieldError::new(
            "reviewers",
            format!("must list 1–{MAX_REVIEWERS} reviewers"),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut mailboxes = std::collections::HashSet::new();
    for (i, (id, name, email)) in list.iter().enumerate() {
        let id_ok = !id.is_empty()
            && id.len() <= 64
            && id.starts_with(|c: char| c.is_ascii_alphanumeric())
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
        if !id_ok {
            errs.push(FieldError::new(
                format!("reviewers[{i}].id"),
                "must be 1–64 letters, digits, '.', '_', '@' or '-' (not first)",
            ));
        } else if !seen.insert(*id) {
            errs.push(FieldError::new(
                format!("reviewers[{i}].id"),
                "is listed twice",
            ));
        }
        if let Some(n) = name {
            let n = n.trim();
            if n.is_empty() || chars(n) > 80 || n.chars().any(|c| c.is_control() || is_hidden(c)) {
                errs.push(FieldError::new(
                    format!("reviewers[{i}].name"),
                    "must be 1–80 visible characters",
                ));
            }
        }
        if let Some(p) = email.and_then(email_problem) {
            errs.push(FieldError::new(format!("reviewers[{i}].email"), p));
        } else if email.is_some_and(|e| !mailboxes.insert(e.to_ascii_lowercase())) {
            // Each link is personal: one mailbox cannot receive two reviewers' links.
            errs.push(FieldError::new(
                format!("reviewers[{i}].email"),
                "is another reviewer's address too",
            ));
        }
    }
    match quorum {
        None => 1,
        Some(q) if q >= 1 && (q as usize) <= list.len().max(1) => q as u32,
        Some(_) => {
            errs.push(FieldError::new(
                "quorum",
                format!("must be 1–{} (the number of reviewers)", list.len()),
            ));
            1
        }
    }
}

/// `notify`: up to 20 distinct valid addresses, an http(s) Slack URL.
pub fn check_notify(email: Option<&[String]>, slack: Option<&str>, errs: &mut Vec<FieldError>) {
    if let Some(list) = email {
        if list.len() > MAX_NOTIFY_EMAILS {
            errs.push(FieldError::new(
                "notify.email",
                format!("must list at most {MAX_NOTIFY_EMAILS} addresses"),
            ));
        } else {
            let mut seen = std::collections::HashSet::new();
            for (i, a) in list.iter().enumerate() {
                let field = format!("notify.email[{i}]");
                if let Some(p) = email_problem(a) {
                    errs.push(FieldError::new(field, p));
                } else if !seen.insert(a.to_ascii_lowercase()) {
                    errs.push(FieldError::new(field, "is listed twice"));
                }
            }
        }
    }
    if let Some(p) = slack.and_then(webhook_url_problem) {
        errs.push(FieldError::new("notify.slackWebhookUrl", p));
    }
}

/// Number of characters (not bytes).
pub fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Nesting depth of a syntactically valid JSON text (strings are skipped correctly).
pub fn json_depth(raw: &str) -> usize {
    let (mut depth, mut max, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for b in raw.bytes() {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `context`: size (413, checked first: nothing else matters for a huge body), depth, and
/// that every client can read it back: numbers within the range of a double and no lone
/// UTF-16 surrogates (`1e999999`, a 60 000-digit integer or `"\ud800"` are valid JSON
/// syntax but break ordinary JSON parsers, ours included when MCP returns it).
pub fn check_context(ctx: Option<&RawValue>, errs: &mut Vec<FieldError>) -> Result<(), Error> {
    let Some(ctx) = ctx else { return Ok(()) };
    if ctx.get().len() > MAX_CONTEXT_BYTES {
        return Err(Error::PayloadTooLarge(format!(
            "context is {} bytes serialized; the limit is {MAX_CONTEXT_BYTES}",
            ctx.get().len()
        )));
    }
    if json_depth(ctx.get()) > MAX_CONTEXT_DEPTH {
        errs.push(FieldError::new(
            "context",
            format!("nests deeper than {MAX_CONTEXT_DEPTH} levels"),
        ));
    } else if let Err(e) = serde_json::from_str::<serde_json::Value>(ctx.get()) {
        errs.push(FieldError::new(
            "context",
            format!("must be JSON any client can read back ({e})"),
        ));
    }
    Ok(())
}

/// `message`: required, not blank, at most [`MAX_MESSAGE_CHARS`].
pub fn check_message(message: Option<String>, errs: &mut Vec<FieldError>) -> String {
    match message {
        None => {
            errs.push(FieldError::new("message", "is required"));
            String::new()
        }
        Some(m) => {
            if m.trim().is_empty() {
                errs.push(FieldError::new("message", "must not be empty"));
            } else if chars(&m) > MAX_MESSAGE_CHARS {
                errs.push(FieldError::new(
                    "message",
                    format!("must be at most {MAX_MESSAGE_CHARS} characters"),
                ));
            }
            m
        }
    }
}

/// `title`: 1–[`MAX_TITLE_CHARS`] characters, trimmed.
pub fn check_title(title: Option<String>, errs: &mut Vec<FieldError>) -> Option<String> {
    let t = title?;
    if t.trim().is_empty() || chars(&t) > MAX_TITLE_CHARS {
        errs.push(FieldError::new(
            "title",
            format!("must be 1–{MAX_TITLE_CHARS} characters"),
        ));
    }
    Some(t.trim().to_string())
}

/// `expiresInSeconds` within `[min, max]`; the default is [`DEFAULT_EXPIRES_SECS`] (or `max`).
pub fn check_expires(secs: Option<i64>, min: u64, max: u64, errs: &mut Vec<FieldError>) -> u64 {
    match secs {
        None => DEFAULT_EXPIRES_SECS.min(max),
        Some(s) if s >= min as i64 && s as u64 <= max => s as u64,
        Some(_) => {
            errs.push(FieldError::new(
                "expiresInSeconds",
                format!("must be between {min} and {max}"),
            ));
            0
        }
    }
}

/// `labels.submit` / `labels.decline` over the kind's defaults: trimmed, 1–40 characters, no
/// hidden characters, and neither saying the other button's words (a "Decline" label on the
/// button that records `submitted` would make the reviewer approve what they meant to refuse).
pub fn check_labels(
    submit: Option<String>,
    decline: Option<String>,
    defaults: Labels,
    errs: &mut Vec<FieldError>,
) -> Labels {
    let mut labels = defaults;
    for (name, value, slot) in [
        ("labels.submit", submit, &mut labels.submit),
        ("labels.decline", decline, &mut labels.decline),
    ] {
        if let Some(v) = value {
            let v = v.trim();
            let opposite = if name == "labels.submit" {
                DECLINE_WORDS
            } else {
                APPROVE_WORDS
            };
            if v.is_empty() || chars(v) > MAX_LABEL_CHARS {
                errs.push(FieldError::new(
                    name,
                    format!("must be 1–{MAX_LABEL_CHARS} characters after trimming"),
                ));
            } else if v.chars().any(is_hidden) {
                errs.push(FieldError::new(
                    name,
                    "must not contain invisible or direction-changing characters",
                ));
            } else if let Some(word) = uses_word(v, opposite) {
                errs.push(FieldError::new(
                    name,
                    format!("must not say {word:?}: that is what the other button does"),
                ));
            } else {
                *slot = v.to_string();
            }
        }
    }
    labels
}

/// `idempotencyKey`: 1–[`MAX_IDEMPOTENCY_KEY_CHARS`] characters.
pub fn check_idempotency_key(key: Option<&str>, errs: &mut Vec<FieldError>) {
    if let Some(k) = key {
        if k.is_empty() || chars(k) > MAX_IDEMPOTENCY_KEY_CHARS {
            errs.push(FieldError::new(
                "idempotencyKey",
                format!("must be 1–{MAX_IDEMPOTENCY_KEY_CHARS} characters"),
            ));
        }
    }
}

/// A reviewer comment: at most [`MAX_COMMENT_CHARS`]; blank means none.
pub fn check_comment(comment: Option<String>, errs: &mut Vec<FieldError>) -> Option<String> {
    match comment {
        Some(c) if chars(&c) > MAX_COMMENT_CHARS => {
            errs.push(FieldError::new(
                "comment",
                format!("must be at most {MAX_COMMENT_CHARS} characters"),
            ));
            None
        }
        Some(c) if c.trim().is_empty() => None,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_words_are_matched_as_words() {
        assert_eq!(uses_word("Decline", DECLINE_WORDS), Some("decline"));
        assert_eq!(
            uses_word("  D e c l i n e ", DECLINE_WORDS),
            Some("decline")
        );
        assert_eq!(uses_word("No, thanks", DECLINE_WORDS), Some("no"));
        assert_eq!(uses_word("Ship it", DECLINE_WORDS), None);
        assert_eq!(
            uses_word("Nothing to add", DECLINE_WORDS),
            None,
            "not a word of it"
        );
        assert_eq!(uses_word("APPROVE", APPROVE_WORDS), Some("approve"));
        assert_eq!(uses_word("None of these", APPROVE_WORDS), None);
        assert_eq!(
            uses_word("Disapprove", APPROVE_WORDS),
            None,
            "disapprove is not approve"
        );
    }

    #[test]
    fn webhook_urls() {
        for ok in ["https://hooks.example.com/x?y=1", "http://10.0.0.1:8080/h"] {
            assert_eq!(webhook_url_problem(ok), None, "{ok}");
        }
        for bad in [
            "ftp://x/y",
            "https://",
            "/relative",
            "https://user:pw@host/x",
            "https://host/x#frag",
            "javascript:alert(1)",
        ] {
            assert!(webhook_url_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn hidden_characters() {
        for c in [
            '\u{202E}',
            '\u{200B}',
            '\u{2066}',
            '\u{FEFF}',
            '\u{0007}',
            '\u{E0041}',
        ] {
            assert!(is_hidden(c), "{:?}", c);
        }
        for c in ['a', ' ', '\n', '\t', 'é', '€', '😀'] {
            assert!(!is_hidden(c), "{:?}", c);
        }
    }

    #[test]
    fn context_must_be_readable_back() {
        let check = |raw: &str| {
            let raw = serde_json::value::RawValue::from_string(raw.to_string()).unwrap();
            let mut errs = Vec::new();
            check_context(Some(&raw), &mut errs).unwrap();
            errs
        };
        assert!(check(r#"{"a": 2.50, "b": 1e2, "c": "\u00e9"}"#).is_empty());
        for bad in ["1e999999", r#""\ud800""#, &"9".repeat(60_000)] {
            assert_eq!(check(bad).len(), 1, "{}", &bad[..bad.len().min(20)]);
        }
    }

    #[test]
    fn depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a": [1, {"b": "[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[", [[]]]"#), 3);
    }
}
