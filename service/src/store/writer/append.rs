//! Streamed appends on the writer: a run of them journaled in one write
//! (a savepoint of the batch's transaction), each resolved to its turn
//! first; an append to a terminal or fenced turn becomes an observation.

use std::sync::Arc;

use super::*;

/// Where a streamed append goes, resolved before its batch's write (a
/// turn's state does not change in between: the appends of one batch are
/// written together, before any later operation runs).
#[derive(Debug, Clone)]
struct Plan {
    /// The turn's thread (shared by a run of appends to one turn).
    thread: Arc<str>,
    /// The turn is terminal or fenced: the append becomes an observation.
    late: bool,
}

impl Writer {
    /// Journals a run of streamed appends in one write (a savepoint of the
    /// batch's transaction); returns how to answer them once the batch's
    /// fate is known.
    pub(super) fn append_batch(&mut self, batch: Vec<AppendReq>) -> Reply {
        // Resolve each turn first (reads only); a run of appends to one
        // turn, the usual stream, resolves it once and shares the plan.
        let mut plans: Vec<(AppendReq, StoreResult<Plan>)> = Vec::with_capacity(batch.len());
        for req in batch {
            let plan = match plans.last() {
                Some((prev, Ok(p))) if prev.turn == req.turn && req.kind.is_activity() => {
                    Ok(p.clone())
                }
                _ => self.plan_append(&req),
            };
            plans.push((req, plan));
        }
        // Where this write's events land in the batch's published list.
        let base = self.outbox.len();
        for (req, plan) in &plans {
            // The turn's end will look for a pending request to settle
            // (set before the write: a rolled-back one only costs a look).
            if matches!(plan, Ok(Plan { late: false, .. }))
                && req.kind == EventKind::PermissionRequested
                && let Some(live) = self.live.get_mut(&req.turn)
            {
                live.asked = true;
            }
            if plan.is_err()
                && let Some(live) = self.live.get_mut(&req.turn)
            {
                live.append_failed = true;
            }
        }
        let result = self.write(|tx, journal, stage, now| {
            let mut idx = Vec::with_capacity(plans.len());
            for (req, plan) in plans.iter_mut() {
                match plan {
                    Ok(Plan { thread, late }) => {
                        // Moved, not cloned: the payload goes to the event.
                        let payload = req.payload.take();
                        let (kind, payload) = if *late {
                            (
                                EventKind::Observation,
                                Some(ReadyPayload::late(req.kind, payload)),
                            )
                        } else {
                            (req.kind, payload)
                        };
                        journal.append_ready(
                            tx,
                            stage,
                            thread,
                            Some(&req.turn),
                            kind,
                            now,
                            payload,
                        )?;
                        if !*late {
                            // The inbox row moves with its event.
                            let event = stage.events.last().expect("just staged");
                            super::super::inbox::on_event(tx, event, now)?;
                        }
                        idx.push(Some(base + stage.events.len() - 1));
                    }
                    Err(_) => idx.push(None),
                }
            }
            Ok(idx)
        });
        if result.is_err() {
            for (req, _) in &plans {
                if let Some(live) = self.live.get_mut(&req.turn) {
                    live.append_failed = true;
                }
            }
        }
        Box::new(move |failed, published| match (result, failed) {
            (Ok(idx), None) => {
                for ((req, plan), i) in plans.into_iter().zip(idx) {
                    let answer = match (plan, i.and_then(|i| published.get(i))) {
                        (Ok(_), Some(e)) => Ok(Arc::clone(e)),
                        (Err(e), _) => Err(e),
                        (Ok(_), None) => Err(StoreError::Closed),
                    };
                    let _ = req.reply.send(answer);
                }
            }
            (Err(e), _) => {
                let cause = e.batch_cause();
                for (req, _) in plans {
                    let _ = req.reply.send(Err(StoreError::rolled_back(cause)));
                }
            }
            (Ok(_), Some(cause)) => {
                for (req, _) in plans {
                    let _ = req.reply.send(Err(StoreError::rolled_back(cause)));
                }
            }
        })
    }

    /// Where an append goes; late appends become observations.
    fn plan_append(&self, req: &AppendReq) -> StoreResult<Plan> {
        if !req.kind.is_activity() {
            return Err(StoreError::invalid("not an activity kind"));
        }
        if let Some(live) = self.live.get(&req.turn) {
            return match live.state {
                TurnState::Queued => Err(StoreError::invalid("turn has not been claimed")),
                s => Ok(Plan {
                    thread: Arc::from(live.thread.as_str()),
                    late: s.is_fenced(),
                }),
            };
        }
        match read::turn(&self.conn, &req.turn)? {
            Some(t) => Ok(Plan {
                thread: Arc::from(t.thread_id),
                late: true,
            }),
            None => Err(StoreError::not_found("turn", req.turn.clone())),
        }
    }
}
