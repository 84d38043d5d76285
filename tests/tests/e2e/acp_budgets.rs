//! Budgets at the claim (issue 29): a budget spent by a running turn never
//! interrupts it; the next turn it covers fails `budget_exhausted` at its
//! claim, before the agent is asked anything, and raises attention; a
//! reset lets turns run again.

use lapis_protocol::{ApprovalPolicy, AttentionKind, OutcomeCode};
use serde_json::json;

use crate::acp::arg;
use crate::acp_sessions::fixture;
use crate::serve_support::Server;

/// Whether an event of `turn` in `events` raises `budget_exhausted`
/// attention.
fn budget_attention(events: &[lapis_protocol::JournalEvent], turn: &str) -> bool {
    events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .any(|e| AttentionKind::of(e).contains(&AttentionKind::BudgetExhausted))
}

#[test]
fn a_budget_spent_mid_day_stops_the_next_claim_not_the_running_turn() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let agent = fixture(&["--usage", "--chunks", "3", "--ledger", &arg(&ledger)]);
    let server = Server::start_full(json!({}), json!({ "fx": agent }));
    // A daily cost budget for the workspace, below what one turn costs
    // (0.25 USD), added by a reload.
    server.reconfigure(|doc| {
        doc["budgets"] = json!([{"per": "workspace", "id": "proj", "cost": 0.2, "period": "day"}]);
    });

    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "fx", ApprovalPolicy::Ask, None)
        .unwrap();
    let first = client.turns_submit(&thread.id, "b-1", "spend").unwrap();
    let second = client.turns_submit(&thread.id, "b-2", "more").unwrap();
    // The running turn spends the budget (its usage_update comes before
    // its reply) and completes all the same.
    lapis_e2e::wait::settles_as(&mut client, &first.id, "completed", Some("end_turn"));
    let done =
        lapis_e2e::wait::settles_as(&mut client, &second.id, "failed", Some("budget_exhausted"));
    assert_eq!(done.outcome_code(), Some(OutcomeCode::BudgetExhausted));
    assert!(done.dispatched_at.is_none(), "the prompt was never sent");
    let prompts = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(
        prompts.lines().count(),
        1,
        "the agent saw the second turn: {prompts}"
    );
    // It is an attention event.
    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    assert!(
        budget_attention(&page.events, &second.id),
        "no budget_exhausted attention"
    );
    let shown = server.ctx.run(["budgets", "show", "--json"]).json();
    let b = &shown["budgets"][0];
    assert_eq!(b["key"], "workspace:proj:day", "{shown}");
    assert_eq!(b["spent"][0]["exhausted"], true, "{shown}");
    assert_eq!(b["spent"][0]["cost"], 0.25, "{shown}");
    let plain = server.ctx.run(["budgets", "show"]);
    assert!(
        plain
            .stdout
            .contains("\tproj\t180\t0.2500 USD\tspent: new turns fail budget_exhausted\n"),
        "{}",
        plain.stdout
    );
    // A reset counts from now: the next turn runs.
    server
        .ctx
        .run(["budgets", "reset", "workspace:proj:day"])
        .success();
    let unknown = server.ctx.run(["budgets", "reset", "thread:nope:day"]);
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    let third = client.turns_submit(&thread.id, "b-3", "again").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &third.id, "completed", Some("end_turn"));
    server.finish(&[], &[]);
}

