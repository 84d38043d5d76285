//! Results that must fit one frame: a replay page or a thread snapshot
//! grows with its events, and a client reads at most `maxFrameBytes` per
//! line. Rather than send a frame the client must refuse, the page is cut
//! short (`more`, with the cursor where it stopped) and the snapshot's tail
//! and recent turns are shortened (`truncated`). At least one event is
//! always kept, so a reader makes progress.

use crate::domain::{JournalEvent, ReplayPage, ThreadSnapshot};

/// Room left for the JSON-RPC envelope around a result.
const ENVELOPE_BYTES: usize = 256;

fn len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |v| v.len())
}

/// The cursor a page ending at `last` continues from.
fn cursor(last: &JournalEvent, thread_scope: bool) -> u64 {
    if thread_scope {
        last.thread_seq
    } else {
        last.seq
    }
}

/// Cuts `page` until it fits a frame of `max` bytes.
pub(super) fn page(mut page: ReplayPage, max: usize, thread_scope: bool) -> ReplayPage {
    let budget = max.saturating_sub(ENVELOPE_BYTES);
    if len(&page) <= budget {
        return page;
    }
    let mut used = len(&ReplayPage {
        events: Vec::new(),
        next_after: u64::MAX,
        more: true,
    });
    let mut keep = 0;
    for e in &page.events {
        let n = len(e) + 1;
        if keep > 0 && used + n > budget {
            break;
        }
        used += n;
        keep += 1;
    }
    if keep < page.events.len() {
        page.events.truncate(keep);
        page.more = true;
        if let Some(last) = page.events.last() {
            page.next_after = cursor(last, thread_scope);
        }
    }
    page
}

/// Shortens `snapshot` (oldest tail events first, then older turns) until
/// it fits a frame of `max` bytes.
pub(super) fn snapshot(mut snapshot: ThreadSnapshot, max: usize) -> ThreadSnapshot {
    let budget = max.saturating_sub(ENVELOPE_BYTES);
    while len(&snapshot) > budget {
        if snapshot.tail.len() > 1 {
            snapshot.tail.remove(0);
            snapshot.truncated = true;
        } else if snapshot.recent_turns.len() > 1 {
            snapshot.recent_turns.pop();
        } else {
            break;
        }
    }
    snapshot
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::EventKind;

    fn event(seq: u64) -> JournalEvent {
        JournalEvent {
            seq: seq + 100,
            thread_id: "thr_1".into(),
            thread_seq: seq,
            turn_id: None,
            kind: EventKind::MessageChunk,
            at: 0,
            payload: Some(serde_json::json!({ "text": "x".repeat(200) })),
            payload_unavailable: false,
        }
    }

    #[test]
    fn a_page_is_cut_to_the_frame_and_says_where_to_continue() {
        let events: Vec<JournalEvent> = (1..=40).map(event).collect();
        let full = ReplayPage {
            events,
            next_after: 40,
            more: false,
        };
        let cut = page(full.clone(), 4096, true);
        assert!(cut.events.len() < 40 && !cut.events.is_empty());
        assert!(len(&cut) <= 4096 - ENVELOPE_BYTES);
        assert!(cut.more);
        assert_eq!(cut.next_after, cut.events.last().unwrap().thread_seq);
        let owner = page(full.clone(), 4096, false);
        assert_eq!(owner.next_after, owner.events.last().unwrap().seq);
        // A page that fits is untouched; one huge event is still sent.
        assert_eq!(page(full.clone(), 1 << 20, true), full);
        assert_eq!(page(full, 10, true).events.len(), 1);
    }
}
