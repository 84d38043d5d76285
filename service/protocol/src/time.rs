//! The one wire form of a time: RFC 3339 in UTC with milliseconds
//! (`2026-11-30T12:00:00.000Z`).
//!
//! The store keeps milliseconds since the Unix epoch (an `i64` from its
//! injected clock) and the records keep that value; only serialization
//! converts, here, so every JSON time a client sees — protocol frames and CLI
//! output alike — has the same shape. Deserialization also accepts the old
//! integer form, so a newer client can read an older server.

use serde::{Deserialize, Deserializer, Serializer};

/// Renders milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses what [`format_ms`] writes, plus any RFC 3339 time with a `Z` or
/// numeric offset and up to nanosecond fractions (truncated to milliseconds).
pub fn parse_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let padded = format!("{:0<3}", &frac[..digits.min(3)]);
        millis = padded.parse::<i64>().ok()?;
        rest = &frac[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let o = rest.as_bytes();
            if o.len() != 6 || o[3] != b':' {
                return None;
            }
            let h: i64 = rest[1..3].parse().ok()?;
            let m: i64 = rest[4..6].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    Some(secs * 1000 + millis)
}

/// Days since 1970-01-01 to `(year, month, day)`: Howard Hinnant's
/// civil_from_days, exact for the proleptic Gregorian calendar. The one
/// calendar conversion of the workspace (`lapis-release` renders build dates
/// with it).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Howard Hinnant's days_from_civil, the inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    use super::{format_ms, parse_ms};

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
