//! Notifications: the reviewer is told by email (a real SMTP server, `aiosmtpd`, parsed with a
//! real MIME parser) and in Slack (a local receiver standing in for the incoming webhook,
//! checked against Block Kit's shape and limits); the link opens the page and deciding through
//! it works; follow-ups thread; agent text is escaped for each medium; a mail server that is
//! down is retried until it is back; wrong credentials fail the delivery, never the request.

use std::time::Duration;

use serde_json::{json, Value};

use crate::{
    harness::{receiver::Receiver, smtp::SmtpSink, test_config, App, Fixture, StoreKind, ACME_KEY},
    review_page::{get_page, submit},
};

const FROM: &str = "Approvals <approvals@elicitd.test>";

/// Notifications on: `smtp` as the SMTP URL (if any), loopback targets allowed, a fast retry
/// schedule, tenant acme named "Acme <Billing> & Co" (hostile on purpose), then `more`.
fn notify(
    c: &mut elicitd::config::Config,
    smtp: Option<&str>,
    schedule: &str,
    more: impl FnOnce(&mut elicitd::config::Cli),
) {
    let mut cli = <elicitd::config::Cli as clap::Parser>::parse_from(["elicitd"]);
    cli.smtp_url = smtp.map(str::to_string);
    cli.smtp_from = Some(FROM.into());
    cli.tenant_names = Some("acme=Acme <Billing> & Co".into());
    cli.webhook_allow_private = true;
    cli.webhook_retry_schedule_secs = schedule.into();
    cli.webhook_timeout_secs = 3;
    cli.webhook_lease_secs = 5;
    cli.api_keys = Some(format!("acme:{ACME_KEY}"));
    more(&mut cli);
    let parsed = elicitd::config::Config::from_cli(cli).unwrap();
    c.notify = parsed.notify;
    c.webhooks = parsed.webhooks;
}

fn of<'a>(d: &'a [Value], channel: &str, event: &str) -> Option<&'a Value> {
    d.iter()
        .find(|x| x["channel"] == channel && x["type"] == format!("elicitation.{event}"))
}

const TITLE: &str = "Pay <b>now</b> & <script>alert(1)</script>";
const MESSAGE: &str = "Approve <img src=x onerror=alert(1)> for <!channel> amount\u{202E}0009";

crate::every_store!(
    email_carries_the_link_and_the_follow_up_threads,
    slack_gets_block_kit_with_a_button_and_a_follow_up
);
crate::on_stores!(
    on_memory_smtp,
    Memory,
    smtp_down_is_retried_until_it_is_back,
    refusals_fail_the_delivery_never_the_request
);
crate::on_stores!(
    on_redis_smtp,
    Redis,
    smtp_down_is_retried_until_it_is_back,
    refusals_fail_the_delivery_never_the_request
);

