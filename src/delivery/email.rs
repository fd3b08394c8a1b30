//! Email notifications over SMTP (lettre): one message per recipient, plain text and HTML from
//! askama templates (the HTML escaped like the review page), threaded by `Message-ID` —
//! the invitation carries the link, the follow-up (decided, canceled, expired) answers it with
//! `In-Reply-To`/`References`. Transactional: `Auto-Submitted: auto-generated`, no
//! `List-Unsubscribe`.

use std::time::Duration;

use askama::Template;
use lettre::{
    message::{
        header::{HeaderName, HeaderValue},
        Mailbox, MultiPart,
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};

use super::notice::Content;
use crate::token::sha256_hex;

/// The invitation, HTML part.
#[derive(Template)]
#[template(path = "email/invite.html")]
struct InviteHtml<'a> {
    n: &'a Content,
}

/// The invitation, text part.
#[derive(Template)]
#[template(path = "email/invite.txt", escape = "none")]
struct InviteText<'a> {
    n: &'a Content,
}

/// The follow-up, HTML part.
#[derive(Template)]
#[template(path = "email/followup.html")]
struct FollowupHtml<'a> {
    n: &'a Content,
}

/// The follow-up, text part.
#[derive(Template)]
#[template(path = "email/followup.txt", escape = "none")]
struct FollowupText<'a> {
    n: &'a Content,
}

/// How sending to one recipient went.
pub enum Sent {
    Accepted,
    /// A permanent refusal (5xx: unknown user, authentication failed, …): not retried.
    Refused(String),
    /// Worth another try (connection refused, timeout, 4xx).
    Transient(String),
}

/// The SMTP sender of one replica (a pooled transport).
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// Right-hand side of our `Message-ID`s: the sender's domain.
    domain: String,
}

impl Mailer {
    /// A sender for `url` (validated at startup) as `from`.
    pub fn new(url: &str, from: Mailbox, timeout: Duration) -> Result<Self, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|_| "ELICITD_SMTP_URL is not a valid SMTP URL".to_string())?
            .timeout(Some(timeout))
            .build();
        let domain = from.email.domain().to_string();
        Ok(Mailer {
            transport,
            from,
            domain,
        })
    }

    /// The `Message-ID` of `event`'s message to `to` about `id`: stable (a retry after a lost
    /// answer carries the same id, so clients can drop the duplicate) and unique per recipient.
    pub fn message_id(&self, id: &str, event: &str, to: &str) -> String {
        let who = &sha256_hex(to.to_ascii_lowercase().as_bytes())[..16];
        format!("<elicitd.{id}.{event}.{who}@{}>", self.domain)
    }

    /// The message of `n` to `to`.
    pub fn compose(&self, n: &Content, to: &str) -> Result<Message, String> {
        let to: Mailbox = to.parse().map_err(|e| format!("recipient: {e}"))?;
        let addr = to.email.to_string();
        let (subject, text, html) = if n.is_invitation() {
            (
                n.subject(),
                InviteText { n }.render(),
                InviteHtml { n }.render(),
            )
        } else {
            (
                format!("Re: {}", n.subject()),
                FollowupText { n }.render(),
                FollowupHtml { n }.render(),
            )
        };
        let (text, html) = (
            text.map_err(|e| e.to_string())?,
            html.map_err(|e| e.to_string())?,
        );
        let mut b = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .date_now()
            .message_id(Some(self.message_id(&n.elicitation_id, &n.event, &addr)))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("Auto-Submitted"),
                "auto-generated".into(),
            ));
        if !n.is_invitation() {
            let first = self.message_id(&n.elicitation_id, "created", &addr);
            b = b.in_reply_to(first.clone()).references(first);
        }
        b.multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| e.to_string())
    }

    /// Send one message.
    pub async fn send(&self, msg: Message) -> Sent {
        match self.transport.send(msg).await {
            Ok(_) => Sent::Accepted,
            Err(e) if e.is_permanent() => Sent::Refused(describe(&e)),
            Err(e) => Sent::Transient(describe(&e)),
        }
    }
}

/// An SMTP error as one line (lettre's words and the server's reply; the URL and its
/// credentials are not part of it).
fn describe(e: &lettre::transport::smtp::Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        let text = err.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = err.source();
    }
    s.chars().take(300).collect()
}
