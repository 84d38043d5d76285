//! Remembered sessions are bounded per token (issue 43 item 4), through
//! the real socket: with `server.maxSessionsPerToken` 5, 40 `hello`s with
//! fresh application names leave the token 5 rows; the evicted session's
//! open connection fails its next request, its journal subscription ends
//! at once, and its bearer fails closed.

use serde_json::{Value, json};

use crate::serve_support::{GUEST, Server, code};

const PROTOCOL: &str = "lapis-ai-controller/1";

/// Rows of `auth_sessions` whose token is `token`.
fn rows_of(server: &Server, token: &str) -> i64 {
    let db = server.home.join(lapis_service::DB_FILE);
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row(
        "SELECT count(*) FROM auth_sessions WHERE credential LIKE ?1 || ':%'",
        [token],
        |r| r.get(0),
    )
    .unwrap()
}

fn bearer_of(hello: &Value) -> String {
    hello["result"]["bearer"]
        .as_str()
        .expect("a new session returns its bearer")
        .to_owned()
}

#[test]
fn fresh_applications_past_the_bound_evict_the_oldest_session() {
    let server = Server::start_with(json!({ "maxSessionsPerToken": 5 }));
    let (mut first, hello) = server.hello(GUEST, "app-0");
    let first_bearer = bearer_of(&hello);
    let r = first.call("journal.subscribe", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    let mut bearers = vec![first_bearer.clone()];
    for n in 1..40 {
        let (_raw, hello) = server.hello(GUEST, &format!("app-{n}"));
        bearers.push(bearer_of(&hello));
        assert!(rows_of(&server, "guest") <= 5, "after hello {n}");
    }
    assert_eq!(rows_of(&server, "guest"), 5);
    // The evicted session's subscription ends at once …
    let ended = loop {
        let frame = first.recv().expect("journal.ended before the close");
        if frame["method"] == "journal.ended" {
            break frame;
        }
    };
    assert!(ended["params"].is_object(), "{ended}");
    // … its connection's next request fails closed …
    assert_eq!(code(&first.call("status", json!({}))), "unauthenticated");
    // … and so does its bearer, while the newest resume.
    let mut again = server.raw();
    let r = again.call(
        "hello",
        json!({ "protocol": PROTOCOL, "bearer": first_bearer }),
    );
    assert_eq!(code(&r), "unauthenticated");
    let newest = bearers.last().unwrap().clone();
    let mut resumed = server.raw();
    let r = resumed.call("hello", json!({ "protocol": PROTOCOL, "bearer": newest }));
    assert!(r.get("result").is_some(), "{r}");
    // Another token's sessions are its own: the owner's CLI still works.
    server.ctx.run(["status"]).success();
    server.finish(&[&first, &again, &resumed], &bearers);
}
