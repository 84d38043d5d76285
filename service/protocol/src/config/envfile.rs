//! The secrets file beside the configuration: `<config dir>/env`, mode 0600,
//! one `NAME=VALUE` per line (blank lines and `#` comments allowed).
//!
//! API keys exported in a login shell never reach a service started by the
//! service manager; this file is where they go instead. `serve` reads it at
//! start, and a provider's allowlisted names take their values from it before
//! the service's own environment.
//!
//! What must stay true: no value is ever shown — `Debug` lists names only,
//! and errors name the file, the line number and (for a well-formed name)
//! the name, never line content. Values are plain (no quotes, backslashes,
//! surrounding blanks or control characters) so that systemd's
//! `EnvironmentFile=` reads the same file to the same values.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::names::valid_env_name;

/// File name of the secrets file, in the config file's directory.
pub const ENV_FILE: &str = "env";

/// Largest secrets file read.
const MAX_ENV_FILE_BYTES: u64 = 1 << 20;

/// Parsed secrets. `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvFile {
    /// Name → value, in name order (the order they are written back in).
    values: BTreeMap<String, String>,
}

impl fmt::Debug for EnvFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvFile")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why the secrets file cannot be used. Never quotes file content.
#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    /// Reading failed.
    #[error("cannot read env file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Group or others may read or write it, or it is not a regular file.
    #[error(
        "env file {} has mode {mode:04o}; it holds secrets and must be a regular file with mode 0600 (chmod 600 it)",
        path.display()
    )]
    Mode {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A line is not `NAME=VALUE` with a valid name and a plain value.
    #[error("env file {} line {line}: {problem}", path.display())]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, without the content.
        problem: String,
    },
    /// Larger than the bound.
    #[error("env file {} is larger than {MAX_ENV_FILE_BYTES} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
}

impl EnvFile {
    /// The secrets file that belongs to the config file at `config`.
    pub fn path_for(config: &Path) -> PathBuf {
        config
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(ENV_FILE)
    }

    /// Reads the file at `path`; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<EnvFile, EnvFileError> {
        let meta = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(EnvFile::default()),
            Err(source) => {
                return Err(EnvFileError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
            Ok(m) => m,
        };
        let mode = meta.permissions().mode() & 0o7777;
        if !meta.is_file() || mode & 0o077 != 0 {
            return Err(EnvFileError::Mode {
                path: path.to_owned(),
                mode,
            });
        }
        if meta.len() > MAX_ENV_FILE_BYTES {
            return Err(EnvFileError::TooLarge {
                path: path.to_owned(),
            });
        }
        let bytes = std::fs::read(path).map_err(|source| EnvFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        EnvFile::parse(&bytes, path)
    }

    /// Parses file content; `path` is only used in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<EnvFile, EnvFileError> {
        let bad = |line: usize, problem: String| EnvFileError::BadLine {
            path: path.to_owned(),
            line,
            problem,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            bad(line + 1, "is not UTF-8".into())
        })?;
        let mut values = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let Some((name, value)) = raw.split_once('=') else {
                return Err(bad(n, "expected NAME=VALUE".into()));
            };
            if !valid_env_name(name) {
                return Err(bad(
                    n,
                    "the name before `=` is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)".into(),
                ));
            }
            if let Some(problem) = value_problem(value) {
                return Err(bad(n, format!("the value of {name} {problem}")));
            }
            if values.insert(name.to_string(), value.to_string()).is_some() {
                return Err(bad(n, format!("{name} is set more than once")));
            }
        }
        Ok(EnvFile { values })
    }

    /// The value of `name`, if the file sets it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The names the file sets, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// The values, for callers that must recognise them (leak checks).
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.values.values().map(String::as_str)
    }

    /// Sets `name` to `value` after checking both with the file's rules.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), EnvFileError> {
        let bad = |problem: String| EnvFileError::BadLine {
            path: PathBuf::from(ENV_FILE),
            line: 0,
            problem,
        };
        if !valid_env_name(name) {
            return Err(bad(
                "the name is not a valid environment variable name".into()
            ));
        }
        if let Some(problem) = value_problem(value) {
            return Err(bad(format!("the value of {name} {problem}")));
        }
        self.values.insert(name.to_string(), value.to_string());
        Ok(())
    }

    /// The file content, one `NAME=VALUE` line per name.
    pub fn render(&self) -> String {
        let mut out = String::from("# lapis-ai-controller agent secrets: NAME=VALUE, mode 0600\n");
        for (k, v) in &self.values {
            out.push_str(k);
            out.push('=');
            out.push_str(v);
            out.push('\n');
        }
        out
    }
}

/// Why a value is not plain, if it is not.
fn value_problem(value: &str) -> Option<&'static str> {
    if value.chars().any(char::is_control) {
        Some("contains a control character")
    } else if value.trim() != value {
        Some("starts or ends with blanks")
    } else if value.contains(['"', '\'', '\\']) {
        Some("contains a quote or backslash (write the value plain, unquoted)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::{EnvFile, EnvFileError};

    fn parse(s: &str) -> Result<EnvFile, EnvFileError> {
        EnvFile::parse(s.as_bytes(), Path::new("env"))
    }

    #[test]
    fn lines_comments_and_round_trip() {
        let f = parse("# c\n\nA_KEY=sk-1=2\n  # indented comment\nB=\n").unwrap();
        assert_eq!(f.get("A_KEY"), Some("sk-1=2"));
        assert_eq!(f.get("B"), Some(""));
        assert_eq!(parse(&f.render()).unwrap(), f);
        assert!(!format!("{f:?}").contains("sk-1"));
    }

    #[test]
    fn bad_lines_name_the_line_never_the_value() {
        for (text, line) in [
            ("A=1\nsk-SECRETVALUE\n", 2),
            ("1BAD=sk-SECRETVALUE\n", 1),
            ("A=\"sk-SECRETVALUE\"\n", 1),
            ("A= sk-SECRETVALUE\n", 1),
            ("A=1\nA=sk-SECRETVALUE\n", 2),
            ("sk-SECRETVALUE=1\n", 1),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(&format!("line {line}")), "{e}");
            assert!(!e.contains("SECRETVALUE"), "{e}");
        }
    }

    #[test]
    fn mode_is_checked_and_missing_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("env");
        assert_eq!(EnvFile::load(&path).unwrap(), EnvFile::default());
        std::fs::write(&path, "A=1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = EnvFile::load(&path).unwrap_err();
        assert!(matches!(e, EnvFileError::Mode { mode: 0o644, .. }), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(EnvFile::load(&path).unwrap().get("A"), Some("1"));
    }
}
