//! What evidence costs: the wall time, the paths walked and the git
//! processes of each workspace's recent snapshots, for `status` and
//! `doctor` (a person with a slow tree sees it there and learns
//! `evidence: "off"`).
//!
//! Kept in memory since `serve` started, a bounded ring per workspace
//! ([`EvidenceCost::RECENT`] snapshots): recording one is a lock and a
//! push, off the store and never a stopwatch that any test asserts on.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use lapis_protocol::snapshot::{EvidenceCost, EvidenceMode, SnapshotCost};

/// Each workspace's recent snapshot costs. Shared by the engine's turns.
#[derive(Debug, Default)]
pub(crate) struct EvidenceCosts {
    /// By workspace id.
    by_workspace: Mutex<BTreeMap<String, Recent>>,
}

#[derive(Debug, Default)]
struct Recent {
    /// Snapshots since start.
    taken: u64,
    /// The last [`EvidenceCost::RECENT`], oldest first.
    costs: VecDeque<SnapshotCost>,
}

impl EvidenceCosts {
    /// Records one snapshot of workspace `id`.
    pub(crate) fn record(&self, id: &str, cost: SnapshotCost) {
        let mut map = self.by_workspace.lock().unwrap_or_else(|p| p.into_inner());
        let recent = map.entry(id.to_owned()).or_default();
        recent.taken += 1;
        if recent.costs.len() == EvidenceCost::RECENT {
            recent.costs.pop_front();
        }
        recent.costs.push_back(cost);
    }

    /// One entry per workspace in `modes` (every configured one, with its
    /// setting) and per workspace with snapshots (its setting from `mode_of`).
    pub(crate) fn report(
        &self,
        modes: &BTreeMap<String, EvidenceMode>,
        mode_of: impl Fn(&str) -> EvidenceMode,
    ) -> Vec<EvidenceCost> {
        let map = self.by_workspace.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<&String> = modes.keys().chain(map.keys()).collect();
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|id| {
                let recent = map.get(id);
                let mut micros: Vec<u64> = recent
                    .map(|r| r.costs.iter().map(|c| c.micros).collect())
                    .unwrap_or_default();
                micros.sort_unstable();
                EvidenceCost {
                    workspace: id.clone(),
                    mode: modes.get(id).copied().unwrap_or_else(|| mode_of(id)),
                    snapshots: recent.map_or(0, |r| r.taken),
                    median_micros: micros.get(micros.len() / 2).copied(),
                    max_micros: micros.last().copied(),
                    last: recent.and_then(|r| r.costs.back().copied()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapis_protocol::snapshot::SnapshotVia;

    fn cost(micros: u64) -> SnapshotCost {
        SnapshotCost {
            micros,
            via: SnapshotVia::Seen,
            files_walked: 10,
            git: 0,
        }
    }

    #[test]
    fn the_median_and_maximum_cover_the_recent_snapshots_only() {
        let costs = EvidenceCosts::default();
        costs.record("a", cost(1_000_000));
        for i in 0..EvidenceCost::RECENT as u64 {
            costs.record("a", cost(100 + i));
        }
        let modes = BTreeMap::from([("b".to_owned(), EvidenceMode::Off)]);
        let got = costs.report(&modes, |_| EvidenceMode::Stat);
        assert_eq!(got.len(), 2);
        let a = &got[0];
        assert_eq!((a.workspace.as_str(), a.mode), ("a", EvidenceMode::Stat));
        assert_eq!(a.snapshots, EvidenceCost::RECENT as u64 + 1);
        assert_eq!(a.max_micros, Some(131), "the old slow one aged out");
        assert_eq!(a.median_micros, Some(116));
        assert_eq!(a.last, Some(cost(131)));
        let b = &got[1];
        assert_eq!((b.mode, b.snapshots, b.last), (EvidenceMode::Off, 0, None));
    }
}
