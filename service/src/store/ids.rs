//! Ids, input digests and small validators.

use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

/// A new random id: `prefix` + 32 lowercase hex digits.
pub(super) fn new_id(prefix: &str) -> StoreResult<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        StoreError::io(
            "cannot read randomness",
            std::io::Error::other(e.to_string()),
        )
    })?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}

/// Lowercase hex SHA-256 over length-prefixed parts (unambiguous framing).
pub(super) fn digest(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Names chosen by callers (workspace ids, command ids, providers, codes):
/// 1..=128 bytes of `[A-Za-z0-9._:-]`. Keeps them safe to log and to key on.
pub(super) fn check_name(what: &str, value: &str) -> StoreResult<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(format!("malformed {what}")))
    }
}

/// The longest name a row may hold: a session credential is the longest
/// (`token:fingerprint:application`, 64 + 1 + 16 + 1 + 64 bytes).
const MAX_NAME: usize = 160;

/// SQL expression form of [`check_name`] on `col`, for startup validation.
pub(super) fn sql_name_ok(col: &str) -> String {
    format!(
        "(typeof({col}) = 'text' AND length({col}) BETWEEN 1 AND {MAX_NAME} AND {col} NOT GLOB '*[^A-Za-z0-9._:-]*')"
    )
}

/// Lowercase hex SHA-256 strings.
pub(super) fn check_sha256_hex(value: &str) -> StoreResult<()> {
    let ok = value.len() == 64
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid("malformed bearer hash"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_unique_hex() {
        let a = new_id("thr_").unwrap();
        let b = new_id("thr_").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert!(a.starts_with("thr_"));
        check_name("id", &a).unwrap();
    }

    #[test]
    fn digest_framing_is_unambiguous() {
        assert_ne!(digest(&["ab", "c"]), digest(&["a", "bc"]));
        assert_eq!(digest(&["x"]), digest(&["x"]));
    }

    #[test]
    fn names_are_checked() {
        check_name("id", "ws-1.a:b_c").unwrap();
        check_name("id", &"x".repeat(MAX_NAME)).unwrap();
        for bad in ["", "a b", "a/b", "é", &"x".repeat(MAX_NAME + 1)] {
            assert_eq!(check_name("id", bad).unwrap_err().code(), "invalid_request");
        }
        check_sha256_hex(&"a".repeat(64)).unwrap();
        assert!(check_sha256_hex(&"A".repeat(64)).is_err());
    }
}
