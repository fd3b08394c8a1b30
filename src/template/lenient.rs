//! The variables a template sees, lenient: a missing key or index reads as nil (and can itself
//! be indexed, so `{{ a.missing.deeper }}` renders as nothing) instead of liquid-rust's
//! "Unknown variable/index" render error (liquid-rust has no lax mode: cobalt-org/liquid-rust
//! issue #490). Built once from JSON ([`Lv::from_json`]); [`Root`] puts several trees side by
//! side as the top-level variables without copying them.
use std::collections::HashMap;
use std::fmt;

use liquid_core::model::{
    ArrayView, DisplayCow, KString, KStringCow, ObjectView, ScalarCow, State, Value, ValueView,
};

#[derive(Debug)]
pub(super) enum Lv {
    Leaf(Value),
    Arr(Vec<Lv>),
    /// Entries in order, and a key index for objects with more than [`INDEX_FROM`] entries.
    Obj(Vec<(KString, Lv)>, Option<HashMap<KString, usize>>),
    /// What a missing key/index reads as: nil, but indexable (`a.missing.deeper` is nil too).
    Missing,
}
static NIL: Lv = Lv::Missing;
/// Objects with more entries than this get a hash index; smaller ones are searched in order.
const INDEX_FROM: usize = 8;
static NIL_VALUE: Value = Value::Nil;

impl Lv {
    pub(super) fn from_json(v: &serde_json::Value) -> Lv {
        use serde_json::Value as J;
        match v {
            J::Null => Lv::Leaf(Value::Nil),
            J::Bool(b) => Lv::Leaf(Value::scalar(*b)),
            J::Number(n) => Lv::Leaf(match n.as_i64() {
                Some(i) => Value::scalar(i),
                None => Value::scalar(n.as_f64().unwrap_or(0.0)),
            }),
            J::String(s) => Lv::Leaf(Value::scalar(s.clone())),
            J::Array(a) => Lv::Arr(a.iter().map(Lv::from_json).collect()),
            J::Object(o) => {
                let entries: Vec<(KString, Lv)> = o
                    .iter()
                    .map(|(k, v)| (KString::from_ref(k), Lv::from_json(v)))
                    .collect();
                let index = (entries.len() > INDEX_FROM).then(|| {
                    entries
                        .iter()
                        .enumerate()
                        .map(|(i, (k, _))| (k.clone(), i))
                        .collect()
                });
                Lv::Obj(entries, index)
            }
        }
    }
    fn entry(&self, key: &str) -> Option<&Lv> {
        match self {
            Lv::Obj(e, Some(ix)) => ix.get(key).map(|&i| &e[i].1),
            Lv::Obj(e, None) => e.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn len(&self) -> usize {
        match self {
            Lv::Arr(a) => a.len(),
            Lv::Obj(e, _) => e.len(),
            Lv::Leaf(_) | Lv::Missing => 0,
        }
    }
}

impl ValueView for Lv {
    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }
    fn render(&self) -> DisplayCow<'_> {
        match self {
            Lv::Missing => NIL_VALUE.render(),
            Lv::Leaf(v) => v.render(),
            _ => DisplayCow::Owned(Box::new(self.to_value().render().to_string())),
        }
    }
    fn source(&self) -> DisplayCow<'_> {
        match self {
            Lv::Missing => NIL_VALUE.source(),
            Lv::Leaf(v) => v.source(),
            _ => DisplayCow::Owned(Box::new(self.to_value().source().to_string())),
        }
    }
    fn type_name(&self) -> &'static str {
        match self {
            Lv::Missing => "nil",
            Lv::Leaf(v) => v.type_name(),
            Lv::Arr(_) => "array",
            Lv::Obj(..) => "object",
        }
    }
    fn query_state(&self, state: State) -> bool {
        match self {
            Lv::Missing => NIL_VALUE.query_state(state),
            Lv::Leaf(v) => v.query_state(state),
            _ => match state {
                State::Truthy => true,
                State::DefaultValue | State::Empty | State::Blank => self.len() == 0,
            },
        }
    }
    fn to_kstr(&self) -> KStringCow<'_> {
        match self {
            Lv::Missing => NIL_VALUE.to_kstr(),
            Lv::Leaf(v) => v.to_kstr(),
            _ => KStringCow::from_string(self.render().to_string()),
        }
    }
    fn to_value(&self) -> Value {
        match self {
            Lv::Missing => Value::Nil,
            Lv::Leaf(v) => v.clone(),
            Lv::Arr(a) => Value::Array(a.iter().map(|x| x.to_value()).collect()),
            Lv::Obj(e, _) => {
                Value::Object(e.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
        }
    }
    fn as_scalar(&self) -> Option<ScalarCow<'_>> {
        match self {
            Lv::Leaf(v) => v.as_scalar(),
            _ => None,
        }
    }
    fn as_array(&self) -> Option<&dyn ArrayView> {
        match self {
            Lv::Arr(_) => Some(self),
            _ => None,
        }
    }
    fn as_object(&self) -> Option<&dyn ObjectView> {
        match self {
            Lv::Obj(..) | Lv::Missing => Some(self),
            _ => None,
        }
    }
    fn as_state(&self) -> Option<State> {
        match self {
            Lv::Leaf(v) => v.as_state(),
            Lv::Missing => NIL_VALUE.as_state(),
            _ => None,
        }
    }
    fn is_nil(&self) -> bool {
        matches!(self, Lv::Leaf(Value::Nil) | Lv::Missing)
    }
}

