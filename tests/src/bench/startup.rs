//! `startup`: serve readiness (spawn → socket answers `status`) with 0,
//! 100k and 1M retained journal events. The journal is seeded through the
//! store itself (a claimed turn streaming message chunks, group-committed),
//! so its events are chained and anchored as serve's own are: raw rows
//! without their hash would fail the history check (issue 39: serve checks
//! it right after readiness, so readiness no longer grows with it).

use anyhow::Result;
use lapis_protocol::Payload;
use lapis_service::{
    Actor, ApprovalPolicy, EventKind, NewThread, Retention, Store, StoreOptions, SubmitTurn,
};
use serde_json::json;

use super::rig::Rig;
use super::table::{Table, Unit, ms};

/// Creates ws0's thread; returns its id.
fn seed_base(rig: &Rig) -> Result<String> {
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
                    ports: Default::default(),
                    thread_id: None,
                    permission_timeout_seconds: None,
                    budget: None,
                },
            )
            .await?
            .value;
        store.close().await;
        Ok(thread.id)
    })
}

/// Claims a new turn of `thread` and streams `n` message chunks into it
/// (the next serve start recovers the turn).
fn seed_events(rig: &Rig, thread: &str, stage: usize, n: usize) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let store = Store::open(StoreOptions::new(rig.home.clone()))?;
        let input = SubmitTurn {
            command_id: format!("seed-{stage}"),
            thread_id: thread.to_owned(),
            prompt: "seed".into(),
            continues: None,
            max_turn_seconds: None,
        };
        let turn = store
            .submit_turn(&Actor::new("owner", "bench"), input)
            .await?
            .value;
        store.try_claim().await?;
        let mut last = None;
        for i in 0..n {
            let text = format!("chunk {i}: the quick brown fox jumps over the lazy dog");
            last = Some(store.append_activity(
                &turn.id,
                Payload::from_value(EventKind::MessageChunk, json!({ "text": text })),
            ));
        }
        if let Some(last) = last {
            last.await?;
        }
        store.close().await;
        Ok(())
    })
}

/// Adds the suite's rows.
pub(crate) fn run(table: &mut Table, runs: usize, sizes: &[usize]) -> Result<()> {
    let mut rig = Rig::new(1, json!({}), json!({}))?;
    let thread = seed_base(&rig)?;
    let mut have = 0usize;
    let mut base: Option<String> = None;
    for (stage, &n) in sizes.iter().enumerate() {
        seed_events(&rig, &thread, stage, n - have)?;
        have = n;
        // The first start recovers the claimed turn; not measured.
        rig.start()?;
        rig.stop();
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
