//! The MCP 2025-11-25 elicitation `requestedSchema` subset.
//!
//! This module owns both sides of a form. [`RequestedSchema::parse`] checks the flat,
//! primitive-only schema an agent sends (text, number/integer, boolean, single- and
//! multi-select enums) and turns it into typed [`Field`]s. [`RequestedSchema::validate_values`]
//! and [`Field::validate_value`] check what a human reviewer submits against it. Errors are
//! collected per field and worded for people. Only `serde`/`serde_json` are used; the email,
//! URI, date and date-time checks are hand-written and never panic.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::error::FieldError;

type Obj = Map<String, Value>;
type Options = Vec<ChoiceOption>;

const MAX_PROPERTIES: usize = 100;
const MAX_OPTIONS: usize = 500;
const MAX_TITLE: usize = 200;
const MAX_DESCRIPTION: usize = 2000;
const MAX_LENGTH_CAP: u64 = 100_000;
const TOP_KEYS: &str = "type properties required title description $schema";
const BOOL_KEYS: &str = "type title description default";
const NUMBER_KEYS: &str = "type title description default minimum maximum";
const ARRAY_KEYS: &str = "type title description default items minItems maxItems";
const STRING_KEYS: &str =
    "type title description default minLength maxLength format enum enumNames oneOf";
const ITEMS_KEYS: &str = "type enum anyOf";
const OPTION_KEYS: &str = "const title";
const NAME_RULE: &str = "use 1-64 letters, digits, '_', '.' or '-'";
const TYPES: &str = "must be one of: string, number, integer, boolean, array";
const NESTED: &str = "nested objects are not supported; use flat top-level properties";
const TYPE_ARRAY: &str = "type arrays such as [\"string\", \"null\"] are not supported; \
    use one type and leave the property out of `required` to make it optional";
const ITEMS_SHAPE: &str = "must be {\"type\": \"string\", \"enum\": [...]} \
    or {\"anyOf\": [{\"const\": \"value\", \"title\": \"Label\"}, ...]}";
const TITLES_RULE: &str =
    "must be an array of titles (up to 200 characters each), one per enum value";
const OPTION_SHAPE: &str = "must be an object like {\"const\": \"value\", \"title\": \"Label\"}";

#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text {
        min_length: Option<u64>,
        max_length: Option<u64>,
        format: Option<TextFormat>,
    },
    Number {
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// Single-select.
    Choice {
        options: Vec<ChoiceOption>,
    },
    /// Multi-select.
    MultiChoice {
        options: Vec<ChoiceOption>,
        min_items: Option<u64>,
        max_items: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Email,
    Uri,
    Date,
    DateTime,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceOption {
    pub value: String,
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    pub kind: FieldKind,
}

/// A checked schema; fields are kept in declaration order.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedSchema {
    title: Option<String>,
    fields: Vec<Field>,
}

struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let (field, message) = (field.into(), message.into());
        self.0.push(FieldError { field, message });
    }

    /// `value`, or an error at `field` when it is `None`.
    fn need<T>(&mut self, v: Option<T>, field: impl Into<String>, msg: &str) -> Option<T> {
        v.or_else(|| self.fail(field, msg))
    }

    fn fail<T>(&mut self, field: impl Into<String>, message: impl Into<String>) -> Option<T> {
        self.push(field, message);
        None
    }

    fn at(&mut self, path: &str, key: &str, message: impl Into<String>) {
        self.push(join(path, key), message);
    }

    fn at_fail<T>(&mut self, path: &str, key: &str, message: impl Into<String>) -> Option<T> {
        self.fail(join(path, key), message)
    }

    fn finish<T>(self, value: T) -> Result<T, Vec<FieldError>> {
        self.0.is_empty().then_some(value).ok_or(self.0)
    }
}

impl RequestedSchema {
    /// Parse and check an agent-supplied schema; `path` prefixes error fields
    /// (e.g. "requestedSchema"). All problems are reported, not just the first.
    pub fn parse(value: &Value, path: &str) -> Result<Self, Vec<FieldError>> {
        let mut e = Errors(Vec::new());
        let Some(obj) = e.need(value.as_object(), path, "must be a JSON object") else {
            return Err(e.0);
        };
        check_keys(obj, TOP_KEYS, path, &mut e);
        if obj.get("$schema").is_some_and(|s| !s.is_string()) {
            e.at(path, "$schema", "must be a string");
        }
        if obj.get("type").is_none_or(|t| t != "object") {
            e.at(path, "type", "is required and must be \"object\"");
        }
        let title = text_opt(obj, "title", MAX_TITLE, path, &mut e);
        text_opt(obj, "description", MAX_DESCRIPTION, path, &mut e);
        let ppath = join(path, "properties");
        let props = obj.get("properties").and_then(Value::as_object);
        let props = props.filter(|p| (1..=MAX_PROPERTIES).contains(&p.len()));
        let msg = format!("must be an object with 1 to {MAX_PROPERTIES} properties");
        let props = e.need(props, &ppath, &msg);
        let mut fields = Vec::new();
        for (name, def) in props.into_iter().flatten() {
            if valid_name(name) {
                fields.extend(parse_field(name, def, &join(&ppath, name), &mut e));
            } else {
                let msg = format!("invalid name \"{}\": {NAME_RULE}", short(name));
                e.push(&ppath, msg);
            }
        }
        if let Some(req) = obj.get("required") {
            parse_required(req, props, &mut fields, &join(path, "required"), &mut e);
        }
        e.finish(Self { title, fields })
    }

    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Check a reviewer's submission: every field's problems are reported, and the object is
    /// returned unchanged when there are none.
    pub fn validate_values(
        &self,
        values: &Value,
        enforce_required: bool,
    ) -> Result<Map<String, Value>, Vec<FieldError>> {
        let mut e = Errors(Vec::new());
        let msg = "must be an object of field values";
        let Some(obj) = e.need(values.as_object(), "", msg) else {
            return Err(e.0);
        };
        for f in &self.fields {
            match obj.get(&f.name).map(|v| f.validate_value(v)) {
                Some(Err(m)) => e.push(&f.name, m),
                None if enforce_required && f.required => e.push(&f.name, "required"),
                _ => {}
            }
        }
        for key in obj.keys().filter(|k| self.field(k).is_none()) {
            e.push(key, "unknown field");
        }
        e.finish(obj.clone())
    }
}

