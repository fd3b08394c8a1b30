//! What a notification says, built once per attempt from the record and shared by the email
//! and the Slack message: the heading, the message, who asks, the deadline, the link (rebuilt
//! from the record's token salt, never stored) and, for a follow-up, what became of it.
//!
//! Agent text is made visible here ([`visible`]: no hidden or direction-changing character
//! reaches a reader); each medium then escapes it its own way (askama for HTML, `&<>` for
//! Slack).

use serde_json::Value;

use crate::{
    config::Config,
    kinds::Spec,
    model::{human_time, rules::visible, ElicitationId},
    store::{Delivery, Notice},
    token,
};

/// Longest value shown per context entry in a summary.
const SUMMARY_VALUE_CHARS: usize = 200;
/// Most context entries in a summary.
const SUMMARY_ENTRIES: usize = 10;

/// The content of one notification.
#[derive(Debug, Clone)]
pub struct Content {
    pub elicitation_id: String,
    /// created, submitted, declined, canceled or expired.
    pub event: String,
    /// The page heading (title, else the kind's default), made visible.
    pub heading: String,
    /// "Approval request", "Selection request", …
    pub page_label: &'static str,
    pub message: String,
    /// The tenant's display name.
    pub requester: String,
    /// `2026-12-01 14:05 UTC`.
    pub expires: String,
    /// The review page (none in a message to several people about a request with named
    /// reviewers: their links are personal; see [`Content::for_recipient`]).
    pub link: Option<String>,
    /// Named reviewers: (lowercased email, personal link, name) of each with an email.
    pub reviewer_links: Vec<(String, String, String)>,
    /// Named reviewers: how many, and how many submits are needed.
    pub panel_size: Option<(usize, u32)>,
    /// Top-level entries of `context` (object: key and compact value; else one `context`
    /// entry), each made visible and cut to 200 characters; at most 10.
    pub summary: Vec<(String, String)>,
    /// More entries than shown.
    pub summary_more: usize,
    /// The follow-up's sentence (empty for `created`).
    pub outcome: String,
    /// The request is no longer open (decided, withdrawn or past its deadline): an invitation
    /// still waiting to be sent is dropped.
    pub closed: bool,
}

impl Content {
    /// The notification of `d` about the record `n`.
    pub fn new(config: &Config, d: &Delivery, n: &Notice) -> Result<Self, String> {
        let spec: Spec = serde_json::from_str(&n.spec_json).map_err(|e| e.to_string())?;
        let id = ElicitationId::parse(&d.elicitation_id)
            .ok_or_else(|| format!("bad elicitation id {:?}", d.elicitation_id))?;
        let (secret, salt) = (&config.secret, &n.token_salt);
        // Links in the form the record was made with (its stored token hashes tell).
        let token = token::rebuild(secret, salt, id, None, &n.token_hash);
        let link = |t: &str| format!("{}/review/{t}", config.public_url);
        let reviewer_links = n
            .panel
            .iter()
            .flat_map(|p| &p.reviewers)
            .filter_map(|r| {
                let t = token::rebuild(secret, salt, id, Some(&r.id), &r.token_hash);
                let name = visible(r.name.as_deref().unwrap_or(&r.id)).into_owned();
                Some((r.email.as_ref()?.to_ascii_lowercase(), link(&t), name))
            })
            .collect();
        let (summary, summary_more) = summarize(spec.context.as_deref().map(|c| c.get()));
        let outcome = match d.event.as_str() {
            "submitted" => format!("A reviewer chose “{}”.", visible(&spec.labels.submit)),
            "declined" => format!("A reviewer chose “{}”.", visible(&spec.labels.decline)),
            "canceled" => {
                "The requester withdrew this request: there is nothing left to decide.".to_string()
            }
            "expired" => "This request expired without a decision.".to_string(),
            _ => String::new(),
        };
        Ok(Content {
            elicitation_id: d.elicitation_id.clone(),
            event: d.event.clone(),
            heading: visible(&spec.heading()).into_owned(),
            page_label: spec.page_label(),
            message: visible(&spec.message).into_owned(),
            requester: visible(config.notify.name_of(&d.tenant)).into_owned(),
            expires: human_time(n.expires_ms),
            link: n.panel.is_none().then(|| link(&token)),
            reviewer_links,
            panel_size: n.panel.as_ref().map(|p| (p.reviewers.len(), p.quorum)),
            summary,
            summary_more,
            outcome,
            closed: n.status != "pending" || crate::model::local_now_ms() >= n.expires_ms,
        })
    }

    /// The message for one email recipient: with named reviewers, that reviewer's own link
    /// (and their name).
    pub fn for_recipient(&self, to: &str) -> (Self, Option<String>) {
        let mut c = self.clone();
        let mut name = None;
        if let Some((_, link, n)) = self
            .reviewer_links
            .iter()
            .find(|(e, _, _)| *e == to.to_ascii_lowercase())
        {
            c.link = Some(link.clone());
            name = Some(n.clone());
        }
        (c, name)
    }

    /// How the named reviewers decide, if there are any.
    pub fn panel_line(&self) -> Option<String> {
        let (n, q) = self.panel_size?;
        Some(if q > 1 {
            format!("{q} of {n} reviewers must approve; any one of them can decline.")
        } else if n > 1 {
            format!("Any one of {n} reviewers can decide.")
        } else {
            "You are the reviewer.".to_string()
        })
    }

    /// The invitation (with the link), not a follow-up.
    pub fn is_invitation(&self) -> bool {
        self.event == "created"
    }

    /// The subject line of the thread.
    pub fn subject(&self) -> String {
        format!("Decision needed: {}", cut(&self.heading, 120))
    }
}

/// `s` cut to `max` characters, with `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The context summary and how many entries were left out.
fn summarize(raw: Option<&str>) -> (Vec<(String, String)>, usize) {
    let Some(value) = raw.and_then(|r| serde_json::from_str::<Value>(r).ok()) else {
        return (Vec::new(), 0);
    };
    let show = |v: &Value| {
        let s = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        cut(&visible(&s), SUMMARY_VALUE_CHARS)
    };
    match &value {
        Value::Object(map) => {
            let entries = map
                .iter()
                .take(SUMMARY_ENTRIES)
                .map(|(k, v)| (cut(&visible(k), 80), show(v)))
                .collect();
            (entries, map.len().saturating_sub(SUMMARY_ENTRIES))
        }
        Value::Null => (Vec::new(), 0),
        other => (vec![("context".to_string(), show(other))], 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_bounded_and_visible() {
        let (s, more) = summarize(Some(r#"{"a":1,"b":"x\u202Ey","c":{"d":[1,2]}}"#));
        assert_eq!(more, 0);
        assert_eq!(s[0], ("a".into(), "1".into()));
        assert_eq!(s[1], ("b".into(), "x⟨U+202E⟩y".into()));
        assert_eq!(s[2], ("c".into(), r#"{"d":[1,2]}"#.into()));
        let big: serde_json::Map<String, Value> = (0..15)
            .map(|i| (format!("k{i:02}"), Value::String("v".repeat(500))))
            .collect();
        let (s, more) = summarize(Some(&Value::Object(big).to_string()));
        assert_eq!((s.len(), more), (10, 5));
        assert_eq!(s[0].1.chars().count(), 200);
        assert!(s[0].1.ends_with('…'));
        assert_eq!(
            summarize(Some("[1,2]")).0,
            vec![("context".into(), "[1,2]".into())]
        );
        assert!(summarize(None).0.is_empty());
    }
}
