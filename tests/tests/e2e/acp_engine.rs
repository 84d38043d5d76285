//! The engine end to end: a real store in a temp controller home, real agent
//! processes (the CLI's `echo` and the scripted fixture), turns submitted
//! through the store and driven by the engine to their journaled outcomes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lapis_e2e::TestContext;
use lapis_service::acp::PermissionAnswer;
use lapis_service::engine::{Engine, EngineConfig, EngineHandle};
use lapis_service::{
    Actor, ApprovalPolicy, EventKind, JournalEvent, NewThread, ReplayScope, ResolveAs, Retention,
    Store, StoreOptions, SubmitTurn, Turn, TurnState,
};

use crate::acp::{alive, arg, fixture, read_pid, test_limits};

pub(crate) struct Rig {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub engine: Engine,
    pub handle: Option<EngineHandle>,
}

pub(crate) fn owner() -> Actor {
    Actor::new("owner", "e2e")
}

impl Rig {
    /// A store plus an engine with `echo` and the given fixture providers.
    pub(crate) fn start(providers: &[(&str, Vec<String>)], grace: Duration) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(StoreOptions::new(dir.path().join("home"))).unwrap();
        let mut specs = BTreeMap::new();
        for (name, args) in providers {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut spec = fixture(&args);
            spec.name = name.to_string();
            specs.insert(name.to_string(), spec);
        }
        let mut config = EngineConfig::new(specs).with_builtin_echo(TestContext::bin());
        config.limits = test_limits();
        config.shutdown_grace = grace;
        let engine = Engine::new(store.clone(), config);
        let handle = Some(engine.start());
        Rig {
            dir,
            store,
            engine,
            handle,
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) async fn thread(
        &self,
        ws: &str,
        provider: &str,
        approval: ApprovalPolicy,
    ) -> String {
        let path = self.path(ws);
        if !path.exists() {
            std::fs::create_dir_all(&path).unwrap();
            self.store.add_workspace(ws, &path).await.unwrap();
        }
        let input = NewThread {
            command_id: None,
            workspace_id: ws.into(),
            provider: provider.into(),
            approval,
            restricted: false,
            retention: Retention::Full,
            mcp_servers: Vec::new(),
            ports: Default::default(),
            thread_id: None,
            permission_timeout_seconds: None,
            budget: None,
        };
        self.store
            .create_thread(&owner(), input)
            .await
            .unwrap()
            .value
            .id
    }

    pub(crate) async fn submit(&self, thread: &str, cmd: &str, prompt: &str) -> String {
        let input = SubmitTurn {
            command_id: cmd.into(),
            thread_id: thread.into(),
            prompt: prompt.into(),
            continues: None,
            max_turn_seconds: None,
        };
        self.store
            .submit_turn(&owner(), input)
            .await
            .unwrap()
            .value
            .id
    }

