//! The endpoints applications register on their connections: tool
//! endpoints (`tools.register`), context ports (`context.register`),
//! memory ports (`memory.register`) and transcript stores
//! (`transcript.register`), one registry for every kind of port.
//!
//! What must stay true: a registration lives exactly as long as the
//! [`PortLease`] its connection holds, or until its unregister, or until a
//! newer connection of the same application registers the same kind and
//! name; each of those flips the registration's revocation signal, so a
//! call waiting on it fails closed at once. Registrations are keyed by
//! (principal, application): one application's ports are never visible to
//! another. Nothing here is persisted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use lapis_protocol::tools::{ToolEndpointView, ToolRefusal, ToolSpec, ToolsRegister};

use lapis_protocol::ThreadPorts;
use lapis_protocol::callback::Callback;

use super::peer::{Peer, PeerError};

mod kinds;
use kinds::view;
pub(crate) use kinds::{PortKind, Stored};

/// (principal, application).
type Owner = (String, String);

/// What one kind of port is to the registry: its checks, its identity and
/// its limit.
pub(crate) trait Port: Sized + Send + Sync + 'static {
    /// Its name space.
    const KIND: PortKind;
    /// Most ports of this kind one owner holds.
    const LIMIT: usize;
    /// Why a registration is refused.
    type Refusal;
    /// Its name.
    fn name(&self) -> &str;
    /// Shape rules.
    fn check(&self) -> Result<(), Self::Refusal>;
    /// `<kind>_` + lowercase hex SHA-256 of the description.
    fn identity(&self) -> String;
    /// The refusal of one port too many.
    fn over_limit() -> Self::Refusal;
    /// Into the registry's form.
    fn wrap(spec: Arc<Self>) -> Stored {
        Stored(spec)
    }
    /// Out of it (`None`: another kind).
    fn unwrap(stored: &Stored) -> Option<Arc<Self>> {
        stored.0.clone().downcast::<Self>().ok()
    }
    /// The refusal of a binding to `name` that its owner has not
    /// registered now (`why` says whose it should have been).
    fn unavailable(name: &str, why: &'static str) -> Self::Refusal;
    /// Whether a thread that is `restricted` (or not) and keeps
    /// `retention` may bind a port of this kind: the kind's own rule,
    /// checked by `threads.create` (and, for what configure may change,
    /// `threads.configure`) between the name's shape and the registry.
    fn admits(
        restricted: bool,
        retention: crate::domain::Retention,
    ) -> Result<(), lapis_protocol::RpcError> {
        let _ = (restricted, retention);
        Ok(())
    }
}

/// Whose ports a lookup may reach: the one ownership rule. A port is only
/// ever found for the principal and application that registered it —
/// a thread's own (at the claim, on the bridge) or a session's (when a
/// thread is created or configured) — and a miss is refused in the port
/// kind's own terms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortOwner<'a> {
    /// The principal.
    principal: &'a str,
    /// Its application.
    application: &'a str,
    /// How a miss reads.
    why: &'static str,
}

impl<'a> PortOwner<'a> {
    /// The ports of `thread`'s own principal and application.
    pub(crate) fn thread(thread: &'a lapis_protocol::Thread) -> Self {
        PortOwner {
            principal: &thread.principal,
            application: &thread.application,
            why: "not registered by the thread's application",
        }
    }

    /// The ports of the session's principal and application.
    pub(crate) fn session(principal: &'a str, application: &'a str) -> Self {
        PortOwner {
            principal,
            application,
            why: "not registered by this application",
        }
    }
}

/// One registered port, as a call sees it (a tool endpoint by default).
#[derive(Debug, Clone)]
pub(crate) struct Endpoint<S = ToolsRegister> {
    /// The description.
    pub(crate) spec: Arc<S>,
    /// Its identity (`tools_…`, `context_…`).
    pub(crate) identity: String,
    /// The registering connection.
    pub(crate) peer: Peer,
    /// Turns true when the registration ends.
    pub(crate) revoked: watch::Receiver<bool>,
}

