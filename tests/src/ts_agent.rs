//! The ACP agent written on the official TypeScript SDK
//! (`tests/agents/ts-agent/agent.mjs`), as tests use it.
//!
//! Its `node_modules` come from `tests/agents/install` (run by `.ci/run`).
//! [`TsAgent::find`] is the one place that decides whether a test can use
//! it: when node (20 or later) or the installed SDK is missing it prints why,
//! with `SKIPPED:`, and the test returns. When both are there the test runs:
//! there is no other way to skip it.

pub mod client;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The oldest node major version the agent is run with.
const MIN_NODE_MAJOR: u32 = 20;

/// A usable TypeScript SDK agent: node is on `PATH` and the SDK is installed.
#[derive(Debug, Clone)]
pub struct TsAgent {
    /// `tests/agents/ts-agent/agent.mjs`, absolute.
    script: PathBuf,
}

impl TsAgent {
    /// The agent directory, `tests/agents/ts-agent`.
    pub(crate) fn dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/ts-agent")
    }

    /// The agent when it can run here; otherwise prints
    /// `SKIPPED: <why> [<test>]` and returns `None` (under `CI=true` a
    /// missing agent fails the test instead: see [`crate::skip`]).
    pub fn find(test: &str) -> Option<TsAgent> {
        match Self::probe() {
            Ok(agent) => Some(agent),
            Err(why) => {
                crate::skip::skip(&format!("{why} [{test}]"));
                None
            }
        }
    }

    fn probe() -> Result<TsAgent, String> {
        let version = Command::new("node")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .ok_or("node not available; run tests/agents/install")?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
        let major = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok())
            .unwrap_or(0);
        if major < MIN_NODE_MAJOR {
            return Err(format!(
                "node not available: {version} is older than {MIN_NODE_MAJOR}"
            ));
        }
        let dir = Self::dir();
        // The ACP SDK the agent speaks, and the MCP SDK it calls the
        // controller's tool bridge with.
        for sdk in ["@agentclientprotocol/sdk", "@modelcontextprotocol/sdk"] {
            let sdk = dir.join("node_modules").join(sdk).join("package.json");
            if !sdk.is_file() {
                return Err(format!(
                    "node available but {} is not installed; run tests/agents/install",
                    sdk.display()
                ));
            }
        }
        Ok(TsAgent {
            script: dir.join("agent.mjs"),
        })
    }

    /// The agent's script.
    pub fn script(&self) -> &Path {
        &self.script
    }

    /// A provider definition for the controller's config: command `node`
    /// (resolved from `PATH` by the controller), the script, and the state
    /// directory that lets a later agent process `session/load` a session.
    pub fn provider(&self, state_dir: &Path) -> Value {
        json!({
            "command": "node",
            "args": [self.script],
            "env": { "TS_AGENT_STATE_DIR": state_dir },
        })
    }

    /// A command that runs the agent directly, with only `PATH` and the
    /// state directory in its environment.
    pub fn command(&self, state_dir: &Path) -> Command {
        let mut cmd = Command::new("node");
        cmd.arg(&self.script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TS_AGENT_STATE_DIR", state_dir);
        cmd
    }
}
