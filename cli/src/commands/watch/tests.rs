//! The view model, the keys and the renderer, without a terminal or a
//! connection: snapshots and events in, state and frames out.

use lapis_protocol::params::StatusResult;
use lapis_protocol::{
    EventKind, JournalEvent, PendingRequest, ResolveAs, Thread, Turn, TurnState, Workspace,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

use super::keys::{Action, Key};
use super::model::{Link, MAX_SETTLED, Mode, Snapshot, View, WorkspaceState};
use super::render::{draw, wrap};
use super::transcript::{Entry, MAX_ENTRIES};

const NOW: i64 = 1_767_225_600_000;

/// A journal event of thread `thr` (turn `turn`, when given).
fn ev(seq: u64, turn: Option<&str>, kind: EventKind, payload: Value) -> JournalEvent {
    JournalEvent {
        seq,
        thread_id: "thr".into(),
        thread_seq: seq,
        turn_id: turn.map(str::to_owned),
        kind,
        at: NOW - 10_000 + seq as i64,
        payload: Some(payload),
        payload_unavailable: false,
    }
}

fn submitted(seq: u64, turn: &str) -> JournalEvent {
    ev(
        seq,
        Some(turn),
        EventKind::TurnSubmitted,
        json!({"turnId": turn, "commandId": format!("c-{turn}"), "continues": null}),
    )
}

fn state(seq: u64, turn: &str, from: &str, to: &str, event: &str) -> JournalEvent {
    ev(
        seq,
        Some(turn),
        EventKind::TurnState,
        json!({"from": from, "to": to, "event": event}),
    )
}

fn chunk(seq: u64, turn: &str, kind: EventKind, text: &str) -> JournalEvent {
    ev(seq, Some(turn), kind, json!({"text": text}))
}

fn options(kinds: &[&str]) -> Value {
    Value::Array(
        kinds
            .iter()
            .map(|k| json!({"optionId": format!("opt-{k}"), "name": k, "kind": k}))
            .collect(),
    )
}

fn asked(seq: u64, turn: &str, request: &str, kinds: &[&str]) -> JournalEvent {
    ev(
        seq,
        Some(turn),
        EventKind::PermissionRequested,
        json!({"requestId": request, "invocation": {"id": "call-1", "title": "Run \u{1b}[2Kcommand"},
            "options": options(kinds)}),
    )
}

fn decided(seq: u64, turn: &str, request: &str) -> JournalEvent {
    ev(
        seq,
        Some(turn),
        EventKind::PermissionDecided,
        json!({"requestId": request, "answer": {"outcome": "selected", "optionId": "opt-allow_once"},
            "decidedBy": "user"}),
    )
}

fn turn(id: &str, workspace: &str, state: TurnState, created: i64) -> Turn {
    serde_json::from_value(json!({
        "id": id, "threadId": "thr", "workspaceId": workspace, "principal": "owner",
        "commandId": format!("c-{id}"), "state": state.as_str(), "outcome": null,
        "cancelRequested": false, "continues": null, "queueSeq": 1,
        "createdAt": lapis_protocol::time::format_ms(created),
        "updatedAt": lapis_protocol::time::format_ms(created),
        "startedAt": if state == TurnState::Queued { Value::Null }
            else { json!(lapis_protocol::time::format_ms(created + 1_000)) },
    }))
    .unwrap()
}

fn status() -> StatusResult {
    serde_json::from_value(json!({
        "protocol": "lapis-ai-controller/1", "version": "9.9.9",
        "build": {"version": "9.9.9", "commit": "c", "date": "d", "target": "t"},
        "snapshot": null, "pid": 1, "uptimeSeconds": 5,
        "queue": {"depth": 1, "capacity": 64},
        "runningWorkspaces": [], "fencedWorkspaces": [],
    }))
    .unwrap()
}

fn workspace(id: &str) -> Workspace {
    Workspace {
        id: id.into(),
        path: format!("/w/{id}"),
        created_at: 0,
    }
}

fn thread() -> Thread {
    serde_json::from_value(json!({
        "id": "thr", "principal": "owner", "application": "lapis-cli", "workspaceId": "proj",
        "provider": "fixture", "approval": "ask", "restricted": false, "retention": "full",
        "version": 1, "createdAt": lapis_protocol::time::format_ms(0),
        "updatedAt": lapis_protocol::time::format_ms(0),
    }))
    .unwrap()
}

/// A view loaded with workspaces `proj` and `other`, thread `thr` and `turns`.
fn loaded(turns: Vec<Turn>, pending: Vec<PendingRequest>) -> View {
    let mut view = View::default();
    view.load(Snapshot {
        status: Some(status()),
        workspaces: vec![workspace("proj"), workspace("other")],
        threads: vec![thread()],
        turns,
        pending,
    });
    view
}

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
    assert_eq!(
        view.key(Key::Char('c')),
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
    assert!(run.len() <= super::transcript::MAX_RUN_BYTES);
}

/// The screen as text, one string per row.
fn screen(view: &View, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, view, NOW)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn the_screen_shows_workspaces_turns_the_reply_and_the_request() {
    let mut view = loaded(
        vec![turn(
            "turn_0123456789abcdef",
            "proj",
            TurnState::Running,
            NOW - 125_000,
        )],
        vec![],
    );
    view.apply(&chunk(
        1,
        "turn_0123456789abcdef",
        EventKind::MessageChunk,
        "streamed reply",
    ));
    view.loaded(
        "turn_0123456789abcdef",
        &[chunk(
            1,
            "turn_0123456789abcdef",
            EventKind::MessageChunk,
            "streamed reply",
        )],
    );
    view.apply(&chunk(
        2,
        "turn_0123456789abcdef",
        EventKind::ThoughtChunk,
        "pondering",
    ));
    view.apply(&asked(
        3,
        "turn_0123456789abcdef",
        "perm-0",
        &["allow_once", "reject_once"],
    ));
    let rows = screen(&view, 120, 30).join("\n");
    for want in [
        "lapis-ai-controller watch",
        "controller 9.9.9",
        "queue 1/64",
        "1 permission request waiting",
        "live",
        "WORKSPACE",
        "proj",
        "running",
        "other",
        "idle",
        "TURN",
        "turn_01234567",
        "running (permission)",
        "2m",
        "fixture",
        "streamed reply",
        "thinking: pondering",
        "permission perm-0 requested: Run ␛[2Kcommand",
        "a  allow_once (allow_once)",
        "r  reject_once (reject_once)",
        "a allow once",
    ] {
        assert!(rows.contains(want), "{want:?} missing from\n{rows}");
    }
    assert!(!rows.contains('\u{1b}'));
    view.link = Link::Reconnecting("gone".into());
    view.mode = Mode::Resolve {
        turn: "turn_x".into(),
        input: "fai".into(),
    };
    let rows = screen(&view, 200, 30).join("\n");
    assert!(rows.contains("reconnecting (gone)"), "{rows}");
    assert!(
        rows.contains("resolve turn_x: only if its agent no longer runs it"),
        "{rows}"
    );
    assert!(rows.contains("fai_"), "{rows}");
    // Any size draws, down to nothing.
    for (w, h) in [(1, 1), (10, 3), (40, 8), (300, 100)] {
        screen(&view, w, h);
    }
}

#[test]
fn the_transcript_shows_its_tail_wrapped_by_display_width() {
    assert_eq!(wrap("abcdef", 4), ["abcd", "ef"]);
    assert_eq!(wrap("a\nb\n", 4), ["a", "b"]);
    assert_eq!(wrap("漢字漢字", 5), ["漢字", "漢字"]);
    assert!(wrap("", 4).is_empty());
    let mut view = loaded(vec![], vec![]);
    view.apply(&submitted(1, "turn_a"));
    let long: String = (0..200).map(|i| format!("line{i}\n")).collect();
    view.apply(&chunk(2, "turn_a", EventKind::MessageChunk, &long));
    let rows = screen(&view, 100, 20).join("\n");
    assert!(rows.contains("line199"), "{rows}");
    assert!(
        !rows.contains("line0\n") && !rows.contains("line100 "),
        "{rows}"
    );
}

#[test]
fn ages_read_in_whole_units() {
    use crate::output::age;
    assert_eq!(age(-5), "0s");
    assert_eq!(age(59_999), "59s");
    assert_eq!(age(60_000), "1m");
    assert_eq!(age(3_600_000), "1h");
    assert_eq!(age(86_400_000 * 3), "3d");
}

/// The redraw figure (issue 30: ≤ 16 ms median after an event, 8
/// workspaces streaming): reduce one event and draw the whole 120x40 frame
/// to ratatui's test backend (the same diffing buffer a terminal gets).
/// A bench, not a test: it asserts nothing about time. Run it with
/// `cargo test -p lapis-ai-controller --bin lapis-ai-controller watch::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore = "a bench: prints figures"]
fn bench_redraw_after_an_event_with_8_workspaces_streaming() {
    use std::time::Instant;
    let workspaces: Vec<Workspace> = (0..8).map(|i| workspace(&format!("ws{i}"))).collect();
    let threads: Vec<Thread> = (0..8)
        .map(|i| {
            let mut t = thread();
            t.id = format!("thr{i}");
            t.workspace_id = format!("ws{i}");
            t
        })
        .collect();
    let mut view = View::default();
    view.load(Snapshot {
        status: Some(status()),
        workspaces,
        threads,
        turns: vec![],
        pending: vec![],
    });
    let mut seq = 0u64;
    let mut event = |i: usize, kind: EventKind, payload: Value, turn: &str| {
        seq += 1;
        JournalEvent {
            seq,
            thread_id: format!("thr{i}"),
            thread_seq: seq,
            turn_id: Some(turn.to_owned()),
            kind,
            at: NOW,
            payload: Some(payload),
            payload_unavailable: false,
        }
    };
    // 8 running turns, 40 settled ones, each running turn well into its reply.
    let mut warm = Vec::new();
    for n in 0..48 {
        let i = n % 8;
        let id = format!("turn_{n:032}");
        warm.push(event(
            i,
            EventKind::TurnSubmitted,
            json!({"turnId": id, "commandId": id, "continues": null}),
            &id,
        ));
        let to = if n < 40 { "completed" } else { "running" };
        warm.push(event(
            i,
            EventKind::TurnState,
            json!({"from": "queued", "to": to, "event": "claim"}),
            &id,
        ));
        for c in 0..200 {
            warm.push(event(
                i,
                EventKind::MessageChunk,
                json!({"text": format!("word{c} ")}),
                &id,
            ));
        }
    }
    for e in &warm {
        view.apply(e);
    }
    view.selected = Some(format!("turn_{:032}", 47));
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    terminal.draw(|f| draw(f, &view, NOW)).unwrap();
    let mut samples = Vec::new();
    for k in 0..2_000 {
        let n = 40 + k % 8;
        let id = format!("turn_{n:032}");
        let e = event(
            n % 8,
            EventKind::MessageChunk,
            json!({"text": format!("more{k} ")}),
            &id,
        );
        let start = Instant::now();
        view.apply(&e);
        terminal.draw(|f| draw(f, &view, NOW)).unwrap();
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "watch redraw after an event (8 workspaces streaming, 120x40, {} samples): median {:.3} ms, p95 {:.3} ms, max {:.3} ms",
        samples.len(),
        at(0.5),
        at(0.95),
        at(1.0)
    );
}
