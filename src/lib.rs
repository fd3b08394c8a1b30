//! elicitd: AI agents ask humans for decisions (approve, fill a form, pick options, accept or
//! edit a proposal) and keep working while they wait.
//!
//! # Layout
//! - [`config`]: flags and `ELICITD_*` variables, validated before binding.
//! - [`model`]: ids, kinds, statuses, request and decision validation (`model::schema` holds the
//!   MCP `requestedSchema` subset).
//! - [`store`]: the storage contract, the Redis store (Lua scripts in `lua/`) and the memory store.
//! - [`wake`]: the per-replica waiter hub that wakes parked `await` calls.
//! - [`service`]: the business layer all surfaces call.
//! - [`limits`]: per-replica abuse limits (create rate, wrong review tokens).
//! - [`api`]: the REST adapter, probes and the OpenAPI document.
//! - [`review`]: the human review page (`/review/{token}`): askama templates in `templates/`,
//!   CSRF and origin checks, form → decision conversion.
//! - [`mcp`]: the MCP adapter (Streamable HTTP at `/mcp`, and stdio).
//! - [`telemetry`]: logging, request ids, metrics.
//! - [`server`]: wiring and graceful shutdown.

pub mod api;
pub mod config;
pub mod error;
pub mod limits;
pub mod mcp;
pub mod model;
pub mod review;
pub mod server;
pub mod service;
pub mod store;
pub mod telemetry;
pub mod token;
pub mod wake;
