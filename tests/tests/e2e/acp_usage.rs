//! Usage and cost through the real `serve` (issue 29): the fixture agent
//! reports both ACP semantics — `usage_update` with the *cumulative*
//! session cost, and the prompt response's *per-turn* tokens — and the
//! controller journals both as typed notes, records each turn's own
//! figures, and totals them per thread, workspace and application, across
//! a restart.

use lapis_protocol::usage::{Amount, ContextUsage, Cost, TokenUsage};
use lapis_protocol::{ApprovalPolicy, Note};
use serde_json::json;

use crate::acp_sessions::{fixture, status};
use crate::serve_support::Server;

fn usd(a: f64) -> Cost {
    Cost {
        amount: Amount(a),
        currency: "USD".into(),
    }
}

#[test]
fn usage_is_typed_recorded_per_turn_and_totalled_across_a_restart() {
    let server = Server::start_full(json!({}), json!({ "fx": fixture(&["--usage"]) }));
    let mut server = server;
    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "fx", ApprovalPolicy::Ask, None)
        .unwrap();
    let mut turns = Vec::new();
    for (i, prompt) in ["one", "two"].iter().enumerate() {
        let t = client
            .turns_submit(&thread.id, &format!("u-{i}"), prompt)
            .unwrap();
        lapis_e2e::wait::settles_as(&mut client, &t.id, "completed", Some("end_turn"));
        turns.push(t.id);
    }
    // Both reports are typed notes of their turn.
    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    let notes: Vec<Note> = page
        .events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turns[1].as_str()))
        .filter_map(lapis_e2e::journal::note)
        .collect();
    let raw: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turns[1].as_str()))
        .map(|e| format!("{} {:?}", e.kind.as_str(), e.payload))
        .collect();
    assert!(!notes.is_empty(), "{raw:#?}");
    assert!(
        notes.contains(&Note::UsageUpdate(ContextUsage {
            used: 2000,
            size: 200000,
            cost: Some(usd(0.5)),
        })),
        "{notes:?}"
    );
    assert!(
        notes.contains(&Note::PromptUsage(TokenUsage {
            total_tokens: 180,
            input_tokens: 100,
            output_tokens: 50,
            thought_tokens: Some(10),
            cached_read_tokens: Some(20),
            cached_write_tokens: None,
        })),
        "{notes:?}"
    );
    // The second turn's cost is its own (0.5 cumulative − 0.25 before).
    let second = client.turns_get(&turns[1]).unwrap().usage.expect("usage");
    assert_eq!(second.cost, Some(usd(0.25)));
    assert_eq!(second.session_cost, Some(usd(0.5)));
    assert_eq!((second.total_tokens, second.cached_read_tokens), (180, 20));
    assert_eq!(
        (second.context_used, second.context_size),
        (Some(2000), Some(200000))
    );
    let shown = server.ctx.run(["turns", "show", &turns[1]]);
    shown.success();
    assert!(
        shown.stdout.contains(
            "usage     180 tokens (in 100, out 50, cached 20, thought 10); context 2000/200000 (1%); cost 0.2500 USD"
        ),
        "{}",
        shown.stdout
    );

    let check = |server: &Server| {
        let snap = server
            .ctx
            .run(["threads", "show", &thread.id, "--json"])
            .json();
        assert_eq!(snap["usage"]["turns"], 2, "{snap}");
        assert_eq!(snap["usage"]["totalTokens"], 360, "{snap}");
        assert_eq!(
            snap["usage"]["cost"],
            json!([{"amount": 0.5, "currency": "USD"}])
        );
        let plain = server.ctx.run(["threads", "show", &thread.id]);
        assert!(
            plain.stdout.contains(
                "usage              360 tokens (in 200, out 100, cached 40, thought 20) over 2 turns; cost 0.5000 USD"
            ),
            "{}",
            plain.stdout
        );
        let s = status(server);
        assert_eq!(s["usage"]["total"]["totalTokens"], 360, "{s}");
        assert_eq!(s["usage"]["workspaces"]["proj"]["turns"], 2, "{s}");
        assert_eq!(
            s["usage"]["applications"]["lapis-cli"]["cost"][0]["amount"], 0.5,
            "{s}"
        );
        let plain = server.ctx.run(["status"]);
        assert!(
            plain.stdout.contains("usage     360 tokens"),
            "{}",
            plain.stdout
        );
    };
    check(&server);
    drop(client);
    server.stop();
    server.spawn();
    check(&server);
    server.finish(&[], &[]);
}

/// qwen-code reports usage only in `_meta.usage` of a message chunk after
/// each model call (no `usage_update`, no `usage` on the prompt response):
/// the turn's record is the sum of its calls, and a thread's token budget
/// sees it, so the next turn fails `budget_exhausted` before its prompt is
/// sent.
#[test]
fn usage_in_chunk_meta_is_summed_into_the_turn_and_budgets_see_it() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let agent = fixture(&["--usage-meta", "--ledger", &crate::acp::arg(&ledger)]);
    let server = Server::start_full(json!({}), json!({ "qwenish": agent }));
    let created = server
        .ctx
        .run([
            "threads",
            "create",
            "proj",
            "--provider",
            "qwenish",
            "--budget-tokens",
            "1",
            "--json",
        ])
        .json();
    let id = created["thread"]["id"].as_str().unwrap().to_owned();
    let mut client = server.client("lapis-cli");
    let first = client.turns_submit(&id, "q-1", "spend").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &first.id, "completed", Some("end_turn"));
    let usage = client.turns_get(&first.id).unwrap().usage.expect("usage");
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.total_tokens,
            usage.thought_tokens,
            usage.cached_read_tokens
        ),
        (250, 50, 305, 5, 40),
        "{usage:?}"
    );
    assert_eq!((usage.context_used, usage.cost), (None, None));
    let second = client.turns_submit(&id, "q-2", "more").unwrap();
    let done =
        lapis_e2e::wait::settles_as(&mut client, &second.id, "failed", Some("budget_exhausted"));
    assert!(done.dispatched_at.is_none(), "the prompt was never sent");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 1);
    server.finish(&[], &[]);
}
