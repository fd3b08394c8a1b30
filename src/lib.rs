//! elicitd: AI agents ask humans for decisions (approve, fill a form, pick options, accept or
//! edit a proposal) and keep working while they wait.
//!
//! # Layout
//! Grouped by layer (docs/architecture.md; the rules are checked by `tests/it/architecture.rs`):
//! - [`error`]: the one error type and the error table (codes, HTTP status, hints, wording).
//! - [`model`]: ids, tenants, statuses, common field rules, the `requestedSchema` subset.
//! - [`form`]: the review form, kind-neutral: controls to show, posted data to read.
//! - [`kinds`]: one module per kind (approval, selection, proposal): create and decision
//!   validation, result part, MCP arguments, review controls.
//! - [`token`]: random values, review tokens and hashes.
//! - [`template`]: requester display templates (Liquid, escaped, bounded, sanitized) and
//!   their scoped CSS; checked by `kinds` at create, rendered by `review`.
//! - [`config`]: flags and `ELICITD_*` variables, validated before binding.
//! - [`store`]: the storage contract, the Redis store (`store::redis`, Lua in `lua/`) and the
//!   memory store.
//! - [`wake`]: the per-replica waiter hub that wakes parked `await` calls.
//! - [`limits`]: per-replica abuse limits (create rate, wrong review tokens).
//! - [`delivery`]: webhook delivery (the worker emptying the outbox the transitions fill),
//!   Standard Webhooks signing, the address guard.
//! - [`service`]: the business layer, the only door for the adapters.
//! - Adapters: [`api`] (REST, probes, OpenAPI), [`mcp`] (MCP over Streamable HTTP and stdio),
//!   [`review`] (the human review page, askama templates in `templates/`).
//! - [`telemetry`]: logging, request ids, metrics.
//! - [`server`]: wiring, the accept loop and graceful shutdown.

pub mod api;
pub mod config;
pub mod delivery;
pub mod error;
pub mod form;
pub mod kinds;
pub mod limits;
pub mod mcp;
pub mod model;
pub mod review;
pub mod server;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod template;
pub mod token;
pub mod wake;
