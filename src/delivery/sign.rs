//! Standard Webhooks (standardwebhooks.com, v1) signing: `webhook-signature` is
//! `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`, one per secret, separated by
//! spaces (several while a secret is rotated). Receivers verify with any Standard Webhooks
//! library; the tests do it with the official Python package.

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `webhook-signature` header value for `body` of message `id` sent at `timestamp`
/// (Unix seconds), signed with every key of `secrets`.
pub fn signature(secrets: &[Vec<u8>], id: &str, timestamp: i64, body: &str) -> String {
    secrets
        .iter()
        .map(|key| {
            // HMAC accepts keys of any length: this cannot fail.
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("hmac takes any key");
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.to_string().as_bytes());
            mac.update(b".");
            mac.update(body.as_bytes());
            format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (its reference test vector).
    #[test]
    fn matches_the_specification_example() {
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = signature(
            &[key],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn one_signature_per_secret() {
        let sig = signature(&[b"a".repeat(32), b"b".repeat(32)], "m", 1, "{}");
        assert_eq!(sig.split(' ').count(), 2);
        assert!(sig.split(' ').all(|s| s.starts_with("v1,")));
    }
}
