//! Secrets: random values, review tokens and their stored hashes.
//!
//! A review token is `base64url(HMAC-SHA256(secret, "review:" ‖ salt ‖ ":" ‖ id))`: 256 bits that look
//! random to anyone without `ELICITD_SECRET`, unrelated to the elicitation id. The record keeps
//! only the random 128-bit `salt` and `sha256(token)`; the token itself is never stored or
//! logged. Deriving it (instead of drawing it) is what lets an idempotent create return the same
//! `reviewUrl` again without storing the token.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

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

/// Length of a review token in characters (32 bytes, base64url).
pub const REVIEW_TOKEN_LEN: usize = 43;

/// Derive the review token of an elicitation from the server secret and its salt.
pub fn review_token(secret: &[u8], salt: &str, id: &str) -> String {
    // HMAC accepts keys of any length: this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("hmac takes any key");
    mac.update(b"review:");
    mac.update(salt.as_bytes());
    mac.update(b":");
    mac.update(id.as_bytes());
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// The personal review token of named reviewer `reviewer` of elicitation `id` (the same
/// derivation, over `id/reviewer`: distinct per reviewer, rebuilt from the salt at will).
pub fn reviewer_token(secret: &[u8], salt: &str, id: &str, reviewer: &str) -> String {
    review_token(secret, salt, &format!("{id}/{reviewer}"))
}

/// Hex SHA-256 of a token: what the store keeps and looks tokens up by.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Hex SHA-256 of arbitrary bytes (idempotency keys, request fingerprints).
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// True when `token` has the shape of a review token (cheap pre-check before any lookup).
pub fn looks_like_review_token(token: &str) -> bool {
    token.len() == REVIEW_TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
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
        let a = review_token(b"k", "salt1", "id");
        assert_eq!(a, review_token(b"k", "salt1", "id"));
        assert_ne!(a, review_token(b"k", "salt2", "id"));
        assert_ne!(a, review_token(b"other", "salt1", "id"));
        assert!(looks_like_review_token(&a));
        assert!(!looks_like_review_token("short"));
        assert_eq!(token_hash(&a).len(), 64);
    }

    #[test]
    fn ct_eq_works() {
        assert!(ct_eq("abc", "abc"));
        assert!(!ct_eq("abc", "abd"));
        assert!(!ct_eq("abc", "abcd"));
    }
}