async fn email_carries_the_link_and_the_follow_up_threads(kind: StoreKind) {
    let Some(sink) = SmtpSink::start(None) else {
        return;
    };
    let url = sink.url(None);
    let f = Fixture::own(kind, 2, |c| notify(c, Some(&url), "0,1,1", |_| {})).await;
    let (a, b) = (f.acme(), f.other());
    let c = a
        .create(
            "approval",
            json!({
                "title": TITLE, "message": MESSAGE,
                "context": {"amount": 9000, "payee": "<b>ACME</b>"},
                "labels": {"submit": "Pay it"},
                "notify": {"email": ["alice@example.com", "Bob@Example.com"]}
            }),
        )
        .await;
    let mails = sink.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(mails.len(), 2, "one message per recipient");
    let mut ids = Vec::new();
    let mut link = String::new();
    for (m, to) in mails.iter().zip(["alice@example.com", "Bob@Example.com"]) {
        let p = m.parsed();
        assert_eq!(
            m.rcpt_tos,
            vec![to.to_string()],
            "one recipient per message"
        );
        assert_eq!(
            p.from().unwrap().first().unwrap().address(),
            Some("approvals@elicitd.test")
        );
        assert_eq!(p.to().unwrap().first().unwrap().address(), Some(to));
        assert_eq!(
            p.subject(),
            Some(format!("Decision needed: {TITLE}").as_str())
        );
        assert_eq!(
            m.header("Auto-Submitted").as_deref(),
            Some("auto-generated")
        );
        assert!(m.header("List-Unsubscribe").is_none());
        let mid = p.message_id().unwrap().to_string();
        assert!(
            mid.starts_with(&format!("elicitd.{}.created.", c.id))
                && mid.ends_with("@elicitd.test"),
            "{mid}"
        );
        ids.push(mid);
        // multipart/alternative: the same content as text and as HTML.
        let text = p.body_text(0).unwrap().to_string();
        let html = p.body_html(0).unwrap().to_string();
        use mail_parser::MimeHeaders;
        assert_eq!(p.content_type().unwrap().subtype(), Some("alternative"));
        assert!(
            text.contains("Acme <Billing> & Co asks for your decision."),
            "{text}"
        );
        assert!(text.contains(TITLE), "{text}");
        assert!(
            text.contains("amount⟨U+202E⟩0009"),
            "hidden characters made visible: {text}"
        );
        assert!(text.contains("payee: <b>ACME</b>"), "{text}");
        assert!(text.contains(" UTC"), "expiry in UTC: {text}");
        for raw in ["<script>", "<img src=x", "<b>ACME", "<Billing>"] {
            assert!(!html.contains(raw), "{raw} unescaped in the HTML: {html}");
        }
        // Parsed as a mail client would: agent text is text, not markup.
        let doc = scraper::Html::parse_document(&html);
        let sel = |css: &str| scraper::Selector::parse(css).unwrap();
        let texts = |css: &str| -> Vec<String> {
            doc.select(&sel(css)).map(|e| e.text().collect()).collect()
        };
        assert_eq!(texts("h1"), vec![TITLE.to_string()]);
        assert!(
            doc.select(&sel("script, img, b, iframe")).next().is_none(),
            "{html}"
        );
        let body: String = doc.root_element().text().collect();
        assert!(body.contains("Acme <Billing> & Co"), "{body}");
        assert!(body.contains("amount⟨U+202E⟩0009"), "{body}");
        assert!(body.contains("<b>ACME</b>"), "{body}");
        let l = crate::harness::smtp::link_in(&text);
        let hrefs: Vec<&str> = doc
            .select(&sel("a[href]"))
            .filter_map(|a| a.value().attr("href"))
            .collect();
        assert_eq!(hrefs, vec![l.as_str()], "one prominent link: {html}");
        link = l;
    }
    assert_ne!(ids[0], ids[1], "Message-IDs are per recipient");
    // The link opens this request's page, and deciding through it works (on another replica).
    assert_eq!(link, format!("{}/review/{}", f.apps[0].base, c.token));
    let page = get_page(&b, &c.token).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.texts("h1"), vec![TITLE.to_string()]);
    let done = submit(&b, &c.token, &[("decision", "submitted")]).await;
    assert_eq!(
        done.status, 303,
        "decided, then shown the result: {}",
        done.html
    );
    assert_eq!(a.status_of(&c.id).await, "submitted");
    // The follow-ups answer each recipient's own invitation.
    let mails = sink.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(mails.len(), 4);
    for (m, first) in mails[2..].iter().zip(&ids) {
        let p = m.parsed();
        assert_eq!(
            p.subject(),
            Some(format!("Re: Decision needed: {TITLE}").as_str())
        );
        assert_eq!(p.in_reply_to().as_text(), Some(first.as_str()));
        assert_eq!(p.references().as_text(), Some(first.as_str()));
        assert!(p
            .message_id()
            .unwrap()
            .starts_with(&format!("elicitd.{}.submitted.", c.id)));
        let text = p.body_text(0).unwrap();
        assert!(text.contains("A reviewer chose “Pay it”."), "{text}");
        assert!(!text.contains("/review/"), "no link in a follow-up: {text}");
    }
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            of(d, "email", "submitted").is_some_and(|x| x["state"] == "delivered")
        })
        .await;
    let created = of(&d, "email", "created").unwrap();
    assert_eq!(created["state"], "delivered");
    assert_eq!(
        created["to"],
        json!(["alice@example.com", "Bob@Example.com"])
    );
    assert!(created.get("url").is_none());
    assert!(
        d.iter().all(|x| x["channel"] == "email"),
        "no webhook, no Slack: {d:?}"
    );
    // Audited; and nothing was sent twice.
    let audit = a.audit(&c.id).await;
    let sent = audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "notification_sent")
        .count();
    assert_eq!(sent, 2, "{}", audit.body);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(sink.mails().len(), 4);
}

