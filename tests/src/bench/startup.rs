//! `startup`: serve readiness (spawn → socket answers `status`) with 0,
//! 100k and 1M retained journal events. The journal is seeded directly: the
//! store API creates the workspace, thread and a claimed turn, then raw
//! rusqlite inserts add the events in one transaction (the same path as the
//! store's own open benchmark, `service/benches/journal.rs`).

use anyhow::Result;
use lapis_service::store::DB_FILE;
use lapis_service::{Actor, ApprovalPolicy, NewThread, Retention, Store, StoreOptions, SubmitTurn};
use rusqlite::{Connection, params};
use serde_json::json;

use super::rig::Rig;
use super::table::{Table, Unit, ms};

/// Creates ws0's thread and one claimed turn; returns (thread, turn).
fn seed_base(rig: &Rig) -> Result<(String, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let store = Store::open(StoreOptions::new(rig.home.clone()))?;
        store
            .add_workspace("ws0", &rig.ctx.home().join("ws0"))
            .await?;
        let actor = Actor::new("owner", "bench");
        let thread = store
            .create_thread(
                &actor,
                NewThread {
                    command_id: None,
                    workspace_id: "ws0".into(),
                    provider: "echo".into(),
                    approval: ApprovalPolicy::Ask,
                    restricted: false,
                    retention: Retention::Full,
                    mcp_servers: Vec::new(),
                    tools: Vec::new(),
                    context: None,
                    memory: None,
                    transcript_store: None,
                    thread_id: None,
                    permission_timeout_seconds: None,
                    budget: None,
                },
            )
            .await?
            .value;
        let input = SubmitTurn {
            command_id: "seed".into(),
            thread_id: thread.id.clone(),
            prompt: "seed".into(),
            continues: None,
            max_turn_seconds: None,
        };
        let turn = store.submit_turn(&actor, input).await?.value;
        store.try_claim().await?;
        store.close().await;
        Ok((thread.id, turn.id))
    })
}

/// Appends `n` message chunks to `turn` in one transaction.
fn seed_events(rig: &Rig, thread: &str, turn: &str, n: usize) -> Result<()> {
    let mut conn = Connection::open(rig.home.join(DB_FILE))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    let (seq, tseq): (i64, i64) = conn.query_row(
        "SELECT coalesce(max(seq), 0), (SELECT coalesce(max(thread_seq), 0) FROM events WHERE thread_id = ?1) FROM events",
        [thread],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare(
            "INSERT INTO events (seq, thread_id, thread_seq, turn_id, kind, at, payload, has_payload) \
             VALUES (?1, ?2, ?3, ?4, 'message_chunk', ?5, ?6, 1)",
        )?;
        for i in 0..n as i64 {
            let text = json!({ "text": format!("chunk {i}: the quick brown fox jumps over the lazy dog") })
                .to_string();
            stmt.execute(params![
                seq + 1 + i,
                thread,
                tseq + 1 + i,
                turn,
                1_700_000_000_000i64 + i,
                text
            ])?;
        }
    }
    tx.commit()?;
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")?;
    Ok(())
}

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize, sizes: &[usize]) -> Result<()> {
    let mut rig = Rig::new(1, json!({}), json!({}))?;
    let (thread, turn) = seed_base(&rig)?;
    // The first start recovers the claimed turn; not measured.
    rig.start()?;
    rig.stop();
    let mut have = 0usize;
    let mut base: Option<String> = None;
    for &n in sizes {
        seed_events(&rig, &thread, &turn, n - have)?;
        have = n;
        let mut samples = Vec::new();
        for _ in 0..runs {
            samples.push(ms(rig.start()?));
            rig.stop();
        }
        let figure = format!("serve ready, {n} retained events");
        table.add(
            "startup",
            figure.clone(),
            Unit::Ms,
            samples,
            base.as_deref(),
        );
        base.get_or_insert(figure);
    }
    Ok(())
}
