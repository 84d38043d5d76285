//! Issue 44 item 4 through the real binary: `backup create` while `serve`
//! runs, `backup restore` with it stopped (refused while it runs), the
//! restored journal opening without `journal reanchor`, and `kill -9` at
//! every step of a restore leaving the old database or the new one.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::acp_serve::fixture;
use crate::serve_support::Server;
use lapis_e2e::wait::{settled, wait_turn};

/// A running server with one thread and `turns` settled turns on it.
fn server_with_turns(turns: usize) -> (Server, String) {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    let thread = {
        let mut client = server.client("backup-e2e");
        let thread = client
            .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
            .unwrap();
        add_turns(&server, &thread.id, 0, turns);
        thread.id
    };
    (server, thread)
}

fn add_turns(server: &Server, thread: &str, from: usize, n: usize) {
    let mut client = server.client("backup-e2e");
    for i in from..from + n {
        let t = client
            .turns_submit(thread, &format!("t-{i}"), "go")
            .unwrap();
        wait_turn(&mut client, &t.id, settled);
    }
}

fn turns_of(server: &Server, thread: &str) -> usize {
    let mut client = server.client("backup-e2e");
    client.turns_list(Some(thread)).unwrap().len()
}

fn backup(server: &Server) -> Value {
    server
        .ctx
        .run(["backup", "create", "--json"])
        .success()
        .json()
}

/// Create while serving, restore refused while serving, restore once
/// stopped: the service comes back with exactly what the backup saw, its
/// journal verifies, and `backup list` shows the backup and the
/// `pre-restore` copy of what it replaced.
#[test]
fn a_backup_taken_while_serving_is_restored_with_serve_stopped() {
    let (mut server, thread) = server_with_turns(1);
    let taken = backup(&server);
    assert_eq!(taken["kind"], "manual", "{taken}");
    let name = taken["name"].as_str().unwrap().to_owned();
    add_turns(&server, &thread, 1, 2);
    assert_eq!(turns_of(&server, &thread), 3);

    let refused = server.ctx.run(["backup", "restore", &name, "--json"]);
    assert_ne!(refused.code, Some(0));
    assert_eq!(refused.json()["error"]["code"], "instance_locked");

    server.stop();
    let done = server
        .ctx
        .run(["backup", "restore", &name, "--json"])
        .success()
        .json();
    assert_eq!(done["restored"]["name"], name.as_str(), "{done}");
    assert_eq!(done["previous"]["kind"], "pre-restore", "{done}");
    server.ctx.run(["journal", "verify"]).success();
    server.spawn();
    assert_eq!(turns_of(&server, &thread), 1, "the backup's state");
    let list = server
        .ctx
        .run(["backup", "list", "--json"])
        .success()
        .json();
    let kinds: Vec<&str> = list["backups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["manual", "pre-restore"], "{list}");
    server.finish(&[], &[]);
}

/// `kill -9` at each step of a restore, after its intent is durable: the
/// next `serve` finishes it, and the service has the backup's state with
/// a journal that verifies. Killed before the intent (the database it
/// replaces is backed up by then), nothing changed.
#[test]
fn kill_9_at_every_step_of_a_restore_leaves_the_old_database_or_the_new() {
    for step in [
        "before-intent",
        "after-intent",
        "after-copy",
        "after-drain",
        "after-rename",
        "after-anchor",
    ] {
        let (mut server, thread) = server_with_turns(1);
        let name = backup(&server)["name"].as_str().unwrap().to_owned();
        add_turns(&server, &thread, 1, 2);
        server.stop();
        let mut cmd = server.ctx.command(["backup", "restore", &name]);
        cmd.env("LAPIS_BACKUP_FAULT_PAUSE", step)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let paused = stderr
            .lines()
            .map_while(Result::ok)
            .any(|l| l == format!("lapis-fault-pause: restore {step}"));
        assert!(paused, "the restore never reached {step}");
        child.kill().unwrap();
        child.wait().unwrap();
        server.spawn();
        // Before its intent the restore had not begun; after it, the
        // next open finishes it.
        let expected = if step == "before-intent" { 3 } else { 1 };
        assert_eq!(turns_of(&server, &thread), expected, "killed {step}");
        server.stop();
        server.ctx.run(["journal", "verify"]).success();
        server.finish(&[], &[]);
    }
}
