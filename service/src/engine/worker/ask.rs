//! The claim's refusal of an `ask` turn its provider would not ask for:
//! the provider definition's recorded policy probe (`providers check NAME
//! --policy`) found it `ignored` — it wrote the probe file although the
//! write was rejected — so a person who chose `ask` would not be asked.
//! (An asking mode the agent does not apply is refused later, at session
//! setup: `acp::setup`.)
//!
//! What must stay true: only an unrestricted `ask` turn is refused, only on
//! the verdict of this very definition (its fingerprint), never when the
//! owner accepted the provider (`allowUnasked`), and before any port or
//! agent is asked for anything; the refusal is journaled (`ask_mode`
//! observation) before the turn's end. A store that cannot be read refuses
//! nothing, as for budgets.

use lapis_protocol::probe::PolicyVerdict;
use lapis_protocol::{ApprovalPolicy, AskMode, Note, PreparedConfig};

use super::*;

impl Engine {
    /// Whether the claimed turn is refused `ask_unavailable` on its
    /// provider's probe verdict (see the module docs).
    pub(super) async fn ask_refused(
        &self,
        turn: &str,
        prepared: &PreparedConfig,
        facts: &ProviderFacts,
    ) -> bool {
        if prepared.approval.effective != ApprovalPolicy::Ask || prepared.restricted {
            return false;
        }
        let verdict = match self.store.policy_verdict(&facts.fingerprint).await {
            Ok(v) => v,
            Err(err) => {
                tracing::error!(turn = %turn, code = err.code(), "reading the policy probe failed; turn runs");
                return false;
            }
        };
        if verdict != Some(PolicyVerdict::Ignored) {
            return false;
        }
        let accepted = facts.spec.ask.allow_unasked;
        let note = Note::AskMode(AskMode {
            mode: facts.spec.ask.mode.clone(),
            result: None,
            probe_ignored: true,
            runs_unasked: accepted,
        });
        if self.store.append_activity(turn, note.into()).await.is_err() {
            tracing::error!(turn = %turn, "the ask_mode observation was not journaled");
        }
        if !accepted {
            tracing::warn!(turn = %turn, provider = %facts.spec.name, "provider ignored approval in its policy probe; ask turn refused");
        }
        !accepted
    }
}
