//! The MCP adapter: eight `elicit_*` tools over the same [`Service`] as REST, served over
//! Streamable HTTP at `/mcp` (stateless: no sessions, JSON responses, any replica answers any
//! call; bearer-key auth in front) and over stdio (`elicitd mcp-stdio`).
//!
//! Errors: malformed arguments are JSON-RPC errors (-32602, from argument deserialization);
//! domain failures are tool results with `isError: true` whose text starts with the SPEC §5 code
//! and says what to do next (the hint comes from the error table).
//!
//! `context` stays the agent's JSON text end to end, as over REST: the HTTP layer in front of
//! rmcp keeps the raw text of `params.arguments.context` of a `tools/call` ([`RawContext`]), the
//! create tools store that text, and every tool result's text block is our own serialization
//! (so `elicit_result` returns `context` byte for byte; `structuredContent` is the parsed form).

pub mod args;

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
    Router,
};
use rmcp::{
    handler::server::{
        common::{schema_for_output, schema_for_type},
        router::tool::ToolRouter,
        wrapper::Parameters,
    },
    model::{
        CallToolResult, ContentBlock, Implementation, JsonObject, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        session::never::NeverSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    },
    ErrorData as McpError, RoleServer, ServerHandler,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::value::RawValue;

use self::args::{AwaitArgs, IdArgs, PingArgs, PingOut};
use crate::{
    error::Error,
    kinds::{
        approval::ApprovalArgs, proposal::ProposalArgs, selection::SelectionArgs, CreateRequest,
        Kind,
    },
    model::Tenant,
    service::{
        out::{CreatedOut, ResultOut, StateOut, StatusOut},
        Service,
    },
};

const INSTRUCTIONS: &str = "Ask a human for a decision and keep working while they decide. \
Create a request with elicit_approval (approve a payload or fill a form), elicit_selection (pick \
options) or elicit_proposal (accept or edit fields); give the returned reviewUrl to the human. \
Then call elicit_await (it returns the moment the human decides; `pending` means call it again) \
and, once the status is submitted or declined, elicit_result to read the decision. \
elicit_cancel withdraws a request nobody decided yet.";

/// The MCP server handler (cheap to clone: shared state only).
#[derive(Clone)]
pub struct ElicitTools {
    service: Service,
    /// Tenant for stdio, where there is no HTTP request to carry a key.
    stdio_tenant: Option<Tenant>,
    tool_router: ToolRouter<Self>,
}

/// A successful tool result: the structured value, and as text our own JSON serialization of
/// it (raw `context` kept byte for byte).
fn ok<T: Serialize>(value: &T) -> Result<CallToolResult, McpError> {
    let text =
        serde_json::to_string(value).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let structured =
        serde_json::to_value(value).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let mut r = CallToolResult::structured(structured);
    r.content = vec![ContentBlock::text(text)];
    Ok(r)
}

/// Domain failures → tool errors the model can act on (code, message, the table's hint);
/// infrastructure failures likewise, but generic.
fn tool_error(e: Error) -> CallToolResult {
    e.log("mcp");
    let hint = e.row().mcp_hint;
    let mut text = format!("{}: {}", e.code(), e.public_message());
    if !hint.is_empty() {
        text.push_str(" — ");
        text.push_str(hint);
    }
    if !e.details().is_empty() {
        let details: Vec<String> = e
            .details()
            .iter()
            .map(|d| format!("{}: {}", d.field, d.message))
            .collect();
        text.push_str(&format!(" (details: {})", details.join("; ")));
    }
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Deserialize tool arguments; malformed arguments are JSON-RPC errors (-32602), per SPEC §5.
fn parse<T: DeserializeOwned>(raw: JsonObject) -> Result<T, McpError> {
    serde_json::from_value(serde_json::Value::Object(raw))
        .map_err(|e| McpError::invalid_params(format!("invalid arguments: {e}"), None))
}

fn respond<T: Serialize>(r: Result<T, Error>) -> Result<CallToolResult, McpError> {
    match r {
        Ok(v) => ok(&v),
        Err(e) => Ok(tool_error(e)),
    }
}

#[tool_router]
impl ElicitTools {
    pub fn new(service: Service, stdio_tenant: Option<Tenant>) -> Self {
        ElicitTools {
            service,
            stdio_tenant,
            tool_router: Self::tool_router(),
        }
    }

    fn tenant(&self, ctx: &RequestContext<RoleServer>) -> Result<Tenant, McpError> {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Tenant>().cloned())
            .or_else(|| self.stdio_tenant.clone())
            .ok_or_else(|| McpError::invalid_request("unauthenticated", None))
    }

    async fn create(
        &self,
        ctx: &RequestContext<RoleServer>,
        kind: Kind,
        req: Result<CreateRequest, Error>,
    ) -> Result<CallToolResult, McpError> {
        let tenant = self.tenant(ctx)?;
        let mut req = match req {
            Ok(r) => r,
            Err(e) => return Ok(tool_error(e)),
        };
        // The agent's own text of `context`, when the HTTP layer kept it (the same JSON as the
        // parsed argument, which is checked).
        let raw = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<RawContext>());
        if let (Some(raw), Some(parsed)) = (raw, req.context.as_ref()) {
            let same = serde_json::from_str::<serde_json::Value>(raw.0.get()).ok()
                == serde_json::from_str::<serde_json::Value>(parsed.get()).ok();
            if same {
                req.context = Some(raw.0.clone());
            }
        }
        respond::<CreatedOut>(self.service.create(&tenant, kind, req).await)
    }

    /// Check that the elicitd server is reachable: echoes the message back as `pong: <message>`.
    #[tool(name = "elicit_ping", input_schema = schema_for_type::<PingArgs>(), output_schema = schema_for_output::<PingOut>(),
        annotations(title = "Ping", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn ping(
        &self,
        Parameters(raw): Parameters<JsonObject>,
    ) -> Result<CallToolResult, McpError> {
        let a: PingArgs = parse(raw)?;
        let mut r = ok(&PingOut {
            pong: a.message.clone(),
        })?;
        r.content = vec![ContentBlock::text(format!("pong: {}", a.message))];
        Ok(r)
    }

    /// Ask a human to approve something. Json mode: pass the payload as `context`; the reviewer
    /// approves or declines it as is. Form mode: pass `requestedSchema`; the reviewer fills the
    /// form (with both, context is shown read-only above the form). Returns at once with
    /// `elicitationId` and `reviewUrl` — give the reviewUrl to the human, then call elicit_await.
    #[tool(name = "elicit_approval", input_schema = schema_for_type::<ApprovalArgs>(), output_schema = schema_for_output::<CreatedOut>(),
        annotations(title = "Ask for approval", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true))]
    async fn approval(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: ApprovalArgs = parse(raw)?;
        self.create(&ctx, Kind::Approval, a.into_request()).await
    }

    /// Ask a human to choose among options (single choice by default; set maxSelections for
    /// multi-select). The reviewer may also answer "None of these" (decision `declined`).
    /// Returns at once with `elicitationId` and `reviewUrl`; then call elicit_await.
    #[tool(name = "elicit_selection", input_schema = schema_for_type::<SelectionArgs>(), output_schema = schema_for_output::<CreatedOut>(),
        annotations(title = "Ask to choose", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true))]
    async fn selection(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: SelectionArgs = parse(raw)?;
        self.create(&ctx, Kind::Selection, a.into_request()).await
    }

    /// Propose field values (e.g. a ticket, an order) for a human to accept, edit or drop field
    /// by field, or reject. elicit_result then returns only the kept fields with their final
    /// values. Returns at once with `elicitationId` and `reviewUrl`; then call elicit_await.
    #[tool(name = "elicit_proposal", input_schema = schema_for_type::<ProposalArgs>(), output_schema = schema_for_output::<CreatedOut>(),
        annotations(title = "Propose for review", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true))]
    async fn proposal(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: ProposalArgs = parse(raw)?;
        self.create(&ctx, Kind::Proposal, a.into_request()).await
    }

    /// Read the status now, without waiting: pending (undecided), submitted / declined (decided:
    /// call elicit_result), consumed (result already read), canceled, expired. Prefer
    /// elicit_await over polling this in a loop.
    #[tool(name = "elicit_status", input_schema = schema_for_type::<IdArgs>(), output_schema = schema_for_output::<StatusOut>(),
        annotations(title = "Status", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn status(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: IdArgs = parse(raw)?;
        let tenant = self.tenant(&ctx)?;
        respond::<StatusOut>(self.service.status(&tenant, &a.elicitation_id).await)
    }

    /// Wait for the human: returns the moment the request is decided or canceled, at its
    /// deadline (`expired`), or after waitSeconds (default 25) with `pending` — then simply call
    /// it again. Never changes state. After submitted/declined, call elicit_result.
    #[tool(name = "elicit_await", input_schema = schema_for_type::<AwaitArgs>(), output_schema = schema_for_output::<StatusOut>(),
        annotations(title = "Await decision", read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn await_decision(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: AwaitArgs = parse(raw)?;
        let tenant = self.tenant(&ctx)?;
        tokio::select! {
            r = self.service.await_status(&tenant, &a.elicitation_id, a.wait_seconds) => respond::<StatusOut>(r),
            // The client went away: stop waiting (dropping the wait unregisters it).
            _ = ctx.ct.cancelled() => Err(McpError::internal_error("request canceled by the client", None)),
        }
    }

    /// Read the decision once the status is submitted or declined: `decision`, the original
    /// `context`, `formSubmission` (form approvals), `selectedIds` (selections), `values` (the
    /// kept proposal fields), `comment`. The first call marks it consumed; repeats return the
    /// same outcome. Fails with not_decided while pending (call elicit_await first).
    #[tool(name = "elicit_result", input_schema = schema_for_type::<IdArgs>(), output_schema = schema_for_output::<ResultOut>(),
        annotations(title = "Read decision", read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    async fn result(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: IdArgs = parse(raw)?;
        let tenant = self.tenant(&ctx)?;
        respond::<ResultOut>(self.service.result(&tenant, &a.elicitation_id).await)
    }

    /// Withdraw a request nobody has decided yet (the review page then says it was withdrawn).
    /// Repeating it is harmless; it fails with already_decided once a human decided.
    #[tool(name = "elicit_cancel", input_schema = schema_for_type::<IdArgs>(), output_schema = schema_for_output::<StateOut>(),
        annotations(title = "Cancel request", read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false))]
    async fn cancel(
        &self,
        Parameters(raw): Parameters<JsonObject>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let a: IdArgs = parse(raw)?;
        let tenant = self.tenant(&ctx)?;
        respond::<StateOut>(self.service.cancel(&tenant, &a.elicitation_id).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for ElicitTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("elicitd", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// `/mcp`: bearer auth and the body guard in front of the stateless Streamable HTTP service.
pub fn router(service: Service) -> Router {
    let tools = ElicitTools::new(service.clone(), None);
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(service.config().mcp_allowed_hosts.clone())
        .with_max_request_body_bytes(service.config().max_body_bytes)
        .with_cancellation_token(service.shutdown_token().child_token());
    let mcp = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(service, authenticate))
}

/// The raw JSON text of `params.arguments.context` of a `tools/call` request.
#[derive(Debug, Clone)]
pub struct RawContext(pub Box<RawValue>);

/// Just enough of a JSON-RPC request to find `params.arguments.context` without parsing it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: Option<&'a str>,
    #[serde(borrow)]
    params: Option<EnvelopeParams<'a>>,
}

#[derive(Deserialize)]
struct EnvelopeParams<'a> {
    #[serde(borrow)]
    arguments: Option<EnvelopeArgs<'a>>,
}

#[derive(Deserialize)]
struct EnvelopeArgs<'a> {
    #[serde(borrow)]
    context: Option<&'a RawValue>,
}

