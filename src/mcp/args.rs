//! Tool arguments as models see them (JSON Schema via schemars, limits of SPEC §3), converted
//! into the shared [`CreateRequest`] so REST and MCP validate identically.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::{error::Error, model::CreateRequest};

/// Button words.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsArg {
    /// Word on the submit/approve button (1–40 characters).
    #[schemars(length(min = 1, max = 40))]
    pub submit: Option<String>,
    /// Word on the decline button (1–40 characters).
    #[schemars(length(min = 1, max = 40))]
    pub decline: Option<String>,
}

macro_rules! create_args {
    ($(#[$doc:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// What the reviewer is asked and why (1–4000 characters). Be specific: the human
            /// sees only this, the title and the context.
            #[schemars(length(min = 1, max = 4000))]
            pub message: String,
            /// Short page heading (1–120 characters).
            #[schemars(length(min = 1, max = 120))]
            pub title: Option<String>,
            /// Any JSON (≤ 64 KiB) shown to the reviewer and returned verbatim by elicit_result.
            pub context: Option<Value>,
            /// Deadline in seconds (10–86400, default 3600). Undecided requests then read `expired`.
            #[schemars(range(min = 10, max = 86400))]
            pub expires_in_seconds: Option<i64>,
            /// Rename the buttons (the recorded decision is unchanged).
            pub labels: Option<LabelsArg>,
            /// Retry-safe key (1–200 characters): repeating a create with the same key returns
            /// the first elicitation instead of a new one.
            #[schemars(length(min = 1, max = 200))]
            pub idempotency_key: Option<String>,
            $($extra)*
        }
    };
}

create_args!(
    /// Arguments of `elicit_approval`.
    ApprovalArgs {
        /// Form mode: a flat JSON Schema object (MCP elicitation subset: string with
        /// minLength/maxLength/format email|uri|date|date-time, number/integer with
        /// minimum/maximum, boolean, enum or oneOf {const,title}, array of enum for
        /// multi-select; title, description, default, required). Omit for json mode, where the
        /// reviewer approves `context` as is.
        pub requested_schema: Option<Map<String, Value>>,
    }
);

create_args!(
    /// Arguments of `elicit_selection`.
    SelectionArgs {
        /// 1–500 options, each an object with a unique string `id` (1–200 characters) and
        /// optional `label` and `description`; extra keys are kept.
        #[schemars(length(min = 1, max = 500))]
        pub options: Vec<Map<String, Value>>,
        /// Fewest options to choose (default 1).
        #[schemars(range(min = 1))]
        pub min_selections: Option<i64>,
        /// Most options to choose (default 1 = single choice; at most the number of options).
        #[schemars(range(min = 1))]
        pub max_selections: Option<i64>,
    }
);

create_args!(
    /// Arguments of `elicit_proposal`.
    ProposalArgs {
        /// 1–100 fields, each a string, number, boolean or array of strings. The reviewer keeps
        /// or drops each field and may edit its value.
        pub proposal: Map<String, Value>,
        /// Optional schema (same subset as elicit_approval) giving fields titles and constraints.
        pub requested_schema: Option<Map<String, Value>>,
    }
);

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

fn raw(v: Option<Value>) -> Result<Option<Box<serde_json::value::RawValue>>, Error> {
    v.map(|v| serde_json::value::to_raw_value(&v).map_err(Error::internal))
        .transpose()
}

fn labels(l: Option<LabelsArg>) -> Option<crate::model::request::LabelsInput> {
    l.map(|l| crate::model::request::LabelsInput {
        submit: l.submit,
        decline: l.decline,
    })
}

macro_rules! common {
    ($a:expr) => {
        CreateRequest {
            message: Some($a.message),
            title: $a.title,
            context: raw($a.context)?,
            expires_in_seconds: $a.expires_in_seconds,
            labels: labels($a.labels),
            idempotency_key: $a.idempotency_key,
            ..CreateRequest::default()
        }
    };
}

impl ApprovalArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let schema = self.requested_schema.clone().map(Value::Object);
        Ok(CreateRequest {
            requested_schema: schema,
            ..common!(self)
        })
    }
}

impl SelectionArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let options = self.options.iter().cloned().map(Value::Object).collect();
        let (min, max) = (self.min_selections, self.max_selections);
        Ok(CreateRequest {
            options: Some(options),
            min_selections: min,
            max_selections: max,
            ..common!(self)
        })
    }
}

impl ProposalArgs {
    pub fn into_request(self) -> Result<CreateRequest, Error> {
        let proposal = Some(Value::Object(self.proposal.clone()));
        let schema = self.requested_schema.clone().map(Value::Object);
        Ok(CreateRequest {
            proposal,
            requested_schema: schema,
            ..common!(self)
        })
    }
}