    /// Polls until the turn satisfies `done` (bounded so a bug fails rather
    /// than hangs; nothing here measures time).
    pub(crate) async fn wait(&self, turn: &str, done: impl Fn(&Turn) -> bool) -> Turn {
        for _ in 0..6000 {
            let t = self.store.get_turn(turn).await.unwrap();
            if done(&t) {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("turn {turn} never reached the expected state");
    }

    pub(crate) async fn settled(&self, turn: &str) -> Turn {
        self.wait(turn, |t| t.state.is_terminal() || t.state.is_fenced())
            .await
    }

    pub(crate) async fn journal(&self, thread: &str) -> Vec<JournalEvent> {
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .store
                .replay(ReplayScope::Thread(thread.into()), after, 0)
                .await
                .unwrap();
            out.extend(page.events);
            after = page.next_after;
            if !page.more {
                return out;
            }
        }
    }

    pub(crate) async fn reply(&self, thread: &str, turn: &str) -> String {
        self.journal(thread)
            .await
            .iter()
            .filter(|e| e.turn_id.as_deref() == Some(turn))
            .filter_map(lapis_e2e::journal::reply_text)
            .collect()
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn ledger_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echo_turn_runs_and_is_journaled_in_order() {
    let rig = Rig::start(&[], Duration::from_secs(5));
    let thread = rig.thread("ws1", "echo", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "c1", "hello from the engine").await;
    let done = rig.settled(&turn).await;
    assert_eq!(done.state, TurnState::Completed);
    assert_eq!(done.outcome.as_deref(), Some("end_turn"));
    assert!(done.dispatched_at.is_some() && done.started_at.is_some());
    assert_eq!(rig.reply(&thread, &turn).await, "hello from the engine");
    let journal = rig.journal(&thread).await;
    let states: Vec<TurnState> = journal
        .iter()
        .filter_map(lapis_e2e::journal::moved_to)
        .collect();
    assert_eq!(
        states,
        [
            TurnState::Preparing,
            TurnState::Dispatched,
            TurnState::Running,
            TurnState::Completed
        ]
    );
    let dispatched = journal
        .iter()
        .position(|e| lapis_e2e::journal::moved_to(e) == Some(TurnState::Dispatched))
        .unwrap();
    let first_chunk = journal
        .iter()
        .position(|e| e.kind == EventKind::MessageChunk)
        .unwrap();
    assert!(
        dispatched < first_chunk,
        "the boundary precedes agent output"
    );
    assert_eq!(
        journal
            .iter()
            .filter(|e| e.kind == EventKind::ThoughtChunk)
            .count(),
        1
    );
    rig.handle.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_outcome_fences_the_workspace_and_is_never_redispatched() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger");
    let rig = Rig::start(
        &[
            (
                "dies",
                args(&["--ledger", &arg(&ledger), "--exit-at", "prompt"]),
            ),
            ("ok", args(&["--ledger", &arg(&ledger), "--chunks", "1"])),
        ],
        Duration::from_secs(5),
    );
    let dies = rig.thread("ws", "dies", ApprovalPolicy::Ask).await;
    let ok = rig.thread("ws", "ok", ApprovalPolicy::Ask).await;
    let lost = rig.submit(&dies, "c1", "first prompt").await;
    let lost_turn = rig.settled(&lost).await;
    assert_eq!(lost_turn.state, TurnState::SubmissionUnknown);
    assert_eq!(lost_turn.outcome.as_deref(), Some("agent_exited"));
    assert!(
        rig.store
            .status()
            .fenced_workspaces
            .contains(&"ws".to_string())
    );
    // The fence refuses new work until the owner resolves the lost turn.
    let refused = rig
        .store
        .submit_turn(
            &owner(),
            SubmitTurn {
                command_id: "c2".into(),
                thread_id: ok.clone(),
                prompt: "second prompt".into(),
                continues: None,
                max_turn_seconds: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "workspace_fenced");
    rig.store
        .resolve_turn(&owner(), &lost, ResolveAs::Failed, true, None)
        .await
        .map(|r| r.value)
        .unwrap();
    let next = rig.submit(&ok, "c3", "second prompt").await;
    assert_eq!(rig.settled(&next).await.state, TurnState::Completed);
    assert_eq!(ledger_lines(&ledger), ["first prompt", "second prompt"]);
    rig.handle.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_failures_fail_the_turn_and_the_queue_moves_on() {
    let rig = Rig::start(
        &[("noauth", args(&["--auth-required"]))],
        Duration::from_secs(5),
    );
    let bad = rig.thread("ws", "noauth", ApprovalPolicy::Ask).await;
    let good = rig.thread("ws", "echo", ApprovalPolicy::Ask).await;
    let t1 = rig.submit(&bad, "c1", "x").await;
    let t2 = rig.submit(&good, "c2", "y").await;
    let t1 = rig.settled(&t1).await;
    assert_eq!(t1.state, TurnState::Failed);
    assert_eq!(t1.outcome.as_deref(), Some("auth_required"));
    assert!(t1.dispatched_at.is_none());
    assert_eq!(rig.settled(&t2).await.state, TurnState::Completed);
    assert!(rig.store.status().fenced_workspaces.is_empty());
    rig.handle.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_are_answered_through_the_engine_with_offered_ids_only() {
    let rig = Rig::start(
        &[("perm", args(&["--permissions", "1"]))],
        Duration::from_secs(5),
    );
    let thread = rig.thread("ws", "perm", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "c1", "guarded").await;
    let mut pending = Vec::new();
    for _ in 0..6000 {
        pending = rig.engine.pending_permissions(Some(&turn));
        if !pending.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].thread_id, thread);
    let request = pending[0].request_id.clone();
    let refused = rig
        .engine
        .respond_permission(
            &turn,
            &request,
            PermissionAnswer::Selected {
                option_id: "allow".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused.error_code(),
        lapis_protocol::ErrorCode::InvalidRequest
    );
    rig.engine
        .respond_permission(
            &turn,
            &request,
            PermissionAnswer::Selected {
                option_id: "opt-allow_once".into(),
            },
        )
        .await
        .unwrap();
    let done = rig.settled(&turn).await;
    assert_eq!(done.state, TurnState::Completed);
    assert_eq!(rig.reply(&thread, &turn).await, "perm-0=opt-allow_once");
    // A late answer changes nothing and is journaled as an observation.
    let late = rig
        .engine
        .respond_permission(&turn, &request, PermissionAnswer::Cancelled)
        .await
        .unwrap_err();
    assert_eq!(late.error_code(), lapis_protocol::ErrorCode::Conflict);
    rig.store.flush().await.unwrap();
    assert_eq!(
        rig.store.get_turn(&turn).await.unwrap().state,
        TurnState::Completed
    );
    let journal = rig.journal(&thread).await;
    let kinds: Vec<EventKind> = journal.iter().map(|e| e.kind).collect();
    assert!(kinds.contains(&EventKind::PermissionRequested));
    assert!(kinds.contains(&EventKind::PermissionDecided));
    assert_eq!(*kinds.last().unwrap(), EventKind::Observation);
    rig.handle.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_through_the_store_reaches_the_agent() {
    let rig = Rig::start(
        &[("hang", args(&["--chunks", "1", "--hang"]))],
        Duration::from_secs(5),
    );
    let thread = rig.thread("ws", "hang", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "c1", "wait").await;
    rig.wait(&turn, |t| t.state == TurnState::Running).await;
    rig.store.request_cancel(&owner(), &turn).await.unwrap();
    let done = rig.settled(&turn).await;
    assert_eq!(done.state, TurnState::Cancelled);
    assert!(rig.store.status().fenced_workspaces.is_empty());
    rig.handle.unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_running_agents_and_settles_their_turns() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("gc.pid");
    let rig = Rig::start(
        &[(
            "hang",
            args(&["--chunks", "1", "--hang", "--grandchild", &arg(&pidfile)]),
        )],
        Duration::from_millis(200),
    );
    let thread = rig.thread("ws", "hang", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "c1", "wait").await;
    rig.wait(&turn, |t| t.state == TurnState::Running).await;
    let mut rig = rig;
    rig.handle.take().unwrap().shutdown().await;
    let done = rig.store.get_turn(&turn).await.unwrap();
    assert_eq!(done.state, TurnState::SubmissionUnknown);
    assert_eq!(
        done.outcome_code(),
        Some(lapis_protocol::OutcomeCode::ControllerShutdown)
    );
    let gc = read_pid(&pidfile);
    for _ in 0..400 {
        if !alive(gc) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!alive(gc), "grandchild survived shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_records_exist_only_while_agents_run() {
    let rig = Rig::start(
        &[("hang", args(&["--chunks", "1", "--hang"]))],
        Duration::from_secs(5),
    );
    let agents = rig.dir.path().join("home/agents");
    let thread = rig.thread("ws", "hang", ApprovalPolicy::Ask).await;
    let turn = rig.submit(&thread, "c1", "wait").await;
    rig.wait(&turn, |t| t.state == TurnState::Running).await;
    assert_eq!(std::fs::read_dir(&agents).unwrap().count(), 1);
    rig.store.request_cancel(&owner(), &turn).await.unwrap();
    rig.settled(&turn).await;
    // The agent confirmed the cancel, so it is kept for the thread's next
    // turn: alive, and so still recorded.
    assert_eq!(std::fs::read_dir(&agents).unwrap().count(), 1);
    // Shutdown retires it, and with it the record.
    rig.handle.unwrap().shutdown().await;
    assert_eq!(std::fs::read_dir(&agents).unwrap().count(), 0);
}
