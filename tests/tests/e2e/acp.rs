//! The ACP runner end to end with real agent processes: the scripted
//! fixture agent (`fixture-agent`) and the built-in `echo` agent of the CLI.
//! Shared helpers for the other `acp_*` modules live here.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapis_e2e::TestContext;
use lapis_protocol::Observation;
use lapis_service::ApprovalPolicy;
use lapis_service::acp::{
    CancelHandle, CommandLookup, HookError, Invocation, Payload, PermissionAnswer,
    PermissionRequest, ProviderSpec, RunnerLimits, TurnHooks, TurnOutcome, TurnRequest,
    cancel_channel, run_turn,
};
use serde_json::json;

/// How the recorder answers permission requests.
#[derive(Debug, Clone)]
pub(crate) enum AskMode {
    /// Answer at once with this option id.
    Answer(&'static str),
    /// Never answer.
    Never,
    /// Answer with this option id once `n` requests are pending at once.
    AnswerWhenPending(&'static str, usize),
}

/// Hooks that record everything in memory.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub events: Mutex<Vec<Payload>>,
    /// Number of events journaled when the boundary was persisted.
    pub boundary_at: Mutex<Option<usize>>,
    pub fail_boundary: bool,
    pub ask: AskMode,
    pub asked: Mutex<Vec<PermissionRequest>>,
    pub pending_now: AtomicUsize,
    pending_notify: tokio::sync::Notify,
    /// Cancel the turn when a matching event is journaled, or when `ask`
    /// is called.
    pub cancel_on: Option<(CancelHandle, CancelOn)>,
}

impl Recorder {
    pub(crate) fn new(ask: AskMode) -> Recorder {
        Recorder {
            events: Mutex::new(Vec::new()),
            boundary_at: Mutex::new(None),
            fail_boundary: false,
            ask,
            asked: Mutex::new(Vec::new()),
            pending_now: AtomicUsize::new(0),
            pending_notify: tokio::sync::Notify::new(),
            cancel_on: None,
        }
    }

    pub(crate) fn events(&self) -> Vec<Payload> {
        self.events.lock().unwrap().clone()
    }

    /// The concatenated text of all message events.
    pub(crate) fn reply(&self) -> String {
        self.events()
            .iter()
            .filter_map(|e| match e {
                Payload::MessageChunk(c) => c.text.clone(),
                _ => None,
            })
            .collect()
    }

    /// The events that match.
    pub(crate) fn count(&self, matching: impl Fn(&Payload) -> bool) -> usize {
        self.events().iter().filter(|e| matching(e)).count()
    }

    pub(crate) fn dispatched(&self) -> bool {
        self.boundary_at.lock().unwrap().is_some()
    }

    fn maybe_cancel(&self, event: Option<&Payload>) {
        let Some((handle, on)) = &self.cancel_on else {
            return;
        };
        let hit = match (on, event) {
            (CancelOn::Ask, None) => true,
            (CancelOn::Event(matches), Some(e)) => matches(e),
            _ => false,
        };
        if hit {
            handle.cancel();
        }
    }
}

/// The prompt's answer was journaled.
pub(crate) fn stopped(e: &Payload) -> bool {
    matches!(e, Payload::Observation(Observation::Stopped { .. }))
}

/// The controller's `session/cancel` was journaled.
pub(crate) fn cancel_sent(e: &Payload) -> bool {
    matches!(e, Payload::Observation(Observation::CancelSent))
}

/// A reply chunk.
pub(crate) fn message(e: &Payload) -> bool {
    matches!(e, Payload::MessageChunk(_))
}

/// When a [`Recorder`] cancels its turn.
#[derive(Debug)]
pub(crate) enum CancelOn {
    /// When `ask` is called.
    Ask,
    /// When a matching event is journaled.
    Event(fn(&Payload) -> bool),
}

impl TurnHooks for Recorder {
    async fn before_dispatch(&self, _session_id: &str) -> Result<(), HookError> {
        if self.fail_boundary {
            return Err(HookError("store unavailable".into()));
        }
        *self.boundary_at.lock().unwrap() = Some(self.events.lock().unwrap().len());
        Ok(())
    }

    async fn event(&self, event: Payload) -> Result<(), HookError> {
        self.maybe_cancel(Some(&event));
        self.events.lock().unwrap().push(event);
        Ok(())
    }

