//! How an executable is named and found: the one rule agent providers and
//! the managed controller ([`crate::client::ManagedController`]) share.
//!
//! What must stay true: a command is an absolute path (used as is) or a bare
//! name (no `/`), never a relative path, which would depend on whatever the
//! current directory happens to be; a bare name is searched in `PATH`, then
//! `$HOME/.local/bin` (where the installer puts the launcher), and only
//! absolute directories of `PATH` count; what is found must be an executable
//! regular file.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::EnvFile;

/// How an executable is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandRef {
    /// An absolute path, used as is.
    Absolute(PathBuf),
    /// A bare name, resolved from `PATH`, then `$HOME/.local/bin`, at launch.
    Bare(String),
}

/// Why a command name was refused ([`CommandRef::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CommandNameError {
    /// Empty, or holding a NUL byte.
    #[error("a command must be a non-empty string without NUL bytes")]
    Empty,
    /// Has a `/` but does not start with one.
    #[error("a command must be an absolute path or a bare name, not a relative path")]
    Relative,
}

/// Why a command did not resolve to an executable
/// ([`CommandLookup::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// A bare name found in none of the searched directories.
    #[error("command `{command}` not found in PATH or ~/.local/bin")]
    NotFound {
        /// The bare name.
        command: String,
    },
    /// An absolute path that is not an executable regular file.
    #[error("`{}` is not an executable file", path.display())]
    NotExecutable {
        /// The path.
        path: PathBuf,
    },
}

impl CommandRef {
    /// Reads a command as written in config or given by a caller.
    pub fn parse(command: &str) -> Result<CommandRef, CommandNameError> {
        if command.is_empty() || command.contains('\0') {
            Err(CommandNameError::Empty)
        } else if command.starts_with('/') {
            Ok(CommandRef::Absolute(PathBuf::from(command)))
        } else if command.contains('/') {
            Err(CommandNameError::Relative)
        } else {
            Ok(CommandRef::Bare(command.to_owned()))
        }
    }
}

/// The environment a launch sees: where bare command names are looked up
/// (`PATH`, then `$HOME/.local/bin`) and, for agents, where allowlisted
/// variables take their values (the env file beside the config, then the
/// service's own environment). Injected so tests need not mutate the
/// process env.
#[derive(Debug, Clone, Default)]
pub struct CommandLookup {
    /// The `PATH` value to search.
    pub path: Option<OsString>,
    /// The home directory whose `.local/bin` is searched last.
    pub home: Option<PathBuf>,
    /// Secrets from the env file; they win over the service's environment.
    pub secrets: EnvFile,
}

impl CommandLookup {
    /// The lookup of the running process (its `PATH` and `HOME`).
    pub fn from_env() -> CommandLookup {
        CommandLookup {
            path: std::env::var_os("PATH"),
            home: std::env::var_os("HOME").map(PathBuf::from),
            secrets: EnvFile::default(),
        }
    }

    /// The value an allowlisted `name` gets: the env file's, else the
    /// service's own environment's.
    pub fn env_value(&self, name: &str) -> Option<OsString> {
        self.secrets
            .get(name)
            .map(OsString::from)
            .or_else(|| std::env::var_os(name))
    }

    /// The executable `command` names: an absolute path if it is an
    /// executable file, a bare name from the first directory that has it.
    pub fn resolve(&self, command: &CommandRef) -> Result<PathBuf, CommandError> {
        match command {
            CommandRef::Absolute(path) => {
                if is_executable(path) {
                    Ok(path.clone())
                } else {
                    Err(CommandError::NotExecutable { path: path.clone() })
                }
            }
            CommandRef::Bare(name) => {
                let mut dirs: Vec<PathBuf> = self
                    .path
                    .as_ref()
                    .map(|p| std::env::split_paths(p).collect())
                    .unwrap_or_default();
                if let Some(home) = &self.home {
                    dirs.push(home.join(".local/bin"));
                }
                dirs.iter()
                    .filter(|d| d.is_absolute())
                    .map(|d| d.join(name))
                    .find(|p| is_executable(p))
                    .ok_or_else(|| CommandError::NotFound {
                        command: name.clone(),
                    })
            }
        }
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_absolute_or_bare() {
        assert_eq!(
            CommandRef::parse("/usr/bin/x"),
            Ok(CommandRef::Absolute("/usr/bin/x".into()))
        );
        assert_eq!(CommandRef::parse("x"), Ok(CommandRef::Bare("x".into())));
        assert_eq!(CommandRef::parse("bin/x"), Err(CommandNameError::Relative));
        assert_eq!(CommandRef::parse("./x"), Err(CommandNameError::Relative));
        assert_eq!(CommandRef::parse(""), Err(CommandNameError::Empty));
        assert_eq!(CommandRef::parse("a\0b"), Err(CommandNameError::Empty));
    }
}
