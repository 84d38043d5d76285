//! The socket's connection cap, and who gives way when it is reached.
//!
//! What must stay true:
//! - at most `max` connections are counted at once; a connection over the
//!   cap is never left hanging: it is answered with a `limit_reached` error
//!   frame and closed;
//! - connections that have not authenticated yet cannot lock authenticated
//!   clients out: when the cap is reached, the oldest unauthenticated
//!   connection is shed (it gets the same explicit frame) and its slot goes
//!   to the newcomer, provided it has had [`SHED_GRACE`] to say `hello`
//!   (so a flood cannot shed a client mid-handshake). Otherwise the
//!   newcomer is refused. Together with the hello deadline this keeps `status` answering
//!   while a flood of idle connections is held open.
//! - authenticated connections cannot lock the owner out either: one config
//!   token other than the owner's (the first token, the one the CLI uses)
//!   holds at most [`per_token_quota`] of them (half the cap), and those
//!   tokens together leave the owner's reserved share free
//!   ([`owner_reserve`]: a quarter of the cap, at least two slots where
//!   the cap allows), so the owner's open connections (a `watch`, an
//!   application) never use up what its `status` needs (the owner's token
//!   is bounded by the cap alone). A `hello` over a quota fails
//!   `limit_reached` naming it (`data.limit`: `connectionsPerToken`,
//!   `ownerReserve`, `bridgeConnectionsPerSession`) and the connection
//!   stays unauthenticated.
//! - an agent session's MCP bridge (a `hello` with a tool ticket) is
//!   authenticated too, so an idle bridge is never shed for a newcomer; its
//!   connections count under [`bridge_quota`] of the thread's principal,
//!   a name no config token can have, so they are held to a non-owner
//!   token's share and never take the owner's reserved share; and one
//!   agent session holds at most [`BRIDGE_CONNECTIONS_PER_SESSION`] of
//!   them, so one agent cannot take its principal's whole share.
//! - a socket that [`Serves::Bridge`] (managed mode's private socket)
//!   admits tool tickets only: a `hello` with a token or a bearer is
//!   refused before any credential is compared, so no session is issued
//!   on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long an unauthenticated connection is safe from being shed when the
/// cap is full. Clients write `hello` as soon as they connect (the SDK and
/// the CLI do), so one still silent after this is idle, or its `hello` waits
/// behind a flood; either way it is told why (`limit_reached`) and may
/// reconnect (the CLI retries). Measured: at one second, 1,000 idle
/// connections held `status` out for about that second (release build,
/// `chaos flood`: max 1.0-1.3 s); at 100 ms it gets in within the goal.
pub(crate) const SHED_GRACE: Duration = Duration::from_millis(100);

/// Most authenticated connections one config token other than the
/// owner's may hold under a cap of `max`: half of it (at least one).
pub(crate) fn per_token_quota(max: usize) -> usize {
    (max / 2).max(1)
}

/// How many slots of a cap of `max` tokens other than the owner's leave
/// free: a quarter, at least two (one for an open owner connection, one
/// for its `status`) and at least one, never the whole cap but where the
/// cap is one.
pub(crate) fn owner_reserve(max: usize) -> usize {
    (max / 4).max(2).min(max.saturating_sub(1)).max(1)
}

/// Most MCP bridge connections one agent session may hold at once: its
/// agent connects one per MCP client it starts (usually one).
pub(crate) const BRIDGE_CONNECTIONS_PER_SESSION: usize = 4;

/// The quota name the MCP bridge connections of `principal` count under
/// (with a `:`, which no token name has: they are `[A-Za-z0-9._-]`).
pub(crate) fn bridge_quota(principal: &str) -> String {
    format!("bridge:{principal}")
}

/// Who a socket is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// Applications and the MCP bridge (`serve`'s controller socket).
    Everyone,
    /// The MCP bridge only (managed mode's bridge socket): tool tickets.
    Bridge,
}

/// The cap and the unauthenticated connections that may be shed.
#[derive(Debug)]
pub(crate) struct Admission {
    /// Who the socket is for: [`Slot::serves`].
    serves: Serves,
    /// Most connections counted at once.
    max: usize,
    /// Most authenticated connections of one token ([`per_token_quota`]).
    per_token: usize,
    /// Most authenticated connections of all tokens but the owner's
    /// (`max - `[`owner_reserve`]).
    others_max: usize,
    /// The owner's token name (the first config token), whose connections
    /// may use the slot kept from every other token.
    owner: String,
    /// Counted connections and the sheddable ones.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Connections holding a slot.
    open: usize,
    /// Unauthenticated connections by number (oldest first), with when
    /// they were admitted and the signal that sheds them.
    pending: BTreeMap<u64, (Instant, Arc<Shed>)>,
    /// Authenticated connections per token name.
    by_token: HashMap<String, usize>,
    /// Authenticated connections of tokens other than the owner's.
    others: usize,
    /// MCP bridge connections per agent session number.
    by_bridge_session: HashMap<u64, usize>,
}

