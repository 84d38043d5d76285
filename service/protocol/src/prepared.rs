//! A turn's prepared configuration: what it runs under, fixed when the
//! runner claims it.
//!
//! What must stay true: the record is written in the claim's transaction
//! (with the `turn_prepared` journal event carrying the same value), is
//! metadata only (names, flags, digests; never a prompt, a secret or an
//! environment value), and the runner takes the approval and restricted
//! flag it runs with from it, so the record says what was applied rather
//! than what was configured. A later `threads.configure` or config reload
//! never changes it.

use serde::{Deserialize, Serialize};

use super::mcp::McpEndpoint;
use super::policy::{ApprovalPolicy, Retention};

/// What a turn runs under (`turns.get`, thread snapshots, `turn_prepared`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedConfig {
    /// The thread's provider name at claim.
    pub provider: String,
    /// Lowercase hex SHA-256 of the provider definition's identity (as in
    /// [`SessionBinding`](crate::SessionBinding)); absent when no provider
    /// of that name was configured at claim (the turn then fails
    /// `unknown_provider` before the dispatch boundary).
    pub provider_fingerprint: Option<String>,
    /// Requested and effective approval.
    pub approval: PreparedApproval,
    /// The thread's restricted flag at claim.
    pub restricted: bool,
    /// The provider's `restrictedMode` requested with `session/set_mode`
    /// (restricted turns only; absent when none is configured). What the
    /// agent did is the `restricted_mode` observation, never inferred here.
    pub restricted_mode: Option<String>,
    /// The provider's `allowUnrestricted`: a restricted turn may run when
    /// the mode cannot be applied (restricted turns only, else `false`).
    pub allow_unrestricted: bool,
    /// The thread's retention at claim.
    pub retention: Retention,
    /// The provider's `vcsIdentity` name, if it sets one (never the email).
    pub vcs_identity: Option<String>,
    /// The thread's configuration version the turn was claimed under.
    pub thread_version: u64,
    /// The MCP servers the agent session is given (the provider's, then
    /// the thread's application servers): names, transports and identities,
    /// never an environment value. Empty when the turn was refused before
    /// dispatch for its MCP servers (its outcome says why).
    pub mcp_servers: Vec<McpEndpoint>,
}

/// The approval a turn asked for and the one it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedApproval {
    /// The thread's policy.
    pub requested: ApprovalPolicy,
    /// The policy the runner applies.
    pub effective: ApprovalPolicy,
    /// Why automatic approval is withheld: the whole turn (`restricted`),
    /// or one kind of request it never covers (`structured_input`).
    /// Empty when nothing automatic was asked for.
    pub suppressed: Vec<ApprovalSuppression>,
}

impl PreparedApproval {
    /// The one rule: restricted turns never auto-approve; structured input
    /// (which this client refuses) is never answered automatically.
    pub fn new(requested: ApprovalPolicy, restricted: bool) -> PreparedApproval {
        let (effective, suppressed) = match (requested, restricted) {
            (ApprovalPolicy::Ask, _) => (ApprovalPolicy::Ask, vec![]),
            (ApprovalPolicy::AllowAll, true) => {
                (ApprovalPolicy::Ask, vec![ApprovalSuppression::Restricted])
            }
            (ApprovalPolicy::AllowAll, false) => (
                ApprovalPolicy::AllowAll,
                vec![ApprovalSuppression::StructuredInput],
            ),
        };
        PreparedApproval {
            requested,
            effective,
            suppressed,
        }
    }
}

/// A reason automatic approval is withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalSuppression {
    /// The thread is restricted: every request waits for an answer.
    Restricted,
    /// Structured-input requests (elicitation) are refused, never
    /// answered automatically, whatever the policy.
    StructuredInput,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_turns_never_auto_approve_and_structured_input_never_does() {
        use ApprovalPolicy::{AllowAll, Ask};
        let ask = PreparedApproval::new(Ask, true);
        assert_eq!((ask.effective, ask.suppressed), (Ask, vec![]));
        let r = PreparedApproval::new(AllowAll, true);
        assert_eq!(
            (r.effective, r.suppressed),
            (Ask, vec![ApprovalSuppression::Restricted])
        );
        let open = PreparedApproval::new(AllowAll, false);
        assert_eq!(
            (open.effective, open.suppressed),
            (AllowAll, vec![ApprovalSuppression::StructuredInput])
        );
    }

    #[test]
    fn the_wire_shape_is_camel_case() {
        let p = PreparedConfig {
            provider: "claude".into(),
            provider_fingerprint: Some("ab".repeat(32)),
            approval: PreparedApproval::new(ApprovalPolicy::AllowAll, true),
            restricted: true,
            restricted_mode: Some("plan".into()),
            allow_unrestricted: false,
            retention: Retention::MetadataOnly,
            vcs_identity: Some("Lapis Bot".into()),
            thread_version: 3,
            mcp_servers: vec![],
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["approval"]["suppressed"][0], "restricted");
        assert_eq!(v["restrictedMode"], "plan");
        assert_eq!(v["retention"], "metadata-only");
        assert_eq!(v["mcpServers"], serde_json::json!([]));
        let back: PreparedConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
    }
}
