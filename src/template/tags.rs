//! The tags and blocks requesters may use. `for` and `assign` are our own (a lazy, counted
//! `for`; an `assign` that charges the value to the memory budget); the others are liquid's,
//! wrapped in [`Ticked`] so that every executed tag takes a step and checks the deadline.

use std::fmt;
use std::io::Write;

use liquid_core::model::{
    DisplayCow, KString, KStringCow, ObjectView, State, Value, ValueCow, ValueView,
};
use liquid_core::parser::{BlockElement, FilterChain, TryMatchToken};
use liquid_core::runtime::{Interrupt, InterruptRegister, StackFrame};
use liquid_core::{
    BlockReflection, Error, Expression, Language, ParseBlock, ParseTag, Renderable, Result,
    Runtime, TagBlock, TagReflection, TagTokenIter, Template,
};
use liquid_lib::stdlib;

use super::budget::{charge, tick, weight};

/// Block tags (they nest and need an `end…`), as registered below.
pub(super) const BLOCKS: &[&str] = &["for", "if", "unless", "case", "comment"];

/// Register the allowed tags and blocks.
pub(super) fn register(b: liquid::ParserBuilder) -> liquid::ParserBuilder {
    b.tag(AssignTag)
        .tag(Ticked(stdlib::BreakTag))
        .tag(Ticked(stdlib::ContinueTag))
        .block(BoundedForBlock)
        .block(Ticked(stdlib::IfBlock))
        .block(Ticked(stdlib::UnlessBlock))
        .block(Ticked(stdlib::CaseBlock))
        .block(stdlib::CommentBlock)
}

/// A liquid tag or block whose every execution takes a step (and so checks the deadline).
#[derive(Clone, Debug)]
struct Ticked<T>(T);

#[derive(Debug)]
struct TickedRender(Box<dyn Renderable>);

impl Renderable for TickedRender {
    fn render_to(&self, w: &mut dyn Write, rt: &dyn Runtime) -> Result<()> {
        tick(1)?;
        self.0.render_to(w, rt)
    }
}

impl<T: ParseTag + Clone + 'static> ParseTag for Ticked<T> {
    fn parse(&self, args: TagTokenIter<'_>, options: &Language) -> Result<Box<dyn Renderable>> {
        Ok(Box::new(TickedRender(self.0.parse(args, options)?)))
    }
    fn reflection(&self) -> &dyn TagReflection {
        self.0.reflection()
    }
}

impl<T: ParseBlock + Clone + 'static> ParseBlock for Ticked<T> {
    fn parse(
        &self,
        args: TagTokenIter<'_>,
        block: TagBlock<'_, '_>,
        options: &Language,
    ) -> Result<Box<dyn Renderable>> {
        Ok(Box::new(TickedRender(self.0.parse(args, block, options)?)))
    }
    fn reflection(&self) -> &dyn BlockReflection {
        self.0.reflection()
    }
}

/// `{% assign name = value | filters %}`, the value charged to the memory budget.
#[derive(Clone, Copy, Debug)]
struct AssignTag;

impl TagReflection for AssignTag {
    fn tag(&self) -> &'static str {
        "assign"
    }
    fn description(&self) -> &'static str {
        ""
    }
}

impl ParseTag for AssignTag {
    fn parse(
        &self,
        mut arguments: TagTokenIter<'_>,
        options: &Language,
    ) -> Result<Box<dyn Renderable>> {
        let dst = arguments
            .expect_next("Identifier expected.")?
            .expect_identifier()
            .into_result()?;
        let dst = KString::from_ref(dst);
        arguments
            .expect_next("Assignment operator \"=\" expected.")?
            .expect_str("=")
            .into_result_custom_msg("Assignment operator \"=\" expected.")?;
        let src = arguments
            .expect_next("FilterChain expected.")?
            .expect_filter_chain(options)
            .into_result()?;
        arguments.expect_nothing()?;
        Ok(Box::new(Assign { dst, src }))
    }
    fn reflection(&self) -> &dyn TagReflection {
        self
    }
}

#[derive(Debug)]
struct Assign {
    dst: KString,
    src: FilterChain,
}

impl Renderable for Assign {
    fn render_to(&self, _: &mut dyn Write, rt: &dyn Runtime) -> Result<()> {
        tick(1)?;
        let value = self.src.evaluate(rt)?.into_owned();
        charge(weight(&value, usize::MAX).unwrap_or(usize::MAX))?;
        rt.set_global(self.dst.clone(), value);
        Ok(())
    }
}

