//! The catalogue of known ACP agents, built into the binary so that
//! `providers add claude` needs no command line from the user.
//!
//! A declarative table; every entry records where its command line came from
//! (`source`), because agents rename their adapters and flags often (the
//! README once named `claude-code-acp`, two renames ago). The research behind
//! it was done from stored copies of the ACP registry (its protocol matrix of
//! 2026-08-20 and `agent.json` files), the peer client acpx (`AGENT_REGISTRY`,
//! v0.19.1, 26 built-ins) and each adapter's own repository or docs.
//!
//! What must stay true: every entry is a valid provider definition (a test
//! checks it against the config validator), names are unique, `env`
//! lists only *names* of variables an agent reads its credentials from, and
//! `settings` only names of non-secret ones (never a key).

use std::collections::BTreeMap;

use super::ProviderConfig;

/// One known agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogueEntry {
    /// The name `providers add` accepts (and the provider's default key).
    pub name: &'static str,
    /// The stdio ACP server executable, once installed.
    pub command: &'static str,
    /// Its arguments.
    pub args: &'static [&'static str],
    /// Environment variable names the agent takes credentials from; they
    /// become the provider's `envAllowlist`.
    pub env: &'static [&'static str],
    /// Non-secret settings the agent reads from its environment (a base
    /// URL, a model, a mode), as `(NAME, what it takes)`; `providers add
    /// --env NAME=VALUE` stores one in the provider's constant `env`.
    pub settings: &'static [(&'static str, &'static str)],
    /// How to install it (with the Node floor of an npm package).
    pub install: &'static str,
    /// Where its documentation is.
    pub docs: Option<&'static str>,
    /// Whether the registry's probe saw it advertise `loadSession`
    /// (`None`: not probed).
    pub load_session: Option<bool>,
    /// The ACP session mode id that is read-only or plan-only, where known.
    pub restricted_mode: Option<&'static str>,
    /// The ACP session mode id in which the agent asks before it edits or
    /// runs anything, where known (an `ask` thread requests it).
    pub ask_mode: Option<&'static str>,
    /// Where the command line and the other facts came from.
    pub source: &'static str,
}

impl CatalogueEntry {
    /// The provider definition `providers add NAME` writes by default.
    pub fn provider_config(&self) -> ProviderConfig {
        ProviderConfig {
            command: self.command.to_string(),
            args: self.args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            env_allowlist: self.env.iter().map(|e| e.to_string()).collect(),
            vcs_identity: None,
            idle_seconds: None,
            handshake_seconds: None,
            permission_timeout_seconds: None,
            max_turn_seconds: None,
            mcp_servers: Vec::new(),
            mcp_env_allowlist: Vec::new(),
            restricted_mode: self.restricted_mode.map(str::to_owned),
            allow_unrestricted: None,
            ask_mode: self.ask_mode.map(str::to_owned),
            allow_unasked: None,
        }
    }
}

/// The entry named `name`, if the catalogue knows it.
pub fn catalogue_entry(name: &str) -> Option<&'static CatalogueEntry> {
    CATALOGUE.iter().find(|e| e.name == name)
}

