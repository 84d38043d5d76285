//! Durations on the command line, written as people write them, parsed by
//! jiff (already the workspace's time crate): one parser for every flag
//! that takes one, so `1h30m` is accepted wherever a duration is.

/// A duration argument (`--timeout`, `--permission-timeout`,
/// `--ready-timeout`, `providers check --timeout`): bare seconds (`90`) or a duration as jiff's friendly
/// format reads it (`90s`, `10m`, `1h30m`, `1h 30m`, `1.5h`, `2 hours`), as
/// whole seconds from 1 to 604800 (the service's bound on `maxTurnSeconds`).
pub(crate) fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let secs = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>()
            .map_err(|_| format!("`{text}` is outside 1s-168h"))?
    } else {
        let d: jiff::SignedDuration = text
            .parse()
            .map_err(|_| format!("`{text}` is not a duration (e.g. 90s, 10m, 1h30m)"))?;
        if d.is_negative() || d.subsec_nanos() != 0 {
            return Err(format!(
                "`{text}`: give a whole number of seconds, not negative"
            ));
        }
        u64::try_from(d.as_secs()).map_err(|_| format!("`{text}` is outside 1s-168h"))?
    };
    match secs {
        1..=604_800 => Ok(secs),
        _ => Err(format!("`{text}` is outside 1s-168h")),
    }
}

/// A wait (`--ready-timeout`): a duration as [`parse_duration`] reads it,
/// or zero (`0`, `0s`): look once, do not wait.
pub(crate) fn parse_wait(text: &str) -> Result<u64, String> {
    let zero = text.trim().trim_end_matches('s');
    if !zero.is_empty() && zero.bytes().all(|b| b == b'0') {
        return Ok(0);
    }
    parse_duration(text)
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, parse_wait};

    #[test]
    fn a_wait_may_be_zero() {
        assert_eq!(parse_wait("0"), Ok(0));
        assert_eq!(parse_wait("0s"), Ok(0));
        assert_eq!(parse_wait("1m30s"), Ok(90));
        assert!(parse_wait("-1").is_err());
        assert!(parse_wait("s").is_err());
    }

    #[test]
    fn durations_take_s_m_h_or_bare_seconds_within_the_services_bound() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("168h"), Ok(604_800));
        assert_eq!(parse_duration("1h30m"), Ok(5400));
        assert_eq!(parse_duration("1h 30m"), Ok(5400));
        assert_eq!(parse_duration("1.5h"), Ok(5400));
        assert_eq!(parse_duration("2m30s"), Ok(150));
        for bad in ["", "0", "0s", "169h", "m", "-3", "-1h", "1.5s", "soon"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
