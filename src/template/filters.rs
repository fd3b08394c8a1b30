//! The filters requesters may use: liquid's standard filters wrapped in [`Guarded`] (a step,
//! and size caps on input and result), plus our own `replace`, `join` and `date` (sizes checked
//! before allocating; RFC 3339 dates), identity `escape`/`escape_once` (output is escaped
//! anyway) and the internal `__autoescape` that ends every `{{ … }}`.

use std::fmt;

use liquid_core::model::{Value, ValueCow, ValueView};
use liquid_core::parser::{FilterArguments, ParameterReflection};
use liquid_core::{Error, Expression, Filter, FilterReflection, ParseFilter, Result, Runtime};
use liquid_lib::stdlib;

use super::budget::{charge, tick, value_too_large, weight, MAX_VALUE_WEIGHT};

/// Appended to every `{{ … }}` of the rewritten source; never accepted from requesters.
pub(super) const AUTOESCAPE: &str = "__autoescape";

/// Quadratic filters (`uniq`) take arrays of at most this many items.
const MAX_QUADRATIC_ITEMS: usize = 2_000;

/// How many arguments a filter takes, checked at compile time with the argument's position
/// (liquid's own errors for this carry none).
#[derive(Debug, Clone)]
pub(super) struct Arity {
    pub min: usize,
    pub max: usize,
    pub keywords: Vec<&'static str>,
}

/// Every filter a requester may use, with its arity, and a constructor for the registry.
pub(super) fn all() -> Vec<(Box<dyn ParseFilter>, Arity)> {
    use stdlib::*;
    let guarded: Vec<Box<dyn ParseFilter>> = vec![
        Box::new(Abs),
        Box::new(Append),
        Box::new(AtLeast),
        Box::new(AtMost),
        Box::new(Capitalize),
        Box::new(Ceil),
        Box::new(Compact),
        Box::new(Concat),
        Box::new(Default),
        Box::new(DividedBy),
        Box::new(Downcase),
        Box::new(First),
        Box::new(Floor),
        Box::new(Last),
        Box::new(Lstrip),
        Box::new(Map),
        Box::new(Minus),
        Box::new(Modulo),
        Box::new(Plus),
        Box::new(Prepend),
        Box::new(Remove),
        Box::new(RemoveFirst),
        Box::new(ReplaceFirst),
        Box::new(Reverse),
        Box::new(Round),
        Box::new(Rstrip),
        Box::new(Size),
        Box::new(Slice),
        Box::new(Sort),
        Box::new(SortNatural),
        Box::new(Split),
        Box::new(Strip),
        Box::new(StripHtml),
        Box::new(StripNewlines),
        Box::new(Times),
        Box::new(Truncate),
        Box::new(TruncateWords),
        Box::new(Uniq),
        Box::new(Upcase),
        Box::new(UrlDecode),
        Box::new(UrlEncode),
        Box::new(Where),
    ];
    let mut out: Vec<(Box<dyn ParseFilter>, Arity)> = guarded
        .into_iter()
        .map(|f| {
            let r = f.reflection();
            let pos = r.positional_parameters();
            let arity = Arity {
                min: pos.iter().filter(|p| !p.is_optional).count(),
                max: pos.len(),
                keywords: r.keyword_parameters().iter().map(|p| p.name).collect(),
            };
            let max_items = if r.name() == "uniq" {
                MAX_QUADRATIC_ITEMS
            } else {
                usize::MAX
            };
            (
                Box::new(Guarded {
                    inner: f,
                    max_items,
                }) as Box<dyn ParseFilter>,
                arity,
            )
        })
        .collect();
    for s in [
        Simple {
            name: "replace",
            min: 1,
            max: 2,
            f: f_replace,
        },
        Simple {
            name: "join",
            min: 0,
            max: 1,
            f: f_join,
        },
        Simple {
            name: "date",
            min: 1,
            max: 1,
            f: f_date,
        },
        Simple {
            name: "escape",
            min: 0,
            max: 0,
            f: f_identity,
        },
        Simple {
            name: "escape_once",
            min: 0,
            max: 0,
            f: f_identity,
        },
    ] {
        let arity = Arity {
            min: s.min,
            max: s.max,
            keywords: vec![],
        };
        out.push((Box::new(s), arity));
    }
    out
}

