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

/// `context`: size (413, checked first: nothing else matters for a huge body) and depth.
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

/// `labels.submit` / `labels.decline` over the kind's defaults: trimmed, 1–40 characters.
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
            if v.is_empty() || chars(v) > MAX_LABEL_CHARS {
                errs.push(FieldError::new(
                    name,
                    format!("must be 1–{MAX_LABEL_CHARS} characters after trimming"),
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
    fn depth_counts_nesting_outside_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a": [1, {"b": "[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[", [[]]]"#), 3);
    }
}
