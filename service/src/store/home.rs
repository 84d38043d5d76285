//! The controller home's safety at open: only a controller home is ever
//! tightened, written or swept.
//!
//! What must stay true:
//! - A directory is a controller home by its own marker ([`MARKER_FILE`],
//!   or `controller.db` for a home from before the marker), as a regular
//!   file. An unmarked directory is accepted only when it holds nothing but
//!   the files the CLI writes before the first open (the lock, the socket,
//!   `serve.pid`, `serve.log`, none of them a directory); anything else —
//!   an `agents/` directory included, which could hold anyone's files — is
//!   refused (`not_controller_home`) before anything in it is created,
//!   chmodded, swept or removed: `serve --home ~/project` must never touch
//!   a project.
//! - An accepted home gets the marker so later opens know it even before
//!   the database exists.
//! - The home is 0700 and the database files 0600 before SQLite opens them;
//!   the database files are opened without following a link (a planted
//!   `controller.db`, `-wal` or `-shm` link is refused, and its target's
//!   mode left as it was).

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::domain::{StoreError, StoreResult};

use super::lock::LOCK_FILE;

/// The file that marks a directory as a controller home (named in the
/// protocol crate: the installer's purge requires it or the database).
use lapis_protocol::home::MARKER_FILE;

/// The marker's content (informational; its presence is what counts).
const MARKER_TEXT: &str = "lapis-ai-controller home: do not put other files here\n";

/// Mode of the controller home: only its owner may enter it.
const HOME_MODE: u32 = 0o700;
/// Mode of the database and its `-wal`/`-shm` companions.
const DB_MODE: u32 = 0o600;

/// Entries an unmarked directory may hold and still become a controller
/// home: what the CLI writes there before the store's first open marks it
/// (a background `serve`'s log and pid file, a first open that stopped
/// after taking the lock). Never a directory.
fn is_provisional_entry(name: &str) -> bool {
    const NAMES: [&str; 5] = [
        LOCK_FILE,
        lapis_protocol::home::SOCKET_FILE,
        lapis_protocol::home::PID_FILE,
        lapis_protocol::home::PID_TMP_FILE,
        lapis_protocol::home::LOG_FILE,
    ];
    NAMES.contains(&name)
}

/// Refuses `home` when it is a non-empty directory that is not a controller
/// home: not marked ([`lapis_protocol::home::is_marked_home`]) and holding
/// something other than a provisional file (see the module docs). A
/// missing `home` is fine (it is created 0700).
pub(super) fn check_is_home(home: &Path) -> StoreResult<()> {
    if lapis_protocol::home::is_marked_home(home) {
        return Ok(());
    }
    let entries = match std::fs::read_dir(home) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(StoreError::io(format!("cannot read {}", home.display()), e));
        }
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| StoreError::io(format!("cannot read {}", home.display()), e))?;
        let name = entry.file_name();
        let provisional = is_provisional_entry(&name.to_string_lossy())
            && entry.file_type().is_ok_and(|t| !t.is_dir());
        if !provisional {
            return Err(StoreError::NotControllerHome {
                path: home.to_path_buf(),
            });
        }
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

