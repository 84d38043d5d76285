//! `notify` (issue 28 item 3): the configured command runs for the chosen
//! attention kinds with exactly one line of allowed fields on stdin, its
//! `args` as argv and only allowlisted environment; it never sees the
//! prompt (a unique marker in it) or agent-written text, and the rate limit
//! drops what exceeds it, with a log line.

use std::os::unix::fs::PermissionsExt;

use lapis_e2e::TestContext;
use lapis_e2e::wait::{eventually, settle};
use lapis_protocol::AttentionKind;
use lapis_protocol::config::NotifyEvent;
use lapis_protocol::params::JournalSubscribe;
use serde_json::json;

use crate::cli_permissions::{fixture, submit_until_asked};
use crate::serve_support::Server;

/// The prompt's secret: must never reach the notify command.
const MARKER: &str = "PROMPT-SECRET-7f3a9c";

#[test]
fn the_notify_command_gets_only_the_allowed_fields_and_is_rate_limited() {
    let mut ctx = TestContext::new();
    // In the controller's environment: one allowed name, one secret.
    ctx.set_env("LAPIS_NOTIFY_ALLOWED", "yes");
    ctx.set_env("LAPIS_NOTIFY_SECRET", "env-secret-0c41");
    // Each run is its own task, so runs may overlap: each one writes its
    // record to a file of its own and renames it into place when whole.
    let records = ctx.home().join("notify-runs");
    std::fs::create_dir(&records).unwrap();
    let script = ctx.home().join("notify-recorder");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nout=$(mktemp '{dir}/run.XXXXXX')\n\
             {{ printf 'ARGV %s\\n' \"$*\"; printf 'ENV '; env | sed 's/=.*//' | sort | tr '\\n' ' '; \
             printf '\\nSECRET %s\\n' \"$LAPIS_NOTIFY_SECRET\"; printf 'LINE '; cat; }} > \"$out\"\n\
             mv \"$out\" \"$out.done\"\n",
            dir = records.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let asker = fixture(&[
        "--permissions",
        "1",
        "--perm-kinds",
        "allow_once,reject_once",
        "--chunks",
        "1",
    ]);
    let mut server = Server::start_in(ctx, json!({}), json!({ "asker": asker }));
    // `notify` is read at start: add it and restart.
    server.stop();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["notify"] = json!({
        "command": script,
        "args": ["--from", "lapis"],
        "envAllowlist": ["LAPIS_NOTIFY_ALLOWED"],
        "kinds": ["permission_requested", "turn_finished", "workspace_idle"],
        "maxPerMinute": 2,
    });
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    server.spawn();

    let mut client = server.client("editor");
    let (_, turn, request) =
        submit_until_asked(&mut client, "asker", "n-1", &format!("please {MARKER}"));
    client
        .permissions_respond(&turn.id, &request.id, "opt-allow_once")
        .unwrap();
    assert_eq!(settle(&mut client, &turn.id).state.as_str(), "completed");
    // Three attention events of the chosen kinds (request, finish, idle):
    // two run, the third is dropped and logged.
    eventually("the rate limit is logged", || {
        server
            .log_text()
            .contains("rate limit reached")
            .then_some(())
    });
    let text = eventually("two runs recorded", || {
        let runs = finished_runs(&records);
        (runs.len() == 2).then(|| runs.concat())
    });
    assert!(
        !text.contains(MARKER),
        "the prompt never reaches it: {text}"
    );
    assert!(!text.contains("env-secret-0c41"), "{text}");
    assert!(
        !text.contains("Run command"),
        "no agent-written title: {text}"
    );
    let mut lines: Vec<NotifyEvent> = text
        .lines()
        .filter_map(|l| l.strip_prefix("LINE "))
        .map(|l| serde_json::from_str(l).expect("exactly the allowed fields"))
        .collect();
    // Runs may finish in either order; the request came first.
    lines.sort_by_key(|e| e.kind != AttentionKind::PermissionRequested);
    assert_eq!(lines[0].kind, AttentionKind::PermissionRequested);
    assert_eq!(lines[0].request_id.as_deref(), Some(request.id.as_str()));
    assert_eq!(lines[0].turn_id.as_deref(), Some(turn.id.as_str()));
    assert_eq!(
        (lines[0].workspace_id.as_str(), lines[0].provider.as_str()),
        ("proj", "asker")
    );
    assert_eq!(lines[0].title, "permission needed (execute) in proj");
    assert_eq!(lines[1].kind, AttentionKind::TurnFinished);
    assert_eq!(lines[1].title, "turn completed (end_turn) in proj");
    for argv in text.lines().filter_map(|l| l.strip_prefix("ARGV ")) {
        assert_eq!(argv, "--from lapis");
    }
    for env in text.lines().filter_map(|l| l.strip_prefix("ENV ")) {
        let names: Vec<&str> = env.split_whitespace().collect();
        assert!(names.contains(&"LAPIS_NOTIFY_ALLOWED"), "{env}");
        // What /bin/sh itself sets, and the allowlisted name: nothing else.
        for n in names {
            assert!(
                matches!(n, "LAPIS_NOTIFY_ALLOWED" | "PWD" | "SHLVL" | "_" | "OLDPWD"),
                "unexpected variable {n}"
            );
        }
    }
    server.finish(&[], &[]);
}

/// What each finished run of the recorder wrote (in no particular order).
fn finished_runs(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".done"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect()
}

/// The turn ids of the `turn_finished` lines recorded so far.
fn notified_turns(record: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<NotifyEvent>(l).ok())
        .filter(|e| e.kind == AttentionKind::TurnFinished)
        .filter_map(|e| e.turn_id)
        .collect()
}

/// Presence-aware mode (`notify.presence`): while a present subscription
/// covers a thread (the CLI's `turns submit --follow`, or an application's
/// `journal.subscribe` with `present: true`, of the thread or of every
/// thread), nothing runs for it and the suppression is logged; a plain
/// subscription, `--wait`, another thread, or a present subscriber that
/// disconnected suppress nothing.
#[test]
fn presence_aware_notify_stays_quiet_while_a_follow_of_the_turn_is_attached() {
    let ctx = TestContext::new();
    let record = ctx.home().join("notify.log");
    let script = ctx.home().join("notify-recorder");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat >> '{}'\n", record.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut server = Server::start_in(ctx, json!({}), json!({}));
    server.stop();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&server.config).unwrap()).unwrap();
    doc["notify"] = json!({
        "command": script,
        "kinds": ["turn_finished"],
        "maxPerMinute": 600,
        "presence": true,
    });
    std::fs::write(&server.config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    server.spawn();

    let mut client = server.client("lapis-cli");
    let mut thread = || {
        client
            .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
            .unwrap()
            .id
    };
    let (watched, other) = (thread(), thread());
    let run = |client: &mut lapis_protocol::client::Client, thread: &str, cmd: &str| {
        let turn = client.turns_submit(thread, cmd, "hi").unwrap();
        assert_eq!(settle(client, &turn.id).state.as_str(), "completed");
        turn.id
    };
    let suppressed = |server: &Server, turn: &str| {
        eventually("the suppression is logged", || {
            server
                .log_text()
                .lines()
                .any(|l| l.contains("notify: suppressed") && l.contains(turn))
                .then_some(())
        })
    };
    let delivered = |turn: &str| {
        eventually("the notification is recorded", || {
            notified_turns(&record)
                .iter()
                .any(|t| t == turn)
                .then_some(())
        })
    };

    // A person follows `watched` (a present subscription on another
    // connection); a plain subscription follows `other`.
    let mut watcher = server.client("lapis-cli");
    watcher
        .journal_subscribe_with(&JournalSubscribe {
            thread_id: Some(watched.clone()),
            after: None,
            attention: false,
            present: true,
        })
        .unwrap();
    let mut bot = server.client("lapis-cli");
    bot.journal_subscribe(Some(&other), None).unwrap();
    let quiet = run(&mut client, &watched, "p-1");
    suppressed(&server, &quiet);
    let loud = run(&mut client, &other, "p-2");
    delivered(&loud);

    // The watcher goes away: its presence goes with its connection.
    drop(watcher);
    let after = run(&mut client, &watched, "p-3");
    delivered(&after);

    // A present subscription over every thread of the session covers both.
    let mut all = server.client("lapis-cli");
    all.journal_subscribe_with(&JournalSubscribe {
        thread_id: None,
        after: None,
        attention: false,
        present: true,
    })
    .unwrap();
    let covered = run(&mut client, &other, "p-4");
    suppressed(&server, &covered);
    drop(all);

    // The CLI: `--follow` is present, `--wait` is not.
    let follow = server
        .ctx
        .run(["turns", "submit", &watched, "--prompt", "hi", "--follow"]);
    follow.success();
    let followed = client.turns_list(Some(&watched)).unwrap()[0].id.clone();
    assert!(!notified_turns(&record).contains(&followed));
    suppressed(&server, &followed);
    let wait = server
        .ctx
        .run(["turns", "submit", &watched, "--prompt", "hi", "--wait"]);
    wait.success();
    let waited = client.turns_list(Some(&watched)).unwrap()[0].id.clone();
    assert_ne!(waited, followed);
    delivered(&waited);

    // Each suppression was logged; and none of those turns has a line.
    let seen = notified_turns(&record);
    for t in [&quiet, &covered, &followed] {
        assert!(!seen.contains(t), "{t} was notified: {seen:?}");
    }
    assert_eq!(seen, [loud, after, waited]);
    drop(bot);
    server.finish(&[], &[]);
}
