use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;

fn ctx() -> Value {
    json!({"context": {
        "title": "<script>alert(1)</script> & \"go\"",
        "when": "2024-03-01T10:00:00Z",
        "day": "2024-03-01",
        "items": ["a<", "b", "c"],
        "n": 3,
        "big": "a".repeat(60_000),
    }})
}

fn card(src: &str) -> Result<String, RenderError> {
    Compiled::compile(src)
        .expect("compiles")
        .render_card(&ctx())
}

fn compile_err(src: &str) -> TemplateError {
    Compiled::compile(src).expect_err("must not compile")
}

#[test]
fn output_is_escaped_by_default_and_filters_see_raw_values() {
    let out = card(
        "{{ context.title }}|{{ context.title | size }}|{{ context.title | upcase }}|\
         {{ context.title | truncate: 9 }}|{{ context.when | date: '%Y-%m-%d %H:%M' }}|\
         {{ context.day | date: '%d %b %Y' }}|{{ context.items | join: ', ' }}|\
         {{ context.title | escape }}|{{ context.items | first }}",
    )
    .unwrap();
    assert!(!out.contains("<script"), "{out}");
    let parts: Vec<&str> = out.split('|').collect();
    assert_eq!(
        parts[0],
        "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \"go\""
    );
    assert_eq!(parts[1], "32"); // characters of the raw value, not of the escaped one
    assert_eq!(
        parts[2],
        "&lt;SCRIPT&gt;ALERT(1)&lt;/SCRIPT&gt; &amp; \"GO\""
    );
    assert_eq!(parts[3], "&lt;scrip...");
    assert_eq!(parts[4], "2024-03-01 10:00");
    assert_eq!(parts[5], "01 Mar 2024");
    assert_eq!(parts[6], "a&lt;, b, c");
    assert_eq!(parts[7], parts[0]); // `escape` does not escape twice
    assert_eq!(parts[8], "a&lt;");
}

#[test]
fn template_markup_is_kept_and_assign_keeps_raw_values() {
    let out = card(
        "<p class=\"t\"><b>{{ context.n | plus: 1 }}</b></p>\
         {% assign t = context.title | downcase %}<i>{{ t | size }}</i>",
    )
    .unwrap();
    assert_eq!(out, "<p class=\"t\"><b>4</b></p><i>32</i>");
}

#[test]
fn tags_and_whitespace_control_see_raw_values() {
    let out = card(
        "{% if context.title contains '<script>' %}raw{% endif %}|\
         {% assign n = context.title | size %}{% if n > 30 %}long{% endif %}|\
         a {{- context.n -}} b|{{ context.title | split: '>' | first }}",
    )
    .unwrap();
    assert_eq!(out, "raw|long|a3b|&lt;script");
}

#[test]
fn missing_variables_render_empty() {
    let out = card(
        "[{{ nope }}][{{ nope.x.y }}][{{ context.missing.deeper }}][{{ context.items[7] }}]\
         [{{ context.items[-1] }}][{{ context.missing | default: 'd<' }}]\
         [{% if context.missing %}y{% else %}n{% endif %}][{{ context.items.size }}]",
    )
    .unwrap();
    assert_eq!(out, "[][][][][c][d&lt;][n][3]");
}

#[test]
fn loops_and_liquid_quirks_work() {
    let out = card(
        "{%- for i in context.items limit: 2 -%}[{{ forloop.index }}:{{ i }}]{%- endfor %}|\
         {% for i in (1..5) reversed limit: 3 offset: 1 %}{{ i }}{% endfor %}|\
         {% for i in (5..1) %}{{ i }}{% else %}none{% endfor %}|\
         {% for i in (1..9) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}|\
         {% case context.n %}{% when 3 %}three{% else %}other{% endcase %}|\
         {{ '}}' }}|{% comment %}{{ ' {% endcomment %}{{ context.n }}",
    )
    .unwrap();
    assert_eq!(out, "[1:a&lt;][2:b]|432|none|12|three|}}|3");
}

