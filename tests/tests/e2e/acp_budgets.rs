//! Budgets at the claim (issue 29): a budget spent by a running turn never
//! interrupts it; the next turn it covers fails `budget_exhausted` at its
//! claim, before the agent is asked anything, and raises attention; a
//! reset lets turns run again.

use lapis_protocol::{ApprovalPolicy, AttentionKind, OutcomeCode};
use serde_json::json;

use crate::acp::arg;
use crate::acp_sessions::fixture;
use crate::serve_support::Server;

#[test]
fn a_budget_spent_mid_day_stops_the_next_claim_not_the_running_turn() {
    let scratch = tempfile::tempdir().unwrap();
    let ledger = scratch.path().join("prompts");
    let agent = fixture(&["--usage", "--chunks", "3", "--ledger", &arg(&ledger)]);
    let server = Server::start_full(json!({}), json!({ "fx": agent }));
    // A daily cost budget for the workspace, below what one turn costs
    // (0.25 USD), added by a reload.
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["budgets"] = json!([{"per": "workspace", "id": "proj", "cost": 0.2, "period": "day"}]);
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    server.ctx.run(["config", "reload"]).success();

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
        page.events
            .iter()
            .filter(|e| e.turn_id.as_deref() == Some(second.id.as_str()))
            .any(|e| AttentionKind::of(e).contains(&AttentionKind::BudgetExhausted)),
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
