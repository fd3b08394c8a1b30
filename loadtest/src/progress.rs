//! Shared counters and the progress line on stderr (once a second, redrawn in place on a
//! terminal; every 5 s as plain lines otherwise, so logs stay readable).

use std::{
    io::{IsTerminal, Write},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{task::JoinHandle, time::Instant};

/// Counters every worker bumps (relaxed atomics: only the progress line reads them).
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    phase: Mutex<String>,
}

impl Counters {
    pub fn count(&self, ok: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An answer that arrived but failed a check (already counted as a request).
    pub fn check_failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Name the current phase (shown in the progress line).
    pub fn phase(&self, p: &str) {
        let mut g = self.phase.lock().unwrap_or_else(|e| e.into_inner());
        *g = p.to_string();
    }
}

/// The progress printer; stops (and ends the line) when finished or dropped.
pub struct Progress {
    pub counters: Arc<Counters>,
    task: Option<JoinHandle<()>>,
    tty: bool,
}

impl Progress {
    /// Start printing for `scenario` if `enabled`; `planned` is the expected length, if known.
    pub fn start(scenario: &str, enabled: bool, planned: Option<Duration>) -> Progress {
        let counters = Arc::new(Counters::default());
        let tty = std::io::stderr().is_terminal();
        let task = enabled.then(|| {
            let c = counters.clone();
            let scenario = scenario.to_string();
            tokio::spawn(async move {
                let started = Instant::now();
                let every = if tty { 1 } else { 5 };
                let mut last = (0u64, Instant::now());
                let mut tick = tokio::time::interval(Duration::from_secs(every));
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let n = c.requests.load(Ordering::Relaxed);
                    let e = c.errors.load(Ordering::Relaxed);
                    let now = Instant::now();
                    let rate = (n - last.0) as f64 / (now - last.1).as_secs_f64().max(1e-9);
                    last = (n, now);
                    let phase = c.phase.lock().map(|p| p.clone()).unwrap_or_default();
                    let of = planned.map_or(String::new(), |p| format!("/{:.0}", p.as_secs_f64()));
                    let line = format!(
                        "[{scenario}] {phase} {:.0}{of} s  {n} requests  {rate:.0} req/s  {e} errors",
                        started.elapsed().as_secs_f64()
                    );
                    let mut err = std::io::stderr().lock();
                    let _ = if tty {
                        write!(err, "\r\x1b[2K{line}")
                    } else {
                        writeln!(err, "{line}")
                    };
                    let _ = err.flush();
                }
            })
        });
        Progress {
            counters,
            task,
            tty,
        }
    }

    /// Stop printing.
    pub fn finish(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            if self.tty {
                eprintln!();
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
