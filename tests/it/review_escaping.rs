//! Agent-supplied text never becomes markup: hostile strings in every place agent text reaches
//! the review page (title, message, context, option ids/labels/descriptions, schema titles,
//! descriptions, enum values and titles, defaults, proposal field names and values, button
//! labels) — and reviewer-typed values on a re-rendered form — come out as text.

use scraper::{Html, Selector};
use serde_json::json;

use super::review_page::{get_page, submit, Page};
use crate::harness::{Fixture, StoreKind};

/// Breaks out of text, attributes (both quotes) and raw-text elements if not escaped.
const H: &str = r#"</textarea></pre><script>alert(1)</script>"'><img src=x onerror=alert(2)>&amp;"#;
/// Short enough for a button label (≤ 40 characters).
const L: &str = r#""'><img src=x onerror=alert(3)>"#;

/// Nothing hostile became an element or an attribute, and `H` is shown as text.
fn assert_inert(p: &Page, what: &str) {
    let doc = Html::parse_document(&p.html);
    let all = Selector::parse("*").unwrap();
    for el in doc.select(&all) {
        let name = el.value().name();
        assert!(name != "img", "{what}: an <img> got through");
        if name == "script" {
            assert!(
                el.value().attr("src").is_some() && el.text().collect::<String>().is_empty(),
                "{what}: inline script"
            );
        }
        for (attr, _) in el.value().attrs() {
            assert!(
                !attr.starts_with("on"),
                "{what}: event handler attribute {attr}"
            );
        }
    }
    assert_eq!(
        p.attrs("script", "src").len(),
        1,
        "{what}: one script, ours"
    );
    let text: String = doc.root_element().text().collect();
    assert!(
        text.contains(H) || p.attrs("[value]", "value").iter().any(|v| v == H),
        "{what}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_agent_text_is_escaped_everywhere() {
    let f = Fixture::new(StoreKind::Memory, 1).await;
    let api = f.acme();
    let labels = json!({"submit": L, "decline": L});

    // Approval, json mode: title, message, context (keys and values), labels.
    let c = api
        .create(
            "approval",
            json!({"title": H, "message": H, "context": {H: [H, 1]}, "labels": labels}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_inert(&p, "json approval");
    assert_eq!(p.texts("h1"), [H]);
    assert_eq!(p.texts("title"), [H]);
    assert_eq!(p.texts(".message"), [H]);
    // The context is shown as JSON text: H as a JSON string, key and value.
    let encoded = serde_json::to_string(H).unwrap();
    assert_eq!(p.texts(".context pre")[0].matches(&encoded).count(), 2);
    assert_eq!(p.texts("button"), [L, L]);
    // The decided page shows the title and the button word: still text.
    assert_eq!(
        submit(&api, &c.token, &[("decision", "submitted")])
            .await
            .status,
        303
    );
    let done = get_page(&api, &c.token).await;
    assert_inert(&done, "decided page");
    assert!(done.texts("p").concat().contains(L));

    // Approval, form mode: titles, descriptions, enum values and titles, defaults.
    let c = api
        .create("approval", json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "t": {"type": "string", "title": H, "description": H, "default": H},
            "one": {"type": "string", "title": H, "oneOf": [{"const": H, "title": H}, {"const": "b", "title": "B"}]},
            "sel": {"type": "string", "title": H, "enum": ["1", "2", "3", "4", "5", "6", H]},
            "many": {"type": "array", "title": H, "items": {"anyOf": [{"const": H, "title": H}]}},
            "yes": {"type": "boolean", "title": H, "description": H}}}}))
        .await;
    let p = get_page(&api, &c.token).await;
    assert_inert(&p, "form approval");
    assert_eq!(p.attrs("#f0", "value"), [H]);
    assert_eq!(p.texts("label[for=f0] .lt"), [H]);
    assert_eq!(p.texts("#f0-desc"), [H]);
    assert_eq!(p.texts("#f1 legend .lt"), [H]);
    assert_eq!(
        p.attrs("#f1-0", "value"),
        ["0"],
        "options are posted by position"
    );
    assert_eq!(p.texts("label[for=f1-0] .lt"), [H]);
    assert_eq!(p.texts("#f2 option")[7], H);
    assert_eq!(p.attrs("#f2 option", "value")[7], "6");
    assert_eq!(p.texts("label[for=f3-0] .lt"), [H]);
    assert_eq!(p.texts("label[for=f4] .lt"), [H]);
    // Reviewer input echoed back on a re-render is escaped too.
    let p = submit(
        &api,
        &c.token,
        &[
            ("decision", "submitted"),
            ("f0", H),
            ("f1", "0"),
            ("comment", &"x".repeat(2001)),
        ],
    )
    .await;
    assert_eq!(p.status, 422);
    assert_inert(&p, "re-rendered form");
    assert_eq!(p.attrs("#f0", "value"), [H]);

    // Selection: option ids (values), labels, descriptions.
    let c = api
        .create(
            "selection",
            json!({"message": H, "title": H, "labels": labels,
            "options": [{"id": H, "label": H, "description": H}, {"id": "plain"}]}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_inert(&p, "selection");
    assert_eq!(p.attrs("#sel-0", "value"), ["0"]);
    assert_eq!(p.texts("label[for=sel-0] .lt"), [H]);
    assert_eq!(p.texts("label[for=sel-0] .choice-desc"), [H]);
    // The hostile id round-trips as data.
    assert_eq!(
        submit(&api, &c.token, &[("decision", "submitted"), ("sel", "0")])
            .await
            .status,
        303
    );
    assert_eq!(api.result(&c.id).await.body["selectedIds"], json!([H]));

    // Proposal: field names (titles when no schema), string / multi-line / list values.
    let name = H;
    let c = api
        .create(
            "proposal",
            json!({"message": "m", "labels": labels,
            "proposal": {name: H, "multi": format!("{H}\n{H}"), "list": [H, H]}}),
        )
        .await;
    let p = get_page(&api, &c.token).await;
    assert_inert(&p, "proposal");
    assert_eq!(p.texts("label[for=k0] .lt"), [format!("Include {name}")]);
    assert_eq!(p.texts("label[for=p0] .lt"), [name]);
    assert_eq!(p.attrs("input#p0", "value"), [H]);
    assert_eq!(p.texts("textarea#p1"), [format!("{H}\n{H}")]);
    assert_eq!(p.texts("textarea#p2"), [format!("{H}\n{H}")]);
    assert_eq!(
        submit(
            &api,
            &c.token,
            &[
                ("decision", "submitted"),
                ("k0", "1"),
                ("p0", H),
                ("k1", "1"),
                ("p1", &format!("{H}\r\n{H}"))
            ]
        )
        .await
        .status,
        303
    );
    let r = api.result(&c.id).await;
    assert_eq!(
        r.body["values"],
        json!({name: H, "multi": format!("{H}\n{H}")})
    );
}
