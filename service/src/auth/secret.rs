//! Secrets: generation, hashing and constant-time comparison.
//!
//! What must stay true: a bearer is only ever stored as its SHA-256 hash; a
//! token comparison takes the same time whichever byte differs (both sides are
//! hashed to a fixed length first, so even the length is not revealed).

use lapis_protocol::config::TokenSpec;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Prefix of session bearers, so a leaked one is recognisable in a scan.
pub(crate) const BEARER_PREFIX: &str = "lapis_s_";

/// Why no randomness could be had.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random source failed")]
pub struct RandomError;

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> Result<String, RandomError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|_| RandomError)?;
    Ok(hex::encode(bytes))
}

/// A fresh session bearer (`lapis_s_` + 64 hex digits).
pub(crate) fn new_bearer() -> Result<String, RandomError> {
    Ok(format!("{BEARER_PREFIX}{}", random_hex(32)?))
}

/// The stored form of a bearer: lowercase hex SHA-256.
pub(crate) fn hash_bearer(bearer: &str) -> String {
    hex::encode(Sha256::digest(bearer.as_bytes()))
}

/// Constant-time equality of two secrets of any length.
pub(crate) fn secrets_equal(a: &str, b: &str) -> bool {
    let ha = Sha256::digest(a.as_bytes());
    let hb = Sha256::digest(b.as_bytes());
    ha.as_slice().ct_eq(hb.as_slice()).into()
}

/// The identity of a config token in a session's credential: its name and
/// a fingerprint of its secret (`name:` + 16 hex digits of a domain-tagged
/// SHA-256), so a token removed and re-added under the same name with
/// another secret never revives the sessions of the old one. The
/// fingerprint is one-way and of a random secret: it reveals nothing
/// usable, and it is never printed.
pub(crate) fn token_identity(spec: &TokenSpec) -> String {
    let mut h = Sha256::new();
    h.update(b"lapis-token-identity/1\0");
    h.update(spec.secret.as_bytes());
    format!("{}:{}", spec.name, &hex::encode(h.finalize())[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearers_are_fresh_prefixed_and_hashed() {
        let a = new_bearer().unwrap();
        let b = new_bearer().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(BEARER_PREFIX) && a.len() == BEARER_PREFIX.len() + 64);
        let h = hash_bearer(&a);
        assert_eq!(h.len(), 64);
        assert!(!h.contains(&a[BEARER_PREFIX.len()..]));
        assert_eq!(h, hash_bearer(&a));
    }

    #[test]
    fn comparison_is_exact() {
        assert!(secrets_equal("lapis_abc", "lapis_abc"));
        assert!(!secrets_equal("lapis_abc", "lapis_abd"));
        assert!(!secrets_equal("lapis_abc", "lapis_ab"));
        assert!(!secrets_equal("", "x"));
    }
}