#[test]
fn errors_carry_line_and_column() {
    let e = compile_err("line1\n  {{ context.title | nosuchfilter }}");
    assert_eq!((e.line, e.column), (2, 22), "{e}");
    assert!(e.message.contains("unknown filter `nosuchfilter`"), "{e}");
    assert_eq!(e.to_string(), format!("line 2, column 22: {}", e.message));

    let e = compile_err("line1\n{% nosuchtag %}");
    assert_eq!((e.line, e.column), (2, 4), "{e}");
    assert!(e.message.contains("unknown tag `nosuchtag`"), "{e}");

    let e = compile_err("{% if x %}\n{{ x }");
    assert_eq!(e.line, 2, "{e}");

    let e = compile_err("ab\n{% if x %}");
    assert_eq!((e.line, e.column), (2, 4), "{e}");
    assert!(e.message.contains("not closed"), "{e}");

    let e = compile_err("{% for i in context.items %}\n{% endif %}");
    assert_eq!((e.line, e.column), (2, 4), "{e}");

    let e = compile_err("{{ context.title | truncate: 1, 2, 3 }}");
    assert_eq!((e.line, e.column), (1, 20), "{e}");
    assert!(e.message.contains("takes"), "{e}");

    // an error liquid itself finds, after rewritten `{{ }}` on the same line: the column
    // refers to the source, not to the rewritten text
    let src = "{{ a }} {{ b }} {% for %}{% endfor %}";
    let e = compile_err(src);
    assert_eq!(e.line, 1, "{e}");
    assert!(
        (17..=src.find("endfor").unwrap()).contains(&e.column),
        "{e}"
    );
}

#[test]
fn excluded_tags_and_filters_are_refused() {
    for src in [
        "{% capture x %}hi{% endcapture %}",
        "{% cycle 'a', 'b' %}",
        "{% raw %}x{% endraw %}",
        "{% include 'x' %}",
        "{% render 'x' %}",
        "{% tablerow i in (1..3) %}{{ i }}{% endtablerow %}",
        "{% increment x %}",
        "{% ifchanged %}x{% endifchanged %}",
    ] {
        let e = compile_err(src);
        assert!(e.message.contains("unknown tag"), "{src}: {e}");
        assert_eq!((e.line, e.column), (1, 4), "{src}: {e}");
    }
    for src in [
        "{{ 'a' | newline_to_br }}",
        "{{ 'a' | __autoescape }}",
        "{% assign x = 'a' | __autoescape %}",
    ] {
        let e = compile_err(src);
        assert!(e.message.contains("unknown filter"), "{src}: {e}");
    }
    // liquid ignores unknown tags inside a comment; so do we
    let t = Compiled::compile(
        "{% comment %}{% include 'x' %}{% endcapture %}{{ a | newline_to_br }}{% endcomment %}ok",
    )
    .unwrap();
    assert_eq!(t.render_card(&json!({})).unwrap(), "ok");
    let (tags, filters) = engine::vocabulary();
    assert_eq!(
        tags,
        ["assign", "break", "case", "comment", "continue", "for", "if", "unless"]
    );
    for f in [
        "date", "replace", "join", "size", "upcase", "truncate", "default", "escape",
    ] {
        assert!(filters.iter().any(|x| x == f), "{f}");
    }
    assert!(!filters
        .iter()
        .any(|x| x == "newline_to_br" || x == "__autoescape"));
}

fn assert_bounded(src: &str) -> RenderError {
    let t = Compiled::compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    let t0 = Instant::now();
    let r = t.render_card(&ctx());
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "{src}: took {took:?}");
    match r {
        Err(e @ RenderError::Limit(_)) => e,
        other => panic!("{src}: expected a limit, got {other:?}"),
    }
}