impl Field {
    /// Validate one value for this field (used by validate_values and by proposal editing).
    pub fn validate_value(&self, value: &Value) -> Result<(), String> {
        match &self.kind {
            FieldKind::Text {
                min_length: lo,
                max_length: hi,
                format,
            } => {
                let s = value.as_str().ok_or("must be text")?;
                let n = s.chars().count() as u64;
                within(n, [*lo, *hi], |w, m| format!("must be at {w} {}", chars(m)))?;
                match format {
                    Some(f) if !f.matches(s) => Err(f.message().to_owned()),
                    _ => Ok(()),
                }
            }
            FieldKind::Number {
                integer,
                minimum: lo,
                maximum: hi,
            } => {
                let n = value.as_f64().ok_or("must be a number")?;
                if *integer && !(value.is_i64() || value.is_u64() || n.fract() == 0.0) {
                    return Err("must be a whole number".into());
                }
                within(n, [*lo, *hi], |w, m| format!("must be at {w} {m}"))
            }
            FieldKind::Boolean => match value {
                Value::Bool(_) => Ok(()),
                _ => Err("must be true or false".into()),
            },
            FieldKind::Choice { options } => match value.as_str() {
                Some(s) if options.iter().any(|o| o.value == s) => Ok(()),
                _ => Err(one_of(options)),
            },
            FieldKind::MultiChoice {
                options,
                min_items: lo,
                max_items: hi,
            } => {
                let items = value.as_array().ok_or("must be a list of choices")?;
                let mut seen = HashSet::new();
                for item in items {
                    let s = item.as_str().ok_or("every choice must be text")?;
                    if !options.iter().any(|o| o.value == s) {
                        let allowed = one_of(options);
                        return Err(format!("\"{}\" is not allowed; {allowed}", short(s)));
                    }
                    if !seen.insert(s) {
                        return Err(format!("\"{}\" is chosen more than once", short(s)));
                    }
                }
                let n = items.len() as u64;
                within(n, [*lo, *hi], |w, m| format!("choose at {w} {m}"))
            }
        }
    }

    /// Human label: title, else name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

impl TextFormat {
    fn matches(self, s: &str) -> bool {
        match self {
            Self::Email => is_email(s),
            Self::Uri => is_uri(s),
            Self::Date => is_date(s.as_bytes()),
            Self::DateTime => is_date_time(s.as_bytes()),
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Email => "must be a valid email address",
            Self::Uri => "must be a valid URI, such as https://example.com",
            Self::Date => "must be a valid date (YYYY-MM-DD)",
            Self::DateTime => "must be a valid date and time, such as 2025-01-31T14:30:00Z",
        }
    }
}

fn parse_field(name: &str, def: &Value, path: &str, e: &mut Errors) -> Option<Field> {
    let obj = e.need(def.as_object(), path, "must be an object with a \"type\"")?;
    let kind = match obj.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "string" => parse_string(obj, path, e),
            "number" | "integer" => parse_number(obj, t == "integer", path, e),
            "boolean" => {
                check_keys(obj, BOOL_KEYS, path, e);
                Some(FieldKind::Boolean)
            }
            "array" => parse_array(obj, path, e),
            "object" => e.at_fail(path, "type", NESTED),
            _ => e.at_fail(path, "type", TYPES),
        },
        Some(Value::Array(_)) => e.at_fail(path, "type", TYPE_ARRAY),
        Some(_) => e.at_fail(path, "type", TYPES),
        None => {
            check_keys(obj, BOOL_KEYS, path, e);
            e.at_fail(path, "type", format!("is required and {TYPES}"))
        }
    };
    let title = text_opt(obj, "title", MAX_TITLE, path, e);
    let description = text_opt(obj, "description", MAX_DESCRIPTION, path, e);
    let mut field = Field {
        name: name.to_owned(),
        title,
        description,
        required: false,
        default: None,
        kind: kind?,
    };
    if let Some(d) = obj.get("default") {
        match field.validate_value(d) {
            Ok(()) => field.default = Some(d.clone()),
            Err(m) => e.at(path, "default", format!("is invalid: {m}")),
        }
    }
    Some(field)
}

