//! The signature of pushed content (W3C WebSub §8): a hub given a `hub.secret` signs each
//! delivery's body with it and sends `X-Hub-Signature: METHOD=HEX`, METHOD one of `sha1`,
//! `sha256`, `sha384`, `sha512` (HMAC with that hash). A delivery for a subscription that
//! has a secret is taken only when its signature checks; the comparison is ring's, in
//! constant time.

use ring::hmac;

/// Why a delivery's signature is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `X-Hub-Signature` header although a secret was sent.
    #[error("no signature (a secret was sent with the subscription)")]
    Missing,
    /// Not `METHOD=HEX`, or an unknown method, or not hexadecimal.
    #[error("malformed signature header")]
    Malformed,
    /// The HMAC does not match.
    #[error("signature does not match")]
    Mismatch,
}

impl SignatureError {
    /// A label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            SignatureError::Missing => "signature_missing",
            SignatureError::Malformed => "signature_malformed",
            SignatureError::Mismatch => "signature_mismatch",
        }
    }
}

/// Checks `header` (the `X-Hub-Signature` value, if any) against `body` and `secret`.
pub fn check(header: Option<&str>, secret: &[u8], body: &[u8]) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?.trim();
    let (method, hex) = header.split_once('=').ok_or(SignatureError::Malformed)?;
    let algorithm =
        algorithm(&method.trim().to_ascii_lowercase()).ok_or(SignatureError::Malformed)?;
    let tag = decode_hex(hex.trim()).ok_or(SignatureError::Malformed)?;
    let key = hmac::Key::new(algorithm, secret);
    hmac::verify(&key, body, &tag).map_err(|_| SignatureError::Mismatch)
}

/// The header a hub would send: `METHOD=HEX` (for tests and the test hub).
pub fn sign(method: &str, secret: &[u8], body: &[u8]) -> Option<String> {
    let tag = hmac::sign(&hmac::Key::new(algorithm(method)?, secret), body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("{method}={hex}"))
}

/// The HMAC of a signature method's name (lower case), if it is one WebSub allows.
fn algorithm(method: &str) -> Option<hmac::Algorithm> {
    Some(match method {
        "sha1" => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        "sha256" => hmac::HMAC_SHA256,
        "sha384" => hmac::HMAC_SHA384,
        "sha512" => hmac::HMAC_SHA512,
        _ => return None,
    })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    // The longest tag is SHA-512's 64 bytes.
    if !s.len().is_multiple_of(2) || s.len() > 128 || s.is_empty() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_signs_and_checks() {
        let (secret, body) = (b"s3cret", b"<feed/>".as_slice());
        for method in ["sha1", "sha256", "sha384", "sha512"] {
            let h = sign(method, secret, body).unwrap();
            assert_eq!(check(Some(&h), secret, body), Ok(()), "{h}");
            assert_eq!(
                check(Some(&h), b"other", body),
                Err(SignatureError::Mismatch)
            );
            assert_eq!(
                check(Some(&h), secret, b"<feed>changed</feed>"),
                Err(SignatureError::Mismatch)
            );
            assert_eq!(
                check(Some(&h.to_uppercase()), secret, body),
                Ok(()),
                "method and hex in upper case"
            );
        }
        // A known answer (RFC 4231 test case 2: key "Jefe").
        assert_eq!(
            sign("sha256", b"Jefe", b"what do ya want for nothing?").unwrap(),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn malformed_and_missing_headers_are_refused() {
        let body = b"x";
        assert_eq!(check(None, b"k", body), Err(SignatureError::Missing));
        for h in [
            "",
            "sha256",
            "md5=00",
            "sha256=zz",
            "sha256=abc",
            &format!("sha256={}", "00".repeat(100)),
            "sha256=é1",
        ] {
            assert_eq!(
                check(Some(h), b"k", body),
                Err(SignatureError::Malformed),
                "{h}"
            );
        }
    }
}
