//! The OpenAPI document (utoipa): built from the same handler annotations that register the
//! routes (utoipa-axum), so a route cannot be served undocumented.

use utoipa::{
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi, ToSchema,
};

use crate::model::schema::FieldError;

/// SPEC §5 error body.
#[derive(ToSchema)]
#[allow(dead_code)] // schema only
pub struct ErrorBody {
    error: ErrorDetail,
}

/// One error: a stable code, a message for humans (and models), optional per-field details.
#[derive(ToSchema)]
#[allow(dead_code)] // schema only
pub struct ErrorDetail {
    /// invalid_request, unauthorized, not_found, not_decided, already_decided, canceled,
    /// expired, payload_too_large, rate_limited, unavailable, internal.
    code: String,
    message: String,
    details: Option<Vec<FieldError>>,
}

/// Probe answers.
#[derive(ToSchema)]
#[allow(dead_code)] // schema only
pub struct ProbeBody {
    status: String,
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "elicitd",
        description = "AI agents ask humans for decisions: approvals, selections and proposals."
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody, ErrorDetail, FieldError, ProbeBody)),
    tags(
        (name = "elicitations", description = "Create, read, await, consume and cancel (agents, bearer key)"),
        (name = "reviews", description = "Reviewer decisions (capability URL, no key)"),
        (name = "operations", description = "Probes")
    )
)]
pub struct ApiDoc;