/// Every known agent, most used first.
pub const CATALOGUE: &[CatalogueEntry] = &[
    CatalogueEntry {
        name: "claude",
        command: "claude-agent-acp",
        args: &[],
        env: &["ANTHROPIC_API_KEY"],
        settings: &[
            (
                "ANTHROPIC_BASE_URL",
                "API endpoint (a gateway or a local server)",
            ),
            ("ANTHROPIC_MODEL", "model id"),
            ("ANTHROPIC_SMALL_FAST_MODEL", "model id for quick tasks"),
        ],
        install: "npm install -g @agentclientprotocol/claude-agent-acp (bin claude-agent-acp; needs Node >= 22), or run without installing: npx -y @agentclientprotocol/claude-agent-acp. Formerly published as @zed-industries/claude-agent-acp (and before that @zed-industries/claude-code-acp).",
        docs: Some("https://github.com/agentclientprotocol/claude-agent-acp"),
        load_session: Some(true),
        restricted_mode: Some("plan"),
        ask_mode: Some("default"),
        source: "agentclientprotocol/claude-agent-acp package.json (name, bin) + src/acp-agent.ts (availableModes: auto, default, acceptEdits, plan, dontAsk, bypassPermissions); registry claude-acp/agent.json (npx @agentclientprotocol/claude-agent-acp@0.85.1); acpx AGENT_REGISTRY claude; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "codex",
        command: "codex-acp",
        args: &[],
        env: &["CODEX_API_KEY", "OPENAI_API_KEY"],
        settings: &[
            (
                "INITIAL_AGENT_MODE",
                "read-only | agent | agent-full-access",
            ),
            (
                "OPENAI_BASE_URL",
                "API endpoint (a gateway or a local server)",
            ),
            (
                "CODEX_HOME",
                "where codex keeps config.toml and sessions [default: ~/.codex]",
            ),
        ],
        install: "npm install -g @agentclientprotocol/codex-acp (bin codex-acp; bundles @openai/codex), or npx -y @agentclientprotocol/codex-acp. Formerly @zed-industries/codex-acp (Rust).",
        docs: Some("https://github.com/agentclientprotocol/codex-acp"),
        load_session: Some(true),
        restricted_mode: Some("read-only"),
        ask_mode: None,
        source: "agentclientprotocol/codex-acp README.md (install, CODEX_API_KEY/OPENAI_API_KEY, INITIAL_AGENT_MODE=read-only|agent|agent-full-access) + src/AgentMode.ts; registry codex-acp/agent.json; acpx AGENT_REGISTRY codex; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "gemini",
        command: "gemini",
        args: &["--acp"],
        env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        settings: &[("GEMINI_MODEL", "model id")],
        install: "npm install -g @google/gemini-cli (bin gemini; needs Node >= 20)",
        docs: Some("https://geminicli.com/docs/get-started/authentication"),
        load_session: Some(true),
        restricted_mode: Some("plan"),
        ask_mode: Some("default"),
        source: "google-gemini/gemini-cli packages/cli/src/config/config.ts (--acp; --experimental-acp deprecated) + packages/cli/src/acp/acpUtils.ts buildAvailableModes (default, autoEdit, yolo, plan 'Read-only mode' only when plan is enabled); registry gemini/agent.json (npx @google/gemini-cli --acp); acpx AGENT_REGISTRY gemini; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "cursor",
        command: "cursor-agent",
        args: &["acp"],
        env: &["CURSOR_API_KEY", "CURSOR_AUTH_TOKEN"],
        settings: &[],
        install: "curl https://cursor.com/install -fsS | bash (installs the Cursor CLI; current docs call the binary `agent`, acpx and the ACP registry use `cursor-agent`)",
        docs: Some("https://cursor.com/docs/cli/acp"),
        load_session: Some(true),
        restricted_mode: Some("ask"),
        ask_mode: None,
        source: "acpx AGENT_REGISTRY cursor ('cursor-agent acp'); registry cursor/agent.json (./dist-package/cursor-agent acp); cursor.com/docs/cli/acp.md (`agent acp`, cursor_login auth, CURSOR_API_KEY/CURSOR_AUTH_TOKEN); modes agent/plan/ask from zed.dev/acp/agent/cursor and docs.mains.dev/cursor/configuration; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "copilot",
        command: "copilot",
        args: &["--acp", "--stdio"],
        env: &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        settings: &[],
        install: "npm install -g @github/copilot (bin copilot); ACP support is in public preview",
        docs: Some("https://docs.github.com/en/copilot/reference/copilot-cli-reference/acp-server"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "docs.github.com Copilot CLI ACP server page (`copilot --acp --stdio`) and authenticate-copilot-cli page (token env names); acpx AGENT_REGISTRY copilot; registry github-copilot-cli/agent.json (npx @github/copilot --acp); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json (id github-copilot-cli)",
    },
    CatalogueEntry {
        name: "qwen",
        command: "qwen",
        args: &["--acp"],
        env: &["OPENAI_API_KEY"],
        settings: &[
            (
                "OPENAI_BASE_URL",
                "API endpoint (a gateway or a local server)",
            ),
            ("OPENAI_MODEL", "model id"),
        ],
        install: "npm install -g @qwen-code/qwen-code (bin qwen; needs Node >= 20)",
        docs: Some("https://qwenlm.github.io/qwen-code-docs/en/users/overview"),
        load_session: Some(true),
        restricted_mode: Some("plan"),
        ask_mode: Some("default"),
        source: "acpx AGENT_REGISTRY qwen ('qwen --acp'); registry qwen-code/agent.json (npx @qwen-code/qwen-code --acp --experimental-skills); qwen-code packages/cli/src/config/config.ts (--acp, --experimental-acp deprecated, --approval-mode plan|default|auto-edit|auto|yolo); qwenlm.github.io auth docs (OPENAI_API_KEY/OPENAI_BASE_URL/OPENAI_MODEL); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json (id qwen-code)",
    },
    CatalogueEntry {
        name: "opencode",
        command: "opencode",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "npm install -g opencode-ai (bin opencode) or npx -y opencode-ai acp; the ACP registry now lists npm @opencode/cli and GitHub release binaries (anomalyco/opencode)",
        docs: Some("https://opencode.ai"),
        load_session: Some(true),
        restricted_mode: Some("plan"),
        ask_mode: None,
        source: "acpx AGENT_REGISTRY opencode ('npx -y opencode-ai acp', preferredBinName opencode) ; registry opencode/agent.json; anomalyco/opencode packages/opencode/src/acp/README.md ('opencode acp') and config-option.ts (session modes); mode ids build/plan from third-party notes; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "goose",
        command: "goose",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "Goose CLI from https://github.com/block/goose/releases (registry binary entries) or `brew install block-goose-cli`; configure a provider with `goose configure`",
        docs: Some("https://block.github.io/goose/docs/guides/acp-clients"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "registry goose/agent.json (./goose acp); ACP website agent list (docs/get-started/agents.mdx); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "kimi",
        command: "kimi",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "uv tool install --python 3.13 kimi-cli, or curl -LsSf https://cdn.kimi.com/binaries/kimi-cli/install.sh | bash; then run `kimi` and `/setup` once to log in / set the API key",
        docs: Some("https://moonshotai.github.io/kimi-cli/"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY kimi ('kimi acp'); registry kimi/agent.json (./kimi acp); kimi.com/code/docs/en/kimi-cli.html (install); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "kiro",
        command: "kiro-cli",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "Kiro CLI from https://kiro.dev (registry points at release archives on desktop-release.q.us-east-1.amazonaws.com); log in with the CLI before use",
        docs: Some("https://kiro.dev/docs/cli/acp/"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "kiro.dev changelog 1.25 and docs/cli/acp (`kiro-cli acp`); registry kiro/agent.json ('./kiro-cli acp'); acpx AGENT_REGISTRY uses 'kiro-cli-chat acp'; zed.dev/acp/agent/kiro shows 'kiro-cli acp --agent-engine=v3'",
    },
    CatalogueEntry {
        name: "junie",
        command: "junie",
        args: &["--acp=true"],
        env: &[],
        settings: &[],
        install: "JetBrains Junie CLI (https://junie.jetbrains.com); ACP registry ships binaries from github.com/JetBrains/junie-acp-release; authenticate with the CLI first",
        docs: Some("https://junie.jetbrains.com"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "registry junie/agent.json (junie --acp=true); acpx AGENT_REGISTRY junie (v0.19.1 mirror) and acpx agents/Junie.md ('junie --acp true'); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "droid",
        command: "droid",
        args: &["exec", "--output-format", "acp"],
        env: &["FACTORY_API_KEY"],
        settings: &[],
        install: "Factory Droid CLI (registry: npm package `droid`, e.g. npx droid@0.218.0); acpx aliases factory-droid, factorydroid",
        docs: Some("https://factory.ai/product/cli"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY droid ('droid exec --output-format acp'); registry factory-droid/agent.json now uses args [exec, --output-format, acp-daemon] with env DROID_DISABLE_AUTO_UPDATE=true, FACTORY_DROID_AUTO_UPDATE_ENABLED=false; FACTORY_API_KEY named in the auth_required message in agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "pi",
        command: "pi-acp",
        args: &[],
        env: &[],
        settings: &[],
        install: "npm install -g pi-acp (adapter) plus the Pi agent itself: npm install -g @earendil-works/pi-coding-agent (bin pi); or npx pi-acp",
        docs: Some("https://github.com/svkozak/pi-acp"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY pi ('npx pi-acp@^0.0.x', preferredBinName pi-acp); registry pi-acp/agent.json; pi install hint from the pi-acp error text in agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "openclaw",
        command: "openclaw",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "OpenClaw (https://github.com/openclaw/openclaw); needs a running OpenClaw gateway",
        docs: Some("https://github.com/openclaw/openclaw"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md",
    },
    CatalogueEntry {
        name: "fast-agent",
        command: "uvx",
        args: &["fast-agent-mcp", "acp"],
        env: &[],
        settings: &[],
        install: "needs uv (uvx); the ACP registry instead runs `uvx fast-agent-acp==<ver> -x` with FAST_AGENT_MODEL set",
        docs: Some("https://fast-agent.ai/acp"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md; registry fast-agent/agent.json",
    },
    CatalogueEntry {
        name: "grok-build",
        command: "grok",
        args: &["agent", "stdio"],
        env: &["XAI_API_KEY"],
        settings: &[],
        install: "npm package @xai-official/grok (registry: npx @xai-official/grok agent stdio); log in with the grok CLI or set XAI_API_KEY",
        docs: Some("https://docs.x.ai/build/overview"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md; registry grok-build/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "iflow",
        command: "iflow",
        args: &["--experimental-acp"],
        env: &[],
        settings: &[],
        install: "iFlow CLI (https://github.com/iflow-ai/iflow-cli)",
        docs: Some("https://github.com/iflow-ai/iflow-cli"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md",
    },
    CatalogueEntry {
        name: "kilocode",
        command: "npx",
        args: &["-y", "@kilocode/cli", "acp"],
        env: &[],
        settings: &[],
        install: "npm package @kilocode/cli (registry also ships a `kilo` binary: `kilo acp`)",
        docs: Some("https://kilo.ai/"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md; registry kilo/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json (id kilo)",
    },
    CatalogueEntry {
        name: "mux",
        command: "mux",
        args: &["acp"],
        env: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"],
        settings: &[],
        install: "npm package mux (acpx runs npx -y mux@^0.28.0 acp); at least one provider key is needed",
        docs: Some("https://mux.coder.com/integrations/acp"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md",
    },
    CatalogueEntry {
        name: "pool",
        command: "pool",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "Poolside `pool` CLI (registry binaries from downloads.poolside.ai); authenticate with `pool login`",
        docs: Some("https://poolside.ai"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md; registry poolside/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json (id poolside)",
    },
    CatalogueEntry {
        name: "qoder",
        command: "qodercli",
        args: &["--acp"],
        env: &["QODER_PERSONAL_ACCESS_TOKEN"],
        settings: &[],
        install: "npm package @qoder-ai/qodercli (bin qodercli)",
        docs: Some("https://docs.qoder.com/cli/acp"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md; registry qoder/agent.json",
    },
    CatalogueEntry {
        name: "trae",
        command: "traecli",
        args: &["acp", "serve"],
        env: &[],
        settings: &[],
        install: "Trae CLI (https://docs.trae.cn/cli); older acpx versions used the binary name trae-cli",
        docs: Some("https://docs.trae.cn/cli"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "openclaw/acpx src/agent-registry.ts (index id 56205623005 / 65731523800) + docs/agents.md",
    },
    CatalogueEntry {
        name: "devin",
        command: "devin",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "Devin CLI binaries (registry: static.devin.ai/cli/<ver>/...); see https://docs.devin.ai/cli",
        docs: Some("https://docs.devin.ai/cli"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "registry devin/agent.json (./bin/devin acp); acpx agents/Devin.md (needs clientInfo.name 'windsurf' shim); acpx AGENT_REGISTRY devin (v0.19.1 mirror); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "fx",
        command: "fx",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "not researched; see the source",
        docs: None,
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY fx (index id 65731523800); registry fx/agent.json exists (not read)",
    },
    CatalogueEntry {
        name: "mcode",
        command: "mcode",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "not researched; see the source",
        docs: None,
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY mcode (index id 65731523800); acpx agents/MCode.md exists (not read)",
    },
    CatalogueEntry {
        name: "zeroclaw",
        command: "zeroclaw",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "not researched; see the source",
        docs: None,
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "acpx AGENT_REGISTRY zeroclaw (index id 65731523800)",
    },
    CatalogueEntry {
        name: "antigravity",
        command: "agy_acp_server.par",
        args: &[],
        env: &[],
        settings: &[],
        install: "Google Antigravity ACP server, a separate binary from the `agy` CLI with its own login; on Linux acpx passes `--uid=`",
        docs: None,
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "Swift port of acpx AGENT_REGISTRY v0.19.1 (index id 68854030553: antigravityCommand); third-party report (index id 68401944095)",
    },
    CatalogueEntry {
        name: "auggie",
        command: "auggie",
        args: &["--acp"],
        env: &[],
        settings: &[],
        install: "npm install -g @augmentcode/auggie; registry sets AUGMENT_DISABLE_AUTO_UPDATE=1",
        docs: Some("https://docs.augmentcode.com/cli/acp"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "agentclientprotocol/registry auggie/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "cline",
        command: "cline",
        args: &["--acp"],
        env: &[],
        settings: &[],
        install: "npm install -g cline",
        docs: Some("https://cline.bot/cli"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "agentclientprotocol/registry cline/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "mistral-vibe",
        command: "vibe-acp",
        args: &[],
        env: &[],
        settings: &[],
        install: "binary release vibe-acp from github.com/mistralai/mistral-vibe/releases",
        docs: Some("https://github.com/mistralai/mistral-vibe"),
        load_session: None,
        restricted_mode: None,
        ask_mode: None,
        source: "agentclientprotocol/registry mistral-vibe/agent.json",
    },
    CatalogueEntry {
        name: "amp",
        command: "amp-acp",
        args: &[],
        env: &[],
        settings: &[],
        install: "binary release from github.com/tao12345666333/amp-acp (third-party adapter; needs the Amp CLI)",
        docs: Some("https://github.com/tao12345666333/amp-acp"),
        load_session: Some(false),
        restricted_mode: None,
        ask_mode: None,
        source: "agentclientprotocol/registry amp-acp/agent.json; loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
    CatalogueEntry {
        name: "stakpak",
        command: "stakpak",
        args: &["acp"],
        env: &[],
        settings: &[],
        install: "binary release from github.com/stakpak/agent/releases",
        docs: Some("https://github.com/stakpak/agent"),
        load_session: Some(true),
        restricted_mode: None,
        ask_mode: None,
        source: "agentclientprotocol/registry stakpak/agent.json (older snapshot); loadSession from agentclientprotocol/registry .protocol-matrix/snapshots/2026-08-20.json",
    },
];

#[cfg(test)]
mod tests {
    use super::{CATALOGUE, catalogue_entry};
    use crate::config::ProviderSpec;

    #[test]
    fn every_entry_is_a_valid_provider_with_a_unique_name() {
        let mut names = std::collections::BTreeSet::new();
        for e in CATALOGUE {
            assert!(names.insert(e.name), "{} twice", e.name);
            ProviderSpec::from_config(e.name, &e.provider_config())
                .unwrap_or_else(|err| panic!("{}: {err}", e.name));
            assert!(!e.source.is_empty() && !e.install.is_empty(), "{}", e.name);
            for (setting, what) in e.settings {
                assert!(
                    crate::names::valid_env_name(setting),
                    "{}: {setting}",
                    e.name
                );
                assert!(
                    !e.env.contains(setting) && !what.is_empty(),
                    "{}: {setting}",
                    e.name
                );
            }
        }
        assert!(CATALOGUE.len() >= 26);
    }

    #[test]
    fn the_readme_and_the_providers_guide_state_the_catalogue_size() {
        let said = format!("catalogue of {} ", CATALOGUE.len());
        for (doc, text) in [
            ("README.md", include_str!("../../../../README.md")),
            (
                "docs/providers.md",
                include_str!("../../../../docs/providers.md"),
            ),
        ] {
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(text.contains(&said), "{doc} must say \"{said}\"");
        }
    }

    #[test]
    fn claude_is_the_current_adapter() {
        let c = catalogue_entry("claude").unwrap();
        assert_eq!(c.command, "claude-agent-acp");
        assert_eq!(c.provider_config().env_allowlist, ["ANTHROPIC_API_KEY"]);
        assert!(catalogue_entry("claude-code-acp").is_none());
    }
}
