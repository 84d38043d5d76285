//! Build identity: who built this binary, from what, for which target.
//!
//! The identity is fixed at compile time by the binary crate (environment set
//! by the build) and handed to the libraries as a value; nothing here reads the
//! live checkout or the clock.

use serde::{Deserialize, Serialize};

/// The four facts that identify a build. A plain `cargo build` reports `dev`
/// for the commit and date.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildIdentity {
    /// Semantic version of the workspace (`CARGO_PKG_VERSION` unless overridden).
    pub version: String,
    /// Source commit the build was made from, or `dev`.
    pub commit: String,
    /// Build date (UTC, `YYYY-MM-DD`, from `SOURCE_DATE_EPOCH`), or `dev`.
    pub date: String,
    /// Rust target triple the binary was compiled for.
    pub target: String,
}

/// Renders seconds since the Unix epoch (`SOURCE_DATE_EPOCH`) as the UTC
/// date `YYYY-MM-DD` used in [`BuildIdentity::date`] (through
/// `lapis_protocol::time`, where every time format lives).
pub fn date_from_epoch(secs: i64) -> String {
    lapis_protocol::time::format_date(secs)
}

/// Renders seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_from_epoch(secs: i64) -> String {
    lapis_protocol::time::format_secs(secs)
}

#[cfg(test)]
mod tests {
    use super::date_from_epoch;

    #[test]
    fn renders_utc_dates() {
        assert_eq!(date_from_epoch(0), "1970-01-01");
        assert_eq!(date_from_epoch(951_782_400), "2000-02-29");
        assert_eq!(date_from_epoch(1_767_225_599), "2025-12-31");
        assert_eq!(date_from_epoch(-1), "1969-12-31");
        assert_eq!(
            super::utc_from_epoch(951_782_400 + 3_723),
            "2000-02-29T01:02:03Z"
        );
    }
}
