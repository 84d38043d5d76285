//! Putting a backup back: `backup restore NAME` ([`restore_backup`]) and the
//! undo of a failed migration ([`MigrationGuard`]), both through one durable
//! intent, `controller.db-restore`.
//!
//! # Order (what must stay true)
//! With the instance lock held (so `serve` is stopped):
//! 1. the backup is verified whole (digest, integrity, chain); the current
//!    database is backed up (`pre-restore`), so a restore can be undone;
//! 2. the intent (the backup's name, digest and head) is written durably —
//!    before it, a kill leaves the old database as it was;
//! 3. [`apply`]: the backup is copied beside the database and fsynced; the
//!    old database's WAL is checkpointed into it and removed (its frames
//!    must never meet the new file); the copy is renamed over the
//!    database; the anchor is written for the copy's head; the intent is
//!    removed.
//!
//! Every step of 3 can be repeated, so a kill anywhere after 2 is finished
//! by the next `Store::open` or `restore` ([`finish_pending_restore`]):
//! the old database or the new one with its own anchor, never a mix, and
//! the restored journal opens without `journal reanchor`.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::domain::{StoreError, StoreResult};

use super::super::anchor::{self, Anchor};
use super::super::chain::Hash;
use super::super::lock::InstanceLock;
use super::super::schema::DB_FILE;
use super::{BackupInfo, BackupKind, dir, invalid, sync_dir, sync_file, take};

/// Suffix of the intent file after the database's file name.
const INTENT_SUFFIX: &str = "-restore";

/// The intent's format tag.
const FORMAT: &str = "lapis-restore/1";

/// What a restore in progress puts back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Intent {
    format: String,
    /// The backup.
    name: String,
    /// Its digest, checked again before every copy.
    sha256: String,
    /// Its journal's event count and head (none before the chain).
    events: u64,
    head: Option<String>,
    /// Where the database it replaces is moved, as it is, when it could
    /// not be backed up (a damaged one): a directory under `backups/`.
    set_aside: Option<String>,
    /// The anchor file is left as it is: a failed migration's undo puts
    /// back the very journal the anchor already names.
    #[serde(default)]
    keep_anchor: bool,
}

fn intent_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(INTENT_SUFFIX);
    PathBuf::from(p)
}

/// What `restore` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    /// The backup put back.
    pub restored: BackupInfo,
    /// The backup of the database it replaced (none when there was none).
    pub previous: Option<BackupInfo>,
    /// Where the database it replaced was moved instead, as it was, when
    /// it could not be backed up (it did not verify).
    pub set_aside: Option<PathBuf>,
}

/// Restores backup `name` over the controller home's database (see the
/// module docs). Refuses while `serve` runs (`instance_locked`); a backup
/// that does not verify is refused before anything is written.
pub fn restore_backup(home: &Path, name: &str) -> StoreResult<Restored> {
    super::super::home::check_is_home(home)?;
    let _lock = InstanceLock::acquire(home)?;
    finish_pending_restore(home)?;
    restore_locked(&home.join(DB_FILE), name, true)
}

/// [`restore_backup`] of the database file `db` with the lock held;
/// `keep_previous` backs the current database up first.
fn restore_locked(db: &Path, name: &str, keep_previous: bool) -> StoreResult<Restored> {
    let info = super::verify_backup(&dir(db), name)?;
    let (previous, set_aside) = match keep_previous && db.exists() {
        false => (None, None),
        true => match take(db, BackupKind::PreRestore) {
            Ok(b) => (Some(b), None),
            Err(e) => {
                // A damaged database is what a restore is for: it is kept
                // as it is, files and all, rather than refusing.
                tracing::warn!(code = e.code(), error = %e, "the database being replaced does not back up; setting it aside as it is");
                (None, Some(format!("{}.replaced", info.name)))
            }
        },
    };
    let intent = Intent {
        format: FORMAT.to_owned(),
        name: info.name.clone(),
        sha256: info.sha256.clone(),
        events: info.events,
        head: info.head.clone(),
        set_aside: set_aside.clone(),
        keep_anchor: !keep_previous,
    };
    pause("before-intent");
    write_intent(db, &intent)?;
    pause("after-intent");
    apply(db, &intent)?;
    Ok(Restored {
        restored: info,
        previous,
        set_aside: set_aside.map(|d| dir(db).join(d)),
    })
}

/// Finishes a restore a kill interrupted (the caller holds the instance
/// lock): called by `Store::open` before the database is opened.
pub(in crate::store) fn finish_pending_restore(home: &Path) -> StoreResult<()> {
    let db = home.join(DB_FILE);
    let path = intent_path(&db);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(format!("cannot read {}", path.display()), e)),
    };
    let intent: Intent = serde_json::from_slice(&text)
        .ok()
        .filter(|i: &Intent| i.format == FORMAT)
        .ok_or_else(|| {
            invalid(
                "(interrupted restore)",
                format!("its intent {} does not parse", path.display()),
            )
        })?;
    tracing::warn!(backup = %intent.name, "finishing an interrupted restore");
    apply(&db, &intent)
}

