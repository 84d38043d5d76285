//! Unit tests of the engine's pure parts; the engine with real agents is
//! tested end to end in `tests/tests/e2e/acp_engine.rs`.

use super::outcome::{stopped_end, turn_end};
use crate::acp::TurnOutcome;
use crate::domain::TurnEnd;

#[test]
fn outcomes_map_to_turn_ends() {
    let cases = [
        (
            TurnOutcome::Completed {
                stop_reason: "end_turn".into(),
            },
            false,
            TurnEnd::Completed("end_turn".into()),
        ),
        (
            TurnOutcome::Cancelled { dispatched: true },
            true,
            TurnEnd::Cancelled(lapis_protocol::OutcomeCode::Cancelled),
        ),
        (
            TurnOutcome::Cancelled { dispatched: false },
            true,
            TurnEnd::Cancelled(lapis_protocol::OutcomeCode::CancelledBeforeDispatch),
        ),
        (
            TurnOutcome::Failed {
                code: lapis_protocol::OutcomeCode::BoundaryNotPersisted,
                dispatched: false,
            },
            true,
            TurnEnd::Cancelled(lapis_protocol::OutcomeCode::CancelledBeforeDispatch),
        ),
        (
            TurnOutcome::Failed {
                code: lapis_protocol::OutcomeCode::BoundaryNotPersisted,
                dispatched: false,
            },
            false,
            TurnEnd::Failed(lapis_protocol::OutcomeCode::BoundaryNotPersisted),
        ),
        (
            TurnOutcome::Failed {
                code: lapis_protocol::OutcomeCode::AgentError,
                dispatched: true,
            },
            false,
            TurnEnd::Failed(lapis_protocol::OutcomeCode::AgentError),
        ),
        (
            TurnOutcome::SubmissionUnknown {
                code: lapis_protocol::OutcomeCode::BrokenPipe,
            },
            false,
            TurnEnd::Unknown(lapis_protocol::OutcomeCode::BrokenPipe),
        ),
        (
            TurnOutcome::Interrupted,
            true,
            TurnEnd::Interrupted(lapis_protocol::OutcomeCode::CancelDeadline),
        ),
    ];
    for (outcome, cancel, want) in cases {
        assert_eq!(turn_end(&outcome, cancel), want, "{outcome:?}");
    }
}

#[test]
fn providers_from_config_json_are_validated() {
    use super::EngineConfig;
    let ok =
        serde_json::json!({"claude": {"command": "claude-code-acp", "envAllowlist": ["PATH"]}});
    let specs = EngineConfig::providers_from_json(&ok).unwrap();
    assert_eq!(specs["claude"].env_allowlist, ["PATH"]);
    let config =
        EngineConfig::new(specs).with_builtin_echo("/opt/lapis/bin/lapis-ai-controller".into());
    assert_eq!(config.providers["echo"].args, ["acp-echo"]);
    let bad = serde_json::json!({"x": {"command": "rel/agent"}});
    assert!(EngineConfig::providers_from_json(&bad).is_err());
    // A configured `echo` wins over the built-in.
    let own = serde_json::json!({"echo": {"command": "/usr/bin/my-echo"}});
    let config = EngineConfig::new(EngineConfig::providers_from_json(&own).unwrap())
        .with_builtin_echo("/x".into());
    assert!(config.providers["echo"].args.is_empty());
}

/// A stopped turn (deadline, per-turn budget ceiling) carries its stop's
/// reason in whatever unconfirmed end it reached, and never overrides a
/// completion or an agent's failure.
#[test]
fn a_stop_marks_every_unconfirmed_end_and_never_a_completion() {
    use lapis_protocol::OutcomeCode as C;
    for code in [C::DeadlineExceeded, C::BudgetExhausted] {
        assert_eq!(
            stopped_end(TurnEnd::Cancelled(C::Cancelled), code),
            TurnEnd::Cancelled(code)
        );
        assert_eq!(
            stopped_end(TurnEnd::Interrupted(C::CancelDeadline), code),
            TurnEnd::Interrupted(code)
        );
        assert_eq!(
            stopped_end(TurnEnd::Unknown(C::AgentExited), code),
            TurnEnd::Interrupted(code)
        );
        for kept in [
            TurnEnd::Completed("end_turn".into()),
            TurnEnd::Failed(C::AgentError),
        ] {
            assert_eq!(stopped_end(kept.clone(), code), kept);
        }
    }
}

/// The early exits of `run_claim` on a real store: a turn without a
/// configured provider and one whose MCP servers were refused both settle
/// failed, and the claim's running slot and permit are back afterwards
/// (the guard's own test drives every exit, panics and aborts included).
#[tokio::test]
async fn early_exits_of_a_claim_release_its_running_slot() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use crate::domain::{ProviderFacts, Retention, TurnState};
    use crate::store::tests::{fixture, owner, submit, thread, workspace};

    let fx = fixture().await;
    let ws = workspace(&fx.store, fx.dir.path(), "w1").await;
    let engine = super::Engine::new(
        fx.store.clone(),
        super::EngineConfig::new(Default::default()),
    );
    let refusal = lapis_protocol::mcp::McpRefusal::Invalid {
        position: 1,
        reason: "test refusal",
    };
    let spec = crate::acp::ProviderSpec::builtin_echo("/bin/true".into());
    let refused = ProviderFacts {
        fingerprint: "0".repeat(64),
        mcp_servers: Vec::new(),
        mcp: Err(refusal.into()),
        spec,
    };
    let want_code = lapis_protocol::ErrorCode::McpServerInvalid
        .as_str()
        .to_owned();
    for (n, facts, code) in [
        (1, None, "unknown_provider".to_owned()),
        (2, Some(refused), want_code),
    ] {
        let th = thread(&fx.store, &ws.id, Retention::Full).await;
        let turn = fx
            .store
            .submit_turn(&owner(), submit(&th.id, &format!("c{n}"), "hi"))
            .await
            .unwrap()
            .value;
        let mut claim = fx.store.try_claim().await.unwrap().expect("runnable");
        assert_eq!(claim.turn.id, turn.id);
        claim.provider = facts;
        let permit = engine.slots.clone().acquire_owned().await.unwrap();
        let settled = Arc::new(AtomicBool::new(false));
        engine
            .clone()
            .run_claim(claim, Arc::default(), settled, permit)
            .await;
        let status = engine.status();
        assert_eq!(status.running_turns, 0, "running slot of exit {n}");
        assert_eq!(
            engine.slots.available_permits(),
            status.max_running_turns,
            "permit of exit {n}"
        );
        let after = fx.store.get_turn(&turn.id).await.unwrap();
        assert_eq!(after.state, TurnState::Failed);
        assert_eq!(after.outcome.as_deref(), Some(code.as_str()));
    }
}

