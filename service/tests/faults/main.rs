//! Real-process faults: a child process (this test binary re-executed with
//! `LAPIS_FAULT_MODE` set, running only `fault_child`) opens the store and
//! writes continuously, printing an `ack` line after each acknowledged write;
//! the parent kills it with SIGKILL at a chosen point, reopens the store and
//! checks that validation passes, no acknowledged turn is lost, no turn is left
//! in a non-recoverable state and exactly the turns past the dispatch boundary
//! are fenced.

// Bench and test code starts its own processes (the counted-spawn rule of
// service/clippy.toml is for the library).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lapis_service::{ReplayScope, Store, StoreOptions, Turn, TurnFilter, TurnState};

mod child;
use child::child;

const MODE: &str = "LAPIS_FAULT_MODE";
const HOME: &str = "LAPIS_FAULT_HOME";

/// Entry point of the child process; a no-op in the normal test run.
#[test]
fn fault_child() {
    let (Some(mode), Some(root)) = (std::env::var_os(MODE), std::env::var_os(HOME)) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(child(mode.to_str().unwrap(), PathBuf::from(root)));
}

/// Acks seen before the kill, by kind.
#[derive(Debug, Default)]
struct Acks {
    by_kind: BTreeMap<String, Vec<String>>,
}

impl Acks {
    fn of(&self, kind: &str) -> &[String] {
        self.by_kind.get(kind).map_or(&[], Vec::as_slice)
    }
}

fn spawn_child(
    root: &Path,
    mode: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "fault_child", "--nocapture", "--test-threads=1"])
        .env(MODE, mode)
        .env(HOME, root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// A hang guard, not a performance bound: a child that stops acking is killed.
const STALL: Duration = Duration::from_secs(120);

fn parse_ack(line: &str) -> Option<(String, String)> {
    // libtest may print "test fault_child ... " before the first ack on one line.
    let at = line.find("ack ")?;
    let mut parts = line[at + 4..].split_whitespace();
    Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
}

/// Run a child in `mode`, kill -9 it `delay` after the `after`-th ack of kind `at`.
fn run_and_kill(root: &Path, mode: &str, at: &str, after: usize, delay: Duration) -> Acks {
    let (mut child, lines) = spawn_child(root, mode);
    let mut acks = Acks::default();
    let mut seen = 0;
    while seen < after {
        let Ok(line) = lines.recv_timeout(STALL) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child stalled or ended early in mode {mode}");
        };
        if let Some((kind, id)) = parse_ack(&line) {
            if kind == at {
                seen += 1;
            }
            acks.by_kind.entry(kind).or_default().push(id);
        }
    }
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Acks written before the kill but not yet read still count.
    while let Ok(line) = lines.recv_timeout(STALL) {
        if let Some((kind, id)) = parse_ack(&line) {
            acks.by_kind.entry(kind).or_default().push(id);
        }
    }
    acks
}

