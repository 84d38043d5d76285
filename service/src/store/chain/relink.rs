//! Linking existing rows again from genesis: the schema 4 migration
//! (`backfill`), and tests that rewrite history (`relink`).

use rusqlite::Connection;

use super::{GENESIS, Hash, Link, Version, bytes, link_hash};
use crate::domain::StoreResult;

/// Migration step: chain every existing row once, in `seq` order, inside
/// the migration's transaction (schema 4: every row version 1).
pub(in crate::store) fn backfill(conn: &Connection) -> StoreResult<()> {
    relink(conn, i64::MAX)
}

/// Links every row again from [`GENESIS`], in `seq` order, rows from
/// `v2_from` on with [`Version::V2`] (`i64::MAX`: none, and `event_hash`
/// is not read, so it works before schema 17). Only the schema 4
/// migration runs it outside tests.
pub(in crate::store) fn relink(conn: &Connection, v2_from: i64) -> StoreResult<()> {
    let event_hash = if v2_from == i64::MAX {
        "NULL"
    } else {
        "event_hash"
    };
    let mut hashes: Vec<(i64, Hash)> = Vec::new();
    {
        let mut stmt = conn.prepare(&format!(
            "SELECT seq, thread_id, thread_seq, turn_id, kind, at, has_payload, payload, \
             {event_hash} FROM events ORDER BY seq"
        ))?;
        let mut rows = stmt.query([])?;
        let mut prev = GENESIS;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let link = Link {
                seq,
                thread_id: bytes(r.get_ref(1)?).unwrap_or_default(),
                thread_seq: r.get(2)?,
                turn_id: bytes(r.get_ref(3)?),
                kind: bytes(r.get_ref(4)?).unwrap_or_default(),
                at: r.get(5)?,
                has_payload: r.get::<_, i64>(6)? != 0,
                stored_payload: bytes(r.get_ref(7)?),
                event_hash: bytes(r.get_ref(8)?),
                version: if seq >= v2_from {
                    Version::V2
                } else {
                    Version::V1
                },
            };
            prev = link_hash(&prev, &link);
            hashes.push((seq, prev));
        }
    }
    let mut update = conn.prepare("UPDATE events SET hash = ?2 WHERE seq = ?1")?;
    for (seq, hash) in &hashes {
        update.execute(rusqlite::params![seq, &hash[..]])?;
    }
    Ok(())
}