impl ArrayView for Lv {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        self.len() as i64
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        match self {
            Lv::Arr(a) => Box::new(a.iter().map(|v| v as &dyn ValueView)),
            _ => Box::new(std::iter::empty()),
        }
    }
    fn contains_key(&self, index: i64) -> bool {
        ArrayView::get(self, index).is_some()
    }
    fn get(&self, index: i64) -> Option<&dyn ValueView> {
        let Lv::Arr(a) = self else { return None };
        let i = if index < 0 {
            a.len() as i64 + index
        } else {
            index
        };
        // out of range -> None: liquid then reports "Unknown index"; return nil instead
        Some(
            usize::try_from(i)
                .ok()
                .and_then(|i| <[Lv]>::get(a, i))
                .map(|v| v as &dyn ValueView)
                .unwrap_or(&NIL),
        )
    }
}

impl ObjectView for Lv {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        self.len() as i64
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        match self {
            Lv::Obj(e, _) => Box::new(e.iter().map(|(k, _)| KStringCow::from(k.as_ref()))),
            _ => Box::new(std::iter::empty()),
        }
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        match self {
            Lv::Obj(e, _) => Box::new(e.iter().map(|(_, v)| v as &dyn ValueView)),
            _ => Box::new(std::iter::empty()),
        }
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        match self {
            Lv::Obj(e, _) => Box::new(
                e.iter()
                    .map(|(k, v)| (KStringCow::from(k.as_ref()), v as &dyn ValueView)),
            ),
            _ => Box::new(std::iter::empty()),
        }
    }
    fn contains_key(&self, index: &str) -> bool {
        self.entry(index).is_some()
    }
    fn get<'s>(&'s self, index: &str) -> Option<&'s dyn ValueView> {
        if index == "size" && matches!(self, Lv::Missing) {
            return None;
        }
        if !matches!(self, Lv::Obj(..)) {
            return Some(&NIL);
        }
        match self.entry(index) {
            Some(v) => Some(v),
            None if index == "size" => None, // let liquid answer `obj.size`
            None => Some(&NIL),              // lenient: missing key reads as nil
        }
    }
}

/// The top-level variables: named trees, borrowed. liquid's globals frame asks `contains_key`
/// before `get`, so the root claims every name (an unknown one reads as nil); variables set
/// with `assign` live in a frame above it and still win.
#[derive(Debug)]
pub(super) struct Root<'a>(pub Vec<(&'a str, &'a Lv)>);

impl Root<'_> {
    fn lookup(&self, name: &str) -> Option<&Lv> {
        self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
    fn snapshot(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (KString::from_ref(k), v.to_value()))
                .collect(),
        )
    }
}

impl ValueView for Root<'_> {
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
        match state {
            State::Truthy => true,
            State::DefaultValue | State::Empty | State::Blank => self.0.is_empty(),
        }
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

impl ObjectView for Root<'_> {
    fn as_value(&self) -> &dyn ValueView {
        self
    }
    fn size(&self) -> i64 {
        self.0.len() as i64
    }
    fn keys<'k>(&'k self) -> Box<dyn Iterator<Item = KStringCow<'k>> + 'k> {
        Box::new(self.0.iter().map(|(k, _)| KStringCow::from(*k)))
    }
    fn values<'k>(&'k self) -> Box<dyn Iterator<Item = &'k dyn ValueView> + 'k> {
        Box::new(self.0.iter().map(|(_, v)| *v as &dyn ValueView))
    }
    fn iter<'k>(&'k self) -> Box<dyn Iterator<Item = (KStringCow<'k>, &'k dyn ValueView)> + 'k> {
        Box::new(
            self.0
                .iter()
                .map(|(k, v)| (KStringCow::from(*k), *v as &dyn ValueView)),
        )
    }
    fn contains_key(&self, _index: &str) -> bool {
        true
    }
    fn get<'s>(&'s self, index: &str) -> Option<&'s dyn ValueView> {
        Some(self.lookup(index).unwrap_or(&NIL))
    }
}