fn parse_string(obj: &Obj, path: &str, e: &mut Errors) -> Option<FieldKind> {
    check_keys(obj, STRING_KEYS, path, e);
    let (en, one) = (obj.get("enum"), obj.get("oneOf"));
    if en.is_none() && obj.contains_key("enumNames") {
        e.at(path, "enumNames", "is only allowed together with enum");
    }
    if en.is_some() || one.is_some() {
        for key in ["minLength", "maxLength", "format"] {
            if obj.contains_key(key) {
                e.at(path, key, "cannot be combined with enum or oneOf");
            }
        }
        let options = match (en, one) {
            (Some(en), None) => parse_enum(en, obj.get("enumNames"), path, e),
            (None, Some(one)) => parse_consts(one, &join(path, "oneOf"), e),
            _ => e.at_fail(path, "oneOf", "use either enum or oneOf, not both"),
        };
        return options.map(|options| FieldKind::Choice { options });
    }
    let [min_length, max_length] = bounds(obj, ["minLength", "maxLength"], as_uint, path, e);
    if max_length.is_some_and(|m| m > MAX_LENGTH_CAP) {
        let msg = format!("must be at most {MAX_LENGTH_CAP}");
        e.at(path, "maxLength", msg);
    }
    let format = match obj.get("format").map(Value::as_str) {
        None => None,
        Some(Some("email")) => Some(TextFormat::Email),
        Some(Some("uri")) => Some(TextFormat::Uri),
        Some(Some("date")) => Some(TextFormat::Date),
        Some(Some("date-time")) => Some(TextFormat::DateTime),
        Some(_) => e.at_fail(path, "format", "must be email, uri, date or date-time"),
    };
    Some(FieldKind::Text {
        min_length,
        max_length,
        format,
    })
}

fn parse_number(obj: &Obj, integer: bool, path: &str, e: &mut Errors) -> Option<FieldKind> {
    check_keys(obj, NUMBER_KEYS, path, e);
    let [minimum, maximum] = bounds(obj, ["minimum", "maximum"], as_number, path, e);
    Some(FieldKind::Number {
        integer,
        minimum,
        maximum,
    })
}

fn parse_array(obj: &Obj, path: &str, e: &mut Errors) -> Option<FieldKind> {
    check_keys(obj, ARRAY_KEYS, path, e);
    let [min_items, max_items] = bounds(obj, ["minItems", "maxItems"], as_uint, path, e);
    let ipath = join(path, "items");
    let items = obj.get("items").and_then(Value::as_object);
    let items = e.need(items, &ipath, ITEMS_SHAPE)?;
    check_keys(items, ITEMS_KEYS, &ipath, e);
    if items.get("type").is_some_and(|t| t != "string") {
        e.at(&ipath, "type", "must be \"string\"");
    }
    let options = match (items.get("enum"), items.get("anyOf")) {
        (Some(en), None) => parse_enum(en, None, &ipath, e),
        (None, Some(any)) => parse_consts(any, &join(&ipath, "anyOf"), e),
        _ => e.fail(&ipath, ITEMS_SHAPE),
    }?;
    let n = options.len() as u64;
    let msg = format!("must not exceed the number of options ({n})");
    for (key, v) in [("minItems", min_items), ("maxItems", max_items)] {
        if v.is_some_and(|v| v > n) {
            e.at(path, key, &msg);
        }
    }
    Some(FieldKind::MultiChoice {
        options,
        min_items,
        max_items,
    })
}

/// `enum` plus the legacy `enumNames` titles; `path` is the object holding them.
fn parse_enum(en: &Value, names: Option<&Value>, path: &str, e: &mut Errors) -> Option<Options> {
    let epath = join(path, "enum");
    let list = option_list(en, &epath, e)?;
    let values = e.need(strings(list), &epath, "must contain only strings")?;
    let mut titles = vec![None; values.len()];
    if let Some(names) = names {
        let list = names.as_array().and_then(|a| strings(a));
        let fits = |t: &Vec<&str>| t.len() == values.len() && t.iter().all(|t| title_ok(t));
        let list = e.need(list.filter(fits), join(path, "enumNames"), TITLES_RULE)?;
        titles = list.into_iter().map(|t| Some(t.to_owned())).collect();
    }
    let opts = values.iter().zip(titles).map(|(v, t)| option(v, t));
    unique(opts.collect(), &epath, e)
}

fn title_ok(t: &str) -> bool {
    t.chars().count() <= MAX_TITLE
}

fn strings(list: &[Value]) -> Option<Vec<&str>> {
    list.iter().map(Value::as_str).collect()
}

/// `oneOf` / `anyOf`: `[{"const": "x", "title": "X"}, ...]`.
fn parse_consts(list: &Value, path: &str, e: &mut Errors) -> Option<Options> {
    let list = option_list(list, path, e)?;
    let mut opts = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let ipath = join(path, &i.to_string());
        let Some(o) = item.as_object() else {
            e.push(ipath, OPTION_SHAPE);
            continue;
        };
        check_keys(o, OPTION_KEYS, &ipath, e);
        let title = text_opt(o, "title", MAX_TITLE, &ipath, e);
        match o.get("const").and_then(Value::as_str) {
            Some(c) => opts.push(option(c, title)),
            None => e.at(&ipath, "const", "is required and must be a string"),
        }
    }
    unique(opts, path, e).filter(|o| o.len() == list.len())
}

fn option(value: &str, title: Option<String>) -> ChoiceOption {
    let value = value.to_owned();
    ChoiceOption { value, title }
}

