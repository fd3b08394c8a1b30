//! One integration test binary: a shared harness, then one module per area (README, "Tests").

mod harness;

mod hardening;

mod api_contract;
mod api_errors;
mod api_races;
mod architecture;
mod limits;
mod loadtest_smoke;
mod mcp;
mod notifications;
mod ops;
mod props;
mod redis_store;
mod review_browser;
mod review_escaping;
mod review_page;
mod reviewers;
mod templates;
mod topology_drills;
mod upgrade;
mod wake;
mod webhooks;
