//! A verified bundle made ready for the writer: the thread's settings,
//! its turns with new ids and their settled rows, and its events with
//! ids substituted — all checked before the writer's transaction, so a
//! bundle that would not be stored as this controller stores its own
//! rows is refused with nothing written.

use std::collections::HashMap;

use lapis_protocol::config::ThreadBudget;
use lapis_protocol::{ApprovalPolicy, ErrorCode, EventKind, Payload, Retention, TurnState};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::domain::{StoreError, StoreResult};

use super::super::bundle::{BundleEvent, Header, read_bundle};
use super::super::ids::{check_name, new_id};
use super::super::tombstone;

/// One turn of the bundle, settled, under its new id.
#[derive(Debug)]
pub(super) struct TurnPlan {
    /// The new id.
    pub(super) id: String,
    /// Its command id here (`import.<id>`; the source's is not reused).
    pub(super) command_id: String,
    /// The turn it continues (new id).
    pub(super) continues: Option<String>,
    /// The prompt, when the bundle retained it.
    pub(super) prompt: Option<String>,
    pub(super) state: TurnState,
    pub(super) outcome: String,
    pub(super) created_at: i64,
    pub(super) prepared_at: Option<i64>,
    pub(super) dispatched_at: Option<i64>,
    pub(super) started_at: Option<i64>,
    pub(super) finished_at: i64,
    pub(super) resolved_at: Option<i64>,
}

/// One event to journal again.
#[derive(Debug)]
pub(super) struct EventPlan {
    pub(super) kind: EventKind,
    /// Its turn (new id).
    pub(super) turn: Option<String>,
    pub(super) at: i64,
    /// `None`: no payload; `Some(None)`: one the bundle did not retain.
    pub(super) payload: Option<Option<Value>>,
}

/// The thread's settings (its last `thread_configured`, else its
/// `thread_created`; when retention pruned both, `ask`, unrestricted, no
/// timeout or budget, and a provider the caller names).
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) provider: Option<String>,
    pub(super) approval: ApprovalPolicy,
    pub(super) restricted: bool,
    pub(super) permission_timeout_seconds: Option<u64>,
    pub(super) budget: Option<ThreadBudget>,
}

/// What the writer imports.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(super) header: Header,
    /// The new thread id.
    pub(super) thread: String,
    pub(super) retention: Retention,
    pub(super) settings: Settings,
    pub(super) turns: Vec<TurnPlan>,
    pub(super) events: Vec<EventPlan>,
    /// Tombstones and `history_pruned` receipts left out.
    pub(super) pruned: u64,
    /// The chain hash of the bundle's last event.
    pub(super) source_head: String,
    pub(super) sha256: String,
}

impl Plan {
    /// The workspace path the bundle names, if any.
    pub(crate) fn workspace_path(&self) -> Option<&str> {
        self.header.workspace_path.as_deref()
    }

    /// The provider the thread would get (none when retention pruned the
    /// events that name it).
    pub(crate) fn provider(&self) -> Option<&str> {
        self.settings.provider.as_deref()
    }

    /// Another provider for the new thread.
    pub(crate) fn set_provider(&mut self, provider: String) -> StoreResult<()> {
        check_name("provider", &provider)?;
        self.settings.provider = Some(provider);
        Ok(())
    }
}

