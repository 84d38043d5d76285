//! `threads.list`'s keyset pages (`read::threads`): every thread once and
//! none missed across pages while threads are created between them, in
//! the list's order; the page query walks the `threads_listed` index from
//! the cursor (EXPLAIN QUERY PLAN: no table scan, no sort, no OFFSET).

use std::collections::BTreeSet;

use rusqlite::Connection;

use super::*;
use crate::domain::*;
use crate::store::read::{ThreadFilter, ThreadKey, threads_sql};
use crate::store::*;

fn owner_filter(after: Option<ThreadKey>) -> ThreadFilter {
    ThreadFilter {
        principal: Some(owner().principal.clone()),
        limit: 4,
        after,
        ..Default::default()
    }
}

#[tokio::test]
async fn pages_list_each_thread_once_none_missed_across_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    workspace(&s, dir.path(), "ws1").await;
    let mut made = BTreeSet::new();
    for _ in 0..25 {
        made.insert(thread(&s, "ws1", Retention::Full).await.id);
    }
    let (mut seen, mut keys, mut after, mut pages) = (BTreeSet::new(), Vec::new(), None, 0);
    loop {
        let (page, next) = s.list_threads_page(owner_filter(after)).await.unwrap();
        pages += 1;
        assert!(page.len() <= 4);
        for t in &page {
            assert!(seen.insert(t.id.clone()), "{} twice", t.id);
            keys.push((std::cmp::Reverse(t.created_at), t.id.clone()));
        }
        // A new thread between pages is newer than every cursor.
        thread(&s, "ws1", Retention::Full).await;
        match next {
            Some(k) => {
                assert_eq!(k.id, page.last().unwrap().id);
                after = Some(k);
            }
            None => break,
        }
    }
    assert_eq!(pages, 7, "25 threads in pages of 4");
    assert_eq!(seen, made);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "newest first, then id");
    // The page query: on the index, from the cursor, in its order.
    s.close().await;
    let conn = Connection::open(home.join(DB_FILE)).unwrap();
    let k = ThreadKey {
        created_at: 1,
        id: "thr_x".into(),
    };
    for (f, start) in [
        (owner_filter(None), "(principal=?)"),
        (owner_filter(Some(k)), "(principal=? AND created_at<?)"),
    ] {
        let (sql, mut args) = threads_sql(&f);
        args.push(&5i64);
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let plan: Vec<String> = stmt
            .query_map(args.as_slice(), |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan = plan.join("; ");
        assert!(
            plan.contains(&format!("USING INDEX threads_listed {start}")),
            "{plan}"
        );
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        assert!(!sql.contains("OFFSET"));
    }
}
