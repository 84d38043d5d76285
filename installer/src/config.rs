//! The configuration file, as far as the installer is concerned: created once,
//! never rewritten.
//!
//! Applications hold the bootstrap token from this file, so rewriting it would
//! lock every one of them out. The installer therefore only ever *creates* the
//! file (all or nothing, never over an existing one, see
//! [`crate::fsx::create_new_atomic`]) and otherwise reads the existing file
//! through the one schema and its structural validator
//! ([`Config::parse`]: shape, names, limits, tokens). What depends on the
//! machine at run time (workspace directories exist) is `serve`'s step
//! ([`Config::check_on_this_machine`]), never the installer's, so a config
//! whose workspace directory is missing does not fail an install.
//!
//! The exceptions are [`edit`] (`providers add`/`remove`): it rewrites the
//! file atomically, refuses any change to `tokens`, and writes only a
//! document the full validator accepts; and [`edit_tokens`] (`tokens add`,
//! `tokens revoke`): the same write, which may only append a token or
//! remove one whole, never rewrite one or remove the owner's.
//!
//! Error messages never quote file contents: the shared validator reports
//! fields and positions, never values.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use lapis_protocol::config::{self as schema, Config, TokenSpec};
use serde_json::{Value, json};
use thiserror::Error;

use crate::fsx::{self, FsError};
use crate::paths::Paths;

mod tokens;
pub use tokens::edit_tokens;

pub(crate) use lapis_protocol::config::TOKEN_PREFIX;

/// Why the configuration was refused or could not be written.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file exists but does not have the basic shape.
    #[error("configuration {path} is malformed: {reason}; it was left untouched")]
    Malformed {
        /// The config file.
        path: PathBuf,
        /// What is wrong (never contents).
        reason: String,
    },
    /// The file does not exist (commands other than install need it).
    #[error("configuration {0} does not exist; run `lapis-ai-controller install` first")]
    Missing(PathBuf),
    /// Reading or writing failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The file, or the edited document, breaks a rule of the full
    /// validator; nothing was written.
    #[error(transparent)]
    Invalid(#[from] lapis_protocol::config::ConfigError),
}

/// What [`bootstrap`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigOutcome {
    /// A new file was written with fresh tokens.
    Created,
    /// An existing, well-formed file was kept byte for byte.
    Reused,
}

impl ConfigOutcome {
    /// `created` or `reused`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigOutcome::Created => "created",
            ConfigOutcome::Reused => "reused",
        }
    }
}

/// The parts of a well-formed config the installer uses.
#[derive(Clone, Debug)]
pub struct ConfigSummary {
    /// `controllerHome`, when the file names one.
    pub controller_home: Option<PathBuf>,
}

/// Reads the config at `path` and checks its structure. `Ok(None)` when it
/// does not exist.
pub fn read(path: &Path) -> Result<Option<(Config, ConfigSummary)>, ConfigError> {
    let malformed = |reason: String| ConfigError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    // The one bounded, regular-file-only read every config reader uses.
    let bytes = match schema::read_config_file(path) {
        Ok(bytes) => bytes,
        Err(schema::ConfigError::Read { source, .. })
            if source.kind() == io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(schema::ConfigError::Read { source, .. }) => {
            return Err(FsError::new("read", path, source).into());
        }
        Err(schema::ConfigError::NotRegular { .. }) => {
            return Err(malformed("not a regular file".into()));
        }
        Err(schema::ConfigError::TooLarge { .. }) => {
            return Err(malformed(format!(
                "larger than {} bytes",
                schema::MAX_CONFIG_BYTES
            )));
        }
        Err(other) => return Err(malformed(reason(&other))),
    };
    let config = Config::parse(&bytes, path).map_err(|e| malformed(reason(&e)))?;
    let summary = ConfigSummary {
        controller_home: Some(config.controller_home.clone()),
    };
    Ok(Some((config, summary)))
}

