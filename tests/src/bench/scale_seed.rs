//! The `scale` suite's seeding: threads and one long thread's events
//! written through the store itself (serve stopped), so every row is
//! chained and anchored as serve's own are. Threads go in concurrent
//! chunks (the writer group-commits what is queued together); events
//! stream into one claimed turn, group-committed (the next serve start
//! recovers the turn).

use anyhow::Result;
use lapis_protocol::Payload;
use lapis_service::{
    Actor, ApprovalPolicy, EventKind, NewThread, Retention, Store, StoreOptions, SubmitTurn,
};
use serde_json::json;

use super::rig::Rig;

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn new_thread() -> NewThread {
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
    }
}

/// Registers ws0 and creates `n` threads; returns the first one's id
/// (the one the events go to).
pub(crate) fn threads(rig: &Rig, n: usize) -> Result<String> {
    runtime()?.block_on(async {
        let store = Store::open(StoreOptions::new(rig.home.clone()))?;
        store
            .add_workspace("ws0", &rig.ctx.home().join("ws0"))
            .await?;
        let actor = Actor::new("owner", "bench");
        let first = store.create_thread(&actor, new_thread()).await?.value.id;
        let mut made = 1;
        while made < n {
            let chunk = (n - made).min(256);
            let mut tasks = Vec::with_capacity(chunk);
            for _ in 0..chunk {
                let (store, actor) = (store.clone(), actor.clone());
                tasks.push(tokio::spawn(async move {
                    store.create_thread(&actor, new_thread()).await
                }));
            }
            for t in tasks {
                t.await??;
            }
            made += chunk;
        }
        store.close().await;
        Ok(first)
    })
}

/// Claims a new turn of `thread` and streams `n` message chunks into it.
pub(crate) fn events(rig: &Rig, thread: &str, stage: usize, n: usize) -> Result<()> {
    runtime()?.block_on(async {
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
            let pending = store.append_activity(
                &turn.id,
                Payload::from_value(EventKind::MessageChunk, json!({ "text": text })),
            );
            // Waits now and then, so the queue stays bounded.
            if i % 65_536 == 65_535 {
                pending.await?;
            } else {
                last = Some(pending);
            }
        }
        if let Some(last) = last {
            last.await?;
        }
        store.close().await;
        Ok(())
    })
}
