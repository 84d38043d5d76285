//! Journal benchmark (harness = false): `cargo bench -p lapis-service --bench journal`.
//!
//! Prints medians of:
//! - durable appends/s with `synchronous=FULL`: one commit per event (await
//!   each append) vs group commit (stream, await the last), next to the floor
//!   of raw rusqlite inserts of the same rows into the same table in one
//!   transaction;
//! - `Store::open` (lock + validation + recovery) with 10k, 100k and 1M events.
//!
//! `LAPIS_BENCH_QUICK=1` shrinks the sizes (smoke run).

use lapis_protocol::Payload;
use std::path::Path;
use std::time::{Duration, Instant};

use lapis_service::store::DB_FILE;
use lapis_service::{
    Actor, ApprovalPolicy, EventKind, HistoryCheck, NewThread, Retention, Store, StoreOptions,
    SubmitTurn,
};
use rusqlite::{Connection, params};
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn payload(i: usize) -> serde_json::Value {
    json!({ "text": format!("chunk {i}: the quick brown fox jumps over the lazy dog") })
}

/// A store with one workspace, one thread and one claimed turn.
async fn setup(root: &Path) -> (Store, String, String) {
    let store = Store::open(StoreOptions::new(root.join("home"))).unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    store.add_workspace("ws", &ws).await.unwrap();
    let actor = Actor::new("owner", "bench");
    let th = store
        .create_thread(
            &actor,
            NewThread {
                command_id: None,
                workspace_id: "ws".into(),
                provider: "echo".into(),
                approval: ApprovalPolicy::Ask,
                restricted: false,
                retention: Retention::Full,
                mcp_servers: Vec::new(),
                ports: Default::default(),
                thread_id: None,
                permission_timeout_seconds: None,
                budget: None,
            },
        )
        .await
        .unwrap()
        .value;
    let input = SubmitTurn {
        command_id: "c".into(),
        thread_id: th.id.clone(),
        prompt: "p".into(),
        continues: None,
        max_turn_seconds: None,
    };
    let turn = store.submit_turn(&actor, input).await.unwrap().value;
    store.try_claim().await.unwrap().unwrap();
    (store, th.id, turn.id)
}

async fn group_commit(n: usize) -> (f64, f64) {
    let (rate, cpu_rate, _) = group_commit_writer(n).await;
    (rate, cpu_rate)
}

/// [`group_commit`], plus the store writer thread's own CPU time per event
/// (µs): the single writer is what bounds the rate.
async fn group_commit_writer(n: usize) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, turn) = setup(dir.path()).await;
    let c0 = process_cpu();
    let w0 = writer_cpu();
    let start = Instant::now();
    let mut last = None;
    for i in 0..n {
        last = Some(store.append_activity(
            &turn,
            Payload::from_value(EventKind::MessageChunk, payload(i)),
        ));
    }
    last.unwrap().await.unwrap();
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let cpu_rate = n as f64 / (process_cpu() - c0).as_secs_f64().max(0.01);
    let writer_us = (writer_cpu() - w0).as_secs_f64() * 1e6 / n as f64;
    store.close().await;
    (rate, cpu_rate, writer_us)
}

/// CPU time of the store's writer thread (named `lapis-store-wri…` in
/// /proc), zero when there is none.
fn writer_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with("lapis-store-wri"))
        })
        .map(|t| on_cpu(&t.path()))
        .sum()
}

/// Time a task ran on a CPU, in nanoseconds (`schedstat`'s first field;
/// finer than `stat`'s 10 ms ticks, which are too coarse for a fraction of
/// a second), falling back to `stat`.
fn on_cpu(task: &Path) -> Duration {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_else(|| cpu_of(&task.join("stat").to_string_lossy()))
}

async fn commit_per_event(n: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, turn) = setup(dir.path()).await;
    let start = Instant::now();
    for i in 0..n {
        store
            .append_activity(
                &turn,
                Payload::from_value(EventKind::MessageChunk, payload(i)),
            )
            .await
            .unwrap();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    store.close().await;
    rate
}

