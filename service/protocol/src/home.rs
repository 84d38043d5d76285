//! Which controller home a command uses, decided once.
//!
//! The controller home holds the database, the instance lock and the socket.
//! Install, serve and every client must agree on it, or a client talks to a
//! different home than the service. One precedence, for everyone:
//!
//! 1. the `--home DIR` flag (its old name `--workspace DIR` still works),
//! 2. the `LAPIS_AI_CONTROLLER_HOME` environment variable (its old name
//!    `LAPIS_AI_CONTROLLER_WORKSPACE` still works, when the new one is unset),
//! 3. `controllerHome` in the configuration,
//! 4. the instance's default (`~/.lapis/ai-controller` for the default instance).

use std::path::{Path, PathBuf};

/// The socket's file name inside the controller home.
pub const SOCKET_FILE: &str = "controller.sock";

/// Managed mode's (`serve --stdio`) private socket inside the controller
/// home: only its agents' MCP bridge (`hello` with a tool ticket) connects
/// to it; applications talk to a managed controller over its stdin/stdout.
/// Bound before readiness and removed at exit; one left by a killed
/// controller is replaced by the next one.
pub const BRIDGE_SOCKET_FILE: &str = "bridge.sock";

/// The pid file `serve --background` writes inside the controller home:
/// the detached server's process id, which `stop` checks before it
/// signals anything.
pub const PID_FILE: &str = "serve.pid";

/// Where `serve --background` writes the pid before renaming it over
/// [`PID_FILE`], so a reader never sees half a pid. The detached server may
/// inspect the home while it exists, so the home check accepts it.
pub const PID_TMP_FILE: &str = "serve.pid.tmp";

/// The log file a background `serve` appends its stderr to, inside the
/// controller home.
pub const LOG_FILE: &str = "serve.log";

/// The database's file name inside the controller home.
pub const DB_FILE: &str = "controller.db";

/// The directory inside the controller home that holds worktree
/// workspaces when no `worktrees.root` is configured (`uninstall --purge`
/// removes them through git).
pub const WORKTREES_DIR: &str = "worktrees";

/// The file that marks a directory as a controller home (written by the
/// first open, before the database).
pub const MARKER_FILE: &str = "controller.home";

/// Whether `dir` is marked as a controller home: it holds the database or
/// the marker, as a regular file (a link in their place does not count).
/// `uninstall --purge` removes no other non-empty directory; `serve` also
/// accepts a new or empty one (lapis-service's `store::home`).
pub fn is_marked_home(dir: &Path) -> bool {
    [DB_FILE, MARKER_FILE].iter().any(|name| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_file())
    })
}

/// The environment variable that names the controller home.
pub const HOME_ENV: &str = "LAPIS_AI_CONTROLLER_HOME";

/// The old name of [`HOME_ENV`], from before `--workspace` became `--home`:
/// read only when [`HOME_ENV`] is unset (the CLI warns about it once on
/// stderr); removed in the next release. Reserved like [`HOME_ENV`]
/// ([`crate::mcp::IDENTITY_ENV`]) while it is read.
pub const HOME_ENV_DEPRECATED: &str = "LAPIS_AI_CONTROLLER_WORKSPACE";

/// Where the chosen controller home came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomeSource {
    /// `--home DIR`.
    Flag,
    /// [`HOME_ENV`].
    Environment,
    /// `controllerHome` in the configuration.
    Config,
    /// The instance's default.
    Default,
}

/// A resolved controller home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerHome {
    /// The directory.
    pub path: PathBuf,
    /// Which rule chose it.
    pub source: HomeSource,
}

impl ControllerHome {
    /// The socket inside this home.
    pub fn socket(&self) -> PathBuf {
        self.path.join(SOCKET_FILE)
    }
}

/// Applies the precedence: `flag`, then `env` (the value of [`HOME_ENV`],
/// else of [`HOME_ENV_DEPRECATED`]; an empty value counts as unset), then `config`, then `default`.
pub fn resolve_home(
    flag: Option<&Path>,
    env: Option<&Path>,
    config: Option<&Path>,
    default: &Path,
) -> ControllerHome {
    fn nonempty(p: Option<&Path>) -> Option<&Path> {
        p.filter(|p| !p.as_os_str().is_empty())
    }
    let (path, source) = if let Some(p) = nonempty(flag) {
        (p, HomeSource::Flag)
    } else if let Some(p) = nonempty(env) {
        (p, HomeSource::Environment)
    } else if let Some(p) = nonempty(config) {
        (p, HomeSource::Config)
    } else {
        (default, HomeSource::Default)
    };
    ControllerHome {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_wins_over_the_ones_after_it() {
        let (f, e, c, d) = (
            Path::new("/flag"),
            Path::new("/env"),
            Path::new("/config"),
            Path::new("/default"),
        );
        let r = resolve_home(Some(f), Some(e), Some(c), d);
        assert_eq!((r.path.as_path(), r.source), (f, HomeSource::Flag));
        let r = resolve_home(None, Some(e), Some(c), d);
        assert_eq!((r.path.as_path(), r.source), (e, HomeSource::Environment));
        let r = resolve_home(None, None, Some(c), d);
        assert_eq!((r.path.as_path(), r.source), (c, HomeSource::Config));
        let r = resolve_home(None, None, None, d);
        assert_eq!((r.path.as_path(), r.source), (d, HomeSource::Default));
        assert_eq!(r.socket(), Path::new("/default/controller.sock"));
    }

    #[test]
    fn an_empty_value_counts_as_unset() {
        let r = resolve_home(
            Some(Path::new("")),
            Some(Path::new("")),
            None,
            Path::new("/d"),
        );
        assert_eq!(r.source, HomeSource::Default);
    }
}
