//! Tool endpoints applications register on their connections
//! (`tools.register`).
//!
//! What must stay true: a registration lives exactly as long as the
//! [`ToolLease`] its connection holds, or until `tools.unregister`, or
//! until a newer connection of the same application registers the same
//! name; each of those flips the registration's revocation signal, so a
//! call waiting on it fails closed at once. Registrations are keyed by
//! (principal, application): one application's endpoints are never visible
//! to another. Nothing here is persisted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use lapis_protocol::tools::{
    MAX_TOOL_ENDPOINTS, ToolEndpointView, ToolRefusal, ToolSpec, ToolsRegister, validate_endpoint,
};

use super::peer::Peer;

/// (principal, application).
type Owner = (String, String);

/// One registered endpoint, as a call sees it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The description.
    pub(crate) spec: Arc<ToolsRegister>,
    /// Its identity (`tools_…`).
    pub(crate) identity: String,
    /// The registering connection.
    pub(crate) peer: Peer,
    /// Turns true when the registration ends.
    pub(crate) revoked: watch::Receiver<bool>,
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
    /// What calls get.
    endpoint: Endpoint,
    /// Flipped when the entry is removed.
    revoke: watch::Sender<bool>,
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
    /// Endpoints by owner, then name.
    endpoints: HashMap<Owner, BTreeMap<String, Entry>>,
}

/// The registry; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolRegistry(Arc<Mutex<Inner>>);

/// A connection's hold on its endpoints; dropping it revokes them.
#[derive(Debug)]
pub(crate) struct ToolLease {
    /// The registry.
    registry: ToolRegistry,
    /// This lease's id.
    id: u64,
    /// Whose endpoints these are.
    owner: Owner,
}