impl<S> Endpoint<S> {
    /// Sends the callback `C` to the registering connection and waits for
    /// its result, at most `deadline`, failing at once when the
    /// registration ends meanwhile.
    pub(crate) async fn call<C: Callback>(
        &self,
        params: &C::Params,
        deadline: std::time::Duration,
    ) -> Result<C::Result, PeerError> {
        self.peer
            .call::<C>(params, deadline, self.revoked.clone())
            .await
    }
}

impl Endpoint {
    /// The tool named `tool`, if the endpoint has it.
    pub(crate) fn tool(&self, tool: &str) -> Option<&ToolSpec> {
        self.spec.tools.iter().find(|t| t.name == tool)
    }
}

#[derive(Debug)]
struct Entry {
    /// The registering connection's lease id.
    lease: u64,
    /// The description.
    stored: Stored,
    /// Its identity.
    identity: String,
    /// The registering connection.
    peer: Peer,
    /// What calls wait on.
    revoked: watch::Receiver<bool>,
    /// Flipped when the entry is removed.
    revoke: watch::Sender<bool>,
}

impl Entry {
    fn endpoint<S: Port>(&self) -> Option<Endpoint<S>> {
        Some(Endpoint {
            spec: S::unwrap(&self.stored)?,
            identity: self.identity.clone(),
            peer: self.peer.clone(),
            revoked: self.revoked.clone(),
        })
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.revoke.send_replace(true);
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Next lease id (unique for the process).
    next: u64,
    /// Ports by owner, then kind and name.
    endpoints: HashMap<Owner, BTreeMap<(PortKind, String), Entry>>,
}

/// The registry; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct PortRegistry(Arc<Mutex<Inner>>);

/// A connection's hold on its ports (every kind); dropping it revokes them.
#[derive(Debug)]
pub(crate) struct PortLease {
    /// The registry.
    registry: PortRegistry,
    /// This lease's id.
    id: u64,
    /// Whose ports these are.
    owner: Owner,
}

impl Drop for PortLease {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        if let Some(map) = inner.endpoints.get_mut(&self.owner) {
            map.retain(|_, e| e.lease != self.id);
            if map.is_empty() {
                inner.endpoints.remove(&self.owner);
            }
        }
    }
}

