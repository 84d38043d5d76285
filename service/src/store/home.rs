//! The controller home's safety at open: only a controller home is ever
//! tightened, written or swept.
//!
//! What must stay true:
//! - A directory that already holds anything but controller files, and
//!   neither `controller.db` nor the home marker, is refused
//!   (`not_controller_home`) before anything in it is created, chmodded or
//!   removed: `serve --workspace ~/project` must never touch a project.
//! - An accepted home gets the marker ([`MARKER_FILE`]) so later opens know
//!   it even before the database exists.
//! - The home is 0700 and the database files 0600 before SQLite opens them.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::domain::{StoreError, StoreResult};

use super::lock::LOCK_FILE;
use super::schema::DB_FILE;

/// The file that marks a directory as a controller home (named in the
/// protocol crate: the installer's purge requires it or the database).
use lapis_protocol::home::MARKER_FILE;

/// The marker's content (informational; its presence is what counts).
const MARKER_TEXT: &str = "lapis-ai-controller home: do not put other files here\n";

/// Mode of the controller home: only its owner may enter it.
const HOME_MODE: u32 = 0o700;
/// Mode of the database and its `-wal`/`-shm` companions.
const DB_MODE: u32 = 0o600;

/// Entries a controller home may hold without a database or marker yet
/// (a first open that stopped half-way).
fn is_controller_entry(name: &str) -> bool {
    const NAMES: [&str; 7] = [
        LOCK_FILE,
        lapis_protocol::home::SOCKET_FILE,
        lapis_protocol::home::PID_FILE,
        lapis_protocol::home::PID_TMP_FILE,
        lapis_protocol::home::LOG_FILE,
        crate::acp::AGENTS_DIR,
        MARKER_FILE,
    ];
    NAMES.contains(&name) || name.strip_prefix(DB_FILE).is_some()
}

/// Refuses `home` when it is a non-empty directory that is not a controller
/// home: no `controller.db`, no marker, and some entry a controller never
/// creates. A missing `home` is fine (it is created 0700).
pub(super) fn check_is_home(home: &Path) -> StoreResult<()> {
    let entries = match std::fs::read_dir(home) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(StoreError::io(format!("cannot read {}", home.display()), e));
        }
    };
    let mut foreign = false;
    for entry in entries {
        let entry =
            entry.map_err(|e| StoreError::io(format!("cannot read {}", home.display()), e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == DB_FILE || name == MARKER_FILE {
            return Ok(());
        }
        foreign |= !is_controller_entry(&name);
    }
    if foreign {
        return Err(StoreError::NotControllerHome {
            path: home.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes the marker if it is missing (never follows a link in its place).
pub(super) fn mark(home: &Path) -> StoreResult<()> {
    use std::io::Write;
    let path = home.join(MARKER_FILE);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(DB_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(mut f) => f
            .write_all(MARKER_TEXT.as_bytes())
            .map_err(|e| StoreError::io(format!("cannot write {}", path.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::io(
            format!("cannot create {}", path.display()),
            e,
        )),
    }
}

/// Makes the controller home 0700 (tightening one an older version or a
/// user left open) and the database files 0600 before SQLite opens them.
/// The database file is created here, 0600, when missing: SQLite creates
/// `-wal` and `-shm` with the mode of the database file, so they follow.
/// Companions left by an older version are tightened too.
pub(super) fn private_files(home: &Path, db: &Path) -> StoreResult<()> {
    let chmod = |path: &Path, mode: u32| -> StoreResult<()> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot inspect {}", path.display()),
                    e,
                ));
            }
        };
        if meta.permissions().mode() & 0o7777 != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| StoreError::io(format!("cannot restrict {}", path.display()), e))?;
            tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "tightened permissions");
        }
        Ok(())
    };
    chmod(home, HOME_MODE)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(DB_MODE)
        .open(db)
        .map_err(|e| StoreError::io(format!("cannot create {}", db.display()), e))?;
    chmod(db, DB_MODE)?;
    for suffix in ["-wal", "-shm"] {
        let mut companion = db.as_os_str().to_owned();
        companion.push(suffix);
        chmod(Path::new(&companion), DB_MODE)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_directory_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join("agents")).unwrap();
        std::fs::write(project.join("agents/notes.md"), "mine").unwrap();
        std::fs::write(project.join("README.md"), "mine").unwrap();
        let err = check_is_home(&project).unwrap_err();
        assert_eq!(err.code(), "not_controller_home");
        assert!(err.to_string().contains("not a controller home"), "{err}");
    }

    #[test]
    fn empty_missing_marked_and_half_made_homes_are_accepted() {
        let dir = tempfile::tempdir().unwrap();
        check_is_home(&dir.path().join("missing")).unwrap();
        check_is_home(dir.path()).unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "1\n").unwrap();
        std::fs::create_dir(dir.path().join("agents")).unwrap();
        check_is_home(dir.path()).unwrap();
        std::fs::write(dir.path().join("other"), "").unwrap();
        assert!(check_is_home(dir.path()).is_err());
        mark(dir.path()).unwrap();
        mark(dir.path()).unwrap();
        check_is_home(dir.path()).unwrap();
    }

    #[test]
    fn an_older_home_with_a_database_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB_FILE), "").unwrap();
        std::fs::write(dir.path().join("stray"), "").unwrap();
        check_is_home(dir.path()).unwrap();
    }
}
