//! The selected instance's configuration file and the env file beside it:
//! located, loaded and validated the way `serve` reads them, and, after an
//! edit, a running service asked to reload (`providers`, `providers add`,
//! `providers check`, `config`, `serve`).

use std::path::{Path, PathBuf};

use lapis_installer::config as installer_config;
use lapis_protocol::config::{Config, EnvFile};

use super::paths::{installer_error, resolve};
use crate::args::GlobalArgs;
use crate::exit::CliError;

/// The config file of the selected instance.
pub(super) fn config_path(global: &GlobalArgs) -> Result<PathBuf, CliError> {
    Ok(resolve(global, None, None)?.config)
}

/// Reads the env file beside `config`, as `serve` does.
pub(super) fn load_env_file(config: &Path) -> Result<(PathBuf, EnvFile), CliError> {
    let path = EnvFile::path_for(config);
    let file = EnvFile::load(&path).map_err(|e| CliError::failure("invalid_env_file", e))?;
    Ok((path, file))
}

/// Loads and validates the config, including the checks against this
/// machine (exit 2 naming the field when invalid).
pub(super) fn load_config(path: &Path) -> Result<Config, CliError> {
    let mut config = Config::load(path).map_err(|e| CliError::failure(e.code(), e))?;
    config
        .check_on_this_machine()
        .map_err(|e| CliError::failure(e.code(), e))?;
    Ok(config)
}

/// Makes a running service re-read the config after an edit, and says
/// what happened: reloaded, refused (with why), or nothing running (the
/// change takes effect at its next start). Never fails the edit itself.
pub(super) fn reload_running(global: &GlobalArgs) -> String {
    let reloaded = super::connect::target(global, None).and_then(|target| {
        let mut client = super::connect::connect_to(&target)?;
        client.config_reload().map_err(super::connect::client_error)
    });
    match reloaded {
        Ok(r) if r.applied => "the running service reloaded its configuration".to_owned(),
        Ok(r) => format!(
            "the running service refused to reload ({}: {}); it keeps the previous configuration",
            r.code.as_deref().unwrap_or("error"),
            r.error.as_deref().unwrap_or("no reason given")
        ),
        Err(e) if e.class == crate::exit::ExitClass::Unavailable => {
            "no service is running: it reads the change when it starts".to_owned()
        }
        Err(e) => format!(
            "the running service could not be asked to reload ({}); run `{} config reload`",
            e.error,
            lapis_release::PRODUCT
        ),
    }
}

/// Why a config edit failed: the edit helper's own error (exit class and
/// code from the installer) or the command's.
pub(super) enum EditFailure {
    Config(installer_config::ConfigError),
    Cli(CliError),
}

impl From<installer_config::ConfigError> for EditFailure {
    fn from(e: installer_config::ConfigError) -> EditFailure {
        EditFailure::Config(e)
    }
}

impl EditFailure {
    pub(super) fn into_cli(self) -> CliError {
        match self {
            EditFailure::Config(e) => installer_error(e.into()),
            EditFailure::Cli(e) => e,
        }
    }
}
