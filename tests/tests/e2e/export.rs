//! Issue 44 item 5 through the real binary: `threads export ID -o FILE`
//! writes a bundle (0600, never over an existing file without `--force`)
//! that `threads export --verify FILE` accepts with no controller; a byte
//! flipped is refused naming its range; a deleted or unknown thread is a
//! clear error; the bundle holds the thread's content and no token.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::acp_serve::fixture;
use crate::serve_support::{OWNER, Server};
use lapis_e2e::wait::{settled, wait_turn};

const MARKER: &str = "MARKER-e2e-export-3b9d";

#[test]
fn a_thread_exports_verifies_offline_and_an_edited_byte_is_refused() {
    let mut server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "2"]) }));
    let mut client = server.client("export-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let t = client
        .turns_submit(&thread.id, "t-1", &format!("say {MARKER}"))
        .unwrap();
    wait_turn(&mut client, &t.id, settled);
    let file = server.ctx.home().join("thread.bundle");
    let path = file.to_str().unwrap();

    // Exported while serve runs, by a prefix of the id.
    let prefix = &thread.id[..thread.id.len() - 4];
    let exported = server
        .ctx
        .run(["threads", "export", prefix, "-o", path, "--json"])
        .success()
        .json();
    assert_eq!(exported["thread"], thread.id.as_str(), "{exported}");
    let events = exported["events"].as_u64().unwrap();
    assert!(events >= 4, "{exported}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let bundle = std::fs::read(&file).unwrap();
    let text = String::from_utf8(bundle.clone()).unwrap();
    assert!(text.contains(MARKER), "the prompt is retained content");
    assert!(!text.contains(OWNER) && !text.contains("lapis_"), "{text}");

    // Never over an existing file without --force.
    let again = server
        .ctx
        .run(["threads", "export", &thread.id, "-o", path, "--json"]);
    again.expect_code(2);
    assert_eq!(again.json()["error"]["code"], "file_exists");
    assert_eq!(std::fs::read(&file).unwrap(), bundle);
    server
        .ctx
        .run(["threads", "export", &thread.id, "-o", path, "--force"])
        .success();

    // Verified with the controller stopped (it is not needed).
    server.stop();
    let ok = server.ctx.run(["threads", "export", "--verify", path]);
    ok.success();
    assert!(
        ok.stdout.starts_with("bundle verified: thread "),
        "{}",
        ok.stdout
    );
    assert_eq!(ok.stdout.lines().count(), 1, "{}", ok.stdout);
    let ok = server
        .ctx
        .run(["threads", "export", "--verify", path, "--json"])
        .success()
        .json();
    assert_eq!(ok["verified"], true);
    assert_eq!(ok["events"], events);
    assert_eq!(ok["format"], "lapis-thread-bundle/1");

    // One byte flipped inside the marker's line: refused, naming its range.
    let at = text.find(MARKER).unwrap();
    let mut edited = bundle.clone();
    edited[at] ^= 0x01;
    let bad = server.ctx.home().join("edited.bundle");
    std::fs::write(&bad, &edited).unwrap();
    let refused = server.ctx.run([
        "threads",
        "export",
        "--verify",
        bad.to_str().unwrap(),
        "--json",
    ]);
    refused.expect_code(2);
    let err = refused.json();
    assert_eq!(err["error"]["code"], "bundle_tampered", "{err}");
    let (start, end) = (
        err["error"]["details"]["start"].as_u64().unwrap() as usize,
        err["error"]["details"]["end"].as_u64().unwrap() as usize,
    );
    assert!(start <= at && at < end, "{err}");
    assert_eq!(
        text[..start].matches('\n').count(),
        text[..at].matches('\n').count()
    );
    let plain = server
        .ctx
        .run(["threads", "export", "--verify", bad.to_str().unwrap()]);
    plain.expect_code(2);
    assert!(
        plain.stderr.contains(&format!("bytes {start}..{end}")),
        "{}",
        plain.stderr
    );
    server.spawn();
    server.finish(&[], &[]);
}

#[test]
fn a_deleted_or_unknown_thread_is_a_clear_error() {
    let server = Server::start_full(json!({}), json!({ "rich": fixture(&["--chunks", "1"]) }));
    let mut client = server.client("export-e2e");
    let thread = client
        .threads_create("proj", "rich", lapis_protocol::ApprovalPolicy::Ask, None)
        .unwrap();
    let t = client.turns_submit(&thread.id, "t-1", "go").unwrap();
    wait_turn(&mut client, &t.id, settled);
    client.threads_delete(&thread.id).unwrap();
    let file = server.ctx.home().join("gone.bundle");
    let path = file.to_str().unwrap();
    let deleted = server
        .ctx
        .run(["threads", "export", &thread.id, "-o", path, "--json"]);
    deleted.expect_code(2);
    assert_eq!(deleted.json()["error"]["code"], "thread_deleted");
    let unknown = server
        .ctx
        .run(["threads", "export", "thr_nope", "-o", path, "--json"]);
    unknown.expect_code(2);
    assert_eq!(unknown.json()["error"]["code"], "not_found");
    assert!(!file.exists(), "nothing is written for a refused export");
    let missing = server
        .ctx
        .run(["threads", "export", "--verify", path, "--json"]);
    missing.expect_code(2);
    assert_eq!(missing.json()["error"]["code"], "not_found");
    server.finish(&[], &[]);
}
