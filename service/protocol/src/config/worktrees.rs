//! `worktrees`: where worktree workspaces go and the commands run around
//! their life (`setup` after one is created, `teardown` before one is
//! deleted).
//!
//! What must stay true: a hook's argv is the configured `args` alone and
//! its environment holds only the `envAllowlist` names plus the
//! controller's `LAPIS_WORKSPACE_ID`, `LAPIS_WORKTREE` and
//! `LAPIS_REPOSITORY`; it runs in the worktree, within its timeout (its
//! process group is killed past it), and its output goes to the service
//! log, never to a client.

use serde::{Deserialize, Serialize};

/// Default `timeoutSeconds` of a hook.
pub const DEFAULT_HOOK_TIMEOUT_SECONDS: u64 = 300;

/// The `worktrees` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreesConfig {
    /// Where `workspaces add --worktree-of` puts a worktree given no
    /// directory (`<root>/<workspace id>`): absolute or `~/…`
    /// (default: `<controller home>/worktrees`). Granted as a workspace
    /// root for the worktrees made there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Run in each new worktree after it is created; a failure (non-zero
    /// exit, timeout) removes the worktree again and refuses the add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<HookCommand>,
    /// Run in a worktree before `--delete-worktree` deletes it; a failure
    /// is logged and the worktree deleted anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<HookCommand>,
}

/// One hook command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookCommand {
    /// Absolute path of the command.
    pub command: String,
    /// Its arguments (never secrets; at most 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment names passed through from the controller's environment
    /// (nothing else is; at most 32).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_allowlist: Vec<String>,
    /// Killed (with its process group) after this many seconds (1-3600,
    /// default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}

impl HookCommand {
    /// `timeoutSeconds` with its default.
    pub fn timeout_seconds(&self) -> u64 {
        self.timeout_seconds.unwrap_or(DEFAULT_HOOK_TIMEOUT_SECONDS)
    }

    fn check(&self, field: &'static str) -> Result<(), (String, String)> {
        let at = |sub: &str| format!("worktrees.{field}.{sub}");
        if !self.command.starts_with('/') || self.command.contains('\0') {
            return Err((at("command"), "must be an absolute path".into()));
        }
        if self.args.len() > 32 || self.args.iter().any(|a| a.contains('\0')) {
            return Err((at("args"), "at most 32 arguments, without NUL bytes".into()));
        }
        if self.env_allowlist.len() > 32
            || !self
                .env_allowlist
                .iter()
                .all(|n| crate::names::valid_env_name(n))
        {
            return Err((
                at("envAllowlist"),
                "at most 32 names of [A-Za-z_][A-Za-z0-9_]*".into(),
            ));
        }
        if !(1..=3600).contains(&self.timeout_seconds()) {
            return Err((at("timeoutSeconds"), "must be from 1 to 3600".into()));
        }
        Ok(())
    }
}

impl WorktreesConfig {
    /// The shape rules; the error is (field, reason).
    pub(super) fn check(&self) -> Result<(), (String, String)> {
        if let Some(root) = &self.root
            && !(root == "~" || root.starts_with("~/") || root.starts_with('/'))
        {
            return Err((
                "worktrees.root".into(),
                "must be an absolute path or start with `~/`".into(),
            ));
        }
        if let Some(h) = &self.setup {
            h.check("setup")?;
        }
        if let Some(h) = &self.teardown {
            h.check("teardown")?;
        }
        Ok(())
    }

    /// `root` resolved against `home` (the controller user's home, for
    /// `~`), `None` when not configured or `~` cannot be resolved.
    pub fn root_dir(&self, home: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
        let root = self.root.as_deref()?;
        match root.strip_prefix('~') {
            Some(rest) => Some(home?.join(rest.trim_start_matches('/'))),
            None => Some(std::path::PathBuf::from(root)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> HookCommand {
        HookCommand {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "true".into()],
            env_allowlist: vec!["PATH".into()],
            timeout_seconds: None,
        }
    }

    #[test]
    fn hooks_and_roots_are_checked() {
        let mut w = WorktreesConfig {
            root: Some("~/wt".into()),
            setup: Some(hook()),
            teardown: Some(hook()),
        };
        assert_eq!(w.check(), Ok(()));
        assert_eq!(
            w.root_dir(Some(std::path::Path::new("/home/me"))),
            Some("/home/me/wt".into())
        );
        w.root = Some("relative".into());
        assert_eq!(w.check().unwrap_err().0, "worktrees.root");
        w.root = None;
        w.setup.as_mut().unwrap().command = "sh".into();
        assert_eq!(w.check().unwrap_err().0, "worktrees.setup.command");
        w.setup = Some(hook());
        w.teardown.as_mut().unwrap().timeout_seconds = Some(0);
        assert_eq!(
            w.check().unwrap_err().0,
            "worktrees.teardown.timeoutSeconds"
        );
        w.teardown.as_mut().unwrap().timeout_seconds = Some(5);
        w.teardown.as_mut().unwrap().env_allowlist = vec!["BAD-NAME".into()];
        assert_eq!(w.check().unwrap_err().0, "worktrees.teardown.envAllowlist");
    }
}
