//! One authority model (issue 43): `tokens add` writes a token bound to one
//! application, whose sessions see that application only and hold no
//! cross-application scope; the owner's token (the one `install` creates)
//! sees every application of its principal; `tokens revoke` ends a token's
//! sessions and subscriptions at once on the running `serve`; grants limit
//! an application token to workspaces and providers; existing tokens are
//! never rewritten.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use lapis_protocol::client::{Client, ClientError, Credential};
use serde_json::{Value, json};

use crate::isolation::assert_foreign;
use crate::policy::app;
use crate::serve_support::{GUEST, NARROW, OWNER, READER, Server};

/// `tokens add NAME --application APP --output FILE [extra…]` through the
/// CLI against the running server: the secret is only in FILE (0600),
/// never on stdout or stderr. Returns the secret.
pub(crate) fn add_token(server: &Server, name: &str, application: &str, extra: &[&str]) -> String {
    let file = server.ctx.home().join(format!("{name}.token"));
    let mut args = vec![
        "tokens".to_owned(),
        "add".to_owned(),
        name.to_owned(),
        "--application".to_owned(),
        application.to_owned(),
        "--output".to_owned(),
        file.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let out = server.ctx.run(&args);
    out.success();
    assert!(
        out.stdout
            .contains("the running service reloaded its configuration"),
        "{}",
        out.stdout
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the secret file is the owner's only");
    let secret = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    // Read once, as an application would; the context's end-of-test scan
    // then finds the secret in the config only.
    std::fs::remove_file(&file).unwrap();
    assert!(secret.starts_with("lapis_"), "{secret}");
    assert!(!out.stdout.contains(&secret) && !out.stderr.contains(&secret));
    secret
}

fn scopes(c: &Client) -> Vec<String> {
    c.session()
        .unwrap()
        .scopes
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect()
}

/// Reads notifications until `journal.ended`: it, and the methods of what
/// came before it.
fn journal_ended(client: &mut Client) -> (lapis_protocol::Notification, Vec<String>) {
    let mut before = Vec::new();
    loop {
        let n = client
            .next_notification(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("the subscription ends");
        if n.method == "journal.ended" {
            return (n, before);
        }
        before.push(n.method);
    }
}

fn ids(v: &Value, list: &str) -> Vec<String> {
    v[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn application_tokens_see_their_own_application_and_the_owner_sees_all() {
    let server = Server::start();
    let editor_secret = add_token(&server, "editor", "editor", &[]);
    let phone_secret = add_token(&server, "phone", "phone", &[]);
    let mut editor = app(&server, &editor_secret, "editor");
    let mut phone = app(&server, &phone_secret, "phone");
    // A bound token speaks for its application only, and its default set
    // leaves out the cross-application scopes.
    let err = Client::open(
        &server.socket(),
        Credential::Token {
            token: editor_secret.clone(),
            application: "phone".to_owned(),
        },
    )
    .unwrap_err();
    assert!(format!("{err}").contains("forbidden"), "{err}");
    for s in ["permissions:respond-any", "turns:resolve-any"] {
        assert!(!scopes(&editor).iter().any(|x| x == s), "{s}");
    }
    assert!(
        scopes(&app(&server, OWNER, "lapis-cli"))
            .iter()
            .any(|x| x == "permissions:respond-any")
    );

    let thread = editor
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let turn = editor.turns_submit(&thread.id, "c-1", "hello").unwrap();
    crate::policy::settle(&mut editor, &turn.id);
    // A subscription of the other application, over everything it sees,
    // opened before the editor's next turn.
    let sub = phone.journal_subscribe(None, None).unwrap();
    let attention = phone
        .call_value("journal.subscribe", json!({ "attention": true }))
        .unwrap();
    assert!(attention["subscription"].is_string());
    let second = editor.turns_submit(&thread.id, "c-2", "again").unwrap();
    crate::policy::settle(&mut editor, &second.id);

    // Every method that names the editor's thread or turn answers the
    // phone as an unknown id does.
    assert_foreign(&mut phone, &thread.id, &turn.id);
    // Nothing of it in any list, replay, status or workspace listing.
    let threads = phone.call_value("threads.list", json!({})).unwrap();
    assert_eq!(ids(&threads, "threads"), Vec::<String>::new());
    let turns = phone.call_value("turns.list", json!({})).unwrap();
    assert_eq!(ids(&turns, "turns"), Vec::<String>::new());
    let replay = phone.call_value("journal.replay", json!({})).unwrap();
    assert_eq!(replay["events"], json!([]), "{replay}");
    let inbox = phone.call_value("permissions.list", json!({})).unwrap();
    assert_eq!(inbox["requests"], json!([]), "{inbox}");
    for method in ["status", "workspaces.list"] {
        let v = phone.call_value(method, json!({})).unwrap().to_string();
        assert!(
            !v.contains(&thread.id) && !v.contains(&turn.id),
            "{method}: {v}"
        );
    }
    // The phone's own turn is the first event either subscription carries.
    let own = phone
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let mine = phone.turns_submit(&own.id, "p-1", "mine").unwrap();
    let mut seen_own = false;
    while !seen_own {
        let n = phone
            .next_notification(Some(Duration::from_secs(30)))
            .unwrap()
            .expect("the phone's own events arrive");
        let text = n.params.to_string();
        assert!(
            !text.contains(&thread.id),
            "a foreign event reached the phone: {text}"
        );
        seen_own = text.contains(&mine.id) || text.contains(&own.id);
    }
    phone
        .call_value("journal.unsubscribe", json!({ "subscription": sub }))
        .unwrap();
    // Ports are keyed by the application its token speaks for: the
    // editor's endpoint is not the phone's to bind, nor to see.
    editor.tools_register(crate::tools::crm()).unwrap();
    let with_crm = lapis_protocol::params::ThreadsCreate::new("proj", "echo").tools(["crm"]);
    let err = phone.threads_create_with(&with_crm).unwrap_err();
    assert_eq!(err.code(), "tool_endpoint_unavailable");
    editor.threads_create_with(&with_crm).unwrap();

    // The owner's CLI sees both applications' threads and turns.
    let listed = server
        .ctx
        .run(["threads", "list", "--json"])
        .success()
        .json();
    let listed = listed.to_string();
    assert!(
        listed.contains(&thread.id) && listed.contains(&own.id),
        "{listed}"
    );
    let shown = server
        .ctx
        .run(["turns", "show", &turn.id, "--json"])
        .success()
        .json();
    assert_eq!(shown["turn"]["id"], turn.id.as_str());
    let mut owner = app(&server, OWNER, "lapis-cli");
    let page = owner
        .call_value("journal.replay", json!({}))
        .unwrap()
        .to_string();
    assert!(page.contains(&thread.id), "{page}");
    let turns = owner
        .call_value("turns.list", json!({}))
        .unwrap()
        .to_string();
    assert!(
        turns.contains(&turn.id) && turns.contains(&mine.id),
        "{turns}"
    );
    // Another principal still sees nothing of the owner's.
    assert_foreign(&mut app(&server, GUEST, "editor"), &thread.id, &turn.id);

    // `tokens list` names them, never a secret.
    let list = server
        .ctx
        .run(["tokens", "list", "--json"])
        .success()
        .json();
    let names: Vec<&str> = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["owner", "guest", "reader", "narrow", "editor", "phone"]
    );
    assert_eq!(list["tokens"][4]["kind"], "application");
    assert_eq!(list["tokens"][0]["kind"], "owner");
    server.ctx.run(["tokens", "list"]).success();
    server.ctx.assert_no_secret(
        &editor_secret,
        &[&server.config, &server.ctx.home().join("editor.token")],
    );
    server.ctx.assert_no_secret(
        &phone_secret,
        &[&server.config, &server.ctx.home().join("phone.token")],
    );
    server.finish(&[], &[]);
}

#[test]
fn a_revoked_application_token_ends_its_sessions_and_subscriptions_at_once() {
    let server = Server::start();
    let secret = add_token(&server, "bot", "bot-app", &[]);
    let mut bot = app(&server, &secret, "bot-app");
    let thread = bot
        .threads_create("proj", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let sub = bot.journal_subscribe(Some(&thread.id), None).unwrap();
    let before = std::fs::read_to_string(&server.config).unwrap();

    let out = server.ctx.run(["tokens", "revoke", "bot", "--json"]);
    out.success();
    let receipt = out.json();
    assert_eq!(receipt["revoked"]["name"], "bot");
    assert!(!out.stdout.contains(&secret));
    assert_eq!(
        receipt["reload"], "the running service reloaded its configuration",
        "{receipt}"
    );
    // The subscription ends with the reason, with no further event.
    let (ended, before_end) = journal_ended(&mut bot);
    assert!(
        before_end.iter().all(|m| m != "journal.event"),
        "an event after revocation: {before_end:?}"
    );
    assert_eq!(ended.params["subscription"], sub.as_str());
    assert_eq!(
        ended.params["error"]["data"]["code"], "unauthenticated",
        "{ended:?}"
    );
    // The connection's session is gone, and the token opens nothing.
    match bot.threads_list() {
        Err(ClientError::Rpc(e)) => assert_eq!(e.error_code().unwrap().as_str(), "unauthenticated"),
        other => panic!("expected unauthenticated, got {other:?}"),
    }
    assert!(
        Client::open(
            &server.socket(),
            Credential::Token {
                token: secret.clone(),
                application: "bot-app".to_owned(),
            },
        )
        .is_err()
    );
    // Only that token went: every other is as it was, byte for byte.
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(&server.config).unwrap()).unwrap();
    let before: Value = serde_json::from_str(&before).unwrap();
    let mut kept = before["tokens"].as_array().unwrap().clone();
    kept.retain(|t| t["name"] != "bot");
    assert_eq!(after["tokens"], Value::Array(kept));
    // The owner's token is never revoked here.
    server.ctx.run(["tokens", "revoke", "owner"]).expect_code(2);
    server
        .ctx
        .run(["tokens", "revoke", "nobody"])
        .expect_code(2);
    server.finish(&[], &[]);
}

#[test]
fn grants_refuse_other_workspaces_and_providers() {
    let server = Server::start_workspaces(json!({}), json!({}), &["other"]);
    let secret = add_token(
        &server,
        "proj-bot",
        "proj-bot",
        &["--workspace", "proj", "--provider", "echo"],
    );
    let mut bot = app(&server, &secret, "proj-bot");
    let refused = |r: Result<Value, ClientError>| match r {
        Err(ClientError::Rpc(e)) => {
            assert!(e.message.contains("not granted"), "{}", e.message);
            e.error_code().unwrap().as_str().to_owned()
        }
        other => panic!("expected a refusal, got {other:?}"),
    };
    let create = |ws: &str, provider: &str| json!({ "workspaceId": ws, "provider": provider, "approval": "ask" });
    assert_eq!(
        refused(bot.call_value("threads.create", create("other", "echo"))),
        "forbidden"
    );
    assert_eq!(
        refused(bot.call_value("threads.create", create("proj", "codex"))),
        "forbidden"
    );
    let dir = server.ctx.home().join("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    assert_eq!(
        refused(bot.call_value("workspaces.add", json!({ "id": "elsewhere", "path": dir }))),
        "forbidden"
    );
    let listed = bot.call_value("workspaces.list", json!({})).unwrap();
    let ids: Vec<&str> = listed["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["proj"]);
    // Inside its grants it works as any token.
    let thread = bot
        .call_value("threads.create", create("proj", "echo"))
        .unwrap();
    let thread = thread["thread"]["id"].as_str().unwrap().to_owned();
    let turn = bot.turns_submit(&thread, "g-1", "hi").unwrap();
    crate::policy::settle(&mut bot, &turn.id);
    // A thread on another workspace, the owner's, is not the bot's.
    let mut owner = app(&server, OWNER, "proj-bot");
    let theirs = owner
        .threads_create("other", "echo", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let err = bot.turns_submit(&theirs.id, "g-2", "hi").unwrap_err();
    assert_eq!(err.code(), "not_found");

    // The grants edited by hand and reloaded: the token is a new one. A
    // subscription opened under the old grants ends at once (it would
    // otherwise go on filtering by them), and the next `hello` holds the
    // new grants.
    let sub = bot.journal_subscribe(None, None).unwrap();
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&server.config).unwrap()).unwrap();
    for t in config["tokens"].as_array_mut().unwrap() {
        if t["name"] == "proj-bot" {
            t["workspaces"] = json!(["other"]);
        }
    }
    std::fs::write(&server.config, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    server.ctx.run(["config", "reload"]).success();
    let (ended, _) = journal_ended(&mut bot);
    assert_eq!(ended.params["subscription"], sub.as_str());
    let mut bot = app(&server, &secret, "proj-bot");
    assert_eq!(
        refused(bot.call_value("threads.create", create("proj", "echo"))),
        "forbidden"
    );
    bot.call_value("threads.create", create("other", "echo"))
        .unwrap();
    server.finish(&[], &[]);
}

#[test]
fn adding_tokens_keeps_every_existing_token_working() {
    let server = Server::start();
    let before: Value =
        serde_json::from_str(&std::fs::read_to_string(&server.config).unwrap()).unwrap();
    add_token(
        &server,
        "editor",
        "editor",
        &["--scopes", "threads:read,status:read"],
    );
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(&server.config).unwrap()).unwrap();
    let (b, a) = (
        before["tokens"].as_array().unwrap(),
        after["tokens"].as_array().unwrap(),
    );
    assert_eq!(&a[..b.len()], &b[..], "existing tokens are never rewritten");
    assert_eq!(a[b.len()]["applications"], json!(["editor"]));
    assert_eq!(a[b.len()]["scopes"], json!(["threads:read", "status:read"]));
    for (token, application) in [
        (OWNER, "lapis-cli"),
        (GUEST, "editor"),
        (READER, "anything"),
        (NARROW, "bot"),
    ] {
        let c = app(&server, token, application);
        assert!(c.session().is_some());
    }
    // A name already used, or no place for the secret, writes nothing.
    server
        .ctx
        .run([
            "tokens",
            "add",
            "owner",
            "--application",
            "x",
            "--output",
            "/dev/null/x",
        ])
        .expect_code(2);
    server
        .ctx
        .run(["tokens", "add", "fresh", "--application", "x"])
        .expect_code(2);
    assert_eq!(
        std::fs::read_to_string(&server.config).unwrap(),
        serde_json::to_string_pretty(&after).unwrap() + "\n"
    );
    server.finish(&[], &[]);
}
