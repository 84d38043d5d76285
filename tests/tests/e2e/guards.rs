//! The warm turn's guards: what a turn costs, counted, never timed
//! (issue 39). A warm echo turn in a plain directory costs at most two
//! durable commits, a fixed number of SQL statements and returned rows, a
//! bounded number of written pages (WAL frames),
//! the same at turn 1,000 of its thread as at turn 10 (nothing reads a
//! thread's history per turn), and starts no process: its agent is
//! already running, and a plain directory's evidence costs no git.
//!
//! The counts are the store's own (`Store::counts`: the write and read
//! connections' statements as SQLite's trace reports them, the write
//! connection's pages as `SQLITE_DBSTATUS_CACHE_WRITE` does) and the
//! controller's (`status`'s `work`), cross-checked for git by a recording
//! `git` on the controller's `PATH`. The warm turn's count holds with
//! history retention configured (`history`).

use std::collections::BTreeMap;
use std::time::Duration;

use lapis_e2e::TestContext;
use lapis_protocol::config::HistoryConfig;
use lapis_protocol::params::StoreCounts;
use lapis_service::engine::{Engine, EngineConfig};
use lapis_service::retention::Retention;
use lapis_service::{ApprovalPolicy, Store, StoreOptions};
use serde_json::json;

use crate::acp::test_limits;
use crate::acp_commits::{plain_thread, run_to_completed};
use crate::acp_engine::owner;
use crate::serve_support::Server;

/// The SQL statements a warm echo turn runs on the writer, exactly, in its
/// two batches (issue 39; 54 before the hot path's joined reads,
/// `UPDATE … RETURNING` transitions and savepoint-free first writes):
///
/// - submit, claim and boundary (22): `BEGIN`; the submit (7: receipt
///   lookup, the thread with its workspace in one read, the turn and
///   receipt inserts, two events; no savepoint, it is the batch's first
///   write); the claim (6: one read of the turn, prompt, chained input,
///   thread and workspace; in a savepoint the transition with the prepared
///   configuration and two events); the agent's session event (3, in a
///   savepoint); the boundary (5: in a savepoint one `RETURNING` update
///   with the session, its event, the thread's binding); `COMMIT`;
/// - running mark, output and outcome (16): `BEGIN`; the running mark (2:
///   `RETURNING` update, its event; the batch's first write); the echo's
///   five output events (7, in a savepoint); the outcome (5: in a
///   savepoint the `RETURNING` update, `workspaceIdle`, its event; the
///   permission inbox is looked at only when the turn journaled a
///   request); `COMMIT`.
///
/// Counted, not timed: a change that adds a statement to every turn, or
/// takes one away, fails here until this number and its account change.
const WARM_WRITE_STATEMENTS: u64 = 38;

/// The pages (WAL frames) a warm echo turn's two commits write when
/// nothing splits or grows, exactly: each dirty page of a commit is one
/// more frame to checksum and `pwrite`. The submit's commit (10) dirties
/// the turn's row and its four indexes (id, `queue_seq`, thread,
/// unsettled), the receipt, the events' table, their `(thread,
/// thread_seq)` index and the two partial input indexes (`turn_submitted`,
/// `user_message`); the outcome's commit (4) the turn's row, the unsettled
/// index, the events and their index. The least over 100 consecutive
/// turns, from turn 10 and up to turn 1,000: a change that dirties one
/// more page per turn (a new index, a row rewritten that did not change)
/// fails here until this number and its account change. (Over 20 turns
/// the window could miss the floor: at turn 1,000 most turns start a new
/// page somewhere, and one CI run read 17–29 for all of turns 981–1,000.)
const WARM_PAGES_FLOOR: u64 = 14;

/// The most pages a warm echo turn writes on average over 100 consecutive
/// turns (about 20 measured, at turn 10 as at turn 1,000): a turn's ~4 KB
/// of rows and index entries fill about one new page, and a growing b-tree
/// adds the new page, its parent, the file's header page and the
/// pointer-map page (`auto_vacuum = INCREMENTAL`) to that turn's commit.
const WARM_PAGES_MEAN_MAX: u64 = 24;

/// What one warm turn cost the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PerTurn {
    commits: u64,
    write_statements: u64,
    write_rows: u64,
    read_statements: u64,
    read_rows: u64,
}