/// Opens one database file of the home without following a link (and
/// without blocking on a FIFO), creating it 0600 when `create`; `None` when
/// it is missing and not to be created. A link, or anything but a regular
/// file, is refused with an error that says so.
fn open_db_file(path: &Path, create: bool) -> StoreResult<Option<std::fs::File>> {
    let refused = |what: &str| {
        StoreError::io(
            format!("refusing to open {}", path.display()),
            std::io::Error::other(format!(
                "it is {what}; the database files must be regular files of the controller home \
                 (move it away and start again)"
            )),
        )
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(DB_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("a symbolic link"));
        }
        Err(e) => return Err(StoreError::io(format!("cannot open {}", path.display()), e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io(format!("cannot inspect {}", path.display()), e))?;
    if !meta.file_type().is_file() {
        return Err(refused("not a regular file"));
    }
    Ok(Some(file))
}

/// Makes the controller home 0700 (tightening one an older version or a
/// user left open) and the database files 0600 before SQLite opens them,
/// each through its own descriptor opened without following a link (see
/// [`open_db_file`]): a planted link is refused, never chmodded through.
/// The database file is created here, 0600, when missing: SQLite creates
/// `-wal` and `-shm` with the mode of the database file, so they follow.
/// Companions left by an older version are tightened too.
pub(super) fn private_files(home: &Path, db: &Path) -> StoreResult<()> {
    let tighten = |path: &Path,
                   meta: std::fs::Metadata,
                   set: &dyn Fn(u32) -> std::io::Result<()>,
                   mode: u32| {
        if meta.permissions().mode() & 0o7777 != mode {
            set(mode)
                .map_err(|e| StoreError::io(format!("cannot restrict {}", path.display()), e))?;
            tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "tightened permissions");
        }
        Ok::<(), StoreError>(())
    };
    match std::fs::symlink_metadata(home) {
        Ok(meta) => tighten(
            home,
            meta,
            &|m| std::fs::set_permissions(home, std::fs::Permissions::from_mode(m)),
            HOME_MODE,
        )?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(StoreError::io(
                format!("cannot inspect {}", home.display()),
                e,
            ));
        }
    }
    let mut companions = vec![(db.to_path_buf(), true)];
    for suffix in ["-wal", "-shm"] {
        let mut companion = db.as_os_str().to_owned();
        companion.push(suffix);
        companions.push((companion.into(), false));
    }
    for (path, create) in companions {
        let Some(file) = open_db_file(&path, create)? else {
            continue;
        };
        let meta = file
            .metadata()
            .map_err(|e| StoreError::io(format!("cannot inspect {}", path.display()), e))?;
        tighten(
            &path,
            meta,
            &|m| file.set_permissions(std::fs::Permissions::from_mode(m)),
            DB_MODE,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::DB_FILE;

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
        std::fs::write(dir.path().join(lapis_protocol::home::LOG_FILE), "").unwrap();
        check_is_home(dir.path()).unwrap();
        std::fs::write(dir.path().join("other"), "").unwrap();
        assert!(check_is_home(dir.path()).is_err());
        mark(dir.path()).unwrap();
        mark(dir.path()).unwrap();
        check_is_home(dir.path()).unwrap();
    }

    /// `agents/` is the controller's name, but a directory holding only
    /// `agents/` (with anyone's files, or pid-like records, in it) is not a
    /// home until it carries the marker; nor is a directory named like a
    /// provisional file.
    #[test]
    fn a_directory_holding_only_agents_is_not_a_controller_home() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir(&agents).unwrap();
        std::fs::write(agents.join("4242"), "12345").unwrap();
        let err = check_is_home(dir.path()).unwrap_err();
        assert_eq!(err.code(), "not_controller_home");
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join(LOCK_FILE)).unwrap();
        assert!(check_is_home(other.path()).is_err());
        // A link named like the marker does not mark it either.
        std::os::unix::fs::symlink(agents.join("4242"), dir.path().join(MARKER_FILE)).unwrap();
        assert!(check_is_home(dir.path()).is_err());
        std::fs::remove_file(dir.path().join(MARKER_FILE)).unwrap();
        mark(dir.path()).unwrap();
        check_is_home(dir.path()).unwrap();
    }

    /// A planted `controller.db`, `-wal` or `-shm` link is refused with an
    /// error naming it, and the file it points at keeps its mode.
    #[test]
    fn a_planted_database_link_is_refused_and_its_target_keeps_its_mode() {
        for name in ["controller.db", "controller.db-wal", "controller.db-shm"] {
            let dir = tempfile::tempdir().unwrap();
            let home = dir.path().join("home");
            std::fs::create_dir(&home).unwrap();
            let target = dir.path().join("victim");
            std::fs::write(&target, "someone's file").unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::os::unix::fs::symlink(&target, home.join(name)).unwrap();
            let err = private_files(&home, &home.join(DB_FILE)).unwrap_err();
            let text = format!(
                "{err}: {}",
                std::error::Error::source(&err)
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            );
            assert!(
                text.contains(name) && text.contains("symbolic link"),
                "{text}"
            );
            let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o644, "{name}: the target's mode is untouched");
        }
    }

    #[test]
    fn the_database_files_are_made_private() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(DB_FILE);
        std::fs::write(dir.path().join("controller.db-wal"), "").unwrap();
        std::fs::set_permissions(
            dir.path().join("controller.db-wal"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        private_files(dir.path(), &db).unwrap();
        for name in [DB_FILE, "controller.db-wal"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, DB_MODE, "{name}");
        }
    }

    #[test]
    fn an_older_home_with_a_database_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB_FILE), "").unwrap();
        std::fs::write(dir.path().join("stray"), "").unwrap();
        check_is_home(dir.path()).unwrap();
    }
}