/// Why an authenticated connection may not hold its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The token already holds its quota of connections.
    TokenQuota(usize),
    /// Every slot but the owner's reserved share is held by other tokens.
    OwnerReserve,
    /// The agent session already holds its bridge connections.
    BridgeSessionQuota(usize),
}

impl Refusal {
    /// The `data.limit` of the `limit_reached` error.
    pub(crate) fn limit(self) -> &'static str {
        match self {
            Refusal::TokenQuota(_) => "connectionsPerToken",
            Refusal::OwnerReserve => "ownerReserve",
            Refusal::BridgeSessionQuota(_) => "bridgeConnectionsPerSession",
        }
    }

    /// What the client is told.
    pub(crate) fn message(self) -> String {
        match self {
            Refusal::TokenQuota(n) => format!(
                "this token already holds {n} connections, its share of server.maxConnections; close some first"
            ),
            Refusal::OwnerReserve => "every connection slot but those kept for the owner's token is in use (server.maxConnections); close some first".into(),
            Refusal::BridgeSessionQuota(n) => format!(
                "this agent session already holds {n} tool bridge connections; close some first"
            ),
        }
    }
}

/// Tells a connection it was shed.
#[derive(Debug, Default)]
pub(crate) struct Shed {
    /// Set once the connection's slot went to a newcomer.
    done: AtomicBool,
    /// Wakes the connection's loop.
    notify: Notify,
}

/// What admission decided for a new connection.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Serve it; the slot is released when the guard drops.
    Yes(Slot),
    /// Every slot is held by an authenticated connection: refuse it.
    Full,
}

impl Admission {
    /// A cap of `max` connections of a socket for `serves`; `owner` is the
    /// owner's token name.
    pub(crate) fn new(max: usize, owner: impl Into<String>, serves: Serves) -> Arc<Admission> {
        let max = max.max(1);
        Arc::new(Admission {
            serves,
            max,
            per_token: per_token_quota(max),
            others_max: max - owner_reserve(max),
            owner: owner.into(),
            state: Mutex::new(State::default()),
        })
    }

    /// Admits connection `number` at `now`, shedding the oldest
    /// unauthenticated connection past its grace when the cap is reached.
    pub(crate) fn admit(self: &Arc<Self>, number: u64, now: Instant) -> Admit {
        let mut state = self.state.lock().expect("poisoned");
        if state.open >= self.max {
            let sheddable = state
                .pending
                .first_key_value()
                .is_some_and(|(_, (since, _))| now.saturating_duration_since(*since) >= SHED_GRACE);
            if !sheddable {
                return Admit::Full;
            }
            let Some((_, (_, shed))) = state.pending.pop_first() else {
                return Admit::Full;
            };
            // The slot moves to the newcomer: the shed connection no longer
            // counts and closes at once.
            shed.done.store(true, Ordering::SeqCst);
            shed.notify.notify_one();
        } else {
            state.open += 1;
        }
        let shed = Arc::new(Shed::default());
        state.pending.insert(number, (now, shed.clone()));
        Admit::Yes(Slot {
            admission: self.clone(),
            number,
            shed,
            token: Mutex::new(None),
            bridge: Mutex::new(None),
        })
    }

    /// Connections counted now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.state.lock().expect("poisoned").open
    }
}

/// A connection's slot under the cap.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Where the slot is returned.
    admission: Arc<Admission>,
    /// The connection's number.
    number: u64,
    /// Set and notified when this connection is shed.
    shed: Arc<Shed>,
    /// The token whose quota this connection counts against, once its
    /// `hello` was admitted.
    token: Mutex<Option<String>>,
    /// The agent session whose bridge this connection is, once its ticket
    /// `hello` was admitted.
    bridge: Mutex<Option<u64>>,
}

impl Slot {
    /// Who the connection's socket is for.
    pub(crate) fn serves(&self) -> Serves {
        self.admission.serves
    }

    /// Counts this connection against `token`'s quota (moving it from the
    /// token of an earlier `hello`, if another); refused when the token is
    /// at its quota or, for a token other than the owner's, when only the
    /// owner's reserved share is left.
    pub(crate) fn admit_token(&self, token: &str) -> Result<(), Refusal> {
        let mut held = self.token.lock().expect("poisoned");
        let mut state = self.admission.state.lock().expect("poisoned");
        self.count_token(&mut held, &mut state, token)
    }