fn since(after: StoreCounts, before: StoreCounts) -> PerTurn {
    PerTurn {
        commits: after.commits - before.commits,
        write_statements: after.write_statements - before.write_statements,
        write_rows: after.write_rows - before.write_rows,
        read_statements: after.read_statements - before.read_statements,
        read_rows: after.read_rows - before.read_rows,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_turn_costs_the_same_at_turn_1000_as_at_turn_10() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = StoreOptions::new(dir.path().join("home"));
    // As in `acp_commits`: batches that may wait for the request after
    // them always do, so the count measures the design, not the scheduler.
    opts.deferred_linger = Duration::from_secs(60);
    opts.group_commit_linger = Duration::from_secs(60);
    let store = Store::open(opts).unwrap();
    let mut config = EngineConfig::new(BTreeMap::new()).with_builtin_echo(TestContext::bin());
    config.limits = test_limits();
    // One claim is parked per free running slot.
    let slots = config.max_running_turns();
    let engine = Engine::new(store.clone(), config);
    let handle = engine.start();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    store.add_workspace("ws", &ws).await.unwrap();
    let thread = store
        .create_thread(&owner(), plain_thread("ws", "echo"))
        .await
        .unwrap()
        .value;
    // History retention configured (issue 44 item 2) costs a turn
    // nothing: its passes run beside turns, never inside them. Limits
    // this thread never reaches; its first pass is done before counting.
    let retention = Retention::new(HistoryConfig {
        max_events_per_thread: Some(1_000_000),
        max_age_days: Some(36_500),
        ..Default::default()
    });
    retention.spawn(store.clone());
    lapis_e2e::wait::until("the first retention pass", || {
        retention.status().last_pass.is_some()
    });
    let mut events = store.subscribe();
    let mut costs = BTreeMap::new();
    let mut pages = BTreeMap::new();
    for i in 0..=1000 {
        // Counted from the moment the engine's claim is parked, so the
        // submit's batch claims the turn every time.
        lapis_e2e::wait::until("the engine's claims parked", || {
            store.parked_claims() == slots
        });
        let before = store.counts();
        run_to_completed(
            &store,
            &mut events,
            &thread.id,
            &format!("g-{i}"),
            &format!("prompt {i}"),
        )
        .await;
        if (10..110).contains(&i) || (901..=1000).contains(&i) {
            lapis_e2e::wait::until("the engine's next claims parked", || {
                store.parked_claims() == slots
            });
            pages.insert(i, store.counts().write_pages - before.write_pages);
        }
        if [10, 11, 500, 1000].contains(&i) {
            // The turn's last work (the engine parking its next claim)
            // is done before it is counted.
            lapis_e2e::wait::until("the engine's next claims parked", || {
                store.parked_claims() == slots
            });
            costs.insert(i, since(store.counts(), before));
        }
    }
    let at10 = costs[&10];
    eprintln!("a warm echo turn: {at10:?}");
    assert!(at10.commits <= 2, "commits per warm turn: {costs:?}");
    assert_eq!(
        at10.write_statements, WARM_WRITE_STATEMENTS,
        "statements per warm turn: {costs:?}"
    );
    for i in [11, 500, 1000] {
        assert_eq!(costs[&i], at10, "turn {i} against turn 10: {costs:?}");
    }
    // Pages vary with where the b-trees split and the file grows: the
    // floor is exact, the mean bounded, at either end of the thread.
    eprintln!("pages written per warm turn: {pages:?}");
    for window in [10..110, 901..1001] {
        let seen: Vec<u64> = window.clone().map(|i| pages[&i]).collect();
        let least = seen.iter().copied().min().unwrap();
        assert_eq!(least, WARM_PAGES_FLOOR, "pages, turns {window:?}: {seen:?}");
        let mean = seen.iter().sum::<u64>().div_ceil(seen.len() as u64);
        assert!(
            mean <= WARM_PAGES_MEAN_MAX,
            "mean pages, turns {window:?}: {mean} ({seen:?})"
        );
    }
    handle.shutdown().await;
}

/// A recording `git` on `PATH`: it appends its arguments to a log, then
/// runs the real one.
fn recording_git(ctx: &TestContext) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = which_git();
    let bin = ctx.home().join("recording-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = ctx.home().join("git.log");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
        log.display(),
        real.display()
    );
    let path = bin.join("git");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn which_git() -> std::path::PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH")
}

/// The recorded git runs from the `from`th on.
fn git_log(ctx: &TestContext, from: usize) -> Vec<String> {
    let log = std::fs::read_to_string(ctx.home().join("git.log")).unwrap_or_default();
    log.lines().skip(from).map(str::to_owned).collect()
}

