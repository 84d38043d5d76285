//! MCP servers for agents through the real binary: provider servers and
//! application-registered servers reach the fixture agent on `session/new`
//! and `session/load` (its `--mcp-ledger`), every refusal has its stable
//! code (at registration, at `threads.create`, and before dispatch), a
//! thread whose registering connection closed fails closed before the
//! prompt is sent, and environment values never reach the journal, the
//! log, the database or CLI output (the context's leak check, whose
//! secrets include every env-file value).

use std::path::Path;

use lapis_protocol::client::{Client, ClientError};
use lapis_protocol::mcp::McpServer;
use lapis_protocol::params::{ThreadsConfigure, ThreadsCreate};
use lapis_protocol::{McpRefused, Note, ThreadExpect, TurnState};
use serde_json::{Value, json};

use crate::acp::arg;
use crate::policy::{app, settle};
use crate::serve_support::{OWNER, Server, write_config_with};
use lapis_e2e::TestContext;

/// Agent secrets the servers draw (long enough for the leak check).
const FILES_TOKEN: &str = "mcp-files-value-5f1d2c";
const APP_TOKEN: &str = "mcp-app-value-9a8b7c";

/// A context whose env file holds the MCP values (and one the agent gets).
fn context_with_secrets(extra: &str) -> TestContext {
    let ctx = TestContext::new();
    let dir = ctx.home().join(".config/lapis-ai-controller");
    std::fs::create_dir_all(&dir).unwrap();
    let env = dir.join("env");
    std::fs::write(
        &env,
        format!("FILES_TOKEN={FILES_TOKEN}\nAPP_TOKEN={APP_TOKEN}\n{extra}"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o600)).unwrap();
    ctx
}

