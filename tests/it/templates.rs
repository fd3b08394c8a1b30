//! Display templates and requester CSS (`displayTemplate`, `rowTemplate`, `hoverTemplate`,
//! `css`) over real HTTP and MCP: checked at create (422 with line and column, 413 over the
//! size limit), rendered escaped and sanitized, scoped CSS allowed by a CSP nonce, bombs and
//! runtime failures shown as the default view, and decisions through a templated page. The
//! same pages in Chromium are in `review_browser`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{
    harness::{Api, Fixture, StoreKind},
    mcp::{call, connect, error_text, structured},
    review_page::{get_page, submit, Page},
};

/// An order with line items, and a template that shows them as a table.
pub fn order_context() -> Value {
    json!({"order": "A-1042", "currency": "EUR", "lines": [
        {"sku": "KB-01", "name": "Keyboard <b>pro</b>", "qty": 2, "price": 49.5},
        {"sku": "MS-07", "name": "Mouse & pad", "qty": 1, "price": 19.9}
    ]})
}

pub const ORDER_TEMPLATE: &str = "<h3>Order {{ context.order }}</h3>\
<table class=\"lines\"><thead><tr><th>Item</th><th>Qty</th><th>Price</th></tr></thead><tbody>\
{% for l in context.lines %}<tr><td>{{ l.name }}</td><td>{{ l.qty }}</td>\
<td>{{ l.price | times: l.qty }} {{ context.currency }}</td></tr>{% endfor %}</tbody></table>\
<p>{{ context.lines | size }} lines</p>";

async fn create_raw(api: &Api, kind: &str, body: Value) -> crate::harness::Resp {
    api.post(&format!("/v1/{kind}s"), &body).await
}

