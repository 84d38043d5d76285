//! The view model: workspace state, events, the streaming reply, selection
//! and bounds.

use super::*;

#[test]
fn workspace_state_is_derived_from_its_turns_and_a_fence_wins() {
    let at = |n: i64| NOW - 60_000 + n;
    let cases: &[(&[TurnState], WorkspaceState, &str)] = &[
        (&[], WorkspaceState::Idle, "idle"),
        (
            &[TurnState::Completed, TurnState::Failed],
            WorkspaceState::Idle,
            "idle",
        ),
        (
            &[TurnState::Running],
            WorkspaceState::Running { queued: 0 },
            "running",
        ),
        (
            &[TurnState::Preparing, TurnState::Queued, TurnState::Queued],
            WorkspaceState::Running { queued: 2 },
            "running, queued 2",
        ),
        (
            &[TurnState::Dispatched],
            WorkspaceState::Running { queued: 0 },
            "running",
        ),
        (&[TurnState::Queued], WorkspaceState::Queued(1), "queued 1"),
        (
            &[TurnState::SubmissionUnknown, TurnState::Queued],
            WorkspaceState::Fenced,
            "fenced",
        ),
        (&[TurnState::Interrupted], WorkspaceState::Fenced, "fenced"),
    ];
    for (states, want, label) in cases {
        let turns = states
            .iter()
            .enumerate()
            .map(|(i, s)| turn(&format!("turn_{i}"), "proj", *s, at(i as i64)))
            .collect();
        let view = loaded(turns, vec![]);
        assert_eq!(view.workspace_state("proj"), *want, "{states:?}");
        assert_eq!(view.workspace_state("proj").label(), *label);
        assert_eq!(view.workspace_state("other"), WorkspaceState::Idle);
    }
}

#[test]
fn events_move_turns_and_an_event_the_snapshot_reflects_changes_nothing() {
    let mut view = loaded(
        vec![turn("turn_a", "proj", TurnState::Queued, NOW - 20_000)],
        vec![],
    );
    assert_eq!(view.selected.as_deref(), Some("turn_a"));
    assert_eq!(view.version, "9.9.9");
    // The submission the snapshot already holds: still one turn, still queued.
    view.apply(&submitted(1, "turn_a"));
    assert_eq!(view.turns.len(), 1);
    assert_eq!(view.turns["turn_a"].state, TurnState::Queued);
    view.apply(&state(2, "turn_a", "queued", "preparing", "claim"));
    view.apply(&state(3, "turn_a", "preparing", "dispatched", "dispatch"));
    view.apply(&state(4, "turn_a", "dispatched", "running", "start"));
    assert_eq!(view.turns["turn_a"].state, TurnState::Running);
    assert!(view.turns["turn_a"].in_flight());
    // A new turn on the thread: listed (newest first), selection kept.
    view.apply(&submitted(5, "turn_b"));
    assert_eq!(view.turns["turn_b"].workspace, "proj");
    assert_eq!(view.turns["turn_b"].state, TurnState::Queued);
    assert_eq!(view.selected.as_deref(), Some("turn_a"));
    let order: Vec<&str> = view.ordered().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(order, ["turn_b", "turn_a"]);
    assert_eq!(
        view.workspace_state("proj"),
        WorkspaceState::Running { queued: 1 }
    );
    let mut done = state(6, "turn_a", "running", "completed", "complete");
    done.payload.as_mut().unwrap()["outcome"] = json!("end_turn");
    view.apply(&done);
    let a = &view.turns["turn_a"];
    assert_eq!(
        (a.state, a.outcome.as_deref()),
        (TurnState::Completed, Some("end_turn"))
    );
    assert_eq!(
        a.elapsed(NOW),
        Some(a.finished_at.unwrap() - a.started_at.unwrap())
    );
    // The provider comes through the thread.
    assert_eq!(view.provider(&view.turns["turn_b"]), "fixture");
}

