//! The journal's anchor: the chain head and event count kept outside the
//! database, in `controller.db-anchor` beside it.
//!
//! The hash chain (`super::chain`) proves each event follows the one
//! before it, but not that the chain is whole at its end: deleting the
//! last rows, rewriting a row and re-hashing every row after it, or losing
//! the WAL's last frames all leave a consistent, shorter (or different)
//! chain. The anchor names `(events, head)` of a committed prefix; at open
//! (and in `journal verify`) the journal must hold at least `events`
//! events and the event at `seq = events` must have the hash `head`, or
//! the open fails with `store_anchor_mismatch`.
//!
//! # When it is written
//! By the writer at its *anchor checkpoints* (the file written by its
//! helper thread, `super::writer::checkpoint`): after a batch commits, at
//! most once per [`ANCHOR_INTERVAL`] while the journal grows, once the
//! writer goes idle, and at a clean stop; and by the migration to schema
//! version 8 before that migration commits (so an upgraded database is
//! never without one). A database at version 8 without an anchor is
//! refused (`store_anchor_missing`); `journal reanchor` (serve stopped)
//! accepts the journal as it is after an intended restore.
//!
//! # What must stay true
//! - The anchor is never ahead of what is durable: it is read back from
//!   the database outside any transaction, after the commit that made it
//!   durable (`synchronous=FULL`), never from the writer's memory.
//! - A write is atomic: a temp file beside it, fsynced, renamed over it,
//!   then the directory fsynced. A kill at any point leaves the old anchor
//!   or the new one, each naming a durable prefix, so a healthy database
//!   always reopens (a stale temp file is overwritten by the next write).
//! - It proves nothing against someone who can write both the database
//!   and this file (docs/security.md says so).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::domain::{StoreError, StoreResult};

use super::chain::{GENESIS, Hash};

/// Suffix of the anchor file after the database's file name.
pub(crate) const ANCHOR_SUFFIX: &str = "-anchor";

/// Longest time the anchor lags a growing journal while the writer is busy.
pub(super) const ANCHOR_INTERVAL: Duration = Duration::from_millis(200);

/// The most an anchor file may hold (one is about 130 bytes).
const MAX_ANCHOR_BYTES: u64 = 4096;

/// The format tag inside the file.
const FORMAT: &str = "lapis-journal-anchor/1";

/// A committed prefix of the journal: its event count (the last `seq`)
/// and that event's chain hash ([`GENESIS`] when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    /// Events in the prefix (`seq` of its last event).
    pub(crate) events: u64,
    /// Chain hash of event `events`.
    pub(crate) head: Hash,
}

impl Anchor {
    /// The empty journal's anchor: checks nothing.
    pub(crate) const EMPTY: Anchor = Anchor {
        events: 0,
        head: GENESIS,
    };
}

/// The file's JSON form.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnchorFile {
    format: String,
    events: u64,
    head: String,
}

/// The anchor file of the database at `db`.
pub(crate) fn path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(ANCHOR_SUFFIX);
    PathBuf::from(p)
}

/// The anchor of the database at `db`: `Ok(None)` when there is none,
/// `store_anchor_missing` when it cannot be read as one.
///
/// The read is bounded: the file is opened without following a link and
/// without blocking (a FIFO in its place must not hang `serve` or `journal
/// verify`), must be a regular file, and at most [`MAX_ANCHOR_BYTES`] are
/// read (a link to `/dev/zero` is refused before it is read at all).
pub(crate) fn read(db: &Path) -> StoreResult<Option<Anchor>> {
    use std::io::Read;
    let path = path(db);
    let refused = |reason: &'static str| StoreError::AnchorMissing {
        path: path.clone(),
        reason,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refused("it is a symbolic link, not a regular file"));
        }
        Err(e) => return Err(StoreError::io(format!("cannot read {}", path.display()), e)),
    };
    let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
    if !regular {
        return Err(refused("it is not a regular file"));
    }
    let mut text = Vec::new();
    file.take(MAX_ANCHOR_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| StoreError::io(format!("cannot read {}", path.display()), e))?;
    if text.len() as u64 > MAX_ANCHOR_BYTES {
        return Err(refused("it is larger than a journal anchor can be"));
    }
    let unreadable = || refused("it is not a journal anchor");
    let file: AnchorFile = serde_json::from_slice(&text).map_err(|_| unreadable())?;
    let head = hex::decode(&file.head)
        .ok()
        .and_then(|h| Hash::try_from(h.as_slice()).ok())
        .filter(|_| file.format == FORMAT)
        .ok_or_else(unreadable)?;
    Ok(Some(Anchor {
        events: file.events,
        head,
    }))
}

