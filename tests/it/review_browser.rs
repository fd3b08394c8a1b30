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
