//! `watch`'s view model: what the screen shows, reduced from a snapshot
//! (`status`, workspaces, threads, turns, pending requests) and then from
//! journal events, with no terminal and no connection in sight.
//!
//! What must stay true:
//! - the model is pure: it changes only through [`View::load`],
//!   [`View::apply`], [`View::loaded`] and the key handler (`keys.rs`), and
//!   time comes in as an argument, so every state is reachable in a unit
//!   test;
//! - applying an event that the snapshot already reflects changes nothing
//!   that matters (a state change sets the state the event names, a
//!   request is keyed by its turn and id), so subscribing *before* reading
//!   the snapshot loses nothing and doubles nothing;
//! - a workspace's state is derived from its turns, never stored: fenced
//!   when a turn of it is fenced, else running when one is in flight, else
//!   queued N, else idle;
//! - the selection is a turn id, so turns arriving never move it;
//! - a turn's context meter is the agent's latest report for it (a
//!   `usage_update` note, else the turn record's `usage`), never a guess;
//!   a turn without one shows its thread's latest reported turn's, since a
//!   session's context carries over between turns.

use std::collections::{BTreeMap, HashMap};

use lapis_protocol::params::StatusResult;
use lapis_protocol::{
    JournalEvent, Note, Observation, Payload, PendingRequest, PermissionOption, Thread, Turn,
    TurnState, Workspace,
};

pub(super) use super::rows::{ContextMeter, Pending, TurnRow, WorkspaceState};
use super::transcript::{Transcript, display};

/// Settled turns kept in the list (the newest); turns in flight, queued or
/// fenced are always kept.
pub(super) const MAX_SETTLED: usize = 50;

/// The connection's state, shown in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Link {
    /// Subscribed; events arrive as they are committed.
    Live,
    /// The connection was lost; reconnecting (the reason, terminal-safe).
    Reconnecting(String),
}

/// An input line the view is asking for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Mode {
    /// Keys select and act.
    Normal,
    /// Resolving a fenced turn: the owner types `failed` or `cancelled`.
    Resolve {
        /// The fenced turn.
        turn: String,
        /// What was typed so far.
        input: String,
    },
    /// Asking before a cancel (`c`): `y` cancels, any other key does not.
    ConfirmCancel {
        /// The turn to cancel.
        turn: String,
    },
    /// Typing the turns filter (`/`): it applies as typed; Enter keeps
    /// it, Esc clears it.
    Filter {
        /// What was typed so far.
        input: String,
    },
    /// The key help over the view (`?`): any key closes it.
    Help,
}

/// Everything `watch` shows.
#[derive(Debug)]
pub(super) struct View {
    /// `version` of the running controller.
    pub(super) version: String,
    /// Queue depth and capacity from the last `status`.
    pub(super) queue: (usize, usize),
    /// Registered workspaces by id (their paths).
    pub(super) workspaces: BTreeMap<String, String>,
    /// Threads by id: (workspace, provider).
    pub(super) threads: HashMap<String, (String, String)>,
    /// Turns by id.
    pub(super) turns: HashMap<String, TurnRow>,
    /// Pending requests by turn, in request order.
    pub(super) pending: BTreeMap<String, Vec<Pending>>,
    /// Transcripts by turn (only turns seen streaming or selected).
    pub(super) transcripts: HashMap<String, Transcript>,
    /// The selected turn.
    pub(super) selected: Option<String>,
    /// Input mode.
    pub(super) mode: Mode,
    /// Only turns whose id, workspace, state or provider contain this
    /// (case-insensitive; empty: all). Set with `/`.
    pub(super) filter: String,
    /// The last action's result or a hint, shown in the footer.
    pub(super) message: Option<String>,
    /// The connection.
    pub(super) link: Link,
}

impl Default for View {
    fn default() -> View {
        View {
            version: String::new(),
            queue: (0, 0),
            workspaces: BTreeMap::new(),
            threads: HashMap::new(),
            turns: HashMap::new(),
            pending: BTreeMap::new(),
            transcripts: HashMap::new(),
            selected: None,
            mode: Mode::Normal,
            filter: String::new(),
            message: None,
            link: Link::Live,
        }
    }
}

/// What a snapshot is made of.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// `status`.
    pub(super) status: Option<StatusResult>,
    /// `workspaces.list`.
    pub(super) workspaces: Vec<Workspace>,
    /// `threads.list`.
    pub(super) threads: Vec<Thread>,
    /// `turns.list`.
    pub(super) turns: Vec<Turn>,
    /// `permissions.list`.
    pub(super) pending: Vec<PendingRequest>,
}

