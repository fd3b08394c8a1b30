//! The review page over plain HTTP: safety (GET side-effect free, CSRF, cross-site refusal,
//! headers, 404 without details), validation messages, terminal states. Escaping is in
//! `review_escaping`.

use std::time::Duration;

use reqwest::header::HeaderMap;
use scraper::{Html, Selector};
use serde_json::{json, Value};

use crate::{
    every_store,
    harness::{Api, Fixture, StoreKind},
};

every_store!(
    get_is_side_effect_free_but_for_a_viewed_event,
    posts_need_a_valid_form_token,
    cross_site_posts_are_refused,
    invalid_input_rerenders_with_messages_and_records_nothing,
    terminal_states_show_no_controls,
);

/// One HTML answer.
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub html: String,
}

impl Page {
    /// Texts of every element matching `css`.
    pub fn texts(&self, css: &str) -> Vec<String> {
        let doc = Html::parse_document(&self.html);
        let sel = Selector::parse(css).expect("selector");
        doc.select(&sel)
            .map(|e| e.text().collect::<String>().trim().to_string())
            .collect()
    }
    /// `attr` of every element matching `css`.
    pub fn attrs(&self, css: &str, attr: &str) -> Vec<String> {
        let doc = Html::parse_document(&self.html);
        let sel = Selector::parse(css).expect("selector");
        doc.select(&sel)
            .filter_map(|e| e.value().attr(attr).map(str::to_string))
            .collect()
    }
    pub fn csrf(&self) -> String {
        self.attrs("input[name=csrf]", "value")
            .pop()
            .unwrap_or_else(|| panic!("no csrf field in {}", self.html))
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// A browser-less reviewer: no redirects followed, no API key.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

async fn page_of(r: reqwest::Response) -> Page {
    Page {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        html: r.text().await.expect("body"),
    }
}

pub async fn get_page(api: &Api, token: &str) -> Page {
    page_of(
        http()
            .get(format!("{}/review/{token}", api.base))
            .send()
            .await
            .expect("get"),
    )
    .await
}

/// POST `pairs` as a form, with extra headers.
pub async fn post_form(
    api: &Api,
    token: &str,
    pairs: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Page {
    let mut rb = http()
        .post(format!("{}/review/{token}", api.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(pairs).expect("encode"));
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    page_of(rb.send().await.expect("post")).await
}

/// What a browser on the page sends: its form token plus `pairs`.
pub async fn submit(api: &Api, token: &str, pairs: &[(&str, &str)]) -> Page {
    let csrf = get_page(api, token).await.csrf();
    let mut all = vec![("csrf", csrf.as_str())];
    all.extend_from_slice(pairs);
    post_form(
        api,
        token,
        &all,
        &[("sec-fetch-site", "same-origin"), ("origin", "null")],
    )
    .await
}

async fn audit_types(api: &Api, id: &str) -> Vec<String> {
    let a = api.audit(id).await;
    a.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn get_is_side_effect_free_but_for_a_viewed_event(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    for _ in 0..3 {
        let p = get_page(&api, &c.token).await;
        assert_eq!(p.status, 200);
    }
    // Scanners also send HEAD and query strings.
    let head = http()
        .head(format!("{}/review/{}?utm=x", api.base, c.token))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(api.status_of(&c.id).await, "pending");
    assert_eq!(
        audit_types(&api, &c.id).await,
        ["created", "viewed", "viewed", "viewed", "viewed"]
    );
    let audit = api.audit(&c.id).await;
    assert_eq!(audit.body["events"][1]["actor"], "reviewer");
    // A wrong token changes nothing anywhere.
    let forged = "A".repeat(43);
    assert_eq!(get_page(&api, &forged).await.status, 404);
    assert_eq!(audit_types(&api, &c.id).await.len(), 5);
}

async fn posts_need_a_valid_form_token(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let other = api.approval().await;
    let other_csrf = get_page(&api, &other.token).await.csrf();
    let stale = elicitd::review::csrf::issue(
        &f.apps[0].service.config().secret,
        &c.token,
        chrono::Utc::now().timestamp() - elicitd::review::csrf::TOKEN_TTL_SECS - 1,
    );
    let same = [("sec-fetch-site", "same-origin")];
    for (what, csrf) in [
        ("missing", None),
        ("garbage", Some("123.abc")),
        ("another request's", Some(other_csrf.as_str())),
    ] {
        let mut pairs = vec![("decision", "submitted")];
        if let Some(t) = csrf {
            pairs.push(("csrf", t));
        }
        let p = post_form(&api, &c.token, &pairs, &same).await;
        assert_eq!(p.status, 403, "{what} token");
        assert_eq!(p.texts("h1"), ["Request refused"], "{what} token");
        assert!(p.texts("form").is_empty());
    }
    // A genuine but stale token: the form comes back, values kept, fresh token, nothing recorded.
    let p = post_form(
        &api,
        &c.token,
        &[
            ("csrf", &stale),
            ("decision", "submitted"),
            ("comment", "kept"),
        ],
        &same,
    )
    .await;
    assert_eq!(p.status, 403);
    assert!(p.texts(".alert").concat().contains("open for a long time"));
    assert_eq!(p.texts("textarea#comment"), ["kept"]);
    assert_ne!(p.csrf(), stale);
    assert_eq!(api.status_of(&c.id).await, "pending");
    assert!(!audit_types(&api, &c.id)
        .await
        .contains(&"decided".to_string()));

    let ok = submit(&api, &c.token, &[("decision", "submitted")]).await;
    assert_eq!(ok.status, 303);
    // Relative to /review/<token>: the same page, now showing the decision.
    assert_eq!(ok.header("location"), c.token);
    assert_eq!(api.status_of(&c.id).await, "submitted");
}

async fn cross_site_posts_are_refused(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let csrf = get_page(&api, &c.token).await.csrf();
    let pairs = [("csrf", csrf.as_str()), ("decision", "submitted")];
    for headers in [
        &[("sec-fetch-site", "cross-site")][..],
        &[("sec-fetch-site", "same-site")],
        &[("origin", "https://evil.example")],
        &[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "same-origin"),
        ],
        &[("origin", "null"), ("sec-fetch-site", "cross-site")],
    ] {
        let p = post_form(&api, &c.token, &pairs, headers).await;
        assert_eq!(p.status, 403, "{headers:?}");
        assert!(p
            .texts("p")
            .concat()
            .contains("not sent from the review page"));
    }
    assert_eq!(api.status_of(&c.id).await, "pending");
    assert!(!audit_types(&api, &c.id)
        .await
        .contains(&"decided".to_string()));
    // Our own origin passes.
    let p = post_form(
        &api,
        &c.token,
        &pairs,
        &[("origin", &api.base), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(p.status, 303);
    assert_eq!(api.status_of(&c.id).await, "submitted");
}

async fn invalid_input_rerenders_with_messages_and_records_nothing(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let form = api
        .create("approval", json!({"message": "m", "requestedSchema": {"type": "object",
            "required": ["email", "nights"], "properties": {
                "email": {"type": "string", "format": "email", "title": "Email"},
                "nights": {"type": "integer", "minimum": 1, "maximum": 14, "title": "Nights"},
                "budget": {"type": "number", "title": "Budget"},
                "when": {"type": "string", "format": "date-time", "title": "When"},
                "extras": {"type": "array", "title": "Extras", "maxItems": 1, "items": {"enum": ["a", "b"]}}}}}))
        .await;
    let p = submit(
        &api,
        &form.token,
        &[
            ("decision", "submitted"),
            ("f0", "not-an-email"),
            ("f1", "30"),
            ("f2", "lots"),
            ("f3", "2025-13-01T10:00"),
            ("f4", "0"),
            ("f4", "1"),
            ("comment", "c".repeat(2001).as_str()),
        ],
    )
    .await;
    assert_eq!(p.status, 422);
    let field_errors = p.texts(".field.invalid .error");
    for want in [
        "valid email address",
        "at most 14",
        "Must be a number",
        "valid date and time",
        "Choose at most 1",
        "2000 characters",
    ] {
        assert!(
            field_errors.iter().any(|e| e.contains(want)),
            "{want:?} not in {field_errors:?}"
        );
    }
    assert_eq!(
        p.texts(".alert li").len(),
        6,
        "one summary line per problem"
    );
    assert_eq!(p.attrs("#f0", "value"), ["not-an-email"]);
    assert_eq!(p.attrs("#f1", "value"), ["30"]);
    assert_eq!(p.attrs("#f3", "value"), ["2025-13-01T10:00"]);
    assert_eq!(p.attrs("input[name=f4][checked]", "value"), ["0", "1"]);
    assert_eq!(p.attrs("#f0", "aria-invalid"), ["true"]);
    let missing = submit(
        &api,
        &form.token,
        &[("decision", "submitted"), ("f0", "a@b.co")],
    )
    .await;
    assert_eq!(missing.status, 422);
    assert_eq!(
        missing.texts(".field.invalid .error"),
        ["This field is required."]
    );
    assert_eq!(api.status_of(&form.id).await, "pending");
    assert!(!audit_types(&api, &form.id)
        .await
        .contains(&"decided".to_string()));
    // The fixed form is recorded with typed values (datetime-local read as UTC).
    let ok = submit(
        &api,
        &form.token,
        &[
            ("decision", "submitted"),
            ("f0", "a@b.co"),
            ("f1", "3"),
            ("f2", "12.5"),
            ("f3", "2025-12-01T10:00"),
            ("f4", "1"),
        ],
    )
    .await;
    assert_eq!(ok.status, 303);
    let r = api.result(&form.id).await;
    assert_eq!(
        r.body["formSubmission"],
        json!({"email": "a@b.co", "nights": 3, "budget": 12.5,
        "when": "2025-12-01T10:00:00Z", "extras": ["b"]})
    );

    let sel = api
        .create(
            "selection",
            json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "minSelections": 2, "maxSelections": 2}),
        )
        .await;
    let p = submit(&api, &sel.token, &[("decision", "submitted"), ("sel", "0")]).await;
    assert_eq!(p.status, 422);
    assert_eq!(p.texts(".field.invalid .error"), ["Choose exactly 2."]);
    assert_eq!(p.attrs("input[name=sel][checked]", "value"), ["0"]);

    let prop = api
        .create("proposal", json!({"message": "m", "proposal": {"t": "x", "n": 1, "s": "out"},
            "requestedSchema": {"type": "object", "required": ["t"], "properties": {"t": {"type": "string"}}}}))
        .await;
    let p = submit(
        &api,
        &prop.token,
        &[("decision", "submitted"), ("k1", "1"), ("p1", "one")],
    )
    .await;
    assert_eq!(p.status, 422);
    let errs = p.texts(".field.invalid .error");
    assert!(
        errs.contains(&"This field is required and cannot be dropped.".to_string()),
        "{errs:?}"
    );
    assert!(errs.contains(&"Must be a number.".to_string()), "{errs:?}");
    assert!(
        p.attrs("input[name=k2][checked]", "value").is_empty(),
        "exclusion kept"
    );
    assert_eq!(p.attrs("input[name=k1][checked]", "value"), ["1"]);
    assert_eq!(p.attrs("#p1", "value"), ["one"]);
    for c in [&sel, &prop] {
        assert_eq!(api.status_of(&c.id).await, "pending");
    }
}

async fn terminal_states_show_no_controls(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let no_controls = |p: &Page| {
        assert!(
            p.texts("form").is_empty()
                && p.texts("button").is_empty()
                && p.texts("input").is_empty(),
            "{}",
            p.html
        );
    };
    // Decided (submitted, then consumed) and declined.
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "labels": {"decline": "Nope"}}),
        )
        .await;
    let csrf = get_page(&api, &c.token).await.csrf();
    let p = submit(
        &api,
        &c.token,
        &[("decision", "declined"), ("comment", "no")],
    )
    .await;
    assert_eq!(p.status, 303);
    let p = get_page(&api, &c.token).await;
    assert_eq!(
        (p.status, p.texts("h1")),
        (200, vec!["Decision recorded".to_string()])
    );
    assert!(p.texts("p").concat().contains("“Nope”"));
    no_controls(&p);
    let again = post_form(
        &api,
        &c.token,
        &[("csrf", &csrf), ("decision", "submitted")],
        &[],
    )
    .await;
    assert_eq!(
        (again.status, again.texts("h1")),
        (409, vec!["Decision recorded".to_string()])
    );
    no_controls(&again);
    assert_eq!(api.result(&c.id).await.body["comment"], "no");
    let p = get_page(&api, &c.token).await;
    assert!(p.texts("p").concat().contains("requester has received it"));

    // Withdrawn.
    let c = api.approval().await;
    let csrf = get_page(&api, &c.token).await.csrf();
    assert_eq!(api.cancel(&c.id).await.status, 200);
    let p = get_page(&api, &c.token).await;
    assert_eq!(p.texts("h1"), ["Request withdrawn"]);
    assert!(p.texts("p").concat().contains("withdrawn by the requester"));
    no_controls(&p);
    let p = post_form(
        &api,
        &c.token,
        &[("csrf", &csrf), ("decision", "submitted")],
        &[],
    )
    .await;
    assert_eq!(
        (p.status, p.texts("h1")),
        (409, vec!["Request withdrawn".to_string()])
    );
    assert_eq!(api.status_of(&c.id).await, "canceled");

    // Expired.
    let c = api
        .create(
            "approval",
            json!({"message": "m", "context": 1, "expiresInSeconds": 1}),
        )
        .await;
    let page = get_page(&api, &c.token).await;
    assert!(page.texts("#countdown")[0].ends_with(" s"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let p = get_page(&api, &c.token).await;
    assert_eq!(p.texts("h1"), ["Request expired"]);
    no_controls(&p);
    let p = post_form(
        &api,
        &c.token,
        &[("csrf", &page.csrf()), ("decision", "submitted")],
        &[],
    )
    .await;
    assert_eq!(
        (p.status, p.texts("h1")),
        (410, vec!["Request expired".to_string()])
    );
    assert_eq!(api.status_of(&c.id).await, "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_get_a_bare_404_page() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let mut shown = Vec::new();
    for token in [
        "A".repeat(43),
        "short".into(),
        "%3Cscript%3E".into(),
        format!("{}x", c.token),
    ] {
        let p = get_page(&api, &token).await;
        assert_eq!(p.status, 404, "{token}");
        assert!(p.header("content-type").starts_with("text/html"));
        assert_eq!(p.header("cache-control"), "no-store");
        assert!(p
            .header("content-security-policy")
            .contains("frame-ancestors 'none'"));
        assert!(
            !p.html.contains("not_found") && !p.html.contains("<script>"),
            "{}",
            p.html
        );
        assert!(!p.html.contains(&c.token) && !p.html.contains("Back to the request"));
        shown.push(p.html);
        let post = post_form(&api, &token, &[("decision", "submitted")], &[]).await;
        assert_eq!(post.status, 404);
    }
    shown.dedup();
    assert_eq!(shown.len(), 1, "every wrong token gets the same page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_carry_strict_headers_and_no_inline_code() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let p = get_page(&api, &c.token).await;
    let csp = p.header("content-security-policy");
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(p.header("referrer-policy"), "no-referrer");
    assert_eq!(p.header("x-content-type-options"), "nosniff");
    assert_eq!(p.header("cache-control"), "no-store");
    assert_eq!(p.header("content-type"), "text/html; charset=utf-8");
    // No inline script, no inline style, no external asset: CSP would block them anyway.
    let scripts = p.attrs("script", "src");
    assert_eq!(scripts.len(), p.texts("script").len());
    assert!(p.texts("style").is_empty() && p.attrs("[style]", "style").is_empty());
    let css = p.attrs("link[rel=stylesheet]", "href");
    for (url, ctype) in [
        (&css[0], "text/css; charset=utf-8"),
        (&scripts[0], "text/javascript; charset=utf-8"),
    ] {
        assert!(url.starts_with("static/"), "{url}");
        let r = http()
            .get(format!("{}/review/{url}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{url}");
        let h = |n: &str| r.headers()[n].to_str().unwrap().to_string();
        assert_eq!(h("content-type"), ctype);
        assert_eq!(h("cache-control"), "public, max-age=31536000, immutable");
        assert_eq!(h("x-content-type-options"), "nosniff");
    }
    let missing = http()
        .get(format!("{}/review/static/nope.js", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // Every control is labelled; the buttons are buttons.
    let labelled: Vec<String> = p.attrs("label[for]", "for");
    for id in p.attrs("input:not([type=hidden]), textarea, select", "id") {
        assert!(labelled.contains(&id), "{id} has no label");
    }
    assert_eq!(p.texts("button[type=submit]"), ["Approve", "Decline"]);
}

/// The JSON decision route keeps working next to the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_route_and_page_agree() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let c = api.approval().await;
    let d = api.decide(&c.token, json!({"decision": "declined"})).await;
    assert_eq!(d.status, 200);
    let p = get_page(&api, &c.token).await;
    assert!(p.texts("p").concat().contains("“Decline”"));
    let _: Value = api.result(&c.id).await.body;
}

/// What a browser would post for the form as rendered (no edits), pressing `button`.
fn as_rendered(p: &Page, button: &str) -> Vec<(String, String)> {
    let doc = Html::parse_document(&p.html);
    let sel = Selector::parse("form input, form textarea, form select").unwrap();
    let mut pairs = Vec::new();
    for el in doc.select(&sel) {
        let v = el.value();
        let (Some(name), false) = (v.attr("name"), v.attr("disabled").is_some()) else {
            continue;
        };
        let value = match (v.name(), v.attr("type")) {
            ("textarea", _) => el.text().collect(),
            ("select", _) => {
                let opt = Selector::parse("option[selected]").unwrap();
                match el.select(&opt).next() {
                    Some(o) => o.value().attr("value").unwrap_or("").to_string(),
                    None => continue,
                }
            }
            (_, Some("checkbox" | "radio")) if v.attr("checked").is_none() => continue,
            _ => v.attr("value").unwrap_or("").to_string(),
        };
        pairs.push((name.to_string(), value));
    }
    pairs.push(("decision".into(), button.into()));
    pairs
}

/// Every visible control has a `<label for>`.
fn assert_labelled(p: &Page) {
    let labelled = p.attrs("label[for]", "for");
    for id in p.attrs("input:not([type=hidden]), textarea, select", "id") {
        assert!(labelled.contains(&id), "{id} has no label");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untouched_forms_post_back_exactly_what_was_shown() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let proposal = json!({"lead": "\n  starts with a line break", "big": 12345678901234567890u64,
        "neg": -3, "frac": 0.1, "yes": true, "no": false, "list": ["x", "y z"], "empty": "",
        "multi": "a\nb", "choice": "b", "when": "2025-01-31T14:30:00Z"});
    let c = api
        .create(
            "proposal",
            json!({"message": "m", "proposal": proposal,
            "requestedSchema": {"type": "object", "properties": {
                "choice": {"type": "string", "enum": ["a", "b"]},
                "when": {"type": "string", "format": "date-time"}}}}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_labelled(&p);
    let mut pairs = as_rendered(&p, "submitted");
    pairs.retain(|(k, _)| k != "csrf");
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = submit(&api, &c.token, &pairs).await;
    assert_eq!(r.status, 303, "{}", r.html);
    let r = api.result(&c.id).await;
    assert_eq!(r.body["values"], proposal, "types and values round-trip");

    let defaults = json!({"t": "hello", "n": 4, "x": 2.5, "b": true, "c": "y", "m": ["q"],
        "d": "2025-02-03", "dt": "2025-02-03T04:05:06Z"});
    let c = api
        .create("approval", json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "t": {"type": "string", "default": "hello"}, "n": {"type": "integer", "default": 4},
            "x": {"type": "number", "default": 2.5}, "b": {"type": "boolean", "default": true},
            "c": {"type": "string", "enum": ["x", "y"], "default": "y"},
            "m": {"type": "array", "items": {"enum": ["p", "q"]}, "default": ["q"]},
            "d": {"type": "string", "format": "date", "default": "2025-02-03"},
            "dt": {"type": "string", "format": "date-time", "default": "2025-02-03T04:05:06Z"},
            "blank": {"type": "string"}, "pick": {"type": "string", "enum": ["1", "2", "3", "4", "5", "6", "7"]}}}}))
        .await;
    let p = get_page(&api, &c.token).await;
    assert_labelled(&p);
    let mut pairs = as_rendered(&p, "submitted");
    pairs.retain(|(k, _)| k != "csrf");
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(submit(&api, &c.token, &pairs).await.status, 303);
    let r = api.result(&c.id).await;
    assert_eq!(
        r.body["formSubmission"], defaults,
        "defaults pre-filled; empty optional = absent"
    );

    let c = api
        .create(
            "selection",
            json!({"message": "m", "options": [{"id": "a", "label": "A"}, {"id": "b"}]}),
        )
        .await;
    assert_labelled(&get_page(&api, &c.token).await);
}
