//! Arguments of the tools that are not creates (JSON Schema via schemars). Each kind's create
//! arguments live with the kind (`crate::kinds::approval::ApprovalArgs`, …).

use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of status, await, result and cancel.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdArgs {
    /// The `elicitationId` returned by a create tool.
    pub elicitation_id: String,
}

/// Arguments of `elicit_await`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwaitArgs {
    /// The `elicitationId` returned by a create tool.
    pub elicitation_id: String,
    /// How long to wait, 0–60 seconds (default 25). `pending` back means: call again.
    #[schemars(range(min = 0, max = 60))]
    pub wait_seconds: Option<u64>,
}

/// Arguments of `elicit_ping`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PingArgs {
    /// Any text; it is echoed back.
    pub message: String,
}

/// Answer of `elicit_ping`.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub struct PingOut {
    pub pong: String,
}
