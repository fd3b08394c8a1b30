//! Named reviewers (issue #20): personal links, the quorum (the two-person rule), any decline
//! ends the request, each vote counted once per reviewer, a cancel racing the last vote with
//! exactly one winner across two replicas (200 rounds), a link that decides only its own
//! request and nothing after its reviewer voted, `linkDelivery: "notify"` keeping every link out
//! of every answer to the agent (REST, MCP, webhooks; the links arrive by email through a real
//! SMTP server), the tenant setting that forces it, and two reviewers approving in turn in
//! headless Chromium while the agent's `await` sleeps through the first vote.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use elicitd::config::{Cli, Config};
use fantoccini::Locator;
use rmcp::model::CallToolResult;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::{
    every_store,
    harness::{
        browser::{Browser, PHONE_WIDTH},
        free_port,
        receiver::Receiver,
        smtp::SmtpSink,
        Api, Fixture, Resp, StoreKind, ACME_KEY, BETA_KEY,
    },
    mcp::{call, connect, error_text, structured},
    review_page::{get_page, post_form, submit},
};

every_store!(
    quorum_of_two_needs_two_distinct_submits,
    any_decline_ends_it
);
crate::on_stores!(
    on_memory_links,
    Memory,
    links_only_by_email_never_in_answers
);
crate::on_stores!(on_redis_links, Redis, links_only_by_email_never_in_answers);

const FROM: &str = "Approvals <approvals@elicitd.test>";

/// A Standard Webhooks secret (32 bytes, base64) for tenant acme.
const SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Email on (`smtp` as the SMTP URL), signed webhooks for acme with loopback targets allowed, a
/// fast retry schedule, then `more`. Everything the flags control (notifications, webhooks,
/// `ELICITD_LINKS_BY_NOTIFICATION`) comes from the flags; the store, prefix, keys, secret and
/// test limits stay as the harness set them.
fn mail_config(c: &mut Config, smtp: &str, more: impl FnOnce(&mut Cli)) {
    let mut cli = <Cli as clap::Parser>::parse_from(["elicitd"]);
    cli.smtp_url = Some(smtp.to_string());
    cli.smtp_from = Some(FROM.into());
    cli.webhook_secrets = Some(format!("acme:{SECRET}"));
    cli.webhook_allow_private = true;
    cli.webhook_retry_schedule_secs = "0,1,1".into();
    cli.webhook_timeout_secs = 3;
    cli.webhook_lease_secs = 5;
    cli.api_keys = Some(format!("acme:{ACME_KEY},beta:{BETA_KEY}"));
    more(&mut cli);
    let parsed = Config::from_cli(cli).unwrap();
    let harness = std::mem::replace(c, parsed);
    c.redis_url = harness.redis_url;
    c.key_prefix = harness.key_prefix;
    c.api_keys = harness.api_keys;
    c.secret = harness.secret;
    c.min_expires_secs = harness.min_expires_secs;
    c.create_rate_per_sec = harness.create_rate_per_sec;
}

/// A request with named reviewers, created in a test.
struct Panel {
    id: String,
    /// Reviewer id → token (the last segment of that reviewer's `reviewUrl`), in the order given.
    tokens: Vec<(String, String)>,
}

impl Panel {
    fn token(&self, reviewer: &str) -> &str {
        self.tokens
            .iter()
            .find(|(id, _)| id == reviewer)
            .map(|(_, t)| t.as_str())
            .unwrap_or_else(|| panic!("no reviewer {reviewer}"))
    }
}

fn token_of(url: &str) -> String {
    url.rsplit('/').next().unwrap_or_default().to_string()
}

/// Create a `kind` with `body` (which has `reviewers`, links in the answer) and check the
/// answer: no shared `reviewUrl`, one personal link per reviewer in the order given, all
/// different.
async fn create_panel(api: &Api, kind: &str, body: Value) -> Panel {
    let r = api.post(&format!("/v1/{kind}s"), &body).await;
    assert_eq!(r.status, 201, "create {kind}: {}", r.body);
    assert!(
        r.body.get("reviewUrl").is_none(),
        "no shared link next to the personal ones: {}",
        r.body
    );
    let listed = r.body["reviewers"]
        .as_array()
        .unwrap_or_else(|| panic!("no reviewers in {}", r.body));
    let asked = body["reviewers"].as_array().expect("reviewers asked for");
    assert_eq!(listed.len(), asked.len(), "{}", r.body);
    let mut tokens = Vec::new();
    for (got, want) in listed.iter().zip(asked) {
        assert_eq!(got["id"], want["id"], "in the order given: {}", r.body);
        let url = got["reviewUrl"]
            .as_str()
            .unwrap_or_else(|| panic!("no reviewUrl for {}: {}", want["id"], r.body));
        assert!(url.starts_with(&format!("{}/review/", api.base)), "{url}");
        tokens.push((want["id"].as_str().unwrap().to_string(), token_of(url)));
    }
    let distinct: HashSet<&String> = tokens.iter().map(|(_, t)| t).collect();
    assert_eq!(distinct.len(), tokens.len(), "personal links: {}", r.body);
    Panel {
        id: r.str("elicitationId").to_string(),
        tokens,
    }
}

/// `base` with the keys of `extra` set.
fn with(mut base: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().expect("an object") {
        base[k] = v.clone();
    }
    base
}

/// `n` reviewers with ids r0, r1, ….
fn ids(n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"id": format!("r{i}")})).collect())
}