/// `for`, with `(a..b)` ranges counted lazily (liquid's materialises them before `limit`
/// applies: `(1..100000000)` is gigabytes) and a step per iteration, shared by nested loops.
/// `limit`, `offset`, `reversed`, `else`, `forloop.*`, `break` and `continue` as in liquid.
#[derive(Copy, Clone, Debug, Default)]
struct BoundedForBlock;

impl BlockReflection for BoundedForBlock {
    fn start_tag(&self) -> &str {
        "for"
    }
    fn end_tag(&self) -> &str {
        "endfor"
    }
    fn description(&self) -> &str {
        ""
    }
}

#[derive(Debug)]
enum RangeExpr {
    Array(Expression),
    Counted(Expression, Expression),
}

#[derive(Debug)]
struct BoundedFor {
    var_name: KString,
    range: RangeExpr,
    item_template: Template,
    else_template: Option<Template>,
    limit: Option<Expression>,
    offset: Option<Expression>,
    reversed: bool,
}

fn parse_attr(arguments: &mut TagTokenIter<'_>) -> Result<Expression> {
    arguments
        .expect_next("\":\" expected.")?
        .expect_str(":")
        .into_result_custom_msg("\":\" expected.")?;
    arguments
        .expect_next("Value expected.")?
        .expect_value()
        .into_result()
}

impl ParseBlock for BoundedForBlock {
    fn parse(
        &self,
        mut arguments: TagTokenIter<'_>,
        mut tokens: TagBlock<'_, '_>,
        options: &Language,
    ) -> Result<Box<dyn Renderable>> {
        let var_name = arguments
            .expect_next("Identifier expected.")?
            .expect_identifier()
            .into_result()?;
        arguments
            .expect_next("\"in\" expected.")?
            .expect_str("in")
            .into_result_custom_msg("\"in\" expected.")?;
        let range = arguments.expect_next("Array or range expected.")?;
        let range = match range.expect_value() {
            TryMatchToken::Matches(array) => RangeExpr::Array(array),
            TryMatchToken::Fails(range) => match range.expect_range() {
                TryMatchToken::Matches((start, stop)) => RangeExpr::Counted(start, stop),
                TryMatchToken::Fails(range) => return range.raise_error().into_err(),
            },
        };
        let (mut limit, mut offset, mut reversed) = (None, None, false);
        while let Some(token) = arguments.next() {
            match token.as_str() {
                "limit" => limit = Some(parse_attr(&mut arguments)?),
                "offset" => offset = Some(parse_attr(&mut arguments)?),
                "reversed" => reversed = true,
                _ => {
                    return token
                        .raise_custom_error("\"limit\", \"offset\" or \"reversed\" expected.")
                        .into_err()
                }
            }
        }
        arguments.expect_nothing()?;
        let mut item_template = Vec::new();
        let mut else_template = None;
        while let Some(element) = tokens.next()? {
            match element {
                BlockElement::Tag(mut tag) => match tag.name() {
                    "else" => {
                        tag.tokens().expect_nothing()?;
                        else_template = Some(tokens.parse_all(options)?);
                        break;
                    }
                    _ => item_template.push(tag.parse(&mut tokens, options)?),
                },
                element => item_template.push(element.parse(&mut tokens, options)?),
            }
        }
        tokens.assert_empty();
        Ok(Box::new(BoundedFor {
            var_name: KString::from_ref(var_name),
            range,
            item_template: Template::new(item_template),
            else_template: else_template.map(Template::new),
            limit,
            offset,
            reversed,
        }))
    }
    fn reflection(&self) -> &dyn BlockReflection {
        self
    }
}

fn eval_int(e: &Expression, rt: &dyn Runtime) -> Result<i64> {
    let v = e.evaluate(rt)?;
    v.as_scalar()
        .and_then(|s| s.to_integer())
        .ok_or_else(|| Error::with_msg("whole number expected"))
}

impl BoundedFor {
    fn run<'a>(
        &self,
        w: &mut dyn Write,
        rt: &dyn Runtime,
        len: usize,
        items: impl Iterator<Item = ValueCow<'a>>,
    ) -> Result<()> {
        if len == 0 {
            if let Some(t) = &self.else_template {
                t.render_to(w, rt)?;
            }
            return Ok(());
        }
        for (i, v) in items.enumerate() {
            tick(1)?;
            let forloop = stdlib::ForloopObject::new(i, len);
            let frame = Frame([("forloop", &forloop), (self.var_name.as_str(), &v)]);
            let scope = StackFrame::new(rt, &frame);
            self.item_template.render_to(w, &scope)?;
            let interrupt = scope.registers().get_mut::<InterruptRegister>().reset();
            if let Some(Interrupt::Break) = interrupt {
                break;
            }
        }
        Ok(())
    }
}

