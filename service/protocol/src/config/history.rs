//! `history`: how long the journal keeps a thread's events (issue 44
//! item 2). Named `history`, not `retention`: a thread's `retention`
//! (`full` / `metadata-only`) already names where its content lives.
//!
//! Set globally (`history`) and per declared workspace
//! (`workspaces.<id>.history`, field by field over the global one). The
//! controller applies it in the background (see `docs/operations.md`):
//! a `full` thread's oldest events past any limit become tombstones with
//! a content-free `history_pruned` receipt; a thread idle past
//! `maxAgeDays` with nothing left is deleted with its `thread_deleted`
//! receipt. `metadata-only` threads keep their rows (they hold no
//! content, only the order the spec requires).

use serde::{Deserialize, Serialize};

/// Largest `maxAgeDays` (100 years).
pub const MAX_HISTORY_AGE_DAYS: u64 = 36_500;

/// Fewest events a thread may be limited to (its newest turn's
/// lifecycle stays readable).
pub const MIN_HISTORY_EVENTS: u64 = 16;

/// Smallest `maxBytesPerThread`: 64 KiB.
pub const MIN_HISTORY_BYTES: u64 = 64 * 1024;

/// Default and bounds of `intervalMinutes`.
pub const DEFAULT_HISTORY_INTERVAL_MINUTES: u64 = 60;

/// The `history` section (global or of one workspace). Every limit is
/// optional; absent means unlimited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryConfig {
    /// Events older than this many days are pruned; a thread idle that
    /// long with nothing left is deleted (1-36500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_days: Option<u64>,
    /// A thread keeps at most this many events, its newest (16 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events_per_thread: Option<u64>,
    /// A thread keeps at most this many payload bytes, its newest events
    /// (65536 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes_per_thread: Option<u64>,
    /// Minutes between passes (1-10080, default 60; global only). A pass
    /// also runs once the controller's journal check passed at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_minutes: Option<u64>,
}

impl HistoryConfig {
    /// Whether any limit is set.
    pub fn limits_anything(&self) -> bool {
        self.max_age_days.is_some()
            || self.max_events_per_thread.is_some()
            || self.max_bytes_per_thread.is_some()
    }

    /// `self` over `global`, field by field (a workspace's section).
    pub fn over(&self, global: Option<&HistoryConfig>) -> HistoryConfig {
        let g = global.cloned().unwrap_or_default();
        HistoryConfig {
            max_age_days: self.max_age_days.or(g.max_age_days),
            max_events_per_thread: self.max_events_per_thread.or(g.max_events_per_thread),
            max_bytes_per_thread: self.max_bytes_per_thread.or(g.max_bytes_per_thread),
            interval_minutes: None,
        }
    }

    /// The minutes between passes.
    pub fn interval(&self) -> u64 {
        self.interval_minutes
            .unwrap_or(DEFAULT_HISTORY_INTERVAL_MINUTES)
    }

    /// The shape rules; the error is (field, reason). `at` is the
    /// section's path (`history`, `workspaces.w.history`).
    pub(super) fn check(&self, at: &str, global: bool) -> Result<(), (String, String)> {
        let field = |f: &str| format!("{at}.{f}");
        if let Some(d) = self.max_age_days
            && !(1..=MAX_HISTORY_AGE_DAYS).contains(&d)
        {
            return Err((
                field("maxAgeDays"),
                format!("must be 1-{MAX_HISTORY_AGE_DAYS}"),
            ));
        }
        if let Some(n) = self.max_events_per_thread
            && n < MIN_HISTORY_EVENTS
        {
            return Err((
                field("maxEventsPerThread"),
                format!("must be at least {MIN_HISTORY_EVENTS}"),
            ));
        }
        if let Some(n) = self.max_bytes_per_thread
            && n < MIN_HISTORY_BYTES
        {
            return Err((
                field("maxBytesPerThread"),
                format!("must be at least {MIN_HISTORY_BYTES}"),
            ));
        }
        match self.interval_minutes {
            Some(_) if !global => Err((
                field("intervalMinutes"),
                "is global only (set it in `history`)".into(),
            )),
            Some(m) if !(1..=10_080).contains(&m) => {
                Err((field("intervalMinutes"), "must be 1-10080".into()))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn history_shape_rules() {
        let ok: HistoryConfig = serde_json::from_value(
            json!({"maxAgeDays": 30, "maxEventsPerThread": 1000, "maxBytesPerThread": 65536}),
        )
        .unwrap();
        assert_eq!(ok.check("history", true), Ok(()));
        assert!(ok.limits_anything());
        assert!(!HistoryConfig::default().limits_anything());
        for (bad, field) in [
            (json!({"maxAgeDays": 0}), "history.maxAgeDays"),
            (json!({"maxAgeDays": 36501}), "history.maxAgeDays"),
            (
                json!({"maxEventsPerThread": 15}),
                "history.maxEventsPerThread",
            ),
            (
                json!({"maxBytesPerThread": 1024}),
                "history.maxBytesPerThread",
            ),
            (json!({"intervalMinutes": 0}), "history.intervalMinutes"),
        ] {
            let c: HistoryConfig = serde_json::from_value(bad).unwrap();
            assert_eq!(c.check("history", true).unwrap_err().0, field);
        }
        let ws: HistoryConfig = serde_json::from_value(json!({"intervalMinutes": 5})).unwrap();
        assert_eq!(
            ws.check("workspaces.w.history", false).unwrap_err().0,
            "workspaces.w.history.intervalMinutes"
        );
        assert!(serde_json::from_value::<HistoryConfig>(json!({"maxAge": 1})).is_err());
    }

    #[test]
    fn a_workspace_section_overrides_field_by_field() {
        let global = HistoryConfig {
            max_age_days: Some(30),
            max_events_per_thread: Some(100),
            interval_minutes: Some(5),
            ..Default::default()
        };
        let ws = HistoryConfig {
            max_events_per_thread: Some(20),
            ..Default::default()
        };
        let eff = ws.over(Some(&global));
        assert_eq!(
            (
                eff.max_age_days,
                eff.max_events_per_thread,
                eff.interval_minutes
            ),
            (Some(30), Some(20), None)
        );
    }
}
