//! The review page in headless Chromium at phone width: each kind decided the way a person
//! would (find fields by their labels, fill, press the button by its words), then the outcome
//! checked over the REST API. Set `ELICITD_SCREENSHOT_DIR` to keep a PNG of each page.

use serde_json::{json, Value};

use crate::harness::{
    browser::{Browser, PHONE_WIDTH},
    Api, Fixture, StoreKind,
};

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

async fn result(api: &Api, id: &str) -> Value {
    let r = api.result(id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_approves_a_json_approval_with_relabelled_button() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"title": "Refund order 1042", "message": "Refund the full amount to the customer?",
                "context": {"order": 1042, "amount": 129.90, "currency": "EUR", "lines": [{"sku": "A-1", "qty": 2}]},
                "labels": {"submit": "Refund now", "decline": "Keep the money"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_approves_a_json_approval_with_relabelled_button").await
    else {
        return;
    };
    open(&b, &api, &c.token).await;
    assert_eq!(b.text("h1").await, "Refund order 1042");
    assert!(b.text(".context pre").await.contains("\"amount\": 129.9"));
    assert!(b.text("#countdown").await.contains("min"));
    b.screenshot("approval-json").await;
    b.fill("Comment", "Customer called twice").await;
    b.press("Refund now", ".notice.ok").await;
    assert_eq!(b.text("h1").await, "Decision recorded");
    assert!(b.text(".notice").await.contains("“Refund now”"));
    assert_eq!(b.count("form, button").await, 0);
    b.screenshot("approval-json-done").await;
    b.close().await;

    let r = result(&api, &c.id).await;
    assert_eq!(r["decision"], "submitted");
    assert_eq!(r["comment"], "Customer called twice");
    assert_eq!(r["formSubmission"], Value::Null);
}

fn trip_schema() -> Value {
    json!({"type": "object", "required": ["email", "nights", "class"], "properties": {
        "email": {"type": "string", "format": "email", "title": "Contact email", "description": "We send the booking here."},
        "site": {"type": "string", "format": "uri", "title": "Venue website"},
        "start": {"type": "string", "format": "date", "title": "First day"},
        "call": {"type": "string", "format": "date-time", "title": "Kick-off call"},
        "nights": {"type": "integer", "minimum": 1, "maximum": 14, "title": "Nights", "default": 2},
        "budget": {"type": "number", "minimum": 0, "title": "Budget per night"},
        "insured": {"type": "boolean", "title": "Travel insurance", "default": true},
        "class": {"type": "string", "title": "Class", "oneOf": [
            {"const": "eco", "title": "Economy"}, {"const": "biz", "title": "Business"}]},
        "city": {"type": "string", "title": "City", "enum": ["Berlin", "Lisbon", "Oslo", "Paris", "Rome", "Vienna", "Warsaw"]},
        "extras": {"type": "array", "title": "Extras", "maxItems": 2,
            "items": {"anyOf": [{"const": "wifi", "title": "Wi-Fi"}, {"const": "meal", "title": "Meals"}, {"const": "lounge", "title": "Lounge"}]}},
        "notes": {"type": "string", "title": "Notes", "maxLength": 500}
    }})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_fills_a_form_approval_with_every_control() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"title": "Book the offsite", "message": "Fill in the booking details.",
                "requestedSchema": trip_schema(), "labels": {"submit": "Book it"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_fills_a_form_approval_with_every_control").await else {
        return;
    };
    open(&b, &api, &c.token).await;
    // Defaults are pre-filled.
    assert_eq!(b.value_of("Nights").await, "2");
    assert!(b.is_checked("Travel insurance").await);
    b.screenshot("approval-form").await;

    b.fill("Contact email", "ops@example.com").await;
    b.fill("Venue website", "https://venue.example/booking")
        .await;
    // Chromium's date inputs take the digits in the locale's order (en-US: mm dd yyyy).
    b.fill("First day", "03152026").await;
    b.fill("Nights", "3").await;
    b.fill("Budget per night", "149.5").await;
    b.click_label("Travel insurance").await;
    b.click_label("Business").await;
    b.select("City", "Lisbon").await;
    b.click_label("Wi-Fi").await;
    b.click_label("Lounge").await;
    b.fill("Notes", "Quiet rooms, please").await;
    b.press("Book it", ".notice.ok").await;
    b.close().await;

    let r = result(&api, &c.id).await;
    assert_eq!(r["decision"], "submitted");
    assert_eq!(
        r["formSubmission"],
        json!({"email": "ops@example.com", "site": "https://venue.example/booking",
            "start": "2026-03-15", "nights": 3, "budget": 149.5, "insured": false,
            "class": "biz", "city": "Lisbon", "extras": ["wifi", "lounge"],
            "notes": "Quiet rooms, please"}),
        "empty optional inputs are absent, numbers are numbers, booleans are booleans"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_validation_round_trip_keeps_values_and_records_nothing() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"message": "Who should we invoice?", "requestedSchema": {"type": "object",
                "required": ["email"], "properties": {
                    "email": {"type": "string", "format": "email", "title": "Billing email"},
                    "ref": {"type": "string", "title": "Purchase order"}}}}),
        )
        .await;
    let Some(b) =
        Browser::start("browser_validation_round_trip_keeps_values_and_records_nothing").await
    else {
        return;
    };
    open(&b, &api, &c.token).await;
    // Chromium accepts "a@b" as an email; the server requires a dotted domain.
    b.fill("Billing email", "ap@billing").await;
    b.fill("Purchase order", "PO-77").await;
    b.fill("Comment", "first try").await;
    b.press("Approve", ".alert").await;
    assert!(b
        .text(".field.invalid .error")
        .await
        .contains("valid email address"));
    assert_eq!(b.value_of("Billing email").await, "ap@billing");
    assert_eq!(b.value_of("Purchase order").await, "PO-77");
    assert_eq!(b.value_of("Comment").await, "first try");
    b.screenshot("validation").await;
    assert_eq!(api.status_of(&c.id).await, "pending", "nothing recorded");

    b.fill("Billing email", "ap@billing.example").await;
    b.press("Approve", ".notice.ok").await;
    b.close().await;
    let r = result(&api, &c.id).await;
    assert_eq!(
        r["formSubmission"],
        json!({"email": "ap@billing.example", "ref": "PO-77"})
    );
    assert_eq!(r["comment"], "first try");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_chooses_options_and_declines_a_selection() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let options = json!([
        {"id": "eu", "label": "Europe", "description": "Frankfurt and Dublin"},
        {"id": "us", "label": "United States", "description": "Virginia"},
        {"id": "ap", "label": "Asia Pacific"},
        {"id": "sa"}]);
    let multi = api
        .create(
            "selection",
            json!({"title": "Launch regions", "message": "Pick up to two regions.",
                "options": options, "maxSelections": 2, "labels": {"submit": "Launch"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_chooses_options_and_declines_a_selection").await else {
        return;
    };
    open(&b, &api, &multi.token).await;
    assert_eq!(b.text(".choice-desc").await, "Frankfurt and Dublin");
    b.click_label("Europe").await;
    b.click_label("Asia Pacific").await;
    // The script disables the rest once two are chosen (the server enforces it regardless).
    assert!(!b.field("United States").await.is_enabled().await.unwrap());
    b.screenshot("selection").await;
    b.press("Launch", ".notice.ok").await;
    let r = result(&api, &multi.id).await;
    assert_eq!(r["selectedIds"], json!(["eu", "ap"]));

    let single = api
        .create(
            "selection",
            json!({"message": "Which one?", "options": options}),
        )
        .await;
    open(&b, &api, &single.token).await;
    b.click_label("sa").await;
    b.press("None of these", ".notice.ok").await;
    b.close().await;
    let r = result(&api, &single.id).await;
    assert_eq!(r["decision"], "declined");
    assert!(r.get("selectedIds").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_edits_and_trims_a_proposal() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "proposal",
            json!({"title": "New ticket", "message": "File this ticket?",
                "proposal": {"summary": "Login fails on Safari", "priority": 2, "urgent": false,
                    "tags": ["auth", "web"], "estimate": 1.5, "team": ["web"]},
                "requestedSchema": {"type": "object", "required": ["summary"], "properties": {
                    "summary": {"type": "string", "title": "Summary", "maxLength": 80},
                    "team": {"type": "array", "title": "Teams", "items": {"enum": ["web", "ios", "backend"]}}}},
                "labels": {"submit": "File it", "decline": "Discard"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_edits_and_trims_a_proposal").await else {
        return;
    };
    open(&b, &api, &c.token).await;
    assert!(b.is_checked("Include priority").await);
    assert_eq!(b.value_of("priority").await, "2");
    assert_eq!(b.value_of("tags").await, "auth\nweb");
    b.screenshot("proposal").await;

    b.fill("Summary", "Login fails on Safari 18").await;
    b.fill("priority", "1").await;
    b.click_label("urgent").await;
    b.fill("tags", "auth\nsafari\n").await;
    b.click_label("Include estimate").await;
    b.click_label("backend").await;
    b.press("File it", ".notice.ok").await;
    b.close().await;

    let r = result(&api, &c.id).await;
    assert_eq!(r["decision"], "submitted");
    assert_eq!(
        r["values"],
        json!({"summary": "Login fails on Safari 18", "priority": 1, "urgent": true,
            "tags": ["auth", "safari"], "team": ["web", "backend"]}),
        "only kept fields, with their final values and types"
    );
}

/// What the reviewer sees is what they approve: direction-changing and invisible characters in
/// agent text are shown as `⟨U+XXXX⟩` in the rendered page, so `"amount_eur\u{202E}": 9000`
/// cannot display as `"amount_eur,0009 :"`, and the buttons read their own words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_shows_hidden_characters_instead_of_obeying_them() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let rlo = '\u{202E}';
    let c = api
        .create(
            "approval",
            json!({"title": format!("Wire {rlo}0009 EUR"), "message": "Pay the supplier?",
                "context": {format!("amount_eur{rlo}"): 9000, "iban": format!("DE{rlo}21")},
                "labels": {"submit": "Pay", "decline": "Keep"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_shows_hidden_characters_instead_of_obeying_them").await
    else {
        return;
    };
    open(&b, &api, &c.token).await;
    // The text as rendered (innerText after layout), not just the HTML source.
    assert_eq!(b.text("h1").await, "Wire ⟨U+202E⟩0009 EUR");
    let ctx = b.text(".context pre").await;
    assert!(ctx.contains("\"amount_eur⟨U+202E⟩\": 9000"), "{ctx}");
    assert!(ctx.contains("\"DE⟨U+202E⟩21\""), "{ctx}");
    assert!(!ctx.contains(rlo) && !b.text("body").await.contains(rlo));
    let buttons = b
        .client
        .find_all(fantoccini::Locator::Css("button"))
        .await
        .unwrap();
    let mut words = Vec::new();
    for btn in buttons {
        words.push(btn.text().await.unwrap());
    }
    assert_eq!(words, ["Pay", "Keep"]);
    b.screenshot("hidden-characters").await;
    b.press("Keep", ".notice.ok").await;
    b.close().await;
    assert_eq!(result(&api, &c.id).await["decision"], "declined");
}

/// Run `script` (a function body; `arguments` as given) and return its value.
async fn js(b: &Browser, script: &str, args: Vec<Value>) -> Value {
    b.client.execute(script, args).await.expect("execute")
}

/// Computed `props` of the first element matching `css`, plus its box.
async fn looks(b: &Browser, css: &str, props: &[&str]) -> Value {
    js(
        b,
        "const el = document.querySelector(arguments[0]);
         if (!el) return null;
         const s = getComputedStyle(el), r = el.getBoundingClientRect(), out = {};
         for (const p of arguments[1]) out[p] = s.getPropertyValue(p);
         out.box = [Math.round(r.width), Math.round(r.height)];
         return out;",
        vec![json!(css), json!(props)],
    )
    .await
}

/// Whether the element matching `css`, scrolled into view, is what a click at its centre
/// would hit (nothing painted over it).
async fn on_top(b: &Browser, css: &str) -> bool {
    js(
        b,
        "const el = document.querySelector(arguments[0]);
         el.scrollIntoView({block: 'center'});
         const r = el.getBoundingClientRect();
         const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
         return hit === el || el.contains(hit);",
        vec![json!(css)],
    )
    .await
        == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_shows_a_templated_approval_and_its_raw_data() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let c = api
        .create(
            "approval",
            json!({"title": "Ship order A-1042", "message": "Ship these items today?",
                "context": crate::templates::order_context(),
                "displayTemplate": crate::templates::ORDER_TEMPLATE,
                "css": ".lines th { background: rgb(1, 2, 3); color: rgb(255, 255, 255) } .lines td:last-child { text-align: right }",
                "labels": {"submit": "Ship", "decline": "Hold"}}),
        )
        .await;
    let Some(b) = Browser::start("browser_shows_a_templated_approval_and_its_raw_data").await
    else {
        return;
    };
    open(&b, &api, &c.token).await;
    assert_eq!(b.text(".tpl-scope.display h3").await, "Order A-1042");
    assert_eq!(
        b.text(".tpl-scope.display tbody tr").await,
        "Keyboard <b>pro</b> 2 99 EUR"
    );
    // The requester's CSS applies inside its box.
    let th = looks(&b, ".lines th", &["background-color", "color"]).await;
    assert_eq!(th["background-color"], "rgb(1, 2, 3)", "{th}");
    assert_eq!(th["color"], "rgb(255, 255, 255)");
    assert_eq!(
        b.text(".provenance").await,
        "The content below was provided by the requester."
    );
    // The raw JSON is one click away.
    let raw_shown = "return document.querySelector('details.raw pre').checkVisibility();";
    assert_eq!(js(&b, raw_shown, vec![]).await, json!(false));
    b.client
        .find(fantoccini::Locator::Css("details.raw summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(js(&b, raw_shown, vec![]).await, json!(true));
    assert!(b
        .text("details.raw pre")
        .await
        .contains("\"sku\": \"KB-01\""));
    b.screenshot("approval-template").await;
    b.press("Ship", ".notice.ok").await;
    b.close().await;
    assert_eq!(result(&api, &c.id).await["decision"], "submitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_picks_from_a_templated_selection_with_cards_on_focus() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let plans = [("s", "Small", 9), ("m", "Medium", 19), ("l", "Large", 39)];
    let options: Vec<Value> = plans
        .iter()
        .map(|(id, name, eur)| json!({"id": id, "label": name, "eur": eur, "cpus": eur / 9, "regions": ["fra", "dub"]}))
        .collect();
    let c = api
        .create(
            "selection",
            json!({"title": "Pick a plan", "message": "Which plan for the new service?",
                "options": options, "context": {"period": "month"},
                "rowTemplate": "<td class=\"name\">{{ option.label }}</td><td class=\"price\">€{{ option.eur }}/{{ context.period }}</td>",
                "hoverTemplate": "<h4>{{ option.label }}</h4><p>{{ option.cpus }} vCPU</p><ul>{% for r in option.regions %}<li>{{ r | upcase }}</li>{% endfor %}</ul>",
                "css": "td.price { color: rgb(0, 128, 0); font-variant-numeric: tabular-nums } td.name { font-weight: 700 }"}),
        )
        .await;
    let Some(b) =
        Browser::start("browser_picks_from_a_templated_selection_with_cards_on_focus").await
    else {
        return;
    };
    open(&b, &api, &c.token).await;
    assert_eq!(b.text("tr.option:nth-child(2) td.price").await, "€19/month");
    let price = looks(&b, "td.price", &["color"]).await;
    assert_eq!(price["color"], "rgb(0, 128, 0)", "{price}");
    // Keyboard focus on an option shows its card in the floating box: inside the options'
    // fieldset (never over the comment or the buttons), and it never takes a click.
    let float = "const f = document.querySelector('.card-float'), fs = f.closest('fieldset');
        const r = f.getBoundingClientRect(), b = fs.getBoundingClientRect();
        return {shown: !f.hidden, text: f.innerText,
            inside: r.top >= b.top - 1 && r.bottom <= b.bottom + 1,
            clicks: getComputedStyle(f).pointerEvents};";
    let state = js(&b, float, vec![]).await;
    assert_eq!(state["shown"], false, "{state}");
    js(&b, "document.getElementById('sel-2').focus();", vec![]).await;
    let state = js(&b, float, vec![]).await;
    assert_eq!(state["shown"], true, "{state}");
    let text = state["text"].as_str().unwrap();
    assert!(
        text.contains("Large") && text.contains("4 vCPU") && text.contains("DUB"),
        "{state}"
    );
    assert_eq!(state["inside"], true, "{state}");
    assert_eq!(state["clicks"], "none", "{state}");
    // The requester's CSS reaches the card too (it is a template box of its own).
    b.screenshot("selection-template").await;
    // Focus moves on: the next option's card.
    js(&b, "document.getElementById('sel-0').focus();", vec![]).await;
    let state = js(&b, float, vec![]).await;
    assert!(state["text"].as_str().unwrap().contains("Small"), "{state}");
    // The "Details" disclosure (what a browser without the script shows) works on its own.
    b.client
        .find(fantoccini::Locator::Css(
            "tr.option:nth-child(1) details.card summary",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(b
        .text("tr.option:nth-child(1) .card-body")
        .await
        .contains("1 vCPU"));
    // A click anywhere on a row picks it (here: the requester's price cell).
    b.client
        .find(fantoccini::Locator::Css("tr.option:nth-child(2) td.price"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        js(
            &b,
            "return document.getElementById('sel-1').checked;",
            vec![]
        )
        .await,
        json!(true)
    );
    b.press("Submit", ".notice.ok").await;
    b.close().await;
    let r = result(&api, &c.id).await;
    assert_eq!(r["selectedIds"], json!(["m"]), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_hostile_template_cannot_run_load_or_cover_the_buttons() {
    let f = Fixture::new(StoreKind::Redis, 1).await;
    let api = f.acme();
    let body = |template: Option<&str>, css: Option<&str>| {
        let mut b = json!({"title": "Pay invoice 77", "message": "Pay it?",
            "context": {"amount": "<img src=x onerror=\"window.pwned=3\">", "to": "ACME"}});
        if let Some(t) = template {
            b["displayTemplate"] = t.into();
        }
        if let Some(c) = css {
            b["css"] = c.into();
        }
        b
    };
    // The real buttons as they look without any template.
    let plain = api.create("approval", body(None, None)).await;
    let Some(b) =
        Browser::start("browser_hostile_template_cannot_run_load_or_cover_the_buttons").await
    else {
        return;
    };
    let props = [
        "display",
        "visibility",
        "opacity",
        "background-color",
        "color",
        "font-size",
        "position",
    ];
    open(&b, &api, &plain.token).await;
    let want_primary = looks(&b, "button.primary", &props).await;
    let want_secondary = looks(&b, "button.secondary", &props).await;
    let want_h1 = looks(&b, "h1", &props).await;

    // The hostile one: scripts, handlers, a remote image, a fake "Approve" button styled to
    // cover the page, and CSS aimed at the real buttons and the heading.
    let template = "<p>Amount: {{ context.amount }}</p>\
        <script>window.pwned = 1</script>\
        <img src=\"data:image/png;base64,AAAA\" onerror=\"window.pwned = 2\">\
        <img src=\"https://evil.example/track.png\">\
        <div class=\"actions\"><span class=\"fake primary\">Approve</span></div>";
    let css = ".fake { display: block; position: absolute; top: -600px; left: -50px; width: 3000px; \
        height: 4000px; background: rgb(31, 95, 191); z-index: 2147483647 } \
        button, .actions button, button.primary { display: none !important; visibility: hidden !important } \
        h1, .provenance { display: none !important } * { pointer-events: none }";
    // What no requester gets past the create check: external URLs in CSS, fixed positioning.
    for bad in [
        "td { background: url(https://evil.example/x.png) }",
        ".fake { position: fixed; inset: 0 }",
    ] {
        let r = api
            .post("/v1/approvals", &body(Some(template), Some(bad)))
            .await;
        assert_eq!(r.status, 422, "{bad}: {}", r.body);
    }
    let c = api
        .create("approval", body(Some(template), Some(css)))
        .await;
    open(&b, &api, &c.token).await;
    b.screenshot("hostile-template").await;
    assert_eq!(looks(&b, "button.primary", &props).await, want_primary);
    assert_eq!(looks(&b, "button.secondary", &props).await, want_secondary);
    assert_eq!(looks(&b, "h1", &props).await, want_h1);
    // Nothing is painted over them: a click at their centre reaches them.
    for el in ["button.primary", "button.secondary", "h1", ".provenance"] {
        assert!(on_top(&b, el).await, "{el} is covered");
    }
    // The fake is text in the requester's box, not a button.
    assert_eq!(b.count("button").await, 2);
    assert_eq!(b.text(".tpl-scope .fake").await, "Approve");
    // Nothing ran, nothing was fetched from elsewhere.
    assert_eq!(
        js(&b, "return window.pwned === undefined;", vec![]).await,
        json!(true)
    );
    let fetched = js(
        &b,
        "return performance.getEntriesByType('resource').map(e => e.name);",
        vec![],
    )
    .await;
    for url in fetched.as_array().unwrap() {
        assert!(
            url.as_str().unwrap().starts_with(&api.base),
            "fetched {url}"
        );
    }
    assert!(b
        .text(".tpl-scope.display")
        .await
        .contains("Amount: <img src=x onerror=\"window.pwned=3\">"));
    b.press("Approve", ".notice.ok").await;
    assert_eq!(result(&api, &c.id).await["decision"], "submitted");

    // A selection whose CSS tries to hide or disable the choices: they stay visible and usable.
    let s = api
        .create(
            "selection",
            json!({"message": "Pick", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}],
                "rowTemplate": "<td>{{ option.label }}</td>", "hoverTemplate": "<p>card {{ option.id }}</p>",
                "css": ".pick input { display: none !important; opacity: 0 !important; pointer-events: none !important }                     tr.option, td.pick { visibility: hidden !important; opacity: 0 !important }                     .card-body, .card-body * { pointer-events: auto !important }"}),
        )
        .await;
    open(&b, &api, &s.token).await;
    for input in ["#sel-0", "#sel-1"] {
        let shown = format!("return document.querySelector('{input}').checkVisibility({{opacityProperty: true, visibilityProperty: true}});");
        assert_eq!(js(&b, &shown, vec![]).await, json!(true), "{input} hidden");
        assert!(on_top(&b, input).await, "{input} covered");
    }
    let clicks = "return [...document.querySelectorAll('.card-float, .card-float *')].every(e => getComputedStyle(e).pointerEvents === 'none');";
    js(&b, "document.getElementById('sel-1').focus();", vec![]).await;
    assert_eq!(js(&b, clicks, vec![]).await, json!(true));
    b.client
        .find(fantoccini::Locator::Css("#sel-0"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.press("Submit", ".notice.ok").await;
    b.close().await;
    assert_eq!(result(&api, &s.id).await["selectedIds"], json!(["a"]));
}
