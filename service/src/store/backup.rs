//! Backups of `controller.db`: online copies through SQLite's backup API
//! (`backup create`, and one before every schema migration), each beside a
//! manifest naming what it holds, and their restore (`restore`).
//!
//! # Layout
//! `<home>/backups/<name>.db` (0600) and `<name>.json`, its manifest: the
//! kind, the time, the schema version, the event count and chain head, the
//! size and the SHA-256 of the file. A `.db` without its manifest is a copy
//! that never finished; it is not listed and the next backup removes it.
//!
//! # What must stay true
//! - A backup is one consistent snapshot: the backup API copies every page
//!   in one step, inside one read transaction, so a `serve` writing
//!   meanwhile never makes it a mix (the copy sees the last commit).
//! - It is verified before it is listed: SQLite's integrity check, the
//!   controller's identity and version, the hash chain walked whole; its
//!   manifest is written (temp file, fsync, rename) only once the copy is
//!   durable under its final name, so a listed backup is a whole one.
//! - A restore checks the manifest's digest first: a backup edited in any
//!   byte is refused (`store_backup_invalid`) and nothing is touched.
//! - Nothing here writes to the live database; `restore` replaces it only
//!   with the instance lock held, through the durable intent of `restore`.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

use super::schema::{self, DB_FILE};

mod restore;

use restore::MigrationGuard;
pub(super) use restore::finish_pending_restore;
pub use restore::{Restored, restore_backup};

/// The directory of the backups, under the controller home.
pub const BACKUPS_DIR: &str = "backups";

/// The manifest's format tag.
const FORMAT: &str = "lapis-backup/1";

/// The most a manifest may hold (one is about 400 bytes).
const MAX_MANIFEST_BYTES: u64 = 16 * 1024;

/// Why a backup was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackupKind {
    /// `backup create`.
    Manual,
    /// Before a schema migration; removed at the next start that needs
    /// none.
    PreMigration,
    /// The database a restore replaced, so a restore can be undone.
    PreRestore,
}

impl BackupKind {
    fn label(self) -> &'static str {
        match self {
            BackupKind::Manual => "manual",
            BackupKind::PreMigration => "pre-migration",
            BackupKind::PreRestore => "pre-restore",
        }
    }
}

/// A backup's manifest (`<name>.json`), as `backup list --json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupInfo {
    /// Always `lapis-backup/1`.
    pub format: String,
    /// The backup's name (its files are `<name>.db` and `<name>.json`).
    pub name: String,
    /// Why it was taken.
    pub kind: BackupKind,
    /// When (ms since the epoch).
    pub created_ms: i64,
    /// The schema version of the copy.
    pub schema_version: i64,
    /// Events in its journal (the last `seq`).
    pub events: u64,
    /// The chain hash of its last event (hex; none before the chain,
    /// schema version 4).
    pub head: Option<String>,
    /// Size of `<name>.db` in bytes.
    pub bytes: u64,
    /// SHA-256 of `<name>.db` (hex).
    pub sha256: String,
}

/// Opens the store's write connection (`schema::open_writer_at`) and
/// migrates it, guarded: a backup first, restored if a step fails.
/// `(connection, whether it was migrated)`.
pub(super) fn open_writer(db: &Path) -> StoreResult<(Connection, bool)> {
    let (conn, version, fresh) = schema::open_writer_at(db)?;
    if fresh || version == schema::SCHEMA_VERSION {
        schema::migrate(&conn, db, version)?;
        return Ok((conn, false));
    }
    let guard = MigrationGuard::before(db, version)?;
    let migrated = schema::migrate(&conn, db, version).and_then(|()| {
        if version < super::compact::INCREMENTAL_VACUUM_VERSION {
            super::compact::vacuum_once(&conn)?;
        }
        Ok(())
    });
    match migrated {
        Ok(()) => Ok((conn, true)),
        Err(failed) => {
            drop(conn);
            Err(guard.undo(failed))
        }
    }
}

/// The backups directory beside the database `db`.
pub(super) fn dir(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join(BACKUPS_DIR)
}

fn io(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::io(format!("cannot {what} {}", path.display()), e)
}

