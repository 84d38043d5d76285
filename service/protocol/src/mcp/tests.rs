//! The validation matrix: every static refusal and its stable code.

use serde_json::json;

use super::*;

fn server(v: serde_json::Value) -> McpServer {
    serde_json::from_value(v).unwrap()
}

fn stdio(name: &str) -> McpServer {
    server(
        json!({"name": name, "command": "/usr/bin/mcp-files", "args": ["--root", "/srv"], "env": ["FILES_TOKEN"]}),
    )
}

fn code(servers: &[McpServer]) -> &'static str {
    validate_servers(servers).unwrap_err().code().as_str()
}

#[test]
fn valid_descriptions_pass_for_every_transport() {
    let http = server(json!({"name": "web", "transport": "http", "url": "https://mcp.example/x"}));
    let sse =
        server(json!({"name": "events", "transport": "sse", "url": "http://127.0.0.1:9/sse"}));
    validate_servers(&[stdio("files"), http, sse]).unwrap();
    validate_servers(&[]).unwrap();
}

#[test]
fn shape_refusals_are_mcp_server_invalid() {
    let cases = [
        json!({"name": "", "command": "/bin/x"}),
        json!({"name": "-lead", "command": "/bin/x"}),
        json!({"name": "a b", "command": "/bin/x"}),
        json!({"name": "files"}),
        json!({"name": "files", "command": "bin/x"}),
        json!({"name": "files", "command": "x"}),
        json!({"name": "files", "command": "/bin/x", "url": "http://h"}),
        json!({"name": "files", "command": "/bin/x", "env": ["1BAD"]}),
        json!({"name": "files", "command": "/bin/x", "env": ["A", "A"]}),
        json!({"name": "files", "command": "/bin/x", "args": ["a\u{0}b"]}),
        json!({"name": "web", "transport": "http"}),
        json!({"name": "web", "transport": "http", "url": "ftp://h"}),
        json!({"name": "web", "transport": "http", "url": "http://"}),
        json!({"name": "web", "transport": "sse", "url": "http://h", "command": "/bin/x"}),
        json!({"name": "web", "transport": "sse", "url": "http://h", "env": ["A"]}),
    ];
    for case in cases {
        assert_eq!(
            code(&[server(case.clone())]),
            "mcp_server_invalid",
            "{case}"
        );
    }
    assert_eq!(code(&[stdio("same"), stdio("same")]), "mcp_server_invalid");
}

#[test]
fn unknown_fields_and_transports_do_not_parse() {
    for bad in [
        json!({"name": "f", "command": "/bin/x", "envValues": {"A": "b"}}),
        json!({"name": "f", "transport": "websocket", "url": "http://h"}),
    ] {
        assert!(serde_json::from_value::<McpServer>(bad).is_err());
    }
}

#[test]
fn bounds_are_mcp_limit_exceeded() {
    let many: Vec<McpServer> = (0..=MAX_MCP_SERVERS)
        .map(|i| stdio(&format!("s{i}")))
        .collect();
    assert_eq!(code(&many), "mcp_limit_exceeded");
    let at_bound: Vec<McpServer> = (0..MAX_MCP_SERVERS)
        .map(|i| stdio(&format!("s{i}")))
        .collect();
    validate_servers(&at_bound).unwrap();
    let long = "a".repeat(MAX_MCP_STRING_BYTES + 1);
    let cases = [
        json!({"name": "f", "command": format!("/{long}")}),
        json!({"name": "f", "command": "/bin/x", "args": [long]}),
        json!({"name": "f", "command": "/bin/x", "args": vec!["a"; MAX_MCP_ARGS + 1]}),
        json!({"name": "f", "command": "/bin/x",
            "env": (0..=MAX_MCP_ENV).map(|i| format!("V{i}")).collect::<Vec<_>>()}),
        json!({"name": "f", "transport": "http", "url": format!("http://{long}")}),
        json!({"name": "f", "command": "/bin/x", "args": vec!["a".repeat(4000); 10]}),
    ];
    for case in cases {
        assert_eq!(code(&[server(case)]), "mcp_limit_exceeded");
    }
}

