//! Bad input over a real socket: each case gets its stable code, the
//! connection or the server survives as appropriate, and no token or bearer
//! appears in any response or log line.

use serde_json::{Value, json};

use crate::serve_support::{GUEST, NARROW, OWNER, READER, Raw, Server, code, ok};

const PROTOCOL: &str = "lapis-ai-controller/1";

#[test]
fn malformed_frames_get_codes_and_the_connection_survives() {
    let server = Server::start();
    let mut raw = server.raw();
    // Garbage bytes.
    raw.send_bytes(b"\x00\xff\xfegarbage{{{\n");
    let r = raw.recv().unwrap();
    assert_eq!(code(&r), "invalid_request");
    assert_eq!(r["error"]["code"], -32700);
    assert_eq!(r["id"], Value::Null);
    // Not a request object, missing id, bad jsonrpc, unknown envelope field.
    for frame in [
        r#"[1,2,3]"#,
        r#"{"jsonrpc":"2.0","method":"status"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"status"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"status","extra":true}"#,
    ] {
        raw.send_bytes(format!("{frame}\n").as_bytes());
        let r = raw.recv().unwrap();
        assert_eq!(code(&r), "invalid_request", "{frame} -> {r}");
    }
    // A valid frame before hello.
    let r = raw.call("status", json!({}));
    assert_eq!(code(&r), "unauthenticated");
    // Unknown method (before and after hello).
    let r = raw.call("no.such.method", json!({}));
    assert_eq!(code(&r), "invalid_request");
    assert_eq!(r["error"]["code"], -32601);
    // The same connection can still authenticate.
    let r = raw.call(
        "hello",
        json!({ "protocol": PROTOCOL, "token": OWNER, "application": "probe" }),
    );
    let bearer = ok(&r)["bearer"].as_str().unwrap().to_owned();
    assert_eq!(ok(&r)["server"]["protocol"], PROTOCOL);
    let r = raw.call("no.such.method", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    // Wrong parameter types and unknown parameter fields.
    let r = raw.call("turns.get", json!({ "turnId": 5 }));
    assert_eq!(code(&r), "invalid_request");
    assert_eq!(r["error"]["code"], -32602);
    let r = raw.call("threads.list", json!({ "bogus": 1 }));
    assert_eq!(code(&r), "invalid_request");
    let r = raw.call("status", json!({ "verbose": true }));
    assert_eq!(code(&r), "invalid_request");
    ok(&raw.call("status", json!({})));
    server.finish(&[&raw], &[bearer]);
}

/// Closed vocabularies (approval, retention, resolution, turn state) are
/// decoded at the boundary: an unknown spelling is `invalid_request` naming
/// the accepted ones, before any handler or the store sees it; the wire
/// spellings are unchanged.
#[test]
fn unknown_values_of_closed_sets_are_refused_naming_the_accepted_ones() {
    let server = Server::start();
    let (mut raw, hello) = server.hello(OWNER, "enums");
    let bearer = hello["result"]["bearer"].as_str().unwrap().to_owned();
    let cases = [
        (
            "threads.create",
            json!({ "workspaceId": "w", "provider": "echo", "approval": "sometimes" }),
            "`allow-all`",
        ),
        (
            "threads.create",
            json!({ "workspaceId": "w", "provider": "echo", "retention": "forever" }),
            "`metadata-only`",
        ),
        (
            "threads.configure",
            json!({ "threadId": "thr_x", "expectedVersion": 1, "approval": "ALLOW-ALL" }),
            "`ask`",
        ),
        (
            "turns.resolve",
            json!({ "turnId": "turn_x", "as": "completed", "confirmStopped": true }),
            "`cancelled`",
        ),
        (
            "turns.list",
            json!({ "state": "done" }),
            "`submission_unknown`",
        ),
    ];
    for (method, params, accepted) in cases {
        let r = raw.call(method, params.clone());
        assert_eq!(code(&r), "invalid_request", "{method} {params} -> {r}");
        assert_eq!(r["error"]["code"], -32602, "{method}: invalid params");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(accepted), "{method}: {message}");
    }
    // The documented spellings still decode (these fail later, on the
    // missing resources, not on the values).
    let r = raw.call(
        "turns.resolve",
        json!({ "turnId": "turn_x", "as": "cancelled", "confirmStopped": true }),
    );
    assert_eq!(code(&r), "not_found", "{r}");
    let r = raw.call("turns.list", json!({ "state": "submission_unknown" }));
    ok(&r);
    server.finish(&[&raw], &[bearer]);
}

