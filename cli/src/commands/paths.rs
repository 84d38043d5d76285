//! Resolving an instance's paths from the command line, and mapping installer
//! errors to exit classes. Every command that touches an installation (also
//! the service commands) resolves its paths through [`resolve`].

use std::path::Path;

use lapis_installer::{InstallError, PathOptions, Paths};

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// Paths for the selected instance: `--config`, `--instance`, and the
/// command's `--workspace` / `--install-path` when it has them. `HOME`,
/// `XDG_CONFIG_HOME` and the working directory come from the environment.
pub fn resolve(
    global: &GlobalArgs,
    workspace: Option<&Path>,
    install_path: Option<&Path>,
) -> Result<Paths, CliError> {
    let mut opts = PathOptions::from_env().map_err(|e| installer_error(e.into()))?;
    opts.config = global.config.clone();
    opts.instance = global.instance.clone();
    opts.controller_home = workspace.map(Path::to_path_buf);
    opts.install_path = install_path.map(Path::to_path_buf);
    Paths::resolve(&opts).map_err(|e| installer_error(e.into()))
}

/// An installer error as a CLI error: service problems are exit 3, the rest
/// exit 2, each with the installer's stable code.
pub fn installer_error(err: InstallError) -> CliError {
    let code = err.code();
    if err.is_unavailable() {
        CliError::unavailable(code, err)
    } else {
        CliError::failure(code, err)
    }
}

/// Milliseconds with microsecond precision, for timing fields.
pub fn millis(d: std::time::Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds (UTC).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_798_761_599), "2026-12-31T23:59:59Z");
    }
}
