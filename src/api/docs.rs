//! The OpenAPI document (utoipa): built from the same handler annotations that register the
//! routes (utoipa-axum), so a route cannot be served undocumented.

use utoipa::{
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi, ToSchema,
};

use crate::error::{FieldError, TABLE};

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
    /// A stable code from the error table (the enum is filled in from it).
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

/// `ErrorDetail.code` lists the codes of the error table (one source for docs and code).
/// Applied to the finished document (the routes re-register `ErrorDetail`).
pub struct ErrorCodes;

impl Modify for ErrorCodes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{schema::Schema, RefOr};
        let mut codes: Vec<&str> = TABLE.iter().map(|r| r.code).collect();
        codes.dedup();
        let detail = openapi
            .components
            .as_mut()
            .and_then(|c| c.schemas.get_mut("ErrorDetail"));
        if let Some(RefOr::T(Schema::Object(o))) = detail {
            if let Some(RefOr::T(Schema::Object(code))) = o.properties.get_mut("code") {
                code.enum_values = Some(codes.into_iter().map(Into::into).collect());
            }
        }
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
