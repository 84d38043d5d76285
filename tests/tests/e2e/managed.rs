//! The SDK's managed controller (`ManagedController`) against the real
//! binary: readiness, the build identity check, where the credential goes
//! (and never goes), start failures with their cause, stdin kept open,
//! graceful stop, and the child's end when its parent is killed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use lapis_e2e::TestContext;
use lapis_e2e::wait::{eventually, until, wait_turn};
use lapis_protocol::ApprovalPolicy;
use lapis_protocol::client::{Credential, ManagedController, ManagedError, ManagedOptions};
use lapis_protocol::config::CommandLookup;
use serde_json::json;

use crate::serve_support::{OWNER, write_config};

/// A temp HOME with a config (workspace `proj`) and the options that start
/// the built binary in it; the child's log goes to `managed.log`.
struct Setup {
    ctx: TestContext,
    config: PathBuf,
    home: PathBuf,
    log: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let ctx = TestContext::new();
        let project = ctx.home().join("project");
        std::fs::create_dir_all(&project).unwrap();
        let config = write_config(&ctx, json!({}), json!({ "proj": { "path": project } }));
        Setup {
            home: ctx.home().join(".lapis/ai-controller"),
            log: ctx.home().join("managed.log"),
            config,
            ctx,
        }
    }

    fn options(&self, token: &str) -> ManagedOptions {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        ManagedOptions::new(&self.home, credential(token))
            .executable(TestContext::bin().to_str().unwrap())
            .config(&self.config)
            .inherit("PATH")
            .env("HOME", self.ctx.home())
            .stderr(log)
    }

    /// Captures the child's log for the leak check and checks it.
    fn finish(self) {
        self.ctx
            .capture(&std::fs::read_to_string(&self.log).unwrap_or_default());
        self.ctx.assert_no_secret(OWNER, &[&self.config]);
    }
}

fn credential(token: &str) -> Credential {
    Credential::Token {
        token: token.to_owned(),
        application: "embedder".to_owned(),
    }
}

fn proc_file(pid: u32, name: &str) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/{name}")).unwrap()
}

/// Whether `pid` is gone: no such process, or a zombie nobody reaped yet
/// (a container's init may not reap orphans).
pub(crate) fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The live children of `pid` (from `/proc/*/stat`).
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.get(1) == Some(&pid.to_string().as_str()) && !gone(child) {
            out.push(child);
        }
    }
    out
}

#[test]
fn a_managed_controller_is_ready_serves_turns_and_stops_cleanly() {
    let setup = Setup::new();
    // A bare name, found in ~/.local/bin as the installer would put it.
    let bin = setup.ctx.home().join(".local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(TestContext::bin(), bin.join("lapis-ai-controller")).unwrap();
    let lookup = CommandLookup {
        path: Some("/nonexistent".into()),
        home: Some(setup.ctx.home().to_owned()),
        secrets: Default::default(),
    };
    let mut managed = ManagedController::start(
        setup
            .options(OWNER)
            .executable("lapis-ai-controller")
            .lookup(lookup)
            .expect_build("version", env!("CARGO_PKG_VERSION")),
    )
    .unwrap();
    let pid = managed.pid();
    let ready = managed.ready().clone();
    assert_eq!(ready.server.protocol, "lapis-ai-controller/1");
    assert_eq!(ready.session.application, "embedder");
    assert_eq!(ready.server.build["version"], env!("CARGO_PKG_VERSION"));
    // The credential is nowhere in the child's argv or environment.
    let cmdline = proc_file(pid, "cmdline");
    let environ = proc_file(pid, "environ");
    for (what, bytes) in [("cmdline", &cmdline), ("environ", &environ)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(OWNER), "the token is in /proc/{pid}/{what}");
        setup.ctx.capture(&text);
    }
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(argv[0], bin.join("lapis-ai-controller").to_str().unwrap());
    assert_eq!(
        argv[1..],
        [
            "--config",
            setup.config.to_str().unwrap(),
            "serve",
            "--stdio",
            "--home",
            setup.home.to_str().unwrap(),
        ]
    );
    let mut names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.split(|b| *b == b'=').next())
        .filter(|k| !k.is_empty())
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["HOME", "PATH"], "only the allowed environment");
    // stdin and stdout are one socket, still open after readiness.
    let fd0 = std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap();
    let fd1 = std::fs::read_link(format!("/proc/{pid}/fd/1")).unwrap();
    assert!(fd0.to_string_lossy().starts_with("socket:"), "{fd0:?}");
    assert_eq!(fd0, fd1);

    // The SDK works over it: a status, a thread, a turn through `echo`.
    let client = managed.client();
    let status = client.status().unwrap();
    assert_eq!(status.pid, pid);
    let thread = client
        .threads_create("proj", "echo", ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = client.turns_submit(&thread.id, "c-1", "hello").unwrap();
    let done = wait_turn(client, &turn.id, |s| s == "completed");
    assert_eq!(done.state.as_str(), "completed");
    // Its `echo` agent stays in the pool between turns: a child to reap.
    let agents = children(pid);
    assert!(!agents.is_empty(), "the echo agent is running");
    let err = client.reconnect().unwrap_err();
    assert_eq!(err.code(), "not_reconnectable");

    // A graceful stop: exit 0, and the agent and the bridge socket went
    // with it.
    let bridge = setup.home.join(lapis_protocol::home::BRIDGE_SOCKET_FILE);
    assert!(bridge.exists(), "the agents' bridge socket is bound");
    let status = managed.stop().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!bridge.exists(), "the bridge socket is removed at exit");
    for agent in agents {
        until("the agent to be reaped", || gone(agent));
    }
    // The database is where the caller said: a second start finds the
    // thread again.
    let mut again = ManagedController::start(setup.options(OWNER)).unwrap();
    let threads = again.client().threads_list().unwrap();
    assert!(threads.iter().any(|t| t.id == thread.id));
    drop(again);
    setup.finish();
}

