//! MCP servers applications register on their connections (`mcp.register`).
//!
//! What must stay true: a registration lives exactly as long as the
//! [`McpLease`] its connection holds — dropping the lease (the connection
//! closed, or re-registered as another application) removes its servers —
//! so a turn never gets a server whose application is gone; it fails
//! `mcp_server_unavailable` before dispatch instead. Registrations are
//! keyed by (principal, application): one application's servers are never
//! visible to another. Nothing here is persisted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use lapis_protocol::mcp::{McpEndpoint, McpRefusal, McpServer, validate_servers};

use crate::acp::mcp::endpoint;

/// (principal, application).
type Owner = (String, String);

/// One registered server and the lease that holds it.
#[derive(Debug, Clone)]
struct Entry {
    /// The registering connection's lease id.
    lease: u64,
    /// The description.
    server: McpServer,
}

#[derive(Debug, Default)]
struct Inner {
    /// Next lease id (unique for the process).
    next: u64,
    /// Servers by owner, then name.
    servers: HashMap<Owner, BTreeMap<String, Entry>>,
}

/// The registry; cheap to clone (shared by the server and the engine).
#[derive(Debug, Clone, Default)]
pub struct McpRegistry(Arc<Mutex<Inner>>);

/// A connection's hold on its registrations; dropping it withdraws them.
#[derive(Debug)]
pub struct McpLease {
    /// The registry.
    registry: McpRegistry,
    /// This lease's id.
    id: u64,
    /// Whose servers these are.
    owner: Owner,
}

impl Drop for McpLease {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        if let Some(map) = inner.servers.get_mut(&self.owner) {
            map.retain(|_, e| e.lease != self.id);
            if map.is_empty() {
                inner.servers.remove(&self.owner);
            }
        }
    }
}

impl McpRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces what `lease` registered with `servers` (validated first;
    /// nothing changes on a refusal). A missing lease, or one of another
    /// owner, is replaced by a new one.
    pub fn register(
        &self,
        lease: &mut Option<McpLease>,
        principal: &str,
        application: &str,
        servers: Vec<McpServer>,
    ) -> Result<Vec<McpEndpoint>, McpRefusal> {
        validate_servers(&servers)?;
        let owner = (principal.to_owned(), application.to_owned());
        if lease.as_ref().is_some_and(|l| l.owner != owner) {
            *lease = None; // withdraws the other owner's servers
        }
        let mut inner = self.lock();
        let id = match lease {
            Some(l) => l.id,
            None => {
                inner.next += 1;
                inner.next
            }
        };
        let map = inner.servers.entry(owner.clone()).or_default();
        // A name another connection of the same application holds moves to
        // this one: the newest registration wins, so an application that
        // reconnects registers again without waiting for the server to
        // notice that its old connection closed.
        map.retain(|_, e| e.lease != id);
        for s in &servers {
            map.insert(
                s.name.clone(),
                Entry {
                    lease: id,
                    server: s.clone(),
                },
            );
        }
        drop(inner);
        if lease.is_none() {
            *lease = Some(McpLease {
                registry: self.clone(),
                id,
                owner,
            });
        }
        Ok(servers.iter().map(endpoint).collect())
    }

    /// The descriptions of `names`, in that order; the first one not
    /// registered now is `mcp_server_unavailable`.
    pub fn lookup(
        &self,
        principal: &str,
        application: &str,
        names: &[String],
    ) -> Result<Vec<McpServer>, McpRefusal> {
        let inner = self.lock();
        let map = inner
            .servers
            .get(&(principal.to_owned(), application.to_owned()));
        names
            .iter()
            .map(|n| {
                map.and_then(|m| m.get(n))
                    .map(|e| e.server.clone())
                    .ok_or_else(|| McpRefusal::Unavailable { server: n.clone() })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn server(name: &str, command: &str) -> McpServer {
        serde_json::from_value(json!({"name": name, "command": command})).unwrap()
    }

    #[test]
    fn registrations_live_as_long_as_their_lease() {
        let r = McpRegistry::default();
        let mut lease = None;
        let eps = r
            .register(&mut lease, "owner", "app", vec![server("a", "/bin/a")])
            .unwrap();
        assert_eq!(eps[0].name, "a");
        assert_eq!(
            r.lookup("owner", "app", &["a".into()]).unwrap()[0].name,
            "a"
        );
        // Another application or principal never sees it.
        assert!(r.lookup("owner", "other", &["a".into()]).is_err());
        assert!(r.lookup("someone", "app", &["a".into()]).is_err());
        drop(lease);
        let err = r.lookup("owner", "app", &["a".into()]).unwrap_err();
        assert_eq!(err.code().as_str(), "mcp_server_unavailable");
    }

    #[test]
    fn re_registering_replaces_and_the_newest_connection_takes_a_name_over() {
        let r = McpRegistry::default();
        let mut one = None;
        let mut two = None;
        r.register(&mut one, "o", "app", vec![server("a", "/bin/a")])
            .unwrap();
        r.register(&mut two, "o", "app", vec![server("a", "/bin/other")])
            .unwrap();
        let a = r.lookup("o", "app", &["a".into()]).unwrap();
        assert_eq!(a[0].command.as_deref(), Some("/bin/other"));
        // The first connection closing no longer withdraws it.
        drop(one);
        assert!(r.lookup("o", "app", &["a".into()]).is_ok());
        let mut one = None;
        r.register(&mut two, "o", "app", vec![server("b", "/bin/b")])
            .unwrap();
        r.register(&mut one, "o", "app", vec![server("c", "/bin/c")])
            .unwrap();
        assert!(r.lookup("o", "app", &["a".into()]).is_err());
        assert_eq!(
            r.lookup("o", "app", &["b".into(), "c".into()])
                .unwrap()
                .len(),
            2
        );
        // A refused registration changes nothing.
        let bad = server("d", "relative");
        assert!(r.register(&mut one, "o", "app", vec![bad]).is_err());
        assert!(r.lookup("o", "app", &["c".into()]).is_ok());
        drop(two);
        assert!(r.lookup("o", "app", &["b".into()]).is_err());
        assert!(r.lookup("o", "app", &["c".into()]).is_ok());
    }
}
