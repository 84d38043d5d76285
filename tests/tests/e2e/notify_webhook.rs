//! `notify.webhook` (issue 45 item 2): the controller POSTs the
//! controller-worded event to a recording receiver (`lapis_e2e::webhook`,
//! HTTPS through rustls, or plain HTTP on loopback): the event's fields and
//! the click-through line only — never the prompt (a marker in it), agent
//! text or the header secret, which comes from the env file and appears in
//! no log; retries are bounded.

use std::os::unix::fs::PermissionsExt;

use lapis_e2e::TestContext;
use lapis_e2e::wait::{eventually, settle};
use lapis_e2e::webhook::{WebhookServer, test_ca_file};
use lapis_protocol::PendingRequest;
use serde_json::{Value, json};

use crate::cli_permissions::{fixture, submit_until_asked};
use crate::serve_support::Server;

/// The prompt's secret: must never leave the controller.
const MARKER: &str = "PROMPT-SECRET-1b9e42";
/// The header's value, in the env file only.
const HOOK_SECRET: &str = "Bearer hook-secret-5d7c";

/// A server whose `asker` provider asks once, restarted with `notify` set
/// to `notify` and the env file holding `env` (read at start).
fn serve_notifying(notify: Value, env: &str) -> Server {
    let ctx = TestContext::new();
    let asker = fixture(&[
        "--permissions",
        "1",
        "--perm-kinds",
        "allow_once,reject_once",
    ]);
    let mut server = Server::start_in(ctx, json!({}), json!({ "asker": asker }));
    server.stop();
    let env_file = server.config.with_file_name("env");
    std::fs::write(&env_file, env).unwrap();
    std::fs::set_permissions(&env_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    server.edit_config(|doc| doc["notify"] = notify);
    server.spawn();
    server
}

/// Submits a turn with the marker in its prompt and returns (turn id,
/// the pending request) once the agent asks.
fn ask(server: &Server) -> (lapis_protocol::client::Client, String, PendingRequest) {
    let mut client = server.client("editor");
    let (_, turn, request) =
        submit_until_asked(&mut client, "asker", "n-1", &format!("please {MARKER}"));
    (client, turn.id, request)
}

#[test]
fn a_webhook_gets_the_fields_and_the_answer_line_and_the_answer_works() {
    let hook = WebhookServer::https(&[]);
    let server = serve_notifying(
        json!({
            "webhook": {
                "url": hook.url("/alerts"),
                "caFile": test_ca_file(),
                "headers": { "Authorization": "HOOK_AUTH" },
                "answerHost": "box",
            },
            "kinds": ["permission_requested"],
        }),
        &format!("HOOK_AUTH={HOOK_SECRET}\n"),
    );
    let (mut client, turn, request) = ask(&server);
    let sent = eventually("the webhook is called", || {
        hook.requests().into_iter().next()
    });
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/alerts")
    );
    assert_eq!(sent.header("authorization"), Some(HOOK_SECRET));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    let answer = format!(
        "answer: ssh box lapis-ai-controller permissions respond {turn} {} --allow (or --reject)",
        request.id
    );
    assert_eq!(
        body,
        json!({
            "kind": "permission_requested",
            "seq": body["seq"],
            "threadId": body["threadId"],
            "turnId": turn,
            "requestId": request.id,
            "workspaceId": "proj",
            "provider": "asker",
            "title": "permission needed (execute) in proj",
            "answer": answer,
        })
    );
    assert!(!sent.text().contains(MARKER), "{}", sent.text());
    // The line's command answers it (run here; over ssh it is the same).
    let respond: Vec<&str> = answer
        .strip_prefix("answer: ssh box lapis-ai-controller ")
        .unwrap()
        .split(" (or")
        .next()
        .unwrap()
        .split(' ')
        .collect();
    server.ctx.run(&respond).success();
    assert_eq!(settle(&mut client, &turn).state.as_str(), "completed");
    assert_eq!(hook.requests().len(), 1, "one kind chosen, one event");
    let log = server.log_text();
    assert!(
        !log.contains("hook-secret-5d7c") && !log.contains(MARKER),
        "{log}"
    );
    server.finish(&[], &[]);
}

#[test]
fn a_refusing_webhook_is_tried_a_bounded_number_of_times_then_dropped() {
    // Every answer a 503: three requests, then one "dropped" line.
    let hook = WebhookServer::https(&[503, 503, 503, 503, 503, 503]);
    let server = serve_notifying(
        json!({
            "webhook": { "url": hook.url("/x"), "caFile": test_ca_file() },
            "kinds": ["permission_requested"],
        }),
        "",
    );
    let (mut client, turn, request) = ask(&server);
    eventually("the event is dropped", || {
        server
            .log_text()
            .contains("the webhook event was dropped")
            .then_some(())
    });
    assert_eq!(hook.requests().len(), 3, "bounded retries");
    client
        .permissions_respond(&turn, &request.id, "opt-allow_once")
        .unwrap();
    assert_eq!(settle(&mut client, &turn).state.as_str(), "completed");
    assert_eq!(hook.requests().len(), 3, "nothing more was sent");
    server.finish(&[], &[]);
}

#[test]
fn a_self_hosted_ntfy_on_loopback_gets_the_plain_text_message() {
    // Plain http:// is allowed to loopback only; the URL comes from the
    // env file here (as a Slack or Discord URL would).
    let hook = WebhookServer::http(&[500]);
    let server = serve_notifying(
        json!({
            "webhook": { "urlEnv": "NTFY_URL", "preset": "ntfy", "answerHost": "me@box" },
            "kinds": ["permission_requested"],
        }),
        &format!("NTFY_URL={}\n", hook.url("/lapis-topic")),
    );
    let (mut client, turn, request) = ask(&server);
    // The first answer (500) is retried once; the second arrives.
    let sent = eventually("retried after the 500", || hook.requests().get(1).cloned());
    assert_eq!(sent.path, "/lapis-topic");
    assert_eq!(sent.header("title"), Some("lapis-ai-controller"));
    assert_eq!(sent.header("tags"), Some("permission_requested"));
    let text = String::from_utf8(sent.body.clone()).unwrap();
    assert_eq!(
        text,
        format!(
            "permission needed (execute) in proj\nanswer: ssh me@box lapis-ai-controller \
             permissions respond {turn} {} --allow (or --reject)",
            request.id
        )
    );
    client
        .permissions_respond(&turn, &request.id, "opt-allow_once")
        .unwrap();
    settle(&mut client, &turn);
    assert_eq!(hook.requests().len(), 2);
    let log = server.log_text();
    assert!(!log.contains("lapis-topic"), "the URL is not logged: {log}");
    server.finish(&[], &[]);
}

#[test]
fn a_webhook_to_plain_http_off_loopback_is_refused_by_validation() {
    let ctx = TestContext::new();
    let config = crate::serve_support::write_config(&ctx, json!({}), json!({}));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    doc["notify"] = json!({ "webhook": { "url": "http://example.com/hook" } });
    std::fs::write(&config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = ctx.run(["config", "validate", "--json"]);
    assert_ne!(out.code, Some(0));
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(text.contains("notify.webhook.url"), "{text}");
    assert!(text.contains("loopback"), "{text}");
}