#[test]
fn a_wrong_build_identity_stops_the_child_before_it_is_used() {
    let setup = Setup::new();
    let err = ManagedController::start(
        setup
            .options(OWNER)
            .expect_build("commit", "not-this-build"),
    )
    .unwrap_err();
    match &err {
        ManagedError::BuildMismatch {
            field, expected, ..
        } => {
            assert_eq!(field, "commit");
            assert_eq!(expected, "\"not-this-build\"");
        }
        other => panic!("{other:?}"),
    }
    // The refused child is gone: its instance lock is free for the next.
    let managed = ManagedController::start(setup.options(OWNER)).unwrap();
    assert_eq!(managed.stop().unwrap().code(), Some(0));
    setup.finish();
}

#[test]
fn start_failures_carry_their_cause_and_never_the_credential() {
    let setup = Setup::new();
    let wrong = "lapis_ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    let err = ManagedController::start(setup.options(wrong)).unwrap_err();
    assert_eq!(err.code(), "unauthenticated", "{err:?}");
    let text = format!("{err} / {err:?}");
    assert!(!text.contains(wrong), "{text}");
    setup.ctx.capture(&text);

    // A broken configuration: the controller's own code and reason.
    let broken = setup.ctx.home().join("broken.json");
    std::fs::write(&broken, "{ not json").unwrap();
    let err = ManagedController::start(setup.options(OWNER).config(&broken)).unwrap_err();
    assert!(matches!(err, ManagedError::Startup { .. }), "{err:?}");
    assert_eq!(err.code(), "invalid_config", "{err:?}");
    setup.ctx.capture(&format!("{err} / {err:?}"));

    // Not a controller at all: how it exited.
    let err = ManagedController::start(setup.options(OWNER).executable("/bin/false")).unwrap_err();
    match err {
        ManagedError::Exited { status } => assert_eq!(status.code(), Some(1)),
        other => panic!("{other:?}"),
    }
    setup.finish();
}

#[test]
fn the_managed_controller_dies_with_its_parent() {
    let setup = Setup::new();
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_managed-parent"))
        .args([
            TestContext::bin().as_path(),
            setup.home.as_path(),
            setup.config.as_path(),
            setup.ctx.home(),
        ])
        .env("HOME", setup.ctx.home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&setup.log).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = parent.stdin.take().unwrap();
    writeln!(stdin, "{OWNER}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let controller: u32 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("managed-parent said {line:?}: {}", log_of(&setup.log)));
    let agents = eventually("the echo agent", || {
        let a = children(controller);
        (!a.is_empty()).then_some(a)
    });
    assert!(!gone(controller));
    let bridge = setup.home.join(lapis_protocol::home::BRIDGE_SOCKET_FILE);
    assert!(bridge.exists(), "the agents' bridge socket is bound");
    // SIGKILL: the parent gets no chance to stop anything itself.
    parent.kill().unwrap();
    parent.wait().unwrap();
    until("the controller to exit after its parent", || {
        gone(controller)
    });
    for agent in agents {
        until("the controller's agent to be reaped", || gone(agent));
    }
    // Stopped by its parent's death, it removed its bridge socket.
    assert!(!bridge.exists(), "the bridge socket is left behind");
    drop(stdin);
    setup.finish();
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The parent-death signal on its own: a stand-in controller that never
/// reads its stdin again after the startup line (so the socket's end cannot
/// tell it anything) still gets SIGTERM when its parent is SIGKILLed.
#[test]
fn the_parent_death_signal_reaches_a_child_that_ignores_its_stdin() {
    let setup = Setup::new();
    let marker = setup.ctx.home().join("got-term");
    let stand_in = setup.ctx.home().join("stand-in");
    let ready = r#"{"jsonrpc":"2.0","method":"ready","params":{"server":{"protocol":"lapis-ai-controller/1","version":"0","build":{}},"session":{"id":"s","principal":"owner","application":"embedder","scopes":[]}}}"#;
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\ntrap 'echo term > {}; exit 0' TERM\nread line\necho '{ready}'\nwhile :; do sleep 0.05; done\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_managed-parent"))
        .args([
            stand_in.as_path(),
            setup.home.as_path(),
            setup.config.as_path(),
            setup.ctx.home(),
        ])
        .env("MANAGED_PARENT_NO_TURN", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = parent.stdin.take().unwrap();
    writeln!(stdin, "{OWNER}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let child: u32 = line.trim().parse().unwrap();
    assert!(!marker.exists());
    parent.kill().unwrap();
    parent.wait().unwrap();
    // The shell's `>` creates the file before `echo` writes it: wait for
    // the word, not the file (the race failed a CI run).
    until("the stand-in to get SIGTERM", || {
        log_of(&marker).trim() == "term"
    });
    until("the stand-in to exit", || gone(child));
    drop(stdin);
}
