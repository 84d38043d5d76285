//! What a client relies on about a thread, stated when it (re)attaches or
//! submits: [`ThreadExpect`]. The controller compares it with the thread as
//! it is and refuses with `binding_mismatch` naming the differing fields,
//! never their values, so a reconnecting application never runs a turn
//! under a binding it did not agree to (another provider, a looser approval
//! policy, an unrestricted thread, …).

use serde::{Deserialize, Serialize};

use crate::{ApprovalPolicy, PortsExpect, Retention, Thread};

/// The binding a client expects; absent fields are not checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadExpect {
    /// The owning application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    /// The provider name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `ask` or `allow-all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicy>,
    /// The restricted flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted: Option<bool>,
    /// `full` or `metadata-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// The thread's configuration version (any `threads.configure` since
    /// changes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The application MCP servers (names, in order) the thread's turns
    /// give the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<String>>,
    /// The application ports the thread binds (`tools`, `context`,
    /// `memory`, `transcriptStore`; see [`PortsExpect`]).
    #[serde(flatten)]
    pub ports: PortsExpect,
}

impl ThreadExpect {
    /// The wire names of the fields whose expectation `thread` does not
    /// meet, in declaration order (empty: the binding holds).
    pub fn mismatches(&self, thread: &Thread) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut check = |name, differs: bool| {
            if differs {
                out.push(name);
            }
        };
        check(
            "application",
            self.application
                .as_ref()
                .is_some_and(|a| *a != thread.application),
        );
        check(
            "provider",
            self.provider
                .as_ref()
                .is_some_and(|p| *p != thread.provider),
        );
        check(
            "approval",
            self.approval.is_some_and(|a| a != thread.approval),
        );
        check(
            "restricted",
            self.restricted.is_some_and(|r| r != thread.restricted),
        );
        check(
            "retention",
            self.retention.is_some_and(|r| r != thread.retention),
        );
        check("version", self.version.is_some_and(|v| v != thread.version));
        check(
            "mcpServers",
            self.mcp_servers
                .as_ref()
                .is_some_and(|m| *m != thread.mcp_servers),
        );
        out.extend(self.ports.mismatches(&thread.ports));
        out
    }

    /// The binding `thread` has now (every field stated).
    pub fn of(thread: &Thread) -> ThreadExpect {
        ThreadExpect {
            application: Some(thread.application.clone()),
            provider: Some(thread.provider.clone()),
            approval: Some(thread.approval),
            restricted: Some(thread.restricted),
            retention: Some(thread.retention),
            version: Some(thread.version),
            mcp_servers: Some(thread.mcp_servers.clone()),
            ports: PortsExpect::of(&thread.ports),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread() -> Thread {
        Thread {
            id: "thr_1".into(),
            principal: "owner".into(),
            application: "editor".into(),
            workspace_id: "proj".into(),
            provider: "claude".into(),
            approval: ApprovalPolicy::Ask,
            restricted: true,
            retention: Retention::Full,
            version: 3,
            created_at: 1,
            updated_at: 1,
            agent_session: None,
            mcp_servers: Vec::new(),
            ports: Default::default(),
            permission_timeout_seconds: None,
            budget: None,
        }
    }

    #[test]
    fn every_field_is_compared_and_named_never_valued() {
        let t = thread();
        assert!(ThreadExpect::default().mismatches(&t).is_empty());
        assert!(ThreadExpect::of(&t).mismatches(&t).is_empty());
        let cases: [(&str, ThreadExpect); 8] = [
            (
                "application",
                ThreadExpect {
                    application: Some("bot".into()),
                    ..Default::default()
                },
            ),
            (
                "provider",
                ThreadExpect {
                    provider: Some("codex".into()),
                    ..Default::default()
                },
            ),
            (
                "approval",
                ThreadExpect {
                    approval: Some(ApprovalPolicy::AllowAll),
                    ..Default::default()
                },
            ),
            (
                "restricted",
                ThreadExpect {
                    restricted: Some(false),
                    ..Default::default()
                },
            ),
            (
                "retention",
                ThreadExpect {
                    retention: Some(Retention::MetadataOnly),
                    ..Default::default()
                },
            ),
            (
                "version",
                ThreadExpect {
                    version: Some(2),
                    ..Default::default()
                },
            ),
            (
                "mcpServers",
                ThreadExpect {
                    mcp_servers: Some(vec!["tickets".into()]),
                    ..Default::default()
                },
            ),
            (
                "tools",
                ThreadExpect {
                    ports: PortsExpect {
                        tools: Some(vec!["crm".into()]),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            ),
        ];
        for (field, expect) in cases {
            assert_eq!(expect.mismatches(&t), [field]);
        }
        let all = ThreadExpect {
            ports: PortsExpect {
                tools: Some(vec!["crm".into()]),
                ..Default::default()
            },
            application: Some("x".into()),
            provider: Some("x".into()),
            approval: Some(ApprovalPolicy::AllowAll),
            restricted: Some(false),
            retention: Some(Retention::MetadataOnly),
            version: Some(9),
            mcp_servers: Some(vec!["x".into()]),
        };
        assert_eq!(
            all.mismatches(&t),
            [
                "application",
                "provider",
                "approval",
                "restricted",
                "retention",
                "version",
                "mcpServers",
                "tools"
            ]
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_str::<ThreadExpect>(r#"{"model":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("model"));
    }

    /// Closed vocabularies are decoded, not compared as text: an unknown
    /// spelling is refused naming the accepted ones.
    #[test]
    fn unknown_policy_spellings_are_refused_by_the_decoder() {
        let err = serde_json::from_str::<ThreadExpect>(r#"{"approval":"sometimes"}"#).unwrap_err();
        assert!(err.to_string().contains("`ask`"), "{err}");
        let ok: ThreadExpect = serde_json::from_str(r#"{"retention":"metadata-only"}"#).unwrap();
        assert_eq!(ok.retention, Some(Retention::MetadataOnly));
    }
}
