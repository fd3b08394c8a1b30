//! The human review page: `GET /review/{token}` renders, `POST /review/{token}` decides, and
//! `/review/static/*` serves the stylesheet and the (optional) script.
//!
//! Invariants:
//! - `GET` never changes state; it only appends a `viewed` audit event for a real token (and a
//!   failure to record it never fails the page).
//! - A decision is recorded only by a `POST` that passes the origin checks and carries a valid
//!   form token ([`csrf`]), and then only through [`Service::decide`], which validates it
//!   exactly like the JSON route. Invalid input re-renders the form (422) with the values kept
//!   and records nothing.
//! - An unknown or malformed token is a 404 page with no details, before any other check.
//! - Every response carries a strict CSP (no inline script; no inline style but the requester's
//!   scoped `css`, allowed by a per-response nonce), `no-referrer`, `nosniff`,
//!   `frame-ancestors 'none'`; pages are `no-store`, versioned static files are cached for a
//!   year. Agent-supplied text only ever reaches the templates as escaped text, except the
//!   output of the requester's display templates, which `crate::template` has escaped and
//!   sanitized (see `custom`).

pub mod csrf;
pub mod custom;
pub mod text;
pub mod view;

use askama::Template;
use axum::{
    extract::{DefaultBodyLimit, Path, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    middleware,
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
    Extension, Router,
};

use self::{
    csrf::Refusal,
    view::{Notice, Resubmit},
};
use crate::{
    error::{Error, FieldError},
    form::{BadForm, FormData},
    kinds::DecisionInput,
    limits::ClientAddr,
    model::{local_now_ms, Status},
    service::{
        out::{Decided, Review},
        Service,
    },
};

/// Content-Security-Policy of every review response: same-origin files only, nothing inline
/// (images may also be `data:`, which is all the requester's templates may use).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// [`CSP`] with one inline stylesheet allowed by its nonce (the requester's scoped `css`).
fn csp_with_style_nonce(nonce: &str) -> String {
    CSP.replacen(
        "style-src 'self';",
        &format!("style-src 'self' 'nonce-{nonce}';"),
        1,
    )
}

/// The review routes, with the security headers and the body limit applied.
pub fn router(service: Service) -> Router {
    let limit = service.config().max_body_bytes;
    Router::new()
        .route("/review/{token}", get(show).post(submit))
        .route("/review/static/{file}", get(asset))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::map_response(security_headers))
        .with_state(service)
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.entry("content-security-policy")
        .or_insert(HeaderValue::from_static(CSP));
    for (name, value) in [
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("cross-origin-opener-policy", "same-origin"),
        ("x-robots-tag", "noindex, nofollow"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    res
}

async fn asset(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "review.css" => (view::CSS, "text/css; charset=utf-8"),
        "review.js" => (view::JS, "text/javascript; charset=utf-8"),
        _ => return not_found(),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        body,
    )
        .into_response()
}

/// Render a template; a template failure is logged and answered with a bare 500.
fn page(status: StatusCode, t: &impl Template) -> Response {
    match t.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "review template failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

fn not_found() -> Response {
    error_page(Error::NotFound)
}

/// The page for a failed service call: the error table's wording, no details for the reviewer
/// (the log has them).
fn error_page(e: Error) -> Response {
    e.log("review");
    let (heading, line) = e.row().page.unwrap_or(TABLE_FALLBACK);
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = page(status, &Notice::error(heading, &[line], None));
    if let Some(secs) = e.retry_after_secs() {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// Wording for an error the table gives no page text (never shown for a decision state).
const TABLE_FALLBACK: (&str, &str) = (
    "Something went wrong",
    "Your decision could not be handled. Please try again later.",
);

fn refused(token: &str, why: Refusal) -> Response {
    let line = match why {
        Refusal::CrossSite => "This form was not sent from the review page, so it was ignored.",
        _ => "This form could not be verified, so it was ignored.",
    };
    let n = Notice::error(
        "Request refused",
        &[
            line,
            "Nothing was recorded. Open the request again to decide.",
        ],
        Some(token.to_string()),
    );
    page(StatusCode::FORBIDDEN, &n)
}

fn bad_form(token: &str, why: &str) -> Response {
    let n = Notice::error(
        "The form could not be read",
        &[
            why,
            "Nothing was recorded. Open the request again to decide.",
        ],
        Some(token.to_string()),
    );
    page(StatusCode::BAD_REQUEST, &n)
}

fn now_s() -> i64 {
    local_now_ms() / 1000
}

/// The page of `review`: the form while pending (with the requester's templates rendered),
/// else its state.
async fn render(
    s: &Service,
    token: &str,
    review: &Review,
    status: StatusCode,
    re: Resubmit<'_>,
) -> Response {
    let voted = review
        .panel
        .as_ref()
        .zip(review.reviewer.as_ref())
        .is_some_and(|(p, r)| p.vote_of(r).is_some());
    if review.status == Status::Pending && voted {
        let code = if status.is_success() {
            StatusCode::OK
        } else {
            StatusCode::CONFLICT
        };
        page(code, &view::voted_page(review))
    } else if review.status == Status::Pending {
        let csrf = csrf::issue(&s.config().secret, token, now_s());
        let custom = custom::render(&review.spec).await;
        let nonce = if custom.css.is_some() {
            crate::token::random_b64(16)
        } else {
            String::new()
        };
        let mut res = page(
            status,
            &view::review_page(review, token, csrf, re, custom, &nonce),
        );
        if !nonce.is_empty() {
            if let Ok(v) = HeaderValue::from_str(&csp_with_style_nonce(&nonce)) {
                res.headers_mut().insert("content-security-policy", v);
            }
        }
        res
    } else {
        let code = match (status.is_success(), review.status) {
            (true, _) => StatusCode::OK,
            (false, Status::Expired) => StatusCode::GONE,
            (false, _) => StatusCode::CONFLICT,
        };
        page(code, &view::state_page(review))
    }
}

async fn show(
    State(s): State<Service>,
    Path(token): Path<String>,
    client: Option<Extension<ClientAddr>>,
) -> Response {
    let client = client.map(|Extension(c)| c.0);
    let review = match s.review(&token, client).await {
        Ok(v) => v,
        Err(e) => return error_page(e),
    };
    if let Err(e) = s.record_view(&review).await {
        tracing::debug!(error = %e, "could not record a review page view");
    }
    render(&s, &token, &review, StatusCode::OK, Resubmit::default()).await
}

/// One read of the request (`Service::review`), the checks, then one decide call on that same
/// read (`Service::decide_review`): a page post costs one lookup, also when it loses a race.
async fn submit(
    State(s): State<Service>,
    Path(token): Path<String>,
    headers: HeaderMap,
    client: Option<Extension<ClientAddr>>,
    body: axum::body::Body,
) -> Response {
    let client = client.map(|Extension(c)| c.0);
    let review = match s.review(&token, client).await {
        Ok(v) => v,
        Err(e) => return error_page(e),
    };
    let public_origin = crate::config::origin_of(&s.config().public_url).unwrap_or_default();
    if let Err(why) = csrf::check_origin(&headers, &public_origin) {
        return refused(&token, why);
    }
    let urlencoded = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !urlencoded {
        return bad_form(&token, "The form was not sent as a web form.");
    }
    // Read only now: the token was checked first.
    let body = match axum::body::to_bytes(body, s.config().max_body_bytes).await {
        Ok(b) => b,
        Err(e) if e.to_string().contains("length limit") => {
            return bad_form(&token, "The form is too large.")
        }
        Err(_) => return bad_form(&token, "The form did not arrive completely."),
    };
    let form = match FormData::parse(&body) {
        Ok(f) => f,
        Err(e) => return bad_form(&token, &sentence_of(&e)),
    };
    let mut notice = None;
    match csrf::verify(&s.config().secret, &token, form.get("csrf"), now_s()) {
        Ok(()) => {}
        // A genuine but stale form: show it again, values kept, with a fresh token.
        Err(Refusal::Expired) => {
            notice = Some(
                "This page was open for a long time, so nothing was recorded yet. \
                 Please check your answers and send them again."
                    .to_string(),
            )
        }
        Err(why) => return refused(&token, why),
    }
    let voted = review
        .panel
        .as_ref()
        .zip(review.reviewer.as_ref())
        .is_some_and(|(p, r)| p.vote_of(r).is_some());
    if review.status != Status::Pending || voted {
        return render(
            &s,
            &token,
            &review,
            StatusCode::CONFLICT,
            Resubmit::default(),
        )
        .await;
    }
    let again = |errors: Vec<FieldError>, notice: Option<String>, status| {
        let (s, token, review, form) = (&s, &token, &review, &form);
        async move {
            let re = Resubmit {
                form: Some(form),
                errors: &errors,
                notice,
            };
            render(s, token, review, status, re).await
        }
    };
    if notice.is_some() {
        return again(Vec::new(), notice, StatusCode::FORBIDDEN).await;
    }
    let parsed = match DecisionInput::from_form(&review.spec, &form) {
        Ok(p) => p,
        Err(e) => return bad_form(&token, &sentence_of(&e)),
    };
    if !parsed.errors.is_empty() {
        // Fields that did not even convert; validate the rest (pure, records nothing) so the
        // reviewer sees every problem at once.
        let mut errors = parsed.errors;
        if let Err(e) = parsed.input.validate(&review.spec) {
            for d in e.details() {
                if !errors.iter().any(|x| x.field == d.field) {
                    errors.push(d.clone());
                }
            }
        }
        return again(errors, None, StatusCode::UNPROCESSABLE_ENTITY).await;
    }
    match s.decide_review(&review, parsed.input).await {
        // Relative: back to this same page, which now shows the decision.
        Ok(Decided::Recorded(_)) => Redirect::to(&token).into_response(),
        Ok(Decided::Refused(now)) => {
            render(&s, &token, &now, StatusCode::CONFLICT, Resubmit::default()).await
        }
        Err(e @ Error::Unprocessable { .. }) => {
            again(e.details().to_vec(), None, StatusCode::UNPROCESSABLE_ENTITY).await
        }
        // This reviewer's other post (a double click) voted first: show the state now.
        Err(Error::AlreadyDecided) => match s.review(&token, client).await {
            Ok(now) => render(&s, &token, &now, StatusCode::CONFLICT, Resubmit::default()).await,
            Err(e) => error_page(e),
        },
        Err(e) => error_page(e),
    }
}

fn sentence_of(e: &BadForm) -> String {
    text::sentence(&e.to_string())
}
