//! Where everything lives, for one instance, decided in one place.
//!
//! Every command resolves its paths here so that `install`, `serve`, `status`
//! and `uninstall` can never disagree about which config, controller home or
//! service unit is meant. Resolution is pure: the caller passes `HOME`,
//! `XDG_CONFIG_HOME` and the working directory in ([`PathOptions::from_env`]
//! reads them from the process), so tests can point everything at a temp dir.
//!
//! Layout (default instance / instance `NAME`):
//!
//! | what | default | named |
//! |---|---|---|
//! | launcher | `~/.local/bin/lapis-ai-controller` | shared |
//! | releases | `~/.local/lib/lapis-ai-controller/releases` | shared |
//! | config | `$XDG_CONFIG_HOME/lapis-ai-controller/config.json` | `…/instances/NAME/config.json` |
//! | controller home | `~/.lapis/ai-controller` | `~/.lapis/ai-controller-NAME` |
//! | systemd unit | `lapis-ai-controller.service` | `lapis-ai-controller-NAME.service` |
//! | launchd label | `ai.lapis.controller` | `ai.lapis.controller.NAME` |

use std::fmt;
use std::path::{Component, Path, PathBuf};

use lapis_protocol::home::{ControllerHome, resolve_home};
use thiserror::Error;

/// Binary and product name.
pub const PRODUCT: &str = lapis_release::PRODUCT;

/// Longest accepted instance name.
const MAX_INSTANCE_LEN: usize = 32;

/// An instance: the default one or a validated name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instance {
    /// The instance used without `--instance`.
    Default,
    /// A named instance; the name matches `^[a-z0-9][a-z0-9-]{0,31}$` and is
    /// not `default`.
    Named(String),
}

impl Instance {
    /// Validates `--instance NAME`. `default` names the default instance.
    pub(crate) fn parse(name: Option<&str>) -> Result<Instance, PathError> {
        let Some(name) = name else {
            return Ok(Instance::Default);
        };
        if name == "default" {
            return Ok(Instance::Default);
        }
        let bytes = name.as_bytes();
        let valid = !bytes.is_empty()
            && bytes.len() <= MAX_INSTANCE_LEN
            && matches!(bytes[0], b'a'..=b'z' | b'0'..=b'9')
            && bytes
                .iter()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'));
        if valid {
            Ok(Instance::Named(name.to_owned()))
        } else {
            Err(PathError::InvalidInstance {
                name: name.escape_debug().to_string(),
            })
        }
    }

    /// `default` or the name, as written into the config.
    pub fn as_str(&self) -> &str {
        match self {
            Instance::Default => "default",
            Instance::Named(n) => n,
        }
    }

    /// The name when the instance is named.
    pub fn name(&self) -> Option<&str> {
        match self {
            Instance::Default => None,
            Instance::Named(n) => Some(n),
        }
    }

    fn suffix(&self, sep: char) -> String {
        match self {
            Instance::Default => String::new(),
            Instance::Named(n) => format!("{sep}{n}"),
        }
    }
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which user service manager the platform has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// systemd user units (Linux).
    Systemd,
    /// launchd agents (macOS).
    Launchd,
}

impl ServiceKind {
    /// The service manager of the platform this binary was built for.
    pub(crate) fn native() -> ServiceKind {
        if cfg!(target_os = "macos") {
            ServiceKind::Launchd
        } else {
            ServiceKind::Systemd
        }
    }

    /// `systemd` or `launchd`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceKind::Systemd => "systemd",
            ServiceKind::Launchd => "launchd",
        }
    }

    /// The service manager named by [`SERVICE_MANAGER_ENV`], if set.
    ///
    /// A test seam, documented as one: it lets the launchd code path (unit
    /// path, plist, every `launchctl` call) run on Linux against a recording
    /// stand-in. Installing with it for real on the wrong platform writes a
    /// unit nothing reads, so an unknown value is an error, never a guess.
    pub(crate) fn from_env() -> Result<Option<ServiceKind>, PathError> {
        match std::env::var(SERVICE_MANAGER_ENV) {
            Err(_) => Ok(None),
            Ok(v) if v.is_empty() => Ok(None),
            Ok(v) if v == "systemd" => Ok(Some(ServiceKind::Systemd)),
            Ok(v) if v == "launchd" => Ok(Some(ServiceKind::Launchd)),
            Ok(v) => Err(PathError::InvalidServiceManager(v)),
        }
    }
}