    /// An agent session's MCP bridge: counted against the principal's
    /// bridge quota ([`bridge_quota`], like a token) and, in the same
    /// step, against the session's own cap
    /// ([`BRIDGE_CONNECTIONS_PER_SESSION`]).
    pub(crate) fn admit_bridge(&self, principal: &str, session: u64) -> Result<(), Refusal> {
        let mut held = self.token.lock().expect("poisoned");
        let mut bridge = self.bridge.lock().expect("poisoned");
        let mut state = self.admission.state.lock().expect("poisoned");
        let moving = *bridge != Some(session);
        let theirs = state.by_bridge_session.get(&session).copied().unwrap_or(0);
        if moving && theirs >= BRIDGE_CONNECTIONS_PER_SESSION {
            return Err(Refusal::BridgeSessionQuota(BRIDGE_CONNECTIONS_PER_SESSION));
        }
        self.count_token(&mut held, &mut state, &bridge_quota(principal))?;
        if moving {
            if let Some(previous) = bridge.replace(session) {
                state.release_bridge(previous);
            }
            *state.by_bridge_session.entry(session).or_default() += 1;
        }
        Ok(())
    }

    /// [`Slot::admit_token`] with its locks held.
    fn count_token(
        &self,
        held: &mut Option<String>,
        state: &mut State,
        token: &str,
    ) -> Result<(), Refusal> {
        let a = &self.admission;
        if held.as_deref() == Some(token) {
            return Ok(());
        }
        let owner = token == a.owner;
        let mine = state.by_token.get(token).copied().unwrap_or(0);
        if !owner && mine >= a.per_token {
            return Err(Refusal::TokenQuota(a.per_token));
        }
        if !owner && state.others >= a.others_max {
            return Err(Refusal::OwnerReserve);
        }
        if let Some(previous) = held.take() {
            state.release(&previous, previous == a.owner);
        }
        *state.by_token.entry(token.to_owned()).or_default() += 1;
        if !owner {
            state.others += 1;
        }
        *held = Some(token.to_owned());
        Ok(())
    }

    /// The connection authenticated: it can no longer be shed. False when it
    /// was shed first (the connection must close).
    pub(crate) fn authenticated(&self) -> bool {
        let mut state = self.admission.state.lock().expect("poisoned");
        state.pending.remove(&self.number);
        !self.shed.done.load(Ordering::SeqCst)
    }

    /// Resolves when this connection has been shed.
    pub(crate) async fn shed(&self) {
        loop {
            if self.shed.done.load(Ordering::SeqCst) {
                return;
            }
            self.shed.notify.notified().await;
        }
    }
}

impl State {
    /// A bridge connection of agent session `session` no longer counts.
    fn release_bridge(&mut self, session: u64) {
        if let Some(n) = self.by_bridge_session.get_mut(&session) {
            *n -= 1;
            if *n == 0 {
                self.by_bridge_session.remove(&session);
            }
        }
    }