async fn slack_gets_block_kit_with_a_button_and_a_follow_up(kind: StoreKind) {
    let receiver = Receiver::start(vec![]).await;
    let f = Fixture::own(kind, 1, |c| notify(c, None, "0,1,1", |_| {})).await;
    let a = f.acme();
    let mut context = serde_json::Map::new();
    for i in 0..12 {
        context.insert(format!("k{i:02}"), json!("<!here> ".repeat(600)));
    }
    let c = a
        .create(
            "approval",
            json!({
                "title": "T".repeat(120), "message": format!("{MESSAGE} <https://evil.example|your bank> {}", "&".repeat(3900)),
                "context": context,
                "notify": {"slackWebhookUrl": format!("{}/services/T0/B0/x", receiver.url().trim_end_matches("/hook"))}
            }),
        )
        .await;
    let got = receiver.wait_for(1, Duration::from_secs(10)).await;
    let msg = got[0].json();
    check_block_kit(&msg);
    let all = msg.to_string();
    for raw in ["<!channel>", "<!here>", "<https://evil", "<img"] {
        assert!(!all.contains(raw), "{raw} reaches Slack unescaped: {all}");
    }
    assert!(all.contains("&lt;!channel&gt;"), "{all}");
    let blocks = msg["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(
        blocks[0]["text"]["text"].as_str().unwrap().chars().count(),
        120
    );
    let fields = blocks
        .iter()
        .find_map(|b| b["fields"].as_array())
        .expect("the context summarised as fields");
    assert_eq!(fields.len(), 10, "at most 10 fields");
    let button = blocks
        .iter()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().unwrap())
        .find(|e| e["type"] == "button")
        .expect("a button");
    let link = button["url"].as_str().unwrap();
    assert_eq!(link, format!("{}/review/{}", f.apps[0].base, c.token));
    assert!(all.contains("Acme &lt;Billing&gt; &amp; Co"), "{all}");
    // The button's link opens the page.
    assert_eq!(get_page(&a, &c.token).await.status, 200);
    // The outcome follows.
    assert_eq!(a.cancel(&c.id).await.status, 200);
    let got = receiver.wait_for(2, Duration::from_secs(10)).await;
    let follow = got[1].json();
    check_block_kit(&follow);
    assert!(follow.to_string().contains("withdrew"), "{follow}");
    assert!(!follow.to_string().contains("/review/"), "{follow}");
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            of(d, "slack", "canceled").is_some_and(|x| x["state"] == "delivered")
        })
        .await;
    let created = of(&d, "slack", "created").unwrap();
    assert_eq!(created["state"], "delivered");
    // The URL is a credential: only its origin is shown.
    assert_eq!(
        created["url"],
        format!("{}/…", receiver.url().trim_end_matches("/hook"))
    );
}

