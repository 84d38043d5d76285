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
use super::render::{draw, without_colour, wrap};
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

/// A `usage_update` observation of `turn`, as the engine journals it.
fn usage_update(seq: u64, turn: &str, used: u64, size: u64) -> JournalEvent {
    use lapis_protocol::usage::ContextUsage;
    use lapis_protocol::{Note, Observation, Payload};
    let payload = Payload::Observation(Observation::Note(Note::UsageUpdate(ContextUsage {
        used,
        size,
        cost: None,
    })));
    ev(seq, Some(turn), payload.kind(), payload.to_value())
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

mod keys;
mod model;
mod render;

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
