//! Keys: permission answers, cancel and resolve.

use super::*;

#[test]
fn permission_keys_answer_with_an_offered_option_of_their_kind() {
    let mut view = loaded(
        vec![turn("turn_a", "proj", TurnState::Running, NOW - 5_000)],
        vec![],
    );
    // No request yet: nothing is answered, the footer says why.
    assert_eq!(view.key(Key::Char('a')), None);
    assert!(
        view.message
            .as_deref()
            .unwrap()
            .contains("waits for no permission")
    );
    view.apply(&asked(
        1,
        "turn_a",
        "perm-0",
        &["allow_always", "allow_once", "reject_once"],
    ));
    assert_eq!(view.pending_count(), 1);
    let respond = |option: &str| {
        Some(Action::Respond {
            turn: "turn_a".into(),
            request: "perm-0".into(),
            option: option.into(),
        })
    };
    assert_eq!(view.key(Key::Char('a')), respond("opt-allow_once"));
    assert_eq!(view.key(Key::Char('A')), respond("opt-allow_always"));
    assert_eq!(view.key(Key::Char('r')), respond("opt-reject_once"));
    // Answered elsewhere (another client): gone from the view.
    view.apply(&decided(2, "turn_a", "perm-0"));
    assert_eq!(view.pending_count(), 0);
    // A request without the kind asked for is not answered.
    view.apply(&asked(
        3,
        "turn_a",
        "perm-1",
        &["allow_once", "reject_always"],
    ));
    assert_eq!(view.key(Key::Char('A')), None);
    assert!(
        view.message
            .as_deref()
            .unwrap()
            .contains("offers no `allow always` option")
    );
    assert_eq!(
        view.key(Key::Char('r')),
        Some(Action::Respond {
            turn: "turn_a".into(),
            request: "perm-1".into(),
            option: "opt-reject_always".into(),
        })
    );
    // A turn that ends takes its requests with it.
    view.apply(&state(4, "turn_a", "running", "cancelled", "cancel"));
    assert_eq!(view.pending_count(), 0);
}

#[test]
fn pending_requests_from_the_snapshot_are_answerable_and_p_finds_them() {
    let request: PendingRequest = serde_json::from_value(json!({
        "id": "perm-7", "turnId": "turn_old", "threadId": "thr", "workspaceId": "proj",
        "requestedAt": lapis_protocol::time::format_ms(NOW),
        "toolCall": {"id": "c", "title": "Write"},
        "options": [{"id": "o1", "name": "Yes", "kind": "allow_once"}],
        "deadline": lapis_protocol::time::format_ms(NOW + 60_000),
    }))
    .unwrap();
    let mut view = loaded(
        vec![
            turn("turn_old", "proj", TurnState::Running, NOW - 9_000),
            turn("turn_new", "other", TurnState::Running, NOW - 1_000),
        ],
        vec![request],
    );
    assert_eq!(view.selected.as_deref(), Some("turn_new"));
    // `p` moves to the turn that waits; its transcript is replayed.
    assert_eq!(
        view.key(Key::Char('p')),
        Some(Action::Load {
            turn: "turn_old".into(),
            thread: "thr".into()
        })
    );
    assert_eq!(
        view.key(Key::Char('a')),
        Some(Action::Respond {
            turn: "turn_old".into(),
            request: "perm-7".into(),
            option: "o1".into(),
        })
    );
}

#[test]
fn cancel_acts_only_on_a_turn_that_can_still_be_cancelled() {
    let mut view = loaded(
        vec![turn("turn_a", "proj", TurnState::Running, NOW)],
        vec![],
    );
    // `c` asks first; anything but `y` cancels nothing.
    assert_eq!(view.key(Key::Char('c')), None);
    assert_eq!(
        view.mode,
        Mode::ConfirmCancel {
            turn: "turn_a".into()
        }
    );
    assert_eq!(view.key(Key::Char('n')), None);
    assert_eq!(view.mode, Mode::Normal);
    assert!(
        view.message
            .as_deref()
            .unwrap()
            .contains("nothing cancelled")
    );
    assert_eq!(view.key(Key::Char('c')), None);
    assert_eq!(view.key(Key::Enter), None);
    assert_eq!(view.key(Key::Char('c')), None);
    assert_eq!(
        view.key(Key::Char('y')),
        Some(Action::Cancel {
            turn: "turn_a".into()
        })
    );
    view.apply(&ev(
        1,
        Some("turn_a"),
        EventKind::CancelRequested,
        json!({"principal": "owner", "application": "lapis-cli"}),
    ));
    assert!(view.turns["turn_a"].cancel_requested);
    for (to, event) in [
        ("cancelled", "cancel"),
        ("submission_unknown", "lose_outcome"),
    ] {
        let mut view = loaded(
            vec![turn("turn_a", "proj", TurnState::Running, NOW)],
            vec![],
        );
        view.apply(&state(1, "turn_a", "running", to, event));
        assert_eq!(view.key(Key::Char('c')), None, "{to}");
        assert!(
            view.message
                .as_deref()
                .unwrap()
                .contains("nothing to cancel")
        );
    }
}