#[test]
fn render_bombs_stop_quickly() {
    let big_out = format!(
        "{{% for i in (1..100000) %}}{}{{% endfor %}}",
        "x".repeat(50)
    );
    let cases: Vec<(String, &[&str])> = vec![
        ("{% for i in (1..100000000) %}{% endfor %}".into(), &["step", "time"]),
        ("{% for i in (1..9223372036854775807) %}x{% endfor %}".into(), &["step", "time"]),
        (
            "{% for i in (-9223372036854775807..9223372036854775807) reversed %}{% endfor %}".into(),
            &["step", "time"],
        ),
        (
            "{% for a in (1..1000) %}{% for b in (1..1000) %}{% for c in (1..1000) %}\
             {% endfor %}{% endfor %}{% endfor %}"
                .into(),
            &["step", "time"],
        ),
        (
            "{% assign s = 'ab' %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}{{ s | size }}"
                .into(),
            &["value size"],
        ),
        ("{{ context.big | replace: 'a', context.big }}".into(), &["value size"]),
        ("{{ context.big | split: '' | size }}".into(), &["value size"]),
        (
            "{% assign a = context.big | split: ',' %}{% for i in (1..40) %}{% assign a = a | concat: a %}{% endfor %}"
                .into(),
            &["value size", "memory"],
        ),
        (
            "{% for i in (1..1000) %}{% assign b = context.big | append: context.big %}{% endfor %}".into(),
            &["memory"],
        ),
        (big_out, &["output"]),
        ("{% for i in (1..100000) %}{{ context }}{% endfor %}".into(), &["output", "value size"]),
    ];
    for (src, limits) in cases {
        let RenderError::Limit(l) = assert_bounded(&src) else {
            unreachable!()
        };
        assert!(limits.contains(&l), "{src}: {l}");
    }
}