/// The shared validator's refusal as the installer words it (after "is
/// malformed: "). Names fields and positions, never values.
fn reason(e: &schema::ConfigError) -> String {
    match e {
        schema::ConfigError::Parse {
            line, column, kind, ..
        } if *kind == schema::PARSE_DATA => format!(
            "a member is missing, unknown or of the wrong type (line {line}, column {column})"
        ),
        schema::ConfigError::Parse {
            line, column, kind, ..
        } if *kind == schema::PARSE_DUPLICATE_KEY => {
            format!("a JSON object repeats a key (line {line}, column {column})")
        }
        schema::ConfigError::Parse { line, column, .. } => {
            format!("not valid JSON (line {line}, column {column})")
        }
        schema::ConfigError::Invalid { field, problem } => format!("field `{field}` {problem}"),
        schema::ConfigError::Read { .. } => "cannot be read".to_owned(),
        other => other.to_string(),
    }
}

/// Like [`read`], but a missing file is an error.
pub fn read_existing(path: &Path) -> Result<(Config, ConfigSummary), ConfigError> {
    read(path)?.ok_or_else(|| ConfigError::Missing(path.to_path_buf()))
}

/// The first token of the config (the owner's bootstrap token).
pub fn first_token(config: &Config) -> Option<&TokenSpec> {
    config.tokens.first()
}

/// A fresh bootstrap token: `lapis_` and 64 lowercase hex digits (256 bits
/// from the OS random source).
pub fn generate_token() -> Result<String, io::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

/// The initial config document for `paths`.
pub fn initial_document(paths: &Paths, secret: &str) -> Value {
    json!({
        "schema": 1,
        "instance": paths.instance.as_str(),
        "controllerHome": paths.controller_home,
        "tokens": [
            { "name": "owner", "principal": "owner", "secret": secret }
        ],
        "providers": {},
        "workspaces": {},
        "server": {}
    })
}

/// Creates the config when it is missing (directory 0700, file 0600, fresh
/// token), or checks and keeps the existing one byte for byte. When another
/// installer creates it first, that file is kept. `before_link` runs when the
/// new file is complete but not yet visible (fault injection).
///
/// A new file is complete as soon as its name is visible; the name becomes
/// durable when the caller fsyncs the config directory (the install sequence
/// does so together with the releases root, before the launcher moves).
pub fn bootstrap(
    paths: &Paths,
    before_link: &dyn Fn(),
) -> Result<(ConfigOutcome, ConfigSummary), ConfigError> {
    if let Some((_, summary)) = read(&paths.config)? {
        return Ok((ConfigOutcome::Reused, summary));
    }
    fsx::create_dir_all_mode(fsx::parent_of(&paths.config), 0o700)?;
    remove_stale_temps(&paths.config)?;
    let secret =
        generate_token().map_err(|e| FsError::new("generate a token for", &paths.config, e))?;
    let mut bytes = serde_json::to_vec_pretty(&initial_document(paths, &secret))
        .expect("config document serialises");
    bytes.push(b'\n');
    // What is created passes the same structural validator it is read with.
    Config::parse(&bytes, &paths.config).map_err(|e| ConfigError::Malformed {
        path: paths.config.clone(),
        reason: reason(&e),
    })?;
    let created = fsx::create_new_atomic_deferred(&paths.config, &bytes, 0o600, before_link)?;
    // Either way the file on disk is now complete; report what it says.
    let (_, summary) = read_existing(&paths.config)?;
    let outcome = if created {
        ConfigOutcome::Created
    } else {
        ConfigOutcome::Reused
    };
    Ok((outcome, summary))
}

/// Rewrites the config at `path` through `change`, atomically (temp file in
/// the same directory, fsync, rename, fsync of the directory; mode 0600).
///
/// What must stay true: the file is valid before and after (the full
/// validator of `lapis-protocol` checks both), `tokens` is identical (a
/// change aborts the edit: applications hold those secrets), everything
/// else `change` does not touch keeps its meaning, and on any error nothing
/// is written. Editors are serialised by a lock file beside the config.
pub fn edit<E>(path: &Path, change: impl FnOnce(&mut Value) -> Result<(), E>) -> Result<Value, E>
where
    E: From<ConfigError>,
{
    rewrite(path, change, |before, after| before == after)
}