fn agent(args: &[&str], more: Value) -> Value {
    let mut p = json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args });
    for (k, v) in more.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn ledger(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn desc(v: Value) -> McpServer {
    serde_json::from_value(v).unwrap()
}

fn create(
    client: &mut Client,
    provider: &str,
    restricted: bool,
    mcp: &[&str],
) -> Result<String, ClientError> {
    let p = ThreadsCreate::new("proj", provider)
        .restricted(restricted)
        .mcp_servers(mcp.iter().copied());
    Ok(client.threads_create_with(&p)?.thread.id)
}

fn code(e: ClientError) -> String {
    assert!(matches!(e, ClientError::Rpc(_)), "not an RPC error: {e}");
    e.code().to_owned()
}

fn run(client: &mut Client, thread: &str, command: &str) -> lapis_protocol::Turn {
    let turn = client
        .turns_submit(thread, command, "use your tools")
        .unwrap();
    settle(client, &turn.id)
}

/// The payloads of the `mcp_servers` observations of a thread's journal.
fn observations(client: &mut Client, thread: &str) -> Vec<McpRefused> {
    let page = client.journal_replay(Some(thread), 0, None).unwrap();
    page.events
        .iter()
        .filter_map(|e| match lapis_e2e::journal::note(e)? {
            Note::McpRefused(r) => Some(r),
            _ => None,
        })
        .collect()
}

#[test]
fn provider_servers_reach_the_agent_on_new_and_on_load_and_values_stay_out_of_records() {
    let scratch = tempfile::tempdir().unwrap();
    let mcp_ledger = scratch.path().join("mcp");
    let history = scratch.path().join("history");
    let files = json!({"name": "files", "command": "/opt/mcp/files", "args": ["--root", "/srv"],
        "env": ["FILES_TOKEN"]});
    let provider = agent(
        &[
            "--mcp-ledger",
            &arg(&mcp_ledger),
            "--load-session",
            "--history",
            &arg(&history),
        ],
        // A fresh agent every turn, so the second turn loads the session.
        json!({"idleSeconds": 0, "mcpServers": [files]}),
    );
    let server = Server::start_in(
        context_with_secrets(""),
        json!({}),
        json!({ "tools": provider }),
    );
    // As the CLI's application, so `turns show` and `threads show` see it.
    let mut client = app(&server, OWNER, "lapis-cli");
    let thread = create(&mut client, "tools", false, &[]).unwrap();
    let first = run(&mut client, &thread, "c1");
    let second = run(&mut client, &thread, "c2");
    assert_eq!(first.state, TurnState::Completed, "{first:?}");
    assert_eq!(second.state, TurnState::Completed, "{second:?}");
    let got = ledger(&mcp_ledger);
    let methods: Vec<&str> = got.iter().map(|l| l["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["session/new", "session/load"]);
    let expected = json!([{"name": "files", "command": "/opt/mcp/files", "args": ["--root", "/srv"],
        "env": [{"name": "FILES_TOKEN", "value": FILES_TOKEN}]}]);
    for line in &got {
        assert_eq!(line["mcpServers"], expected);
    }
    // What persists: names, transports and identities in each turn's
    // prepared configuration, never values.
    for t in [&first, &second] {
        let prepared = client.turns_get(&t.id).unwrap().prepared.unwrap();
        assert_eq!(prepared.mcp_servers.len(), 1);
    }
    let shown = server
        .ctx
        .run(["turns", "show", &first.id, "--json"])
        .json();
    let endpoint = &shown["turn"]["prepared"]["mcpServers"][0];
    assert_eq!(endpoint["name"], "files");
    assert_eq!(endpoint["transport"], "stdio");
    assert!(endpoint["identity"].as_str().unwrap().starts_with("mcp_"));
    let plain = server.ctx.run(["turns", "show", &first.id]);
    assert!(plain.stdout.contains(", mcp files"), "{}", plain.stdout);
    let thread_shown = server.ctx.run(["threads", "show", &thread, "--json"]);
    assert_eq!(thread_shown.code, Some(0), "{thread_shown:?}");
    let listed = server.ctx.run(["providers", "list", "--json"]).json();
    let tools = listed["configured"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tools")
        .unwrap();
    assert_eq!(tools["mcpServers"][0]["name"], "files");
    assert_eq!(tools["mcpServers"][0]["identity"], endpoint["identity"]);
    let plain = server.ctx.run(["providers", "list"]);
    assert!(
        plain.stdout.contains("\tfound\tfiles (stdio)\t-\n"),
        "{}",
        plain.stdout
    );
    server.finish(&[], &[]);
}

#[test]
fn application_servers_reach_the_agent_and_a_closed_connection_fails_the_turn_before_dispatch() {
    let scratch = tempfile::tempdir().unwrap();
    let mcp_ledger = scratch.path().join("mcp");
    let prompts = scratch.path().join("prompts");
    let provider = agent(
        &[
            "--mcp-ledger",
            &arg(&mcp_ledger),
            "--ledger",
            &arg(&prompts),
        ],
        json!({"idleSeconds": 0, "mcpEnvAllowlist": ["APP_TOKEN"]}),
    );
    let server = Server::start_in(
        context_with_secrets(""),
        json!({}),
        json!({ "tools": provider }),
    );
    let mut editor = app(&server, OWNER, "editor");
    let registered = editor
        .mcp_register(vec![desc(
            json!({"name": "tickets", "command": "/opt/mcp/tickets",
            "env": ["APP_TOKEN"]}),
        )])
        .unwrap();
    assert_eq!(registered.servers[0].name, "tickets");
    // Another application never sees the editor's servers.
    let mut other = app(&server, OWNER, "chat");
    assert_eq!(
        code(create(&mut other, "tools", false, &["tickets"]).unwrap_err()),
        "mcp_server_unavailable"
    );
    let thread = create(&mut editor, "tools", false, &["tickets"]).unwrap();
    let shown = editor.threads_get(&thread).unwrap();
    assert_eq!(shown.thread.mcp_servers, ["tickets"]);
    // Reattachment states the servers relied on; another list is a mismatch.
    let mut expect = ThreadExpect::of(&shown.thread);
    editor.threads_attach(&thread, &expect).unwrap();
    expect.mcp_servers = Some(vec!["other".into()]);
    let err = editor.threads_attach(&thread, &expect).unwrap_err();
    assert_eq!(err.code(), "binding_mismatch");
    editor.detach(&thread);
    let done = run(&mut editor, &thread, "c1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    let got = ledger(&mcp_ledger);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0]["mcpServers"],
        json!([{"name": "tickets", "command": "/opt/mcp/tickets", "args": [],
            "env": [{"name": "APP_TOKEN", "value": APP_TOKEN}]}])
    );
    // The registering connection closes: its servers are gone, and the
    // thread's next turn fails closed before anything reaches an agent.
    drop(editor);
    let mut again = app(&server, OWNER, "editor");
    let failed = run(&mut again, &thread, "c2");
    assert_eq!(failed.state, TurnState::Failed, "{failed:?}");
    assert_eq!(failed.outcome.as_deref(), Some("mcp_server_unavailable"));
    assert_eq!(failed.dispatched_at, None);
    let refused = observations(&mut again, &thread);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].refused.as_str(), "mcp_server_unavailable");
    assert!(failed.prepared.as_ref().unwrap().mcp_servers.is_empty());
    assert_eq!(ledger(&mcp_ledger).len(), 1);
    assert_eq!(
        std::fs::read_to_string(&prompts).unwrap().lines().count(),
        1
    );
    // Registering again on the new connection brings the thread back.
    again
        .mcp_register(vec![desc(
            json!({"name": "tickets", "command": "/opt/mcp/tickets",
            "env": ["APP_TOKEN"]}),
        )])
        .unwrap();
    assert_eq!(run(&mut again, &thread, "c3").state, TurnState::Completed);
    assert_eq!(ledger(&mcp_ledger).len(), 2);
    // The SDK registers them again on its new connection when it reconnects.
    again.reconnect().unwrap();
    assert_eq!(run(&mut again, &thread, "c4").state, TurnState::Completed);
    assert_eq!(ledger(&mcp_ledger).len(), 3);
    server.finish(&[], &[]);
}

#[test]
fn every_refusal_has_its_stable_code() {
    let scratch = tempfile::tempdir().unwrap();
    let mcp_ledger = scratch.path().join("mcp");
    let l = arg(&mcp_ledger);
    let web = json!({"name": "web", "transport": "http", "url": "http://127.0.0.1:9/mcp"});
    let providers = json!({
        "plain": agent(&["--mcp-ledger", &l], json!({"mcpEnvAllowlist": ["APP_TOKEN", "UNSET_TOKEN", "SHARED"],
            "env": {"SHARED": "agent-side"}})),
        "withfiles": agent(&["--mcp-ledger", &l], json!({"mcpServers": [
            {"name": "files", "command": "/opt/mcp/files", "env": ["FILES_TOKEN"]}]})),
        "nohttp": agent(&["--mcp-ledger", &l, "--mcp-caps", "none"], json!({"mcpServers": [web]})),
        "http": agent(&["--mcp-ledger", &l, "--mcp-caps", "http"], json!({"mcpServers": [web]})),
    });
    let server = Server::start_in(
        context_with_secrets("SHARED=controller-side\n"),
        json!({}),
        providers,
    );
    let mut c = app(&server, OWNER, "editor");
    let register =
        |c: &mut Client, v: Value| c.mcp_register(vec![desc(v)]).map(|_| ()).map_err(code);
    // At registration.
    assert_eq!(
        register(&mut c, json!({"name": "x", "command": "relative/x"})),
        Err("mcp_server_invalid".into())
    );
    assert_eq!(
        register(
            &mut c,
            json!({"name": "x", "command": "/x", "env": ["LAPIS_TOOLS_TICKET"]})
        ),
        Err("mcp_env_reserved".into())
    );
    assert_eq!(
        register(
            &mut c,
            json!({"name": "x", "command": "/x", "env": ["HOME"]})
        ),
        Err("mcp_env_reserved".into())
    );
    assert_eq!(
        register(
            &mut c,
            json!({"name": "x", "command": "/x", "args": vec!["a"; 65]})
        ),
        Err("mcp_limit_exceeded".into())
    );
    let many: Vec<McpServer> = (0..17)
        .map(|i| desc(json!({"name": format!("s{i}"), "command": "/x"})))
        .collect();
    assert_eq!(
        c.mcp_register(many).map(|_| ()).map_err(code),
        Err("mcp_limit_exceeded".into())
    );
    // The newest connection of the application takes a name over.
    register(&mut c, json!({"name": "taken", "command": "/x"})).unwrap();
    let mut second = app(&server, OWNER, "editor");
    register(&mut second, json!({"name": "taken", "command": "/y"})).unwrap();
    // At threads.create.
    assert_eq!(
        code(create(&mut c, "plain", false, &["nope"]).unwrap_err()),
        "mcp_server_unavailable"
    );
    assert_eq!(
        code(create(&mut c, "plain", true, &["taken"]).unwrap_err()),
        "mcp_restricted"
    );
    assert_eq!(
        code(create(&mut c, "withfiles", true, &[]).unwrap_err()),
        "mcp_restricted"
    );
    assert_eq!(
        code(create(&mut c, "plain", false, &["a", "a"]).unwrap_err()),
        "mcp_server_invalid"
    );
    // threads.configure cannot make a thread with MCP servers restricted.
    let open = create(&mut c, "plain", false, &["taken"]).unwrap();
    let configure = ThreadsConfigure::new(&open, 1).restricted(true);
    assert_eq!(
        code(c.threads_configure(&configure).unwrap_err()),
        "mcp_restricted"
    );
    // Before dispatch: each turn fails with its code and no session is made.
    let dispatch = [
        (
            json!({"name": "t", "command": "/x", "env": ["FILES_TOKEN"]}),
            "mcp_env_not_allowed",
        ),
        (
            json!({"name": "t", "command": "/x", "env": ["UNSET_TOKEN"]}),
            "mcp_env_unset",
        ),
        (
            json!({"name": "t", "command": "/x", "env": ["SHARED"]}),
            "mcp_env_conflict",
        ),
    ];
    for (i, (description, expected)) in dispatch.into_iter().enumerate() {
        register(&mut c, description).unwrap();
        let thread = create(&mut c, "plain", false, &["t"]).unwrap();
        let t = run(&mut c, &thread, &format!("d{i}"));
        assert_eq!(t.state, TurnState::Failed);
        assert_eq!(t.outcome.as_deref(), Some(expected));
        assert_eq!(t.dispatched_at, None);
    }
    let thread = create(&mut c, "withfiles", false, &["files"]).map_err(code);
    assert_eq!(thread.unwrap_err(), "mcp_server_unavailable");
    register(&mut c, json!({"name": "files", "command": "/x"})).unwrap();
    let dup = create(&mut c, "withfiles", false, &["files"]).unwrap();
    let t = run(&mut c, &dup, "dup");
    assert_eq!(t.outcome.as_deref(), Some("mcp_server_invalid"));
    assert!(ledger(&mcp_ledger).is_empty());
    // The agent's advertised capabilities: http only where it says so.
    let no = create(&mut c, "nohttp", false, &[]).unwrap();
    let t = run(&mut c, &no, "caps-no");
    assert_eq!(t.outcome.as_deref(), Some("mcp_transport_unsupported"));
    assert_eq!(t.dispatched_at, None);
    assert!(ledger(&mcp_ledger).is_empty());
    let yes = create(&mut c, "http", false, &[]).unwrap();
    assert_eq!(run(&mut c, &yes, "caps-yes").state, TurnState::Completed);
    assert_eq!(
        ledger(&mcp_ledger)[0]["mcpServers"],
        json!([{"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []}])
    );
    server.finish(&[], &[]);
}

#[test]
fn a_provider_naming_a_reserved_variable_is_refused_by_the_config_check() {
    let ctx = TestContext::new();
    let providers = json!({"p": {"command": "/bin/true", "mcpServers": [
        {"name": "f", "command": "/opt/f", "env": ["LAPIS_AI_CONTROLLER_WORKSPACE"]}]}});
    write_config_with(&ctx, json!({}), json!({}), providers);
    let out = ctx.output(ctx.command(["config", "validate"]));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("mcpServers") && out.stderr.contains("reserved"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_live_agent_keeps_its_session_until_an_application_server_changes() {
    let scratch = tempfile::tempdir().unwrap();
    let mcp_ledger = scratch.path().join("mcp");
    // Agents stay alive between turns (default idleSeconds).
    let provider = agent(
        &["--mcp-ledger", &arg(&mcp_ledger)],
        json!({"mcpEnvAllowlist": ["APP_TOKEN"]}),
    );
    let server = Server::start_in(
        context_with_secrets(""),
        json!({}),
        json!({ "tools": provider }),
    );
    let mut editor = app(&server, OWNER, "editor");
    let tickets = |args: &[&str]| {
        desc(json!({"name": "tickets", "command": "/opt/mcp/tickets", "args": args}))
    };
    editor.mcp_register(vec![tickets(&["-v"])]).unwrap();
    let thread = create(&mut editor, "tools", false, &["tickets"]).unwrap();
    assert_eq!(run(&mut editor, &thread, "k1").state, TurnState::Completed);
    // Same description: the live agent's session carries the next turn.
    editor.mcp_register(vec![tickets(&["-v"])]).unwrap();
    assert_eq!(run(&mut editor, &thread, "k2").state, TurnState::Completed);
    assert_eq!(ledger(&mcp_ledger).len(), 1);
    // Another description: the session is replaced, and the new one gets it.
    editor.mcp_register(vec![tickets(&["-q"])]).unwrap();
    assert_eq!(run(&mut editor, &thread, "k3").state, TurnState::Completed);
    let got = ledger(&mcp_ledger);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1]["method"], "session/new");
    assert_eq!(got[1]["mcpServers"][0]["args"], json!(["-q"]));
    server.finish(&[], &[]);
}
