//! A turn's workspace evidence as people read it: `turns show`'s snapshot
//! lines and diffstats, and the one-line summary of what changed since a
//! fenced turn's boundary (`status`, `turns resolve`).
//!
//! What must stay true: a comparison that could not be made says why, so
//! "nothing changed" is printed only when the trees were compared; paths
//! come from the user's tree and are printed terminal-safe by the caller.

use lapis_protocol::snapshot::{
    ChangedFile, SnapshotDiff, SnapshotSkipped, TurnEvidence, WorkspaceSnapshot,
};

/// How many paths a one-line summary names before "and N more".
const SUMMARY_PATHS: usize = 5;

/// Why a snapshot or comparison is missing, in words.
fn reason(r: SnapshotSkipped) -> &'static str {
    match r {
        SnapshotSkipped::NotGit => "the workspace is not in a git repository",
        SnapshotSkipped::GitMissing => "git is not installed",
        SnapshotSkipped::TooLarge => "the tree has more files than the snapshot bound",
        SnapshotSkipped::Timeout => "git did not finish within the snapshot bound",
        SnapshotSkipped::Failed => "git failed (see the service log)",
        SnapshotSkipped::Off => {
            "evidence is off for this workspace (its config says `evidence: \"off\"`)"
        }
    }
}

fn snapshot_line(s: &WorkspaceSnapshot) -> String {
    match (&s.tree, s.skipped) {
        (Some(tree), _) => format!(
            "{} tree {} ({} files)",
            s.at.as_str(),
            tree,
            s.files.unwrap_or(0)
        ),
        (None, Some(r)) => format!("{} not taken: {}", s.at.as_str(), reason(r)),
        (None, None) => format!("{} not taken", s.at.as_str()),
    }
}

fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "bin".to_owned(), |n| n.to_string())
}

/// A diffstat, one file a line (`+added -deleted path`).
fn diffstat(title: &str, d: &SnapshotDiff) -> Vec<String> {
    if let Some(r) = d.skipped {
        return vec![format!("{title} unknown: {}", reason(r))];
    }
    if d.files.is_empty() {
        return vec![format!("{title} none")];
    }
    let mut out = vec![format!(
        "{title} {} file{}",
        d.files.len(),
        if d.files.len() == 1 { "" } else { "s" }
    )];
    out.extend(d.files.iter().map(|f: &ChangedFile| {
        format!(
            "          +{} -{} {}",
            count(f.added),
            count(f.deleted),
            f.path
        )
    }));
    out
}

/// `turns show`'s evidence lines.
pub(super) fn lines(e: &TurnEvidence) -> Vec<String> {
    let mut out = Vec::new();
    for s in [&e.boundary, &e.outcome].into_iter().flatten() {
        out.push(format!("snapshot  {}", snapshot_line(s)));
    }
    if let Some(d) = &e.changes {
        out.extend(diffstat("changed  ", d));
    }
    if let Some(d) = &e.since_boundary {
        out.extend(diffstat("since     boundary, changed", d));
    }
    out
}

/// One line on what changed since a fenced turn's boundary, for the
/// owner deciding its outcome; `None` when the turn has no such evidence.
pub(super) fn since_summary(e: &TurnEvidence) -> Option<String> {
    if let Some(b) = &e.boundary
        && b.tree.is_none()
    {
        return Some(format!(
            "no snapshot at its boundary ({})",
            b.skipped.map_or("not taken", reason)
        ));
    }
    let d = e.since_boundary.as_ref()?;
    if let Some(r) = d.skipped {
        return Some(format!(
            "what changed since its boundary is unknown ({})",
            reason(r)
        ));
    }
    if d.files.is_empty() {
        return Some("nothing in its workspace changed since its boundary".to_owned());
    }
    let mut names: Vec<&str> = d
        .files
        .iter()
        .take(SUMMARY_PATHS)
        .map(|f| f.path.as_str())
        .collect();
    let more = d.files.len().saturating_sub(SUMMARY_PATHS);
    let mut text = format!(
        "{} file{} changed since its boundary: ",
        d.files.len(),
        if d.files.len() == 1 { "" } else { "s" }
    );
    if more > 0 {
        names.push("…");
    }
    text.push_str(&names.join(", "));
    if more > 0 {
        text.push_str(&format!(" ({more} more in `turns show`)"));
    }
    Some(text)
}

/// A median snapshot at or above this many milliseconds is worth a
/// `doctor` warning: two per turn, it is most of a warm turn.
pub(super) const SLOW_SNAPSHOT_MS: u64 = 50;

/// What a workspace's snapshots cost, in one line: its setting, the median
/// and slowest of the recent snapshots and what the last one did
/// (`status`, `doctor`).
pub(super) fn cost_line(c: &lapis_protocol::snapshot::EvidenceCost) -> String {
    use lapis_protocol::snapshot::SnapshotVia;
    let mode = c.mode.as_str();
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let Some(last) = &c.last else {
        return match c.mode {
            lapis_protocol::snapshot::EvidenceMode::Off => format!("{mode}: no snapshots"),
            _ => format!("{mode}: no snapshot since serve started"),
        };
    };
    let via = match last.via {
        SnapshotVia::Watched => "answered by the watch",
        SnapshotVia::Seen => "stated every path",
        SnapshotVia::Refresh => "stated every path, git staged the changed ones",
        SnapshotVia::Git => "git staged the whole tree",
        SnapshotVia::Skipped => "not taken",
    };
    format!(
        "{mode}: median {} (max {}) over the last {} of {} snapshot{}; last {}, {via}, {} file{} walked, {} git process{}",
        ms(c.median_micros.unwrap_or(0)),
        ms(c.max_micros.unwrap_or(0)),
        c.snapshots
            .min(lapis_protocol::snapshot::EvidenceCost::RECENT as u64),
        c.snapshots,
        if c.snapshots == 1 { "" } else { "s" },
        ms(last.micros),
        last.files_walked,
        if last.files_walked == 1 { "" } else { "s" },
        last.git,
        if last.git == 1 { "" } else { "es" },
    )
}
