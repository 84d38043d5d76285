//! Passes the build identity into the binary at compile time.
//!
//! Only environment variables set by whoever runs the build are read; nothing
//! here runs git or looks at the checkout. `LAPIS_BUILD_COMMIT` and
//! `SOURCE_DATE_EPOCH` are optional; without them the binary reports `dev`.

fn main() {
    println!("cargo:rerun-if-env-changed=LAPIS_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=LAPIS_BUILD_VERSION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=LAPIS_BUILD_TARGET={target}");
    let date = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(epoch) => {
            let secs: i64 = epoch
                .trim()
                .parse()
                .expect("SOURCE_DATE_EPOCH must be an integer number of seconds");
            civil_date(secs.div_euclid(86_400))
        }
        Err(_) => "dev".to_owned(),
    };
    println!("cargo:rustc-env=LAPIS_BUILD_DATE={date}");
}

/// Days since 1970-01-01 to `YYYY-MM-DD` (Howard Hinnant's civil_from_days).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