fn git_calls(ctx: &TestContext) -> usize {
    std::fs::read_to_string(ctx.home().join("git.log"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// `status`'s `work` counters.
fn work(server: &Server) -> lapis_protocol::params::WorkCounts {
    let mut client = server.client("guards");
    client
        .status()
        .expect("status")
        .work
        .expect("work counters")
}

/// Submits `n` turns on `thread` one after another, each waited for.
fn run_turns(server: &Server, thread: &str, tag: &str, n: usize) {
    let mut client = server.client("guards");
    for i in 0..n {
        let turn = client
            .turns_submit(thread, &format!("{tag}-{i}"), &format!("echo {i}"))
            .expect("submit");
        lapis_e2e::wait::wait_turn(&mut client, &turn.id, |s| s == "completed");
    }
}

#[test]
fn a_warm_turn_starts_no_process_in_a_plain_directory() {
    let mut ctx = TestContext::new();
    let bin = recording_git(&ctx);
    ctx.prepend_path(bin);
    let server = Server::start_in_with(ctx, json!({}), json!({}), &[]);
    let plain = server
        .client("guards")
        .threads_create("proj", "echo", ApprovalPolicy::Ask, None)
        .expect("thread")
        .id;
    // Warm: the agent is running.
    run_turns(&server, &plain, "warmup", 3);
    let (before, calls) = (work(&server), git_calls(&server.ctx));
    run_turns(&server, &plain, "plain", 20);
    let (after, calls_after) = (work(&server), git_calls(&server.ctx));
    assert_eq!(
        after.processes, before.processes,
        "processes started by 20 warm turns"
    );
    assert_eq!(calls_after, calls, "git runs during 20 warm turns");
}

/// Waits until the file system stamps a file written in `dir` in a later
/// second than everything written there so far (a condition, not a
/// duration): a snapshot after it trusts what it states.
fn settle(dir: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let probe = dir.join("settle-probe");
    std::fs::write(&probe, "x").unwrap();
    let then = std::fs::metadata(&probe).unwrap().mtime();
    std::fs::remove_file(&probe).unwrap();
    let later = dir.join("settle-later");
    while {
        std::fs::write(&later, "x").unwrap();
        std::fs::metadata(&later).unwrap().mtime() <= then
    } {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_file(&later).unwrap();
}

/// Issue 39's bound for a git workspace, with the default evidence (the
/// workspace's watch): a warm turn whose tree nothing touched starts no
/// process, git included (both its snapshots are answered by the watch);
/// a turn after one new file starts at most 3 git processes (`ls-files`
/// on the new name, `add` of it, `write-tree`), and the turn after that
/// none again. (The first turn of a workspace after `serve` starts pays
/// the whole tree once: `rev-parse`, `add`, `ls-files`, `config`,
/// `write-tree`.)
#[test]
fn a_warm_turn_in_a_git_workspace_starts_no_git_process_until_the_tree_is_touched() {
    let mut ctx = TestContext::new();
    let bin = recording_git(&ctx);
    ctx.prepend_path(bin);
    let server = Server::start_in_with(ctx, json!({}), json!({}), &[]);
    crate::evidence::make_repo(&server.project);
    settle(server.ctx.home());
    let thread = server
        .client("guards")
        .threads_create("proj", "echo", ApprovalPolicy::Ask, None)
        .expect("thread")
        .id;
    // Warm: the agent runs, the first snapshot staged the tree and the
    // watch covers it.
    run_turns(&server, &thread, "warmup", 3);
    let (before, calls) = (work(&server), git_calls(&server.ctx));
    run_turns(&server, &thread, "untouched", 20);
    let (after, calls_after) = (work(&server), git_calls(&server.ctx));
    assert_eq!(
        calls_after,
        calls,
        "git runs during 20 untouched warm turns: {:?}",
        git_log(&server.ctx, calls)
    );
    assert_eq!(
        after.processes, before.processes,
        "processes started by 20 untouched warm turns"
    );

    std::fs::write(server.project.join("src/new.txt"), "new\n").unwrap();
    run_turns(&server, &thread, "touched", 1);
    let touched = git_calls(&server.ctx) - calls_after;
    assert!(
        (1..=3).contains(&touched),
        "git runs for a turn after one new file: {touched}"
    );
    let calls = git_calls(&server.ctx);
    run_turns(&server, &thread, "again", 5);
    assert_eq!(
        git_calls(&server.ctx),
        calls,
        "git runs once the watch is back"
    );
}
