//! `SHA256SUMS`: the checksum list published beside the archives.
//!
//! The format is coreutils' `sha256sum` output, so `sha256sum -c SHA256SUMS`
//! checks a download by hand: one line per file, `<64 lowercase hex>`, two
//! spaces (or a space and `*` for binary mode), the bare file name, `\n`.
//! Lines are sorted by name when written. Parsing is strict: a malformed line,
//! a path-like name, or one name listed twice with different hashes is an
//! error rather than something skipped, because a checksum file that cannot be
//! read fully cannot vouch for anything.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};
use thiserror::Error;

/// Conventional file name of the checksum list.
pub const CHECKSUMS_FILE: &str = "SHA256SUMS";

/// Upper bound on the size of a checksum list accepted by [`Sha256Sums::parse`].
const MAX_CHECKSUMS_BYTES: usize = 1 << 20;

/// A lowercase hex SHA-256, validated on construction.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Hex(String);

impl Sha256Hex {
    /// Accepts 64 hex digits in either case and stores them lowercase.
    pub fn parse(text: &str) -> Result<Sha256Hex, ChecksumError> {
        let text = text.trim();
        if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Sha256Hex(text.to_ascii_lowercase()))
        } else {
            Err(ChecksumError::InvalidHex)
        }
    }

    /// The SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256Hex {
        Sha256Hex(hex::encode(Sha256::digest(bytes)))
    }

    /// The 64 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Sha256Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Hex({})", self.0)
    }
}

/// Why a checksum or checksum list was refused.
#[derive(Debug, Error)]
pub enum ChecksumError {
    /// A checksum is not 64 hex digits.
    #[error("checksum is not 64 hexadecimal digits")]
    InvalidHex,
    /// The checksum list is too large to be one.
    #[error("checksum list exceeds {MAX_CHECKSUMS_BYTES} bytes")]
    TooLarge,
    /// A line of the checksum list is not `<hex>  <name>`.
    #[error("checksum list line {line} is malformed: {reason}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The same name is listed twice with different checksums.
    #[error("checksum list names {name:?} twice with different checksums")]
    Conflict {
        /// The name listed twice.
        name: String,
    },
    /// The list has no line for the file being checked.
    #[error("checksum list has no entry for {name:?}")]
    Missing {
        /// The file name looked up.
        name: String,
    },
    /// The bytes do not hash to the expected value.
    #[error("SHA-256 mismatch for {name}: expected {expected}, got {actual}")]
    Mismatch {
        /// What was checked (a file name).
        name: String,
        /// The checksum that was required.
        expected: Sha256Hex,
        /// The checksum of the bytes at hand.
        actual: Sha256Hex,
    },
}

/// A parsed `SHA256SUMS`: file name to checksum, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sha256Sums {
    entries: BTreeMap<String, Sha256Hex>,
}

impl Sha256Sums {
    /// An empty list.
    pub fn new() -> Sha256Sums {
        Sha256Sums::default()
    }

    /// Adds (or replaces) the checksum of `name`, a bare file name.
    pub fn insert(&mut self, name: impl Into<String>, sum: Sha256Hex) {
        self.entries.insert(name.into(), sum);
    }

    /// The checksum listed for `name`, or [`ChecksumError::Missing`].
    pub fn get(&self, name: &str) -> Result<&Sha256Hex, ChecksumError> {
        self.entries
            .get(name)
            .ok_or_else(|| ChecksumError::Missing {
                name: name.to_owned(),
            })
    }