fn option_list<'a>(v: &'a Value, path: &str, e: &mut Errors) -> Option<&'a Vec<Value>> {
    let list = v
        .as_array()
        .filter(|a| (1..=MAX_OPTIONS).contains(&a.len()));
    let msg = format!("must be an array of 1 to {MAX_OPTIONS} options");
    e.need(list, path, &msg)
}

fn unique(opts: Options, path: &str, e: &mut Errors) -> Option<Options> {
    let mut seen = HashSet::new();
    let dup = opts.iter().find(|o| !seen.insert(o.value.as_str()));
    match dup.map(|d| format!("lists \"{}\" more than once", short(&d.value))) {
        Some(m) => e.fail(path, m),
        None => Some(opts),
    }
}

fn parse_required(
    req: &Value,
    props: Option<&Obj>,
    fields: &mut [Field],
    path: &str,
    e: &mut Errors,
) {
    let Some(names) = req.as_array() else {
        return e.push(path, "must be an array of property names");
    };
    let mut seen = HashSet::new();
    for name in names {
        let Some(name) = name.as_str() else {
            e.push(path, "must contain only strings");
            continue;
        };
        if !seen.insert(name) {
            e.push(path, format!("lists \"{}\" more than once", short(name)));
        } else if props.is_some_and(|p| !p.contains_key(name)) {
            e.push(path, format!("\"{}\" is not a property", short(name)));
        }
        if let Some(f) = fields.iter_mut().find(|f| f.name == name) {
            f.required = true;
        }
    }
}

/// Reports every key of `obj` not listed in the space-separated `allowed`.
fn check_keys(obj: &Obj, allowed: &str, path: &str, e: &mut Errors) {
    for key in obj.keys().filter(|k| !allowed.split(' ').any(|a| *k == a)) {
        let why = match key.as_str() {
            "$ref" => "references are not supported",
            "allOf" | "anyOf" | "oneOf" | "not" => "schema composition is not supported",
            "properties" => "nested objects are not supported",
            _ => "unknown keyword",
        };
        let list = allowed.replace(' ', ", ");
        let msg = format!(
            "`{}` is not allowed here: {why} (allowed: {list})",
            short(key)
        );
        e.at(path, key, msg);
    }
}

fn text_opt(obj: &Obj, key: &str, max: usize, path: &str, e: &mut Errors) -> Option<String> {
    match obj.get(key)? {
        Value::String(s) if s.chars().count() <= max => Some(s.clone()),
        Value::String(_) => e.at_fail(path, key, format!("must be at most {max} characters")),
        _ => e.at_fail(path, key, "must be a string"),
    }
}

/// A `[min, max]` keyword pair, each checked by `get`, with min ≤ max.
fn bounds<T: PartialOrd + Copy>(
    obj: &Obj,
    keys: [&str; 2],
    get: fn(&Value) -> Result<T, &'static str>,
    path: &str,
    e: &mut Errors,
) -> [Option<T>; 2] {
    let [lo, hi] = keys.map(|k| get(obj.get(k)?).map_err(|m| e.at(path, k, m)).ok());
    if lo.zip(hi).is_some_and(|(lo, hi)| lo > hi) {
        let msg = format!("must not be greater than {}", keys[1]);
        e.at(path, keys[0], msg);
    }
    [lo, hi]
}

/// A non-negative integer; `5.0` counts as 5.
fn as_uint(v: &Value) -> Result<u64, &'static str> {
    let whole = |f: &f64| f.fract() == 0.0 && (0.0..=9.0e15).contains(f);
    let n = v.as_u64().or(v.as_f64().filter(whole).map(|f| f as u64));
    n.ok_or("must be a non-negative integer")
}

fn as_number(v: &Value) -> Result<f64, &'static str> {
    v.as_f64().ok_or("must be a number")
}

/// `Err(msg("least", min))` or `Err(msg("most", max))` when `n` is out of range.
fn within<T: PartialOrd + Copy>(
    n: T,
    [lo, hi]: [Option<T>; 2],
    msg: impl Fn(&str, T) -> String,
) -> Result<(), String> {
    match (lo.filter(|lo| n < *lo), hi.filter(|hi| n > *hi)) {
        (Some(lo), _) => Err(msg("least", lo)),
        (_, Some(hi)) => Err(msg("most", hi)),
        _ => Ok(()),
    }
}

fn valid_name(name: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    (1..=64).contains(&name.len()) && name.bytes().all(ok)
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_owned(),
        _ => format!("{path}.{key}"),
    }
}

/// User-supplied text quoted in messages, cut to a readable length.
fn short(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", s.get(..i).unwrap_or_default()),
        None => s.to_owned(),
    }
}

fn chars(n: u64) -> String {
    format!("{n} character{}", if n == 1 { "" } else { "s" })
}

fn one_of(options: &[ChoiceOption]) -> String {
    if options.len() > 10 {
        return "must be one of the allowed options".to_owned();
    }
    let values: Vec<&str> = options.iter().map(|o| o.value.as_str()).collect();
    format!("must be one of: {}", values.join(", "))
}

fn no_space(s: &str) -> bool {
    !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `local@domain.tld`: one `@`, no whitespace, dotted domain of non-empty labels.
fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    let label = |l: &str| {
        let inner = l.chars().all(|c| c.is_alphanumeric() || c == '-');
        inner && !l.is_empty() && !l.starts_with('-') && !l.ends_with('-')
    };
    !local.is_empty() && no_space(s) && domain.contains('.') && domain.split('.').all(label)
}