/// Block Kit's shape and limits (api.slack.com/reference/block-kit): the block types we
/// send, their text objects and lengths, ≤ 50 blocks, a fallback `text`.
fn check_block_kit(msg: &Value) {
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let text_obj = |t: &Value, max: usize, plain_only: bool| {
        let ty = t["type"].as_str().unwrap();
        assert!(ty == "plain_text" || (!plain_only && ty == "mrkdwn"), "{t}");
        let n = chars(&t["text"]);
        assert!(
            (1..=max).contains(&n),
            "text of {n} characters (max {max}): {t}"
        );
    };
    assert!((1..=40_000).contains(&chars(&msg["text"])), "fallback text");
    let blocks = msg["blocks"].as_array().unwrap();
    assert!((1..=50).contains(&blocks.len()));
    for b in blocks {
        match b["type"].as_str().unwrap() {
            "header" => text_obj(&b["text"], 150, true),
            "section" => {
                if !b["text"].is_null() {
                    text_obj(&b["text"], 3000, false);
                }
                if let Some(fields) = b["fields"].as_array() {
                    assert!((1..=10).contains(&fields.len()));
                    for f in fields {
                        text_obj(f, 2000, false);
                    }
                }
                assert!(!b["text"].is_null() || !b["fields"].is_null());
            }
            "context" => {
                let els = b["elements"].as_array().unwrap();
                assert!((1..=10).contains(&els.len()));
                for e in els {
                    text_obj(e, 3000, false);
                }
            }
            "actions" => {
                let els = b["elements"].as_array().unwrap();
                assert!((1..=25).contains(&els.len()));
                for e in els {
                    assert_eq!(e["type"], "button");
                    text_obj(&e["text"], 75, true);
                    let url = e["url"].as_str().unwrap();
                    assert!(url.len() <= 3000 && url.starts_with("http"));
                    assert!(["primary", "danger"].contains(&e["style"].as_str().unwrap()));
                    assert!(chars(&e["action_id"]) <= 255);
                }
            }
            other => panic!("unexpected block type {other}"),
        }
    }
}

/// A request with one email recipient, created while the SMTP server is down (a fast retry
/// schedule); `None` after reporting the skip when Python is missing outside CI.
async fn email_while_smtp_is_down(
    kind: StoreKind,
) -> Option<(SmtpSink, Fixture, crate::harness::Created)> {
    let mut sink = SmtpSink::start(None)?;
    let url = sink.url(None);
    sink.stop();
    let f = Fixture::own(kind, 1, |c| {
        notify(c, Some(&url), "0,1,1,1,1,1,1,1", |_| {})
    })
    .await;
    let c = f
        .acme()
        .create(
            "approval",
            json!({"message": "Deploy?", "context": {"v": 2},
                   "notify": {"email": ["ops@example.com"]}}),
        )
        .await;
    Some((sink, f, c))
}

async fn smtp_down_is_retried_until_it_is_back(kind: StoreKind) {
    let Some((mut sink, f, c)) = email_while_smtp_is_down(kind).await else {
        return;
    };
    let a = f.acme();
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            of(d, "email", "created").is_some_and(|x| x["attempts"].as_array().unwrap().len() >= 2)
        })
        .await;
    let e = of(&d, "email", "created").unwrap();
    assert_eq!(e["state"], "pending", "{e}");
    assert!(e["nextAttemptAt"].is_string());
    let err = e["attempts"][0]["error"].as_str().unwrap();
    assert!(err.to_lowercase().contains("connect"), "{err}");
    assert!(
        !err.contains(&sink.url(None)),
        "the SMTP URL is not shown: {err}"
    );
    assert_eq!(sink.mails().len(), 0);
    sink.resume();
    let mails = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(mails[0].rcpt_tos, vec!["ops@example.com"]);
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(5), |d| {
            of(d, "email", "created").is_some_and(|x| x["state"] == "delivered")
        })
        .await;
    assert!(
        of(&d, "email", "created").unwrap()["attempts"]
            .as_array()
            .unwrap()
            .len()
            >= 3
    );
    // The request itself never noticed.
    assert_eq!(a.status_of(&c.id).await, "pending");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(sink.mails().len(), 1, "delivered once");
}