/// A refusal with its code; nothing was written.
pub(crate) fn refused(code: ErrorCode, reason: impl Into<String>, data: Value) -> StoreError {
    let data = match data {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    StoreError::ImportRefused {
        code,
        reason: reason.into(),
        data,
    }
}

fn unsupported(reason: String) -> StoreError {
    refused(ErrorCode::BundleUnsupported, reason, Value::Null)
}

/// Verifies `bytes` and plans its import (see the module docs).
pub(crate) fn plan(bytes: &[u8]) -> StoreResult<Plan> {
    let max = lapis_protocol::MAX_IMPORT_BUNDLE_BYTES;
    if bytes.len() > max {
        return Err(refused(
            ErrorCode::BundleTooLarge,
            format!(
                "the bundle is {} bytes; import takes at most {max}",
                bytes.len()
            ),
            json!({ "bytes": bytes.len(), "max": max }),
        ));
    }
    let (report, lines) = read_bundle(bytes).map_err(|e| {
        let code = if e.unsupported {
            ErrorCode::BundleUnsupported
        } else {
            ErrorCode::BundleTampered
        };
        refused(
            code,
            e.to_string(),
            json!({ "start": e.start, "end": e.end, "reason": e.reason }),
        )
    })?;
    let header = report.header;
    let retention = Retention::parse(&header.retention)
        .ok_or_else(|| unsupported(format!("retention `{}`", header.retention)))?;
    let thread = new_id("thr_")?;
    let mut ids: HashMap<String, String> = HashMap::from([(header.thread.clone(), thread.clone())]);
    let mut turns: Vec<TurnPlan> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut settings: Option<Settings> = None;
    let mut events = Vec::with_capacity(lines.len());
    let mut pruned = 0;
    let source_head = lines.last().map(|e| e.hash.clone()).unwrap_or_default();
    for ev in lines {
        if ev.kind == tombstone::KIND || ev.kind == EventKind::HistoryPruned.as_str() {
            pruned += 1;
            continue;
        }
        let seq = ev.seq;
        let kind = EventKind::parse(&ev.kind)
            .filter(|k| *k != EventKind::ThreadDeleted)
            .ok_or_else(|| unsupported(format!("seq {seq}: event kind `{}`", ev.kind)))?;
        let payload = payload(&ev, kind)?;
        let turn = match &ev.turn_id {
            None => None,
            Some(old) => {
                let i = match index.get(old) {
                    Some(i) => *i,
                    None => {
                        let id = new_id("turn_")?;
                        ids.insert(old.clone(), id.clone());
                        turns.push(TurnPlan {
                            command_id: format!("import.{id}"),
                            id,
                            continues: None,
                            prompt: None,
                            state: TurnState::Queued,
                            outcome: String::new(),
                            created_at: ev.at,
                            prepared_at: None,
                            dispatched_at: None,
                            started_at: None,
                            finished_at: ev.at,
                            resolved_at: None,
                        });
                        index.insert(old.clone(), turns.len() - 1);
                        turns.len() - 1
                    }
                };
                Some(i)
            }
        };
        if let Some(Some(value)) = &payload {
            let typed = Payload::from_value(kind, value.clone());
            match (typed, turn) {
                (Payload::ThreadCreated(c), _) => {
                    settings = Some(Settings {
                        provider: Some(c.provider),
                        approval: c.approval,
                        restricted: c.restricted,
                        permission_timeout_seconds: c.permission_timeout_seconds,
                        budget: c.budget,
                    })
                }
                (Payload::ThreadConfigured(c), _) => {
                    settings = Some(Settings {
                        provider: Some(c.provider),
                        approval: c.approval,
                        restricted: c.restricted,
                        permission_timeout_seconds: c.permission_timeout_seconds,
                        budget: c.budget,
                    })
                }
                (Payload::TurnSubmitted(s), Some(i)) => {
                    let prior = s.continues.and_then(|c| ids.get(&c).cloned());
                    turns[i].continues = prior;
                }
                (Payload::UserMessage(p), Some(i)) => turns[i].prompt = Some(p.text),
                (Payload::TurnState(c), Some(i)) => {
                    let t = &mut turns[i];
                    t.state = c.to;
                    let at = Some(ev.at);
                    match c.to {
                        TurnState::Preparing => t.prepared_at = t.prepared_at.or(at),
                        TurnState::Dispatched => t.dispatched_at = t.dispatched_at.or(at),
                        TurnState::Running => t.started_at = t.started_at.or(at),
                        _ => {}
                    }
                    if c.to.is_terminal() || c.to.is_fenced() {
                        t.finished_at = ev.at;
                        t.outcome = c.outcome.unwrap_or_else(|| c.to.as_str().to_owned());
                    }
                }
                (Payload::TurnResolved(_), Some(i)) => turns[i].resolved_at = Some(ev.at),
                _ => {}
            }
        }
        events.push((ev.at, kind, turn, payload));
    }
    for t in &mut turns {
        if !t.state.is_terminal() {
            return Err(refused(
                ErrorCode::BundleUnsettled,
                format!(
                    "a turn of the bundle is {} (exported before it settled): export the thread again once it has",
                    t.state.as_str()
                ),
                json!({ "state": t.state.as_str() }),
            ));
        }
        check_name("outcome", &t.outcome).map_err(|_| unsupported("a turn's outcome".into()))?;
        // A settled turn's row as the state table leaves it: every turn
        // but one cancelled while queued was prepared, a completed one
        // dispatched (`validate`'s `turns.state` check).
        if t.state != TurnState::Cancelled || t.dispatched_at.is_some() {
            t.prepared_at = t.prepared_at.or(Some(t.finished_at));
        }
        if t.state == TurnState::Completed || t.started_at.is_some() || t.resolved_at.is_some() {
            t.dispatched_at = t.dispatched_at.or(t.prepared_at);
        }
    }
    let settings = settings.unwrap_or(Settings {
        provider: None,
        approval: ApprovalPolicy::Ask,
        restricted: false,
        permission_timeout_seconds: None,
        budget: None,
    });
    if let Some(p) = &settings.provider {
        check_name("provider", p).map_err(|_| unsupported("the thread's provider".into()))?;
    }
    let events = events
        .into_iter()
        .map(|(at, kind, turn, payload)| {
            let turn = turn.map(|i| &turns[i]);
            let payload = payload.map(|p| {
                p.map(|mut v| {
                    substitute(&mut v, &ids);
                    if let (EventKind::TurnSubmitted, Some(t), Value::Object(m)) =
                        (kind, turn, &mut v)
                    {
                        m.insert("commandId".into(), Value::String(t.command_id.clone()));
                    }
                    v
                })
            });
            EventPlan {
                kind,
                turn: turn.map(|t| t.id.clone()),
                at,
                payload,
            }
        })
        .collect();
    Ok(Plan {
        sha256: hex::encode(Sha256::digest(bytes)),
        header,
        thread,
        retention,
        settings,
        turns,
        events,
        pruned,
        source_head,
    })
}

/// The event's payload as this controller would store it: `None` without
/// one, `Some(None)` for content its bundle did not retain; otherwise
/// JSON (an object for a lifecycle kind, as `validate` requires).
fn payload(ev: &BundleEvent, kind: EventKind) -> StoreResult<Option<Option<Value>>> {
    let seq = ev.seq;
    match (ev.has_payload, &ev.payload) {
        (false, None) => Ok(None),
        (true, None) if kind.is_content() => Ok(Some(None)),
        (true, Some(text)) => {
            let value: Value = serde_json::from_str(text)
                .map_err(|_| unsupported(format!("seq {seq}: a payload that is not JSON")))?;
            if !kind.is_content() && !value.is_object() {
                return Err(unsupported(format!(
                    "seq {seq}: a lifecycle payload that is not an object"
                )));
            }
            Ok(Some(Some(value)))
        }
        _ => Err(unsupported(format!(
            "seq {seq}: a payload this controller would not store"
        ))),
    }
}

/// Replaces every string equal to a source id (the thread's, its turns')
/// with its new id. Ids are random, so no content string is one.
fn substitute(value: &mut Value, ids: &HashMap<String, String>) {
    match value {
        Value::String(s) => {
            if let Some(new) = ids.get(s.as_str()) {
                *s = new.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| substitute(v, ids)),
        Value::Object(m) => m.values_mut().for_each(|v| substitute(v, ids)),
        _ => {}
    }
}
