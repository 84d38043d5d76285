//! Unit tests of provider definitions and command resolution.

use super::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

#[test]
fn full_definition_parses() {
    let spec = ProviderSpec::from_json(
        "claude",
        &json!({
            "command": "claude-code-acp", "args": ["--x"], "env": {"MODE": "1"},
            "envAllowlist": ["PATH", "ANTHROPIC_API_KEY"],
            "vcsIdentity": {"name": "Agent", "email": "agent@example.com"}
        }),
    )
    .unwrap();
    assert_eq!(spec.command, CommandRef::Bare("claude-code-acp".into()));
    let env = spec.agent_env(|k| (k == "PATH").then(|| "/usr/bin".into()));
    let keys: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "PATH",
            "MODE",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL"
        ]
    );
}

#[test]
fn invalid_definitions_are_refused_with_typed_errors() {
    let cases = [
        (json!({"command": "bin/agent"}), "relative"),
        (json!({"command": ""}), "malformed"),
        (json!({}), "malformed"),
        (json!({"command": "a", "extra": 1}), "malformed"),
        (json!({"command": "a", "env": {"BAD-NAME": "x"}}), "envname"),
        (
            json!({"command": "a", "env": {"K": "x"}, "envAllowlist": ["K"]}),
            "dup",
        ),
        (
            json!({"command": "a", "env": {"GIT_AUTHOR_NAME": "x"}, "vcsIdentity": {"name": "n", "email": "e@x"}}),
            "dup",
        ),
        (
            json!({"command": "a", "vcsIdentity": {"name": "", "email": "e@x"}}),
            "vcs",
        ),
        (
            json!({"command": "a", "vcsIdentity": {"name": "n", "email": "nope"}}),
            "vcs",
        ),
        (
            json!({"command": "a", "vcsIdentity": {"name": "n", "email": "a b@x"}}),
            "vcs",
        ),
        (json!({"command": "a", "args": "x"}), "malformed"),
    ];
    for (value, want) in cases {
        let err = ProviderSpec::from_json("p", &value).unwrap_err();
        let got = match err {
            ProviderError::RelativeCommand { .. } => "relative",
            ProviderError::Malformed { .. } => "malformed",
            ProviderError::InvalidEnvName { .. } => "envname",
            ProviderError::DuplicateEnv { .. } => "dup",
            ProviderError::InvalidVcsIdentity { .. } => "vcs",
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(got, want, "for {value}");
    }
    assert!(matches!(
        ProviderSpec::from_json("-bad", &json!({"command": "a"})),
        Err(ProviderError::InvalidName { .. })
    ));
}

#[test]
fn env_values_never_appear_in_errors() {
    let err = ProviderSpec::from_json(
        "p",
        &json!({"command": "a", "env": {"K": 5}, "envAllowlist": ["sk-secret"]}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("env key #1"), "{err}");
    let err = ProviderSpec::from_json(
        "p",
        &json!({"command": "a", "envAllowlist": ["TOKEN=sk-secret-value"]}),
    )
    .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidEnvName { .. }));
    assert!(!err.to_string().contains("sk-secret"), "{err}");
}

#[test]
fn bare_names_resolve_from_path_then_local_bin() {
    let dir = tempfile::tempdir().unwrap();
    let path_dir = dir.path().join("path");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&path_dir).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    let make = |p: PathBuf, mode| {
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    };
    let in_home = make(home.join(".local/bin/agent"), 0o755);
    let spec = ProviderSpec::from_json("p", &json!({"command": "agent"})).unwrap();
    let lookup = CommandLookup {
        path: Some(path_dir.clone().into_os_string()),
        home: Some(home.clone()),
        secrets: Default::default(),
    };
    assert_eq!(spec.resolve_command(&lookup).unwrap(), in_home);
    let in_path = make(path_dir.join("agent"), 0o755);
    assert_eq!(spec.resolve_command(&lookup).unwrap(), in_path);
    make(path_dir.join("agent"), 0o644);
    assert_eq!(spec.resolve_command(&lookup).unwrap(), in_home);
    let missing = ProviderSpec::from_json("p", &json!({"command": "nope"})).unwrap();
    assert!(matches!(
        missing.resolve_command(&lookup),
        Err(ProviderError::CommandNotFound { .. })
    ));
    let abs = ProviderSpec::from_json("p", &json!({"command": "/nonexistent/agent"})).unwrap();
    assert!(matches!(
        abs.resolve_command(&lookup),
        Err(ProviderError::NotExecutable { .. })
    ));
}

#[test]
fn env_file_values_win_over_the_service_environment() {
    let spec = ProviderSpec::from_json(
        "p",
        &json!({"command": "a", "envAllowlist": ["PATH", "LAPIS_UNSET_X"]}),
    )
    .unwrap();
    let mut lookup = CommandLookup::from_env();
    let from_service = spec.agent_env(|k| lookup.env_value(k));
    assert_eq!(from_service.len(), 1, "only PATH is set in the test env");
    lookup.secrets =
        super::super::EnvFile::parse(b"PATH=/from-file\nLAPIS_UNSET_X=v\n", "env".as_ref())
            .unwrap();
    let env = spec.agent_env(|k| lookup.env_value(k));
    assert!(
        env.contains(&("PATH".into(), "/from-file".into())),
        "{env:?}"
    );
    assert!(
        env.contains(&("LAPIS_UNSET_X".into(), "v".into())),
        "{env:?}"
    );
}
