//! Ports of a managed controller (`serve --stdio`, the SDK's
//! `ManagedController`) against the real binary: its agents reach the
//! application's tools and memory through the controller's MCP bridge,
//! which connects back to the managed home's private bridge socket with
//! its ticket, and every callback reaches the application on its one
//! connection (stdin/stdout). The socket is for tickets only, is removed
//! when the controller stops, and one left by a killed controller is
//! replaced by the next.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use lapis_e2e::TestContext;
use lapis_e2e::wait::{PATIENCE, until};
use lapis_protocol::client::{
    Client, Credential, ManagedController, ManagedError, ManagedOptions, PortHandlers,
};
use lapis_protocol::home::BRIDGE_SOCKET_FILE;
use lapis_protocol::memory::{AccessEnvelope, MemoryRegister};
use lapis_protocol::params::ThreadsCreate;
use lapis_protocol::{Payload, Turn, TurnState};
use serde_json::json;

use crate::acp::arg;
use crate::managed::{children, gone};
use crate::memory::{Notes, Seen as MemorySeen};
use crate::serve_support::{OWNER, write_config_with};
use crate::tools::{Crm, Seen as ToolsSeen, crm, reply, tickets};

/// The prompt: a recall at preparation (the prompt itself), then the
/// agent's tool listing, a mutating tool call and a memory search.
const PROMPT: &str = "what does Ada drink?\nlist\ncall crm__update {\"id\":7}\n\
    call memory_search {\"query\":\"tea\"}";

/// A temp HOME with a config (workspace `proj`, provider `tooled`: the
/// fixture agent with its MCP client), the agent's ledgers outside HOME
/// (they hold the bridge's tickets), and the managed home.
struct Setup {
    ctx: TestContext,
    config: PathBuf,
    home: PathBuf,
    log: PathBuf,
    /// The agent's `mcpServers` per session (with the tickets).
    mcp: PathBuf,
    /// The prompt blocks the agent was given.
    seen: PathBuf,
    _scratch: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let ctx = TestContext::new();
        let scratch = tempfile::tempdir().unwrap();
        let (mcp, seen) = (scratch.path().join("mcp"), scratch.path().join("seen"));
        let project = ctx.home().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let agent = json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"),
            "args": ["--mcp-tools", "--mcp-ledger", arg(&mcp),
                     "--embedded-context", "--ledger", arg(&seen)] });
        let config = write_config_with(
            &ctx,
            json!({}),
            json!({ "proj": { "path": project } }),
            json!({ "tooled": agent }),
        );
        Setup {
            home: ctx.home().join(".lapis/ai-controller"),
            log: ctx.home().join("managed.log"),
            config,
            mcp,
            seen,
            ctx,
            _scratch: scratch,
        }
    }

    fn start(&self) -> ManagedController {
        ManagedController::start(self.options(&self.home)).unwrap()
    }

    /// The options that start the built binary with controller home `home`.
    fn options(&self, home: &Path) -> ManagedOptions {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let credential = Credential::Token {
            token: OWNER.to_owned(),
            application: "embedder".to_owned(),
        };
        ManagedOptions::new(home, credential)
            .executable(TestContext::bin().to_str().unwrap())
            .config(&self.config)
            .inherit("PATH")
            .env("HOME", self.ctx.home())
            .stderr(log)
    }

    fn socket(&self) -> PathBuf {
        self.home.join(BRIDGE_SOCKET_FILE)
    }

    /// No token and no ticket in the log or anywhere under HOME.
    fn finish(self) {
        self.ctx
            .capture(&std::fs::read_to_string(&self.log).unwrap_or_default());
        self.ctx.assert_no_secret(OWNER, &[&self.config]);
        for ticket in tickets(&self.mcp) {
            self.ctx.assert_no_secret(&ticket, &[]);
        }
    }
}

/// Registers `crm` and the memory port `mem` on the managed connection
/// (again after a restart: ports live as long as their connection).
fn register_ports(client: &mut Client) {
    client.tools_register(crm()).unwrap();
    client
        .memory_register(MemoryRegister {
            port: "mem".into(),
            deadline_ms: None,
        })
        .unwrap();
}

