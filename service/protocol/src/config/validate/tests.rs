use std::path::Path;

use super::super::Config;

const SECRET: &str = "lapis_00000000000000000000000000000000000000000000000000000000000000ab";

fn doc(extra: &str) -> String {
    format!(
        r#"{{"schema":1,"instance":"default","controllerHome":"/tmp/h",
        "tokens":[{{"name":"owner","principal":"owner","secret":"{SECRET}"}}]{extra}}}"#
    )
}

fn parse(s: &str) -> Result<Config, super::ConfigError> {
    let mut c = Config::parse(s.as_bytes(), Path::new("config.json"))?;
    c.check_on_this_machine()?;
    Ok(c)
}

#[test]
fn a_missing_workspace_directory_is_a_machine_check_not_a_structural_one() {
    let ws = r#","workspaces":{"a":{"path":"/nonexistent/lapis-h1b-test"}}"#;
    let mut c =
        Config::parse(doc(ws).as_bytes(), Path::new("config.json")).expect("structurally valid");
    let e = c.check_on_this_machine().unwrap_err().to_string();
    assert!(e.contains("workspaces.a.path"), "{e}");
    assert!(!e.contains("nonexistent"), "{e}");
    // A malformed id is structural.
    let bad = r#","workspaces":{"-a":{"path":"/tmp"}}"#;
    assert!(Config::parse(doc(bad).as_bytes(), Path::new("config.json")).is_err());
}

#[test]
fn a_missing_or_unknown_member_is_named_at_the_object_that_has_it() {
    let missing = doc(",\n\"providers\":{\n\"claude\":{\"args\":[]}\n},\n\"workspaces\":{}\n");
    let e = Config::parse(missing.as_bytes(), Path::new("config.json")).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("malformed at `providers.claude`: missing field `command`, line 4,"),
        "{text}"
    );
    let unknown = doc(r#","providers":{"claude":{"comand":"claude"}}"#);
    let text = Config::parse(unknown.as_bytes(), Path::new("config.json"))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("`providers.claude.comand`: unknown field `comand`"),
        "{text}"
    );
    // A wrong type names the field, never the value.
    let typed = doc(r#","server":{"maxFrameBytes":"lapis_secretish"}"#);
    let text = Config::parse(typed.as_bytes(), Path::new("config.json"))
        .unwrap_err()
        .to_string();
    assert!(text.contains("`server.maxFrameBytes`, line"), "{text}");
    assert!(!text.contains("secretish"), "{text}");
}

#[test]
fn minimal_config_gets_defaults() {
    let c = parse(&doc("")).unwrap();
    assert_eq!(c.server.max_frame_bytes, 1024 * 1024);
    assert_eq!(c.server.queue_capacity, 1024);
    assert_eq!(c.server.max_connections, 256);
    assert_eq!(
        (c.server.max_live_agents, c.server.max_running_turns),
        (16, 16)
    );
    assert_eq!(
        c.tokens[0].effective_scopes().len(),
        crate::Scope::ALL.len()
    );
}

