//! Slack notifications through an incoming webhook: a Block Kit message (header, message,
//! the context summarised as fields, a button to the review page), then a follow-up message
//! on the outcome. Agent text is escaped for mrkdwn (`&`, `<`, `>`), which also disarms
//! mention and link syntax such as `<!channel>` or `<https://evil|bank>`; every text is cut
//! to Slack's limits.

use serde_json::{json, Value};

use super::notice::{cut, Content};

/// Slack's limits (Block Kit reference).
const HEADER_CHARS: usize = 150;
const SECTION_CHARS: usize = 3000;
const FIELD_CHARS: usize = 2000;
const CONTEXT_CHARS: usize = 2000;
const BUTTON_CHARS: usize = 75;
const FALLBACK_CHARS: usize = 3000;

/// One character for a mrkdwn field: `&`, `<` and `>` as entities (Slack's own escaping rules).
fn escape_char(c: char, out: &mut String) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        c => out.push(c),
    }
}

/// Text for a mrkdwn field: `&`, `<` and `>` as entities.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        escape_char(c, &mut out);
    }
    out
}

/// Escaped, and cut (with `…`) so the escaped text fits `max` characters; no entity is split.
fn mrkdwn(s: &str, max: usize) -> String {
    let e = escape(s);
    if e.chars().count() <= max {
        return e;
    }
    let (mut out, mut n, mut piece) = (String::new(), 0, String::new());
    for c in s.chars() {
        piece.clear();
        escape_char(c, &mut piece);
        let len = piece.chars().count();
        if n + len + 1 > max {
            break;
        }
        out.push_str(&piece);
        n += len;
    }
    out.push('…');
    out
}

/// The message for `n`.
pub fn payload(n: &Content) -> Value {
    if n.is_invitation() {
        invitation(n)
    } else {
        followup(n)
    }
}

fn invitation(n: &Content) -> Value {
    let mut blocks = vec![
        json!({
            "type": "header",
            "text": {"type": "plain_text", "text": cut(&n.heading, HEADER_CHARS), "emoji": false}
        }),
        json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": mrkdwn(&n.message, SECTION_CHARS)}
        }),
    ];
    if !n.summary.is_empty() {
        let fields: Vec<Value> = n
            .summary
            .iter()
            .map(|(k, v)| {
                let key = mrkdwn(k, 200);
                let room = FIELD_CHARS - key.chars().count() - 3;
                json!({"type": "mrkdwn", "text": format!("*{key}*\n{}", mrkdwn(v, room))})
            })
            .collect();
        blocks.push(json!({"type": "section", "fields": fields}));
    }
    let more = if n.summary_more > 0 {
        format!(" · {} more on the page", n.summary_more)
    } else {
        String::new()
    };
    blocks.push(json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": mrkdwn(
            &format!("{} from {} · decide by {}{more}", n.page_label, n.requester, n.expires),
            CONTEXT_CHARS,
        )}]
    }));
    match (&n.link, n.panel_line()) {
        (Some(link), _) => blocks.push(json!({
            "type": "actions",
            "elements": [{
                "type": "button",
                "text": {"type": "plain_text", "text": cut("Open the request", BUTTON_CHARS)},
                "url": link,
                "style": "primary",
                "action_id": "open_review"
            }]
        })),
        // Named reviewers: their links are personal, sent to each by email, never to a channel.
        (None, Some(line)) => blocks.push(json!({
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": mrkdwn(
                &format!("{line} Each reviewer has their own link."), CONTEXT_CHARS
            )}]
        })),
        (None, None) => {}
    }
    json!({
        "text": mrkdwn(
            &format!("{} asks for your decision: {}", n.requester, n.heading),
            FALLBACK_CHARS,
        ),
        "blocks": blocks,
        "unfurl_links": false,
        "unfurl_media": false
    })
}

fn followup(n: &Content) -> Value {
    let line = format!("{} — {}", n.heading, n.outcome);
    json!({
        "text": mrkdwn(&line, FALLBACK_CHARS),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": format!(
                "*{}*\n{}", mrkdwn(&n.heading, 500), mrkdwn(&n.outcome, 500)
            )}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": mrkdwn(
                &format!("{} from {}", n.page_label, n.requester), CONTEXT_CHARS
            )}]}
        ],
        "unfurl_links": false,
        "unfurl_media": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_disarms_mentions_and_links() {
        assert_eq!(
            escape("<!channel> & <https://x|y>"),
            "&lt;!channel&gt; &amp; &lt;https://x|y&gt;"
        );
        let long = "<".repeat(5000);
        let m = mrkdwn(&long, 3000);
        assert_eq!(
            m.chars().count(),
            749 * 4 + 1,
            "as many whole entities as fit, then …"
        );
        assert!(m.ends_with("&lt;…"), "no entity is split");
        assert_eq!(mrkdwn("a<b", 10), "a&lt;b");
        assert_eq!(mrkdwn("abcdef", 4), "abc…");
    }
}