/// The internal filter that escapes the final value of a `{{ … }}`.
pub(super) fn autoescape() -> Box<dyn ParseFilter> {
    Box::new(Simple {
        name: AUTOESCAPE,
        min: 0,
        max: 0,
        f: f_autoescape,
    })
}

/// The [`weight`] of a filter result, which must be at most [`MAX_VALUE_WEIGHT`]. Inputs need
/// no check: every value a template can reach is the context, a literal, or an earlier
/// (checked) result, or a copy of one of these.
fn result_weight(v: &dyn ValueView) -> Result<usize> {
    weight(v, MAX_VALUE_WEIGHT).ok_or_else(value_too_large)
}

fn items(v: &dyn ValueView) -> usize {
    let n = v
        .as_array()
        .map(|a| a.size())
        .or_else(|| v.as_object().map(|o| o.size()))
        .unwrap_or(0);
    usize::try_from(n).unwrap_or(0)
}

/// A standard filter with a step per call, a size cap on its result (also charged to the
/// render's memory budget) and, for quadratic ones, an item cap on its input.
#[derive(Clone)]
struct Guarded {
    inner: Box<dyn ParseFilter>,
    max_items: usize,
}

impl ParseFilter for Guarded {
    fn parse(&self, args: FilterArguments<'_>) -> Result<Box<dyn Filter>> {
        Ok(Box::new(GuardedFilter {
            inner: self.inner.parse(args)?,
            max_items: self.max_items,
        }))
    }
    fn reflection(&self) -> &dyn FilterReflection {
        self.inner.reflection()
    }
}

#[derive(Debug)]
struct GuardedFilter {
    inner: Box<dyn Filter>,
    max_items: usize,
}

impl fmt::Display for GuardedFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl Filter for GuardedFilter {
    fn evaluate(&self, input: &dyn ValueView, rt: &dyn Runtime) -> Result<Value> {
        tick(1)?;
        if items(input) > self.max_items {
            return Err(value_too_large());
        }
        let out = self.inner.evaluate(input, rt)?;
        charge(result_weight(&out)?)?;
        Ok(out)
    }
}

/// A filter of our own: positional arguments only, evaluated before the call.
#[derive(Clone)]
struct Simple {
    name: &'static str,
    min: usize,
    max: usize,
    f: fn(&dyn ValueView, &[ValueCow<'_>]) -> Result<Value>,
}

impl FilterReflection for Simple {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        ""
    }
    fn positional_parameters(&self) -> &'static [ParameterReflection] {
        &[]
    }
    fn keyword_parameters(&self) -> &'static [ParameterReflection] {
        &[]
    }
}

impl ParseFilter for Simple {
    fn parse(&self, mut args: FilterArguments<'_>) -> Result<Box<dyn Filter>> {
        let positional: Vec<Expression> = args.positional.by_ref().collect();
        if args.keyword.next().is_some() || !(self.min..=self.max).contains(&positional.len()) {
            return Err(Error::with_msg(format!(
                "filter `{}` takes {} to {} arguments",
                self.name, self.min, self.max
            )));
        }
        Ok(Box::new(SimpleFilter {
            s: self.clone(),
            args: positional,
        }))
    }
    fn reflection(&self) -> &dyn FilterReflection {
        self
    }
}

struct SimpleFilter {
    s: Simple,
    args: Vec<Expression>,
}

impl fmt::Debug for SimpleFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.s.name)
    }
}

impl fmt::Display for SimpleFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.s.name)
    }
}