    /// Every `(name, checksum)`, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Sha256Hex)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The coreutils text form, sorted by name.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (name, sum) in &self.entries {
            out.push_str(sum.as_str());
            out.push_str("  ");
            out.push_str(name);
            out.push('\n');
        }
        out
    }

    /// Parses a coreutils-format list. Blank lines are allowed; anything else
    /// that is not a well-formed line is an error. A `./` prefix on a name is
    /// dropped (as `sha256sum ./x` writes it); other paths are refused.
    pub fn parse(text: &[u8]) -> Result<Sha256Sums, ChecksumError> {
        if text.len() > MAX_CHECKSUMS_BYTES {
            return Err(ChecksumError::TooLarge);
        }
        let text = std::str::from_utf8(text).map_err(|_| ChecksumError::Malformed {
            line: 1,
            reason: "not UTF-8",
        })?;
        let mut sums = Sha256Sums::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let malformed = |reason| ChecksumError::Malformed { line, reason };
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            if raw.trim().is_empty() {
                continue;
            }
            if raw.len() < 67 || !raw.is_char_boundary(64) {
                return Err(malformed("expected `<sha256>  <name>`"));
            }
            let (hex, rest) = raw.split_at(64);
            let sum =
                Sha256Hex::parse(hex).map_err(|_| malformed("checksum is not 64 hex digits"))?;
            let name = rest
                .strip_prefix("  ")
                .or_else(|| rest.strip_prefix(" *"))
                .ok_or(malformed("expected two spaces or ` *` after the checksum"))?;
            let name = name.strip_prefix("./").unwrap_or(name);
            if name.is_empty()
                || name.contains('/')
                || name == "."
                || name == ".."
                || name.chars().any(char::is_control)
            {
                return Err(malformed("name must be a bare file name"));
            }
            match sums.entries.get(name) {
                Some(existing) if *existing != sum => {
                    return Err(ChecksumError::Conflict {
                        name: name.to_owned(),
                    });
                }
                _ => {
                    sums.entries.insert(name.to_owned(), sum);
                }
            }
        }
        Ok(sums)
    }
}

/// Checks `bytes` against `expected`, naming `name` in the error.
pub fn check_bytes(name: &str, bytes: &[u8], expected: &Sha256Hex) -> Result<(), ChecksumError> {
    let actual = Sha256Hex::of(bytes);
    if actual == *expected {
        Ok(())
    } else {
        Err(ChecksumError::Mismatch {
            name: name.to_owned(),
            expected: expected.clone(),
            actual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn round_trips_and_looks_up() {
        let mut sums = Sha256Sums::new();
        sums.insert("b.tar.gz", Sha256Hex::of(b"b"));
        sums.insert("a.tar.gz", Sha256Hex::of(b"abc"));
        let text = sums.to_text();
        assert_eq!(text.lines().next().unwrap(), format!("{A}  a.tar.gz"));
        let parsed = Sha256Sums::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed, sums);
        assert_eq!(parsed.get("a.tar.gz").unwrap().as_str(), A);
        assert!(matches!(
            parsed.get("c.tar.gz"),
            Err(ChecksumError::Missing { .. })
        ));
    }

    #[test]
    fn accepts_binary_marker_dot_slash_and_uppercase() {
        let text = format!("{}  ./x\n{} *y\n\n", A.to_uppercase(), A);
        let sums = Sha256Sums::parse(text.as_bytes()).unwrap();
        assert_eq!(sums.get("x").unwrap().as_str(), A);
        assert_eq!(sums.get("y").unwrap().as_str(), A);
    }

    #[test]
    fn refuses_malformed_lines() {
        for bad in [
            format!("{A} x\n"),
            format!("{}  x\n", &A[..63]),
            format!("{A}  dir/x\n"),
            format!("{A}  ..\n"),
            "garbage\n".to_owned(),
            format!("{}g  x\n", &A[..63]),
        ] {
            assert!(
                matches!(
                    Sha256Sums::parse(bad.as_bytes()),
                    Err(ChecksumError::Malformed { line: 1, .. })
                ),
                "accepted {bad:?}"
            );
        }
        let other = Sha256Hex::of(b"other");
        let conflict = format!("{A}  x\n{other}  x\n");
        assert!(matches!(
            Sha256Sums::parse(conflict.as_bytes()),
            Err(ChecksumError::Conflict { .. })
        ));
    }

    #[test]
    fn check_bytes_reports_both_sums() {
        let expected = Sha256Hex::parse(A).unwrap();
        check_bytes("a", b"abc", &expected).unwrap();
        let err = check_bytes("a", b"abd", &expected).unwrap_err().to_string();
        assert!(err.contains(A) && err.contains("mismatch"), "{err}");
        assert!(Sha256Hex::parse("xyz").is_err());
    }
}