#[test]
fn a_reply_streams_as_running_text_with_thoughts_and_tool_calls_apart() {
    let mut view = loaded(vec![], vec![]);
    view.apply(&submitted(1, "turn_a"));
    view.apply(&chunk(2, "turn_a", EventKind::ThoughtChunk, "let me "));
    view.apply(&chunk(3, "turn_a", EventKind::ThoughtChunk, "think"));
    view.apply(&chunk(4, "turn_a", EventKind::MessageChunk, "Hello "));
    view.apply(&chunk(5, "turn_a", EventKind::MessageChunk, "world"));
    let tool = |seq, status: &str| {
        ev(
            seq,
            Some("turn_a"),
            EventKind::ToolCall,
            json!({"id": "call-1", "title": "Read file", "kind": "read", "status": status}),
        )
    };
    view.apply(&tool(6, "pending"));
    view.apply(&tool(7, "completed"));
    view.apply(&chunk(8, "turn_a", EventKind::MessageChunk, "!"));
    // The same event twice (a replay overlapping the stream) is taken once.
    assert!(!view.apply(&chunk(8, "turn_a", EventKind::MessageChunk, "!")));
    let t = &view.transcripts["turn_a"];
    assert!(t.complete, "seen from its submission");
    assert_eq!(
        t.entries,
        [
            Entry::Thought("let me think".into()),
            Entry::Reply("Hello world".into()),
            Entry::Tool {
                id: "call-1".into(),
                line: "Read file [read]: completed".into()
            },
            Entry::Reply("!".into()),
        ]
    );
}

#[test]
fn agent_text_is_made_terminal_safe_before_it_is_stored() {
    let mut view = loaded(vec![], vec![]);
    view.apply(&submitted(1, "turn_a"));
    view.apply(&chunk(
        2,
        "turn_a",
        EventKind::MessageChunk,
        "a\u{1b}]0;pwned\u{7}b\r\n\tc\u{9b}2J\rd",
    ));
    view.apply(&asked(3, "turn_a", "perm-0", &["allow_once"]));
    let Entry::Reply(text) = &view.transcripts["turn_a"].entries[0] else {
        panic!("no reply entry");
    };
    assert_eq!(text, "a␛]0;pwned␇b\n    c␛[2J␍d");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert_eq!(view.pending["turn_a"][0].title, "Run ␛[2Kcommand");
}

#[test]
fn selection_moves_by_keys_and_asks_for_an_incomplete_transcript() {
    let mut view = loaded(
        vec![
            turn("turn_1", "proj", TurnState::Completed, NOW - 3_000),
            turn("turn_2", "proj", TurnState::Running, NOW - 2_000),
        ],
        vec![],
    );
    assert_eq!(view.selected.as_deref(), Some("turn_2"));
    // A live chunk of a turn that began before the watch: incomplete.
    view.apply(&chunk(9, "turn_2", EventKind::MessageChunk, "tail"));
    assert!(!view.transcripts["turn_2"].complete);
    assert_eq!(
        view.key(Key::Up),
        Some(Action::Load {
            turn: "turn_2".into(),
            thread: "thr".into()
        })
    );
    assert_eq!(
        view.key(Key::Down),
        Some(Action::Load {
            turn: "turn_1".into(),
            thread: "thr".into()
        })
    );
    assert_eq!(view.selected.as_deref(), Some("turn_1"));
    // At the end of the list the selection stays.
    view.key(Key::Char('j'));
    assert_eq!(view.selected.as_deref(), Some("turn_1"));
    view.key(Key::Char('k'));
    // The replay replaces the transcript; the live event already seen is
    // not taken twice.
    view.loaded(
        "turn_2",
        &[
            chunk(7, "turn_2", EventKind::MessageChunk, "head "),
            chunk(9, "turn_2", EventKind::MessageChunk, "tail"),
            chunk(8, "turn_1", EventKind::MessageChunk, "other turn"),
        ],
    );
    assert!(!view.apply(&chunk(9, "turn_2", EventKind::MessageChunk, "tail")));
    view.apply(&chunk(10, "turn_2", EventKind::MessageChunk, "!"));
    let t = &view.transcripts["turn_2"];
    assert!(t.complete);
    assert_eq!(t.entries, [Entry::Reply("head tail!".into())]);
    assert_eq!(view.key(Key::Char('q')), Some(Action::Quit));
    assert_eq!(view.key(Key::Interrupt), Some(Action::Quit));
}

