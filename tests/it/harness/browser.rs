//! Headless Chromium for the review-page tests: a `chromedriver` owned by one test (free port,
//! own process group, killed on drop) and a fantoccini session in a fresh profile, with helpers
//! that act the way a person does — find a field by its label, click a button by its words.
//!
//! Missing `chromium` or `chromedriver`: the test reports itself skipped with the install
//! command, or fails when `CI` is set (see [`super::prereq`]).

use std::{
    net::TcpStream,
    os::unix::process::CommandExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{elements::Element, Client, ClientBuilder, Locator};
use serde_json::json;

use super::{free_port, prereq};

/// Width of a small phone: every browser test runs at it.
pub const PHONE_WIDTH: u32 = 360;

/// Find the first of `names` on `path` (a `PATH`-style list), or explain how to get it.
pub fn find_program(names: &[&str], path: &str) -> Result<PathBuf, String> {
    prereq::find_on(names, path).ok_or_else(|| {
        format!(
            "{} not found on PATH: the review-page browser tests drive headless Chromium. \
             Install it ({}) or run .ci/run, which does.",
            names.join(" / "),
            prereq::CHROMIUM_INSTALL
        )
    })
}

const CHROMIUM: &[&str] = &["chromium", "chromium-browser", "google-chrome"];
const DRIVER: &[&str] = &["chromedriver"];

/// Chromium and chromedriver, or `None` after reporting the skip (a failure under `CI`).
fn programs(test: &str) -> Option<(PathBuf, PathBuf)> {
    let path = std::env::var("PATH").unwrap_or_default();
    for names in [CHROMIUM, DRIVER] {
        if find_program(names, &path).is_err() {
            prereq::skip_or_fail(test, &names.join(" / "), prereq::CHROMIUM_INSTALL);
            return None;
        }
    }
    Some((
        find_program(CHROMIUM, &path).ok()?,
        find_program(DRIVER, &path).ok()?,
    ))
}

/// A `chromedriver` process group (the driver and the browsers it starts).
pub struct ChromeDriver {
    pub port: u16,
    child: Child,
}

impl ChromeDriver {
    fn start(bin: PathBuf) -> ChromeDriver {
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn chromedriver");
        let driver = ChromeDriver { port, child };
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        driver
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // The whole group, so a browser left behind by a failed test goes too.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screen_height() -> u32 {
    if std::env::var_os("ELICITD_SCREENSHOT_DIR").is_some() {
        2400
    } else {
        800
    }
}

/// One headless Chromium session at phone width.
pub struct Browser {
    pub client: Client,
    _profile: tempfile::TempDir,
    _driver: ChromeDriver,
}

impl Browser {
    /// Start a session for `test`, or `None` when Chromium is not installed (reported as a
    /// skip, or a failure under `CI`): `let Some(b) = Browser::start("name").await else { return };`
    pub async fn start(test: &str) -> Option<Browser> {
        let (chromium, driver_bin) = programs(test)?;
        let driver = ChromeDriver::start(driver_bin);
        let profile = tempfile::tempdir().expect("profile dir");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--hide-scrollbars",
                    format!("--user-data-dir={}", profile.path().display()),
                    "--lang=en-US",
                ],
                // A phone viewport (a desktop window cannot be narrower than 500 px). Taller
                // when screenshots are wanted, so one picture shows the whole page.
                "mobileEmulation": {"deviceMetrics": {
                    "width": PHONE_WIDTH, "height": screen_height(), "pixelRatio": 1.0, "touch": true}},
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .expect("start a chromium session");
        Some(Browser {
            client,
            _profile: profile,
            _driver: driver,
        })
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("goto");
    }

    /// The control whose `<label>` (or option label, or group legend) reads `label`, ignoring a
    /// "(required)" / "(optional)" marker.
    pub async fn field(&self, label: &str) -> Element {
        let script = r#"
            const want = arguments[0];
            for (const l of document.querySelectorAll('label, legend')) {
                const title = (l.querySelector('.lt') || l).textContent.trim();
                if (title !== want && l.textContent.trim() !== want) continue;
                const el = l.tagName === 'LEGEND' ? l.parentElement : l.control;
                if (el && el.id) return el.id;
            }
            return null;"#;
        let id = self
            .client
            .execute(script, vec![json!(label)])
            .await
            .expect("execute");
        let id = id
            .as_str()
            .unwrap_or_else(|| panic!("no control labelled {label:?}"));
        self.client.find(Locator::Id(id)).await.expect("find by id")
    }

    /// Replace the text of the field labelled `label`.
    pub async fn fill(&self, label: &str, text: &str) {
        let el = self.field(label).await;
        el.clear().await.expect("clear");
        el.send_keys(text).await.expect("type");
    }

    /// Click the control labelled `label` (a checkbox, a radio).
    pub async fn click_label(&self, label: &str) {
        self.field(label).await.click().await.expect("click");
    }

    pub async fn is_checked(&self, label: &str) -> bool {
        self.field(label)
            .await
            .is_selected()
            .await
            .expect("is_selected")
    }

    pub async fn value_of(&self, label: &str) -> String {
        self.field(label)
            .await
            .prop("value")
            .await
            .expect("value")
            .unwrap_or_default()
    }

    /// Choose `option` (by its visible text) in the select labelled `label`.
    pub async fn select(&self, label: &str, option: &str) {
        self.field(label)
            .await
            .select_by_label(option)
            .await
            .expect("select option");
    }

    /// Click the `<button>` whose words are `name` and wait for the next page to show
    /// `wait_css`.
    pub async fn press(&self, name: &str, wait_css: &str) {
        let xpath = format!("//button[normalize-space(.)='{name}']");
        let b = self
            .client
            .find(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no button {name:?}: {e}"));
        b.click().await.expect("click button");
        self.client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(wait_css))
            .await
            .unwrap_or_else(|e| panic!("after {name:?}, no {wait_css}: {e}"));
    }

    /// Visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .text()
            .await
            .expect("text")
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
            .len()
    }

    /// `(viewport width, page width)` in CSS pixels: equal when nothing overflows sideways.
    pub async fn widths(&self) -> (u64, u64) {
        let v = self
            .client
            .execute(
                "return [window.innerWidth, document.documentElement.scrollWidth];",
                vec![],
            )
            .await
            .expect("execute");
        let n = |i: usize| v[i].as_u64().unwrap_or(u64::MAX);
        (n(0), n(1))
    }

    /// Save a screenshot when `ELICITD_SCREENSHOT_DIR` is set (for looking at the page during
    /// development; never asserted on).
    pub async fn screenshot(&self, name: &str) {
        if let Ok(dir) = std::env::var("ELICITD_SCREENSHOT_DIR") {
            let png = self.client.screenshot().await.expect("screenshot");
            std::fs::write(PathBuf::from(dir).join(format!("{name}.png")), png).expect("write");
        }
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

#[test]
fn missing_browser_fails_with_a_clear_message() {
    // A PATH without the browser, whatever this machine has installed.
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().display().to_string();
    for names in [DRIVER, CHROMIUM] {
        let err = find_program(names, &path).unwrap_err();
        assert!(
            err.contains(&format!("{} not found", names.join(" / "))),
            "{err}"
        );
        assert!(
            err.contains("apt-get install chromium chromium-driver"),
            "{err}"
        );
    }
    // And a program that is there is found.
    std::fs::write(empty.path().join("chromedriver"), "").unwrap();
    assert_eq!(
        find_program(DRIVER, &path).unwrap(),
        empty.path().join("chromedriver")
    );
}