pub(super) fn invalid(name: &str, reason: impl Into<String>) -> StoreError {
    StoreError::BackupInvalid {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Takes a backup of the controller home's database now (see the module
/// docs). Works while `serve` runs: it only reads the database.
pub fn create_backup(home: &Path, kind: BackupKind) -> StoreResult<BackupInfo> {
    super::home::check_is_home(home)?;
    take(&home.join(DB_FILE), kind)
}

/// [`create_backup`] of the database file `db`, wherever it is (a
/// migration's backup is taken beside its database).
pub(super) fn take(db: &Path, kind: BackupKind) -> StoreResult<BackupInfo> {
    if !db.exists() {
        return Err(StoreError::not_found("database", db.display().to_string()));
    }
    let backups = dir(db);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&backups)
        .map_err(|e| io("create", &backups, e))?;
    remove_unfinished(&backups);
    let created_ms = lapis_protocol::time::now_ms();
    let name = free_name(&backups, kind, created_ms);
    let tmp = backups.join(format!(".{name}.db.tmp"));
    let _ = std::fs::remove_file(&tmp);
    copy_online(db, &tmp)?;
    let checked = check_copy(&tmp, &name);
    let (schema_version, events, head) = match checked {
        Ok(facts) => facts,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let (bytes, sha256) = digest(&tmp)?;
    let file = backups.join(format!("{name}.db"));
    std::fs::rename(&tmp, &file).map_err(|e| io("rename", &tmp, e))?;
    let info = BackupInfo {
        format: FORMAT.to_owned(),
        name,
        kind,
        created_ms,
        schema_version,
        events,
        head,
        bytes,
        sha256,
    };
    write_manifest(&backups, &info)?;
    Ok(info)
}

/// The backups of the controller home `home`, oldest first.
pub fn list_backups(home: &Path) -> StoreResult<Vec<BackupInfo>> {
    super::home::check_is_home(home)?;
    list_in(&dir(&home.join(DB_FILE)))
}

/// The backups in the directory `backups`, oldest first.
fn list_in(backups: &Path) -> StoreResult<Vec<BackupInfo>> {
    let entries = match std::fs::read_dir(backups) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read", backups, e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io("read", backups, e))?;
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_suffix(".json")) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        found.push(read_manifest(backups, name)?);
    }
    found.sort_by(|a, b| (a.created_ms, &a.name).cmp(&(b.created_ms, &b.name)));
    Ok(found)
}

/// The manifest of backup `name`, checked against its name.
pub(super) fn read_manifest(backups: &Path, name: &str) -> StoreResult<BackupInfo> {
    if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
        return Err(StoreError::not_found("backup", name));
    }
    let path = backups.join(format!("{name}.json"));
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::not_found("backup", name));
        }
        Err(e) => return Err(io("read", &path, e)),
    };
    let mut text = Vec::new();
    f.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| io("read", &path, e))?;
    if text.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(invalid(name, "its manifest is too large"));
    }
    let info: BackupInfo = serde_json::from_slice(&text)
        .map_err(|e| invalid(name, format!("its manifest does not parse ({e})")))?;
    if info.format != FORMAT || info.name != name {
        return Err(invalid(name, "its manifest names another format or backup"));
    }
    Ok(info)
}

/// Verifies backup `name` in `backups` whole: its digest against its
/// manifest, then the copy itself (see [`check_copy`]).
pub(super) fn verify_backup(backups: &Path, name: &str) -> StoreResult<BackupInfo> {
    let info = read_manifest(backups, name)?;
    let file = backups.join(format!("{name}.db"));
    if !file.exists() {
        return Err(invalid(name, "its database file is missing"));
    }
    let (bytes, sha256) = digest(&file)?;
    if bytes != info.bytes || sha256 != info.sha256 {
        return Err(invalid(
            name,
            "its file does not match its manifest's digest (edited or damaged since it was taken)",
        ));
    }
    let (version, events, head) = check_copy(&file, name)?;
    if (version, events, &head) != (info.schema_version, info.events, &info.head) {
        return Err(invalid(
            name,
            "its journal is not the one its manifest names",
        ));
    }
    Ok(info)
}

/// The online copy: every page in one step of the backup API, into a
/// rollback-journal file (no WAL beside a backup), fsynced.
fn copy_online(db: &Path, to: &Path) -> StoreResult<()> {
    let src = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(StoreError::from_sqlite)?;
    src.busy_timeout(Duration::from_secs(5))?;
    let mut dst = Connection::open(to).map_err(StoreError::from_sqlite)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("restrict", to, e))?;
    {
        use rusqlite::backup::StepResult;
        let backup = rusqlite::backup::Backup::new(&src, &mut dst)?;
        // -1: every page in one step, so in one read transaction. A busy
        // source (a checkpoint under way) is tried again for a while.
        let mut tries = 0;
        loop {
            match backup.step(-1)? {
                StepResult::Done => break,
                StepResult::More => {}
                StepResult::Busy | StepResult::Locked if tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    return Err(StoreError::conflict(
                        "the database stayed busy during the backup",
                    ));
                }
            }
        }
    }
    dst.pragma_update_and_check(None, "journal_mode", "DELETE", |_| Ok(()))?;
    drop(dst);
    sync_file(to)
}

