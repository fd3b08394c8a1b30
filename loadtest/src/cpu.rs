//! CPU time per request: the generator's own, and that of the processes named with `--cpu
//! label=pid` (the replica, Redis), read from `/proc/<pid>/stat` (user + system) at the start
//! and end of the measured phase and divided by the requests it served. Linux only; on other
//! systems, or for a pid that cannot be read, that process is left out.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

/// Processes to meter, and the ticks each spent in the last measured phase.
#[derive(Debug, Clone, Default)]
pub struct CpuProbe {
    /// `(label, pid)`; the generator itself is always metered as `generator`.
    pub pids: Vec<(String, u32)>,
    spent: Arc<Mutex<Option<BTreeMap<String, f64>>>>,
}

/// A `--cpu` value: `label=pid`.
pub fn parse_pid(s: &str) -> Result<(String, u32), String> {
    let (label, pid) = s
        .split_once('=')
        .ok_or_else(|| format!("expected label=pid, got {s:?}"))?;
    let pid = pid.parse().map_err(|_| format!("not a pid: {pid:?}"))?;
    if label.is_empty() || label == "generator" {
        return Err(format!("bad label {label:?}"));
    }
    Ok((label.to_string(), pid))
}

/// User + system CPU seconds of `pid` ("self" for this process).
fn seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
    // USER_HZ is 100 on every Linux ABI Rust targets.
    Some((utime + stime) / 100.0)
}

/// A running measurement (see [`CpuProbe::start`]).
pub struct Running {
    probe: CpuProbe,
    at_start: Vec<(String, Option<f64>)>,
}

impl CpuProbe {
    /// Meter the generator and `pids` (`(label, pid)`).
    pub fn new(pids: Vec<(String, u32)>) -> CpuProbe {
        CpuProbe {
            pids,
            spent: Arc::default(),
        }
    }

    /// Read every process's CPU time now.
    pub fn start(&self) -> Running {
        Running {
            probe: self.clone(),
            at_start: self.read(),
        }
    }

    fn read(&self) -> Vec<(String, Option<f64>)> {
        let mut out = vec![("generator".to_string(), seconds("self"))];
        out.extend(
            self.pids
                .iter()
                .map(|(l, p)| (l.clone(), seconds(&p.to_string()))),
        );
        out
    }

    /// CPU µs per request over the last measured phase of `requests` requests.
    pub fn per_request(&self, requests: u64) -> Option<BTreeMap<String, f64>> {
        let spent = self.spent.lock().ok()?.clone()?;
        (requests > 0).then(|| {
            spent
                .into_iter()
                .map(|(l, s)| (l, (s * 1e6 / requests as f64 * 10.0).round() / 10.0))
                .collect()
        })
    }
}

impl Running {
    /// Read again and keep the differences as the phase's CPU seconds.
    pub fn finish(self) {
        let end = self.probe.read();
        let spent = self
            .at_start
            .into_iter()
            .zip(end)
            .filter_map(|((l, a), (_, b))| Some((l, b? - a?)))
            .collect();
        if let Ok(mut s) = self.probe.spent.lock() {
            *s = Some(spent);
        }
    }
}