#[test]
fn reserved_names_are_refused_by_position_never_value() {
    for name in [
        "LAPIS_AI_CONTROLLER_WORKSPACE",
        "LAPIS_AI_CONTROLLER_HOME",
        "HOME",
        "PATH",
        "XDG_RUNTIME_DIR",
    ] {
        let s = server(json!({"name": "f", "command": "/bin/x", "env": ["OK", name]}));
        let err = validate_servers(&[s]).unwrap_err();
        assert_eq!(err.code().as_str(), "mcp_env_reserved");
        assert_eq!(
            err,
            McpRefusal::EnvReserved {
                server: "f".into(),
                position: 2
            }
        );
        assert!(!err.to_string().contains(name), "{err}");
    }
    assert!(!reserved_env("LAPISX"));
}

/// Only the controller's identity names are reserved, not the whole
/// `LAPIS_` prefix (issue 24): an application's own `LAPIS_*` variable is
/// its to give its MCP server.
#[test]
fn other_lapis_names_are_the_applications() {
    for name in ["LAPIS_X", "LAPIS_TICKETS_KEY", "LAPIS_LOG"] {
        assert!(!reserved_env(name), "{name}");
        let s = server(json!({"name": "f", "command": "/bin/x", "env": [name]}));
        validate_servers(&[s]).unwrap();
    }
    for name in IDENTITY_ENV {
        assert!(reserved_env(name), "{name}");
    }
}

#[test]
fn selections_are_bounded_valid_and_unique() {
    validate_selection(&["a".into(), "b".into()]).unwrap();
    let many: Vec<String> = (0..=MAX_MCP_SERVERS).map(|i| format!("s{i}")).collect();
    assert_eq!(
        validate_selection(&many).unwrap_err().code().as_str(),
        "mcp_limit_exceeded"
    );
    assert_eq!(
        validate_selection(&["a".into(), "a".into()])
            .unwrap_err()
            .code()
            .as_str(),
        "mcp_server_invalid"
    );
    assert_eq!(
        validate_selection(&["a/b".into()])
            .unwrap_err()
            .code()
            .as_str(),
        "mcp_server_invalid"
    );
}

#[test]
fn every_refusal_has_its_own_code() {
    let refusals = [
        McpRefusal::Invalid {
            position: 1,
            reason: "x",
        },
        McpRefusal::Limit {
            what: "x",
            limit: 1,
        },
        McpRefusal::EnvReserved {
            server: "s".into(),
            position: 1,
        },
        McpRefusal::EnvNotAllowed {
            server: "s".into(),
            position: 1,
        },
        McpRefusal::EnvUnset {
            server: "s".into(),
            position: 1,
        },
        McpRefusal::EnvConflict {
            server: "s".into(),
            position: 1,
        },
        McpRefusal::TransportUnsupported {
            server: "s".into(),
            transport: "http",
        },
        McpRefusal::Restricted,
        McpRefusal::Unavailable { server: "s".into() },
    ];
    let codes: std::collections::HashSet<_> = refusals.iter().map(|r| r.code()).collect();
    assert_eq!(codes.len(), refusals.len());
    assert!(codes.iter().all(|c| c.as_str().starts_with("mcp_")));
}

#[test]
fn provider_config_carries_and_validates_servers() {
    use crate::config::ProviderSpec;
    let ok = ProviderSpec::from_json(
        "p",
        &json!({"command": "agent", "mcpServers": [{"name": "files", "command": "/bin/x", "env": ["T"]}],
            "mcpEnvAllowlist": ["T"]}),
    )
    .unwrap();
    assert_eq!(ok.mcp_servers.len(), 1);
    assert_eq!(ok.mcp_env_allowlist, ["T"]);
    let reserved = ProviderSpec::from_json(
        "p",
        &json!({"command": "agent", "mcpServers": [{"name": "f", "command": "/bin/x", "env": ["LAPIS_AI_CONTROLLER_WORKSPACE"]}]}),
    )
    .unwrap_err();
    assert!(reserved.to_string().contains("reserved"), "{reserved}");
    let malformed = ProviderSpec::from_json(
        "p",
        &json!({"command": "agent", "mcpServers": [{"name": "f", "command": "/bin/x", "env": "sk-secret-value"}]}),
    )
    .unwrap_err();
    assert!(
        !malformed.to_string().contains("sk-secret-value"),
        "{malformed}"
    );
    assert!(
        ProviderSpec::from_json(
            "p",
            &json!({"command": "agent", "mcpEnvAllowlist": ["LAPIS_AI_CONTROLLER_WORKSPACE"]})
        )
        .is_err()
    );
}
