//! Secrets: random values, review tokens and their stored hashes.
//!
//! A review token is the elicitation id (its 16 bytes, base64url: 22 characters) followed by
//! `base64url(HMAC-SHA256(secret, "review:" ‖ salt ‖ ":" ‖ id))` (43 characters): 256 bits that
//! look random to anyone without `ELICITD_SECRET`. The id in front lets the review routes find
//! the record with no index; the MAC is what opens it (the record keeps `sha256(token)`, and a
//! token opens only the record whose hash it matches). The record keeps only the random 128-bit
//! `salt` and `sha256(token)`; the token itself is never stored or logged. Deriving it (instead
//! of drawing it) is what lets an idempotent create return the same `reviewUrl` again without
//! storing the token.
//!
//! Records written in the legacy layout (`ELICITD_LEGACY_RECORDS`, and every record made before
//! it existed) have tokens of the first form, the MAC alone, found through the review index
//! ([`Form::Legacy`]). Both forms are always accepted; [`rebuild`] makes a record's links in its
//! own form.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::model::ElicitationId;

/// `n` bytes from the OS-seeded CSPRNG.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::rng().fill_bytes(&mut v);
    v
}

/// `n` random bytes, base64url without padding.
pub fn random_b64(n: usize) -> String {
    URL_SAFE_NO_PAD.encode(random_bytes(n))
}

/// Length of a review token in characters: the id (22), then the MAC (43).
pub const REVIEW_TOKEN_LEN: usize = 22 + LEGACY_REVIEW_TOKEN_LEN;
/// Length of a token of the first form (the MAC alone).
pub const LEGACY_REVIEW_TOKEN_LEN: usize = 43;

/// `base64url(HMAC-SHA256(secret, "review:" ‖ salt ‖ ":" ‖ subject))`.
fn mac(secret: &[u8], salt: &str, subject: &str) -> String {
    // HMAC accepts keys of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("hmac takes any key");
    mac.update(b"review:");
    mac.update(salt.as_bytes());
    mac.update(b":");
    mac.update(subject.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// The review token of elicitation `id` — or, with `reviewer`, that named reviewer's personal
/// token (the same derivation over `id/reviewer`: distinct per reviewer) — from the server secret
/// and the record's salt, in the current form or the first ([`Form::Legacy`]: the MAC alone).
pub fn review_token(
    secret: &[u8],
    salt: &str,
    id: ElicitationId,
    reviewer: Option<&str>,
    form: Form,
) -> String {
    let mac = match reviewer {
        None => mac(secret, salt, &id.to_string()),
        Some(r) => mac(secret, salt, &format!("{id}/{r}")),
    };
    match form {
        Form::Legacy => mac,
        Form::Current => {
            let mut t = URL_SAFE_NO_PAD.encode(id.as_u128().to_be_bytes());
            t.push_str(&mac);
            t
        }
    }
}

/// The two forms of a review token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The id, then the MAC.
    Current,
    /// The MAC alone (records in elicitd 0.1's layout).
    Legacy,
}

/// [`review_token`] rebuilt for an existing record, in the form it was made with: the one whose
/// hash is `stored` (the current form when neither matches; the caller checks).
pub fn rebuild(
    secret: &[u8],
    salt: &str,
    id: ElicitationId,
    reviewer: Option<&str>,
    stored: &str,
) -> String {
    let current = review_token(secret, salt, id, reviewer, Form::Current);
    if ct_eq(&token_hash(&current), stored) {
        return current;
    }
    let legacy = review_token(secret, salt, id, reviewer, Form::Legacy);
    if ct_eq(&token_hash(&legacy), stored) {
        legacy
    } else {
        current
    }
}

/// What a string offered as a review token can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The current form: the record it names (the MAC still has to match it).
    Current(ElicitationId),
    /// The first form: found through the review index, if at all.
    Legacy,
    /// Not a review token.
    Invalid,
}

/// The [`Shape`] of `token` (cheap: before any lookup).
pub fn shape(token: &str) -> Shape {
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Shape::Invalid;
    }
    match token.len() {
        LEGACY_REVIEW_TOKEN_LEN => Shape::Legacy,
        REVIEW_TOKEN_LEN => {
            let mut id = [0u8; 16];
            match URL_SAFE_NO_PAD.decode_slice(&token.as_bytes()[..22], &mut id) {
                Ok(16) => Shape::Current(ElicitationId::from_u128(u128::from_be_bytes(id))),
                _ => Shape::Invalid,
            }
        }
        _ => Shape::Invalid,
    }
}

/// Hex SHA-256 of a token: what the store keeps and looks tokens up by.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Hex SHA-256 of arbitrary bytes (idempotency keys, request fingerprints).
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Constant-time string equality.
pub fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_deterministic_per_salt_and_distinct_otherwise() {
        use Form::*;
        let id = ElicitationId::random();
        let t = |secret: &[u8], salt: &str, id, reviewer, form| {
            review_token(secret, salt, id, reviewer, form)
        };
        let a = t(b"k", "salt1", id, None, Current);
        assert_eq!(a, t(b"k", "salt1", id, None, Current));
        assert_ne!(a, t(b"k", "salt2", id, None, Current));
        assert_ne!(a, t(b"other", "salt1", id, None, Current));
        assert_ne!(a, t(b"k", "salt1", ElicitationId::random(), None, Current));
        assert_ne!(a, t(b"k", "salt1", id, Some("ana"), Current));
        assert_eq!(a.len(), REVIEW_TOKEN_LEN);
        assert_eq!(shape(&a), Shape::Current(id));
        assert_eq!(
            shape(&t(b"k", "s", id, Some("ana"), Current)),
            Shape::Current(id)
        );
        // The first form: the same MAC without the id in front.
        let legacy = t(b"k", "salt1", id, None, Legacy);
        assert_eq!(legacy.len(), LEGACY_REVIEW_TOKEN_LEN);
        assert!(a.ends_with(&legacy));
        assert_eq!(shape(&legacy), Shape::Legacy);
        assert!(t(b"k", "s", id, Some("ana"), Current).ends_with(&t(
            b"k",
            "s",
            id,
            Some("ana"),
            Legacy
        )));
        for bad in [
            "short",
            "",
            &a[1..],
            &format!("{a}x"),
            &a.replace(&a[..1], "+"),
        ] {
            assert_eq!(shape(bad), Shape::Invalid, "{bad}");
        }
        assert_eq!(token_hash(&a).len(), 64);
    }

    #[test]
    fn the_stored_hash_picks_the_form() {
        let id = ElicitationId::random();
        for reviewer in [None, Some("ana")] {
            let current = review_token(b"k", "s", id, reviewer, Form::Current);
            let legacy = review_token(b"k", "s", id, reviewer, Form::Legacy);
            let pick = |stored: &str| rebuild(b"k", "s", id, reviewer, stored);
            assert_eq!(pick(&token_hash(&current)), current);
            assert_eq!(pick(&token_hash(&legacy)), legacy);
            assert_eq!(pick("neither"), current);
        }
    }

    #[test]
    fn ct_eq_works() {
        assert!(ct_eq("abc", "abc"));
        assert!(!ct_eq("abc", "abd"));
        assert!(!ct_eq("abc", "abcd"));
    }
}
