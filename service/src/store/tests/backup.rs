//! Backups (issue 44 item 4): online copies, their verification, restore
//! with the anchor handled, and a failed migration undone from its backup.

use rusqlite::Connection;

use super::*;
use crate::store::{BackupKind, DB_FILE, create_backup, list_backups, restore_backup};

fn ids(workspaces: &[Workspace]) -> Vec<&str> {
    workspaces.iter().map(|w| w.id.as_str()).collect()
}

fn version(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// A backup taken while the store writes restores exactly what it saw,
/// and the restored journal opens without `journal reanchor` although the
/// anchor had moved past it; the restore's own `pre-restore` backup undoes
/// it.
#[tokio::test]
async fn a_backup_taken_while_writing_restores_what_it_saw_and_opens_without_reanchor() {
    let Fixture { dir, store } = fixture().await;
    let home = dir.path().join("home");
    workspace(&store, dir.path(), "a").await;
    thread(&store, "a", crate::domain::Retention::Full).await;
    let taken = create_backup(&home, BackupKind::Manual).unwrap();
    assert_eq!(taken.kind, BackupKind::Manual);
    assert!(taken.events > 0 && taken.head.is_some());
    workspace(&store, dir.path(), "b").await;
    thread(&store, "b", crate::domain::Retention::Full).await;
    // While the store is open the database cannot be replaced.
    assert_eq!(
        restore_backup(&home, &taken.name).unwrap_err().code(),
        "instance_locked"
    );
    store.close().await;

    let done = restore_backup(&home, &taken.name).unwrap();
    assert_eq!(done.restored, taken);
    let previous = done.previous.expect("the replaced database is backed up");
    assert_eq!(previous.kind, BackupKind::PreRestore);
    assert!(previous.events > taken.events);
    let store = Store::open(options(&home)).unwrap();
    assert_eq!(ids(&store.list_workspaces().await.unwrap()), ["a"]);
    store.close().await;
    crate::store::verify_journal(&home.join(DB_FILE)).unwrap();

    // And back: the restore is undone from its own backup.
    restore_backup(&home, &previous.name).unwrap();
    let store = Store::open(options(&home)).unwrap();
    assert_eq!(ids(&store.list_workspaces().await.unwrap()), ["a", "b"]);
    store.close().await;
    let kinds: Vec<_> = list_backups(&home)
        .unwrap()
        .iter()
        .map(|b| b.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            BackupKind::Manual,
            BackupKind::PreRestore,
            BackupKind::PreRestore
        ]
    );
}

/// A backup edited in any byte, or whose manifest was edited, is refused
/// before anything is written: the database stays byte for byte.
#[tokio::test]
async fn an_edited_backup_is_refused_and_the_database_is_untouched() {
    let Fixture { dir, store } = fixture().await;
    let home = dir.path().join("home");
    workspace(&store, dir.path(), "a").await;
    let taken = create_backup(&home, BackupKind::Manual).unwrap();
    store.close().await;
    let db = home.join(DB_FILE);
    let before = std::fs::read(&db).unwrap();
    let file = home.join("backups").join(format!("{}.db", taken.name));
    let original = std::fs::read(&file).unwrap();

    let mut edited = original.clone();
    let at = edited.len() / 2;
    edited[at] ^= 0x01;
    std::fs::write(&file, &edited).unwrap();
    let err = restore_backup(&home, &taken.name).unwrap_err();
    assert_eq!(err.code(), "store_backup_invalid", "{err}");
    assert!(err.to_string().contains("digest"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before);

    // The manifest is no way around it: one naming the edited file's
    // digest still has to match the journal the copy holds.
    std::fs::write(&file, &original).unwrap();
    let manifest = home.join("backups").join(format!("{}.json", taken.name));
    let text = std::fs::read_to_string(&manifest).unwrap();
    let forged = text.replace(
        &format!("\"events\": {}", taken.events),
        &format!("\"events\": {}", taken.events + 1),
    );
    assert_ne!(forged, text);
    std::fs::write(&manifest, forged).unwrap();
    let err = restore_backup(&home, &taken.name).unwrap_err();
    assert_eq!(err.code(), "store_backup_invalid", "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before);
    assert_eq!(
        restore_backup(&home, "no-such-backup").unwrap_err().code(),
        "not_found"
    );
}

/// A migration that fails midway (after earlier steps committed) is undone
/// from the backup taken before it: the file is back at its old version
/// with its content. The next migration succeeds and keeps its backup
/// until the start after it, which needs none.
#[tokio::test]
async fn a_migration_that_fails_midway_is_undone_from_its_backup() {
    let Fixture { dir, store } = fixture().await;
    let home = dir.path().join("home");
    workspace(&store, dir.path(), "a").await;
    store.close().await;
    let db = home.join(DB_FILE);
    {
        let conn = Connection::open(&db).unwrap();
        crate::store::schema::rewind(&conn, 15);
    }
    let content = |db: &Path| {
        let conn = Connection::open(db).unwrap();
        let events: i64 = conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .unwrap();
        let ws: String = conn
            .query_row("SELECT group_concat(id) FROM workspaces", [], |r| r.get(0))
            .unwrap();
        (events, ws)
    };
    let rewound = content(&db);
    std::fs::write(home.join(".test-fail-migration"), "17").unwrap();
    let err = Store::open(options(&home)).unwrap_err();
    assert_eq!(err.code(), "store_migration_failed", "{err}");
    assert!(err.to_string().contains("restored from backup"), "{err}");
    assert_eq!(version(&db), 15, "the steps to 16 were undone");
    assert_eq!(content(&db), rewound);

    std::fs::remove_file(home.join(".test-fail-migration")).unwrap();
    let store = Store::open(options(&home)).unwrap();
    assert_eq!(ids(&store.list_workspaces().await.unwrap()), ["a"]);
    store.close().await;
    let pre = |home: &Path| {
        list_backups(home)
            .unwrap()
            .into_iter()
            .filter(|b| b.kind == BackupKind::PreMigration)
            .count()
    };
    assert!(pre(&home) >= 1, "kept until the next start");
    Store::open(options(&home)).unwrap().close().await;
    assert_eq!(
        pre(&home),
        0,
        "removed by the start that needed no migration"
    );
}