/// The anchor a database at version 8 must have (see the module docs).
pub(crate) fn require(db: &Path) -> StoreResult<Anchor> {
    read(db)?.ok_or_else(|| StoreError::AnchorMissing {
        path: path(db),
        reason: "the file is missing",
    })
}

/// Writes `anchor` for the database at `db`, atomically and durably.
pub(crate) fn write(db: &Path, anchor: &Anchor) -> StoreResult<()> {
    let target = path(db);
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |what: &str, e| StoreError::io(format!("cannot {what} {}", target.display()), e);
    let json = serde_json::to_vec(&AnchorFile {
        format: FORMAT.to_owned(),
        events: anchor.events,
        head: hex::encode(anchor.head),
    })
    .map_err(|e| StoreError::io("cannot encode the journal anchor", e.into()))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .map_err(|e| io("write", e))?;
    f.write_all(&json).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("sync", e))?;
    drop(f);
    std::fs::rename(&tmp, &target).map_err(|e| io("replace", e))?;
    if let Some(dir) = target.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync the directory of", e))?;
    }
    Ok(())
}

/// The committed head of the journal, read from the database. Must be
/// called outside a transaction (it then sees exactly what is durable).
pub(crate) fn committed(conn: &Connection) -> StoreResult<Anchor> {
    debug_assert!(conn.is_autocommit());
    last_event(conn)
}

/// The last event's `seq` and stored hash, as the connection sees them.
fn last_event(conn: &Connection) -> StoreResult<Anchor> {
    let last: Option<(i64, Vec<u8>)> = conn
        .prepare_cached("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match last {
        None => Anchor {
            events: 0,
            head: GENESIS,
        },
        Some((seq, hash)) => Anchor {
            events: seq.max(0) as u64,
            head: Hash::try_from(hash.as_slice()).unwrap_or(GENESIS),
        },
    })
}

/// Checks a verified chain of `events` events against `anchor`, given the
/// stored hash of event `anchor.events` (`None` if the chain does not
/// reach it).
pub(crate) fn check(
    db: &Path,
    anchor: &Anchor,
    events: u64,
    at_anchor: Option<Hash>,
) -> StoreResult<()> {
    if anchor.events == 0 {
        return Ok(());
    }
    let mismatch = |reason: &'static str| StoreError::AnchorMismatch {
        path: path(db),
        anchored: anchor.events,
        found: events,
        reason,
    };
    if events < anchor.events {
        return Err(mismatch("events were removed from its end"));
    }
    if at_anchor != Some(anchor.head) {
        return Err(mismatch("the anchored event was rewritten"));
    }
    Ok(())
}

/// Migration step to version 8: anchor the journal as it is, before the
/// migration commits (see the module docs). An anchor already there (an
/// upgrade that stopped before its commit, or a database deleted or
/// emptied beside its anchor) must name a prefix of this journal, or the
/// upgrade fails closed. A connection without a file has nothing to anchor
/// beside.
pub(super) fn migrate(conn: &Connection) -> StoreResult<()> {
    let Some(db) = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from) else {
        return Ok(());
    };
    // Inside the migration's transaction: the events are unchanged by it,
    // so what it reads is the durable prefix.
    let head = last_event(conn)?;
    if let Some(old) = read(&db)? {
        let at_old: Option<Vec<u8>> = conn
            .query_row(
                "SELECT hash FROM events WHERE seq = ?1",
                [i64::try_from(old.events).unwrap_or(i64::MAX)],
                |r| r.get(0),
            )
            .optional()?;
        let at_old = at_old.and_then(|h| Hash::try_from(h.as_slice()).ok());
        check(&db, &old, head.events, at_old)?;
    }
    write(&db, &head)
}