impl Filter for SimpleFilter {
    fn evaluate(&self, input: &dyn ValueView, rt: &dyn Runtime) -> Result<Value> {
        tick(1)?;
        let args = self
            .args
            .iter()
            .map(|e| e.evaluate(rt))
            .collect::<Result<Vec<_>>>()?;
        let out = (self.s.f)(input, &args)?;
        charge(result_weight(&out)?)?;
        Ok(out)
    }
}

/// Escape text for HTML text and attribute values.
pub(super) fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn f_autoescape(input: &dyn ValueView, _: &[ValueCow<'_>]) -> Result<Value> {
    Ok(Value::scalar(html_escape(&input.render().to_string())))
}

fn f_identity(input: &dyn ValueView, _: &[ValueCow<'_>]) -> Result<Value> {
    Ok(input.to_value())
}

fn arg_str(a: &[ValueCow<'_>], i: usize) -> Option<String> {
    a.get(i).map(|v| v.to_kstr().as_str().to_owned())
}

/// `replace`, with the result size known before anything is allocated (liquid's own can make
/// len × len bytes in one call).
fn f_replace(input: &dyn ValueView, a: &[ValueCow<'_>]) -> Result<Value> {
    let s = input.to_kstr();
    let from = arg_str(a, 0).unwrap_or_default();
    let to = arg_str(a, 1).unwrap_or_default();
    let n = s.matches(from.as_str()).count();
    let size = (s.len() - n * from.len()).saturating_add(n.saturating_mul(to.len()));
    if size > MAX_VALUE_WEIGHT {
        return Err(value_too_large());
    }
    Ok(Value::scalar(s.replace(from.as_str(), &to)))
}

/// `join`, size checked before allocating.
fn f_join(input: &dyn ValueView, a: &[ValueCow<'_>]) -> Result<Value> {
    let sep = arg_str(a, 0).unwrap_or_else(|| " ".into());
    let Some(arr) = input.as_array() else {
        return Ok(Value::scalar(input.to_kstr().into_owned()));
    };
    let mut size = 0usize;
    for v in arr.values() {
        size = size.saturating_add(v.to_kstr().len() + sep.len());
        if size > MAX_VALUE_WEIGHT {
            return Err(value_too_large());
        }
    }
    let parts: Vec<String> = arr
        .values()
        .map(|v| v.to_kstr().as_str().to_owned())
        .collect();
    Ok(Value::scalar(parts.join(&sep)))
}

/// `date`: RFC 3339 (what JSON carries), `YYYY-MM-DD` or unix seconds; strftime format checked
/// first (chrono panics on a bad one). Other input passes through unchanged, like liquid's.
fn f_date(input: &dyn ValueView, a: &[ValueCow<'_>]) -> Result<Value> {
    use chrono::format::{Item, StrftimeItems};
    use std::fmt::Write as _;
    if input.is_nil() {
        return Ok(Value::Nil);
    }
    let fmt = arg_str(a, 0).unwrap_or_default();
    let s = input.to_kstr();
    let s = s.trim();
    let dt = chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|d| d.and_utc().fixed_offset())
        })
        .or_else(|| {
            s.parse::<i64>()
                .ok()
                .and_then(|n| chrono::DateTime::from_timestamp(n, 0))
                .map(|d| d.fixed_offset())
        });
    let Some(dt) = dt else {
        return Ok(input.to_value());
    };
    let items: Vec<Item<'_>> = StrftimeItems::new(&fmt).collect();
    if fmt.len() > 200 || items.iter().any(|i| matches!(i, Item::Error)) {
        return Err(Error::with_msg(format!("invalid date format {fmt:?}")));
    }
    let mut out = String::new();
    write!(out, "{}", dt.format_with_items(items.into_iter()))
        .map_err(|_| Error::with_msg(format!("invalid date format {fmt:?}")))?;
    Ok(Value::scalar(out))
}
