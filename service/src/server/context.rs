//! What every connection shares: the authority, the server's identity, the
//! limits and the controller core.

use std::sync::Arc;
use std::time::Instant;

use lapis_release::BuildIdentity;

use crate::auth::Authority;
use lapis_protocol::config::ServerLimits;
use lapis_protocol::{BuildInfo, PROTOCOL, ServerView};

/// Who the running server is; passed in by the binary, never read from the
/// checkout or environment at run time.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    /// The binary's build identity.
    pub(crate) build: BuildIdentity,
    /// Digest of the release snapshot the binary runs from, when installed.
    pub(crate) snapshot: Option<String>,
    /// Process id.
    pub(crate) pid: u32,
    /// When the server started, for uptime.
    pub(crate) started: Instant,
}

impl ServerIdentity {
    /// The identity of this process, started now.
    pub fn new(build: BuildIdentity, snapshot: Option<String>) -> ServerIdentity {
        ServerIdentity {
            build,
            snapshot,
            pid: std::process::id(),
            started: Instant::now(),
        }
    }

    /// The `server` member of `hello` and of the readiness frame.
    pub(crate) fn view(&self) -> ServerView {
        ServerView {
            protocol: PROTOCOL.to_owned(),
            version: self.build.version.clone(),
            build: self.build_info(),
        }
    }

    /// The build identity as the protocol carries it (an object).
    pub(crate) fn build_info(&self) -> BuildInfo {
        match serde_json::to_value(&self.build) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => BuildInfo::new(),
        }
    }
}

/// Shared by every connection of one server.
#[derive(Debug)]
pub struct ServerContext {
    /// Sessions and credentials.
    pub(crate) authority: Arc<Authority>,
    /// Identity for `hello` and `status`.
    pub(crate) identity: ServerIdentity,
    /// Frame bound, connection limit, subscriber buffer.
    pub(crate) limits: ServerLimits,
    /// The controller core; every domain method goes through it.
    pub(crate) core: super::controller::Core,
    /// Config reloads (SIGHUP, `config.reload`) and the last outcome.
    pub(crate) reload: super::reload::Reloader,
    /// The OpenTelemetry exporters (`telemetry`; flushed when dropped).
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
    /// History retention (`history`; passes run while it limits anything,
    /// and a reload replaces it).
    pub(crate) retention: crate::retention::Retention,
}