/// Raw inserts of `n` events for (`thread`, `turn`) after `first_seq`, one transaction.
fn raw_insert(
    conn: &mut Connection,
    thread: &str,
    turn: &str,
    first_seq: u64,
    n: usize,
) -> Duration {
    let start = Instant::now();
    let tx = conn.transaction().unwrap();
    {
        let mut stmt = tx
            .prepare(
                "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, payload, has_payload) \
                 VALUES (?1, ?2, ?3, ?4, 'message_chunk', ?5, ?6, 1)",
            )
            .unwrap();
        let thread_first: i64 = tx
            .query_row(
                "SELECT coalesce(max(thread_seq), 0) FROM events WHERE thread_id = ?1",
                [thread],
                |r| r.get(0),
            )
            .unwrap();
        for i in 0..n {
            let text = serde_json::to_string(&payload(i)).unwrap();
            stmt.execute(params![
                (first_seq + 1 + i as u64) as i64,
                thread,
                thread_first + 1 + i as i64,
                turn,
                1_700_000_000_000i64 + i as i64,
                text
            ])
            .unwrap();
        }
    }
    tx.commit().unwrap();
    start.elapsed()
}

fn raw_conn(home: &Path) -> Connection {
    let conn = Connection::open(home.join(DB_FILE)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn
}

async fn floor(n: usize) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (store, thread, turn) = setup(dir.path()).await;
    let last: u64 = store
        .replay(lapis_service::ReplayScope::Thread(thread.clone()), 0, 0)
        .await
        .unwrap()
        .events
        .len() as u64;
    store.close().await;
    let mut conn = raw_conn(&dir.path().join("home"));
    let c0 = process_cpu();
    let took = raw_insert(&mut conn, &thread, &turn, last, n);
    let cpu_rate = n as f64 / (process_cpu() - c0).as_secs_f64().max(0.01);
    (n as f64 / took.as_secs_f64(), cpu_rate)
}

/// CPU time (user + system) of the whole process (every thread, including
/// the writer), from /proc (10 ms ticks): on a shared machine this is
/// steadier than wall time.
fn process_cpu() -> Duration {
    cpu_of("/proc/self/stat")
}

fn cpu_of(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after_comm = stat.rsplit(") ").next().unwrap_or("");
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) are utime and stime; here 0-based after comm: 11, 12.
    let ticks: u64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Median open time (wall, CPU) of a store holding `events` events.
async fn open_time(events: usize, runs: usize) -> (Duration, Duration) {
    let dir = seeded(events).await;
    let mut times = vec![];
    let mut cpu = vec![];
    for _ in 0..runs {
        // The whole process: the chain check hashes on a helper thread.
        let c0 = process_cpu();
        let store = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap();
        cpu.push((process_cpu() - c0).as_secs_f64());
        times.push(store.open_report().elapsed.as_secs_f64());
        assert!(store.open_report().validated.events as usize >= events);
        store.close().await;
    }
    (
        Duration::from_secs_f64(median(times)),
        Duration::from_secs_f64(median(cpu)),
    )
}

/// `LAPIS_BENCH_OPEN_ONLY`: the history checked inside open (as before
/// issue 39) against after it (what `serve` does), alternated on one
/// file: medians of open's wall time each way, and of the time until the
/// history check after open passed (`Store::history_verified`).
async fn open_compare(events: usize, runs: usize) -> [Duration; 3] {
    let dir = seeded(events).await;
    let (mut at, mut after, mut verified) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        for check in [HistoryCheck::AtOpen, HistoryCheck::AfterOpen] {
            let mut o = StoreOptions::new(dir.path().join("home"));
            o.history = check;
            let started = std::time::Instant::now();
            let store = Store::open(o).unwrap();
            let opened = started.elapsed().as_secs_f64();
            store.history_verified().await.unwrap();
            match check {
                HistoryCheck::AtOpen => at.push(opened),
                HistoryCheck::AfterOpen => {
                    after.push(opened);
                    verified.push(started.elapsed().as_secs_f64());
                }
            }
            store.close().await;
        }
    }
    [at, after, verified].map(|v| Duration::from_secs_f64(median(v)))
}

