//! Workspace roots: the directories under which a session may register a
//! workspace at run time (`workspaces.add`, and so `ask` in a directory that
//! is not a workspace yet).
//!
//! Roots are granted by the configuration file only (`workspaceRoots`);
//! without the field the one root is the home directory of the user the
//! controller runs as, so `ask` in a project under home works out of the box
//! while `/etc` or another user's tree needs the owner to add a root.
//!
//! What must stay true:
//! - a directory is granted only when its canonical path is a root's
//!   canonical path or lies below it, compared by path components (`/home/a`
//!   never grants `/home/ab`), so a link or `..` cannot lead out of a root;
//! - roots are resolved (`~` expanded, links followed) when the
//!   configuration is loaded or reloaded, never per request, so the check at
//!   `workspaces.add` is a few component comparisons;
//! - nothing at run time adds a root, for any principal: the owner's own CLI
//!   widens the roots only by editing the file (and `config reload`);
//! - workspaces declared under `workspaces` are granted by being declared
//!   and need no root;
//! - errors name the field and position (`workspaceRoots[1]`), never a value.

use std::path::{Path, PathBuf};

use super::ConfigError;

/// The configuration field this module reads.
pub const WORKSPACE_ROOTS_FIELD: &str = "workspaceRoots";

/// Most roots one configuration may list.
pub const MAX_WORKSPACE_ROOTS: usize = 64;

fn invalid(field: String, problem: &str) -> ConfigError {
    ConfigError::Invalid {
        field,
        problem: problem.to_owned(),
    }
}

/// The structural rules (no machine needed): at most
/// [`MAX_WORKSPACE_ROOTS`] entries, each an absolute path, `~` or `~/…`.
pub(super) fn validate(written: Option<&[String]>) -> Result<(), ConfigError> {
    let Some(written) = written else {
        return Ok(());
    };
    if written.len() > MAX_WORKSPACE_ROOTS {
        return Err(invalid(
            WORKSPACE_ROOTS_FIELD.to_owned(),
            &format!("holds more than {MAX_WORKSPACE_ROOTS} roots"),
        ));
    }
    for (i, root) in written.iter().enumerate() {
        let ok = root == "~" || root.starts_with("~/") || Path::new(root).is_absolute();
        if !ok {
            return Err(invalid(
                format!("{WORKSPACE_ROOTS_FIELD}[{i}]"),
                "must be an absolute path, `~` or start with `~/`",
            ));
        }
    }
    Ok(())
}

/// The resolved roots: canonical directories.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceRoots {
    /// Canonical directories; empty grants nothing.
    dirs: Vec<PathBuf>,
}

impl WorkspaceRoots {
    /// Resolves the written roots against `home` (the controller's `HOME`):
    /// `~` expanded, every root canonicalized and required to be an existing
    /// directory. Without the field (`None`) the one root is `home`
    /// (nothing when `home` is unknown or does not exist); `Some(&[])`
    /// grants nothing, so only declared workspaces exist.
    pub fn resolve(
        written: Option<&[String]>,
        home: Option<&Path>,
    ) -> Result<WorkspaceRoots, ConfigError> {
        let Some(written) = written else {
            let dirs = home
                .and_then(|h| std::fs::canonicalize(h).ok())
                .filter(|h| h.is_dir())
                .into_iter()
                .collect();
            return Ok(WorkspaceRoots { dirs });
        };
        validate(Some(written))?;
        let mut dirs = Vec::with_capacity(written.len());
        for (i, root) in written.iter().enumerate() {
            let field = || format!("{WORKSPACE_ROOTS_FIELD}[{i}]");
            let path = match root.strip_prefix('~') {
                Some(rest) => {
                    let home = home
                        .ok_or_else(|| invalid(field(), "starts with `~` but HOME is not set"))?;
                    home.join(rest.trim_start_matches('/'))
                }
                None => PathBuf::from(root),
            };
            let canonical = std::fs::canonicalize(&path)
                .map_err(|_| invalid(field(), "is not an existing directory"))?;
            if !canonical.is_dir() {
                return Err(invalid(field(), "is not a directory"));
            }
            if !dirs.contains(&canonical) {
                dirs.push(canonical);
            }
        }
        Ok(WorkspaceRoots { dirs })
    }

    /// Roots from already canonical directories (tests, embedders).
    pub fn from_canonical(dirs: Vec<PathBuf>) -> WorkspaceRoots {
        WorkspaceRoots { dirs }
    }

    /// Whether `canonical` (a canonical path) is a root or lies below one.
    pub fn grants(&self, canonical: &Path) -> bool {
        self.dirs.iter().any(|root| canonical.starts_with(root))
    }

    /// The canonical roots, in the order written.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(written: &[&str], home: &Path) -> Result<WorkspaceRoots, ConfigError> {
        let written: Vec<String> = written.iter().map(|s| s.to_string()).collect();
        WorkspaceRoots::resolve(Some(&written), Some(home))
    }

    #[test]
    fn a_root_grants_itself_and_below_by_component_only() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("src/proj")).unwrap();
        std::fs::create_dir_all(home.join("srcx")).unwrap();
        let r = roots(&["~/src"], &home).unwrap();
        assert_eq!(r.dirs(), [home.join("src")]);
        assert!(r.grants(&home.join("src")));
        assert!(r.grants(&home.join("src/proj")));
        assert!(
            !r.grants(&home.join("srcx")),
            "a name prefix is not a child"
        );
        assert!(!r.grants(&home));
        assert!(!r.grants(Path::new("/")));
    }

    #[test]
    fn roots_are_resolved_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("real/proj")).unwrap();
        std::os::unix::fs::symlink(home.join("real"), home.join("alias")).unwrap();
        // A root written through a link grants the directory it names.
        let r = roots(&[home.join("alias").to_str().unwrap()], &home).unwrap();
        assert!(r.grants(&home.join("real/proj")));
        // A link inside a root pointing out of it is judged by its target
        // (callers pass canonical paths: the link's target is outside).
        std::fs::create_dir_all(home.join("outside")).unwrap();
        std::os::unix::fs::symlink(home.join("outside"), home.join("real/escape")).unwrap();
        let escape = home.join("real/escape").canonicalize().unwrap();
        assert!(!r.grants(&escape));
    }

    #[test]
    fn the_default_is_home_and_an_empty_list_grants_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let r = WorkspaceRoots::resolve(None, Some(&home)).unwrap();
        assert_eq!(r.dirs(), std::slice::from_ref(&home));
        assert!(r.grants(&home.join("any/project")));
        assert!(
            WorkspaceRoots::resolve(None, None)
                .unwrap()
                .dirs()
                .is_empty()
        );
        let none = WorkspaceRoots::resolve(Some(&[]), Some(&home)).unwrap();
        assert!(!none.grants(&home));
    }

    #[test]
    fn bad_roots_are_refused_by_position_without_their_value() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::write(home.join("file"), "").unwrap();
        let cases: [(&[&str], &str); 4] = [
            (&["relative/SECRETISH"], "workspaceRoots[0]"),
            (&["/", "~/missing-SECRETISH"], "workspaceRoots[1]"),
            (&["~/file"], "workspaceRoots[0]"),
            (&["~user/SECRETISH"], "workspaceRoots[0]"),
        ];
        for (written, field) in cases {
            let e = roots(written, &home).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
            assert!(!e.contains("SECRETISH"), "{e}");
        }
        let many: Vec<String> = (0..=MAX_WORKSPACE_ROOTS).map(|_| "/".to_owned()).collect();
        assert!(validate(Some(&many)).is_err());
    }
}