/// A thread's own budget (`threads create --budget-tokens`) is checked at
/// the claim like a configured one, as `thread:ID:total`: shown by
/// `threads show` and `budgets show`, journaled on the thread, reset by
/// `budgets reset`, cleared by `threads configure --clear-budget`.
#[test]
fn a_threads_own_budget_stops_its_next_claim_and_is_shown_reset_and_cleared() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let agent = fixture(&["--usage", "--ledger", &arg(&ledger)]);
    let server = Server::start_full(json!({}), json!({ "fx": agent }));
    let created = server
        .ctx
        .run([
            "threads",
            "create",
            "proj",
            "--provider",
            "fx",
            "--budget-tokens",
            "100",
            "--json",
        ])
        .json();
    let id = created["thread"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        created["thread"]["budget"],
        json!({"tokens": 100}),
        "{created}"
    );
    let bad = server.ctx.run([
        "threads",
        "create",
        "proj",
        "--provider",
        "fx",
        "--budget-cost=-1",
    ]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("budget"), "{}", bad.stderr);

    let mut client = server.client("lapis-cli");
    // One turn spends 180 tokens: it completes, the next is refused.
    let first = client.turns_submit(&id, "tb-1", "spend").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &first.id, "completed", Some("end_turn"));
    let second = client.turns_submit(&id, "tb-2", "more").unwrap();
    let done =
        lapis_e2e::wait::settles_as(&mut client, &second.id, "failed", Some("budget_exhausted"));
    assert!(done.dispatched_at.is_none(), "the prompt was never sent");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap().lines().count(), 1);
    let page = client.journal_replay(Some(&id), 0, None).unwrap();
    assert!(
        budget_attention(&page.events, &second.id),
        "no budget_exhausted attention"
    );
    let created_event = page
        .events
        .iter()
        .find(|e| e.kind.as_str() == "thread_created")
        .expect("thread_created");
    assert_eq!(
        created_event.payload.as_ref().unwrap()["budget"],
        json!({"tokens": 100})
    );

    let key = format!("thread:{id}:total");
    let shown = server.ctx.run(["budgets", "show", "--json"]).json();
    let own = shown["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["key"] == key.as_str())
        .unwrap_or_else(|| panic!("no {key} in {shown}"));
    assert_eq!(own["spent"][0]["tokens"], 180, "{shown}");
    assert_eq!(own["spent"][0]["exhausted"], true, "{shown}");
    let plain = server.ctx.run(["threads", "show", &id]);
    assert!(
        plain.stdout.contains("budget             100 tokens"),
        "{}",
        plain.stdout
    );

    // A reset of its key counts from now: the next turn runs (and spends
    // it again).
    server.ctx.run(["budgets", "reset", &key]).success();
    let third = client.turns_submit(&id, "tb-3", "again").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &third.id, "completed", Some("end_turn"));
    // Cleared, it no longer counts: spent or not, turns run.
    let cleared = server
        .ctx
        .run([
            "threads",
            "configure",
            &id,
            "--expected-version",
            "1",
            "--clear-budget",
            "--json",
        ])
        .json();
    assert!(cleared["thread"].get("budget").is_none(), "{cleared}");
    let fourth = client.turns_submit(&id, "tb-4", "free").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &fourth.id, "completed", Some("end_turn"));
    let gone = server.ctx.run(["budgets", "reset", &key]);
    assert_eq!(gone.code, Some(2), "{}", gone.stderr);
    server.finish(&[], &[]);
}

/// A per-turn ceiling (`period: "turn"`) stops a running turn whose
/// `usage_update` reaches it, through the cancel path (a
/// `cancel_requested` by the controller, the agent's `cancelled`): the
/// turn ends `cancelled` with outcome `budget_exhausted` and raises
/// attention; a turn under the ceiling completes, and the ceiling is never
/// a claim-time budget.
#[test]
fn a_per_turn_ceiling_stops_a_running_turn_through_its_cancel() {
    let expensive = fixture(&["--usage", "--usage-cost", "0.5", "--hang"]);
    let cheap = fixture(&["--usage", "--usage-cost", "0.1"]);
    let server = Server::start_full(json!({}), json!({ "fx": expensive, "cheap": cheap }));
    server.reconfigure(|doc| {
        doc["budgets"] = json!([{"per": "workspace", "id": "proj", "cost": 0.3, "period": "turn"}]);
    });

    let mut client = server.client("lapis-cli");
    let thread = client
        .threads_create("proj", "fx", ApprovalPolicy::Ask, None)
        .unwrap();
    // The agent reports 0.5 USD, then works until it is cancelled.
    let turn = client.turns_submit(&thread.id, "c-1", "spend").unwrap();
    let done =
        lapis_e2e::wait::settles_as(&mut client, &turn.id, "cancelled", Some("budget_exhausted"));
    assert!(done.dispatched_at.is_some(), "it ran");
    let page = client.journal_replay(Some(&thread.id), 0, None).unwrap();
    let of_turn: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.turn_id.as_deref() == Some(turn.id.as_str()))
        .collect();
    assert!(
        of_turn
            .iter()
            .any(|e| e.kind.as_str() == "cancel_requested"),
        "not stopped through the cancel path"
    );
    assert!(
        budget_attention(&page.events, &turn.id),
        "no budget_exhausted attention"
    );
    // Under the ceiling a turn completes; the stopped turn's spending does
    // not refuse the next claim.
    let thread = client
        .threads_create("proj", "cheap", ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "c-2", "cheap").unwrap();
    lapis_e2e::wait::settles_as(&mut client, &turn.id, "completed", Some("end_turn"));
    let shown = server.ctx.run(["budgets", "show", "--json"]).json();
    assert_eq!(shown["budgets"][0]["key"], "workspace:proj:turn", "{shown}");
    assert_eq!(shown["budgets"][0]["spent"], json!([]), "{shown}");
    let plain = server.ctx.run(["budgets", "show"]);
    assert!(plain.stdout.contains("per turn"), "{}", plain.stdout);
    let reset = server.ctx.run(["budgets", "reset", "workspace:proj:turn"]);
    assert_eq!(reset.code, Some(2), "{}", reset.stderr);
    server.finish(&[], &[]);
}