/// Environment variable selecting the service manager (`systemd` or
/// `launchd`) instead of the platform's own; see [`ServiceKind::from_env`].
pub const SERVICE_MANAGER_ENV: &str = "LAPIS_AI_CONTROLLER_SERVICE_MANAGER";

/// The service registration of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitPaths {
    /// Which service manager the unit is for.
    pub kind: ServiceKind,
    /// systemd unit name (`lapis-ai-controller.service`) or launchd label.
    pub name: String,
    /// Where the unit file or plist is written.
    pub path: PathBuf,
}

/// Inputs to [`Paths::resolve`]. Optional fields are the command-line
/// overrides; `None` means the default.
#[derive(Clone, Debug, Default)]
pub struct PathOptions {
    /// `$HOME`; must be absolute.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`; ignored unless absolute (as the XDG spec says).
    pub xdg_config_home: Option<PathBuf>,
    /// Working directory, to make relative overrides absolute.
    pub cwd: PathBuf,
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// `--home DIR` or `LAPIS_AI_CONTROLLER_HOME` (or its old name).
    pub controller_home: Option<PathBuf>,
    /// `--instance NAME`.
    pub instance: Option<String>,
    /// `--install-path PATH`.
    pub install_path: Option<PathBuf>,
    /// Service manager to resolve the unit for (default: the native one).
    pub service_kind: Option<ServiceKind>,
}

impl PathOptions {
    /// Options with `HOME`, `XDG_CONFIG_HOME`, the working directory and
    /// [`SERVICE_MANAGER_ENV`] taken from this process; the overrides are
    /// left empty for the caller.
    pub fn from_env() -> Result<PathOptions, PathError> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(PathError::NoHome)?;
        let cwd = std::env::current_dir().map_err(|_| PathError::NoCwd)?;
        Ok(PathOptions {
            home,
            xdg_config_home: std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
            cwd,
            service_kind: ServiceKind::from_env()?,
            ..PathOptions::default()
        })
    }
}

/// Why paths could not be resolved.
#[derive(Debug, Error)]
pub enum PathError {
    /// `--instance` has characters outside `[a-z0-9-]` or a bad length.
    #[error(
        "invalid instance name {name:?}: use 1-32 characters from a-z, 0-9 and '-', starting with a letter or digit"
    )]
    InvalidInstance {
        /// The refused name, escaped.
        name: String,
    },
    /// `HOME` is unset or empty.
    #[error("HOME is not set")]
    NoHome,
    /// `HOME` is relative.
    #[error("HOME must be an absolute path, got {0}")]
    RelativeHome(PathBuf),
    /// The working directory is unavailable (needed for relative overrides).
    #[error("cannot determine the working directory")]
    NoCwd,
    /// [`SERVICE_MANAGER_ENV`] names no known service manager.
    #[error("{SERVICE_MANAGER_ENV} must be `systemd` or `launchd`, got {0:?}")]
    InvalidServiceManager(String),
}

/// Every path one instance uses. All paths are absolute and lexically
/// normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The selected instance.
    pub instance: Instance,
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// The launcher symlink (shared by all instances).
    pub launcher: PathBuf,
    /// `~/.local/lib/lapis-ai-controller/releases` (shared).
    pub releases_root: PathBuf,
    /// The instance's config file.
    pub config: PathBuf,
    /// Whether `config` came from `--config`.
    pub(crate) config_explicit: bool,
    /// The instance's controller home before the config is read: `--workspace`
    /// (or the environment) when given, else the instance's default. Once a
    /// config is at hand, use [`Paths::controller_home_for`].
    pub controller_home: PathBuf,
    /// Whether `controller_home` came from `--workspace` / the environment.
    pub(crate) controller_home_explicit: bool,
    /// The service unit of this instance.
    pub unit: UnitPaths,
}