/// `scheme:rest` with an RFC 3986 scheme, a non-empty rest and no whitespace.
fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut b = scheme.bytes();
    let first = b.next().is_some_and(|c| c.is_ascii_alphabetic());
    let tail = b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'.' | b'-'));
    first && tail && !rest.is_empty() && no_space(s)
}

fn digits(b: &[u8]) -> Option<u32> {
    let all = !b.is_empty() && b.iter().all(u8::is_ascii_digit);
    all.then(|| b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

/// Two ASCII digits forming a number ≤ `max`.
fn two(a: u8, b: u8, max: u32) -> bool {
    digits(&[a, b]).is_some_and(|n| n <= max)
}

/// `YYYY-MM-DD`, a real calendar date (Gregorian leap years).
fn is_date(b: &[u8]) -> bool {
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2] = *b else {
        return false;
    };
    let (Some(y), Some(m)) = (digits(&[y1, y2, y3, y4]), digits(&[m1, m2])) else {
        return false;
    };
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    two(d1, d2, days) && (d1, d2) != (b'0', b'0')
}

/// RFC 3339 `YYYY-MM-DDTHH:MM:SS(.frac)?(Z|±HH:MM)`; `t`/`z` accepted, second 60 allowed.
fn is_date_time(b: &[u8]) -> bool {
    let Some((date, rest)) = b.split_at_checked(10) else {
        return false;
    };
    let [b'T' | b't', h1, h2, b':', m1, m2, b':', s1, s2, ref rest @ ..] = *rest else {
        return false;
    };
    let time = two(h1, h2, 23) && two(m1, m2, 59) && two(s1, s2, 60);
    let frac = match rest {
        [b'.', frac @ ..] => frac.iter().take_while(|c| c.is_ascii_digit()).count(),
        _ => 0,
    };
    let offset = match rest.get(frac + usize::from(frac > 0)..) {
        Some([b'Z' | b'z']) => true,
        Some([b'+' | b'-', h1, h2, b':', m1, m2]) => two(*h1, *h2, 23) && two(*m1, *m2, 59),
        _ => false,
    };
    is_date(date) && time && offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: &Value) -> Result<RequestedSchema, Vec<FieldError>> {
        RequestedSchema::parse(v, "requestedSchema")
    }
    fn wrap(p: Value) -> Value {
        json!({"type": "object", "properties": {"f": p}})
    }
    fn field(p: Value) -> Field {
        parse(&wrap(p)).unwrap().fields()[0].clone()
    }
    /// Error fields of a failing schema, shortened: "$" is the top level, "f" the property.
    fn errs(v: &Value) -> String {
        let fields: Vec<String> = parse(v).unwrap_err().into_iter().map(|e| e.field).collect();
        let fields = fields
            .join(" ")
            .replace("requestedSchema.properties.f", "f");
        fields.replace("requestedSchema", "$")
    }
    fn first_message(v: &Value) -> String {
        parse(v).unwrap_err().swap_remove(0).message
    }
    fn fmt_ok(format: &str, v: &str) -> bool {
        let f = field(json!({"type": "string", "format": format}));
        f.validate_value(&json!(v)).is_ok()
    }
    /// Runs `schema => expected error fields` lines. With `wrap_as_f` each schema is the
    /// definition of property "f"; otherwise it is the whole schema, where `PROPS` stands
    /// for a valid `properties` object.
    fn run_bad(table: &str, wrap_as_f: bool) {
        for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (schema, want) = line.split_once(" => ").unwrap();
            let schema = schema.replace("PROPS", r#"{"a": {"type": "boolean"}}"#);
            let schema: Value = serde_json::from_str(&schema).unwrap();
            let schema = if wrap_as_f { wrap(schema) } else { schema };
            assert_eq!(errs(&schema), want, "{line}");
        }
    }

    #[test]
    fn parses_every_keyword_in_order() {
        let s = parse(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object", "title": "Deploy", "description": "Approve it",
            "properties": {
                "name": {"type": "string", "title": "Name", "description": "d", "minLength": 1,
                         "maxLength": 6.0, "format": "email", "default": "a@b.co"},
                "age": {"type": "integer", "minimum": 0.5, "maximum": 9, "default": 3},
                "ratio": {"type": "number", "minimum": -1, "maximum": 1},
                "ok": {"type": "boolean", "default": false},
                "env": {"type": "string", "enum": ["dev", "prod"], "enumNames": ["Dev", "Prod"]},
                "tier": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]},
                         "minItems": 1, "maxItems": 2, "default": ["x"]},
                "more": {"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}},
                "typed": {"type": "array", "items": {"type": "string", "anyOf": [{"const": "q"}]}}
            },
            "required": ["name", "tags"]
        }))
        .unwrap();
        let names: Vec<&str> = s.fields().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names.join(" "),
            "name age ratio ok env tier tags more typed"
        );
        assert_eq!(s.title(), Some("Deploy"));
        let get = |n: &str| s.field(n).unwrap();
        let (name, age) = (get("name"), get("age"));
        assert!(name.required && get("tags").required && !age.required);
        assert_eq!((name.label(), age.label()), ("Name", "age"));
        assert_eq!(name.default, Some(json!("a@b.co")));
        let (lo, hi, format) = (Some(1), Some(6), Some(TextFormat::Email));
        let text = FieldKind::Text {
            min_length: lo,
            max_length: hi,
            format,
        };
        assert_eq!(name.kind, text);
        let (lo, hi) = (Some(0.5), Some(9.0));
        assert_eq!(
            age.kind,
            FieldKind::Number {
                integer: true,
                minimum: lo,
                maximum: hi
            }
        );
        let opt = |v: &str, t: Option<&str>| option(v, t.map(Into::into));
        let options = vec![opt("dev", Some("Dev")), opt("prod", Some("Prod"))];
        assert_eq!(get("env").kind, FieldKind::Choice { options });
        let options = vec![opt("a", Some("A")), opt("b", None)];
        assert_eq!(get("tier").kind, FieldKind::Choice { options });
        let (options, lo, hi) = (vec![opt("x", None), opt("y", None)], Some(1), Some(2));
        let tags = FieldKind::MultiChoice {
            options,
            min_items: lo,
            max_items: hi,
        };
        assert_eq!(get("tags").kind, tags);
        assert!(s.field("nope").is_none());
        for f in ["uri", "date", "date-time"] {
            field(json!({"type": "string", "format": f}));
        }
        field(json!({"type": "string", "maxLength": 100_000, "title": "x".repeat(200)}));
        let values: Vec<String> = (0..500).map(|i| i.to_string()).collect();
        field(json!({"type": "string", "enum": values}));
        field(
            json!({"type": "number", "minimum": 1, "maximum": 1, "description": "é".repeat(2000)}),
        );
        let hundred: Obj = (0..100)
            .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
            .collect();
        let s = parse(&json!({"type": "object", "properties": hundred})).unwrap();
        assert_eq!(s.fields().len(), 100);
        assert!(parse(&wrap(json!({"type": "boolean"})))
            .unwrap()
            .title()
            .is_none());
        let dotted = json!({"type": "object", "properties": {"a.b-c_D9": {"type": "boolean"}}});
        assert!(parse(&dotted).is_ok());
    }

    #[test]
    fn rejects_bad_top_level() {
        run_bad(
            r##"
            [1] => $
            {"properties": PROPS} => $.type
            {"type": "object"} => $.properties
            {"type": "object", "properties": {}} => $.properties
            {"type": "object", "properties": []} => $.properties
            {"type": "object", "properties": PROPS, "$ref": "#/x"} => $.$ref
            {"type": "object", "properties": PROPS, "allOf": []} => $.allOf
            {"type": "object", "properties": PROPS, "anyOf": []} => $.anyOf
            {"type": "object", "properties": PROPS, "oneOf": []} => $.oneOf
            {"type": "object", "properties": PROPS, "$defs": {}} => $.$defs
            {"type": "object", "properties": PROPS, "$schema": 1} => $.$schema
            {"type": "object", "properties": PROPS, "title": 1} => $.title
            {"type": "object", "properties": {"": {"type": "boolean"}}} => $.properties
            {"type": "object", "properties": {"a b": {"type": "boolean"}}} => $.properties
            {"type": "object", "properties": {"é": {"type": "boolean"}}} => $.properties
            {"type": "object", "properties": PROPS, "required": "a"} => $.required
            {"type": "object", "properties": PROPS, "required": [1]} => $.required
            {"type": "object", "properties": PROPS, "required": ["a", "a"]} => $.required
            {"type": "object", "properties": PROPS, "required": ["b"]} => $.required
            "##,
            false,
        );
        let p = json!({"a": {"type": "boolean"}});
        let many: Obj = (0..101)
            .map(|i| (format!("p{i}"), json!({"type": "boolean"})))
            .collect();
        assert_eq!(
            errs(&json!({"type": "array", "properties": many})),
            "$.type $.properties"
        );
        let long = json!({"type": "object", "properties": p, "description": "x".repeat(2001)});
        assert_eq!(errs(&long), "$.description");
        let long = json!({"type": "object", "properties": {"x".repeat(65): {"type": "boolean"}}});
        assert_eq!(errs(&long), "$.properties");
        let e = first_message(&json!({"type": "object", "properties": p, "required": ["b"]}));
        assert_eq!(e, "\"b\" is not a property");
        let e = first_message(&json!({"type": "object", "properties": p, "$ref": "x"}));
        assert!(e.starts_with("`$ref` is not allowed here: references are not supported"));
        let e = RequestedSchema::parse(&json!({"type": "object", "properties": p, "x": 1}), "");
        assert_eq!(e.unwrap_err()[0].field, "x");
    }

    #[test]
    fn rejects_bad_properties() {
        run_bad(
            r##"
            "string" => f
            {"type": "object", "properties": {"x": {"type": "string"}}} => f.type
            {"title": "no type"} => f.type
            {"$ref": "#/$defs/x"} => f.$ref f.type
            {"type": ["string", "null"]} => f.type
            {"type": "null"} => f.type
            {"type": 3} => f.type
            {"type": "string", "$ref": "#/x"} => f.$ref
            {"type": "string", "allOf": []} => f.allOf
            {"type": "string", "anyOf": []} => f.anyOf
            {"type": "string", "properties": {}} => f.properties
            {"type": "string", "items": {}} => f.items
            {"type": "string", "pattern": "x"} => f.pattern
            {"type": "boolean", "minimum": 1} => f.minimum
            {"type": "number", "minLength": 1} => f.minLength
            {"type": "integer", "items": {}} => f.items
            {"type": "boolean", "title": 5} => f.title
            {"type": "string", "minLength": 5, "maxLength": 2} => f.minLength
            {"type": "string", "minLength": -1} => f.minLength
            {"type": "string", "maxLength": 1.5} => f.maxLength
            {"type": "string", "maxLength": "3"} => f.maxLength
            {"type": "string", "maxLength": 100001} => f.maxLength
            {"type": "string", "format": "ipv4"} => f.format
            {"type": "number", "minimum": 2, "maximum": 1} => f.minimum
            {"type": "integer", "maximum": "9"} => f.maximum
            {"type": "string", "enum": ["a", "a"]} => f.enum
            {"type": "string", "enum": []} => f.enum
            {"type": "string", "enum": "a"} => f.enum
            {"type": "string", "enum": ["a", 1]} => f.enum
            {"type": "string", "enum": ["a"], "maxLength": 3, "format": "email"} => f.maxLength f.format
            {"type": "string", "enum": ["a", "b"], "enumNames": ["A"]} => f.enumNames
            {"type": "string", "enumNames": ["A"]} => f.enumNames
            {"type": "string", "enum": ["a"], "oneOf": [{"const": "a"}]} => f.oneOf
            {"type": "string", "oneOf": [{"const": "a"}, {"const": "a"}]} => f.oneOf
            {"type": "string", "oneOf": [{"title": "A"}]} => f.oneOf.0.const
            {"type": "string", "oneOf": [{"const": "a", "$ref": "x"}]} => f.oneOf.0.$ref
            {"type": "string", "oneOf": ["a"]} => f.oneOf.0
            {"type": "string", "oneOf": [{"const": "a"}], "minLength": 1} => f.minLength
            {"type": "array"} => f.items
            {"type": "array", "items": "string"} => f.items
            {"type": "array", "items": {"type": "number", "enum": ["a"]}} => f.items.type
            {"type": "array", "items": {"type": "string"}} => f.items
            {"type": "array", "items": {"enum": ["a"], "anyOf": [{"const": "a"}]}} => f.items
            {"type": "array", "items": {"enum": ["a", "a"]}} => f.items.enum
            {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "a"}]}} => f.items.anyOf
            {"type": "array", "items": {"oneOf": [{"const": "a"}]}} => f.items.oneOf f.items
            {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "maxItems": 1} => f.minItems
            {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3} => f.maxItems
            {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3} => f.minItems
            {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": -1} => f.minItems
            {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true} => f.uniqueItems
            {"type": "string", "maxLength": 2, "default": "abc"} => f.default
            {"type": "string", "format": "date", "default": "2023-02-29"} => f.default
            {"type": "integer", "default": 1.5} => f.default
            {"type": "boolean", "default": "true"} => f.default
            {"type": "string", "enum": ["a"], "default": "b"} => f.default
            {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "default": ["a"]} => f.default
            "##,
            true,
        );
        let big: Vec<String> = (0..501).map(|i| i.to_string()).collect();
        assert_eq!(
            errs(&wrap(json!({"type": "string", "enum": big}))),
            "f.enum"
        );
        let long = |key: &str, n| wrap(json!({"type": "boolean", key: "x".repeat(n)}));
        assert_eq!(errs(&long("title", 201)), "f.title");
        assert_eq!(errs(&long("description", 2001)), "f.description");
        let e = first_message(&wrap(json!({"type": "boolean", "allOf": []})));
        assert!(
            e.contains("composition")
                && e.ends_with("(allowed: type, title, description, default)")
        );
        let p = json!({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "default": ["a"]});
        assert_eq!(first_message(&wrap(p)), "is invalid: choose at least 2");
        let p = json!({"type": "string", "enum": ["a"], "default": "a"});
        assert_eq!(field(p).default, Some(json!("a")));
    }

    #[test]
    fn validates_values_per_kind() {
        // `@ property` starts a group; then `value | expected message` ("ok" = valid).
        let table = r##"
            @ {"type": "string", "minLength": 2, "maxLength": 10}
            "ok" | ok
            "ééééééééé" | ok
            "x" | must be at least 2 characters
            "xxxxxxxxxxx" | must be at most 10 characters
            5 | must be text
            null | must be text
            @ {"type": "string", "maxLength": 1}
            "ab" | must be at most 1 character
            @ {"type": "string", "format": "email"}
            "x" | must be a valid email address
            @ {"type": "integer", "minimum": 1, "maximum": 10}
            1 | ok
            10 | ok
            3.0 | ok
            3.5 | must be a whole number
            0 | must be at least 1
            11 | must be at most 10
            "3" | must be a number
            @ {"type": "integer"}
            18446744073709551615 | ok
            -9223372036854775808 | ok
            @ {"type": "number", "minimum": 0.5, "maximum": 1.5}
            1.25 | ok
            0.25 | must be at least 0.5
            2 | must be at most 1.5
            @ {"type": "boolean"}
            true | ok
            "true" | must be true or false
            @ {"type": "string", "enum": ["a", "b", "c"]}
            "b" | ok
            "d" | must be one of: a, b, c
            ["a"] | must be one of: a, b, c
            @ {"type": "string", "oneOf": [{"const": "x", "title": "X"}]}
            "x" | ok
            "X" | must be one of: x
            @ {"type": "string", "enum": ["0","1","2","3","4","5","6","7","8","9","10"]}
            "z" | must be one of the allowed options
            @ {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 2, "maxItems": 2}
            ["c", "a"] | ok
            ["a"] | choose at least 2
            ["a", "b", "c"] | choose at most 2
            ["a", "a"] | "a" is chosen more than once
            ["a", "z"] | "z" is not allowed; must be one of: a, b, c
            ["a", 1] | every choice must be text
            "a" | must be a list of choices
            @ {"type": "array", "items": {"enum": ["a"]}}
            [] | ok
        "##;
        let mut f = None;
        for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(p) = line.strip_prefix("@ ") {
                f = Some(field(serde_json::from_str(p).unwrap()));
                continue;
            }
            let (v, want) = line.split_once(" | ").unwrap();
            let v: Value = serde_json::from_str(v).unwrap();
            let got = f.as_ref().unwrap().validate_value(&v);
            assert_eq!(got.err().unwrap_or_else(|| "ok".into()), want, "{line}");
        }
    }

    #[test]
    fn checks_formats() {
        // `format +` lists valid values, `format -` invalid ones.
        let table = "
            email + a@b.co first.last+tag@sub.example.org ü@bücher.de
            email - a a@ a@b a@@b.co a@b@c.co a@b..co a@.b.co a@b.co. a@-b.co @b.co
            uri + https://example.com/x?y=1 mailto:a@b.co urn:isbn:0451450523 a+b.c-d:x
            uri - example.com http: 1http://x :x h_t://x
            date + 2024-02-29 2000-02-29 2025-12-31 0001-01-01 2025-04-30
            date - 2023-02-29 1900-02-29 2025-04-31 2025-13-01 2025-00-10 2025-01-00
            date - 2025-1-01 25-01-01 2025-01-01x 2025/01/01 ２０２５-01-01 2025-0é-01
            date-time + 2025-01-31T14:30:00Z 2025-01-31t14:30:00z 2025-01-31T00:00:00-08:00
            date-time + 2024-02-29T23:59:60.123456+05:30 2025-01-31T12:00:00.5+00:00
            date-time - 2025-01-31T14:30:00 2025-01-31T24:00:00Z 2025-01-31T12:60:00Z
            date-time - 2025-01-31T12:00:61Z 2025-01-31T12:00:00.Z 2025-01-31T12:00:00+24:00
            date-time - 2025-01-31T12:00:00+05:60 2025-01-31T12:00:00+0530 2025-01-31
            date-time - 2023-02-29T12:00:00Z 2025-01-31T12:00Z 2025-01-31T12:00:00ZZ
            date-time - 2025-01-31T12:00:00+é 2025-01-31T12:00:00.1.2Z 2025-01-31T1:00:00Z
        ";
        for line in table.lines().filter(|l| !l.trim().is_empty()) {
            let mut words = line.split_whitespace();
            let (format, ok) = (words.next().unwrap(), words.next() == Some("+"));
            words.for_each(|v| assert_eq!(fmt_ok(format, v), ok, "{format} {v}"));
        }
        let spaced = [
            "",
            " ",
            "a b@c.d",
            "http://a b",
            "mailto:a\n",
            "2025-01-31 14:30:00Z",
        ];
        for format in ["email", "uri", "date", "date-time"] {
            spaced
                .iter()
                .for_each(|v| assert!(!fmt_ok(format, v), "{format} {v:?}"));
        }
    }

    #[test]
    fn validates_submissions() {
        let s = parse(&json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3}, "age": {"type": "integer"},
            "ok": {"type": "boolean"}}, "required": ["name", "ok"]}))
        .unwrap();
        let good = json!({"name": "Bo", "ok": true, "age": 3.0});
        assert_eq!(Value::Object(s.validate_values(&good, true).unwrap()), good);
        let bad = json!({"name": "Robert", "age": 1.5, "extra": 1});
        let e = s.validate_values(&bad, true).unwrap_err();
        let got: Vec<String> = e
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        let want = "name: must be at most 3 characters, age: must be a whole number, \
                    ok: required, extra: unknown field";
        assert_eq!(got.join(", "), want);
        assert!(s.validate_values(&json!({"age": 4}), false).is_ok());
        assert_eq!(
            s.validate_values(&json!({"bogus": 1}), false).unwrap_err()[0].field,
            "bogus"
        );
        let e = s.validate_values(&json!([]), true).unwrap_err();
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json,
            json!([{"field": "", "message": "must be an object of field values"}])
        );
    }

    #[test]
    fn hostile_input_just_errors() {
        let mut deep = json!("x");
        for _ in 0..300 {
            deep = json!([deep]);
        }
        assert!(parse(&deep).is_err());
        assert!(parse(&wrap(deep.clone())).is_err());
        assert!(parse(&wrap(json!({"type": "string", "default": deep.clone()}))).is_err());
        let s = parse(&wrap(json!({"type": "array", "items": {"enum": ["a"]}}))).unwrap();
        assert!(s.validate_values(&json!({"f": deep}), true).is_err());
        let huge: Vec<Value> = (0..100_000).map(|_| json!("a")).collect();
        assert!(s.validate_values(&json!({"f": huge}), true).is_err());
        let odd = "é".repeat(50);
        let e = first_message(&json!({"type": "object", "properties": {odd: {"type": "boolean"}}}));
        assert!(e.contains(&format!("\"{}…\"", "é".repeat(40))), "{e}");
        let null_option = wrap(json!({"type": "array", "items": {"enum": [null]}}));
        for v in [json!(null), json!(1), json!("s"), null_option] {
            assert!(parse(&v).is_err());
        }
    }
}
