//! Every client command through `ssh://`: `status` reports the remote
//! controller (and no fact of this host), `ask` (with the remote
//! controller's default provider), `turns`, `permissions`
//! (an answer given here reaches the remote agent), and named contexts.

use serde_json::json;

use super::Remote;
use crate::cli_permissions::fixture;
use crate::serve_support::OWNER;
use lapis_e2e::wait::eventually;

#[test]
fn status_ask_turns_and_permissions_answer_through_ssh() {
    let Some(remote) = Remote::start(json!({
        "asker": fixture(&["--permissions", "1", "--perm-kinds", "allow_once,reject_once", "--chunks", "1"]),
        "plain": fixture(&["--chunks", "1"]),
    })) else {
        return;
    };
    let local = &remote.local;
    let url = remote.sshd.url();
    // status: the remote controller's pid, the host named, no launcher or
    // service-manager facts of this host.
    let status = local.run(["status", "--json"]);
    assert_eq!(
        status.code,
        Some(0),
        "{}\nsshd:\n{}",
        status.stderr,
        remote.sshd.log()
    );
    let doc = status.json();
    assert_eq!(doc["pid"], remote.server.pid(), "{doc}");
    assert_eq!(doc["remote"]["host"], url.as_str(), "{doc}");
    assert!(
        doc.get("launcher").is_none() && doc.get("serviceManager").is_none(),
        "{doc}"
    );
    let plain = local.run(["status"]);
    plain.success();
    assert!(
        plain.stdout.contains(&format!("host      {url}")),
        "{}",
        plain.stdout
    );
    assert!(!plain.stdout.contains("launcher  "), "{}", plain.stdout);

    // ask: the remote directory, named as given.
    let dir = remote.server.project.to_str().unwrap().to_owned();
    let asked = local.run(["ask", "over ssh", "--dir", &dir, "--provider", "echo"]);
    asked.success();
    assert!(asked.stdout.contains("over ssh"), "{}", asked.stdout);
    // Without --provider: the remote controller's default (`echo` while
    // its config names none), never this host's config.
    let echoed = local.run(["ask", "echoed by default", "--dir", &dir]);
    echoed.success();
    assert!(
        echoed.stdout.contains("echoed by default"),
        "{}",
        echoed.stdout
    );
    assert!(!echoed.stderr.contains("new thread"), "{}", echoed.stderr);
    remote
        .server
        .reconfigure(|doc| doc["defaultProvider"] = json!("plain"));
    assert_eq!(
        local.run(["status", "--json"]).json()["defaultProvider"],
        "plain"
    );
    let defaulted = local.run(["ask", "x", "--dir", &dir]);
    defaulted.success();
    assert!(
        defaulted.stderr.contains("(provider plain)"),
        "{}",
        defaulted.stderr
    );

    // turns and permissions: the agent asks, the answer given here
    // reaches it, the turn completes.
    let thread = local
        .run(["threads", "create", "proj", "--provider", "asker"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let turn = local
        .run(["turns", "submit", &thread, "--prompt", "go"])
        .success()
        .stdout
        .trim()
        .to_owned();
    let req = eventually("a pending request over ssh", || {
        let doc = local.run(["permissions", "list", "--json"]).json();
        doc["requests"].as_array().and_then(|a| a.first().cloned())
    });
    assert_eq!(req["turnId"], turn.as_str());
    // An id prefix resolves remotely.
    let answered = local.run([
        "permissions",
        "respond",
        &turn[..12],
        "perm-0",
        "--allow",
        "--json",
    ]);
    answered.success();
    assert_eq!(answered.json()["optionId"], "opt-allow_once");
    eventually("the turn to complete", || {
        let t = local.run(["turns", "show", &turn, "--json"]).json();
        (t["turn"]["state"] == "completed").then_some(())
    });
    let listed = local.run(["turns", "list", "--json"]).json();
    assert!(listed.to_string().contains(&turn), "{listed}");
    // The agent got the answer (the remote journal says so).
    let tail = remote
        .server
        .ctx
        .run(["journal", "tail", &thread, "-n", "100"]);
    assert!(
        tail.stdout.contains("perm-0=opt-allow_once"),
        "{}",
        tail.stdout
    );
    // Completion candidates come from the remote controller too.
    let offered = crate::cli_surface::bash_complete(local, &["turns", "show", ""]);
    assert!(offered.iter().any(|c| c.starts_with(&turn)), "{offered:?}");
    // Nothing on this side holds the token.
    local.assert_no_secret(OWNER, &[]);
}

#[test]
fn contexts_name_hosts_and_the_one_in_use_applies_to_client_commands() {
    let Some(mut remote) = Remote::start(json!({})) else {
        return;
    };
    let url = remote.sshd.url();
    remote.local.unset_env("LAPIS_AI_CONTROLLER_HOST");
    let local = &remote.local;
    // Nothing configured here: this host has no controller.
    let before = local.run(["status", "--json"]);
    assert_ne!(before.code, Some(0));
    assert!(before.json().get("remote").is_none());
    local.run(["contexts", "add", "box", &url]).success();
    let dup = local.run(["contexts", "add", "box", &url]);
    dup.expect_code(2);
    assert!(
        dup.stderr.contains("context_exists") || dup.stderr.contains("exists already"),
        "{}",
        dup.stderr
    );
    let bad = local.run(["contexts", "add", "other", "box.example"]);
    bad.expect_code(2);
    // `--host NAME` picks a context for one command.
    let once = local.run(["--host", "box", "status", "--json"]);
    once.success();
    assert_eq!(once.json()["remote"]["host"], url.as_str());
    local.run(["contexts", "use", "box"]).success();
    let file = local
        .home()
        .join(".config/lapis-ai-controller/contexts.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let listed = local.run(["contexts", "list", "--json"]).json();
    assert_eq!(
        listed,
        json!([
            { "name": "default", "host": null, "current": false },
            { "name": "box", "host": url, "current": true },
        ])
    );
    let status = local.run(["status", "--json"]);
    status.success();
    assert_eq!(status.json()["pid"], remote.server.pid());
    // `--host default` is this host again, for one command.
    assert_ne!(local.run(["--host", "default", "status"]).code, Some(0));
    let unknown = local.run(["contexts", "use", "nope"]);
    unknown.expect_code(2);
    assert!(
        unknown.stderr.contains("contexts add nope"),
        "{}",
        unknown.stderr
    );
    local.run(["contexts", "remove", "box"]).success();
    let listed = local.run(["contexts", "list", "--json"]).json();
    assert_eq!(
        listed,
        json!([{ "name": "default", "host": null, "current": true }])
    );
    assert_ne!(local.run(["status"]).code, Some(0));
}