#[test]
fn memory_is_bounded_in_turns_and_transcripts() {
    let mut view = loaded(vec![], vec![]);
    for i in 0..(MAX_SETTLED as u64 + 20) {
        let id = format!("turn_{i:04}");
        view.apply(&submitted(i * 3 + 1, &id));
        view.apply(&state(i * 3 + 2, &id, "running", "completed", "complete"));
    }
    view.apply(&submitted(10_000, "turn_live"));
    // The newest settled ones, every live one, and the selected one (the
    // first seen) however old.
    assert_eq!(view.turns.len(), MAX_SETTLED + 2);
    assert!(view.turns.contains_key("turn_live"));
    assert!(view.turns.contains_key("turn_0000"));
    assert!(!view.turns.contains_key("turn_0001"));
    assert!(!view.transcripts.contains_key("turn_0001"));
    let mut seq = 20_000;
    for _ in 0..(MAX_ENTRIES + 10) {
        seq += 1;
        view.apply(&ev(
            seq,
            Some("turn_live"),
            EventKind::ToolCall,
            json!({"id": format!("c{seq}"), "title": "t"}),
        ));
    }
    assert_eq!(view.transcripts["turn_live"].entries.len(), MAX_ENTRIES);
    for _ in 0..100 {
        seq += 1;
        view.apply(&chunk(
            seq,
            "turn_live",
            EventKind::MessageChunk,
            &"é".repeat(1000),
        ));
    }
    let Some(Entry::Reply(run)) = view.transcripts["turn_live"].entries.last() else {
        panic!("no run");
    };
    assert!(run.len() <= super::super::transcript::MAX_RUN_BYTES);
}

#[test]
fn the_context_meter_follows_the_agents_reports_and_falls_back_to_the_thread() {
    let mut view = loaded(
        vec![
            turn("turn_a", "proj", TurnState::Completed, NOW - 60_000),
            turn("turn_b", "proj", TurnState::Running, NOW - 1_000),
        ],
        vec![],
    );
    assert_eq!(view.context_of("turn_b"), None);
    assert!(view.apply(&usage_update(1, "turn_a", 50_000, 200_000)));
    // turn_b has no report yet: its thread's latest is shown, marked so.
    let (meter, borrowed) = view.context_of("turn_b").unwrap();
    assert_eq!((meter.used, meter.size, borrowed), (50_000, 200_000, true));
    assert!(view.apply(&usage_update(2, "turn_b", 190_000, 200_000)));
    let (meter, borrowed) = view.context_of("turn_b").unwrap();
    assert_eq!((meter.percent(), borrowed), (95, false));
    // The same report again changes nothing; a zero-size window is no report.
    assert!(!view.apply(&usage_update(3, "turn_b", 190_000, 200_000)));
    assert!(!view.apply(&usage_update(4, "turn_b", 1, 0)));
    assert_eq!(view.context_of("turn_b").unwrap().0.used, 190_000);
    // Over-full (compacting) caps at 100 %.
    view.apply(&usage_update(5, "turn_b", 250_000, 200_000));
    assert_eq!(view.context_of("turn_b").unwrap().0.percent(), 100);
}

#[test]
fn a_settled_turns_record_carries_its_context() {
    let mut t = turn("turn_c", "proj", TurnState::Completed, NOW - 5_000);
    t.usage = Some(
        serde_json::from_value(json!({
            "inputTokens": 1, "outputTokens": 1, "cachedReadTokens": 0,
            "cachedWriteTokens": 0, "thoughtTokens": 0, "totalTokens": 2,
            "contextUsed": 30_000, "contextSize": 120_000,
        }))
        .unwrap(),
    );
    let view = loaded(vec![t], vec![]);
    let (meter, borrowed) = view.context_of("turn_c").unwrap();
    assert_eq!(
        (meter.used, meter.size, meter.percent(), borrowed),
        (30_000, 120_000, 25, false)
    );
}