#[test]
fn page_budget_is_shared_by_all_renders() {
    let heavy = Compiled::compile_row("<td>{% for i in (1..60000) %}{% endfor %}x</td>").unwrap();
    let options: Vec<Value> = (0..500).map(|i| json!({"id": format!("o{i}")})).collect();
    // steps: 60k per row, the page has PAGE_STEPS
    let mut page = Page::with_time(&json!({}), Duration::from_secs(60));
    let t0 = Instant::now();
    assert_eq!(
        page.all_cells(&heavy, &options),
        Err(RenderError::Limit("step"))
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    // time: a short page deadline ends everything soon after it passes
    let mut page = Page::with_time(&json!({}), Duration::from_millis(30));
    let t0 = Instant::now();
    let results: Vec<_> = options.iter().map(|o| page.cells(&heavy, o)).collect();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(results.last(), Some(&Err(RenderError::Limit("time"))));
    // and an ordinary page renders every option
    let row = Compiled::compile_row("<td>{{ option.id }}</td><td>{{ context.n }}</td>").unwrap();
    let mut page = Page::with_time(&json!({"n": 1}), Duration::from_secs(5)); // debug build
    let cells = page.all_cells(&row, &options).unwrap();
    assert_eq!(cells.len(), 500);
    assert_eq!(cells[7], "<td>o7</td><td>1</td>");
    let hover = Compiled::compile("<p>{{ option.id }}</p>").unwrap();
    assert_eq!(page.card(&hover, Some(&options[3])).unwrap(), "<p>o3</p>");
    assert_eq!(page.card(&hover, None).unwrap(), "<p></p>");
}

#[test]
fn sanitizer_removes_active_content() {
    let cases = [
        ("<b>ok</b><script>alert(1)</script>", "<b>ok</b>"),
        (
            "<img src=\"data:image/png;base64,iVBOR\" onerror=\"alert(1)\">",
            "<img src=\"data:image/png;base64,iVBOR\">",
        ),
        ("<a href=\"javascript:alert(1)\">l</a>", "l"),
        (
            "<p style=\"position:fixed\" id=\"x\" class=\"c\">t</p>",
            "<p class=\"c\">t</p>",
        ),
        ("<iframe src=\"/x\"></iframe>x", "x"),
        ("<form action=\"/x\"><input name=\"a\"></form>x", "x"),
        (
            "<svg><script>alert(1)</script></svg><math><mi>m</mi></math>x",
            "x",
        ),
        ("<img src=\"https://evil.example/x.png\">", "<img>"),
        ("<img src=\"//evil.example/x.png\">", "<img>"),
        ("<img src=\"/\\evil.example/x.png\">", "<img>"),
        ("<img src=\"data:image/svg+xml;base64,PHN2Zz4=\">", "<img>"),
        ("<img src=\"javascript:alert(1)\">", "<img>"),
        ("<img src=\"a.png\" alt=\"a\">", "<img alt=\"a\">"),
        ("<img src=\"/static/a.png\" alt=\"a\">", "<img alt=\"a\">"),
        (
            "<img src=\"data:image/png;base64,iVBOR\">",
            "<img src=\"data:image/png;base64,iVBOR\">",
        ),
        (
            "<table><tr><td colspan=\"2\" onclick=\"x\">1</td></tr></table>",
            "<table><tbody><tr><td colspan=\"2\">1</td></tr></tbody></table>",
        ),
        (
            "<style>*{}</style><!-- c --><details open><summary>s</summary>d</details>",
            "sd",
        ),
    ];
    for (html, want) in cases {
        assert_eq!(card(html).unwrap(), want, "{html}");
    }
    // data from the context is escaped, never markup, whatever it holds
    let t = Compiled::compile("<div>{{ context.h }}</div>").unwrap();
    let out = t
        .render_card(&json!({"context": {"h": "<img src=x onerror=alert(1)>"}}))
        .unwrap();
    assert_eq!(out, "<div>&lt;img src=x onerror=alert(1)&gt;</div>");
}

#[test]
fn row_templates_yield_flat_cells() {
    let vars = json!({"option": {"label": "Fish & <Chips>", "price": 7}});
    let cells = |src: &str| Compiled::compile_row(src).unwrap().render_cells(&vars);
    assert_eq!(
        cells("<td>{{ option.label }}</td>\n <th scope=\"row\">{{ option.price | times: 2 }}</th>")
            .unwrap(),
        "<td>Fish &amp; &lt;Chips&gt;</td>\n <th scope=\"row\">14</th>"
    );
    for bad in [
        "<td>a</td></tr></tbody></table><img src=x onerror=alert(1)>",
        "<td>a<table><tr><td>n</td></tr></table></td>",
        "x<td>a</td>",
        "<td>a</td><img src=\"/a.png\">",
        "{% if false %}<td>a</td>{% endif %}",
    ] {
        assert_eq!(cells(bad), Err(RenderError::NotCells), "{bad}");
    }
    // ammonia drops the row scaffolding it does not allow, which leaves flat cells
    assert_eq!(
        cells("<td>a</td></tr><tr><td>b</td>").unwrap(),
        "<td>a</td><td>b</td>"
    );
    assert!(Compiled::compile_row("{{ option.label }}").is_err());
}

#[test]
fn templates_up_to_the_size_limit_are_stack_safe() {
    // 24 nested blocks (the limit) with 23-deep index expressions inside, padded to 32 KiB
    fn index(d: usize) -> String {
        if d == 0 {
            "0".into()
        } else {
            format!("context.a[{}]", index(d - 1))
        }
    }
    let opens = [
        "{% if true %}",
        "{% for i in (1..1) %}",
        "{% unless false %}",
        "{% case 1 %}{% when 1 %}",
    ];
    let closes = [
        "{% endif %}",
        "{% endfor %}",
        "{% endunless %}",
        "{% endcase %}",
    ];
    let mut head = String::new();
    let mut tail = String::new();
    for d in 0..engine::MAX_NESTING {
        head.push_str(opens[d % 4]);
        tail.insert_str(0, closes[d % 4]);
    }
    let expr = format!(
        "{{{{ {} | default: 'x' }}}}",
        index(engine::MAX_NESTING - 1)
    );
    let mut src = head;
    while src.len() + expr.len() + tail.len() <= MAX_TEMPLATE_BYTES {
        src.push_str(&expr);
    }
    src.push_str(&tail);
    assert!(src.len() > MAX_TEMPLATE_BYTES - 1024);
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20) // tokio's blocking threads
        .spawn(move || {
            let t = Compiled::compile(&src).unwrap();
            let out = t.render_card(&json!({"context": {"a": [0]}})).unwrap();
            assert!(out.starts_with("000"), "{out:.40}");
            // one more level of either kind is refused before liquid sees it
            let n = engine::MAX_NESTING + 1;
            let e = Compiled::compile(&("{% if true %}".repeat(n) + &"{% endif %}".repeat(n)))
                .unwrap_err();
            assert!(e.message.contains("nest"), "{e}");
            let e = Compiled::compile(&format!("{{{{ a{} }}}}", "[0".repeat(25))).unwrap_err();
            assert!(e.message.contains("nest"), "{e}");
            // far too deep: refused, not a stack overflow
            let e = Compiled::compile(&"{% if true %}".repeat(2000)).unwrap_err();
            assert!(e.message.contains("nest"), "{e}");
            let e = Compiled::compile(&format!("{{{{ a{} }}}}", "[".repeat(16000))).unwrap_err();
            assert!(e.message.contains("nest"), "{e}");
        })
        .unwrap();
    handle.join().expect("no stack overflow");
    let e = compile_err(&"x".repeat(MAX_TEMPLATE_BYTES + 1));
    assert!(e.message.contains("larger"), "{e}");
}