    /// A connection of `token` no longer counts against its quota.
    fn release(&mut self, token: &str, owner: bool) {
        if let Some(n) = self.by_token.get_mut(token) {
            *n -= 1;
            if *n == 0 {
                self.by_token.remove(token);
            }
        }
        if !owner {
            self.others -= 1;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = self.admission.state.lock().expect("poisoned");
        if let Some(token) = self.token.lock().expect("poisoned").take() {
            let owner = token == self.admission.owner;
            state.release(&token, owner);
        }
        if let Some(session) = self.bridge.lock().expect("poisoned").take() {
            state.release_bridge(session);
        }
        state.pending.remove(&self.number);
        if !self.shed.done.load(Ordering::SeqCst) {
            state.open -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(a: Admit) -> Slot {
        match a {
            Admit::Yes(s) => s,
            Admit::Full => panic!("refused"),
        }
    }

    #[tokio::test]
    async fn the_oldest_unauthenticated_connection_gives_way_then_newcomers_are_refused() {
        let t0 = Instant::now();
        let later = t0 + SHED_GRACE;
        let a = Admission::new(2, "owner", Serves::Everyone);
        let one = slot(a.admit(1, t0));
        let two = slot(a.admit(2, t0));
        assert!(two.authenticated());
        // Full, and connection 1 is still within its grace: refused.
        assert!(matches!(a.admit(3, t0), Admit::Full));
        // Past the grace, connection 1 (unauthenticated) is shed for 3.
        let three = slot(a.admit(3, later));
        one.shed().await;
        assert!(!one.authenticated(), "a shed connection may not stay");
        assert_eq!(a.open(), 2);
        drop(one);
        assert_eq!(a.open(), 2, "the shed slot moved, it is not returned twice");
        assert!(three.authenticated());
        // Every slot authenticated: the newcomer is refused.
        assert!(matches!(a.admit(4, later), Admit::Full));
        drop(two);
        assert_eq!(a.open(), 1);
        let _five = slot(a.admit(5, later));
        assert_eq!(a.open(), 2);
    }

    /// One token cannot hold more than half the slots, and other tokens
    /// together never take the owner's reserved share.
    #[test]
    fn a_token_holds_its_quota_and_the_owner_keeps_its_share() {
        let t0 = Instant::now();
        let a = Admission::new(4, "owner", Serves::Everyone);
        let s: Vec<Slot> = (0..4).map(|n| slot(a.admit(n, t0))).collect();
        assert_eq!(s[0].admit_token("status"), Ok(()));
        assert_eq!(s[2].admit_token("bot"), Ok(()));
        assert_eq!(s[1].admit_token("status"), Err(Refusal::OwnerReserve));
        let a = Admission::new(8, "owner", Serves::Everyone);
        let s: Vec<Slot> = (0..8).map(|n| slot(a.admit(n, t0))).collect();
        for slot in &s[0..4] {
            assert_eq!(slot.admit_token("status"), Ok(()));
        }
        assert_eq!(s[4].admit_token("status"), Err(Refusal::TokenQuota(4)));
        assert_eq!(s[4].admit_token("bot"), Ok(()));
        assert_eq!(s[5].admit_token("bot"), Ok(()));
        assert_eq!(s[6].admit_token("other"), Err(Refusal::OwnerReserve));
        assert_eq!(s[6].admit_token("owner"), Ok(()));
        // The owner's token is bounded by the cap alone.
        assert_eq!(s[2].admit_token("owner"), Ok(()));
        // A connection that goes returns its token's share.
        let mut s = s;
        drop(s.remove(0));
        let again = slot(a.admit(9, t0));
        assert_eq!(again.admit_token("status"), Ok(()));
        // Saying hello again with the same token is not counted twice.
        assert_eq!(again.admit_token("status"), Ok(()));
    }

    /// The finding: two other tokens at their shares and one open owner
    /// connection (a `watch`) still leave the owner's `status` a slot.
    #[test]
    fn two_other_tokens_and_an_open_owner_connection_leave_the_owner_a_slot() {
        let t0 = Instant::now();
        for max in [4, 8, 16, 256] {
            let a = Admission::new(max, "owner", Serves::Everyone);
            let mut held = Vec::new();
            for token in ["reader", "guest"] {
                loop {
                    let s = slot(a.admit(held.len() as u64, t0));
                    if s.admit_token(token).is_err() {
                        break;
                    }
                    held.push(s);
                }
            }
            let watch = slot(a.admit(1000, t0));
            assert_eq!(watch.admit_token("owner"), Ok(()), "max {max}");
            let status = a.admit(1001, t0);
            let Admit::Yes(status) = status else {
                panic!("max {max}: the owner's status found no slot");
            };
            assert_eq!(status.admit_token("owner"), Ok(()), "max {max}");
            assert!(owner_reserve(max) >= 2 && owner_reserve(max) < max);
        }
        assert_eq!(owner_reserve(1), 1);
        assert_eq!(owner_reserve(2), 1);
    }

    /// One agent session's bridge connections are capped on their own,
    /// below the principal's share; another session still gets in, and a
    /// closed one returns its place.
    #[test]
    fn one_agent_session_holds_at_most_its_bridge_connections() {
        let t0 = Instant::now();
        let a = Admission::new(256, "owner", Serves::Everyone);
        let mut s: Vec<Slot> = (0..6).map(|n| slot(a.admit(n, t0))).collect();
        for slot in &s[0..BRIDGE_CONNECTIONS_PER_SESSION] {
            assert_eq!(slot.admit_bridge("owner", 7), Ok(()));
        }
        let over = &s[BRIDGE_CONNECTIONS_PER_SESSION];
        assert_eq!(
            over.admit_bridge("owner", 7),
            Err(Refusal::BridgeSessionQuota(BRIDGE_CONNECTIONS_PER_SESSION))
        );
        assert_eq!(over.admit_bridge("owner", 8), Ok(()));
        // The same session saying hello again is not counted twice.
        assert_eq!(s[0].admit_bridge("owner", 7), Ok(()));
        drop(s.remove(0));
        assert_eq!(s[4].admit_bridge("owner", 7), Ok(()));
    }
}