#[test]
fn errors_never_quote_values() {
    let bad = doc("").replace(SECRET, "lapis_SHORTSECRETVALUE");
    let e = parse(&bad).unwrap_err().to_string();
    assert!(e.contains("tokens[0].secret"), "{e}");
    assert!(!e.contains("SHORTSECRETVALUE"), "{e}");
    // A type error quoting a string would leak it: only position is shown.
    let typed = doc("").replace(
        "\"principal\":\"owner\"",
        "\"principal\":\"owner\",\"scopes\":\"lapis_LEAK\"",
    );
    let e = parse(&typed).unwrap_err().to_string();
    assert!(!e.contains("LEAK"), "{e}");
    let unknown = doc(r#","extra":"lapis_LEAK2""#);
    assert!(!parse(&unknown).unwrap_err().to_string().contains("LEAK2"));
}

#[test]
fn a_secret_in_a_key_is_never_quoted() {
    let tail = &SECRET[6..];
    for extra in [
        format!(r#","workspaces":{{"{SECRET}":{{"path":"/tmp"}}}}"#),
        format!(r#","providers":{{"{SECRET}":{{"command":"a"}}}}"#),
        format!(
            r#","providers":{{"p":{{"command":"a","env":{{"{SECRET}":"v"}},"envAllowlist":["{SECRET}"]}}}}"#
        ),
        format!(r#","providers":{{"p":{{"command":"a","envAllowlist":["{SECRET}=x"]}}}}"#),
        format!(r#","providers":{{"p":{{"command":"a","env":{{"{SECRET}":1}}}}}}"#),
        format!(r#","providers":{{"p":{{"command":"a","{SECRET}":1}}}}"#),
        r#","workspaces":{"a":{"path":"/tmp"},"a":{"path":"/tmp"}}"#.to_string(),
        format!(r#","tokens2":1,"{SECRET}":1"#),
    ] {
        let e = parse(&doc(&extra)).unwrap_err().to_string();
        assert!(!e.contains(tail), "{e}");
    }
}

#[test]
fn duplicate_keys_are_refused() {
    let e = parse(&doc(r#","schema":1"#)).unwrap_err();
    assert!(e.to_string().contains("duplicate key"), "{e}");
}

#[test]
fn token_applications_are_checked() {
    let with = |apps: &str| {
        doc("").replace(
            "\"principal\":\"owner\"",
            &format!("\"principal\":\"owner\",\"applications\":{apps}"),
        )
    };
    let c = parse(&with(r#"["editor","bot.1"]"#)).unwrap();
    assert!(c.tokens[0].allows_application("editor"));
    assert!(!c.tokens[0].allows_application("other"));
    assert!(parse(&with("[]")).is_err());
    assert!(parse(&with(r#"["has space"]"#)).is_err());
}

#[test]
fn errors_name_the_json_path() {
    let e = parse(&doc(
        r#","providers":{"claude":{"command":"c","envAllowlist":["A","B","sk-LEAKY=x"]}}"#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("`providers.claude.envAllowlist[2]`"), "{e}");
    assert!(!e.contains("LEAKY=x"), "{e}");
    let e = parse(&doc(
        r#","providers":{"claude":{"command":"c","envAllowlist":["A",7]}}"#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("`providers.claude.envAllowlist[1]`"), "{e}");
    let e = parse(&doc(r#","server":{"queueCapacity":"lapis_LEAK"}"#))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`server.queueCapacity`") && !e.contains("LEAK"),
        "{e}"
    );
    let e = parse(&doc(
        r#","providers":{"x":{"command":"a","envAllowlist":["A","A"]}}"#,
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("`providers.x.envAllowlist[1]`"), "{e}");
}

#[test]
fn workspace_alias_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("p");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
    let ws = format!(
        r#","workspaces":{{"a":{{"path":"{}"}},"b":{{"path":"{}"}}}}"#,
        real.display(),
        dir.path().join("link").display()
    );
    let e = parse(&doc(&ws)).unwrap_err();
    assert_eq!(e.code(), "workspace_alias");
    let one = format!(
        r#","workspaces":{{"a":{{"path":"{}"}}}}"#,
        dir.path().join("link").display()
    );
    let c = parse(&doc(&one)).unwrap();
    assert_eq!(c.workspaces["a"].path, real.canonicalize().unwrap());
}

#[test]
fn the_default_provider_is_a_configured_one_or_echo() {
    assert!(parse(&doc(r#","defaultProvider":"echo""#)).is_ok());
    let c = parse(&doc(
        r#","providers":{"x":{"command":"a"}},"defaultProvider":"x""#,
    ))
    .unwrap();
    assert_eq!(c.default_provider.as_deref(), Some("x"));
    let e = parse(&doc(r#","defaultProvider":"ghost""#)).unwrap_err();
    assert!(e.to_string().contains("defaultProvider"), "{e}");
}

#[test]
fn limits_providers_and_scopes_are_checked() {
    assert!(parse(&doc(r#","server":{"maxFrameBytes":10}"#)).is_err());
    assert!(
        parse(&doc(
            r#","server":{"maxFrameBytes":4096,"queueCapacity":3}"#
        ))
        .is_ok()
    );
    assert!(parse(&doc(r#","server":{"bogus":1}"#)).is_err());
    assert!(parse(&doc(r#","server":{"maxLiveAgents":0}"#)).is_err());
    assert!(parse(&doc(r#","server":{"maxRunningTurns":5000}"#)).is_err());
    let c = parse(&doc(r#","server":{"maxLiveAgents":2,"maxRunningTurns":3}"#)).unwrap();
    assert_eq!(
        (c.server.max_live_agents, c.server.max_running_turns),
        (2, 3)
    );
    assert!(
        parse(&doc(
            r#","providers":{"x":{"command":"a","idleSeconds":0,"maxTurnSeconds":5}}"#
        ))
        .is_ok()
    );
    assert!(
        parse(&doc(
            r#","providers":{"x":{"command":"a","maxTurnSeconds":0}}"#
        ))
        .is_err()
    );
    assert!(parse(&doc(r#","providers":{"x":{"command":"rel/path"}}"#)).is_err());
    assert!(
        parse(&doc(
            r#","providers":{"x":{"command":"codex-acp","envAllowlist":["OPENAI_API_KEY"]}}"#
        ))
        .is_ok()
    );
    assert!(
        parse(&doc(
            r#","providers":{"x":{"command":"a","env":{"1BAD":"v"}}}"#
        ))
        .is_err()
    );
    assert!(
        parse(&doc(
            r#","providers":{"x":{"command":"a","vcsIdentity":{"name":"A","email":"nope"}}}"#
        ))
        .is_err()
    );
    let scoped = doc("").replace(
        "\"principal\":\"owner\"",
        "\"principal\":\"owner\",\"scopes\":[\"status:read\"]",
    );
    assert_eq!(
        parse(&scoped).unwrap().tokens[0].effective_scopes().len(),
        1
    );
    let unknown_scope = doc("").replace(
        "\"principal\":\"owner\"",
        "\"principal\":\"owner\",\"scopes\":[\"root\"]",
    );
    assert!(parse(&unknown_scope).is_err());
    assert!(parse(&doc("").replace("\"schema\":1", "\"schema\":2")).is_err());
}

#[test]
fn grants_belong_to_application_tokens_and_are_checked() {
    let with = |extra: &str| {
        doc("").replace(
            "\"principal\":\"owner\"",
            &format!("\"principal\":\"owner\"{extra}"),
        )
    };
    let bound = parse(&with(
        r#","applications":["bot"],"workspaces":["proj"],"providers":["echo"]"#,
    ))
    .unwrap();
    let t = &bound.tokens[0];
    assert_eq!(t.kind(), crate::config::TokenKind::Application);
    assert!(t.allows_workspace("proj") && !t.allows_workspace("other"));
    assert!(t.allows_provider("echo") && !t.allows_provider("codex"));
    assert!(
        t.effective_scopes()
            .iter()
            .all(|s| !s.crosses_applications())
    );
    // The owner's token is never limited; empty or malformed grants fail.
    let e = parse(&with(r#","workspaces":["proj"]"#))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tokens[0].workspaces"), "{e}");
    assert!(parse(&with(r#","applications":["bot"],"providers":[]"#)).is_err());
    assert!(parse(&with(r#","applications":["bot"],"workspaces":["a b"]"#)).is_err());
    let owner = parse(&doc("")).unwrap();
    assert_eq!(owner.tokens[0].kind(), crate::config::TokenKind::Owner);
    assert_eq!(
        owner.tokens[0].effective_scopes(),
        crate::Scope::ALL.to_vec()
    );
}