impl Paths {
    /// Resolves every path for `opts`.
    pub fn resolve(opts: &PathOptions) -> Result<Paths, PathError> {
        let instance = Instance::parse(opts.instance.as_deref())?;
        if !opts.home.is_absolute() {
            return Err(PathError::RelativeHome(opts.home.clone()));
        }
        let home = normalize(&opts.home);
        let abs = |p: &Path| normalize(&opts.cwd.join(p));
        let xdg_config = opts
            .xdg_config_home
            .as_deref()
            .filter(|p| p.is_absolute())
            .map(normalize)
            .unwrap_or_else(|| home.join(".config"));
        let config_dir = xdg_config.join(PRODUCT);
        let default_config = match &instance {
            Instance::Default => config_dir.join("config.json"),
            Instance::Named(n) => config_dir.join("instances").join(n).join("config.json"),
        };
        let default_home = home
            .join(".lapis")
            .join(format!("ai-controller{}", instance.suffix('-')));
        let kind = opts.service_kind.unwrap_or_else(ServiceKind::native);
        let unit = match kind {
            ServiceKind::Systemd => {
                let name = format!("{PRODUCT}{}.service", instance.suffix('-'));
                UnitPaths {
                    kind,
                    path: xdg_config.join("systemd").join("user").join(&name),
                    name,
                }
            }
            ServiceKind::Launchd => {
                let name = format!("ai.lapis.controller{}", instance.suffix('.'));
                UnitPaths {
                    kind,
                    path: home
                        .join("Library")
                        .join("LaunchAgents")
                        .join(format!("{name}.plist")),
                    name,
                }
            }
        };
        Ok(Paths {
            launcher: opts
                .install_path
                .as_deref()
                .map(abs)
                .unwrap_or_else(|| home.join(".local").join("bin").join(PRODUCT)),
            releases_root: home
                .join(".local")
                .join("lib")
                .join(PRODUCT)
                .join("releases"),
            config: opts.config.as_deref().map(abs).unwrap_or(default_config),
            config_explicit: opts.config.is_some(),
            controller_home: opts
                .controller_home
                .as_deref()
                .map(abs)
                .unwrap_or(default_home),
            controller_home_explicit: opts.controller_home.is_some(),
            unit,
            instance,
            home,
        })
    }

    /// The controller home every command uses, given the config's
    /// `controllerHome` (`None` before a config exists): the one precedence
    /// of [`lapis_protocol::home::resolve_home`] (flag, environment, config,
    /// default). The CLI passes `--home` and `LAPIS_AI_CONTROLLER_HOME`
    /// merged (the environment is read when the flag is absent), so both
    /// report as the flag here.
    pub fn controller_home_for(&self, config_home: Option<&Path>) -> ControllerHome {
        let flag = self
            .controller_home_explicit
            .then_some(self.controller_home.as_path());
        resolve_home(flag, None, config_home, &self.controller_home)
    }

    /// `releases/<digest>`.
    pub fn snapshot_dir(&self, digest: &str) -> PathBuf {
        self.releases_root.join(digest)
    }

    /// `releases/<digest>/bin/lapis-ai-controller`: what the launcher points at.
    pub fn snapshot_bin(&self, digest: &str) -> PathBuf {
        self.snapshot_dir(digest).join("bin").join(PRODUCT)
    }

    /// The lock serialising every change under the releases root.
    pub(crate) fn releases_lock(&self) -> PathBuf {
        self.releases_root.join(".lock")
    }

    /// The install state (activation history) file.
    pub(crate) fn state_file(&self) -> PathBuf {
        self.releases_root.join("state.json")
    }

    /// The optional env file beside the config (`NAME=VALUE` lines holding
    /// agents' secrets). The systemd unit loads it with `EnvironmentFile=-`,
    /// so a missing file is fine.
    pub(crate) fn env_file(&self) -> PathBuf {
        lapis_protocol::config::EnvFile::path_for(&self.config)
    }

    /// Where the launchd agent sends the service's stdout and stderr (the
    /// service log on macOS; `logs` reads it).
    pub(crate) fn launchd_log(&self) -> PathBuf {
        self.home
            .join("Library/Logs")
            .join(format!("{}.log", self.unit.name))
    }
}

/// Whether `name` is a snapshot directory name: 64 lowercase hex digits.
pub fn is_digest(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Lexical normalisation: drops `.`, folds `..`, keeps the path absolute.
/// Symlinks are not resolved (paths may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Paths of the default instance under a temp `home` with a systemd unit:
/// the one fixture the unit tests of every module share.
#[cfg(test)]
pub(crate) fn test_paths(home: &Path) -> Paths {
    Paths::resolve(&PathOptions {
        home: home.to_path_buf(),
        cwd: home.to_path_buf(),
        service_kind: Some(ServiceKind::Systemd),
        ..PathOptions::default()
    })
    .unwrap()
}

#[cfg(test)]
mod tests;