impl Renderable for BoundedFor {
    fn render_to(&self, w: &mut dyn Write, rt: &dyn Runtime) -> Result<()> {
        tick(1)?;
        let opt = |e: &Option<Expression>| -> Result<Option<u64>> {
            e.as_ref()
                .map(|e| eval_int(e, rt).map(|v| v.max(0) as u64))
                .transpose()
        };
        let (limit, offset) = (opt(&self.limit)?, opt(&self.offset)?.unwrap_or(0));
        match &self.range {
            RangeExpr::Counted(a, b) => {
                let (start, stop) = (i128::from(eval_int(a, rt)?), i128::from(eval_int(b, rt)?));
                // i128: `stop - start + 1` cannot overflow for any pair of i64
                let len = if stop < start {
                    0
                } else {
                    (stop - start + 1).min(i128::from(u64::MAX)) as u64
                };
                let off = offset.min(len);
                let n = (len - off).min(limit.unwrap_or(u64::MAX));
                let first = start + i128::from(off);
                let reversed = self.reversed;
                let items = (0..n).map(move |i| {
                    let k = if reversed {
                        first + i128::from(n - 1 - i)
                    } else {
                        first + i128::from(i)
                    };
                    ValueCow::Owned(Value::scalar(k as i64))
                });
                self.run(w, rt, usize::try_from(n).unwrap_or(usize::MAX), items)
            }
            RangeExpr::Array(e) => {
                let v = e.evaluate(rt)?;
                let mut items: Vec<ValueCow<'_>> = if let Some(a) = v.as_array() {
                    a.values().map(ValueCow::Borrowed).collect()
                } else if let Some(o) = v.as_object() {
                    // the pairs are copies: charge them
                    charge(weight(o.as_value(), usize::MAX).unwrap_or(usize::MAX))?;
                    o.iter()
                        .map(|(k, v)| {
                            ValueCow::Owned(Value::Array(vec![
                                Value::scalar(k.into_owned()),
                                v.to_value(),
                            ]))
                        })
                        .collect()
                } else if v.is_nil() || v.is_state() {
                    vec![]
                } else {
                    return Err(Error::with_msg("array expected"));
                };
                let off = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(items.len());
                items.drain(..off);
                items.truncate(
                    limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)),
                );
                if self.reversed {
                    items.reverse();
                }
                self.run(w, rt, items.len(), items.into_iter())
            }
        }
    }
}

/// The variables a loop iteration adds (`forloop` and the loop variable), without the
/// allocation and hashing of a map per iteration.
#[derive(Debug)]
struct Frame<'a>([(&'a str, &'a dyn ValueView); 2]);

impl Frame<'_> {
    fn snapshot(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (KString::from_ref(k), v.to_value()))
                .collect(),
        )
    }
}

impl ValueView for Frame<'_> {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }
    fn render(&self) -> DisplayCow<'_> {
        DisplayCow::Owned(Box::new(self.snapshot().render().to_string()))
    }
    fn source(&self) -> DisplayCow<'_> {
        DisplayCow::Owned(Box::new(self.snapshot().source().to_string()))
    }
    fn type_name(&self) -> &'static str {
        "object"
    }
    fn query_state(&self, state: State) -> bool {
        matches!(state, State::Truthy)
    }
    fn to_kstr(&self) -> KStringCow<'_> {
        KStringCow::from_string(self.render().to_string())
    }
    fn to_value(&self) -> Value {
        self.snapshot()
    }
    fn as_object(&self) -> Option<&dyn ObjectView> {
        Some(self)
    }
}

impl ObjectView for Frame<'_> {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        2
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        Box::new(self.0.iter().map(|(k, _)| KStringCow::from(*k)))
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        Box::new(self.0.iter().map(|(_, v)| *v))
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        Box::new(self.0.iter().map(|(k, v)| (KStringCow::from(*k), *v)))
    }
    fn contains_key(&self, index: &str) -> bool {
        self.0.iter().any(|(k, _)| *k == index)
    }
    fn get<'s>(&'s self, index: &str) -> Option<&'s dyn ValueView> {
        // the loop variable wins over `forloop` (`{% for forloop in … %}`), as in liquid
        self.0
            .iter()
            .rev()
            .find(|(k, _)| *k == index)
            .map(|(_, v)| *v)
    }
}