/// Checks a copy: integrity, the controller's identity, a version this
/// build knows, and its chain walked whole. `(version, events, head)`.
pub(super) fn check_copy(file: &Path, name: &str) -> StoreResult<(i64, u64, Option<String>)> {
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(StoreError::from_sqlite)?;
    let ok: String = conn
        .query_row("PRAGMA integrity_check(1)", [], |r| r.get(0))
        .map_err(|_| invalid(name, "SQLite cannot read it"))?;
    if ok != "ok" {
        return Err(invalid(name, "it fails SQLite's integrity check"));
    }
    let app_id: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if app_id != schema::APPLICATION_ID {
        return Err(invalid(name, "it is not a controller database"));
    }
    if version > schema::SCHEMA_VERSION {
        return Err(StoreError::SchemaUnsupported {
            found: version,
            supported: schema::SCHEMA_VERSION,
        });
    }
    if version < schema::CHAINED_VERSION {
        let events: i64 = conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .unwrap_or(0);
        return Ok((version, events.max(0) as u64, None));
    }
    let anchor = super::anchor::Anchor::EMPTY;
    let report = super::verify::verify(&conn, file, &anchor, version).map_err(|e| match e {
        StoreError::InvalidRow { row, .. } => {
            invalid(name, format!("its hash chain is broken at seq {row}"))
        }
        other => other,
    })?;
    Ok((version, report.events, Some(report.head)))
}

/// `(bytes, sha256 hex)` of a file.
pub(super) fn digest(file: &Path) -> StoreResult<(u64, String)> {
    let mut f = std::fs::File::open(file).map_err(|e| io("read", file, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| io("read", file, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok((bytes, hex::encode(hasher.finalize())))
}

/// A name no backup has: `<UTC time>-<kind>`, with `-2`, `-3`, … after a
/// second backup of the same kind in the same second.
fn free_name(backups: &Path, kind: BackupKind, created_ms: i64) -> String {
    let stamp: String = lapis_protocol::time::format_secs(created_ms.div_euclid(1000))
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let base = format!("{stamp}-{}", kind.label());
    let taken = |n: &str| {
        backups.join(format!("{n}.db")).exists() || backups.join(format!("{n}.json")).exists()
    };
    let mut name = base.clone();
    let mut n = 1;
    while taken(&name) {
        n += 1;
        name = format!("{base}-{n}");
    }
    name
}

/// Removes copies that never finished (a temp file, or a `.db` whose
/// manifest was never written).
fn remove_unfinished(backups: &Path) {
    let Ok(entries) = std::fs::read_dir(backups) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let unfinished = if file.starts_with('.') {
            file.ends_with(".tmp")
        } else {
            file.strip_suffix(".db")
                .is_some_and(|n| !backups.join(format!("{n}.json")).exists())
        };
        if unfinished {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Writes `info` as `<name>.json`: temp file, fsync, rename, directory
/// fsync.
fn write_manifest(backups: &Path, info: &BackupInfo) -> StoreResult<()> {
    let path = backups.join(format!("{}.json", info.name));
    let tmp = backups.join(format!(".{}.json.tmp", info.name));
    let text = serde_json::to_vec_pretty(info)
        .map_err(|e| io("encode", &path, std::io::Error::other(e)))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io("write", &tmp, e))?;
    f.write_all(&text).map_err(|e| io("write", &tmp, e))?;
    f.sync_all().map_err(|e| io("sync", &tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| io("rename", &tmp, e))?;
    sync_dir(backups)
}

pub(super) fn sync_file(path: &Path) -> StoreResult<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("sync", path, e))
}

pub(super) fn sync_dir(dir: &Path) -> StoreResult<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("sync the directory", dir, e))
}

/// Removes the pre-migration backups: the start they guarded was
/// followed by one that needed no migration.
pub(super) fn prune_pre_migration(db: &Path) {
    let backups = dir(db);
    let Ok(all) = list_in(&backups) else {
        return;
    };
    for info in all.iter().filter(|b| b.kind == BackupKind::PreMigration) {
        // The manifest first: a `.db` without one is unfinished and goes
        // with the next backup if this stops halfway.
        let _ = std::fs::remove_file(backups.join(format!("{}.json", info.name)));
        let _ = std::fs::remove_file(backups.join(format!("{}.db", info.name)));
        tracing::info!(backup = %info.name, "removed the pre-migration backup");
    }
}
