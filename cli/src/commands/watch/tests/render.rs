//! Frames drawn to the test backend.

use super::*;

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
        "a/A/r answer",
        "? keys",
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
fn the_selected_turns_context_meter_is_drawn_under_its_transcript() {
    let mut view = loaded(
        vec![turn(
            "turn_0123456789abcdef",
            "proj",
            TurnState::Running,
            NOW - 5_000,
        )],
        vec![],
    );
    let rows = screen(&view, 120, 30).join("\n");
    assert!(!rows.contains("context"), "no report, no meter:\n{rows}");
    view.apply(&usage_update(7, "turn_0123456789abcdef", 90_000, 200_000));
    let rows = screen(&view, 120, 30).join("\n");
    assert!(
        rows.contains("context █████░░░░░ 45% 90.0k/200.0k"),
        "{rows}"
    );
}

#[test]
fn a_frame_without_colour_keeps_its_text_and_the_selections_reverse() {
    use ratatui::style::{Color, Modifier};
    let mut view = loaded(
        vec![turn(
            "turn_0123456789abcdef",
            "proj",
            TurnState::Running,
            NOW - 5_000,
        )],
        vec![],
    );
    view.apply(&usage_update(7, "turn_0123456789abcdef", 190_000, 200_000));
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    terminal.draw(|f| draw(f, &view, NOW)).unwrap();
    let coloured = terminal.backend().buffer().clone();
    let coloured_cells = coloured
        .content
        .iter()
        .filter(|c| c.fg != Color::Reset)
        .count();
    assert!(
        coloured_cells > 0,
        "the running workspace and the meter are coloured"
    );
    terminal
        .draw(|f| {
            draw(f, &view, NOW);
            without_colour(f.buffer_mut());
        })
        .unwrap();
    let plain = terminal.backend().buffer().clone();
    assert!(
        plain
            .content
            .iter()
            .all(|c| c.fg == Color::Reset && c.bg == Color::Reset),
        "no colour left"
    );
    let text =
        |b: &ratatui::buffer::Buffer| b.content.iter().map(|c| c.symbol()).collect::<String>();
    assert_eq!(text(&plain), text(&coloured), "the same text");
    assert!(
        plain
            .content
            .iter()
            .any(|c| c.modifier.contains(Modifier::REVERSED)),
        "the selection is still marked"
    );
}
