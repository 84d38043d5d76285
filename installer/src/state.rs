//! `releases/state.json`: when each snapshot was installed and the history of
//! activations, for `releases list`, `rollback` and `gc`.
//!
//! The state is advisory. The launcher symlink decides which snapshot is
//! active; the history only answers "what was active before", so it is
//! written *after* the launcher moved and read with the launcher as the
//! truth: *previous* is the most recent activation of a different snapshot
//! that still exists. A crash between the swap and the state write therefore
//! only loses one history entry. An unreadable state file counts as empty.

use std::collections::BTreeMap;
use std::fs;

use lapis_release::BuildIdentity;
use serde::{Deserialize, Serialize};

use crate::fsx::{self, FsError};
use crate::paths::Paths;

/// How many activations are kept.
const MAX_ACTIVATIONS: usize = 64;

/// Facts about one snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SnapshotRecord {
    /// Unix seconds when the snapshot directory was created.
    pub(crate) installed_at: u64,
    /// Build identity from its manifest.
    pub(crate) build: BuildIdentity,
}

/// One launcher move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Activation {
    /// The snapshot the launcher was pointed at.
    pub(crate) digest: String,
    /// Unix seconds.
    pub(crate) at: u64,
}

/// The whole state file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstallState {
    /// Always 1.
    #[serde(default = "one")]
    pub(crate) schema: u32,
    /// Per snapshot digest.
    #[serde(default)]
    pub(crate) snapshots: BTreeMap<String, SnapshotRecord>,
    /// Oldest first, bounded.
    #[serde(default)]
    pub(crate) activations: Vec<Activation>,
}

fn one() -> u32 {
    1
}

impl InstallState {
    /// Reads the state; missing or unreadable means empty.
    pub(crate) fn load(paths: &Paths) -> InstallState {
        fs::read(paths.state_file())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| InstallState {
                schema: 1,
                ..InstallState::default()
            })
    }

    /// Replaces the state file (atomically for readers, without fsync: a
    /// crash may lose the latest entries, which [`InstallState::load`] treats
    /// as history that never happened). Call with the releases lock held.
    pub(crate) fn save(&self, paths: &Paths) -> Result<(), FsError> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("state serialises");
        bytes.push(b'\n');
        fsx::replace_advisory(&paths.state_file(), &bytes, 0o644)
    }

    /// Records a snapshot's install time unless it is already known.
    pub(crate) fn record_snapshot(&mut self, digest: &str, build: &BuildIdentity, now: u64) {
        self.snapshots
            .entry(digest.to_owned())
            .or_insert_with(|| SnapshotRecord {
                installed_at: now,
                build: build.clone(),
            });
    }

    /// Records that the launcher now points at `digest`.
    pub(crate) fn record_activation(&mut self, digest: &str, now: u64) {
        if self.activations.last().is_some_and(|a| a.digest == digest) {
            return;
        }
        self.activations.push(Activation {
            digest: digest.to_owned(),
            at: now,
        });
        let excess = self.activations.len().saturating_sub(MAX_ACTIVATIONS);
        self.activations.drain(..excess);
    }

    /// The most recent activation of a snapshot other than `active` for which
    /// `exists` holds.
    pub(crate) fn previous(
        &self,
        active: Option<&str>,
        exists: impl Fn(&str) -> bool,
    ) -> Option<String> {
        self.activations
            .iter()
            .rev()
            .map(|a| a.digest.as_str())
            .find(|d| Some(*d) != active && exists(d))
            .map(str::to_owned)
    }

    /// Forgets snapshots that were removed.
    pub(crate) fn forget(&mut self, digest: &str) {
        self.snapshots.remove(digest);
        self.activations.retain(|a| a.digest != digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_skips_active_and_missing() {
        let mut s = InstallState::default();
        for (i, d) in ["a", "b", "c", "b"].iter().enumerate() {
            s.record_activation(d, i as u64);
        }
        s.record_activation("b", 9);
        assert_eq!(s.activations.len(), 4);
        assert_eq!(s.previous(Some("b"), |_| true).as_deref(), Some("c"));
        assert_eq!(s.previous(Some("b"), |d| d != "c").as_deref(), Some("a"));
        assert_eq!(s.previous(Some("b"), |d| d == "b"), None);
        // The launcher may disagree with the last entry after a crash.
        assert_eq!(s.previous(Some("c"), |_| true).as_deref(), Some("b"));
        s.forget("b");
        assert_eq!(s.previous(Some("c"), |_| true).as_deref(), Some("a"));
    }

    #[test]
    fn history_is_bounded() {
        let mut s = InstallState::default();
        for i in 0..200u64 {
            s.record_activation(&i.to_string(), i);
        }
        assert_eq!(s.activations.len(), MAX_ACTIVATIONS);
        assert_eq!(s.activations.last().unwrap().digest, "199");
    }
}
