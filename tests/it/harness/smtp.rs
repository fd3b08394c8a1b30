//! A real SMTP server for the notification tests: `tests/py/smtp_sink.py` (aiosmtpd from PyPI,
//! installed by [`prereq::ensure_python_deps`]) on a free port, writing what it accepts to a
//! temporary directory; messages are read back and parsed with a real MIME parser
//! (`mail-parser`). It can be stopped and started again on the same port (a mail server that is
//! down, then back).

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use super::{free_port, prereq};

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Mail {
    pub raw: Vec<u8>,
    pub rcpt_tos: Vec<String>,
}

impl Mail {
    pub fn parsed(&self) -> mail_parser::Message<'_> {
        mail_parser::MessageParser::default()
            .parse(&self.raw)
            .expect("a parseable MIME message")
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.parsed().header_raw(name).map(|v| v.trim().to_string())
    }
}

/// The review link in a text body.
pub fn link_in(text: &str) -> String {
    text.split_whitespace()
        .find(|w| w.contains("/review/"))
        .unwrap_or_else(|| panic!("no link in {text}"))
        .to_string()
}

/// A running (or stopped) sink.
pub struct SmtpSink {
    pub port: u16,
    dir: tempfile::TempDir,
    auth: Option<String>,
    child: Option<Child>,
}

impl SmtpSink {
    /// Start a sink (with `user:password` required when given); `None` (after reporting the
    /// skip) when Python is missing outside CI.
    pub fn start(auth: Option<&str>) -> Option<SmtpSink> {
        if prereq::find(&["python3"]).is_none() {
            prereq::skip_or_fail("SMTP notification tests", "python3", prereq::PYTHON_INSTALL);
            return None;
        }
        let mut s = SmtpSink {
            port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            auth: auth.map(str::to_string),
            child: None,
        };
        s.resume();
        Some(s)
    }

    /// `smtp://` URL of the sink (plain SMTP on loopback), with `user:password@` if given.
    pub fn url(&self, creds: Option<&str>) -> String {
        match creds {
            Some(c) => format!("smtp://{c}@127.0.0.1:{}", self.port),
            None => format!("smtp://127.0.0.1:{}", self.port),
        }
    }

    /// Stop the server (connections are refused until [`resume`](Self::resume)).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start the server (again) on the same port and wait until it listens.
    pub fn resume(&mut self) {
        let deps = prereq::ensure_python_deps().unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new("python3");
        cmd.arg("-W")
            .arg("ignore")
            .arg(prereq::py_dir().join("smtp_sink.py"))
            .arg(self.port.to_string())
            .arg(self.dir.path());
        if let Some(a) = &self.auth {
            cmd.arg(a);
        }
        let child = cmd
            .env("PYTHONPATH", deps)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start smtp_sink.py");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "the SMTP sink did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every message accepted so far, in order.
    pub fn mails(&self) -> Vec<Mail> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|p| {
                let env: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(p.with_extension("json")).unwrap())
                        .unwrap();
                Mail {
                    raw: std::fs::read(&p).unwrap(),
                    rcpt_tos: env["rcpt_tos"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                        .collect(),
                }
            })
            .collect()
    }

    /// Wait until at least `n` messages arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Mail> {
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.mails();
            if m.len() >= n {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} messages after {timeout:?}",
                m.len()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop();
    }
}
