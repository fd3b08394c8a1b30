//! Cross-site request forgery defences of the review form.
//!
//! Two independent checks guard every `POST /review/{token}`:
//! - **Where it comes from** ([`check_origin`]): `Sec-Fetch-Site` must not say `cross-site` or
//!   `same-site` (a sibling subdomain is not us), and an `Origin` header, when it names an
//!   origin, must be the origin of `ELICITD_PUBLIC_URL`. `Origin: null` is accepted only with
//!   `Sec-Fetch-Site: same-origin` or without `Sec-Fetch-Site`: the page is served with
//!   `Referrer-Policy: no-referrer`, and under that policy browsers send `Origin: null` on
//!   their own same-origin form posts (Fetch standard, "serialize a request origin").
//! - **A form token** ([`issue`] / [`verify`]): `<expiry>.<base64url(HMAC-SHA256(secret,
//!   "review-csrf:" ‖ review token ‖ ":" ‖ expiry))>`. Stateless, so any replica sharing
//!   `ELICITD_SECRET` accepts a token another replica issued; bound to one review token, so a
//!   token from one request is worthless for another; compared in constant time.
//!
//! Invariant: a request is only decided when both checks pass.

use axum::http::{header, HeaderMap};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::{config::origin_of, token::ct_eq};

/// How long a rendered form stays postable, in seconds (6 hours).
pub const TOKEN_TTL_SECS: i64 = 6 * 3600;

/// Why a post was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Sent from another site (by `Sec-Fetch-Site` or `Origin`).
    CrossSite,
    /// Missing or forged form token.
    BadToken,
    /// A genuine form token past its expiry: the page was open too long.
    Expired,
}

fn mac(secret: &[u8], review_token: &str, expires_s: i64) -> String {
    // HMAC accepts keys of any length: `new_from_slice` cannot fail.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("hmac takes any key");
    m.update(b"review-csrf:");
    m.update(review_token.as_bytes());
    m.update(b":");
    m.update(expires_s.to_string().as_bytes());
    URL_SAFE_NO_PAD.encode(m.finalize().into_bytes())
}

/// A form token for `review_token`, valid until `now_s + TOKEN_TTL_SECS` (epoch seconds).
pub fn issue(secret: &[u8], review_token: &str, now_s: i64) -> String {
    let expires_s = now_s + TOKEN_TTL_SECS;
    format!("{expires_s}.{}", mac(secret, review_token, expires_s))
}

/// Check a posted form token. The signature is checked before the expiry, so `Expired` is only
/// ever reported for a token this server family really issued.
pub fn verify(
    secret: &[u8],
    review_token: &str,
    posted: Option<&str>,
    now_s: i64,
) -> Result<(), Refusal> {
    let (exp, sig) = posted
        .and_then(|p| p.split_once('.'))
        .ok_or(Refusal::BadToken)?;
    let expires_s: i64 = exp.parse().map_err(|_| Refusal::BadToken)?;
    if !ct_eq(&mac(secret, review_token, expires_s), sig) {
        return Err(Refusal::BadToken);
    }
    if now_s >= expires_s {
        return Err(Refusal::Expired);
    }
    Ok(())
}

/// Refuse posts that a browser marks as coming from another site (see module docs).
pub fn check_origin(headers: &HeaderMap, public_origin: &str) -> Result<(), Refusal> {
    let fetch_site = headers
        .get("sec-fetch-site")
        .map(|v| v.to_str().unwrap_or("invalid").to_ascii_lowercase());
    if let Some(site) = fetch_site.as_deref() {
        if !matches!(site, "same-origin" | "none") {
            return Err(Refusal::CrossSite);
        }
    }
    match headers.get(header::ORIGIN).map(|v| v.to_str()) {
        None => Ok(()),
        Some(Ok("null")) if matches!(fetch_site.as_deref(), None | Some("same-origin")) => Ok(()),
        Some(Ok(o)) if origin_of(o).is_some_and(|o| o == public_origin) => Ok(()),
        Some(_) => Err(Refusal::CrossSite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const S: &[u8] = b"secret-secret-secret-secret-secret";

    #[test]
    fn tokens_verify_only_for_their_review_token_and_until_expiry() {
        let t = issue(S, "tok-a", 1000);
        assert_eq!(verify(S, "tok-a", Some(&t), 1000), Ok(()));
        assert_eq!(verify(S, "tok-b", Some(&t), 1000), Err(Refusal::BadToken));
        assert_eq!(
            verify(b"other-secret", "tok-a", Some(&t), 1000),
            Err(Refusal::BadToken)
        );
        let end = 1000 + TOKEN_TTL_SECS;
        assert_eq!(verify(S, "tok-a", Some(&t), end), Err(Refusal::Expired));
        // Moving the expiry forward breaks the signature.
        let (_, sig) = t.split_once('.').unwrap();
        let forged = format!("{}.{sig}", end + 100);
        assert_eq!(
            verify(S, "tok-a", Some(&forged), end),
            Err(Refusal::BadToken)
        );
        for bad in [None, Some(""), Some("x"), Some("1.x"), Some("a.b")] {
            assert_eq!(
                verify(S, "tok-a", bad, 0),
                Err(Refusal::BadToken),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn origins_normalise() {
        let o = |u| origin_of(u);
        assert_eq!(
            o("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            o("HTTPS://Ex.COM:443/a/b?c").as_deref(),
            Some("https://ex.com")
        );
        assert_eq!(o("http://ex.com:80").as_deref(), Some("http://ex.com"));
        assert_eq!(
            o("https://ex.com:8443/").as_deref(),
            Some("https://ex.com:8443")
        );
        assert_eq!(o("ftp://ex.com"), None);
        assert_eq!(o("null"), None);
        assert_eq!(o("https://"), None);
    }

    #[test]
    fn cross_site_posts_are_refused() {
        let me = "https://review.example.com";
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, HeaderValue::from_static(v));
            }
            check_origin(&m, me)
        };
        assert_eq!(h(&[]), Ok(()));
        assert_eq!(h(&[("sec-fetch-site", "same-origin")]), Ok(()));
        assert_eq!(h(&[("origin", "https://review.example.com")]), Ok(()));
        assert_eq!(h(&[("origin", "https://review.example.com:443")]), Ok(()));
        assert_eq!(
            h(&[("origin", "null"), ("sec-fetch-site", "same-origin")]),
            Ok(())
        );
        assert_eq!(h(&[("origin", "null")]), Ok(()));
        let cross = Err(Refusal::CrossSite);
        assert_eq!(h(&[("sec-fetch-site", "cross-site")]), cross);
        assert_eq!(h(&[("sec-fetch-site", "same-site")]), cross);
        assert_eq!(h(&[("origin", "https://evil.example")]), cross);
        assert_eq!(h(&[("origin", "http://review.example.com")]), cross);
        assert_eq!(
            h(&[("origin", "null"), ("sec-fetch-site", "cross-site")]),
            cross
        );
        assert_eq!(
            h(&[
                ("origin", "https://evil.example"),
                ("sec-fetch-site", "same-origin")
            ]),
            cross
        );
    }
}
