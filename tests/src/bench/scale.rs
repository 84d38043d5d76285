//! `scale` (issue 44 item 6): one controller home grown to 10k, 1M and
//! 10M retained events (quick: 10k, 100k) beside 10k threads, seeded once
//! through the store (`scale_seed`) and reused across every figure:
//! serve readiness, `status --json` (the CLI, a process), one
//! `journal.replay` page at the head and the tail of the long thread and
//! of the owner's journal, `threads.list` (right after readiness, while
//! the history check reads the file, and again once it is done), serve's
//! RSS after readiness and
//! after those reads, the journal's history check after readiness, and
//! the history retention pass (a policy that prunes nothing, so the pass
//! reads every candidate): its first run after the events were added
//! (the summary catches up on them) and its steady run (only what came
//! since). The old candidate search (one `GROUP BY` over the whole events
//! table, before schema 21) is timed on the same file for comparison.
//! Last, the long thread is pruned to 10,000 events (`maxEventsPerThread`)
//! and its head page is read again: after the pruned history's tombstones
//! (the old query, timed on the file, read them all).

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use lapis_protocol::HistoryPass;
use lapis_protocol::client::Client;
use serde_json::json;

use super::rig::{Rig, run_ok, vm_hwm_kib};
use super::scale_seed;
use super::table::{Table, Unit, ms, time_ms};

/// Reads per run of each page figure.
const READS: usize = 5;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn vm_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |k| k / 1024.0)
}

/// A policy every thread is a candidate of and none breaks.
fn add_history(rig: &Rig) -> Result<()> {
    let path = rig
        .ctx
        .home()
        .join(".config/lapis-ai-controller/config.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    doc["history"] = json!({ "maxAgeDays": 36500 });
    std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)?;
    Ok(())
}

