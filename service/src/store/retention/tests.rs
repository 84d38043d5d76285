//! Batch selection: which oldest events a pass prunes, and which threads
//! it visits.

use super::*;

fn rows(ats: &[i64], bytes: u64) -> Vec<Oldest> {
    ats.iter()
        .enumerate()
        .map(|(i, &at)| Oldest {
            seq: i as i64 + 1,
            at,
            bytes,
        })
        .collect()
}

#[test]
fn age_prunes_the_prefix_older_than_the_cutoff() {
    let limits = Limits {
        cutoff: Some(100),
        ..Default::default()
    };
    let oldest = rows(&[10, 50, 99, 100, 20, 150], 5);
    // Stops at the first young event, even if an older one follows.
    assert_eq!(select(&limits, 6, 30, &oldest), (3, vec!["maxAgeDays"]));
    assert_eq!(select(&limits, 6, 30, &rows(&[100, 1], 5)).0, 0);
}

#[test]
fn count_and_bytes_prune_down_to_the_limit_and_no_further() {
    let many = Limits {
        max_events: Some(4),
        ..Default::default()
    };
    // 10 live, only 6 of them seen in this batch: 6 go, the rest later.
    assert_eq!(
        select(&many, 10, 0, &rows(&[1; 6], 0)),
        (6, vec!["maxEventsPerThread"])
    );
    assert_eq!(select(&many, 6, 0, &rows(&[1; 6], 0)).0, 2);
    assert_eq!(select(&many, 4, 0, &rows(&[1; 4], 0)).0, 0);
    let big = Limits {
        max_bytes: Some(100),
        ..Default::default()
    };
    // 250 bytes in 5 events of 50: three go (250 → 200 → 150 → 100).
    assert_eq!(
        select(&big, 5, 250, &rows(&[1; 5], 50)),
        (3, vec!["maxBytesPerThread"])
    );
}

#[test]
fn every_limit_that_asked_is_named_once() {
    let limits = Limits {
        cutoff: Some(100),
        max_events: Some(2),
        max_bytes: None,
    };
    // Two old events (age and count), one young one over the count.
    let (n, why) = select(&limits, 5, 0, &rows(&[1, 2, 500, 500, 500], 0));
    assert_eq!(n, 3);
    assert_eq!(why, vec!["maxAgeDays", "maxEventsPerThread"]);
    assert_eq!(select(&Limits::default(), 5, 0, &rows(&[1; 5], 0)).0, 0);
}

#[test]
fn a_pass_visits_only_threads_over_a_limit_or_idle_past_the_age() {
    let c = Candidate {
        thread: "t".into(),
        workspace: "w".into(),
        updated_at: 1000,
        events: 10,
        bytes: 100,
        oldest_at: 500,
        live_from: 1,
        through: 10,
    };
    let at = |cutoff, max_events, max_bytes| Limits {
        cutoff,
        max_events,
        max_bytes,
    };
    assert!(!at(None, None, None).visits(&c));
    assert!(!at(Some(400), Some(10), Some(100)).visits(&c));
    assert!(at(Some(501), None, None).visits(&c));
    assert!(at(None, Some(9), None).visits(&c));
    assert!(at(None, None, Some(99)).visits(&c));
    let empty = Candidate {
        events: 0,
        bytes: 0,
        oldest_at: 0,
        ..c
    };
    assert!(!at(Some(1000), None, None).visits(&empty));
    assert!(at(Some(1001), None, None).visits(&empty));
}
