//! Why a configuration cannot be used, and reading its file: every error
//! names fields and positions, never a value from the file.

use std::path::{Path, PathBuf};

/// Why the configuration cannot be used. Never quotes file content.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a regular file (a FIFO, a device, a directory).
    #[error("configuration {} is not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_CONFIG_BYTES`].
    #[error("configuration {} is larger than {MAX_CONFIG_BYTES} bytes", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
    },
    /// Not JSON of the expected shape.
    #[error("configuration {} is malformed at {}line {line}, column {column} ({kind})", path.display(), parse_at(field.as_deref(), problem.as_deref()))]
    Parse {
        /// The file.
        path: PathBuf,
        /// JSON path of the offending field, when the JSON itself is sound
        /// (`providers.claude.envAllowlist[2]`); for a missing member, the
        /// object that lacks it (`providers.claude`).
        field: Option<String>,
        /// What is wrong there, when it can be said without a value:
        /// ``missing field `command` `` or ``unknown field `comand` ``
        /// (names only: serde's other messages may quote a value).
        problem: Option<String>,
        /// Line of the problem.
        line: usize,
        /// Column of the problem.
        column: usize,
        /// `syntax`, `data` (wrong type or unknown field), `duplicate key` or `eof`.
        kind: &'static str,
    },
    /// A rule is broken; `field` names where, `problem` says what.
    #[error("configuration field `{field}` {problem}")]
    Invalid {
        /// JSON path of the offending field (`tokens[0].secret`).
        field: String,
        /// What is wrong, without the value.
        problem: String,
    },
    /// Two workspace ids name one canonical path.
    #[error("workspaces `{first}` and `{second}` name the same directory (workspace_alias)")]
    WorkspaceAlias {
        /// The id kept.
        first: String,
        /// The id refused.
        second: String,
    },
}

impl ConfigError {
    /// The stable code for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::WorkspaceAlias { .. } => "workspace_alias",
            _ => "invalid_config",
        }
    }
}

/// The largest configuration file anything reads (serve, status, the
/// installer): far above any real config, far below trouble.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Reads a configuration file with the one set of rules every reader uses:
/// it must be a regular file (a FIFO or `/dev/zero` is refused before it is
/// opened, and the opened file is checked again) and at most
/// [`MAX_CONFIG_BYTES`] long (the read stops one byte past the bound, so a
/// file that grows meanwhile cannot exhaust memory).
pub fn read_config_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    use std::io::Read;
    let read_err = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let not_regular = || ConfigError::NotRegular {
        path: path.to_owned(),
    };
    if !std::fs::metadata(path).map_err(read_err)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
        });
    }
    Ok(bytes)
}

/// A JSON path for an error message that never quotes a value: a map key
/// that is not a plain name (a token secret used as a key is longer than any
/// name may be) is shown by its position instead (`providers.?`).
/// `` `F`: PROBLEM, `` / `` `F`, `` / nothing, before a parse error's position.
fn parse_at(field: Option<&str>, problem: Option<&str>) -> String {
    match (field, problem) {
        (Some(f), Some(p)) => format!("`{f}`: {p}, "),
        (Some(f), None) => format!("`{f}`, "),
        (None, Some(p)) => format!("the top level: {p}, "),
        (None, None) => String::new(),
    }
}

/// serde's "missing field `x`" / "unknown field `x`" (a name, checked to be
/// one), never any other message: those may quote a value (a secret).
pub(super) fn named_problem(e: &serde_json::Error) -> Option<String> {
    let text = e.to_string();
    ["missing field `", "unknown field `"]
        .iter()
        .find_map(|lead| {
            let rest = text.strip_prefix(lead)?;
            let name = &rest[..rest.find('`')?];
            crate::names::valid_name(name, 64).then(|| format!("{lead}{name}`"))
        })
}

pub(super) fn error_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                if crate::names::valid_name(key, 64) {
                    out.push_str(key);
                } else {
                    out.push('?');
                }
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    if out.is_empty() { ".".to_owned() } else { out }
}