/// Waits for a retention pass that started at or after `since` (ms).
fn wait_pass(rig: &Rig, since: i64) -> Result<HistoryPass> {
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut client = rig.client()?;
    loop {
        let pass = client.status()?.history.and_then(|h| h.last_pass);
        if let Some(p) = pass.filter(|p| p.started_at >= since) {
            return Ok(p);
        }
        if Instant::now() > deadline {
            bail!("no retention pass in 30 min");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The candidate search before schema 21, on the file at `db`.
fn old_candidate_search(db: &Path) -> Result<f64> {
    let conn = rusqlite::Connection::open(db)?;
    let (took, n) = time_ms(|| {
        conn.query_row(
            "SELECT count(*) FROM (SELECT t.id, t.workspace_id, t.updated_at, count(e.seq), \
             coalesce(sum(length(e.payload)), 0), coalesce(min(e.at), 0) \
             FROM threads t LEFT JOIN events e ON e.thread_id = t.id \
             AND e.kind NOT IN ('tombstone', 'history_pruned', 'thread_deleted') \
             WHERE t.deleted_at IS NULL AND t.retention = 'full' GROUP BY t.id ORDER BY t.id)",
            [],
            |r| r.get::<_, i64>(0),
        )
    });
    n.context("old candidate query")?;
    Ok(took)
}

#[derive(Default)]
struct Samples {
    ready: Vec<f64>,
    checked: Vec<f64>,
    status: Vec<f64>,
    head: Vec<f64>,
    tail: Vec<f64>,
    owner_head: Vec<f64>,
    owner_tail: Vec<f64>,
    list: Vec<f64>,
    quiet_head: Vec<f64>,
    quiet_owner_head: Vec<f64>,
    quiet_list: Vec<f64>,
    rss_ready: Vec<f64>,
    rss_read: Vec<f64>,
    hwm: Vec<f64>,
    pass: Vec<f64>,
    scanned: Vec<f64>,
}

/// One `journal.replay` page of 100, timed; an empty page is an error.
fn replay_page(client: &mut Client, scope: Option<&str>, after: u64) -> Result<f64> {
    let (took, page) = time_ms(|| client.journal_replay(scope, after, Some(100)));
    anyhow::ensure!(!page?.events.is_empty(), "an empty page after {after}");
    Ok(took)
}

/// One `threads.list` page (the default 1,000), timed.
fn list_page(client: &mut Client) -> Result<f64> {
    let (took, list) =
        time_ms(|| client.threads_list_page(&lapis_protocol::params::ThreadsList::default()));
    list?;
    Ok(took)
}

/// One measured start of serve on the seeded home.
fn measure(rig: &mut Rig, thread: &str, events: u64, threads: u64, s: &mut Samples) -> Result<()> {
    let since = now_ms();
    let ready = ms(rig.start()?);
    s.ready.push(ready);
    let pid = rig.pid().context("pid")?;
    s.rss_ready.push(vm_rss_mib(pid));
    let (took, out) = time_ms(|| run_ok(&rig.ctx, &rig.bin, &["status", "--json"]));
    out?;
    s.status.push(took);
    let mut client = rig.client()?;
    let tail = events.saturating_sub(150);
    let owner_tail = (events + threads).saturating_sub(150);
    for _ in 0..READS {
        for (after, scope, into) in [
            (0, Some(thread), &mut s.head),
            (tail, Some(thread), &mut s.tail),
            (0, None, &mut s.owner_head),
            (owner_tail, None, &mut s.owner_tail),
        ] {
            into.push(replay_page(&mut client, scope, after)?);
        }
        s.list.push(list_page(&mut client)?);
    }
    s.rss_read.push(vm_rss_mib(pid));
    let pass = wait_pass(rig, since)?;
    // The same pages again with the history check done: the reads above
    // start right after readiness, while the check reads the whole file.
    for _ in 0..READS {
        for (after, scope, into) in [
            (0, Some(thread), &mut s.quiet_head),
            (0, None, &mut s.quiet_owner_head),
        ] {
            into.push(replay_page(&mut client, scope, after)?);
        }
        s.quiet_list.push(list_page(&mut client)?);
    }
    s.checked
        .push(((pass.started_at - since) as f64 - ready).max(0.0));
    s.pass.push((pass.finished_at - pass.started_at) as f64);
    s.scanned.push(pass.scanned as f64);
    s.hwm
        .push(vm_hwm_kib(pid).context("VmHWM")? as f64 / 1024.0);
    rig.stop();
    Ok(())
}

/// The thread's head page before schema 21 (it read every tombstone).
fn old_head_page(db: &Path, thread: &str) -> Result<f64> {
    let conn = rusqlite::Connection::open(db)?;
    let (took, n) = time_ms(|| {
        conn.query_row(
            "SELECT count(*) FROM (SELECT seq FROM events WHERE thread_id = ?1 AND thread_seq > 0 \
             AND kind != 'tombstone' ORDER BY thread_seq LIMIT 101)",
            [thread],
            |r| r.get::<_, i64>(0),
        )
    });
    n.context("old head page")?;
    Ok(took)
}

/// Prunes the long thread to 10,000 events and reads its head page.
fn pruned(table: &mut Table, rig: &mut Rig, thread: &str, n: usize, runs: usize) -> Result<()> {
    let path = rig
        .ctx
        .home()
        .join(".config/lapis-ai-controller/config.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    doc["history"] = json!({ "maxEventsPerThread": 10_000 });
    std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)?;
    let since = now_ms();
    rig.start()?;
    let pass = wait_pass(rig, since)?;
    let label = format!("{n} events pruned to 10,000");
    table.add(
        "scale",
        format!(
            "retention pass pruning {} events in {} batches, {label}",
            pass.events, pass.batches
        ),
        Unit::Ms,
        vec![(pass.finished_at - pass.started_at) as f64],
        None,
    );
    let mut client = rig.client()?;
    let mut head = Vec::new();
    for _ in 0..runs * READS {
        let (took, page) = time_ms(|| client.journal_replay(Some(thread), 0, Some(100)));
        anyhow::ensure!(!page?.events.is_empty(), "an empty head page");
        head.push(took);
    }
    rig.stop();
    let db = rig.home.join("controller.db");
    let old: Vec<f64> = (0..runs.min(3))
        .map(|_| old_head_page(&db, thread))
        .collect::<Result<_>>()?;
    let first = format!("journal.replay page (100), thread head, {label}");
    table.add("scale", first.clone(), Unit::Ms, head, None);
    table.add(
        "scale",
        format!("old thread head page (read the tombstones), {label}"),
        Unit::Ms,
        old,
        Some(&first),
    );
    Ok(())
}

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize, sizes: &[usize], threads: usize) -> Result<()> {
    let mut rig = Rig::new(1, json!({}), json!({}))?;
    add_history(&rig)?;
    let t = Instant::now();
    let thread = scale_seed::threads(&rig, threads)?;
    table.note(format!(
        "scale: {threads} threads seeded in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let db = rig.home.join("controller.db");
    let mut have = 0usize;
    let mut base: Option<(String, Vec<String>)> = None;
    for (stage, &n) in sizes.iter().enumerate() {
        let t = Instant::now();
        scale_seed::events(&rig, &thread, stage, n - have)?;
        let added = n - have;
        have = n;
        let size = std::fs::metadata(&db).map_or(0, |m| m.len()) / (1024 * 1024);
        table.note(format!(
            "scale: {added} events added in {:.1} s (to {n}; database {size} MiB; load {})",
            t.elapsed().as_secs_f64(),
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        ));
        // The first start recovers the claimed turn and its pass catches
        // the summary up on the events added.
        let since = now_ms();
        rig.start()?;
        let first = wait_pass(&rig, since)?;
        rig.stop();
        let label = format!("{n} events, {threads} threads");
        table.add(
            "scale",
            format!(
                "retention pass after {added} new events (summary catch-up: {} read), {label}",
                first.scanned
            ),
            Unit::Ms,
            vec![(first.finished_at - first.started_at) as f64],
            None,
        );
        let mut s = Samples::default();
        for _ in 0..runs {
            measure(&mut rig, &thread, n as u64, threads as u64, &mut s)?;
        }
        let old: Vec<f64> = (0..runs.min(3))
            .map(|_| old_candidate_search(&db))
            .collect::<Result<_>>()?;
        let rows: Vec<(String, Unit, Vec<f64>)> = vec![
            ("serve ready".into(), Unit::Ms, s.ready),
            ("ready → history check done".into(), Unit::Ms, s.checked),
            ("`status --json` (CLI process)".into(), Unit::Ms, s.status),
            (
                "journal.replay page (100), thread head".into(),
                Unit::Ms,
                s.head,
            ),
            (
                "journal.replay page (100), thread tail".into(),
                Unit::Ms,
                s.tail,
            ),
            (
                "journal.replay page (100), owner head".into(),
                Unit::Ms,
                s.owner_head,
            ),
            (
                "journal.replay page (100), owner tail".into(),
                Unit::Ms,
                s.owner_tail,
            ),
            ("threads.list, one page (1,000)".into(), Unit::Ms, s.list),
            (
                "journal.replay page (100), thread head, history check done".into(),
                Unit::Ms,
                s.quiet_head,
            ),
            (
                "journal.replay page (100), owner head, history check done".into(),
                Unit::Ms,
                s.quiet_owner_head,
            ),
            (
                "threads.list, one page (1,000), history check done".into(),
                Unit::Ms,
                s.quiet_list,
            ),
            ("serve RSS after ready".into(), Unit::MiB, s.rss_ready),
            ("serve RSS after the reads".into(), Unit::MiB, s.rss_read),
            (
                "serve peak RSS (VmHWM, history check included)".into(),
                Unit::MiB,
                s.hwm,
            ),
            ("retention pass, steady".into(), Unit::Ms, s.pass),
            (
                "retention pass, events read".into(),
                Unit::Count("events"),
                s.scanned,
            ),
            (
                "old candidate search (GROUP BY over events)".into(),
                Unit::Ms,
                old,
            ),
        ];
        let names: Vec<String> = rows.iter().map(|r| format!("{}, {label}", r.0)).collect();
        for (i, (_, unit, samples)) in rows.into_iter().enumerate() {
            let against = base.as_ref().map(|(_, b)| b[i].clone());
            table.add("scale", names[i].clone(), unit, samples, against.as_deref());
        }
        base.get_or_insert((label, names));
    }
    pruned(table, &mut rig, &thread, have, runs)
}
