//! What the tests need beyond Rust, and what happens when it is missing.
//!
//! Convention (README "Tests"):
//! - What can be provisioned without root is provisioned here, once: `npm ci` in
//!   `tests/mcp-node` when `node_modules` is missing or was installed from another lock file.
//!   A file lock makes it safe when several test processes (or threads) ask at once.
//! - What needs root (Chromium and chromedriver) is *reported*: the test prints one line
//!   `SKIPPED <test>: <what> not found — install: <command>` and returns — unless `CI` is set
//!   (to anything but `""`, `0` or `false`), where a missing tool fails the test, so CI never
//!   silently loses coverage (`.ci/run` also fails on any `SKIPPED` line).

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

/// Whether the `CI` variable asks for strict mode.
pub fn in_ci() -> bool {
    ci_value_is_set(std::env::var("CI").ok().as_deref())
}

fn ci_value_is_set(v: Option<&str>) -> bool {
    !matches!(
        v.map(|s| s.trim().to_ascii_lowercase()).as_deref(),
        None | Some("" | "0" | "false")
    )
}

/// The line a skipped test prints.
pub fn skip_line(test: &str, what: &str, install: &str) -> String {
    format!("SKIPPED {test}: {what} not found on PATH — install: {install}")
}

/// Report a missing prerequisite: fail under CI, else print one line (past libtest's output
/// capture, so it shows in a normal `cargo test` run) and let the caller return.
pub fn skip_or_fail(test: &str, what: &str, install: &str) {
    let line = skip_line(test, what, install);
    if in_ci() {
        panic!("{line} (CI is set, so a missing tool fails the run)");
    }
    // Written to the process' stderr directly: `eprintln!` would be captured and hidden.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Find the first of `names` on `path` (a `PATH`-style list).
pub fn find_on(names: &[&str], path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
}

/// Find the first of `names` on the real `PATH`.
pub fn find(names: &[&str]) -> Option<PathBuf> {
    find_on(names, &std::env::var("PATH").unwrap_or_default())
}

/// The install command for Chromium and its driver (Debian).
pub const CHROMIUM_INSTALL: &str = "sudo apt-get install chromium chromium-driver";
/// The install command for Node.js (Debian).
pub const NODE_INSTALL: &str = "sudo apt-get install nodejs npm";

/// The directory of the TypeScript MCP client test.
pub fn mcp_node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-node")
}

/// The install command for Python 3 with pip (Debian).
pub const PYTHON_INSTALL: &str = "sudo apt-get install python3 python3-pip";

/// The directory of the Python helpers (`tests/py`).
pub fn py_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py")
}

