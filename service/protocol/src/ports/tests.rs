//! The flattened ports keep every thread struct's wire shape: the objects
//! below are what the structs serialized to when they spelled the port
//! members out.

use serde_json::json;

use super::*;
use crate::params::{ThreadsConfigure, ThreadsCreate};
use crate::{ApprovalPolicy, Retention, Thread, ThreadCreated, ThreadExpect};

fn ports() -> ThreadPorts {
    ThreadPorts {
        tools: vec!["crm".into(), "notes".into()],
        context: Some("ctx".into()),
        memory: Some("mem".into()),
        transcript_store: Some("vault".into()),
        identities: PortIdentities::default(),
    }
}

#[test]
fn no_ports_is_no_members() {
    assert_eq!(
        serde_json::to_value(ThreadPorts::default()).unwrap(),
        json!({})
    );
    assert_eq!(
        serde_json::to_value(PortsExpect::default()).unwrap(),
        json!({})
    );
    assert_eq!(
        serde_json::to_value(PortsPatch::default()).unwrap(),
        json!({})
    );
}

#[test]
fn threads_create_keeps_its_wire_shape() {
    let mut create = ThreadsCreate::new("proj", "echo");
    create.ports = ports();
    let wire = json!({
        "workspaceId": "proj", "provider": "echo", "restricted": false,
        "tools": ["crm", "notes"], "context": "ctx", "memory": "mem",
        "transcriptStore": "vault"
    });
    assert_eq!(serde_json::to_value(&create).unwrap(), wire);
    assert_eq!(
        serde_json::from_value::<ThreadsCreate>(wire).unwrap(),
        create
    );
    // Unknown members are still refused beside the flattened ones.
    let err = serde_json::from_value::<ThreadsCreate>(
        json!({"workspaceId": "proj", "provider": "echo", "model": "x"}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("model"), "{err}");
}

#[test]
fn threads_configure_keeps_its_wire_shape() {
    let unbind = ThreadsConfigure::new("thr_1", 2).transcript_store(None);
    let wire = json!({"threadId": "thr_1", "expectedVersion": 2, "transcriptStore": null});
    assert_eq!(serde_json::to_value(&unbind).unwrap(), wire);
    assert_eq!(
        serde_json::from_value::<ThreadsConfigure>(wire).unwrap(),
        unbind
    );
    let bind = ThreadsConfigure::new("thr_1", 2).transcript_store(Some("vault".into()));
    let wire = json!({"threadId": "thr_1", "expectedVersion": 2, "transcriptStore": "vault"});
    assert_eq!(serde_json::to_value(&bind).unwrap(), wire);
    assert_eq!(
        serde_json::from_value::<ThreadsConfigure>(wire).unwrap(),
        bind
    );
    let same = serde_json::from_value::<ThreadsConfigure>(
        json!({"threadId": "thr_1", "expectedVersion": 2}),
    )
    .unwrap();
    assert_eq!(same.ports, PortsPatch::default());
    assert!(
        serde_json::from_value::<ThreadsConfigure>(
            json!({"threadId": "thr_1", "expectedVersion": 2, "tools": []})
        )
        .is_err(),
        "configure does not take the other kinds"
    );
}

#[test]
fn the_thread_record_keeps_its_wire_shape() {
    let thread = Thread {
        id: "thr_1".into(),
        principal: "owner".into(),
        application: "editor".into(),
        workspace_id: "proj".into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention: Retention::MetadataOnly,
        version: 1,
        created_at: 0,
        updated_at: 0,
        agent_session: None,
        mcp_servers: Vec::new(),
        ports: ports(),
        permission_timeout_seconds: Some(30),
        budget: None,
    };
    let wire = json!({
        "id": "thr_1", "principal": "owner", "application": "editor",
        "workspaceId": "proj", "provider": "echo", "approval": "ask",
        "restricted": false, "retention": "metadata-only", "version": 1,
        "createdAt": "1970-01-01T00:00:00.000Z", "updatedAt": "1970-01-01T00:00:00.000Z",
        "tools": ["crm", "notes"], "context": "ctx", "memory": "mem",
        "permissionTimeoutSeconds": 30, "transcriptStore": "vault"
    });
    assert_eq!(serde_json::to_value(&thread).unwrap(), wire);
    assert_eq!(serde_json::from_value::<Thread>(wire).unwrap(), thread);
}

/// The stored form: `Payload::to_value` text, byte for byte, as the
/// journal writes it (keys sorted by `serde_json::Value`).
#[test]
fn thread_created_keeps_its_stored_bytes() {
    let created = ThreadCreated {
        workspace_id: "proj".into(),
        provider: "echo".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        retention: Retention::MetadataOnly,
        mcp_servers: vec!["fs".into()],
        ports: ports(),
        permission_timeout_seconds: Some(30),
        budget: None,
    };
    let text =
        serde_json::to_string(&crate::Payload::ThreadCreated(created.clone()).to_value()).unwrap();
    assert_eq!(
        text,
        r#"{"approval":"ask","context":"ctx","mcpServers":["fs"],"memory":"mem","permissionTimeoutSeconds":30,"provider":"echo","restricted":false,"retention":"metadata-only","tools":["crm","notes"],"transcriptStore":"vault","workspaceId":"proj"}"#
    );
    let bare = ThreadCreated {
        ports: ThreadPorts::default(),
        mcp_servers: Vec::new(),
        permission_timeout_seconds: None,
        ..created.clone()
    };
    assert_eq!(
        serde_json::to_string(&crate::Payload::ThreadCreated(bare).to_value()).unwrap(),
        r#"{"approval":"ask","provider":"echo","restricted":false,"retention":"metadata-only","workspaceId":"proj"}"#
    );
    let back: ThreadCreated = serde_json::from_str(&text).unwrap();
    assert_eq!(back, created);
}

#[test]
fn expectations_compare_and_name_every_kind() {
    let bound = ports();
    assert!(PortsExpect::of(&bound).mismatches(&bound).is_empty());
    assert!(PortsExpect::default().mismatches(&bound).is_empty());
    let none = PortsExpect::of(&ThreadPorts::default());
    assert_eq!(
        none.mismatches(&bound),
        ["tools", "context", "memory", "transcriptStore"]
    );
    let wire = json!({"tools": [], "context": "", "memory": "", "transcriptStore": ""});
    assert_eq!(serde_json::to_value(&none).unwrap(), wire);
    let expect: ThreadExpect = serde_json::from_value(wire).unwrap();
    assert_eq!(expect.ports, none);
    assert!(serde_json::from_value::<ThreadExpect>(json!({"model": "x"})).is_err());
}

#[test]
fn a_patch_changes_only_what_it_states() {
    let bound = ports();
    assert_eq!(bound.patched(&PortsPatch::default()), bound);
    let unbound = bound.patched(&PortsPatch {
        transcript_store: Some(None),
        transcript_store_identity: None,
    });
    assert_eq!(unbound.transcript_store, None);
    assert_eq!(unbound.identities.transcript_store, None);
    // A rebound store records the identity the controller found, and the
    // wire never carries (or sets) it.
    let patch = PortsPatch {
        transcript_store: Some(Some("notes".into())),
        transcript_store_identity: Some("transcript_abc".into()),
    };
    let rebound = unbound.patched(&patch);
    assert_eq!(rebound.transcript_store.as_deref(), Some("notes"));
    assert_eq!(
        rebound.identities.transcript_store.as_deref(),
        Some("transcript_abc")
    );
    assert_eq!(
        serde_json::to_value(&patch).unwrap(),
        json!({"transcriptStore": "notes"})
    );
    let read: PortsPatch = serde_json::from_value(
        json!({"transcriptStore": "notes", "transcriptStoreIdentity": "forged"}),
    )
    .unwrap_or_default();
    assert_eq!(read.transcript_store_identity, None);
    assert_eq!(unbound.tools, bound.tools);
    assert!(bound.bridged() && !ThreadPorts::default().bridged());
    assert_eq!(bound.bridge_name(), "crm");
}

/// The per-kind table covers every member, by its wire name, in
/// declaration order, and reaches each kind's names and identities: a
/// member added without its kind fails here.
#[test]
fn the_kind_table_covers_every_member() {
    let mut p = ports();
    let wire = serde_json::to_value(&p).unwrap();
    let members: Vec<&str> = wire
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut kinds: Vec<&str> = PortKind::ALL.iter().map(|k| k.wire()).collect();
    kinds.sort_unstable();
    assert_eq!(members, kinds, "serde_json sorts keys");
    let expect = PortsExpect::of(&p);
    let wire_expect = serde_json::to_value(&expect).unwrap();
    assert_eq!(wire_expect.as_object().unwrap().len(), PortKind::ALL.len());
    let all: Vec<&str> = PortKind::ALL.iter().map(|k| k.wire()).collect();
    assert_eq!(all, ["tools", "context", "memory", "transcriptStore"]);
    assert_eq!(
        PortsExpect::default().mismatches(&p),
        Vec::<&str>::new(),
        "absent members are not checked"
    );
    let none = ThreadPorts::default();
    assert_eq!(expect.mismatches(&none), all, "every kind, in order");
    for kind in PortKind::ALL {
        assert!(!kind.bound(&p).is_empty(), "{kind:?}");
    }
    p.identities = PortIdentities {
        tools: [("crm".into(), "tools_1".into())].into(),
        context: Some("context_1".into()),
        memory: Some("memory_1".into()),
        transcript_store: Some("transcript_1".into()),
    };
    let recorded: Vec<Option<&str>> = PortKind::ALL
        .iter()
        .map(|k| k.recorded(&p.identities, &k.bound(&p)[0]))
        .collect();
    assert_eq!(
        recorded,
        [
            Some("tools_1"),
            Some("context_1"),
            Some("memory_1"),
            Some("transcript_1")
        ]
    );
    assert_eq!(PortKind::Tools.recorded(&p.identities, "notes"), None);
}

/// The declaration of the named kinds (`port_kinds!`) lists every kind
/// but tool endpoints, in [`PortKind::ALL`]'s order, each row's member
/// the one whose wire name the kind has.
#[test]
fn the_named_kinds_declaration_follows_the_kind_table() {
    let kinds: Vec<PortKind> = NAMED_KINDS.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, PortKind::ALL[1..]);
    for (kind, member) in NAMED_KINDS {
        let camel: String = member
            .split('_')
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.to_owned()
                } else {
                    w[..1].to_uppercase() + &w[1..]
                }
            })
            .collect();
        assert_eq!(camel, kind.wire(), "{kind:?}");
    }
}