/// [`register_ports`], then a thread binding both.
fn bind_ports(client: &mut Client) -> String {
    register_ports(client);
    let params = ThreadsCreate::new("proj", "tooled")
        .tools(["crm"])
        .memory("mem");
    client.threads_create_with(&params).unwrap().thread.id
}

/// Submits [`PROMPT`] on `thread` and serves both ports on the one
/// connection until the turn settles: the turn, and what the tool endpoint
/// and the memory port were asked.
fn run_turn(client: &mut Client, thread: &str, command: &str) -> (Turn, ToolsSeen, MemorySeen) {
    let turn = client.turns_submit(thread, command, PROMPT).unwrap();
    let (mut endpoint, mut notes) = (Crm(Default::default()), Notes(Default::default()));
    let seen = (endpoint.0.clone(), notes.0.clone());
    let mut ports = PortHandlers::new().tools(&mut endpoint).memory(&mut notes);
    let turn = client
        .serve_until_settled(&mut ports, &turn.id, Some(PATIENCE))
        .unwrap();
    (turn, seen.0, seen.1)
}

fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_managed_controllers_agent_calls_its_tools_and_searches_its_memory_through_the_bridge() {
    let setup = Setup::new();
    let mut managed = setup.start();
    // Bound before readiness: private to the owner, in the 0700 home.
    let socket = setup.socket();
    assert!(is_socket(&socket), "{} is a socket", socket.display());
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(&setup.home), 0o700);
    let client = managed.client();
    let thread = bind_ports(client);
    // Every callback (recall, capture, invoke, search) arrives on the one
    // managed connection, each answered by its kind's handler.
    let (turn, invoked, searched) = run_turn(client, &thread, "c1");
    assert_eq!(turn.state, TurnState::Completed, "{turn:?}");
    // The tool ran once, inside its capture, and its result reached the
    // agent; so did the memory search's hits.
    let invoked = invoked.lock().unwrap().clone();
    assert_eq!(invoked.len(), 3, "{invoked:?}");
    assert_eq!(invoked[0], "begin update");
    assert!(invoked[1].starts_with("invoke update turn_"), "{invoked:?}");
    assert_eq!(invoked[2], "finish update");
    let text = reply(client, &thread);
    assert!(
        text.contains(
            "tools: memory_search, memory_read, crm__find, crm__update, crm__broken, crm__slow, crm__huge"
        ),
        "{text}"
    );
    assert!(
        text.contains("tool crm__update: update ok {\"id\":7}"),
        "{text}"
    );
    assert!(
        text.contains("tool memory_search: [m1] Ada prefers tea\n[m3] Ada lives in Lyon"),
        "{text}"
    );
    // The recall at preparation came before the prompt.
    let blocks = std::fs::read_to_string(&setup.seen).unwrap();
    let first = blocks.lines().next().unwrap();
    assert!(first.contains("- [m1] Ada prefers tea"), "{first}");
    assert!(!first.contains("REDACTED"), "{first}");
    // Both recalls under the controller's envelope, journaled as such.
    let want = AccessEnvelope {
        principal: "owner".into(),
        application: "embedder".into(),
        thread_id: thread.clone(),
        workspace_id: "proj".into(),
    };
    let searched = searched.lock().unwrap().clone();
    let queries: Vec<&str> = searched.iter().map(|(_, q)| q.as_str()).collect();
    assert_eq!(queries, [PROMPT, "tea"]);
    assert!(searched.iter().all(|(e, _)| *e == want), "{searched:?}");
    let page = client.journal_replay(Some(&thread), 0, None).unwrap();
    let recalls = page
        .events
        .iter()
        .filter(|e| matches!(e.body(), Some(Payload::MemoryRecalled(_))))
        .count();
    assert_eq!(recalls, 2);

    // The socket is the bridge's only: a token is refused before it is
    // compared; the agent session's ticket is served.
    let mut raw = Client::connect(&socket).unwrap();
    let err = raw
        .hello(Credential::Token {
            token: OWNER.to_owned(),
            application: "intruder".to_owned(),
        })
        .unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
    assert!(err.to_string().contains("stdin/stdout"), "{err}");
    let ticket = tickets(&setup.mcp).pop().expect("a ticket");
    let mut bridge = Client::connect(&socket).unwrap();
    bridge.hello_ticket(&ticket).unwrap();
    let listed = bridge
        .request::<lapis_protocol::call::ToolsList>(&lapis_protocol::params::NoParams {})
        .unwrap();
    assert!(listed.tools.iter().any(|t| t.name == "crm__update"));
    drop((raw, bridge));

    // A graceful stop removes the socket.
    assert_eq!(managed.stop().unwrap().code(), Some(0));
    assert!(!socket.exists(), "the bridge socket is removed at exit");
    setup.finish();
}

