//! Spreading a check over threads: `groups` (one per directory) cut into
//! parts of about as many names each, one part per thread, on scoped
//! threads; below [`PARALLEL_FROM`] names, or on one core, this thread
//! alone does it all.
//!
//! What must stay true: every group is in exactly one part, parts keep
//! the groups' order, and a panicked thread makes the whole run `None`
//! (never a partial answer).

use super::{Group, MAX_THREADS, PARALLEL_FROM};

fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// Where to cut `groups` into parts holding about as many names each, one
/// per thread (one part below [`PARALLEL_FROM`] names): each part's end.
pub(super) fn cuts(groups: &[Group]) -> Vec<usize> {
    let total: usize = groups.iter().map(Group::len).sum();
    let threads = threads();
    if threads == 1 || total < PARALLEL_FROM {
        return vec![groups.len()];
    }
    let per = total.div_ceil(threads);
    let mut ends = Vec::new();
    let mut count = 0;
    for (i, g) in groups.iter().enumerate() {
        count += g.len();
        if count >= per {
            ends.push(i + 1);
            count = 0;
        }
    }
    if ends.last() != Some(&groups.len()) {
        ends.push(groups.len());
    }
    ends
}

/// Runs `f` on each part of `groups` (see [`cuts`]), with the index of its
/// first group, on scoped threads (this one alone for one part). The
/// results in order, `None` if a thread panicked.
pub(super) fn in_parts<T: Send>(
    groups: &[Group],
    f: impl Fn(usize, &[Group]) -> T + Sync,
) -> Option<Vec<T>> {
    let ends = cuts(groups);
    if ends.len() == 1 {
        return Some(vec![f(0, groups)]);
    }
    let f = &f;
    std::thread::scope(|s| {
        let mut start = 0;
        let handles: Vec<_> = ends
            .iter()
            .map(|&end| {
                let (first, part) = (start, &groups[start..end]);
                start = end;
                s.spawn(move || f(first, part))
            })
            .collect();
        handles.into_iter().map(|h| h.join().ok()).collect()
    })
}

/// Records the stat data of every name in `groups`, in parts as
/// [`in_parts`] does; `None` if a thread panicked.
pub(super) fn fill_all(groups: &mut [Group]) -> Option<()> {
    let ends = cuts(groups);
    if ends.len() == 1 {
        groups.iter_mut().for_each(|g| g.fill(0));
        return Some(());
    }
    std::thread::scope(|s| {
        let (mut rest, mut start) = (groups, 0);
        let handles: Vec<_> = ends
            .iter()
            .map(|&end| {
                let (part, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
                (rest, start) = (tail, end);
                s.spawn(move || part.iter_mut().for_each(|g| g.fill(0)))
            })
            .collect();
        handles.into_iter().all(|h| h.join().is_ok()).then_some(())
    })
}