    async fn ask(&self, request: PermissionRequest) -> PermissionAnswer {
        self.asked.lock().unwrap().push(request);
        self.maybe_cancel(None);
        match &self.ask {
            AskMode::Answer(id) => PermissionAnswer::Selected {
                option_id: id.to_string(),
            },
            AskMode::Never => std::future::pending().await,
            AskMode::AnswerWhenPending(id, n) => {
                self.pending_now.fetch_add(1, Ordering::SeqCst);
                self.pending_notify.notify_waiters();
                while self.pending_now.load(Ordering::SeqCst) < *n {
                    let notified = self.pending_notify.notified();
                    if self.pending_now.load(Ordering::SeqCst) >= *n {
                        break;
                    }
                    notified.await;
                }
                PermissionAnswer::Selected {
                    option_id: id.to_string(),
                }
            }
        }
    }
}

/// A spec for the fixture agent with these arguments.
pub(crate) fn fixture(args: &[&str]) -> ProviderSpec {
    ProviderSpec::from_json(
        "fixture",
        &json!({"command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args}),
    )
    .expect("fixture spec")
}

/// Limits short enough for tests (none is asserted as a duration).
pub(crate) fn test_limits() -> RunnerLimits {
    RunnerLimits {
        setup_timeout: Duration::from_secs(20),
        cancel_timeout: Duration::from_secs(20),
        permission_timeout: Duration::from_secs(20),
        ..RunnerLimits::default()
    }
}

pub(crate) fn request(spec: ProviderSpec, workspace: &Path) -> TurnRequest {
    TurnRequest {
        spec,
        workspace: workspace.to_path_buf(),
        prompt: "please echo this prompt".into(),
        approval: ApprovalPolicy::Ask,
        restricted: false,
        limits: test_limits(),
        lookup: CommandLookup::from_env(),
        registry: None,
        resume: None,
        keep_alive: false,
        continuation: None,
        context: Vec::new(),
        mcp: Vec::new(),
    }
}

/// Runs one turn with fresh hooks; returns the outcome and the recorder.
pub(crate) async fn run_with(
    request: TurnRequest,
    make: impl FnOnce(CancelHandle) -> Recorder,
) -> (TurnOutcome, Arc<Recorder>) {
    let (handle, signal) = cancel_channel();
    let hooks = Arc::new(make(handle));
    let outcome = run_turn(request, hooks.clone(), signal).await;
    (outcome, hooks)
}

pub(crate) async fn run_fixture(args: &[&str]) -> (TurnOutcome, Arc<Recorder>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (outcome, hooks) = run_with(request(fixture(args), dir.path()), |_| {
        Recorder::new(AskMode::Never)
    })
    .await;
    (outcome, hooks, dir)
}

pub(crate) fn completed() -> TurnOutcome {
    TurnOutcome::Completed {
        stop_reason: "end_turn".into(),
    }
}

fn invocation(events: &[Payload], id: &str) -> Vec<Invocation> {
    events
        .iter()
        .filter_map(|e| match e {
            Payload::ToolCall(i) if i.id == id => Some(i.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_echo_agent_runs_a_turn_through_the_cli_binary() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProviderSpec::builtin_echo(TestContext::bin());
    let (outcome, hooks) =
        run_with(request(spec, dir.path()), |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "please echo this prompt");
    assert_eq!(hooks.count(|e| matches!(e, Payload::ThoughtChunk(_))), 1);
    assert!(hooks.count(message) >= 2, "echo streams several chunks");
    assert_eq!(hooks.count(stopped), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_map_to_messages_reasoning_invocations_and_observations() {
    let (outcome, hooks, _dir) = run_fixture(&[
        "--chunks",
        "5",
        "--thoughts",
        "2",
        "--tool-calls",
        "2",
        "--plan",
        "--message-id",
    ])
    .await;
    assert_eq!(outcome, completed());
    let events = hooks.events();
    assert_eq!(hooks.reply(), "chunk0 chunk1 chunk2 chunk3 chunk4 ");
    assert_eq!(hooks.count(|e| matches!(e, Payload::ThoughtChunk(_))), 2);
    // Reasoning never leaks into the reply.
    assert!(!hooks.reply().contains("thought"));
    let ids: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Payload::MessageChunk(c) => Some(c.message_id.clone()),
            _ => None,
        })
        .collect();
    assert!(
        ids.iter().all(|id| id.as_deref() == Some("msg-1")),
        "{ids:?}"
    );
    let tool = invocation(&events, "tool-1");
    assert_eq!(
        tool.len(),
        2,
        "a durable pair: the start and the merged finish"
    );
    assert_eq!(tool[0].status.as_deref(), Some("pending"));
    let last = tool.last().unwrap();
    assert_eq!(last.title.as_deref(), Some("Edit file 1"));
    assert_eq!(last.kind.as_deref(), Some("edit"));
    assert_eq!(last.status.as_deref(), Some("completed"));
    assert_eq!(last.locations.len(), 1);
    assert_eq!(last.locations[0].path, "/w/f1.rs");
    assert!(events.iter().any(
        |e| matches!(e, Payload::Observation(Observation::Noted { kind, .. }) if kind == "plan")
    ));
    // Order: session start, then (after the boundary) activity, then the
    // completion marker last.
    let boundary = hooks
        .boundary_at
        .lock()
        .unwrap()
        .expect("boundary persisted");
    assert!(matches!(
        events[0],
        Payload::Observation(Observation::SessionStarted { .. })
    ));
    assert_eq!(boundary, 1);
    assert!(
        matches!(events.last(), Some(Payload::Observation(Observation::Stopped { stop_reason, .. })) if stop_reason == "end_turn")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_update_before_the_response_is_journaled_in_order() {
    let (outcome, hooks, _dir) = run_fixture(&["--chunks", "3000"]).await;
    assert_eq!(outcome, completed());
    let want: String = (0..3000).map(|i| format!("chunk{i} ")).collect();
    assert_eq!(hooks.reply(), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_after_the_response_are_late_observations() {
    let (outcome, hooks, _dir) = run_fixture(&["--chunks", "2", "--after-response", "3"]).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "chunk0 chunk1 ");
    assert_eq!(
        hooks.count(|e| { matches!(e, Payload::Observation(Observation::LateUpdate { .. })) }),
        3
    );
    let events = hooks.events();
    let end = events.iter().position(stopped).unwrap();
    assert!(
        events[end + 1..]
            .iter()
            .all(|e| matches!(e, Payload::Observation(Observation::LateUpdate { .. })))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_rebuilt_from_the_allowlist_and_cwd_is_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProviderSpec::from_json(
        "fixture",
        &json!({
            "command": env!("CARGO_BIN_EXE_fixture-agent"),
            "args": ["--report-env"],
            "env": {"CONST_SETTING": "on"},
            "envAllowlist": ["HOME", "LAPIS_TEST_SURELY_UNSET_VAR"],
            "vcsIdentity": {"name": "Lapis Agent", "email": "agent@lapis.invalid"}
        }),
    )
    .unwrap();
    let (outcome, hooks) =
        run_with(request(spec, dir.path()), |_| Recorder::new(AskMode::Never)).await;
    assert_eq!(outcome, completed());
    let lines: Vec<String> = hooks
        .events()
        .iter()
        .filter_map(|e| match e {
            Payload::MessageChunk(c) => c.text.clone(),
            _ => None,
        })
        .collect();
    let home = std::env::var("HOME").unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let want = vec![
        "CONST_SETTING=on".to_string(),
        "GIT_AUTHOR_EMAIL=agent@lapis.invalid".into(),
        "GIT_AUTHOR_NAME=Lapis Agent".into(),
        "GIT_COMMITTER_EMAIL=agent@lapis.invalid".into(),
        "GIT_COMMITTER_NAME=Lapis Agent".into(),
        format!("HOME={home}"),
        format!("cwd={}", cwd.display()),
    ];
    assert_eq!(lines, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_records_each_prompt_once() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let ledger_arg = ledger.to_str().unwrap();
    for _ in 0..2 {
        let (outcome, _) = run_with(
            request(fixture(&["--ledger", ledger_arg]), dir.path()),
            |_| Recorder::new(AskMode::Never),
        )
        .await;
        assert_eq!(outcome, completed());
    }
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["please echo this prompt"; 2]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_stderr_is_drained_and_bounded() {
    // 20,000 lines is far past a pipe buffer: if stderr were not drained the
    // agent would block and the turn would never finish.
    let (outcome, hooks, _dir) = run_fixture(&["--stderr", "20000", "--chunks", "1"]).await;
    assert_eq!(outcome, completed());
    assert_eq!(hooks.reply(), "chunk0 ");
}

/// The path of a temp file, as an argument string.
pub(crate) fn arg(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// Whether `pid` is still a live (non-zombie) process.
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Reads a pid file written by the fixture's grandchild.
pub(crate) fn read_pid(path: &PathBuf) -> u32 {
    std::fs::read_to_string(path)
        .expect("grandchild pid file")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_hidden_acp_echo_subcommand_serves_acp_on_stdio() {
    use std::io::Write;
    let ctx = TestContext::new();
    let mut cmd = ctx.command(["acp-echo"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for msg in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": "echo-1", "prompt": [{"type": "text", "text": "abc"}]}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["result"]["protocolVersion"], 1);
    assert_eq!(lines.last().unwrap()["result"]["stopReason"], "end_turn");
    let text: String = lines
        .iter()
        .filter(|l| l["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|l| {
            l["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(text, "abc");
}

#[test]
fn the_install_smoke_turn_passes_on_the_built_binary_and_fails_on_a_fake() {
    let timeout = Duration::from_secs(30);
    lapis_service::acp::echo_smoke_turn(&TestContext::bin(), timeout).unwrap();
    // A binary that starts but serves no ACP fails with a protocol error.
    let err = lapis_service::acp::echo_smoke_turn(Path::new("/bin/true"), timeout).unwrap_err();
    assert!(
        matches!(err, lapis_service::acp::SmokeTurnError::Protocol(_)),
        "{err}"
    );
    let err =
        lapis_service::acp::echo_smoke_turn(Path::new("/nonexistent/bin"), timeout).unwrap_err();
    assert!(
        matches!(err, lapis_service::acp::SmokeTurnError::Spawn { .. }),
        "{err}"
    );
}