async fn check_after_kill(root: &Path, acks: &Acks) -> Store {
    let store = Store::open(StoreOptions::new(root.join("home"))).expect("reopen validates");
    let turns: BTreeMap<String, Turn> = store
        .list_turns(TurnFilter {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.id.clone(), t))
        .collect();
    assert!(turns.len() < 1000, "page bound reached; shrink the test");
    for id in acks.of("accepted") {
        assert!(turns.contains_key(id), "accepted turn lost");
    }
    for id in acks.of("dispatched") {
        // Completed, fenced, or resolved by the owner after an earlier kill.
        let t = &turns[id];
        let resolved = t.state == TurnState::Failed && t.resolved_at.is_some();
        assert!(
            matches!(t.state, TurnState::Completed | TurnState::SubmissionUnknown) || resolved,
            "{}",
            t.state
        );
    }
    for id in acks.of("completed") {
        assert_eq!(turns[id].state, TurnState::Completed);
    }
    let recovered: BTreeMap<_, _> = store
        .open_report()
        .recovered
        .iter()
        .map(|r| (r.turn.clone(), r.clone()))
        .collect();
    for t in turns.values() {
        assert!(!t.state.is_in_flight(), "turn left in flight: {}", t.state);
        // Fenced exactly when past the dispatch boundary without an outcome.
        if let Some(r) = recovered.get(&t.id) {
            assert_eq!(t.state.is_fenced(), t.dispatched_at.is_some(), "{r:?}");
            if t.dispatched_at.is_none() {
                assert_eq!(t.state, TurnState::Failed);
            }
        }
        if t.state.is_fenced() {
            assert!(t.dispatched_at.is_some());
        }
    }
    let fenced: Vec<String> = {
        let mut v: Vec<String> = turns
            .values()
            .filter(|t| t.state.is_fenced())
            .map(|t| t.workspace_id.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(store.status().fenced_workspaces, fenced);
    if let Some(seq) = acks.of("appended").last() {
        let seq: u64 = seq.parse().unwrap();
        let owner = ReplayScope::Owner {
            principal: "owner".into(),
            application: None,
        };
        let page = store.replay(owner, seq - 1, 1).await.unwrap();
        assert_eq!(page.events[0].seq, seq, "acknowledged event lost");
    }
    store
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Kill at several points; returns how many turns recovery settled in total.
/// Kills a worker at several points after `at` (every round checks
/// consistency). Three rounds always run; more (up to twelve) only while no
/// kill has yet landed on a turn in flight, so a loaded machine that shifts
/// the timing still exercises the window the caller asserts on.
fn kill_matrix(mode: &str, at: &str) -> usize {
    let mut recovered = 0;
    let delays = [0u64, 2, 5, 1, 3, 0, 4, 1, 2, 0, 6, 1];
    for (i, delay_ms) in delays.into_iter().enumerate() {
        if i >= 3 && recovered > 0 {
            break;
        }
        let i = i % 3;
        let dir = tempfile::tempdir().unwrap();
        let acks = run_and_kill(
            dir.path(),
            mode,
            at,
            5 + 3 * i,
            Duration::from_millis(delay_ms),
        );
        let store = rt().block_on(check_after_kill(dir.path(), &acks));
        recovered += store.open_report().recovered.len();
        drop(store);
        // A second kill after recovery, then reopen again: still consistent.
        let acks2 = run_and_kill(dir.path(), mode, at, 3, Duration::from_millis(delay_ms));
        let mut all = acks;
        for (k, v) in acks2.by_kind {
            all.by_kind.entry(k).or_default().extend(v);
        }
        let store = rt().block_on(check_after_kill(dir.path(), &all));
        recovered += store.open_report().recovered.len();
    }
    recovered
}

#[test]
fn kill_during_thread_and_session_writes() {
    for delay_ms in [0u64, 3] {
        let dir = tempfile::tempdir().unwrap();
        let acks = run_and_kill(
            dir.path(),
            "threads",
            "session",
            6,
            Duration::from_millis(delay_ms),
        );
        rt().block_on(async {
            let store = check_after_kill(dir.path(), &acks).await;
            for id in acks.of("thread") {
                store
                    .get_thread(id)
                    .await
                    .expect("acknowledged thread lost");
            }
            for entry in acks.of("configured") {
                let (id, version) = entry.split_once(':').unwrap();
                let th = store.get_thread(id).await.unwrap();
                assert!(th.version >= version.parse().unwrap());
                assert!(th.restricted);
            }
            // The token keeps its newest `SESSIONS_KEPT`, the issue that
            // evicts being the insert's own transaction: the acknowledged
            // ones past the bound are gone, the newest are kept (one issue
            // may have committed unacknowledged, evicting one more), and
            // never more than the bound is left.
            let acked = acks.of("session");
            let mut kept = 0;
            for (i, hash) in acked.iter().enumerate() {
                let found = store.find_session_by_bearer_hash(hash).await.unwrap();
                kept += usize::from(found.is_some());
                if i + child::SESSIONS_KEPT > acked.len() {
                    assert!(found.is_some(), "a newest acknowledged session lost");
                }
            }
            assert!(kept <= child::SESSIONS_KEPT, "{kept} sessions kept");
        });
    }
}

#[test]
fn kill_during_cancels_and_resolutions() {
    // Kills that found a turn past the boundary (fenced, or settled by recovery).
    let mut interesting = 0;
    for (i, delay_ms) in [0u64, 1, 3, 0, 1, 3].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let at = ["c_dispatched", "cancel_requested", "interrupted"][i % 3];
        let acks = run_and_kill(dir.path(), "cancel", at, 4, Duration::from_millis(delay_ms));
        rt().block_on(async {
            let store = check_after_kill(dir.path(), &acks).await;
            for id in acks.of("c_dispatched") {
                let t = store.get_turn(id).await.unwrap();
                // Past the boundary: fenced, or resolved by the owner. Never re-run, never failed silently.
                assert!(
                    t.state == TurnState::Cancelled && t.resolved_at.is_some()
                        || t.state.is_fenced(),
                    "{}",
                    t.state
                );
            }
            for id in acks.of("cancel_requested") {
                let t = store.get_turn(id).await.unwrap();
                assert!(t.cancel_requested, "acknowledged cancel lost");
                assert!(
                    matches!(t.state, TurnState::Interrupted | TurnState::Cancelled),
                    "{}",
                    t.state
                );
            }
            for id in acks.of("resolved") {
                let t = store.get_turn(id).await.unwrap();
                assert_eq!(t.state, TurnState::Cancelled);
                assert!(t.resolved_at.is_some());
            }
            interesting +=
                store.status().fenced_workspaces.len() + store.open_report().recovered.len();
        });
    }
    assert!(
        interesting > 0,
        "no kill landed between the boundary and the resolution"
    );
}

#[test]
fn kill_during_submissions() {
    kill_matrix("submit", "accepted");
}

#[test]
fn kill_around_the_dispatch_boundary() {
    assert!(
        kill_matrix("lifecycle", "claimed") > 0,
        "no kill landed on a turn in flight"
    );
}

#[test]
fn kill_during_completions() {
    assert!(
        kill_matrix("lifecycle", "completed") > 0,
        "no kill landed on a turn in flight"
    );
}

#[test]
fn kill_during_streamed_journal_appends() {
    assert!(
        kill_matrix("journal", "appended") > 0,
        "no kill landed on a turn in flight"
    );
}

#[test]
fn a_live_holder_is_named_by_pid_and_its_death_frees_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = spawn_child(dir.path(), "submit");
    while parse_ack(&lines.recv_timeout(STALL).expect("child acks"))
        .is_none_or(|(k, _)| k != "open")
    {}
    let err = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap_err();
    assert_eq!(err.code(), "instance_locked");
    assert!(
        err.to_string().contains(&child.id().to_string()),
        "names the holder pid"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    Store::open(StoreOptions::new(dir.path().join("home"))).expect("lock freed by the kernel");
}