impl Drop for ToolLease {
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

/// `tools_` + lowercase hex SHA-256 of the endpoint's description.
pub(crate) fn identity(spec: &ToolsRegister) -> String {
    let canonical = json!({
        "endpoint": spec.endpoint, "capture": spec.capture,
        "tools": spec.tools.iter().map(|t| json!({
            "name": t.name, "description": t.description,
            "inputSchema": t.input_schema, "mutating": t.mutating,
        })).collect::<Vec<_>>(),
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    format!("tools_{}", hex::encode(digest))
}

/// What is shown of an endpoint.
pub(crate) fn view(spec: &ToolsRegister, identity: &str) -> ToolEndpointView {
    ToolEndpointView {
        name: spec.endpoint.clone(),
        identity: identity.to_owned(),
        tools: spec.tools.iter().map(|t| t.name.clone()).collect(),
        capture: spec.capture,
    }
}

impl ToolRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers (or replaces) one endpoint for the connection holding
    /// `lease` (validated first; nothing changes on a refusal). A missing
    /// lease, or one of another owner, is replaced by a new one. The same
    /// name held by another connection of the owner moves here (that
    /// registration is revoked).
    pub(crate) fn register(
        &self,
        lease: &mut Option<ToolLease>,
        principal: &str,
        application: &str,
        spec: ToolsRegister,
        peer: Peer,
    ) -> Result<ToolEndpointView, ToolRefusal> {
        validate_endpoint(&spec)?;
        let owner = (principal.to_owned(), application.to_owned());
        if lease.as_ref().is_some_and(|l| l.owner != owner) {
            *lease = None; // revokes the other owner's endpoints
        }
        let mut inner = self.lock();
        let map = inner.endpoints.get(&owner);
        let held = map.map_or(0, BTreeMap::len);
        if held >= MAX_TOOL_ENDPOINTS && !map.is_some_and(|m| m.contains_key(&spec.endpoint)) {
            return Err(ToolRefusal::Limit {
                what: "endpoint count",
                limit: MAX_TOOL_ENDPOINTS,
            });
        }
        let id = match lease {
            Some(l) => l.id,
            None => {
                inner.next += 1;
                inner.next
            }
        };
        let identity = identity(&spec);
        let shown = view(&spec, &identity);
        let (revoke, revoked) = watch::channel(false);
        let entry = Entry {
            lease: id,
            endpoint: Endpoint {
                spec: Arc::new(spec),
                identity,
                peer,
                revoked,
            },
            revoke,
        };
        // Replacing drops (and so revokes) the previous holder of the name.
        inner
            .endpoints
            .entry(owner.clone())
            .or_default()
            .insert(shown.name.clone(), entry);
        drop(inner);
        if lease.is_none() {
            *lease = Some(ToolLease {
                registry: self.clone(),
                id,
                owner,
            });
        }
        Ok(shown)
    }

    /// Revokes `name` if `lease` holds it; `true` when it did.
    pub(crate) fn unregister(&self, lease: Option<&ToolLease>, name: &str) -> bool {
        let Some(lease) = lease else { return false };
        let mut inner = self.lock();
        let Some(map) = inner.endpoints.get_mut(&lease.owner) else {
            return false;
        };
        if map.get(name).is_none_or(|e| e.lease != lease.id) {
            return false;
        }
        map.remove(name);
        if map.is_empty() {
            inner.endpoints.remove(&lease.owner);
        }
        true
    }

    /// The endpoints `names` of an owner, in that order; the first one not
    /// registered now is `tool_endpoint_unavailable`.
    pub(crate) fn lookup(
        &self,
        principal: &str,
        application: &str,
        names: &[String],
    ) -> Result<Vec<Endpoint>, ToolRefusal> {
        let inner = self.lock();
        let map = inner
            .endpoints
            .get(&(principal.to_owned(), application.to_owned()));
        names
            .iter()
            .map(|n| {
                map.and_then(|m| m.get(n))
                    .map(|e| e.endpoint.clone())
                    .ok_or_else(|| ToolRefusal::Unavailable {
                        endpoint: n.clone(),
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::*;

    fn spec(name: &str, tools: &[&str]) -> ToolsRegister {
        serde_json::from_value(
            json!({"endpoint": name, "tools": tools.iter().map(|t| json!({
            "name": t, "inputSchema": {"type": "object"}})).collect::<Vec<_>>()}),
        )
        .unwrap()
    }

    fn peer() -> Peer {
        Peer::new(mpsc::channel(1).0)
    }

    #[test]
    fn endpoints_live_as_long_as_their_lease_and_are_per_owner() {
        let r = ToolRegistry::default();
        let mut lease = None;
        let v = r
            .register(&mut lease, "o", "app", spec("crm", &["find"]), peer())
            .unwrap();
        assert!(v.identity.starts_with("tools_") && v.identity.len() == 6 + 64);
        let ep = r.lookup("o", "app", &["crm".into()]).unwrap().remove(0);
        assert!(ep.tool("find").is_some() && ep.tool("nope").is_none());
        assert!(r.lookup("o", "other", &["crm".into()]).is_err());
        assert!(r.lookup("someone", "app", &["crm".into()]).is_err());
        assert!(!*ep.revoked.borrow());
        drop(lease);
        assert!(
            *ep.revoked.borrow(),
            "closing the connection revokes at once"
        );
        let err = r.lookup("o", "app", &["crm".into()]).unwrap_err();
        assert_eq!(err.code().as_str(), "tool_endpoint_unavailable");
    }

    #[test]
    fn unregister_and_takeover_revoke_and_limits_hold() {
        let r = ToolRegistry::default();
        let (mut one, mut two) = (None, None);
        r.register(&mut one, "o", "app", spec("crm", &["a"]), peer())
            .unwrap();
        let first = r.lookup("o", "app", &["crm".into()]).unwrap().remove(0);
        r.register(&mut two, "o", "app", spec("crm", &["b"]), peer())
            .unwrap();
        assert!(*first.revoked.borrow(), "a newer connection takes the name");
        assert!(!r.unregister(one.as_ref(), "crm"), "no longer the holder");
        drop(one);
        let second = r.lookup("o", "app", &["crm".into()]).unwrap().remove(0);
        assert!(second.tool("b").is_some());
        assert!(r.unregister(two.as_ref(), "crm"));
        assert!(*second.revoked.borrow());
        assert!(r.lookup("o", "app", &["crm".into()]).is_err());
        for i in 0..MAX_TOOL_ENDPOINTS {
            r.register(&mut two, "o", "app", spec(&format!("e{i}"), &["a"]), peer())
                .unwrap();
        }
        let over = r.register(&mut two, "o", "app", spec("more", &["a"]), peer());
        assert_eq!(over.unwrap_err().code().as_str(), "tool_limit_exceeded");
        // Replacing a held name is not one more.
        r.register(&mut two, "o", "app", spec("e0", &["z"]), peer())
            .unwrap();
        let bad = r.register(&mut two, "o", "app", spec("bad.name", &["a"]), peer());
        assert_eq!(bad.unwrap_err().code().as_str(), "tool_invalid");
    }
}