/// In front of rmcp: a foreign `Origin` is refused (403), then bearer auth (401), then the body
/// is read within `ELICITD_MAX_BODY_BYTES` (413 past it, 400 when it does not arrive in time),
/// malformed JSON answers the JSON-RPC parse error (-32700), and for a `tools/call` the raw
/// `context` text is kept for the tool ([`RawContext`]).
async fn authenticate(State(s): State<Service>, req: Request, next: Next) -> Response {
    if let Some(origin) = req.headers().get(http::header::ORIGIN) {
        let allowed = origin
            .to_str()
            .ok()
            .and_then(crate::config::origin_of)
            .is_some_and(|o| {
                crate::config::origin_of(&s.config().public_url).as_ref() == Some(&o)
                    || s.config().mcp_allowed_origins.contains(&o)
            });
        if !allowed {
            return Error::Forbidden("this Origin may not call /mcp".into()).into_response();
        }
    }
    let header = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let tenant = match s.authenticate_bearer(header) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let (mut parts, body) = req.into_parts();
    let limit = s.config().max_body_bytes;
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(e) if crate::error::BodyTimedOut::is_in(&e) => {
            return Error::invalid(e.to_string()).into_response()
        }
        Err(_) => {
            return Error::PayloadTooLarge(format!("request body is larger than {limit} bytes"))
                .into_response()
        }
    };
    if parts.method == http::Method::POST
        && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err()
    {
        return parse_error();
    }
    if let Ok(Envelope {
        method: Some("tools/call"),
        params:
            Some(EnvelopeParams {
                arguments: Some(EnvelopeArgs { context: Some(raw) }),
            }),
    }) = serde_json::from_slice::<Envelope>(&bytes)
    {
        parts.extensions.insert(RawContext(raw.to_owned()));
    }
    parts.extensions.insert(tenant);
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// JSON-RPC 2.0 "Parse error" for a body that is not JSON.
fn parse_error() -> Response {
    (
        http::StatusCode::BAD_REQUEST,
        axum::Json(serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": "Parse error: the body is not valid JSON"}
        })),
    )
        .into_response()
}