fn table_cells(p: &Page) -> Vec<String> {
    p.texts(".tpl-scope.display table.lines tbody td")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_templates_are_refused_at_create_with_line_and_column() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let bad = [
        (
            "approval",
            json!({"message": "m", "context": {}, "displayTemplate": "<p>ok</p>\n<p>{{ context.a | nosuchfilter }}</p>"}),
            "displayTemplate",
            "line 2, column",
        ),
        (
            "approval",
            json!({"message": "m", "context": {}, "displayTemplate": "{% if context.a %}open"}),
            "displayTemplate",
            "line 1",
        ),
        (
            "approval",
            json!({"message": "m", "context": {}, "displayTemplate": "{% nosuchtag %}"}),
            "displayTemplate",
            "nosuchtag",
        ),
        (
            "selection",
            json!({"message": "m", "options": [{"id": "a"}], "rowTemplate": "<p>{{ option.id }}</p>"}),
            "rowTemplate",
            "<td>",
        ),
        (
            "selection",
            json!({"message": "m", "options": [{"id": "a"}], "hoverTemplate": "{{ option.id | }}"}),
            "hoverTemplate",
            "line 1",
        ),
        (
            "proposal",
            json!({"message": "m", "proposal": {"a": "b"}, "css": "td { color: red }\n@import url(https://evil.example/x.css);"}),
            "css",
            "line 2",
        ),
        (
            "selection",
            json!({"message": "m", "options": [{"id": "a"}], "css": "td { background: url(https://evil.example/x.png) }"}),
            "css",
            "url",
        ),
        (
            "approval",
            json!({"message": "m", "context": {}, "css": "div { position: fixed; inset: 0 }"}),
            "css",
            "position",
        ),
    ];
    for (kind, body, field, says) in bad {
        let r = create_raw(&api, kind, body.clone()).await;
        assert_eq!(r.status, 422, "{body}: {}", r.body);
        assert_eq!(r.code(), "invalid_request");
        let d = &r.body["error"]["details"][0];
        assert_eq!(d["field"], field, "{}", r.body);
        assert!(
            d["message"].as_str().unwrap().contains(says),
            "{body}: {}",
            r.body
        );
    }
    // Over the size limit: 413, like an oversized context; at the limit: created.
    let limit = 32 * 1024;
    let filler = |n: usize| format!("<p>{}</p>", "x".repeat(n - 7));
    let r = create_raw(
        &api,
        "approval",
        json!({"message": "m", "context": {}, "displayTemplate": filler(limit + 1)}),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.code(), "payload_too_large");
    let r = create_raw(
        &api,
        "approval",
        json!({"message": "m", "context": {}, "displayTemplate": filler(limit)}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = create_raw(
        &api,
        "selection",
        json!({"message": "m", "options": [{"id": "a"}], "css": format!("td{{color:red}}{}", " ".repeat(16 * 1024))}),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.body);
    // Selection-only templates on another kind: a field rule (400), like any foreign field.
    let r = create_raw(
        &api,
        "approval",
        json!({"message": "m", "context": {}, "rowTemplate": "<td>x</td>"}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["details"][0]["field"], "rowTemplate");

    // MCP: the same check, as a tool error the model can act on; a good one is created.
    let mcp = connect(&f.apps[0].base, crate::harness::ACME_KEY)
        .await
        .unwrap();
    let r = call(
        &mcp,
        "elicit_approval",
        json!({"message": "m", "context": {"a": 1}, "displayTemplate": "{{ context.a | nosuchfilter }}"}),
    )
    .await;
    let text = error_text(&r);
    assert!(
        text.contains("displayTemplate") && text.contains("line 1, column"),
        "{text}"
    );
    let r = call(
        &mcp,
        "elicit_selection",
        json!({"message": "Pick", "options": [{"id": "a", "price": 3}],
            "rowTemplate": "<td>{{ option.id }}</td><td>{{ option.price }}</td>",
            "hoverTemplate": "<p>{{ option.price }}</p>", "css": "td { color: red }"}),
    )
    .await;
    let token = structured(&r)["reviewUrl"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let p = get_page(&api, &token).await;
    assert_eq!(
        p.texts("tr.option td:not(.pick):not(.more)"),
        ["a", "3"],
        "{}",
        p.html
    );
    mcp.cancel().await.unwrap();
}

// On the memory store and on Redis: the templates round-trip through the stored spec.
crate::on_stores!(
    on_memory,
    Memory,
    templated_approval_is_escaped_sanitized_and_framed,
    templated_selection_rows_cards_and_css_decide_by_position
);
crate::on_stores!(
    on_redis,
    Redis,
    templated_approval_is_escaped_sanitized_and_framed,
    templated_selection_rows_cards_and_css_decide_by_position
);

async fn templated_approval_is_escaped_sanitized_and_framed(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let hostile = format!(
        "{ORDER_TEMPLATE}<script>window.pwned = 1</script>\
<img src=\"https://evil.example/x.png\" onerror=\"window.pwned = 2\">\
<a href=\"javascript:alert(1)\" onclick=\"x()\">link text</a>\
<form action=\"https://evil.example\"><button>Approve</button></form>\
<div style=\"position:fixed;inset:0\" class=\"primary\">{{{{ context.order }}}}</div>\
<iframe src=\"https://evil.example\"></iframe>"
    );
    let c = api
        .create(
            "approval",
            json!({"title": "Ship order A-1042", "message": "Ship it?", "context": order_context(),
                "displayTemplate": hostile, "css": ".lines td { color: rgb(200, 0, 0) } button { display: none }"}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_eq!(p.status, 200);
    // The template's table, with the context's values escaped and filters on the raw values.
    assert_eq!(
        table_cells(&p),
        [
            "Keyboard <b>pro</b>",
            "2",
            "99 EUR",
            "Mouse & pad",
            "1",
            "19.9 EUR"
        ]
    );
    assert_eq!(
        p.texts(".tpl-scope.display h3"),
        ["Order A-1042"],
        "{}",
        p.html
    );
    assert_eq!(p.texts(".tpl-scope.display p"), ["2 lines"]);
    let display = scraper::Html::parse_fragment(&p.html);
    let sel = scraper::Selector::parse(".tpl-scope.display").unwrap();
    let inner = display.select(&sel).next().unwrap().inner_html();
    for gone in [
        "<script",
        "onerror",
        "onclick",
        "javascript:",
        "evil.example",
        "<form",
        "<button",
        "<iframe",
        "style=",
        "<a ",
    ] {
        assert!(!inner.contains(gone), "{gone} survived: {inner}");
    }
    assert!(inner.contains("&lt;b&gt;pro&lt;/b&gt;"), "{inner}");
    // The only scripts are the page's own; the only style block carries the CSP's nonce.
    assert_eq!(p.attrs("script", "src").len(), p.texts("script").len());
    let nonce = p.attrs("style", "nonce");
    assert_eq!(nonce.len(), 1, "{}", p.html);
    let csp = p.header("content-security-policy");
    assert!(
        csp.contains(&format!("style-src 'self' 'nonce-{}'", nonce[0])),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("script-src 'self';"), "{csp}");
    // Every selector is scoped to the template boxes: `button` cannot reach the real buttons.
    let css = p.texts("style").pop().unwrap();
    assert!(
        css.contains(".tpl-scope .lines td") && css.contains(".tpl-scope button"),
        "{css}"
    );
    // A fresh nonce per response.
    let again = get_page(&api, &c.token).await;
    assert_ne!(again.attrs("style", "nonce"), nonce);
    // The frame, and the raw data one click away.
    assert_eq!(
        p.texts(".from-requester .provenance"),
        ["The content below was provided by the requester."]
    );
    let raw = p.texts(".from-requester details.raw pre").pop().unwrap();
    assert!(raw.contains("\"name\": \"Keyboard <b>pro</b>\""), "{raw}");
    assert!(p.texts(".layout-notice").is_empty());
    // The real buttons are outside the frame and unchanged.
    assert_eq!(
        p.texts("form.decide .actions button"),
        ["Approve", "Decline"]
    );
    assert_eq!(p.texts(".from-requester button").len(), 0);

    // Decided through the templated page like any other.
    let done = submit(&api, &c.token, &[("decision", "submitted")]).await;
    assert_eq!(done.status, 303, "{}", done.html);
    let r = api.result(&c.id).await;
    assert_eq!(r.body["decision"], "submitted");
}

async fn templated_selection_rows_cards_and_css_decide_by_position(kind: StoreKind) {
    let f = Fixture::new(kind, 1).await;
    let api = f.acme();
    let options: Vec<Value> = (0..5)
        .map(|i| {
            json!({"id": format!("plan-{i}"), "label": format!("Plan {i}"), "price": 10 * i,
            "features": ["a", "b"], "note": format!("<i>n{i}</i>")})
        })
        .collect();
    let c = api
        .create(
            "selection",
            json!({"message": "Pick plans", "options": options, "maxSelections": 2,
                "context": {"currency": "€"},
                "rowTemplate": "<td class=\"name\">{{ option.label }}</td><td>{{ context.currency }}{{ option.price }}</td>",
                "hoverTemplate": "<p>{{ option.note }}</p><ul>{% for x in option.features %}<li>{{ x | upcase }}</li>{% endfor %}</ul>",
                "css": "td.name { font-weight: bold }"}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_eq!(p.status, 200);
    assert_eq!(p.texts("table.options tr.option").len(), 5);
    assert_eq!(
        p.texts("tr.option td.name"),
        ["Plan 0", "Plan 1", "Plan 2", "Plan 3", "Plan 4"]
    );
    assert_eq!(p.texts("tr.option td:nth-child(3)")[2], "€20");
    // Inputs by position, named by the option's label for assistive technology.
    assert_eq!(
        p.attrs("tr.option .pick input", "value"),
        ["0", "1", "2", "3", "4"]
    );
    assert_eq!(p.attrs("tr.option .pick input", "aria-label")[1], "Plan 1");
    assert_eq!(p.attrs("tr.option .pick input", "type"), ["checkbox"; 5]);
    // A details card per option, escaped.
    let cards = p.texts("tr.option details.card .card-body");
    assert_eq!(cards.len(), 5);
    assert!(
        cards[3].contains("<i>n3</i>") && cards[3].contains("AB"),
        "{}",
        cards[3]
    );
    assert_eq!(
        p.texts("tr.option details.card summary")[0],
        "Details about Plan 0"
    );
    assert_eq!(p.attrs("style", "nonce").len(), 1);

    let done = submit(
        &api,
        &c.token,
        &[("sel", "1"), ("sel", "4"), ("decision", "submitted")],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.html);
    let r = api.result(&c.id).await;
    assert_eq!(r.body["selectedIds"], json!(["plan-1", "plan-4"]));
}

/// A request without templates keeps the default views: the pretty context, one cell per
/// option with label and description, no cards, no inline style, the page's plain CSP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_templates_keep_the_default_views() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "selection",
            json!({"message": "Pick", "context": {"k": 1},
                "options": [{"id": "a", "label": "Alpha", "description": "First"}, {"id": "b"}]}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_eq!(p.texts(".context pre"), ["{\n  \"k\": 1\n}"]);
    assert_eq!(p.texts("label[for=sel-0] .lt"), ["Alpha"]);
    assert_eq!(p.texts("label[for=sel-0] .choice-desc"), ["First"]);
    assert_eq!(p.texts("label[for=sel-1] .lt"), ["b"]);
    assert_eq!(p.attrs("input[name=sel]", "type"), ["radio", "radio"]);
    assert!(p.attrs(".pick input", "aria-label").is_empty());
    assert_eq!(p.texts("details.card").len(), 0);
    assert_eq!(p.texts("style").len(), 0);
    assert!(p.texts(".tpl-scope.display").is_empty());
    assert!(
        p.header("content-security-policy")
            .contains("style-src 'self';"),
        "{}",
        p.header("content-security-policy")
    );
    assert_eq!(
        p.texts(".provenance"),
        ["The content below was provided by the requester."]
    );
}

/// Templates that blow a budget or fail at render time: the page still answers promptly with
/// the default view of that part and a short notice, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_bombs_and_failures_fall_back_to_the_default_view() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let options: Vec<Value> = (0..500)
        .map(|i| json!({"id": format!("o{i}"), "label": format!("Option {i}")}))
        .collect();
    let cases = [
        (
            "approval",
            json!({"message": "m", "context": {"a": 1},
                "displayTemplate": "{% for i in (1..100000000) %}{{ i }}{% endfor %}"}),
        ),
        (
            "approval",
            json!({"message": "m", "context": {"a": "x"},
                "displayTemplate": "{% for i in (1..1000) %}{% for j in (1..1000) %}{{ context.a }}{% endfor %}{% endfor %}"}),
        ),
        (
            "approval",
            json!({"message": "m", "context": {"a": 1},
                "displayTemplate": "{% assign s = 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}{{ s }}"}),
        ),
        (
            "selection",
            json!({"message": "m", "options": options.clone(),
                "rowTemplate": "<td>{% for i in (1..100000000) %}{{ i }}{% endfor %}</td>",
                "hoverTemplate": "{% for i in (1..100000000) %}{{ option.id }}{% endfor %}"}),
        ),
        (
            "selection",
            json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}],
                "rowTemplate": "{% if option.id == 'b' %}<p>not a cell</p>{% else %}<td>{{ option.id }}</td>{% endif %}"}),
        ),
    ];
    for (kind, body) in cases {
        let c = api.create(kind, body.clone()).await;
        let started = Instant::now();
        let p = get_page(&api, &c.token).await;
        let took = started.elapsed();
        assert_eq!(p.status, 200, "{body}");
        assert_eq!(
            p.texts(".layout-notice"),
            ["Part of the requester's layout could not be shown, so the standard view is shown instead."],
            "{body}"
        );
        assert!(p.texts(".tpl-scope.display").is_empty(), "{body}");
        if kind == "approval" {
            assert_eq!(p.texts(".context pre").len(), 1, "{body}");
        } else {
            // The default rows (label cells, no cards), every option still choosable.
            let n = body["options"].as_array().unwrap().len();
            assert_eq!(p.texts("tr.option .option-text label").len(), n);
            assert_eq!(p.texts("details.card").len(), 0);
        }
        // Bounded: the page's templates get 100 ms; generous here for a loaded debug build
        // (the figure is in docs/benchmarks.md).
        assert!(took < Duration::from_secs(3), "{body}: {took:?}");
    }
    // Counted by part and reason.
    let m = reqwest::get(format!("{}/metrics", f.apps[0].base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.lines()
            .any(|l| l.starts_with("elicitd_template_fallbacks_total{")
                && l.contains("part=\"rowTemplate\"")
                && l.contains("reason=\"not_cells\"")),
        "{m}"
    );
}
