//! Text the server formats for the page: times, the countdown, the pretty-printed `context`,
//! messages as sentences, and agent text with its hidden characters made visible. Pure
//! functions; the output is escaped by the templates.

// Shared with the notifications (emails and Slack messages show agent text the same way).
pub use crate::model::{human_time, rules::visible};

/// `2 d 3 h`, `3 h 12 min`, `4 min 05 s`, `9 s` (the script uses the same format).
pub fn remaining_text(ms: i64) -> String {
    let s = (ms.max(0) + 999) / 1000;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    match () {
        _ if d > 0 => format!("{d} d {h} h"),
        _ if h > 0 => format!("{h} h {m} min"),
        _ if m > 0 => format!("{m} min {sec:02} s"),
        _ => format!("{sec} s"),
    }
}

/// Re-indent a valid JSON text two spaces per level, copying every string and number token
/// exactly as sent (so `1.50`, `2e3` and 30-digit integers are shown as the agent wrote them).
pub fn pretty_json(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() * 2);
    let mut depth = 0usize;
    let (mut in_str, mut escaped) = (false, false);
    let mut chars = raw.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    while let Some(ch) = chars.next() {
        if in_str {
            out.push(ch);
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => {
                in_str = true;
                out.push(ch);
            }
            '{' | '[' => {
                out.push(ch);
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                if let Some(close) = chars.next_if(|c| matches!(c, '}' | ']')) {
                    out.push(close);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(ch);
            }
            ',' => {
                out.push(ch);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// A validation message as a sentence next to a field: "required" → "This field is
/// required.", "is …" → "This field is …", otherwise capitalised, with a full stop.
pub fn sentence(message: &str) -> String {
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
    fn pretty_json_keeps_tokens_verbatim() {
        let raw = r#"{"z":1,"a":[1.50, 2e3,{"k":null}],"e":{},"l":[ ],"s":"a,b:{\"}","n":123456789012345678901234567890}"#;
        let want = "{\n  \"z\": 1,\n  \"a\": [\n    1.50,\n    2e3,\n    {\n      \"k\": null\n    }\n  ],\n  \"e\": {},\n  \"l\": [],\n  \"s\": \"a,b:{\\\"}\",\n  \"n\": 123456789012345678901234567890\n}";
        assert_eq!(pretty_json(raw), want);
        assert_eq!(pretty_json("\"<b>\""), "\"<b>\"");
        assert_eq!(pretty_json("7"), "7");
    }

    #[test]
    fn times() {
        assert_eq!(remaining_text(0), "0 s");
        assert_eq!(remaining_text(9_001), "10 s");
        assert_eq!(remaining_text(245_000), "4 min 05 s");
        assert_eq!(remaining_text(3_600_000), "1 h 0 min");
        assert_eq!(remaining_text(2 * 86_400_000 + 3 * 3_600_000), "2 d 3 h");
        assert_eq!(human_time(0), "1970-01-01 00:00 UTC");
    }

    #[test]
    fn hidden_characters_are_shown() {
        assert_eq!(visible("plain"), "plain");
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            visible("\"amount_eur\u{202E}\": 9000"),
            "\"amount_eur⟨U+202E⟩\": 9000"
        );
        assert_eq!(visible("a\u{200B}b\u{2066}c"), "a⟨U+200B⟩b⟨U+2066⟩c");
        assert_eq!(visible("line\nbreak\ttab"), "line\nbreak\ttab");
    }

    #[test]
    fn messages_read_as_sentences() {
        assert_eq!(sentence("required"), "This field is required.");
        assert_eq!(
            sentence("is required and cannot be dropped"),
            "This field is required and cannot be dropped."
        );
        assert_eq!(sentence("choose at most 2"), "Choose at most 2.");
        assert_eq!(
            sentence("the form did not say which button was pressed"),
            "The form did not say which button was pressed."
        );
    }
}