/// The one writer of an existing config: lock, read and validate, change,
/// check the `tokens` rule (`tokens_ok(before, after)`), validate, write
/// atomically.
fn rewrite<E>(
    path: &Path,
    change: impl FnOnce(&mut Value) -> Result<(), E>,
    tokens_ok: impl FnOnce(Option<&Value>, Option<&Value>) -> bool,
) -> Result<Value, E>
where
    E: From<ConfigError>,
{
    let lock_path = fsx::parent_of(path).join(format!(
        ".{}.lock",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let _lock =
        fsx::LockGuard::acquire(&lock_path, fsx::LockMode::Exclusive).map_err(ConfigError::from)?;
    // Bounded, a regular file, and structurally valid before anything else.
    read_existing(path)?;
    let bytes = fs::read(path).map_err(|e| ConfigError::from(FsError::new("read", path, e)))?;
    lapis_protocol::config::Config::parse(&bytes, path).map_err(ConfigError::from)?;
    // Edited as a document, so members `change` does not touch keep their
    // form and order.
    let mut value: Value = serde_json::from_slice(&bytes).map_err(|e| ConfigError::Malformed {
        path: path.to_path_buf(),
        reason: format!("not valid JSON (line {}, column {})", e.line(), e.column()),
    })?;
    let tokens = value.get("tokens").cloned();
    change(&mut value)?;
    if !tokens_ok(tokens.as_ref(), value.get("tokens")) {
        return Err(ConfigError::Malformed {
            path: path.to_path_buf(),
            reason: "an edit tried to rewrite `tokens`".into(),
        }
        .into());
    }
    let mut bytes = serde_json::to_vec_pretty(&value).expect("config document serialises");
    bytes.push(b'\n');
    lapis_protocol::config::Config::parse(&bytes, path).map_err(ConfigError::from)?;
    fsx::write_atomic(path, &bytes, 0o600).map_err(ConfigError::from)?;
    Ok(value)
}

/// Removes complete-but-unnamed config files an interrupted install left
/// (they hold a never-used token). Callers hold the releases lock, which every
/// writer of the config takes, so none of them is in progress.
fn remove_stale_temps(config: &Path) -> Result<(), FsError> {
    let Some(name) = config.file_name() else {
        return Ok(());
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let dir = fsx::parent_of(config);
    let Ok(rd) = fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in rd.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let path = entry.path();
            fs::remove_file(&path).map_err(|e| FsError::new("remove", &path, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use crate::paths::test_paths as paths;

    #[test]
    fn creates_once_then_reuses_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        let (outcome, summary) = bootstrap(&p, &|| {}).unwrap();
        assert_eq!(outcome, ConfigOutcome::Created);
        let (config, _) = read(&p.config).unwrap().unwrap();
        assert_eq!(config.tokens.len(), 1);
        assert_eq!(
            summary.controller_home.as_deref(),
            Some(p.controller_home.as_path())
        );
        let first = fs::read(&p.config).unwrap();
        let mode = fs::metadata(&p.config).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = fs::metadata(p.config.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        let (outcome, _) = bootstrap(&p, &|| {}).unwrap();
        assert_eq!(outcome, ConfigOutcome::Reused);
        assert_eq!(fs::read(&p.config).unwrap(), first);
        let (config, _) = read_existing(&p.config).unwrap();
        let token = first_token(&config).unwrap();
        assert!(token.secret.starts_with(TOKEN_PREFIX));
        assert_eq!(token.secret.len(), TOKEN_PREFIX.len() + 64);
        assert!(!format!("{token:?}").contains(&token.secret));
    }

    #[test]
    fn stale_temporary_configs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        fs::create_dir_all(p.config.parent().unwrap()).unwrap();
        let stale = p.config.parent().unwrap().join(".config.json.tmp-0123");
        fs::write(&stale, b"{}").unwrap();
        bootstrap(&p, &|| {}).unwrap();
        assert!(!stale.exists());
        assert_eq!(fs::read_dir(p.config.parent().unwrap()).unwrap().count(), 1);
    }

    fn json_with_secret() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(Value::from("lapis_SECRETSECRET")),
            "[a-z]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("schema".to_owned()),
                        Just("tokens".to_owned()),
                        Just("secret".to_owned()),
                        Just("controllerHome".to_owned()),
                        "[a-z]{1,4}"
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever shape the config has, a refusal never quotes a value.
        #[test]
        fn shape_errors_never_quote_values(value in json_with_secret()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("config.json");
            fs::write(&path, serde_json::to_vec(&value).unwrap()).unwrap();
            if let Err(e) = read(&path) {
                proptest::prop_assert!(!e.to_string().contains("SECRET"), "{}", e);
            }
        }
    }

    #[test]
    fn edit_keeps_tokens_and_writes_only_valid_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let secret = format!("{TOKEN_PREFIX}{}", "ab".repeat(32));
        let doc = json!({"schema": 1, "instance": "default", "controllerHome": "/tmp/h",
            "tokens": [{"name": "owner", "principal": "owner", "secret": secret}]});
        std::fs::write(&path, doc.to_string()).unwrap();
        let before = std::fs::read(&path).unwrap();
        let tokens = edit(&path, |v: &mut Value| {
            v["tokens"][0]["secret"] = json!(format!("{TOKEN_PREFIX}{}", "cd".repeat(32)));
            Ok::<(), ConfigError>(())
        });
        assert!(matches!(tokens, Err(ConfigError::Malformed { .. })));
        let invalid = edit(&path, |v: &mut Value| {
            v["providers"] = json!({"x": {"command": "rel/path"}});
            Ok::<(), ConfigError>(())
        });
        assert!(matches!(invalid, Err(ConfigError::Invalid(_))));
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
        edit(&path, |v: &mut Value| {
            v["providers"] = json!({"x": {"command": "agent"}});
            Ok::<(), ConfigError>(())
        })
        .unwrap();
        let after: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(after["tokens"], doc["tokens"]);
        assert_eq!(after["providers"]["x"]["command"], "agent");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn malformed_configs_are_refused_without_quoting_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        fs::create_dir_all(p.config.parent().unwrap()).unwrap();
        let cases: &[(&str, &str)] = &[
            ("{\"tokens\": [lapis_secretvalue", "not valid JSON"),
            ("[]", "a member is missing, unknown or of the wrong type"),
            ("{\"schema\":2,\"tokens\":[]}", "a member is missing"),
            ("{\"schema\":1,\"tokens\":[]}", "a member is missing"),
            (
                "{\"schema\":1,\"tokens\":\"lapis_secretvalue\"}",
                "a member is missing, unknown or of the wrong type",
            ),
            (
                "{\"schema\":1,\"tokens\":[{\"secret\":7}]}",
                "a member is missing, unknown or of the wrong type",
            ),
        ];
        for (text, want) in cases {
            fs::write(&p.config, text).unwrap();
            let err = bootstrap(&p, &|| {}).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
            assert!(!err.contains("secretvalue"), "{err}");
            assert_eq!(fs::read_to_string(&p.config).unwrap(), *text);
        }
        // Complete documents reach the structural rules, which name the field.
        let structural: Vec<(String, &str)> = vec![
            (complete("\"schema\":2"), "field `schema` must be 1"),
            (complete("\"tokens\":[]"), "field `tokens` must hold"),
            (
                complete(
                    "\"tokens\":[{\"name\":\"owner\",\"principal\":\"owner\",\"secret\":\"lapis_secretvalue\"}]",
                ),
                "field `tokens[0].secret`",
            ),
        ];
        for (text, want) in &structural {
            fs::write(&p.config, text).unwrap();
            let err = bootstrap(&p, &|| {}).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
            assert!(!err.contains("secretvalue"), "{err}");
            assert_eq!(fs::read_to_string(&p.config).unwrap(), *text);
        }
    }

    /// A valid document with `member` (`"key":value`) replacing its own.
    fn complete(member: &str) -> String {
        let mut doc = json!({
            "schema": 1,
            "instance": "default",
            "controllerHome": "/tmp/h",
            "tokens": [{"name": "owner", "principal": "owner", "secret": format!("lapis_{}", "0".repeat(64))}],
        });
        let over: Value = serde_json::from_str(&format!("{{{member}}}")).unwrap();
        for (k, v) in over.as_object().unwrap() {
            doc[k] = v.clone();
        }
        doc.to_string()
    }

    #[test]
    fn a_missing_workspace_directory_does_not_fail_the_installer() {
        let dir = tempfile::tempdir().unwrap();
        let p = paths(dir.path());
        fs::create_dir_all(p.config.parent().unwrap()).unwrap();
        let text = complete(r#""workspaces":{"a":{"path":"/nonexistent/lapis-h1b"}}"#);
        fs::write(&p.config, &text).unwrap();
        let (outcome, _) = bootstrap(&p, &|| {}).unwrap();
        assert_eq!(outcome, ConfigOutcome::Reused);
        assert_eq!(fs::read_to_string(&p.config).unwrap(), text);
    }
}