async fn refusals_fail_the_delivery_never_the_request(kind: StoreKind) {
    let Some(sink) = SmtpSink::start(Some("mailer:right-password")) else {
        return;
    };
    // Wrong credentials: 535, permanent, so failed at the first attempt.
    let wrong = sink.url(Some("mailer:wrong-password"));
    let f = Fixture::own(kind, 1, |c| notify(c, Some(&wrong), "0,1,1,1", |_| {})).await;
    let a = f.acme();
    let c = a
        .create(
            "approval",
            json!({"message": "Deploy?", "context": {"v": 2},
                   "notify": {"email": ["ops@example.com"]}}),
        )
        .await;
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            of(d, "email", "created").is_some_and(|x| x["state"] == "failed")
        })
        .await;
    let e = of(&d, "email", "created").unwrap();
    assert_eq!(
        e["attempts"].as_array().unwrap().len(),
        1,
        "not retried: {e}"
    );
    let err = e["attempts"][0]["error"].as_str().unwrap();
    assert!(err.contains("535"), "{err}");
    assert!(
        !err.contains("wrong-password"),
        "credentials never shown: {err}"
    );
    assert_eq!(e["refused"], json!(["ops@example.com"]));
    let audit = a.audit(&c.id).await;
    assert!(audit.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["type"] == "notification_failed" && x["delivery"] == e["id"]));
    // The request is unaffected: it can be decided and read.
    assert_eq!(a.status_of(&c.id).await, "pending");
    assert_eq!(
        a.decide(&c.token, json!({"decision": "submitted"}))
            .await
            .status,
        200
    );
    assert_eq!(a.result(&c.id).await.status, 200);
    assert_eq!(sink.mails().len(), 0);
    drop(f);

    // Right credentials: one recipient refused (550) for good, the other delivered once, and
    // a replay tries only the refused one again.
    let right = sink.url(Some("mailer:right-password"));
    let f = Fixture::own(kind, 1, |c| notify(c, Some(&right), "0,1,1,1", |_| {})).await;
    let a = f.acme();
    let c = a
        .create(
            "approval",
            json!({"message": "Deploy?", "context": {"v": 2},
                   "notify": {"email": ["gone@refused.test", "ops@example.com"]}}),
        )
        .await;
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            of(d, "email", "created").is_some_and(|x| x["state"] == "failed")
        })
        .await;
    let e = of(&d, "email", "created").unwrap();
    assert_eq!(e["refused"], json!(["gone@refused.test"]));
    assert!(
        e["attempts"][0]["error"].as_str().unwrap().contains("550"),
        "{e}"
    );
    let mails = sink.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(mails[0].rcpt_tos, vec!["ops@example.com"]);
    let did = e["id"].as_str().unwrap();
    let r = a
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{did}/replay",
            c.id
        ))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    a.deliveries_until(&c.id, Duration::from_secs(10), |d| {
        of(d, "email", "created")
            .is_some_and(|x| x["state"] == "failed" && x["attempts"].as_array().unwrap().len() == 2)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sink.mails().len(),
        1,
        "the accepted recipient is not mailed twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_notify_and_tenant_defaults_apply() {
    // No SMTP: email cannot be asked for.
    let mut c = test_config(None, "n");
    notify(&mut c, None, "0", |_| {});
    let app = App::start(c).await;
    let api = app.api(ACME_KEY);
    let create = |notify: Value| {
        let api = api.clone();
        async move {
            api.post(
                "/v1/approvals",
                &json!({"message": "Pay?", "context": {"v": 1}, "notify": notify}),
            )
            .await
        }
    };
    let r = create(json!({"email": ["a@example.com"]})).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "notify.email");
    let too_many: Vec<String> = (0..21).map(|i| format!("u{i}@example.com")).collect();
    for (body, field) in [
        (json!({"email": too_many}), "notify.email"),
        (
            json!({"email": ["a@example.com", "not an address"]}),
            "notify.email[1]",
        ),
        (
            json!({"email": ["a@example.com", "A@EXAMPLE.COM"]}),
            "notify.email[1]",
        ),
        (json!({"email": ["a@nodot"]}), "notify.email[0]"),
        (
            json!({"slackWebhookUrl": "ftp://hooks.slack.com/x"}),
            "notify.slackWebhookUrl",
        ),
        (
            json!({"slackWebhookUrl": "https://u:p@hooks.slack.com/x"}),
            "notify.slackWebhookUrl",
        ),
    ] {
        let r = create(body.clone()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let fields: Vec<&str> = r.body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["field"].as_str().unwrap())
            .collect();
        assert!(fields.contains(&field), "{body}: {}", r.body);
    }
    let r = create(json!({"sms": ["+1"]})).await;
    assert_eq!(r.status, 400, "unknown keys refused: {}", r.body);
    app.stop().await;

    // A private Slack target is refused unless allowed.
    let mut c = test_config(None, "n");
    notify(&mut c, None, "0", |cli| cli.webhook_allow_private = false);
    let app = App::start(c).await;
    let r = app
        .api(ACME_KEY)
        .post(
            "/v1/approvals",
            &json!({"message": "Pay?", "context": {"v": 1},
                    "notify": {"slackWebhookUrl": "http://127.0.0.1:9/x"}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        r.body["error"]["details"][0]["field"],
        "notify.slackWebhookUrl"
    );
    app.stop().await;

    // Tenant defaults: used when `notify` leaves a channel out; `[]` turns email off.
    let Some(sink) = SmtpSink::start(None) else {
        return;
    };
    let receiver = Receiver::start(vec![]).await;
    let mut c = test_config(None, "n");
    let (smtp, slack) = (sink.url(None), receiver.url());
    notify(&mut c, Some(&smtp), "0", |cli| {
        cli.notify_email = Some("acme=team@example.com".into());
        cli.notify_slack = Some(format!("acme={slack}/hook"));
    });
    let app = App::start(c).await;
    let api = app.api(ACME_KEY);
    let r = api
        .post(
            "/v1/approvals",
            &json!({"message": "Defaults?", "context": {"v": 1}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mails = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(mails[0].rcpt_tos, vec!["team@example.com"]);
    receiver.wait_for(1, Duration::from_secs(10)).await;
    let r = api
        .post(
            "/v1/approvals",
            &json!({"message": "Only Slack", "context": {"v": 1}, "notify": {"email": []}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    receiver.wait_for(2, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.mails().len(), 1, "`email: []` turns the default off");
    // The idempotency key covers the targets: another target is another request.
    let body = |to: &str| {
        json!({"message": "Once", "context": {"v": 1}, "idempotencyKey": "k1",
                                    "notify": {"email": [to]}})
    };
    let first = api.post("/v1/approvals", &body("x@example.com")).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let again = api.post("/v1/approvals", &body("x@example.com")).await;
    assert_eq!(again.body["elicitationId"], first.body["elicitationId"]);
    let other = api.post("/v1/approvals", &body("y@example.com")).await;
    assert_eq!(other.status, 400, "{}", other.body);
    // …and the replay sent nothing again.
    sink.wait_for(2, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.mails().len(), 2);
    app.stop().await;
}

#[test]
fn notification_settings_are_checked_at_startup() {
    let parse = |f: &dyn Fn(&mut elicitd::config::Cli)| {
        let mut cli = <elicitd::config::Cli as clap::Parser>::parse_from(["elicitd"]);
        f(&mut cli);
        elicitd::config::Config::from_cli(cli)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let err = parse(&|c| c.smtp_url = Some("smtp://u:secret@127.0.0.1:25".into())).unwrap_err();
    assert!(err.contains("ELICITD_SMTP_FROM"), "{err}");
    let err = parse(&|c| {
        c.smtp_url = Some("http://u:secret@mail.example.com".into());
        c.smtp_from = Some("a@example.com".into());
    })
    .unwrap_err();
    assert!(
        err.contains("ELICITD_SMTP_URL") && !err.contains("secret"),
        "{err}"
    );
    let err = parse(&|c| c.notify_email = Some("acme=a@example.com".into())).unwrap_err();
    assert!(err.contains("needs ELICITD_SMTP_URL"), "{err}");
    let err = parse(&|c| {
        c.smtp_url = Some("smtp://127.0.0.1:25".into());
        c.smtp_from = Some("a@example.com".into());
        c.notify_email = Some("acme=a@example.com,bad".into());
    })
    .unwrap_err();
    assert!(err.contains("ELICITD_NOTIFY_EMAIL"), "{err}");
    let err = parse(&|c| c.links_by_notification = Some("acme".into())).unwrap_err();
    assert!(err.contains("ELICITD_LINKS_BY_NOTIFICATION needs"), "{err}");
    let err = parse(&|c| c.notify_slack = Some("acme=ftp://x".into())).unwrap_err();
    assert!(err.contains("ELICITD_NOTIFY_SLACK"), "{err}");
    let err = parse(&|c| c.tenant_names = Some("acme=\u{202E}evil".into())).unwrap_err();
    assert!(err.contains("ELICITD_TENANT_NAMES"), "{err}");
    parse(&|c| {
        c.smtp_url = Some("smtps://user:pa%40ss@mail.example.com:465".into());
        c.smtp_from = Some("Approvals <a@example.com>".into());
        c.notify_email = Some("acme=a@example.com,b@example.com".into());
        c.notify_slack = Some("acme=https://hooks.slack.com/services/x".into());
        c.tenant_names = Some("acme=Acme Billing".into());
    })
    .unwrap();
    parse(&|c| {
        c.smtp_url = Some("smtp://mail.example.com:587?tls=required".into());
        c.smtp_from = Some("a@example.com".into());
    })
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_creating_tools_take_notify() {
    let receiver = Receiver::start(vec![]).await;
    let mut c = test_config(None, "n");
    notify(&mut c, None, "0", |_| {});
    let app = App::start(c).await;
    let client = crate::mcp::connect(&app.base, ACME_KEY).await.unwrap();
    let r = crate::mcp::call(
        &client,
        "elicit_selection",
        json!({"message": "Which region?", "options": [{"id": "eu"}, {"id": "us"}],
               "notify": {"slackWebhookUrl": receiver.url()}}),
    )
    .await;
    let created = crate::mcp::structured(&r).clone();
    let got = receiver.wait_for(1, Duration::from_secs(10)).await;
    let msg = got[0].json();
    check_block_kit(&msg);
    assert!(msg
        .to_string()
        .contains(created["reviewUrl"].as_str().unwrap()));
    assert!(msg.to_string().contains("Selection request"), "{msg}");
    // Refused like over REST, with the field named.
    let r = crate::mcp::call(
        &client,
        "elicit_approval",
        json!({"message": "Pay?", "context": {"v": 1}, "notify": {"email": ["a@example.com"]}}),
    )
    .await;
    let e = crate::mcp::error_text(&r);
    assert!(e.contains("notify.email"), "{e}");
    client.cancel().await.ok();
    app.stop().await;
}

crate::on_stores!(
    on_memory_closed,
    Memory,
    a_queued_invitation_is_dropped_once_the_request_closes
);

/// Mail that could not go out while the request was open is not sent as "decision needed"
/// after it closed; the follow-up still is.
async fn a_queued_invitation_is_dropped_once_the_request_closes(kind: StoreKind) {
    let Some((mut sink, f, c)) = email_while_smtp_is_down(kind).await else {
        return;
    };
    let a = f.acme();
    a.deliveries_until(&c.id, Duration::from_secs(10), |d| {
        of(d, "email", "created").is_some_and(|x| !x["attempts"].as_array().unwrap().is_empty())
    })
    .await;
    assert_eq!(a.cancel(&c.id).await.status, 200);
    sink.resume();
    let d = a
        .deliveries_until(&c.id, Duration::from_secs(10), |d| {
            ["created", "canceled"]
                .iter()
                .all(|e| of(d, "email", e).is_some_and(|x| x["state"] == "delivered"))
        })
        .await;
    let created = of(&d, "email", "created").unwrap();
    let last = created["attempts"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["error"]
            .as_str()
            .unwrap_or("")
            .contains("no longer open"),
        "{created}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mails = sink.mails();
    assert_eq!(mails.len(), 1, "only the follow-up");
    assert!(mails[0].parsed().subject().unwrap().starts_with("Re: "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recipients_can_be_held_to_the_tenants_domains() {
    let smtp = format!("smtp://127.0.0.1:{}", crate::harness::free_port());
    let mut c = test_config(None, "n");
    notify(&mut c, Some(&smtp), "0", |cli| {
        cli.notify_email_domains = Some("acme=acme.example,ops.acme.example".into())
    });
    let app = App::start(c).await;
    let api = app.api(ACME_KEY);
    let post = |body: Value| {
        let api = api.clone();
        async move { api.post("/v1/approvals", &body).await }
    };
    let r = post(json!({"message": "m", "context": 1,
        "notify": {"email": ["a@acme.example", "b@evil.example"]}}))
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "notify.email[1]");
    let r = post(json!({"message": "m", "context": 1, "linkDelivery": "notify",
        "reviewers": [{"id": "a", "email": "a@OPS.acme.example"}, {"id": "me", "email": "me@agent.example"}]}))
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "reviewers[1].email");
    let r = post(json!({"message": "m", "context": 1, "linkDelivery": "notify",
        "reviewers": [{"id": "a", "email": "a@OPS.acme.example"}, {"id": "b", "email": "b@acme.example"}]}))
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    app.stop().await;
    // A default recipient outside the list is a configuration error.
    let mut cli = <elicitd::config::Cli as clap::Parser>::parse_from(["elicitd"]);
    cli.smtp_url = Some(smtp);
    cli.smtp_from = Some(FROM.into());
    cli.notify_email = Some("acme=x@evil.example".into());
    cli.notify_email_domains = Some("acme=acme.example".into());
    let err = elicitd::config::Config::from_cli(cli)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("outside ELICITD_NOTIFY_EMAIL_DOMAINS"),
        "{err}"
    );
}

/// A delivery id only replays on its own request (Redis: another record of the same shard has
/// its deliveries under the same key tag).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_replays_only_on_its_own_request() {
    use crate::harness::receiver::Reply;
    let receiver = Receiver::start((0..40).map(|_| Reply::Status(404)).collect()).await;
    let f = Fixture::own(StoreKind::Redis, 1, |c| notify(c, None, "0", |_| {})).await;
    let a = f.acme();
    let mut by_shard: std::collections::HashMap<u128, Vec<String>> = Default::default();
    let pair = loop {
        let c = a
            .create(
                "approval",
                json!({"message": "m", "context": 1,
                       "notify": {"slackWebhookUrl": receiver.url()}}),
            )
            .await;
        let shard = elicitd::model::ElicitationId::parse(&c.id)
            .unwrap()
            .as_u128()
            % 16;
        let same = by_shard.entry(shard).or_default();
        same.push(c.id.clone());
        if same.len() == 2 {
            break (same[0].clone(), same[1].clone());
        }
    };
    let d = a
        .deliveries_until(&pair.1, Duration::from_secs(10), |d| {
            of(d, "slack", "created").is_some_and(|x| x["state"] == "failed")
        })
        .await;
    let theirs = of(&d, "slack", "created").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = a
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{theirs}/replay",
            pair.0
        ))
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = a
        .post_empty(&format!(
            "/v1/elicitations/{}/deliveries/{theirs}/replay",
            pair.1
        ))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
}