/// The `field`s of an error's details.
fn fields(r: &Resp) -> Vec<String> {
    r.body["error"]["details"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| x["field"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn events(api: &Api, id: &str) -> Vec<Value> {
    let r = api.audit(id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["events"].as_array().expect("events").clone()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// An agent's `await` on `id`, started now: its answer and how long it took.
fn await_in_background(api: &Api, id: &str, secs: u64) -> JoinHandle<(Resp, Duration)> {
    let (api, id) = (api.clone(), id.to_string());
    tokio::spawn(async move {
        let t = Instant::now();
        let r = api.wait(&id, secs).await;
        (r, t.elapsed())
    })
}

async fn quorum_of_two_needs_two_distinct_submits(kind: StoreKind) {
    let f = Fixture::new(kind, 2).await;
    let (a, b) = (f.acme(), f.other());
    let p = create_panel(
        &a,
        "approval",
        json!({"message": "Deploy v2 to production?", "context": {"version": 2},
            "reviewers": [{"id": "alice", "name": "Alice"}, {"id": "bob"},
                          {"id": "carol", "name": "Carol"}],
            "quorum": 2}),
    )
    .await;
    // The same people on another request get other links.
    let other = create_panel(
        &a,
        "approval",
        json!({"message": "Deploy v3 to staging?", "context": {"version": 3},
            "reviewers": [{"id": "alice", "name": "Alice"}, {"id": "bob"}]}),
    )
    .await;
    assert_ne!(p.token("alice"), other.token("alice"));
    let s = a.status(&p.id).await;
    assert_eq!((s.status, s.str("status")), (200, "pending"), "{}", s.body);
    assert_eq!(s.body["votes"], json!({"submitted": 0, "needed": 2}));

    // Alice opens her page (her own request's) and approves, through the other replica.
    let page = get_page(&b, p.token("alice")).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.texts(".message"), ["Deploy v2 to production?"]);
    let alice_csrf = page.csrf();
    let waiter = await_in_background(&a, &p.id, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = b
        .decide(
            p.token("alice"),
            json!({"decision": "submitted", "comment": "looks good"}),
        )
        .await;
    assert_eq!((v.status, v.str("status")), (200, "pending"), "{}", v.body);
    let s = a.status(&p.id).await;
    assert_eq!(s.str("status"), "pending");
    assert_eq!(s.body["votes"], json!({"submitted": 1, "needed": 2}));
    // An agent's `await` sleeps through a vote that does not decide.
    let (w, took) = waiter.await.unwrap();
    assert_eq!((w.status, w.str("status")), (200, "pending"), "{}", w.body);
    assert_eq!(w.body["votes"], json!({"submitted": 1, "needed": 2}));
    assert!(
        took >= Duration::from_millis(1500),
        "await returned after {took:?} on a mere vote"
    );

    // Her link decided nothing elsewhere: the other request is untouched.
    let s = a.status(&other.id).await;
    assert_eq!(s.str("status"), "pending");
    assert_eq!(s.body["votes"], json!({"submitted": 0, "needed": 1}));
    assert!(of_type(&events(&a, &other.id).await, "voted").is_empty());

    // Once she voted, her link records nothing more: not again, not the other way, not by form.
    for decision in ["submitted", "declined"] {
        let again = a
            .decide(p.token("alice"), json!({"decision": decision}))
            .await;
        assert_eq!(
            (again.status, again.code()),
            (409, "already_decided"),
            "{}",
            again.body
        );
    }
    let form_again = post_form(
        &a,
        p.token("alice"),
        &[("csrf", &alice_csrf), ("decision", "submitted")],
        &[("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(form_again.status, 409, "{}", form_again.html);
    assert_eq!(
        a.status(&p.id).await.body["votes"],
        json!({"submitted": 1, "needed": 2}),
        "a vote is never counted twice"
    );

    // Her page shows her vote and no controls; the next reviewer's shows the count and who voted.
    let page = get_page(&a, p.token("alice")).await;
    assert_eq!(page.status, 200);
    let shown = page.texts("body").concat();
    assert!(
        shown.contains("You have voted") && shown.contains("1 of 2 approvals so far"),
        "{}",
        page.html
    );
    assert!(
        page.attrs("button[name=decision]", "value").is_empty() && page.texts("form").is_empty(),
        "{}",
        page.html
    );
    let page = get_page(&a, p.token("bob")).await;
    let votes = page.texts("#votes").concat();
    assert!(
        votes.contains("1 of 2 approvals so far") && votes.contains("Voted: Alice"),
        "{votes}"
    );
    assert!(!votes.contains("Carol"), "{votes}");
    assert_eq!(
        page.attrs("button[name=decision]", "value"),
        ["submitted", "declined"]
    );

    // Bob's approval completes the quorum and wakes the waiting agent.
    let waiter = await_in_background(&b, &p.id, 10);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = a
        .decide(
            p.token("bob"),
            json!({"decision": "submitted", "comment": "ship it"}),
        )
        .await;
    assert_eq!(
        (v.status, v.str("status")),
        (200, "submitted"),
        "{}",
        v.body
    );
    let (w, took) = waiter.await.unwrap();
    assert_eq!(w.str("status"), "submitted", "{}", w.body);
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(w.body["votes"], json!({"submitted": 2, "needed": 2}));
    // Too late for Carol; and Alice's link stays spent.
    let late = b
        .decide(p.token("carol"), json!({"decision": "submitted"}))
        .await;
    assert_eq!(
        (late.status, late.code()),
        (409, "already_decided"),
        "{}",
        late.body
    );
    let late = b
        .decide(p.token("alice"), json!({"decision": "declined"}))
        .await;
    assert_eq!(late.status, 409, "{}", late.body);

    // The result names who decided and carries every vote, in vote order.
    let r = b.result(&p.id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["decision"], "submitted");
    assert_eq!(r.body["decidedBy"], json!(["alice", "bob"]));
    let votes = r.body["votes"].as_array().expect("votes");
    assert_eq!(votes.len(), 2, "{}", r.body);
    for (v, (who, comment)) in votes
        .iter()
        .zip([("alice", "looks good"), ("bob", "ship it")])
    {
        assert_eq!(v["reviewer"], who, "{v}");
        assert_eq!(v["decision"], "submitted", "{v}");
        assert_eq!(v["comment"], comment, "{v}");
        let at = v["at"].as_str().expect("at");
        chrono::DateTime::parse_from_rfc3339(at).unwrap_or_else(|e| panic!("{at}: {e}"));
    }

    // The audit names the reviewers: who looked, who voted, whose vote decided.
    let ev = events(&a, &p.id).await;
    assert!(
        of_type(&ev, "viewed")
            .iter()
            .any(|e| e["actor"] == "reviewer:alice"),
        "{ev:?}"
    );
    let voted: Vec<(&str, &str)> = of_type(&ev, "voted")
        .into_iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or(""),
                e["decision"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        voted,
        [
            ("reviewer:alice", "submitted"),
            ("reviewer:bob", "submitted")
        ],
        "{ev:?}"
    );
    let decided = of_type(&ev, "decided");
    assert_eq!(decided.len(), 1, "{ev:?}");
    assert_eq!(decided[0]["actor"], "reviewer:bob");
    assert_eq!(decided[0]["decision"], "submitted");
}

async fn any_decline_ends_it(kind: StoreKind) {
    let f = Fixture::new(kind, 2).await;
    let (a, b) = (f.acme(), f.other());
    let p = create_panel(
        &a,
        "approval",
        json!({"message": "Wire 9000 EUR?", "context": {"amount": 9000},
            "reviewers": [{"id": "alice"}, {"id": "bob", "name": "Bob"}, {"id": "carol"}],
            "quorum": 2}),
    )
    .await;
    // Alice approves through the page; the others see her vote (by id: she has no name).
    let done = submit(
        &b,
        p.token("alice"),
        &[("decision", "submitted"), ("comment", "fine")],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.html);
    assert_eq!(a.status_of(&p.id).await, "pending");
    let page = get_page(&a, p.token("bob")).await;
    let votes = page.texts("#votes").concat();
    assert!(
        votes.contains("1 of 2 approvals so far") && votes.contains("Voted: alice"),
        "{votes}"
    );
    // Bob declines: that ends it, whatever the quorum.
    let d = a
        .decide(
            p.token("bob"),
            json!({"decision": "declined", "comment": "wrong account"}),
        )
        .await;
    assert_eq!((d.status, d.str("status")), (200, "declined"), "{}", d.body);
    assert_eq!(b.status_of(&p.id).await, "declined");
    let late = b
        .decide(p.token("carol"), json!({"decision": "submitted"}))
        .await;
    assert_eq!(
        (late.status, late.code()),
        (409, "already_decided"),
        "{}",
        late.body
    );
    let r = a.result(&p.id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["decision"], "declined");
    assert_eq!(r.body["decidedBy"], json!(["bob"]));
    let votes = r.body["votes"].as_array().expect("votes");
    let summary: Vec<(&str, &str, &str)> = votes
        .iter()
        .map(|v| {
            (
                v["reviewer"].as_str().unwrap_or(""),
                v["decision"].as_str().unwrap_or(""),
                v["comment"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice", "submitted", "fine"),
            ("bob", "declined", "wrong account")
        ]
    );
    let ev = events(&a, &p.id).await;
    assert_eq!(of_type(&ev, "voted").len(), 2, "{ev:?}");
    let decided = of_type(&ev, "decided");
    assert_eq!(decided.len(), 1, "{ev:?}");
    assert_eq!(decided[0]["actor"], "reviewer:bob");
    assert_eq!(decided[0]["decision"], "declined");

    // A decline as the first vote ends it too.
    let q = create_panel(
        &a,
        "approval",
        json!({"message": "Again?", "context": 1,
            "reviewers": [{"id": "alice"}, {"id": "bob"}], "quorum": 2}),
    )
    .await;
    let d = b
        .decide(q.token("bob"), json!({"decision": "declined"}))
        .await;
    assert_eq!((d.status, d.str("status")), (200, "declined"), "{}", d.body);
    let late = a
        .decide(q.token("alice"), json!({"decision": "submitted"}))
        .await;
    assert_eq!(late.status, 409, "{}", late.body);
    let r = a.result(&q.id).await;
    assert_eq!(r.body["decidedBy"], json!(["bob"]), "{}", r.body);
    assert_eq!(r.body["votes"].as_array().map(Vec::len), Some(1));

    // The default quorum: one submit by any of the reviewers decides.
    let one = create_panel(
        &a,
        "approval",
        json!({"message": "Once?", "context": 1, "reviewers": [{"id": "alice"}, {"id": "bob"}]}),
    )
    .await;
    assert_eq!(
        a.status(&one.id).await.body["votes"],
        json!({"submitted": 0, "needed": 1})
    );
    let d = b
        .decide(one.token("bob"), json!({"decision": "submitted"}))
        .await;
    assert_eq!(
        (d.status, d.str("status")),
        (200, "submitted"),
        "{}",
        d.body
    );
    let late = a
        .decide(one.token("alice"), json!({"decision": "declined"}))
        .await;
    assert_eq!(late.status, 409, "{}", late.body);
    let r = a.result(&one.id).await;
    assert_eq!(r.body["decision"], "submitted");
    assert_eq!(r.body["decidedBy"], json!(["bob"]), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_reviewers() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let approval = |extra: Value| with(json!({"message": "Pay?", "context": {"v": 1}}), extra);

    // Malformed: 400 with the field named, every problem at once.
    for (extra, want) in [
        (json!({"reviewers": ids(21)}), vec!["reviewers"]),
        (json!({"reviewers": []}), vec!["reviewers"]),
        (
            json!({"reviewers": [{"id": "alice"}, {"id": "alice"}]}),
            vec!["reviewers[1].id"],
        ),
        (
            json!({"reviewers": [{"id": "-alice"}]}),
            vec!["reviewers[0].id"],
        ),
        (
            json!({"reviewers": [{"id": "ok"}, {"id": "al ice"}]}),
            vec!["reviewers[1].id"],
        ),
        (json!({"reviewers": [{"id": ""}]}), vec!["reviewers[0].id"]),
        (
            json!({"reviewers": [{"id": "al/ice"}]}),
            vec!["reviewers[0].id"],
        ),
        (
            json!({"reviewers": [{"id": "ålice"}]}),
            vec!["reviewers[0].id"],
        ),
        (
            json!({"reviewers": [{"id": "a".repeat(65)}]}),
            vec!["reviewers[0].id"],
        ),
        (
            json!({"reviewers": [{"id": "alice", "name": ""}]}),
            vec!["reviewers[0].name"],
        ),
        (
            json!({"reviewers": [{"id": "alice", "name": "n".repeat(81)}]}),
            vec!["reviewers[0].name"],
        ),
        (json!({"reviewers": ids(2), "quorum": 0}), vec!["quorum"]),
        (json!({"reviewers": ids(2), "quorum": 3}), vec!["quorum"]),
        (json!({"reviewers": ids(2), "quorum": -1}), vec!["quorum"]),
        (json!({"quorum": 1}), vec!["quorum"]),
        (
            json!({"reviewers": [{"id": "a"}, {"id": "a"}], "quorum": 0}),
            vec!["reviewers[1].id", "quorum"],
        ),
    ] {
        let r = api.post("/v1/approvals", &approval(extra.clone())).await;
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
        assert_eq!(r.code(), "invalid_request", "{extra}: {}", r.body);
        let got = fields(&r);
        for field in want {
            assert!(
                got.iter().any(|f| f == field),
                "{extra}: {field} not in {}",
                r.body
            );
        }
    }
    // Wrong shapes are refused too.
    for extra in [
        json!({"reviewers": [{"id": "alice", "role": "boss"}]}),
        json!({"reviewers": [{"name": "No id"}]}),
        json!({"reviewers": "alice"}),
        json!({"reviewers": ids(2), "quorum": "2"}),
        json!({"linkDelivery": "email"}),
    ] {
        let r = api.post("/v1/approvals", &approval(extra.clone())).await;
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
    }

    // Well-formed but not possible here: 422 with the field named. A quorum above 1 is for
    // approvals in json mode only.
    let form_schema = json!({"type": "object", "required": ["n"],
        "properties": {"n": {"type": "integer", "title": "N"}}});
    let two = json!({"reviewers": ids(2), "quorum": 2});
    for (path, body) in [
        (
            "/v1/selections",
            with(
                json!({"message": "Pick", "options": [{"id": "a"}, {"id": "b"}]}),
                two.clone(),
            ),
        ),
        (
            "/v1/proposals",
            with(
                json!({"message": "File?", "proposal": {"t": "x"}}),
                two.clone(),
            ),
        ),
        (
            "/v1/approvals",
            with(
                json!({"message": "Fill in", "requestedSchema": form_schema}),
                two.clone(),
            ),
        ),
    ] {
        let r = api.post(path, &body).await;
        assert_eq!(r.status, 422, "{path}: {}", r.body);
        assert_eq!(r.code(), "invalid_request");
        assert!(
            fields(&r).contains(&"quorum".to_string()),
            "{path}: {}",
            r.body
        );
    }
    // This server has no SMTP: a reviewer's email cannot be used, nor links sent by email.
    for (extra, field) in [
        (
            json!({"reviewers": [{"id": "a"}, {"id": "b", "email": "b@example.com"}]}),
            "reviewers[1].email",
        ),
        (
            json!({"reviewers": [{"id": "a"}], "linkDelivery": "notify"}),
            "reviewers[0].email",
        ),
    ] {
        let r = api.post("/v1/approvals", &approval(extra.clone())).await;
        assert_eq!(r.status, 422, "{extra}: {}", r.body);
        assert!(
            fields(&r).contains(&field.to_string()),
            "{extra}: {}",
            r.body
        );
    }

    // Accepted: without reviewers the answer is today's.
    let r = api.post("/v1/approvals", &approval(json!({}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.str("reviewUrl").contains("/review/"));
    assert!(r.body.get("reviewers").is_none(), "{}", r.body);
    let id = r.str("elicitationId").to_string();
    assert!(
        api.status(&id).await.body.get("votes").is_none(),
        "no votes without reviewers"
    );
    let d = api
        .decide(
            &token_of(r.str("reviewUrl")),
            json!({"decision": "submitted"}),
        )
        .await;
    assert_eq!(d.str("status"), "submitted");
    let res = api.result(&id).await;
    assert!(res.body.get("decidedBy").is_none(), "{}", res.body);
    // Ids: case matters, the whole alphabet, 64 characters; the quorum may be all of them.
    create_panel(
        &api,
        "approval",
        approval(
            json!({"reviewers": [{"id": "a"}, {"id": "A"}, {"id": "A.b_c@d-e"},
            {"id": "9".repeat(64), "name": "N".repeat(80)}], "quorum": 4}),
        ),
    )
    .await;
    create_panel(
        &api,
        "approval",
        approval(json!({"reviewers": ids(20), "quorum": 20, "linkDelivery": "answer"})),
    )
    .await;
    // Every kind takes reviewers with a quorum of 1.
    let one = json!({"reviewers": ids(2), "quorum": 1});
    create_panel(
        &api,
        "selection",
        with(
            json!({"message": "Pick", "options": [{"id": "a"}, {"id": "b"}]}),
            one.clone(),
        ),
    )
    .await;
    create_panel(
        &api,
        "proposal",
        with(
            json!({"message": "File?", "proposal": {"t": "x"}}),
            one.clone(),
        ),
    )
    .await;
    create_panel(
        &api,
        "approval",
        with(
            json!({"message": "Fill in", "requestedSchema": form_schema}),
            one.clone(),
        ),
    )
    .await;

    // The MCP creating tools check the same and answer the same.
    let client = connect(&f.apps[0].base, ACME_KEY).await.unwrap();
    let e = error_text(
        &call(
            &client,
            "elicit_approval",
            json!({"message": "Pay?", "context": {"v": 1}, "reviewers": [{"id": "a"}, {"id": "b"}], "quorum": 3}),
        )
        .await,
    );
    assert!(
        e.starts_with("invalid_request") && e.contains("quorum"),
        "{e}"
    );
    let e = error_text(
        &call(
            &client,
            "elicit_selection",
            json!({"message": "Pick", "options": [{"id": "a"}, {"id": "b"}],
                "reviewers": [{"id": "a"}, {"id": "b"}], "quorum": 2}),
        )
        .await,
    );
    assert!(e.contains("quorum"), "{e}");
    let r = call(
        &client,
        "elicit_approval",
        json!({"message": "Pay?", "context": {"v": 1},
            "reviewers": [{"id": "alice"}, {"id": "bob"}], "quorum": 2}),
    )
    .await;
    let created = structured(&r);
    assert!(created.get("reviewUrl").is_none(), "{created}");
    let listed = created["reviewers"].as_array().expect("reviewers");
    assert_eq!(listed.len(), 2, "{created}");
    for (got, want) in listed.iter().zip(["alice", "bob"]) {
        assert_eq!(got["id"], want);
        assert!(
            got["reviewUrl"].as_str().unwrap_or("").contains("/review/"),
            "{created}"
        );
    }
    client.cancel().await.ok();

    // With SMTP (never reached here): `notify.email` does not go with reviewers (each has
    // their own), and links by email need every reviewer's address.
    let smtp = format!("smtp://127.0.0.1:{}", free_port());
    let f = Fixture::own(StoreKind::Memory, 1, |c| mail_config(c, &smtp, |_| {})).await;
    let api = f.acme();
    let r = api
        .post(
            "/v1/approvals",
            &approval(json!({"reviewers": [{"id": "a", "email": "a@example.com"}],
                "notify": {"email": ["team@example.com"]}})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        fields(&r).contains(&"notify.email".to_string()),
        "{}",
        r.body
    );
    let r = api
        .post(
            "/v1/approvals",
            &approval(
                json!({"reviewers": [{"id": "a", "email": "a@example.com"}, {"id": "b"}],
                "linkDelivery": "notify"}),
            ),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(
        fields(&r).contains(&"reviewers[1].email".to_string()),
        "{}",
        r.body
    );
    // Each link is personal: two reviewers cannot share a mailbox.
    let r = api
        .post(
            "/v1/approvals",
            &approval(json!({"reviewers": [{"id": "a", "email": "x@example.com"},
                                           {"id": "b", "email": "X@Example.com"}]})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        fields(&r).contains(&"reviewers[1].email".to_string()),
        "{}",
        r.body
    );
    // Links only by email and no reviewers: a Slack target would carry the link into a channel.
    let r = api
        .post(
            "/v1/approvals",
            &approval(json!({"linkDelivery": "notify",
                "notify": {"email": ["team@example.com"],
                           "slackWebhookUrl": "https://hooks.slack.com/services/T/B/x"}})),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(
        fields(&r).contains(&"notify.slackWebhookUrl".to_string()),
        "{}",
        r.body
    );
}

/// Two reviewers' votes (through two replicas) and a cancel, at once, 200 times: one outcome,
/// votes never double-counted, nothing lost, never a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn votes_and_a_cancel_race_with_one_winner() {
    let f = Fixture::new(StoreKind::Redis, 2).await;
    let (a, b) = (f.acme(), f.other());
    let (mut quorum_won, mut cancel_won) = (0, 0);
    for round in 0..200 {
        let p = create_panel(
            &a,
            "approval",
            json!({"message": "Race", "context": {"round": round},
                "reviewers": [{"id": "alice"}, {"id": "bob"}], "quorum": 2}),
        )
        .await;
        let (alice, bob, cancel) = tokio::join!(
            a.decide(
                p.token("alice"),
                json!({"decision": "submitted", "comment": "a"})
            ),
            b.decide(
                p.token("bob"),
                json!({"decision": "submitted", "comment": "b"})
            ),
            a.cancel(&p.id),
        );
        for (op, r) in [("alice", &alice), ("bob", &bob), ("cancel", &cancel)] {
            assert!(
                r.status == 200 || r.status == 409,
                "round {round} {op}: {} {}",
                r.status,
                r.body
            );
            if r.status == 409 {
                assert!(
                    ["already_decided", "canceled"].contains(&r.code()),
                    "round {round} {op}: {}",
                    r.body
                );
            }
        }
        let votes = [("alice", &alice), ("bob", &bob)];
        let counted: Vec<&str> = votes
            .iter()
            .filter(|(_, r)| r.status == 200)
            .map(|(who, _)| *who)
            .collect();
        let ev = events(&a, &p.id).await;
        // At most one `voted` per reviewer, and exactly the votes that answered 200.
        let mut voted: Vec<String> = of_type(&ev, "voted")
            .into_iter()
            .map(|e| e["actor"].as_str().unwrap_or("").to_string())
            .collect();
        let n_voted = voted.len();
        voted.sort();
        voted.dedup();
        assert_eq!(
            voted.len(),
            n_voted,
            "round {round}: a vote counted twice: {ev:?}"
        );
        let mut want: Vec<String> = counted.iter().map(|w| format!("reviewer:{w}")).collect();
        want.sort();
        assert_eq!(voted, want, "round {round}: {ev:?}");
        let s = a.status(&p.id).await;
        assert_eq!(s.status, 200, "{}", s.body);
        match s.str("status") {
            "canceled" => {
                cancel_won += 1;
                assert_eq!(cancel.status, 200, "round {round}: {}", cancel.body);
                assert!(
                    counted.len() < 2,
                    "round {round}: canceled after the quorum was reached"
                );
                for (who, r) in votes {
                    if r.status == 200 {
                        assert_eq!(r.str("status"), "pending", "round {round} {who}");
                    } else {
                        assert_eq!(r.code(), "canceled", "round {round} {who}: {}", r.body);
                    }
                }
                assert_eq!(
                    s.body["votes"],
                    json!({"submitted": counted.len(), "needed": 2}),
                    "round {round}"
                );
                assert!(of_type(&ev, "decided").is_empty(), "round {round}: {ev:?}");
                assert_eq!(of_type(&ev, "canceled").len(), 1, "round {round}: {ev:?}");
                let r = a.result(&p.id).await;
                assert_eq!((r.status, r.code()), (409, "canceled"), "round {round}");
            }
            "submitted" => {
                quorum_won += 1;
                assert_eq!(
                    (cancel.status, cancel.code()),
                    (409, "already_decided"),
                    "round {round}: {}",
                    cancel.body
                );
                assert_eq!(counted.len(), 2, "round {round}");
                let completing: Vec<&str> = votes
                    .iter()
                    .filter(|(_, r)| r.str("status") == "submitted")
                    .map(|(who, _)| *who)
                    .collect();
                assert_eq!(
                    completing.len(),
                    1,
                    "round {round}: exactly one vote completes the quorum: {} / {}",
                    alice.body,
                    bob.body
                );
                let first = if completing[0] == "alice" {
                    "bob"
                } else {
                    "alice"
                };
                let decided = of_type(&ev, "decided");
                assert_eq!(decided.len(), 1, "round {round}: {ev:?}");
                assert_eq!(
                    decided[0]["actor"],
                    format!("reviewer:{}", completing[0]),
                    "round {round}"
                );
                assert!(of_type(&ev, "canceled").is_empty(), "round {round}: {ev:?}");
                let r = a.result(&p.id).await;
                assert_eq!(r.status, 200, "round {round}: {}", r.body);
                assert_eq!(
                    r.body["decidedBy"],
                    json!([first, completing[0]]),
                    "round {round}"
                );
                let votes = r.body["votes"].as_array().expect("votes");
                let who: HashSet<&str> = votes
                    .iter()
                    .map(|v| v["reviewer"].as_str().unwrap_or(""))
                    .collect();
                assert_eq!(votes.len(), 2, "round {round}: {}", r.body);
                assert_eq!(who, HashSet::from(["alice", "bob"]), "round {round}");
            }
            other => panic!("round {round}: unexpected final status {other}"),
        }
    }
    eprintln!(
        "votes vs cancel: {quorum_won} rounds reached the quorum, {cancel_won} were canceled"
    );
}

/// Every answer the agent got, searched for links once the links are known.
#[derive(Default)]
struct Answers(Vec<(String, String)>);

impl Answers {
    fn rest(&mut self, what: &str, r: &Resp) {
        assert!(r.status < 500, "{what}: {} {}", r.status, r.body);
        self.0
            .push((what.to_string(), format!("{} {:?}", r.body, r.headers)));
    }
    fn mcp(&mut self, what: &str, r: &CallToolResult) {
        self.0
            .push((what.to_string(), serde_json::to_string(r).unwrap()));
    }
    fn text(&mut self, what: &str, text: String) {
        self.0.push((what.to_string(), text));
    }
    fn assert_no_link(&self, tokens: &[String]) {
        assert!(!tokens.is_empty());
        for (what, text) in &self.0 {
            assert!(
                !text.contains("/review/"),
                "{what} shows a review link: {text}"
            );
            for t in tokens {
                assert!(
                    !text.contains(t.as_str()),
                    "{what} shows a reviewer's token: {text}"
                );
            }
        }
    }
}

/// The review link each of `to` got by email, waiting for them: one invitation per address,
/// addressed to that address alone (follow-ups carry no link and are skipped).
async fn invites(sink: &SmtpSink, to: &[&str]) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut links = HashMap::new();
        for m in sink.mails() {
            let p = m.parsed();
            let text = p.body_text(0).map(|t| t.to_string()).unwrap_or_default();
            if !text.contains("/review/") {
                continue;
            }
            assert_eq!(
                m.rcpt_tos.len(),
                1,
                "a personal link goes to one person: {:?}",
                m.rcpt_tos
            );
            let prev = links.insert(m.rcpt_tos[0].clone(), crate::harness::smtp::link_in(&text));
            assert!(prev.is_none(), "two invitations for {}", m.rcpt_tos[0]);
        }
        if to.iter().all(|t| links.contains_key(*t)) {
            return links;
        }
        assert!(
            Instant::now() < deadline,
            "invitations so far: {links:?}; wanted {to:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn links_only_by_email_never_in_answers(kind: StoreKind) {
    let Some(sink) = SmtpSink::start(None) else {
        return;
    };
    let receiver = Receiver::start(vec![]).await;
    let smtp = sink.url(None);
    let f = Fixture::own(kind, 2, |c| mail_config(c, &smtp, |_| {})).await;
    let (a, b) = (f.acme(), f.other());
    let mut seen = Answers::default();

    // Created over REST (replayed by its idempotency key) and over MCP.
    let rest_body = json!({"message": "Rotate the production keys?", "context": {"env": "prod"},
        "reviewers": [{"id": "alice", "name": "Alice", "email": "alice@example.com"},
                      {"id": "bob", "email": "bob@example.com"}],
        "quorum": 2, "linkDelivery": "notify", "idempotencyKey": "rotate-1",
        "webhookUrl": receiver.url(), "webhookIncludeResult": true});
    let r = a.post("/v1/approvals", &rest_body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.get("reviewUrl").is_none(), "{}", r.body);
    assert_eq!(r.body["reviewers"], json!([{"id": "alice"}, {"id": "bob"}]));
    seen.rest("REST create", &r);
    let rest_id = r.str("elicitationId").to_string();
    let again = b.post("/v1/approvals", &rest_body).await;
    assert_eq!(
        again.body["elicitationId"],
        rest_id.as_str(),
        "{}",
        again.body
    );
    seen.rest("REST create (idempotent replay)", &again);
    let client = connect(&f.apps[0].base, ACME_KEY).await.unwrap();
    let r = call(
        &client,
        "elicit_approval",
        json!({"message": "Delete the old backups?", "context": {"older_than_days": 90},
            "reviewers": [{"id": "carol", "email": "carol@example.com"},
                          {"id": "dave", "name": "Dave", "email": "dave@example.com"}],
            "quorum": 2, "linkDelivery": "notify"}),
    )
    .await;
    let created = structured(&r).clone();
    assert!(created.get("reviewUrl").is_none(), "{created}");
    assert_eq!(
        created["reviewers"],
        json!([{"id": "carol"}, {"id": "dave"}])
    );
    seen.mcp("MCP elicit_approval", &r);
    let mcp_id = created["elicitationId"].as_str().unwrap().to_string();
    // Two more, to be canceled (REST, and MCP with another creating tool).
    let r = a
        .post(
            "/v1/approvals",
            &json!({"message": "Restart the cluster?", "context": 1, "linkDelivery": "notify",
                "reviewers": [{"id": "erin", "email": "erin@example.com"}]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    seen.rest("REST create (to cancel)", &r);
    let rest_cancel_id = r.str("elicitationId").to_string();
    let r = call(
        &client,
        "elicit_selection",
        json!({"message": "Which region fails over?", "options": [{"id": "eu"}, {"id": "us"}],
            "reviewers": [{"id": "frank", "email": "frank@example.com"}], "linkDelivery": "notify"}),
    )
    .await;
    seen.mcp("MCP elicit_selection", &r);
    let mcp_cancel_id = structured(&r)["elicitationId"]
        .as_str()
        .unwrap()
        .to_string();

    // The links arrive by email, each reviewer their own.
    let addresses = [
        "alice@example.com",
        "bob@example.com",
        "carol@example.com",
        "dave@example.com",
        "erin@example.com",
        "frank@example.com",
    ];
    let links = invites(&sink, &addresses).await;
    let bases: Vec<String> = f
        .apps
        .iter()
        .map(|app| format!("{}/review/", app.base))
        .collect();
    for (to, link) in &links {
        assert!(
            bases.iter().any(|base| link.starts_with(base.as_str())),
            "{to}: {link}"
        );
    }
    let token = |to: &str| token_of(&links[to]);
    let tokens: Vec<String> = addresses.iter().map(|&to| token(to)).collect();
    let distinct: HashSet<&String> = tokens.iter().collect();
    assert_eq!(
        distinct.len(),
        tokens.len(),
        "one link per reviewer: {links:?}"
    );

    // Cancel the two extra ones.
    let r = b.cancel(&rest_cancel_id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    seen.rest("REST cancel", &r);
    seen.rest("REST status (canceled)", &a.status(&rest_cancel_id).await);
    let r = call(
        &client,
        "elicit_cancel",
        json!({"elicitationId": mcp_cancel_id}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "canceled");
    seen.mcp("MCP elicit_cancel", &r);

    // Pending: status, await, audit, deliveries.
    for api in [&a, &b] {
        let s = api.status(&rest_id).await;
        assert_eq!(
            s.body["votes"],
            json!({"submitted": 0, "needed": 2}),
            "{}",
            s.body
        );
        seen.rest("REST status", &s);
    }
    let w = a.wait(&rest_id, 1).await;
    assert_eq!(w.str("status"), "pending");
    seen.rest("REST await", &w);
    seen.rest("REST audit", &a.audit(&rest_id).await);
    seen.rest(
        "REST deliveries",
        &a.get(&format!("/v1/elicitations/{rest_id}/deliveries"))
            .await,
    );
    let r = call(&client, "elicit_status", json!({"elicitationId": mcp_id})).await;
    assert_eq!(
        structured(&r)["votes"],
        json!({"submitted": 0, "needed": 2})
    );
    seen.mcp("MCP elicit_status", &r);
    let r = call(
        &client,
        "elicit_await",
        json!({"elicitationId": mcp_id, "waitSeconds": 1}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "pending");
    seen.mcp("MCP elicit_await (pending)", &r);

    // Decided through the emailed links: Alice looks, then votes; Bob completes the quorum.
    assert_eq!(get_page(&b, &token("alice@example.com")).await.status, 200);
    let v = b
        .decide(
            &token("alice@example.com"),
            json!({"decision": "submitted", "comment": "rotated keys before"}),
        )
        .await;
    assert_eq!((v.status, v.str("status")), (200, "pending"), "{}", v.body);
    seen.rest("REST status (one vote)", &a.status(&rest_id).await);
    seen.rest("REST audit (one vote)", &a.audit(&rest_id).await);
    let v = a
        .decide(&token("bob@example.com"), json!({"decision": "submitted"}))
        .await;
    assert_eq!(
        (v.status, v.str("status")),
        (200, "submitted"),
        "{}",
        v.body
    );
    seen.rest("REST await (decided)", &b.wait(&rest_id, 5).await);
    seen.rest("REST status (decided)", &a.status(&rest_id).await);
    let r = a.result(&rest_id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["decidedBy"], json!(["alice", "bob"]));
    seen.rest("REST result", &r);
    seen.rest("REST result (again)", &b.result(&rest_id).await);
    let ev = a.audit(&rest_id).await;
    assert!(
        of_type(ev.body["events"].as_array().unwrap(), "viewed")
            .iter()
            .any(|e| e["actor"] == "reviewer:alice"),
        "{}",
        ev.body
    );
    seen.rest("REST audit (decided)", &ev);
    for (to, last) in [
        ("carol@example.com", "pending"),
        ("dave@example.com", "submitted"),
    ] {
        let v = b.decide(&token(to), json!({"decision": "submitted"})).await;
        assert_eq!((v.status, v.str("status")), (200, last), "{to}: {}", v.body);
    }
    let r = call(
        &client,
        "elicit_await",
        json!({"elicitationId": mcp_id, "waitSeconds": 5}),
    )
    .await;
    assert_eq!(structured(&r)["status"], "submitted");
    seen.mcp("MCP elicit_await (decided)", &r);
    seen.mcp(
        "MCP elicit_status (decided)",
        &call(&client, "elicit_status", json!({"elicitationId": mcp_id})).await,
    );
    let r = call(&client, "elicit_result", json!({"elicitationId": mcp_id})).await;
    assert_eq!(structured(&r)["decidedBy"], json!(["carol", "dave"]));
    seen.mcp("MCP elicit_result", &r);
    seen.rest("REST audit (MCP request)", &a.audit(&mcp_id).await);

    // The agent's webhook events (with the result) carry no link either.
    let got = receiver.wait_for(2, Duration::from_secs(10)).await;
    for m in &got {
        seen.text(
            &format!("webhook {}", m.json()["type"]),
            format!("{} {:?}", m.body, m.headers),
        );
    }
    // Deliveries, and replaying the invitation: its answer shows no link.
    let d = a
        .get(&format!("/v1/elicitations/{rest_id}/deliveries"))
        .await;
    seen.rest("REST deliveries (decided)", &d);
    let invite = d.body["deliveries"].as_array().and_then(|d| {
        d.iter()
            .find(|x| x["channel"] == "email" && x["type"] == "elicitation.created")
            .cloned()
    });
    if let Some(invite) = invite {
        let did = invite["id"].as_str().unwrap();
        seen.rest(
            "REST replay",
            &a.post_empty(&format!(
                "/v1/elicitations/{rest_id}/deliveries/{did}/replay"
            ))
            .await,
        );
    }
    seen.assert_no_link(&tokens);
    client.cancel().await.ok();
}

/// `ELICITD_LINKS_BY_NOTIFICATION`: a tenant's links go only by email even when the agent does
/// not ask; other tenants are unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_can_be_held_to_links_by_email() {
    let Some(sink) = SmtpSink::start(None) else {
        return;
    };
    let smtp = sink.url(None);
    let f = Fixture::own(StoreKind::Memory, 1, |c| {
        mail_config(c, &smtp, |cli| {
            cli.links_by_notification = Some("acme".into())
        })
    })
    .await;
    let (acme, beta) = (f.acme(), f.beta());
    let body = |who: &str| {
        json!({"message": "Approve invoice 77?", "context": {"invoice": 77},
            "reviewers": [{"id": "alice", "email": format!("alice@{who}.example")},
                          {"id": "bob", "email": format!("bob@{who}.example")}]})
    };
    let r = acme.post("/v1/approvals", &body("acme")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.get("reviewUrl").is_none(), "{}", r.body);
    assert_eq!(r.body["reviewers"], json!([{"id": "alice"}, {"id": "bob"}]));
    assert!(!r.body.to_string().contains("/review/"), "{}", r.body);
    let id = r.str("elicitationId").to_string();
    let client = connect(&f.apps[0].base, ACME_KEY).await.unwrap();
    let r = call(
        &client,
        "elicit_approval",
        json!({"message": "Approve invoice 78?", "context": {"invoice": 78},
            "reviewers": [{"id": "carol", "email": "carol@acme.example"}]}),
    )
    .await;
    assert!(structured(&r).get("reviewUrl").is_none(), "{r:?}");
    assert!(
        !serde_json::to_string(&r).unwrap().contains("/review/"),
        "{r:?}"
    );
    client.cancel().await.ok();
    // The emailed link decides.
    let links = invites(
        &sink,
        &[
            "alice@acme.example",
            "bob@acme.example",
            "carol@acme.example",
        ],
    )
    .await;
    let d = acme
        .decide(
            &token_of(&links["alice@acme.example"]),
            json!({"decision": "submitted"}),
        )
        .await;
    assert_eq!(
        (d.status, d.str("status")),
        (200, "submitted"),
        "{}",
        d.body
    );
    let s = acme.status(&id).await;
    assert!(!s.body.to_string().contains("/review/"), "{}", s.body);

    // Beta still gets its links in the answer (and by email: the same links).
    let p = create_panel(&beta, "approval", body("beta")).await;
    let links = invites(&sink, &["alice@beta.example", "bob@beta.example"]).await;
    assert_eq!(token_of(&links["alice@beta.example"]), p.token("alice"));
    assert_eq!(token_of(&links["bob@beta.example"]), p.token("bob"));
}

/// Open the review page of `token` and check it fits a phone screen.
async fn open(b: &Browser, api: &Api, token: &str) {
    b.goto(&format!("{}/review/{token}", api.base)).await;
    let (viewport, page) = b.widths().await;
    assert_eq!(viewport, PHONE_WIDTH as u64, "phone viewport");
    assert_eq!(
        page, viewport,
        "the page must not scroll sideways at {PHONE_WIDTH}px"
    );
}

/// Wait until the first element matching `css` shows `want` (the next page may take a moment
/// after a press); its text.
async fn wait_for_text(b: &Browser, css: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = match b.client.find(Locator::Css(css)).await {
            Ok(el) => el.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains(want) {
            return text;
        }
        assert!(Instant::now() < deadline, "no {want:?} in {css}: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_two_reviewers_approve_in_turn() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let p = create_panel(
        &api,
        "approval",
        json!({"title": "Release 4.2", "message": "Ship release 4.2 to every customer?",
            "context": {"release": "4.2", "changes": 37},
            "reviewers": [{"id": "alice", "name": "Alice"}, {"id": "bob", "name": "Bob"}],
            "quorum": 2}),
    )
    .await;
    let Some(b) = Browser::start("browser_two_reviewers_approve_in_turn").await else {
        return;
    };
    let started = Instant::now();
    let waiter = await_in_background(&api, &p.id, 20);

    // Alice approves first: her vote is recorded, the request stays pending.
    open(&b, &api, p.token("alice")).await;
    assert_eq!(b.text("h1").await, "Release 4.2");
    b.fill("Comment", "Release notes checked").await;
    b.screenshot("reviewers-alice").await;
    b.press("Approve", "body").await;
    let shown = wait_for_text(&b, "body", "You have voted").await;
    assert!(shown.contains("1 of 2 approvals so far"), "{shown}");
    assert_eq!(b.count("button[name=decision]").await, 0);
    assert_eq!(b.count("form").await, 0);
    b.screenshot("reviewers-alice-voted").await;
    // Reloading her page shows the same: her vote, no controls.
    open(&b, &api, p.token("alice")).await;
    assert!(b.text("body").await.contains("You have voted"));
    assert_eq!(b.count("button[name=decision]").await, 0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !waiter.is_finished(),
        "the agent's await woke on the first of two approvals"
    );
    let s = api.status(&p.id).await;
    assert_eq!(s.str("status"), "pending");
    assert_eq!(s.body["votes"], json!({"submitted": 1, "needed": 2}));

    // Bob sees the count and Alice's vote, and approves: that decides, and the agent wakes.
    open(&b, &api, p.token("bob")).await;
    let votes = b.text("#votes").await;
    assert!(
        votes.contains("1 of 2 approvals so far") && votes.contains("Alice"),
        "{votes}"
    );
    assert_eq!(b.count("button[name=decision]").await, 2);
    b.screenshot("reviewers-bob").await;
    let bob_pressed = started.elapsed();
    b.press("Approve", "body").await;
    wait_for_text(&b, "h1", "Decision recorded").await;
    let (w, took) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the agent's await woke within 5 s of the second approval")
        .unwrap();
    assert_eq!(
        (w.status, w.str("status")),
        (200, "submitted"),
        "{}",
        w.body
    );
    assert!(
        took + Duration::from_millis(50) >= bob_pressed,
        "woke at {took:?}, before Bob's approval at {bob_pressed:?}"
    );
    // Alice's page has nothing to press any more either.
    open(&b, &api, p.token("alice")).await;
    assert_eq!(b.count("button[name=decision]").await, 0);
    b.close().await;

    let r = api.result(&p.id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["decision"], "submitted");
    assert_eq!(r.body["decidedBy"], json!(["alice", "bob"]));
    assert_eq!(r.body["votes"][0]["comment"], "Release notes checked");
}
