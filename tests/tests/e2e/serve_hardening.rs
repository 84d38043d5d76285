//! Issue 15 through the real binary: a full disk mid-turn, config files that
//! must be refused, secrets kept out of config errors, `serve --stdio` start
//! failures, and `status` against a wedged server.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lapis_e2e::TestContext;
use lapis_protocol::client::{Client, Credential};
use serde_json::{Value, json};

use crate::serve_support::{OWNER, Server, write_config};
use lapis_e2e::wait::{settled, wait_turn};

fn fixture(args: &[&str]) -> Value {
    json!({ "command": env!("CARGO_BIN_EXE_fixture-agent"), "args": args })
}

/// A size-limited tmpfs mounted at `at`, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    /// `None` when this machine does not let the test mount (not root).
    fn mount(at: &Path, bytes: u64) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700")])
            .arg("tmpfs")
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(at.to_owned()))
    }

    /// Fills the file system, then frees `headroom` bytes of it.
    fn fill_leaving(&self, headroom: u64) -> PathBuf {
        let filler = self.0.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.flush();
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(headroom)).unwrap();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The controller home on a 6 MiB tmpfs; a turn streams ~2 MB into it with
/// only 192 KiB free. The store refuses the writes, `status` (a read) keeps
/// answering and names `disk_full`, the log names it, the turn settles by
/// the boundary rules as soon as space returns, and a new turn runs, all
/// without a restart.
#[test]
fn a_full_disk_mid_turn_is_named_and_recovered_without_a_restart() {
    let ctx = TestContext::new();
    let Some(disk) = SmallDisk::mount(&ctx.home().join(".lapis"), 6 << 20) else {
        eprintln!("SKIPPED: mounting a tmpfs needs root (CAP_SYS_ADMIN)");
        return;
    };
    let chunk = "x".repeat(4000);
    let server = Server::start_in(
        ctx,
        json!({}),
        json!({
            "big": fixture(&["--chunks", "500", "--chunk-text", &chunk]),
            "small": fixture(&["--chunks", "2"]),
        }),
    );
    let mut client = server.client("disk-e2e");
    // The CLI's session exists before the disk fills (a read resumes it).
    server.ctx.run(["status", "--json"]).success();
    // Full retention: the agent's output is written to the disk.
    let created = client
        .call_value(
            "threads.create",
            json!({ "workspaceId": "proj", "provider": "big", "retention": "full" }),
        )
        .unwrap();
    let thread_id = created["thread"]["id"].as_str().unwrap().to_owned();
    let filler = disk.fill_leaving(192 * 1024);
    let turn = client.turns_submit(&thread_id, "big-1", "stream").unwrap();
    // The writes fail: the log and `status` name the condition, and
    // read-only use keeps working while the disk is full.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let out = server.ctx.run(["status", "--json"]);
        out.success();
        let s = out.json();
        if s["storageFault"] == "disk_full" {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "status never named the full disk: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status["runningWorkspaces"].is_array());
    assert!(
        server.log_text().contains("disk_full"),
        "{}",
        server.log_text()
    );
    client.threads_get(&thread_id).unwrap();
    client.journal_replay(Some(&thread_id), 0, None).unwrap();
    // A fresh connection of a new application (no stored session) still
    // gets in: a read-only session kept in memory, so `status` answers and
    // a write says why it cannot.
    let mut fresh = server.client("disk-fresh");
    let view = fresh.session().unwrap().clone();
    assert_eq!(view.read_only.as_deref(), Some("disk_full"), "{view:?}");
    assert!(
        view.scopes.iter().all(|s| s.only_reads()) && !view.scopes.is_empty(),
        "{view:?}"
    );
    assert_eq!(
        fresh.status().unwrap().storage_fault.as_deref(),
        Some("disk_full")
    );
    let refused = fresh
        .threads_create("proj", "small", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap_err();
    assert_eq!(refused.code(), "storage_unavailable", "{refused}");
    assert!(refused.to_string().contains("read-only"), "{refused}");
    // Space returns: the turn settles and the scheduler moves on.
    std::fs::remove_file(&filler).unwrap();
    let state = wait_turn(&mut client, &turn.id, settled).state;
    let state = state.as_str();
    assert!(
        matches!(state, "failed" | "submission_unknown" | "completed"),
        "{state}"
    );
    if state == "submission_unknown" {
        // After the dispatch boundary the outcome is the owner's to confirm.
        client
            .turns_resolve(&turn.id, lapis_protocol::ResolveAs::Failed, true)
            .unwrap();
    }
    let small = client
        .threads_create("proj", "small", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let next = client.turns_submit(&small.id, "small-1", "hi").unwrap();
    assert_eq!(
        wait_turn(&mut client, &next.id, settled).state.as_str(),
        "completed"
    );
    let s = server.ctx.run(["status", "--json"]).json();
    assert!(s.get("storageFault").is_none(), "{s}");
    // With space back, the same credential's next hello is a full session.
    let again = server.client("disk-fresh");
    let view = again.session().unwrap();
    assert!(
        view.read_only.is_none() && view.scopes.len() > 3,
        "{view:?}"
    );
    drop((fresh, again));
    drop(client);
    drop(server);
    drop(disk);
}

#[test]
fn config_that_is_not_a_small_regular_file_is_refused_promptly() {
    let ctx = TestContext::new();
    let fifo = ctx.home().join("config.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = ctx.home().join("big.json");
    std::fs::write(&big, vec![b' '; 2 << 20]).unwrap();
    for config in [Path::new("/dev/zero"), fifo.as_path(), big.as_path()] {
        for cmd in [&["serve"][..], &["status", "--json"], &["serve", "--stdio"]] {
            let mut args: Vec<&str> = vec!["--config", config.to_str().unwrap()];
            args.extend_from_slice(cmd);
            let out = ctx.run(&args);
            out.expect_code(2);
            assert!(
                out.stderr.contains("not a regular file") || out.stderr.contains("larger than"),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_secret_used_as_a_name_is_never_echoed_in_a_config_error() {
    let ctx = TestContext::new();
    let dir = ctx.home().join("ws");
    std::fs::create_dir_all(&dir).unwrap();
    let tail = &OWNER[6..];
    for (server, workspaces, providers) in [
        (json!({}), json!({ OWNER: { "path": dir } }), json!({})),
        (json!({}), json!({}), json!({ OWNER: { "command": "a" } })),
        (
            json!({}),
            json!({}),
            json!({ "p": { "command": "a", "envAllowlist": [OWNER, OWNER] } }),
        ),
    ] {
        crate::serve_support::write_config_with(&ctx, server, workspaces, providers);
        for cmd in [&["serve"][..], &["status", "--json"], &["serve", "--stdio"]] {
            let out = ctx.run(cmd);
            out.expect_code(2);
            assert!(!out.stderr.contains(tail), "{cmd:?}: {}", out.stderr);
            assert!(!out.stdout.contains(tail), "{cmd:?}: {}", out.stdout);
        }
    }
}

#[test]
fn serve_stdio_answers_a_held_lock_with_a_startup_failed_frame() {
    let server = Server::start();
    let child = server
        .ctx
        .command(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stdout).unwrap();
    let frame: Value = serde_json::from_str(text.lines().next().unwrap_or("")).unwrap();
    assert_eq!(frame["method"], lapis_protocol::STARTUP_FAILED, "{text}");
    assert_eq!(frame["params"]["code"], "instance_locked", "{text}");
}

#[test]
fn status_exits_3_in_seconds_when_the_server_is_wedged() {
    let ctx = TestContext::new();
    let home = ctx.home().join(".lapis/ai-controller");
    std::fs::create_dir_all(&home).unwrap();
    write_config(&ctx, json!({}), json!({}));
    // A socket that accepts into its backlog but never answers.
    let _wedged = UnixListener::bind(home.join("controller.sock")).unwrap();
    let out = ctx.run(["status", "--json"]);
    out.expect_code(3);
    assert!(out.stderr.contains("did not answer"), "{}", out.stderr);
}

#[test]
fn a_token_pinned_to_an_application_cannot_speak_for_another() {
    let mut server = Server::start();
    server.stop();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["tokens"][1]["applications"] = json!(["bot"]);
    std::fs::write(&server.config, serde_json::to_vec(&doc).unwrap()).unwrap();
    server.spawn();
    let guest = |app: &str| {
        Client::open(
            &server.socket(),
            Credential::Token {
                token: crate::serve_support::GUEST.to_owned(),
                application: app.to_owned(),
            },
        )
    };
    assert!(guest("bot").is_ok());
    assert_eq!(guest("editor").unwrap_err().code(), "forbidden");
}

/// Authenticated connections cannot lock the owner out: a token other than
/// the owner's holds at most half of `server.maxConnections`
/// (`connectionsPerToken`), those tokens together never the owner's
/// reserved share (`ownerReserve`, two of four slots here: an open owner
/// connection leaves `status` one), and a CLI turned away at the cap says the
/// controller is running and full, never "not running".
#[test]
fn a_token_cannot_take_every_connection_and_the_cli_names_the_limit() {
    use crate::serve_support::{GUEST, OWNER, READER, code};
    let server = Server::start_with(json!({ "maxConnections": 4 }));
    // A slot of a connection just closed comes back when the server has
    // read its end: a refusal at the cap itself (`maxConnections`) is that
    // race, tried again; a quota refusal is the answer.
    let hello = |token: &str, app: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut raw = server.raw();
            raw.send_bytes(
                format!(
                    "{}\n",
                    json!({ "jsonrpc": "2.0", "id": 1, "method": "hello", "params":
                        { "protocol": "lapis-ai-controller/1", "token": token, "application": app } })
                )
                .as_bytes(),
            );
            let r = raw.recv().expect("an answer");
            if r["error"]["data"]["limit"] != "maxConnections" || Instant::now() > deadline {
                return (raw, r);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The status-only token: two of four slots, then its quota.
    let (r1, a) = hello(READER, "flood");
    let (r2, b) = hello(READER, "flood");
    assert!(
        a.get("result").is_some() && b.get("result").is_some(),
        "{a} {b}"
    );
    let (_r3, c) = hello(READER, "flood");
    assert_eq!(code(&c), "limit_reached", "{c}");
    assert_eq!(c["error"]["data"]["limit"], "connectionsPerToken", "{c}");
    drop(_r3);
    // The other two are the owner's reserved share: another token is
    // refused them.
    let (_g1, refused) = hello(GUEST, "other");
    assert_eq!(
        refused["error"]["data"]["limit"], "ownerReserve",
        "{refused}"
    );
    drop(_g1);
    server.ctx.run(["status", "--json"]).success();
    // With one owner connection open (a `watch`, an application), the
    // owner's `status` still gets in: the share is more than one slot.
    let (o1, o) = hello(OWNER, "scripts");
    assert!(o.get("result").is_some(), "{o}");
    server.ctx.run(["status", "--json"]).success();
    // The owner takes the last slot; at the cap, the CLI names the limit.
    let (o2, o) = hello(OWNER, "scripts");
    assert!(o.get("result").is_some(), "{o}");
    let out = server.ctx.run(["status"]);
    out.expect_code(3);
    assert!(out.stderr.contains("running but refuses"), "{}", out.stderr);
    assert!(!out.stderr.contains("not running"), "{}", out.stderr);
    drop((r1, r2, o1, o2));
    server.finish(&[], &[]);
}