#[test]
fn oversized_line_is_refused_and_closes_only_that_connection() {
    let server = Server::start();
    let (mut raw, hello) = server.hello(OWNER, "big");
    let bearer = hello["result"]["bearer"].as_str().unwrap().to_owned();
    // 64 KiB without a newline against a 4 KiB bound; the server must answer
    // before the line ends.
    let big = vec![b'x'; 64 * 1024];
    let _ = std::io::Write::write_all(&mut raw.stream, &big);
    let r = raw.recv().expect("an error before closing");
    assert_eq!(code(&r), "invalid_request");
    assert!(r["error"]["message"].as_str().unwrap().contains("4096"));
    assert!(raw.closed(), "the connection must be closed");
    // The server survives.
    let (mut other, _) = server.hello(OWNER, "big");
    ok(&other.call("status", json!({})));
    // A frame of exactly the bound's order still works.
    let pad = "y".repeat(3000);
    let r = other.call("threads.list", json!({ "workspaceId": pad }));
    ok(&r);
    server.finish(&[&raw, &other], &[bearer]);
}

#[test]
fn hello_checks_protocol_before_credentials() {
    let server = Server::start();
    let mut raw = server.raw();
    // Wrong protocol AND wrong token: the protocol is reported.
    let r = raw.call(
        "hello",
        json!({ "protocol": "lapis-ai-controller/2", "token": "lapis_wrong", "application": "x" }),
    );
    assert_eq!(code(&r), "protocol_unsupported");
    assert_eq!(r["error"]["code"], -32001);
    // Wrong protocol with a malformed rest still says protocol_unsupported.
    let r = raw.call("hello", json!({ "protocol": "other/9", "tokn": 1 }));
    assert_eq!(code(&r), "protocol_unsupported");
    // Right protocol, wrong token.
    let r = raw.call(
        "hello",
        json!({ "protocol": PROTOCOL, "token": format!("{OWNER}0"), "application": "x" }),
    );
    assert_eq!(code(&r), "unauthenticated");
    // Right protocol, unknown bearer.
    let r = raw.call(
        "hello",
        json!({ "protocol": PROTOCOL, "bearer": "lapis_s_0000" }),
    );
    assert_eq!(code(&r), "unauthenticated");
    // Both credentials, or none.
    let r = raw.call(
        "hello",
        json!({ "protocol": PROTOCOL, "token": OWNER, "bearer": "x", "application": "x" }),
    );
    assert_eq!(code(&r), "invalid_request");
    let r = raw.call("hello", json!({ "protocol": PROTOCOL }));
    assert_eq!(code(&r), "invalid_request");
    // Still not authenticated after all that.
    assert_eq!(code(&raw.call("status", json!({}))), "unauthenticated");
    server.finish(&[&raw], &[]);
}