/// A home holding `events` streamed events (plus the setup's), written
/// by the store itself (group commit), so they are chained and laid out
/// as the controller writes them; the WAL checkpointed into the file.
async fn seeded(events: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, turn) = setup(dir.path()).await;
    let mut last = None;
    for i in 0..events {
        last = Some(store.append_activity(
            &turn,
            Payload::from_value(EventKind::MessageChunk, payload(i)),
        ));
    }
    if let Some(last) = last {
        last.await.unwrap();
    }
    store.close().await;
    let conn = raw_conn(&dir.path().join("home"));
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .unwrap();
    dir
}

fn main() {
    let quick = std::env::var_os("LAPIS_BENCH_QUICK").is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // `LAPIS_BENCH_GROUP_ONLY=N`: N group commits of 100,000 events, one
        // line each (wall rate, process CPU rate, writer CPU µs per event).
        if let Some(n) = std::env::var("LAPIS_BENCH_GROUP_ONLY")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
        {
            for _ in 0..n {
                let (g, gc, w) = group_commit_writer(100_000).await;
                println!("group commit: {g:.0} events/s, {gc:.0} per CPU-second, writer {w:.2} us/event");
            }
            return;
        }
        if std::env::var_os("LAPIS_BENCH_OPEN_ONLY").is_some() {
            let n = std::env::var("LAPIS_BENCH_OPEN_ONLY")
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(1_000_000);
            let [at, after, verified] = open_compare(n, 5).await;
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "{n} events, median of 5 alternated: open checking the history {:.1} ms; \
                 open leaving it to after open {:.1} ms, history verified {:.1} ms after open began",
                ms(at),
                ms(after),
                ms(verified)
            );
            return;
        }
        let (n_group, n_single, runs) = if quick {
            (20_000, 200, 3)
        } else {
            (100_000, 2_000, 5)
        };
        let (mut floors, mut floors_cpu, mut groups, mut groups_cpu, mut singles) =
            (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..runs {
            let (f, fc) = floor(n_group).await;
            floors.push(f);
            floors_cpu.push(fc);
            let (g, gc) = group_commit(n_group).await;
            groups.push(g);
            groups_cpu.push(gc);
        }
        for _ in 0..3 {
            singles.push(commit_per_event(n_single).await);
        }
        let (fl, gr, si) = (median(floors), median(groups), median(singles));
        let (flc, grc) = (median(floors_cpu), median(groups_cpu));
        println!("journal appends, synchronous=FULL (median of runs):");
        println!("  floor: raw rusqlite inserts, one transaction ({n_group} events): {fl:>10.0} events/s  ({flc:>10.0} per CPU-second)");
        println!("  group commit, streamed appends ({n_group} events):             {gr:>10.0} events/s  ({grc:>10.0} per CPU-second)");
        println!("  one commit per event ({n_single} events):                       {si:>10.0} events/s");
        println!(
            "  floor / group = {:.2}x wall, {:.2}x CPU   group / per-event = {:.1}x",
            fl / gr,
            flc / grc,
            gr / si
        );
        let sizes: &[usize] = if quick {
            &[10_000, 100_000]
        } else {
            &[10_000, 100_000, 1_000_000]
        };
        println!(
            "store open + validation + recovery (median of 3; wall, and CPU of the whole process):"
        );
        for &n in sizes {
            let (t, c) = open_time(n, 3).await;
            println!(
                "  {n:>9} events: wall {:>8.1} ms   cpu {:>8.1} ms",
                t.as_secs_f64() * 1e3,
                c.as_secs_f64() * 1e3
            );
        }
    });
}
