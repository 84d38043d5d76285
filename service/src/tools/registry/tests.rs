use serde_json::json;
use tokio::sync::mpsc;

use super::*;
use lapis_protocol::context::ContextRegister;
use lapis_protocol::tools::MAX_TOOL_ENDPOINTS;

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
    let r = PortRegistry::default();
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
fn kinds_are_apart_and_one_lease_revokes_every_kind() {
    let r = PortRegistry::default();
    let mut lease = None;
    r.register(&mut lease, "o", "app", spec("crm", &["find"]), peer())
        .unwrap();
    let port = ContextRegister {
        port: "crm".into(),
        deadline_ms: None,
    };
    let id = r
        .register_port(&mut lease, "o", "app", port.clone(), peer())
        .unwrap();
    assert!(id.starts_with("context_") && id.len() == 8 + 64);
    let ctx = r.lookup_port::<ContextRegister>("o", "app", "crm").unwrap();
    assert_eq!(ctx.identity, id);
    assert!(
        r.lookup_port::<ContextRegister>("o", "other", "crm")
            .is_none()
    );
    let tools = r.lookup("o", "app", &["crm".into()]).unwrap().remove(0);
    // Unregistering one kind leaves the other.
    assert!(r.unregister_port(PortKind::Context, lease.as_ref(), "crm"));
    assert!(*ctx.revoked.borrow());
    assert!(!*tools.revoked.borrow());
    r.register_port(&mut lease, "o", "app", port, peer())
        .unwrap();
    let ctx = r.lookup_port::<ContextRegister>("o", "app", "crm").unwrap();
    drop(lease);
    assert!(
        *ctx.revoked.borrow() && *tools.revoked.borrow(),
        "disposal revokes both at once"
    );
    assert!(
        r.lookup_port::<ContextRegister>("o", "app", "crm")
            .is_none()
    );
}

#[test]
fn unregister_and_takeover_revoke_and_limits_hold() {
    let r = PortRegistry::default();
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
