//! The render budget: steps, a deadline, bytes of filter results and assigned values, bytes of
//! output. Liquid has no hook for limits, so the budget lives in a thread-local that
//! [`run`] installs around one render; every loop iteration, tag, filter call and output write
//! draws on it ([`tick`], [`charge`], [`CappedWriter`]). Outside [`run`] every draw fails, so a
//! template can never render unbounded by accident.

use std::cell::RefCell;
use std::io::{self, Write};
use std::time::Instant;

use liquid_core::model::ValueView;
use liquid_core::{Error, Result};

/// Largest value a filter takes or makes (see [`weight`]).
pub(super) const MAX_VALUE_WEIGHT: usize = 256 * 1024;
/// Bytes counted per array item or object entry by [`weight`] (about what one costs in memory).
const ITEM_WEIGHT: usize = 16;

/// What one render may still spend.
#[derive(Debug)]
pub(super) struct Budget {
    pub deadline: Instant,
    pub steps: u64,
    /// [`weight`] of filter results and assigned values still allowed.
    pub alloc: usize,
    /// The limit that ended the render, if one did.
    pub tripped: Option<&'static str>,
}

impl Budget {
    fn trip(&mut self, limit: &'static str) -> Error {
        self.tripped.get_or_insert(limit);
        Error::with_msg(format!("template {limit} limit exceeded"))
    }
}

thread_local! {
    static BUDGET: RefCell<Option<Budget>> = const { RefCell::new(None) };
}

/// Run `f` with `budget` installed on this thread; returns what `f` returned and what is left
/// of the budget. A panic in `f` is caught (and reported as `Err(())`).
pub(super) fn run<R>(
    budget: Budget,
    f: impl FnOnce() -> R,
) -> (std::result::Result<R, ()>, Budget) {
    struct Uninstall;
    impl Drop for Uninstall {
        fn drop(&mut self) {
            BUDGET.with(|b| b.borrow_mut().take());
        }
    }
    BUDGET.with(|b| *b.borrow_mut() = Some(budget));
    let guard = Uninstall;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| ());
    let left = BUDGET
        .with(|b| b.borrow_mut().take())
        .expect("budget installed above");
    drop(guard);
    (r, left)
}

fn with<T>(f: impl FnOnce(&mut Budget) -> Result<T>) -> Result<T> {
    BUDGET.with(|b| match b.borrow_mut().as_mut() {
        Some(budget) => f(budget),
        None => Err(Error::with_msg("template rendered outside a budget")),
    })
}

/// Take `n` steps and check the deadline.
pub(super) fn tick(n: u64) -> Result<()> {
    with(|b| {
        if b.steps < n {
            return Err(b.trip("step"));
        }
        b.steps -= n;
        if Instant::now() >= b.deadline {
            return Err(b.trip("time"));
        }
        Ok(())
    })
}

/// Account for a new value of `weight` bytes (a filter result or an assigned value).
pub(super) fn charge(weight: usize) -> Result<()> {
    with(|b| {
        if b.alloc < weight {
            return Err(b.trip("memory"));
        }
        b.alloc -= weight;
        Ok(())
    })
}

/// Fail the render with the value-size limit.
pub(super) fn value_too_large() -> Error {
    with(|b| Err::<(), _>(b.trip("value size"))).unwrap_err()
}

/// Size of a value: bytes of its scalars plus [`ITEM_WEIGHT`] per item and entry. `None`
/// once it passes `cap` (the walk stops there).
pub(super) fn weight(v: &dyn ValueView, cap: usize) -> Option<usize> {
    fn walk(v: &dyn ValueView, total: &mut usize, cap: usize) -> bool {
        if let Some(s) = v.as_scalar() {
            *total += s.to_kstr().len();
        } else if let Some(a) = v.as_array() {
            for item in a.values() {
                *total += ITEM_WEIGHT;
                if *total > cap || !walk(item, total, cap) {
                    return false;
                }
            }
        } else if let Some(o) = v.as_object() {
            for (k, item) in o.iter() {
                *total += ITEM_WEIGHT + k.len();
                if *total > cap || !walk(item, total, cap) {
                    return false;
                }
            }
        } else {
            *total += 1;
        }
        *total <= cap
    }
    let mut total = 0;
    walk(v, &mut total, cap).then_some(total)
}

/// Output sink of one render: fails past `cap` bytes, and checks the deadline on every write.
pub(super) struct CappedWriter {
    pub buf: Vec<u8>,
    pub cap: usize,
}

impl Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            let e = with(|b| Err::<(), _>(b.trip("output"))).unwrap_err();
            return Err(io::Error::other(e.to_string()));
        }
        tick(0).map_err(|e| io::Error::other(e.to_string()))?;
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