#[test]
fn a_fence_is_resolved_only_after_the_outcome_is_typed() {
    let mut view = loaded(
        vec![turn("turn_a", "proj", TurnState::Running, NOW)],
        vec![],
    );
    // Not fenced: R does nothing.
    assert_eq!(view.key(Key::Char('R')), None);
    assert_eq!(view.mode, Mode::Normal);
    view.apply(&state(
        1,
        "turn_a",
        "running",
        "submission_unknown",
        "lose_outcome",
    ));
    assert_eq!(view.workspace_state("proj"), WorkspaceState::Fenced);
    assert_eq!(view.key(Key::Char('R')), None);
    assert!(matches!(view.mode, Mode::Resolve { .. }));
    // Keys are text now: `q` does not quit, `c` does not cancel.
    for c in "cancel".chars() {
        assert_eq!(view.key(Key::Char(c)), None);
    }
    assert_eq!(view.key(Key::Enter), None, "`cancel` is not an outcome");
    assert!(
        view.message
            .as_deref()
            .unwrap()
            .contains("type `failed` or `cancelled`")
    );
    assert!(matches!(&view.mode, Mode::Resolve { input, .. } if input.is_empty()));
    for c in "cancelledx".chars() {
        view.key(Key::Char(c));
    }
    view.key(Key::Backspace);
    assert_eq!(
        view.key(Key::Enter),
        Some(Action::Resolve {
            turn: "turn_a".into(),
            resolve_as: ResolveAs::Cancelled
        })
    );
    assert_eq!(view.mode, Mode::Normal);
    // Esc leaves without resolving; `failed` records failed.
    view.key(Key::Char('R'));
    view.key(Key::Char('f'));
    assert_eq!(view.key(Key::Esc), None);
    assert_eq!(view.mode, Mode::Normal);
    view.key(Key::Char('R'));
    for c in "failed".chars() {
        view.key(Key::Char(c));
    }
    assert_eq!(
        view.key(Key::Enter),
        Some(Action::Resolve {
            turn: "turn_a".into(),
            resolve_as: ResolveAs::Failed
        })
    );
    // The resolution's journal event settles the turn and frees the workspace.
    view.apply(&ev(
        2,
        Some("turn_a"),
        EventKind::TurnResolved,
        json!({
        "as": "failed", "from": "submission_unknown", "via": "resolve",
        "principal": "owner", "application": "lapis-cli"}),
    ));
    assert_eq!(view.workspace_state("proj"), WorkspaceState::Idle);
}

#[test]
fn question_mark_shows_the_keys_and_any_key_closes_them() {
    let mut view = loaded(
        vec![turn("turn_a", "proj", TurnState::Running, NOW)],
        vec![],
    );
    assert_eq!(view.key(Key::Char('?')), None);
    assert_eq!(view.mode, Mode::Help);
    let text = screen(&view, 100, 30).join("\n");
    assert!(text.contains("keys (any key closes)"), "{text}");
    assert!(text.contains("filter turns by id, workspace"), "{text}");
    // `q` closes the overlay, it does not quit.
    assert_eq!(view.key(Key::Char('q')), None);
    assert_eq!(view.mode, Mode::Normal);
    let text = screen(&view, 100, 30).join("\n");
    assert!(!text.contains("keys (any key closes)"), "{text}");
}

#[test]
fn slash_filters_the_turns_as_typed_and_esc_clears_it() {
    let mut view = loaded(
        vec![
            turn("turn_a", "proj", TurnState::Running, NOW),
            turn("turn_b", "other", TurnState::Completed, NOW - 1_000),
        ],
        vec![],
    );
    assert_eq!(view.ordered().len(), 2);
    assert_eq!(view.key(Key::Char('/')), None);
    for c in "oth".chars() {
        assert_eq!(view.key(Key::Char(c)), None);
    }
    let ids: Vec<&str> = view.ordered().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["turn_b"]);
    // Enter keeps it; keys act again; `j`/`k` move among what is shown.
    assert_eq!(view.key(Key::Enter), None);
    assert_eq!(view.mode, Mode::Normal);
    assert!(view.message.as_deref().unwrap().contains("matching `oth`"));
    let text = screen(&view, 100, 30).join("\n");
    assert!(text.contains("turns matching `oth`"), "{text}");
    // By state too, case-insensitively.
    view.key(Key::Char('/'));
    for _ in 0..3 {
        view.key(Key::Backspace);
    }
    for c in "RUNNING".chars() {
        view.key(Key::Char(c));
    }
    let ids: Vec<&str> = view.ordered().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["turn_a"]);
    assert_eq!(view.key(Key::Esc), None);
    assert_eq!(view.mode, Mode::Normal);
    assert!(view.filter.is_empty());
    assert_eq!(view.ordered().len(), 2);
}
