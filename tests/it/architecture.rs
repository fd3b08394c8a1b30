//! The layering of docs/architecture.md, checked on the source: which top-level module may use
//! which. A `crate::<module>` path anywhere in a module's files (code, not comments) is a use.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The adapters: thin, and they only talk to the service (never to each other or the store).
const ADAPTERS: &[&str] = &["api", "mcp", "review"];
/// What the service keeps to itself.
const SERVICE_INTERNALS: &[&str] = &["store", "wake"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules named by `crate::` paths in `code` (comments stripped), including the
/// items of `use crate::{a, b::c}` groups.
fn uses(code: &str) -> BTreeSet<String> {
    let code: String = code
        .lines()
        .map(|l| match l.find("//") {
            // Not inside a string like "http://": only strip when no quote precedes it.
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at depth-0 commas.
            let (mut depth, mut item) = (0, String::new());
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(ch);
                }
            }
            out.insert(ident(&item));
        } else {
            out.insert(ident(rest));
        }
    }
    out.remove("");
    out
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// module → the other top-level modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let mut used = uses(&std::fs::read_to_string(&f).unwrap());
        used.remove(&module);
        g.entry(module).or_default().extend(used);
    }
    g
}

#[test]
fn the_use_finder_reads_groups_and_skips_comments() {
    let code = "use crate::{\n    error::{Error, FieldError},\n    kinds::Kind,\n};\n\
                // crate::store is only mentioned here\n\
                let x = crate::token::ct_eq(a, b); let u = \"http://x\"; crate::wake::Hub::new(1);";
    let got: Vec<String> = uses(code).into_iter().collect();
    assert_eq!(got, ["error", "kinds", "token", "wake"]);
}

#[test]
fn adapters_use_only_the_service_never_each_other_or_the_store() {
    let g = graph();
    assert!(g.len() >= 15, "found modules {:?}", g.keys());
    for adapter in ADAPTERS {
        let used = &g[*adapter];
        for other in ADAPTERS.iter().chain(SERVICE_INTERNALS).chain(&["server"]) {
            assert!(
                !used.contains(*other) || other == adapter,
                "{adapter} uses {other}: {used:?}"
            );
        }
        assert!(
            used.contains("service"),
            "{adapter} should go through the service"
        );
    }
}

#[test]
fn the_modules_form_no_cycle() {
    let g = graph();
    // Depth-first search for a back edge, reporting the cycle.
    fn visit<'a>(
        n: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(n) {
            return;
        }
        if let Some(i) = stack.iter().position(|s| *s == n) {
            panic!("import cycle: {} -> {n}", stack[i..].join(" -> "));
        }
        stack.push(n);
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, stack, done);
        }
        stack.pop();
        done.insert(n);
    }
    let mut done = BTreeSet::new();
    for n in g.keys() {
        visit(n, &g, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_store_and_the_waiter_hub_know_nothing_of_kinds_beyond_their_names() {
    let g = graph();
    // The store may name a kind (`kinds::Kind`, kept with the record) but never validates or
    // renders one: no form, no service, no adapter.
    for m in ["store", "wake"] {
        for banned in ["form", "service", "api", "mcp", "review"] {
            assert!(!g[m].contains(banned), "{m} uses {banned}: {:?}", g[m]);
        }
    }
    assert!(!g["wake"].contains("kinds"), "{:?}", g["wake"]);
}
