//! Every kind of port the registry holds: its name space ([`PortKind`]),
//! its stored form ([`Stored`]) and what it is to the registry ([`Port`]):
//! its name, shape checks, identity, limit and refusals.

use std::sync::Arc;

use serde_json::json;
use sha2::{Digest, Sha256};

use lapis_protocol::context::{ContextRegister, MAX_PORTS, PortRefusal, validate_context};
use lapis_protocol::memory::{MemoryRegister, validate_memory};
use lapis_protocol::tools::{
    MAX_TOOL_ENDPOINTS, ToolEndpointView, ToolRefusal, ToolsRegister, validate_endpoint,
};
use lapis_protocol::transcript::store::{TranscriptRegister, validate_transcript};

use lapis_protocol::RpcError;

use super::Port;
use crate::domain::Retention;

/// The kinds of port, each its own name space (the protocol's one
/// per-kind table).
pub(crate) use lapis_protocol::PortKind;

/// A registered description of any kind (the registry keys each entry by
/// its [`PortKind`], so it is only ever read back as its own kind's
/// [`Port`]: `Port::unwrap`). Type-erased, so a kind's `Port` impl can live
/// in its own module without a variant here.
#[derive(Clone)]
pub(crate) struct Stored(pub(super) Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stored(..)")
    }
}

fn hashed(prefix: &str, canonical: &serde_json::Value) -> String {
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    format!("{prefix}_{}", hex::encode(digest))
}

impl Port for ToolsRegister {
    const KIND: PortKind = PortKind::Tools;
    const LIMIT: usize = MAX_TOOL_ENDPOINTS;
    type Refusal = ToolRefusal;
    fn name(&self) -> &str {
        &self.endpoint
    }
    fn check(&self) -> Result<(), ToolRefusal> {
        validate_endpoint(self)
    }
    fn identity(&self) -> String {
        identity(self)
    }
    fn over_limit() -> ToolRefusal {
        ToolRefusal::Limit {
            what: "endpoint count",
            limit: MAX_TOOL_ENDPOINTS,
        }
    }
    fn unavailable(name: &str, _why: &'static str) -> ToolRefusal {
        ToolRefusal::Unavailable {
            endpoint: name.to_owned(),
        }
    }
}

impl Port for ContextRegister {
    const KIND: PortKind = PortKind::Context;
    const LIMIT: usize = MAX_PORTS;
    type Refusal = PortRefusal;
    fn name(&self) -> &str {
        &self.port
    }
    fn check(&self) -> Result<(), PortRefusal> {
        validate_context(self)
    }
    fn identity(&self) -> String {
        let deadline = self.deadline().as_millis() as u64;
        hashed(
            "context",
            &json!({"port": self.port, "deadlineMs": deadline}),
        )
    }
    fn over_limit() -> PortRefusal {
        PortRefusal::Limit {
            what: "context port count",
            limit: MAX_PORTS,
        }
    }
    fn unavailable(name: &str, why: &'static str) -> PortRefusal {
        PortRefusal::ContextUnavailable {
            port: name.to_owned(),
            why,
        }
    }
}

impl Port for MemoryRegister {
    const KIND: PortKind = PortKind::Memory;
    const LIMIT: usize = MAX_PORTS;
    type Refusal = PortRefusal;
    fn name(&self) -> &str {
        &self.port
    }
    fn check(&self) -> Result<(), PortRefusal> {
        validate_memory(self)
    }
    fn identity(&self) -> String {
        let deadline = self.deadline().as_millis() as u64;
        hashed(
            "memory",
            &json!({"port": self.port, "deadlineMs": deadline}),
        )
    }
    fn over_limit() -> PortRefusal {
        PortRefusal::Limit {
            what: "memory port count",
            limit: MAX_PORTS,
        }
    }
    fn unavailable(name: &str, why: &'static str) -> PortRefusal {
        PortRefusal::MemoryUnavailable {
            port: name.to_owned(),
            why,
        }
    }
    /// Memory's read tools ride the bridge a restricted thread never gets.
    fn admits(restricted: bool, _: Retention) -> Result<(), RpcError> {
        if restricted {
            let r = ToolRefusal::Restricted;
            return Err(RpcError::new(r.code(), r.to_string()));
        }
        Ok(())
    }
}

impl Port for TranscriptRegister {
    const KIND: PortKind = PortKind::Transcript;
    const LIMIT: usize = MAX_PORTS;
    type Refusal = PortRefusal;
    fn name(&self) -> &str {
        &self.port
    }
    fn check(&self) -> Result<(), PortRefusal> {
        validate_transcript(self)
    }
    fn identity(&self) -> String {
        let deadline = self.deadline().as_millis() as u64;
        hashed(
            "transcript",
            &json!({"port": self.port, "deadlineMs": deadline}),
        )
    }
    fn over_limit() -> PortRefusal {
        PortRefusal::Limit {
            what: "transcript store count",
            limit: MAX_PORTS,
        }
    }
    fn unavailable(name: &str, why: &'static str) -> PortRefusal {
        PortRefusal::TranscriptStoreFailed {
            port: name.to_owned(),
            why,
        }
    }
    /// A `full` thread keeps its content in the journal already.
    fn admits(_: bool, retention: Retention) -> Result<(), RpcError> {
        if retention != Retention::MetadataOnly {
            return Err(RpcError::new(
                lapis_protocol::ErrorCode::InvalidRequest,
                "transcriptStore needs retention `metadata-only`: a `full` thread keeps its \
                 content in the journal",
            ));
        }
        Ok(())
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
    hashed("tools", &canonical)
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
