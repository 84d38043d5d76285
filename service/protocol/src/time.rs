//! Every time the project writes as text, in one place, on `jiff`: the wire
//! form (RFC 3339 in UTC with milliseconds, `2026-11-30T12:00:00.000Z`),
//! the second-precision form file times use (`2026-11-30T12:00:00Z`), the
//! build date (`2026-11-30`) and the ages people read (`42s`, `5m`).
//!
//! The store keeps milliseconds since the Unix epoch (an `i64` from its
//! injected clock) and the records keep that value; only serialization
//! converts, here, so every JSON time a client sees — protocol frames and CLI
//! output alike — has the same shape. Deserialization also accepts the old
//! integer form, so a newer client can read an older server.
//!
//! What must stay true: every form is UTC (no time zone database is read),
//! and a value outside jiff's range (years -9999 to 9999) is clamped to its
//! bound rather than failing, so formatting never panics on a stored value.

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Deserializer, Serializer};

/// Milliseconds (or seconds) since the epoch as a timestamp, clamped to
/// jiff's range.
fn clamped(t: Result<Timestamp, jiff::Error>, negative: bool) -> Timestamp {
    t.unwrap_or(if negative {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// Milliseconds since the epoch, now, from the system clock (for callers
/// that show ages; the store's clock is injected and never reads this).
pub fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

/// Renders milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn format_ms(ms: i64) -> String {
    clamped(Timestamp::from_millisecond(ms), ms < 0)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Renders seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC): the
/// form of times that are whole seconds at their source (a file's mtime in
/// `releases list`), so no invented `.000` is printed.
pub fn format_secs(secs: i64) -> String {
    clamped(Timestamp::from_second(secs), secs < 0)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Renders seconds since the epoch as the UTC date `YYYY-MM-DD` (the build
/// date of a `SOURCE_DATE_EPOCH`).
pub fn format_date(secs: i64) -> String {
    clamped(Timestamp::from_second(secs), secs < 0)
        .strftime("%Y-%m-%d")
        .to_string()
}

/// Parses what [`format_ms`] writes, plus any RFC 3339 time with a `Z` or
/// numeric offset and up to nanosecond fractions (rounded down to
/// milliseconds). A time without an offset is refused: it names no instant.
pub fn parse_ms(text: &str) -> Option<i64> {
    let ts: Timestamp = text.parse().ok()?;
    i64::try_from(ts.as_nanosecond().div_euclid(1_000_000)).ok()
}

/// A duration in milliseconds as a person reads an age: `42s`, `5m`, `3h`,
/// `2d` (the largest whole unit, rounded down; negative is `0s`).
pub fn age(ms: i64) -> String {
    let d = SignedDuration::from_millis(ms.max(0));
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Text(String),
    Millis(i64),
}

fn from_wire<E: serde::de::Error>(w: Wire) -> Result<i64, E> {
    match w {
        Wire::Millis(ms) => Ok(ms),
        Wire::Text(s) => {
            parse_ms(&s).ok_or_else(|| E::custom(format!("`{s}` is not an RFC 3339 time")))
        }
    }
}

/// `#[serde(with = "crate::time::rfc3339")]` for an `i64` of milliseconds.
pub mod rfc3339 {
    use super::*;

    /// Writes the milliseconds as RFC 3339 UTC.
    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_ms(*ms))
    }

    /// Reads RFC 3339 (or, from older servers, epoch milliseconds).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        from_wire(Wire::deserialize(d)?)
    }
}

/// `#[serde(with = "crate::time::rfc3339_opt")]` for an `Option<i64>`.
pub mod rfc3339_opt {
    use super::*;

    /// Writes RFC 3339 UTC, or `null`.
    pub fn serialize<S: Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match ms {
            Some(ms) => s.serialize_str(&format_ms(*ms)),
            None => s.serialize_none(),
        }
    }

    /// Reads RFC 3339 (or epoch milliseconds), or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        Option::<Wire>::deserialize(d)?.map(from_wire).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::{age, format_date, format_ms, format_secs, parse_ms};

    #[test]
    fn ages_read_in_whole_units() {
        assert_eq!(age(-5), "0s");
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(60_000), "1m");
        assert_eq!(age(3_600_000), "1h");
        assert_eq!(age(86_400_000 * 3 + 1), "3d");
    }

    #[test]
    fn second_forms_have_no_fraction_and_out_of_range_clamps() {
        assert_eq!(format_secs(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_secs(951_782_400 + 3_723), "2000-02-29T01:02:03Z");
        assert_eq!(format_secs(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(format_date(1_767_225_599), "2025-12-31");
        // jiff's bounds, a day inside the years ±9999.
        assert_eq!(format_secs(i64::MAX), "9999-12-30T22:00:00Z");
        assert_eq!(format_ms(i64::MIN), "-9999-01-02T01:59:59.000Z");
    }

    #[test]
    fn formats_utc_with_millis() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_ms(951_782_400_000 + 3_723_045),
            "2000-02-29T01:02:03.045Z"
        );
        assert_eq!(format_ms(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        for ms in [
            0,
            -1,
            1,
            951_782_400_123,
            1_796_040_000_999,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_ms(&format_ms(ms)), Some(ms), "{ms}");
        }
        assert_eq!(parse_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_ms("1970-01-01T00:00:00.5Z"), Some(500));
        assert_eq!(parse_ms("1970-01-01T00:00:00.123456789Z"), Some(123));
        for bad in [
            "",
            "1970-01-01",
            "1970-13-01T00:00:00Z",
            "1970-01-01T00:00:00",
            "x970-01-01T00:00:00Z",
            "1970-01-01T00:00:00.Z",
        ] {
            assert_eq!(parse_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn serde_round_trip_accepts_old_integers() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct R {
            #[serde(with = "super::rfc3339")]
            at: i64,
            #[serde(with = "super::rfc3339_opt", default)]
            end: Option<i64>,
        }
        let r = R {
            at: 1_000,
            end: None,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"at":"1970-01-01T00:00:01.000Z","end":null}"#);
        assert_eq!(serde_json::from_str::<R>(&text).unwrap(), r);
        let old: R = serde_json::from_str(r#"{"at":1000,"end":2000}"#).unwrap();
        assert_eq!(
            old,
            R {
                at: 1_000,
                end: Some(2_000)
            }
        );
    }
}

#[cfg(test)]
mod properties {
    proptest::proptest! {
        /// Every millisecond of the years 0001-9998 survives the wire form,
        /// and the second form is the wire form without its fraction (the
        /// two differed only there when they were hand-written, and must
        /// stay so).
        #[test]
        fn the_wire_form_round_trips(ms in -62_135_596_800_000i64..253_370_764_800_000i64) {
            let text = super::format_ms(ms);
            proptest::prop_assert_eq!(super::parse_ms(&text), Some(ms));
            let secs = ms.div_euclid(1000);
            proptest::prop_assert_eq!(
                super::format_secs(secs),
                format!("{}Z", &super::format_ms(secs * 1000)[..19])
            );
        }
    }
}
