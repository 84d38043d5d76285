//! Remembered sessions are bounded per token (issue 43 item 4): expired
//! rows purged and the oldest evicted in the issue's own transaction, at a
//! cost that does not grow with the table.

use std::collections::BTreeMap;

use super::*;
use lapis_protocol::Scope;

fn new_session(token: &str, app: &str, n: u64, expires_at: Option<i64>) -> NewAuthSession {
    NewAuthSession {
        credential: credential_key(token, app),
        principal: "owner".into(),
        application: app.into(),
        scopes: vec![Scope::ThreadsRead],
        bearer_sha256: format!("{n:064x}"),
        expires_at,
    }
}

/// Rows of `auth_sessions` whose credential is of `token`, counted on a
/// connection of the test's own.
fn rows_of(home: &Path, token: &str) -> i64 {
    let conn = rusqlite::Connection::open(home.join(DB_FILE)).unwrap();
    conn.query_row(
        "SELECT count(*) FROM auth_sessions WHERE credential LIKE ?1 || ':%'",
        [token],
        |r| r.get(0),
    )
    .unwrap()
}

const FAR: Option<i64> = Some(i64::MAX);

/// What one issue cost the writer.
fn cost(
    after: lapis_protocol::params::StoreCounts,
    before: lapis_protocol::params::StoreCounts,
) -> [u64; 3] {
    [
        after.commits - before.commits,
        after.write_statements - before.write_statements,
        after.write_rows - before.write_rows,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_admissions_with_fresh_applications_leave_the_token_bounded() {
    const KEEP: usize = 64;
    const OTHERS: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // Another token's 10,000 live rows first, written in one transaction
    // beside the store: they make the table large, and stay untouched.
    drop(Store::open(options(&home)).unwrap());
    {
        let mut conn = rusqlite::Connection::open(home.join(DB_FILE)).unwrap();
        let tx = conn.transaction().unwrap();
        for n in 0..OTHERS {
            tx.execute(
                "INSERT INTO auth_sessions (id, credential, principal, application, scopes, \
                 bearer_sha256, created_at, expires_at) \
                 VALUES (?1, ?2, 'owner', ?3, '[\"threads:read\"]', ?4, 1, ?5)",
                rusqlite::params![
                    format!("ses_{n:032x}"),
                    credential_key("other", &format!("o{n}")),
                    format!("o{n}"),
                    format!("{:064x}", u128::from(n) << 64),
                    i64::MAX
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let s = Store::open(options(&home)).unwrap();
    let mut costs = BTreeMap::new();
    for n in 0..10_000u64 {
        let before = s.counts();
        let issued = s
            .issue_session(new_session("cli", &format!("app-{n}"), n + 1, FAR), KEEP)
            .await
            .unwrap();
        if [100, 5_000, 9_999].contains(&n) {
            costs.insert(n, cost(s.counts(), before));
        }
        // Full from the `KEEP`th on: each issue evicts exactly the oldest.
        let evicted = usize::from(n >= KEEP as u64);
        assert_eq!(issued.removed.len(), evicted, "issue {n}");
    }
    assert_eq!(rows_of(&home, "cli"), KEEP as i64, "the token is bounded");
    assert_eq!(
        rows_of(&home, "other"),
        OTHERS as i64,
        "another token's rows stay"
    );
    // The newest `KEEP` are the ones kept.
    for n in [10_000 - KEEP as u64, 9_999] {
        let hash = format!("{:064x}", n + 1);
        assert!(
            s.find_session_by_bearer_hash(&hash)
                .await
                .unwrap()
                .is_some(),
            "{n}"
        );
    }
    let oldest = format!("{:064x}", 10_000 - KEEP as u64);
    assert!(
        s.find_session_by_bearer_hash(&oldest)
            .await
            .unwrap()
            .is_none()
    );
    // One commit and a fixed number of statements and returned rows per
    // admission, the same at the 100th as at the 10,000th (purge, evict
    // returning the one evicted id, insert, read back).
    assert_eq!(costs[&100], costs[&9_999], "{costs:?}");
    assert_eq!(costs[&5_000], costs[&9_999], "{costs:?}");
    assert_eq!(costs[&100][0], 1, "one commit: {costs:?}");
}

#[tokio::test]
async fn expired_sessions_go_first_then_revoked_then_the_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let s = Store::open(options(&home)).unwrap();
    let issue = |app: &str, n: u64, exp: Option<i64>, keep: usize| {
        let s = s.clone();
        let input = new_session("cli", app, n, exp);
        async move { s.issue_session(input, keep).await.unwrap() }
    };
    // Another token's expired row is not this token's to purge.
    let foreign = s
        .issue_session(new_session("other", "x", 99, Some(0)), 3)
        .await
        .unwrap()
        .session;
    let a = issue("a", 1, Some(0), 3).await.session; // expired at once
    // The next admission purges it.
    let b = issue("b", 2, FAR, 3).await;
    assert_eq!(b.removed, vec![a.id.clone()]);
    let b = b.session;
    let c = issue("c", 3, FAR, 3).await.session;
    s.revoke_session(&b.id).await.unwrap();
    let d = issue("d", 4, FAR, 3).await;
    assert!(d.removed.is_empty(), "{d:?}");
    // Full (b revoked, c, d): the revoked one goes before older live ones.
    let e = issue("e", 5, FAR, 3).await;
    assert_eq!(e.removed, vec![b.id.clone()]);
    // Then the oldest live one.
    let f = issue("f", 6, FAR, 3).await;
    assert_eq!(f.removed, vec![c.id.clone()]);
    assert_eq!(rows_of(&home, "cli"), 3);
    assert!(
        s.find_session_by_bearer_hash(&foreign.bearer_sha256)
            .await
            .unwrap()
            .is_some()
    );
    // A bound of one keeps the new session alone.
    let g = issue("g", 7, FAR, 1).await;
    assert_eq!(g.removed.len(), 3, "{g:?}");
    assert_eq!(rows_of(&home, "cli"), 1);
}

/// The guard behind "does not grow with the table": every statement an
/// admission runs on `auth_sessions` searches an index over the token's
/// own rows (or the one id), never scans the table.
#[tokio::test]
async fn admission_statements_search_the_token_range_never_scan() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    drop(Store::open(options(&home)).unwrap());
    let conn = rusqlite::Connection::open(home.join(DB_FILE)).unwrap();
    let by_credential = "SELECT id FROM auth_sessions WHERE credential = ?1 \
        AND revoked_at IS NULL ORDER BY created_at DESC, id LIMIT 1";
    let range = rusqlite::params!["cli:", "cli;", 1];
    for (sql, params) in [
        (super::super::sessions::PURGE_EXPIRED, range),
        (super::super::sessions::EVICT_OLDEST, range),
        (by_credential, rusqlite::params!["cli:app"]),
    ] {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let plan: Vec<String> = stmt
            .query_map(params, |r| r.get(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            plan.iter().any(|l| l.contains("auth_sessions")),
            "{sql}: {plan:?}"
        );
        for line in &plan {
            assert!(!line.starts_with("SCAN auth_sessions"), "{sql}: {plan:?}");
        }
    }
    assert_eq!(
        super::super::sessions::token_range("cli:app"),
        ("cli:".into(), "cli;".into())
    );
}