/// Make sure `tests/py/requirements.txt` is installed into `tests/py/.deps` (a `pip install
/// --target`, used through `PYTHONPATH`), once per requirements file, safe under parallel
/// tests like [`ensure_npm_ci`]. Returns the directory to put on `PYTHONPATH`.
pub fn ensure_python_deps() -> Result<PathBuf, String> {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    let _g = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let dir = py_dir();
    let deps = dir.join(".deps");
    let stamp = deps.join(".elicitd-requirements-sha256");
    let want = {
        use sha2::{Digest, Sha256};
        let req = std::fs::read(dir.join("requirements.txt"))
            .map_err(|e| format!("read requirements.txt: {e}"))?;
        format!("{:x}", Sha256::digest(&req))
    };
    let current = || std::fs::read_to_string(&stamp).is_ok_and(|h| h.trim() == want);
    if current() {
        return Ok(deps);
    }
    let lock_path = dir.join(".pip.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    if current() {
        return Ok(deps);
    }
    let _ = std::fs::remove_dir_all(&deps);
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("--target")
        .arg(&deps)
        .arg("-r")
        .arg(dir.join("requirements.txt"))
        .output()
        .map_err(|e| format!("run pip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pip install failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::write(&stamp, want).map_err(|e| format!("write stamp: {e}"))?;
    Ok(deps)
}

/// Stamp written into `node_modules` after a successful `npm ci`: the lock file's hash.
const STAMP: &str = "node_modules/.elicitd-lock-sha256";

fn lock_hash(dir: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let lock = std::fs::read(dir.join("package-lock.json"))?;
    Ok(format!("{:x}", Sha256::digest(&lock)))
}

/// Whether `node_modules` in `dir` was installed from the current lock file.
pub fn node_modules_current(dir: &Path) -> bool {
    match (lock_hash(dir), std::fs::read_to_string(dir.join(STAMP))) {
        (Ok(want), Ok(have)) => want == have.trim(),
        _ => false,
    }
}

/// Make sure `npm ci` has run in `dir` against its current lock file. Safe under parallel
/// tests: a thread mutex inside this process and an exclusive file lock across processes;
/// whoever gets the lock second finds the stamp current and does nothing.
pub fn ensure_npm_ci(dir: &Path) -> Result<(), String> {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    let _g = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    if node_modules_current(dir) {
        return Ok(());
    }
    let lock_path = dir.join(".npm-ci.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    if node_modules_current(dir) {
        return Ok(());
    }
    let want = lock_hash(dir).map_err(|e| format!("read package-lock.json: {e}"))?;
    let out = Command::new("npm")
        .current_dir(dir)
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .output()
        .map_err(|e| format!("run npm ci: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "npm ci in {} failed:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // (A package without dependencies gets no node_modules from npm.)
    std::fs::create_dir_all(dir.join("node_modules"))
        .and_then(|()| std::fs::write(dir.join(STAMP), want))
        .map_err(|e| format!("write stamp: {e}"))?;
    Ok(())
}

#[test]
fn ci_variable_is_read_like_ci_systems_set_it() {
    assert!(!ci_value_is_set(None));
    for off in ["", "0", "false", "FALSE", " "] {
        assert!(!ci_value_is_set(Some(off)), "{off:?}");
    }
    for on in ["1", "true", "yes", "woodpecker"] {
        assert!(ci_value_is_set(Some(on)), "{on:?}");
    }
}

#[test]
fn skip_line_names_the_test_the_tool_and_the_install_command() {
    let l = skip_line("browser_x", "chromedriver", CHROMIUM_INSTALL);
    assert_eq!(
        l,
        "SKIPPED browser_x: chromedriver not found on PATH — install: \
         sudo apt-get install chromium chromium-driver"
    );
    assert!(!l.contains('\n'), "one line");
}

#[test]
fn npm_provisioning_installs_once_and_notices_a_changed_lock_file() {
    // A private copy of the package (so this never races the real test's node_modules), with
    // no dependencies: `npm ci` needs no network for it.
    let Some(_npm) = find(&["npm"]) else {
        skip_or_fail(
            "npm_provisioning_installs_once_and_notices_a_changed_lock_file",
            "npm",
            NODE_INSTALL,
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pkg = r#"{"name":"p","version":"1.0.0","private":true}"#;
    let lock = |v: &str| {
        format!(
            r#"{{"name":"p","version":"{v}","lockfileVersion":3,"requires":true,"packages":{{"":{{"name":"p","version":"{v}"}}}}}}"#
        )
    };
    std::fs::write(dir.path().join("package.json"), pkg).unwrap();
    std::fs::write(dir.path().join("package-lock.json"), lock("1.0.0")).unwrap();
    assert!(!node_modules_current(dir.path()));
    // Four threads at once: all succeed, one installs.
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| ensure_npm_ci(dir.path())))
            .collect();
        for h in hs {
            h.join().unwrap().unwrap();
        }
    });
    assert!(node_modules_current(dir.path()));
    // A changed lock file makes the install stale again; the next call re-runs npm ci.
    std::fs::write(dir.path().join("package-lock.json"), lock("1.0.1")).unwrap();
    std::fs::write(
        dir.path().join("package.json"),
        pkg.replace("1.0.0", "1.0.1"),
    )
    .unwrap();
    assert!(!node_modules_current(dir.path()));
    ensure_npm_ci(dir.path()).unwrap();
    assert!(node_modules_current(dir.path()));
}