#[test]
fn deeply_nested_markup_is_sanitized_safely_and_in_time() {
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let far = Instant::now() + Duration::from_secs(60);
            // deep but linear for the parser: no stack overflow in cleaning, printing, dropping
            for unit in ["<span>", "<b><i>", "<table><tr><td>"] {
                let html = unit.repeat(RENDER_OUTPUT_BYTES / unit.len());
                assert!(sanitize::card(&html, far).is_ok(), "{unit}");
            }
            // quadratic for the parser (scope checks over the stack of open elements): the
            // deadline stops it between pieces of input
            for unit in ["<div>", "<ul><li>"] {
                let html = unit.repeat(RENDER_OUTPUT_BYTES / unit.len());
                let t0 = Instant::now();
                let r = sanitize::card(&html, t0 + Duration::from_millis(50));
                assert_eq!(r, Err(RenderError::Limit("time")), "{unit}");
                assert!(
                    t0.elapsed() < Duration::from_secs(2),
                    "{unit}: {:?}",
                    t0.elapsed()
                );
            }
            // and through a render
            let t0 = Instant::now();
            let r = card("{% for i in (1..50000) %}<div>{% endfor %}");
            assert!(r.is_err());
            assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        })
        .unwrap();
    handle.join().expect("no stack overflow");
}

#[test]
fn date_filter_refuses_bad_formats() {
    assert!(matches!(
        card("{{ context.when | date: '%Q' }}"),
        Err(RenderError::Failed(_))
    ));
    assert_eq!(
        card("{{ 'not a date' | date: '%Y' }}").unwrap(),
        "not a date"
    );
    assert_eq!(card("{{ 0 | date: '%Y' }}").unwrap(), "1970");
    assert_eq!(card("[{{ nope | date: '%Y' }}]").unwrap(), "[]");
}

