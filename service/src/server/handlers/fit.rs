//! Responses that carry a variable number of journal events are cut to fit
//! one frame.
//!
//! What must stay true: a client that reads frames with the same
//! `server.maxFrameBytes` as the server can always read a `journal.replay`
//! page or a `threads.get` snapshot. A page that would not fit keeps its
//! leading events, says `more`, and moves `nextAfter` back to the last event
//! it kept, so paging still sees every event exactly once. A snapshot keeps
//! the newest events of its tail and says `truncated`. One event is always
//! kept, even when it alone is larger than the budget (the client then
//! reports an oversized frame instead of looping on an empty page).

use crate::domain::JournalEvent;
use lapis_protocol::{ReplayPage, ThreadSnapshot};

/// Room left for the JSON-RPC envelope (`jsonrpc`, `id`, `result`) and the
/// page's own members around the events.
const ENVELOPE: usize = 512;

fn size<T: serde::Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

fn budget(max_frame_bytes: usize) -> usize {
    max_frame_bytes.saturating_sub(ENVELOPE)
}

/// Cuts `page` after the events that fit; `cursor_of` is the scope's cursor
/// (`threadSeq` for a thread, `seq` for the owner's journal).
pub(super) fn page(
    page: &mut ReplayPage,
    max_frame_bytes: usize,
    cursor_of: impl Fn(&JournalEvent) -> u64,
) {
    let budget = budget(max_frame_bytes);
    let mut used = 0usize;
    let mut keep = 0usize;
    for e in &page.events {
        let n = size(e) + 1;
        if keep > 0 && used.saturating_add(n) > budget {
            break;
        }
        used = used.saturating_add(n);
        keep += 1;
    }
    if keep < page.events.len() {
        page.events.truncate(keep);
        if let Some(last) = page.events.last() {
            page.next_after = cursor_of(last);
        }
        page.more = true;
    }
}

/// Drops the oldest events of the snapshot's tail, then its oldest recent
/// turns, until it fits.
pub(super) fn snapshot(snapshot: &mut ThreadSnapshot, max_frame_bytes: usize) {
    let budget = budget(max_frame_bytes);
    let mut total = size(snapshot);
    while total > budget && snapshot.tail.len() > 1 {
        let dropped = snapshot.tail.remove(0);
        total = total.saturating_sub(size(&dropped) + 1);
        snapshot.truncated = true;
    }
    while total > budget && snapshot.recent_turns.len() > 1 {
        if let Some(dropped) = snapshot.recent_turns.pop() {
            total = total.saturating_sub(size(&dropped) + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapis_protocol::EventKind;

    fn event(seq: u64, text: &str) -> JournalEvent {
        JournalEvent {
            seq: seq + 100,
            thread_seq: seq,
            thread_id: "thr_1".into(),
            turn_id: Some("turn_1".into()),
            kind: EventKind::MessageChunk,
            at: 0,
            payload: Some(serde_json::json!({ "text": text })),
            payload_unavailable: false,
        }
    }

    #[test]
    fn a_page_keeps_what_fits_and_points_after_the_last_kept_event() {
        let text = "x".repeat(300);
        let mut p = ReplayPage {
            events: (1..=20).map(|i| event(i, &text)).collect(),
            next_after: 20,
            more: false,
        };
        page(&mut p, 4096, |e| e.thread_seq);
        assert!(p.more);
        assert!(!p.events.is_empty() && p.events.len() < 20);
        assert_eq!(p.next_after, p.events.last().unwrap().thread_seq);
        assert!(size(&p) <= 4096 - ENVELOPE);
        // A page that fits is untouched.
        let mut small = ReplayPage {
            events: vec![event(1, "hi")],
            next_after: 1,
            more: false,
        };
        page(&mut small, 4096, |e| e.thread_seq);
        assert_eq!(
            (small.events.len(), small.next_after, small.more),
            (1, 1, false)
        );
    }

    #[test]
    fn one_event_is_kept_even_when_it_alone_is_too_large() {
        let mut p = ReplayPage {
            events: vec![event(1, &"y".repeat(8000)), event(2, "z")],
            next_after: 2,
            more: false,
        };
        page(&mut p, 4096, |e| e.seq);
        assert_eq!(p.events.len(), 1);
        assert_eq!(p.next_after, 101);
        assert!(p.more);
    }
}