#[test]
fn bearer_is_returned_once_and_revocation_fails_closed() {
    let server = Server::start();
    let (mut a, first) = server.hello(OWNER, "app-r");
    let bearer = first["result"]["bearer"]
        .as_str()
        .expect("new session returns a bearer")
        .to_owned();
    let session = first["result"]["session"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(first["result"]["session"]["principal"], "owner");
    assert_eq!(first["result"]["session"]["application"], "app-r");
    // The token again: same session, no bearer.
    let (_b, again) = server.hello(OWNER, "app-r");
    assert_eq!(again["result"]["session"]["id"], session.as_str());
    assert!(again["result"].get("bearer").is_none(), "{again}");
    // The bearer resumes it.
    let mut c = server.raw();
    let r = c.call("hello", json!({ "protocol": PROTOCOL, "bearer": bearer }));
    assert_eq!(ok(&r)["session"]["id"], session.as_str());
    assert!(ok(&r).get("bearer").is_none());
    // Revoke it from connection a.
    let r = a.call("sessions.revoke", json!({}));
    assert_eq!(ok(&r)["revoked"], session.as_str());
    // The revoked bearer fails closed on a new connection …
    let mut d = server.raw();
    let r = d.call("hello", json!({ "protocol": PROTOCOL, "bearer": bearer }));
    assert_eq!(code(&r), "unauthenticated");
    // … and on a connection already using the session.
    assert_eq!(code(&c.call("status", json!({}))), "unauthenticated");
    // The token issues a new session with a new bearer.
    let (_e, fresh) = server.hello(OWNER, "app-r");
    assert_ne!(fresh["result"]["session"]["id"], session.as_str());
    let new_bearer = fresh["result"]["bearer"].as_str().unwrap().to_owned();
    // Another principal cannot revoke the owner's session.
    let (mut g, guest) = server.hello(GUEST, "app-r");
    let guest_bearer = guest["result"]["bearer"].as_str().unwrap().to_owned();
    let r = g.call(
        "sessions.revoke",
        json!({ "sessionId": fresh["result"]["session"]["id"] }),
    );
    assert_eq!(code(&r), "not_found");
    server.finish(&[&a, &c, &d, &g], &[bearer, new_bearer, guest_bearer]);
}

#[test]
fn missing_scope_is_forbidden() {
    let server = Server::start();
    let (mut r, hello) = server.hello(READER, "ro");
    assert_eq!(hello["result"]["session"]["scopes"], json!(["status:read"]));
    ok(&r.call("status", json!({})));
    for (method, params) in [
        ("threads.list", json!({})),
        ("workspaces.add", json!({ "id": "x", "path": "/tmp" })),
        ("journal.replay", json!({})),
        (
            "turns.resolve",
            json!({ "turnId": "turn_x", "as": "failed", "confirmStopped": true }),
        ),
    ] {
        assert_eq!(code(&r.call(method, params)), "forbidden", "{method}");
    }
    let bearer = hello["result"]["bearer"].as_str().unwrap().to_owned();
    server.finish(&[&r], &[bearer]);
}

fn create_thread(raw: &mut Raw) -> String {
    let r = raw.call(
        "threads.create",
        json!({ "workspaceId": "proj", "provider": "echo" }),
    );
    ok(&r)["thread"]["id"].as_str().unwrap().to_owned()
}

#[test]
fn threads_are_isolated_by_principal_and_application() {
    let server = Server::start();
    let (mut mine, h1) = server.hello(OWNER, "app-a");
    let thread = create_thread(&mut mine);
    let r = mine.call(
        "turns.submit",
        json!({ "threadId": thread, "commandId": "c1", "prompt": "secret prompt text" }),
    );
    let turn = ok(&r)["turn"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        ok(&mine.call("threads.get", json!({ "threadId": thread })))["thread"]["application"],
        "app-a"
    );
    // Another application has a token of its own (the owner's token sees
    // every application of its principal: `tokens.rs`).
    let (mut other_app, h2) = server.hello(NARROW, "other-app");
    let (mut other_principal, h3) = server.hello(GUEST, "app-a");
    for intruder in [&mut other_app, &mut other_principal] {
        for (method, params) in [
            ("threads.get", json!({ "threadId": thread })),
            (
                "threads.configure",
                json!({ "threadId": thread, "expectedVersion": 1, "approval": "allow-all" }),
            ),
            ("journal.replay", json!({ "threadId": thread })),
            ("journal.subscribe", json!({ "threadId": thread })),
            (
                "turns.submit",
                json!({ "threadId": thread, "commandId": "c2", "prompt": "x" }),
            ),
            ("turns.get", json!({ "turnId": turn })),
            ("turns.list", json!({ "threadId": thread })),
            ("turns.cancel", json!({ "turnId": turn })),
            (
                "turns.resolve",
                json!({ "turnId": turn, "as": "failed", "confirmStopped": true }),
            ),
        ] {
            assert_eq!(
                code(&intruder.call(method, params)),
                "not_found",
                "{method}"
            );
        }
        // Listings and owner-wide replay do not show it either.
        let list = intruder.call("threads.list", json!({}));
        assert_eq!(ok(&list)["threads"], json!([]));
        let turns = intruder.call("turns.list", json!({}));
        assert_eq!(ok(&turns)["turns"], json!([]));
        let replay = intruder.call("journal.replay", json!({}));
        assert_eq!(ok(&replay)["events"], json!([]));
    }
    let bearers: Vec<String> = [h1, h2, h3]
        .iter()
        .map(|h| h["result"]["bearer"].as_str().unwrap().to_owned())
        .collect();
    // The prompt is a payload: never in the server log.
    assert!(!server.log_text().contains("secret prompt text"));
    server.finish(&[&mine, &other_app, &other_principal], &bearers);
}

#[test]
fn resolve_needs_confirmation_and_a_fenced_turn() {
    let server = Server::start();
    let (mut raw, h) = server.hello(OWNER, "ops");
    let thread = create_thread(&mut raw);
    let r = raw.call(
        "turns.submit",
        json!({ "threadId": thread, "commandId": "r1", "prompt": "p" }),
    );
    let turn = ok(&r)["turn"]["id"].as_str().unwrap().to_owned();
    let r = raw.call("turns.resolve", json!({ "turnId": turn, "as": "failed" }));
    assert_eq!(code(&r), "invalid_request");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("confirmStopped")
    );
    let r = raw.call(
        "turns.resolve",
        json!({ "turnId": turn, "as": "failed", "confirmStopped": false }),
    );
    assert_eq!(code(&r), "invalid_request");
    let r = raw.call(
        "turns.resolve",
        json!({ "turnId": turn, "as": "maybe", "confirmStopped": true }),
    );
    assert_eq!(code(&r), "invalid_request");
    // Confirmed, but the turn is not fenced.
    let r = raw.call(
        "turns.resolve",
        json!({ "turnId": turn, "as": "failed", "confirmStopped": true }),
    );
    assert_eq!(code(&r), "conflict", "{r}");
    let r = raw.call(
        "turns.resolve",
        json!({ "turnId": "turn_nope", "as": "failed", "confirmStopped": true }),
    );
    assert_eq!(code(&r), "not_found");
    let bearer = h["result"]["bearer"].as_str().unwrap().to_owned();
    server.finish(&[&raw], &[bearer]);
}
