//! Resolving an instance's paths from the command line, and mapping installer
//! errors to exit classes. Every command that touches an installation (also
//! the service commands) resolves its paths through [`resolve`].

use std::path::{Path, PathBuf};

use lapis_installer::{InstallError, PathOptions, Paths};

use crate::args::GlobalArgs;
use crate::exit::CliError;

/// Paths for the selected instance: `--config`, `--instance`, and the
/// command's `--home` / `--install-path` when it has them. `HOME`,
/// `XDG_CONFIG_HOME` and the working directory come from the environment.
pub(super) fn resolve(
    global: &GlobalArgs,
    workspace: Option<&Path>,
    install_path: Option<&Path>,
) -> Result<Paths, CliError> {
    let mut opts = PathOptions::from_env().map_err(|e| installer_error(e.into()))?;
    opts.config = global.config.clone();
    opts.instance = global.instance.clone();
    // `--home` exists on install, serve, stop and uninstall; without it
    // (and on client commands, which have no flag) the environment is read
    // here, so every command sees the same input and the flag wins.
    opts.controller_home = workspace.map(Path::to_path_buf).or_else(home_from_env);
    opts.install_path = install_path.map(Path::to_path_buf);
    Paths::resolve(&opts).map_err(|e| installer_error(e.into()))
}

/// The controller home the environment names: `LAPIS_AI_CONTROLLER_HOME`,
/// else its old name `LAPIS_AI_CONTROLLER_WORKSPACE`, which is warned about
/// on stderr once per process (like the hidden `--workspace`). An empty
/// value counts as unset.
fn home_from_env() -> Option<PathBuf> {
    use lapis_protocol::home::{HOME_ENV, HOME_ENV_DEPRECATED};
    let read = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    read(HOME_ENV).or_else(|| {
        let old = read(HOME_ENV_DEPRECATED)?;
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            eprintln!(
                "warning: `{HOME_ENV_DEPRECATED}` is now `{HOME_ENV}` (the controller home); the old name goes in the next release"
            );
        });
        Some(old)
    })
}

/// An installer error as a CLI error: service problems are exit 3, the rest
/// exit 2, each with the installer's stable code.
pub(super) fn installer_error(err: InstallError) -> CliError {
    let code = err.code();
    if err.is_unavailable() {
        CliError::unavailable(code, err)
    } else {
        CliError::failure(code, err)
    }
}

/// Milliseconds with microsecond precision, for timing fields.
pub(super) fn millis(d: std::time::Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds (UTC).
pub(super) fn utc(secs: u64) -> String {
    lapis_release::utc_from_epoch(i64::try_from(secs).unwrap_or(i64::MAX))
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
