//! Tool tickets: the credential an agent session's MCP bridge says `hello`
//! with.
//!
//! What must stay true: a ticket is bound to one thread and one agent
//! session (one launched agent process); it lives exactly as long as the
//! [`TicketHold`] that session carries, so it expires with the session and
//! a ticket of an ended session — replayed from another — authenticates
//! nothing. Only the SHA-256 of a ticket is kept; the secret itself goes
//! only into the bridge's environment toward the agent (never argv, the
//! journal, a log or a receipt). A ticket is never a bootstrap token or a
//! session bearer, and a bridge connection can call `tools.list` and
//! `tools.call` only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// What a ticket stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The thread whose tools it may list and call.
    pub(crate) thread_id: String,
    /// The thread's principal and application (whose endpoints they are).
    pub(crate) principal: String,
    /// The thread's application.
    pub(crate) application: String,
    /// The agent session it was issued for (process-unique number).
    pub(crate) session: u64,
}

#[derive(Debug, Default)]
struct Inner {
    /// Next session number.
    next: u64,
    /// Grants by ticket digest.
    grants: HashMap<[u8; 32], Grant>,
}

/// The live tickets; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tickets(Arc<Mutex<Inner>>);

/// Keeps one ticket valid; dropping it (the agent session ended) expires it.
#[derive(Debug)]
pub(crate) struct TicketHold {
    /// The registry.
    tickets: Tickets,
    /// The ticket's digest.
    digest: [u8; 32],
    /// The agent session it was issued for.
    session: u64,
}

impl TicketHold {
    /// The agent session number the ticket was issued for.
    pub(crate) fn session(&self) -> u64 {
        self.session
    }
}

impl Drop for TicketHold {
    fn drop(&mut self) {
        self.tickets.lock().grants.remove(&self.digest);
    }
}

fn digest(ticket: &str) -> [u8; 32] {
    Sha256::digest(ticket.as_bytes()).into()
}

impl Tickets {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Issues a ticket for a new agent session of `thread_id`: the secret
    /// (for the bridge's environment only) and the hold that keeps it valid.
    pub(crate) fn issue(
        &self,
        thread_id: &str,
        principal: &str,
        application: &str,
    ) -> std::io::Result<(String, TicketHold)> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| std::io::Error::other(e.to_string()))?;
        let secret = format!("lapis_tkt_{}", hex::encode(raw));
        let d = digest(&secret);
        let mut inner = self.lock();
        inner.next += 1;
        let grant = Grant {
            thread_id: thread_id.to_owned(),
            principal: principal.to_owned(),
            application: application.to_owned(),
            session: inner.next,
        };
        let session = grant.session;
        inner.grants.insert(d, grant);
        drop(inner);
        Ok((
            secret,
            TicketHold {
                tickets: self.clone(),
                digest: d,
                session,
            },
        ))
    }

    /// What a ticket stands for, while its session lives.
    pub(crate) fn check(&self, ticket: &str) -> Option<Grant> {
        self.lock().grants.get(&digest(ticket)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_valid_exactly_while_its_session_holds_it() {
        let t = Tickets::default();
        let (one, hold_one) = t.issue("thr_a", "o", "app").unwrap();
        let (two, hold_two) = t.issue("thr_b", "o", "app").unwrap();
        assert_ne!(one, two);
        let g = t.check(&one).unwrap();
        assert_eq!(g.thread_id, "thr_a");
        assert_ne!(g.session, t.check(&two).unwrap().session);
        assert!(t.check("lapis_tkt_guess").is_none());
        drop(hold_one);
        assert!(t.check(&one).is_none(), "expired with its session");
        assert!(t.check(&two).is_some());
        drop(hold_two);
        assert!(t.lock().grants.is_empty());
    }

    /// An agent that prints its ticket (it holds one in its environment)
    /// never gets it into the journal: tickets are in the redaction set.
    #[test]
    fn an_issued_ticket_is_redacted_like_the_controllers_other_secrets() {
        let (ticket, _hold) = Tickets::default().issue("thr_a", "o", "app").unwrap();
        let text = format!("env: LAPIS_TOOLS_TICKET={ticket}\n");
        let (out, markers) = crate::redact::redactor().redact_str(&text);
        assert_eq!(markers, 1, "{out}");
        assert!(!out.contains(&ticket[10..]), "{out}");
        assert!(out.contains("[REDACTED:lapis-ticket]"), "{out}");
    }
}