impl PortRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers (or replaces) one port for the connection holding `lease`
    /// (checked first; nothing changes on a refusal) and returns its
    /// identity. A missing lease, or one of another owner, is replaced by a
    /// new one. The same kind and name held by another connection of the
    /// owner moves here (that registration is revoked).
    pub(crate) fn register_port<S: Port>(
        &self,
        lease: &mut Option<PortLease>,
        principal: &str,
        application: &str,
        spec: S,
        peer: Peer,
    ) -> Result<String, S::Refusal> {
        spec.check()?;
        let owner = (principal.to_owned(), application.to_owned());
        if lease.as_ref().is_some_and(|l| l.owner != owner) {
            *lease = None; // revokes the other owner's ports
        }
        let key = (S::KIND, spec.name().to_owned());
        let mut inner = self.lock();
        let map = inner.endpoints.get(&owner);
        let held = map.map_or(0, |m| m.keys().filter(|(k, _)| *k == S::KIND).count());
        if held >= S::LIMIT && !map.is_some_and(|m| m.contains_key(&key)) {
            return Err(S::over_limit());
        }
        let id = match lease {
            Some(l) => l.id,
            None => {
                inner.next += 1;
                inner.next
            }
        };
        let identity = spec.identity();
        let (revoke, revoked) = watch::channel(false);
        let entry = Entry {
            lease: id,
            stored: S::wrap(Arc::new(spec)),
            identity: identity.clone(),
            peer,
            revoked,
            revoke,
        };
        // Replacing drops (and so revokes) the previous holder of the name.
        inner
            .endpoints
            .entry(owner.clone())
            .or_default()
            .insert(key, entry);
        drop(inner);
        if lease.is_none() {
            *lease = Some(PortLease {
                registry: self.clone(),
                id,
                owner,
            });
        }
        Ok(identity)
    }

    /// Registers (or replaces) one tool endpoint ([`Self::register_port`]).
    pub(crate) fn register(
        &self,
        lease: &mut Option<PortLease>,
        principal: &str,
        application: &str,
        spec: ToolsRegister,
        peer: Peer,
    ) -> Result<ToolEndpointView, ToolRefusal> {
        let shown = view(&spec, "");
        let identity = self.register_port(lease, principal, application, spec, peer)?;
        Ok(ToolEndpointView { identity, ..shown })
    }

    /// Revokes the port `kind`/`name` if `lease` holds it; `true` when it did.
    pub(crate) fn unregister_port(
        &self,
        kind: PortKind,
        lease: Option<&PortLease>,
        name: &str,
    ) -> bool {
        let Some(lease) = lease else { return false };
        let mut inner = self.lock();
        let Some(map) = inner.endpoints.get_mut(&lease.owner) else {
            return false;
        };
        let key = (kind, name.to_owned());
        if map.get(&key).is_none_or(|e| e.lease != lease.id) {
            return false;
        }
        map.remove(&key);
        if map.is_empty() {
            inner.endpoints.remove(&lease.owner);
        }
        true
    }

    /// Revokes the tool endpoint `name` if `lease` holds it.
    pub(crate) fn unregister(&self, lease: Option<&PortLease>, name: &str) -> bool {
        self.unregister_port(PortKind::Tools, lease, name)
    }

    /// The port `name` of kind `S` of an owner, if registered now.
    pub(crate) fn lookup_port<S: Port>(
        &self,
        principal: &str,
        application: &str,
        name: &str,
    ) -> Option<Endpoint<S>> {
        let inner = self.lock();
        inner
            .endpoints
            .get(&(principal.to_owned(), application.to_owned()))?
            .get(&(S::KIND, name.to_owned()))?
            .endpoint()
    }

    /// The port `name` of kind `S` that `owner` registered, or the kind's
    /// refusal when it has none of that name now.
    pub(crate) fn owned<S: Port>(
        &self,
        owner: PortOwner<'_>,
        name: &str,
    ) -> Result<Endpoint<S>, S::Refusal> {
        self.lookup_port(owner.principal, owner.application, name)
            .ok_or_else(|| S::unavailable(name, owner.why))
    }

    /// The members of `ports` (wire names, kind order) whose port `owner`
    /// has registered now under another identity than the thread
    /// recorded: a claim or an attach of such a thread is
    /// `binding_mismatch`. A binding without a recorded identity (older
    /// threads: name only), or not registered now, is not one of them (a
    /// missing port is refused in its kind's own terms).
    pub(crate) fn changed(&self, owner: PortOwner<'_>, ports: &ThreadPorts) -> Vec<&'static str> {
        let inner = self.lock();
        let Some(entries) = inner
            .endpoints
            .get(&(owner.principal.to_owned(), owner.application.to_owned()))
        else {
            return Vec::new();
        };
        let ids = &ports.identities;
        PortKind::ALL
            .into_iter()
            .filter(|&kind| {
                kind.bound(ports).iter().any(|name| {
                    let now = entries.get(&(kind, name.clone())).map(|e| &e.identity);
                    matches!((now, kind.recorded(ids, name)), (Some(now), Some(then)) if now != then)
                })
            })
            .map(PortKind::wire)
            .collect()
    }

    /// The tool endpoints `names` of an owner, in that order; the first one
    /// not registered now is `tool_endpoint_unavailable`.
    pub(crate) fn lookup(
        &self,
        principal: &str,
        application: &str,
        names: &[String],
    ) -> Result<Vec<Endpoint>, ToolRefusal> {
        let owner = PortOwner::session(principal, application);
        names.iter().map(|n| self.owned(owner, n)).collect()
    }
}

#[cfg(test)]
mod tests;