impl View {
    /// Takes a snapshot. Transcripts and the selection stay (events after
    /// the snapshot keep them current); everything else is replaced.
    pub(super) fn load(&mut self, snap: Snapshot) {
        if let Some(status) = &snap.status {
            self.version = status.version.clone();
            self.queue = (status.queue.depth, status.queue.capacity);
        }
        self.workspaces = snap
            .workspaces
            .into_iter()
            .map(|w| (w.id, w.path))
            .collect();
        self.threads = snap
            .threads
            .into_iter()
            .map(|t| (t.id, (t.workspace_id, t.provider)))
            .collect();
        self.turns = snap
            .turns
            .iter()
            .map(|t| (t.id.clone(), TurnRow::of(t)))
            .collect();
        // A fence or a running turn older than the list's bound still counts.
        if let Some(status) = &snap.status {
            for s in status.fences.iter().chain(&status.running_turns) {
                self.turns.entry(s.turn.clone()).or_insert_with(|| TurnRow {
                    id: s.turn.clone(),
                    thread: s.thread.clone(),
                    workspace: s.workspace.clone(),
                    state: s.state,
                    outcome: None,
                    cancel_requested: false,
                    created_at: s.since,
                    started_at: Some(s.since),
                    finished_at: s.state.is_fenced().then_some(s.since),
                    context: None,
                });
            }
        }
        self.pending.clear();
        for r in snap.pending {
            self.add_pending(&r.turn_id, &r.id, r.tool_call.title.as_deref(), r.options);
        }
        self.trim();
        if self
            .selected
            .as_ref()
            .is_none_or(|s| !self.turns.contains_key(s))
        {
            self.selected = self.ordered().first().map(|t| t.id.clone());
        }
    }