#[test]
fn a_port_the_application_does_not_serve_fails_the_turn_with_its_code() {
    let setup = Setup::new();
    let mut managed = setup.start();
    let client = managed.client();
    let thread = bind_ports(client);
    let turn = client.turns_submit(&thread, "c1", PROMPT).unwrap();
    // Tools only: the recall at preparation is refused at once, naming the
    // missing kind, and the turn fails before its agent sees the prompt.
    let mut endpoint = Crm(Default::default());
    let invoked = endpoint.0.clone();
    let mut ports = PortHandlers::new().tools(&mut endpoint);
    let turn = client
        .serve_until_settled(&mut ports, &turn.id, Some(PATIENCE))
        .unwrap();
    assert_eq!(turn.state, TurnState::Failed, "{turn:?}");
    assert_eq!(turn.outcome.as_deref(), Some("context_unavailable"));
    assert!(invoked.lock().unwrap().is_empty());
    assert!(!setup.seen.exists(), "the agent never saw a prompt");
    drop(managed);
    setup.finish();
}

#[test]
fn a_killed_managed_controller_leaves_no_agent_and_its_stale_socket_is_replaced() {
    let setup = Setup::new();
    let mut managed = setup.start();
    let pid = managed.pid();
    let client = managed.client();
    let thread = bind_ports(client);
    let (done, _, _) = run_turn(client, &thread, "c1");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    let agents = children(pid);
    assert!(!agents.is_empty(), "the agent is kept between turns");
    // SIGKILL: the controller removes nothing itself.
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    until("the controller to die", || gone(pid));
    assert!(
        is_socket(&setup.socket()),
        "a killed controller's socket stays"
    );
    // Its agent (and the agent's bridge) end with the connection they lost.
    for agent in agents {
        until("the killed controller's agent to exit", || gone(agent));
    }
    drop(managed);
    // The next controller replaces the stale socket; its agents reach the
    // ports through it.
    let mut again = setup.start();
    let client = again.client();
    register_ports(client);
    let (done, _, _) = run_turn(client, &thread, "c2");
    assert_eq!(done.state, TurnState::Completed, "{done:?}");
    assert_eq!(
        reply(client, &thread)
            .matches("tool crm__update: update ok")
            .count(),
        2
    );
    let log = std::fs::read_to_string(&setup.log).unwrap();
    assert!(log.contains("replaced a stale socket"), "{log}");
    assert_eq!(again.stop().unwrap().code(), Some(0));
    assert!(!setup.socket().exists());
    setup.finish();
}

#[test]
fn a_home_whose_bridge_socket_cannot_be_bound_fails_the_start_naming_it() {
    let setup = Setup::new();
    // Too long for a Unix socket address (108 bytes on Linux, 104 on
    // macOS), though fine for the database.
    let home = setup.ctx.home().join("h".repeat(120));
    let err = ManagedController::start(setup.options(&home)).unwrap_err();
    assert!(matches!(err, ManagedError::Startup { .. }), "{err:?}");
    assert_eq!(err.code(), "listen_failed", "{err:?}");
    let text = err.to_string();
    assert!(text.contains(BRIDGE_SOCKET_FILE), "{text}");
    setup.ctx.capture(&format!("{err} / {err:?}"));
    setup.finish();
}