/// Release first, then report (issue 24): a subscriber that reads the
/// status on seeing a turn's final event finds neither its running slot
/// taken nor its workspace running. On a current-thread runtime the
/// subscriber, woken by the event, runs before the worker resumes from
/// the end's reply, so a slot given back only after the end was written
/// is still counted when the subscriber looks.
#[tokio::test(flavor = "current_thread")]
async fn status_never_shows_a_turn_running_after_its_final_event() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use crate::domain::Retention;
    use crate::store::tests::{fixture, owner, submit, thread, workspace};
    use lapis_protocol::Payload;

    let fx = fixture().await;
    let ws = workspace(&fx.store, fx.dir.path(), "w1").await;
    let engine = super::Engine::new(
        fx.store.clone(),
        super::EngineConfig::new(Default::default()),
    );
    let th = thread(&fx.store, &ws.id, Retention::Full).await;
    let turn = fx
        .store
        .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
        .await
        .unwrap()
        .value;
    let mut claim = fx.store.try_claim().await.unwrap().expect("runnable");
    // No provider facts: the claim ends at once, failed, like any end.
    claim.provider = None;
    let mut events = fx.store.subscribe();
    let (store, watcher) = (fx.store.clone(), engine.clone());
    let turn_id = turn.id.clone();
    let seen = tokio::spawn(async move {
        loop {
            let e = events.recv().await.unwrap();
            let is_final = e.turn_id.as_deref() == Some(turn_id.as_str())
                && matches!(e.body(), Some(Payload::TurnState(c)) if c.to.is_terminal());
            if is_final {
                return (
                    watcher.status().running_turns,
                    store.status().running_workspaces,
                );
            }
        }
    });
    let permit = engine.slots.clone().acquire_owned().await.unwrap();
    let run = tokio::spawn(engine.clone().run_claim(
        claim,
        Arc::default(),
        Arc::new(AtomicBool::new(false)),
        permit,
    ));
    let (running, workspaces) = seen.await.unwrap();
    run.await.unwrap();
    assert_eq!(running, 0, "the running slot is free when the end is seen");
    assert!(workspaces.is_empty(), "{workspaces:?}");
}

/// Budgets fail closed (issue 43): a budget covering the claimed turn
/// whose spending cannot be read (its table gone from under the store)
/// fails the turn `budget_unavailable` before anything else is asked —
/// here, before the MCP refusal the same claim would otherwise end with.
#[tokio::test]
async fn a_budget_that_cannot_be_read_fails_the_turn_before_dispatch() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use crate::domain::{ProviderFacts, Retention, TurnState};
    use crate::store::tests::{fixture, owner, submit, thread, workspace};
    use lapis_protocol::config::{Budget, BudgetPeriod, BudgetScope};

    let fx = fixture().await;
    let ws = workspace(&fx.store, fx.dir.path(), "w1").await;
    let engine = super::Engine::new(
        fx.store.clone(),
        super::EngineConfig::new(Default::default()),
    );
    engine.replace_budgets(vec![Budget {
        per: BudgetScope::All,
        id: None,
        tokens: Some(1_000),
        cost: None,
        currency: None,
        period: BudgetPeriod::Total,
    }]);
    let th = thread(&fx.store, &ws.id, Retention::Full).await;
    let turn = fx
        .store
        .submit_turn(&owner(), submit(&th.id, "c1", "hi"))
        .await
        .unwrap()
        .value;
    let mut claim = fx.store.try_claim().await.unwrap().expect("runnable");
    // Facts that would end the claim at its MCP step, after the budgets.
    let refusal = lapis_protocol::mcp::McpRefusal::Invalid {
        position: 1,
        reason: "test refusal",
    };
    claim.provider = Some(ProviderFacts {
        fingerprint: "0".repeat(64),
        mcp_servers: Vec::new(),
        mcp: Err(refusal.into()),
        spec: crate::acp::ProviderSpec::builtin_echo("/bin/true".into()),
    });
    // The spending query reads `budget_resets`: without it the read fails.
    let db = fx.dir.path().join("home").join("controller.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("DROP TABLE budget_resets")
        .unwrap();
    let permit = engine.slots.clone().acquire_owned().await.unwrap();
    engine
        .clone()
        .run_claim(
            claim,
            Arc::default(),
            Arc::new(AtomicBool::new(false)),
            permit,
        )
        .await;
    let after = fx.store.get_turn(&turn.id).await.unwrap();
    assert_eq!(after.state, TurnState::Failed);
    assert_eq!(after.outcome.as_deref(), Some("budget_unavailable"));
    assert!(after.dispatched_at.is_none(), "never reached its boundary");
    assert_eq!(engine.status().running_turns, 0);
}