fn css_ok(src: &str) -> String {
    scope_css(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn css_err(src: &str) -> TemplateError {
    scope_css(src).expect_err(src)
}

#[test]
fn css_is_scoped() {
    assert_eq!(css::SCOPE_SELECTOR, format!(".{SCOPE}"));
    assert_eq!(
        css_ok("td { color: red } .a > b, tr:nth-child(2n) td::before { content: 'x' }"),
        ".tpl-scope td{color:red;}.tpl-scope .a > b,.tpl-scope tr:nth-child(2n) td::before{content:\"x\";}"
    );
    assert_eq!(
        css_ok(":is(td, th) b, > tr { color: red }"),
        ".tpl-scope :is(td, th) b,.tpl-scope > tr{color:red;}"
    );
    assert_eq!(
        css_ok("@media (max-width: 600px) { td, th { padding: 2px } }"),
        "@media (max-width: 600px){.tpl-scope td,.tpl-scope th{padding:2px;}}"
    );
    assert_eq!(
        css_ok("img { background: url('data:image/png;base64,AAAA') }"),
        ".tpl-scope img{background:url(\"data:image/png;base64,AAAA\");}"
    );
    assert_eq!(
        css_ok("td { position: absolute !important; POSITION: Sticky }"),
        ".tpl-scope td{position:absolute !important;position:Sticky;}"
    );
    assert_eq!(
        css_ok("a/**/b, c { color: red }"),
        ".tpl-scope a/**/b,.tpl-scope c{color:red;}"
    );
    assert_eq!(css_ok(""), "");
}

#[test]
fn css_refuses_escapes() {
    for (src, what) in [
        ("@import url(/x.css); td { color: red }", "@import"),
        (
            "@font-face { font-family: x; src: url(/f.woff) }",
            "@font-face",
        ),
        ("@keyframes k { from { color: red } }", "@keyframes"),
        ("td { background: url(https://evil.example/x.png) }", "url"),
        ("td { background: url( '//evil.example/x.png' ) }", "url"),
        ("td { --x: url(https://evil.example/y) }", "url"),
        ("td { background: url(/static/bg.png) }", "url"),
        ("td { background: url(bg.png) }", "url"),
        (
            "td { background: url(data:image/svg+xml;base64,PHN2Zz4=) }",
            "url",
        ),
        (
            "td { background-image: image-set('https://evil.example/a.png' 1x) }",
            "image-set",
        ),
        (
            "td { background-image: -webkit-image-set(url(/a.png) 1x) }",
            "image-set",
        ),
        ("div { position: fixed; inset: 0 }", "position"),
        (
            "td { unicode-bidi: bidi-override; direction: rtl }",
            "unicode-bidi",
        ),
        ("td { DIRECTION: rtl }", "direction"),
        ("div { POSITION: Fixed }", "position"),
        ("div { position:fixed!important }", "position"),
        ("div { position: var(--p) }", "position"),
        ("td { content: '</style><script>alert(1)</script>' }", "</"),
        ("td { color: red } } body { display: none }", ""),
        ("td { .x { color: red } }", ""),
        (
            "@media screen { @media print { td { color: red } } }",
            "nested",
        ),
        ("~ p { color: red }", "selector"),
        ("td, + p { color: red }", "selector"),
        ("td, { color: red }", "empty selector"),
        (", td { color: red }", "empty selector"),
        ("td,, th { color: red }", "empty selector"),
        ("{ color: red }", "empty selector"),
        ("td { -moz-binding: url(/x.xml) }", "binding"),
    ] {
        let e = css_err(src);
        assert!(e.message.contains(what), "{src}: {e}");
    }
    let e = css_err("td { color: red }\n\n  @import url(/x.css);");
    assert_eq!(e.line, 3, "{e}");
    let e = css_err("td { color: red }\nth { color red }");
    assert_eq!(e.line, 2, "{e}");
    let e = css_err(&"td{color:red}".repeat(MAX_CSS_BYTES / 13 + 1));
    assert!(e.message.contains("larger"), "{e}");
}

#[test]
fn compiled_is_send_sync_and_cheap_to_clone() {
    fn is<T: Send + Sync + Clone>() {}
    is::<Compiled>();
    fn send<T: Send>() {}
    send::<Page>();
}