    /// Reduces one journal event. Returns whether the screen changed.
    pub(super) fn apply(&mut self, e: &JournalEvent) -> bool {
        let turn = e.turn_id.clone();
        let mut changed = match e.body() {
            Some(Payload::ThreadCreated(c)) => {
                self.threads
                    .insert(e.thread_id.clone(), (c.workspace_id, c.provider));
                false
            }
            Some(Payload::ThreadConfigured(c)) => {
                if let Some((_, provider)) = self.threads.get_mut(&e.thread_id) {
                    *provider = c.provider;
                }
                true
            }
            Some(Payload::TurnSubmitted(s)) => {
                let workspace = self
                    .threads
                    .get(&e.thread_id)
                    .map(|(w, _)| w.clone())
                    .unwrap_or_default();
                self.turns.entry(s.turn_id.clone()).or_insert(TurnRow {
                    id: s.turn_id.clone(),
                    thread: e.thread_id.clone(),
                    workspace,
                    state: TurnState::Queued,
                    outcome: None,
                    cancel_requested: false,
                    created_at: e.at,
                    started_at: None,
                    finished_at: None,
                    context: None,
                });
                // Seen from its submission: nothing to replay for it.
                let t = self.transcripts.entry(s.turn_id.clone()).or_default();
                if t.entries.is_empty() {
                    t.complete = true;
                }
                if self.selected.is_none() {
                    self.selected = Some(s.turn_id);
                }
                true
            }
            Some(Payload::TurnState(c)) => {
                if let Some(row) = turn.as_deref().and_then(|t| self.turns.get_mut(t)) {
                    row.state = c.to;
                    if c.outcome.is_some() {
                        row.outcome = c.outcome.clone();
                    }
                    if matches!(c.to, TurnState::Preparing | TurnState::Running)
                        && row.started_at.is_none()
                    {
                        row.started_at = Some(e.at);
                    }
                    if c.to.is_terminal() || c.to.is_fenced() {
                        row.finished_at = Some(e.at);
                    }
                }
                if c.to.is_terminal()
                    && let Some(t) = &turn
                {
                    // Its requests ended with it.
                    self.pending.remove(t);
                }
                true
            }
            Some(Payload::TurnResolved(r)) => {
                if let Some(row) = turn.as_deref().and_then(|t| self.turns.get_mut(t)) {
                    row.state = r.as_state;
                }
                true
            }
            Some(Payload::CancelRequested(_)) => {
                if let Some(row) = turn.as_deref().and_then(|t| self.turns.get_mut(t)) {
                    row.cancel_requested = true;
                }
                true
            }
            Some(Payload::PermissionRequested(r)) => {
                if let Some(t) = &turn {
                    self.add_pending(t, &r.request_id, r.invocation.title.as_deref(), r.options);
                }
                true
            }
            Some(Payload::PermissionDecided(d)) => {
                if let Some(t) = &turn {
                    self.remove_pending(t, &d.request_id);
                }
                true
            }
            Some(Payload::Observation(Observation::Note(Note::UsageUpdate(u)))) => {
                let meter = ContextMeter::of(Some(u.used), Some(u.size));
                match turn.as_deref().and_then(|t| self.turns.get_mut(t)) {
                    Some(row) if meter.is_some() && row.context != meter => {
                        row.context = meter;
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if let Some(t) = &turn
            && let Some(transcript) = self.transcripts.get_mut(t)
        {
            changed |= transcript.take(e) && self.selected.as_deref() == Some(t.as_str());
        } else if let Some(t) = &turn
            && self.turns.contains_key(t)
        {
            // First sight of a turn that began before the watch: start an
            // incomplete transcript (replayed when selected).
            let mut transcript = Transcript::default();
            changed |= transcript.take(e) && self.selected.as_deref() == Some(t.as_str());
            self.transcripts.insert(t.clone(), transcript);
        }
        self.trim();
        changed
    }

    /// The journal replay of `turn`'s thread, filtered to `turn`, taken as
    /// its complete transcript (it replaces what live events built).
    pub(super) fn loaded(&mut self, turn: &str, events: &[JournalEvent]) {
        let mut t = Transcript::default();
        for e in events {
            if e.turn_id.as_deref() == Some(turn) {
                t.take(e);
            }
        }
        // Live events already queued after the replay's end are newer.
        if let Some(old) = self.transcripts.get(turn) {
            t.upto = t.upto.max(old.upto);
        }
        t.complete = true;
        self.transcripts.insert(turn.to_owned(), t);
    }

    fn add_pending(
        &mut self,
        turn: &str,
        id: &str,
        title: Option<&str>,
        options: Vec<PermissionOption>,
    ) {
        let list = self.pending.entry(turn.to_owned()).or_default();
        if list.iter().any(|p| p.id == id) {
            return;
        }
        list.push(Pending {
            id: id.to_owned(),
            title: display(title.unwrap_or("a tool call")),
            options: options
                .into_iter()
                .map(|o| PermissionOption {
                    name: display(&o.name),
                    ..o
                })
                .collect(),
        });
    }

    fn remove_pending(&mut self, turn: &str, id: &str) {
        if let Some(list) = self.pending.get_mut(turn) {
            list.retain(|p| p.id != id);
            if list.is_empty() {
                self.pending.remove(turn);
            }
        }
    }

    /// The context meter the selected turn shows: its own report, else the
    /// newest report of a turn of the same thread (with whether it is
    /// borrowed so).
    pub(super) fn context_of(&self, turn: &str) -> Option<(ContextMeter, bool)> {
        let row = self.turns.get(turn)?;
        if let Some(c) = row.context {
            return Some((c, false));
        }
        self.turns
            .values()
            .filter(|t| t.thread == row.thread && t.context.is_some())
            .max_by_key(|t| (t.created_at, t.id.clone()))
            .and_then(|t| t.context)
            .map(|c| (c, true))
    }

    /// Keeps every unsettled turn and the newest [`MAX_SETTLED`] settled
    /// ones (and their transcripts).
    fn trim(&mut self) {
        let mut settled: Vec<(i64, String)> = self
            .turns
            .values()
            .filter(|t| t.state.is_terminal())
            .map(|t| (t.created_at, t.id.clone()))
            .collect();
        if settled.len() <= MAX_SETTLED {
            return;
        }
        settled.sort();
        let over = settled.len() - MAX_SETTLED;
        for (_, id) in settled.into_iter().take(over) {
            if self.selected.as_deref() == Some(id.as_str()) {
                continue;
            }
            self.turns.remove(&id);
            self.transcripts.remove(&id);
        }
    }

    /// A workspace's state.
    pub(super) fn workspace_state(&self, workspace: &str) -> WorkspaceState {
        let mut queued = 0;
        let mut running = false;
        for t in self.turns.values().filter(|t| t.workspace == workspace) {
            if t.state.is_fenced() {
                return WorkspaceState::Fenced;
            }
            running |= t.in_flight();
            queued += usize::from(t.state == TurnState::Queued);
        }
        match (running, queued) {
            (true, queued) => WorkspaceState::Running { queued },
            (false, 0) => WorkspaceState::Idle,
            (false, n) => WorkspaceState::Queued(n),
        }
    }

    /// Every workspace the view knows (registered, or named by a turn).
    pub(super) fn workspace_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.workspaces.keys().cloned().collect();
        for t in self.turns.values() {
            if !t.workspace.is_empty() && !ids.contains(&t.workspace) {
                ids.push(t.workspace.clone());
            }
        }
        ids.sort();
        ids
    }

    /// The turns in list order: newest submission first.
    pub(super) fn ordered(&self) -> Vec<&TurnRow> {
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&TurnRow> = self
            .turns
            .values()
            .filter(|t| {
                needle.is_empty()
                    || [
                        t.id.as_str(),
                        t.workspace.as_str(),
                        t.state.as_str(),
                        self.provider(t),
                    ]
                    .iter()
                    .any(|field| field.to_lowercase().contains(&needle))
            })
            .collect();
        rows.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        rows
    }

    /// A turn's provider (through its thread).
    pub(super) fn provider(&self, turn: &TurnRow) -> &str {
        self.threads
            .get(&turn.thread)
            .map_or("?", |(_, p)| p.as_str())
    }

    /// The selected turn's row.
    pub(super) fn selected_turn(&self) -> Option<&TurnRow> {
        self.selected.as_deref().and_then(|s| self.turns.get(s))
    }

    /// How many requests wait for an answer.
    pub(super) fn pending_count(&self) -> usize {
        self.pending.values().map(Vec::len).sum()
    }
}