/// Step 3 of the module docs; repeatable.
fn apply(db: &Path, intent: &Intent) -> StoreResult<()> {
    let home = db.parent().unwrap_or(Path::new("."));
    let file = dir(db).join(format!("{}.db", intent.name));
    let copy = {
        let mut p = db.as_os_str().to_owned();
        p.push(".restore-tmp");
        PathBuf::from(p)
    };
    let (_, sha256) = super::digest(&file)?;
    if sha256 != intent.sha256 {
        return Err(invalid(&intent.name, "its file changed during the restore"));
    }
    std::fs::copy(&file, &copy)
        .map_err(|e| StoreError::io(format!("cannot copy {}", file.display()), e))?;
    sync_file(&copy)?;
    pause("after-copy");
    match &intent.set_aside {
        Some(aside) => set_aside(db, &dir(db).join(aside))?,
        None if db.exists() => drain_wal(db)?,
        None => {}
    }
    pause("after-drain");
    std::fs::rename(&copy, db)
        .map_err(|e| StoreError::io(format!("cannot replace {}", db.display()), e))?;
    sync_dir(home)?;
    pause("after-rename");
    match &intent.head {
        _ if intent.keep_anchor => {}
        Some(head) => {
            let head: Hash = hex::decode(head)
                .ok()
                .and_then(|h| Hash::try_from(h.as_slice()).ok())
                .ok_or_else(|| invalid(&intent.name, "its head is not a hash"))?;
            let events = intent.events;
            anchor::write(db, &Anchor { events, head })?;
        }
        // From before the chain: nothing was anchored then.
        None => remove(&anchor::path(db))?,
    }
    pause("after-anchor");
    remove(&intent_path(db))?;
    sync_dir(home)
}

/// Checkpoints the database's WAL into it and removes the WAL and its
/// index: a WAL left beside the file that replaces it would be applied to
/// it at the next open.
fn drain_wal(db: &Path) -> StoreResult<()> {
    let conn = Connection::open(db).map_err(StoreError::from_sqlite)?;
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    if busy != 0 {
        return Err(StoreError::conflict(
            "the database is in use by another process; close it and restore again",
        ));
    }
    drop(conn);
    for suffix in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        remove(Path::new(&p))?;
    }
    Ok(())
}

/// Moves the database and its WAL and index, as they are, into `to`
/// (created 0700); repeatable (what is already moved is not there).
fn set_aside(db: &Path, to: &Path) -> StoreResult<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)
        .map_err(|e| StoreError::io(format!("cannot create {}", to.display()), e))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut from = db.as_os_str().to_owned();
        from.push(suffix);
        let from = PathBuf::from(from);
        let Some(file) = from.file_name() else {
            continue;
        };
        match std::fs::rename(&from, to.join(file)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(format!("cannot move {}", from.display()), e)),
        }
    }
    sync_dir(to)
}

fn remove(path: &Path) -> StoreResult<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(
            format!("cannot remove {}", path.display()),
            e,
        )),
    }
}

fn write_intent(db: &Path, intent: &Intent) -> StoreResult<()> {
    let path = intent_path(db);
    let io = |e| StoreError::io(format!("cannot write {}", path.display()), e);
    let text = serde_json::to_vec(intent).map_err(|e| io(std::io::Error::other(e)))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(io)?;
    f.write_all(&text).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    sync_dir(db.parent().unwrap_or(Path::new(".")))
}

/// A schema migration guarded by a backup: taken before the first step
/// ([`MigrationGuard::before`]), restored when a step fails
/// ([`MigrationGuard::undo`]).
#[derive(Debug)]
pub(in crate::store) struct MigrationGuard {
    db: PathBuf,
    backup: BackupInfo,
}

impl MigrationGuard {
    /// The backup of the database at `db` (schema version `from`) before
    /// it is migrated. A backup that cannot be taken (disk full, …)
    /// refuses the migration: nothing was changed.
    pub(in crate::store) fn before(db: &Path, from: i64) -> StoreResult<MigrationGuard> {
        let backup =
            take(db, BackupKind::PreMigration).map_err(|e| StoreError::MigrationFailed {
                from,
                restored: None,
                cause: Box::new(e),
            })?;
        tracing::info!(backup = %backup.name, from, "backed up the database before migrating it");
        let db = db.to_owned();
        Ok(MigrationGuard { db, backup })
    }

    /// Puts the database back as it was before the migration (its
    /// connection is closed) and says so in the error.
    pub(in crate::store) fn undo(self, failed: StoreError) -> StoreError {
        let from = self.backup.schema_version;
        let restored = restore_locked(&self.db, &self.backup.name, false);
        if let Err(e) = &restored {
            tracing::error!(backup = %self.backup.name, code = e.code(), error = %e, "restoring the backup of a failed migration failed");
        }
        StoreError::MigrationFailed {
            from,
            restored: restored.ok().map(|_| self.backup.name.clone()),
            cause: Box::new(failed),
        }
    }
}

/// Test hook (`test-support` builds only): `LAPIS_BACKUP_FAULT_PAUSE=<step>`
/// stops a restore at `<step>` of the module docs' order, after saying
/// `lapis-fault-pause: restore <step>` on stderr, so a test can kill -9 it
/// exactly there.
fn pause(step: &str) {
    #[cfg(feature = "test-support")]
    if std::env::var("LAPIS_BACKUP_FAULT_PAUSE").is_ok_and(|w| w == step) {
        let _ = writeln!(std::io::stderr(), "lapis-fault-pause: restore {step}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    #[cfg(not(feature = "test-support"))]
    let _ = step;
}

/// Test hook: a home holding `.test-fail-migration` with a version number
/// fails the migration step to that version (after the steps before it
/// committed), so a test sees a migration fail midway.
#[cfg(any(test, feature = "test-support"))]
pub(in crate::store) fn injected_failure(db: &Path, to: i64) -> StoreResult<()> {
    let marker = db.parent().map(|h| h.join(".test-fail-migration"));
    let wanted = marker.and_then(|m| std::fs::read_to_string(m).ok());
    if wanted.is_some_and(|w| w.trim() == to.to_string()) {
        return Err(StoreError::invalid(format!(
            "injected failure of the migration to version {to}"
        )));
    }
    Ok(())
}

#[cfg(not(any(test, feature = "test-support")))]
pub(in crate::store) fn injected_failure(_: &Path, _: i64) -> StoreResult<()> {
    Ok(())
}
